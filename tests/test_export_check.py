"""`export --merge` verifies the merged model (issue 23): loaded from disk next to base + adapter,
identical greedy completions and logits within the dtype's tolerance on N test prompts; a merged
weight that was corrupted fails with the first differing prompt named, and nothing is written."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _sidecar import REPO, sidecar_env
from py_trainer.models.tiny_model import default_tasks_path
from py_trainer.server.standalone import verify_export
from py_trainer.workers.export_check import MergeMismatch, check_prompts

pytestmark = pytest.mark.slow


def random_adapter(model_dir, out):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(model_dir)),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
                                      task_type="CAUSAL_LM"))
    model.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def adapter(tmp_path_factory, tiny_model_dir):
    """One random adapter for the module (both tests only read it)."""
    return random_adapter(tiny_model_dir, tmp_path_factory.mktemp("export-check") / "adapter")


def test_merged_model_passes_and_a_corrupted_weight_fails_naming_the_prompt(tmp_path, adapter, tiny_model_dir,
                                                                            tiny_model_home):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "export", "--adapter", str(adapter), "--out",
                           str(tmp_path / "merged"), "--merge", "--base-model", "", "--check-prompts", "8"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "checked on 8 test prompts: greedy completions identical" in proc.stdout
    check = json.loads((tmp_path / "merged" / "export-check.json").read_text())
    assert (check["passed"], check["prompts"], check["split"], check["dtype"]) == (True, 8, "test", "float32")
    assert check["greedy_identical"] and check["logits_within_tolerance"] and check["max_abs_logit_diff"] < 1e-3
    assert not (tmp_path / "merged.export-check.json").exists()

    # one merged weight nudged: a merger that wrote the wrong tensor
    model = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    with torch.no_grad():
        w = model.model.layers[0].self_attn.v_proj.weight
        w.add_(0.05 * torch.randn(w.shape, generator=torch.Generator().manual_seed(1)))
    model.save_pretrained(tmp_path / "corrupted")
    AutoTokenizer.from_pretrained(str(tmp_path / "merged")).save_pretrained(tmp_path / "corrupted")
    rows = check_prompts(default_tasks_path(), "test", 8)
    with pytest.raises(MergeMismatch) as ei:  # export --merge's own check, on the corrupted folder
        verify_export(str(tiny_model_dir), adapter, tmp_path / "corrupted", tmp_path / "shipped", rows, {"split": "test"})
    assert json.loads((tmp_path / "shipped.export-check.json").read_text()) == {**ei.value.result, "split": "test"}
    assert not (tmp_path / "corrupted" / "export-check.json").exists()
    first = ei.value.result["first_differing_prompt"]
    assert first["id"] == rows[first["index"]].id
    assert f"test prompt {first['index']} (id {rows[first['index']].id!r})" in str(ei.value)
    assert ei.value.result["passed"] is False and ei.value.result["logits_within_tolerance"] is False
    assert str(ei.value).startswith("--merge: the merged model differs from base + adapter")


def test_a_check_task_file_that_is_not_there_is_one_line_exit_2(tmp_path, adapter, tiny_model_home):
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "export", "--adapter", str(adapter), "--out",
                           str(tmp_path / "merged"), "--merge", "--base-model", "", "--check-tasks", "nope.jsonl"],
                          capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 2 and "--check-tasks" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "merged").exists()
