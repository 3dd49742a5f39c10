"""Model and adapter folders that are damaged the ways users meet them (issue 22, item 7), for the
bad-request corpus: each one a real PEFT LoRA layout on the embedded model's q_proj, written with
safetensors directly (no model is built), then broken in one way."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

HIDDEN = 128
"""The embedded model's hidden size (tests/test_tiny_model.py pins its shape)."""


def lora_adapter(folder: Path, *, r: int = 4, config_r: int | None = None, module: str = "q_proj",
                 b_value: float = 0.0) -> Path:
    """A LoRA adapter on every layer's self_attn.<module> of the embedded model."""
    folder.mkdir(parents=True)
    tensors = {}
    for layer in range(2):
        key = f"base_model.model.model.layers.{layer}.self_attn.{module}"
        tensors[f"{key}.lora_A.weight"] = np.full((r, HIDDEN), 0.01, np.float32)
        tensors[f"{key}.lora_B.weight"] = np.full((HIDDEN, r), b_value, np.float32)
    save_file(tensors, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})
    (folder / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "r": config_r or r, "lora_alpha": 8, "lora_dropout": 0.0,
        "target_modules": [module], "base_model_name_or_path": "", "bias": "none"}))
    return folder


def write_bad_models(data: Path, tiny_model_dir: Path) -> None:
    """Under `data`: rank-adapter (config r 8, weights r 4), foreign-adapter (adapts qq_proj, which
    the base lacks), trunc-adapter (weights cut short), nan-adapter (lora_B all NaN), good-adapter,
    and trunc-model (the embedded model with its weights cut short)."""
    lora_adapter(data / "good-adapter")
    lora_adapter(data / "rank-adapter", config_r=8)
    lora_adapter(data / "foreign-adapter", module="qq_proj")
    lora_adapter(data / "nan-adapter", b_value=float("nan"))
    trunc = lora_adapter(data / "trunc-adapter") / "adapter_model.safetensors"
    trunc.write_bytes(trunc.read_bytes()[:-1000])
    shutil.copytree(tiny_model_dir, data / "trunc-model")
    weights = data / "trunc-model" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
