"""Rewards by name: the shared registry in `task_rewards.py`, optional Python-only plugins, request specs.

The registry in task_rewards.py / task-rewards.ts is the contract: the TS harness re-grades with the same names.
A team with a reward that has no TS twin can still train with it by listing plugin modules in
``PY_TRAINER_REWARD_PLUGINS`` ("pkg.module:function", comma-separated) for the sidecar; each
function returns ``{name: factory(params) -> scorer(completion, answers) -> float | None}``.
Plugin rewards cannot be re-graded in TS, so the harness refuses them as graders.
"""

from __future__ import annotations

import importlib
import math
import os
import re
from typing import Any, Callable, Mapping

from google.protobuf import json_format

from py_trainer.core import task_rewards
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

Scorer = task_rewards.Scorer
PLUGINS_ENV = "PY_TRAINER_REWARD_PLUGINS"


def plugin_rewards() -> dict[str, Callable[[Mapping[str, Any]], Scorer]]:
    out: dict[str, Callable[[Mapping[str, Any]], Scorer]] = {}
    for ref in filter(None, (p.strip() for p in os.environ.get(PLUGINS_ENV, "").split(","))):
        module, _, func = ref.partition(":")
        out.update(getattr(importlib.import_module(module), func or "rewards")())
    return out


def build_scorer(spec: Mapping[str, Any]) -> Scorer:
    """The unweighted scorer for one spec {name, weight, params}; raises task_rewards.RewardInputError."""
    plugins = plugin_rewards()
    if spec.get("name") in plugins and spec.get("name") not in task_rewards.reward_names():
        return plugins[spec["name"]](spec.get("params") or {})
    return task_rewards.build_reward(spec).score



# ---------------------------------------------------------------------------------------------
# Reward specs in requests


def reward_spec_dict(spec: pb.RewardSpec) -> dict:
    """A RewardSpec as the registry's plain dict {name, weight, params}."""
    params = json_format.MessageToDict(spec.params) if spec.HasField("params") else {}
    return {"name": spec.name, "weight": spec.weight if spec.HasField("weight") else 1.0, "params": params}


def split_reward_error(err: task_rewards.RewardInputError) -> tuple[str, str]:
    """task_rewards.py's messages start with the spec's sub-field ("params.tag: ...", "name: ...")."""
    m = re.match(r"^((?:name|weight|params)(?:\.[\w]+)?)(?::\s*|\s+)(.*)$", str(err), re.S)
    if m:
        return m.group(1), m.group(2)
    return ("name" if getattr(err, "kind", "") == "unknown_reward" else "params"), str(err)


def checked_scorer(spec: pb.RewardSpec, field: str) -> Scorer:
    """The scorer a RewardSpec names, or InvalidArgument naming ``field.<sub-field>``."""
    try:
        return build_scorer(reward_spec_dict(spec))
    except task_rewards.RewardInputError as err:
        sub, msg = split_reward_error(err)
        raise InvalidArgument(f"{field}.{sub}", msg) from None


def check_reward_specs(specs, field: str, *, check_weight: bool) -> list[dict]:
    """Validate repeated RewardSpec (names unique, weights finite, params known); return the dicts."""
    names: set[str] = set()
    out = []
    for i, spec in enumerate(specs):
        where = f"{field}[{i}]"
        if spec.name in names:
            raise InvalidArgument(f"{where}.name", f"{spec.name!r} listed twice")
        names.add(spec.name)
        if check_weight:
            if not spec.HasField("weight"):
                spec.weight = 1.0
            if not math.isfinite(spec.weight):
                raise InvalidArgument(f"{where}.weight", f"must be a finite number, got {spec.weight}")
        checked_scorer(spec, where)
        out.append(reward_spec_dict(spec))
    return out


# ---------------------------------------------------------------------------------------------
# Guarded scorers: a raising reward fails the run, naming the reward and the sample


class RewardFunctionError(RuntimeError):
    """A reward function raised: the run fails with its name and the offending sample."""


def guarded_scorer(name: str, scorer: Scorer) -> Scorer:
    """`scorer` that turns any exception into a RewardFunctionError naming the reward and sample."""

    def score(completion: str, answers: list[str]):
        try:
            return scorer(completion, answers)
        except Exception as exc:
            raise RewardFunctionError(f"reward {name!r} raised {type(exc).__name__}: {exc} on "
                                      f"completion={completion[:200]!r} answers={list(answers)!r}") from exc

    return score


def composed_guarded_scorer(specs: list[dict]) -> Scorer:
    """The weighted sum of every spec (`task_rewards.compose_rewards`: TRL's nansum), each reward guarded."""
    return task_rewards.compose_rewards([task_rewards.WeightedScorer(score=guarded_scorer(s["name"], build_scorer(s)),
                                                     weight=s["weight"]) for s in specs])
