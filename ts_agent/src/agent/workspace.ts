/**
 * Where the agent's files live, and the one way it writes them.
 *
 * - REPO_ROOT is found from this file's own location (<root>/ts_agent/src/agent/workspace.ts), so
 *   the CLI works from any directory. EVALS_DIR (<root>/agent-evals) holds the task set,
 *   baseline.json and runs/<run_id>/; every command takes --evals-dir to point elsewhere, and
 *   without it uses the nearest agent-evals/ at or above the working directory (evalsDirOrDefault).
 * - writeFileAtomic is the only writer of files other code reads back (eval.json, baseline.json,
 *   report.md, run.json, events.jsonl, the task set): temp file in the same directory, fsync,
 *   rename, fsync of the directory, so a reader sees the old file or the new one, never a part, and
 *   the rename survives a crash. appendLine is the only writer of records several agents append
 *   to at once (test-evals.jsonl, baseline-history.jsonl): O_APPEND, one write, never rewritten.
 */
import { closeSync, existsSync, fstatSync, fsyncSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

// ---------------------------------------------------------------------------------------------
// Places

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const EVALS_DIR = join(REPO_ROOT, "agent-evals");

/** The py-trainer that draws the matplotlib figures (report, compare): $PY_TRAINER_BIN, else the repo's .venv. */
export function pyTrainerBin(): string {
  return process.env.PY_TRAINER_BIN || join(REPO_ROOT, ".venv", "bin", "py-trainer");
}

/** A run's local folder: <evalsDir>/runs/<runId>. */
export function runDir(evalsDir: string, runId: string): string {
  return join(evalsDir, "runs", runId);
}

/**
 * --evals-dir as given, resolved against the working directory like every other path flag
 * (--config, --tasks); without it the nearest `agent-evals/` folder at or above the working
 * directory (a project of the user's own, or this repository from inside it), else
 * `agent-evals/` in the working directory (said once on stdout): a user's reports land under
 * their own folder, never in this repository's.
 */
export function evalsDirOrDefault(flag: string | undefined, cwd = process.cwd()): string {
  if (flag) return resolve(cwd, flag);
  for (let dir = resolve(cwd); ; dir = dirname(dir)) {
    const candidate = join(dir, "agent-evals");
    if (existsSync(candidate) && statSync(candidate).isDirectory()) return candidate;
    if (dirname(dir) === dir) break;
  }
  const here = join(resolve(cwd), "agent-evals");
  if (!saidWhere.has(here)) {
    saidWhere.add(here);
    // stdout: a mistake's refusal on stderr stays one line
    process.stdout.write(`agent: no agent-evals/ at or above ${resolve(cwd)}: runs, evals and reports go to ${here} (--evals-dir DIR to choose)\n`);
  }
  return here;
}
const saidWhere = new Set<string>();

/** The sidecar's data root as the agent assumes it when a run does not say: $PY_TRAINER_DATA_ROOT, else the repository. */
export const dataRoot = (): string => process.env.PY_TRAINER_DATA_ROOT || REPO_ROOT;

/**
 * The data root the sidecar resolved run `runId`'s relative paths against: the `data_root` its
 * summary.json records (py_trainer/core/paths.py run_data_paths), else $PY_TRAINER_DATA_ROOT, else the
 * repository (as scripts/demo.sh starts the sidecar).
 */
export function runDataRoot(runId: string, evalsDir: string): string {
  try {
    const summary = JSON.parse(readFileSync(join(runDir(evalsDir, runId), "summary.json"), "utf8")) as { data_root?: unknown };
    if (typeof summary.data_root === "string" && summary.data_root !== "") return summary.data_root;
  } catch {
    // no summary.json here (a run not downloaded, or one that failed before writing it)
  }
  return dataRoot();
}

/**
 * A run's local folder is complete once RUN_RECORD is there: the downloader writes it last, after
 * every artifact was verified (each arrives as <name>.partial and is renamed once its sha256
 * matched, sidecar/client.ts), so a folder without it is a download in progress or a stranded run.
 */
export const RUN_RECORD = "run.json";

export function isRunLocal(evalsDir: string, runId: string): boolean {
  return existsSync(join(runDir(evalsDir, runId), RUN_RECORD));
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

/**
 * Append one line to a record several agents append to at once (test-evals.jsonl, the baseline
 * history): opened O_APPEND, the whole line in one write, fsync. Never read-modify-write: two
 * writers both land, in some order. A torn last line (a writer killed mid-write) is ended first,
 * so the new line never glues onto it (readers skip the torn one).
 */
export function appendLine(path: string, line: string): void {
  const fd = openSync(path, "a+");
  try {
    const size = fstatSync(fd).size;
    const last = Buffer.alloc(1);
    const torn = size > 0 && readSync(fd, last, 0, 1, size - 1) === 1 && last[0] !== 0x0a;
    const data = Buffer.from((torn ? "\n" : "") + line.replace(/\n+$/, "") + "\n", "utf8");
    let done = 0;
    while (done < data.length) done += writeSync(fd, data, done, data.length - done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

// ---------------------------------------------------------------------------------------------
// One writer per run folder

/**
 * Run `fn` holding `<dir>/.lock` (created exclusively, holding our pid): a second downloader of
 * the same run (an orphaned `agent train` and an `agent watch`, say) waits for the first and then
 * finds its files verified, instead of both appending to one .partial. A lock whose pid is gone
 * is taken over.
 */
export async function withDirLock<T>(dir: string, fn: () => Promise<T>, opts: { waitMs?: number; onWait?: (pid: number) => void } = {}): Promise<T> {
  const lock = join(dir, ".lock");
  const deadline = Date.now() + (opts.waitMs ?? 15 * 60_000);
  let told = false;
  for (;;) {
    try {
      writeFileSync(lock, String(process.pid), { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      const pid = Number(readFileSync(lock, "utf8").trim() || "0");
      if (!pid || !isAlive(pid)) {
        rmSync(lock, { force: true }); // its holder died
        continue;
      }
      if (Date.now() > deadline) throw new Error(`${lock}: held by pid ${pid} for too long`);
      if (!told) opts.onWait?.(pid);
      told = true;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

// ---------------------------------------------------------------------------------------------
// User mistakes

/**
 * A mistake in what the user gave (a missing file, malformed JSON, an unknown key or flag, a bad
 * number): cli.ts prints the message as one line and exits 2, never a stack trace. The message
 * names the file (with line and column where there is one) and the field.
 */
export class UserError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UserError";
  }
}

/** "path:line:col" for a character offset into `text` (1-based line and column). */
export function lineColumn(text: string, offset: number): { line: number; column: number } {
  const before = text.slice(0, Math.max(0, Math.min(offset, text.length)));
  const lines = before.split("\n");
  return { line: lines.length, column: lines[lines.length - 1].length + 1 };
}

/** Parse a JSON file; a missing file or a syntax error is a UserError naming path:line:col. */
export function readJsonFile(path: string): unknown {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UserError(code === "ENOENT" ? `${path}: no such file` : `${path}: cannot read: ${(err as Error).message}`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    const message = (err as Error).message;
    const m = /at position (\d+)/.exec(message);
    const at = m ? lineColumn(text, Number(m[1])) : /end of JSON input/.test(message) ? lineColumn(text, text.length) : undefined;
    const why = message.replace(/ in JSON at position \d+.*$/, "").replace(/^JSON\.parse: /, "");
    throw new UserError(`${path}${at ? `:${at.line}:${at.column}` : ""}: not valid JSON: ${why}`);
  }
}

/** " (did you mean X?)" for the option nearest to `word` (edit distance), or "". */
export function didYouMean(word: string, options: Iterable<string>): string {
  let best = "";
  let bestD = Infinity;
  for (const o of options) {
    const d = editDistance(word.toLowerCase(), o.toLowerCase());
    if (d < bestD) [best, bestD] = [o, d];
  }
  return best && bestD <= Math.max(2, Math.floor(word.length / 3)) ? ` (did you mean ${best}?)` : "";
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++) {
      cur[j] = Math.min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    prev = cur;
  }
  return prev[b.length];
}
