"""Faults on the newest surfaces (issue 30), against one sidecar started as an ordinary user would
run it: without root's override of file modes (this machine runs the tests as root, whose
CAP_DAC_OVERRIDE reads and removes anything: the sidecar runs without it, `as_ordinary_user`).

Its runs root holds, before it starts: a run folder of mode 000, a run whose folder holds a folder
of mode 555 (its delete cannot finish), a trash folder the startup cleanup cannot remove, a run
folder that is a symlink out of the root, a run whose checkpoint is a symlink out of the root, a
folder whose events name another run, and two FAILED runs whose request.json no longer matches
their events (no stored digest). One sidecar serves every test here (module scope): the suite's
time budget."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message

from _builders import TASKS, event_line, make_run
from _sidecar import launch, sidecar_env, stub_for
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow  # one sidecar (and its inference worker) for the module

FAILED = (pb.RUN_STATE_QUEUED, pb.RUN_STATE_RUNNING, pb.RUN_STATE_FAILED)


def as_ordinary_user() -> list[str]:
    """The command prefix that runs the sidecar without root's override of file permissions: as root,
    capsh drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from its bounding set (its workers inherit
    that), so modes bind it as they bind an ordinary user. (setpriv to uid 65534 cannot run this venv's
    python, which lies under /root.)"""
    if os.getuid() != 0:
        return []
    prefix = ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", 'exec "$0" "$@"']
    probe = tempfile.mkdtemp()
    os.chmod(probe, 0)
    try:
        denied = shutil.which("capsh") is not None and subprocess.run([*prefix, "ls", probe],
                                                                       capture_output=True).returncode != 0
    finally:
        os.rmdir(probe)
    if not denied:
        pytest.skip("running as root, and capsh cannot drop CAP_DAC_OVERRIDE here: root reads every folder")
    return prefix


def tampered_run(runs: Path, name: str, **request_edit) -> Path:
    """A FAILED run whose steps trained at learning_rate 0.002 (linear schedule, 3 steps) and whose
    request.json, without a stored digest, is then edited with `request_edit` (grpo fields or run_id)."""
    steps = [{"train_step": pb.TrainStep(step=s, max_steps=3, metrics={"learning_rate": 0.002 * (3 - (s - 1)) / 3})}
             for s in (1, 2)]
    folder = make_run(runs, name, states=FAILED, extra=steps)
    req = json.loads((folder / "request.json").read_text())
    req["grpo"]["learning_rate"] = 0.002
    for k, v in request_edit.items():
        if k == "run_id":
            req["run_id"] = v
        else:
            req["grpo"][k] = v
    (folder / "request.json").write_text(json.dumps(req, indent=2))
    return folder


def outside_checkpoint(tiny_model_dir: Path, dest: Path) -> None:
    """A real, complete LoRA checkpoint of the tiny model (what a symlink would make the sidecar load)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from py_trainer.runs.artifacts import write_checkpoint_marker

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), LoraConfig(r=2, target_modules=["q_proj"]))
    model.save_pretrained(dest)
    write_checkpoint_marker(dest, 2)


@pytest.fixture(scope="module")
def box(tiny_model_home, tiny_model_dir):
    prefix = as_ordinary_user()
    root = Path(tempfile.mkdtemp(prefix="faults-surfaces-"))
    os.chmod(root, 0o755)
    runs, data, outside = root / "runs", root / "data", root / "outside"
    for d in (runs, data, outside, root / "user"):
        d.mkdir()
    (data / "tasks.jsonl").write_bytes(TASKS.read_bytes())
    make_run(runs, "ok")
    (runs / "ok" / "worker.log").write_text("trained\n")
    make_run(runs, "locked")
    make_run(runs, "shut")  # read back at the start; its adapter/ and worker.log are not readable
    (runs / "shut" / "adapter").mkdir()
    (runs / "shut" / "adapter" / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    (runs / "shut" / "worker.log").write_text("trained\n")
    make_run(runs, "sealed")
    (runs / "sealed" / "kept").mkdir()
    (runs / "sealed" / "kept" / "file").write_text("x")
    trash = runs / ".gone.deleted-0123abcd"
    (trash / "kept").mkdir(parents=True)
    (trash / "kept" / "file").write_text("x")
    make_run(outside, "linked-target")
    (outside / "linked-target" / "secret.txt").write_text("outside the runs root\n")
    os.symlink(outside / "linked-target", runs / "linked")
    make_run(runs, "ckpt")
    (runs / "ckpt" / "checkpoints").mkdir()
    outside_checkpoint(tiny_model_dir, outside / "ckpt-2")
    os.symlink(outside / "ckpt-2", runs / "ckpt" / "checkpoints" / "checkpoint-2")
    make_run(runs, "foreign")
    other = make_run(root / "elsewhere", "someone-else")
    shutil.copy(other / "events.jsonl", runs / "foreign" / "events.jsonl")
    tampered_run(runs, "tampered", learning_rate=0.5)
    tampered_run(runs, "renamed", run_id="another-run")
    for p, mode in ((runs / "locked", 0o000), (runs / "sealed" / "kept", 0o555), (trash / "kept", 0o555),
                    (runs / "shut" / "adapter", 0o000), (runs / "shut" / "worker.log", 0o000)):
        os.chmod(p, mode)
    env = sidecar_env(PY_TRAINER_HOME=str(tiny_model_home), HOME=str(root / "user"), MPLCONFIGDIR=str(root / "user"))
    sc = launch(runs, data, env=env, argv_prefix=prefix, log_path=root / "sidecar.log")
    ch, stub = stub_for(sc)
    try:
        yield sc, stub, root
    finally:
        ch.close()
        if sc.proc.poll() is None:
            sc.stop()
        for p in (runs / "locked", runs / "sealed" / "kept", trash / "kept", runs / "shut" / "adapter",
                  runs / "shut" / "worker.log"):
            if p.exists():
                os.chmod(p, 0o755)
        shutil.rmtree(root, ignore_errors=True)


def refused(call, code: grpc.StatusCode) -> str:
    with pytest.raises(grpc.RpcError) as ei:
        r = call()
        if not isinstance(r, Message):  # a stream: the status comes with its end
            list(r)
    assert ei.value.code() == code, ei.value.details()
    return ei.value.details()


def runs_by_id(stub) -> dict[str, pb.Run]:
    return {r.run_id: r for r in stub.ListRuns(pb.ListRunsRequest(), timeout=30).runs}


def evaluate(**body) -> pb.EvaluateRequest:
    base = {"tasks": {"jsonl_path": "tasks.jsonl", "split": "test", "limit": 2}, "max_new_tokens": 4, "batch_size": 2}
    return json_format.ParseDict({**base, **body}, pb.EvaluateRequest())


# ---------------------------------------------------------------------------------------------
# Item 1: a run folder the sidecar cannot read


def test_an_unreadable_run_folder_is_listed_failed_and_named_in_every_answer(box):
    sc, stub, _ = box
    runs = runs_by_id(stub)  # the sidecar started (it exited 1 with PermissionError before)
    assert runs["ok"].state == pb.RUN_STATE_SUCCEEDED
    locked = runs["locked"]
    assert locked.state == pb.RUN_STATE_FAILED
    assert locked.reason.startswith("unreadable run folder:") and "locked" in locked.reason
    assert "permission denied" in locked.reason, locked.reason
    assert stub.GetRun(pb.GetRunRequest(run_id="locked"), timeout=10).run.reason == locked.reason
    details = refused(lambda: stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="locked", path="worker.log"),
                                                    timeout=30), grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("run_id: run 'locked': unreadable run folder"), details
    details = refused(lambda: stub.Evaluate(evaluate(adapters=[{"name": "a", "run_id": "locked"}]), timeout=60),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("adapters[0].run_id: run 'locked': unreadable run folder"), details
    details = refused(lambda: stub.Evaluate(evaluate(adapters=[{"name": "a", "run_id": "locked", "checkpoint_step": 1}]),
                                            timeout=60), grpc.StatusCode.FAILED_PRECONDITION)
    assert "run 'locked': unreadable run folder" in details, details


def test_a_file_the_sidecar_may_not_read_is_refused_naming_the_field_not_the_servers_path(box):
    """Issue 44, item 5: a run folder readable at the start whose adapter/ or worker.log is not was
    FAILED_PRECONDITION `<absolute path>: Permission denied` from DownloadArtifact and Evaluate:
    no field, and the server's absolute paths shown to a client. Each refusal names the request
    field and shows the file relative to the runs root."""
    sc, stub, root = box
    asks = {
        "run_id": lambda: list(stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="shut", path="worker.log"),
                                                     timeout=30)),
        "adapters[0].run_id": lambda: list(stub.Evaluate(evaluate(adapters=[{"name": "a", "run_id": "shut"}]),
                                                         timeout=60)),
        "adapter.run_id": lambda: list(stub.SampleGroups(json_format.ParseDict(
            {"adapter": {"run_id": "shut"}, "prompts": ["x"], "k": 2},
            pb.SampleGroupsRequest()), timeout=60)),
    }
    for field, ask in asks.items():
        details = refused(ask, grpc.StatusCode.FAILED_PRECONDITION)
        assert details.startswith(f"{field}: run 'shut': "), details
        assert "permission denied" in details.lower(), details
        assert str(root) not in details and "/runs/" not in details, details
    for run in runs_by_id(stub).values():  # every reason a client reads, the unreadable ones included
        assert str(root) not in run.reason, run.reason
    details = refused(lambda: stub.Evaluate(evaluate(adapters=[{"name": "a", "run_id": "locked"}]), timeout=60),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("adapters[0].run_id: run 'locked': ") and str(root) not in details, details


def test_a_delete_that_cannot_finish_says_so_and_leaves_no_trash(box):
    sc, stub, _ = box
    details = refused(lambda: stub.DeleteRun(pb.DeleteRunRequest(run_id="sealed"), timeout=30),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("run_id: run 'sealed' cannot be deleted:") and "kept" in details, details
    assert str(sc.runs_root) not in details, details
    assert "nothing was removed" in details
    details = refused(lambda: stub.DeleteRun(pb.DeleteRunRequest(run_id="locked"), timeout=30),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("run_id: run 'locked' cannot be deleted:"), details
    assert str(sc.runs_root) not in details, details  # issue 44 item 5: no server path shown to a client
    assert (sc.runs_root / "sealed" / "kept" / "file").exists() and (sc.runs_root / "locked").exists()
    assert not [p.name for p in sc.runs_root.iterdir() if ".deleted-" in p.name and "gone" not in p.name]
    assert runs_by_id(stub)["sealed"].state == pb.RUN_STATE_SUCCEEDED  # still listed, as it was


def test_the_startup_cleanup_names_a_trash_folder_it_cannot_remove(box):
    sc, _, _ = box
    assert "could not remove" in sc.log() and ".gone.deleted-0123abcd" in sc.log(), sc.log()[-2000:]


# ---------------------------------------------------------------------------------------------
# Item 3: Evaluate's progress and SampleGroups' groups stream as they happen


def test_evaluate_progress_and_sample_groups_arrive_as_they_happen(box):
    _, stub, _ = box
    # warm the inference worker first: its start (imports) must not count as streaming
    list(stub.Evaluate(evaluate(), timeout=300))
    t0, seen = time.monotonic(), []
    for resp in stub.Evaluate(evaluate(tasks={"jsonl_path": "tasks.jsonl", "split": "test", "limit": 10},
                                       samples_per_task=4, batch_size=1, max_new_tokens=48, temperature=1.0),
                              timeout=300):
        seen.append((time.monotonic() - t0, resp.WhichOneof("kind")))
    progress = [t for t, kind in seen if kind == "progress"]
    result_at = next(t for t, kind in seen if kind == "result")
    assert len(progress) >= 6, seen
    # all of them arrived within 50 ms of the result before (the worker flushed only at the end); as
    # shares of the call's time, so a faster machine does not fail it
    assert progress[0] < 0.5 * result_at and progress[-1] - progress[0] > 0.3 * result_at, seen
    t0, arrivals = time.monotonic(), []
    for _ in stub.SampleGroups(pb.SampleGroupsRequest(prompts=[f"Case {i}: a b c" for i in range(4)], k=2,
                                                      max_new_tokens=48, temperature=1.0), timeout=300):
        arrivals.append(time.monotonic() - t0)
    assert len(arrivals) == 4 and arrivals[-1] - arrivals[0] > 0.3 * arrivals[-1], arrivals


# ---------------------------------------------------------------------------------------------
# Item 7: paths inside the runs root resolve inside it


def test_symlinks_out_of_the_runs_root_are_never_followed(box):
    sc, stub, root = box
    linked = runs_by_id(stub)["linked"]
    assert linked.state == pb.RUN_STATE_FAILED and "is a symlink" in linked.reason, linked.reason
    details = refused(lambda: stub.DownloadArtifact(pb.DownloadArtifactRequest(run_id="linked", path="secret.txt"),
                                                    timeout=30), grpc.StatusCode.FAILED_PRECONDITION)
    assert "is a symlink" in details, details
    details = refused(lambda: stub.Evaluate(evaluate(adapters=[{"name": "a", "run_id": "ckpt", "checkpoint_step": 2}]), timeout=120),
                      grpc.StatusCode.INVALID_ARGUMENT)
    assert details.startswith("adapters[0].checkpoint_step: 'checkpoints/checkpoint-2' resolves outside"), details
    stub.DeleteRun(pb.DeleteRunRequest(run_id="linked"), timeout=30)
    assert not os.path.lexists(sc.runs_root / "linked")
    assert not [p.name for p in sc.runs_root.iterdir() if p.name.startswith(".linked.")]  # no trash-named link
    assert (root / "outside" / "linked-target" / "secret.txt").exists()  # what it pointed to is untouched


# ---------------------------------------------------------------------------------------------
# Item 6: the stored request and events are not trusted too much


def test_a_folder_whose_events_name_another_run_is_unreadable(box):
    _, stub, _ = box
    foreign = runs_by_id(stub)["foreign"]
    assert foreign.state == pb.RUN_STATE_FAILED, foreign
    assert "names run 'someone-else'" in foreign.reason, foreign.reason
    assert [e.event.run_id for e in stub.WatchRun(pb.WatchRunRequest(run_id="foreign"), timeout=10)] == []


def test_resume_refuses_a_request_that_no_longer_matches_its_events(box):
    _, stub, _ = box
    details = refused(lambda: stub.ResumeRun(pb.ResumeRunRequest(run_id="tampered"), timeout=30),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("request.json: has no stored digest") and "learning_rate is 0.5" in details, details
    details = refused(lambda: stub.ResumeRun(pb.ResumeRunRequest(run_id="renamed"), timeout=30),
                      grpc.StatusCode.FAILED_PRECONDITION)
    assert details.startswith("request.json:") and "names run 'another-run'" in details, details
    shown = stub.GetRun(pb.GetRunRequest(run_id="tampered"), timeout=10).run  # the edit is never shown as what ran
    assert shown.state == pb.RUN_STATE_FAILED and shown.reason.startswith(
        "unreadable run folder: request.json: has no stored digest"), shown.reason
    assert shown.request.grpo.learning_rate != 0.5, shown.request
