/**
 * The AML typology task set: read a short case narrative, name the money-laundering typology.
 * This file generates the rows (narratives.ts writes each case's text) and writes them as JSONL
 * with their metadata (aml_typology.meta.json: `typology` is both the label and the slice field;
 * tasks.ts loads any task file). The checked-in agent-evals/tasks/aml_typology.jsonl is
 * reproducible byte for byte:
 *
 *   cd ts_agent && node_modules/.bin/tsx src/task-sets/aml-tasks.ts --write   # regenerate
 *   cd ts_agent && node_modules/.bin/tsx src/task-sets/aml-tasks.ts --check   # exit 1 if stale
 *
 * The split is stratified by typology: exactly round(testFraction * perTypology) test rows per
 * typology, chosen by the seeded PRNG. "test" shares its 5 templates per typology with "train"
 * (an in-distribution test); "test_heldout_template" (heldOutPerTypology rows per typology,
 * appended after them) comes from 2 more templates per typology that no other row uses.
 */
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

import { REPO_ROOT, writeFileAtomic } from "../agent/workspace.js";
import { SPLITS, TASKS_RELATIVE_PATH, type TaskRow } from "../agent/core/task-format.js";
import { HELDOUT_TEMPLATES, TEMPLATES, composeNarrative, drawSlots, type Template } from "./narratives.js";
import { TaskRng, mulberry32 } from "./task-rng.js";
import { LABELS, TYPOLOGIES, formatPrompt } from "./typologies.js";

/** A row of the AML file: its typology is its label and its slice (aml_typology.meta.json). */
export interface AmlRow extends TaskRow {
  typology: string;
  narrative: string;
  template: string;
}

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

/** The metadata that declares the AML file's typology as its label and slice field. */
export function amlMeta(): Record<string, unknown> {
  return {
    description: "AML typology identification: read a case narrative, name its money-laundering typology",
    generator: "cd ts_agent && node_modules/.bin/tsx src/task-sets/aml-tasks.ts --write",
    label_field: "typology",
    labels: [...LABELS],
    slice_field: "typology",
    splits: [...SPLITS],
  };
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

/** One row before it is numbered: the typology is its label and its slice (aml_typology.meta.json). */
function amlRow(split: string, t: (typeof TYPOLOGIES)[number], narrative: string, template: string): Omit<AmlRow, "id"> {
  return { split, typology: t.label, label: t.label, slice: t.label, prompt: formatPrompt(narrative), answers: [...t.answers], narrative, template };
}

/** The full task set for a seed; same options -> same rows (and same bytes via toJsonl). */
export function generateAmlTasks(options: GenerateOptions = {}): AmlRow[] {
  const seed = options.seed ?? DEFAULT_SEED;
  const perTypology = options.perTypology ?? DEFAULT_PER_TYPOLOGY;
  const testFraction = options.testFraction ?? DEFAULT_TEST_FRACTION;
  if (!Number.isInteger(perTypology) || perTypology < 1) throw new Error(`perTypology must be a positive integer, got ${perTypology}`);
  if (!(testFraction >= 0 && testFraction <= 1)) throw new Error(`testFraction must be in [0, 1], got ${testFraction}`);
  const r = new TaskRng(mulberry32(seed));
  const seen = new Set<string>();
  const draft: Omit<AmlRow, "id">[] = [];
  for (const t of TYPOLOGIES) {
    const templates = TEMPLATES[t.label];
    const nTest = Math.round(testFraction * perTypology);
    const testIdx = new Set(r.sample([...Array(perTypology).keys()], nTest));
    for (let i = 0; i < perTypology; i++) {
      const k = i % templates.length; // every template used equally often
      const template = `${t.label}/${k + 1}`;
      draft.push(amlRow(testIdx.has(i) ? "test" : "train", t, newNarrative(templates[k], r, seen, template), template));
    }
  }
  // Shuffle so that a prefix of the file is a mixed sample, then number the rows.
  const main = r.shuffle(draft).map((row, i) => ({ id: padId(i + 1), ...row }));
  // Held-out-template rows come after, from their own stream (see HELDOUT_SEED_SALT).
  const heldOutPerTypology = options.heldOutPerTypology ?? DEFAULT_HELDOUT_PER_TYPOLOGY;
  const h = new TaskRng(mulberry32((seed ^ HELDOUT_SEED_SALT) >>> 0));
  const extra: Omit<AmlRow, "id">[] = [];
  for (const t of TYPOLOGIES) {
    const templates = HELDOUT_TEMPLATES[t.label];
    for (let i = 0; i < heldOutPerTypology; i++) {
      const k = i % templates.length;
      const template = `${t.label}/heldout-${k + 1}`;
      extra.push(amlRow("test_heldout_template", t, newNarrative(templates[k], h, seen, template), template));
    }
  }
  return [...main, ...h.shuffle(extra).map((row, i) => ({ id: padId(main.length + i + 1), ...row }))];
}

/** One JSON object per line, fields in the documented order, trailing newline. */
export function toJsonl(rows: readonly AmlRow[]): string {
  return (
    rows
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
      .join("\n") + "\n"
  );
}

// ---------------------------------------------------------------------------------------------
// Entry point

const USAGE = `usage: aml-tasks.ts (--write | --check) [--out PATH]
  --write      generate the task set with the default seed and write it and its .meta.json atomically
  --check      exit 1 if the file or its metadata differs from a fresh generation
  --out PATH   file to write or check (default: <repo>/${TASKS_RELATIVE_PATH})`;

export function main(argv: string[]): number {
  let mode: "write" | "check" | undefined;
  let out = resolve(REPO_ROOT, TASKS_RELATIVE_PATH);
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
  const metaOut = out.replace(/\.jsonl$/, "") + ".meta.json";
  const meta = JSON.stringify(amlMeta(), null, 2) + "\n";
  if (mode === "check") {
    for (const [file, want] of [
      [out, data],
      [metaOut, meta],
    ]) {
      let current = "";
      try {
        current = readFileSync(file, "utf8");
      } catch {
        // missing file reads as stale
      }
      if (current !== want) {
        console.error(`${file} is stale; regenerate with: tsx src/task-sets/aml-tasks.ts --write`);
        return 1;
      }
    }
    console.log(`${out} and its metadata are up to date (${rows.length} rows)`);
    return 0;
  }
  writeFileAtomic(out, data);
  writeFileAtomic(metaOut, meta);
  const counts = SPLITS.map((sp) => `${rows.filter((r) => r.split === sp).length} ${sp}`).join(", ");
  console.log(`wrote ${out}: ${rows.length} rows (${counts})`);
  return 0;
}

if (process.argv[1] && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  process.exitCode = main(process.argv.slice(2));
}
