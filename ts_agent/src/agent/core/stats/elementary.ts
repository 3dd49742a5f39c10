/**
 * The statistics, elementary functions: exp, log, atan and erfc built from + - * / sqrt, the same operations in both languages.
 * Ported to py_trainer/py_trainer/core/stats/elementary.py (same names in snake_case, same results bit for bit);
 * the conventions, the PRNG and the percentile rule are documented once, in index.ts.
 */

const LN2_HI = 6.9314718036912381649e-1; // high bits of ln 2 (fdlibm), k * LN2_HI is exact
const LN2_LO = 1.90821492927058770002e-10;
const INV_LN2 = 1.4426950408889634;
export const SQRT1_2 = 0.7071067811865476;
const PI = 3.141592653589793;
const HALF_PI = 1.5707963267948966;
export const TWO_OVER_PI = 0.6366197723675814;
const TWO_OVER_SQRT_PI = 1.1283791670955126;
const ONE_OVER_SQRT_PI = 0.5641895835477563;
export const TWO_POW_32 = 4294967296;

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
export function pow2(n: number): number {
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
export function exp(x: number): number {
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
export function log(x: number): number {
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
const ATAN_HI = [4.63647609000806093515e-1, 7.85398163397448278999e-1, 9.82793723247329054082e-1, 1.570796326794896558];
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
export function atan(x: number): number {
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
export function erfc(x: number): number {
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
