/**
 * The statistics, training curves: startVsEnd, trend (Mann-Kendall with Sen's slope), Hamed-Rao's trend.
 * Ported to py_trainer/py_trainer/core/stats/trend.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkProbability, checkSample, fail } from "./errors.js";
import { erfc, SQRT1_2 } from "./elementary.js";
import { clampP, studentCritical, zCritical } from "./distributions.js";
import { Interval, sortNumbers } from "./rng.js";
import { averageRanks, sumOf } from "./descriptive.js";

/** Result of startVsEnd. Changes are end - start; the relative change is (end - start) / |start|. */
export interface StartVsEnd {
  window: number;
  confidence: number;
  startMean: number;
  endMean: number;
  change: number;
  /** null when startMean = 0 */
  relativeChange: number | null;
  /** the lag-1 autocorrelation the interval assumes (AR(1) phi; see startVsEnd) */
  autocorrelation: number;
  /** standard error of one window's mean under that autocorrelation */
  windowSe: number;
  /** standard error of change: sqrt(2) windowSe */
  changeSe: number;
  /** degrees of freedom of the t critical value: floor(n (1 - phi) / (1 + phi)) - 2, at least
   *  START_VS_END_MIN_DF */
  df: number;
  /** change -/+ t_{df} changeSe */
  changeCi: Interval;
}

/** The AR(1) coefficient startVsEnd assumes at most: beyond it the window means carry almost no
 *  information and the interval would be unbounded in all but name. */
export const START_VS_END_MAX_AUTOCORRELATION = 0.9;
/** The fewest degrees of freedom startVsEnd's t uses: a curve with a kink (a ramp, then flat) reads
 *  as strongly autocorrelated differences, and t_1 (12.7) would then hide a rise of 40x the noise. */
export const START_VS_END_MIN_DF = 3;

/**
 * Compares the mean of the first and last `window` points of a series (e.g. reward per step), with
 * a t interval for the change whose standard error allows for AR(1) autocorrelation (a HAC
 * interval on the window means):
 * - phi: from the first differences d_i = x_{i+1} - x_i (a smooth trend drops out of them), whose
 *   lag-1 autocorrelation is -(1 - phi) / 2 under AR(1); so phi = 1 + 2 r_1(d) + 1 / sqrt(n),
 *   clamped to [0, START_VS_END_MAX_AUTOCORRELATION]. The + 1 / sqrt(n) (about half the estimate's
 *   standard error) is deliberate: the estimate is noisy and the variance is convex in it, and
 *   without the margin AR(1) phi 0.5 curves were covered 93% of the time (simulated; with it 96-98%
 *   at every length from 20 steps, iid 97-99%).
 * - gamma_0 = var(d) / (2 (1 - phi)) (var with n - 2 degrees of freedom), the variance of a window
 *   mean gamma_0 / w * (1 + 2 sum_{k<w} (1 - k/w) phi^k), and changeSe = sqrt(2) windowSe (the two
 *   windows treated as uncorrelated, which is conservative for phi >= 0).
 * - the CI is change -/+ t_{df} changeSe with df = floor(n (1 - phi) / (1 + phi)) - 2 (at least
 *   START_VS_END_MIN_DF): the effective number of independent points, less the two means.
 * r_1(d) is taken as -1/2 (phi 0) when the differences have no spread. Needs 1 <= window,
 * 2 * window <= series length and length >= 3. Deterministic (no resampling).
 * A series of finite values whose window means, their change, the spread of its first differences
 * or the change's standard error overflow (are not finite in float64, e.g. 1e308 beside -1e308) is
 * refused like a non-finite value: StatsInputError out_of_range, the message naming `series`.
 */
const OVERFLOW_MESSAGE = "series overflows: its window means, their change or the spread of its first differences is not finite in float64; rescale the series";

export function startVsEnd(series: ReadonlyArray<number>, options: { window: number; confidence?: number }): StartVsEnd {
  checkSample("series", series, 3);
  const window = checkInteger("window", options.window, 1);
  const n = series.length;
  if (2 * window > n) fail("out_of_range", `2 * window (${2 * window}) exceeds the series length (${n})`);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const first = series.slice(0, window);
  const last = series.slice(n - window);
  const startMean = sumOf(first) / window;
  const endMean = sumOf(last) / window;
  const change = endMean - startMean;
  const d: number[] = [];
  for (let i = 0; i + 1 < n; i++) d.push(series[i + 1] - series[i]);
  const m = d.length;
  const dm = sumOf(d) / m;
  let v = 0;
  let c = 0;
  for (let i = 0; i < m; i++) {
    const dev = d[i] - dm;
    v += dev * dev;
    if (i + 1 < m) c += dev * (d[i + 1] - dm);
  }
  const r1 = v > 0 ? c / v : -0.5;
  let phi = 1 + 2 * r1 + 1 / Math.sqrt(n);
  if (phi < 0) phi = 0;
  if (phi > START_VS_END_MAX_AUTOCORRELATION) phi = START_VS_END_MAX_AUTOCORRELATION;
  const gamma0 = v / (m - 1) / (2 * (1 - phi));
  let f = 1;
  let pk = 1;
  for (let k = 1; k < window; k++) {
    pk = pk * phi;
    f += 2 * (1 - k / window) * pk;
  }
  const windowSe = Math.sqrt((gamma0 * f) / window);
  const changeSe = Math.sqrt(2) * windowSe;
  if (![startMean, endMean, change, v, c, changeSe].every(Number.isFinite)) fail("out_of_range", OVERFLOW_MESSAGE);
  const df = Math.max(START_VS_END_MIN_DF, Math.floor((n * (1 - phi)) / (1 + phi)) - 2);
  const t = studentCritical(confidence, df);
  return {
    window,
    confidence,
    startMean,
    endMean,
    change,
    relativeChange: startMean === 0 ? null : change / Math.abs(startMean),
    autocorrelation: phi,
    windowSe,
    changeSe,
    df,
    changeCi: { lower: change - t * changeSe, upper: change + t * changeSe },
  };
}

/** Result of trend. */
export interface Trend {
  n: number;
  /** Mann-Kendall S = sum over i < j of sign(x_j - x_i) */
  s: number;
  /** var(S) with the tie correction */
  varS: number;
  /** continuity-corrected z: (S - 1)/sqrt(var) for S > 0, (S + 1)/sqrt(var) for S < 0, else 0 */
  z: number;
  /** two-sided normal p */
  p: number;
  /** Kendall's tau-a = S / (n (n - 1) / 2) */
  tau: number;
  /** Sen's slope: median of (x_j - x_i) / (j - i) over i < j, per step */
  senSlope: number;
}

/** Mann-Kendall trend test (normal approximation, tie-corrected variance) and Sen's slope; n >= 3. */
export function trend(series: ReadonlyArray<number>): Trend {
  checkSample("series", series, 3);
  const n = series.length;
  let s = 0;
  const slopes: number[] = [];
  for (let i = 0; i < n - 1; i++) {
    for (let j = i + 1; j < n; j++) {
      const diff = series[j] - series[i];
      if (series[j] > series[i]) s++;
      else if (series[j] < series[i]) s--;
      slopes.push(diff / (j - i));
    }
  }
  const sorted = sortNumbers([...series]);
  let tieTerm = 0;
  let run = 1;
  for (let i = 1; i <= n; i++) {
    if (i < n && sorted[i] === sorted[i - 1]) run++;
    else {
      tieTerm += run * (run - 1) * (2 * run + 5);
      run = 1;
    }
  }
  const varS = (n * (n - 1) * (2 * n + 5) - tieTerm) / 18;
  let z = 0;
  if (varS > 0 && s > 0) z = (s - 1) / Math.sqrt(varS);
  else if (varS > 0 && s < 0) z = (s + 1) / Math.sqrt(varS);
  sortNumbers(slopes);
  const m = slopes.length;
  const senSlope = m % 2 === 1 ? slopes[(m - 1) / 2] : (slopes[m / 2 - 1] + slopes[m / 2]) / 2;
  return { n, s, varS, z, p: clampP(erfc(Math.abs(z) * SQRT1_2)), tau: s / ((n * (n - 1)) / 2), senSlope };
}

/** Result of hamedRaoTrend: trend's fields with var(S), z and p corrected for autocorrelation. */
export interface HamedRaoTrend extends Trend {
  /** var(S) before the correction (trend's varS) */
  varSUncorrected: number;
  /** the factor n / n*_s applied to var(S) */
  correction: number;
  /** lags whose rank autocorrelation was significant at `alpha` (and so entered the correction) */
  significantLags: number[];
  alpha: number;
}

/**
 * Hamed & Rao's (1998) modified Mann-Kendall test, as pymannkendall's
 * hamed_rao_modification_test with every lag: detrend by Sen's slope (x_i - (i + 1) slope), rank,
 * take the rank autocorrelations r_k (lag-k autocovariance over n, divided by the lag-0 one), keep
 * those with |r_k| > z_{1-alpha/2} / sqrt(n), and multiply var(S) by
 * 1 + 2 / (n (n-1) (n-2)) * sum_k (n-k)(n-k-1)(n-k-2) r_k. Positive autocorrelation widens var(S),
 * so a noisy but autocorrelated curve is not called a trend. When the corrected var(S) is not
 * positive (strong negative autocorrelation) z is 0 and p is 1. Default alpha 0.05; n >= 3.
 */
export function hamedRaoTrend(series: ReadonlyArray<number>, options: { alpha?: number } = {}): HamedRaoTrend {
  const base = trend(series);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const n = series.length;
  const detrended: number[] = [];
  for (let i = 0; i < n; i++) detrended.push(series[i] - (i + 1) * base.senSlope);
  const ranks = averageRanks(detrended);
  const rm = sumOf(ranks) / n;
  const y = ranks.map((r) => r - rm);
  let acov0 = 0;
  for (let i = 0; i < n; i++) acov0 += y[i] * y[i];
  acov0 = acov0 / n;
  const bound = zCritical(alpha) / Math.sqrt(n);
  let sni = 0;
  const significantLags: number[] = [];
  if (acov0 > 0) {
    for (let k = 1; k < n; k++) {
      let ak = 0;
      for (let i = 0; i + k < n; i++) ak += y[i] * y[i + k];
      const r = ak / n / acov0;
      if (r > bound || r < -bound) {
        sni += (n - k) * (n - k - 1) * (n - k - 2) * r;
        significantLags.push(k);
      }
    }
  }
  const correction = 1 + (2 / (n * (n - 1) * (n - 2))) * sni;
  const varS = base.varS * correction;
  let z = 0;
  if (varS > 0 && base.s > 0) z = (base.s - 1) / Math.sqrt(varS);
  else if (varS > 0 && base.s < 0) z = (base.s + 1) / Math.sqrt(varS);
  return { ...base, varS, z, p: clampP(erfc(Math.abs(z) * SQRT1_2)), varSUncorrected: base.varS, correction, significantLags, alpha };
}
