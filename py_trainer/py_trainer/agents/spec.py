"""An agent task's spec as the sidecar checks and uses it (the proto's AgentSpec; docs/agents.md)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Collection
from dataclasses import dataclass

from py_trainer.core.config import AGENT, check_knobs, fill_defaults
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A tool's name (the proto's ToolSpec.name): the rule's owner. The TS agent checks a task file with
a copy (define.ts TOOL_NAME) that ts_agent/test/agent-limits-defaults.test.ts holds equal to this."""
HOST = re.compile(r"(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")
ALLOW_TOOL_HOST_FLAG = "--allow-tool-host"
"""`py-trainer serve`'s flag that names a host besides loopback and the caller that tool_host may name."""


def host_key(host: str) -> str:
    """A host as the tool-host allow-list compares it: lower case, no brackets, an IP address in its
    canonical form (an IPv4-mapped IPv6 address as its IPv4)."""
    host = host.strip().strip("[]").lower()
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    return str(getattr(ip, "ipv4_mapped", None) or ip)


def is_host(text: str) -> bool:
    """A host name or IPv4 address, or an IPv6 address (bracketed or not): what `--allow-tool-host` takes."""
    if re.fullmatch(r"[A-Za-z0-9.\-]+", text):
        return True
    try:
        return ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text).version == 6
    except ValueError:
        return False


def is_loopback_host(host: str) -> bool:
    """"localhost", 127.0.0.0/8 or ::1 (an IPv4-mapped loopback address included)."""
    key = host_key(host)
    if key == "localhost":
        return True
    try:
        return ipaddress.ip_address(key).is_loopback
    except ValueError:
        return False


def check_tool_host(address: str, field: str, tool_hosts: Collection[str] = ()) -> None:
    """`address` is host:port with a port in 1-65535 and a host the sidecar may call: loopback, or
    one of `tool_hosts` (the serve flag's hosts and the calling peer's own address). The request
    says where the sidecar connects, so anything else would let a caller reach any internal address."""
    m = HOST.fullmatch(address)
    if not m or not is_host(m["host"]):
        raise InvalidArgument(field, f"{address!r} must be host:port (the TS agent serves it)")
    if not 1 <= int(m["port"]) <= 65535:
        raise InvalidArgument(field, f"{address!r}: the port must be in 1-65535")
    host = m["host"]
    if not is_loopback_host(host) and host_key(host) not in {host_key(h) for h in tool_hosts}:
        raise InvalidArgument(field, f"{address!r}: the sidecar calls tools on loopback or on the caller's own "
                                     f"address only; start it with `py-trainer serve {ALLOW_TOOL_HOST_FLAG} "
                                     f"{host.strip('[]')}` to allow this host")


def check_agent_spec(spec: pb.AgentSpec, field: str, tool_hosts: Collection[str] = ()) -> None:
    """Fill the spec's defaults in place, or raise InvalidArgument naming the field. `tool_hosts`:
    the hosts besides loopback that tool_host may name (`check_tool_host`); none = loopback only."""
    fill_defaults(spec, AGENT)
    check_knobs(spec, AGENT, f"{field}.")
    check_tool_host(spec.tool_host, f"{field}.tool_host", tool_hosts)
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


