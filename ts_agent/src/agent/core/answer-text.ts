/**
 * What every task reward reads: the answer text of a completion. The rewards are in task-rewards.ts;
 * the Python port is py_trainer/py_trainer/core/answer_text.py (same names in snake_case;
 * task_rewards.py re-exports its public names, and `make parity` holds them to this file).
 *
 * - normalizeAnswer's text rules are explicit so both languages agree: whitespace is the set
 *   [ \t\n\r\f\v\u00a0]; case folding maps each code point through the checked-in table's
 *   "lowercase" entries (context-free: no final-sigma rule); punctuation is any code point in the
 *   table's "punctuation_or_symbol" ranges (Unicode categories P* and S*), replaced by a space.
 *   The table is py_trainer/py_trainer/core/char_classes.json, written once by
 *   src/parity/char_classes.ts and loaded by both languages, so neither runtime's own Unicode
 *   version (Node 20: 17, CPython 3.11: 14) decides what a grader sees.
 * - extractAnswer reads the last <tag>...</tag>; a tag is a plain name (TAG_NAME).
 * - Bad input throws RewardInputError with a stable `kind` (RewardErrorKind), the same kinds in
 *   the same order of checks as the Python port; every reward in task-rewards.ts throws it too.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

// ---------------------------------------------------------------------------------------------
// Errors

/** Stable error kinds, identical in the Python port. */
export type RewardErrorKind =
  | "empty" // no rewards, or no usable gold answer
  | "group_size" // group size not a positive integer, or does not divide the batch
  | "nan" // NaN where a number is required (e.g. eps, a weight)
  | "out_of_range" // Infinity, a negative eps
  | "bad_option" // an option outside its allowed values (e.g. scale)
  | "unknown_reward" // a registry name that does not exist
  | "unknown_param" // a param the reward does not take
  | "param_type" // a param (or weight) of the wrong type
  | "param_value"; // a param of the right type but an invalid value

/** Thrown for invalid input; `kind` is stable and matches the Python port's RewardInputError. */
export class RewardInputError extends Error {
  readonly kind: RewardErrorKind;
  constructor(kind: RewardErrorKind, message: string) {
    super(message);
    this.name = "RewardInputError";
    this.kind = kind;
  }
}

/** Throws RewardInputError(kind, message); every reward's checks go through it. */
export function fail(kind: RewardErrorKind, message: string): never {
  throw new RewardInputError(kind, message);
}

// ---------------------------------------------------------------------------------------------
// Whitespace and character classes

const WHITESPACE_RUN = /[ \t\n\r\f\v\u00a0]+/g;
const EDGE_WHITESPACE = /^[ \t\n\r\f\v\u00a0]+|[ \t\n\r\f\v\u00a0]+$/g;

/** The checked-in character-class table (see the module docs). */
export const CHAR_CLASSES_PATH = fileURLToPath(new URL("../../../../py_trainer/py_trainer/core/char_classes.json", import.meta.url));

interface CharClasses {
  punctuation: Set<number>;
  lowercase: Map<number, string>;
}
let charClasses: CharClasses | null = null;

/** Loaded on first use, so the generator can run before the file exists. */
function loadCharClasses(): CharClasses {
  if (charClasses === null) {
    const raw = JSON.parse(readFileSync(CHAR_CLASSES_PATH, "utf8")) as {
      punctuation_or_symbol: Array<[number, number]>;
      lowercase: Array<[number, string]>;
    };
    const punctuation = new Set<number>();
    for (const [first, last] of raw.punctuation_or_symbol) for (let cp = first; cp <= last; cp++) punctuation.add(cp);
    charClasses = { punctuation, lowercase: new Map(raw.lowercase) };
  }
  return charClasses;
}

function lowerCase(s: string): string {
  const { lowercase } = loadCharClasses();
  let out = "";
  for (const ch of s) out += lowercase.get(ch.codePointAt(0)!) ?? ch;
  return out;
}

function punctuationToSpaces(s: string): string {
  const { punctuation } = loadCharClasses();
  let out = "";
  for (const ch of s) out += punctuation.has(ch.codePointAt(0)!) ? " " : ch;
  return out;
}

// ---------------------------------------------------------------------------------------------
// Tag names and blank text

/** A plain tag name (its `source` is what an error quotes). */
export const TAG_NAME = /^[A-Za-z][A-Za-z0-9_-]*$/;

/** Only whitespace (the set above), or nothing. */
export function isBlank(s: string): boolean {
  return s.replace(WHITESPACE_RUN, "") === "";
}

/** Whether `tag` is a plain tag name (TAG_NAME). */
export function validTag(tag: string): boolean {
  return TAG_NAME.test(tag);
}

// ---------------------------------------------------------------------------------------------
// Normalisation and extraction

/**
 * Normalises an answer for comparison: lower-case (unless caseSensitive), punctuation to spaces
 * (if ignorePunctuation), whitespace runs to one space, trimmed. Character classes in the module docs.
 */
export function normalizeAnswer(text: string, options: { caseSensitive?: boolean; ignorePunctuation?: boolean } = {}): string {
  let s = text;
  if (!(options.caseSensitive ?? false)) s = lowerCase(s);
  if (options.ignorePunctuation ?? false) s = punctuationToSpaces(s);
  return s.replace(WHITESPACE_RUN, " ").replace(EDGE_WHITESPACE, "");
}

/**
 * The content of the last <tag>...</tag> in the completion (leftmost-shortest matches scanned
 * left to right, the last one kept), or null if there is none. `tag` is a plain tag name.
 */
export function extractAnswer(completion: string, tag = "answer"): string | null {
  if (!validTag(tag)) fail("param_value", `tag must match ${TAG_NAME.source}, got ${JSON.stringify(tag)}`);
  let last: string | null = null;
  for (const m of completion.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))) last = m[1];
  return last;
}
