"""Issue 29, item 1: "no spread" with a tolerance tied to the data's scale and float precision.

Per-task means over K samples (k / K) whose numerators differ by the same integer on every task
have, in exact arithmetic (fractions.Fraction, the reference here), no spread; in floats their
differences differ in the last bits (0.2 vs 0.19999999999999996). Before, sd_diff was then ~1e-17,
the t test read certainty (p = 0) and scipy's ttest_rel says the same; p could come out as -2.2e-16.
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as ss

from py_trainer.core import stats
from py_trainer.core.stats import StatsInputError


def test_no_spread_rule():
    assert stats.no_spread([0.2, 0.19999999999999996, 0.20000000000000007])
    assert stats.no_spread([0.3])
    assert not stats.no_spread([0.2, 0.2 + 1e-12])
    assert stats.no_spread([1e-17, -1e-17], scale=1)
    assert not stats.no_spread([1e-17, -1e-17])
    tol = stats.NO_SPREAD_ULPS * 2.220446049250313e-16
    assert stats.no_spread([0, tol * 0.99], scale=1) and not stats.no_spread([0, tol * 1.01], scale=1)
    with pytest.raises(StatsInputError) as e:
        stats.no_spread([0.1], scale=-1)
    assert e.value.kind == "out_of_range"


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([3, 5, 6, 7, 10]), st.integers(1, 3), st.lists(st.integers(0, 7), min_size=2, max_size=40))
def test_means_shifted_by_one_sample_have_no_spread(K, shift, ks):
    ks = [min(k, K - shift) for k in ks]
    a = [k / K for k in ks]
    b = [(k + shift) / K for k in ks]
    exact = {Fraction(k + shift, K) - Fraction(k, K) for k in ks}
    assert len(exact) == 1  # the reference: exactly no spread
    pc = stats.paired_comparison(a, b)
    assert pc.sd_diff == 0 and pc.se_diff == 0
    assert (pc.ci_t.lower, pc.ci_t.upper) == (pc.mean_diff, pc.mean_diff)
    assert 0 <= pc.t_test_p <= 1


def test_the_float_differences_fool_scipy_and_fooled_sd_zero():
    """The case of the issue: scipy's paired t test (exact sd of the float differences) reads
    certainty, which is why a tolerance is needed."""
    a = [k / 5 for k in (3, 4, 2, 1, 0, 3)]
    b = [(k + 1) / 5 for k in (3, 4, 2, 1, 0, 3)]
    assert len({y - x for x, y in zip(a, b)}) > 1  # not equal in floats
    assert ss.ttest_rel(b, a).pvalue < 1e-10  # t ~ 1e15
    assert stats.paired_comparison(a, b).sd_diff == 0


def test_differences_zero_up_to_rounding_have_mean_zero_and_p_one():
    pc = stats.paired_comparison([0.1 + 0.2, 0.3, 0.7, 0.1 + 0.7], [0.3, 0.3, 0.1 + 0.6, 0.8])
    assert (pc.sd_diff, pc.mean_diff, pc.t_test_p) == (0, 0, 1)


def test_p_is_clamped_to_the_unit_interval():
    a = [0.5] * 264
    b = [0.7 + (0.00325 if i % 2 else -0.00325) for i in range(264)]
    p = stats.paired_comparison(a, b).t_test_p
    assert 0 <= p <= 1
    assert p == pytest.approx(ss.ttest_rel(b, a).pvalue, abs=1e-15)
