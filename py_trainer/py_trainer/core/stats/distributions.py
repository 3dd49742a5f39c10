"""The statistics, distributions: the standard normal and Student t: CDFs, quantiles, critical values.

Port of ts_agent/src/agent/core/stats/distributions.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math

from py_trainer.core.stats.elementary import SQRT1_2, TWO_OVER_PI, atan, erfc, log
from py_trainer.core.stats.errors import check_integer, check_probability, fail, is_number


def clamp_p(p: float) -> float:
    """A p-value clamped to [0, 1] (1 - a CDF can round to -2.2e-16); NaN stays NaN."""
    return 0.0 if p < 0 else 1.0 if p > 1 else p


def normal_cdf(x: float) -> float:
    """Standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2."""
    if not is_number(x) or math.isnan(x):
        fail("nan", f"x must be a number, got {x!r}")
    return 0.5 * erfc(-x * SQRT1_2)


def normal_quantile(p: float) -> float:
    """Standard normal quantile for p in (0, 1): Wichura's AS241 (PPND16)."""
    check_probability("p", p)
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
    r = math.sqrt(-log(r))
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


def student_abs_cdf(t: float, df: int) -> float:
    """P(|T| <= t), t >= 0, integer df: the finite series of the TS code's studentAbsCdf."""
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
    theta = atan(t / math.sqrt(df))
    if df == 1:
        return TWO_OVER_PI * theta
    for k in range(1, (df - 3) // 2 + 1):
        term = (term * c2 * (2 * k)) / (2 * k + 1)
        total += term
    return TWO_OVER_PI * (theta + s * math.sqrt(c2) * total)


def student_critical(target: float, df: int) -> float:
    """The t >= 0 with P(|T| <= t) = target, by bisection to 1 ulp."""
    lo, hi = 0.0, 1.0
    while student_abs_cdf(hi, df) < target:
        lo = hi
        hi *= 2
    while True:
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            return hi
        if student_abs_cdf(mid, df) < target:
            lo = mid
        else:
            hi = mid


def student_t_quantile(p: float, df: int) -> float:
    """Student's t quantile for p in (0, 1) and integer df >= 1 (bisection on the exact CDF)."""
    check_probability("p", p)
    df = check_integer("df", df, 1)
    if p == 0.5:
        return 0.0
    return student_critical(2 * p - 1, df) if p > 0.5 else -student_critical(1 - 2 * p, df)


def z_critical(alpha: float) -> float:
    return -normal_quantile(alpha / 2)
