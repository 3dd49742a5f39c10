"""An agent Evaluate runs its episodes batch_size tasks at a time (issue 55 item 5), as the
single-turn Evaluate generates batch_size prompts at a time: each task's samples_per_task episodes
in one run_episodes call, progress after every batch, and a cancel (the caller gone, a deadline)
stops within one batch. The real evaluation on the embedded model; the episode runner is swapped at
its import in workers/evaluate.py for one that counts the episodes it is given (a real model
cannot be made to call tools on cue: tests/test_agent_episodes.py runs the runner itself)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from google.protobuf import json_format

from _agent_host import agent_spec, serve
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.loading import GenerationCancelled
from py_trainer.workers import evaluate

pytestmark = pytest.mark.slow

TASKS = [{"id": f"t{i}", "prompt": f"add {i} and 1"} for i in range(5)]


@pytest.fixture(scope="module")
def address():
    server, _, address = serve({})
    yield address
    server.stop(0)


@pytest.fixture
def plan(tmp_path, tiny_model_home, address, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tiny_model_home))
    req = json_format.ParseDict({"tasks": {"inline": {"rows": TASKS}}, "samples_per_task": 2, "batch_size": 2,
                                 "temperature": 1.0, "seed": 7, "max_new_tokens": 8}, pb.EvaluateRequest())
    req.agent.CopyFrom(agent_spec(address))
    return evaluate.plan_evaluation(req, SimpleNamespace(data_root=tmp_path, get=None))


@pytest.fixture
def calls(monkeypatch):
    """Each run_episodes call: (episode ids, task ids, seed); every episode answers at once."""
    seen = []

    def run_episodes(model, tokenizer, setup, host, episodes, *, seed, **_):
        seen.append(([e.episode_id for e in episodes], [e.task_id for e in episodes], seed))
        for e in episodes:
            e.final_answer, e.scores = "1", {"correct": 1.0, "used_tool": 0.0}
            e.stats.turns, e.stats.ended_by = 1, "answer"
        return episodes

    monkeypatch.setattr(evaluate, "run_episodes", run_episodes)
    return seen


def test_episodes_run_batch_size_tasks_at_a_time(plan, calls, tmp_path):
    progress = []
    result = evaluate.run_evaluation(plan, tmp_path, progress.append)
    # 5 tasks x 2 samples, 2 tasks a batch: 4, 4 and 2 episodes, every sample of a task together
    assert [len(ids) for ids, _, _ in calls] == [4, 4, 2]
    assert [tasks for _, tasks, _ in calls] == [["t0", "t0", "t1", "t1"], ["t2", "t2", "t3", "t3"], ["t4", "t4"]]
    assert [i for ids, _, _ in calls for i in ids] == [f"base-{i}" for i in range(10)]  # numbered across batches
    assert [seed for _, _, seed in calls] == [7, 8, 9]  # a batch's seed: the request's plus its index
    assert [(p.variant, p.tasks_done, p.tasks_total) for p in progress] == [("base", 2, 5), ("base", 4, 5),
                                                                              ("base", 5, 5)]
    [variant] = result.variants
    assert [t.task_id for t in variant.tasks] == [t["id"] for t in TASKS]
    assert all(len(t.samples) == 2 and t.samples[0].completion == "1" for t in variant.tasks)
    assert variant.mean_scores["correct"] == 1.0


def test_a_cancel_stops_within_one_batch(plan, calls, tmp_path):
    def progress(p):  # the caller left while the first batch ran: stream_evaluation's progress raises
        raise GenerationCancelled()

    with pytest.raises(GenerationCancelled):
        evaluate.run_evaluation(plan, tmp_path, progress)
    assert [len(ids) for ids, _, _ in calls] == [4]


def test_through_a_real_sidecar_a_cancelled_agent_evaluate_stops_within_a_batch(tmp_path, tiny_model_home):
    """Item 5 through the sidecar: 40 tasks, 4 a batch; the caller cancels after the first batch's
    progress. The tool host (this process) counts the episodes the sidecar scored: the Evaluate
    stops within a batch of the cancel, far short of the 40 it would run."""
    import time

    import grpc

    from _sidecar import running_sidecar, sidecar_env, stub_for

    server, host, address = serve({})
    tasks = [{"id": f"t{i}", "prompt": f"add {i} and 1"} for i in range(40)]
    req = json_format.ParseDict({"tasks": {"inline": {"rows": tasks}}, "samples_per_task": 1, "batch_size": 4,
                                 "temperature": 1.0, "seed": 7, "max_new_tokens": 8}, pb.EvaluateRequest())
    req.agent.CopyFrom(agent_spec(address))
    try:
        with running_sidecar(tmp_path, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
            ch, stub = stub_for(sc)
            with ch:
                call = stub.Evaluate(req, timeout=300)
                for res in call:
                    if res.HasField("progress") and res.progress.tasks_done > 0:
                        call.cancel()
                        break
                scored_at_cancel = len(host.final_answers)
                time.sleep(5)  # what the sidecar would still score if it went on
                scored = len(host.final_answers)
    finally:
        server.stop(0)
    assert 4 <= scored_at_cancel <= 8, scored_at_cancel
    assert scored <= scored_at_cancel + 4, (scored_at_cancel, scored)
    assert scored < len(tasks)


def test_a_failure_inside_the_agent_episodes_names_agent_not_base_model(plan, tmp_path, monkeypatch):
    """A failure of the episodes themselves (not the model's memory or weights) is the agent's
    field: it named base_model, sending the user to the wrong place (issue 55 item 2's "wrong field")."""
    from py_trainer.core.errors import RequestError

    def run_episodes(*_a, **_k):
        raise RuntimeError("the template met something it cannot render")

    monkeypatch.setattr(evaluate, "run_episodes", run_episodes)
    with pytest.raises(RequestError) as err:
        evaluate.run_evaluation(plan, tmp_path)
    assert err.value.field == "agent", str(err.value)
    assert "the agent episodes of" in err.value.message and "cannot render" in err.value.message, str(err.value)
