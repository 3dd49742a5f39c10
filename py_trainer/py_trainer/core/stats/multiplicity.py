"""The statistics, several samples per task and many typologies: passAtK, Holm's adjustment, the cluster-robust SE of a mean.

Port of ts_agent/src/agent/core/stats/multiplicity.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.descriptive import mean, sum_of, sum_squared_deviations
from py_trainer.core.stats.errors import check_integer, check_number, check_sample, fail


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k (Chen et al. 2021): 1 - prod_{i=n-c+1}^{n} (1 - k / i); 1 when n - c < k."""
    n = check_integer("n", n, 1)
    c = check_integer("c", c, 0)
    k = check_integer("k", k, 1)
    if c > n:
        fail("out_of_range", f"c ({c}) must be <= n ({n})")
    if k > n:
        fail("out_of_range", f"k ({k}) must be <= n ({n})")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1 - float(k) / float(i)
    return 1 - prod


def holm_adjust(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values in input order (statsmodels multipletests "holm")."""
    if len(pvalues) == 0:
        fail("empty", "pvalues is empty")
    for i, p in enumerate(pvalues):
        check_number(f"pvalues[{i}]", p)
        if p < 0 or p > 1:
            fail("out_of_range", f"pvalues[{i}] must be in [0, 1], got {p}")
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
    """Result of clustered_mean_se (CR1 cluster-robust SE of a mean, as the TS code)."""

    n: int
    clusters: int
    mean: float
    se: float
    iid_se: float
    design_effect: float | None


def clustered_mean_se(values: Sequence[float], clusters: Sequence[str]) -> ClusteredMean:
    """Mean with a cluster-robust (CR1) SE, clusters summed in order of first appearance
    (method in the TS code's clusteredMeanSE). Needs n >= 2 and at least 2 clusters."""
    check_sample("values", values, 2)
    if len(clusters) != len(values):
        fail("length_mismatch", f"values has {len(values)} entries, clusters has {len(clusters)}")
    for i, c in enumerate(clusters):
        if not isinstance(c, str):
            fail("label_type", f"clusters[{i}] must be a string, got {type(c).__name__}")
    x = [float(v) for v in values]
    n = len(x)
    m = sum_of(x) / n
    sums: dict[str, float] = {}
    for i in range(n):
        sums[clusters[i]] = sums.get(clusters[i], 0.0) + (x[i] - m)
    g = len(sums)
    if g < 2:
        fail("too_few", f"needs at least 2 clusters, got {g}")
    ss = 0.0
    for u in sums.values():
        ss += u * u
    se = math.sqrt(((g / (g - 1)) * ss) / (float(n) * float(n)))
    iid_se = math.sqrt(sum_squared_deviations(x, m) / (n - 1)) / math.sqrt(n)
    ratio = se / iid_se if iid_se > 0 else math.nan
    return ClusteredMean(n=n, clusters=g, mean=m, se=se, iid_se=iid_se, design_effect=ratio * ratio if iid_se > 0 else None)
