"""The agent rules the sidecar owns are the contract's: each AgentSpec limit's range in the proto
comment is the AGENT knob table's (the defaults: tests/test_config.py), and the tool-name pattern
is the proto's ToolSpec.name. The TS agent's copies are pinned against the same proto by
ts_agent/test/agent-limits-defaults.test.ts, so a range or a pattern edited in one place fails."""

from __future__ import annotations

import re
from pathlib import Path

from py_trainer.agents.spec import TOOL_NAME
from py_trainer.core.config import AGENT

PROTO = Path(__file__).resolve().parents[1] / "proto" / "grpo" / "trainer" / "v1" / "trainer_service.proto"


def message(text: str, name: str) -> str:
    return text[text.index(f"message {name} {{"):].split("\n}\n", 1)[0]


def proto_ranges(text: str) -> dict[str, str]:
    spec = message(text, "AgentSpec")
    return {m.group(2): m.group(1) for m in
            re.finditer(r"; (in \[\d+, \d+\])\.\n\s*// Default: \d+\.\n\s*optional uint32 (\w+) =", spec)}


def test_agent_spec_ranges_in_the_proto_are_the_knob_tables():
    assert proto_ranges(PROTO.read_text()) == {name: knob.allowed.describe() for name, knob in AGENT.items()}


def test_the_range_pin_can_fail():
    drifted = PROTO.read_text().replace("in [0, 64]", "in [0, 65]", 1)
    assert proto_ranges(drifted) != {name: knob.allowed.describe() for name, knob in AGENT.items()}


def test_the_tool_name_pattern_is_the_protos():
    assert f"// {TOOL_NAME.pattern}, unique within the spec." in message(PROTO.read_text(), "ToolSpec")


def test_the_tool_schema_bounds_are_the_protos():
    from py_trainer.agents.spec import SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH

    tool = message(PROTO.read_text(), "ToolSpec").replace("\n  //", "")
    assert f"at most {SCHEMA_MAX_CHARS} characters and {SCHEMA_MAX_DEPTH} levels of nesting" in tool
