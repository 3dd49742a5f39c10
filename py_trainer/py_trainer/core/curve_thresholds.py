"""Thresholds for reading a GRPO training curve (the live RunWarnings), shared with the TS report.

The numbers are written once, in ts_agent/src/agent/report/thresholds.ts (CURVE_THRESHOLDS, with
the reason for each). ts_agent/src/parity/vectors.ts writes them to curve_thresholds.json beside
this file; this module only loads that JSON, and ``make parity`` fails when the JSON is stale or
these constants differ from the TS values. Standard library only: any module may import it.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = [
    "CURVE_THRESHOLDS",
    "CLIPPED_RATIO_WARN",
    "ZERO_STD_WARN",
    "ZERO_STD_WARN_STEPS",
    "ZERO_STD_REL_TOL",
    "KL_SPIKE_FACTOR",
    "KL_SPIKE_MIN",
    "KL_SPIKE_MADS",
    "KL_SPIKE_WINDOW",
    "KL_SPIKE_EVERY",
]

JSON_PATH = Path(__file__).with_name("curve_thresholds.json")

CURVE_THRESHOLDS: dict[str, float | int] = json.loads(JSON_PATH.read_text(encoding="utf-8"))


def _steps(key: str) -> int:
    value = CURVE_THRESHOLDS[key]
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{JSON_PATH.name}: {key} must be an integer number of steps, got {value!r}")
    return value


CLIPPED_RATIO_WARN: float = float(CURVE_THRESHOLDS["clipped_ratio_warn"])
"""completions/clipped_ratio at or above this (fraction): completions are truncated."""
ZERO_STD_WARN: float = float(CURVE_THRESHOLDS["zero_std_warn"])
"""frac_reward_zero_std at or above this (fraction of groups): no reward variance, no advantage."""
ZERO_STD_WARN_STEPS: int = _steps("zero_std_warn_steps")
"""Warn after this many consecutive steps at or above ZERO_STD_WARN."""
ZERO_STD_REL_TOL: float = float(CURVE_THRESHOLDS["zero_std_rel_tol"])
"""reward_std at or below this fraction of max(|reward|, 1): no variance up to float noise."""
KL_SPIKE_FACTOR: float = float(CURVE_THRESHOLDS["kl_spike_factor"])
"""A KL spike: KL above this multiple of the recent local level (median of the last KL_SPIKE_WINDOW steps)..."""
KL_SPIKE_MIN: float = float(CURVE_THRESHOLDS["kl_spike_min"])
"""...the level floored at this (nats/token)..."""
KL_SPIKE_MADS: float = float(CURVE_THRESHOLDS["kl_spike_mads"])
"""...and over the level by more than this many median absolute deviations of the window."""
KL_SPIKE_WINDOW: int = _steps("kl_spike_window")
"""The local level is the median KL of the previous this many steps (none judged before)."""
KL_SPIKE_EVERY: int = _steps("kl_spike_every")
"""At most one kl_spike warning per this many steps."""
