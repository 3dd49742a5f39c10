/**
 * A task split as evaluated: the rows of one split of a task file (at most `limit`), the file's
 * sha256 (the task set's identity: baseline and eval must agree on it), and the optional human
 * labels. The held-out-template companion of the "test" split comes from the same file.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import { REPO_ROOT, displayPath } from "../workspace.js";
import { loadTasks, splitTasks } from "./tasks.js";
import type { Split, TaskRow } from "./typologies.js";

/** A task split as evaluated: where it came from and which rows. */
export interface TaskSet {
  /** repo-relative when inside the repo, else absolute */
  path: string;
  /** lowercase hex sha256 of the task file's bytes */
  sha256: string;
  split: Split;
  limit: number;
  rows: TaskRow[];
  /** optional human annotations: task id -> the typology a human assigned */
  humanLabels: Map<string, string>;
}

/** Load the task file, take one split (and at most `limit` rows), hash the file, read human labels. */
export function loadTaskSet(path: string, split: Split, limit = 0): TaskSet {
  const bytes = readFileSync(path);
  const sha256 = createHash("sha256").update(bytes).digest("hex");
  let rows = splitTasks(loadTasks(path), split);
  if (limit > 0) rows = rows.slice(0, limit);
  if (rows.length === 0) throw new Error(`${path}: no tasks in split ${JSON.stringify(split)}`);
  // loadTasks keeps only the documented fields; human_label is optional, so read it here.
  const humanLabels = new Map<string, string>();
  for (const line of bytes.toString("utf8").split("\n")) {
    if (line.trim() === "") continue;
    const obj = JSON.parse(line) as { id?: unknown; human_label?: unknown };
    if (typeof obj.id === "string" && typeof obj.human_label === "string" && obj.human_label !== "") {
      humanLabels.set(obj.id, obj.human_label);
    }
  }
  return { path: displayPath(path), sha256, split, limit, rows, humanLabels };
}

/**
 * The held-out-template companion of an in-distribution test set: the same file's
 * "test_heldout_template" rows (same limit), or null when the evaluated split is not "test" or the
 * file has none.
 */
export function heldOutTemplateSetFor(taskSet: TaskSet): TaskSet | null {
  if (taskSet.split !== "test") return null;
  const path = resolve(REPO_ROOT, taskSet.path);
  const rows = splitTasks(loadTasks(path), "test_heldout_template");
  if (rows.length === 0) return null;
  return { ...taskSet, split: "test_heldout_template", rows: taskSet.limit > 0 ? rows.slice(0, taskSet.limit) : rows };
}

/** A task set as a log or baseline names it (no rows). */
export interface TaskSetRef {
  path: string;
  sha256: string;
  split: Split;
  /** tasks evaluated */
  n: number;
}

export function taskSetRef(ts: TaskSet): TaskSetRef {
  return { path: ts.path, sha256: ts.sha256, split: ts.split, n: ts.rows.length };
}
