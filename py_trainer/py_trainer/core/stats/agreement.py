"""The statistics, agreement: Cohen's kappa, Kendall's tau-b, Fleiss' kappa, Kendall's W.

Port of ts_agent/src/agent/core/stats/agreement.ts, name for name in snake_case and bit for bit; the
conventions are in the package docstring (py_trainer/core/stats/__init__.py)."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Sequence

from py_trainer.core.stats.descriptive import average_ranks, sum_of
from py_trainer.core.stats.distributions import clamp_p
from py_trainer.core.stats.elementary import SQRT1_2, erfc
from py_trainer.core.stats.errors import check_integer, check_number, fail, is_number, js_max


@dataclass(frozen=True)
class CohenKappa:
    """Result of cohen_kappa; undefined quantities are None (see the TS code's CohenKappa)."""

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
    if is_number(x):
        check_number(name, x)
        return "number"
    if x is None:
        fail("nan", f"{name} is missing")
    fail("label_type", f"{name} must be a number or a string, got {type(x).__name__}")


def _label_key(x) -> tuple:
    return ("n", x + 0.0) if not isinstance(x, str) else ("s", x)


_NULL_VARIANCE_ROUNDING = 1e-12  # relative size below which cohen_kappa's null variance is rounding, i.e. 0


def cohen_kappa(r1: Sequence, r2: Sequence, *, weights: str = "none", categories: Sequence | None = None) -> CohenKappa:
    """Cohen's kappa for two raters, plain or weighted, with the Fleiss-Cohen-Everitt SE and the z
    test of kappa = 0 (as statsmodels' cohens_kappa). Category order: ``categories`` or the sorted
    union of labels (numbers ascending, strings by code point)."""
    if len(r1) == 0 or len(r2) == 0:
        fail("empty", "r1 and r2 must be non-empty")
    if len(r1) != len(r2):
        fail("length_mismatch", f"r1 has {len(r1)} labels, r2 has {len(r2)}")
    kinds = set()
    for i, x in enumerate(r1):
        kinds.add(_label_kind(f"r1[{i}]", x))
    for i, x in enumerate(r2):
        kinds.add(_label_kind(f"r2[{i}]", x))
    if weights not in ("none", "linear", "quadratic"):
        fail("bad_option", f'weights must be "none", "linear" or "quadratic", got {weights!r}')
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
        fail("label_type", "labels must be all numbers or all strings")
    index: dict = {}
    for i, x in enumerate(cats):
        key = _label_key(x)
        if key in index:
            fail("bad_option", f"categories lists {x!r} twice")
        index[key] = i
    k = len(cats)
    n = len(r1)
    counts = [[0] * k for _ in range(k)]
    for i in range(n):
        x = index.get(_label_key(r1[i]))
        y = index.get(_label_key(r2[i]))
        if x is None:
            fail("out_of_range", f"r1[{i}] = {r1[i]!r} is not in categories")
        if y is None:
            fail("out_of_range", f"r2[{i}] = {r2[i]!r} is not in categories")
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
    se = math.sqrt(js_max(0.0, (term_a - tc * tc) * fac))
    # The null variance is term_0 - pe^2 >= 0; within rounding of 0 (a rater who used one category:
    # kappa is 0/0 under the null) it is 0, so z and p are undefined rather than 0 / rounding noise.
    v0 = term_0 - pe * pe
    se0 = math.sqrt(v0 * fac) if v0 > _NULL_VARIANCE_ROUNDING * term_0 else 0.0
    z = kappa / se0 if se0 > 0 else None
    p = None if z is None else clamp_p(erfc(abs(z) * SQRT1_2))
    return CohenKappa(**base, kappa=kappa, se=se, se0=se0, z=z, p=p)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two paired samples (ties adjusted), as scipy.stats.kendalltau (variant
    "b"): (C - D) / sqrt((n0 - n1)(n0 - n2)), n0 = n(n-1)/2, n1 / n2 = pairs tied in x / y. NaN
    when undefined: fewer than 2 pairs, or either sample constant."""
    if len(x) != len(y):
        fail("length_mismatch", f"x has {len(x)} values, y has {len(y)}")
    for i, v in enumerate(x):
        check_number(f"x[{i}]", v)
    for i, v in enumerate(y):
        check_number(f"y[{i}]", v)
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
        fail("empty", "table has no subjects")
    k = len(table[0])
    if k == 0:
        fail("empty", "table has no categories")
    for i, row in enumerate(table):
        if len(row) != k:
            fail("length_mismatch", f"row {i} has {len(row)} categories, row 0 has {k}")
    for i, row in enumerate(table):
        for j in range(k):
            check_integer(f"table[{i}][{j}]", row[j], 0)
    # doubles, as in TS: int products would be exact and overflow when turned into floats
    table = [[float(x) for x in row] for row in table]
    raters_f = sum_of(table[0])
    raters = int(raters_f)
    for i in range(1, len(table)):
        if sum_of(table[i]) != raters_f:
            fail("length_mismatch", f"subject {i} has {int(sum_of(table[i]))} ratings, subject 0 has {raters}")
    if raters_f < 2:
        fail("too_few", f"needs at least 2 raters per subject, got {raters}")
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
    """Kendall's W with the tie correction for m raters x n items (method in the TS code's kendallW)."""
    m = len(ratings)
    if m == 0:
        fail("empty", "ratings has no raters")
    n = len(ratings[0])
    for i in range(m):
        if len(ratings[i]) != n:
            fail("length_mismatch", f"rater {i} rates {len(ratings[i])} items, rater 0 rates {n}")
        for j in range(n):
            check_number(f"ratings[{i}][{j}]", ratings[i][j])
    if m < 2:
        fail("too_few", f"needs at least 2 raters, got {m}")
    if n < 2:
        fail("too_few", f"needs at least 2 items, got {n}")
    sums = [0.0] * n
    ties = 0.0
    for i in range(m):
        row = [float(x) for x in ratings[i]]
        r = average_ranks(row)
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
