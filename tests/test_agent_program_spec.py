"""AgentSpec.program's checks (docs/agent-programs.md), refused up front naming the field: a program
sends its tools with each request (AgentSpec.tools must be empty), its timeout is in range, and its
TS agent must reach the endpoint on the sidecar's loopback (a far tool host cannot)."""

from __future__ import annotations

import pytest

from py_trainer.agents.spec import AgentSetup, check_agent_spec
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb


def program_spec(tool_host: str = "127.0.0.1:5000", **program) -> pb.AgentSpec:
    spec = pb.AgentSpec(tool_host=tool_host, program=pb.AgentProgram(**program))
    spec.scorers.add(name="ok")
    return spec


def refusal(spec: pb.AgentSpec, tool_hosts=()) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as err:
        check_agent_spec(spec, "agent", tool_hosts)
    return err.value


def test_a_program_spec_is_accepted_with_its_default_timeout():
    spec = program_spec()
    check_agent_spec(spec, "agent")
    assert AgentSetup.from_spec(spec).program_timeout_ms == 120_000
    assert AgentSetup.from_spec(program_spec(timeout_ms=5)).program_timeout_ms == 5
    assert AgentSetup.from_spec(pb.AgentSpec(tool_host="127.0.0.1:5000")).program_timeout_ms is None


def test_tools_beside_a_program_are_refused():
    spec = program_spec()
    spec.tools.add(name="t", parameters_json="{}")
    assert refusal(spec).field == "agent.tools"


@pytest.mark.parametrize("ms", [0, 3_600_001])
def test_the_timeout_is_in_range(ms):
    err = refusal(program_spec(timeout_ms=ms))
    assert err.field == "agent.program.timeout_ms" and "[1, 3600000]" in err.message


def test_a_far_tool_host_is_refused_for_a_program_even_when_allowed():
    err = refusal(program_spec("10.1.2.3:5000"), tool_hosts=["10.1.2.3"])
    assert err.field == "agent.tool_host" and "127.0.0.1" in err.message
