"""Malformed Train requests: each gets the right gRPC status and names the offending field.

No training happens here: every request is refused before a run is created, and the test checks
that no run folder appeared.
"""

from __future__ import annotations

import json
import os
import shutil

import grpc
import pytest
from google.protobuf import json_format

from _sidecar import REPO, running_sidecar
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


def rows(n=40):
    out = []
    for line in TASKS.read_text().splitlines()[:n]:
        obj = json.loads(line)
        out.append({"id": obj["id"], "prompt": obj["prompt"], "answers": obj["answers"]})
    return out


def req(**overrides) -> pb.TrainRequest:
    base = {"dataset": {"inline": {"rows": rows()}}, "grpo": {"max_steps": 2}, "held_out": {"num_prompts": 4}}
    for key, value in overrides.items():
        node = base
        parts = key.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        if value is DELETE:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value
    return json_format.ParseDict(base, pb.TrainRequest())


DELETE = object()
bad_row = {"id": "x", "prompt": "  ", "answers": ["a"]}

CASES = [
    # (overrides, status, field prefix of the message)
    ({"run_id": "../escape"}, grpc.StatusCode.INVALID_ARGUMENT, "run_id:"),
    ({"run_id": "has space"}, grpc.StatusCode.INVALID_ARGUMENT, "run_id:"),
    ({"dataset": DELETE}, grpc.StatusCode.INVALID_ARGUMENT, "dataset:"),
    ({"dataset": {}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset:"),
    ({"dataset": {"inline": {"rows": []}}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset:"),
    ({"dataset": {"inline": {"rows": [bad_row] + rows()}}}, grpc.StatusCode.INVALID_ARGUMENT,
     "dataset.inline.rows[0].prompt:"),
    ({"dataset": {"inline": {"rows": rows() + [{"id": "y", "prompt": "p", "answers": []}]}}},
     grpc.StatusCode.INVALID_ARGUMENT, "dataset.inline.rows[40].answers:"),
    ({"dataset": {"jsonl_path": "../../etc/passwd"}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset.jsonl_path:"),
    ({"dataset": {"jsonl_path": "/etc/passwd"}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset.jsonl_path:"),
    ({"dataset": {"jsonl_path": "escape-link/passwd"}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset.jsonl_path:"),
    ({"dataset": {"jsonl_path": "missing.jsonl"}}, grpc.StatusCode.NOT_FOUND, "dataset.jsonl_path:"),
    ({"dataset": {"jsonl_path": "broken.jsonl"}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset.jsonl_path:"),
    ({"dataset": {"jsonl_path": "tasks.jsonl", "split": "nope"}}, grpc.StatusCode.INVALID_ARGUMENT, "dataset:"),
    ({"base_model": "../outside"}, grpc.StatusCode.INVALID_ARGUMENT, "base_model:"),
    ({"mode": 7}, grpc.StatusCode.INVALID_ARGUMENT, "mode:"),
    ({"rewards": [{"name": "no_such_reward"}]}, grpc.StatusCode.INVALID_ARGUMENT, "rewards[0].name:"),
    ({"rewards": [{"name": "exact_match", "params": {"no_such_param": 1}}]}, grpc.StatusCode.INVALID_ARGUMENT,
     "rewards[0].params.no_such_param:"),
    ({"rewards": [{"name": "exact_match"}, {"name": "exact_match"}]}, grpc.StatusCode.INVALID_ARGUMENT,
     "rewards[1].name:"),
    ({"rewards": [{"name": "exact_match", "weight": "NaN"}]}, grpc.StatusCode.INVALID_ARGUMENT, "rewards[0].weight:"),
    ({"grpo.num_generations": 1}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.num_generations:"),
    ({"grpo.beta": -0.1}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.beta:"),
    ({"grpo.epsilon": 0}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.epsilon:"),
    ({"grpo.loss_type": "ppo"}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.loss_type:"),
    ({"grpo.scale_rewards": "per-token"}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.scale_rewards:"),
    ({"grpo.learning_rate": 0}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.learning_rate:"),
    ({"grpo.max_steps": 0}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.max_steps:"),
    ({"grpo.per_device_train_batch_size": 12}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.per_device_train_batch_size:"),
    ({"grpo.temperature": 0}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.temperature:"),
    ({"grpo.top_p": 1.5}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.top_p:"),
    ({"grpo.warmup_ratio": 1.0}, grpc.StatusCode.INVALID_ARGUMENT, "grpo.warmup_ratio:"),
    ({"lora.r": 0}, grpc.StatusCode.INVALID_ARGUMENT, "lora.r:"),
    ({"lora.dropout": 1.0}, grpc.StatusCode.INVALID_ARGUMENT, "lora.dropout:"),
    ({"lora.target_modules": ["q_proj", "bad module"]}, grpc.StatusCode.INVALID_ARGUMENT, "lora.target_modules[1]:"),
    ({"runtime.device": "tpu"}, grpc.StatusCode.INVALID_ARGUMENT, "runtime.device:"),
    ({"runtime.device": "cuda"}, grpc.StatusCode.FAILED_PRECONDITION, "runtime.device:"),
    ({"runtime.precision": "int4"}, grpc.StatusCode.INVALID_ARGUMENT, "runtime.precision:"),
    ({"held_out.num_prompts": 40}, grpc.StatusCode.INVALID_ARGUMENT, "held_out.num_prompts:"),
    ({"held_out.samples_per_prompt": 0}, grpc.StatusCode.INVALID_ARGUMENT, "held_out.samples_per_prompt:"),
]


@pytest.fixture(scope="module")
def sidecar(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reqs")
    data = tmp / "data"
    data.mkdir()
    shutil.copy(TASKS, data / "tasks.jsonl")
    lines = TASKS.read_text().splitlines()[:5]
    lines[2] = '{"id": "broken", "prompt": '
    (data / "broken.jsonl").write_text("\n".join(lines) + "\n")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("secret\n")
    os.symlink(outside, data / "escape-link")
    with running_sidecar(tmp) as sc:
        yield sc


@pytest.mark.parametrize("overrides,code,field", CASES, ids=[c[2] + str(i) for i, c in enumerate(CASES)])
def test_malformed_train_request(sidecar, overrides, code, field):
    assert len(CASES) >= 15
    if "runtime.device" in overrides and overrides["runtime.device"] == "cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
    with grpc.insecure_channel(sidecar.address) as ch:
        stub = pb_grpc.TrainerServiceStub(ch)
        with pytest.raises(grpc.RpcError) as ei:
            list(stub.Train(req(**overrides), timeout=60))
    assert ei.value.code() == code, ei.value.details()
    assert ei.value.details().startswith(field), ei.value.details()
    if field == "dataset.jsonl_path:" and overrides["dataset"]["jsonl_path"] == "broken.jsonl":
        assert "line 3" in ei.value.details()
    # Nothing was created for a refused request.
    assert [p for p in sidecar.runs_root.iterdir() if not p.name.startswith(".")] == []
