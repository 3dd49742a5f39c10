/**
 * `agent select` and `agent compare` score a run on rows of the --tasks file: a file other than the
 * one the run trained on would score it on another task (issue 30, item 8: exit 0 and a selection
 * from the other file's rows). The run's own task file is its dataset's jsonl_path (read under
 * $PY_TRAINER_DATA_ROOT, as agent select reads it), or, for rows sent inline, the file they came
 * from: a --tasks file that holds none of them is another one (its eval.json names the file its
 * eval used, when there is one). Where the run's file cannot be read here, nothing is judged.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";

import { EVAL_FILE } from "../agent/core/eval-log.js";
import { loadTaskFile } from "../agent/eval/tasks.js";
import { readLocalRun } from "../agent/train/run.js";
import { REPO_ROOT, UserError, displayPath, runDir } from "../agent/workspace.js";
import type { SidecarClient } from "../sidecar/client.js";

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** The task file runs/<id>/eval.json says its eval used, or "". */
function evalTaskFile(evalsDir: string, runId: string): string {
  try {
    const log = JSON.parse(readFileSync(join(runDir(evalsDir, runId), EVAL_FILE), "utf8")) as { taskSet?: { path?: string } };
    return log.taskSet?.path ?? "";
  } catch {
    return "";
  }
}

/** Throw a one-line UserError (exit 2) naming both files when `tasksPath` is not run `runId`'s task file. */
export async function checkRunTaskFile(client: SidecarClient, command: string, evalsDir: string, runId: string, tasksPath: string): Promise<void> {
  const local = readLocalRun(evalsDir, runId);
  const run = local?.request ? local : await client.getRun(runId);
  const source = run.request?.dataset?.source;
  const given = displayPath(tasksPath);
  const hint = "pass --tasks with the run's own task file";
  if (source?.case === "jsonlPath") {
    const own = resolve(process.env.PY_TRAINER_DATA_ROOT ?? REPO_ROOT, source.value);
    if (!existsSync(own) || !existsSync(tasksPath) || sha256(own) === sha256(tasksPath)) return;
    throw new UserError(`agent ${command}: run ${runId} trained on ${displayPath(own)}, not ${given}: ${hint} (--tasks ${displayPath(own)})`);
  }
  if (source?.case === "inline" && source.value.rows.length > 0) {
    const prompts = new Set(loadTaskFile(tasksPath).rows.map((r) => r.prompt));
    if (source.value.rows.some((r) => prompts.has(r.prompt))) return;
    const other = evalTaskFile(evalsDir, runId);
    throw new UserError(
      `agent ${command}: run ${runId} trained on none of the rows of ${given}: its ${source.value.rows.length} inline train rows come from ${other ? `${other} (its eval.json's task file)` : "another task file"}; ${hint}`,
    );
  }
}
