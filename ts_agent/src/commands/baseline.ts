/**
 * `agent baseline set [--force]`: evaluate the base model on the test split and write
 * agent-evals/baseline.json (model, task-set sha256, grader, per-task scores, accuracy with CI,
 * seed, date). An existing baseline is never replaced without --force and a --reason; the replaced
 * one is kept in agent-evals/baseline-history.jsonl with the reason and the runs judged on it.
 * `agent baseline show`: print the current baseline's identity and accuracy.
 * `agent baseline history`: the baselines it replaced (baseline-history.jsonl), oldest first, each
 * with when and why it was replaced and the runs judged on it, then the current one.
 * `agent baseline check [<run_id>]`: baseline.json's fingerprint against this agent's settings
 * (the agent-side fields; the run-time ones need an Evaluate) or against a run's eval.json (every
 * field, and the per-task check against its own base variant), field by field; exit 1 when a
 * difference gates the verdict.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

import {
  BASELINE_HISTORY_FILE,
  BaselineExistsError,
  BaselineReasonRequiredError,
  baselinePath,
  readBaseline,
  readBaselineHistory,
  runsJudgedOn,
  setBaseline,
} from "../agent/eval/baseline-record.js";
import { progressPrinter, settingsForTaskSet } from "../agent/eval/evaluate.js";
import {
  buildFingerprint,
  compareFingerprints,
  fingerprintGates,
  fingerprintUnchecked,
  fingerprintWarnings,
  type FingerprintRow,
} from "../agent/eval/fingerprint.js";
import { baselineFingerprint } from "../agent/eval/baseline-record.js";
import { taskSetRef } from "../agent/eval/task-set.js";
import { loadEvalTaskSet } from "../agent/eval/agent-task-set.js";
import { TASKS_RELATIVE_PATH } from "../agent/eval/tasks.js";
import { EVAL_FILE, readEvalLog } from "../agent/core/eval-log.js";
import { judgeEvalComparison } from "../agent/verdict/verdict.js";
import { UserError, displayPath } from "../agent/workspace.js";
import { describeBaseline } from "../pipeline/baseline-step.js";
import type { EvalTarget } from "../pipeline/eval-target.js";
import { embeddedBaseFor } from "../pipeline/run-task-file.js";
import { EVAL_FLAGS, EVAL_FLAGS_USAGE, GLOBAL_FLAGS, evalTargetFromFlags, type CommandHandler, type CommandHelp } from "./flags.js";

const USAGE = `usage: agent baseline set [--force --reason TEXT] [options]
       agent baseline show [--evals-dir DIR]
       agent baseline history [--evals-dir DIR]
       agent baseline check [<run_id>] [options]
  --force             replace an existing baseline.json (needs --reason)
  --reason TEXT       why it is replaced: kept in baseline.json and baseline-history.jsonl, shown in reports
${EVAL_FLAGS_USAGE}`;

export const help: CommandHelp = {
  summary:
    "Evaluate the base model on the test split and keep it as agent-evals/baseline.json (set), print it (show), list the baselines it replaced (history), or compare its fingerprint with this agent's settings or a run's eval.json (check).",
  usage:
    "agent baseline set [--force --reason TEXT] [options] | agent baseline show [--evals-dir DIR] | agent baseline history [--evals-dir DIR] | agent baseline check [<run_id>] [options]",
  flags: [
    ["--force", "replace an existing baseline.json (needs --reason)"],
    ["--reason TEXT", "why: kept in baseline.json and baseline-history.jsonl, shown in every report"],
    ["--tasks PATH", `task file (docs/tasks.md; default ${TASKS_RELATIVE_PATH})`],
    ["--limit N", "only the first N test tasks (the milestone needs >= 200; default all)"],
    ["--base-model M", "base model as the sidecar knows it (default: the embedded default model)"],
    ["--evals-dir DIR", "where baseline.json and runs/ live (default: the nearest agent-evals/ at or above the working directory, else ./agent-evals)"],
  ],
  examples: [
    "agent baseline set --limit 200",
    "agent baseline set --force --reason 'task file regenerated'",
    "agent baseline show",
    "agent baseline history",
    "agent baseline check",
    "agent baseline check run-20261201-101500-ab12cd",
  ],
  notes: "check exits 1 when a difference gates the verdict (docs/verdict.md, the fingerprint), 0 otherwise.",
};

/** The comparison as the terminal prints it: a table, then what gates, warns and was not checked. */
export function fingerprintLines(rows: ReadonlyArray<FingerprintRow>, against: string): string[] {
  const width = Math.max(...rows.map((r) => r.field.length));
  const lines = [`${"field".padEnd(width)}  ${"baseline.json".padEnd(16)}  ${against.padEnd(16)}  effect  status`];
  for (const r of rows) {
    lines.push(
      `${r.field.padEnd(width)}  ${r.baseline.padEnd(16)}  ${r.eval.padEnd(16)}  ${r.effect.padEnd(6)}  ${r.status}${r.note && r.status !== "same" ? ` (${r.note})` : ""}`,
    );
  }
  const gates = fingerprintGates(rows);
  lines.push(gates.length ? `GATES the verdict: ${gates.join("; ")}` : "nothing that gates the verdict differs");
  const warns = fingerprintWarnings(rows);
  if (warns.length) lines.push(`warning (does not gate): ${warns.join("; ")}`);
  const unchecked = fingerprintUnchecked(rows);
  if (unchecked.length) lines.push(`not checked (not recorded on one side): ${unchecked.join(", ")}`);
  return lines;
}

/** `agent baseline check [<run_id>]`: 0 when nothing gates, 1 when something does. */
async function check(target: EvalTarget, runId: string | undefined): Promise<number> {
  const b = readBaseline(target.evalsDir);
  if (!b) {
    console.error(`no baseline at ${baselinePath(target.evalsDir)} (run \`agent baseline set\`)`);
    return 1;
  }
  console.log(describeBaseline(b));
  if (runId !== undefined) {
    const path = join(target.evalsDir, "runs", runId, EVAL_FILE);
    if (!existsSync(path))
      throw new UserError(`agent baseline check: run ${runId} has no ${EVAL_FILE} under ${target.evalsDir} (evaluate it with: agent eval ${runId})`);
    const judged = judgeEvalComparison(readEvalLog(path), b);
    if (!judged.fingerprint) throw new UserError(`agent baseline check: ${path} has no adapter variant to compare`);
    for (const line of fingerprintLines(judged.fingerprint, `eval ${runId}`)) console.log(line);
    if (judged.consistency) console.log(`per-task check: ${judged.consistency.text}${judged.consistency.gates ? " (GATES the verdict)" : ""}`);
    return judged.baselineMatch.status === "match" ? 0 : 1;
  }
  const taskSet = await loadEvalTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  const fresh = buildFingerprint({
    settings: settingsForTaskSet(target.settings, taskSet),
    taskSet: taskSetRef(taskSet),
    taskIds: taskSet.rows.map((r) => r.id),
    model: { requested: target.settings.baseModel, resolved: null },
  });
  console.log("against this agent's settings (the run-time fields need an Evaluate: `agent baseline check <run_id>` compares a run's eval.json)");
  const rows = compareFingerprints(baselineFingerprint(b), fresh, { baseline: Object.keys(b.perTask), eval: taskSet.rows.map((r) => r.id) });
  for (const line of fingerprintLines(rows, "these settings")) console.log(line);
  return fingerprintGates(rows).length ? 1 : 0;
}

/** `agent baseline history`: every baseline replaced so far, oldest first, then the current one:
 *  when it was replaced, why, and the runs judged on it. Exit 1 when there is no baseline at all. */
export function historyLines(evalsDir: string): string[] | null {
  const history = readBaselineHistory(evalsDir);
  const current = readBaseline(evalsDir);
  if (!current && history.length === 0) return null;
  const lines = [`${history.length} replaced baseline(s) in ${displayPath(join(evalsDir, BASELINE_HISTORY_FILE))}${history.length ? ", oldest first:" : ""}`];
  history.forEach((h, i) => {
    lines.push(`${i + 1}. ${describeBaseline(h.baseline)}`);
    lines.push(
      `   replaced ${h.replacedAt}: ${h.reason}; runs judged on it: ${h.runsJudged.length}${h.runsJudged.length ? ` (${h.runsJudged.join(", ")})` : ""}`,
    );
  });
  if (current) {
    const judged = runsJudgedOn(evalsDir, current);
    lines.push(`current (${displayPath(baselinePath(evalsDir))}): ${describeBaseline(current)}`);
    lines.push(`   runs judged on it: ${judged.length}${judged.length ? ` (${judged.join(", ")})` : ""}`);
  } else {
    lines.push(`current: none (${displayPath(baselinePath(evalsDir))} is missing; run \`agent baseline set\`)`);
  }
  return lines;
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { force: { type: "boolean" }, reason: { type: "string" }, ...EVAL_FLAGS, ...GLOBAL_FLAGS },
    allowPositionals: true,
    strict: true,
  });
  const target = evalTargetFromFlags(values);
  if (positionals.length === 1 && positionals[0] === "show") {
    const b = readBaseline(target.evalsDir);
    if (!b) {
      console.error(`no baseline at ${baselinePath(target.evalsDir)} (run \`agent baseline set\`)`);
      return 1;
    }
    console.log(describeBaseline(b));
    const judged = runsJudgedOn(target.evalsDir, b);
    console.log(`runs judged on it: ${judged.length}${judged.length ? ` (${judged.join(", ")})` : ""}`);
    if (b.replaced)
      console.log(`replaced the baseline of ${b.replaced.previousDate} (${b.replaced.runsJudgedOnPrevious} run(s) judged on it): ${b.replaced.reason}`);
    return 0;
  }
  if (positionals[0] === "history") {
    if (positionals.length > 1)
      throw new UserError(`agent baseline history: unexpected argument '${positionals[1]}' (usage: agent baseline history [--evals-dir DIR])`);
    const lines = historyLines(target.evalsDir);
    if (!lines) {
      console.error(`no baseline at ${baselinePath(target.evalsDir)} and no ${BASELINE_HISTORY_FILE} beside it (run \`agent baseline set\`)`);
      return 1;
    }
    for (const line of lines) console.log(line);
    return 0;
  }
  if (positionals[0] === "check") {
    if (positionals.length > 2) throw new UserError(`agent baseline check: one run id at most, got ${positionals.length - 1} (usage: ${help.usage})`);
    return await check(target, positionals[1]);
  }
  if (positionals.length !== 1 || positionals[0] !== "set") {
    console.error(USAGE);
    return 2;
  }
  // a refusal comes before any work (and is a user mistake: exit 2)
  if (!values.force && existsSync(baselinePath(target.evalsDir))) throw new UserError(new BaselineExistsError(baselinePath(target.evalsDir)).message);
  if (values.force && existsSync(baselinePath(target.evalsDir)) && !(values.reason ?? "").trim())
    throw new UserError(new BaselineReasonRequiredError().message);
  try {
    const taskSet = await loadEvalTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
    // --tasks F names the model too: F's embedded model, unless --base-model says otherwise (an
    // agent task's base is named by --base-model: its embedded model is built from demonstrations)
    const named =
      values["base-model"] === undefined && target.tasksGiven && !taskSet.agent
        ? { ...target.settings, baseModel: embeddedBaseFor(target.tasksPath) }
        : target.settings;
    const settings = settingsForTaskSet(named, taskSet);
    console.log(
      `evaluating the base model (${settings.baseModel || "the embedded default model"}) on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`,
    );
    const { path, baseline } = await setBaseline(client, {
      evalsDir: target.evalsDir,
      settings,
      taskSet,
      force: values.force ?? false,
      reason: values.reason,
      onProgress: progressPrinter("baseline"),
    });
    console.log(describeBaseline(baseline));
    console.log(`wrote ${path}`);
    return 0;
  } catch (err) {
    if (err instanceof BaselineExistsError || err instanceof BaselineReasonRequiredError) {
      console.error(`agent baseline set: ${err.message}`);
      return 1;
    }
    throw err;
  }
};
