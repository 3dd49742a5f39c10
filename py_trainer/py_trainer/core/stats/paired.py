"""The statistics, paired tests: McNemar's exact p, pairedComparison, the paired bootstrap, Tango's score interval.

Port of ts_agent/src/agent/core/stats/paired.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.descriptive import no_spread, sum_of, sum_squared_deviations
from py_trainer.core.stats.distributions import clamp_p, student_abs_cdf, student_critical, z_critical
from py_trainer.core.stats.errors import check_integer, check_pair, check_probability, fail, js_max, js_min
from py_trainer.core.stats.rng import Interval, Rng, percentile_interval


@dataclass(frozen=True)
class Discordant:
    """Discordant pairs of a 0/1 comparison: b = (a=1, b=0), c = (a=0, b=1)."""

    b: int
    c: int


@dataclass(frozen=True)
class PairedComparison:
    """Result of paired_comparison; differences are b - a, as fractions (see the TS code)."""

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
    b = check_integer("b", b, 0)
    c = check_integer("c", c, 0)
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
    check_pair(a, b, 2)
    confidence = check_probability("confidence", confidence)
    a = [float(x) for x in a]  # doubles, as in TS (int subtraction would be exact)
    b = [float(x) for x in b]
    n = len(a)
    d = [b[i] - a[i] for i in range(n)]
    mean_a = sum_of(a) / n
    mean_b = sum_of(b) / n
    # no spread (no_spread, at the scale of the scores): sd 0; and a mean that is 0 up to rounding is 0
    scale = 0.0
    for i in range(n):
        scale = max(scale, abs(a[i]), abs(b[i]))
    flat = no_spread(d, scale=scale)
    mean_diff = 0.0 if flat and no_spread([*d, 0.0], scale=scale) else sum_of(d) / n
    sd_diff = 0.0 if flat else math.sqrt(sum_squared_deviations(d, mean_diff) / (n - 1))
    se_diff = sd_diff / math.sqrt(n)
    z = z_critical(1 - confidence)
    t = student_critical(confidence, n - 1)
    saa = sbb = sab = 0.0
    for i in range(n):
        da = a[i] - mean_a
        db = b[i] - mean_b
        saa += da * da
        sbb += db * db
        sab += da * db
    correlation = None if saa == 0 or sbb == 0 or no_spread(a) or no_spread(b) else js_max(-1.0, js_min(1.0, sab / (math.sqrt(saa) * math.sqrt(sbb))))
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
        t_test_p=clamp_p(1 - student_abs_cdf(abs(mean_diff / se_diff), n - 1)) if se_diff > 0 else (1.0 if mean_diff == 0 else 0.0),
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
    check_pair(a, b, 2)
    resamples = check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = check_probability("confidence", confidence)
    n = len(a)
    d = [float(b[i]) - float(a[i]) for i in range(n)]
    stats = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += d[rng.next_index(n)]
        stats.append(s / n)
    ci = percentile_interval(stats, confidence)
    return BootstrapInterval(
        estimate=sum_of(d) / n, lower=ci.lower, upper=ci.upper, resamples=resamples, seed=int(seed), confidence=confidence
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
    bisection on [-1, 1] (method in the TS code's tangoScoreInterval)."""
    b = check_integer("b", b, 0)
    c = check_integer("c", c, 0)
    n = check_integer("n", n, 1)
    if b + c > n:
        fail("out_of_range", f"b + c ({b + c}) must be <= n ({n})")
    confidence = check_probability("confidence", confidence)
    z = z_critical(1 - confidence)
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
