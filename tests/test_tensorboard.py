"""TensorBoard: `runtime.report_to` reaches TrainingArguments (default "tensorboard"), the event
files land in the run folder's tensorboard/, are listed as artifacts (so the TS agent downloads
them), and hold TRL's own curves: read back with tensorboard's EventAccumulator."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml
from google.protobuf import json_format

from py_trainer.core import config
from py_trainer.core.errors import InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.training.skeleton import trainer_args
from _builders import small_request
from _sidecar import REPO, read_events, sidecar_env


def test_report_to_defaults_to_tensorboard_and_none_means_nowhere(tmp_path):
    rt = pb.RuntimeSettings()
    config.check_runtime(rt)
    assert list(rt.report_to) == ["tensorboard"]
    import torch

    args = trainer_args(tmp_path, torch.device("cpu"), torch.float32, pb.GrpoConfig(max_steps=2), ["none"])
    assert args["report_to"] == []
    with pytest.raises(InvalidArgument, match=r"runtime.report_to\[0\]: must be one of"):
        config.check_runtime(pb.RuntimeSettings(report_to=["tensorbored"]))


@pytest.mark.slow
def test_standalone_train_writes_tensorboard_events_with_trl_curves(tmp_path, tiny_model_home):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    req = small_request("tb", max_steps=3)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(yaml.safe_dump(json_format.MessageToDict(req, preserving_proto_field_name=True)))
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "train", "--config", str(cfg),
                           "--runs-root", str(tmp_path / "runs"), "--data-root", str(tmp_path)],
                          capture_output=True, text=True, cwd=REPO, timeout=600,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    # The live line, not Hugging Face's log dicts; the ETA counts training steps only.
    assert "{'" not in proc.stdout, proc.stdout
    assert "step 3/3 reward " in proc.stdout and " ETA 0:00" in proc.stdout, proc.stdout
    folder = tmp_path / "runs" / "tb"
    files = sorted((folder / "tensorboard").glob("events.out.tfevents.*"))
    assert files, list(folder.iterdir())
    acc = EventAccumulator(str(folder / "tensorboard"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {"train/reward", "train/kl", "train/loss"} <= set(tags), tags
    assert [e.step for e in acc.Scalars("train/reward")] == [1, 2, 3]
    # Listed as artifacts with size and sha256, like every other file of the run.
    result = next(e.result for e in read_events(folder) if e.WhichOneof("kind") == "result")
    listed = {a.path for a in result.artifacts}
    assert {str(f.relative_to(folder)) for f in files} <= listed, listed
