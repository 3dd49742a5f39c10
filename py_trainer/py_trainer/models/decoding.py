"""Decoding without `generate`'s waste on CPU: what `loading.generate_completions` runs for
temperature 0 (issue 43), and every turn of the agent episode runner, greedy or sampled.

HF `generate` keeps every row of a batch decoding until its last row ends (a finished row is fed
padding) and grows the KV cache by `torch.cat` at every step, a fresh allocation of the whole
cache per layer. Profiled on SmolLM2-135M (docs/real-model.md, "Where an Evaluate's time goes"):
31% of the decoded rows had already ended, and `aten::cat` was 30% of the CPU time. The loop here
is `generate`'s greedy search step for step (the same inputs, positions and mask, argmax of the
last position's logits, EOS then padding), with two differences that do not change a token:
- a row that ended leaves the batch (its cache rows are dropped), so the rest decode smaller
  batches and the call ends when its last row does;
- the cache writes into buffers allocated once for the whole call (`GrowingLayer`), and the model
  attends over the filled part, the same shapes `DynamicLayer` gives.
Single-turn sampling (`generate_completions` with k > 1, TRL's GRPO generation) keeps `generate`
(its random draws stay those of the plain path) but starts it from a `GrowingLayer` cache too
(`sampling_cache`). The agent episode runner samples through `decode_batch` as well (issue 53: in
a sampled three-way eval of the shop task, about half of a turn's decoded row-steps came after the
row's end, by the transcripts' lengths): its draws are `generate`'s until the first row leaves,
then those of the smaller batch.
It runs where `generate` would be plain greedy search: a decoder-only model whose cache layers
are all full attention, and a generation config with nothing that changes greedy logits
(`greedy_search_is_plain`). Elsewhere `generate_completions` calls `generate` as before.
tests/test_generation_speed.py holds its completions equal to `generate`'s. Imported where it
runs (`generate_completions`), as torch and transformers are elsewhere in this package.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Callable

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

GREEDY_NEUTRAL = {"repetition_penalty": 1.0, "num_beams": 1}
"""Generation-config fields that change greedy search unless they hold this value (or None)."""
GREEDY_UNSET = ("no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "min_length",
                "min_new_tokens", "sequence_bias", "forced_bos_token_id", "forced_eos_token_id", "suppress_tokens",
                "begin_suppress_tokens", "exponential_decay_length_penalty", "penalty_alpha", "dola_layers",
                "stop_strings", "renormalize_logits", "guidance_scale", "watermarking_config",
                "remove_invalid_values", "constraints", "force_words_ids", "assistant_model",
                "prompt_lookup_num_tokens")
"""... and those that change it unless unset (None, 0, False, empty)."""


def greedy_search_is_plain(model) -> bool:
    """Whether `generate(do_sample=False)` on `model` is plain greedy search: argmax of the last
    logits, stopping at EOS, and a decoder-only model with full-attention `DynamicLayer` caches,
    in fp32. In bf16 a smaller batch rounds differently often enough to flip a token: 2 of 128
    completions differed from `generate`'s on SmolLM2-135M (scripts/profile_eval.py --precision
    bf16 --compare 2), none in fp32 (docs/real-model.md)."""
    config = model.config
    if getattr(config, "is_encoder_decoder", False) or next(model.parameters()).dtype != torch.float32:
        return False
    gc = getattr(model, "generation_config", None)
    if gc is not None:
        if any(getattr(gc, k, None) not in (None, v) for k, v in GREEDY_NEUTRAL.items()):
            return False
        if any(getattr(gc, k, None) for k in GREEDY_UNSET):
            return False
    try:
        layers = DynamicCache(config=config).layers
    except Exception:
        return False
    return bool(layers) and all(type(layer) is DynamicLayer for layer in layers)


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` (same shapes, same mask sizes) whose keys and values are views of buffers
    allocated once for `capacity` positions, instead of a `torch.cat` per step."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = capacity, 0

    def lazy_initialization(self, key_states, value_states) -> None:
        self.device = key_states.device
        b, h, _, d = key_states.shape
        self.key_buffer = key_states.new_empty((b, h, self.capacity, d))
        self.value_buffer = value_states.new_empty((b, h, self.capacity, value_states.shape[-1]))
        self.is_initialized = True

    def seed(self, keys, values, rows: int) -> None:
        """Start from the cache of a shared prompt prefix: one row, the same for all `rows` rows, or
        a list of such one-row caches, each for an equal block of the rows, in order (`variants.py`:
        each variant's own keys and values of the same prefix), written straight into the buffers."""
        blocks = list(zip(keys, values)) if isinstance(keys, (list, tuple)) else [(keys, values)]
        first_keys, first_values = blocks[0]
        self.lazy_initialization(first_keys[:1].expand(rows, -1, -1, -1), first_values[:1].expand(rows, -1, -1, -1))
        n, share = first_keys.shape[-2], rows // len(blocks)
        for i, (k, v) in enumerate(blocks):
            self.key_buffer[i * share:(i + 1) * share, :, :n] = k
            self.value_buffer[i * share:(i + 1) * share, :, :n] = v
        self.length = n
        self.views()

    def views(self) -> None:
        self.keys = self.key_buffer[:, :, :self.length]
        self.values = self.value_buffer[:, :, :self.length]

    def update(self, key_states, value_states, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = key_states.shape[-2]
        self.key_buffer[:, :, self.length:self.length + n] = key_states
        self.value_buffer[:, :, self.length:self.length + n] = value_states
        self.length += n
        self.views()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def batch_select_indices(self, indices) -> None:
        if self.is_initialized:
            self.key_buffer = self.key_buffer[indices]
            self.value_buffer = self.value_buffer[indices]
            self.views()

    def rows(self, start: int, end: int, total: int, length: int) -> "GrowingLayer":
        """A layer writing into rows [start, end) of this one's buffers (`total` rows in all) from
        position `length` on, for a prefill of those rows alone; this layer's own buffers are
        allocated from the first such layer's first write when nothing seeded them. `adopt` takes
        the rows' writes back."""
        part = GrowingLayer(self.capacity)
        if self.is_initialized:
            part.device, part.is_initialized, part.length = self.device, True, length
            part.key_buffer, part.value_buffer = self.key_buffer[start:end], self.value_buffer[start:end]
            part.views()
        part.owner = (start, total)
        return part

    def adopt(self, part: "GrowingLayer") -> None:
        """After `part` (from `rows`) prefilled its rows: allocate this layer's buffers from it when
        the first part made its own, copy such a part's rows in, and take its length."""
        start, total = part.owner
        if not self.is_initialized:
            _, h, _, d = part.key_buffer.shape
            self.lazy_initialization(part.key_buffer.new_empty((total, h, 0, d)),
                                     part.value_buffer.new_empty((total, h, 0, part.value_buffer.shape[-1])))
        if part.key_buffer.data_ptr() != self.key_buffer[start:].data_ptr():  # the part made its own buffers
            rows = part.key_buffer.shape[0]
            self.key_buffer[start:start + rows, :, :part.length] = part.keys
            self.value_buffer[start:start + rows, :, :part.length] = part.values
        self.length = part.length
        self.views()


def growing_cache(model, rows: int, capacity: int, prefix=None):
    """A DynamicCache of `GrowingLayer`s for `rows` rows of up to `capacity` positions, holding the
    one-row cache `prefix` (a shared prompt prefix) in every row when given."""
    cache = DynamicCache(config=model.config)
    cache.layers = [GrowingLayer(capacity) for _ in cache.layers]
    if prefix is not None:
        for mine, theirs in zip(cache.layers, prefix.layers):
            mine.seed(theirs.keys, theirs.values, rows)
    return cache


def sampling_cache(model, prefix, rows: int, capacity: int):
    """The cache `generate` starts from when it samples: a `growing_cache` for `rows` rows (holding
    `prefix`, the shared prompt prefix's cache from `loading.prefix_cache`, which is only ever
    full-attention `DynamicLayer`s) where the model's cache is made of such layers; else None
    (generate makes its own)."""
    plain = prefix is not None or not getattr(model.config, "is_encoder_decoder", False) and \
        all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)
    return growing_cache(model, rows, capacity, prefix) if plain else None


def grow_cache_in_generate(model) -> None:
    """Make `model.generate` (an instance's, e.g. the PeftModel GRPOTrainer trains) start from a
    `sampling_cache` when its caller passes no cache: TRL's GRPO generation calls
    `generate(input_ids=, attention_mask=, generation_config=)` and its `DynamicCache` grows by a
    `torch.cat` per step and layer. The same cache contents and attention shapes, so the same
    draws (tests/test_generation_speed.py); where the model's cache is not plain full attention,
    generate makes its own as before."""
    inner = model.generate

    def generate(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        config = kwargs.get("generation_config") or getattr(model, "generation_config", None)
        new = getattr(config, "max_new_tokens", None) or kwargs.get("max_new_tokens")
        if ids is not None and new and not any(k in kwargs for k in ("cache", "past_key_values")) \
                and kwargs.get("use_cache", getattr(config, "use_cache", True)) is not False \
                and not getattr(config, "cache_implementation", None) and getattr(config, "num_beams", 1) in (None, 1):
            rows = ids.shape[0] * (kwargs.get("num_return_sequences") or getattr(config, "num_return_sequences", 1) or 1)
            cache = sampling_cache(model, None, rows, ids.shape[-1] + new)
            if cache is not None:
                kwargs["cache"] = cache
        return inner(*args, **kwargs)

    model.generate = generate


def contiguous_input(module, args):
    """A forward pre-hook for the LM head: its input made contiguous. With `logits_to_keep=1` a
    prefill hands the head `hidden[:, -1:, :]`, a strided [rows, 1, hidden] view, and torch's linear
    cannot fold that to one matrix product: it broadcasts the [vocab, hidden] weight and runs a
    batched product per row. On SmolLM2-135M, 128 rows: 420 ms against 36 ms contiguous, an eighth
    of the prefill forward (docs/real-model.md). Decode steps' inputs are contiguous already."""
    return (args[0].contiguous(),) + tuple(args[1:])


class KeyValueGroupsInSdpa:
    """While entered, transformers' SDPA attention on CPU attends grouped-query keys and values as
    they are (`enable_gqa=True`) under a padding mask too, instead of first copying them once per
    query head (`repeat_kv`). transformers takes the copy whenever a mask is given because CUDA's
    fused kernels refuse a mask with GQA; torch's CPU kernel takes both and gives the same output,
    bit for bit (tests/test_generation_speed.py). On SmolLM2-135M (9 query heads, 3 key/value
    heads) a prefill of 128 rows x 20 positions copied ~1.2 GB of keys and values per forward.
    Only around a prefill forward (a decode step's single query already folds the groups), and
    only where transformers decides this by `use_gqa_in_sdpa` (5.x)."""

    active = 0

    def __init__(self):
        try:
            from transformers.integrations import sdpa_attention
        except ImportError:
            return
        decide = getattr(sdpa_attention, "use_gqa_in_sdpa", None)
        if decide is None or getattr(decide, "py_trainer", False):
            return

        def use_gqa_in_sdpa(attention_mask, key, value):
            if KeyValueGroupsInSdpa.active and key.device.type == "cpu" and key.shape[-1] == value.shape[-1]:
                return True
            return decide(attention_mask, key, value)

        use_gqa_in_sdpa.py_trainer = True
        sdpa_attention.use_gqa_in_sdpa = use_gqa_in_sdpa

    def __enter__(self):
        KeyValueGroupsInSdpa.active += 1
        return self

    def __exit__(self, *exc):
        KeyValueGroupsInSdpa.active -= 1


class HeadIntoOneBuffer:
    """While entered, the LM head `head` (a bias-free `nn.Linear` with the class's forward; anything
    else is left alone) writes each forward's logits into one buffer of up to `rows` rows, reused,
    instead of a fresh [rows, 1, vocab] tensor per decode step. 400 rows of SmolLM2's 49152-token
    vocabulary are 79 MB in fp32, past glibc's largest heap block (32 MiB): every step's logits
    were a fresh mmap, page-faulted in and unmapped again (the decode forwards of one Evaluate of
    200 tasks x 2 variants took 28k-152k minor faults, 4.5k-5k after; scripts/profile_variants.py,
    docs/real-model.md). `torch.matmul(x, W.t(), out=)` runs the matrix product `F.linear` runs:
    the same logits bit for bit (tests/test_generation_speed.py). A step's logits must be read
    before the next forward: the decode loop takes their argmax (or a float32 copy to sample from) first."""

    def __init__(self, head, rows: int):
        self.head, self.rows, self.buffer = head, rows, None
        # a forward of the instance's own (accelerate's offload hooks set one) is left as it is
        self.on = type(head) is torch.nn.Linear and head.bias is None and "forward" not in vars(head)

    def forward(self, x):
        if x.dim() != 3 or x.shape[0] * x.shape[1] > self.rows or torch.is_grad_enabled():  # out= takes no grad
            return torch.nn.functional.linear(x, self.head.weight)
        weight = self.head.weight
        if self.buffer is None:
            self.buffer = weight.new_empty(self.rows * weight.shape[0])
        out = self.buffer[:x.shape[0] * x.shape[1] * weight.shape[0]].view(x.shape[0], x.shape[1], weight.shape[0])
        return torch.matmul(x, weight.t(), out=out)

    def __enter__(self):
        if self.on:
            self.head.forward = self.forward
        return self

    def __exit__(self, *exc):
        if self.on:
            del self.head.forward
        self.buffer = None


LEAVE_SHARE = 8
"""Ended rows leave the batch once they are 1/LEAVE_SHARE of it: until then they ride along
(their tokens unused). Leaving copies the batch's whole cache (`batch_select_indices`), ~0.3 s for
400 rows of SmolLM2-135M against ~1.2 ms a row per step for riding along; leaving at every step
a row ended cost 2.3 s of a 19 s Evaluate of 200 tasks x 2 variants (docs/real-model.md)."""


def decode_batch(model, input_ids, attention_mask, *, cached: int, prefix, max_new_tokens: int,
                 eos_token_id: int | list[int], pad_token_id: int,
                 on_rows_left: Callable[[list[int]], None] | None = None,
                 prefill_rows: int = 0, on_prefill_rows: Callable[[int, int], None] | None = None,
                 temperature: float = 0.0, top_p: float = 1.0, budgets: list[int] | None = None, cache=None,
                 leave_share: int = LEAVE_SHARE):
    """Completions of a left-padded batch: [rows, <= max_new_tokens] token ids, each row its tokens
    up to and including its first stop (any of `eos_token_id`), then `pad_token_id` (what
    `generate` returns after the prompt).

    temperature 0 is greedy (argmax); above 0 each step samples as `generate(do_sample=True,
    top_k=0)` does: float32 logits, transformers' own temperature and top-p warpers, softmax,
    `torch.multinomial` over the batch's rows from torch's global generator. While no row leaves,
    that is `generate`'s draw for draw (tests/test_generation_speed.py); once rows have left, the
    rest draw from a smaller batch, so a sampled row depends on which rows it decoded beside (each
    call is still reproducible from the seed set before it).
    `budgets`: each row's own limit (<= max_new_tokens): a row ends at its first stop or after that
    many tokens, and leaves the batch like a row that stopped.

    `cached` leading positions of every row are already in `prefix` (a cache of the shared prompt
    prefix, one row for all or one per block of rows (`GrowingLayer.seed`), or None with `cached`
    0), or in `cache` when the caller gives one (a `growing_cache` of this batch's rows, already
    holding its first `cache.get_seq_length()` columns; `cached` and `prefix` are then unused):
    the caller reads the rows' keys and values from it after the call, in `on_rows_left`'s order.
    The rest of `input_ids` is prefilled here, `prefill_rows` rows per forward when given (0: all
    at once), into the one cache the whole batch then decodes from; `on_prefill_rows(start, end)` is
    told the rows of each such forward, then (0, rows) when the decoding starts.
    `on_rows_left(kept)`: told which rows go on decoding (indices among the rows of the step
    before) whenever rows leave, before their cache rows are dropped (`variants.py` keeps each
    row's adapter with it; the episode runner copies out the leaving rows' keys and values).
    `leave_share` 0: no row ever leaves (tests compare with `generate` so)."""
    rows, width = input_ids.shape
    device = input_ids.device
    stops = torch.tensor(eos_token_id if isinstance(eos_token_id, (list, tuple)) else [eos_token_id], device=device)
    limit = None if budgets is None else torch.tensor(budgets, device=device)
    warp = sampling_warpers(temperature, top_p)

    def forward(**kwargs):
        return model(**kwargs, cache=cache, use_cache=True, logits_to_keep=1).logits

    def draw(logits):
        if warp is None:
            return logits[:, -1, :].float().argmax(-1)
        scores = warp(None, logits[:, -1, :].to(copy=True, dtype=torch.float32))
        return torch.multinomial(torch.nn.functional.softmax(scores, dim=-1), num_samples=1).squeeze(1)

    if cache is None:
        cache = growing_cache(model, rows, width + max_new_tokens, prefix)
    else:
        cached = cache.get_seq_length()
    # as generate: positions count the mask; an all-ones mask is dropped (no padding to hide)
    position_ids = (attention_mask.long().cumsum(-1) - 1).masked_fill(attention_mask == 0, 0)
    mask = None if bool((attention_mask == 1).all()) else attention_mask
    head = model.get_output_embeddings()
    hook = head.register_forward_pre_hook(contiguous_input) if head is not None else None
    step_rows = prefill_rows if 0 < prefill_rows < rows else rows
    parts, seen = [], cache.get_seq_length()
    try:
        with KeyValueGroupsInSdpa():
            for start in range(0, rows, step_rows):
                end = min(rows, start + step_rows)
                if on_prefill_rows is not None:
                    on_prefill_rows(start, end)
                part = cache
                if step_rows < rows:  # these rows alone, into their rows of the batch's cache
                    part = DynamicCache(config=model.config)
                    part.layers = [layer.rows(start, end, rows, seen) for layer in cache.layers]
                logits = model(input_ids=input_ids[start:end, cached:],
                               attention_mask=mask[start:end] if mask is not None else None,
                               position_ids=position_ids[start:end, cached:], cache=part, use_cache=True,
                               logits_to_keep=1).logits
                if warp is None:
                    parts.append(draw(logits))  # each part's first tokens, not its logits
                else:  # sampled: one draw over the whole batch, as generate's
                    parts.append(logits[:, -1:, :].float())
                if part is not cache:
                    for layer, written in zip(cache.layers, part.layers):
                        layer.adopt(written)
    finally:
        if hook is not None:
            hook.remove()
    if on_prefill_rows is not None and step_rows < rows:
        on_prefill_rows(0, rows)
    first = parts[0] if len(parts) == 1 else torch.cat(parts)
    token = first if warp is None else draw(first)
    out = torch.full((rows, max_new_tokens), pad_token_id, dtype=torch.long, device=device)
    where = torch.arange(rows, device=device)  # the batch row of each row in the batch
    alive = None  # which of them still decode (None: all): ended rows wait to leave together
    position = position_ids[:, -1:]
    steps = 0
    with HeadIntoOneBuffer(head, rows) if head is not None else nullcontext():  # decode steps' logits
        for step in range(max_new_tokens):
            if step:
                token = draw(logits)
            if alive is None:
                out[where, step] = token
                going = ~torch.isin(token, stops)
            else:
                token = torch.where(alive, token, pad_token_id)  # as generate: an ended row is fed padding
                out[where[alive], step] = token[alive]
                going = alive & ~torch.isin(token, stops)
            if limit is not None:
                going &= limit[where] > step + 1
            steps = step + 1
            if step == max_new_tokens - 1 or not bool(going.any()):
                break
            ended = len(going) - int(going.sum())
            if leave_share and ended * leave_share >= len(going):  # ended rows leave the batch
                keep = going.nonzero().squeeze(1)
                where, token, position, alive = where[keep], token[keep], position[keep], None
                mask = mask[keep] if mask is not None else None
                if on_rows_left is not None:
                    on_rows_left(keep.tolist())
                cache.batch_select_indices(keep)
            elif ended:
                alive = going
            if mask is not None:
                mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=-1)
            position = position + 1
            logits = forward(input_ids=token[:, None], attention_mask=mask, position_ids=position)
    return out[:, :steps]


def sampling_warpers(temperature: float, top_p: float):
    """None for greedy (temperature 0); else the warpers `generate(do_sample=True, top_k=0)` applies
    in its order (transformers' own classes): temperature when not 1, top-p when below 1."""
    if temperature == 0:
        return None
    from transformers.generation.logits_process import (LogitsProcessorList, TemperatureLogitsWarper,
                                                        TopPLogitsWarper)

    warpers = LogitsProcessorList()
    if temperature != 1.0:
        warpers.append(TemperatureLogitsWarper(temperature))
    if top_p < 1.0:
        warpers.append(TopPLogitsWarper(top_p))
    return warpers


def sampling_is_plain(model) -> bool:
    """Whether `generate(do_sample=True, temperature=, top_p=, top_k=0)` on `model` samples as
    `decode_batch` does: `greedy_search_is_plain`, and no other warper in its generation config."""
    gc = getattr(model, "generation_config", None)
    if gc is not None and (getattr(gc, "min_p", None) is not None or getattr(gc, "top_h", None) is not None
                           or (getattr(gc, "typical_p", None) or 1.0) < 1.0
                           or 0.0 < (getattr(gc, "epsilon_cutoff", None) or 0.0) < 1.0
                           or 0.0 < (getattr(gc, "eta_cutoff", None) or 0.0) < 1.0):
        return False
    return greedy_search_is_plain(model)
