"""The statistics, training curves: startVsEnd, trend (Mann-Kendall with Sen's slope), Hamed-Rao's trend.

Port of ts_agent/src/agent/core/stats/trend.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.descriptive import average_ranks, sum_of
from py_trainer.core.stats.distributions import clamp_p, student_critical, z_critical
from py_trainer.core.stats.elementary import SQRT1_2, erfc
from py_trainer.core.stats.errors import check_integer, check_probability, check_sample, fail
from py_trainer.core.stats.rng import Interval

__all__ = ["StartVsEnd", "start_vs_end", "Trend", "trend", "HamedRaoTrend", "hamed_rao_trend"]


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


_OVERFLOW_MESSAGE = ("series overflows: its window means, their change or the spread of its first differences is not "
                     "finite in float64; rescale the series")


def start_vs_end(series: Sequence[float], *, window: int, confidence: float = 0.95) -> StartVsEnd:
    """First vs last ``window`` means of a series, with a t interval for the change whose standard
    error allows for AR(1) autocorrelation estimated from the first differences (method in
    the TS code's startVsEnd). Deterministic. A series whose window means, their change, the spread
    of its first differences or the change's standard error overflow is refused (out_of_range)."""
    check_sample("series", series, 3)
    window = check_integer("window", window, 1)
    n = len(series)
    if 2 * window > n:
        fail("out_of_range", f"2 * window ({2 * window}) exceeds the series length ({n})")
    confidence = check_probability("confidence", confidence)
    first = list(series[:window])
    last = list(series[n - window:])
    start_mean = sum_of(first) / window
    end_mean = sum_of(last) / window
    change = end_mean - start_mean
    d = [series[i + 1] - series[i] for i in range(n - 1)]
    m = len(d)
    dm = sum_of(d) / m
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
    if not all(math.isfinite(x) for x in (start_mean, end_mean, change, v, c, change_se)):
        fail("out_of_range", _OVERFLOW_MESSAGE)
    df = max(START_VS_END_MIN_DF, math.floor((n * (1 - phi)) / (1 + phi)) - 2)
    t = student_critical(confidence, df)
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
    check_sample("series", series, 3)
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
    return Trend(n=n, s=s, var_s=var_s, z=z, p=clamp_p(erfc(abs(z) * SQRT1_2)), tau=s / ((n * (n - 1)) / 2), sen_slope=sen)


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




def hamed_rao_trend(series: Sequence[float], *, alpha: float = 0.05) -> HamedRaoTrend:
    """Hamed & Rao (1998) modified Mann-Kendall test with every lag, as pymannkendall's
    hamed_rao_modification_test (method in the TS code's hamedRaoTrend)."""
    base = trend(series)
    alpha = check_probability("alpha", alpha)
    x = [float(v) for v in series]
    n = len(x)
    detrended = [x[i] - (i + 1) * base.sen_slope for i in range(n)]
    ranks = average_ranks(detrended)
    rm = sum_of(ranks) / n
    y = [r - rm for r in ranks]
    acov0 = 0.0
    for v in y:
        acov0 += v * v
    acov0 = acov0 / n
    bound = z_critical(alpha) / math.sqrt(n)
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
        n=n, s=base.s, var_s=var_s, z=z, p=clamp_p(erfc(abs(z) * SQRT1_2)), tau=base.tau, sen_slope=base.sen_slope,
        var_s_uncorrected=base.var_s, correction=correction, significant_lags=lags, alpha=alpha,
    )


# Internal elementary functions, exported for the accuracy tests only (as the TS code's `elementary`).
