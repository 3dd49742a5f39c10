/**
 * A task split as evaluated: the rows of one split of a task file (at most `limit`), the file's
 * sha256 (the task set's identity: baseline and eval must agree on it), what the file declares
 * (label set, slice field, templates) and the optional human labels. The held-out-template
 * companion of the "test" split comes from the same file.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import type { AgentTaskRef, TaskSetRef } from "../core/eval-log.js";
import type { AgentTask } from "../agent-task/define.js";
import { REPO_ROOT, UserError, displayPath } from "../workspace.js";
import { HELDOUT_TEMPLATE_SPLIT, type Split, type TaskFormat, type TaskRow } from "../core/task-format.js";
import { loadTaskFile, splitTasks } from "./tasks.js";

/** A task split as evaluated: where it came from and which rows. */
export interface TaskSet {
  /** repo-relative when inside the repo, else absolute */
  path: string;
  /** lowercase hex sha256 of the task file's bytes */
  sha256: string;
  split: Split;
  limit: number;
  rows: TaskRow[];
  /** optional human annotations: task id -> the label a human assigned */
  humanLabels: Map<string, string>;
  /** what the file declares; absent: labels from the rows, slice field "slice" */
  format?: TaskFormat;
  /** an agent task file (agent-task-set.ts): its tools and scorers, served by this process while
   *  the sidecar runs episodes; the scores are its scorers', no grader re-grades them */
  agent?: { task: AgentTask; ref: AgentTaskRef };
}

/** The format of a task set that carries none (a set built in code): inferred from its rows. */
export function formatOf(ts: Pick<TaskSet, "rows" | "format">): TaskFormat {
  if (ts.format) return ts.format;
  const labelled = ts.rows.length > 0 && ts.rows.every((r) => r.label !== undefined);
  return {
    labelField: "label",
    labels: labelled ? [...new Set(ts.rows.map((r) => r.label!))].sort() : null,
    sliceField: "slice",
    hasSlices: ts.rows.length > 0 && ts.rows.every((r) => r.slice !== undefined),
    hasTemplates: ts.rows.length > 0 && ts.rows.every((r) => r.template !== undefined),
    splits: [...new Set(ts.rows.map((r) => r.split))],
  };
}

/** Load the task file, take one split (and at most `limit` rows), hash the file, read human labels. */
export function loadTaskSet(path: string, split: Split, limit = 0): TaskSet {
  const file = loadTaskFile(path);
  const sha256 = createHash("sha256").update(readFileSync(path)).digest("hex");
  let rows = splitTasks(file.rows, split);
  if (limit > 0) rows = rows.slice(0, limit);
  if (rows.length === 0) {
    const have = [...new Set(file.rows.map((r) => r.split))].join(", ");
    throw new UserError(`${path}: no tasks in split ${JSON.stringify(split)} (the file has ${have})`);
  }
  return { path: displayPath(path), sha256, split, limit, rows, humanLabels: file.humanLabels, format: file.format };
}

/**
 * The held-out-template companion of an in-distribution test set: the same file's
 * "test_heldout_template" rows (same limit), or null when the evaluated split is not "test" or the
 * file has none.
 */
export function heldOutTemplateSetFor(taskSet: TaskSet): TaskSet | null {
  if (taskSet.split !== "test" || taskSet.agent) return null;
  const path = resolve(REPO_ROOT, taskSet.path);
  const rows = splitTasks(loadTaskFile(path).rows, HELDOUT_TEMPLATE_SPLIT);
  if (rows.length === 0) return null;
  return { ...taskSet, split: HELDOUT_TEMPLATE_SPLIT, rows: taskSet.limit > 0 ? rows.slice(0, taskSet.limit) : rows };
}

export function taskSetRef(ts: TaskSet): TaskSetRef {
  const f = formatOf(ts);
  return {
    path: ts.path,
    sha256: ts.sha256,
    split: ts.split,
    n: ts.rows.length,
    sliceField: f.sliceField,
    labelField: f.labelField,
    labels: f.labels,
    hasTemplates: f.hasTemplates,
  };
}
