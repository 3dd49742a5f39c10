"""An agent task's spec as the sidecar checks and uses it (the proto's AgentSpec; docs/agents.md)."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Collection
from dataclasses import dataclass, field

from jsonschema import Draft7Validator, Draft202012Validator
from jsonschema.protocols import Validator
from jsonschema.exceptions import best_match

from py_trainer.core.config import AGENT, AGENT_PROGRAM, check_knobs, fill_defaults
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

TOOL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
"""A tool's name (the proto's ToolSpec.name): the rule's owner. The TS agent checks a task file with
a copy (define.ts TOOL_NAME) that ts_agent/test/agent-limits-defaults.test.ts holds equal to this."""
HOST = re.compile(r"(?P<host>[A-Za-z0-9.\-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")
ALLOW_TOOL_HOST_FLAG = "--allow-tool-host"
"""`py-trainer serve`'s flag that names a host besides loopback and the caller that tool_host may name."""

SCHEMA_MAX_CHARS = 10_000
"""A tool's parameters schema, as JSON text, in characters: the whole schema goes into every prompt
(the proto's ToolSpec.parameters_json; define.ts SCHEMA_MAX_CHARS, pinned equal by the tests)."""
SCHEMA_MAX_DEPTH = 32
"""Levels of JSON nesting (objects and arrays) of a tool's parameters schema: checked before it is
parsed, so a schema nested 100k deep is a refusal, not a RecursionError."""
SCHEMA_DRAFTS = {"https://json-schema.org/draft/2020-12/schema": Draft202012Validator,
                 "http://json-schema.org/draft-07/schema": Draft7Validator}
"""The JSON Schema drafts a tool's `$schema` may name (2020-12 when it names none); the TS agent's
ajv checks the same two (define.ts)."""


def json_depth(text: str) -> int:
    """The deepest nesting of objects and arrays in JSON text, read without parsing it."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def schema_problem(text: str) -> str | None:
    """Why `text` is not a tool's parameters schema (bounded in size and depth, a JSON object, valid
    under its draft's meta-schema), or None."""
    if len(text) > SCHEMA_MAX_CHARS:
        return f"is {len(text)} characters of JSON, over {SCHEMA_MAX_CHARS} (the schema goes into every prompt)"
    if json_depth(text) > SCHEMA_MAX_DEPTH:
        return f"is nested over {SCHEMA_MAX_DEPTH} levels deep"
    try:
        schema = json.loads(text)
    except json.JSONDecodeError as err:
        return f"is not JSON ({err.msg} at column {err.colno})"
    if not isinstance(schema, dict):
        return "must be a JSON-schema object"
    draft = schema_validator(schema)
    if isinstance(draft, str):
        return draft
    error = best_match(draft(draft.META_SCHEMA).iter_errors(schema))
    if error is not None:
        return f"is not a JSON Schema ({schema_error(error)})"
    return None


def schema_validator(schema: dict) -> type[Validator] | str:
    """The validator class of the schema's draft, or why it has none."""
    name = schema.get("$schema")
    if name is None:
        return Draft202012Validator
    cls = SCHEMA_DRAFTS.get(str(name).rstrip("#"))
    if cls is None:
        return f"$schema {name!r} is not one of {', '.join(SCHEMA_DRAFTS)}"
    return cls


def schema_error(error) -> str:
    """A jsonschema error in one short line: where (a JSON pointer) and what."""
    where = "/" + "/".join(str(p) for p in error.absolute_path)
    message = error.message if len(error.message) <= 200 else error.message[:200] + "..."
    return f"{where}: {message}"


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
        problem = schema_problem(t.parameters_json or "{}")
        if problem:
            raise InvalidArgument(f"{where}.parameters_json", problem)
    if spec.HasField("program"):
        host = HOST.fullmatch(spec.tool_host)["host"]
        if not is_loopback_host(host):
            raise InvalidArgument(f"{field}.tool_host", f"{spec.tool_host!r}: an agent program calls the sidecar's "
                                                        "endpoint on 127.0.0.1, so its TS agent must run on the "
                                                        "sidecar's machine (a loopback tool_host)")
        if spec.tools:
            raise InvalidArgument(f"{field}.tools", "must be empty when program is set: an agent program sends its "
                                                    "tools with each request")
        fill_defaults(spec.program, AGENT_PROGRAM)
        check_knobs(spec.program, AGENT_PROGRAM, f"{field}.program.")
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


def program_timeout_ms(spec: pb.AgentSpec) -> int | None:
    """One rollout's limit when the spec is an agent program's (its default filled), else None."""
    if not spec.HasField("program"):
        return None
    program = pb.AgentProgram()
    program.CopyFrom(spec.program)
    fill_defaults(program, AGENT_PROGRAM)
    return program.timeout_ms


def validation_problem(validator, arguments: dict) -> str | None:
    """Why `arguments` fail `validator` (one short line), or None."""
    try:
        error = best_match(validator.iter_errors(arguments))
    except RecursionError:
        return "nested too deeply"
    return schema_error(error) if error is not None else None


def arguments_problem(schema: dict, arguments: dict) -> str | None:
    """Why a call's arguments do not match a checked tool schema (`schema_problem` passed), or None."""
    return validation_problem(schema_validator(schema)(schema), arguments)


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
    program_timeout_ms: int | None = None
    """set when the episodes are the user's agent program (AgentSpec.program): one rollout's limit"""
    validators: dict = field(default_factory=dict, repr=False)
    """tool name -> its schema's jsonschema validator, made on its first call"""

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
                   tool_host=s.tool_host, system_prompt=s.system_prompt,
                   program_timeout_ms=program_timeout_ms(s))

    @property
    def tool_names(self) -> set[str]:
        return {t["name"] for t in self.tools}

    def arguments_error(self, name: str, arguments: dict) -> str | None:
        """Why a call's arguments do not match its tool's schema (the model's error: the tool does
        not run), or None. Checked here, where calls are parsed and counted, not in the TS host."""
        validator = self.validators.get(name)
        if validator is None:  # the spec was checked (check_agent_spec): its draft is one of SCHEMA_DRAFTS
            schema = next(t["parameters"] for t in self.tools if t["name"] == name)
            validator = self.validators[name] = schema_validator(schema)(schema)
        return validation_problem(validator, arguments)

    def reward(self, scores: dict[str, float]) -> float:
        """The episode's reward: the scorers' weighted sum."""
        return sum(w * scores[n] for n, w in zip(self.scorer_names, self.scorer_weights))


