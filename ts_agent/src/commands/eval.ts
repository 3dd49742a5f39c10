/**
 * `agent eval <run_id>`: evaluate the base model and the run's adapter on the test split through
 * the sidecar's Evaluate, re-grade every completion in TS, and write
 * agent-evals/runs/<run_id>/eval.json (atomically). Prints accuracy per variant and the paired
 * difference with its CI. A TS/Python grading disagreement fails the command and writes nothing.
 */
import { parseArgs } from "node:util";

import { RegradeMismatchError, evaluateRun, loadTaskSet, progressPrinter, writeEvalRecord, type EvalRecord } from "../agent/eval/harness.js";
import { pp } from "../agent/report/milestone.js";
import type { SidecarClient } from "../sidecar/client.js";
import { EVAL_FLAGS, EVAL_FLAGS_USAGE, GLOBAL_FLAGS, evalTargetFromFlags, type CommandHandler, type EvalTarget } from "./flags.js";

/** One line per variant and the paired difference, for the terminal. */
export function evalSummaryLines(record: EvalRecord): string[] {
  const lines: string[] = [];
  for (const v of record.variants) {
    const a = v.accuracy;
    lines.push(
      `${v.name.padEnd(8)} exact_match ${a ? `${(a.estimate * 100).toFixed(1)}% (95% CI ${(a.lower * 100).toFixed(1)}-${(a.upper * 100).toFixed(1)}%)` : "-"} on ${a?.n ?? 0} tasks`,
    );
  }
  const c = record.comparison;
  if (c?.paired && c.bootstrap) {
    lines.push(
      `adapter - base: ${pp(c.paired.meanDiff)} (95% bootstrap CI ${pp(c.bootstrap.lower)} to ${pp(c.bootstrap.upper)}), n=${c.n}` +
        (c.requiredN !== null ? `, required n=${c.requiredN}` : "") +
        (c.mde !== null ? `, MDE ${pp(c.mde).replace("+", "")}` : ""),
    );
  }
  lines.push(`re-graded ${record.regradedScores} scores in TS: all equal to the sidecar's`);
  return lines;
}

/** Evaluate a run's adapter against the base, write eval.json, print the summary (also `agent demo`'s step 4). */
export async function evalRun(client: SidecarClient, runId: string, target: EvalTarget): Promise<{ path: string; record: EvalRecord }> {
  const taskSet = loadTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  console.log(`evaluating base and ${runId}'s adapter on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`);
  const record = await evaluateRun(client, runId, target.settings, taskSet, progressPrinter("eval"));
  const path = writeEvalRecord(target.evalsDir, record);
  for (const line of evalSummaryLines(record)) console.log(line);
  return { path, record };
}

export const command: CommandHandler = async (argv, client) => {
  const { values, positionals } = parseArgs({ args: argv, options: { ...EVAL_FLAGS, ...GLOBAL_FLAGS }, allowPositionals: true, strict: true });
  if (positionals.length !== 1) {
    console.error(`usage: agent eval <run_id> [options]\n${EVAL_FLAGS_USAGE}`);
    return 2;
  }
  try {
    const { path } = await evalRun(client, positionals[0], evalTargetFromFlags(values));
    console.log(`wrote ${path}`);
    return 0;
  } catch (err) {
    if (err instanceof RegradeMismatchError) {
      console.error(`agent eval: ${err.message}`);
      return 1;
    }
    throw err;
  }
};
