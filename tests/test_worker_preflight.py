"""The worker's memory preflight (issue 23): a GRPO run on CUDA fails before its model loads when
the estimate exceeds the device's free memory, naming the knob to lower; on CPU, or for a base
whose config.json is not local, the run goes on."""

from __future__ import annotations

import json

import pytest

from _builders import small_request
from py_trainer.core.errors import FailedPrecondition
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.workers import memory_estimate
from py_trainer.workers import train_worker as worker

QWEN25_05B = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896, "num_hidden_layers": 24,
              "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
              "tie_word_embeddings": True, "max_position_embeddings": 32768}
GIB = 1 << 30


@pytest.fixture
def request_on(tmp_path, monkeypatch):
    """A validated request for a local Qwen2.5-0.5B-shaped base (config.json only), and the training
    that must not start when the preflight refuses."""
    from py_trainer.server.validate import validate_train_request

    (tmp_path / "qwen").mkdir()
    (tmp_path / "qwen" / "config.json").write_text(json.dumps(QWEN25_05B))
    req = validate_train_request(small_request("mem", max_completion_length=2048), tmp_path)
    req.base_model = "qwen"
    started = []
    monkeypatch.setattr(worker, "load_request", lambda run_dir: req)
    monkeypatch.setattr(worker, "run_training", lambda *a, **k: started.append(1) or pb.RUN_STATE_SUCCEEDED)

    def on(device: str, free: int):
        monkeypatch.setattr(memory_estimate, "device_memory", lambda _dev: (device, free, 80 * GIB))
        return started

    return on


def test_too_little_free_cuda_memory_fails_before_the_model_loads(tmp_path, request_on):
    started = request_on("cuda:0", 1 * GIB)
    with pytest.raises(FailedPrecondition) as ei:
        worker.train_run(tmp_path / "run", tmp_path, emit=lambda ev: None, should_stop=lambda: False)
    assert ei.value.field == "grpo.per_device_train_batch_size"
    assert "exceeds the 1.00 GiB free on cuda:0" in str(ei.value)
    assert started == []
    assert "lower grpo.per_device_train_batch_size" in worker.failure_reason(ei.value)


def test_enough_memory_or_a_cpu_run_trains(tmp_path, request_on):
    assert request_on("cuda:0", 79 * GIB) is not None
    worker.train_run(tmp_path / "run", tmp_path, emit=lambda ev: None, should_stop=lambda: False)
    started = request_on("cpu", 1 * GIB)  # never enforced on CPU
    worker.train_run(tmp_path / "run", tmp_path, emit=lambda ev: None, should_stop=lambda: False)
    assert started == [1, 1]


def test_a_base_without_a_local_config_is_not_estimated_and_trains(tmp_path, request_on, monkeypatch):
    started = request_on("cuda:0", 1 * GIB)
    monkeypatch.setattr(memory_estimate, "model_files_folder", lambda path: None, raising=False)
    import py_trainer.models.loading as models

    monkeypatch.setattr(models, "model_files_folder", lambda path: None)
    worker.train_run(tmp_path / "run", tmp_path, emit=lambda ev: None, should_stop=lambda: False)
    assert started == [1]
