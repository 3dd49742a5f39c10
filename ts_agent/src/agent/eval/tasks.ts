/**
 * The AML typology task set: read a short case narrative, name the money-laundering typology.
 * This file generates the rows (narratives.ts writes each case's text), writes them as JSONL and
 * loads a task file back with validation. The checked-in agent-evals/tasks/aml_typology.jsonl is
 * reproducible byte for byte:
 *
 *   cd ts_agent && node_modules/.bin/tsx src/agent/eval/tasks.ts --write   # regenerate
 *   cd ts_agent && node_modules/.bin/tsx src/agent/eval/tasks.ts --check   # exit 1 if stale
 *
 * The split is stratified by typology: exactly round(testFraction * perTypology) test rows per
 * typology, chosen by the seeded PRNG. "test" shares its 5 templates per typology with "train"
 * (an in-distribution test); "test_heldout_template" (heldOutPerTypology rows per typology,
 * appended after them) comes from 2 more templates per typology that no other row uses.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { REPO_ROOT, UserError, writeFileAtomic } from "../workspace.js";
import { HELDOUT_TEMPLATES, TEMPLATES, TaskRng, composeNarrative, drawSlots, mulberry32, type Template } from "./narratives.js";
import { LABELS, SPLITS, TYPOLOGIES, formatPrompt, type Split, type TaskRow } from "./typologies.js";

// ---------------------------------------------------------------------------------------------
// Options

export interface GenerateOptions {
  /** PRNG seed (uint32). */
  seed?: number;
  /** Cases per typology; the file holds perTypology * TYPOLOGIES.length rows. */
  perTypology?: number;
  /** Fraction of each typology's cases in the test split, rounded to a whole count. */
  testFraction?: number;
  /** Extra cases per typology from the held-out templates (split "test_heldout_template"). */
  heldOutPerTypology?: number;
}

export const DEFAULT_SEED = 20261129;
export const DEFAULT_PER_TYPOLOGY = 110;
export const DEFAULT_TEST_FRACTION = 0.3;
/** 30 per typology: 240 held-out-template cases, as many as the test split. */
export const DEFAULT_HELDOUT_PER_TYPOLOGY = 30;
/** The held-out-template rows draw from their own stream (seed XOR this), so adding them left the
 *  train and test rows, and the embedded model built from the train split, byte for byte as before. */
export const HELDOUT_SEED_SALT = 0x5eed7e57;

/** Repo-root-relative location of the checked-in task file. */
export const TASKS_RELATIVE_PATH = "agent-evals/tasks/aml_typology.jsonl";

export function defaultTasksPath(): string {
  return resolve(REPO_ROOT, TASKS_RELATIVE_PATH);
}

// ---------------------------------------------------------------------------------------------
// Generator

function padId(n: number): string {
  return `aml-${String(n).padStart(5, "0")}`;
}

/** A narrative from `template` that is not in `seen` yet (added to it); `what` names the template. */
function newNarrative(template: Template, r: TaskRng, seen: Set<string>, what: string): string {
  for (let attempt = 0; ; attempt++) {
    const s = drawSlots(r);
    const narrative = composeNarrative(template(s, r), s, r);
    if (!seen.has(narrative)) {
      seen.add(narrative);
      return narrative;
    }
    if (attempt > 100) throw new Error(`cannot draw a new narrative for ${what}`);
  }
}

/** The full task set for a seed; same options -> same rows (and same bytes via toJsonl). */
export function generateAmlTasks(options: GenerateOptions = {}): TaskRow[] {
  const seed = options.seed ?? DEFAULT_SEED;
  const perTypology = options.perTypology ?? DEFAULT_PER_TYPOLOGY;
  const testFraction = options.testFraction ?? DEFAULT_TEST_FRACTION;
  if (!Number.isInteger(perTypology) || perTypology < 1) throw new Error(`perTypology must be a positive integer, got ${perTypology}`);
  if (!(testFraction >= 0 && testFraction <= 1)) throw new Error(`testFraction must be in [0, 1], got ${testFraction}`);
  const r = new TaskRng(mulberry32(seed));
  const seen = new Set<string>();
  const draft: Omit<TaskRow, "id">[] = [];
  for (const t of TYPOLOGIES) {
    const templates = TEMPLATES[t.label];
    const nTest = Math.round(testFraction * perTypology);
    const testIdx = new Set(r.sample([...Array(perTypology).keys()], nTest));
    for (let i = 0; i < perTypology; i++) {
      const k = i % templates.length; // every template used equally often
      const narrative = newNarrative(templates[k], r, seen, `${t.label}/${k + 1}`);
      draft.push({
        split: testIdx.has(i) ? "test" : "train",
        typology: t.label,
        prompt: formatPrompt(narrative),
        answers: [...t.answers],
        narrative,
        template: `${t.label}/${k + 1}`,
      });
    }
  }
  // Shuffle so that a prefix of the file is a mixed sample, then number the rows.
  const main = r.shuffle(draft).map((row, i) => ({ id: padId(i + 1), ...row }));
  // Held-out-template rows come after, from their own stream (see HELDOUT_SEED_SALT).
  const heldOutPerTypology = options.heldOutPerTypology ?? DEFAULT_HELDOUT_PER_TYPOLOGY;
  const h = new TaskRng(mulberry32((seed ^ HELDOUT_SEED_SALT) >>> 0));
  const extra: Omit<TaskRow, "id">[] = [];
  for (const t of TYPOLOGIES) {
    const templates = HELDOUT_TEMPLATES[t.label];
    for (let i = 0; i < heldOutPerTypology; i++) {
      const k = i % templates.length;
      const narrative = newNarrative(templates[k], h, seen, `${t.label}/heldout-${k + 1}`);
      extra.push({
        split: "test_heldout_template",
        typology: t.label,
        prompt: formatPrompt(narrative),
        answers: [...t.answers],
        narrative,
        template: `${t.label}/heldout-${k + 1}`,
      });
    }
  }
  return [...main, ...h.shuffle(extra).map((row, i) => ({ id: padId(main.length + i + 1), ...row }))];
}

/** One JSON object per line, fields in the documented order, trailing newline. */
export function toJsonl(rows: readonly TaskRow[]): string {
  return rows
    .map((row) =>
      JSON.stringify({
        id: row.id,
        split: row.split,
        typology: row.typology,
        prompt: row.prompt,
        answers: row.answers,
        narrative: row.narrative,
        template: row.template,
      }),
    )
    .join("\n") + "\n";
}

export function splitTasks(rows: readonly TaskRow[], split: Split): TaskRow[] {
  return rows.filter((row) => row.split === split);
}

// ---------------------------------------------------------------------------------------------
// Loader

// a bad task file is the user's mistake: the CLI prints it as one line, exit 2
function fail(path: string, line: number, message: string): never {
  throw new UserError(`${path}:${line}: ${message}`);
}

function requireString(obj: Record<string, unknown>, field: string, path: string, line: number): string {
  const v = obj[field];
  if (typeof v !== "string" || v.length === 0) fail(path, line, `field "${field}" must be a non-empty string`);
  return v;
}

/**
 * Reads and validates a task JSONL file. Blank lines are skipped; any other bad line throws an
 * UserError whose message starts with "<path>:<1-based line>:" and names the bad field.
 */
export function loadTasks(path: string): TaskRow[] {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new UserError(`${path}: cannot read the task file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const rows: TaskRow[] = [];
  const ids = new Set<string>();
  const labels = new Set(LABELS);
  text.split("\n").forEach((raw, i) => {
    const line = i + 1;
    if (raw.trim() === "") return;
    let obj: unknown;
    try {
      obj = JSON.parse(raw);
    } catch (e) {
      fail(path, line, `invalid JSON (${(e as Error).message})`);
    }
    if (typeof obj !== "object" || obj === null || Array.isArray(obj)) fail(path, line, "row must be a JSON object");
    const o = obj as Record<string, unknown>;
    const id = requireString(o, "id", path, line);
    if (ids.has(id)) fail(path, line, `field "id" duplicates ${JSON.stringify(id)}`);
    ids.add(id);
    const split = o.split;
    if (!SPLITS.includes(split as Split)) fail(path, line, `field "split" must be one of ${SPLITS.join(", ")}, got ${JSON.stringify(split)}`);
    const typology = requireString(o, "typology", path, line);
    if (!labels.has(typology)) fail(path, line, `field "typology" must be one of ${LABELS.join(", ")}, got ${JSON.stringify(typology)}`);
    const prompt = requireString(o, "prompt", path, line);
    const answers = o.answers;
    if (!Array.isArray(answers) || answers.length === 0 || !answers.every((a) => typeof a === "string" && a.length > 0)) {
      fail(path, line, `field "answers" must be a non-empty array of non-empty strings`);
    }
    if (answers[0] !== typology) fail(path, line, `field "answers" must start with the typology ${JSON.stringify(typology)}`);
    const narrative = requireString(o, "narrative", path, line);
    const template = requireString(o, "template", path, line);
    rows.push({ id, split: split as Split, typology, prompt, answers: answers as string[], narrative, template });
  });
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Entry point

const USAGE = `usage: tasks.ts (--write | --check) [--out PATH]
  --write      generate the task set with the default seed and write it atomically
  --check      exit 1 if the file differs from a fresh generation
  --out PATH   file to write or check (default: <repo>/${TASKS_RELATIVE_PATH})`;

export function main(argv: string[]): number {
  let mode: "write" | "check" | undefined;
  let out = defaultTasksPath();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--write" || a === "--check") mode = a === "--write" ? "write" : "check";
    else if (a === "--out" && i + 1 < argv.length) out = resolve(argv[++i]);
    else {
      console.error(USAGE);
      return 2;
    }
  }
  if (!mode) {
    console.error(USAGE);
    return 2;
  }
  const rows = generateAmlTasks();
  const data = toJsonl(rows);
  if (mode === "check") {
    let current = "";
    try {
      current = readFileSync(out, "utf8");
    } catch {
      // missing file reads as stale
    }
    if (current !== data) {
      console.error(`${out} is stale; regenerate with: tsx src/agent/eval/tasks.ts --write`);
      return 1;
    }
    console.log(`${out} is up to date (${rows.length} rows)`);
    return 0;
  }
  writeFileAtomic(out, data);
  const counts = SPLITS.map((sp) => `${splitTasks(rows, sp).length} ${sp}`).join(", ");
  console.log(`wrote ${out}: ${rows.length} rows (${counts})`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
