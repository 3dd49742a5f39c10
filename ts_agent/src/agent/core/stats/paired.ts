/**
 * The statistics, paired tests: McNemar's exact p, pairedComparison, the paired bootstrap, Tango's score interval.
 * Ported to py_trainer/py_trainer/core/stats/paired.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkPair, checkProbability, fail } from "./errors.js";
import { pow2 } from "./elementary.js";
import { clampP, studentAbsCdf, studentCritical, zCritical } from "./distributions.js";
import { Interval, percentileInterval, Rng } from "./rng.js";
import { noSpread, sumOf, sumSquaredDeviations } from "./descriptive.js";

/** Discordant pairs of a 0/1 paired comparison (McNemar's table with `a` as rows). */
export interface Discordant {
  /** pairs with a = 1 and b = 0 */
  b: number;
  /** pairs with a = 0 and b = 1 */
  c: number;
}

/** Result of pairedComparison. All differences are b - a, as fractions. */
export interface PairedComparison {
  n: number;
  meanA: number;
  meanB: number;
  /** mean of d = b - a */
  meanDiff: number;
  /** sample sd of d */
  sdDiff: number;
  /** sdDiff / sqrt(n) */
  seDiff: number;
  confidence: number;
  /** meanDiff -/+ z_{1-alpha/2} seDiff */
  ciNormal: Interval;
  /** meanDiff -/+ t_{n-1, 1-alpha/2} seDiff (the paired t interval) */
  ciT: Interval;
  /** Pearson r between a and b; null when either has zero variance */
  correlation: number | null;
  /** every score is 0 or 1 */
  binary: boolean;
  /** discordant counts; null unless binary */
  discordant: Discordant | null;
  /** exact two-sided McNemar p (mcnemarExactP); null unless binary */
  mcnemarP: number | null;
  /** two-sided paired t test p: 1 - P(|T_{n-1}| <= |meanDiff / seDiff|), clamped to [0, 1]; with
   *  seDiff = 0 it is 1 when meanDiff = 0, else 0 */
  tTestP: number;
}

/**
 * Exact two-sided McNemar p-value: min(1, 2 P(X <= min(b, c))) with X ~ Binomial(b + c, 1/2)
 * (statsmodels mcnemar(exact=True)); 1 when b + c = 0. Summed exactly in integers and
 * correctly rounded.
 */
export function mcnemarExactP(b: number, c: number): number {
  checkInteger("b", b, 0);
  checkInteger("c", c, 0);
  const n = b + c;
  if (n === 0) return 1;
  const m = Math.min(b, c);
  let term = 1n;
  let total = 1n;
  for (let k = 0; k < m; k++) {
    term = (term * BigInt(n - k)) / BigInt(k + 1);
    total += term;
  }
  return Math.min(1, bigIntTimesPow2(total, -(n - 1)));
}

function bitLength(x: bigint): number {
  return x === 0n ? 0 : x.toString(2).length;
}

/** num * 2^e correctly rounded to a double (round half to even), for num >= 0 and results < 2^970. */
function bigIntTimesPow2(num: bigint, e: number): number {
  if (num === 0n) return 0;
  const bits = bitLength(num);
  // The result lies in [2^(top-1), 2^top); its ulp is 2^g, with g floored at the subnormal grid.
  const top = bits + e;
  const g = Math.max(top - 53, -1074);
  const shift = g - e; // we need round(num / 2^shift) * 2^g
  let q: bigint;
  if (shift <= 0) {
    q = num << BigInt(-shift);
  } else {
    const bs = BigInt(shift);
    q = num >> bs;
    const rem = num - (q << bs);
    const half = 1n << (bs - 1n);
    if (rem > half || (rem === half && (q & 1n) === 1n)) q += 1n;
  }
  // q <= 2^53 is exact; scaling by 2^g is exact because the value is on the double grid.
  const qn = Number(q);
  if (g >= -1022) return qn * pow2(g);
  return qn * pow2(g + 300) * pow2(-300);
}

/**
 * Paired comparison of two score vectors on the same items (a = baseline, b = candidate):
 * mean difference b - a, its SE, normal and t intervals, Pearson correlation, and for 0/1 scores
 * the discordant counts with the exact McNemar p. Needs n >= 2.
 */
export function pairedComparison(a: ReadonlyArray<number>, b: ReadonlyArray<number>, options: { confidence?: number } = {}): PairedComparison {
  checkPair(a, b, 2);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = a.length;
  const d: number[] = [];
  for (let i = 0; i < n; i++) d.push(b[i] - a[i]);
  const meanA = sumOf(a) / n;
  const meanB = sumOf(b) / n;
  // no spread (noSpread, at the scale of the scores): sd 0; and a mean that is 0 up to rounding is 0
  let scale = 0;
  for (let i = 0; i < n; i++) scale = Math.max(scale, Math.abs(a[i]), Math.abs(b[i]));
  const flat = noSpread(d, { scale });
  const meanDiff = flat && noSpread([...d, 0], { scale }) ? 0 : sumOf(d) / n;
  const sdDiff = flat ? 0 : Math.sqrt(sumSquaredDeviations(d, meanDiff) / (n - 1));
  const seDiff = sdDiff / Math.sqrt(n);
  const z = zCritical(1 - confidence);
  const t = studentCritical(confidence, n - 1);
  let saa = 0;
  let sbb = 0;
  let sab = 0;
  for (let i = 0; i < n; i++) {
    const da = a[i] - meanA;
    const db = b[i] - meanB;
    saa += da * da;
    sbb += db * db;
    sab += da * db;
  }
  const correlation = saa === 0 || sbb === 0 || noSpread(a) || noSpread(b) ? null : Math.max(-1, Math.min(1, sab / (Math.sqrt(saa) * Math.sqrt(sbb))));
  let binary = true;
  let n10 = 0;
  let n01 = 0;
  for (let i = 0; i < n; i++) {
    const x = a[i];
    const y = b[i];
    if ((x !== 0 && x !== 1) || (y !== 0 && y !== 1)) {
      binary = false;
      break;
    }
    if (x === 1 && y === 0) n10++;
    if (x === 0 && y === 1) n01++;
  }
  return {
    n,
    meanA,
    meanB,
    meanDiff,
    sdDiff,
    seDiff,
    confidence,
    ciNormal: { lower: meanDiff - z * seDiff, upper: meanDiff + z * seDiff },
    ciT: { lower: meanDiff - t * seDiff, upper: meanDiff + t * seDiff },
    correlation,
    binary,
    discordant: binary ? { b: n10, c: n01 } : null,
    mcnemarP: binary ? mcnemarExactP(n10, n01) : null,
    tTestP: seDiff > 0 ? clampP(1 - studentAbsCdf(Math.abs(meanDiff / seDiff), n - 1)) : meanDiff === 0 ? 1 : 0,
  };
}

/** Result of pairedBootstrapCI (difference b - a). */
export interface BootstrapInterval extends Interval {
  /** mean of b - a on the original sample */
  estimate: number;
  resamples: number;
  seed: number;
  confidence: number;
}

/**
 * Percentile bootstrap CI for the mean paired difference b - a: resample pair indices with
 * replacement (Rng, module docs), `resamples` times; percentile rule in the module docs.
 * Same seed, same interval, in both languages. Defaults: 10000 resamples, seed 0. Needs n >= 2.
 */
export function pairedBootstrapCI(
  a: ReadonlyArray<number>,
  b: ReadonlyArray<number>,
  options: { resamples?: number; seed?: number; confidence?: number } = {},
): BootstrapInterval {
  checkPair(a, b, 2);
  const resamples = checkInteger("resamples", options.resamples ?? 10000, 1);
  const seed = options.seed ?? 0;
  const rng = new Rng(seed);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = a.length;
  const d: number[] = [];
  for (let i = 0; i < n; i++) d.push(b[i] - a[i]);
  const stats: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += d[rng.nextIndex(n)];
    stats.push(s / n);
  }
  const ci = percentileInterval(stats, confidence);
  return { estimate: sumOf(d) / n, lower: ci.lower, upper: ci.upper, resamples, seed, confidence };
}

/** Result of tangoScoreInterval: the paired difference of proportions and its score interval. */
export interface PairedProportionInterval extends Interval {
  /** (c - b) / n: candidate accuracy minus base accuracy */
  estimate: number;
  n: number;
  confidence: number;
}

/**
 * Tango's (1998) score interval for the difference of two paired proportions, candidate minus
 * base: delta = (c - b) / n with b = pairs base right & candidate wrong, c = base wrong &
 * candidate right (McNemar's discordant counts, as pairedComparison's `discordant`), n all pairs.
 * The interval is {delta : |Z(delta)| <= z_{1-alpha/2}} for the score statistic
 * Z(delta) = (c - b - n delta) / sqrt(n (2 q + delta (1 - delta))), q the MLE of P(base right,
 * candidate wrong) under delta: q = (W + sqrt(W^2 + 8 n b delta (1 - delta))) / (4 n) with
 * W = c (1 + delta) + b (1 - delta) - 2 n delta. Z(0) is McNemar's (uncorrected) z, so the
 * interval excludes 0 exactly when that score test rejects; it stays non-degenerate when b + c = 0.
 * Z decreases in delta; each bound is found by bisection on [-1, 1] to adjacent doubles.
 */
export function tangoScoreInterval(b: number, c: number, n: number, options: { confidence?: number } = {}): PairedProportionInterval {
  checkInteger("b", b, 0);
  checkInteger("c", c, 0);
  checkInteger("n", n, 1);
  if (b + c > n) fail("out_of_range", `b + c (${b + c}) must be <= n (${n})`);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const z = zCritical(1 - confidence);
  const score = (delta: number): number => {
    const w = c * (1 + delta) + b * (1 - delta) - 2 * n * delta;
    const disc = w * w + 8 * n * b * delta * (1 - delta);
    const q = (w + Math.sqrt(disc > 0 ? disc : 0)) / (4 * n);
    const v = n * (2 * q + delta * (1 - delta));
    const num = c - b - n * delta;
    if (!(v > 0)) return num > 0 ? Infinity : num < 0 ? -Infinity : 0;
    return num / Math.sqrt(v);
  };
  const estimate = (c - b) / n;
  // lower: the smallest delta with Z(delta) <= z
  let lower = -1;
  if (score(-1) > z) {
    let lo = -1;
    let hi = estimate;
    for (;;) {
      const mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      if (score(mid) > z) lo = mid;
      else hi = mid;
    }
    lower = hi;
  }
  // upper: the largest delta with Z(delta) >= -z
  let upper = 1;
  if (score(1) < -z) {
    let lo = estimate;
    let hi = 1;
    for (;;) {
      const mid = 0.5 * (lo + hi);
      if (mid <= lo || mid >= hi) break;
      if (score(mid) < -z) hi = mid;
      else lo = mid;
    }
    upper = lo;
  }
  return { estimate, lower, upper, n, confidence };
}
