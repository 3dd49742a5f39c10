"""Evaluate and SampleGroups run in the inference worker process (issue 22, item 9): an
Evaluate that runs out of memory fails alone with RESOURCE_EXHAUSTED while a training run goes on
to SUCCEEDED and the sidecar stays SERVING; a worker the kernel kills (SIGKILL) is the same; a
cancelled Evaluate stops the worker's generation and the warm worker serves the next call; crowds
of Evaluate / SampleGroups calls get what a solo call gets.

All of it on one sidecar for the module (none of these needs a fresh one: each test takes the
worker it finds and names the pid it checks).

The memory limit is real: PY_TRAINER_INFERENCE_MEMORY_MB (inference_worker.py's test hook) sets
RLIMIT_AS in the worker, and the Evaluate loads a 53M-parameter model (212 MB of fp32 weights)
that does not fit in it."""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from _builders import TASKS, small_request
from _sidecar import cpu_seconds, descendants, running_sidecar, sidecar_env, stub_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow  # sidecars, training, a worker process

MEMORY_MB = 300


def eval_request(**kw) -> pb.EvaluateRequest:
    body = {"tasks": {"jsonl_path": "tasks.jsonl", "split": "test", "limit": 4}, "max_new_tokens": 12, "batch_size": 4}
    body.update(kw)
    return json_format.ParseDict(body, pb.EvaluateRequest())


def worker_pid(sidecar_pid: int) -> int | None:
    """The sidecar's inference worker process (forked by the sidecar's fork server, or its child), if it has one."""
    for pid in descendants(sidecar_pid):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"py_trainer.workers.inference_worker" in cmd and b"py_trainer.runs.forkserver" not in cmd:
            return pid
    return None


def serving(sc) -> int:
    with grpc.insecure_channel(sc.address) as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status


def big_model(tiny_model_dir: Path, dest: Path) -> None:
    """A Qwen2 model of 53M parameters on the tiny model's tokenizer (212 MB of fp32 weights)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.from_pretrained(tiny_model_dir)
    cfg.update({"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 4, "num_attention_heads": 8,
                "num_key_value_heads": 8, "head_dim": 128, "layer_types": ["full_attention"] * 4})
    AutoModelForCausalLM.from_config(cfg).save_pretrained(dest)
    for f in tiny_model_dir.iterdir():
        if f.name.startswith("tokenizer") or f.name == "generation_config.json":
            shutil.copy(f, dest / f.name)


def tree_cpu_seconds(pid: int) -> float:
    """cpu_seconds of a process and every live descendant (the sidecar's fork server, its inference
    worker, its training workers): wherever generation runs, it is counted."""
    total = 0.0
    for p in (pid, *descendants(pid)):
        try:
            total += cpu_seconds(p)
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited meanwhile
    return total


@pytest.fixture(scope="module")
def sc(tmp_path_factory, tiny_model_home, tiny_model_dir):
    """The module's sidecar: the AML task file and a model too big for the worker's memory limit
    (MEMORY_MB, which the tiny model fits) under its data root."""
    tmp = tmp_path_factory.mktemp("inference-worker")
    data = tmp / "data"
    data.mkdir()
    (data / "tasks.jsonl").write_bytes(TASKS.read_bytes())
    big_model(tiny_model_dir, data / "big-model")
    env = sidecar_env(PY_TRAINER_HOME=str(tiny_model_home), PY_TRAINER_INFERENCE_MEMORY_MB=str(MEMORY_MB))
    with running_sidecar(tmp, env=env) as sidecar:
        yield sidecar


def test_out_of_memory_evaluate_fails_alone(sc):
    ch, stub = stub_for(sc)
    assert list(stub.Evaluate(eval_request(), timeout=300))[-1].HasField("result")  # fits: the worker is warm
    train = stub.Train(small_request("alongside", max_steps=4), timeout=600)
    assert next(train).event.state_change.state == pb.RUN_STATE_QUEUED
    wait_state(stub, "alongside", {pb.RUN_STATE_RUNNING})
    with pytest.raises(grpc.RpcError) as ei:
        list(stub.Evaluate(eval_request(base_model="big-model"), timeout=300))
    print(f"{ei.value.code().name}: {ei.value.details()}")
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ei.value.details()
    assert "out of memory" in ei.value.details() and "'big-model'" in ei.value.details()
    assert serving(sc) == health_pb2.HealthCheckResponse.SERVING
    assert stub.GetRun(pb.GetRunRequest(run_id="alongside")).run.state == pb.RUN_STATE_RUNNING
    run = wait_state(stub, "alongside", {pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED})
    assert run.state == pb.RUN_STATE_SUCCEEDED, run.reason
    # the next Evaluate gets a fresh worker and a result
    assert list(stub.Evaluate(eval_request(), timeout=300))[-1].HasField("result")
    assert sc.proc.poll() is None
    ch.close()


def long_evaluate(stub, sc):
    """An Evaluate long enough to interrupt (one task per batch, 4 samples of 48 tokens), its first
    progress seen, and the pid of the inference worker generating it."""
    call = stub.Evaluate(eval_request(tasks={"jsonl_path": "tasks.jsonl"}, batch_size=1, samples_per_task=4,
                                      temperature=1.0, max_new_tokens=48), timeout=600)
    assert next(call).HasField("progress")
    return call, worker_pid(sc.proc.pid)


def test_worker_killed_by_sigkill_is_resource_exhausted_and_replaced(sc):
    ch, stub = stub_for(sc)
    call, pid = long_evaluate(stub, sc)
    assert pid is not None
    os.kill(pid, signal.SIGKILL)  # what the kernel's OOM killer does
    with pytest.raises(grpc.RpcError) as ei:
        list(call)
    assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, ei.value.details()
    assert "killed (SIGKILL)" in ei.value.details() and "out of memory" in ei.value.details()
    assert serving(sc) == health_pb2.HealthCheckResponse.SERVING
    groups = list(stub.SampleGroups(pb.SampleGroupsRequest(prompts=["Case: a b c"], k=2, max_new_tokens=8),
                                    timeout=300))
    assert len(groups) == 1 and len(groups[0].group.responses) == 2
    assert worker_pid(sc.proc.pid) not in (None, pid)
    ch.close()


def test_cancelled_evaluate_stops_the_worker_and_it_stays_warm(sc):
    ch, stub = stub_for(sc)
    call, pid = long_evaluate(stub, sc)
    busy0 = tree_cpu_seconds(sc.proc.pid)
    time.sleep(1)
    busy = tree_cpu_seconds(sc.proc.pid) - busy0
    assert busy > 0.3, f"the measure does not see the generation ({busy:.2f} CPU-s in 1 s)"  # so it can fail
    call.cancel()
    time.sleep(1.5)  # the batch in flight may finish
    # the worker's own CPU, and the sidecar's whole process tree (wherever generation runs)
    cpu0, tree0 = cpu_seconds(pid), tree_cpu_seconds(sc.proc.pid)
    time.sleep(4)
    spent, tree_spent = cpu_seconds(pid) - cpu0, tree_cpu_seconds(sc.proc.pid) - tree0
    print(f"CPU 1.5-5.5 s after the cancel: worker {spent:.2f} s, process tree {tree_spent:.2f} s")
    assert spent < 0.5, f"the worker still generates for nobody ({spent:.2f} CPU-s in 4 s)"
    assert tree_spent < 0.5, f"still generating for nobody ({tree_spent:.2f} CPU-s in 4 s)"
    t0 = time.monotonic()
    assert list(stub.Evaluate(eval_request(), timeout=300))[-1].HasField("result")
    assert worker_pid(sc.proc.pid) == pid, "the warm worker serves the next call"
    print(f"next Evaluate on the warm worker: {time.monotonic() - t0:.2f} s")
    ch.close()


# ---------------------------------------------------------------------------------------------
# Evaluate and SampleGroups under concurrency


def sampled_eval_request() -> pb.EvaluateRequest:
    return eval_request(tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 6}, samples_per_task=2,
                        temperature=1.0, seed=5, max_new_tokens=16, batch_size=4)


def sample_request() -> pb.SampleGroupsRequest:
    prompts = [json.loads(l)["prompt"] for l in TASKS.read_text().splitlines()[:3]]
    return pb.SampleGroupsRequest(prompts=prompts, k=2, max_new_tokens=12, seed=1)


def completions(result: pb.EvaluateResult) -> list[str]:
    return [s.completion for v in result.variants for t in v.tasks for s in t.samples]


def test_concurrent_evaluate_and_sample_groups_match_a_solo_run(sc):
    ch, stub = stub_for(sc)
    solo_eval = completions(list(stub.Evaluate(sampled_eval_request(), timeout=300))[-1].result)
    solo_groups = [[r.text for r in x.group.responses] for x in stub.SampleGroups(sample_request(), timeout=300)]
    for round_ in range(2):
        outcomes: list = [None] * 6

        def call(i):
            try:
                if i < 4:
                    outcomes[i] = completions(list(stub.Evaluate(sampled_eval_request(), timeout=300))[-1].result)
                else:
                    outcomes[i] = [[r.text for r in x.group.responses]
                                   for x in stub.SampleGroups(sample_request(), timeout=300)]
            except grpc.RpcError as err:
                outcomes[i] = f"{err.code().name}: {err.details()}"

        threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for i, got in enumerate(outcomes):
            assert got == (solo_eval if i < 4 else solo_groups), f"round {round_} call {i}: {str(got)[:300]}"
    ch.close()


def test_a_cancelled_call_stops_the_model_build_it_started(sc, tiny_model_home):
    """Issue 30, item 2: an Evaluate on an embedded base not built yet builds it in the inference
    worker; a build has no batch to stop at, so a caller that left (a cancel, or its deadline) left
    the worker building for nobody, for as long as the build takes (minutes for a large task file).
    Now the worker drops the half-built folder and exits at the cancel; the next call gets a fresh one."""
    ch, stub = stub_for(sc)
    assert list(stub.Evaluate(eval_request(), timeout=300))[-1].HasField("result")  # a warm worker takes the job at once
    rows = [json.loads(l) for l in TASKS.read_text().splitlines()]
    (sc.data_root / "build-me.jsonl").write_text("".join(json.dumps(dict(r, id=f"b{r['id']}")) + "\n" for r in rows))
    models = tiny_model_home / "models"
    built = lambda: [p for p in models.glob("tiny-qwen2-build-me-*") if p.is_dir()]  # noqa: E731
    building = lambda: [p for p in models.glob(".tiny-qwen2-build-me-*.tmp-*") if p.is_dir()]  # noqa: E731
    for p in built() + building():  # left by a run of this test without the fix
        shutil.rmtree(p)
    call = stub.Evaluate(eval_request(base_model="embedded:build-me.jsonl"), timeout=600)
    deadline = time.monotonic() + 120
    while not building() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert building(), "the build never started"
    pid = worker_pid(sc.proc.pid)
    call.cancel()
    time.sleep(1.5)
    tree0 = tree_cpu_seconds(sc.proc.pid)
    time.sleep(4)
    tree_spent = tree_cpu_seconds(sc.proc.pid) - tree0
    print(f"CPU 1.5-5.5 s after the cancel: process tree {tree_spent:.2f} s; worker {pid} -> {worker_pid(sc.proc.pid)}")
    assert tree_spent < 0.5, f"still building for nobody ({tree_spent:.2f} CPU-s in 4 s)"
    assert building() == [] and built() == [], "a half-built model was left"
    assert serving(sc) == health_pb2.HealthCheckResponse.SERVING
    assert list(stub.Evaluate(eval_request(), timeout=300))[-1].HasField("result")  # a fresh worker serves the next
    assert worker_pid(sc.proc.pid) not in (None, pid)
    ch.close()
