"""GRPO's group-relative advantages: the port of ts_agent/src/agent/core/advantage.ts.

group_relative_advantage reproduces TRL 1.16 GRPOTrainer's advantages (sum_then_normalize) in
float64: group mean, sample std with Bessel's correction (TRL's nanstd), NaN rewards left out and
given advantage 0. Plain loops, not numpy: the order of float operations matches the TS code, so
`make parity` holds it to 0 ulp. Bad input raises task_rewards.RewardInputError with the same
kinds as the TS code.
"""

from __future__ import annotations

import math
import sys
from typing import Sequence

from py_trainer.core.task_rewards import RewardInputError

__all__ = ["group_relative_advantage"]


def _fail(kind: str, message: str):
    raise RewardInputError(kind, message)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)



def group_relative_advantage(
    rewards: Sequence[float | None], group_size: int, *, scale: str = "group", eps: float = 1e-4
) -> list[float]:
    """GRPO advantages as TRL 1.16's GRPOTrainer with scale_rewards=``scale`` ("group", "batch"
    or "none" = Dr. GRPO); groups are consecutive blocks of ``group_size``. See task-rewards.ts."""
    if len(rewards) == 0:
        _fail("empty", "rewards is empty")
    if not _is_number(group_size) or not float(group_size).is_integer() or group_size < 1:
        _fail("group_size", f"groupSize must be a positive integer, got {group_size!r}")
    group_size = int(group_size)
    if len(rewards) % group_size != 0:
        _fail("group_size", f"groupSize {group_size} does not divide the {len(rewards)} rewards")
    if scale not in ("group", "batch", "none"):
        _fail("bad_option", f'scale must be "group", "batch" or "none", got {scale!r}')
    if not _is_number(eps) or math.isnan(eps):
        _fail("nan", f"eps must be a number, got {eps!r}")
    if not (eps >= 0 and eps < math.inf):
        _fail("out_of_range", f"eps must be finite and >= 0, got {eps}")
    r: list[float] = []
    for i, x in enumerate(rewards):
        if x is None or (_is_number(x) and math.isnan(x)):
            r.append(math.nan)
        elif not _is_number(x):
            _fail("nan", f"rewards[{i}] must be a number or None, got {x!r}")
        elif math.isinf(x):
            _fail("out_of_range", f"rewards[{i}] must be finite, got {x}")
        else:
            r.append(float(x))
    groups = len(r) // group_size
    means, stds = [], []
    for g in range(groups):
        m, s = _nan_mean_std(r, g * group_size, (g + 1) * group_size)
        means.append(m)
        stds.append(s)
    batch_std = _nan_mean_std(r, 0, len(r))[1] if scale == "batch" else math.nan
    out = []
    for i, x in enumerate(r):
        g = i // group_size
        if scale == "none":
            a = x - means[g]
        else:
            a = _div(x - means[g], (batch_std if scale == "batch" else stds[g]) + eps)
        out.append(_nan_to_num(a))
    return out


def _nan_to_num(a: float) -> float:
    """torch.nan_to_num(a, nan=0.0) as TRL applies it: NaN -> 0, +-inf -> +-largest finite."""
    if math.isnan(a):
        return 0.0
    if math.isinf(a):
        return math.copysign(sys.float_info.max, a)
    return a


def _div(x: float, y: float) -> float:
    """IEEE division (x / 0 is +-inf or nan, as in TS) instead of Python's ZeroDivisionError."""
    if y == 0:
        if x == 0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


def _nan_mean_std(r: list[float], start: int, end: int) -> tuple[float, float]:
    """TRL's nanmean and nanstd over r[start:end]: var = (ss / count) * (count / (count - 1))."""
    total = 0.0
    count = 0
    for i in range(start, end):
        if not math.isnan(r[i]):
            total += r[i]
            count += 1
    m = total / count if count > 0 else math.nan
    if count < 2:
        return m, math.nan
    ss = 0.0
    for i in range(start, end):
        if not math.isnan(r[i]):
            d = r[i] - m
            ss += d * d
    return m, math.sqrt((ss / count) * (count / (count - 1)))


