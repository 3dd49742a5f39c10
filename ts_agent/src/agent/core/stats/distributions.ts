/**
 * The statistics, distributions: the standard normal and Student t: CDFs, quantiles, critical values.
 * Ported to py_trainer/py_trainer/core/stats/distributions.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

import { checkInteger, checkProbability, fail } from "./errors.js";
import { atan, erfc, log, SQRT1_2, TWO_OVER_PI } from "./elementary.js";

/** A p-value clamped to [0, 1] (1 - a CDF can round to -2.2e-16); NaN stays NaN. */
export function clampP(p: number): number {
  return p < 0 ? 0 : p > 1 ? 1 : p;
}

/** Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2; relative error ~1e-15 in both tails. */
export function normalCdf(x: number): number {
  if (typeof x !== "number" || Number.isNaN(x)) fail("nan", `x must be a number, got ${String(x)}`);
  return 0.5 * erfc(-x * SQRT1_2);
}

/**
 * Standard normal quantile Phi^{-1}(p) for p in (0, 1): Wichura's AS241 (PPND16), relative
 * error about 1e-16, written out as in CPython's statistics.NormalDist.inv_cdf.
 */
export function normalQuantile(p: number): number {
  checkProbability("p", p);
  const q = p - 0.5;
  if (Math.abs(q) <= 0.425) {
    const r = 0.180625 - q * q;
    const num =
      (((((((2.5090809287301226727e3 * r + 3.3430575583588128105e4) * r + 6.7265770927008700853e4) * r + 4.5921953931549871457e4) * r +
        1.3731693765509461125e4) *
        r +
        1.9715909503065514427e3) *
        r +
        1.3314166789178437745e2) *
        r +
        3.387132872796366608) *
      q;
    const den =
      ((((((5.226495278852854561e3 * r + 2.8729085735721942674e4) * r + 3.930789580009271061e4) * r + 2.1213794301586595867e4) * r + 5.3941960214247511077e3) *
        r +
        6.871870074920579083e2) *
        r +
        4.2313330701600911252e1) *
        r +
      1.0;
    return num / den;
  }
  let r = q <= 0 ? p : 1 - p;
  r = Math.sqrt(-log(r));
  let num: number;
  let den: number;
  if (r <= 5) {
    r = r - 1.6;
    num =
      ((((((7.7454501427834140764e-4 * r + 2.27238449892691845833e-2) * r + 2.4178072517745061177e-1) * r + 1.27045825245236838258) * r +
        3.64784832476320460504) *
        r +
        5.7694972214606914055) *
        r +
        4.6303378461565452959) *
        r +
      1.42343711074968357734;
    den =
      ((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r + 1.51986665636164571966e-2) * r + 1.4810397642748007459e-1) * r +
        6.8976733498510000455e-1) *
        r +
        1.6763848301838038494) *
        r +
        2.05319162663775882187) *
        r +
      1.0;
  } else {
    r = r - 5;
    num =
      ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 1.2426609473880784386e-3) * r + 2.6532189526576123093e-2) * r +
        2.9656057182850489123e-1) *
        r +
        1.7848265399172913358) *
        r +
        5.4637849111641143699) *
        r +
      6.6579046435011037772;
    den =
      ((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r + 1.8463183175100546818e-5) * r + 7.868691311456132591e-4) * r +
        1.4875361290850615025e-2) *
        r +
        1.3692988092273580531e-1) *
        r +
        5.9983220655588793769e-1) *
        r +
      1.0;
  }
  const x = num / den;
  return q < 0 ? -x : x;
}

/**
 * P(|T| <= t) for Student's t with integer df, t >= 0, by the finite trigonometric series
 * (Abramowitz & Stegun 26.7.3-4) in theta = atan(t / sqrt(df)); cost O(df).
 */
export function studentAbsCdf(t: number, df: number): number {
  if (t === Infinity) return 1;
  const denom = df + t * t;
  const s = t / Math.sqrt(denom); // sin(theta)
  const c2 = df / denom; // cos^2(theta)
  let term = 1;
  let sum = 1;
  if (df % 2 === 0) {
    for (let k = 1; k <= df / 2 - 1; k++) {
      term = (term * c2 * (2 * k - 1)) / (2 * k);
      sum += term;
    }
    return s * sum;
  }
  const theta = atan(t / Math.sqrt(df));
  if (df === 1) return TWO_OVER_PI * theta;
  for (let k = 1; k <= (df - 3) / 2; k++) {
    term = (term * c2 * (2 * k)) / (2 * k + 1);
    sum += term;
  }
  return TWO_OVER_PI * (theta + s * Math.sqrt(c2) * sum);
}

/** The t >= 0 with P(|T| <= t) = target (two-sided critical value), by bisection to 1 ulp. */
export function studentCritical(target: number, df: number): number {
  let lo = 0;
  let hi = 1;
  while (studentAbsCdf(hi, df) < target) {
    lo = hi;
    hi *= 2;
  }
  for (;;) {
    const mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) return hi;
    if (studentAbsCdf(mid, df) < target) lo = mid;
    else hi = mid;
  }
}

/**
 * Student's t quantile for p in (0, 1) and integer df >= 1: bisection on the exact CDF, accurate
 * to ~1e-14 relative for p in [1e-3, 1 - 1e-3] (the tails lose digits as 1 - 2p rounds).
 */
export function studentTQuantile(p: number, df: number): number {
  checkProbability("p", p);
  checkInteger("df", df, 1);
  if (p === 0.5) return 0;
  return p > 0.5 ? studentCritical(2 * p - 1, df) : -studentCritical(1 - 2 * p, df);
}

/** Upper alpha/2 normal critical value, via the accurate lower tail. */
export function zCritical(alpha: number): number {
  return -normalQuantile(alpha / 2);
}
