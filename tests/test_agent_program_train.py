"""An agent program (AgentSpec.program; docs/agent-programs.md) through a real sidecar: GRPO steps
whose rollouts are a user's own loop written with the OpenAI Python client against the sidecar's
endpoint, Evaluate of the same program, and the faults (a program that throws on some tasks, on
all of them). The TS agent's RunRollout is played here in Python (the real one, in TS:
ts_agent/test/agent-program-e2e.test.ts)."""

from __future__ import annotations

import json

import pytest
from google.protobuf import json_format

from _agent_host import Host
from _sidecar import running_sidecar, sidecar_env, stub_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

PAIRS = [(a, b) for a in range(1, 7) for b in range(1, 4)]
EXPECTED = {f"sum-{a}-{b}": str(a + b) for a, b in PAIRS}
ADD = {"type": "function", "function": {"name": "add", "description": "Add two integers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}


def calculator(base_url: str, api_key: str, question: str) -> str:
    """A user's agent, unchanged but for its base URL: the OpenAI client's own loop."""
    from openai import OpenAI

    client = OpenAI(base_url=base_url, api_key=api_key, max_retries=0)
    messages = [{"role": "user", "content": question}]
    for _ in range(2):
        msg = client.chat.completions.create(model="policy", messages=messages, tools=[ADD], max_tokens=24).choices[0].message
        messages.append(msg.model_dump(exclude_none=True))
        if not msg.tool_calls:
            return msg.content or ""
        for call in msg.tool_calls:
            args = json.loads(call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(args.get("a", 0) + args.get("b", 0))})
    return ""


class ProgramHost(Host):
    """RunRollout runs `calculator`; tasks in `throws` (or every task when it is "all") raise."""

    def __init__(self, expected, throws=(), die_after: int | None = None):
        super().__init__(expected)
        self.throws = throws
        self.die_after = die_after
        """after this many rollouts the agent process is killed: its server stops, the call is refused"""
        self.server = None
        self.rollouts: list[str] = []

    def RunRollout(self, request, context):
        if self.die_after is not None and len(self.rollouts) >= self.die_after:
            import threading

            import grpc

            threading.Thread(target=self.server.stop, args=(0,)).start()
            context.abort(grpc.StatusCode.UNAVAILABLE, "the agent process was killed")
        with self.lock:
            self.rollouts.append(request.base_url)
        if self.throws == "all" or request.task_id in self.throws:
            return pb.RunRolloutResponse(error="the agent program threw: boom")
        final = calculator(request.base_url, request.api_key, f"add {request.task_id.split('-')[1]} and "
                                                                f"{request.task_id.split('-')[2]}")
        return pb.RunRolloutResponse(final_json=json.dumps(final))


def serve_program(throws=(), port: int = 0, die_after: int | None = None):
    from concurrent import futures

    import grpc

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64))
    host = ProgramHost(EXPECTED, throws, die_after)
    host.server = server
    pb_grpc.add_AgentToolHostServiceServicer_to_server(host, server)
    port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    return server, host, f"127.0.0.1:{port}"


def spec(address: str) -> dict:
    return {"tool_host": address, "max_turns": 2, "program": {"timeout_ms": 60000},
            "scorers": [{"name": "correct", "weight": 1.0}, {"name": "used_tool", "weight": 0.5}]}


def train_request(run_id: str, address: str) -> pb.TrainRequest:
    return json_format.ParseDict({
        "run_id": run_id, "dataset": {"inline": {"rows": [{"id": k, "prompt": f"add {k}"} for k in EXPECTED]}},
        "grpo": {"max_steps": 2, "num_generations": 4, "per_device_train_batch_size": 8,
                 "max_completion_length": 64, "save_steps": 2, "seed": 5, "temperature": 1.0},
        "held_out": {"num_prompts": 2, "samples_per_prompt": 2},
        "agent": spec(address),
    }, pb.TrainRequest())


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory, tiny_model_home):
    tmp = tmp_path_factory.mktemp("program")
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        yield sc


def train(sidecar, run_id, throws=()):
    server, host, address = serve_program(throws)
    try:
        ch, stub = stub_for(sidecar)
        with ch:
            events = [r.event for r in stub.Train(train_request(run_id, address), timeout=900)]
    finally:
        server.stop(0)
    return events, host


def test_grpo_trains_on_the_programs_recorded_rollouts(sidecar):
    events, host = train(sidecar, "program-run", throws={k for k in EXPECTED if k.split("-")[1] in "135"})
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
    steps = [e.train_step for e in events if e.HasField("train_step")]
    assert [s.step for s in steps] == [1, 2]
    for s in steps:
        for key in ("reward", "rewards/correct/mean", "episodes/turns", "episodes/failed", "episodes/rows_dropped"):
            assert key in s.metrics, (key, dict(s.metrics))
        assert 0.0 < s.metrics["episodes/turns"] <= 2.0 and s.metrics["episodes/failed"] < 1.0
    assert any(s.metrics["episodes/failed"] > 0 for s in steps)  # counted; the step went on
    # every rollout had its own URL on the sidecar's loopback endpoint
    assert len(set(host.rollouts)) == len(host.rollouts) and all(u.startswith("http://127.0.0.1:") for u in host.rollouts)
    folder = sidecar.runs_root / "program-run"
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()
    sample = [json.loads(l) for l in (folder / "episodes" / "step-000001.jsonl").read_text().splitlines()]
    assert sample and all(r["rows"] >= 1 or r["error"] for r in sample)
    for r in sample:
        if not r["error"]:
            assert r["messages"][0] == {"role": "user", "content": r["messages"][0]["content"]}
            assert r["messages"][-1]["role"] == "assistant"
            assert r["final_answer"] == json.loads(r["final_json"])


def test_a_program_that_always_throws_fails_the_run_naming_it(sidecar):
    events, _ = train(sidecar, "program-throws", throws="all")
    last = events[-1].state_change
    assert last.state == pb.RUN_STATE_FAILED
    assert "agent.program" in last.reason and "the agent program threw: boom" in last.reason


def test_evaluate_runs_the_program_against_base(sidecar):
    server, host, address = serve_program()
    try:
        req = json_format.ParseDict({
            "tasks": {"inline": {"rows": [{"id": k, "prompt": f"add {k}"} for k in list(EXPECTED)[:4]]}},
            "samples_per_task": 1, "temperature": 0.0, "max_new_tokens": 24, "agent": spec(address)},
            pb.EvaluateRequest())
        ch, stub = stub_for(sidecar)
        with ch:
            result = [r.result for r in stub.Evaluate(req, timeout=600) if r.HasField("result")][0]
    finally:
        server.stop(0)
    [base] = result.variants
    assert [t.task_id for t in base.tasks] == list(EXPECTED)[:4]
    for t in base.tasks:
        [s] = t.samples
        assert set(s.scores) == {"correct", "used_tool"} and s.episode.turns >= 1
        assert json.loads(s.messages_json)[-1]["role"] == "assistant"
    assert len(host.rollouts) == 4


def test_the_agent_process_gone_fails_the_run_naming_it_and_the_run_resumes(sidecar):
    # gone during step 2: after the held-out episodes at step 0 (2 x 2) and step 1's rollouts (8)
    _, _, address = serve_program(die_after=12)
    req = train_request("program-orphan", address)
    req.grpo.max_steps, req.grpo.save_steps = 3, 1
    ch, stub = stub_for(sidecar)
    with ch:
        stub.Train(req, timeout=60).next()
        run = wait_state(stub, "program-orphan", {pb.RUN_STATE_FAILED, pb.RUN_STATE_SUCCEEDED})
        assert run.state == pb.RUN_STATE_FAILED
        assert "tool host at " + address in run.reason and "is gone" in run.reason, run.reason
        assert run.current_step == 1, run
        again, back, _ = serve_program(port=int(address.rsplit(":", 1)[1]))  # the agent back, where the run recorded it
        try:
            stub.ResumeRun(pb.ResumeRunRequest(run_id="program-orphan"), timeout=60)
            run = wait_state(stub, "program-orphan", {pb.RUN_STATE_FAILED, pb.RUN_STATE_SUCCEEDED})
        finally:
            again.stop(0)
    assert run.state == pb.RUN_STATE_SUCCEEDED, run.reason
    assert back.rollouts  # the resumed run's rollouts ran through the agent that came back
