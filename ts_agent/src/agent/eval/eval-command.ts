/**
 * `agent eval <run_id>`: evaluate the base model and the run's adapter on the test split through
 * the sidecar's Evaluate, re-grade every completion in TS, and write
 * agent-evals/runs/<run_id>/eval.json (atomically). Prints accuracy per variant and the paired
 * difference with its CI. A TS/Python grading disagreement fails the command and writes nothing.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";

import type { SidecarClient } from "../../sidecar/client.js";
import { EVALS_DIR } from "../train/train-command.js";
import { pp } from "../report/milestone.js";
import {
  DEFAULT_EVAL_SETTINGS,
  EVAL_FILE,
  RegradeMismatchError,
  evaluateRun,
  loadTaskSet,
  progressPrinter,
  type EvalRecord,
  type EvalSettings,
} from "./harness.js";
import { defaultTasksPath, writeFileAtomic } from "./tasks.js";

/** Flags the sidecar-facing commands accept anywhere (cli.ts reads them). */
export const GLOBAL_FLAGS = {
  address: { type: "string" },
  token: { type: "string" },
  timeout: { type: "string" },
} as const;

/** Flags shared by `agent eval` and `agent baseline set`: what to evaluate on. */
export const EVAL_FLAGS = {
  tasks: { type: "string" },
  limit: { type: "string" },
  "base-model": { type: "string" },
  "evals-dir": { type: "string" },
} as const;

export const EVAL_FLAGS_USAGE = `  --tasks PATH        task file (default agent-evals/tasks/aml_typology.jsonl)
  --limit N           only the first N test tasks (the milestone needs >= 200; default all)
  --base-model M      base model as the sidecar knows it (default: the embedded default model)
  --evals-dir DIR     where baseline.json and runs/ live (default agent-evals/)`;

export interface EvalTarget {
  settings: EvalSettings;
  tasksPath: string;
  evalsDir: string;
}

/** Settings, task file and evals dir from the shared flags. */
export function evalTargetFromFlags(values: { tasks?: string; limit?: string; "base-model"?: string; "evals-dir"?: string }): EvalTarget {
  const limit = values.limit === undefined ? 0 : Number(values.limit);
  if (!Number.isInteger(limit) || limit < 0) throw new Error(`--limit must be a non-negative integer, got ${values.limit}`);
  return {
    settings: { ...DEFAULT_EVAL_SETTINGS, graders: [...DEFAULT_EVAL_SETTINGS.graders], baseModel: values["base-model"] ?? "", limit },
    tasksPath: values.tasks ? resolve(values.tasks) : defaultTasksPath(),
    evalsDir: values["evals-dir"] ? resolve(values["evals-dir"]) : EVALS_DIR,
  };
}

/** Write runs/<run_id>/eval.json atomically; returns its path. */
export function writeEvalRecord(evalsDir: string, record: EvalRecord): string {
  const dir = join(evalsDir, "runs", record.runId);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, EVAL_FILE);
  writeFileAtomic(path, JSON.stringify(record, null, 2) + "\n");
  return path;
}

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

/** Evaluate a run's adapter against the base, write eval.json, print the summary. */
export async function evalRun(client: SidecarClient, runId: string, target: EvalTarget): Promise<{ path: string; record: EvalRecord }> {
  const taskSet = loadTaskSet(target.tasksPath, target.settings.split, target.settings.limit);
  console.log(`evaluating base and ${runId}'s adapter on ${taskSet.rows.length} ${taskSet.split} tasks of ${taskSet.path}`);
  const record = await evaluateRun(client, runId, target.settings, taskSet, progressPrinter("eval"));
  const path = writeEvalRecord(target.evalsDir, record);
  for (const line of evalSummaryLines(record)) console.log(line);
  return { path, record };
}

export async function command(argv: string[], client: SidecarClient): Promise<number> {
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
}
