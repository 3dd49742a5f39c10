"""Batched sampling from a causal LM (base or PEFT adapter), shared by training and evaluation.

Prompts are left-padded and generated in batches; each prompt gets `k` samples via
`num_return_sequences`. The torch generator is re-seeded per batch from (seed, batch index), so
the same call gives the same completions whether it runs before or after other work, which is
what makes step-0 vs end held-out rewards comparable.
"""

from __future__ import annotations

import math
from typing import Callable

import torch


def pick_device(device: str) -> torch.device:
    """"auto" -> cuda when available, else cpu."""
    if device in ("", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(precision: str, device: torch.device) -> torch.dtype:
    """Empty precision = fp32 on CPU, bf16 on CUDA."""
    if not precision:
        precision = "bf16" if device.type == "cuda" else "fp32"
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


@torch.no_grad()
def generate_completions(model, tokenizer, prompts: list[str], *, k: int = 1, temperature: float = 1.0,
                         top_p: float = 1.0, max_new_tokens: int = 32, seed: int = 0, batch_size: int = 64,
                         max_prompt_length: int | None = None,
                         on_batch: Callable[[int], None] | None = None) -> list[list[str]]:
    """Return `k` decoded completions per prompt (special tokens stripped), in prompt order.

    temperature 0 means greedy decoding (then all k samples are identical; pass k=1).
    """
    was_training = model.training
    model.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = next(model.parameters()).device
    out: list[list[str]] = []
    greedy = temperature == 0
    for b, start in enumerate(range(0, len(prompts), batch_size)):
        batch = prompts[start:start + batch_size]
        enc = tokenizer(batch, return_tensors="pt", padding=True, truncation=max_prompt_length is not None,
                        max_length=max_prompt_length, add_special_tokens=False).to(device)
        torch.manual_seed((seed * 1_000_003 + b) % 2**63)
        gen = model.generate(
            **enc,
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None if greedy else top_p,
            top_k=None if greedy else 0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=k,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
        for i in range(len(batch)):
            out.append(texts[i * k:(i + 1) * k])
        if on_batch:
            on_batch(min(start + batch_size, len(prompts)))
    if was_training:
        model.train()
    return out


def nanmean(xs: list[float]) -> float:
    good = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(good) / len(good) if good else math.nan
