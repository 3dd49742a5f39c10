"""Faults the sidecar survives: a full disk, damaged run folders, two sidecars on one runs root,
big downloads, half checkpoints, and SIGTERM mid-run (crowds of Evaluate / SampleGroups calls
and a cancelled Evaluate: test_inference_worker.py).

Most tests build their run folders by hand (no training) and start a real sidecar on them; the
full-disk and SIGTERM tests train the embedded default model for a few steps. The full-disk test
needs a small tmpfs, which needs root: where mounting is not allowed it is skipped with the reason
printed, never silently.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from _builders import event_line, make_run, small_request
from _sidecar import TERMINAL, cpu_seconds, launch, read_events, running_sidecar, sidecar_env, stub_for, wait_state
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.run_request import DIGESTS_DIR

# ---------------------------------------------------------------------------------------------
# Helpers: run folders by hand, process accounting, a small disk


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rss_mb(pid: int, key: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    raise KeyError(key)


@pytest.fixture
def env(tiny_model_home):
    return sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))


@pytest.fixture
def small_disk(tmp_path, capsys):
    """A 48 MiB tmpfs at tmp_path/disk (root only); skipped with the reason printed to the
    terminal (past pytest's capture, so `make test` shows it) otherwise."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    proc = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if proc.returncode != 0:
        reason = f"cannot mount a tmpfs for the full-disk test (needs root): {proc.stderr.strip() or proc.returncode}"
        with capsys.disabled():
            print(f"\nSKIPPED full-disk fault test: {reason}", flush=True)
        pytest.skip(reason)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def fill(path: Path) -> int:
    """Write `path` until the disk is full; the number of bytes written."""
    n = 0
    block = b"\x5a" * (1 << 20)
    with open(path, "wb", buffering=0) as f:
        for size in (1 << 20, 1 << 12, 1):
            try:
                while True:
                    n += f.write(block[:size])
            except OSError as err:
                assert err.errno == errno.ENOSPC, err
    return n


def temp_leftovers(runs: Path) -> list[str]:
    """Half-written things a run folder tree must never keep: temp run folders, .adapter.*, *.tmp."""
    out = [p.name for p in runs.iterdir() if p.name.startswith(".") and p.is_dir() and p.name != DIGESTS_DIR]
    for p in runs.rglob("*"):
        if p.name.startswith(".adapter.") or p.name.endswith(".tmp"):
            out.append(str(p.relative_to(runs)))
    return out


# ---------------------------------------------------------------------------------------------
# The events log itself: write-ahead appends, torn tails


def test_append_that_fails_leaves_no_torn_line(tmp_path, monkeypatch):
    from py_trainer.core.errors import DiskFull
    from py_trainer.runs import events as events_mod

    folder = tmp_path / "r"
    folder.mkdir()
    log = events_mod.EventLog(folder, "r")
    log.append(state_change=pb.StateChange(state=pb.RUN_STATE_QUEUED))
    before = (folder / "events.jsonl").read_bytes()
    real_write = os.write

    def half_then_enospc(fd, data):  # the disk fills in the middle of the line
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(events_mod.os, "write", half_then_enospc)
    with pytest.raises(DiskFull) as ei:
        log.append(train_step=pb.TrainStep(step=1))
    assert str(folder / "events.jsonl") in str(ei.value)
    monkeypatch.undo()
    assert (folder / "events.jsonl").read_bytes() == before, "the torn half line must be cut back"
    assert log.last_seq == 1
    log.append(state_change=pb.StateChange(state=pb.RUN_STATE_RUNNING))
    again = events_mod.EventLog(folder, "r")
    assert [e.seq for e in again.events] == [1, 2]


def test_torn_tail_is_tolerated_then_overwritten(tmp_path):
    from py_trainer.runs.events import EventLog

    folder = make_run(tmp_path, "torn", states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING))
    with open(folder / "events.jsonl", "ab") as f:
        f.write(b'{"seq": 3, "run_id": "torn", "train_st')  # a kill -9 mid-write
    raw = (folder / "events.jsonl").read_bytes()
    log = EventLog(folder, "torn")
    assert log.last_seq == 2
    assert (folder / "events.jsonl").read_bytes() == raw, "loading never modifies the file"
    log.append(state_change=pb.StateChange(state=pb.RUN_STATE_FAILED, reason="x"))
    lines = (folder / "events.jsonl").read_text().splitlines()
    assert [int(json.loads(l)["seq"]) for l in lines] == [1, 2, 3]


# ---------------------------------------------------------------------------------------------
# Damaged run folders, the runs-root lock, half checkpoints


@pytest.mark.slow
def test_unreadable_run_folders_are_listed_and_the_rest_served(tmp_path):
    runs = tmp_path / "runs"
    make_run(runs, "good")
    make_run(runs, "garbage-tail")
    with open(runs / "garbage-tail" / "events.jsonl", "ab") as f:
        f.write(b"this is not an event\n")
    make_run(runs, "bad-request")
    (runs / "bad-request" / "request.json").write_text('{"run_id": "bad-request", "grpo": {')
    dup = make_run(runs, "dup-seq")
    lines = (dup / "events.jsonl").read_text().splitlines(keepends=True)
    (dup / "events.jsonl").write_text("".join(lines[:2] + [lines[1]] + lines[2:]))
    make_run(runs, "not-utf8")
    with open(runs / "not-utf8" / "events.jsonl", "ab") as f:
        f.write(b'{"seq": 4, "run_id": "not-utf8", "warning": {"message": "\xff\xfe"}}\n')
    make_run(runs, "torn-tail")
    with open(runs / "torn-tail" / "events.jsonl", "ab") as f:
        f.write(b'{"seq": 4, "ru')
    (runs / ".half-made.abcd1234").mkdir()  # a temp run folder a crash left behind: removed
    (runs / ".half-made.abcd1234" / "request.json").write_text("{}")
    (runs / ".keep-me").mkdir()  # not ours: left alone
    before = {name: snapshot(runs / name) for name in os.listdir(runs) if not name.startswith(".")}

    with running_sidecar(tmp_path) as sc:
        ch, stub = stub_for(sc)
        listed = {r.run_id: r for r in stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs}
        assert set(listed) == set(before)
        for name in ("good", "torn-tail"):
            assert listed[name].state == pb.RUN_STATE_SUCCEEDED, listed[name].reason
        want = {"garbage-tail": "events.jsonl line 4", "bad-request": "request.json",
                "dup-seq": "events.jsonl line 3: seq 2, expected 3", "not-utf8": "events.jsonl line 4: not UTF-8"}
        for name, what in want.items():
            run = stub.GetRun(pb.GetRunRequest(run_id=name), timeout=10).run
            assert run.state == pb.RUN_STATE_FAILED
            assert run.reason.startswith("unreadable run folder: ") and what in run.reason, run.reason
            with pytest.raises(grpc.RpcError) as ei:
                stub.CancelRun(pb.CancelRunRequest(run_id=name), timeout=10)
            assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            with pytest.raises(grpc.RpcError) as ei:
                list(stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id=name, path="events.jsonl"), timeout=10))
            assert ei.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        replay = [r.event for r in stub.WatchRun(pb.WatchRunRequest(run_id="good"), timeout=10)]
        assert [e.seq for e in replay] == [1, 2, 3]
        ch.close()
        assert sc.stop() == 0
    after = {name: snapshot(runs / name) for name in os.listdir(runs) if not name.startswith(".")}
    assert after == before, "damaged folders are left exactly as they were, for inspection"
    assert not (runs / ".half-made.abcd1234").exists() and (runs / ".keep-me").is_dir()


@pytest.mark.slow
def test_second_sidecar_is_refused_and_a_stale_lock_is_taken_over(tmp_path):
    runs, data = tmp_path / "runs", tmp_path / "data"
    data.mkdir()
    make_run(runs, "done")
    first = launch(runs, data)
    try:
        with pytest.raises(RuntimeError) as ei:
            second = launch(runs, data, timeout=60)
            second.stop(signal.SIGKILL)  # it should never have started
        msg = str(ei.value)
        assert "exited with 2" in msg and "is in use by another sidecar" in msg
        assert f"pid {first.proc.pid}" in msg, msg
        os.kill(first.proc.pid, signal.SIGKILL)  # a stale lock file stays behind
        first.proc.wait(timeout=30)
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    assert (runs / ".sidecar.lock").exists()
    third = launch(runs, data)
    try:
        assert (runs / ".sidecar.lock").read_text().strip() == str(third.proc.pid)
        ch, stub = stub_for(third)
        assert stub.GetRun(pb.GetRunRequest(run_id="done"), timeout=10).run.state == pb.RUN_STATE_SUCCEEDED
        ch.close()
    finally:
        third.stop()


@pytest.mark.slow
def test_a_half_written_checkpoint_does_not_count(tmp_path):
    runs = tmp_path / "runs"
    folder = make_run(runs, "interrupted", states=(pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING),
                      extra=[{"train_step": pb.TrainStep(step=4, max_steps=10)}])
    # its request says the max_steps its step logged (a request that does not is no longer what it ran)
    (folder / "request.json").write_text(json_format.MessageToJson(small_request("interrupted", max_steps=10)))
    for step, complete in ((2, True), (4, False)):
        ck = folder / "checkpoints" / f"checkpoint-{step}"
        ck.mkdir(parents=True)
        header = json.dumps({"w": {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}}).encode()
        (ck / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"x" * 100)
        if complete:
            (ck / "checkpoint-complete.json").write_text('{"step": %d}\n' % step)
    with running_sidecar(tmp_path) as sc:
        ch, stub = stub_for(sc)
        run = stub.GetRun(pb.GetRunRequest(run_id="interrupted"), timeout=10).run
        assert run.state == pb.RUN_STATE_FAILED
        assert "last checkpoint kept at checkpoints/checkpoint-2" in run.reason, run.reason
        ch.close()


# ---------------------------------------------------------------------------------------------
# Downloads: the digest is computed once, memory stays bounded


@pytest.mark.slow
def test_download_tail_of_a_large_file_is_cheap(tmp_path):
    runs = tmp_path / "runs"
    size = 256 * 1024 * 1024
    folder = make_run(runs, "big")
    digest = hashlib.sha256()
    block = os.urandom(1 << 20)
    for name in ("listed.bin", "unlisted.bin"):
        with open(folder / name, "wb") as f:
            for _ in range(size >> 20):
                f.write(block)
    for _ in range(size >> 20):
        digest.update(block)
    result = pb.RunResult(artifacts=[pb.Artifact(path="listed.bin", size_bytes=size, sha256=digest.hexdigest())])
    lines = (folder / "events.jsonl").read_text().splitlines(keepends=True)
    last = json_format.Parse(lines[-1], pb.RunEvent())
    lines[-1] = event_line(3, "big", result=result)
    lines.append(event_line(4, "big", state_change=last.state_change))
    (folder / "events.jsonl").write_text("".join(lines))

    with running_sidecar(tmp_path) as sc:
        ch, stub = stub_for(sc)
        pid = sc.proc.pid

        def tail(path):
            got = list(stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="big", path=path, offset=size - 10),
                                             timeout=120))
            assert b"".join(c.data for c in got) == block[-10:] and got[-1].last
            return got[-1].sha256

        rss0 = rss_mb(pid)
        assert tail("listed.bin") == digest.hexdigest()  # checked against its listing once...
        cpu0 = cpu_seconds(pid)
        assert all(tail("listed.bin") == digest.hexdigest() for _ in range(4))  # ...and not again
        listed_cpu = cpu_seconds(pid) - cpu0
        assert tail("unlisted.bin") == digest.hexdigest()  # hashed once here...
        cpu1 = cpu_seconds(pid)
        assert all(tail("unlisted.bin") == digest.hexdigest() for _ in range(3))  # ...and not again
        again_cpu = cpu_seconds(pid) - cpu1
        grew = rss_mb(pid, "VmHWM") - rss0
        print(f"4 repeated tail downloads of a listed 256 MiB file: {listed_cpu:.2f} CPU-s; 3 repeats of an unlisted one: "
              f"{again_cpu:.2f} CPU-s; peak RSS grew {grew:.0f} MiB")
        assert listed_cpu < 0.4, "a listed file is checked against its sha256 once per (inode, size, mtime)"
        assert again_cpu < 0.4, "an unlisted file is hashed once, not on every call"
        assert grew < 64, "a download never holds a whole file in memory"
        ch.close()


# ---------------------------------------------------------------------------------------------
# A full disk; SIGTERM mid-run


@pytest.mark.slow
def test_disk_full_fails_the_run_and_frees_the_slot(small_disk, env):
    runs, data = small_disk / "runs", small_disk.parent / "data"
    data.mkdir()
    sc = launch(runs, data, env=env, log_path=small_disk.parent / "sidecar.log")
    try:
        ch, stub = stub_for(sc)
        stream = stub.Train(small_request("fills", max_steps=500, save_steps=1), timeout=600)
        for res in stream:
            if res.event.HasField("train_step"):
                break
        queued = stub.Train(small_request("waits", max_steps=2), timeout=600)
        assert next(queued).event.state_change.state == pb.RUN_STATE_QUEUED
        filler = small_disk / "filler"
        t0 = time.monotonic()
        fill(filler)
        run = wait_state(stub, "fills", TERMINAL, timeout=60)
        print(f"failed {time.monotonic() - t0:.1f}s after the disk filled: {run.reason}")
        assert run.state == pb.RUN_STATE_FAILED
        assert run.reason.startswith("disk full at "), run.reason
        raw = (runs / "fills" / "events.jsonl").read_bytes()
        assert raw.endswith(b"\n")
        evs = [json_format.Parse(l, pb.RunEvent()) for l in raw.decode().splitlines()]
        assert [e.seq for e in evs] == list(range(1, len(evs) + 1))
        assert evs[-1].state_change.state == pb.RUN_STATE_FAILED
        print("events.jsonl ends:", raw.decode().splitlines()[-1])
        # The slot is free, but the queued run waits for space instead of failing at once.
        with pytest.raises(grpc.RpcError) as ei:
            list(stub.Train(small_request("no-room", max_steps=2), timeout=30))
        assert ei.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert ei.value.details().startswith(f"disk full at {runs}"), ei.value.details()
        assert not (runs / "no-room").exists()
        time.sleep(2)
        assert stub.GetRun(pb.GetRunRequest(run_id="waits"), timeout=10).run.state == pb.RUN_STATE_QUEUED
        assert temp_leftovers(runs) == []
        filler.unlink()  # space is back: the queued run starts and finishes
        rest = [r.event for r in queued]
        assert rest[-1].state_change.state == pb.RUN_STATE_SUCCEEDED, rest[-1].state_change.reason
        for ck in (runs / "waits" / "checkpoints").glob("checkpoint-*"):
            assert (ck / "checkpoint-complete.json").is_file()
        stream.cancel()
        ch.close()
        assert sc.stop() == 0
    finally:
        if sc.proc.poll() is None:
            sc.proc.kill()
    assert temp_leftovers(runs) == []
    # The sidecar starts again on that runs root and serves both runs as they ended.
    sc = launch(runs, data, env=env, log_path=small_disk.parent / "sidecar2.log")
    try:
        ch, stub = stub_for(sc)
        got = {r.run_id: r for r in stub.ListRuns(pb.ListRunsRequest(), timeout=10).runs}
        assert got["fills"].state == pb.RUN_STATE_FAILED and got["fills"].reason.startswith("disk full at ")
        assert got["waits"].state == pb.RUN_STATE_SUCCEEDED
        ch.close()
    finally:
        sc.stop()


FAKE_WORKER = r"""
import json, os, socket, time
s = socket.socket(socket.AF_UNIX)
s.connect(os.environ["PY_TRAINER_EVENTS_SOCK"])
step = 0
while True:  # a worker that reports steps until it is stopped
    step += 1
    s.sendall((json.dumps({"train_step": {"step": step, "metrics": {"reward": 0.5}}}) + "\n").encode())
    time.sleep(0.005)
"""


@pytest.mark.slow
def test_an_events_append_on_a_full_disk_fails_the_run_and_stops_the_worker(small_disk):
    """The sidecar's own write fails (not the worker's): the worker is stopped, the reserve pays for
    the FAILED line, the slot is free, and a new run is refused with RESOURCE_EXHAUSTED."""
    import asyncio

    from py_trainer.core.errors import ResourceExhausted
    from py_trainer.runs.registry import RunRegistry

    runs = small_disk / "runs"

    async def until(pred, timeout):
        deadline = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < deadline, "condition not reached"
            await asyncio.sleep(0.05)

    async def main():
        reg = RunRegistry(runs, small_disk, worker_argv=[sys.executable, "-c", FAKE_WORKER])
        await reg.start()
        rec = reg.create(small_request("appends"))
        await until(lambda: rec.current_step >= 3, 30)
        fill(small_disk / "filler")
        await until(lambda: rec.state in TERMINAL, 20)
        assert rec.state == pb.RUN_STATE_FAILED
        assert rec.reason == f"disk full at {rec.folder / 'events.jsonl'}", rec.reason
        await until(lambda: rec.process.returncode is not None and reg.active is None, 10)
        raw = (rec.folder / "events.jsonl").read_bytes()
        on_disk = [json_format.Parse(l, pb.RunEvent()) for l in raw.decode().splitlines()]
        assert raw.endswith(b"\n") and [e.seq for e in on_disk] == list(range(1, len(on_disk) + 1))
        assert on_disk[-1].state_change.reason == rec.reason, "the reserve pays for the FAILED line"
        with pytest.raises(ResourceExhausted) as ei:
            reg.create(small_request("more"))
        assert str(ei.value).startswith(f"disk full at {runs}")
        assert not (runs / "more").exists() and temp_leftovers(runs) == []
        await reg.close()
        # A sidecar starts on that runs root while the disk is still full, and serves the run.
        again = RunRegistry(runs, small_disk, worker_argv=[sys.executable, "-c", FAKE_WORKER])
        await again.start()
        assert again.runs["appends"].state == pb.RUN_STATE_FAILED and again.runs["appends"].reason == rec.reason
        await again.close()

    asyncio.run(main())


@pytest.mark.slow
def test_sigterm_mid_run_state_summary_and_events_agree(tmp_path, env):
    runs, data = tmp_path / "runs", tmp_path / "data"
    data.mkdir()
    sc = launch(runs, data, env=env)
    try:
        ch, stub = stub_for(sc)
        stream = stub.Train(small_request("term", max_steps=500), timeout=600)
        for res in stream:
            if res.event.HasField("train_step") and res.event.train_step.step >= 3:
                break
        last = stub.GetRun(pb.GetRunRequest(run_id="term"), timeout=10).run
        assert last.state == pb.RUN_STATE_RUNNING
        # after_seq past the end of a RUNNING run: refused up front, not a wait for events that may never come.
        t0 = time.monotonic()
        try:
            list(stub.WatchRun(pb.WatchRunRequest(run_id="term", after_seq=last.last_seq + 100), timeout=10))
            watch = ("OK", "", 0.0)
        except grpc.RpcError as err:
            watch = (err.code().name, err.details(), time.monotonic() - t0)
        stream.cancel()
        ch.close()
        assert sc.stop(signal.SIGTERM, timeout=60) == 0
    finally:
        if sc.proc.poll() is None:
            sc.proc.kill()
    folder = runs / "term"
    events = read_events(folder)
    final = events[-1].state_change
    summary = json.loads((folder / "summary.json").read_text()) if (folder / "summary.json").exists() else None
    has_result = any(e.HasField("result") for e in events)
    print(f"after SIGTERM: {pb.RunState.Name(final.state)} ({final.reason}); summary: "
          f"{summary and summary['state']}; result event: {has_result}")
    if has_result or summary is not None:
        assert final.state == pb.RUN_STATE_CANCELLED, final.reason
        assert summary is not None and summary["state"] == "CANCELLED"
    assert "sidecar shut down" in final.reason
    for ck in (folder / "checkpoints").glob("checkpoint-*"):
        assert (ck / "checkpoint-complete.json").is_file(), ck
    sc = launch(runs, data, env=env)
    try:
        ch, stub = stub_for(sc)
        assert stub.GetRun(pb.GetRunRequest(run_id="term"), timeout=10).run.state == final.state
        ch.close()
    finally:
        sc.stop()
    code, details, took = watch
    assert code == "INVALID_ARGUMENT" and details.startswith("after_seq:") and took < 5, watch
