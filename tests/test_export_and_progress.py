"""`py-trainer export` (a PEFT folder, or merged with peft's merge_and_unload into a model that
AutoModelForCausalLM.from_pretrained loads) and the standalone progress line (mode-aware; ETA
from training steps only; off a TTY at most one line per N steps or 10 s)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from _sidecar import REPO, sidecar_env
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.server.progress import ProgressLine, TrainProgress


@pytest.mark.slow
def test_export_merge_loads_with_from_pretrained_and_matches_the_adapter(tmp_path, tiny_model_dir, tiny_model_home):
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    peft_model = get_peft_model(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)),
                                LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                           init_lora_weights=False, task_type="CAUSAL_LM"))
    peft_model.save_pretrained(tmp_path / "adapter")
    env = sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))
    for args, out in (([], "plain"), (["--merge", "--base-model", ""], "merged")):
        proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "export", "--adapter", str(tmp_path / "adapter"),
                               "--out", str(tmp_path / out), *args], capture_output=True, text=True, cwd=REPO,
                              timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        # issue 45 item 6: transformers' "Loading weights"/"Writing model shards" bars and its
        # FutureWarnings went to the user's terminal (agent export inherits this output)
        assert proc.stderr == "", proc.stderr[-2000:]
        assert len(proc.stdout.splitlines()) == 1 and proc.stdout.startswith("wrote "), proc.stdout
    assert (tmp_path / "plain" / "adapter_config.json").is_file()
    merged = AutoModelForCausalLM.from_pretrained(str(tmp_path / "merged"))
    assert not any("lora_" in n for n, _ in merged.named_parameters())
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(str(tiny_model_dir)),
                                        str(tmp_path / "plain"))
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, adapted(ids).logits, atol=1e-4, rtol=1e-4)
    assert (tmp_path / "merged" / "tokenizer.json").is_file() or (tmp_path / "merged" / "tokenizer_config.json").is_file()
    # a second export onto the same folder is refused (one line, exit 2), the folder untouched
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "export", "--adapter", str(tmp_path / "adapter"),
                           "--out", str(tmp_path / "plain")], capture_output=True, text=True, cwd=REPO, env=env)
    assert proc.returncode == 2 and "exists and is not empty" in proc.stderr


def test_train_line_is_mode_aware_and_eta_skips_the_step0_measurement():
    grpo = TrainProgress(pb.TRAIN_MODE_GRPO, ProgressLine(io.StringIO()))
    grpo.t0 = 0.0
    # the first train step arrives 60 s in (model load + step-0 measurement): no rate yet
    assert grpo.text(1, 10, {"reward": 0.5, "kl": 0.01}, 60.0) == "step 1/10 reward 0.500 kl 0.0100 elapsed 1:00 ETA -:--"
    # then 2 s per step: 8 steps left = 16 s, not (62 s / 2 steps) * 8
    assert grpo.text(2, 10, {"reward": 0.5, "kl": 0.01}, 62.0).endswith("elapsed 1:02 ETA 0:16")
    pref = TrainProgress(pb.TRAIN_MODE_RANKED_PREFERENCE, ProgressLine(io.StringIO()))
    line = pref.text(0, 100, {"heldout/pairwise_accuracy": 0.625}, 5.0)
    assert line.startswith("step 0/100 heldout/pairwise_accuracy 0.625") and "nan" not in line and "reward" not in line.split("heldout")[0]


def test_off_a_tty_one_line_every_n_steps_or_10_s():
    out = io.StringIO()
    line = ProgressLine(out, every_steps=5, every_s=10.0)
    for i in range(1, 13):
        line.update(f"step {i}", force=i == 12)
    # the first update (no line shown yet), every 5th, and the forced last one
    assert out.getvalue().splitlines() == ["step 1", "step 5", "step 10", "step 12"]


@pytest.mark.slow
def test_data_sample_reports_progress(tmp_path, tiny_model_home):
    req = tmp_path / "sample.yaml"
    req.write_text("prompts: ['Case: cash deposits just under the threshold.\\n', 'Case: wires out again.\\n']\n"
                   "k: 2\nmax_new_tokens: 8\nseed: 3\n")
    proc = subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "data", "sample", str(req), str(tmp_path / "g.jsonl"),
                           "--data-root", str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=300,
                          env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert any(l.startswith("sampled 1/2 prompts x 2 responses, elapsed ") for l in lines), proc.stdout
    assert any(l.startswith("sampled 2/2 prompts x 2 responses, elapsed ") for l in lines), proc.stdout
