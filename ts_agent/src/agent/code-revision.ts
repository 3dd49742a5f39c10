/**
 * Which code produced a record (eval.json, baseline.json, sweep and compare records, report.md):
 * the agent's package version, the git commit and a dirty flag of its checkout, and a hash of its
 * grader code. The sidecar reports its own in every Evaluate (EvalFingerprint.code_revision,
 * py_trainer/core/code_revision.py). inspect_ai's EvalLog carries the revision; nanochat's report header
 * the commit and a dirty flag.
 *
 * - gitCommit is read from the .git folder (HEAD, a loose ref or packed-refs): no git binary needed.
 * - gitDirty asks `git status --porcelain --untracked-files=no` once per process; null when git
 *   cannot be asked (no binary, not a checkout, or a test tier that forbids processes).
 * - graderSha256 hashes the files that decide how the agent re-grades a score, as the lines
 *   "<file> <sha256>\n" in a fixed order: ts_agent/src/agent/core/task-rewards.ts, answer-text.ts and
 *   answer-forms.ts beside it, and the shared py_trainer/py_trainer/core/char_classes.json.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";

import { REPO_ROOT } from "./workspace.js";

export interface CodeRevision {
  packageVersion: string;
  /** "" when the agent does not run from a git checkout */
  gitCommit: string;
  /** tracked files differ from gitCommit; null = git could not be asked */
  gitDirty: boolean | null;
  graderSha256: string;
}

export const GRADER_FILES = [
  join(REPO_ROOT, "ts_agent", "src", "agent", "core", "task-rewards.ts"),
  join(REPO_ROOT, "ts_agent", "src", "agent", "core", "answer-text.ts"),
  join(REPO_ROOT, "ts_agent", "src", "agent", "core", "answer-forms.ts"),
  join(REPO_ROOT, "py_trainer", "py_trainer", "core", "char_classes.json"),
];

function sha256(data: string | Buffer): string {
  return createHash("sha256").update(data).digest("hex");
}

/** sha256 of the lines "<file name> <sha256 of its bytes>\n" over `files`, in order. */
export function graderSha256(files: ReadonlyArray<string> = GRADER_FILES): string {
  return sha256(files.map((f) => `${basename(f)} ${sha256(readFileSync(f))}\n`).join(""));
}

/** [checkout folder, its .git folder] holding `start`; a worktree's `.git` file is followed. */
export function findCheckout(start: string): [string, string] | null {
  let folder = resolve(start);
  for (;;) {
    const dotGit = join(folder, ".git");
    if (existsSync(dotGit)) {
      if (statSync(dotGit).isDirectory()) return [folder, dotGit];
      const text = readFileSync(dotGit, "utf8").trim();
      if (text.startsWith("gitdir:")) return [folder, resolve(folder, text.slice("gitdir:".length).trim())];
    }
    const up = dirname(folder);
    if (up === folder) return null;
    folder = up;
  }
}

function readIfFile(path: string): string | null {
  return existsSync(path) && statSync(path).isFile() ? readFileSync(path, "utf8") : null;
}

/** The commit HEAD names: a detached hash, a loose ref, or a packed-refs line; "" if unknown. */
export function headCommit(gitDir: string): string {
  const head = readIfFile(join(gitDir, "HEAD"))?.trim();
  if (!head) return "";
  if (!head.startsWith("ref:")) return head;
  const ref = head.slice("ref:".length).trim();
  const commonDirFile = readIfFile(join(gitDir, "commondir"));
  const common = commonDirFile ? resolve(gitDir, commonDirFile.trim()) : gitDir;
  for (const base of [gitDir, common]) {
    const loose = readIfFile(join(base, ref));
    if (loose) return loose.trim();
  }
  for (const line of (readIfFile(join(common, "packed-refs")) ?? "").split("\n")) {
    const parts = line.trim().split(/\s+/);
    if (parts.length === 2 && parts[1] === ref) return parts[0]!;
  }
  return "";
}

/** `git status --porcelain --untracked-files=no` is non-empty; null when git cannot be asked. */
export function isDirty(checkout: string): boolean | null {
  try {
    const out = execFileSync("git", ["status", "--porcelain", "--untracked-files=no"], {
      cwd: checkout,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
      timeout: 10_000,
    });
    return out.trim() !== "";
  } catch {
    return null;
  }
}

let cached: CodeRevision | undefined;

/** The agent's own code revision (computed once per process). */
export function codeRevision(): CodeRevision {
  if (cached) return cached;
  const pkg = JSON.parse(readFileSync(join(REPO_ROOT, "ts_agent", "package.json"), "utf8")) as { version?: string };
  const found = findCheckout(REPO_ROOT);
  const gitCommit = found ? headCommit(found[1]) : "";
  cached = {
    packageVersion: pkg.version ?? "",
    gitCommit,
    gitDirty: found && gitCommit ? isDirty(found[0]) : null,
    graderSha256: graderSha256(),
  };
  return cached;
}

/** "0.1.0 @ 1a2b3c4d5e6f (dirty), grader 5e6f7a8b9c0d": one revision in a line. */
export function describeRevision(rev: CodeRevision): string {
  const commit = rev.gitCommit
    ? ` @ ${rev.gitCommit.slice(0, 12)}${rev.gitDirty ? " (dirty)" : rev.gitDirty === null ? " (dirty: unknown)" : ""}`
    : " (not a git checkout)";
  return `${rev.packageVersion}${commit}, grader ${rev.graderSha256.slice(0, 12)}`;
}

/** The report header's line: this agent's revision and, when the eval recorded it, the sidecar's. */
export function codeLine(sidecar: CodeRevision | null | undefined): string {
  return `Code: agent ${describeRevision(codeRevision())}; sidecar ${sidecar ? describeRevision(sidecar) : "not recorded (eval.json predates it, or no eval yet)"}.`;
}
