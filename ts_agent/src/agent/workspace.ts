/**
 * Where the agent's files live, and the one way it writes them.
 *
 * - REPO_ROOT is found from this file's own location (<root>/ts_agent/src/agent/workspace.ts), so
 *   the CLI works from any directory. EVALS_DIR (<root>/agent-evals) holds the task set,
 *   baseline.json and runs/<run_id>/; every command takes --evals-dir to point elsewhere.
 * - writeFileAtomic is the only writer of files other code reads back (eval.json, baseline.json,
 *   report.md, run.json, events.jsonl, the task set): temp file in the same directory, fsync,
 *   rename, fsync of the directory, so a reader sees the old file or the new one, never a part, and
 *   the rename survives a crash.
 */
import { closeSync, fsyncSync, openSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// ---------------------------------------------------------------------------------------------
// Places

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const EVALS_DIR = join(REPO_ROOT, "agent-evals");

/** A run's local folder: <evalsDir>/runs/<runId>. */
export function runDir(evalsDir: string, runId: string): string {
  return join(evalsDir, "runs", runId);
}

/** --evals-dir as given (resolved against the working directory), else EVALS_DIR. */
export function evalsDirOrDefault(flag: string | undefined): string {
  return flag ? resolve(flag) : EVALS_DIR;
}

/** Repo-relative when inside the repo, else the path as given (for records and messages). */
export function displayPath(path: string): string {
  const rel = relative(REPO_ROOT, path);
  return rel && !rel.startsWith("..") && !rel.startsWith("/") ? rel : path;
}

// ---------------------------------------------------------------------------------------------
// Atomic writes

/** fsync a directory, making a rename or link inside it durable (a no-op where unsupported). */
export function fsyncDirectory(dir: string): void {
  if (process.platform === "win32") return; // directories cannot be opened for fsync there
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Write to a temp file next to `path`, fsync, rename, fsync the directory: readers never see a partial file. */
export function writeFileAtomic(path: string, data: string | Uint8Array): void {
  const tmp = `${path}.tmp-${process.pid}`;
  try {
    const fd = openSync(tmp, "w");
    try {
      writeFileSync(fd, data); // loops until every byte is written
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
  fsyncDirectory(dirname(path));
}
