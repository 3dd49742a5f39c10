"""Properties of py_trainer.grpo (hypothesis): invariants and closed forms, not the implementation's
own output. Exact equality with the TS original is tests/test_parity_vectors.py's job."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from py_trainer.core.advantage import group_relative_advantage
from py_trainer.core.task_rewards import (
                                          RewardInputError,
                                          WeightedScorer,
                                          build_reward,
                                          compose_reward_specs,
                                          compose_rewards,
                                          exact_match_reward,
                                          extract_answer,
                                          format_reward,
                                          normalize_answer,
                                          reward_names,
                                          )

FAST = settings(max_examples=80, deadline=None)

reward = st.one_of(st.sampled_from([0.0, 1.0, 0.5, None]), st.floats(-5, 5))
batch = st.integers(1, 6).flatmap(lambda g: st.integers(1, 5).flatmap(
    lambda k: st.tuples(st.lists(reward, min_size=g * k, max_size=g * k), st.just(g))))
scale = st.sampled_from(["group", "batch", "none"])


def kind_of(fn) -> str | None:
    try:
        fn()
    except RewardInputError as e:
        return e.kind
    return None


# ---------------------------------------------------------------------------------------------
# Advantages


@FAST
@given(batch, scale)
def test_advantages_zero_for_unscorable_and_sum_to_zero_per_group(rg, s):
    rewards, g = rg
    adv = group_relative_advantage(rewards, g, scale=s)
    assert len(adv) == len(rewards)
    for r, a in zip(rewards, adv):
        assert math.isfinite(a)
        if r is None:
            assert a == 0.0
    for start in range(0, len(rewards), g):
        assert abs(sum(adv[start:start + g])) < 1e-6


@FAST
@given(st.floats(-3, 3), st.floats(-3, 3))
def test_pair_closed_form(x, y):
    ax, ay = group_relative_advantage([x, y], 2)
    want = (x - y) / 2 / (abs(x - y) / math.sqrt(2) + 1e-4)
    assert math.isclose(ax, want, rel_tol=1e-9, abs_tol=1e-12)
    assert math.isclose(ay, -want, rel_tol=1e-9, abs_tol=1e-12)


@FAST
@given(batch, st.integers(-3, 3), st.sampled_from(["group", "none"]))
def test_shift_invariance(rg, c, s):
    rewards, g = rg
    a = group_relative_advantage(rewards, g, scale=s)
    b = group_relative_advantage([None if r is None else r + c for r in rewards], g, scale=s)
    for x, y in zip(a, b):
        assert math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)


@FAST
@given(st.lists(st.floats(-5, 5), min_size=2, max_size=10))
def test_group_scale_is_the_sample_std(rs):
    """(r - mean) / (sd + eps) with the n-1 (Bessel) sd, as TRL's nanstd."""
    n = len(rs)
    m = sum(rs) / n
    sd = math.sqrt(sum((r - m) ** 2 for r in rs) / (n - 1))
    adv = group_relative_advantage(rs, n)
    for r, a in zip(rs, adv):
        assert math.isclose(a, (r - m) / (sd + 1e-4), rel_tol=1e-9, abs_tol=1e-9)


def test_small_and_degenerate_groups():
    assert group_relative_advantage([None, 0.7, None, None], 4) == [0.0] * 4
    assert group_relative_advantage([0.3, 0.3, 0.3], 3) == [0.0] * 3
    assert group_relative_advantage([math.nan, math.nan], 2, scale="batch") == [0.0, 0.0]
    assert group_relative_advantage([1.0, None, 0.0, None], 2, scale="batch") == [0.0, 0.0, 0.0, 0.0]


@FAST
@given(st.lists(reward, min_size=1, max_size=12))
def test_batch_with_one_group_is_group(rs):
    assert group_relative_advantage(rs, len(rs), scale="batch") == group_relative_advantage(rs, len(rs), scale="group")


def test_advantage_errors():
    assert kind_of(lambda: group_relative_advantage([], 2)) == "empty"
    assert kind_of(lambda: group_relative_advantage([1, 0, 1], 2)) == "group_size"
    assert kind_of(lambda: group_relative_advantage([1, 0], 0)) == "group_size"
    assert kind_of(lambda: group_relative_advantage([1, 0], 1.5)) == "group_size"
    assert kind_of(lambda: group_relative_advantage([1, 0], 2, scale="global")) == "bad_option"
    assert kind_of(lambda: group_relative_advantage([1, 0], 2, eps=math.nan)) == "nan"
    assert kind_of(lambda: group_relative_advantage([1, 0], 2, eps=-1.0)) == "out_of_range"
    assert kind_of(lambda: group_relative_advantage([1, math.inf], 2)) == "out_of_range"


# ---------------------------------------------------------------------------------------------
# Graders

words = st.from_regex(r"[a-z]{1,8}( [a-z]{1,8}){0,2}", fullmatch=True)
pads = st.from_regex(r"[ \t\n]{0,3}", fullmatch=True)


@FAST
@given(words, st.lists(st.booleans(), min_size=1), pads)
def test_exact_match_ignores_case_and_whitespace(gold, upper, pad):
    shown = pad + "".join(ch.upper() if upper[i % len(upper)] else ch for i, ch in enumerate(gold)).replace(" ", " " + pad) + pad
    assert exact_match_reward(f"<answer>{shown}</answer>", [gold]) == 1.0
    assert exact_match_reward(f"<answer>{shown}</answer><answer>zz9</answer>", [gold]) == 0.0
    assert exact_match_reward(shown, [gold]) == 0.0
    assert exact_match_reward(shown, [gold], require_tag=False) == 1.0


@FAST
@given(st.tuples(st.sampled_from(["", "<answer>", "So "]), words, st.sampled_from(["", ".", " because x", "!"]),
                 st.sampled_from(["", "</answer>"])), st.lists(words, min_size=1, max_size=3))
def test_match_modes_nest_and_lenient_dominates_strict(parts, golds):
    c = "".join(parts)
    e = exact_match_reward(c, golds)
    p = exact_match_reward(c, golds, match="prefix")
    k = exact_match_reward(c, golds, match="contains")
    assert e <= p <= k
    assert build_reward({"name": "exact_match"}).score(c, golds) <= build_reward({"name": "exact_match_lenient"}).score(c, golds)


@FAST
@given(st.text(max_size=30), st.booleans(), st.booleans())
def test_normalize_is_idempotent(s, cs, ip):
    once = normalize_answer(s, case_sensitive=cs, ignore_punctuation=ip)
    assert normalize_answer(once, case_sensitive=cs, ignore_punctuation=ip) == once


def test_extract_answer_takes_the_last_tag():
    assert extract_answer("<answer>a</answer> x <answer>b\nc</answer>") == "b\nc"
    assert extract_answer("no tag") is None
    assert kind_of(lambda: extract_answer("x", "a b")) == "param_value"
    assert kind_of(lambda: exact_match_reward("<answer>x</answer>", [])) == "empty"
    assert build_reward({"name": "exact_match"}).score("<answer>x</answer>", []) is None


block = st.from_regex(r"[a-z ]{0,10}", fullmatch=True)


@FAST
@given(st.one_of(st.none(), block), block.filter(lambda s: s.strip() != ""), pads, st.from_regex(r"[a-z]{1,6}", fullmatch=True))
def test_format_reward_shapes(think, ans, ws, tail):
    c = f"{ws}{'' if think is None else f'<think>{think}</think>{ws}'}<answer>{ans}</answer>{ws}"
    assert format_reward(c) == 1.0
    assert format_reward(c + tail) == 0.0
    assert format_reward(c + tail, partial_credit=True) == 0.8
    assert format_reward(c, think="forbidden" if think is None else "required") == 1.0


@FAST
@given(st.lists(st.sampled_from(["<answer>", "</answer>", "<think>", "</think>", "x", " ", "\n"]), max_size=8),
       st.sampled_from(["optional", "required", "forbidden"]))
def test_partial_credit_is_in_fifths(parts, think):
    c = "".join(parts)
    strict = format_reward(c, think=think)
    partial = format_reward(c, think=think, partial_credit=True)
    assert strict in (0.0, 1.0)
    assert partial in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
    assert (partial == 1.0) == (strict == 1.0)


# ---------------------------------------------------------------------------------------------
# Composition and registry


@FAST
@given(st.lists(st.tuples(st.floats(-3, 3), st.one_of(st.none(), st.floats(0, 1))), min_size=1, max_size=5))
def test_compose_is_a_nansum(items):
    got = compose_rewards([WeightedScorer(score=(lambda c, a, v=v: v), weight=w) for w, v in items])("", [])
    scored = [(w, v) for w, v in items if v is not None]
    if not scored:
        assert got is None
    else:
        assert math.isclose(got, sum(w * v for w, v in scored), rel_tol=1e-12, abs_tol=1e-12)


def test_registry_names_defaults_and_errors():
    assert reward_names() == ["exact_match", "exact_match_lenient", "final_number_match", "format", "stops_after_answer"]
    for name in reward_names():
        built = build_reward({"name": name})
        assert built.weight == 1.0
        assert build_reward({"name": name, "params": built.params}).params == built.params
    assert build_reward({"name": "exact_match_lenient"}).params["match"] == "contains"
    cases = [
        ({"name": "exact_match", "params": {"case_sensitve": True}}, "unknown_param", "params.case_sensitve"),
        ({"name": "exact_match", "params": {"case_sensitive": "yes"}}, "param_type", "params.case_sensitive"),
        ({"name": "format", "params": {"partial_credit": 1}}, "param_type", "params.partial_credit"),
        ({"name": "format", "params": {"think": "maybe"}}, "param_value", "params.think"),
        ({"name": "bleu"}, "unknown_reward", "name"),
        ({"name": "format", "weight": "2"}, "param_type", "weight"),
        ({"name": "format", "weight": math.nan}, "nan", "weight"),
    ]
    for spec, kind, field in cases:
        with pytest.raises(RewardInputError) as err:
            build_reward(spec)
        assert err.value.kind == kind and str(err.value).startswith(field), (spec, str(err.value))


def test_default_specs():
    score = compose_reward_specs([{"name": "exact_match", "weight": 1.0}, {"name": "format", "weight": 0.2}])
    assert score("<answer>structuring</answer>", ["structuring"]) == 1.2
    assert score("<answer>smurfing</answer>", ["structuring"]) == 0.2
    assert score("structuring", ["structuring"]) == 0.0
    assert score("<answer>x</answer>", []) == 0.2


def test_one_character_class_table_for_both_graders_issue_10():
    # CPython 3.11's unicodedata (Unicode 14) calls U+1FAE8 unassigned; the checked-in table (the
    # same one task-rewards.ts reads) calls it a symbol, so the lenient grader agrees with the TS one.
    from py_trainer.core.task_rewards import build_reward, normalize_answer

    assert build_reward({"name": "exact_match_lenient"}).score("The answer is 42\U0001FAE8", ["42"]) == 1
    assert normalize_answer("ΟΔΟΣ") == "οδοσ"
