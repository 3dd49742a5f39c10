/**
 * Writes the checked-in parity vectors tests/vectors/<function>.json from the TS code (the
 * source of truth). Inputs are chosen by hand: the documented edge cases of every function,
 * including its error kinds. Expected values are whatever the TS code returns now.
 *
 * It also writes the curve thresholds (agent/report/thresholds.ts) to
 * py_trainer/py_trainer/curve_thresholds.json, the vector the Python sidecar loads at run time
 * (`--thresholds PATH` writes it elsewhere).
 *
 *   cd ts_agent && node_modules/.bin/tsx src/parity/vectors.ts --out ../tests/vectors
 *
 * `make parity` (scripts/parity.sh) regenerates the vectors this way before checking the Python
 * ports, and writes the thresholds to a temp file that must equal the checked-in JSON.
 */
import { mkdirSync, readdirSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { formatCurveThresholds } from "../agent/report/thresholds.js";
import { FUNCTIONS, makeCase, makeFile, type VectorCase, type VectorFile } from "./harness.js";

/** The checked-in JSON copy of CURVE_THRESHOLDS that py_trainer/curve_thresholds.py reads. */
export const CURVE_THRESHOLDS_JSON = fileURLToPath(new URL("../../../py_trainer/py_trainer/curve_thresholds.json", import.meta.url));

type Input = [name: string, args: unknown[], options?: Record<string, unknown>];

const BIN_A = [1, 0, 1, 1, 0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 0, 1, 0, 1, 1, 1];
const BIN_B = [1, 1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 0, 1];
const CONT_A = [0.31, 0.42, 0.18, 0.55, 0.6, 0.27, 0.49, 0.33, 0.71, 0.4];
const CONT_B = [0.35, 0.47, 0.2, 0.52, 0.69, 0.33, 0.5, 0.41, 0.7, 0.48];
const CURVE = [0.12, 0.1, 0.15, 0.14, 0.18, 0.2, 0.19, 0.25, 0.24, 0.3, 0.28, 0.33, 0.35, 0.34, 0.4, 0.38, 0.42, 0.41, 0.45, 0.44];
// Fleiss (1971) / Wikipedia example: 10 subjects, 5 categories, 14 raters.
const FLEISS_TABLE = [
  [0, 0, 0, 0, 14],
  [0, 2, 6, 4, 2],
  [0, 0, 3, 5, 6],
  [0, 3, 9, 2, 0],
  [2, 2, 8, 1, 1],
  [7, 7, 0, 0, 0],
  [3, 2, 6, 3, 0],
  [2, 5, 3, 2, 2],
  [6, 5, 2, 1, 0],
  [0, 2, 2, 3, 7],
];
const GOLD = ["structuring", "cash structuring"];
const DEFAULT_SPECS = [
  { name: "exact_match", weight: 1 },
  { name: "format", weight: 0.2 },
];
const COMPLETIONS = [
  "<answer>structuring</answer>",
  "<think>deposits under 10k</think>\n<answer> Structuring </answer>",
  "<answer>smurfing</answer>",
  "I think it is structuring.",
  "<answer>structuring</answer> because of the deposits",
  "",
  "<answer></answer>",
  "<answer>cash-structuring!</answer>",
];

const INPUTS: Record<string, Input[]> = {
  groupRelativeAdvantage: [
    ["two groups", [[1, 0, 1, 0, 0.5, 0.25, 1, 0], 4]],
    ["equal rewards give 0", [[1, 1, 1, 1, 0, 0], 3]],
    ["null is left out and gets 0", [[1, null, 0, 0.5], 4]],
    ["NaN is unscorable like null", [[1, NaN, 0, 0.5], 4]],
    ["one scorable reward in a group gives 0", [[1, null, null, null, 0, 1, 1, 0], 4]],
    ["all-null group gives 0", [[null, null, 0, 1], 2]],
    ["batch std, group means", [[1, 0, 1, 0, 0.5, 0.25, 1, 0], 4], { scale: "batch" }],
    ["batch with one scorable reward gives 0", [[null, null, 1, null], 2], { scale: "batch" }],
    ["batch of one", [[0.7], 1], { scale: "batch" }],
    ["none is mean-centred only (Dr. GRPO)", [[1, 0, 1, 0, 0.5, 0.25, 1, 0], 4], { scale: "none" }],
    ["none with null", [[1, null, 0, 0.5], 4], { scale: "none" }],
    ["group size 1", [[0.3, 0.9], 1]],
    ["eps 0 with zero std gives 0", [[0.5, 0.5, 1, 0], 2], { eps: 0 }],
    ["eps 0 with an underflowing std: +-largest finite, as nan_to_num", [[0, 1e-300, 0.5, 0.5], 2], { eps: 0 }],
    ["custom eps", [[1, 0, 0, 0], 4], { eps: 0.5 }],
    ["negative and -0 rewards", [[-1, -0, 2, -3.5], 2]],
    ["whole batch one group", [[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], 8]],
    ["empty", [[], 2]],
    ["group size does not divide", [[1, 0, 1, 0], 3]],
    ["group size 0", [[1, 0], 0]],
    ["group size not an integer", [[1, 0], 1.5]],
    ["unknown scale", [[1, 0], 2], { scale: "global" }],
    ["eps NaN", [[1, 0], 2], { eps: NaN }],
    ["eps negative", [[1, 0], 2], { eps: -1e-4 }],
    ["infinite reward", [[1, Infinity], 2]],
  ],
  normalizeAnswer: [
    ["a symbol newer than Unicode 14 is punctuation (the checked-in table)", ["The answer is 42\u{1FAE8}"], { ignorePunctuation: true }],
    ["a capital letter newer than Unicode 14 lower-cases (U+A7CB)", ["\uA7CB"]],
    ["capital sigma is always small sigma (no final-sigma rule)", ["ΟΔΟΣ"]],
    ["trim, case and inner whitespace", ["  Cash \t STRUCTURING\n"]],
    ["case sensitive", ["  Cash  Structuring "], { caseSensitive: true }],
    ["punctuation kept by default", ["trade-based, money laundering."]],
    ["punctuation to spaces", ["trade-based, money_laundering."], { ignorePunctuation: true }],
    ["unicode letters, symbols and nbsp", ["Éclair\u00a0 £5 — “quoted”"], { ignorePunctuation: true }],
    ["empty", [""]],
  ],
  extractAnswer: [
    ["last tag wins", ["<answer>a</answer> then <answer>b</answer>", "answer"]],
    ["multiline content", ["<answer>line 1\nline 2</answer>", "answer"]],
    ["no tag", ["just text", "answer"]],
    ["unclosed", ["<answer>open", "answer"]],
    ["custom tag", ["<label>smurfing</label>", "label"]],
    ["nested open tag", ["<answer>a<answer>b</answer>", "answer"]],
    ["bad tag name", ["<a>x</a>", "a b"]],
  ],
  exactMatchReward: [
    ["lenient match past a Unicode 15 symbol", ["The answer is 42\u{1FAE8}", ["42"]], { requireTag: false, match: "contains", ignorePunctuation: true }],
    ["match", ["<answer>structuring</answer>", GOLD]],
    ["case and whitespace", ["<answer>  Cash   STRUCTURING </answer>", GOLD]],
    ["wrong answer", ["<answer>smurfing</answer>", GOLD]],
    ["single answer string", ["<answer>layering</answer>", "Layering"]],
    ["last tag is graded", ["<answer>structuring</answer><answer>smurfing</answer>", GOLD]],
    ["no tag scores 0", ["structuring", GOLD]],
    ["no tag, requireTag false", ["structuring", GOLD], { requireTag: false }],
    ["punctuation counts by default", ["<answer>structuring.</answer>", GOLD]],
    ["ignorePunctuation", ["<answer>structuring.</answer>", GOLD], { ignorePunctuation: true }],
    ["hyphen vs space with ignorePunctuation", ["<answer>trade-based</answer>", ["trade based"]], { ignorePunctuation: true }],
    ["case sensitive", ["<answer>Structuring</answer>", GOLD], { caseSensitive: true }],
    ["prefix", ["<answer>structuring of cash deposits</answer>", GOLD], { match: "prefix" }],
    ["prefix needs whole words", ["<answer>structurings</answer>", GOLD], { match: "prefix" }],
    ["contains", ["<answer>it is structuring here</answer>", GOLD], { match: "contains" }],
    ["contains needs whole words", ["<answer>restructuring</answer>", GOLD], { match: "contains" }],
    ["lenient-style: anywhere, no punctuation", ["I'd say: STRUCTURING!", GOLD], { requireTag: false, match: "contains", ignorePunctuation: true }],
    ["custom tag", ["<label>smurfing</label>", ["smurfing"]], { tag: "label" }],
    ["blank gold answers are ignored", ["<answer>x</answer>", ["  ", "x"]]],
    ["empty completion answer never matches", ["<answer></answer>", GOLD]],
    ["unicode case folding", ["<answer>ÉCLAIR</answer>", ["éclair"]]],
    ["no gold answers", ["<answer>x</answer>", []]],
    ["only blank gold answers", ["<answer>x</answer>", ["", " \n"]]],
    ["bad match mode", ["<answer>x</answer>", ["x"]], { match: "fuzzy" }],
    ["bad tag", ["<answer>x</answer>", ["x"]], { tag: "" }],
  ],
  formatReward: [
    ["answer only", ["<answer>structuring</answer>"]],
    ["think then answer", ["<think>why</think>\n<answer>structuring</answer>\n"]],
    ["text after the answer", ["<answer>structuring</answer> because"]],
    ["text before the answer", ["So: <answer>structuring</answer>"]],
    ["two answers", ["<answer>a</answer><answer>b</answer>"]],
    ["unclosed answer", ["<answer>structuring"]],
    ["close before open", ["</answer>x<answer>"]],
    ["blank answer", ["<answer>  </answer>"]],
    ["think after answer", ["<answer>a</answer><think>x</think>"]],
    ["answer inside think", ["<think><answer>a</answer></think>"]],
    ["no answer at all", ["nothing here"]],
    ["empty completion", [""]],
    ["think required and present", ["<think>x</think><answer>a</answer>"], { think: "required" }],
    ["think required but missing", ["<answer>a</answer>"], { think: "required" }],
    ["think forbidden but present", ["<think>x</think><answer>a</answer>"], { think: "forbidden" }],
    ["partial: text after", ["<answer>structuring</answer> because"], { partialCredit: true }],
    ["partial: unclosed", ["<answer>structuring"], { partialCredit: true }],
    ["partial: blank answer", ["<answer></answer>"], { partialCredit: true }],
    ["partial: nothing", ["plain text"], { partialCredit: true }],
    ["partial: well formed", ["<think>a</think><answer>b</answer>"], { partialCredit: true }],
    ["custom tags", ["<reasoning>r</reasoning><label>x</label>"], { answerTag: "label", thinkTag: "reasoning" }],
    ["bad think mode", ["<answer>a</answer>"], { think: "sometimes" }],
    ["same tags", ["<answer>a</answer>"], { answerTag: "x", thinkTag: "x" }],
  ],
  composeRewards: [
    ["weighted sum", [[{ weight: 1, value: 1 }, { weight: 0.2, value: 0.5 }]]],
    ["null is skipped (nansum)", [[{ weight: 1, value: null }, { weight: 0.2, value: 1 }]]],
    ["NaN is skipped like null", [[{ weight: 1, value: NaN }, { weight: 0.2, value: 1 }]]],
    ["all null is unscorable", [[{ weight: 1, value: null }, { weight: 0.2, value: null }]]],
    ["negative weight", [[{ weight: -0.5, value: 1 }, { weight: 1, value: 0.25 }]]],
    ["zero weight still makes it scorable", [[{ weight: 0, value: 1 }]]],
    ["no rewards", [[]]],
    ["weight NaN", [[{ weight: NaN, value: 1 }]]],
    ["weight Infinity", [[{ weight: Infinity, value: 1 }]]],
    ["weight not a number", [[{ weight: "1", value: 1 }]]],
  ],
  buildReward: [
    ["exact_match defaults", [{ name: "exact_match" }, COMPLETIONS, GOLD]],
    ["exact_match with params", [{ name: "exact_match", weight: 2, params: { match: "prefix", ignore_punctuation: true } }, COMPLETIONS, GOLD]],
    ["exact_match without answers is unscorable", [{ name: "exact_match" }, COMPLETIONS, []]],
    ["exact_match_lenient defaults", [{ name: "exact_match_lenient" }, COMPLETIONS, GOLD]],
    ["exact_match_lenient requiring the tag", [{ name: "exact_match_lenient", params: { require_tag: true } }, COMPLETIONS, GOLD]],
    ["format defaults", [{ name: "format", weight: 0.2 }, COMPLETIONS, GOLD]],
    ["format partial credit", [{ name: "format", params: { partial_credit: true, think: "required" } }, COMPLETIONS, []]],
    ["null weight and params mean defaults", [{ name: "format", weight: null, params: null }, COMPLETIONS, []]],
    ["unknown reward", [{ name: "bleu" }, COMPLETIONS, GOLD]],
    ["unknown param", [{ name: "exact_match", params: { casesensitive: true } }, COMPLETIONS, GOLD]],
    ["unknown spec field", [{ name: "exact_match", wieght: 1 }, COMPLETIONS, GOLD]],
    ["param of the wrong type", [{ name: "exact_match", params: { case_sensitive: "true" } }, COMPLETIONS, GOLD]],
    ["number for a boolean param", [{ name: "format", params: { partial_credit: 1 } }, COMPLETIONS, GOLD]],
    ["bad enum value", [{ name: "exact_match", params: { match: "fuzzy" } }, COMPLETIONS, GOLD]],
    ["bad tag", [{ name: "format", params: { answer_tag: "<answer>" } }, COMPLETIONS, GOLD]],
    ["same tags", [{ name: "format", params: { answer_tag: "x", think_tag: "x" } }, COMPLETIONS, GOLD]],
    ["weight of the wrong type", [{ name: "format", weight: "0.2" }, COMPLETIONS, GOLD]],
    ["weight NaN", [{ name: "format", weight: NaN }, COMPLETIONS, GOLD]],
    ["params not an object", [{ name: "format", params: ["think"] }, COMPLETIONS, GOLD]],
  ],
  composeRewardSpecs: [
    ["default specs (exact_match 1.0 + format 0.2)", [DEFAULT_SPECS, COMPLETIONS, GOLD]],
    ["default specs without answers", [DEFAULT_SPECS, COMPLETIONS, []]],
    ["exact_match only, without answers, is unscorable", [[{ name: "exact_match" }], COMPLETIONS, []]],
    ["strict and lenient", [[{ name: "exact_match", weight: 0.5 }, { name: "exact_match_lenient", weight: 0.5 }], COMPLETIONS, GOLD]],
    ["no specs", [[], COMPLETIONS, GOLD]],
    ["one bad spec", [[{ name: "exact_match" }, { name: "nope" }], COMPLETIONS, GOLD]],
  ],
  rewardNames: [["all", []]],

  normalCdf: [
    ...[0, -0, 0.5, 1, 1.959963984540054, -1.959963984540054, 3, -5, 8, -20, -38, 40, Infinity, -Infinity].map(
      (x): Input => [`x=${x}`, [x]],
    ),
    ["NaN", [NaN]],
  ],
  normalQuantile: [
    ...[0.5, 0.975, 0.025, 0.8, 0.3, 0.07, 0.93, 1e-5, 1 - 1e-5, 1e-10, 1e-300, 5e-324].map((p): Input => [`p=${p}`, [p]]),
    ["p=0", [0]],
    ["p=1", [1]],
    ["p NaN", [NaN]],
    ["p > 1", [1.5]],
  ],
  studentTQuantile: [
    ...[1, 2, 3, 4, 5, 10, 29, 30, 100, 999].map((df): Input => [`0.975, df=${df}`, [0.975, df]]),
    ["0.025, df=10", [0.025, 10]],
    ["0.5, df=7", [0.5, 7]],
    ["0.995, df=2", [0.995, 2]],
    ["0.6, df=1", [0.6, 1]],
    ["0.001, df=20", [0.001, 20]],
    ["df 0", [0.975, 0]],
    ["df not an integer", [0.975, 2.5]],
    ["p=1", [1, 5]],
  ],
  noSpread: [
    ["one value", [[0.3]]],
    ["equal up to rounding (5 samples per task)", [[0.2, 0.19999999999999996, 0.20000000000000007]]],
    ["a real spread of 1e-12", [[0.2, 0.2 + 1e-12]]],
    ["rounding at scale 1", [[1e-17, -1e-17]], { scale: 1 }],
    ["the same values at their own scale", [[1e-17, -1e-17]]],
    ["64 ulps at scale 1: no spread", [[0, 64 * Number.EPSILON]], { scale: 1 }],
    ["65 ulps at scale 1: spread", [[0, 65 * Number.EPSILON]], { scale: 1 }],
    ["+-1e308: the range overflows", [[1e308, -1e308]]],
    ["scale 0", [[0, 0]], { scale: 0 }],
    ["negative scale", [[0.1]], { scale: -1 }],
    ["empty", [[]]],
    ["NaN", [[0.1, NaN]]],
  ],
  mean: [
    ["four", [[1, 2, 3, 4]]],
    ["tenths", [[0.1, 0.2, 0.3]]],
    ["one", [[0.7]]],
    ["-0", [[-0]]],
    ["empty", [[]]],
    ["NaN", [[1, NaN]]],
    ["null", [[1, null]]],
    ["Infinity", [[1, Infinity]]],
  ],
  sampleSd: [
    ["four", [[1, 2, 3, 4]]],
    ["constant", [[5, 5, 5]]],
    ["0/1", [BIN_A]],
    ["two", [[0.1, 0.3]]],
    ["one is too few", [[1]]],
    ["empty", [[]]],
    ["NaN", [[1, 2, NaN]]],
  ],
  standardError: [
    ["four", [[1, 2, 3, 4]]],
    ["continuous", [CONT_A]],
    ["one is too few", [[1]]],
    ["-Infinity", [[1, -Infinity]]],
  ],
  nanMean: [
    ["four", [[1, 2, 3, 4]]],
    ["tenths", [[0.1, 0.2, 0.3]]],
    ["NaN, null and infinities are skipped", [[1, NaN, null, 2, Infinity, -Infinity, 4]]],
    ["-0", [[-0]]],
    ["empty is NaN", [[]]],
    ["all missing is NaN", [[NaN, null, Infinity]]],
    ["string", [[1, "2"]]],
    ["boolean", [[1, true]]],
  ],
  nanSampleSd: [
    ["four", [[1, 2, 3, 4]]],
    ["constant", [[5, 5, 5]]],
    ["0/1", [BIN_A]],
    ["missing values are skipped", [[1, NaN, 2, null, 3, Infinity, 4]]],
    ["one finite value is NaN", [[1, NaN]]],
    ["empty is NaN", [[]]],
    ["string", [[1, 2, "3"]]],
  ],
  wilsonInterval: [
    ["3 of 10", [3, 10]],
    ["0 of 10", [0, 10]],
    ["10 of 10", [10, 10]],
    ["50 of 100", [50, 100]],
    ["1 of 1", [1, 1]],
    ["90% confidence", [7, 40], { confidence: 0.9 }],
    ["large n", [123456, 1000000]],
    ["n 0", [0, 0]],
    ["successes > n", [11, 10]],
    ["successes not an integer", [2.5, 10]],
    ["negative n", [0, -1]],
    ["confidence 1", [3, 10], { confidence: 1 }],
    ["n 1e154 (Python ints overflowed)", [0, 1e154]],
    ["n 2^60", [3, 2 ** 60]],
  ],
  mcnemarExactP: [
    ["no discordant pairs", [0, 0]],
    ["1 vs 0", [1, 0]],
    ["0 vs 5", [0, 5]],
    ["3 vs 10", [3, 10]],
    ["10 vs 3", [10, 3]],
    ["25 vs 25", [25, 25]],
    ["100 vs 150", [100, 150]],
    ["underflows to 0", [0, 2000]],
    ["subnormal", [0, 1070]],
    ["negative", [-1, 3]],
    ["not an integer", [1.5, 3]],
    ["NaN", [NaN, 3]],
  ],
  pairedComparison: [
    ["0/1 scores", [BIN_A, BIN_B]],
    ["continuous scores", [CONT_A, CONT_B]],
    ["+-1e200: the correlation overflows to NaN (Python's min/max swallowed it)", [[1e200, -1e200], [1e200, -1e200]]],
    ["large integers", [[1e20, 3e20, 2 ** 70], [2e20 + 2 ** 20, 1e20, 2 ** 71]]],
    ["99% confidence", [CONT_A, CONT_B], { confidence: 0.99 }],
    ["identical", [CONT_A, CONT_A]],
    ["constant baseline", [[0, 0, 0, 0], [0, 1, 1, 0]]],
    ["two pairs", [[0.2, 0.4], [0.5, 0.4]]],
    ["0/1 no discordant", [[1, 0, 1], [1, 0, 1]]],
    ["0/1 all one way", [[0, 0, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]]],
    ["5 samples per task, one more correct on each: no spread up to rounding", [[0.6, 0.8, 0.4, 0.2, 0, 0.6], [0.8, 1, 0.6, 0.4, 0.2, 0.8]]],
    ["differences 0 up to rounding: mean 0, p 1", [[0.1 + 0.2, 0.3, 0.7, 0.1 + 0.7], [0.3, 0.3, 0.1 + 0.6, 0.8]]],
    ["264 differences 0.2 +- 0.00325: p clamped at 0", [new Array<number>(264).fill(0.5), Array.from({ length: 264 }, (_, i) => 0.7 + (i % 2 ? 0.00325 : -0.00325))]],
    ["empty", [[], []]],
    ["length mismatch", [[1, 0], [1]]],
    ["one pair is too few", [[1], [0]]],
    ["NaN", [[1, NaN], [0, 1]]],
    ["confidence out of range", [[1, 0], [0, 1]], { confidence: 95 }],
  ],
  pairedBootstrapCI: [
    ["0/1, 1000 resamples, seed 0", [BIN_A, BIN_B], { resamples: 1000, seed: 0 }],
    ["0/1, 1000 resamples, seed 7", [BIN_A, BIN_B], { resamples: 1000, seed: 7 }],
    ["continuous, 500 resamples, seed 4294967295", [CONT_A, CONT_B], { resamples: 500, seed: 4294967295 }],
    ["continuous, 90%", [CONT_A, CONT_B], { resamples: 400, seed: 3, confidence: 0.9 }],
    ["defaults", [[0, 1, 1, 0, 1], [1, 1, 1, 0, 1]]],
    ["one resample", [CONT_A, CONT_B], { resamples: 1, seed: 1 }],
    ["identical", [CONT_A, CONT_A], { resamples: 50 }],
    ["seed too large", [CONT_A, CONT_B], { seed: 4294967296 }],
    ["seed not an integer", [CONT_A, CONT_B], { seed: 0.5 }],
    ["zero resamples", [CONT_A, CONT_B], { resamples: 0 }],
    ["length mismatch", [[1, 0, 1], [1, 0]]],
  ],
  intervalOverRuns: [
    ["5 seeds: t interval", [[0.152, 0.152, 0.1, 0.2, 0.05]]],
    ["2 seeds: t interval, df 1", [[0.1, 0.3]]],
    ["one seed: no interval", [[0.12]]],
    ["10 seeds: t interval (one method at every n)", [CONT_A]],
    ["20 seeds, 90%", [[...CONT_A, ...CONT_B]], { confidence: 0.9 }],
    ["identical seeds: no interval", [[0.2, 0.2, 0.2]]],
    ["equal up to rounding (K = 5 means): no interval", [[0.6 - 0.4, 0.8 - 0.6, 1 - 0.8]]],
    ["empty", [[]]],
    ["confidence 1", [[0.1, 0.2]], { confidence: 1 }],
  ],
  bootstrapMeanCI: [
    ["0/1 scores, defaults, seed 0", [BIN_A], { seed: 0 }],
    ["continuous, 500 resamples, seed 7", [CONT_A], { seed: 7, resamples: 500 }],
    ["NaN, null and Infinity are skipped", [[0.2, NaN, 0.5, null, 0.9, 0.4, Infinity]], { seed: 3, resamples: 300 }],
    ["90%, seed 4294967295", [CONT_B], { seed: 4294967295, resamples: 400, confidence: 0.9 }],
    ["one resample", [CONT_A], { seed: 1, resamples: 1 }],
    ["constant", [[0.5, 0.5, 0.5]], { seed: 2, resamples: 50 }],
    ["two values", [[0, 1]], { seed: 5, resamples: 100 }],
    ["one finite value is NaN", [[0.3, NaN]], { seed: 0 }],
    ["empty is NaN", [[]], { seed: 0 }],
    ["options are checked even when NaN", [[0.3]], { seed: -1 }],
    ["seed too large", [CONT_A], { seed: 4294967296 }],
    ["seed not an integer", [CONT_A], { seed: 0.5 }],
    ["zero resamples", [CONT_A], { seed: 0, resamples: 0 }],
    ["confidence 1", [CONT_A], { seed: 0, confidence: 1 }],
    ["string value", [[0.1, "x"]], { seed: 0 }],
  ],
  relativeChangeCI: [
    ["held-out reward rises, defaults", [CONT_A, CONT_B], { seed: 0 }],
    ["0/1, 500 resamples", [BIN_A, BIN_B], { seed: 7, resamples: 500 }],
    ["falls", [CONT_B, CONT_A], { seed: 1, resamples: 300 }],
    ["negative start mean: divided by |start|", [[-0.2, -0.4, -0.1], [-0.1, -0.3, 0.1]], { seed: 2, resamples: 200 }],
    ["pairs with a missing value are dropped", [[0.2, NaN, 0.4, 0.1, 0.3, 0.5], [0.3, 0.5, null, 0.2, Infinity, 0.6]], { seed: 3, resamples: 200 }],
    ["resamples with start mean 0 make the upper bound unbounded", [[0, 0, 0, 0.5], [0.2, 0.1, 0.3, 0.6]], { seed: 4, resamples: 200 }],
    ["every resample at start 0: +Infinity", [[0, 1], [1, 1]], { seed: 0, resamples: 1 }],
    ["start and end 0 in a resample: 0", [[0, 0, 0.5, 0.4], [0, 0, 0.1, 0.2]], { seed: 5, resamples: 200 }],
    ["falls to below 0 from a start near 0", [[0, 0, 0.1], [-0.2, -0.1, 0]], { seed: 6, resamples: 200 }],
    ["90%", [CONT_A, CONT_B], { seed: 9, resamples: 400, confidence: 0.9 }],
    ["one pair", [[0.2], [0.3]], { seed: 0, resamples: 10 }],
    ["start mean 0 is NaN", [[0, 0, 0], [0.1, 0.2, 0.3]], { seed: 0 }],
    ["no pairs is NaN", [[], []], { seed: 0 }],
    ["no complete pair is NaN", [[NaN, 1], [1, null]], { seed: 0 }],
    ["length mismatch", [[1, 0], [1]], { seed: 0 }],
    ["seed negative", [CONT_A, CONT_B], { seed: -1 }],
    ["zero resamples", [CONT_A, CONT_B], { seed: 0, resamples: 0 }],
    ["string value", [[0.1, "x"], [0.2, 0.3]], { seed: 0 }],
  ],
  requiredNForDelta: [
    ["5pp, sd 0.3", [0.05, 0.3]],
    ["negative delta", [-0.05, 0.3]],
    ["alpha .01, power .9", [0.1, 0.4], { alpha: 0.01, power: 0.9 }],
    ["huge effect gives at least 1", [10, 0.1]],
    ["sd 0", [0.05, 0]],
    ["zero delta", [0, 0.3]],
    ["negative sd", [0.05, -0.3]],
    ["alpha 0", [0.05, 0.3], { alpha: 0 }],
    ["power 1", [0.05, 0.3], { power: 1 }],
    ["power below alpha/2", [0.05, 0.3], { power: 0.01 }],
    ["n beyond 2^53", [1e-300, 1]],
    ["NaN delta", [NaN, 0.3]],
  ],
  minimumDetectableEffect: [
    ["n 200, sd 0.3", [200, 0.3]],
    ["n 1", [1, 1]],
    ["alpha .01, power .9", [50, 0.25], { alpha: 0.01, power: 0.9 }],
    ["sd 0", [10, 0]],
    ["n 0", [0, 0.3]],
    ["n not an integer", [2.5, 0.3]],
    ["sd Infinity", [10, Infinity]],
  ],
  cohenKappa: [
    ["plain", [[0, 1, 2, 1, 0, 2, 2, 1, 0, 1], [0, 1, 1, 1, 0, 2, 0, 1, 0, 2]]],
    ["linear", [[0, 1, 2, 1, 0, 2, 2, 1, 0, 1], [0, 1, 1, 1, 0, 2, 0, 1, 0, 2]], { weights: "linear" }],
    ["quadratic", [[0, 1, 2, 1, 0, 2, 2, 1, 0, 1], [0, 1, 1, 1, 0, 2, 0, 1, 0, 2]], { weights: "quadratic" }],
    ["strict vs lenient grader (0/1)", [[1, 0, 1, 1, 0, 0, 1, 0, 1, 1], [1, 1, 1, 1, 0, 1, 1, 0, 1, 1]]],
    ["string labels", [["layering", "smurfing", "structuring", "layering"], ["layering", "structuring", "structuring", "layering"]]],
    ["perfect agreement", [[0, 1, 0, 1], [0, 1, 0, 1]]],
    ["one category: undefined", [[1, 1, 1], [1, 1, 1]]],
    ["explicit categories with an unused one", [[1, 2, 3, 2], [1, 3, 3, 2]], { weights: "linear", categories: [1, 2, 3, 4] }],
    ["categories fix the order", [["low", "high", "mid"], ["mid", "high", "mid"]], { weights: "quadratic", categories: ["low", "mid", "high"] }],
    ["-0 and 0 are one label", [[0, -0, 1], [-0, 0, 1]]],
    ["empty", [[], []]],
    ["length mismatch", [[1, 0], [1]]],
    ["mixed label types", [[1, "1"], [1, "1"]]],
    ["label not in categories", [[1, 2], [1, 2]], { categories: [1] }],
    ["duplicate categories", [[1, 2], [1, 2]], { categories: [1, 2, 1] }],
    ["bad weights", [[1, 2], [1, 2]], { weights: "cubic" }],
    ["NaN label", [[1, NaN], [1, 2]]],
    ["boolean label", [[true, false], [true, true]]],
  ],
  kendallTauB: [
    ["same order", [[0, 1, 2, 3], [0, 1, 2, 3]]],
    ["reversed", [[0, 1, 2, 3], [3, 2, 1, 0]]],
    ["one swap", [[0, 1, 2, 3], [1, 0, 2, 3]]],
    ["ties in both", [[1, 2, 2, 3, 4, 4], [1, 3, 2, 2, 5, 4]]],
    ["continuous", [CONT_A, CONT_B]],
    ["ranks vs scores", [[1, 1, 2, 3], [0.2, 0.5, 0.5, 0.9]]],
    ["-0 and 0 tie", [[-0, 0, 1], [1, 2, 3]]],
    ["constant x is NaN", [[2, 2, 2], [1, 2, 3]]],
    ["one pair is NaN", [[1], [2]]],
    ["empty is NaN", [[], []]],
    ["length mismatch", [[1, 2], [1]]],
    ["NaN", [[1, NaN], [1, 2]]],
    ["Infinity", [[1, 2], [Infinity, 2]]],
  ],
  fleissKappa: [
    ["Fleiss 1971 example", [FLEISS_TABLE]],
    ["two raters", [[[2, 0], [1, 1], [0, 2], [2, 0]]]],
    ["perfect agreement", [[[3, 0], [0, 3]]]],
    ["all in one category: undefined", [[[3, 0], [3, 0]]]],
    ["empty", [[]]],
    ["no categories", [[[]]]],
    ["ragged rows", [[[1, 2], [3]]]],
    ["different rater counts", [[[1, 2], [2, 2]]]],
    ["one rater", [[[1, 0], [0, 1]]]],
    ["negative count", [[[3, -1], [1, 1]]]],
    ["fractional count", [[[1.5, 0.5], [1, 1]]]],
    ["counts 1e160 (Python ints overflowed)", [[[1e160, 0], [1e160, 0]]]],
    ["counts 2^60", [[[2 ** 60, 2 ** 60], [2 ** 61, 0]]]],
  ],
  startVsEnd: [
    ["rising curve, window 5", [CURVE], { window: 5 }],
    ["window 8", [CURVE], { window: 8 }],
    ["window 1", [CURVE], { window: 1 }],
    ["start at zero: relative change undefined", [[0, 0, 0, 0, 0.2, 0.3, 0.4, 0.5]], { window: 3 }],
    ["90%", [CURVE], { window: 4, confidence: 0.9 }],
    ["constant series: no spread in the differences", [[0.3, 0.3, 0.3, 0.3, 0.3, 0.3]], { window: 2 }],
    ["alternating: autocorrelation clamped at 0", [[0, 1, 0, 1, 0, 1, 0, 1, 0, 1]], { window: 3 }],
    ["random walk: autocorrelation clamped at the maximum", [[0, 0.1, 0.2, 0.25, 0.35, 0.5, 0.55, 0.6, 0.7, 0.85, 0.9, 1]], { window: 3 }],
    ["3 points", [[0.1, 0.5, 0.2]], { window: 1 }],
    ["2 points (too short)", [[0.1, 0.2]], { window: 1 }],
    ["window too large", [CURVE], { window: 11 }],
    ["window 0", [CURVE], { window: 0 }],
    ["NaN in series", [[0.1, NaN, 0.3, 0.4]], { window: 1 }],
    ["empty", [[]], { window: 1 }],
    // issue 31: finite values that overflow (Python raised 'cannot convert float NaN to integer')
    ["overflow: first window's sum, window 2", [[1e308, 1e308, 0.1, 0.2, 0.3, 0.4]], { window: 2 }],
    ["overflow: last window's sum, window 2", [[0.1, 0.2, 0.3, 0.4, -1e308, -1e308]], { window: 2 }],
    ["overflow: the change, window 1", [[-1e308, 0.1, 0.2, 0.3, 0.4, 1e308]], { window: 1 }],
    ["overflow: a first difference, window 1", [[1e308, -1e308, 0.1, 0.2, 0.3, 0.4]], { window: 1 }],
    ["overflow: squared differences, window 1", [[0.1, 1e200, -1e200, 0.2, 0.3, 0.4]], { window: 1 }],
    ["overflow among ordinary values, window 2", [[0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5]], { window: 2 }],
    ["overflow among ordinary values, window 3", [[0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5]], { window: 3 }],
    ["overflow among ordinary values, window 4", [[0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5]], { window: 4 }],
    ["large but representable (1e150 scale)", [[1e150, 2e150, 3e150, 4e150, 5e150, 6e150]], { window: 2 }],
  ],
  trend: [
    ["rising curve", [CURVE]],
    ["falling", [[5, 4, 3, 2, 1]]],
    ["ties", [[1, 2, 2, 3, 5, 4, 6, 7, 7, 7]]],
    ["constant", [[0.3, 0.3, 0.3, 0.3]]],
    ["three points", [[0, 1, 0]]],
    ["two is too few", [[1, 2]]],
    ["Infinity", [[1, 2, Infinity]]],
    ["large integers (Python subtracted exactly)", [[792989053986676539392, 10247644939188637696, 782814, 781022, 881882, 458541]]],
  ],
  tangoScoreInterval: [
    ["3 wins, 0 losses of 29 (the seed's case)", [0, 3, 29]],
    ["8 losses vs 18 wins of 200", [8, 18, 200]],
    ["no discordant pairs", [0, 0, 50]],
    ["all discordant, all wins", [0, 10, 10]],
    ["all discordant, all losses", [10, 0, 10]],
    ["regression 60 vs 28 of 264", [60, 28, 264]],
    ["90%", [5, 12, 100], { confidence: 0.9 }],
    ["one pair", [0, 1, 1]],
    ["big counts", [1e6, 1.2e6, 1e7]],
    ["b + c > n", [5, 6, 10]],
    ["n 0", [0, 0, 0]],
    ["fractional", [1.5, 2, 10]],
  ],
  pairedProportionGate: [
    ["60 vs 28 of 264: FAIL side", [60, 28, 264], { threshold: 0.05 }],
    ["8 vs 30 of 264: PASS (+8.3 pp)", [8, 30, 264], { threshold: 0.05 }],
    ["0 vs 40 of 264: CONFIRMED", [0, 40, 264], { threshold: 0.05 }],
    ["the estimate exactly at +5 pp (10 of 200)", [5, 15, 200], { threshold: 0.05 }],
    ["the test and the interval disagree about 0", [0, 5, 200], { threshold: 0.05 }],
    ["no discordant pairs", [0, 0, 50], { threshold: 0.05 }],
    ["alpha 0.1", [10, 24, 264], { threshold: 0.05, alpha: 0.1 }],
    ["b + c > n", [5, 6, 10], { threshold: 0.05 }],
    ["threshold NaN", [5, 6, 100], { threshold: NaN }],
  ],
  simulatedOperatingCharacteristic: [
    ["+5 pp, discordance 0.25, n 264, 200 draws", [0.05, 0.25, 264], { threshold: 0.05, draws: 200 }],
    ["+10 pp, discordance 0.3, n 200, 100 draws, seed 7", [0.1, 0.3, 200], { threshold: 0.05, draws: 100, seed: 7 }],
    ["0, discordance 0.3, n 100", [0, 0.3, 100], { threshold: 0.05, draws: 100 }],
    ["discordance below |delta| is raised to it", [0.1, 0.02, 120], { threshold: 0.05, draws: 100 }],
    ["negative delta", [-0.05, 0.2, 80], { threshold: 0.05, draws: 50 }],
    ["n 1", [0.05, 0.5, 1], { threshold: 0.05, draws: 20 }],
    ["delta above 1", [1.5, 0.2, 10], { threshold: 0.05, draws: 10 }],
    ["discordance NaN", [0.05, NaN, 10], { threshold: 0.05, draws: 10 }],
    ["draws 0", [0.05, 0.2, 10], { threshold: 0.05, draws: 0 }],
    ["bad seed", [0.05, 0.2, 10], { threshold: 0.05, draws: 10, seed: -1 }],
  ],
  operatingCharacteristic: [
    ["true delta at the threshold, n 264", [0.05, 0.35, 264], { threshold: 0.05 }],
    ["true delta at the threshold, n 29", [0.05, 0.31, 29], { threshold: 0.05 }],
    ["true delta twice the threshold", [0.1, 0.3, 400], { threshold: 0.05 }],
    ["true delta 0", [0, 0.3, 400], { threshold: 0.05 }],
    ["no spread, above", [0.06, 0, 10], { threshold: 0.05 }],
    ["no spread, below", [0.04, 0, 10], { threshold: 0.05 }],
    ["alpha 0.1", [0.05, 0.3, 100], { threshold: 0.05, alpha: 0.1 }],
    ["relative threshold", [0.2, 0.4, 64], { threshold: 0.2 }],
    ["negative sd", [0.05, -0.1, 10], { threshold: 0.05 }],
    ["n 0", [0.05, 0.1, 0], { threshold: 0.05 }],
    ["threshold NaN", [0.05, 0.1, 10], { threshold: NaN }],
  ],
  passAtK: [
    ["k 1 is c / n", [10, 3, 1]],
    ["k 5 of 10, 3 correct", [10, 3, 5]],
    ["n - c < k is 1", [10, 8, 5]],
    ["none correct", [10, 0, 3]],
    ["all correct", [4, 4, 4]],
    ["n 200, c 13, k 100", [200, 13, 100]],
    ["k > n", [3, 1, 4]],
    ["c > n", [3, 4, 1]],
    ["k 0", [3, 1, 0]],
  ],
  holmAdjust: [
    ["statsmodels example", [[0.01, 0.04, 0.03, 0.005]]],
    ["ties", [[0.02, 0.02, 0.5]]],
    ["capped at 1", [[0.4, 0.6, 0.9]]],
    ["one p", [[0.03]]],
    ["zeros and ones", [[0, 1, 0, 1]]],
    ["empty", [[]]],
    ["above 1", [[0.5, 1.5]]],
    ["NaN", [[0.5, NaN]]],
  ],
  clusteredMeanSE: [
    ["three templates", [[1, 0, 1, 1, 0, 0, 1, 0, 1], ["a", "a", "a", "b", "b", "b", "c", "c", "c"]]],
    ["interleaved clusters", [CONT_A, ["x", "y", "x", "y", "z", "z", "x", "y", "z", "x"]]],
    ["every item its own cluster", [[0.1, 0.4, 0.2, 0.9], ["1", "2", "3", "4"]]],
    ["paired differences", [[1, 0, -1, 0, 1, 1, 0, 0], ["t1", "t1", "t2", "t2", "t3", "t3", "t4", "t4"]]],
    ["constant values", [[0.5, 0.5, 0.5], ["a", "b", "a"]]],
    ["one cluster", [[1, 2, 3], ["a", "a", "a"]]],
    ["length mismatch", [[1, 2, 3], ["a", "b"]]],
    ["one value", [[1], ["a"]]],
    ["cluster not a string", [[1, 2], ["a", 3]]],
  ],
  hamedRaoTrend: [
    ["rising curve", [CURVE]],
    ["AR(1)-like wiggle", [[0.1, 0.15, 0.2, 0.22, 0.18, 0.14, 0.12, 0.16, 0.21, 0.25, 0.27, 0.24, 0.2, 0.18, 0.22, 0.26, 0.3, 0.29, 0.25, 0.23]]],
    ["alternating", [[0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1]]],
    ["ties", [[1, 2, 2, 3, 5, 4, 6, 7, 7, 7]]],
    ["constant", [[0.3, 0.3, 0.3, 0.3]]],
    ["three points", [[0, 1, 0]]],
    ["alpha 0.1", [CURVE], { alpha: 0.1 }],
    ["two is too few", [[1, 2]]],
    ["alpha 1", [CURVE], { alpha: 1 }],
  ],
  kendallW: [
    ["3 annotators rank 4 responses the same", [[[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 2, 3]]]],
    ["two reversed rankings", [[[0, 1, 2], [2, 1, 0]]]],
    ["Siegel & Castellan style, with ties", [[[1, 2.5, 2.5, 4, 5], [2, 1, 3, 4, 5], [1, 2, 3, 5, 4]]]],
    ["scores, not ranks", [[[0.9, 0.2, 0.5], [0.8, 0.1, 0.7], [0.3, 0.2, 0.9]]]],
    ["every rater ties everything: undefined", [[[1, 1, 1], [2, 2, 2]]]],
    ["one rater", [[[0, 1, 2]]]],
    ["one item", [[[0], [0]]]],
    ["ragged", [[[0, 1], [0, 1, 2]]]],
    ["empty", [[]]],
    ["NaN", [[[0, NaN], [0, 1]]]],
  ],
  plannedPairedSd: [
    ["conversions, base 0.3, +5 pp", [0.3, 0.05], { model: "conversions" }],
    ["independent, base 0.3, +5 pp", [0.3, 0.05], { model: "independent" }],
    ["independent, base 0.117, +10 pp", [0.117, 0.1], { model: "independent" }],
    ["negative delta", [0.5, -0.05], { model: "conversions" }],
    ["delta 0 independent", [0.4, 0], { model: "independent" }],
    ["candidate above 1", [0.98, 0.05], { model: "independent" }],
    ["pBase below 0", [-0.1, 0.05], { model: "independent" }],
    ["unknown model", [0.3, 0.05], { model: "correlated" }],
    ["NaN", [NaN, 0.05], { model: "independent" }],
  ],
  Rng: [
    ["seed 0", [0, 8, 10]],
    ["seed 1", [1, 8, 3]],
    ["seed 2^32-1", [4294967295, 8, 1000]],
    ["n = 1", [12345, 4, 1]],
    ["n = 2^32", [99, 4, 4294967296]],
    ["n = 2^31 + 1 (heavy rejection)", [7, 6, 2147483649]],
    ["seed negative", [-1, 1, 2]],
    ["seed too large", [4294967296, 1, 2]],
  ],
};

/** All vector files, built by running the TS code on INPUTS. */
export function buildVectorFiles(): VectorFile[] {
  const files: VectorFile[] = [];
  for (const fn of Object.keys(FUNCTIONS)) {
    const inputs = INPUTS[fn];
    if (inputs === undefined || inputs.length === 0) throw new Error(`no vector inputs for ${fn}`);
    const cases: VectorCase[] = inputs.map(([name, args, options]) => makeCase(fn, name, args, options));
    files.push(makeFile(fn, cases));
  }
  return files;
}

/** JSON with one case per line, so a diff of regenerated vectors shows which cases changed. */
export function formatVectorFile(f: VectorFile): string {
  const { cases, ...head } = f;
  const headLines = Object.entries(head).map(([k, v]) => `  ${JSON.stringify(k)}: ${JSON.stringify(v)},`);
  const caseLines = cases.map((c, i) => `    ${JSON.stringify(c)}${i < cases.length - 1 ? "," : ""}`);
  return ["{", ...headLines, '  "cases": [', ...caseLines, "  ]", "}", ""].join("\n");
}

/** Writes one JSON file per function into `dir` (replacing any stale *.json there). */
export function writeVectorFiles(dir: string): string[] {
  mkdirSync(dir, { recursive: true });
  const files = buildVectorFiles();
  const names = new Set(files.map((f) => `${f.function}.json`));
  for (const old of readdirSync(dir)) if (old.endsWith(".json") && !names.has(old)) rmSync(join(dir, old));
  for (const f of files) {
    const path = join(dir, `${f.function}.json`);
    writeFileSync(`${path}.tmp`, formatVectorFile(f));
    renameSync(`${path}.tmp`, path);
  }
  return [...names].sort();
}

/** Writes formatCurveThresholds() to `path` (atomically). */
export function writeCurveThresholds(path: string = CURVE_THRESHOLDS_JSON): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(`${path}.tmp`, formatCurveThresholds());
  renameSync(`${path}.tmp`, path);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const arg = (name: string): string | undefined => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const dir = resolve(arg("--out") ?? "../tests/vectors");
  const written = writeVectorFiles(dir);
  console.log(`wrote ${written.length} vector files to ${dir}`);
  const thresholds = resolve(arg("--thresholds") ?? CURVE_THRESHOLDS_JSON);
  writeCurveThresholds(thresholds);
  console.log(`wrote the curve thresholds to ${thresholds}`);
}
