/**
 * Checkpoint selection, the logic of `agent select <run_id>` (commands/select.ts parses its
 * flags): choose one of a run's checkpoints on a validation split, then look at
 * the test split once. Every complete checkpoint (its CheckpointSaved events, less those the
 * sidecar no longer keeps) is scored in ONE Evaluate (with the base) on validation rows: the task
 * file's train-split rows whose prompt the run did not train on (verdict/checkpoint-selection-rule.ts
 * trainedPrompts: the request's dataset and limit, less the held-out tail), never test. A rule
 * picks one (default: the last unless an earlier one is better by its Holm-adjusted test;
 * `--rule best`: the highest mean); then one Evaluate scores base + the chosen checkpoint on test,
 * counted in test-evals.jsonl. runs/<run_id>/selection.json holds the curve, the rule, the choice
 * and the test result; `agent report` shows it.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";

import { RunEventSchema, type Run, type RunEvent } from "../../gen/grpo/trainer/v1/trainer_service_pb.js";
import { RunState, SidecarError, type SidecarClient } from "../../sidecar/client.js";
import { ADAPTER_VARIANT } from "../core/base-vs-adapter.js";
import type { EvalSettings } from "../core/eval-log.js";
import { buildEvalLog } from "../eval/build-eval-log.js";
import { checkSettings, evaluateRequest, progressPrinter, runEvaluate, settingsForTaskSet } from "../eval/evaluate.js";
import { regrade, scoresOf, summarizeVariant } from "../eval/grading.js";
import type { TaskSet } from "../eval/task-set.js";
import { loadEvalTaskSet } from "../eval/agent-task-set.js";
import { loadTaskFile } from "../eval/tasks.js";
import { readTestEvals, recordTestEval, testLookWords } from "../eval/test-evals.js";
import { SELECTION_SVG, selectionSvg } from "../report/checkpoint-selection-curve.js";
import { readLocalRun } from "../train/run.js";
import { pp } from "../verdict/milestone.js";
import { compareSplits } from "../verdict/verdict.js";
import {
  RULE_TEXT,
  SELECTION_FILE,
  SELECTION_SCHEMA,
  chooseCheckpoint,
  trainedPrompts,
  validationRows,
  type SelectionRecord,
  type SelectionRule,
} from "../verdict/checkpoint-selection-rule.js";
import { UserError, displayPath, runDataRoot, runDir, writeFileAtomic } from "../workspace.js";

const variantOf = (step: number) => `step-${step}`;

/** The run's events: its local events.jsonl, else the sidecar's log replayed. */
async function runEvents(client: SidecarClient, evalsDir: string, runId: string): Promise<RunEvent[]> {
  const path = join(runDir(evalsDir, runId), "events.jsonl");
  if (existsSync(path)) {
    return readFileSync(path, "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => fromJson(RunEventSchema, JSON.parse(l) as JsonValue, { ignoreUnknownFields: true }));
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
export function validationSet(run: Run, train: TaskSet, limit: number, evalsDir: string): { set: TaskSet; excluded: string } {
  const request = run.request;
  if (!request) throw new UserError(`agent select: run ${run.runId} has no request on record: cannot tell which rows it trained on`);
  let jsonlRows: Array<{ prompt: string; split?: string }> | null = null;
  if (request.dataset?.source.case === "jsonlPath") {
    const path = resolve(runDataRoot(run.runId, evalsDir), request.dataset.source.value);
    if (!existsSync(path))
      throw new UserError(
        `agent select: run ${run.runId} trained on dataset.jsonl_path ${request.dataset.source.value}, not readable here at ${path} (its summary.json names no data root here; set PY_TRAINER_DATA_ROOT to the sidecar's data root): cannot tell which rows it trained on`,
      );
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

/** What `agent select` asks for: the rule, the validation row limit, the run's eval settings and the task file. */
export interface SelectionOptions {
  rule: SelectionRule;
  /** only the first N validation rows (0 = all) */
  valLimit: number;
  settings: EvalSettings;
  tasksPath: string;
  /** where each progress line goes */
  say?: (line: string) => void;
}

/** Score every kept checkpoint on validation in one Evaluate, choose by the rule, evaluate the
 *  choice once on test (counted in test-evals.jsonl), write selection.json and its curve. */
export async function selectCheckpoint(
  client: SidecarClient,
  evalsDir: string,
  runId: string,
  opts: SelectionOptions,
): Promise<{ record: SelectionRecord; path: string }> {
  const { rule, valLimit, tasksPath, say = console.log } = opts;
  checkSettings(opts.settings);
  const run = readLocalRun(evalsDir, runId) ?? (await client.getRun(runId));
  const { set: val, excluded } = validationSet(run, await loadEvalTaskSet(tasksPath, "train"), valLimit, evalsDir);
  const settings = settingsForTaskSet(opts.settings, val);
  const saved = checkpointSteps(await runEvents(client, evalsDir, runId));
  if (saved.length === 0) throw new UserError(`agent select: run ${runId} saved no checkpoint (set grpo.save_steps below grpo.max_steps to save some)`);
  let { steps, finalStep } = candidateSteps(saved, run);
  const ref = (name: string, s: number) => ({
    name,
    source: { case: "runId" as const, value: runId },
    ...(s === finalStep ? {} : { checkpointStep: BigInt(s) }),
  });

  say(`rule: ${rule}: ${RULE_TEXT[rule]}`);
  say(`validation: ${val.rows.length} train-split rows of ${val.path} (${excluded}); never the test split`);
  const valSettings = { ...settings, split: "train" as const, limit: valLimit };
  let result;
  for (;;) {
    const req = evaluateRequest(valSettings, val);
    req.adapters = steps.map((s) => ref(variantOf(s), s));
    say(
      `evaluating base and ${steps.length} checkpoints (steps ${steps.join(", ")}${finalStep === null ? "" : `; ${finalStep}: the final adapter`}) on validation, in one Evaluate`,
    );
    try {
      result = await runEvaluate(client, req, progressPrinter("select"), val.agent);
      break;
    } catch (err) {
      const kept = keptSteps(err);
      if (kept === null) throw err;
      const left = steps.filter((s) => s === finalStep || kept.includes(s));
      if (left.length === 0) throw new UserError(`agent select: run ${runId} keeps none of its checkpoints (${steps.join(", ")}) on the sidecar`);
      say(
        `checkpoint(s) at step ${steps.filter((s) => !left.includes(s)).join(", ")} no longer on the sidecar (it keeps the newest ones): selecting among ${left.join(", ")}`,
      );
      steps = left;
    }
  }
  if (!val.agent) regrade(result.variants, val.rows, settings.graders); // an agent task's scores are its scorers' own
  const summaries = result.variants.map((v) => summarizeVariant(v, settings.graders));
  const points = steps.map((s) => {
    const v = summaries.find((x) => x.name === variantOf(s))!;
    return { step: s, scores: scoresOf(v.perTask), accuracy: v.accuracy };
  });
  const choice = chooseCheckpoint(rule, points);
  for (const p of choice.curve) {
    const a = p.accuracy;
    const vs = p.vsLast?.decision ? `; - last ${pp(p.vsLast.meanDiff ?? 0)} (95% CI ${pp(p.vsLast.decision.lower)} to ${pp(p.vsLast.decision.upper)})` : "";
    say(
      `  step ${p.step}: validation ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-"}${vs}${p.step === choice.chosenStep ? "  <- chosen" : ""}`,
    );
  }
  say(`chosen: step ${choice.chosenStep} (${choice.why})`);

  // test, once, after the choice
  const testSet = await loadEvalTaskSet(tasksPath, "test", settings.limit);
  const treq = evaluateRequest(settings, testSet);
  treq.adapters = [ref(ADAPTER_VARIANT, choice.chosenStep)];
  say(`evaluating base and step ${choice.chosenStep} on ${testSet.rows.length} test tasks of ${testSet.path} ${testLookWords(readTestEvals(evalsDir, runId))}`);
  const tres = await runEvaluate(client, treq, progressPrinter("select"), testSet.agent);
  const log = buildEvalLog(runId, settings, testSet, tres);
  recordTestEval(evalsDir, { command: "select", runId, step: choice.chosenStep, tasks: testSet.rows.length, taskSet: testSet.path });
  const acc = (name: string) => log.variants.find((v) => v.name === name)?.accuracy ?? null;
  const test = compareSplits(log)[0].comparison;
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
    test: {
      taskSet: testSet.path,
      n: testSet.rows.length,
      base: acc("base"),
      chosen: acc(ADAPTER_VARIANT),
      meanDiff: test?.paired?.meanDiff ?? null,
      decision: test?.decision ?? null,
    },
  };
  const path = join(runDir(evalsDir, runId), SELECTION_FILE);
  writeFileAtomic(join(runDir(evalsDir, runId), SELECTION_SVG), selectionSvg(rec));
  writeFileAtomic(path, JSON.stringify(rec, null, 2) + "\n");
  const t = rec.test;
  say(
    `test: step ${choice.chosenStep} - base ${t.meanDiff === null ? "-" : pp(t.meanDiff)}${t.decision ? ` (95% CI ${pp(t.decision.lower)} to ${pp(t.decision.upper)}, ${t.decision.test})` : ""} on ${t.n} tasks; untouched by the choice (test evaluated once, after it)`,
  );
  say(`wrote ${displayPath(path)}`);
  return { record: rec, path };
}
