"""Tool schemas are JSON Schema, bounded, and the model's arguments are checked against them before
a tool runs (issue 55 item 3). A schema nested 100k deep was UNKNOWN (RecursionError), any size went
into every prompt, and `{"type": "objekt", "properties": 5, "required": "product"}` was accepted;
now each is INVALID_ARGUMENT naming `agent.tools[i].parameters_json` (the sidecar's check, through a
real one at the end). A call whose arguments its tool's schema refuses is the model's error: it sees
`error: arguments: ...`, the call counts as malformed, and the tool never runs."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import json_format

from _agent_host import TOOLS, agent_spec, serve
from py_trainer.agents.episodes import AgentSetup, run_episodes, start_episodes
from py_trainer.agents.spec import SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH, check_agent_spec, json_depth
from py_trainer.agents.tool_host import ToolHost
from py_trainer.core.errors import InvalidArgument

FIELD = "agent.tools[0].parameters_json"
NOT_JSON_SCHEMA = {"type": "objekt", "properties": 5, "required": "product"}


def spec_with(parameters_json: str):
    spec = agent_spec("127.0.0.1:50051")
    spec.tools[0].parameters_json = parameters_json
    return spec


def refusal(parameters_json: str) -> str:
    with pytest.raises(InvalidArgument) as err:
        check_agent_spec(spec_with(parameters_json), "agent")
    assert err.value.field == FIELD, err.value.field
    return err.value.message


def deep(levels: int) -> str:
    return '{"type": "object", "properties": {"a": ' * levels + "{}" + "}}" * levels


def test_a_schema_nested_100k_deep_is_refused_naming_the_field():
    assert "nested over 32 levels deep" in refusal(deep(100_000)[:SCHEMA_MAX_CHARS])  # the depth, inside the size
    assert "over 10000" in refusal(deep(100_000))
    assert "nested over" in refusal("[" * 5_000 + "]" * 5_000)


def test_the_bounds_are_the_protos_and_hold_at_their_edge():
    assert (SCHEMA_MAX_CHARS, SCHEMA_MAX_DEPTH) == (10_000, 32)
    check_agent_spec(spec_with(json.dumps({"type": "object", "description": "x" * (SCHEMA_MAX_CHARS - 50)})), "agent")
    assert "10001 characters" in refusal(json.dumps({"description": "x" * (SCHEMA_MAX_CHARS - 18)}))
    at_edge = deep(SCHEMA_MAX_DEPTH // 2 - 1)  # two levels per schema level, the innermost {} one more
    assert json_depth(at_edge) == SCHEMA_MAX_DEPTH - 1
    check_agent_spec(spec_with(at_edge), "agent")
    check_agent_spec(spec_with('{"type": "object", "description": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\\""}'), "agent")


def test_a_schema_that_is_not_json_schema_is_refused_with_where_and_why():
    reason = refusal(json.dumps(NOT_JSON_SCHEMA))
    assert reason.startswith("is not a JSON Schema (/"), reason
    assert "required" in reason or "properties" in reason or "type" in reason
    assert refusal('{"type": "object", "properties": {"a": {"type": "strnig"}}}').startswith(
        "is not a JSON Schema (/properties/a/type: ")
    assert "is not JSON" in refusal("{oops")
    assert "must be a JSON-schema object" in refusal("[]")
    assert "$schema 'http://example.com/mine'" in refusal('{"$schema": "http://example.com/mine"}')


def test_draft_07_and_2020_12_schemas_are_accepted():
    for schema in ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                   {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
                    "definitions": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/n"}}},
                   {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                    "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}, {}):
        check_agent_spec(spec_with(json.dumps(schema)), "agent")


# ----------------------------------------------------------------------------------------------
# A call's arguments against its tool's schema, in the episode runner


class Scripted:
    """Plays fixed turns (a real model cannot be made to call a tool on cue)."""

    def __init__(self, tok, turns: list[str]):
        import torch

        self.tok, self.torch, self.turns, self.training = tok, torch, list(turns), False
        self.param = torch.nn.Parameter(torch.zeros(1))

    def parameters(self):
        return iter([self.param])

    def eval(self):
        pass

    def train(self):
        pass

    def generate(self, input_ids, attention_mask, max_new_tokens, eos_token_id, pad_token_id, **_):
        [ids] = input_ids.tolist()
        reply = self.tok(self.turns.pop(0), add_special_tokens=False)["input_ids"] + [eos_token_id[0]]
        return self.torch.tensor([ids + reply])


@pytest.fixture(scope="module")
def tokenizer():
    from py_trainer.models.tiny_model import train_tokenizer

    return train_tokenizer(["add 2 and 3", '<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>'] * 20)


@pytest.fixture(scope="module")
def host():
    server, state, address = serve({"t": "5"})
    yield state, address
    server.stop(0)


def test_arguments_the_schema_refuses_are_the_models_error_and_the_tool_never_runs(tokenizer, host):
    state, address = host
    setup = AgentSetup.from_spec(agent_spec(address, max_turns=4))
    turns = ['<tool_call>{"name": "add", "arguments": {"a": 2}}</tool_call>',
             '<tool_call>{"name": "add", "arguments": {"a": "2", "b": 3}}</tool_call>',
             '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call>', "5"]
    [e] = start_episodes(tokenizer, setup, [("t", "add 2 and 3")], ["args-ep"])
    run_episodes(Scripted(tokenizer, turns), tokenizer, setup, ToolHost(address, 2000), [e], temperature=0,
                 top_p=1.0, max_new_tokens=64, max_total_tokens=None, seed=0)
    tool_msgs = [m for m in e.messages if m["role"] == "tool"]
    assert [m["content"] for m in tool_msgs] == ["error: arguments: /: 'b' is a required property",
                                                 "error: arguments: /a: '2' is not of type 'integer'", "5"]
    assert (e.stats.malformed_calls, e.stats.tool_calls, e.stats.tool_errors, e.stats.ended_by) == (2, 1, 0, "answer")
    assert [c for c in state.calls if c[0] == "args-ep"] == [("args-ep", "add", {"a": 2, "b": 3})]  # ran once
    assert "tool_call_id" not in tool_msgs[0] and tool_msgs[2]["tool_call_id"] == "call_3_0"
    assert [m.get("tool_calls") is None for m in e.messages if m["role"] == "assistant"] == [True, True, False, True]


# ----------------------------------------------------------------------------------------------
# Through a real sidecar


@pytest.mark.slow
def test_a_real_sidecar_refuses_each_bad_schema_naming_the_field(tmp_path, tiny_model_home):
    from _sidecar import running_sidecar, sidecar_env, stub_for
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    spec = json_format.MessageToDict(agent_spec("127.0.0.1:50051"), preserving_proto_field_name=True)
    spec["tools"] = spec["tools"][:1]
    bad = {"deep": deep(100_000)[:SCHEMA_MAX_CHARS], "big": json.dumps({"description": "x" * SCHEMA_MAX_CHARS}),
           "not JSON Schema": json.dumps(NOT_JSON_SCHEMA)}
    with running_sidecar(tmp_path, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        ch, stub = stub_for(sc)
        with ch:
            for what, schema in bad.items():
                spec["tools"][0]["parameters_json"] = schema
                req = json_format.ParseDict({"run_id": "schema", "dataset": {"inline": {"rows": [
                    {"id": "t", "prompt": "add 2 and 3"}]}}, "grpo": {"max_steps": 1}, "agent": spec}, pb.TrainRequest())
                with pytest.raises(grpc.RpcError) as err:
                    list(stub.Train(req, timeout=60))
                assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (what, err.value.details())
                assert err.value.details().startswith(FIELD + ": "), (what, err.value.details())
    assert TOOLS[0]["name"] == "add"
