"""The statistics, elementary functions: exp, log, atan and erfc built from + - * / sqrt, the same operations in both languages.

Port of ts_agent/src/agent/core/stats/elementary.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math


_LN2_HI = 6.93147180369123816490e-1
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.4426950408889634
SQRT1_2 = 0.7071067811865476
_HALF_PI = 1.5707963267948966
TWO_OVER_PI = 0.6366197723675814
_TWO_OVER_SQRT_PI = 1.1283791670955126
_ONE_OVER_SQRT_PI = 0.5641895835477563
TWO_POW_32 = 4294967296


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


def exp(x: float) -> float:
    """e^x as the TS code's exp (range reduction by ln 2, Taylor to degree 17)."""
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


def log(x: float) -> float:
    """Natural log as the TS code's log (fdlibm's reduction, atanh series)."""
    if math.isnan(x) or x < 0:
        return math.nan
    if x == 0:
        return -math.inf
    if x == math.inf:
        return math.inf
    m, e = math.frexp(x)
    if m < SQRT1_2:
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


def atan(x: float) -> float:
    """atan as the TS code's atan (fdlibm's reduction to |x| <= 7/16, Taylor series to z^22)."""
    if math.isnan(x):
        return math.nan
    if x < 0:
        return -atan(-x)
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
    """e^{-x^2} without the rounding of x^2 (Veltkamp split), as the TS code's expMinusSquare."""
    c = 134217729 * x
    xh = c - (c - x)
    xl = x - xh
    return exp(-(xh * xh)) * exp(-(xl * (x + xh)))


def erfc(x: float) -> float:
    """erfc as the TS code's erfc (positive series below 0.5, Laplace continued fraction above)."""
    if math.isnan(x):
        return math.nan
    if x < 0:
        return 2 - erfc(-x)
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
