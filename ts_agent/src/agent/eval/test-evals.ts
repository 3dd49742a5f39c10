/**
 * How often a run was looked at on the test split: runs/<run_id>/test-evals.jsonl, one line per
 * evaluation of the run's adapter or one of its checkpoints on the test split (written by
 * `agent eval`, `agent select` and `agent compare`). Append-only: each record rewrites the file
 * atomically with the old lines kept. The report warns when there are several, because a number
 * chosen after looking at the test split more than once is optimistic.
 */
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

import { appendLine, runDir } from "../workspace.js";

export const TEST_EVALS_FILE = "test-evals.jsonl";

export interface TestEvalRecord {
  /** ISO 8601 */
  date: string;
  /** the agent command that evaluated: "eval", "select", "compare", ... */
  command: string;
  runId: string;
  /** the checkpoint step evaluated; null = the run's final adapter */
  step: number | null;
  /** test tasks evaluated */
  tasks: number;
  /** the task file, as the eval log names it */
  taskSet: string;
}

/** Append one record to runs/<run_id>/test-evals.jsonl (one O_APPEND write: concurrent agents lose nothing). */
export function recordTestEval(evalsDir: string, rec: Omit<TestEvalRecord, "date"> & { date?: string }): void {
  const dir = runDir(evalsDir, rec.runId);
  mkdirSync(dir, { recursive: true });
  const path = join(dir, TEST_EVALS_FILE);
  appendLine(
    path,
    JSON.stringify({
      date: rec.date ?? new Date().toISOString(),
      command: rec.command,
      runId: rec.runId,
      step: rec.step,
      tasks: rec.tasks,
      taskSet: rec.taskSet,
    }),
  );
}

/** The records of a run, oldest first ([] without the file; a damaged line is skipped). */
export function readTestEvals(evalsDir: string, runId: string): TestEvalRecord[] {
  const path = join(runDir(evalsDir, runId), TEST_EVALS_FILE);
  if (!existsSync(path)) return [];
  const out: TestEvalRecord[] = [];
  for (const line of readFileSync(path, "utf8").split("\n")) {
    if (line.trim() === "") continue;
    try {
      out.push(JSON.parse(line) as TestEvalRecord);
    } catch {
      // a torn line must not stop the report; the count then reads low, never high
    }
  }
  return out;
}

/** The report's warning when the test split was looked at more than once for this run; "" otherwise. */
export function testLooksWarning(records: ReadonlyArray<TestEvalRecord>): string {
  if (records.length < 2) return "";
  const how = records.map((r) => `agent ${r.command}${r.step === null ? "" : ` (step ${r.step})`} on ${r.date.slice(0, 10)}`).join(", ");
  return `**Warning: the test split was looked at ${records.length} times for this run: a number chosen after looking is optimistic.** The looks (${TEST_EVALS_FILE}): ${how}. Choose on a validation split (\`agent select\`) and evaluate on test once.`;
}

/** What `agent select` says of its test eval: "(the only look at test)" only when no record of
 *  this run says an earlier command looked (`agent eval` before `agent select` is a second look). */
export function testLookWords(earlier: ReadonlyArray<TestEvalRecord>): string {
  if (earlier.length === 0) return "(the only look at test)";
  const who = [...new Set(earlier.map((r) => `agent ${r.command}`))].join(", ");
  return `(look ${earlier.length + 1} at test for this run: ${who} looked before; see ${TEST_EVALS_FILE})`;
}
