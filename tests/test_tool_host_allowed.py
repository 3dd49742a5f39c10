"""AgentSpec.tool_host is where the sidecar connects (issue 55 item 4): loopback or the calling
peer's own address by default, any other host only when `py-trainer serve --allow-tool-host HOST`
names it, ports in 1-65535. A refusal is INVALID_ARGUMENT naming agent.tool_host, the reason and
the flag, on Train and Evaluate alike. Unit checks first, then through real sidecars."""

from __future__ import annotations

from types import SimpleNamespace

import grpc
import pytest
from google.protobuf import json_format

from _agent_host import agent_spec
from py_trainer.agents.spec import check_agent_spec
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.workers.evaluate import plan_evaluation

FAR = "10.9.8.7"


def refusal(address: str, tool_hosts=()) -> str:
    with pytest.raises(InvalidArgument) as ei:
        check_agent_spec(agent_spec(address), "agent", tool_hosts)
    assert ei.value.field == "agent.tool_host"
    return ei.value.message


@pytest.mark.parametrize("address", ["127.0.0.1:50152", "127.3.4.5:1", "localhost:65535", "LOCALHOST:8080",
                                     "[::1]:7000"])
def test_loopback_is_allowed_by_default(address):
    check_agent_spec(agent_spec(address), "agent")


@pytest.mark.parametrize("address", [f"{FAR}:5000", "169.254.169.254:80", "internal.example:443", "[fd00::1]:5000",
                                     "0.0.0.0:5000", "[::ffff:10.9.8.7]:5000"])
def test_any_other_host_is_refused_naming_the_flag(address):
    message = refusal(address)
    assert "loopback" in message and "--allow-tool-host" in message, message


def test_a_host_the_flag_or_the_peer_names_is_allowed():
    check_agent_spec(agent_spec(f"{FAR}:5000"), "agent", [FAR])
    check_agent_spec(agent_spec("[::ffff:10.9.8.7]:5000"), "agent", [FAR])  # the same address, IPv4-mapped
    check_agent_spec(agent_spec("Tools.Example:5000"), "agent", ["tools.example"])
    assert "--allow-tool-host" in refusal("tools.example.evil:5000", ["tools.example"])


@pytest.mark.parametrize("address", ["127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1:65536", "[::1]:00000"])
def test_ports_are_in_1_to_65535(address):
    assert "1-65535" in refusal(address)


def test_the_peer_address_comes_from_the_grpc_context():
    from py_trainer.server.servicer import peer_host

    assert peer_host("ipv4:10.9.8.7:51234") == FAR
    assert peer_host("ipv6:[fd00::1]:51234") == "fd00::1"
    assert peer_host("ipv6:%5B%3A%3A1%5D:51234") == "::1"  # grpc may percent-encode the brackets
    assert peer_host("unix:/tmp/sock") == ""
    assert peer_host("") == ""


def test_evaluate_checks_the_tool_host_too(tmp_path):
    req = json_format.ParseDict({"tasks": {"inline": {"rows": [{"id": "a", "prompt": "p"}]}}},
                                pb.EvaluateRequest())
    req.agent.CopyFrom(agent_spec(f"{FAR}:5000"))
    with pytest.raises(InvalidArgument) as ei:
        plan_evaluation(req, SimpleNamespace(data_root=tmp_path, get=None))
    assert ei.value.field == "agent.tool_host" and "--allow-tool-host" in ei.value.message


# ---------------------------------------------------------------------------------------------
# Through real sidecars


def train_request(address: str) -> pb.TrainRequest:
    req = json_format.ParseDict({"run_id": "far", "dataset": {"inline": {"rows": [{"id": "a", "prompt": "p"}]}},
                                 "held_out": {"num_prompts": 5}}, pb.TrainRequest())
    req.agent.CopyFrom(agent_spec(address))
    return req


def evaluate_request(address: str) -> pb.EvaluateRequest:
    req = json_format.ParseDict({"tasks": {"inline": {"rows": [{"id": "a", "prompt": "p"}]}},
                                 "adapters": [{"name": "a", "run_id": "no-such-run"}]}, pb.EvaluateRequest())
    req.agent.CopyFrom(agent_spec(address))
    return req


def refused(stub, address: str) -> dict[str, str]:
    """RPC -> the refusal's details, for a Train and an Evaluate naming `address`."""
    out = {}
    for rpc, req in (("Train", train_request(address)), ("Evaluate", evaluate_request(address))):
        with pytest.raises(grpc.RpcError) as err:
            list(getattr(stub, rpc)(req, timeout=60))
        assert err.value.code() in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND), err.value.details()
        out[rpc] = err.value.details()
    return out


@pytest.mark.slow
def test_a_sidecar_connects_only_where_it_was_told_it_may(tmp_path, tiny_model_home):
    from _sidecar import running_sidecar, sidecar_env, stub_for

    env = sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))
    with running_sidecar(tmp_path / "default", env=env) as sc:
        ch, stub = stub_for(sc)
        with ch:
            for rpc, details in refused(stub, f"{FAR}:5000").items():
                assert details.startswith("agent.tool_host: ") and "--allow-tool-host" in details, (rpc, details)
            for rpc, details in refused(stub, "127.0.0.1:99999").items():
                assert details.startswith("agent.tool_host: ") and "1-65535" in details, (rpc, details)
            # loopback passes the check: the refusal is a later field's
            later = refused(stub, "127.0.0.1:5000")
            assert later["Train"].startswith("held_out.num_prompts: "), later
            assert later["Evaluate"].startswith("adapters[0]"), later
    with running_sidecar(tmp_path / "allowed", "--allow-tool-host", FAR, env=env) as sc:
        ch, stub = stub_for(sc)
        with ch:
            later = refused(stub, f"{FAR}:5000")
            assert later["Train"].startswith("held_out.num_prompts: "), later
            assert later["Evaluate"].startswith("adapters[0]"), later
            other = refused(stub, "10.9.8.8:5000")
            assert all(d.startswith("agent.tool_host: ") for d in other.values()), other


def test_the_flag_takes_a_host_alone(capsys):
    from py_trainer.server.cli import build_parser, main

    assert main(["serve", "--allow-tool-host", "10.9.8.7:5000"]) == 2
    assert "--allow-tool-host: '10.9.8.7:5000' is not a host name or IP address" in capsys.readouterr().err
    args = build_parser().parse_args(["serve", "--allow-tool-host", FAR, "--allow-tool-host", "fd00::1"])
    assert args.allow_tool_host == [FAR, "fd00::1"]
    assert "must be host:port" in refusal("[10.9.8.7:50]:5000")
