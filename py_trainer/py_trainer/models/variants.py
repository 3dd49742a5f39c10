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
(an adapter's keys and values of it differ from the base's). The rest is `decoding.decode_batch`:
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
        self.every = self.names

    def window(self, start: int, end: int) -> None:
        """Forwards see rows [start, end) of the batch (a prefill in parts; `decoding.decode_batch`)."""
        self.names = self.every[start:end]

    def keep(self, rows: list[int]) -> None:
        self.names = self.every = [self.names[i] for i in rows]

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

    from py_trainer.models.decoding import decode_batch

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
        done = 0
        per_row = kv_bytes_per_position(model) * (len(ids[order[0]]) + max_new_tokens) if ids else 0
        for group in decode_groups([len(ids[i]) - shared_len for i in order], batch_size, len(names), per_row):
            batch = [order[j] for j in group]
            input_ids, mask = pad_batch([ids[i] for i in batch], shared_len, tokenizer.pad_token_id, device)
            rows = len(batch)
            with RowAdapters(model, [name for name in names for _ in batch]) as adapters:
                gen = decode_batch(model, input_ids.repeat(len(names), 1), mask.repeat(len(names), 1),
                                   cached=shared_len, prefix=per_row_prefix(prefixes),
                                   max_new_tokens=max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                                   pad_token_id=tokenizer.pad_token_id, on_rows_left=adapters.keep,
                                   prefill_rows=batch_size * len(names), on_prefill_rows=adapters.window)
            texts = tokenizer.batch_decode(gen, skip_special_tokens=True)
            for v in range(len(names)):
                for j, i in enumerate(batch):
                    out[v][i] = texts[v * rows + j]
            done += rows
            if on_batch:
                on_batch(done)
    return out


DECODE_KV_BYTES = 2 << 30
"""On CPU, the most KV cache one decode group of `generate_greedy_variants` holds (2 GiB): batches
are merged into one group while their cache fits, never below one batch."""
DECODE_ROWS = 512
"""... and the most rows (prompts x variants) a group decodes."""
PAD_SLACK = 8
"""A batch joins a group when its longest prompt is within 1/PAD_SLACK of the group's longest
(prompts sorted longest first): the rows it pads out stay a small share of the prefill."""


def kv_bytes_per_position(model) -> int:
    """Bytes of keys and values one row's position takes in `model`'s cache (fp32, every layer)."""
    config = model.config
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    return 2 * config.num_hidden_layers * kv_heads * head_dim * next(model.parameters()).element_size()


def decode_groups(lengths: list[int], batch_size: int, variants: int, row_bytes: int) -> list[list[int]]:
    """Indices into `lengths` (each prompt's own tokens, longest first) in decode groups: whole
    batches of `batch_size` prompts, prefilled one batch (x variants rows) per forward, then decoded
    together. A decode step costs a fixed part (reading every weight) plus a part per row: on
    SmolLM2-135M on 2 cores ~60 ms + ~1.2 ms a row (scripts/profile_decode_rows.py), so one group
    of 400 rows takes a quarter of the forwards four batches of 100 took. A batch joins the group
    while the group's rows stay within DECODE_ROWS, their cache (`row_bytes` a row) within
    DECODE_KV_BYTES, and its longest prompt within 1/PAD_SLACK of the group's longest."""
    groups: list[list[int]] = []
    for start in range(0, len(lengths), batch_size):
        batch = list(range(start, min(start + batch_size, len(lengths))))
        if groups:
            group = groups[-1]
            rows = (len(group) + len(batch)) * variants
            longest = lengths[group[0]]
            if rows <= DECODE_ROWS and rows * row_bytes <= DECODE_KV_BYTES \
                    and (longest - lengths[batch[0]]) * PAD_SLACK <= longest:
                group.extend(batch)
                continue
        groups.append(batch)
    return groups


def per_row_prefix(prefixes: list):
    """One cache-like object holding, per layer, each variant's one-row prefix cache for its block
    of the batch's rows, variant after variant (the rows' order in the batch), which
    `decoding.growing_cache` writes straight into its buffers (no [rows x variants] copy of the
    prefix first); None without prefixes."""
    if not prefixes:
        return None
    layers = [SimpleNamespace(keys=[layer.keys for layer in per_variant], values=[layer.values for layer in per_variant])
              for per_variant in zip(*(p.layers for p in prefixes))]
    return SimpleNamespace(layers=layers)
