"""An agent task's spec as the sidecar checks and uses it (the proto's AgentSpec; docs/agents.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from py_trainer.core.config import AGENT, check_knobs, fill_defaults
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A tool's name (the proto's ToolSpec.name): the rule's owner. The TS agent checks a task file with
a copy (define.ts TOOL_NAME) that ts_agent/test/agent-limits-defaults.test.ts holds equal to this."""
HOST = re.compile(r"[A-Za-z0-9.\-]+:[0-9]{1,5}|\[[0-9A-Fa-f:]+\]:[0-9]{1,5}")


def check_agent_spec(spec: pb.AgentSpec, field: str) -> None:
    """Fill the spec's defaults in place, or raise InvalidArgument naming the field."""
    fill_defaults(spec, AGENT)
    check_knobs(spec, AGENT, f"{field}.")
    if not HOST.fullmatch(spec.tool_host):
        raise InvalidArgument(f"{field}.tool_host", f"{spec.tool_host!r} must be host:port (the TS agent serves it)")
    names = set()
    for i, t in enumerate(spec.tools):
        where = f"{field}.tools[{i}]"
        if not TOOL_NAME.fullmatch(t.name):
            raise InvalidArgument(f"{where}.name", f"{t.name!r} must match {TOOL_NAME.pattern}")
        if t.name in names:
            raise InvalidArgument(f"{where}.name", f"{t.name!r} is used twice")
        names.add(t.name)
        try:
            params = json.loads(t.parameters_json or "{}")
        except json.JSONDecodeError as err:
            raise InvalidArgument(f"{where}.parameters_json", f"is not JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(params, dict):
            raise InvalidArgument(f"{where}.parameters_json", "must be a JSON-schema object")
    if not spec.scorers:
        raise InvalidArgument(f"{field}.scorers", "at least one scorer is required (it is the reward)")
    scorer_names = set()
    for i, s in enumerate(spec.scorers):
        where = f"{field}.scorers[{i}]"
        if not s.name:
            raise InvalidArgument(f"{where}.name", "must not be empty")
        if s.name in scorer_names:
            raise InvalidArgument(f"{where}.name", f"{s.name!r} is used twice")
        scorer_names.add(s.name)
        if s.HasField("weight") and not (s.weight == s.weight and abs(s.weight) < 1e6):
            raise InvalidArgument(f"{where}.weight", f"must be a finite number below 1e6 in size, got {s.weight!r}")


@dataclass
class AgentSetup:
    """An AgentSpec with defaults filled, as the runner uses it."""

    tools: list[dict]
    """each tool's function dict: {"name", "description", "parameters"}"""
    scorer_names: list[str]
    scorer_weights: list[float]
    max_turns: int
    max_tool_calls: int
    max_tool_output_chars: int
    tool_timeout_ms: int
    tool_host: str
    system_prompt: str

    @classmethod
    def from_spec(cls, spec: pb.AgentSpec) -> "AgentSetup":
        s = pb.AgentSpec()
        s.CopyFrom(spec)
        fill_defaults(s, AGENT)
        tools = [{"name": t.name, "description": t.description, "parameters": json.loads(t.parameters_json or "{}")}
                 for t in s.tools]
        return cls(tools=tools, scorer_names=[x.name for x in s.scorers],
                   scorer_weights=[x.weight if x.HasField("weight") else 1.0 for x in s.scorers],
                   max_turns=s.max_turns, max_tool_calls=s.max_tool_calls,
                   max_tool_output_chars=s.max_tool_output_chars, tool_timeout_ms=s.tool_timeout_ms,
                   tool_host=s.tool_host, system_prompt=s.system_prompt)

    @property
    def tool_names(self) -> set[str]:
        return {t["name"] for t in self.tools}

    def reward(self, scores: dict[str, float]) -> float:
        """The episode's reward: the scorers' weighted sum."""
        return sum(w * scores[n] for n, w in zip(self.scorer_names, self.scorer_weights))


