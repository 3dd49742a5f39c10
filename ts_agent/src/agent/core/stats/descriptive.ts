/**
 * The statistics, descriptive statistics: mean, sd, se, their nan* versions, Wilson's interval, average
 * ranks, the one "no spread" rule (noSpread) and the interval over runs (intervalOverRuns).
 * Ported to py_trainer/py_trainer/core/stats/descriptive.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkNumber, checkProbability, checkSample, fail } from "./errors.js";
import { studentTQuantile, zCritical } from "./distributions.js";
import { Interval } from "./rng.js";

export function sumOf(xs: ReadonlyArray<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i];
  return s;
}

export function sumSquaredDeviations(xs: ReadonlyArray<number>, m: number): number {
  let ss = 0;
  for (let i = 0; i < xs.length; i++) {
    const dev = xs[i] - m;
    ss += dev * dev;
  }
  return ss;
}

/** Arithmetic mean (left-to-right sum / n). */
export function mean(xs: ReadonlyArray<number>): number {
  checkSample("xs", xs, 1);
  return sumOf(xs) / xs.length;
}

/** Sample standard deviation (Bessel, n - 1; two-pass); needs n >= 2. */
/** noSpread's tolerance in units of float64 precision (Number.EPSILON = 2^-52) times the data's
 *  scale. Rounding moves a per-task mean k / K and a difference of two of them by a few ulps of
 *  the scale (0.2 vs 0.19999999999999996 is 1 ulp); 64 ulps (1.4e-14 at scale 1) leaves room for
 *  sums of many samples and is still far below any difference a score can show. */
export const NO_SPREAD_ULPS = 64;

/**
 * Whether `values` have no spread: max - min <= NO_SPREAD_ULPS * Number.EPSILON * scale. `scale`
 * is the magnitude of the numbers the values were computed from (for differences b - a: the
 * largest |a_i|, |b_i|), default the largest |value|. The one "no spread" rule: every test that
 * would divide by a standard deviation asks this, never sd === 0, because values that are equal
 * in exact arithmetic can differ in the last bits and then read as certainty (t ~ 1e15).
 */
export function noSpread(values: ReadonlyArray<number>, options: { scale?: number } = {}): boolean {
  checkSample("values", values, 1);
  let lo = values[0];
  let hi = values[0];
  let big = 0;
  for (let i = 0; i < values.length; i++) {
    const x = values[i];
    if (x < lo) lo = x;
    if (x > hi) hi = x;
    const ax = Math.abs(x);
    if (ax > big) big = ax;
  }
  let scale = big;
  if (options.scale !== undefined) {
    scale = checkNumber("scale", options.scale);
    if (scale < 0) fail("out_of_range", `scale must be >= 0, got ${scale}`);
  }
  return hi - lo <= NO_SPREAD_ULPS * Number.EPSILON * scale;
}

export function sampleSd(xs: ReadonlyArray<number>): number {
  checkSample("xs", xs, 2);
  return Math.sqrt(sumSquaredDeviations(xs, sumOf(xs) / xs.length) / (xs.length - 1));
}

/** Standard error of the mean: sampleSd / sqrt(n); needs n >= 2. */
export function standardError(xs: ReadonlyArray<number>): number {
  checkSample("xs", xs, 2);
  const sd = Math.sqrt(sumSquaredDeviations(xs, sumOf(xs) / xs.length) / (xs.length - 1));
  return sd / Math.sqrt(xs.length);
}

/**
 * The finite values of xs in order; null, undefined, NaN and +-Infinity are missing and skipped
 * (the module docs' "missing values"). Anything else that is not a number throws "nan".
 */
export function finiteValues(name: string, xs: ReadonlyArray<number | null | undefined>): number[] {
  const out: number[] = [];
  for (let i = 0; i < xs.length; i++) if (isPresent(`${name}[${i}]`, xs[i])) out.push(xs[i] as number);
  return out;
}

/** true for a finite number, false for a missing value (see finiteValues); throws "nan" otherwise. */
export function isPresent(name: string, x: unknown): boolean {
  if (x === null || x === undefined) return false;
  if (typeof x !== "number") fail("nan", `${name} must be a number or missing, got ${String(x)}`);
  return Number.isFinite(x);
}

/** Mean of the finite values of xs (missing values skipped, module docs); NaN when none is left. */
export function nanMean(xs: ReadonlyArray<number | null | undefined>): number {
  const v = finiteValues("xs", xs);
  return v.length === 0 ? NaN : sumOf(v) / v.length;
}

/**
 * Sample standard deviation (Bessel, n - 1; two-pass) of the finite values of xs (missing values
 * skipped, module docs); NaN when fewer than 2 are left.
 */
export function nanSampleSd(xs: ReadonlyArray<number | null | undefined>): number {
  const v = finiteValues("xs", xs);
  if (v.length < 2) return NaN;
  return Math.sqrt(sumSquaredDeviations(v, sumOf(v) / v.length) / (v.length - 1));
}

/** A proportion with its Wilson score interval. */
export interface ProportionInterval extends Interval {
  /** successes / n */
  estimate: number;
}

/**
 * Wilson score interval for successes out of n (statsmodels proportion_confint(method="wilson")
 * formula), clipped to [0, 1] against rounding.
 */
export function wilsonInterval(successes: number, n: number, options: { confidence?: number } = {}): ProportionInterval {
  checkInteger("n", n, 0);
  if (n === 0) fail("empty", "n must be > 0");
  checkInteger("successes", successes, 0);
  if (successes > n) fail("out_of_range", `successes (${successes}) must be <= n (${n})`);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const z = zCritical(1 - confidence);
  const z2 = z * z;
  const p = successes / n;
  const denom = 1 + z2 / n;
  const center = (p + z2 / (2 * n)) / denom;
  const dist = (z * Math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denom;
  return { estimate: p, lower: Math.max(0, center - dist), upper: Math.min(1, center + dist) };
}

/** Average ranks (1-based, ties share the mean of their positions), as scipy's rankdata. */
export function averageRanks(xs: ReadonlyArray<number>): number[] {
  const order = xs.map((_, i) => i).sort((x, y) => (xs[x] < xs[y] ? -1 : xs[x] > xs[y] ? 1 : x - y));
  const ranks = new Array<number>(xs.length);
  let i = 0;
  while (i < order.length) {
    let j = i + 1;
    while (j < order.length && xs[order[j]] === xs[order[i]]) j++;
    const r = (i + j + 1) / 2;
    for (let k = i; k < j; k++) ranks[order[k]] = r;
    i = j;
  }
  return ranks;
}

/** An effect across training runs (seeds): mean, between-run SD and an interval over runs. */
export interface RunsInterval extends Interval {
  n: number;
  mean: number;
  /** sample SD over runs (n - 1); NaN for one run, 0 when the runs have no spread */
  sd: number;
  /** how the interval was made, or why there is none */
  method: string;
}

/**
 * The mean of one value per training run (e.g. each seed's downstream delta) with an interval over
 * runs: the run is the unit. One method at every n: Student's t, mean +- t(n-1) * SD / sqrt(n)
 * (simulated coverage with normal per-seed deltas 0.94-0.96 at 3, 5, 10 and 20 seeds: test
 * interval-over-seeds.test.ts; the percentile bootstrap over runs used from 10 seeds covered about
 * 0.90 there). Runs with no spread (noSpread): sd 0 and no interval (NaN bounds), the method saying
 * why; a zero-width interval would read certainty. One run: NaN bounds and SD. Units are the
 * caller's (fractions in, fractions out).
 */
export function intervalOverRuns(values: ReadonlyArray<number>, options: { confidence?: number } = {}): RunsInterval {
  checkSample("values", values, 1);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = values.length;
  const m = sumOf(values) / n;
  if (n < 2) return { n, mean: m, sd: NaN, lower: NaN, upper: NaN, method: "one run: no interval" };
  if (noSpread(values)) {
    return {
      n,
      mean: m,
      sd: 0,
      lower: NaN,
      upper: NaN,
      method: `no interval: the ${n} runs have no spread (equal up to rounding), and a zero-width interval would read certainty`,
    };
  }
  const sd = Math.sqrt(sumSquaredDeviations(values, m) / (n - 1));
  const half = (studentTQuantile(1 - (1 - confidence) / 2, n - 1) * sd) / Math.sqrt(n);
  return { n, mean: m, sd, lower: m - half, upper: m + half, method: `t interval over ${n} runs (df ${n - 1})` };
}
