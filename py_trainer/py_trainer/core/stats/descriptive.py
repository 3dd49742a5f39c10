"""The statistics, descriptive statistics: mean, sd, se, their nan* versions, Wilson's interval, average
ranks, the one "no spread" rule (no_spread) and the interval over runs (interval_over_runs).

Port of ts_agent/src/agent/core/stats/descriptive.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.distributions import student_t_quantile, z_critical
from py_trainer.core.stats.errors import check_integer, check_number, check_probability, check_sample, fail, is_number, js_max, js_min

EPSILON = 2.220446049250313e-16  # Number.EPSILON, 2^-52


def sum_of(xs) -> float:
    s = 0.0
    for x in xs:
        s += x
    return s


def sum_squared_deviations(xs, m: float) -> float:
    ss = 0.0
    for x in xs:
        dev = x - m
        ss += dev * dev
    return ss


def mean(xs: Sequence[float]) -> float:
    """Arithmetic mean (left-to-right sum / n)."""
    check_sample("xs", xs, 1)
    return sum_of(xs) / len(xs)


NO_SPREAD_ULPS = 64  # no_spread's tolerance in float64 epsilons times the data's scale (the TS code's NO_SPREAD_ULPS)


def no_spread(values: Sequence[float], *, scale: float | None = None) -> bool:
    """max - min <= NO_SPREAD_ULPS * epsilon * scale (scale: the magnitude of the numbers the values
    came from, default the largest |value|): the one "no spread" rule (the TS code's noSpread)."""
    check_sample("values", values, 1)
    lo = hi = float(values[0])
    big = 0.0
    for x in values:
        x = float(x)
        if x < lo:
            lo = x
        if x > hi:
            hi = x
        if abs(x) > big:
            big = abs(x)
    s = big
    if scale is not None:
        s = check_number("scale", scale)
        if s < 0:
            fail("out_of_range", f"scale must be >= 0, got {s}")
    return hi - lo <= NO_SPREAD_ULPS * EPSILON * s


def sample_sd(xs: Sequence[float]) -> float:
    """Sample standard deviation (Bessel, n - 1; two-pass); needs n >= 2."""
    check_sample("xs", xs, 2)
    return math.sqrt(sum_squared_deviations(xs, sum_of(xs) / len(xs)) / (len(xs) - 1))


def standard_error(xs: Sequence[float]) -> float:
    """Standard error of the mean: sample_sd / sqrt(n); needs n >= 2."""
    check_sample("xs", xs, 2)
    sd = math.sqrt(sum_squared_deviations(xs, sum_of(xs) / len(xs)) / (len(xs) - 1))
    return sd / math.sqrt(len(xs))


def is_present(name: str, x) -> bool:
    """True for a finite number, False for a missing value (None, NaN, +-inf); else raises "nan"."""
    if x is None:
        return False
    if not is_number(x):
        fail("nan", f"{name} must be a number or missing, got {x!r}")
    return math.isfinite(x)


def finite_values(name: str, xs: Sequence[float | None]) -> list[float]:
    """The finite values of xs in order (missing values skipped), as the TS code's finiteValues."""
    return [float(x) for i, x in enumerate(xs) if is_present(f"{name}[{i}]", x)]


def nan_mean(xs: Sequence[float | None]) -> float:
    """Mean of the finite values of xs (None, NaN and infinities skipped); NaN when none is left."""
    v = finite_values("xs", xs)
    return sum_of(v) / len(v) if v else math.nan


def nan_sample_sd(xs: Sequence[float | None]) -> float:
    """Sample sd (Bessel, n - 1; two-pass) of the finite values of xs (None, NaN and infinities
    skipped); NaN when fewer than 2 are left."""
    v = finite_values("xs", xs)
    if len(v) < 2:
        return math.nan
    return math.sqrt(sum_squared_deviations(v, sum_of(v) / len(v)) / (len(v) - 1))


@dataclass(frozen=True)
class ProportionInterval:
    """A proportion (successes / n) with its Wilson score interval."""

    estimate: float
    lower: float
    upper: float


def wilson_interval(successes: int, n: int, *, confidence: float = 0.95) -> ProportionInterval:
    """Wilson score interval for successes out of n (statsmodels' wilson formula), clipped to [0, 1]."""
    n = check_integer("n", n, 0)
    if n == 0:
        fail("empty", "n must be > 0")
    successes = check_integer("successes", successes, 0)
    if successes > n:
        fail("out_of_range", f"successes ({successes}) must be <= n ({n})")
    confidence = check_probability("confidence", confidence)
    # doubles, as in TS: Python ints would be exact (4 * n * n) and overflow on float conversion
    n = float(n)
    successes = float(successes)
    z = z_critical(1 - confidence)
    z2 = z * z
    p = successes / n
    denom = 1 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    dist = (z * math.sqrt((p * (1 - p)) / n + z2 / (4 * n * n))) / denom
    return ProportionInterval(estimate=p, lower=js_max(0.0, center - dist), upper=js_min(1.0, center + dist))


def average_ranks(xs: Sequence[float]) -> list[float]:
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


@dataclass(frozen=True)
class RunsInterval:
    """An effect across training runs (seeds): mean, between-run SD and an interval over runs."""

    n: int
    mean: float
    sd: float
    lower: float
    upper: float
    method: str


def interval_over_runs(values: Sequence[float], *, confidence: float = 0.95) -> RunsInterval:
    """Port of the TS code intervalOverRuns: the run is the unit; Student's t at every n; runs with
    no spread (no_spread): sd 0 and no interval, saying why; one run: NaN bounds and SD."""
    check_sample("values", values, 1)
    confidence = check_probability("confidence", confidence)
    n = len(values)
    m = sum_of(values) / n
    if n < 2:
        return RunsInterval(n, m, math.nan, math.nan, math.nan, "one run: no interval")
    if no_spread(values):
        return RunsInterval(n, m, 0.0, math.nan, math.nan,
                            f"no interval: the {n} runs have no spread (equal up to rounding), and a zero-width "
                            "interval would read certainty")
    sd = math.sqrt(sum_squared_deviations(values, m) / (n - 1))
    half = student_t_quantile(1 - (1 - confidence) / 2, n - 1) * sd / math.sqrt(n)
    return RunsInterval(n, m, sd, m - half, m + half, f"t interval over {n} runs (df {n - 1})")
