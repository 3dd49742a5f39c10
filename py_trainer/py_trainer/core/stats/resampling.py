"""The statistics, held-out resampling: bootstrapMeanCI and relativeChangeCI (missing values skipped).

Port of ts_agent/src/agent/core/stats/resampling.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.descriptive import finite_values, is_present, mean, sum_of
from py_trainer.core.stats.errors import check_integer, check_probability, check_sample, fail
from py_trainer.core.stats.rng import Interval, Rng, percentile_interval


def bootstrap_mean_ci(
    values: Sequence[float | None], *, seed: int, resamples: int = 2000, confidence: float = 0.95
) -> Interval:
    """Percentile bootstrap CI of the mean of the finite values (None, NaN, infinities skipped):
    n indices resampled with replacement from Rng(seed), ``resamples`` times (method in the TS code's
    bootstrapMeanCI). Interval(nan, nan) when fewer than 2 finite values are left."""
    x = finite_values("values", values)
    resamples = check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = check_probability("confidence", confidence)
    n = len(x)
    if n < 2:
        return Interval(lower=math.nan, upper=math.nan)
    means = []
    for _ in range(resamples):
        s = 0.0
        for _ in range(n):
            s += x[rng.next_index(n)]
        means.append(s / n)
    return percentile_interval(means, confidence)


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
    the TS code's relativeChangeCI). All NaN when no pair is left or mean(start) == 0.

    A resample whose start mean is 0 is kept: its relative change is +inf (end mean > 0), -inf
    (< 0) or 0 (both 0), so a bound that reaches it is reported as unbounded, not cut off.
    """
    if len(start) != len(end):
        fail("length_mismatch", f"start has {len(start)} values, end has {len(end)}")
    ok_start = [is_present(f"start[{i}]", x) for i, x in enumerate(start)]
    ok_end = [is_present(f"end[{i}]", x) for i, x in enumerate(end)]
    resamples = check_integer("resamples", resamples, 1)
    rng = Rng(seed)
    confidence = check_probability("confidence", confidence)
    a = [float(start[i]) for i in range(len(start)) if ok_start[i] and ok_end[i]]
    b = [float(end[i]) for i in range(len(end)) if ok_start[i] and ok_end[i]]
    n = len(a)
    if n == 0:
        return RelativeChange(estimate=math.nan, lower=math.nan, upper=math.nan)
    mean_start = sum_of(a) / n
    if mean_start == 0:
        return RelativeChange(estimate=math.nan, lower=math.nan, upper=math.nan)
    estimate = (sum_of(b) / n - mean_start) / abs(mean_start)
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
    ci = percentile_interval(relatives, confidence)
    return RelativeChange(estimate=estimate, lower=ci.lower, upper=ci.upper)
