/**
 * The building blocks of parity/random.ts's inputs: fast-check arbitraries for numbers (finite,
 * huge, beyond 2^53, invalid), text built from a fixed alphabet of tags, words, whitespace,
 * punctuation and non-ASCII letters, reward specs with their params, and samples with missing or
 * invalid values. random.ts combines them per function of harness.ts's FUNCTIONS.
 */
import fc from "fast-check";

export type Draw = { args: unknown[]; options?: Record<string, unknown> };

/** Mostly `arb`, now and then one of `bad`. */
export function mostly<T, U>(arb: fc.Arbitrary<T>, bad: fc.Arbitrary<U>, badWeight = 1): fc.Arbitrary<T | U> {
  return fc.oneof({ arbitrary: arb, weight: 40 }, { arbitrary: bad, weight: badWeight });
}

const badNumber = fc.constantFrom<unknown>(NaN, Infinity, -Infinity, null);
export const finite = (min: number, max: number) => fc.double({ min, max, noNaN: true, noDefaultInfinity: true });
export const score = fc.oneof(fc.constantFrom(0, 1, 0.5, 0.25, -0), finite(0, 1));
export const value = fc.oneof(fc.constantFrom(0, 1, -1, 0.5, -0, 1e-300, 5e-324), finite(-1e3, 1e3), fc.integer({ min: -50, max: 50 }));
/** Values outside our own generators' comfort zone: integers beyond 2^53 (Python reads them from
 *  JSON as ints, whose exact arithmetic differs from doubles) and magnitudes whose squares or
 *  products overflow (NaN and Infinity must come out the same in both languages). */
export const bigInteger = fc.oneof(
  fc.constantFrom(2 ** 53 + 2, 2 ** 60, -(2 ** 61), 1e20, 792989053986676539392, 10247644939188637696),
  fc.integer({ min: 1, max: 2 ** 20 }).map((k) => k * 2 ** 60),
);
export const huge = fc.constantFrom(1e154, -1e154, 1e200, -1e200, 1.7976931348623157e308, -1.7976931348623157e308);
export const wild = fc.oneof({ arbitrary: value, weight: 6 }, { arbitrary: bigInteger, weight: 2 }, { arbitrary: huge, weight: 1 });
export const confidence = fc.option(fc.oneof(fc.constantFrom(0.95, 0.9, 0.99, 0.5), finite(0.01, 0.999)), { nil: undefined });
export const seed = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 4294967295 }), weight: 40 },
  { arbitrary: fc.constantFrom(-1, 4294967296, 0.5), weight: 1 },
);

export function optionsOf(entries: Record<string, unknown>): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(entries)) if (v !== undefined) out[k] = v;
  return Object.keys(out).length === 0 ? undefined : out;
}

const FRAGMENTS = [
  "<answer>",
  "</answer>",
  "<think>",
  "</think>",
  "<label>",
  "</label>",
  "<answer",
  "answer>",
  "structuring",
  "Structuring",
  "STRUCTURING",
  "cash",
  "smurfing",
  "layering",
  "trade-based",
  "trade_based",
  "money",
  "it is",
  "the",
  " ",
  "  ",
  "\n",
  "\t",
  "\u00a0",
  ".",
  ",",
  "!",
  "-",
  "_",
  ":",
  "(",
  ")",
  "'",
  "’",
  "“",
  "”",
  "£",
  "+",
  "É",
  "é",
  "ß",
  "İ",
  "Σ",
  "ς",
  "Straße",
  "x",
  "a b",
  // assigned after Unicode 14 (CPython 3.11's tables) but in Node 20's: the checked-in table decides
  "\u{1FAE8}",
  "\uA7CB",
  "\u1C89",
  "\u{16EA0}",
  "ΟΔΟΣ",
  "42",
];
export const text = fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 14 }).map((parts) => parts.join(""));
export const word = fc.constantFrom(
  "structuring",
  "Structuring",
  "cash structuring",
  "smurfing",
  "trade-based",
  "trade based",
  "layering",
  "",
  " ",
  "x",
  "É",
  "it is",
);
export const answers = mostly(fc.array(word, { minLength: 1, maxLength: 3 }), fc.constant([]));
export const tag = mostly(fc.constantFrom("answer", "label", "think"), fc.constantFrom("a b", "", "<answer>"));
// completions as a chat model answers arithmetic: numbers, "=", tags, run-on text
const NUMBER_FRAGMENTS = [
  "<answer>",
  "</answer>",
  "<label>",
  "</label>",
  "23",
  "45",
  "68",
  "-",
  "+",
  "=",
  " = ",
  " ",
  "\n",
  "\u00a0",
  ".",
  "6.8",
  "10",
  "-1",
  "x",
  "×",
  "(",
  ")",
  "*",
  "/",
  "The answer is ",
  "\u0664",
  "١٢",
  "What is ",
];
export const numberText = fc.array(fc.constantFrom(...NUMBER_FRAGMENTS), { maxLength: 10 }).map((parts) => parts.join(""));
export const numberWord = fc.constantFrom("68", " 68 ", "-1", "6.8", "", " ", "x", "0");
export const numberAnswers = mostly(fc.array(numberWord, { minLength: 1, maxLength: 3 }), fc.constant([]));
const PARAM_VALUES: Record<string, fc.Arbitrary<unknown>> = {
  tag: fc.constantFrom("answer", "label"),
  require_tag: fc.boolean(),
  match: fc.constantFrom("exact", "prefix", "contains"),
  case_sensitive: fc.boolean(),
  ignore_punctuation: fc.boolean(),
  think: fc.constantFrom("optional", "required", "forbidden"),
  partial_credit: fc.boolean(),
  answer_tag: fc.constantFrom("answer", "label"),
  think_tag: fc.constantFrom("think", "reasoning", "label"),
};
const EXACT_KEYS = ["tag", "require_tag", "match", "case_sensitive", "ignore_punctuation"];
const REWARD_KEYS: Record<string, string[]> = {
  exact_match: EXACT_KEYS,
  exact_match_lenient: EXACT_KEYS,
  format: ["think", "partial_credit", "answer_tag", "think_tag"],
  final_number_match: ["tag"],
  stops_after_answer: ["tag"],
};
const badParamValue = fc.constantFrom<unknown>("fuzzy", 1, null, "a b", true);
export const spec = fc.constantFrom(...Object.keys(REWARD_KEYS)).chain((name) => {
  const keys = REWARD_KEYS[name];
  const params = fc
    .subarray(keys)
    .chain((ks) => fc.record(Object.fromEntries(ks.map((k) => [k, mostly(PARAM_VALUES[k], badParamValue)]))))
    .chain((p) => mostly(fc.constant(p), fc.constant({ ...p, bogus: true })));
  return fc.record(
    {
      name: mostly(fc.constant(name), fc.constantFrom("bleu", "")),
      weight: mostly(finite(-2, 2), fc.constantFrom<unknown>(NaN, Infinity, "1", null)),
      params: mostly(params, fc.constantFrom<unknown>(null, ["x"])),
    },
    { requiredKeys: ["name"] },
  );
});

/** Arrays of `elem`; about one in 40 has one element replaced by NaN, Infinity or null. */
export const sample = (min: number, max: number, elem: fc.Arbitrary<unknown> = value) =>
  fc
    .record({ xs: fc.array(elem, { minLength: min, maxLength: max, size: "medium" }), flag: fc.integer({ min: 0, max: 40 }), bad: badNumber, at: fc.nat() })
    .map(({ xs, flag, bad, at }) => {
      if (flag === 0 && xs.length > 0) xs[at % xs.length] = bad;
      return xs;
    });

/** Arrays of `elem` with about one missing value (NaN, null, +-Infinity) in nine; now and then
 *  a value that is neither a number nor missing (an error case). */
export const missing = fc.constantFrom<unknown>(NaN, null, Infinity, -Infinity);
const notANumber = fc.constantFrom<unknown>("0.5", true);
export const withMissing = (min: number, max: number, elem: fc.Arbitrary<unknown> = value) =>
  fc.array(fc.oneof({ arbitrary: elem, weight: 8 }, { arbitrary: missing, weight: 1 }), { minLength: min, maxLength: max, size: "medium" });
export const withBad = (min: number, max: number, elem: fc.Arbitrary<unknown> = value) =>
  fc.tuple(withMissing(Math.max(1, min), Math.max(1, max), elem), notANumber, fc.nat()).map(([xs, bad, at]) => {
    xs[at % xs.length] = bad;
    return xs;
  });
export const withMissingOrBad = (min: number, max: number, elem: fc.Arbitrary<unknown> = value) => mostly(withMissing(min, max, elem), withBad(min, max, elem));

export function pair(maxN: number): fc.Arbitrary<[unknown[], unknown[]]> {
  const binary = fc
    .integer({ min: 0, max: maxN })
    .chain((n) => fc.tuple(fc.array(fc.constantFrom(0, 1), { minLength: n, maxLength: n }), fc.array(fc.constantFrom(0, 1), { minLength: n, maxLength: n })));
  const continuous = fc.integer({ min: 0, max: maxN }).chain((n) => fc.tuple(sample(n, n, score), sample(n, n, value)));
  const mismatched = fc.tuple(sample(0, 5, score), sample(0, 5, score));
  const outside = fc.integer({ min: 0, max: Math.min(maxN, 8) }).chain((n) => fc.tuple(sample(n, n, wild), sample(n, n, wild)));
  return fc.oneof(
    { arbitrary: binary, weight: 10 },
    { arbitrary: continuous, weight: 10 },
    { arbitrary: mismatched, weight: 1 },
    { arbitrary: outside, weight: 3 },
  );
}

export const probability = mostly(
  fc.oneof(finite(0, 1), fc.constantFrom(0.5, 0.975, 0.025, 1e-10, 1 - 1e-10, 1e-300, 5e-324), finite(0, 1e-6), finite(0.999999, 1)),
  fc.constantFrom<unknown>(0, 1, -0.5, 1.5, NaN),
);
export const alpha = fc.option(mostly(finite(0.001, 0.3), fc.constantFrom<unknown>(0, 1)), { nil: undefined });
export const power = fc.option(mostly(finite(0.3, 0.999), fc.constantFrom<unknown>(0.001, 1)), { nil: undefined });
