"""The pieces under tests/test_run_state.py, without processes: the fold of events into a run's
state, checkpoint verification against its completion marker, and listed-bytes-only downloads."""

from __future__ import annotations

import hashlib
import json
import math
import os

import pytest

from _builders import event_line, make_run
from py_trainer.core.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.artifacts import (CHECKPOINT_COMPLETE, DataLoss, artifact_chunks, find_checkpoint,
                                       write_checkpoint_marker)
from py_trainer.runs.run_folder import create_run_folder, read_run
from py_trainer.runs.run_request import check_request_unchanged, digest_file

Q, R, S, F, C = (pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED,
                 pb.RUN_STATE_CANCELLED)
RESULT = pb.RunResult(steps_completed=4, artifacts=[pb.Artifact(path="adapter/a.bin", size_bytes=3, sha256="ab")])


def folded(tmp_path, *kinds):
    folder = make_run(tmp_path, "r", states=(Q,))
    (folder / "events.jsonl").write_text("".join(event_line(i, "r", **k) for i, k in enumerate(kinds, start=1)))
    return read_run(folder)


def state(s, reason=""):
    return {"state_change": pb.StateChange(state=s, reason=reason)}


def test_a_cancel_while_queued_again_restores_the_result(tmp_path):
    rec = folded(tmp_path, state(Q), state(R), {"result": RESULT}, state(C), state(Q, "resumed from x"))
    assert rec.state == Q and rec.result is None and rec.end_time is None
    rec.apply(pb.RunEvent(seq=6, **state(C, "cancelled while queued")))
    assert rec.state == C and rec.result == RESULT and rec.end_time is not None


def test_a_resume_that_runs_replaces_the_result(tmp_path):
    rec = folded(tmp_path, state(Q), state(R), {"result": RESULT}, state(C), state(Q), state(R), state(F))
    assert rec.result is None  # it ran again and failed: the old result no longer describes the run
    new = pb.RunResult(steps_completed=8)
    rec = folded(tmp_path / "b", state(Q), state(R), {"result": RESULT}, state(C), state(Q), state(R),
                 {"result": new}, state(S))
    assert rec.result == new


def checkpoint(folder, step, data=b"w" * 64):
    ck = folder / "checkpoints" / f"checkpoint-{step}"
    ck.mkdir(parents=True)
    (ck / "adapter_model.safetensors").write_bytes(data)
    (ck / "trainer_state.json").write_text('{"global_step": %d}' % step)
    write_checkpoint_marker(ck, step)
    return ck


def test_the_marker_lists_each_file_and_a_damaged_checkpoint_is_skipped(tmp_path):
    old, new = checkpoint(tmp_path, 2), checkpoint(tmp_path, 4)
    files = json.loads((new / CHECKPOINT_COMPLETE).read_text())["files"]
    assert files["adapter_model.safetensors"] == {"size": 64, "sha256": hashlib.sha256(b"w" * 64).hexdigest()}
    assert find_checkpoint(tmp_path) == ("checkpoints/checkpoint-4", [])
    os.truncate(new / "adapter_model.safetensors", 10)
    ckpt, damaged = find_checkpoint(tmp_path)
    assert ckpt == "checkpoints/checkpoint-2"
    assert damaged == [(4, "checkpoints/checkpoint-4: adapter_model.safetensors is 10 bytes, "
                           "its completion marker says 64")]
    (old / "trainer_state.json").write_text('{"global_step": 9}')  # same size, other bytes
    ckpt, damaged = find_checkpoint(tmp_path)
    assert ckpt == "" and "trainer_state.json has another sha256" in damaged[1][1]


def test_a_marker_that_does_not_read_back_is_damage_and_a_legacy_marker_counts(tmp_path):
    ck = checkpoint(tmp_path, 3)
    (ck / CHECKPOINT_COMPLETE).write_text('{"step": 3, "files": {"x": 1}}')
    assert find_checkpoint(tmp_path)[1][0][1].startswith("checkpoints/checkpoint-3: checkpoint-complete.json does not read back")
    (ck / CHECKPOINT_COMPLETE).write_text('{"step": 3, "time": 1.0}')  # before markers listed files
    header = json.dumps({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    (ck / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header + b"\0" * 16)
    assert find_checkpoint(tmp_path) == ("checkpoints/checkpoint-3", [])
    os.truncate(ck / "adapter_model.safetensors", 8 + len(header) + 5)  # its own header tells
    assert find_checkpoint(tmp_path) == ("", [(3, f"checkpoints/checkpoint-3: adapter_model.safetensors is truncated "
                                                  f"({8 + len(header) + 5} bytes, its safetensors header says "
                                                  f"{8 + len(header) + 16})")])


def test_request_json_is_refused_once_edited(tmp_path):
    folder, req = create_run_folder(tmp_path, pb.TrainRequest(run_id="r", base_model="m"))
    assert digest_file(folder).read_text().endswith("  request.json\n")
    assert digest_file(folder).parent == tmp_path / ".request-digests"  # where the sidecar alone writes
    assert check_request_unchanged(folder, req) == req
    (folder / "request.json").write_text((folder / "request.json").read_text().replace('"m"', '"n"'))
    with pytest.raises(FailedPrecondition) as ei:
        check_request_unchanged(folder, req)
    assert str(ei.value).startswith("request.json: changed since Train stored it")
    digest_file(folder).unlink()  # a folder from before digests: compared with what was loaded
    with pytest.raises(FailedPrecondition) as ei:
        check_request_unchanged(folder, req)
    assert str(ei.value).startswith("request.json: changed since the sidecar loaded it")


def test_only_listed_bytes_are_served(tmp_path):
    (tmp_path / "f.bin").write_bytes(b"abcdef")
    listed = {"f.bin": pb.Artifact(path="f.bin", size_bytes=6, sha256=hashlib.sha256(b"abcdef").hexdigest())}
    chunks = list(artifact_chunks(tmp_path, "f.bin", 2, 0, listed))
    assert b"".join(c.data for c in chunks) == b"cdef" and chunks[-1].sha256 == listed["f.bin"].sha256
    (tmp_path / "f.bin").write_bytes(b"abcdeX")
    with pytest.raises(DataLoss) as ei:
        next(artifact_chunks(tmp_path, "f.bin", 0, 0, listed))
    assert str(ei.value).startswith("path: f.bin has sha256 ") and "listed as" in str(ei.value)
    (tmp_path / "f.bin").write_bytes(b"abc")
    with pytest.raises(DataLoss) as ei:
        next(artifact_chunks(tmp_path, "f.bin", 0, 0, listed))
    assert str(ei.value).startswith("path: f.bin is 3 bytes on disk, listed as 6 bytes")
    assert b"".join(c.data for c in artifact_chunks(tmp_path, "f.bin", 0, 0, {})) == b"abc"  # unlisted: served


def test_a_request_without_digest_is_checked_against_its_events(tmp_path):
    """Issue 30, item 6: with its digest gone, an edited request.json was accepted by ResumeRun."""
    from py_trainer.runs.run_request import linear_lr, request_vs_events

    req = pb.TrainRequest(run_id="r")
    req.grpo.learning_rate, req.grpo.max_steps, req.grpo.warmup_ratio = 0.002, 10, 0.1
    steps = [pb.RunEvent(seq=s, run_id="r", train_step=pb.TrainStep(
        step=s, max_steps=10, metrics={"learning_rate": linear_lr(0.002, 0.1, 10, s - 1)})) for s in range(1, 11)]
    assert request_vs_events(req, "r", steps) == ""
    edited = pb.TrainRequest.FromString(req.SerializeToString())
    edited.grpo.learning_rate = 0.5
    assert request_vs_events(edited, "r", steps) == "grpo.learning_rate is 0.5, but its step 2 trained at 0.002"
    edited.grpo.learning_rate, edited.grpo.max_steps = 0.002, 20
    assert "grpo.max_steps is 20, its step 1 ran with max_steps 10" in request_vs_events(edited, "r", steps)
    assert "names run 'r'" in request_vs_events(req, "other", steps)


def logged_learning_rates(peak: float, warmup_ratio: float, max_steps: int) -> list[float]:
    """The learning_rate transformers' Trainer logs at steps 1..max_steps (GRPOConfig's warmup_steps
    is the ratio: ceil(ratio x max_steps) steps), from its own scheduler and training loop's order:
    the rate is read before `lr_scheduler.step()`, so step s logs the rate step s trained at."""
    import torch
    from transformers import get_linear_schedule_with_warmup

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=peak)
    sched = get_linear_schedule_with_warmup(opt, math.ceil(max_steps * warmup_ratio), max_steps)
    out = []
    for _ in range(max_steps):
        opt.step()
        out.append(sched.get_last_lr()[0])
        sched.step()
    return out


@pytest.mark.parametrize("warmup_ratio", [0.0, 0.1, 0.34, 0.5, 0.9])
@pytest.mark.parametrize("max_steps", [1, 2, 3, 4, 7, 20])
def test_an_edited_learning_rate_is_caught_on_every_schedule_shape(warmup_ratio, max_steps):
    """Issue 44, item 2: a factor-2 window over a step either side held a 0 of the schedule on a
    short run, so any raised learning rate passed (0.002 -> 0.5 resumed a 3-step run). Every prefix
    of a run (one that failed after k steps) with a step that trained at a nonzero rate now refuses
    any other learning rate, and accepts the one it ran with."""
    from py_trainer.runs.run_request import request_vs_events

    peak = 0.002
    lrs = logged_learning_rates(peak, warmup_ratio, max_steps)
    req = pb.TrainRequest(run_id="r")
    req.grpo.learning_rate, req.grpo.max_steps, req.grpo.warmup_ratio = peak, max_steps, warmup_ratio
    for k in range(1, max_steps + 1):
        steps = [pb.RunEvent(seq=s, run_id="r", train_step=pb.TrainStep(
            step=s, max_steps=max_steps, metrics={"learning_rate": lrs[s - 1]})) for s in range(1, k + 1)]
        assert request_vs_events(req, "r", steps) == "", (k, lrs)
        if not any(lrs[:k]):
            continue  # every step so far trained at 0: no learning rate can be told from another
        for other in (0.5, peak * 2, peak / 2, peak * 1.01, peak * 0.99, 1e-9):
            edited = pb.TrainRequest.FromString(req.SerializeToString())
            edited.grpo.learning_rate = other
            assert request_vs_events(edited, "r", steps).startswith(f"grpo.learning_rate is {other:g}, but its step"), \
                (k, other, lrs[:k])


def test_events_of_another_run_and_a_symlinked_folder_do_not_read_back(tmp_path):
    from py_trainer.runs.run_folder import UnreadableRun
    from py_trainer.runs.run_removal import trash_run_folder

    make_run(tmp_path, "a")
    make_run(tmp_path / "x", "b")
    (tmp_path / "a" / "events.jsonl").write_bytes((tmp_path / "x" / "b" / "events.jsonl").read_bytes())
    with pytest.raises(UnreadableRun, match="events.jsonl seq 1 names run 'b', not 'a'"):
        read_run(tmp_path / "a")
    os.symlink(tmp_path / "x" / "b", tmp_path / "link")
    with pytest.raises(UnreadableRun, match="is a symlink"):
        read_run(tmp_path / "link")
    assert trash_run_folder(tmp_path / "link", tmp_path / ".link.deleted-00000000") is None
    assert not os.path.lexists(tmp_path / "link") and (tmp_path / "x" / "b" / "events.jsonl").exists()


def test_a_request_that_no_longer_matches_is_never_shown_as_what_ran(tmp_path):
    """Issue 30, item 6: request.json edited (learning_rate 0.5, trained at 0.002) and its digest deleted,
    then a restart: GetRun showed the edit as what ran. Such a folder reads back as unreadable, naming
    request.json; ResumeRun refuses it with the same words; an edit under a stored digest too."""
    import asyncio

    from py_trainer.runs.registry import RunRegistry
    from py_trainer.runs.run_folder import UnreadableRun

    runs = tmp_path / "runs"
    steps = [{"train_step": pb.TrainStep(step=s, max_steps=3, metrics={"learning_rate": 0.002 * (3 - (s - 1)) / 3})}
             for s in (1, 2)]
    for name in ("tampered", "kept"):
        folder = make_run(runs, name, states=(Q, R, F), extra=steps)
        req = json.loads((folder / "request.json").read_text())
        req["grpo"]["learning_rate"] = 0.5 if name == "tampered" else 0.002
        (folder / "request.json").write_text(json.dumps(req))
    digested, _ = create_run_folder(runs, pb.TrainRequest(run_id="digested", base_model="m"))
    (digested / "events.jsonl").write_text("".join(event_line(i, "digested", **state(s)) for i, s in enumerate((Q, R, F), 1)))
    (digested / "request.json").write_text((digested / "request.json").read_text().replace('"m"', '"n"'))
    with pytest.raises(UnreadableRun, match=r"^request.json: has no stored digest and does not match the run's "
                                            r"events: grpo.learning_rate is 0.5, but its step 1 trained at"):
        read_run(runs / "tampered")
    with pytest.raises(UnreadableRun, match=r"^request.json: changed since Train stored it"):
        read_run(runs / "digested")
    assert read_run(runs / "kept").request.grpo.learning_rate == pytest.approx(0.002)

    async def main():
        reg = RunRegistry(runs, tmp_path)
        await reg.start()
        try:
            shown = reg.get("tampered").to_proto()
            assert shown.state == F and shown.reason.startswith("unreadable run folder: request.json: has no stored "
                                                                 "digest"), shown.reason
            assert shown.request.grpo.learning_rate != pytest.approx(0.5), "the edit is shown as what ran"
            assert reg.get("digested").to_proto().request.base_model != "n"
            assert reg.get("kept").to_proto().state == F and not reg.get("kept").unreadable
            with pytest.raises(FailedPrecondition) as ei:
                await reg.resume("tampered")
            assert str(ei.value).startswith("request.json: has no stored digest") and "0.5" in str(ei.value)
            with pytest.raises(FailedPrecondition) as ei:
                await reg.resume("digested")
            assert str(ei.value).startswith("request.json: changed since Train stored it"), str(ei.value)
        finally:
            await reg.close()

    asyncio.run(main())
