"""Agent tasks through a real sidecar: GRPO steps on episodes (TRL's GRPOTrainer with the episode
runner as its rollout_func), Evaluate of base vs the adapter on episodes, the refusals, and the TS
side going away mid-run. The TS agent's tool host is played by tests/_agent_host.py (the real TS
host: ts_agent/test/agent-e2e.test.ts)."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import json_format

from _agent_host import agent_spec, serve
from _sidecar import read_events, running_sidecar, sidecar_env, stub_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow

PAIRS = [(a, b) for a in range(1, 7) for b in range(1, 4)]
EXPECTED = {f"sum-{a}-{b}": str(a + b) for a, b in PAIRS}


def rows():
    return [{"id": f"sum-{a}-{b}", "prompt": f"add {a} and {b}"} for a, b in PAIRS]


def one_tool_spec(address: str) -> dict:
    spec = json_format.MessageToDict(agent_spec(address, max_turns=2, max_tool_calls=2, tool_timeout_ms=2000),
                                     preserving_proto_field_name=True)
    spec["tools"] = spec["tools"][:1]  # `add` alone: the embedded model's 512 positions hold the prompt
    spec["system_prompt"] = ""
    return spec


def train_request(run_id: str, address: str, max_steps: int = 2) -> pb.TrainRequest:
    return json_format.ParseDict({
        "run_id": run_id, "dataset": {"inline": {"rows": rows()}},
        "grpo": {"max_steps": max_steps, "num_generations": 4, "per_device_train_batch_size": 8,
                 "max_completion_length": 48, "save_steps": 1, "seed": 5, "temperature": 1.0},
        "held_out": {"num_prompts": 2, "samples_per_prompt": 2},
        "agent": one_tool_spec(address),
    }, pb.TrainRequest())


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, tiny_model_home):
    tmp = tmp_path_factory.mktemp("agent")
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        yield sc


@pytest.fixture(scope="module")
def host():
    server, state, address = serve(EXPECTED)
    yield state, address
    server.stop(0)


@pytest.fixture(scope="module")
def trained(sidecar, host):
    _, address = host
    ch, stub = stub_for(sidecar)
    with ch:
        events = [r.event for r in stub.Train(train_request("agent-run", address), timeout=900)]
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
    return events


def test_grpo_steps_on_episodes_log_the_episodes_and_keep_transcripts(sidecar, host, trained):
    state, _ = host
    steps = [e.train_step for e in trained if e.HasField("train_step")]
    assert [s.step for s in steps] == [1, 2]
    for s in steps:
        for key in ("reward", "rewards/correct/mean", "rewards/used_tool/mean", "episodes/turns",
                    "tools/call_frequency", "tools/failure_frequency", "episodes/limit_hit"):
            assert key in s.metrics, (key, dict(s.metrics))
        assert 1.0 <= s.metrics["episodes/turns"] <= 2.0
    folder = sidecar.runs_root / "agent-run"
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()
    sample = [json.loads(line) for line in (folder / "episodes" / "step-000001.jsonl").read_text().splitlines()]
    # the system turn holds the tool list; then the task, then the model
    assert sample and [m["role"] for m in sample[0]["messages"][:3]] == ["system", "user", "assistant"]
    assert set(sample[0]["scores"]) == {"correct", "used_tool"}
    held = (folder / "episodes" / "held-out-step-000000.jsonl").read_text().splitlines()
    assert len(held) == 4  # 2 held-out tasks x 2 samples
    result = next(e.result for e in trained if e.HasField("result"))
    assert result.start_reward.num_prompts == 2 and len(result.end_reward.per_prompt) == 2
    # the rows trained on are the dataset minus the held-out tasks
    trained_ids = [json.loads(line)["id"] for line in (folder / "grpo_train.jsonl").read_text().splitlines()]
    assert trained_ids == [r["id"] for r in rows()][:-2]


def test_evaluate_runs_base_and_adapter_episodes(sidecar, host, trained):
    state, address = host
    spec = one_tool_spec(address)
    req = json_format.ParseDict({"tasks": {"inline": {"rows": rows()[:4]}}, "agent": spec, "max_new_tokens": 24,
                                 "adapters": [{"name": "adapter", "run_id": "agent-run"}]}, pb.EvaluateRequest())
    ch, stub = stub_for(sidecar)
    with ch:
        out = [r for r in stub.Evaluate(req, timeout=600)]
    result = out[-1].result
    assert [v.name for v in result.variants] == ["base", "adapter"]
    assert result.fingerprint.prompt_format == "agent" and len(result.fingerprint.chat_template_sha256) == 64
    for v in result.variants:
        assert [t.task_id for t in v.tasks] == [r["id"] for r in rows()[:4]]
        for t in v.tasks:
            [s] = t.samples
            assert set(s.scores) == {"correct", "used_tool"}
            assert s.episode.turns >= 1 and s.episode.ended_by
            messages = json.loads(s.messages_json)
            assert messages[1] == {"role": "user", "content": next(r["prompt"] for r in rows() if r["id"] == t.task_id)}
            # the completion is the final answer the scorers got: one value, "" when a limit ended it
            episode_id = f"{v.name}-{[x.task_id for x in v.tasks].index(t.task_id)}"
            assert s.completion == state.final_answers[episode_id]
            assert s.episode.ended_by == "answer" or s.completion == ""
        assert set(v.mean_scores) == {"correct", "used_tool"}


def test_agent_requests_are_refused_naming_the_field(sidecar, host):
    _, address = host
    cases = {
        "rewards": lambda r: r.rewards.add(name="exact_match"),
        "agent.tool_host": lambda r: setattr(r.agent, "tool_host", "nowhere"),
        "agent.scorers": lambda r: r.agent.ClearField("scorers"),
        "agent.tools[0].parameters_json": lambda r: setattr(r.agent.tools[0], "parameters_json", "{oops"),
        "agent.max_turns": lambda r: setattr(r.agent, "max_turns", 0),
    }
    ch, stub = stub_for(sidecar)
    with ch:
        for field, edit in cases.items():
            req = train_request("refused", address)
            edit(req)
            with pytest.raises(grpc.RpcError) as err:
                list(stub.Train(req, timeout=60))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, field
            assert err.value.details().startswith(field + ":"), (field, err.value.details())


def test_the_ts_side_dying_fails_the_run_naming_it_and_the_run_resumes(sidecar):
    server, _, address = serve(EXPECTED)
    server.stop(0)  # the agent process is gone before the run's first episode
    ch, stub = stub_for(sidecar)
    with ch:
        stub.Train(train_request("orphan", address, max_steps=1), timeout=60).next()
        run = wait_state(stub, "orphan", {pb.RUN_STATE_FAILED, pb.RUN_STATE_SUCCEEDED})
        assert run.state == pb.RUN_STATE_FAILED
        assert "tool host at " + address in run.reason and "is gone" in run.reason, run.reason
    assert any(e.HasField("state_change") and "tool host" in e.state_change.reason
               for e in read_events(sidecar.runs_root / "orphan"))
