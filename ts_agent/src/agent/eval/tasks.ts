/**
 * Loads a task file in the documented format (docs/tasks.md, core/task-format.ts) with its optional
 * `<name>.meta.json`. Every mistake is a UserError "<file>:<line>: field "<name>" ..." (the CLI
 * prints it as one line, exit 2); nothing is specific to one task set.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";

import { REPO_ROOT, UserError } from "../workspace.js";
import { SPLITS, TASKS_RELATIVE_PATH, type Split, type TaskFormat, type TaskRow } from "../core/task-format.js";

export { TASKS_RELATIVE_PATH };

export function defaultTasksPath(): string {
  return resolve(REPO_ROOT, TASKS_RELATIVE_PATH);
}

/** `<dir>/<name>.meta.json` beside `<dir>/<name>.jsonl` (or beside `<file>` for another extension). */
export function metaPathFor(tasksPath: string): string {
  return tasksPath.replace(/\.jsonl$/, "") + ".meta.json";
}

/** A task file as loaded: its rows, what it declares, the human labels. */
export interface TaskFile {
  rows: TaskRow[];
  format: TaskFormat;
  /** task id -> the label a human annotator assigned (`human_label`) */
  humanLabels: Map<string, string>;
}

// ---------------------------------------------------------------------------------------------
// Metadata

interface Meta {
  label_field?: string;
  labels?: string[];
  slice_field?: string;
  splits?: string[];
  graders?: string[];
}

const META_KEYS = ["label_field", "labels", "slice_field", "splits", "graders", "description", "generator"];

function nonEmptyStrings(v: unknown): v is string[] {
  return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === "string" && x.length > 0);
}

function readMeta(path: string): Meta {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return {};
    throw new UserError(`${path}: cannot read the task metadata (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  let obj: unknown;
  try {
    obj = JSON.parse(text);
  } catch (e) {
    throw new UserError(`${path}: invalid JSON (${(e as Error).message})`);
  }
  if (typeof obj !== "object" || obj === null || Array.isArray(obj)) throw new UserError(`${path}: the metadata must be a JSON object`);
  const m = obj as Record<string, unknown>;
  for (const key of Object.keys(m)) {
    if (!META_KEYS.includes(key)) throw new UserError(`${path}: unknown field "${key}" (known: ${META_KEYS.join(", ")})`);
  }
  for (const key of ["label_field", "slice_field"] as const) {
    if (key in m && (typeof m[key] !== "string" || m[key] === "")) throw new UserError(`${path}: field "${key}" must be a non-empty string`);
  }
  for (const key of ["labels", "splits", "graders"] as const) {
    if (key in m && !nonEmptyStrings(m[key])) throw new UserError(`${path}: field "${key}" must be a non-empty array of non-empty strings`);
    if (key in m && new Set(m[key] as string[]).size !== (m[key] as string[]).length) throw new UserError(`${path}: field "${key}" repeats a value`);
  }
  return m as Meta;
}

// ---------------------------------------------------------------------------------------------
// Rows

// a bad task file is the user's mistake: the CLI prints it as one line, exit 2
function fail(path: string, line: number, message: string): never {
  throw new UserError(`${path}:${line}: ${message}`);
}

/** An optional string field: absent (undefined) or a non-empty string. */
function optionalString(obj: Record<string, unknown>, field: string, path: string, line: number): string | undefined {
  const v = obj[field];
  if (v === undefined) return undefined;
  if (typeof v !== "string" || v.length === 0) fail(path, line, `field "${field}" must be a non-empty string`);
  return v;
}

function requireString(obj: Record<string, unknown>, field: string, path: string, line: number): string {
  const v = optionalString(obj, field, path, line);
  if (v === undefined) fail(path, line, `field "${field}" is required (a non-empty string)`);
  return v;
}

/** An optional field must be on every row or on none; `lines` are the rows' line numbers. */
function allOrNone(rows: TaskRow[], lines: number[], has: (r: TaskRow) => boolean, field: string, path: string): boolean {
  const n = rows.filter(has).length;
  if (n === 0 || n === rows.length) return n > 0;
  const i = rows.findIndex((r) => !has(r));
  fail(path, lines[i], `field "${field}" is missing here but other rows have it (give it on every row or on none)`);
}

/** Deeper JSON than this is refused, as the sidecar refuses it (py_trainer/data/task_file.py: a row's
 *  metadata becomes a protobuf Struct there, whose limit is 100 message levels). */
export const MAX_JSON_DEPTH = 32;

/** Nesting depth of a parsed JSON value, counted level by level; stops counting past `limit`. */
function jsonDepth(obj: unknown, limit: number): number {
  let depth = 0;
  let level: unknown[] = [obj];
  while (level.length && depth <= limit) {
    depth++;
    level = level.flatMap((o) => (o !== null && typeof o === "object" ? Object.values(o as object) : [])).filter((v) => v !== null && typeof v === "object");
  }
  return depth;
}

function splitLines(bytes: Buffer): Buffer[] {
  const out: Buffer[] = [];
  let start = 0;
  for (let i = bytes.indexOf(10); i !== -1; i = bytes.indexOf(10, start)) {
    out.push(bytes.subarray(start, i));
    start = i + 1;
  }
  out.push(bytes.subarray(start));
  return out;
}

const STRICT_UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A line's text; bytes that are not UTF-8 are refused naming the first one (as the sidecar does). */
function utf8Line(chunk: Buffer, path: string, line: number): string {
  try {
    return STRICT_UTF8.decode(chunk);
  } catch {
    const loose = chunk.toString("utf8");
    const at = Buffer.byteLength(loose.slice(0, loose.indexOf("\uFFFD")));
    fail(path, line, `not UTF-8 (byte 0x${chunk[at].toString(16).padStart(2, "0")} at column ${at + 1})`);
  }
}

/**
 * Reads and validates a task file and its metadata. Blank lines are skipped; any other bad line
 * throws a UserError whose message starts with "<path>:<1-based line>:" and names the field.
 */
export function loadTaskFile(path: string): TaskFile {
  const meta = readMeta(metaPathFor(path));
  let bytes: Buffer;
  try {
    bytes = readFileSync(path);
  } catch (err) {
    throw new UserError(`${path}: cannot read the task file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const labelField = meta.label_field ?? "label";
  const sliceField = meta.slice_field ?? "slice";
  const splits = meta.splits ?? [...SPLITS];
  const declared = meta.labels ? new Set(meta.labels) : null;
  const rows: TaskRow[] = [];
  const lines: number[] = [];
  const ids = new Set<string>();
  const humanLabels = new Map<string, string>();
  splitLines(bytes).forEach((chunk, i) => {
    const line = i + 1;
    const raw = utf8Line(chunk, path, line);
    if (raw.trim() === "") return;
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (e) {
      fail(path, line, `invalid JSON (${(e as Error).message})`);
    }
    if (jsonDepth(obj, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) fail(path, line, `nested too deeply (at most ${MAX_JSON_DEPTH} levels)`);
    if (typeof obj !== "object" || obj === null || Array.isArray(obj)) fail(path, line, "row must be a JSON object");
    const o = obj as Record<string, unknown>;
    const id = requireString(o, "id", path, line);
    if (ids.has(id)) fail(path, line, `field "id" duplicates ${JSON.stringify(id)}`);
    ids.add(id);
    const split = o.split;
    if (typeof split !== "string" || !splits.includes(split))
      fail(path, line, `field "split" must be one of ${splits.join(", ")}, got ${JSON.stringify(split)}`);
    const prompt = requireString(o, "prompt", path, line);
    const answers = o.answers;
    if (!nonEmptyStrings(answers)) fail(path, line, `field "answers" must be a non-empty array of non-empty strings`);
    const label = optionalString(o, labelField, path, line);
    if (declared && label === undefined) fail(path, line, `field "${labelField}" is required: the metadata declares a label set`);
    if (label !== undefined && declared && !declared.has(label))
      fail(path, line, `field "${labelField}" must be one of ${[...declared].join(", ")}, got ${JSON.stringify(label)}`);
    if (label !== undefined && answers[0] !== label) fail(path, line, `field "answers" must start with the ${labelField} ${JSON.stringify(label)}`);
    const slice = optionalString(o, sliceField, path, line);
    const template = optionalString(o, "template", path, line);
    const human = optionalString(o, "human_label", path, line);
    if (human !== undefined && declared && !declared.has(human))
      fail(path, line, `field "human_label" must be one of ${[...declared].join(", ")}, got ${JSON.stringify(human)}`);
    if (human !== undefined) humanLabels.set(id, human);
    const row: TaskRow = { id, split, prompt, answers: [...answers] };
    if (label !== undefined) row.label = label;
    if (slice !== undefined) row.slice = slice;
    if (template !== undefined) row.template = template;
    rows.push(row);
    lines.push(line);
  });
  if (rows.length === 0) throw new UserError(`${path}: no tasks (the file is empty)`);
  const labelled = allOrNone(rows, lines, (r) => r.label !== undefined, labelField, path);
  const hasSlices = allOrNone(rows, lines, (r) => r.slice !== undefined, sliceField, path);
  const hasTemplates = allOrNone(rows, lines, (r) => r.template !== undefined, "template", path);
  const labels = meta.labels ? [...meta.labels] : labelled ? [...new Set(rows.map((r) => r.label!))].sort() : null;
  return { rows, humanLabels, format: { labelField, labels, sliceField, hasSlices, hasTemplates, splits, graders: meta.graders ?? null } };
}

/** The rows of a task file (loadTaskFile without the rest). */
export function loadTasks(path: string): TaskRow[] {
  return loadTaskFile(path).rows;
}

export function splitTasks<R extends TaskRow>(rows: readonly R[], split: Split): R[] {
  return rows.filter((row) => row.split === split);
}
