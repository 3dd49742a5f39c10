/**
 * The statistics, held-out resampling: bootstrapMeanCI and relativeChangeCI (missing values skipped).
 * Ported to py_trainer/py_trainer/core/stats/resampling.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkProbability, checkSample, fail } from "./errors.js";
import { Interval, percentile, percentileInterval, Rng } from "./rng.js";
import { finiteValues, isPresent, mean, sumOf } from "./descriptive.js";

/**
 * Percentile bootstrap CI of the mean of the finite values (missing values skipped): resample n
 * indices with replacement (Rng seeded with `seed`, module docs) `resamples` times, take each
 * resample's mean, apply the percentile rule in the module docs. NaN bounds when fewer than 2
 * finite values are left (options are still checked). Defaults: 2000 resamples, 95%.
 */
export function bootstrapMeanCI(
  values: ReadonlyArray<number | null | undefined>,
  options: { seed: number; resamples?: number; confidence?: number },
): Interval {
  const x = finiteValues("values", values);
  const resamples = checkInteger("resamples", options.resamples ?? 2000, 1);
  const rng = new Rng(options.seed);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = x.length;
  if (n < 2) return { lower: NaN, upper: NaN };
  const means: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let s = 0;
    for (let i = 0; i < n; i++) s += x[rng.nextIndex(n)];
    means.push(s / n);
  }
  return percentileInterval(means, confidence);
}

/** Result of relativeChangeCI: (mean(end) - mean(start)) / |mean(start)| and its bootstrap CI. */
export interface RelativeChange extends Interval {
  estimate: number;
}

/**
 * Relative change (mean(end) - mean(start)) / |mean(start)| over the pairs (start[i], end[i])
 * where both are finite (a pair with a missing value is dropped), as a fraction (0.2 = +20%),
 * with a paired percentile bootstrap CI: resample n pair indices with replacement (Rng seeded
 * with `seed`), `resamples` times, percentile rule in the module docs. All NaN when no pair is
 * left or mean(start) = 0 (options are still checked). Defaults: 2000 resamples, 95%.
 *
 * A resample whose start mean is 0 is kept, not dropped: its relative change is +Infinity when
 * its end mean is above 0, -Infinity below 0, and 0 when both are 0, so a bound that reaches such
 * resamples is reported as unbounded (+-Infinity) instead of being cut off (percentile rule: an
 * interpolation that touches an infinity is that infinity).
 */
export function relativeChangeCI(
  start: ReadonlyArray<number | null | undefined>,
  end: ReadonlyArray<number | null | undefined>,
  options: { seed: number; resamples?: number; confidence?: number },
): RelativeChange {
  if (start.length !== end.length) fail("length_mismatch", `start has ${start.length} values, end has ${end.length}`);
  const okStart = start.map((x, i) => isPresent(`start[${i}]`, x));
  const okEnd = end.map((x, i) => isPresent(`end[${i}]`, x));
  const resamples = checkInteger("resamples", options.resamples ?? 2000, 1);
  const rng = new Rng(options.seed);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const a: number[] = [];
  const b: number[] = [];
  for (let i = 0; i < start.length; i++) {
    if (okStart[i] && okEnd[i]) {
      a.push(start[i] as number);
      b.push(end[i] as number);
    }
  }
  const n = a.length;
  const undefinedResult = { estimate: NaN, lower: NaN, upper: NaN };
  if (n === 0) return undefinedResult;
  const meanStart = sumOf(a) / n;
  if (meanStart === 0) return undefinedResult;
  const estimate = (sumOf(b) / n - meanStart) / Math.abs(meanStart);
  const relatives: number[] = [];
  for (let r = 0; r < resamples; r++) {
    let sa = 0;
    let sb = 0;
    for (let i = 0; i < n; i++) {
      const j = rng.nextIndex(n);
      sa += a[j];
      sb += b[j];
    }
    const am = sa / n;
    const bm = sb / n;
    if (am !== 0) relatives.push((bm - am) / Math.abs(am));
    else relatives.push(bm > 0 ? Infinity : bm < 0 ? -Infinity : 0);
  }
  const ci = percentileInterval(relatives, confidence);
  return { estimate, lower: ci.lower, upper: ci.upper };
}
