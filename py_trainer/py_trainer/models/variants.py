"""Greedy completions of a base model and its LoRA adapters decoded in the same batches (issue 43).

On CPU a decode step's forward costs a fixed ~75 ms plus ~1.4 ms a row for SmolLM2-135M (2 cores,
fp32: reading every weight once per forward dominates a small batch; scripts/profile_decode_rows.py),
so an Evaluate of the base and one adapter, one variant after the other, pays the fixed part
twice per step. Here every batch of prompts is decoded once for all variants: the batch holds
each prompt once per variant, variant after variant, so each variant's rows are one contiguous
block. The model runs with its adapters disabled (each LoRA layer gives its base layer's output)
and a forward hook on every LoRA layer adds each adapter's `lora_B(lora_A(x)) * scaling` to its
own block of rows, in place: the same arithmetic per row as `set_adapter` gives (PEFT's vanilla
LoRA forward), and for the base's rows nothing is added, as under `disable_adapter`. (PEFT's own
mixed-batch forward, `adapter_names`, gathers and scatters rows by index in every layer: measured
here, that ate the gain.) Each variant's rows start from its own cache of the shared prompt prefix
(an adapter's keys and values of it differ from the base's). The rest is `decoding.greedy_decode`:
rows that ended leave the batch, whichever variant they belong to.

Completions are those of `loading.generate_completions` run per variant, token for token
(tests/test_generation_speed.py, tests/test_evaluate.py; on SmolLM2 the bench compares all 200
tasks of both variants with lm-evaluation-harness and plain `generate`). It runs where greedy
decoding runs its own loop (`decoding.greedy_search_is_plain`), on CPU, for a PeftModel of plain
LoRA linear layers (no DoRA or other variant, nothing merged); `evaluate.run_evaluation` decides.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

from py_trainer.models.loading import SHARED_PREFIX_MIN_TOKENS, pad_batch, prefix_cache, shared_prefix_length

BASE = "__base__"
"""The name of a row that takes no adapter (PEFT's own marker for it)."""


def decode_together(model, variants: list[str | None]) -> bool:
    """Whether `variants` (None: the base model; else an adapter's name) of `model` can be decoded
    greedily in shared batches: more than one, a PeftModel of LoRA adapters with none merged and
    no DoRA, on which greedy search is plain (`greedy_search_is_plain`), on CPU (a batch holds
    batch_size x variants rows; on a GPU the user's batch_size is sized to its memory for one)."""
    from py_trainer.models.decoding import greedy_search_is_plain

    if len(variants) < 2 or not hasattr(model, "peft_config") or not greedy_search_is_plain(model):
        return False
    if next(model.parameters()).device.type != "cpu":  # a GPU batch is sized to its memory for one variant
        return False
    try:
        from peft.tuners.lora import LoraLayer
    except ImportError:
        return False
    if any(getattr(config, "peft_type", None) != "LORA" for config in model.peft_config.values()):
        return False
    for module in model.modules():
        if isinstance(module, LoraLayer):
            if module.merged or any(module.use_dora.values()) or module.lora_variant \
                    or type(module).__name__ != "Linear" or module.lora_embedding_A:
                return False
    return True


class RowAdapters:
    """While entered: `model`'s adapters disabled, and every LoRA linear layer adding each
    adapter's output to its own contiguous block of batch rows (`names`: each row's adapter or
    BASE, variant after variant; `keep` narrows them as rows leave the batch)."""

    def __init__(self, model, names: list[str]):
        self.model, self.names, self.hooks, self.disabled = model, list(names), [], None

    def keep(self, rows: list[int]) -> None:
        self.names = [self.names[i] for i in rows]

    def blocks(self) -> list[tuple[str, int, int]]:
        out, start = [], 0
        for i in range(1, len(self.names) + 1):
            if i == len(self.names) or self.names[i] != self.names[start]:
                if self.names[start] != BASE:
                    out.append((self.names[start], start, i))
                start = i
        return out

    def add_lora(self, layer, args, output):
        x = args[0]
        for name, start, end in self.blocks():
            if name in layer.lora_A:
                a = layer.lora_A[name]
                part = x[start:end].to(a.weight.dtype)
                output[start:end] += (layer.lora_B[name](a(layer.lora_dropout[name](part))) * layer.scaling[name]).to(
                    output.dtype)
        return output

    def __enter__(self):
        from peft.tuners.lora import LoraLayer

        self.disabled = self.model.disable_adapter()
        self.disabled.__enter__()
        self.hooks = [m.register_forward_hook(self.add_lora) for m in self.model.modules() if isinstance(m, LoraLayer)]
        return self

    def __exit__(self, *exc):
        for hook in self.hooks:
            hook.remove()
        self.disabled.__exit__(*exc)


def generate_greedy_variants(model, tokenizer, prompts: list[str], variants: list[str | None], *,
                             max_new_tokens: int = 32, batch_size: int = 64,
                             on_batch: Callable[[int], None] | None = None) -> list[list[str]]:
    """Greedy completions (special tokens stripped) of every prompt for each variant: one list per
    variant, in `variants` order, each in prompt order. Prompts are batched longest first, as
    `generate_completions` batches greedy prompts; a batch of `batch_size` prompts decodes
    len(variants) rows per prompt. `on_batch(done)`: prompts finished so far, after every batch."""
    import torch

    from py_trainer.models.decoding import greedy_decode

    model.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = next(model.parameters()).device
    names = [BASE if v is None else v for v in variants]
    ids = tokenizer(list(prompts), add_special_tokens=False)["input_ids"] if prompts else []
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    out: list[list[str]] = [[""] * len(ids) for _ in names]
    with torch.no_grad():
        shared_len = shared_prefix_length(ids)
        prefixes = []
        if shared_len >= SHARED_PREFIX_MIN_TOKENS:
            for name in names:
                with RowAdapters(model, [name]):
                    prefixes.append(prefix_cache(model, ids[0][:shared_len], device))
        if not prefixes or any(p is None for p in prefixes):
            prefixes, shared_len = [], 0
        for start in range(0, len(order), batch_size):
            batch = order[start:start + batch_size]
            input_ids, mask = pad_batch([ids[i] for i in batch], shared_len, tokenizer.pad_token_id, device)
            rows = len(batch)
            with RowAdapters(model, [name for name in names for _ in batch]) as adapters:
                gen = greedy_decode(model, input_ids.repeat(len(names), 1), mask.repeat(len(names), 1),
                                    cached=shared_len, prefix=per_row_prefix(prefixes, rows),
                                    max_new_tokens=max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                                    pad_token_id=tokenizer.pad_token_id, on_rows_left=adapters.keep)
            texts = tokenizer.batch_decode(gen, skip_special_tokens=True)
            for v in range(len(names)):
                for j, i in enumerate(batch):
                    out[v][i] = texts[v * rows + j]
            if on_batch:
                on_batch(min(start + batch_size, len(prompts)))
    return out


def per_row_prefix(prefixes: list, rows: int):
    """One cache-like object holding each variant's one-row prefix cache `rows` times, variant after
    variant (the rows' order in the batch), for `decoding.growing_cache`; None without prefixes."""
    if not prefixes:
        return None
    import torch

    layers = []
    for per_variant in zip(*(p.layers for p in prefixes)):
        keys = torch.cat([layer.keys.expand(rows, -1, -1, -1) for layer in per_variant])
        values = torch.cat([layer.values.expand(rows, -1, -1, -1) for layer in per_variant])
        layers.append(SimpleNamespace(keys=keys, values=values))
    return SimpleNamespace(layers=layers)
