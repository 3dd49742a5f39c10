/**
 * `agent select <run_id>`: choose one of a run's checkpoints on a validation split, then look at
 * the test split once. Every complete checkpoint (its CheckpointSaved events, less those the
 * sidecar no longer keeps) is scored in ONE Evaluate (with the base) on validation rows: the task
 * file's train-split rows whose prompt the run did not train on (verdict/selection.ts
 * trainedPrompts: the request's dataset and limit, less the held-out tail), never test. A rule
 * picks one (default: the last unless an earlier one is better beyond its decision interval;
 * `--rule best`: the highest mean); then one Evaluate scores base + the chosen checkpoint on test,
 * counted in test-evals.jsonl. runs/<run_id>/selection.json holds the curve, the rule, the choice
 * and the test result; `agent report` shows it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { RunEventSchema, type Run, type RunEvent } from "../gen/grpo/trainer/v1/trainer_service_pb.js";
import { ADAPTER_VARIANT, checkSettings, evaluateRequest, progressPrinter, runEvaluate } from "../agent/eval/evaluate.js";
import { regrade, scoresOf, summarizeVariant } from "../agent/eval/grading.js";
import { loadTaskSet, type TaskSet } from "../agent/eval/task-set.js";
import { TASKS_RELATIVE_PATH, loadTaskFile } from "../agent/eval/tasks.js";
import { recordTestEval } from "../agent/eval/test-evals.js";
import { readLocalRun } from "../agent/train/run.js";
import { buildEvalLog } from "../agent/verdict/eval-log.js";
import { pp } from "../agent/verdict/milestone.js";
import { SELECTION_SVG, selectionSvg } from "../agent/report/selection-curve.js";
import { RULES, RULE_TEXT, SELECTION_FILE, SELECTION_SCHEMA, chooseCheckpoint, readSelection, trainedPrompts, validationRows, type SelectionRecord, type SelectionRule } from "../agent/verdict/selection.js";
import { REPO_ROOT, UserError, displayPath, runDir, writeFileAtomic } from "../agent/workspace.js";
import { RunState, SidecarError, type SidecarClient } from "../sidecar/client.js";
import { settingsForRun } from "./eval.js";
import { EVAL_FLAGS, GLOBAL_FLAGS, evalTargetFromFlags, numberFlag, usageError, type CommandHandler, type CommandHelp } from "./flags.js";

export const help: CommandHelp = {
  summary: "Choose a run's checkpoint on a validation split (train rows it did not train on), then evaluate only that one on test -> selection.json.",
  usage: "agent select <run_id> [--rule last-unless-better|best] [--val-limit N] [--force] [--tasks PATH] [--limit N] [--evals-dir DIR]",
  flags: [
    ["--rule R", "last-unless-better (default: the last checkpoint unless an earlier one is better beyond its CI) or best (highest validation mean)"],
    ["--val-limit N", "only the first N validation rows (default all)"],
    ["--force", "replace an earlier selection.json (a second selection is a second look at test, counted)"],
    ["--tasks PATH", `task file (docs/tasks.md; default ${TASKS_RELATIVE_PATH}); validation comes from its train split, test from its test split`],
    ["--limit N", "only the first N test tasks (default all)"],
    ["--base-model M", "must be the run's own base (default: it)"],
    ["--evals-dir DIR", "where runs/<run_id>/ lives (default agent-evals/)"],
  ],
  notes: "The test split is evaluated once, after the choice; each such eval is counted in runs/<run_id>/test-evals.jsonl.",
  examples: ["agent select run-20261201-101500-ab12cd", "agent select run-20261201-101500-ab12cd --rule best --limit 200"],
};

const variantOf = (step: number) => `step-${step}`;

/** The run's events: its local events.jsonl, else the sidecar's log replayed. */
async function runEvents(client: SidecarClient, evalsDir: string, runId: string): Promise<RunEvent[]> {
  const path = join(runDir(evalsDir, runId), "events.jsonl");
  if (existsSync(path)) {
    return readFileSync(path, "utf8").split("\n").filter((l) => l.trim() !== "").map((l) => fromJson(RunEventSchema, JSON.parse(l) as JsonValue, { ignoreUnknownFields: true }));
  }
  const out: RunEvent[] = [];
  for await (const ev of client.watchRun(runId)) out.push(ev);
  return out;
}

/** The steps of the run's CheckpointSaved events, ascending, once each. */
export function checkpointSteps(events: ReadonlyArray<RunEvent>): number[] {
  return [...new Set(events.flatMap((e) => (e.kind.case === "checkpoint" ? [Number(e.kind.value.step)] : [])))].sort((a, b) => a - b);
}

/** The validation rows for the run, or a one-line refusal naming what to change. */
export function validationSet(run: Run, tasksPath: string, limit: number): { set: TaskSet; excluded: string } {
  const request = run.request;
  if (!request) throw new UserError(`agent select: run ${run.runId} has no request on record: cannot tell which rows it trained on`);
  const train = loadTaskSet(tasksPath, "train");
  let jsonlRows: Array<{ prompt: string; split?: string }> | null = null;
  if (request.dataset?.source.case === "jsonlPath") {
    const path = resolve(process.env.PY_TRAINER_DATA_ROOT ?? REPO_ROOT, request.dataset.source.value);
    if (!existsSync(path)) throw new UserError(`agent select: run ${run.runId} trained on dataset.jsonl_path ${request.dataset.source.value}, not readable here at ${path} (set PY_TRAINER_DATA_ROOT to the sidecar's data root): cannot tell which rows it trained on`);
    jsonlRows = loadTaskFile(path).rows;
  }
  const { trained, heldOut } = trainedPrompts(request, jsonlRows);
  let rows = validationRows(train.rows, trained);
  if (rows.length === 0) {
    throw new UserError(
      `agent select: no validation rows left: run ${run.runId} trained on all ${train.rows.length} train-split rows of ${train.path}; ` +
        "train with a dataset.limit below the train split's size (or more held_out.num_prompts), or pass --tasks with more train rows",
    );
  }
  if (limit > 0) rows = rows.slice(0, limit);
  const excluded = `the ${trained.size} train-split prompts the run trained on are excluded${heldOut ? `; its ${heldOut} held-out prompts, never trained on, may be among these` : ""}`;
  return { set: { ...train, rows, limit }, excluded };
}

/** The steps to choose among: the checkpoints, and a SUCCEEDED run's final adapter when it came
 *  after the last checkpoint (max_steps not a multiple of save_steps); `finalStep` is its step. */
export function candidateSteps(checkpoints: ReadonlyArray<number>, run: Pick<Run, "state" | "result">): { steps: number[]; finalStep: number | null } {
  const done = Number(run.result?.stepsCompleted ?? 0n);
  const last = checkpoints.length ? Math.max(...checkpoints) : 0;
  const finalStep = run.state === RunState.SUCCEEDED && done > last ? done : null;
  return { steps: finalStep === null ? [...checkpoints] : [...checkpoints, finalStep], finalStep };
}

/** "its complete checkpoints are at steps 2, 3" from the sidecar's NOT_FOUND, else null. */
function keptSteps(err: unknown): number[] | null {
  if (!(err instanceof SidecarError) || err.code !== Code.NotFound) return null;
  const m = /complete checkpoints are at steps ([\d, ]+)/.exec(err.message);
  if (m) return m[1].split(",").map((s) => Number(s.trim()));
  return /has no complete checkpoint\b/.test(err.message) && !/at step \d+ is damaged/.test(err.message) ? [] : null;
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { ...EVAL_FLAGS, rule: { type: "string" }, "val-limit": { type: "string" }, force: { type: "boolean" }, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  if (positionals.length !== 1) throw usageError("select", help, positionals.length ? "one run id, please" : "which run? give its id");
  const runId = positionals[0];
  const rule = (values.rule ?? "last-unless-better") as SelectionRule;
  if (!RULES.includes(rule)) throw usageError("select", help, `--rule ${values.rule}: one of ${RULES.join(", ")}`);
  const valLimit = values["val-limit"] === undefined ? 0 : numberFlag("--val-limit", values["val-limit"], { min: 1, integer: true });
  const target = evalTargetFromFlags(values);
  const previous = readSelection(target.evalsDir, runId);
  if (previous && !values.force) {
    throw new UserError(`agent select: ${displayPath(join(runDir(target.evalsDir, runId), SELECTION_FILE))} already holds a selection (step ${previous.chosenStep}, ${previous.date.slice(0, 10)}); selecting again looks at test again: add --force to replace it`);
  }
  const settings = await settingsForRun(client, runId, target);
  checkSettings(settings);
  const run = readLocalRun(target.evalsDir, runId) ?? (await client.getRun(runId));
  const { set: val, excluded } = validationSet(run, target.tasksPath, valLimit);
  const saved = checkpointSteps(await runEvents(client, target.evalsDir, runId));
  if (saved.length === 0) throw new UserError(`agent select: run ${runId} saved no checkpoint (set grpo.save_steps below grpo.max_steps to save some)`);
  let { steps, finalStep } = candidateSteps(saved, run);
  const ref = (name: string, s: number) => ({ name, source: { case: "runId" as const, value: runId }, ...(s === finalStep ? {} : { checkpointStep: BigInt(s) }) });

  console.log(`rule: ${rule}: ${RULE_TEXT[rule]}`);
  console.log(`validation: ${val.rows.length} train-split rows of ${val.path} (${excluded}); never the test split`);
  const valSettings = { ...settings, split: "train" as const, limit: valLimit };
  let result;
  for (;;) {
    const req = evaluateRequest(valSettings, val);
    req.adapters = steps.map((s) => ref(variantOf(s), s));
    console.log(`evaluating base and ${steps.length} checkpoints (steps ${steps.join(", ")}${finalStep === null ? "" : `; ${finalStep}: the final adapter`}) on validation, in one Evaluate`);
    try {
      result = await runEvaluate(client, req, progressPrinter("select"));
      break;
    } catch (err) {
      const kept = keptSteps(err);
      if (kept === null) throw err;
      const left = steps.filter((s) => s === finalStep || kept.includes(s));
      if (left.length === 0) throw new UserError(`agent select: run ${runId} keeps none of its checkpoints (${steps.join(", ")}) on the sidecar`);
      console.log(`checkpoint(s) at step ${steps.filter((s) => !left.includes(s)).join(", ")} no longer on the sidecar (it keeps the newest ones): selecting among ${left.join(", ")}`);
      steps = left;
    }
  }
  regrade(result.variants, val.rows, settings.graders);
  const summaries = result.variants.map((v) => summarizeVariant(v, settings.graders));
  const points = steps.map((s) => {
    const v = summaries.find((x) => x.name === variantOf(s))!;
    return { step: s, scores: scoresOf(v.perTask), accuracy: v.accuracy };
  });
  const choice = chooseCheckpoint(rule, points);
  for (const p of choice.curve) {
    const a = p.accuracy;
    const vs = p.vsLast?.decision ? `; - last ${pp(p.vsLast.meanDiff ?? 0)} (95% CI ${pp(p.vsLast.decision.lower)} to ${pp(p.vsLast.decision.upper)})` : "";
    console.log(`  step ${p.step}: validation ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-"}${vs}${p.step === choice.chosenStep ? "  <- chosen" : ""}`);
  }
  console.log(`chosen: step ${choice.chosenStep} (${choice.why})`);

  // test, once, after the choice
  const testSet = loadTaskSet(target.tasksPath, "test", settings.limit);
  const treq = evaluateRequest(settings, testSet);
  treq.adapters = [ref(ADAPTER_VARIANT, choice.chosenStep)];
  console.log(`evaluating base and step ${choice.chosenStep} on ${testSet.rows.length} test tasks of ${testSet.path} (the only look at test)`);
  const tres = await runEvaluate(client, treq, progressPrinter("select"));
  const log = buildEvalLog(runId, settings, testSet, tres);
  recordTestEval(target.evalsDir, { command: "select", runId, step: choice.chosenStep, tasks: testSet.rows.length, taskSet: testSet.path });
  const acc = (name: string) => log.variants.find((v) => v.name === name)?.accuracy ?? null;
  const baseVal = summaries.find((v) => v.name === "base")?.accuracy ?? null;
  const rec: SelectionRecord = {
    schema: SELECTION_SCHEMA,
    runId,
    date: new Date().toISOString(),
    rule,
    ruleText: RULE_TEXT[rule],
    validation: { taskSet: val.path, split: "train", n: val.rows.length, excluded, base: baseVal },
    curve: choice.curve,
    chosenStep: choice.chosenStep,
    why: choice.why,
    test: { taskSet: testSet.path, n: testSet.rows.length, base: acc("base"), chosen: acc(ADAPTER_VARIANT), meanDiff: log.comparison?.paired?.meanDiff ?? null, decision: log.comparison?.decision ?? null },
  };
  const path = join(runDir(target.evalsDir, runId), SELECTION_FILE);
  writeFileAtomic(join(runDir(target.evalsDir, runId), SELECTION_SVG), selectionSvg(rec));
  writeFileAtomic(path, JSON.stringify(rec, null, 2) + "\n");
  const t = rec.test;
  console.log(`test: step ${choice.chosenStep} - base ${t.meanDiff === null ? "-" : pp(t.meanDiff)}${t.decision ? ` (95% CI ${pp(t.decision.lower)} to ${pp(t.decision.upper)}, ${t.decision.test})` : ""} on ${t.n} tasks; untouched by the choice (test evaluated once, after it)`);
  console.log(`wrote ${displayPath(path)}`);
  return 0;
};
