"""Rewards by name: the shared registry in `grpo.py`, plus optional Python-only plugins.

The registry in grpo.py / grpo.ts is the contract: the TS harness re-grades with the same names.
A team with a reward that has no TS twin can still train with it by listing plugin modules in
``PY_TRAINER_REWARD_PLUGINS`` ("pkg.module:function", comma-separated) for the sidecar; each
function returns ``{name: factory(params) -> scorer(completion, answers) -> float | None}``.
Plugin rewards cannot be re-graded in TS, so the harness refuses them as graders.
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Mapping

from py_trainer import grpo

Scorer = grpo.Scorer
PLUGINS_ENV = "PY_TRAINER_REWARD_PLUGINS"


def plugin_rewards() -> dict[str, Callable[[Mapping[str, Any]], Scorer]]:
    out: dict[str, Callable[[Mapping[str, Any]], Scorer]] = {}
    for ref in filter(None, (p.strip() for p in os.environ.get(PLUGINS_ENV, "").split(","))):
        module, _, func = ref.partition(":")
        out.update(getattr(importlib.import_module(module), func or "rewards")())
    return out


def build_scorer(spec: Mapping[str, Any]) -> Scorer:
    """The unweighted scorer for one spec {name, weight, params}; raises grpo.RewardInputError."""
    plugins = plugin_rewards()
    if spec.get("name") in plugins and spec.get("name") not in grpo.reward_names():
        return plugins[spec["name"]](spec.get("params") or {})
    return grpo.build_reward(spec).score

