/**
 * An adapter evaluated against its base (`agent eval`, and `agent demo` / `agent sweep` after each
 * run): a run's adapter on the run's own task file and base (run-task-file.ts targetForRun), or a
 * PEFT folder under the sidecar's data root; the eval log written (a partial one kept apart) and
 * its summary printed against the current baseline.json, with the verdict's decision interval.
 */
import { basename, isAbsolute, relative, resolve } from "node:path";

import { ADAPTER_VARIANT } from "../agent/core/base-vs-adapter.js";
import { evalLogDestination, writeEvalLog, type EvalLog } from "../agent/core/eval-log.js";
import { readBaseline } from "../agent/eval/baseline-record.js";
import { buildEvalLog, evaluateRun } from "../agent/eval/build-eval-log.js";
import { checkSettings, evaluateRequest, primaryGrader, progressPrinter, restrictResult, runEvaluate, settingsForTaskSet } from "../agent/eval/evaluate.js";
import { heldOutTemplateSetFor } from "../agent/eval/task-set.js";
import { loadEvalTaskSet } from "../agent/eval/agent-task-set.js";
import { writeJunit } from "../agent/report/junit.js";
import { writeEvalReport } from "../agent/report/eval-report.js";
import { episodeMeans, episodesByTask } from "../agent/report/sections/episodes-section.js";
import { recordTestEval } from "../agent/eval/test-evals.js";
import { pp } from "../agent/verdict/milestone.js";
import { decisionInterval, judgeEval, type JudgedComparison } from "../agent/verdict/verdict.js";
import type { CriterionResult } from "../agent/verdict/milestone.js";
import { UserError, displayPath } from "../agent/workspace.js";
import { SidecarError, type SidecarClient } from "../sidecar/client.js";
import type { EvalTarget } from "./eval-target.js";
import { embeddedBaseFor, runWithRequest, targetForRun } from "./run-task-file.js";
import { warmStartStages } from "../agent/verdict/warm-start.js";

/** One line per variant and the paired difference the milestone judges (`judged`), for the terminal. */
export function evalSummaryLines(log: EvalLog, judged: JudgedComparison): string[] {
  const lines: string[] = [];
  for (const v of log.variants) {
    const a = v.accuracy;
    lines.push(
      `${v.name.padEnd(8)} ${primaryGrader(log.settings).name} ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-"} on ${a?.n ?? 0} tasks`,
    );
  }
  const c = judged.comparison;
  if (c?.paired && c.decision) {
    const d = c.decision;
    lines.push(
      `adapter - base: ${pp(c.paired.meanDiff)} (95% CI ${decisionInterval(d)}, ${d.method}; ${d.test}${d.p === null ? "" : ` p=${d.p.toPrecision(2)}`}), n=${c.n}` +
        (c.requiredN !== null ? `, required n=${c.requiredN}` : "") +
        (c.mde !== null ? `, MDE ${pp(c.mde).replace("+", "")}` : "") +
        `; base from ${judged.baseSource}`,
    );
  }
  if (judged.baselineMatch.status === "mismatch") lines.push(`baseline.json GATES the verdict: ${judged.baselineMatch.reasons.join("; ")}`);
  else if (judged.baselineMatch.status === "match") lines.push("baseline.json matches this eval (fingerprint and per-task check)");
  const h = judged.splits[1]?.comparison;
  if (h?.paired && h.decision) {
    lines.push(`held-out templates (${h.n} tasks): adapter - base ${pp(h.paired.meanDiff)} (95% CI ${decisionInterval(h.decision)}, ${h.decision.method})`);
  }
  lines.push(
    log.agentTask
      ? `scores: agent task ${log.agentTask.name}'s own scorers, run in this process (primary ${primaryGrader(log.settings).name})`
      : `re-graded ${log.regradedScores} scores in TS: all equal to the sidecar's`,
  );
  return lines;
}

/** The two steps of a warm-started run's eval: what the warm start gave, what RL added. */
export function warmStartLines(log: EvalLog): string[] {
  return (warmStartStages(log) ?? []).map((s) => {
    const d = s.comparison.decision;
    return (
      `${s.question} (${s.from} -> ${s.to}): ${s.comparison.paired ? pp(s.comparison.paired.meanDiff) : "-"}` +
      (d
        ? ` (95% CI ${decisionInterval(d)}, ${d.method}; ${d.test}${d.p === null ? "" : ` p=${d.p.toPrecision(2)}`}${s.pHolm === null ? "" : `, Holm p=${s.pHolm.toPrecision(2)}`})`
        : "") +
      `: ${s.verdict.verdict}`
    );
  });
}

/** What an eval wrote and how it was judged (the downstream criterion, the one judgement). */
export interface WrittenEval {
  path: string;
  record: EvalLog;
  downstream: CriterionResult;
  junit: string;
}

/** Write the log and its JUnit XML, print its summary and downstream verdict against the current
 *  baseline.json. */
function writeAndPrint(target: EvalTarget, log: EvalLog): WrittenEval {
  const { keptApartFrom } = evalLogDestination(target.evalsDir, log);
  const path = writeEvalLog(target.evalsDir, log);
  const { judged, downstream } = judgeEval(log, readBaseline(target.evalsDir));
  for (const line of evalSummaryLines(log, judged)) console.log(line);
  console.log(`downstream: ${downstream.verdict}${judged.baselineMatch.status === "match" ? "" : " (GATED on baseline.json)"} (${downstream.reason})`);
  const junit = writeJunit(path, log, downstream);
  // a subset never replaces a fuller record unsaid (issue 45)
  if (keptApartFrom) {
    console.log(
      `a partial eval (${log.taskSet.n} tasks, --limit ${log.settings.limit}) is kept apart in ${basename(path)}: ${displayPath(keptApartFrom.path)} keeps its eval of ${keptApartFrom.n} tasks, which agent report reads`,
    );
  } else if (log.settings.limit > 0) {
    console.log(
      `this eval covers the first ${log.taskSet.n} ${log.taskSet.split} tasks (--limit ${log.settings.limit}); a later eval of more tasks replaces it, a smaller one is kept apart`,
    );
  }
  return { path, record: log, downstream, junit };
}

const baseName = (base: string) => (base === "" ? "the embedded default model" : base);

/** Evaluate a run's adapter against the run's base, write eval.json, print the summary (also `agent demo`'s step 4). */
export async function evalRun(client: SidecarClient, runId: string, given: EvalTarget): Promise<WrittenEval> {
  const target = await targetForRun(client, "eval", runId, given);
  const taskSet = await loadEvalTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  const settings = settingsForTaskSet(target.settings, taskSet);
  console.log(`evaluating base (${baseName(settings.baseModel)}) and ${runId}'s adapter on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`);
  try {
    // a run that started from a warm start: that adapter is scored beside it (verdict/warm-start.ts)
    const init = (await runWithRequest(client, target.evalsDir, runId)).request?.initAdapter;
    const warmStart = init?.source.case === "runId" ? { runId: init.source.value } : null;
    if (warmStart) console.log(`and the warm start it started from, ${warmStart.runId}'s adapter`);
    const out = writeAndPrint(target, await evaluateRun(client, runId, settings, taskSet, progressPrinter("eval"), undefined, warmStart));
    if (warmStart) for (const line of warmStartLines(out.record)) console.log(line);
    if (taskSet.split === "test")
      recordTestEval(target.evalsDir, { command: "eval", runId, step: out.record.adapter?.step ?? null, tasks: taskSet.rows.length, taskSet: taskSet.path });
    return out;
  } catch (err) {
    // the run's base must load here: a missing one is refused in one line, naming it
    if (err instanceof SidecarError && (err.field === "base_model" || err.message.startsWith("base_model:"))) {
      throw new UserError(`agent eval: ${runId} was trained on ${baseName(settings.baseModel)}, which is not available here (${err.codeName}: ${err.message})`);
    }
    throw err;
  }
}

/** --adapter is a path the sidecar resolves under its own data root: an absolute path is refused
 *  up front naming that root's flag (the agent cannot know where it is), with the relative form
 *  when the path lies under $PY_TRAINER_DATA_ROOT. */
export function checkAdapterPath(adapterPath: string): void {
  if (!isAbsolute(adapterPath)) return;
  const root = process.env.PY_TRAINER_DATA_ROOT;
  const rel = root ? relative(resolve(root), adapterPath) : "";
  const hint = rel && !rel.startsWith("..") && !isAbsolute(rel) ? `; under $PY_TRAINER_DATA_ROOT (${root}) that is --adapter ${rel}` : "";
  throw new UserError(
    `agent eval: --adapter ${adapterPath}: give the folder relative to the sidecar's data root (py-trainer serve --data-root DIR; default $PY_TRAINER_DATA_ROOT, else the folder it was started in), e.g. --adapter adapters/${basename(adapterPath)}${hint}`,
  );
}

/** Evaluate a PEFT folder (a path under the sidecar's data root) against the base; the record is
 *  named `name`. As for a run, the held-out-template split of an in-distribution test set goes in
 *  the same Evaluate request and into the log's heldOutTemplate. */
export async function evalAdapterPath(client: SidecarClient, adapterPath: string, name: string, given: EvalTarget): Promise<WrittenEval> {
  checkAdapterPath(adapterPath);
  const taskSet = await loadEvalTaskSet(given.tasksPath, given.settings.split, given.settings.limit);
  checkSettings(settingsForTaskSet(given.settings, taskSet), taskSet);
  // --tasks F names the base too (F's embedded model) unless --base-model says otherwise
  const named =
    given.tasksGiven && given.settings.baseModel === "" && !taskSet.agent
      ? { ...given, settings: { ...given.settings, baseModel: embeddedBaseFor(given.tasksPath) } }
      : given;
  const target = { ...named, settings: settingsForTaskSet(named.settings, taskSet) };
  const heldOut = heldOutTemplateSetFor(taskSet);
  console.log(
    `evaluating base (${target.settings.baseModel || "the embedded default model"}) and the adapter ${adapterPath} on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}` +
      (heldOut ? ` and ${heldOut.rows.length} held-out-template tasks` : ""),
  );
  const req = evaluateRequest(target.settings, heldOut ? { ...taskSet, rows: [...taskSet.rows, ...heldOut.rows] } : taskSet);
  req.adapters = [{ name: ADAPTER_VARIANT, source: { case: "path", value: adapterPath } }];
  const full = await runEvaluate(client, req, progressPrinter("eval"), taskSet.agent);
  const main = heldOut ? restrictResult(full, new Set(taskSet.rows.map((r) => r.id))) : full;
  const held = heldOut ? { taskSet: heldOut, result: restrictResult(full, new Set(heldOut.rows.map((r) => r.id))) } : null;
  return writeAndPrint(target, buildEvalLog(name, target.settings, taskSet, main, new Date(), held));
}

/**
 * The base model alone on the test split (`agent eval --agent-task FILE` or `--tasks FILE` with
 * no run): what it does before any training -- for an agent task, how often it calls a tool, how
 * often a call is well-formed, how its episodes end -- written as the record `name`
 * (runs/<name>/eval.json, junit.xml and report.md beside it). No adapter, so no verdict.
 */
export async function evalBaseOnly(client: SidecarClient, name: string, given: EvalTarget): Promise<WrittenEval & { report: string }> {
  const taskSet = await loadEvalTaskSet(given.tasksPath, given.settings.split, given.settings.limit);
  const settings = settingsForTaskSet(given.settings, taskSet);
  checkSettings(settings, taskSet);
  console.log(`evaluating the base model alone (${baseName(settings.baseModel)}) on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`);
  const result = await runEvaluate(client, evaluateRequest(settings, taskSet), progressPrinter("eval"), taskSet.agent);
  const log = buildEvalLog(name, settings, taskSet, result);
  const path = writeEvalLog(given.evalsDir, log);
  const a = log.variants[0]?.accuracy;
  console.log(
    `base     ${primaryGrader(settings).name} ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-"} on ${a?.n ?? 0} tasks`,
  );
  if (log.agentTask) {
    const m = episodeMeans(episodesByTask(log).get("base")?.values() ?? []);
    // a call to an unknown tool is well-formed (a name and an arguments object), a malformed one is not
    const calls = m.toolCalls + m.unknownToolCalls;
    const wellFormed = calls + m.malformedCalls > 0 ? calls / (calls + m.malformedCalls) : NaN;
    console.log(
      `episodes: ${m.episodes}; tool calls/episode ${m.toolCalls.toFixed(2)} (unknown tools ${m.unknownToolCalls.toFixed(2)}), well-formed calls ${Number.isFinite(wellFormed) ? `${(100 * wellFormed).toFixed(1)}%` : "- (no call)"}, ` +
        `tool errors/episode ${m.toolErrors.toFixed(2)}, limits hit ${(100 * m.limitsHit).toFixed(1)}%`,
    );
  }
  const junit = writeJunit(path, log, null);
  const report = writeEvalReport(given.evalsDir, path).path;
  return { path, record: log, downstream: { verdict: "INCONCLUSIVE", reason: "the base alone: no adapter to compare" }, junit, report };
}
