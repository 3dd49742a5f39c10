"""Properties of py_trainer.core.stats (hypothesis): closed forms, symmetries and the error kinds.
Reference values from scipy/statsmodels/scikit-learn are in tests/test_stats_references.py."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from py_trainer.core import stats
from py_trainer.core.stats import StatsInputError

FAST = settings(max_examples=60, deadline=None)
num = st.floats(-1e3, 1e3)
sample = st.lists(num, min_size=2, max_size=30)


def kind_of(fn) -> str | None:
    try:
        fn()
    except StatsInputError as e:
        return e.kind
    return None


def close(a, b, rel):
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


@FAST
@given(st.floats(0.01, 0.99))
def test_t_quantile_closed_forms(p):
    assert close(stats.student_t_quantile(p, 1), math.tan(math.pi * (p - 0.5)), 1e-12)
    assert close(stats.student_t_quantile(p, 2), (2 * p - 1) / math.sqrt(2 * p * (1 - p)), 1e-12)
    assert close(stats.student_t_quantile(p, 9), -stats.student_t_quantile(1 - p, 9), 1e-12)


@FAST
@given(st.floats(-37, 1))
def test_normal_quantile_inverts_cdf(x):
    assert close(stats.normal_quantile(stats.normal_cdf(x)), x, 1e-9)
    assert abs(stats.normal_cdf(x) + stats.normal_cdf(-x) - 1) <= 1e-15


@FAST
@given(sample, st.integers(-100, 100))
def test_descriptive(xs, c):
    m = stats.mean(xs)
    assert min(xs) - 1e-9 <= m <= max(xs) + 1e-9
    sd = stats.sample_sd(xs)
    assert sd >= 0
    assert close(stats.standard_error(xs), sd / math.sqrt(len(xs)), 1e-15)
    assert abs(stats.sample_sd([x + c for x in xs]) - sd) <= 1e-9 * (1 + sd)


@FAST
@given(st.integers(1, 2000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n))))
def test_wilson_brackets_the_estimate(kn):
    k, n = kn
    w = stats.wilson_interval(k, n)
    assert 0 <= w.lower <= w.estimate + 1e-15 and w.estimate <= w.upper + 1e-15 and w.upper <= 1


@FAST
@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_is_the_binomial_sum(b, c):
    n = b + c
    p = stats.mcnemar_exact_p(b, c)
    assert p == stats.mcnemar_exact_p(c, b)
    want = 1.0 if n == 0 else min(1.0, 2 * sum(math.comb(n, k) for k in range(min(b, c) + 1)) / 2**n)
    assert close(p, want, 1e-15)


bits = st.integers(2, 40).flatmap(lambda n: st.tuples(st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n),
                                                      st.lists(st.sampled_from([0, 1]), min_size=n, max_size=n)))


@FAST
@given(bits)
def test_paired_comparison_symmetry(ab):
    a, b = ab
    r, s = stats.paired_comparison(a, b), stats.paired_comparison(b, a)
    assert close(r.mean_diff, -s.mean_diff, 1e-15)
    assert (r.discordant.b, r.discordant.c) == (s.discordant.c, s.discordant.b)
    assert r.discordant.c - r.discordant.b == round(r.mean_diff * len(a))
    assert r.ci_t.lower <= r.ci_normal.lower + 1e-15 and r.ci_normal.upper <= r.ci_t.upper + 1e-15


@settings(max_examples=25, deadline=None)
@given(bits, st.integers(0, 2**32 - 1))
def test_bootstrap_is_seeded_and_bounded(ab, seed):
    a, b = ab
    one = stats.paired_bootstrap_ci(a, b, resamples=150, seed=seed)
    assert stats.paired_bootstrap_ci(a, b, resamples=150, seed=seed) == one
    d = [y - x for x, y in zip(a, b)]
    assert min(d) <= one.lower <= one.upper <= max(d)


@FAST
@given(st.floats(0.005, 1), st.floats(0.01, 2))
def test_required_n_and_mde_are_inverses(delta, sd):
    n = stats.required_n_for_delta(delta, sd)
    assert stats.required_n_for_delta(-delta, sd) == n
    assert stats.minimum_detectable_effect(n, sd) <= delta * (1 + 1e-12)
    if n > 1:
        assert stats.minimum_detectable_effect(n - 1, sd) > delta


ratings = st.integers(2, 40).flatmap(lambda n: st.tuples(st.lists(st.integers(0, 3), min_size=n, max_size=n),
                                                         st.lists(st.integers(0, 3), min_size=n, max_size=n)))


@FAST
@given(ratings, st.sampled_from(["none", "linear", "quadratic"]))
def test_kappa_symmetric_and_perfect(r, weights):
    r1, r2 = r
    k, j = stats.cohen_kappa(r1, r2, weights=weights), stats.cohen_kappa(r2, r1, weights=weights)
    if k.kappa is None:
        assert j.kappa is None
    else:
        assert close(k.kappa, j.kappa, 1e-12) and k.kappa <= 1 + 1e-12
    self = stats.cohen_kappa(r1, r1, weights=weights)
    if self.kappa is not None:
        assert close(self.kappa, 1.0, 1e-12)


@FAST
@given(st.integers(3, 30), st.floats(0.001, 2))
def test_trend_of_a_line(n, slope):
    series = [0.1 + slope * i for i in range(n)]
    t = stats.trend(series)
    assert t.s == n * (n - 1) // 2
    assert close(t.sen_slope, slope, 1e-9)
    r = stats.trend(series[::-1])
    assert r.s == -t.s and close(r.z, -t.z, 1e-15)


@settings(max_examples=25, deadline=None)
@given(st.integers(10, 30), st.integers(3, 10), st.floats(0.01, 1))
def test_start_vs_end_flat_and_step(length, w, level):
    window = min(w, length // 2)
    flat = stats.start_vs_end([level] * length, window=window)
    assert flat.change == 0 and (flat.change_ci.lower, flat.change_ci.upper) == (0, 0)
    # alternating +-0.1 noise: a single jump far above the noise reads as a random walk (phi at its maximum)
    step = stats.start_vs_end([x + (0.1 if i % 2 else -0.1)
                               for i, x in enumerate([level] * length + [level + 0.5] * length)], window=window)
    assert step.change_ci.lower > 0


OVERFLOWING = [
    ([1e308, 1e308, 0.1, 0.2, 0.3, 0.4], 2),  # the first window's sum is inf
    ([0.1, 0.2, 0.3, 0.4, -1e308, -1e308], 2),  # the last window's sum is -inf
    ([-1e308, 0.1, 0.2, 0.3, 0.4, 1e308], 1),  # the change is inf
    ([1e308, -1e308, 0.1, 0.2, 0.3, 0.4], 1),  # a first difference is -inf
    ([0.1, 1e200, -1e200, 0.2, 0.3, 0.4], 1),  # finite differences whose squares overflow
    ([0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5], 3),  # huge values among ordinary ones
    ([0.1, 1e308, -1e200, 1e300, 0.2, 0.3, 0.4, 0.5], 4),
]


@pytest.mark.parametrize("series,window", OVERFLOWING)
def test_start_vs_end_refuses_an_overflowing_series(series, window):
    """Issue 31: it raised ValueError (cannot convert float NaN to integer) where TS returned NaNs."""
    with pytest.raises(StatsInputError, match="^series overflows") as e:
        stats.start_vs_end(series, window=window)
    assert e.value.kind == "out_of_range"
    big = stats.start_vs_end([1e150, 2e150, 3e150, 4e150, 5e150, 6e150], window=2)
    assert math.isfinite(big.change_ci.lower) and math.isfinite(big.change_ci.upper)


@FAST
@given(st.integers(0, 2**32 - 1), st.integers(1, 2**32))
def test_rng_range_and_determinism(seed, n):
    a, b = stats.Rng(seed), stats.Rng(seed)
    for _ in range(20):
        x = a.next_index(n)
        assert 0 <= x < n and b.next_index(n) == x


with_missing = st.lists(st.one_of(num, num, num, st.sampled_from([math.nan, math.inf, -math.inf, None])), max_size=30)


def _finite(xs):
    return [x for x in xs if x is not None and math.isfinite(x)]


@FAST
@given(with_missing)
def test_nan_mean_and_sd_are_mean_and_sd_of_the_finite_values(xs):
    f = _finite(xs)
    m, sd = stats.nan_mean(xs), stats.nan_sample_sd(xs)
    assert (m == stats.mean(f)) if f else math.isnan(m)
    assert (sd == stats.sample_sd(f)) if len(f) >= 2 else math.isnan(sd)


@settings(max_examples=25, deadline=None)
@given(with_missing, st.integers(0, 2**32 - 1))
def test_bootstrap_mean_ci_is_seeded_bounded_and_skips_missing(xs, seed):
    f = _finite(xs)
    ci = stats.bootstrap_mean_ci(xs, seed=seed, resamples=100)
    assert stats.bootstrap_mean_ci(f, seed=seed, resamples=100) == ci
    if len(f) < 2:
        assert math.isnan(ci.lower) and math.isnan(ci.upper)
    else:
        slack = 1e-12 * max(1.0, max(abs(v) for v in f))  # (x + x + x) / 3 may round past x
        assert min(f) - slack <= ci.lower <= ci.upper <= max(f) + slack


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(0.05, 1), min_size=1, max_size=20), st.floats(-0.9, 2), st.integers(0, 2**32 - 1))
def test_relative_change_of_a_scaled_end(start, r, seed):
    end = [(1 + r) * x for x in start]
    rc = stats.relative_change_ci(start, end, seed=seed, resamples=50)
    for v in (rc.estimate, rc.lower, rc.upper):
        assert abs(v - r) <= 1e-12 * (1 + abs(r))
    assert stats.relative_change_ci(start + [math.nan, 0.5], end + [0.5, None], seed=seed, resamples=50) == rc


def test_relative_change_undefined_is_nan():
    for start, end in [([0.0, 0.0], [1.0, 1.0]), ([], []), ([math.nan], [1.0])]:
        rc = stats.relative_change_ci(start, end, seed=0)
        assert all(math.isnan(v) for v in (rc.estimate, rc.lower, rc.upper))


@FAST
@given(st.lists(st.tuples(st.integers(0, 5), st.floats(-1, 1)), max_size=25))
def test_kendall_tau_b_symmetry_and_range(pairs):
    x = [p[0] for p in pairs]
    y = [p[1] for p in pairs]
    t = stats.kendall_tau_b(x, y)
    if math.isnan(t):
        assert len(set(x)) < 2 or len(set(y)) < 2
    else:
        assert -1 - 1e-15 <= t <= 1 + 1e-15
        assert stats.kendall_tau_b(y, x) == t
        assert stats.kendall_tau_b(x, [-v for v in y]) == -t


@FAST
@given(sample, st.integers(0, 100), st.sampled_from([math.nan, math.inf, None]))
def test_bad_values_have_stable_kinds(xs, at, bad):
    w = list(xs)
    w[at % len(w)] = bad
    want = "out_of_range" if bad == math.inf else "nan"
    assert kind_of(lambda: stats.mean(w)) == want
    assert kind_of(lambda: stats.paired_comparison(w, xs)) == want
    assert kind_of(lambda: stats.trend(w + [1.0])) == want


def test_error_kinds():
    assert kind_of(lambda: stats.mean([])) == "empty"
    assert kind_of(lambda: stats.sample_sd([1.0])) == "too_few"
    assert kind_of(lambda: stats.paired_comparison([1, 0], [1])) == "length_mismatch"
    assert kind_of(lambda: stats.required_n_for_delta(0, 0.3)) == "zero_delta"
    assert kind_of(lambda: stats.normal_quantile(1.0)) == "out_of_range"
    assert kind_of(lambda: stats.wilson_interval(1.5, 3)) == "not_integer"
    assert kind_of(lambda: stats.cohen_kappa([1, "a"], [1, "a"])) == "label_type"
    assert kind_of(lambda: stats.cohen_kappa([True], [False])) == "label_type"
    assert kind_of(lambda: stats.cohen_kappa([1], [1], weights="cubic")) == "bad_option"
    assert kind_of(lambda: stats.fleiss_kappa([[1, 2], [3]])) == "length_mismatch"
    assert kind_of(lambda: stats.nan_mean([1.0, "2"])) == "nan"
    assert kind_of(lambda: stats.nan_sample_sd([1.0, True])) == "nan"
    assert kind_of(lambda: stats.bootstrap_mean_ci([0.2], seed=-1)) == "out_of_range"
    assert kind_of(lambda: stats.bootstrap_mean_ci([0.2, 0.3], seed=0, resamples=0)) == "out_of_range"
    assert kind_of(lambda: stats.relative_change_ci([1, 0], [1], seed=0)) == "length_mismatch"
    assert kind_of(lambda: stats.kendall_tau_b([1, 2], [1])) == "length_mismatch"
    assert kind_of(lambda: stats.kendall_tau_b([1, math.nan], [1, 2])) == "nan"
    with pytest.raises(StatsInputError):
        stats.Rng(2**32)
