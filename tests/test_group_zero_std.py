"""Issue 29, item 2: zero std is judged per group, from the rewards the sidecar computed, not from
TRL's batch-wide reward_std. Groups that are each constant at different levels (some all 0.2, some
all 0.7) carry no signal although the batch std is large (15 of 16 such groups went unreported);
and a per-group sd of 2e-5 is real variance (advantages of about +-0.17), which the old batch
tolerance of 1e-4 x the reward's level called zero. The rule: a group has no within-group variance
when its sample sd <= GROUP_ZERO_STD_ULPS x 2^-23 (float32 epsilon: TRL computes advantages in
float32) x the batch's largest |reward|.
"""

from __future__ import annotations

import statistics

import pytest

from py_trainer.core.curve_thresholds import ZERO_STD_WARN_STEPS
from py_trainer.training.train_grpo import (GROUP_ZERO_STD_ULPS, CurveWatch, GroupZeroStd, effective_zero_std, group_zero_std_share,
                                            trl_reward_funcs)

FLOAT32_EPS = 2.0 ** -23


def test_constant_groups_at_different_levels_have_no_signal_though_the_batch_std_is_large():
    G = 4
    rewards = [level for g in range(16) for level in [0.2 if g % 2 else 0.7] * G]
    rewards[:G] = [0.0, 1.0, 0.0, 1.0]  # one group with real variance
    assert statistics.stdev(rewards) > 0.2  # TRL's batch-wide reward_std: large
    zero, groups = group_zero_std_share(rewards, [f"p{i // G}" for i in range(len(rewards))], G)
    assert (zero, groups) == (15, 16)


def test_small_real_variance_is_variance_and_float_noise_is_not():
    G = 8
    real = [0.5 + (2e-5 if i % 2 else -2e-5) for i in range(G)]  # sd 2e-5: advantages ~ +-0.17 in TRL
    assert group_zero_std_share(real, ["p"] * G, G) == (0, 1)
    noise = [0.1 + 0.2, 0.3, 0.30000000000000004, 0.3] * 2  # equal up to rounding
    assert group_zero_std_share(noise, ["p"] * G, G) == (1, 1)
    # the tolerance is float32 precision times the reward's scale
    scale = 100.0
    tol = GROUP_ZERO_STD_ULPS * FLOAT32_EPS * scale
    just_below = [scale, scale + tol * 0.9] * (G // 2)
    assert statistics.stdev(just_below) <= tol
    assert group_zero_std_share(just_below, ["p"] * G, G) == (1, 1)
    assert group_zero_std_share([scale, scale + 4 * tol] * (G // 2), ["p"] * G, G) == (0, 1)


def test_groups_follow_the_prompts():
    # two prompts of 3 completions each in one batch of group size 3
    assert group_zero_std_share([1.0, 1.0, 1.0, 0.0, 1.0, 0.0], ["a"] * 3 + ["b"] * 3, 3) == (1, 2)


def test_the_reward_functions_feed_the_tracker_with_the_weighted_composed_reward():
    specs = [{"name": "exact_match", "weight": 1.0, "params": {}}, {"name": "format", "weight": 0.2, "params": {}}]
    tracker = GroupZeroStd([s["weight"] for s in specs], group_size=2)
    funcs = trl_reward_funcs(specs, tracker)
    prompts = ["q1", "q1", "q2", "q2"]
    completions = ["<answer>a</answer>", "<answer>a</answer>", "<answer>a</answer>", "no tag"]
    answers = [["a"], ["a"], ["a"], ["a"]]
    for f in funcs:
        f(prompts=prompts, completions=completions, answers=answers)
    assert tracker.pop() == pytest.approx(0.5)  # q1: both 1.2; q2: 1.2 vs 0
    assert tracker.pop() is None  # nothing since


def test_the_live_warning_reads_the_group_share():
    # TRL's batch figures say variance (reward_std 0.25, frac 0.0); every group is constant
    step = {"reward": 0.45, "reward_std": 0.25, "frac_reward_zero_std": 0.0, "frac_reward_zero_std_group": 15 / 16}
    assert effective_zero_std(step) == 15 / 16
    events = []
    watch = CurveWatch(events.append)
    for i in range(ZERO_STD_WARN_STEPS):
        watch.observe(i + 1, step)
    assert [e.warning.code for e in events] == ["zero_std_plateau"]
    # with the group share, the batch-wide 1e-4 tolerance no longer calls real small variance zero
    assert effective_zero_std({"reward": 0.5, "reward_std": 2e-5, "frac_reward_zero_std": 0.0, "frac_reward_zero_std_group": 0.0}) == 0.0
