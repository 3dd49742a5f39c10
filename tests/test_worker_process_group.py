"""The worker process closes its torch.distributed process group on every way out.

A rank that leaves Python with its gloo group still open can die in interpreter finalization
(SIGABRT: gloo's threads release tensors after the interpreter has gone; pytorch/pytorch#179291).
Seen in CI: rank 1 of a 2-rank CPU run, done before rank 0, exited -6 and failed the run.
"""

from __future__ import annotations

import pytest
import torch.distributed as dist

from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.workers import train_worker as worker


def _one_rank_group(tmp_path):
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    assert dist.is_initialized()


def test_a_single_process_worker_exits_normally(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "train_run", lambda *a, **k: pb.RUN_STATE_SUCCEEDED)
    monkeypatch.setattr(worker, "_die_with_parent", lambda: None)
    monkeypatch.setattr(worker, "_exit_now", lambda rc: pytest.fail("os._exit without a process group"))
    monkeypatch.delenv("PY_TRAINER_EVENTS_SOCK", raising=False)
    assert worker.main(["--run-dir", str(tmp_path / "run"), "--data-root", str(tmp_path)]) == 0


@pytest.mark.parametrize("outcome", ["succeeded", "failed", "stopped"])
def test_worker_main_destroys_the_process_group(tmp_path, monkeypatch, outcome):
    def fake_train_run(run_dir, data_root, emit, should_stop, *, resume=False):
        _one_rank_group(tmp_path)
        if outcome == "failed":
            raise RuntimeError("boom")
        if outcome == "stopped":
            raise worker.RunStopped()
        return pb.RUN_STATE_SUCCEEDED

    monkeypatch.setattr(worker, "train_run", fake_train_run)
    monkeypatch.setattr(worker, "_die_with_parent", lambda: None)
    exits = []
    monkeypatch.setattr(worker, "_exit_now", exits.append)  # the real one is os._exit
    monkeypatch.delenv("PY_TRAINER_EVENTS_SOCK", raising=False)
    try:
        worker.main(["--run-dir", str(tmp_path / "run"), "--data-root", str(tmp_path)])
        assert not dist.is_initialized(), "the worker left its process group open"
        # a rank leaves with os._exit after the teardown, with the run's exit code
        assert exits == [1 if outcome == "failed" else 0]
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
