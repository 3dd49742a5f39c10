"""A run's state is a function of its events (issue 22): what a resume, a cancel, a restart, a
damaged checkpoint, an edited request.json, a changed artifact and a delete leave behind.

Run folders are built by hand where nothing has to train (a legacy checkpoint marker stands in for
a checkpoint that was never trained); the resumes that must really train start from one tiny run
trained once for the module (2 steps, a checkpoint at each). Sidecars run on 127.0.0.1; the
queue scenarios use an in-process registry whose "worker" is a process that blocks, so a run can
be held QUEUED behind it without training anything.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from _builders import event_line, make_run, small_request
from _sidecar import TERMINAL, launch, read_events, running_sidecar, sidecar_env, stub_for, wait_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.run_request import digest_file

pytestmark = pytest.mark.slow  # real sidecars and worker processes


@pytest.fixture
def env(tiny_model_home):
    return sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))


def legacy_checkpoint(folder: Path, step: int) -> None:
    """checkpoints/checkpoint-<step> as a sidecar before issue 22 left it: the marker says only the step."""
    ck = folder / "checkpoints" / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    header = json.dumps({"w": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}}).encode()
    (ck / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"x" * 100)
    (ck / "checkpoint-complete.json").write_text(json.dumps({"step": step, "time": 1.0}) + "\n")


def with_result(runs: Path, run_id: str, final: int) -> tuple[Path, pb.RunResult]:
    """A run that trained 2 steps, listed 3 artifacts and ended in `final`, with a checkpoint."""
    folder = make_run(runs, run_id, states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, final))
    (folder / "adapter").mkdir()
    arts = []
    for name, data in (("adapter/adapter_model.safetensors", b"w" * 3000), ("adapter/adapter_config.json", b"{}"),
                       ("summary.json", b'{"state": "CANCELLED"}')):
        (folder / name).write_bytes(data)
        arts.append(pb.Artifact(path=name, size_bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    result = pb.RunResult(steps_completed=2, artifacts=arts)
    lines = (folder / "events.jsonl").read_text().splitlines(keepends=True)
    last = json_format.Parse(lines[-1], pb.RunEvent())
    # max_steps as small_request's (3): a run's events agree with its request.json (a request that does
    # not, and has no stored digest, is refused by ResumeRun: run_request.request_vs_events).
    lines[-1:] = [event_line(3, run_id, train_step=pb.TrainStep(step=2, max_steps=3)),
                  event_line(4, run_id, result=result), event_line(5, run_id, state_change=last.state_change)]
    (folder / "events.jsonl").write_text("".join(lines))
    legacy_checkpoint(folder, 2)
    return folder, result


BLOCKING_WORKER = "import time\ntime.sleep(600)\n"  # RUNNING until it is killed: holds the device


async def until(pred, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.05)


def die(reg) -> None:
    """What kill -9 of the sidecar leaves: no close(), no event; the worker dies with it; the lock drops."""
    for task in (*reg.scheduler.workers.values(), reg.scheduler.task):  # nothing of ours records the worker's death
        if task is not None:
            task.cancel()
    for rec in reg.runs.values():
        if rec.process and rec.process.returncode is None:
            rec.process.kill()
    reg.lock.release()


# ---------------------------------------------------------------------------------------------
# 1 and 6: a cancel while queued, a restart with runs queued


def test_cancel_of_a_queued_resume_keeps_its_result_and_a_restart_requeues_what_never_ran(tmp_path, env):
    from py_trainer.runs.registry import RunRegistry
    from py_trainer.server.validate import validate_train_request

    runs, data = tmp_path / "runs", tmp_path / "data"
    data.mkdir()
    folder, result = with_result(runs, "had-result", pb.RUN_STATE_CANCELLED)

    async def first_sidecar():
        reg = RunRegistry(runs, data, worker_argv=[sys.executable, "-c", BLOCKING_WORKER])
        await reg.start()
        blocker = reg.create(small_request("blocker", max_steps=500))
        await until(lambda: blocker.state == pb.RUN_STATE_RUNNING, 30)
        assert reg.runs["had-result"].result == result
        resumed = await reg.resume("had-result")
        assert resumed.state == pb.RUN_STATE_QUEUED and reg.queue_position("had-result") == 1
        reg.create(validate_train_request(small_request("waiting", max_steps=1), data))  # trained after the restart
        cancelled = await reg.cancel("had-result")
        assert cancelled.state == pb.RUN_STATE_CANCELLED
        assert cancelled.to_proto().result == result, "a cancel while queued restores the result it had"
        assert reg.runs["waiting"].state == pb.RUN_STATE_QUEUED
        die(reg)

    asyncio.run(first_sidecar())
    # The next sidecar replays events.jsonl: the cancelled resume still has its result, the run that
    # was only queued is queued again and trains; the run that was running failed with the sidecar.
    with running_sidecar(tmp_path, env=env) as sc:
        ch, stub = stub_for(sc)
        run = stub.GetRun(pb.GetRunRequest(run_id="had-result"), timeout=10).run
        assert run.state == pb.RUN_STATE_CANCELLED and run.result == result, run
        assert len(run.result.artifacts) == 3
        blocker = stub.GetRun(pb.GetRunRequest(run_id="blocker"), timeout=10).run
        assert blocker.state == pb.RUN_STATE_FAILED and "sidecar restarted" in blocker.reason
        waiting = stub.GetRun(pb.GetRunRequest(run_id="waiting"), timeout=10).run
        assert waiting.state in (pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING), waiting
        done = wait_state(stub, "waiting", TERMINAL, timeout=300)
        assert done.state == pb.RUN_STATE_SUCCEEDED, done.reason
        assert done.result.steps_completed == 1
        ch.close()
        assert sc.stop() == 0
    states = [e.state_change.state for e in read_events(runs / "waiting") if e.HasField("state_change")]
    assert states == [pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_SUCCEEDED]


def test_sigterm_leaves_queued_runs_queued(tmp_path):
    from py_trainer.runs.registry import RunRegistry

    runs, data = tmp_path / "runs", tmp_path / "data"
    data.mkdir()

    async def main():
        reg = RunRegistry(runs, data, worker_argv=[sys.executable, "-c", BLOCKING_WORKER])
        await reg.start()
        blocker = reg.create(small_request("blocker", max_steps=500))
        await until(lambda: blocker.state == pb.RUN_STATE_RUNNING, 30)
        reg.create(small_request("waiting"))
        await reg.close(grace=1)
        assert reg.runs["waiting"].state == pb.RUN_STATE_QUEUED
        again = RunRegistry(runs, data, worker_argv=[sys.executable, "-c", BLOCKING_WORKER])
        await again.start()
        await until(lambda: again.runs["waiting"].state == pb.RUN_STATE_RUNNING, 30)
        assert again.runs["blocker"].state == pb.RUN_STATE_CANCELLED  # stopped by the SIGTERM
        await again.close(grace=1)

    asyncio.run(main())


# ---------------------------------------------------------------------------------------------
# 2 and 3: resumes that train (from one tiny run trained once)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, tiny_model_home) -> Path:
    """A run trained 2 steps with a checkpoint at each step (checkpoint-2 is at max_steps)."""
    tmp = tmp_path_factory.mktemp("trained")
    with running_sidecar(tmp, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        ch, stub = stub_for(sc)
        events = [r.event for r in stub.Train(small_request("tpl", max_steps=2, save_steps=1), timeout=600)]
        assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
        ch.close()
        sc.stop()
    folder = tmp / "runs" / "tpl"
    assert (folder / "checkpoints" / "checkpoint-1").is_dir() and (folder / "checkpoints" / "checkpoint-2").is_dir()
    return folder


def died_after_checkpoint(template: Path, runs: Path, step: int) -> Path:
    """A copy of `template` as if its worker died right after checkpoint-<step> (in the adapter save
    or the end measurement): events cut after that checkpoint, then FAILED; no adapter, no summary."""
    folder = runs / template.name
    shutil.copytree(template, folder)
    events = read_events(folder)
    cut = next(i for i, e in enumerate(events) if e.HasField("checkpoint") and e.checkpoint.step == step)
    kept = events[:cut + 1]
    failed = pb.RunEvent(seq=len(kept) + 1, run_id=folder.name,
                         state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason="worker exited with code 1"))
    failed.time.GetCurrentTime()
    (folder / "events.jsonl").write_text("".join(
        json_format.MessageToJson(e, indent=None, preserving_proto_field_name=True) + "\n" for e in kept + [failed]))
    shutil.rmtree(folder / "adapter")
    (folder / "summary.json").unlink()
    return folder


def resume_to_end(sc, run_id: str) -> tuple[pb.Run, list[pb.RunEvent]]:
    ch, stub = stub_for(sc)
    queued = stub.ResumeRun(pb.ResumeRunRequest(run_id=run_id), timeout=30).run
    events = [r.event for r in stub.WatchRun(pb.WatchRunRequest(run_id=run_id), timeout=600)]
    ch.close()
    return queued, events


def test_resume_from_a_checkpoint_at_max_steps_trains_no_further_step(tmp_path, env, trained):
    folder = died_after_checkpoint(trained, tmp_path / "runs", step=2)
    with running_sidecar(tmp_path, env=env) as sc:
        queued, events = resume_to_end(sc, "tpl")
        sc.stop()
    assert queued.reason == "resumed from checkpoints/checkpoint-2"
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
    steps = [e.train_step.step for e in events if e.HasField("train_step")]
    assert max(steps) == 2, steps
    result = next(e.result for e in events if e.HasField("result"))
    assert result.steps_completed == 2 and result.HasField("end_reward")
    assert int(json.loads((folder / "summary.json").read_text())["steps_completed"]) == 2
    csv_steps = [int(l.split(",")[0]) for l in (folder / "reward-vs-step.csv").read_text().splitlines()[1:]]
    assert csv_steps == [1, 2]
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()


def test_a_truncated_checkpoint_is_skipped_named_and_the_older_one_used(tmp_path, env, trained):
    folder = died_after_checkpoint(trained, tmp_path / "runs", step=2)
    weights = folder / "checkpoints" / "checkpoint-2" / "adapter_model.safetensors"
    os.truncate(weights, weights.stat().st_size // 2)  # after its completion marker was written
    with running_sidecar(tmp_path, env=env) as sc:
        queued, events = resume_to_end(sc, "tpl")
        sc.stop()
    assert queued.reason == "resumed from checkpoints/checkpoint-1", queued.reason
    warnings = [e.warning for e in events if e.HasField("warning") and e.warning.code == "checkpoint_damaged"]
    assert len(warnings) == 1 and warnings[0].step == 2, warnings
    assert "checkpoints/checkpoint-2" in warnings[0].message and "adapter_model.safetensors" in warnings[0].message
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, events[-1].state_change.reason
    after = [e.train_step.step for e in events[[e.seq for e in events].index(
        next(e.seq for e in events if e.state_change.reason.startswith("resumed"))):] if e.HasField("train_step")]
    assert after == [2], after  # step 2 trained again from checkpoint-1
    assert "SafetensorError" not in (folder / "worker.log").read_text()


# ---------------------------------------------------------------------------------------------
# 4: request.json is immutable after Train


def test_resume_refuses_an_edited_request_and_revalidates_it(tmp_path, env):
    with running_sidecar(tmp_path, env=env) as sc:
        ch, stub = stub_for(sc)
        stream = stub.Train(small_request("edited", max_steps=4), timeout=600)
        next(stream)
        stub.CancelRun(pb.CancelRunRequest(run_id="edited"), timeout=10)
        assert wait_state(stub, "edited", TERMINAL, timeout=120).state == pb.RUN_STATE_CANCELLED
        stream.cancel()
        folder = sc.runs_root / "edited"
        if not (folder / "checkpoints").is_dir():
            legacy_checkpoint(folder, 1)
        original = (folder / "request.json").read_text()
        req = json.loads(original)
        req["grpo"]["max_steps"] = 8
        (folder / "request.json").write_text(json.dumps(req, indent=2))
        with pytest.raises(grpc.RpcError) as ei:
            stub.ResumeRun(pb.ResumeRunRequest(run_id="edited"), timeout=30)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ei.value.details().startswith("request.json:"), ei.value.details()
        assert "changed" in ei.value.details()
        assert stub.GetRun(pb.GetRunRequest(run_id="edited"), timeout=10).run.request.grpo.max_steps == 4
        ch.close()
    # A run folder from before the digest was stored: the request is re-validated as Train would.
    digest_file(folder).unlink()
    req["grpo"]["max_steps"] = 4
    req["base_model"] = "no-such-model-folder"
    (folder / "request.json").write_text(json.dumps(req, indent=2))
    with running_sidecar(tmp_path, env=env) as sc:
        ch, stub = stub_for(sc)
        with pytest.raises(grpc.RpcError) as ei:
            stub.ResumeRun(pb.ResumeRunRequest(run_id="edited"), timeout=30)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert ei.value.details().startswith("request.json: base_model:"), ei.value.details()
        assert stub.GetRun(pb.GetRunRequest(run_id="edited"), timeout=10).run.state == pb.RUN_STATE_CANCELLED
        ch.close()


# ---------------------------------------------------------------------------------------------
# 5: downloads serve only the listed bytes


def test_download_of_a_changed_artifact_is_data_loss(tmp_path):
    runs = tmp_path / "runs"
    folder, result = with_result(runs, "changed", pb.RUN_STATE_SUCCEEDED)
    with open(folder / "adapter" / "adapter_model.safetensors", "ab") as f:
        f.write(b"more")  # size changed
    cfg = folder / "adapter" / "adapter_config.json"
    cfg.write_bytes(b"[]")  # same size, other bytes
    with running_sidecar(tmp_path) as sc:
        ch, stub = stub_for(sc)
        for path, what in (("adapter/adapter_model.safetensors", "3004 bytes"), ("adapter/adapter_config.json", "sha256")):
            for offset in (0, 1):
                with pytest.raises(grpc.RpcError) as ei:
                    list(stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="changed", path=path, offset=offset),
                                               timeout=30))
                assert ei.value.code() == grpc.StatusCode.DATA_LOSS, (path, ei.value.details())
                assert ei.value.details().startswith(f"path: {path}") and what in ei.value.details(), ei.value.details()
        intact = next(a for a in result.artifacts if a.path == "summary.json")
        got = list(stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="changed", path="summary.json"), timeout=30))
        assert b"".join(c.data for c in got) == (folder / "summary.json").read_bytes()
        assert got[-1].sha256 == intact.sha256
        ch.close()


# ---------------------------------------------------------------------------------------------
# 6: DeleteRun


def test_delete_run_removes_a_finished_run_only(tmp_path, env):
    runs = tmp_path / "runs"
    make_run(runs, "done")
    (runs / "done" / "checkpoints" / "checkpoint-1").mkdir(parents=True)
    make_run(runs, "other")
    make_run(runs, "broken")
    with open(runs / "broken" / "events.jsonl", "ab") as f:
        f.write(b"garbage\n")
    other_before = {str(p.relative_to(runs)): p.read_bytes() for p in (runs / "other").rglob("*") if p.is_file()}
    with running_sidecar(tmp_path, env=env) as sc:
        ch, stub = stub_for(sc)
        with pytest.raises(grpc.RpcError) as ei:
            stub.DeleteRun(pb.DeleteRunRequest(run_id="nope"), timeout=10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND and ei.value.details().startswith("run_id:")
        gone = stub.DeleteRun(pb.DeleteRunRequest(run_id="done"), timeout=30).run
        assert gone.run_id == "done" and gone.state == pb.RUN_STATE_SUCCEEDED
        assert not (runs / "done").exists()
        assert [p.name for p in runs.iterdir() if p.name.startswith(".") and p.is_dir()] == []  # no trash left
        with pytest.raises(grpc.RpcError) as ei:
            stub.GetRun(pb.GetRunRequest(run_id="done"), timeout=10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        assert stub.DeleteRun(pb.DeleteRunRequest(run_id="broken"), timeout=30).run.state == pb.RUN_STATE_FAILED
        # The id is free again; an active run is never deleted.
        stream = stub.Train(small_request("done", max_steps=50), timeout=600)
        assert next(stream).event.state_change.state == pb.RUN_STATE_QUEUED
        with pytest.raises(grpc.RpcError) as ei:
            stub.DeleteRun(pb.DeleteRunRequest(run_id="done"), timeout=10)
        assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION and ei.value.details().startswith("run_id:")
        assert (runs / "done" / "request.json").is_file()
        stub.CancelRun(pb.CancelRunRequest(run_id="done"), timeout=10)
        assert wait_state(stub, "done", TERMINAL, timeout=120).state == pb.RUN_STATE_CANCELLED
        stream.cancel()
        stub.DeleteRun(pb.DeleteRunRequest(run_id="done"), timeout=30)
        listed = {r.run_id for r in stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs}
        assert listed == {"other"}
        ch.close()
        assert sc.stop() == 0
    after = {str(p.relative_to(runs)): p.read_bytes() for p in (runs / "other").rglob("*") if p.is_file()}
    assert after == other_before
    assert sorted(p.name for p in runs.iterdir() if not p.name.startswith(".")) == ["other"]


def test_a_delete_interrupted_after_its_rename_is_finished_at_startup(tmp_path):
    runs = tmp_path / "runs"
    make_run(runs, "kept")
    trash = make_run(runs, "half-deleted")
    os.rename(trash, runs / ".half-deleted.deleted-abcd1234")  # the sidecar died inside DeleteRun
    with running_sidecar(tmp_path) as sc:
        ch, stub = stub_for(sc)
        assert {r.run_id for r in stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs} == {"kept"}
        ch.close()
        wait_for(lambda: not (runs / ".half-deleted.deleted-abcd1234").exists(), timeout=10)
