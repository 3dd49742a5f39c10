"""Statistics for the eval harness and the report: the port of ts_agent/src/agent/core/stats/index.ts.

The TypeScript file is the source of truth and documents the methods, the PRNG and the percentile
rule once; every function here has the same name in snake_case and returns the same numbers bit
for bit (``make parity`` checks it on the checked-in vectors and on random inputs).

Conventions (as in stats.ts)
- Scores, rewards and proportions are fractions (0.37), never percentage points.
- "sd" is always the sample standard deviation (Bessel, n - 1); se = sd / sqrt(n).
- Paired differences are d_i = b_i - a_i: ``a`` is the baseline, ``b`` the candidate.
- Intervals are two-sided at ``confidence`` (default 0.95).
- Bad input raises StatsInputError with the same ``kind`` as the TS code, in the same order of checks.
- Missing values: most functions refuse NaN, None and infinities; the nan_* functions and the
  held-out bootstraps (bootstrap_mean_ci, relative_change_ci) skip them (None, NaN, +-inf) and
  return NaN where too few values are left.

Why this code avoids ``sum``, ``**``, ``math.exp``/``log``/``atan`` and numpy: each op must be the
same IEEE-754 operation as in stats.ts (sums left to right, x * x for squares, and exp/log/atan
built from + - * / sqrt), so the two languages agree to the last bit. Results are frozen
dataclasses whose field names are the snake_case of the TS result fields.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

__all__ = [
    "StatsInputError",
    "Interval",
    "ProportionInterval",
    "Discordant",
    "PairedComparison",
    "BootstrapInterval",
    "CohenKappa",
    "FleissKappa",
    "StartVsEnd",
    "Trend",
    "RelativeChange",
    "PairedProportionInterval",
    "OperatingCharacteristic",
    "ClusteredMean",
    "HamedRaoTrend",
    "PlannedPairedSd",
    "KendallW",
    "Rng",
    "normal_cdf",
    "normal_quantile",
    "student_t_quantile",
    "mean",
    "sample_sd",
    "standard_error",
    "nan_mean",
    "nan_sample_sd",
    "wilson_interval",
    "mcnemar_exact_p",
    "paired_comparison",
    "paired_bootstrap_ci",
    "bootstrap_mean_ci",
    "relative_change_ci",
    "required_n_for_delta",
    "minimum_detectable_effect",
    "cohen_kappa",
    "kendall_tau_b",
    "fleiss_kappa",
    "start_vs_end",
    "trend",
    "tango_score_interval",
    "operating_characteristic",
    "pass_at_k",
    "holm_adjust",
    "clustered_mean_se",
    "hamed_rao_trend",
    "planned_paired_sd",
    "kendall_w",
    "RunsInterval",
    "interval_over_runs",
]

# ---------------------------------------------------------------------------------------------
# Errors


class StatsInputError(ValueError):
    """Invalid input; ``kind`` is one of the stable kinds of stats.ts's StatsErrorKind:
    empty, length_mismatch, too_few, zero_delta, out_of_range, nan, not_integer, bad_option,
    label_type."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def _fail(kind: str, message: str):
    raise StatsInputError(kind, message)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _check_number(name: str, x) -> float:
    if not _is_number(x) or math.isnan(x):
        _fail("nan", f"{name} must be a number, got {x!r}")
    if math.isinf(x):
        _fail("out_of_range", f"{name} must be finite, got {x}")
    return x


def _check_sample(name: str, xs: Sequence[float], min_n: int) -> None:
    if len(xs) == 0:
        _fail("empty", f"{name} is empty")
    for i, x in enumerate(xs):
        _check_number(f"{name}[{i}]", x)
    if len(xs) < min_n:
        _fail("too_few", f"{name} needs at least {min_n} values, got {len(xs)}")


def _check_pair(a: Sequence[float], b: Sequence[float], min_n: int) -> None:
    if len(a) == 0 or len(b) == 0:
        _fail("empty", "a and b must be non-empty")
    if len(a) != len(b):
        _fail("length_mismatch", f"a has {len(a)} values, b has {len(b)}")
    for i, x in enumerate(a):
        _check_number(f"a[{i}]", x)
    for i, x in enumerate(b):
        _check_number(f"b[{i}]", x)
    if len(a) < min_n:
        _fail("too_few", f"needs at least {min_n} pairs, got {len(a)}")


def _check_probability(name: str, p) -> float:
    if not _is_number(p) or math.isnan(p):
        _fail("nan", f"{name} must be a number, got {p!r}")
    if not 0 < p < 1:
        _fail("out_of_range", f"{name} must be in (0, 1), got {p}")
    return float(p)


def _check_integer(name: str, x, minimum: int) -> int:
    if not _is_number(x) or math.isnan(x):
        _fail("nan", f"{name} must be a number, got {x!r}")
    if math.isinf(x) or not float(x).is_integer():
        _fail("not_integer", f"{name} must be an integer, got {x}")
    if x < minimum:
        _fail("out_of_range", f"{name} must be >= {minimum}, got {x}")
    return int(x)


def _js_max(x: float, y: float) -> float:
    """Math.max(x, y): NaN if either is NaN, +0 over -0 (Python's max keeps the first of equals
    and lets a NaN second argument through)."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == y:
        return y if math.copysign(1.0, x) < 0 else x
    return x if x > y else y


def _js_min(x: float, y: float) -> float:
    """Math.min(x, y): NaN if either is NaN, -0 under +0."""
    if math.isnan(x) or math.isnan(y):
        return math.nan
    if x == y:
        return x if math.copysign(1.0, x) < 0 else y
    return x if x < y else y


# ---------------------------------------------------------------------------------------------
# Elementary functions from + - * / sqrt (same operations as stats.ts)

_LN2_HI = 6.93147180369123816490e-1
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.4426950408889634
_SQRT1_2 = 0.7071067811865476
_HALF_PI = 1.5707963267948966
_TWO_OVER_PI = 0.6366197723675814
_TWO_OVER_SQRT_PI = 1.1283791670955126
_ONE_OVER_SQRT_PI = 0.5641895835477563
_TWO_POW_32 = 4294967296


def _exp_coefficients() -> list[float]:
    c, fact = [], 1
    for n in range(18):
        if n > 0:
            fact *= n
        c.append(1 / fact)
    return c


_EXP_COEF = _exp_coefficients()
_LOG_COEF = [2 / (2 * k + 1) for k in range(1, 13)]


def _ldexp(x: float, k: int) -> float:
    try:
        return math.ldexp(x, k)
    except OverflowError:
        return math.copysign(math.inf, x)


def _exp(x: float) -> float:
    """e^x as stats.ts's exp (range reduction by ln 2, Taylor to degree 17)."""
    if math.isnan(x):
        return math.nan
    if x > 709.782712893384:
        return math.inf
    if x < -745.1332191019412:
        return 0.0
    k = math.floor(x * _INV_LN2 + 0.5)
    r = x - k * _LN2_HI - k * _LN2_LO
    p = _EXP_COEF[17]
    for n in range(16, -1, -1):
        p = p * r + _EXP_COEF[n]
    return _ldexp(p, k)


def _log(x: float) -> float:
    """Natural log as stats.ts's log (fdlibm's reduction, atanh series)."""
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if x == math.inf:
        return math.inf
    m, e = math.frexp(x)
    if m < _SQRT1_2:
        m *= 2
        e -= 1
    f = m - 1
    s = f / (2 + f)
    z = s * s
    r = _LOG_COEF[11]
    for k in range(10, -1, -1):
        r = r * z + _LOG_COEF[k]
    r = r * z
    hfsq = 0.5 * f * f
    return e * _LN2_HI - (hfsq - (s * (hfsq + r) + e * _LN2_LO) - f)


_ATAN_HI = [4.63647609000806093515e-1, 7.85398163397448278999e-1, 9.82793723247329054082e-1, 1.570796326794896558e0]
_ATAN_LO = [2.26987774529616870924e-17, 3.06161699786838301793e-17, 1.39033110312309984516e-17, 6.12323399573676603587e-17]
_ATAN_COEF = [(1 if k % 2 == 0 else -1) / (2 * k + 3) for k in range(23)]


def _atan(x: float) -> float:
    """atan as stats.ts's atan (fdlibm's reduction to |x| <= 7/16, Taylor series to z^22)."""
    if math.isnan(x):
        return math.nan
    if x < 0:
        return -_atan(-x)
    if x == math.inf:
        return _HALF_PI
    if x < 1e-9:
        return x  # x^3/3 is below half an ulp
    i = -1
    if x >= 0.4375:
        if x < 0.6875:
            i = 0
            x = (2 * x - 1) / (2 + x)
        elif x < 1.1875:
            i = 1
            x = (x - 1) / (x + 1)
        elif x < 2.4375:
            i = 2
            x = (x - 1.5) / (1 + 1.5 * x)
        else:
            i = 3
            x = -1 / x
    z = x * x
    p = _ATAN_COEF[22]
    for k in range(21, -1, -1):
        p = p * z + _ATAN_COEF[k]
    t = x * (z * p)
    return x - t if i < 0 else _ATAN_HI[i] - (t - _ATAN_LO[i] - x)


def _exp_minus_square(x: float) -> float:
    """e^{-x^2} without the rounding of x^2 (Veltkamp split), as stats.ts's expMinusSquare."""
    c = 134217729 * x
    xh = c - (c - x)
    xl = x - xh
    return _exp(-(xh * xh)) * _exp(-(xl * (x + xh)))


def _erfc(x: float) -> float:
    """erfc as stats.ts's erfc (positive series below 0.5, Laplace continued fraction above)."""
    if math.isnan(x):
        return math.nan
    if x < 0:
        return 2 - _erfc(-x)
    if x < 0.5:
        x2 = 2 * x * x
        term = x
        total = x
        for n in range(1, 200):
            term = (term * x2) / (2 * n + 1)
            total += term
            if term <= 1e-17 * total:
                break
        return 1 - _TWO_OVER_SQRT_PI * _exp_minus_square(x) * total
    if x > 27.3:
        return 0.0
    tiny = 1e-300
    f = x
    c = x
    d = 0.0
    for n in range(1, 5000):
        a = n / 2
        d = x + a * d
        if d == 0:
            d = tiny
        d = 1 / d
        c = x + a / c
        if c == 0:
            c = tiny
        delta = c * d
        f *= delta
        if abs(delta - 1) <= 2.220446049250313e-16:
            break
    return (_ONE_OVER_SQRT_PI * _exp_minus_square(x)) / f


# ---------------------------------------------------------------------------------------------
# Distributions


def normal_cdf(x: float) -> float:
    """Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2."""
    if not _is_number(x) or math.isnan(x):
        _fail("nan", f"x must be a number, got {x!r}")
    return 0.5 * _erfc(-x * _SQRT1_2)


def normal_quantile(p: float) -> float:
    """Standard normal quantile for p in (0, 1): Wichura's AS241 (PPND16)."""
    _check_probability("p", p)
    q = p - 0.5
    if abs(q) <= 0.425:
        r = 0.180625 - q * q
        num = (((((((2.5090809287301226727e3 * r + 3.3430575583588128105e4) * r + 6.7265770927008700853e4) * r
                   + 4.5921953931549871457e4) * r + 1.3731693765509461125e4) * r + 1.9715909503065514427e3) * r
                 + 1.3314166789178437745e2) * r + 3.387132872796366608) * q
        den = ((((((5.226495278852854561e3 * r + 2.8729085735721942674e4) * r + 3.930789580009271061e4) * r
                  + 2.1213794301586595867e4) * r + 5.3941960214247511077e3) * r + 6.871870074920579083e2) * r
                + 4.2313330701600911252e1) * r + 1.0
        return num / den
    r = p if q <= 0 else 1 - p
    r = math.sqrt(-_log(r))
    if r <= 5:
        r = r - 1.6
        num = ((((((7.7454501427834140764e-4 * r + 2.27238449892691845833e-2) * r + 2.4178072517745061177e-1) * r
                  + 1.27045825245236838258) * r + 3.64784832476320460504) * r + 5.7694972214606914055) * r
                + 4.6303378461565452959) * r + 1.42343711074968357734
        den = ((((((1.05075007164441684324e-9 * r + 5.475938084995344946e-4) * r + 1.51986665636164571966e-2) * r
                  + 1.4810397642748007459e-1) * r + 6.8976733498510000455e-1) * r + 1.6763848301838038494) * r
                + 2.05319162663775882187) * r + 1.0
    else:
        r = r - 5
        num = ((((((2.01033439929228813265e-7 * r + 2.71155556874348757815e-5) * r + 1.2426609473880784386e-3) * r
                  + 2.6532189526576123093e-2) * r + 2.9656057182850489123e-1) * r + 1.7848265399172913358) * r
                + 5.4637849111641143699) * r + 6.6579046435011037772
        den = ((((((2.04426310338993978564e-15 * r + 1.4215117583164458887e-7) * r + 1.8463183175100546818e-5) * r
                  + 7.868691311456132591e-4) * r + 1.4875361290850615025e-2) * r + 1.3692988092273580531e-1) * r
                + 5.9983220655588793769e-1) * r + 1.0
    x = num / den
    return -x if q < 0 else x


def _student_abs_cdf(t: float, df: int) -> float:
    """P(|T| <= t), t >= 0, integer df: the finite series of stats.ts's studentAbsCdf."""
    if t == math.inf:
        return 1.0
    denom = df + t * t
    s = t / math.sqrt(denom)
    c2 = df / denom
    term = 1.0
    total = 1.0
    if df % 2 == 0:
        for k in range(1, df // 2):
            term = (term * c2 * (2 * k - 1)) / (2 * k)
            total += term
        return s * total
    theta = _atan(t / math.sqrt(df))
    if df == 1:
        return _TWO_OVER_PI * theta
    for k in range(1, (df - 3) // 2 + 1):
        term = (term * c2 * (2 * k)) / (2 * k + 1)
        total += term
    return _TWO_OVER_PI * (theta + s * math.sqrt(c2) * total)


def _student_critical(target: float, df: int) -> float:
    """The t >= 0 with P(|T| <= t) = target, by bisection to 1 ulp."""
    lo, hi = 0.0, 1.0
    while _student_abs_cdf(hi, df) < target:
        lo = hi
        hi *= 2
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return hi
        if _student_abs_cdf(mid, df) < target:
            lo = mid
        else:
            hi = mid


def student_t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in (0, 1) and integer df >= 1 (bisection on the exact CDF)."""
    _check_probability("p", p)
    df = _check_integer("df", df, 1)
    if p == 0.5:
        return 0.0
    return _student_critical(2 * p - 1, df) if p > 0.5 else -_student_critical(1 - 2 * p, df)


def _z_critical(alpha: float) -> float:
    return -normal_quantile(alpha / 2)


# ---------------------------------------------------------------------------------------------
# PRNG (spec in stats.ts)

_M32 = 0xFFFFFFFF


class Rng:
    """xoshiro128** seeded by SplitMix32; the stream of stats.ts's Rng, draw for draw."""

    def __init__(self, seed: int):
        seed = _check_integer("seed", seed, 0)
        if seed >= _TWO_POW_32:
            _fail("out_of_range", f"seed must be < 2^32, got {seed}")
        x = seed
        words = []
        for _ in range(4):
            x = (x + 0x9E3779B9) & _M32
            z = x
            z = ((z ^ (z >> 16)) * 0x85EBCA6B) & _M32
            z = ((z ^ (z >> 13)) * 0xC2B2AE35) & _M32
            words.append(z ^ (z >> 16))
        self._s0, self._s1, self._s2, self._s3 = words

    def next_uint32(self) -> int:
        """Next uint32 in [0, 2^32)."""
        s1 = self._s1
        m = (s1 * 5) & _M32
        result = ((((m << 7) | (m >> 25)) & _M32) * 9) & _M32
        t = (s1 << 9) & _M32
        self._s2 ^= self._s0
        self._s3 ^= self._s1
        self._s1 ^= self._s2
        self._s0 ^= self._s3
        self._s2 ^= t
        self._s3 = ((self._s3 << 11) | (self._s3 >> 21)) & _M32
        return result

    def next_index(self, n: int) -> int:
        """Uniform integer in [0, n) for 1 <= n <= 2^32, by rejection."""
        limit = _TWO_POW_32 - (_TWO_POW_32 % n)
        while True:
            x = self.next_uint32()
            if x < limit:
                return x % n


def _percentile(sorted_xs: list[float], q: float) -> float:
    h = (len(sorted_xs) - 1) * q
    i = math.floor(h)
    if i >= len(sorted_xs) - 1:
        return sorted_xs[-1]
    lo, hi = sorted_xs[i], sorted_xs[i + 1]
    if h == i or lo == hi:
        return lo
    # An interpolation that touches an infinity is that infinity (as stats.ts).
    if not math.isfinite(lo) or not math.isfinite(hi):
        return lo if lo == -math.inf and (hi != math.inf or q < 0.5) else hi
    return lo + (h - i) * (hi - lo)


def _percentile_interval(stats: list[float], confidence: float) -> "Interval":
    s = sorted(stats)
    q = (1 - confidence) / 2
    return Interval(lower=_percentile(s, q), upper=_percentile(s, 1 - q))


# ---------------------------------------------------------------------------------------------
# Descriptive statistics


@dataclass(frozen=True)
class Interval:
    """A two-sided interval."""

    lower: float
    upper: float


def _sum(xs) -> float:
    s = 0.0
    for x in xs:
        s += x
    return s


def _sum_squared_deviations(xs, m: float) -> float:
    ss = 0.0
    for x in xs:
        dev = x - m
        ss += dev * dev
    return ss


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean (left-to-right sum / n)."""
    _check_sample("xs", xs, 1)
    return _sum(xs) / len(xs)


def sample_sd(xs: Sequence[float]) -> float:
    """Sample standard deviation (Bessel, n - 1; two-pass); needs n >= 2."""
    _check_sample("xs", xs, 2)
    return math.sqrt(_sum_squared_deviations(xs, _sum(xs) / len(xs)) / (len(xs) - 1))


def standard_error(xs: Sequence[float]) -> float:
    """Standard error of the mean: sample_sd / sqrt(n); needs n >= 2."""
    _check_sample("xs", xs, 2)
    sd = math.sqrt(_sum_squared_deviations(xs, _sum(xs) / len(xs)) / (len(xs) - 1))
    return sd / math.sqrt(len(xs))


def _is_present(name: str, x) -> bool:
    """True for a finite number, False for a missing value (None, NaN, +-inf); else raises "nan"."""
    if x is None:
        return False
    if not _is_number(x):
        _fail("nan", f"{name} must be a number or missing, got {x!r}")
    return math.isfinite(x)


def _finite_values(name: str, xs: Sequence[float | None]) -> list[float]:
    """The finite values of xs in order (missing values skipped), as stats.ts's finiteValues."""
    return [float(x) for i, x in enumerate(xs) if _is_present(f"{name}[{i}]", x)]


def nan_mean(xs: Sequence[float | None]) -> float:
    """Mean of the finite values of xs (None, NaN and infinities skipped); NaN when none is left."""
    v = _finite_values("xs", xs)
    return _sum(v) / len(v) if v else math.nan


def nan_sample_sd(xs: Sequence[float | None]) -> float:
    """Sample sd (Bessel, n - 1; two-pass) of the finite values of xs (None, NaN and infinities
    skipped); NaN when fewer than 2 are left."""
    v = _finite_values("xs", xs)
    if len(v) < 2:
        return math.nan
    return math.sqrt(_sum_squared_deviations(v, _sum(v) / len(v)) / (len(v) - 1))


@dataclass(frozen=True)
class ProportionInterval:
    """A proportion (successes / n) with its Wilson score interval."""

    estimate: float
    lower: float
    upper: float


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> ProportionInterval:
    """Wilson score interval for successes out of n (statsmodels' wilson formula), clipped to [0, 1]."""
    n = _check_integer("n", n, 0)
    if n == 0:
        _fail("empty", "n must be > 0")
    successes = _check_integer("successes", successes, 0)
    if successes > n:
        _fail("out_of_range", f"successes ({successes}) must be <= n ({n})")
    confidence = _check_probability("confidence", confidence)
    # doubles, as in TS: Python ints would be exact (4 * n * n) and overflow on float conversion
    n = float(n)
    successes = float(successes)
    z = _z_critical(1 - confidence)
    z2 = z * z
    p = successes / n
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    dist = (z * math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denom
    return ProportionInterval(estimate=p, lower=_js_max(0.0, center - dist), upper=_js_min(1.0, center + dist))


# ---------------------------------------------------------------------------------------------
# Paired comparison


@dataclass(frozen=True)
class RunsInterval:
    """An effect across training runs (seeds): mean, between-run SD and an interval over runs."""

    n: int
    mean: float
    sd: float
    lower: float
    upper: float
    method: str


RUNS_BOOTSTRAP_MIN = 10


def interval_over_runs(values: Sequence[float], *, confidence: float = 0.95, seed: int = 0,
                       resamples: int = 10000) -> RunsInterval:
    """Port of stats.ts intervalOverRuns: the run is the unit; Student's t below RUNS_BOOTSTRAP_MIN
    runs, the percentile bootstrap over runs (rliable) from it on; one run: NaN bounds and SD."""
    _check_sample("values", values, 1)
    confidence = _check_probability("confidence", confidence)
    n = len(values)
    m = _sum(values) / n
    if n < 2:
        return RunsInterval(n, m, math.nan, math.nan, math.nan, "one run: no interval")
    sd = math.sqrt(_sum_squared_deviations(values, m) / (n - 1))
    if n < RUNS_BOOTSTRAP_MIN:
        half = student_t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
        return RunsInterval(n, m, sd, m - half, m + half, f"t interval over {n} runs (df {n - 1})")
    ci = bootstrap_mean_ci(values, seed=seed, resamples=resamples, confidence=confidence)
    return RunsInterval(n, m, sd, ci.lower, ci.upper, f"percentile bootstrap over {n} runs ({resamples} resamples)")


@dataclass(frozen=True)
class Discordant:
    """Discordant pairs of a 0/1 comparison: b = (a=1, b=0), c = (a=0, b=1)."""

    b: int
    c: int


@dataclass(frozen=True)
class PairedComparison:
    """Result of paired_comparison; differences are b - a, as fractions (see stats.ts)."""

    n: int
    mean_a: float
    mean_b: float
    mean_diff: float
    sd_diff: float
    se_diff: float
    confidence: float
    ci_normal: Interval
    ci_t: Interval
    correlation: float | None
    binary: bool
    discordant: Discordant | None
    mcnemar_p: float | None
    t_test_p: float


def mcnemar_exact_p(b: int, c: int) -> float:
    """Exact two-sided McNemar p: min(1, 2 P(X <= min(b, c))), X ~ Bin(b + c, 1/2); 1 if b + c = 0.

    Summed exactly in integers; int / int is correctly rounded in Python, as the TS code rounds.
    """
    b = _check_integer("b", b, 0)
    c = _check_integer("c", c, 0)
    n = b + c
    if n == 0:
        return 1.0
    m = min(b, c)
    term = 1
    total = 1
    for k in range(m):
        term = term * (n - k) // (k + 1)
        total += term
    return min(1.0, total / (1 << (n - 1)))


def paired_comparison(a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95) -> PairedComparison:
    """Paired comparison (a = baseline, b = candidate): mean difference b - a, SE, normal and t
    CIs, Pearson r, and for 0/1 scores the discordant counts and exact McNemar p. Needs n >= 2."""
    _check_pair(a, b, 2)
    confidence = _check_probability("confidence", confidence)
    a = [float(x) for x in a]  # doubles, as in TS (int subtraction would be exact)
    b = [float(x) for x in b]
    n = len(a)
    d = [b[i] - a[i] for i in range(n)]
    mean_a = _sum(a) / n
    mean_b = _sum(b) / n
    mean_diff = _sum(d) / n
    sd_diff = math.sqrt(_sum_squared_deviations(d, mean_diff) / (n - 1))
    se_diff = sd_diff / math.sqrt(n)
    z = _z_critical(1 - confidence)
    t = _student_critical(confidence, n - 1)
    saa = sbb = sab = 0.0
    for i in range(n):
        da = a[i] - mean_a
        db = b[i] - mean_b
        saa += da * da
        sbb += db * db
        sab += da * db
    correlation = None if saa == 0 or sbb == 0 else _js_max(-1.0, _js_min(1.0, sab / (math.sqrt(saa) * math.sqrt(sbb))))
    binary = True
    n10 = n01 = 0
    for i in range(n):
        x, y = a[i], b[i]
        if (x != 0 and x != 1) or (y != 0 and y != 1):
            binary = False
            break
        if x == 1 and y == 0:
            n10 += 1
        if x == 0 and y == 1:
            n01 += 1
    return PairedComparison(
        n=n,
        mean_a=mean_a,
        mean_b=mean_b,
        mean_diff=mean_diff,
        sd_diff=sd_diff,
        se_diff=se_diff,
        confidence=confidence,
        ci_normal=Interval(lower=mean_diff - z * se_diff, upper=mean_diff + z * se_diff),
        ci_t=Interval(lower=mean_diff - t * se_diff, upper=mean_diff + t * se_diff),
        correlation=correlation,
        binary=binary,
        discordant=Discordant(b=n10, c=n01) if binary else None,
        mcnemar_p=mcnemar_exact_p(n10, n01) if binary else None,
        t_test_p=(1 - _student_abs_cdf(abs(mean_diff / se_diff), n - 1)) if se_diff > 0 else (1.0 if mean_diff == 0 else 0.0),
    )


@dataclass(frozen=True)
class BootstrapInterval:
    """Result of paired_bootstrap_ci: the mean of b - a and its percentile bootstrap CI."""

    estimate: float
    lower: float
    upper: float
    resamples: int
    seed: int
    confidence: float


def paired_bootstrap_ci(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 10000, seed: int = 0, confidence: float = 0.95
) -> BootstrapInterval:
    """Percentile bootstrap CI for the mean paired difference b - a (pairs resampled with the
    shared Rng; the same seed gives the same interval as the TS code). Needs n >= 2."""
    _check_pair(a, b, 2)
    resamples = _check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = _check_probability("confidence", confidence)
    n = len(a)
    d = [float(b[i]) - float(a[i]) for i in range(n)]
    stats = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += d[rng.next_index(n)]
        stats.append(s / n)
    ci = _percentile_interval(stats, confidence)
    return BootstrapInterval(
        estimate=_sum(d) / n, lower=ci.lower, upper=ci.upper, resamples=resamples, seed=int(seed), confidence=confidence
    )


@dataclass(frozen=True)
class PairedProportionInterval:
    """Result of tango_score_interval: (c - b) / n and its score interval."""

    estimate: float
    lower: float
    upper: float
    n: int
    confidence: float


def tango_score_interval(b: int, c: int, n: int, *, confidence: float = 0.95) -> PairedProportionInterval:
    """Tango's (1998) score interval for a paired difference of proportions, candidate - base:
    b = base right & candidate wrong, c = base wrong & candidate right, n all pairs. Bounds by
    bisection on [-1, 1] (method in stats.ts's tangoScoreInterval)."""
    b = _check_integer("b", b, 0)
    c = _check_integer("c", c, 0)
    n = _check_integer("n", n, 1)
    if b + c > n:
        _fail("out_of_range", f"b + c ({b + c}) must be <= n ({n})")
    confidence = _check_probability("confidence", confidence)
    z = _z_critical(1 - confidence)
    bf, cf, nf = float(b), float(c), float(n)

    def score(delta: float) -> float:
        w = cf * (1 + delta) + bf * (1 - delta) - 2 * nf * delta
        disc = w * w + 8 * nf * bf * delta * (1 - delta)
        q = (w + math.sqrt(disc if disc > 0 else 0.0)) / (4 * nf)
        v = nf * (2 * q + delta * (1 - delta))
        num = cf - bf - nf * delta
        if not v > 0:
            return math.inf if num > 0 else -math.inf if num < 0 else 0.0
        return num / math.sqrt(v)

    estimate = (cf - bf) / nf
    lower = -1.0
    if score(-1.0) > z:
        lo, hi = -1.0, estimate
        while True:
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if score(mid) > z:
                lo = mid
            else:
                hi = mid
        lower = hi
    upper = 1.0
    if score(1.0) < -z:
        lo, hi = estimate, 1.0
        while True:
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi:
                break
            if score(mid) < -z:
                hi = mid
            else:
                lo = mid
        upper = lo
    return PairedProportionInterval(estimate=estimate, lower=lower, upper=upper, n=n, confidence=confidence)


# ---------------------------------------------------------------------------------------------
# Held-out measurements (missing values skipped)


def bootstrap_mean_ci(
    values: Sequence[float | None], *, seed: int, resamples: int = 2000, confidence: float = 0.95
) -> Interval:
    """Percentile bootstrap CI of the mean of the finite values (None, NaN, infinities skipped):
    n indices resampled with replacement from Rng(seed), ``resamples`` times (method in stats.ts's
    bootstrapMeanCI). Interval(nan, nan) when fewer than 2 finite values are left."""
    x = _finite_values("values", values)
    resamples = _check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = _check_probability("confidence", confidence)
    n = len(x)
    if n < 2:
        return Interval(lower=math.nan, upper=math.nan)
    means = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += x[rng.next_index(n)]
        means.append(s / n)
    return _percentile_interval(means, confidence)


@dataclass(frozen=True)
class RelativeChange:
    """Result of relative_change_ci: (mean(end) - mean(start)) / |mean(start)| as a fraction, and
    its paired percentile bootstrap CI."""

    estimate: float
    lower: float
    upper: float


def relative_change_ci(
    start: Sequence[float | None],
    end: Sequence[float | None],
    *,
    seed: int,
    resamples: int = 2000,
    confidence: float = 0.95,
) -> RelativeChange:
    """Relative change (mean(end) - mean(start)) / |mean(start)| over the pairs where both values
    are finite, with a paired percentile bootstrap CI (pair indices from Rng(seed); method in
    stats.ts's relativeChangeCI). All NaN when no pair is left or mean(start) == 0.

    A resample whose start mean is 0 is kept: its relative change is +inf (end mean > 0), -inf
    (< 0) or 0 (both 0), so a bound that reaches it is reported as unbounded, not cut off.
    """
    if len(start) != len(end):
        _fail("length_mismatch", f"start has {len(start)} values, end has {len(end)}")
    ok_start = [_is_present(f"start[{i}]", x) for i, x in enumerate(start)]
    ok_end = [_is_present(f"end[{i}]", x) for i, x in enumerate(end)]
    resamples = _check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = _check_probability("confidence", confidence)
    a = [float(start[i]) for i in range(len(start)) if ok_start[i] and ok_end[i]]
    b = [float(end[i]) for i in range(len(end)) if ok_start[i] and ok_end[i]]
    n = len(a)
    if n == 0:
        return RelativeChange(estimate=math.nan, lower=math.nan, upper=math.nan)
    mean_start = _sum(a) / n
    if mean_start == 0:
        return RelativeChange(estimate=math.nan, lower=math.nan, upper=math.nan)
    estimate = (_sum(b) / n - mean_start) / abs(mean_start)
    relatives = []
    for _ in range(resamples):
        sa = sb = 0.0
        for _ in range(n):
            j = rng.next_index(n)
            sa += a[j]
            sb += b[j]
        am = sa / n
        bm = sb / n
        if am != 0:
            relatives.append((bm - am) / abs(am))
        else:
            relatives.append(math.inf if bm > 0 else -math.inf if bm < 0 else 0.0)
    ci = _percentile_interval(relatives, confidence)
    return RelativeChange(estimate=estimate, lower=ci.lower, upper=ci.upper)


# ---------------------------------------------------------------------------------------------
# Power


def _check_power_inputs(sd_diff: float, alpha: float, power: float) -> tuple[float, float]:
    _check_number("sdDiff", sd_diff)
    if sd_diff < 0:
        _fail("out_of_range", f"sdDiff must be >= 0, got {sd_diff}")
    _check_probability("alpha", alpha)
    _check_probability("power", power)
    za = _z_critical(alpha)
    zb = normal_quantile(power)
    if not za + zb > 0:
        _fail("out_of_range", f"power ({power}) must exceed alpha / 2 ({alpha / 2})")
    return za, zb


def required_n_for_delta(delta: float, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> int:
    """Pairs needed to detect a mean paired difference ``delta``: ceil(((z_{1-alpha/2} + z_power)
    * sd_diff / |delta|)^2), at least 1."""
    _check_number("delta", delta)
    if delta == 0:
        _fail("zero_delta", "delta must be non-zero")
    za, zb = _check_power_inputs(sd_diff, alpha, power)
    k = ((za + zb) * sd_diff) / abs(delta)
    n2 = k * k
    if not n2 <= 9007199254740992:
        _fail("out_of_range", f"required n ({n2}) exceeds 2^53")
    return max(1, math.ceil(n2))


def minimum_detectable_effect(n: int, sd_diff: float, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest |mean paired difference| detectable with n pairs: (z_{1-alpha/2} + z_power) * sd_diff / sqrt(n)."""
    n = _check_integer("n", n, 1)
    za, zb = _check_power_inputs(sd_diff, alpha, power)
    return ((za + zb) * sd_diff) / math.sqrt(n)


@dataclass(frozen=True)
class OperatingCharacteristic:
    """Result of operating_characteristic: se, P(PASS gate), P(CONFIRMED gate)."""

    se: float
    p_pass: float
    p_confirm: float


def operating_characteristic(
    true_delta: float, sd_diff: float, n: int, *, threshold: float, alpha: float = 0.05
) -> OperatingCharacteristic:
    """P(PASS) and P(CONFIRMED) of the milestone gates at a true mean difference, by the normal
    approximation (method in stats.ts's operatingCharacteristic)."""
    _check_number("trueDelta", true_delta)
    _check_number("sdDiff", sd_diff)
    if sd_diff < 0:
        _fail("out_of_range", f"sdDiff must be >= 0, got {sd_diff}")
    n = _check_integer("n", n, 1)
    threshold = _check_number("threshold", threshold)
    alpha = _check_probability("alpha", alpha)
    z = _z_critical(alpha)
    se = sd_diff / math.sqrt(n)
    if se == 0:
        return OperatingCharacteristic(
            se=se, p_pass=1.0 if true_delta >= threshold and true_delta > 0 else 0.0, p_confirm=1.0 if true_delta >= threshold else 0.0
        )
    gate = threshold if threshold > z * se else z * se
    return OperatingCharacteristic(
        se=se, p_pass=normal_cdf((true_delta - gate) / se), p_confirm=normal_cdf((true_delta - threshold - z * se) / se)
    )


@dataclass(frozen=True)
class PairedProportionGate:
    """Result of paired_proportion_gate: pass (PASS or CONFIRMED), confirm (CONFIRMED)."""

    passes: bool
    confirm: bool


def paired_proportion_gate(b: int, c: int, n: int, *, threshold: float, alpha: float = 0.05) -> PairedProportionGate:
    """The downstream gate on one 0/1 paired table: Tango's interval and the exact McNemar test
    (rule in stats.ts's pairedProportionGate)."""
    threshold = _check_number("threshold", threshold)
    alpha = _check_probability("alpha", alpha)
    t = tango_score_interval(b, c, n, confidence=1 - alpha)
    rejects = mcnemar_exact_p(b, c) < alpha
    if t.upper < threshold:
        return PairedProportionGate(passes=False, confirm=False)
    if rejects != (t.lower > 0):
        return PairedProportionGate(passes=False, confirm=False)
    if t.lower >= threshold:
        return PairedProportionGate(passes=True, confirm=True)
    return PairedProportionGate(passes=t.estimate >= threshold and rejects, confirm=False)


GATE_SIMULATION_DRAWS = 10000
GATE_SIMULATION_SEED = 0


@dataclass(frozen=True)
class SimulatedOperatingCharacteristic:
    """Result of simulated_operating_characteristic (fields as stats.ts's)."""

    p_pass: float
    p_confirm: float
    discordance: float
    draws: int
    seed: int
    mc_error: float


def simulated_operating_characteristic(
    true_delta: float,
    discordance: float,
    n: int,
    *,
    threshold: float,
    alpha: float = 0.05,
    draws: int = GATE_SIMULATION_DRAWS,
    seed: int = GATE_SIMULATION_SEED,
) -> SimulatedOperatingCharacteristic:
    """P(PASS) and P(CONFIRMED) of paired_proportion_gate by simulation, draw for draw the stream
    and model of stats.ts's simulatedOperatingCharacteristic."""
    _check_number("trueDelta", true_delta)
    if true_delta < -1 or true_delta > 1:
        _fail("out_of_range", f"trueDelta must be in [-1, 1], got {true_delta}")
    _check_number("discordance", discordance)
    if discordance < 0 or discordance > 1:
        _fail("out_of_range", f"discordance must be in [0, 1], got {discordance}")
    n = _check_integer("n", n, 1)
    threshold = _check_number("threshold", threshold)
    alpha = _check_probability("alpha", alpha)
    draws = _check_integer("draws", draws, 1)
    rng = Rng(seed)
    q = discordance if discordance > abs(true_delta) else abs(true_delta)
    cut_b = math.floor(((q - true_delta) / 2) * _TWO_POW_32)
    cut_c = math.floor(q * _TWO_POW_32)
    memo: dict[tuple[int, int], int] = {}
    passes = confirms = 0
    nxt = rng.next_uint32
    for _ in range(draws):
        b = c = 0
        for _ in range(n):
            u = nxt()
            if u < cut_b:
                b += 1
            elif u < cut_c:
                c += 1
        g = memo.get((b, c))
        if g is None:
            gate = paired_proportion_gate(b, c, n, threshold=threshold, alpha=alpha)
            g = 2 if gate.confirm else 1 if gate.passes else 0
            memo[(b, c)] = g
        if g >= 1:
            passes += 1
        if g == 2:
            confirms += 1
    return SimulatedOperatingCharacteristic(
        p_pass=passes / draws, p_confirm=confirms / draws, discordance=q, draws=draws, seed=seed, mc_error=0.5 / math.sqrt(draws)
    )


@dataclass(frozen=True)
class PlannedPairedSd:
    """Result of planned_paired_sd (method in stats.ts's plannedPairedSd)."""

    p_base: float
    p_candidate: float
    discordance: float
    sd_diff: float


def planned_paired_sd(p_base: float, delta: float, *, model: str) -> PlannedPairedSd:
    """The sd of a 0/1 paired difference for planning: sqrt(P(discordant) - delta^2) under the
    "conversions" or "independent" model of how the two models' errors overlap."""
    _check_number("pBase", p_base)
    _check_number("delta", delta)
    if p_base < 0 or p_base > 1:
        _fail("out_of_range", f"pBase must be in [0, 1], got {p_base}")
    p_c = p_base + delta
    if p_c < 0 or p_c > 1:
        _fail("out_of_range", f"pBase + delta must be in [0, 1], got {p_c}")
    if model not in ("conversions", "independent"):
        _fail("bad_option", f'model must be "conversions" or "independent", got {model!r}')
    disc = abs(delta) if model == "conversions" else p_base * (1 - p_c) + (1 - p_base) * p_c
    v = disc - delta * delta
    return PlannedPairedSd(p_base=p_base, p_candidate=p_c, discordance=disc, sd_diff=math.sqrt(v if v > 0 else 0.0))


# ---------------------------------------------------------------------------------------------
# Eval design: several samples per task, templates as clusters, many typologies


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - prod_{i=n-c+1}^{n} (1 - k / i); 1 when n - c < k."""
    n = _check_integer("n", n, 1)
    c = _check_integer("c", c, 0)
    k = _check_integer("k", k, 1)
    if c > n:
        _fail("out_of_range", f"c ({c}) must be <= n ({n})")
    if k > n:
        _fail("out_of_range", f"k ({k}) must be <= n ({n})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1 - float(k) / float(i)
    return 1 - prod


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values in input order (statsmodels multipletests "holm")."""
    if len(pvalues) == 0:
        _fail("empty", "pvalues is empty")
    for i, p in enumerate(pvalues):
        _check_number(f"pvalues[{i}]", p)
        if p < 0 or p > 1:
            _fail("out_of_range", f"pvalues[{i}] must be in [0, 1], got {p}")
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: (pvalues[i], i))
    out = [0.0] * m
    running = 0.0
    for r, i in enumerate(order):
        v = (m - r) * float(pvalues[i])
        if v > running:
            running = v
        out[i] = running if running < 1 else 1.0
    return out


@dataclass(frozen=True)
class ClusteredMean:
    """Result of clustered_mean_se (CR1 cluster-robust SE of a mean, as stats.ts)."""

    n: int
    clusters: int
    mean: float
    se: float
    iid_se: float
    design_effect: float | None


def clustered_mean_se(values: Sequence[float], clusters: Sequence[str]) -> ClusteredMean:
    """Mean with a cluster-robust (CR1) SE, clusters summed in order of first appearance
    (method in stats.ts's clusteredMeanSE). Needs n >= 2 and at least 2 clusters."""
    _check_sample("values", values, 2)
    if len(clusters) != len(values):
        _fail("length_mismatch", f"values has {len(values)} entries, clusters has {len(clusters)}")
    for i, c in enumerate(clusters):
        if not isinstance(c, str):
            _fail("label_type", f"clusters[{i}] must be a string, got {type(c).__name__}")
    x = [float(v) for v in values]
    n = len(x)
    m = _sum(x) / n
    sums: dict[str, float] = {}
    for i in range(n):
        sums[clusters[i]] = sums.get(clusters[i], 0.0) + (x[i] - m)
    g = len(sums)
    if g < 2:
        _fail("too_few", f"needs at least 2 clusters, got {g}")
    ss = 0.0
    for u in sums.values():
        ss += u * u
    se = math.sqrt(((g / (g - 1)) * ss) / (float(n) * float(n)))
    iid_se = math.sqrt(_sum_squared_deviations(x, m) / (n - 1)) / math.sqrt(n)
    ratio = se / iid_se if iid_se > 0 else math.nan
    return ClusteredMean(n=n, clusters=g, mean=m, se=se, iid_se=iid_se, design_effect=ratio * ratio if iid_se > 0 else None)


# ---------------------------------------------------------------------------------------------
# Agreement


@dataclass(frozen=True)
class CohenKappa:
    """Result of cohen_kappa; undefined quantities are None (see stats.ts's CohenKappa)."""

    n: int
    categories: list
    weights: str
    observed_agreement: float
    expected_agreement: float
    kappa: float | None
    se: float | None
    se0: float | None
    z: float | None
    p: float | None


def _label_kind(name: str, x) -> str:
    if isinstance(x, str):
        return "string"
    if _is_number(x):
        _check_number(name, x)
        return "number"
    if x is None:
        _fail("nan", f"{name} is missing")
    _fail("label_type", f"{name} must be a number or a string, got {type(x).__name__}")


def _label_key(x) -> tuple:
    return ("n", x + 0.0) if not isinstance(x, str) else ("s", x)


_NULL_VARIANCE_ROUNDING = 1e-12  # relative size below which cohen_kappa's null variance is rounding, i.e. 0


def cohen_kappa(r1: Sequence, r2: Sequence, *, weights: str = "none", categories: Sequence | None = None) -> CohenKappa:
    """Cohen's kappa for two raters, plain or weighted, with the Fleiss-Cohen-Everitt SE and the z
    test of kappa = 0 (as statsmodels' cohens_kappa). Category order: ``categories`` or the sorted
    union of labels (numbers ascending, strings by code point)."""
    if len(r1) == 0 or len(r2) == 0:
        _fail("empty", "r1 and r2 must be non-empty")
    if len(r1) != len(r2):
        _fail("length_mismatch", f"r1 has {len(r1)} labels, r2 has {len(r2)}")
    kinds = set()
    for i, x in enumerate(r1):
        kinds.add(_label_kind(f"r1[{i}]", x))
    for i, x in enumerate(r2):
        kinds.add(_label_kind(f"r2[{i}]", x))
    if weights not in ("none", "linear", "quadratic"):
        _fail("bad_option", f'weights must be "none", "linear" or "quadratic", got {weights!r}')
    if categories is not None:
        cats = list(categories)
        for i, x in enumerate(cats):
            kinds.add(_label_kind(f"categories[{i}]", x))
    else:
        seen: dict = {}
        for x in [*r1, *r2]:
            key = _label_key(x)
            if key not in seen:
                seen[key] = 0 if x == 0 and not isinstance(x, str) else x
        cats = list(seen.values())
        if "number" in kinds and "string" not in kinds:
            cats = sorted(cats)
        elif "number" not in kinds:
            cats = sorted(cats)
    if len(kinds) > 1:
        _fail("label_type", "labels must be all numbers or all strings")
    index: dict = {}
    for i, x in enumerate(cats):
        key = _label_key(x)
        if key in index:
            _fail("bad_option", f"categories lists {x!r} twice")
        index[key] = i
    k = len(cats)
    n = len(r1)
    counts = [[0] * k for _ in range(k)]
    for i in range(n):
        x = index.get(_label_key(r1[i]))
        y = index.get(_label_key(r2[i]))
        if x is None:
            _fail("out_of_range", f"r1[{i}] = {r1[i]!r} is not in categories")
        if y is None:
            _fail("out_of_range", f"r2[{i}] = {r2[i]!r} is not in categories")
        counts[x][y] += 1
    w = []
    for i in range(k):
        row = []
        for j in range(k):
            if i == j:
                row.append(1.0)
            elif weights == "none":
                row.append(0.0)
            elif weights == "linear":
                row.append(1 - abs(i - j) / (k - 1))
            else:
                dd = (i - j) / (k - 1)
                row.append(1 - dd * dd)
        w.append(row)
    row_freq, col_freq = [], []
    for i in range(k):
        rs = cs = 0
        for j in range(k):
            rs += counts[i][j]
            cs += counts[j][i]
        row_freq.append(rs / n)
        col_freq.append(cs / n)
    po = pe = 0.0
    for i in range(k):
        for j in range(k):
            po += w[i][j] * (counts[i][j] / n)
            pe += w[i][j] * (row_freq[i] * col_freq[j])
    base = dict(n=n, categories=cats, weights=weights, observed_agreement=po, expected_agreement=pe)
    if not pe < 1:
        return CohenKappa(**base, kappa=None, se=None, se0=None, z=None, p=None)
    kappa = (po - pe) / (1 - pe)
    w_row, w_col = [], []
    for i in range(k):
        sr = sc = 0.0
        for j in range(k):
            sr += col_freq[j] * w[i][j]
            sc += row_freq[j] * w[j][i]
        w_row.append(sr)
        w_col.append(sc)
    term_a = term_0 = 0.0
    for i in range(k):
        for j in range(k):
            ua = w[i][j] - (w_row[i] + w_col[j]) * (1 - kappa)
            term_a += (counts[i][j] / n) * (ua * ua)
            u0 = w[i][j] - (w_row[i] + w_col[j])
            term_0 += row_freq[i] * col_freq[j] * (u0 * u0)
    fac = 1 / ((1 - pe) * (1 - pe) * n)
    tc = kappa - pe * (1 - kappa)
    se = math.sqrt(_js_max(0.0, (term_a - tc * tc) * fac))
    # The null variance is term_0 - pe^2 >= 0; within rounding of 0 (a rater who used one category:
    # kappa is 0/0 under the null) it is 0, so z and p are undefined rather than 0 / rounding noise.
    v0 = term_0 - pe * pe
    se0 = math.sqrt(v0 * fac) if v0 > _NULL_VARIANCE_ROUNDING * term_0 else 0.0
    z = kappa / se0 if se0 > 0 else None
    p = None if z is None else _erfc(abs(z) * _SQRT1_2)
    return CohenKappa(**base, kappa=kappa, se=se, se0=se0, z=z, p=p)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples (ties adjusted), as scipy.stats.kendalltau (variant
    "b"): (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2, n1 / n2 = pairs tied in x / y. NaN
    when undefined: fewer than 2 pairs, or either sample constant."""
    if len(x) != len(y):
        _fail("length_mismatch", f"x has {len(x)} values, y has {len(y)}")
    for i, v in enumerate(x):
        _check_number(f"x[{i}]", v)
    for i, v in enumerate(y):
        _check_number(f"y[{i}]", v)
    n = len(x)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0:
                ties_x += 1
            if dy == 0:
                ties_y += 1
            if dx and dy:
                if dx == dy:
                    concordant += 1
                else:
                    discordant += 1
    n0 = n * (n - 1) // 2
    # the integer product converts to float rounded once, as the TS double product rounds
    denom = math.sqrt((n0 - ties_x) * (n0 - ties_y)) if n0 else 0.0
    return (concordant - discordant) / denom if denom > 0 else math.nan


@dataclass(frozen=True)
class FleissKappa:
    """Result of fleiss_kappa (kappa is None when expected agreement is 1)."""

    subjects: int
    raters: int
    categories: int
    observed_agreement: float
    expected_agreement: float
    kappa: float | None


def fleiss_kappa(table: Sequence[Sequence[int]]) -> FleissKappa:
    """Fleiss' kappa from a subjects x categories table of rating counts (same raters per subject,
    >= 2), as statsmodels' fleiss_kappa(method="fleiss")."""
    if len(table) == 0:
        _fail("empty", "table has no subjects")
    k = len(table[0])
    if k == 0:
        _fail("empty", "table has no categories")
    for i, row in enumerate(table):
        if len(row) != k:
            _fail("length_mismatch", f"row {i} has {len(row)} categories, row 0 has {k}")
    for i, row in enumerate(table):
        for j in range(k):
            _check_integer(f"table[{i}][{j}]", row[j], 0)
    # doubles, as in TS: int products would be exact and overflow when turned into floats
    table = [[float(x) for x in row] for row in table]
    raters_f = _sum(table[0])
    raters = int(raters_f)
    for i in range(1, len(table)):
        if _sum(table[i]) != raters_f:
            _fail("length_mismatch", f"subject {i} has {int(_sum(table[i]))} ratings, subject 0 has {raters}")
    if raters_f < 2:
        _fail("too_few", f"needs at least 2 raters per subject, got {raters}")
    subjects = len(table)
    p_bar = 0.0
    for i in range(subjects):
        sq = 0.0
        for j in range(k):
            sq += table[i][j] * table[i][j]
        p_bar += (sq - raters_f) / (raters_f * (raters_f - 1))
    p_bar = p_bar / subjects
    pe = 0.0
    for j in range(k):
        cs = 0.0
        for i in range(subjects):
            cs += table[i][j]
        pj = cs / (subjects * raters_f)
        pe += pj * pj
    kappa = (p_bar - pe) / (1 - pe) if pe < 1 else None
    return FleissKappa(
        subjects=subjects, raters=raters, categories=k, observed_agreement=p_bar, expected_agreement=pe, kappa=kappa
    )


@dataclass(frozen=True)
class KendallW:
    """Result of kendall_w (w and chi_square are None when undefined)."""

    raters: int
    items: int
    w: float | None
    chi_square: float | None


def kendall_w(ratings: Sequence[Sequence[float]]) -> KendallW:
    """Kendall's W with the tie correction for m raters x n items (method in stats.ts's kendallW)."""
    m = len(ratings)
    if m == 0:
        _fail("empty", "ratings has no raters")
    n = len(ratings[0])
    for i in range(m):
        if len(ratings[i]) != n:
            _fail("length_mismatch", f"rater {i} rates {len(ratings[i])} items, rater 0 rates {n}")
        for j in range(n):
            _check_number(f"ratings[{i}][{j}]", ratings[i][j])
    if m < 2:
        _fail("too_few", f"needs at least 2 raters, got {m}")
    if n < 2:
        _fail("too_few", f"needs at least 2 items, got {n}")
    sums = [0.0] * n
    ties = 0.0
    for i in range(m):
        row = [float(x) for x in ratings[i]]
        r = _average_ranks(row)
        for j in range(n):
            sums[j] += r[j]
        ordered = sorted(row)
        run = 1
        for k in range(1, n + 1):
            if k < n and ordered[k] == ordered[k - 1]:
                run += 1
            else:
                ties += float(run * run * run - run)
                run = 1
    mf, nf = float(m), float(n)
    center = (mf * (nf + 1)) / 2
    ss = 0.0
    for j in range(n):
        dev = sums[j] - center
        ss += dev * dev
    denom = mf * mf * (nf * nf * nf - nf) - mf * ties
    if not denom > 0:
        return KendallW(raters=m, items=n, w=None, chi_square=None)
    w = (12 * ss) / denom
    return KendallW(raters=m, items=n, w=w, chi_square=mf * (nf - 1) * w)


# ---------------------------------------------------------------------------------------------
# Training curves


@dataclass(frozen=True)
class StartVsEnd:
    """Result of start_vs_end: the change is end - start, the relative change (end - start) / |start|."""

    window: int
    confidence: float
    start_mean: float
    end_mean: float
    change: float
    relative_change: float | None
    autocorrelation: float
    window_se: float
    change_se: float
    df: int
    change_ci: Interval


START_VS_END_MAX_AUTOCORRELATION = 0.9
"""The AR(1) coefficient start_vs_end assumes at most."""
START_VS_END_MIN_DF = 3
"""The fewest degrees of freedom start_vs_end's t uses."""


def start_vs_end(series: Sequence[float], *, window: int, confidence: float = 0.95) -> StartVsEnd:
    """First vs last ``window`` means of a series, with a t interval for the change whose standard
    error allows for AR(1) autocorrelation estimated from the first differences (method in
    stats.ts's startVsEnd). Deterministic."""
    _check_sample("series", series, 3)
    window = _check_integer("window", window, 1)
    n = len(series)
    if 2 * window > n:
        _fail("out_of_range", f"2 * window ({2 * window}) exceeds the series length ({n})")
    confidence = _check_probability("confidence", confidence)
    first = list(series[:window])
    last = list(series[n - window:])
    start_mean = _sum(first) / window
    end_mean = _sum(last) / window
    change = end_mean - start_mean
    d = [series[i + 1] - series[i] for i in range(n - 1)]
    m = len(d)
    dm = _sum(d) / m
    v = 0.0
    c = 0.0
    for i in range(m):
        dev = d[i] - dm
        v += dev * dev
        if i + 1 < m:
            c += dev * (d[i + 1] - dm)
    r1 = c / v if v > 0 else -0.5
    phi = 1 + 2 * r1 + 1 / math.sqrt(n)
    if phi < 0:
        phi = 0.0
    if phi > START_VS_END_MAX_AUTOCORRELATION:
        phi = START_VS_END_MAX_AUTOCORRELATION
    gamma0 = v / (m - 1) / (2 * (1 - phi))
    f = 1.0
    pk = 1.0
    for k in range(1, window):
        pk = pk * phi
        f += 2 * (1 - k / window) * pk
    window_se = math.sqrt((gamma0 * f) / window)
    change_se = math.sqrt(2) * window_se
    df = max(START_VS_END_MIN_DF, math.floor((n * (1 - phi)) / (1 + phi)) - 2)
    t = _student_critical(confidence, df)
    return StartVsEnd(
        window=window,
        confidence=confidence,
        start_mean=start_mean,
        end_mean=end_mean,
        change=change,
        relative_change=None if start_mean == 0 else change / abs(start_mean),
        autocorrelation=phi,
        window_se=window_se,
        change_se=change_se,
        df=df,
        change_ci=Interval(lower=change - t * change_se, upper=change + t * change_se),
    )


@dataclass(frozen=True)
class Trend:
    """Result of trend: Mann-Kendall S, var(S), continuity-corrected z, p, tau-a, Sen's slope."""

    n: int
    s: int
    var_s: float
    z: float
    p: float
    tau: float
    sen_slope: float


def trend(series: Sequence[float]) -> Trend:
    """Mann-Kendall trend test (normal approximation, tie-corrected variance) and Sen's slope; n >= 3."""
    _check_sample("series", series, 3)
    series = [float(x) for x in series]  # doubles, as in TS (int subtraction would be exact)
    n = len(series)
    s = 0
    slopes = []
    for i in range(n - 1):
        for j in range(i + 1, n):
            diff = series[j] - series[i]
            if series[j] > series[i]:
                s += 1
            elif series[j] < series[i]:
                s -= 1
            slopes.append(diff / (j - i))
    ordered = sorted(series)
    tie_term = 0
    run = 1
    for i in range(1, n + 1):
        if i < n and ordered[i] == ordered[i - 1]:
            run += 1
        else:
            tie_term += run * (run - 1) * (2 * run + 5)
            run = 1
    var_s = (n * (n - 1) * (2 * n + 5) - tie_term) / 18
    z = 0.0
    if var_s > 0 and s > 0:
        z = (s - 1) / math.sqrt(var_s)
    elif var_s > 0 and s < 0:
        z = (s + 1) / math.sqrt(var_s)
    slopes.sort()
    m = len(slopes)
    sen = slopes[(m - 1) // 2] if m % 2 == 1 else (slopes[m // 2 - 1] + slopes[m // 2]) / 2
    return Trend(n=n, s=s, var_s=var_s, z=z, p=_erfc(abs(z) * _SQRT1_2), tau=s / ((n * (n - 1)) / 2), sen_slope=sen)


@dataclass(frozen=True)
class HamedRaoTrend:
    """Result of hamed_rao_trend: trend's fields with var(S), z and p corrected for autocorrelation."""

    n: int
    s: int
    var_s: float
    z: float
    p: float
    tau: float
    sen_slope: float
    var_s_uncorrected: float
    correction: float
    significant_lags: list[int]
    alpha: float


def _average_ranks(xs: Sequence[float]) -> list[float]:
    order = sorted(range(len(xs)), key=lambda i: (xs[i], i))
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i + 1
        while j < len(order) and xs[order[j]] == xs[order[i]]:
            j += 1
        r = (i + j + 1) / 2
        for k in range(i, j):
            ranks[order[k]] = r
        i = j
    return ranks


def hamed_rao_trend(series: Sequence[float], *, alpha: float = 0.05) -> HamedRaoTrend:
    """Hamed & Rao (1998) modified Mann-Kendall test with every lag, as pymannkendall's
    hamed_rao_modification_test (method in stats.ts's hamedRaoTrend)."""
    base = trend(series)
    alpha = _check_probability("alpha", alpha)
    x = [float(v) for v in series]
    n = len(x)
    detrended = [x[i] - (i + 1) * base.sen_slope for i in range(n)]
    ranks = _average_ranks(detrended)
    rm = _sum(ranks) / n
    y = [r - rm for r in ranks]
    acov0 = 0.0
    for v in y:
        acov0 += v * v
    acov0 = acov0 / n
    bound = _z_critical(alpha) / math.sqrt(n)
    sni = 0.0
    lags: list[int] = []
    if acov0 > 0:
        for k in range(1, n):
            ak = 0.0
            for i in range(n - k):
                ak += y[i] * y[i + k]
            r = ak / n / acov0
            if r > bound or r < -bound:
                sni += float((n - k) * (n - k - 1) * (n - k - 2)) * r
                lags.append(k)
    correction = 1 + (2 / float(n * (n - 1) * (n - 2))) * sni
    var_s = base.var_s * correction
    z = 0.0
    if var_s > 0 and base.s > 0:
        z = (base.s - 1) / math.sqrt(var_s)
    elif var_s > 0 and base.s < 0:
        z = (base.s + 1) / math.sqrt(var_s)
    return HamedRaoTrend(
        n=n, s=base.s, var_s=var_s, z=z, p=_erfc(abs(z) * _SQRT1_2), tau=base.tau, sen_slope=base.sen_slope,
        var_s_uncorrected=base.var_s, correction=correction, significant_lags=lags, alpha=alpha,
    )


# Internal elementary functions, exported for the accuracy tests only (as stats.ts's `elementary`).
elementary = {"exp": _exp, "log": _log, "atan": _atan, "erfc": _erfc}
