/**
 * `agent baseline set [--force]`: evaluate the base model on the test split and write
 * agent-evals/baseline.json (model, task-set sha256, grader, per-task scores, accuracy with CI,
 * seed, date). An existing baseline is never replaced without --force and a --reason; the replaced
 * one is kept in agent-evals/baseline-history.jsonl with the reason and the runs judged on it.
 * `agent baseline show`: print the current baseline's identity and accuracy.
 */
import { parseArgs } from "node:util";

import {
  BaselineExistsError,
  BaselineReasonRequiredError,
  baselinePath,
  readBaseline,
  runsJudgedOn,
  setBaseline,
  type Baseline,
} from "../agent/eval/baseline.js";
import { progressPrinter } from "../agent/eval/evaluate.js";
import { loadTaskSet } from "../agent/eval/task-set.js";
import type { SidecarClient } from "../sidecar/client.js";
import { EVAL_FLAGS, EVAL_FLAGS_USAGE, GLOBAL_FLAGS, evalTargetFromFlags, type CommandHandler, type CommandHelp, type EvalTarget } from "./flags.js";

const USAGE = `usage: agent baseline set [--force --reason TEXT] [options]
       agent baseline show [--evals-dir DIR]
  --force             replace an existing baseline.json (needs --reason)
  --reason TEXT       why it is replaced: kept in baseline.json and baseline-history.jsonl, shown in reports
${EVAL_FLAGS_USAGE}`;

export const help: CommandHelp = {
  summary: "Evaluate the base model on the test split and keep it as agent-evals/baseline.json (set), or print it (show).",
  usage: "agent baseline set [--force --reason TEXT] [options] | agent baseline show [--evals-dir DIR]",
  flags: [
    ["--force", "replace an existing baseline.json (needs --reason)"],
    ["--reason TEXT", "why: kept in baseline.json and baseline-history.jsonl, shown in every report"],
    ["--tasks PATH", "task file (default agent-evals/tasks/aml_typology.jsonl)"],
    ["--limit N", "only the first N test tasks (the milestone needs >= 200; default all)"],
    ["--base-model M", "base model as the sidecar knows it (default: the embedded default model)"],
    ["--evals-dir DIR", "where baseline.json and runs/ live (default agent-evals/)"],
  ],
  examples: ["agent baseline set --limit 200", "agent baseline set --force --reason 'task file regenerated'", "agent baseline show"],
};

/** `agent demo` and `agent sweep`, step 1: keep baseline.json, or set it when it is missing (never --force). */
export async function ensureBaseline(client: SidecarClient, target: EvalTarget, tag: string, t0: number): Promise<void> {
  const existing = readBaseline(target.evalsDir);
  if (existing) {
    console.log(`[${tag}] kept ${baselinePath(target.evalsDir)}: ${describeBaseline(existing)}`);
    return;
  }
  const taskSet = loadTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  console.log(`[${tag}] no baseline yet: evaluating the base model on ${taskSet.rows.length} ${taskSet.split} tasks`);
  const { path, baseline } = await setBaseline(client, { evalsDir: target.evalsDir, settings: target.settings, taskSet, onProgress: progressPrinter("baseline") });
  console.log(`[${tag}] wrote ${path}: ${describeBaseline(baseline)} (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
}

/** One line: the baseline's model, task set, grader and accuracy. */
export function describeBaseline(b: Baseline): string {
  const a = b.accuracy;
  return (
    `baseline ${b.date}: model ${b.model.requested || "(embedded default)"} (${b.model.resolved}), ` +
    `${b.taskSet.n} ${b.taskSet.split} tasks of ${b.taskSet.path} (sha256 ${b.taskSet.sha256.slice(0, 12)}), ` +
    `${b.grader.name} ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%, ${a.method})` : "-"}, seed ${b.seed}`
  );
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
    if (b.replaced) console.log(`replaced the baseline of ${b.replaced.previousDate} (${b.replaced.runsJudgedOnPrevious} run(s) judged on it): ${b.replaced.reason}`);
    return 0;
  }
  if (positionals.length !== 1 || positionals[0] !== "set") {
    console.error(USAGE);
    return 2;
  }
  try {
    const taskSet = loadTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
    console.log(`evaluating the base model on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`);
    const { path, baseline } = await setBaseline(client, {
      evalsDir: target.evalsDir,
      settings: target.settings,
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
