/**
 * Statistics for the eval harness and the report. Source of truth; the port is
 * py_trainer/py_trainer/stats.py (same names in snake_case, same results bit for bit).
 *
 * Conventions
 * - Scores, rewards and proportions are fractions (0.37), never percentage points; the report
 *   converts. A "delta" is a difference of fractions.
 * - "sd" is always the sample standard deviation (Bessel, divides by n - 1); se = sd / sqrt(n).
 * - Paired differences are d_i = b_i - a_i: `a` is the baseline, `b` the candidate.
 * - Intervals are two-sided at `confidence` (default 0.95). Each function's docs name the method.
 * - Bad input throws StatsInputError with a stable `kind` (see StatsErrorKind); the Python port
 *   raises the same kinds in the same order of checks.
 * - Missing values: most functions refuse NaN, null and Infinity. The nan* functions and the
 *   held-out bootstraps (bootstrapMeanCI, relativeChangeCI) skip them instead ("missing" is null,
 *   undefined, NaN or +-Infinity; any other non-number still throws "nan") and return NaN where
 *   too few values are left, because a prompt with no scorable sample is a normal event there.
 *
 * Why results are bit-identical in both languages
 * - Only IEEE-754 +, -, *, / and sqrt are used, in the same order in both files: sums run left
 *   to right, squares are x * x (never pow), and exp, log and atan are implemented below from
 *   those operations, because V8's libm and CPython's libm can differ in the last bit.
 * - The exact McNemar p-value is summed in integers (BigInt here, int in Python) and rounded
 *   once, so it is the correctly rounded value of the exact binomial tail.
 *
 * The PRNG (used by the bootstraps; specified once, here)
 * - State: four uint32 words s0..s3 from SplitMix32 applied to a uint32 seed: for each word,
 *   x = (x + 0x9E3779B9) mod 2^32; z = x; z = (z ^ (z >>> 16)) * 0x85EBCA6B mod 2^32;
 *   z = (z ^ (z >>> 13)) * 0xC2B2AE35 mod 2^32; word = z ^ (z >>> 16). (x starts at the seed.)
 * - Output: xoshiro128** (Blackman & Vigna): result = rotl(s1 * 5, 7) * 9 (mod 2^32);
 *   t = s1 << 9; s2 ^= s0; s3 ^= s1; s1 ^= s2; s0 ^= s3; s2 ^= t; s3 = rotl(s3, 11).
 * - Index in [0, n): limit = 2^32 - (2^32 mod n); draw x until x < limit; return x mod n
 *   (rejection, so no modulo bias).
 *
 * The percentile rule (every bootstrap CI here)
 * - Sort the R replicate statistics ascending into x[0..R-1]. For a tail q, h = (R - 1) * q,
 *   i = floor(h); value = x[i] + (h - i) * (x[i + 1] - x[i]) (x[i] itself when i = R - 1).
 *   This is numpy.percentile's default "linear" rule. Lower = q = (1 - confidence) / 2,
 *   upper = q = 1 - (1 - confidence) / 2.
 */

// ---------------------------------------------------------------------------------------------
// Errors

/** Stable error kinds, identical in the Python port. */
export type StatsErrorKind =
  | "empty" // no observations
  | "length_mismatch" // paired inputs of different lengths, or ragged tables
  | "too_few" // fewer observations than the method needs (e.g. an sd needs 2)
  | "zero_delta" // a power calculation for an effect of 0
  | "out_of_range" // a value outside its domain (probability not in (0, 1), Infinity, count > n)
  | "nan" // NaN (or null) where a number is required
  | "not_integer" // a count, size or seed that must be an integer
  | "bad_option" // an option that is not one of its allowed values
  | "label_type"; // kappa labels that mix numbers and strings, or are neither

/** Thrown for invalid input; `kind` is stable and matches the Python port's StatsInputError. */
export class StatsInputError extends Error {
  readonly kind: StatsErrorKind;
  constructor(kind: StatsErrorKind, message: string) {
    super(message);
    this.name = "StatsInputError";
    this.kind = kind;
  }
}

function fail(kind: StatsErrorKind, message: string): never {
  throw new StatsInputError(kind, message);
}

function checkNumber(name: string, x: unknown): number {
  if (typeof x !== "number" || Number.isNaN(x)) fail("nan", `${name} must be a number, got ${String(x)}`);
  if (!Number.isFinite(x)) fail("out_of_range", `${name} must be finite, got ${x}`);
  return x;
}

function checkSample(name: string, xs: ReadonlyArray<number>, minN: number): void {
  if (xs.length === 0) fail("empty", `${name} is empty`);
  for (let i = 0; i < xs.length; i++) checkNumber(`${name}[${i}]`, xs[i]);
  if (xs.length < minN) fail("too_few", `${name} needs at least ${minN} values, got ${xs.length}`);
}

function checkPair(a: ReadonlyArray<number>, b: ReadonlyArray<number>, minN: number): void {
  if (a.length === 0 || b.length === 0) fail("empty", "a and b must be non-empty");
  if (a.length !== b.length) fail("length_mismatch", `a has ${a.length} values, b has ${b.length}`);
  for (let i = 0; i < a.length; i++) checkNumber(`a[${i}]`, a[i]);
  for (let i = 0; i < b.length; i++) checkNumber(`b[${i}]`, b[i]);
  if (a.length < minN) fail("too_few", `needs at least ${minN} pairs, got ${a.length}`);
}

/** An open-interval probability such as confidence, alpha or power. */
function checkProbability(name: string, p: unknown): number {
  if (typeof p !== "number" || Number.isNaN(p)) fail("nan", `${name} must be a number, got ${String(p)}`);
  if (!(p > 0 && p < 1)) fail("out_of_range", `${name} must be in (0, 1), got ${p}`);
  return p;
}

function checkInteger(name: string, x: unknown, min: number): number {
  if (typeof x !== "number" || Number.isNaN(x)) fail("nan", `${name} must be a number, got ${String(x)}`);
  if (!Number.isInteger(x)) fail("not_integer", `${name} must be an integer, got ${x}`);
  if (x < min) fail("out_of_range", `${name} must be >= ${min}, got ${x}`);
  return x;
}

// ---------------------------------------------------------------------------------------------
// Elementary functions from + - * / sqrt (same operations in stats.py; see the module docs)

const LN2_HI = 6.93147180369123816490e-1; // high bits of ln 2 (fdlibm), k * LN2_HI is exact
const LN2_LO = 1.90821492927058770002e-10;
const INV_LN2 = 1.4426950408889634;
const SQRT1_2 = 0.7071067811865476;
const PI = 3.141592653589793;
const HALF_PI = 1.5707963267948966;
const TWO_OVER_PI = 0.6366197723675814;
const TWO_OVER_SQRT_PI = 1.1283791670955126;
const ONE_OVER_SQRT_PI = 0.5641895835477563;
const TWO_POW_32 = 4294967296;

const view = new DataView(new ArrayBuffer(8));

/** x = m * 2^e with m in [0.5, 1), for finite x > 0 (Python: math.frexp). */
function frexp(x: number): [number, number] {
  let e = 0;
  if (x < 2.2250738585072014e-308) {
    x *= 18014398509481984; // 2^54: a subnormal becomes normal, exactly
    e = -54;
  }
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  e += ((hi >>> 20) & 0x7ff) - 1022;
  view.setUint32(0, ((hi & 0x800fffff) | (1022 << 20)) >>> 0);
  return [view.getFloat64(0), e];
}

/** 2^n exactly, for integer n in [-1022, 1023]. */
function pow2(n: number): number {
  view.setUint32(0, (n + 1023) << 20);
  view.setUint32(4, 0);
  return view.getFloat64(0);
}

/** x * 2^k rounded once (Python: math.ldexp), for |x| in [0.5, 2). */
function ldexp(x: number, k: number): number {
  if (k > 1023) return x * pow2(1023) * pow2(Math.min(k - 1023, 1023));
  if (k >= -1022) return x * pow2(k);
  if (k < -1322) return x * 0;
  return x * pow2(k + 300) * pow2(-300); // first product exact, second rounds once
}

const EXP_COEF: number[] = (() => {
  const c: number[] = [];
  let fact = 1;
  for (let n = 0; n <= 17; n++) {
    if (n > 0) fact *= n; // n! is exact in a double up to 18!
    c.push(1 / fact);
  }
  return c;
})();

/** e^x: k = round(x / ln 2), r = x - k ln 2 (|r| <= 0.347), Taylor to degree 17, times 2^k. */
function exp(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x > 709.782712893384) return Infinity;
  if (x < -745.1332191019412) return 0;
  const k = Math.floor(x * INV_LN2 + 0.5);
  const r = x - k * LN2_HI - k * LN2_LO;
  let p = EXP_COEF[17];
  for (let n = 16; n >= 0; n--) p = p * r + EXP_COEF[n];
  return ldexp(p, k);
}

const LOG_COEF: number[] = (() => {
  const c: number[] = [];
  for (let k = 1; k <= 12; k++) c.push(2 / (2 * k + 1));
  return c;
})();

/**
 * Natural log (fdlibm's reduction): x = m 2^e with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
 * s = f / (2 + f), log(1 + f) = f - (hfsq - s (hfsq + R(s^2))), R the atanh series.
 */
function log(x: number): number {
  if (Number.isNaN(x) || x < 0) return NaN;
  if (x === 0) return -Infinity;
  if (x === Infinity) return Infinity;
  let [m, e] = frexp(x);
  if (m < SQRT1_2) {
    m *= 2;
    e -= 1;
  }
  const f = m - 1;
  const s = f / (2 + f);
  const z = s * s;
  let r = LOG_COEF[11];
  for (let k = 10; k >= 0; k--) r = r * z + LOG_COEF[k];
  r = r * z;
  const hfsq = 0.5 * f * f;
  return e * LN2_HI - (hfsq - (s * (hfsq + r) + e * LN2_LO) - f);
}

// atan(0.5), atan(1), atan(1.5), atan(inf) as hi + lo (fdlibm's atanhi/atanlo)
const ATAN_HI = [4.63647609000806093515e-1, 7.85398163397448278999e-1, 9.82793723247329054082e-1, 1.570796326794896558e0];
const ATAN_LO = [2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17, 6.12323399573676603587e-17];
const ATAN_COEF: number[] = (() => {
  const c: number[] = [];
  for (let k = 0; k <= 22; k++) c.push((k % 2 === 0 ? 1 : -1) / (2 * k + 3));
  return c;
})();

/**
 * atan with fdlibm's argument reduction: x in [0, 7/16) directly, else atan(c) + atan((x - c)/(1 + cx))
 * for c in {0.5, 1, 1.5, inf} (|reduced| <= 7/16), then x - x z S(z), S the Taylor series to z^22.
 */
function atan(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return -atan(-x);
  if (x === Infinity) return HALF_PI;
  if (x < 1e-9) return x; // x^3/3 is below half an ulp
  let id = -1;
  if (x >= 0.4375) {
    if (x < 0.6875) {
      id = 0;
      x = (2 * x - 1) / (2 + x);
    } else if (x < 1.1875) {
      id = 1;
      x = (x - 1) / (x + 1);
    } else if (x < 2.4375) {
      id = 2;
      x = (x - 1.5) / (1 + 1.5 * x);
    } else {
      id = 3;
      x = -1 / x;
    }
  }
  const z = x * x;
  let p = ATAN_COEF[22];
  for (let k = 21; k >= 0; k--) p = p * z + ATAN_COEF[k];
  const t = x * (z * p);
  return id < 0 ? x - t : ATAN_HI[id] - (t - ATAN_LO[id] - x);
}

/** e^{-x^2} without the rounding of x^2: split x = xh + xl (Veltkamp, xh*xh exact), as cephes' expx2. */
function expMinusSquare(x: number): number {
  const c = 134217729 * x; // 2^27 + 1
  const xh = c - (c - x);
  const xl = x - xh;
  return exp(-(xh * xh)) * exp(-(xl * (x + xh)));
}

/**
 * erfc(x). For 0 <= x < 0.5: 1 - erf(x), erf(x) = 2/sqrt(pi) e^{-x^2} sum 2^n x^{2n+1} / (2n+1)!!
 * (all terms positive; erfc >= 0.48 there, so no cancellation). For x >= 0.5 (at most ~720
 * iterations, fewer as x grows): the Laplace continued fraction
 * erfc(x) = e^{-x^2}/sqrt(pi) / (x + (1/2)/(x + (2/2)/(x + (3/2)/(x + ...)))) by modified Lentz.
 */
function erfc(x: number): number {
  if (Number.isNaN(x)) return NaN;
  if (x < 0) return 2 - erfc(-x);
  if (x < 0.5) {
    const x2 = 2 * x * x;
    let term = x;
    let sum = x;
    for (let n = 1; n < 200; n++) {
      term = (term * x2) / (2 * n + 1);
      sum += term;
      if (term <= 1e-17 * sum) break;
    }
    return 1 - TWO_OVER_SQRT_PI * expMinusSquare(x) * sum;
  }
  if (x > 27.3) return 0;
  const tiny = 1e-300;
  let f = x;
  let c = x;
  let d = 0;
  for (let n = 1; n < 5000; n++) {
    const a = n / 2;
    d = x + a * d;
    if (d === 0) d = tiny;
    d = 1 / d;
    c = x + a / c;
    if (c === 0) c = tiny;
    const delta = c * d;
    f *= delta;
    if (Math.abs(delta - 1) <= 2.220446049250313e-16) break;
  }
  return (ONE_OVER_SQRT_PI * expMinusSquare(x)) / f;
}

// ---------------------------------------------------------------------------------------------
// Distributions

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
      (((((((2.5090809287301226727e3 * r + 3.3430575583588128105e4) * r + 6.7265770927008700853e4) * r +
        4.5921953931549871457e4) * r + 1.3731693765509461125e4) * r + 1.9715909503065514427e3) * r +
        1.3314166789178437745e2) * r + 3.387132872796366608) * q;
    const den =
      ((((((5.226495278852854561e3 * r + 2.8729085735721942674e4) * r + 3.930789580009271061e4) * r +
        2.1213794301586595867e4) * r + 5.3941960214247511077e3) * r + 6.871870074920579083e2) * r +
        4.2313330701600911252e1) * r + 1.0;
    return num / den;
  }
  let r = q <= 0 ? p : 1 - p;
  r = Math.sqrt(-log(r));
  let num: number;
  let den: number;
  if (r <= 5) {
    r = r - 1.6;
    num =
      ((((((7.7454501427834140764e-4 * r + 2.27238449892691845833e-2) * r + 2.4178072517745061177e-1) * r +
        1.27045825245236838258) * r + 3.64784832476320460504) * r + 5.7694972214606914055) * r +
        4.6303378461565452959) * r + 1.42343711074968357734;
    den =
      ((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r + 1.51986665636164571966e-2) * r +
        1.4810397642748007459e-1) * r + 6.8976733498510000455e-1) * r + 1.6763848301838038494) * r +
        2.05319162663775882187) * r + 1.0;
  } else {
    r = r - 5;
    num =
      ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 1.2426609473880784386e-3) * r +
        2.6532189526576123093e-2) * r + 2.9656057182850489123e-1) * r + 1.7848265399172913358) * r +
        5.4637849111641143699) * r + 6.6579046435011037772;
    den =
      ((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r + 1.8463183175100546818e-5) * r +
        7.868691311456132591e-4) * r + 1.4875361290850615025e-2) * r + 1.3692988092273580531e-1) * r +
        5.9983220655588793769e-1) * r + 1.0;
  }
  const x = num / den;
  return q < 0 ? -x : x;
}

/**
 * P(|T| <= t) for Student's t with integer df, t >= 0, by the finite trigonometric series
 * (Abramowitz & Stegun 26.7.3-4) in theta = atan(t / sqrt(df)); cost O(df).
 */
function studentAbsCdf(t: number, df: number): number {
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
function studentCritical(target: number, df: number): number {
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
function zCritical(alpha: number): number {
  return -normalQuantile(alpha / 2);
}

// ---------------------------------------------------------------------------------------------
// PRNG (spec in the module docs)

/** xoshiro128** seeded by SplitMix32; one stream, specified in the module docs. */
export class Rng {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  /** `seed` is an integer in [0, 2^32). */
  constructor(seed: number) {
    checkInteger("seed", seed, 0);
    if (seed >= TWO_POW_32) fail("out_of_range", `seed must be < 2^32, got ${seed}`);
    let x = seed >>> 0;
    const next = (): number => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next();
  }

  /** Next uint32 in [0, 2^32). */
  nextUint32(): number {
    const s1 = this.s1;
    const m = Math.imul(s1, 5) >>> 0;
    const result = Math.imul(((m << 7) | (m >>> 25)) >>> 0, 9) >>> 0;
    const t = (s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = ((this.s3 << 11) | (this.s3 >>> 21)) >>> 0;
    return result;
  }

  /** Uniform integer in [0, n) for 1 <= n <= 2^32, by rejection (no modulo bias). */
  nextIndex(n: number): number {
    const limit = TWO_POW_32 - (TWO_POW_32 % n);
    for (;;) {
      const x = this.nextUint32();
      if (x < limit) return x % n;
    }
  }
}

function percentile(sorted: ReadonlyArray<number>, q: number): number {
  const h = (sorted.length - 1) * q;
  const i = Math.floor(h);
  if (i >= sorted.length - 1) return sorted[sorted.length - 1];
  const lo = sorted[i];
  const hi = sorted[i + 1];
  if (h === i || lo === hi) return lo;
  // An interpolation that touches an infinity is that infinity (the interval is unbounded there).
  if (!Number.isFinite(lo) || !Number.isFinite(hi)) return lo === -Infinity && (hi !== Infinity || q < 0.5) ? lo : hi;
  return lo + (h - i) * (hi - lo);
}

function sortNumbers(xs: number[]): number[] {
  return xs.sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
}

function percentileInterval(stats: number[], confidence: number): Interval {
  const sorted = sortNumbers(stats);
  const q = (1 - confidence) / 2;
  return { lower: percentile(sorted, q), upper: percentile(sorted, 1 - q) };
}

// ---------------------------------------------------------------------------------------------
// Descriptive statistics

/** A two-sided interval. */
export interface Interval {
  lower: number;
  upper: number;
}

function sumOf(xs: ReadonlyArray<number>): number {
  let s = 0;
  for (let i = 0; i < xs.length; i++) s += xs[i];
  return s;
}

function sumSquaredDeviations(xs: ReadonlyArray<number>, m: number): number {
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
function finiteValues(name: string, xs: ReadonlyArray<number | null | undefined>): number[] {
  const out: number[] = [];
  for (let i = 0; i < xs.length; i++) if (isPresent(`${name}[${i}]`, xs[i])) out.push(xs[i] as number);
  return out;
}

/** true for a finite number, false for a missing value (see finiteValues); throws "nan" otherwise. */
function isPresent(name: string, x: unknown): boolean {
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

/** An effect across training runs (seeds): mean, between-run SD and an interval over runs. */
export interface RunsInterval extends Interval {
  n: number;
  mean: number;
  /** sample SD over runs (n - 1); NaN for one run */
  sd: number;
  /** how the interval was made */
  method: string;
}

/** Below this many runs the interval over runs is Student's t; from it on, a percentile bootstrap. */
export const RUNS_BOOTSTRAP_MIN = 10;

/**
 * The mean of one value per training run (e.g. each seed's downstream delta) with a 95% interval
 * over runs: the run is the unit. n < RUNS_BOOTSTRAP_MIN: Student's t interval, mean +- t(n-1) *
 * SD / sqrt(n) (a bootstrap over a handful of runs under-covers); n >= RUNS_BOOTSTRAP_MIN: the
 * percentile bootstrap over runs (rliable, Agarwal et al. 2021), `resamples` resamples from
 * `seed`. One run: NaN bounds and SD. Units are the caller's (fractions in, fractions out).
 */
export function intervalOverRuns(
  values: ReadonlyArray<number>,
  options: { confidence?: number; seed?: number; resamples?: number } = {},
): RunsInterval {
  checkSample("values", values, 1);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = values.length;
  const m = sumOf(values) / n;
  if (n < 2) return { n, mean: m, sd: NaN, lower: NaN, upper: NaN, method: "one run: no interval" };
  const sd = Math.sqrt(sumSquaredDeviations(values, m) / (n - 1));
  if (n < RUNS_BOOTSTRAP_MIN) {
    const half = (studentTQuantile(1 - (1 - confidence) / 2, n - 1) * sd) / Math.sqrt(n);
    return { n, mean: m, sd, lower: m - half, upper: m + half, method: `t interval over ${n} runs (df ${n - 1})` };
  }
  const resamples = options.resamples ?? 10000;
  const ci = bootstrapMeanCI(values, { seed: options.seed ?? 0, resamples, confidence });
  return { n, mean: m, sd, lower: ci.lower, upper: ci.upper, method: `percentile bootstrap over ${n} runs (${resamples} resamples)` };
}

// ---------------------------------------------------------------------------------------------
// Paired comparison

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
  /** two-sided paired t test p: 1 - P(|T_{n-1}| <= |meanDiff / seDiff|); with seDiff = 0 it is
   *  1 when meanDiff = 0, else 0 */
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
export function pairedComparison(
  a: ReadonlyArray<number>,
  b: ReadonlyArray<number>,
  options: { confidence?: number } = {},
): PairedComparison {
  checkPair(a, b, 2);
  const confidence = checkProbability("confidence", options.confidence ?? 0.95);
  const n = a.length;
  const d: number[] = [];
  for (let i = 0; i < n; i++) d.push(b[i] - a[i]);
  const meanA = sumOf(a) / n;
  const meanB = sumOf(b) / n;
  const meanDiff = sumOf(d) / n;
  const sdDiff = Math.sqrt(sumSquaredDeviations(d, meanDiff) / (n - 1));
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
  const correlation = saa === 0 || sbb === 0 ? null : Math.max(-1, Math.min(1, sab / (Math.sqrt(saa) * Math.sqrt(sbb))));
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
    tTestP: seDiff > 0 ? 1 - studentAbsCdf(Math.abs(meanDiff / seDiff), n - 1) : meanDiff === 0 ? 1 : 0,
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

// ---------------------------------------------------------------------------------------------
// Held-out measurements (missing values skipped, see the module docs)

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

// ---------------------------------------------------------------------------------------------
// Power

function checkPowerInputs(sdDiff: number, alpha: number, power: number): [number, number] {
  checkNumber("sdDiff", sdDiff);
  if (sdDiff < 0) fail("out_of_range", `sdDiff must be >= 0, got ${sdDiff}`);
  checkProbability("alpha", alpha);
  checkProbability("power", power);
  const za = zCritical(alpha);
  const zb = normalQuantile(power);
  if (!(za + zb > 0)) fail("out_of_range", `power (${power}) must exceed alpha / 2 (${alpha / 2})`);
  return [za, zb];
}

/**
 * Pairs needed to detect a mean paired difference `delta` (fraction) with a two-sided level-alpha
 * z test at the given power: n = ceil(((z_{1-alpha/2} + z_{power}) * sdDiff / |delta|)^2), at
 * least 1 (0 when sdDiff = 0 is reported as 1). Defaults alpha 0.05, power 0.8.
 */
export function requiredNForDelta(delta: number, sdDiff: number, options: { alpha?: number; power?: number } = {}): number {
  checkNumber("delta", delta);
  if (delta === 0) fail("zero_delta", "delta must be non-zero");
  const [za, zb] = checkPowerInputs(sdDiff, options.alpha ?? 0.05, options.power ?? 0.8);
  const k = ((za + zb) * sdDiff) / Math.abs(delta);
  const n2 = k * k;
  if (!(n2 <= 9007199254740992)) fail("out_of_range", `required n (${n2}) exceeds 2^53`);
  return Math.max(1, Math.ceil(n2));
}

/**
 * Smallest |mean paired difference| detectable with n pairs: (z_{1-alpha/2} + z_{power}) *
 * sdDiff / sqrt(n) (the inverse of requiredNForDelta before rounding). Defaults alpha 0.05, power 0.8.
 */
export function minimumDetectableEffect(n: number, sdDiff: number, options: { alpha?: number; power?: number } = {}): number {
  checkInteger("n", n, 1);
  const [za, zb] = checkPowerInputs(sdDiff, options.alpha ?? 0.05, options.power ?? 0.8);
  return ((za + zb) * sdDiff) / Math.sqrt(n);
}

/** Result of operatingCharacteristic (probabilities in [0, 1]). */
export interface OperatingCharacteristic {
  /** sdDiff / sqrt(n) */
  se: number;
  /** P(estimate >= threshold and the CI's lower bound > 0): the PASS gate */
  pPass: number;
  /** P(the CI's lower bound >= threshold): the CONFIRMED gate */
  pConfirm: number;
}

/**
 * Operating characteristic of the milestone's gates for a mean paired difference, by the normal
 * approximation: the estimate ~ N(trueDelta, se^2), se = sdDiff / sqrt(n), CI = estimate -/+
 * z_{1-alpha/2} se. PASS needs estimate >= threshold and lower > 0, so
 * pPass = Phi((trueDelta - max(threshold, z se)) / se); CONFIRMED needs lower >= threshold, so
 * pConfirm = Phi((trueDelta - threshold - z se) / se). At trueDelta = threshold and a large n,
 * pPass tends to 1/2: a point-estimate gate. With sdDiff = 0 both are 0 or 1. Default alpha 0.05.
 */
export function operatingCharacteristic(
  trueDelta: number,
  sdDiff: number,
  n: number,
  options: { threshold: number; alpha?: number },
): OperatingCharacteristic {
  checkNumber("trueDelta", trueDelta);
  checkNumber("sdDiff", sdDiff);
  if (sdDiff < 0) fail("out_of_range", `sdDiff must be >= 0, got ${sdDiff}`);
  checkInteger("n", n, 1);
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const z = zCritical(alpha);
  const se = sdDiff / Math.sqrt(n);
  if (se === 0) {
    return { se, pPass: trueDelta >= threshold && trueDelta > 0 ? 1 : 0, pConfirm: trueDelta >= threshold ? 1 : 0 };
  }
  const gate = threshold > z * se ? threshold : z * se;
  return { se, pPass: normalCdf((trueDelta - gate) / se), pConfirm: normalCdf((trueDelta - threshold - z * se) / se) };
}

/** Result of pairedProportionGate: the milestone's downstream gate on one 0/1 paired table. */
export interface PairedProportionGate {
  /** PASS or CONFIRMED: the estimate >= threshold and the exact McNemar test rejects 0 (with the
   *  Tango interval excluding 0 too), or the interval's lower bound >= threshold */
  passes: boolean;
  /** CONFIRMED: Tango's lower bound >= threshold (and the test agrees it excludes 0) */
  confirm: boolean;
}

/**
 * The downstream gate milestone.ts judgeDownstream applies to 0/1 per-task scores, above its n
 * floor, on one table: b = base right & candidate wrong, c = base wrong & candidate right, n pairs.
 * Tango's score interval (confidence 1 - alpha) and the exact McNemar test (rejects at p < alpha):
 * FAIL when the upper bound < threshold; INCONCLUSIVE when the test and the interval disagree about
 * 0; CONFIRMED when the lower bound >= threshold; PASS when (c - b) / n >= threshold and the test
 * rejects. Default alpha 0.05.
 */
export function pairedProportionGate(b: number, c: number, n: number, options: { threshold: number; alpha?: number }): PairedProportionGate {
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const t = tangoScoreInterval(b, c, n, { confidence: 1 - alpha });
  const rejects = mcnemarExactP(b, c) < alpha;
  if (t.upper < threshold) return { passes: false, confirm: false };
  if (rejects !== t.lower > 0) return { passes: false, confirm: false };
  if (t.lower >= threshold) return { passes: true, confirm: true };
  return { passes: t.estimate >= threshold && rejects, confirm: false };
}

/** Draws and seed of the gate simulation where the report and `agent plan` use it: the Monte
 *  Carlo SE of either probability is at most 0.5 / sqrt(10 000) = 0.005, below the 2 printed
 *  decimals' 0.01. */
export const GATE_SIMULATION_DRAWS = 10000;
export const GATE_SIMULATION_SEED = 0;

/** Result of simulatedOperatingCharacteristic (probabilities in [0, 1]). */
export interface SimulatedOperatingCharacteristic {
  /** the share of draws the gate PASSes or CONFIRMs */
  pPass: number;
  /** the share of draws it CONFIRMs */
  pConfirm: number;
  /** P(discordant) the draws used: max(discordance, |trueDelta|) */
  discordance: number;
  draws: number;
  seed: number;
  /** 0.5 / sqrt(draws): the largest Monte Carlo SE either share can have */
  mcError: number;
}

/**
 * P(PASS) and P(CONFIRMED) of the real downstream gate (pairedProportionGate), by simulation.
 * Model: n tasks, independently discordant with probability q = max(discordance, |trueDelta|)
 * (discordance: P(the two disagree on a task), e.g. an eval's (b + c) / n), split so that
 * P(base wrong & candidate right) - P(base right & candidate wrong) = trueDelta:
 * pb = (q - trueDelta) / 2, pc = (q + trueDelta) / 2. Each draw takes one Rng uint32 u per task
 * (seeded with `seed`; module docs): u < floor(pb 2^32) counts to b, else u < floor(q 2^32) to c;
 * the gate judges (b, c, n) (memoised per table). Unlike operatingCharacteristic it has the
 * discreteness of the exact test and Tango's asymmetric interval: at n = 264, discordance 0.35
 * and a true +5 pp it gives about 0.31 where the normal approximation gives 0.37 (sd 0.35).
 * Defaults: alpha 0.05, GATE_SIMULATION_DRAWS draws, seed GATE_SIMULATION_SEED.
 */
export function simulatedOperatingCharacteristic(
  trueDelta: number,
  discordance: number,
  n: number,
  options: { threshold: number; alpha?: number; draws?: number; seed?: number },
): SimulatedOperatingCharacteristic {
  checkNumber("trueDelta", trueDelta);
  if (trueDelta < -1 || trueDelta > 1) fail("out_of_range", `trueDelta must be in [-1, 1], got ${trueDelta}`);
  checkNumber("discordance", discordance);
  if (discordance < 0 || discordance > 1) fail("out_of_range", `discordance must be in [0, 1], got ${discordance}`);
  checkInteger("n", n, 1);
  const threshold = checkNumber("threshold", options.threshold);
  const alpha = checkProbability("alpha", options.alpha ?? 0.05);
  const draws = checkInteger("draws", options.draws ?? GATE_SIMULATION_DRAWS, 1);
  const seed = options.seed ?? GATE_SIMULATION_SEED;
  const rng = new Rng(seed);
  const q = discordance > Math.abs(trueDelta) ? discordance : Math.abs(trueDelta);
  const cutB = Math.floor(((q - trueDelta) / 2) * TWO_POW_32);
  const cutC = Math.floor(q * TWO_POW_32);
  const memo = new Map<number, number>(); // b * (n + 1) + c -> 0 neither, 1 pass, 2 confirm
  let passes = 0;
  let confirms = 0;
  for (let r = 0; r < draws; r++) {
    let b = 0;
    let c = 0;
    for (let i = 0; i < n; i++) {
      const u = rng.nextUint32();
      if (u < cutB) b++;
      else if (u < cutC) c++;
    }
    const key = b * (n + 1) + c;
    let g = memo.get(key);
    if (g === undefined) {
      const gate = pairedProportionGate(b, c, n, { threshold, alpha });
      g = gate.confirm ? 2 : gate.passes ? 1 : 0;
      memo.set(key, g);
    }
    if (g >= 1) passes++;
    if (g === 2) confirms++;
  }
  return { pPass: passes / draws, pConfirm: confirms / draws, discordance: q, draws, seed, mcError: 0.5 / Math.sqrt(draws) };
}

/** Result of plannedPairedSd. */
export interface PlannedPairedSd {
  pBase: number;
  /** pBase + delta */
  pCandidate: number;
  /** P(the two disagree on a task) under the model */
  discordance: number;
  /** sd of the per-task difference d = candidate - base: sqrt(discordance - delta^2) */
  sdDiff: number;
}

/**
 * The sd of a 0/1 paired difference before any adapter exists, for planning (`agent plan`):
 * with base accuracy pBase and a true delta, Var(d) = P(discordant) - delta^2, and P(discordant)
 * depends on how the errors overlap. "conversions": the candidate only fixes base errors and
 * breaks nothing (P(discordant) = |delta|: the most optimistic, smallest sd); "independent": the
 * two are right independently (P(discordant) = pBase (1 - pC) + (1 - pBase) pC, so Var(d) =
 * pBase (1 - pBase) + pC (1 - pC): pessimistic, as two models of one task usually err together).
 */
export function plannedPairedSd(pBase: number, delta: number, options: { model: "conversions" | "independent" }): PlannedPairedSd {
  checkNumber("pBase", pBase);
  checkNumber("delta", delta);
  if (pBase < 0 || pBase > 1) fail("out_of_range", `pBase must be in [0, 1], got ${pBase}`);
  const pCandidate = pBase + delta;
  if (pCandidate < 0 || pCandidate > 1) fail("out_of_range", `pBase + delta must be in [0, 1], got ${pCandidate}`);
  const model = options.model;
  if (model !== "conversions" && model !== "independent") fail("bad_option", `model must be "conversions" or "independent", got ${String(model)}`);
  const discordance = model === "conversions" ? Math.abs(delta) : pBase * (1 - pCandidate) + (1 - pBase) * pCandidate;
  const v = discordance - delta * delta;
  return { pBase, pCandidate, discordance, sdDiff: Math.sqrt(v > 0 ? v : 0) };
}

// ---------------------------------------------------------------------------------------------
// Eval design: several samples per task, templates as clusters, many typologies

/**
 * Unbiased pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): the
 * probability that at least one of k samples drawn without replacement from n samples, c of them
 * correct, is correct: 1 - C(n-c, k) / C(n, k), computed as their stable product
 * 1 - prod_{i=n-c+1}^{n} (1 - k / i); 1 when n - c < k. Needs 1 <= k <= n, 0 <= c <= n.
 */
export function passAtK(n: number, c: number, k: number): number {
  checkInteger("n", n, 1);
  checkInteger("c", c, 0);
  checkInteger("k", k, 1);
  if (c > n) fail("out_of_range", `c (${c}) must be <= n (${n})`);
  if (k > n) fail("out_of_range", `k (${k}) must be <= n (${n})`);
  if (n - c < k) return 1;
  let prod = 1;
  for (let i = n - c + 1; i <= n; i++) prod *= 1 - k / i;
  return 1 - prod;
}

/**
 * Holm's (1979) step-down adjusted p-values, in the input order: sort ascending, p_(i) times
 * (m - i) for i = 0..m-1, running maximum, capped at 1 (statsmodels multipletests(method="holm")).
 */
export function holmAdjust(pvalues: ReadonlyArray<number>): number[] {
  if (pvalues.length === 0) fail("empty", "pvalues is empty");
  for (let i = 0; i < pvalues.length; i++) {
    checkNumber(`pvalues[${i}]`, pvalues[i]);
    if (pvalues[i] < 0 || pvalues[i] > 1) fail("out_of_range", `pvalues[${i}] must be in [0, 1], got ${pvalues[i]}`);
  }
  const m = pvalues.length;
  const order = pvalues.map((_, i) => i).sort((x, y) => (pvalues[x] < pvalues[y] ? -1 : pvalues[x] > pvalues[y] ? 1 : x - y));
  const out = new Array<number>(m);
  let running = 0;
  for (let r = 0; r < m; r++) {
    const v = (m - r) * pvalues[order[r]];
    if (v > running) running = v;
    out[order[r]] = running < 1 ? running : 1;
  }
  return out;
}

/** Result of clusteredMeanSE. */
export interface ClusteredMean {
  n: number;
  clusters: number;
  mean: number;
  /** cluster-robust SE of the mean (CR1, statsmodels' small-sample factor G / (G - 1)) */
  se: number;
  /** the usual sd / sqrt(n) */
  iidSe: number;
  /** (se / iidSe)^2; null when iidSe = 0 */
  designEffect: number | null;
}

/**
 * Mean of `values` with a cluster-robust SE, clusters given by `clusters[i]` (e.g. the narrative
 * template of task i; Miller 2024, "Adding Error Bars to Evals", arXiv 2411.00640):
 * se^2 = G / (G - 1) * sum_g (sum_{i in g} (x_i - mean))^2 / n^2, which is statsmodels'
 * OLS(x, 1).fit(cov_type="cluster") SE. Cluster sums run in order of first appearance. Needs
 * n >= 2 and at least 2 clusters.
 */
export function clusteredMeanSE(values: ReadonlyArray<number>, clusters: ReadonlyArray<string>): ClusteredMean {
  checkSample("values", values, 2);
  if (clusters.length !== values.length) fail("length_mismatch", `values has ${values.length} entries, clusters has ${clusters.length}`);
  for (let i = 0; i < clusters.length; i++) {
    if (typeof clusters[i] !== "string") fail("label_type", `clusters[${i}] must be a string, got ${typeof clusters[i]}`);
  }
  const n = values.length;
  const m = sumOf(values) / n;
  const sums = new Map<string, number>();
  for (let i = 0; i < n; i++) sums.set(clusters[i], (sums.get(clusters[i]) ?? 0) + (values[i] - m));
  const g = sums.size;
  if (g < 2) fail("too_few", `needs at least 2 clusters, got ${g}`);
  let ss = 0;
  for (const u of sums.values()) ss += u * u;
  const se = Math.sqrt(((g / (g - 1)) * ss) / (n * n));
  const iidSe = Math.sqrt(sumSquaredDeviations(values, m) / (n - 1)) / Math.sqrt(n);
  const ratio = se / iidSe;
  return { n, clusters: g, mean: m, se, iidSe, designEffect: iidSe > 0 ? ratio * ratio : null };
}

// ---------------------------------------------------------------------------------------------
// Agreement

/** A rating label: all numbers or all strings within one call. */
export type Label = number | string;

/** Kappa weighting: "none" (plain), "linear" (Cicchetti-Allison), "quadratic" (Fleiss-Cohen). */
export type KappaWeights = "none" | "linear" | "quadratic";

/** Result of cohenKappa. Undefined quantities (expected agreement 1, zero null SE) are null. */
export interface CohenKappa {
  n: number;
  /** category order used for the table and for the weights */
  categories: Label[];
  weights: KappaWeights;
  /** weighted observed agreement */
  observedAgreement: number;
  /** weighted chance agreement from the margins */
  expectedAgreement: number;
  kappa: number | null;
  /** asymptotic SE (Fleiss, Cohen & Everitt 1969), as statsmodels' std_kappa */
  se: number | null;
  /** SE under kappa = 0, as statsmodels' std_kappa0 */
  se0: number | null;
  /** kappa / se0; null when se0 is 0 (a rater used a single category: no test against chance) */
  z: number | null;
  /** two-sided normal p for kappa = 0 */
  p: number | null;
}

function compareCodePoints(x: string, y: string): number {
  const xs = Array.from(x);
  const ys = Array.from(y);
  const n = Math.min(xs.length, ys.length);
  for (let i = 0; i < n; i++) {
    const cx = xs[i].codePointAt(0)!;
    const cy = ys[i].codePointAt(0)!;
    if (cx !== cy) return cx - cy;
  }
  return xs.length - ys.length;
}

function labelKind(name: string, x: unknown): "number" | "string" {
  if (typeof x === "string") return "string";
  if (typeof x === "number") {
    checkNumber(name, x);
    return "number";
  }
  if (x === null || x === undefined) fail("nan", `${name} is missing`);
  return fail("label_type", `${name} must be a number or a string, got ${typeof x}`);
}

/** Map key for a label: numbers and strings never collide, -0 and 0 are one label. */
function labelKey(x: Label): string {
  return typeof x === "number" ? `n:${x === 0 ? 0 : x}` : `s:${x}`;
}

/** Relative size below which cohenKappa's null variance is rounding, i.e. 0. */
const NULL_VARIANCE_ROUNDING = 1e-12;

/**
 * Cohen's kappa for two raters on the same items, plain or weighted, with its asymptotic SE
 * (Fleiss, Cohen & Everitt 1969) and the z test of kappa = 0, as statsmodels' cohens_kappa.
 * Categories default to the sorted union of labels (numbers ascending, strings by code point);
 * pass `categories` to fix the order for weights or to include unused categories. Weights use
 * category positions: linear 1 - |i-j|/(k-1), quadratic 1 - ((i-j)/(k-1))^2.
 */
export function cohenKappa(
  r1: ReadonlyArray<Label>,
  r2: ReadonlyArray<Label>,
  options: { weights?: KappaWeights; categories?: ReadonlyArray<Label> } = {},
): CohenKappa {
  if (r1.length === 0 || r2.length === 0) fail("empty", "r1 and r2 must be non-empty");
  if (r1.length !== r2.length) fail("length_mismatch", `r1 has ${r1.length} labels, r2 has ${r2.length}`);
  const kinds = new Set<string>();
  for (let i = 0; i < r1.length; i++) kinds.add(labelKind(`r1[${i}]`, r1[i]));
  for (let i = 0; i < r2.length; i++) kinds.add(labelKind(`r2[${i}]`, r2[i]));
  const weights = options.weights ?? "none";
  if (weights !== "none" && weights !== "linear" && weights !== "quadratic") {
    fail("bad_option", `weights must be "none", "linear" or "quadratic", got ${String(weights)}`);
  }
  let categories: Label[];
  if (options.categories !== undefined) {
    categories = [...options.categories];
    for (let i = 0; i < categories.length; i++) kinds.add(labelKind(`categories[${i}]`, categories[i]));
  } else {
    const seen = new Map<string, Label>();
    for (const x of [...r1, ...r2]) if (!seen.has(labelKey(x))) seen.set(labelKey(x), x === 0 ? 0 : x);
    categories = [...seen.values()];
    if (kinds.has("number") && !kinds.has("string")) sortNumbers(categories as number[]);
    else if (!kinds.has("number")) categories.sort((x, y) => compareCodePoints(x as string, y as string));
  }
  if (kinds.size > 1) fail("label_type", "labels must be all numbers or all strings");
  const index = new Map<string, number>();
  for (let i = 0; i < categories.length; i++) {
    const key = labelKey(categories[i]);
    if (index.has(key)) fail("bad_option", `categories lists ${String(categories[i])} twice`);
    index.set(key, i);
  }
  const k = categories.length;
  const n = r1.length;
  const counts: number[][] = Array.from({ length: k }, () => new Array<number>(k).fill(0));
  for (let i = 0; i < n; i++) {
    const x = index.get(labelKey(r1[i]));
    const y = index.get(labelKey(r2[i]));
    if (x === undefined) fail("out_of_range", `r1[${i}] = ${String(r1[i])} is not in categories`);
    if (y === undefined) fail("out_of_range", `r2[${i}] = ${String(r2[i])} is not in categories`);
    counts[x][y] += 1;
  }
  const w: number[][] = [];
  for (let i = 0; i < k; i++) {
    const row: number[] = [];
    for (let j = 0; j < k; j++) {
      if (i === j) row.push(1);
      else if (weights === "none") row.push(0);
      else if (weights === "linear") row.push(1 - Math.abs(i - j) / (k - 1));
      else {
        const dd = (i - j) / (k - 1);
        row.push(1 - dd * dd);
      }
    }
    w.push(row);
  }
  const rowFreq: number[] = [];
  const colFreq: number[] = [];
  for (let i = 0; i < k; i++) {
    let rs = 0;
    let cs = 0;
    for (let j = 0; j < k; j++) {
      rs += counts[i][j];
      cs += counts[j][i];
    }
    rowFreq.push(rs / n);
    colFreq.push(cs / n);
  }
  let po = 0;
  let pe = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      po += w[i][j] * (counts[i][j] / n);
      pe += w[i][j] * (rowFreq[i] * colFreq[j]);
    }
  }
  const base = { n, categories, weights, observedAgreement: po, expectedAgreement: pe };
  if (!(pe < 1)) return { ...base, kappa: null, se: null, se0: null, z: null, p: null };
  const kappa = (po - pe) / (1 - pe);
  const wRow: number[] = []; // mean weight of row i against the column margin
  const wCol: number[] = []; // mean weight of column j against the row margin
  for (let i = 0; i < k; i++) {
    let sr = 0;
    let sc = 0;
    for (let j = 0; j < k; j++) {
      sr += colFreq[j] * w[i][j];
      sc += rowFreq[j] * w[j][i];
    }
    wRow.push(sr);
    wCol.push(sc);
  }
  let termA = 0;
  let term0 = 0;
  for (let i = 0; i < k; i++) {
    for (let j = 0; j < k; j++) {
      const ua = w[i][j] - (wRow[i] + wCol[j]) * (1 - kappa);
      termA += (counts[i][j] / n) * (ua * ua);
      const u0 = w[i][j] - (wRow[i] + wCol[j]);
      term0 += rowFreq[i] * colFreq[j] * (u0 * u0);
    }
  }
  const fac = 1 / ((1 - pe) * (1 - pe) * n);
  const tc = kappa - pe * (1 - kappa);
  const se = Math.sqrt(Math.max(0, (termA - tc * tc) * fac));
  // The null variance is term0 - pe^2 >= 0; within rounding of 0 (a rater who used one category:
  // kappa is 0/0 under the null) it is 0, so z and p are undefined rather than 0 / rounding noise.
  const v0 = term0 - pe * pe;
  const se0 = v0 > NULL_VARIANCE_ROUNDING * term0 ? Math.sqrt(v0 * fac) : 0;
  const z = se0 > 0 ? kappa / se0 : null;
  return { ...base, kappa, se, se0, z, p: z === null ? null : erfc(Math.abs(z) * SQRT1_2) };
}

/**
 * Kendall's tau-b of two paired samples (ties adjusted), as scipy.stats.kendalltau (variant "b"):
 * (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2 pairs, n1 / n2 the pairs tied in x / y.
 * NaN when it is undefined: fewer than 2 pairs, or either sample constant. O(n^2).
 */
export function kendallTauB(x: ReadonlyArray<number>, y: ReadonlyArray<number>): number {
  if (x.length !== y.length) fail("length_mismatch", `x has ${x.length} values, y has ${y.length}`);
  for (let i = 0; i < x.length; i++) checkNumber(`x[${i}]`, x[i]);
  for (let i = 0; i < y.length; i++) checkNumber(`y[${i}]`, y[i]);
  const n = x.length;
  let concordant = 0;
  let discordant = 0;
  let tiesX = 0;
  let tiesY = 0;
  for (let i = 0; i < n; i++) {
    for (let j = i + 1; j < n; j++) {
      const dx = x[i] > x[j] ? 1 : x[i] < x[j] ? -1 : 0;
      const dy = y[i] > y[j] ? 1 : y[i] < y[j] ? -1 : 0;
      if (dx === 0) tiesX++;
      if (dy === 0) tiesY++;
      if (dx !== 0 && dy !== 0) {
        if (dx === dy) concordant++;
        else discordant++;
      }
    }
  }
  const n0 = (n * (n - 1)) / 2;
  // Each factor is an exact integer; the product rounds once, as Python's float(int) does.
  const denom = n0 === 0 ? 0 : Math.sqrt((n0 - tiesX) * (n0 - tiesY));
  return denom > 0 ? (concordant - discordant) / denom : NaN;
}

/** Result of fleissKappa. */
export interface FleissKappa {
  subjects: number;
  raters: number;
  categories: number;
  /** mean per-subject agreement P-bar */
  observedAgreement: number;
  /** sum of squared category proportions P-bar_e */
  expectedAgreement: number;
  /** null when expectedAgreement = 1 (every rating in one category) */
  kappa: number | null;
}

/**
 * Fleiss' kappa (1971) from a subjects x categories table of rating counts; every subject must
 * have the same number of raters (>= 2). As statsmodels fleiss_kappa(method="fleiss").
 */
export function fleissKappa(table: ReadonlyArray<ReadonlyArray<number>>): FleissKappa {
  if (table.length === 0) fail("empty", "table has no subjects");
  const k = table[0].length;
  if (k === 0) fail("empty", "table has no categories");
  for (let i = 0; i < table.length; i++) {
    if (table[i].length !== k) fail("length_mismatch", `row ${i} has ${table[i].length} categories, row 0 has ${k}`);
  }
  for (let i = 0; i < table.length; i++) {
    for (let j = 0; j < k; j++) checkInteger(`table[${i}][${j}]`, table[i][j], 0);
  }
  const raters = sumOf(table[0]);
  for (let i = 1; i < table.length; i++) {
    if (sumOf(table[i]) !== raters) fail("length_mismatch", `subject ${i} has ${sumOf(table[i])} ratings, subject 0 has ${raters}`);
  }
  if (raters < 2) fail("too_few", `needs at least 2 raters per subject, got ${raters}`);
  const subjects = table.length;
  let pBar = 0;
  for (let i = 0; i < subjects; i++) {
    let sq = 0;
    for (let j = 0; j < k; j++) sq += table[i][j] * table[i][j];
    pBar += (sq - raters) / (raters * (raters - 1));
  }
  pBar = pBar / subjects;
  let pe = 0;
  for (let j = 0; j < k; j++) {
    let cs = 0;
    for (let i = 0; i < subjects; i++) cs += table[i][j];
    const pj = cs / (subjects * raters);
    pe += pj * pj;
  }
  const kappa = pe < 1 ? (pBar - pe) / (1 - pe) : null;
  return { subjects, raters, categories: k, observedAgreement: pBar, expectedAgreement: pe, kappa };
}

/** Result of kendallW. */
export interface KendallW {
  raters: number;
  items: number;
  /** Kendall's coefficient of concordance with the tie correction; null when undefined (every
   *  rater ties every item) */
  w: number | null;
  /** Friedman's chi-square m (n - 1) W (df n - 1); null with w */
  chiSquare: number | null;
}

/**
 * Kendall's W for m raters ranking the same n items (rows = raters, columns = items; values are
 * ranks or scores, re-ranked per rater with average ranks for ties):
 * W = 12 S / (m^2 (n^3 - n) - m sum_i T_i), S = sum_j (R_j - m (n + 1) / 2)^2, R_j the rank sum
 * of item j, T_i = sum over rater i's tie groups of t^3 - t. For rankings this is the agreement
 * measure to use: Fleiss' kappa on rank positions treats the positions of one permutation as
 * independent ratings, which they are not. m (n - 1) W is Friedman's tie-corrected chi-square
 * (scipy.stats.friedmanchisquare). Needs m >= 2 and n >= 2.
 */
export function kendallW(ratings: ReadonlyArray<ReadonlyArray<number>>): KendallW {
  const m = ratings.length;
  if (m === 0) fail("empty", "ratings has no raters");
  const n = ratings[0].length;
  for (let i = 0; i < m; i++) {
    if (ratings[i].length !== n) fail("length_mismatch", `rater ${i} rates ${ratings[i].length} items, rater 0 rates ${n}`);
    for (let j = 0; j < n; j++) checkNumber(`ratings[${i}][${j}]`, ratings[i][j]);
  }
  if (m < 2) fail("too_few", `needs at least 2 raters, got ${m}`);
  if (n < 2) fail("too_few", `needs at least 2 items, got ${n}`);
  const sums = new Array<number>(n).fill(0);
  let ties = 0;
  for (let i = 0; i < m; i++) {
    const r = averageRanks(ratings[i]);
    for (let j = 0; j < n; j++) sums[j] += r[j];
    const sorted = sortNumbers([...ratings[i]]);
    let run = 1;
    for (let k = 1; k <= n; k++) {
      if (k < n && sorted[k] === sorted[k - 1]) run++;
      else {
        ties += run * run * run - run;
        run = 1;
      }
    }
  }
  const center = (m * (n + 1)) / 2;
  let ss = 0;
  for (let j = 0; j < n; j++) {
    const dev = sums[j] - center;
    ss += dev * dev;
  }
  const denom = m * m * (n * n * n - n) - m * ties;
  if (!(denom > 0)) return { raters: m, items: n, w: null, chiSquare: null };
  const w = (12 * ss) / denom;
  return { raters: m, items: n, w, chiSquare: m * (n - 1) * w };
}

// ---------------------------------------------------------------------------------------------
// Training curves

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
 */
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
  return { n, s, varS, z, p: erfc(Math.abs(z) * SQRT1_2), tau: s / ((n * (n - 1)) / 2), senSlope };
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

/** Average ranks (1-based, ties share the mean of their positions), as scipy's rankdata. */
function averageRanks(xs: ReadonlyArray<number>): number[] {
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
  return { ...base, varS, z, p: erfc(Math.abs(z) * SQRT1_2), varSUncorrected: base.varS, correction, significantLags, alpha };
}

/** Internal elementary functions, exported for the accuracy tests only. */
export const elementary = { exp, log, atan, erfc };
