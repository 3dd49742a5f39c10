/**
 * The parity harness shared by the vector generator (vectors.ts), the random cross-check
 * (random.ts) and the TS vector test: the JSON vector format, its codec, the table of functions
 * under test (how a case's args call the TS function) and the float comparison.
 *
 * Vector file format (tests/vectors/<function>.json; scripts/parity.py reads the same format):
 *   { "format": 1, "module": "grpo" | "stats", "function": <TS name>, "python": <Python name>,
 *     "tolerance": { "ulp": n },
 *     "cases": [ { "name": str, "args": [...], "options"?: {...},
 *                  "expected": <result> | "error": { "type": <error class>, "kind": <kind> } } ] }
 * - args are positional; options (camelCase here) become Python keyword arguments in snake_case.
 * - Results are plain JSON: objects keep the TS field names (Python compares them to the
 *   snake_case fields of its dataclasses), null is None.
 * - NaN, Infinity, -Infinity and -0 are written as the strings "NaN", "Infinity", "-Infinity"
 *   and "-0", anywhere in args, options or results. A real string equal to one of those is
 *   refused by the encoder, so decoding is unambiguous.
 * - Comparison: booleans, strings, null and integers the Python port returns as int are equal
 *   exactly; other numbers are equal when both are NaN, both the same infinity, or finite and
 *   their distance in units in the last place (doubles ordered as integers, -0 one step below
 *   +0) is within tolerance.ulp.
 */
import * as advantage from "../agent/core/advantage.js";
import * as text from "../agent/core/answer-text.js";
import * as grpo from "../agent/core/task-rewards.js";
import * as stats from "../agent/core/stats/index.js";

// ---------------------------------------------------------------------------------------------
// Format and codec

/** Accepted float distance, in units in the last place. */
export interface Tolerance {
  ulp: number;
}

/** One case: positional args, optional options, and either the result or the error. */
export interface VectorCase {
  name: string;
  args: unknown[];
  options?: Record<string, unknown>;
  expected?: unknown;
  error?: { type: string; kind: string };
}

/** One file of tests/vectors. */
export interface VectorFile {
  format: 1;
  module: "grpo" | "stats";
  function: string;
  python: string;
  tolerance: Tolerance;
  cases: VectorCase[];
}

const SPECIAL_STRINGS = new Set(["NaN", "Infinity", "-Infinity", "-0"]);

/** Replaces NaN, +-Infinity and -0 by their string codes; throws on a real string that collides. */
export function encode(value: unknown): unknown {
  if (typeof value === "number") {
    if (Number.isNaN(value)) return "NaN";
    if (value === Infinity) return "Infinity";
    if (value === -Infinity) return "-Infinity";
    if (Object.is(value, -0)) return "-0";
    return value;
  }
  if (typeof value === "string") {
    if (SPECIAL_STRINGS.has(value)) throw new Error(`string ${JSON.stringify(value)} collides with a float code`);
    return value;
  }
  if (Array.isArray(value)) return value.map(encode);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (v !== undefined) out[k] = encode(v);
    return out;
  }
  return value;
}

/** Inverse of encode. */
export function decode(value: unknown): unknown {
  if (typeof value === "string") {
    if (value === "NaN") return NaN;
    if (value === "Infinity") return Infinity;
    if (value === "-Infinity") return -Infinity;
    if (value === "-0") return -0;
    return value;
  }
  if (Array.isArray(value)) return value.map(decode);
  if (value !== null && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = decode(v);
    return out;
  }
  return value;
}

/** The Python name of a TS name: camelCase to snake_case, acronyms as one word (pairedBootstrapCI -> paired_bootstrap_ci). */
export function snakeCase(name: string): string {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z])([A-Z][a-z])/g, "$1_$2")
    .toLowerCase();
}

// ---------------------------------------------------------------------------------------------
// Functions under test

/** How a vector case calls the TS code. */
export interface FunctionEntry {
  module: "grpo" | "stats";
  /** Python name when it is not snakeCase(TS name) */
  python?: string;
  tolerance: Tolerance;
  call: (args: any[], options: Record<string, any> | undefined) => unknown;
}

// Both ports do the same IEEE-754 operations in the same order (see stats.ts), so the stated
// tolerance is 0 ulp: any difference is a porting bug. (A looser tolerance would still require
// infinities and NaN to match exactly.)
const FLOAT_TOL: Tolerance = { ulp: 0 };

/** The functions with parity vectors, by TS name. Adapters turn closures and classes into data. */
export const FUNCTIONS: Record<string, FunctionEntry> = {
  groupRelativeAdvantage: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => advantage.groupRelativeAdvantage(a[0], a[1], o) },
  normalizeAnswer: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => text.normalizeAnswer(a[0], o) },
  extractAnswer: { module: "grpo", tolerance: FLOAT_TOL, call: (a) => text.extractAnswer(a[0], a[1]) },
  exactMatchReward: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => grpo.exactMatchReward(a[0], a[1], o) },
  formatReward: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => grpo.formatReward(a[0], o) },
  finalNumber: { module: "grpo", tolerance: FLOAT_TOL, call: (a) => grpo.finalNumber(a[0], a[1]) },
  finalNumberMatchReward: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => grpo.finalNumberMatchReward(a[0], a[1], o) },
  stopsAfterAnswerReward: { module: "grpo", tolerance: FLOAT_TOL, call: (a, o) => grpo.stopsAfterAnswerReward(a[0], o) },
  // args: [[{weight, value}]] -> the composed score of constant scorers
  composeRewards: {
    module: "grpo",
    tolerance: FLOAT_TOL,
    call: (a) => {
      const fns = (a[0] as { weight: number; value: number | null }[]).map((f) => ({ weight: f.weight, score: () => f.value }));
      return grpo.composeRewards(fns)("", []);
    },
  },
  // args: [spec, completions, answers] -> {name, weight, params, scores}
  buildReward: {
    module: "grpo",
    tolerance: FLOAT_TOL,
    call: (a) => {
      const built = grpo.buildReward(a[0]);
      return { name: built.name, weight: built.weight, params: built.params, scores: (a[1] as string[]).map((c) => built.score(c, a[2])) };
    },
  },
  // args: [specs, completions, answers] -> scores
  composeRewardSpecs: {
    module: "grpo",
    tolerance: FLOAT_TOL,
    call: (a) => {
      const score = grpo.composeRewardSpecs(a[0]);
      return (a[1] as string[]).map((c) => score(c, a[2]));
    },
  },
  rewardNames: { module: "grpo", tolerance: FLOAT_TOL, call: () => grpo.rewardNames() },

  normalCdf: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.normalCdf(a[0]) },
  normalQuantile: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.normalQuantile(a[0]) },
  studentTQuantile: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.studentTQuantile(a[0], a[1]) },
  noSpread: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.noSpread(a[0], o) },
  mean: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.mean(a[0]) },
  sampleSd: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.sampleSd(a[0]) },
  standardError: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.standardError(a[0]) },
  nanMean: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.nanMean(a[0]) },
  nanSampleSd: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.nanSampleSd(a[0]) },
  wilsonInterval: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.wilsonInterval(a[0], a[1], o) },
  mcnemarExactP: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.mcnemarExactP(a[0], a[1]) },
  pairedComparison: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.pairedComparison(a[0], a[1], o) },
  pairedBootstrapCI: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.pairedBootstrapCI(a[0], a[1], o) },
  bootstrapMeanCI: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.bootstrapMeanCI(a[0], o as { seed: number }) },
  intervalOverRuns: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.intervalOverRuns(a[0], o) },
  relativeChangeCI: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.relativeChangeCI(a[0], a[1], o as { seed: number }) },
  requiredNForDelta: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.requiredNForDelta(a[0], a[1], o) },
  minimumDetectableEffect: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.minimumDetectableEffect(a[0], a[1], o) },
  cohenKappa: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.cohenKappa(a[0], a[1], o) },
  kendallTauB: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.kendallTauB(a[0], a[1]) },
  fleissKappa: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.fleissKappa(a[0]) },
  startVsEnd: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.startVsEnd(a[0], o as { window: number }) },
  trend: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.trend(a[0]) },
  tangoScoreInterval: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.tangoScoreInterval(a[0], a[1], a[2], o) },
  pairedProportionGate: {
    module: "stats",
    tolerance: FLOAT_TOL,
    call: (a, o) => stats.pairedProportionGate(a[0], a[1], a[2], o as { threshold: number }),
  },
  simulatedOperatingCharacteristic: {
    module: "stats",
    tolerance: FLOAT_TOL,
    call: (a, o) => stats.simulatedOperatingCharacteristic(a[0], a[1], a[2], o as { threshold: number }),
  },
  operatingCharacteristic: {
    module: "stats",
    tolerance: FLOAT_TOL,
    call: (a, o) => stats.operatingCharacteristic(a[0], a[1], a[2], o as { threshold: number }),
  },
  passAtK: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.passAtK(a[0], a[1], a[2]) },
  holmAdjust: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.holmAdjust(a[0]) },
  clusteredMeanSE: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.clusteredMeanSE(a[0], a[1]) },
  hamedRaoTrend: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.hamedRaoTrend(a[0], o) },
  kendallW: { module: "stats", tolerance: FLOAT_TOL, call: (a) => stats.kendallW(a[0]) },
  plannedPairedSd: { module: "stats", tolerance: FLOAT_TOL, call: (a, o) => stats.plannedPairedSd(a[0], a[1], o as { model: "conversions" }) },
  // args: [seed, count, n] -> count nextUint32 draws, then count nextIndex(n) draws, from one stream
  Rng: {
    module: "stats",
    python: "Rng",
    tolerance: FLOAT_TOL,
    call: (a) => {
      const rng = new stats.Rng(a[0]);
      const uint32: number[] = [];
      const indices: number[] = [];
      for (let i = 0; i < a[1]; i++) uint32.push(rng.nextUint32());
      for (let i = 0; i < a[1]; i++) indices.push(rng.nextIndex(a[2]));
      return { uint32, indices };
    },
  },
};

/** Python name of a function in FUNCTIONS. */
export function pythonName(fn: string): string {
  return FUNCTIONS[fn].python ?? snakeCase(fn);
}

/** Runs one case through the TS code: the result, or the input error it raised. Other errors propagate. */
export function runCase(fn: string, args: unknown[], options?: Record<string, unknown>): Pick<VectorCase, "expected" | "error"> {
  const entry = FUNCTIONS[fn];
  if (entry === undefined) throw new Error(`unknown parity function ${fn}`);
  try {
    return { expected: toPlain(entry.call(args, options)) };
  } catch (e) {
    if (e instanceof text.RewardInputError || e instanceof stats.StatsInputError) {
      return { error: { type: e.name, kind: e.kind } };
    }
    throw e;
  }
}

function toPlain(value: unknown): unknown {
  return value === undefined ? null : JSON.parse(JSON.stringify(encode(value)));
}

/** Builds a case (encoded, ready to write) by running the TS code on the inputs. */
export function makeCase(fn: string, name: string, args: unknown[], options?: Record<string, unknown>): VectorCase {
  const outcome = runCase(fn, args, options);
  const c: VectorCase = { name, args: encode(args) as unknown[] };
  if (options !== undefined) c.options = encode(options) as Record<string, unknown>;
  if (outcome.error !== undefined) c.error = outcome.error;
  else c.expected = outcome.expected;
  return c;
}

/** A vector file for `fn` with the given (already made) cases. */
export function makeFile(fn: string, cases: VectorCase[]): VectorFile {
  const entry = FUNCTIONS[fn];
  return { format: 1, module: entry.module, function: fn, python: pythonName(fn), tolerance: entry.tolerance, cases };
}

// ---------------------------------------------------------------------------------------------
// Comparison

const cmpView = new DataView(new ArrayBuffer(8));

/** Doubles as ordered integers (BigInt): adjacent doubles differ by 1, -0 sits one below +0. */
function ordered(x: number): bigint {
  cmpView.setFloat64(0, x);
  const bits = cmpView.getBigInt64(0);
  return bits >= 0n ? bits : -(bits & 0x7fffffffffffffffn) - 1n;
}

/** Distance in ulp between two doubles: 0 for two NaNs or the same infinity, Infinity when only one is NaN or infinite. */
export function ulpDistance(x: number, y: number): number {
  if (Number.isNaN(x) || Number.isNaN(y)) return Number.isNaN(x) && Number.isNaN(y) ? 0 : Infinity;
  if (!Number.isFinite(x) || !Number.isFinite(y)) return x === y ? 0 : Infinity;
  const d = ordered(x) - ordered(y);
  return Number(d < 0n ? -d : d);
}

/** A difference found by compareValues: where, and how far apart for numbers. */
export interface Mismatch {
  path: string;
  message: string;
}

/** Float statistics gathered while comparing (for the parity table). */
export interface DiffStats {
  maxAbs: number;
  maxUlp: number;
}

/**
 * Compares an actual result with an expected one (both decoded). Numbers within tolerance.ulp;
 * everything else exactly. Returns the mismatches and updates `diff` with the float distances.
 */
export function compareValues(expected: unknown, actual: unknown, tol: Tolerance, diff: DiffStats, path = "$"): Mismatch[] {
  if (typeof expected === "number") {
    if (typeof actual !== "number") return [{ path, message: `expected number ${expected}, got ${JSON.stringify(actual)}` }];
    const u = ulpDistance(expected, actual);
    const abs = Number.isNaN(expected) || Number.isNaN(actual) || expected === actual ? 0 : Math.abs(expected - actual);
    diff.maxUlp = Math.max(diff.maxUlp, u);
    if (!Number.isNaN(abs)) diff.maxAbs = Math.max(diff.maxAbs, abs);
    return u <= tol.ulp ? [] : [{ path, message: `expected ${expected}, got ${actual} (${u} ulp)` }];
  }
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) {
      return [{ path, message: `expected an array of ${expected.length}, got ${JSON.stringify(actual)}` }];
    }
    return expected.flatMap((e, i) => compareValues(e, actual[i], tol, diff, `${path}[${i}]`));
  }
  if (expected !== null && typeof expected === "object") {
    if (actual === null || typeof actual !== "object" || Array.isArray(actual)) {
      return [{ path, message: `expected an object, got ${JSON.stringify(actual)}` }];
    }
    const ek = Object.keys(expected).sort();
    const ak = Object.keys(actual).sort();
    if (ek.join(",") !== ak.join(",")) return [{ path, message: `keys differ: expected ${ek}, got ${ak}` }];
    return ek.flatMap((k) => compareValues((expected as Record<string, unknown>)[k], (actual as Record<string, unknown>)[k], tol, diff, `${path}.${k}`));
  }
  return expected === actual ? [] : [{ path, message: `expected ${JSON.stringify(expected)}, got ${JSON.stringify(actual)}` }];
}
