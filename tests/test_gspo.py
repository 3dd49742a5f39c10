"""TRL 1.16's knobs train (issue 23): a tiny GSPO run (importance_sampling_level: sequence, two
policy updates per generation batch, top-k and repetition-penalised rollouts) through
`py-trainer train --config`, with real TRL + PEFT."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from google.protobuf import json_format

from _builders import small_request
from _sidecar import REPO, read_events, sidecar_env
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

pytestmark = pytest.mark.slow


def test_a_gspo_run_trains(tmp_path, tiny_model_home):
    req = small_request("gspo", max_steps=2, importance_sampling_level="sequence", num_iterations=2, top_k=20,
                        repetition_penalty=1.05)
    (tmp_path / "run.json").write_text(json_format.MessageToJson(req, preserving_proto_field_name=True))
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "train", "--config", "run.json", "--runs-root",
                           str(tmp_path / "runs"), "--data-root", "."], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = tmp_path / "runs" / "gspo"
    stored = json.loads((folder / "request.json").read_text())["grpo"]
    assert (stored["importance_sampling_level"], stored["num_iterations"], stored["top_k"]) == ("sequence", 2, 20)
    events = read_events(folder)
    steps = [e.train_step for e in events if e.WhichOneof("kind") == "train_step"]
    assert [s.step for s in steps] == [1, 2]
    assert all(math.isfinite(s.metrics["loss"]) for s in steps), [dict(s.metrics) for s in steps]
    assert events[-1].state_change.state == pb.RUN_STATE_SUCCEEDED
    assert (folder / "adapter" / "adapter_model.safetensors").is_file()
