"""generate_completions' fast path gives exactly what the plain path gave.

The fast path (models/loading.py): the prompts' shared token prefix is run once and its KV cache reused
for every batch, and greedy decoding batches prompts longest first. `plain_generate` below is the
implementation it replaced, verbatim: one left-padded batch after another in prompt order, each
prompt prefilled in full. Checked on the embedded default model and the AML prompts (a 58-token
shared instruction block), for the base model and a LoRA adapter (varied completions up to 32
tokens), greedy; and for sampling, that
a seed still gives the same samples, in the same order, as the plain path.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from py_trainer.models.loading import generate_completions, pad_batch, shared_prefix_length

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


def plain_generate(model, tokenizer, prompts, *, k=1, temperature=1.0, top_p=1.0, max_new_tokens=32, seed=0,
                   batch_size=64):
    """The plain path: what generate_completions did before the fast path."""
    import torch

    model.eval()
    tokenizer.padding_side = "left"
    out = []
    greedy = temperature == 0
    with torch.no_grad():
        for b, start in enumerate(range(0, len(prompts), batch_size)):
            batch = prompts[start:start + batch_size]
            enc = tokenizer(batch, return_tensors="pt", padding=True, add_special_tokens=False)
            torch.manual_seed((seed * 1_000_003 + b) % 2**63)
            gen = model.generate(**enc, do_sample=not greedy, temperature=None if greedy else temperature,
                                 top_p=None if greedy else top_p, top_k=None if greedy else 0,
                                 max_new_tokens=max_new_tokens, num_return_sequences=k,
                                 pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
            texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for i in range(len(batch)):
                out.append(texts[i * k:(i + 1) * k])
    return out


@pytest.fixture(scope="module")
def prompts() -> list[str]:
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    return [r["prompt"] for r in rows if r["split"] == "test"][:128]  # several batches, at both batch sizes


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def lora_model(tiny_model_dir):
    """The embedded model (its own copy: PEFT injects layers in place) with a LoRA adapter whose B
    matrices are large enough that nearly every test prompt gets its own completion, most of them
    running to the 32-token limit (the base model answers money_mule to all), so many tokens and
    near-ties are compared, not one constant answer."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(0)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in peft.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    return peft.eval()


def test_shared_prefix_length_leaves_every_row_a_token_of_its_own():
    assert shared_prefix_length([[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 9]]) == 2
    assert shared_prefix_length([[1, 2, 3], [1, 2, 3, 4]]) == 2  # a row that is the prefix keeps its last token
    assert shared_prefix_length([[7, 8]]) == 0  # one prompt: nothing shared
    assert shared_prefix_length([[1, 2], [3, 4]]) == 0


def test_pad_batch_puts_the_prefix_first_and_keeps_plain_positions():
    ids, mask = pad_batch([[1, 2, 3, 4], [1, 2, 5]], 2, 0, "cpu")
    assert ids.tolist() == [[1, 2, 3, 4], [1, 2, 0, 5]]
    assert mask.tolist() == [[1, 1, 1, 1], [1, 1, 0, 1]]
    assert ((mask.cumsum(-1) - 1) * mask).tolist() == [[0, 1, 2, 3], [0, 1, 0, 2]]  # as left padding gives


@pytest.mark.slow
def test_greedy_fast_path_matches_plain_path_on_base_model(model_and_tokenizer, prompts):
    model, tokenizer = model_and_tokenizer
    ids = tokenizer(prompts, add_special_tokens=False)["input_ids"]
    assert shared_prefix_length(ids) >= 50  # the instruction block is shared: the cache is really used
    for batch_size in (64, 24):
        fast = generate_completions(model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32,
                                    batch_size=batch_size)
        plain = plain_generate(model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32, batch_size=batch_size)
        assert fast == plain


@pytest.mark.slow
def test_greedy_fast_path_matches_plain_path_with_lora_adapter(model_and_tokenizer, lora_model, prompts):
    _, tokenizer = model_and_tokenizer
    fast = generate_completions(lora_model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32)
    plain = plain_generate(lora_model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32)
    assert fast == plain
    with lora_model.disable_adapter():
        base = generate_completions(lora_model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32)
        assert base == plain_generate(lora_model, tokenizer, prompts, k=1, temperature=0, max_new_tokens=32)
    assert len({c[0] for c in fast}) > len(prompts) // 2  # varied completions: the comparison means something


@pytest.mark.slow
def test_sampling_is_reproducible_and_keeps_the_plain_contract(model_and_tokenizer, lora_model, prompts):
    _, tokenizer = model_and_tokenizer
    subset = prompts[:40]
    kw = dict(k=3, temperature=1.0, top_p=1.0, max_new_tokens=12, seed=5, batch_size=16)
    first = generate_completions(lora_model, tokenizer, subset, **kw)
    assert first == generate_completions(lora_model, tokenizer, subset, **kw)
    assert [len(c) for c in first] == [3] * len(subset)
    assert first == plain_generate(lora_model, tokenizer, subset, **kw)  # same batches, same seeds, same samples
    assert first != generate_completions(lora_model, tokenizer, subset, **dict(kw, seed=6))


@pytest.mark.slow
def test_prompts_without_a_shared_prefix_take_the_plain_path_in_order(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    mixed = ["Case: funds move", "Allowed labels: structuring", "Reply with exactly one label in the form",
             "An account held by Silverline Trading Inc in San Diego receives deposits", "x"]
    fast = generate_completions(model, tokenizer, mixed, k=1, temperature=0, max_new_tokens=8, batch_size=2)
    assert fast == plain_generate(model, tokenizer, mixed, k=1, temperature=0, max_new_tokens=8, batch_size=2)
    kw = dict(k=2, temperature=1.0, max_new_tokens=8, batch_size=2, seed=3)  # sampling from a growing cache, no prefix
    assert generate_completions(model, tokenizer, mixed, **kw) == plain_generate(model, tokenizer, mixed, **kw)
    assert generate_completions(model, tokenizer, [], k=1, temperature=0) == []


@pytest.mark.slow
def test_cpu_slices_a_large_sampling_batch_reproducibly(model_and_tokenizer, prompts):
    """64 prompts x 4 samples (the held-out measurement) exceed CPU_ROWS_PER_GENERATE: generated in
    slices after the batch's one seed, still k per prompt, in order, the same for the same seed."""
    from py_trainer.models.loading import CPU_ROWS_PER_GENERATE

    model, tokenizer = model_and_tokenizer
    subset = prompts[:64]
    assert len(subset) * 4 > CPU_ROWS_PER_GENERATE
    kw = dict(k=4, temperature=1.0, max_new_tokens=12, seed=7920)
    first = generate_completions(model, tokenizer, subset, **kw)
    assert first == generate_completions(model, tokenizer, subset, **kw)
    assert [len(c) for c in first] == [4] * len(subset)
    assert len({c for cs in first for c in cs}) > 1  # sampled, not one constant string


@pytest.mark.slow
def test_greedy_runs_its_own_loop_and_ended_rows_leave_the_batch(model_and_tokenizer, lora_model, prompts):
    """Greedy decoding goes through decoding.decode_batch (not generate) on the embedded model, a
    row that ended stops being decoded (later forwards see fewer rows), and the completions equal
    generate's; a generation config that changes greedy search (a repetition penalty) falls back
    to generate."""
    import copy

    from py_trainer.models.decoding import greedy_search_is_plain

    model, tokenizer = model_and_tokenizer
    assert greedy_search_is_plain(model) and greedy_search_is_plain(lora_model)
    inner = lora_model.get_base_model()
    seen: list[tuple[int, int]] = []  # (rows, positions) of every forward
    hook = inner.register_forward_pre_hook(lambda m, a, kw: seen.append(tuple(kw["input_ids"].shape)), with_kwargs=True)
    try:
        fast = generate_completions(lora_model, tokenizer, prompts[:48], k=1, temperature=0, max_new_tokens=32)
    finally:
        hook.remove()
    decode_rows = [r for r, n in seen if n == 1]
    assert decode_rows and min(decode_rows) < max(decode_rows)  # rows that ended left the batch
    assert fast == plain_generate(lora_model, tokenizer, prompts[:48], k=1, temperature=0, max_new_tokens=32)
    assert any(len(tokenizer(c[0])["input_ids"]) < 32 for c in fast)  # some rows did end early

    penalised = copy.deepcopy(model)
    penalised.generation_config.repetition_penalty = 1.3
    assert not greedy_search_is_plain(penalised)
    got = generate_completions(penalised, tokenizer, prompts[:8], k=1, temperature=0, max_new_tokens=16)
    assert got == plain_generate(penalised, tokenizer, prompts[:8], k=1, temperature=0, max_new_tokens=16)


@pytest.mark.slow
def test_grow_cache_in_generate_samples_what_generate_samples_given_a_generation_config(model_and_tokenizer,
                                                                                         lora_model, prompts):
    """TRL's GRPO generation: `generate(input_ids=, attention_mask=, generation_config=)` on a batch
    of prompts each repeated num_generations times, sampling. Through `grow_cache_in_generate` the
    cache is a GrowingLayer cache (no torch.cat per step) and the draws are generate's own, token
    for token; a call that brings its own cache keeps it."""
    import torch
    from transformers import DynamicCache, GenerationConfig

    from py_trainer.models import decoding

    _, tokenizer = model_and_tokenizer
    tokenizer.padding_side = "left"
    enc = tokenizer([p for p in prompts[:6] for _ in range(4)], return_tensors="pt", padding=True,
                    add_special_tokens=False)
    config = GenerationConfig(max_new_tokens=12, do_sample=True, temperature=0.7, top_p=1.0, top_k=0,
                              pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)

    def draw():
        torch.manual_seed(11)
        with torch.no_grad():
            return lora_model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                       generation_config=config)

    plain = draw()
    writes: list[int] = []
    update = decoding.GrowingLayer.update

    def counted(self, key_states, value_states, *args, **kwargs):
        writes.append(key_states.shape[-2])
        return update(self, key_states, value_states, *args, **kwargs)

    decoding.GrowingLayer.update = counted
    decoding.grow_cache_in_generate(lora_model)
    try:
        grown = draw()
        writes_of_one_call = len(writes)
        torch.manual_seed(11)
        with torch.no_grad():
            own = lora_model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                      generation_config=config, cache=DynamicCache(config=lora_model.config))
    finally:
        decoding.GrowingLayer.update = update
        del lora_model.__dict__["generate"]
    layers = lora_model.config.num_hidden_layers
    assert writes_of_one_call >= layers * 2 and writes[0] == enc["input_ids"].shape[1]  # prefill, then steps
    assert len(writes) == writes_of_one_call  # a caller's own cache is left alone
    assert torch.equal(grown, plain) and torch.equal(own, plain)
    assert len({tuple(r) for r in plain[:, enc["input_ids"].shape[1]:].tolist()}) > 1  # sampled, not constant


@pytest.mark.slow
def test_grpo_training_generates_from_a_growing_cache(tmp_path, tiny_model_home, tiny_model_dir):
    """The GRPO mode hands TRL's GRPOTrainer a model whose generate starts from a GrowingLayer
    cache: one real step on the embedded model, in this process, and the cache took the prompts'
    prefill and the sampled steps of its generation batch."""
    import os
    import traceback

    from google.protobuf import json_format
    from transformers import AutoConfig

    from _builders import small_request
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.models import decoding
    from py_trainer.server.validate import validate_train_request
    from py_trainer.training.skeleton import run_training
    from py_trainer.training.train_grpo import GrpoMode

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    req = validate_train_request(small_request("grown", max_steps=1), tmp_path)  # the effective request, as Train stores it
    (run_dir / "request.json").write_text(json_format.MessageToJson(req))
    prompt_rows: list[int] = []  # rows of each prefill into a GrowingLayer made under TRL's GRPOTrainer
    update = decoding.GrowingLayer.update

    def counted(self, key_states, value_states, *args, **kwargs):
        if key_states.shape[-2] > 1 and any(f.filename.endswith(os.path.join("trl", "trainer", "grpo_trainer.py"))
                                            for f in traceback.extract_stack()):
            prompt_rows.append(key_states.shape[0])
        return update(self, key_states, value_states, *args, **kwargs)

    decoding.GrowingLayer.update = counted
    try:
        events: list[pb.RunEvent] = []
        state = run_training(run_dir, tmp_path, events.append, lambda: False, GrpoMode())
    finally:
        decoding.GrowingLayer.update = update
    assert state == pb.RUN_STATE_SUCCEEDED
    assert [e.train_step.step for e in events if e.HasField("train_step")] == [1]
    # TRL's generation batch (8 rows: 2 prompts x 4 generations), prefilled once per layer; the
    # held-out measurement (generate_completions, also 8 rows) is not under GRPOTrainer
    layers = AutoConfig.from_pretrained(tiny_model_dir).num_hidden_layers
    assert prompt_rows and set(prompt_rows) == {8} and len(prompt_rows) % layers == 0, prompt_rows


@pytest.mark.slow
def test_variants_decoded_together_give_what_each_variant_gives_alone(model_and_tokenizer, lora_model, prompts):
    """models/variants.py: the base and two LoRA adapters greedy-decoded in shared batches (each
    adapter's LoRA added to its own block of rows, each variant's own prefix cache) give, token for token, what
    generate_completions gives for each variant alone under disable_adapter / set_adapter; and
    they take fewer forwards, each over the rows of every variant."""
    import torch
    from peft import LoraConfig

    from py_trainer.models.variants import decode_together, generate_greedy_variants

    model, tokenizer = model_and_tokenizer
    subset = prompts[:40]
    kw = dict(max_new_tokens=32, batch_size=16)
    torch.manual_seed(1)
    lora_model.add_adapter("second", LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                                task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in lora_model.named_parameters():
            if "lora_B" in name and ".second." in name:
                p.normal_(0, 0.3)
    inner = lora_model.get_base_model()
    seen: list[int] = []
    hook = inner.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[0]), with_kwargs=True)
    try:
        assert decode_together(lora_model, [None, "default", "second"])
        assert not decode_together(lora_model, ["default"]) and not decode_together(model, [None, None])
        together = generate_greedy_variants(lora_model, tokenizer, subset, [None, "default", "second"], **kw)
        forwards_together, first_rows = len(seen), seen[3] if len(seen) > 3 else 0
        seen.clear()
        alone = []
        with lora_model.disable_adapter():
            alone.append(generate_completions(lora_model, tokenizer, subset, k=1, temperature=0, **kw))
        for name in ("default", "second"):
            lora_model.set_adapter(name)
            alone.append(generate_completions(lora_model, tokenizer, subset, k=1, temperature=0, **kw))
        forwards_alone = len(seen)
    finally:
        hook.remove()
        lora_model.set_adapter("default")
        lora_model.delete_adapter("second")
    assert together == [[c[0] for c in variant] for variant in alone]
    assert len({tuple(v) for v in together}) == 3  # the three variants complete differently
    assert first_rows == 3 * 16  # 3 one-row prefix forwards, then a batch of 16 prompts x 3 variants
    # a shared batch decodes until its longest row of any variant ends: 99 forwards against 191
    # here, not a third (the adapters' completions run longer than the base's)
    assert forwards_together < 0.6 * forwards_alone, (forwards_together, forwards_alone)


@pytest.fixture(scope="module")
def gqa_model():
    """A small random Llama with grouped-query attention (4 query heads, 2 key/value heads), as
    SmolLM2 has (9 and 3); the embedded model has one key/value head per query head."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="sdpa")
    return LlamaForCausalLM(config).eval()


def left_padded(seed: int, rows: int, width: int, pads: dict[int, int]):
    """(ids, mask): random token ids of the GQA model's vocabulary, row r left-padded by pads[r]."""
    import torch

    torch.manual_seed(seed)
    ids = torch.randint(3, 300, (rows, width))
    mask = torch.ones_like(ids)
    for row, n in pads.items():
        mask[row, :n] = 0
    return ids.masked_fill(mask == 0, 0), mask


def greedy_pair(model, ids, mask, max_new_tokens: int, during=None):
    """(decode_batch's tokens, generate's) for a left-padded batch, EOS 2, pad 0; `during()` is
    called after decode_batch, before generate (hooks removed, spies restored), even on failure."""
    import torch

    from py_trainer.models.decoding import decode_batch

    try:
        with torch.no_grad():
            got = decode_batch(model, ids, mask, cached=0, prefix=None, max_new_tokens=max_new_tokens,
                               eos_token_id=2, pad_token_id=0)
    finally:
        if during is not None:
            during()
    with torch.no_grad():
        ref = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=max_new_tokens,
                             eos_token_id=2, pad_token_id=0)[:, ids.shape[1]:]
    return got.tolist(), ref[:, :got.shape[1]].tolist()


def test_greedy_prefill_hands_the_lm_head_a_contiguous_input_and_attends_groups_unrepeated(gqa_model, monkeypatch):
    """decoding.decode_batch's prefill (issue 43): the LM head gets a contiguous input (the
    [rows, 1, hidden] slice `logits_to_keep=1` makes is strided, and torch's linear then runs a
    batched product per row against a broadcast weight), and SDPA attends the key/value groups as
    they are under the padding mask (`enable_gqa`) instead of repeating them per query head; the
    tokens are generate's."""
    import torch
    import torch.nn.functional as F

    model = gqa_model
    head_inputs: list[bool] = []
    hook = model.get_output_embeddings().register_forward_hook(  # sees the input its pre-hooks made
        lambda m, args, out: head_inputs.append(args[0].is_contiguous()))
    sdpa_calls: list[tuple[int, bool, bool]] = []  # (query positions, a mask given, enable_gqa)
    inner = F.scaled_dot_product_attention

    def spy(q, k, v, *a, **kw):
        sdpa_calls.append((q.shape[-2], kw.get("attn_mask") is not None, bool(kw.get("enable_gqa"))))
        return inner(q, k, v, *a, **kw)

    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    ids, mask = left_padded(1, 6, 9, {1: 3, 4: 5})

    def stop_spying():
        hook.remove()
        monkeypatch.setattr(F, "scaled_dot_product_attention", inner)

    got, ref = greedy_pair(model, ids, mask, 6, during=stop_spying)
    prefill = sdpa_calls[:model.config.num_hidden_layers]  # one call per layer, then the decode steps'
    assert prefill and all(n == 9 and masked and gqa for n, masked, gqa in prefill), sdpa_calls
    assert head_inputs and all(head_inputs), head_inputs
    assert got == ref
    # attention outside the prefill is transformers' own again: a masked multi-position call repeats
    sdpa_calls.clear()
    monkeypatch.setattr(F, "scaled_dot_product_attention", spy)
    with torch.no_grad():
        model(input_ids=ids, attention_mask=mask)
    assert sdpa_calls and not any(gqa for _, _, gqa in sdpa_calls)


def test_decode_groups_merge_whole_batches_within_rows_cache_and_length_bounds(monkeypatch):
    """variants.decode_groups: whole batches, merged while the group's rows, its KV cache and the
    padding its shorter prompts take stay within bounds; never less than one batch."""
    from py_trainer.models import variants

    lengths = [40] * 8 + [37] * 4 + [20] * 4  # own tokens, longest first
    assert variants.decode_groups(lengths, 4, 2, 1) == [list(range(12)), list(range(12, 16))]  # 37 pads little, 20 not
    monkeypatch.setattr(variants, "DECODE_ROWS", 16)
    assert variants.decode_groups(lengths, 4, 2, 1) == [list(range(8)), list(range(8, 12)), list(range(12, 16))]
    monkeypatch.setattr(variants, "DECODE_ROWS", 512)
    monkeypatch.setattr(variants, "DECODE_KV_BYTES", 1000)
    assert variants.decode_groups(lengths, 4, 2, 100) == [list(range(4)), list(range(4, 8)), list(range(8, 12)),
                                                          list(range(12, 16))]  # 16 rows x 100 bytes > 1000
    assert variants.decode_groups(lengths, 4, 2, 10_000) == [list(range(4)), list(range(4, 8)), list(range(8, 12)),
                                                             list(range(12, 16))]  # one batch even over the budget
    assert variants.decode_groups([], 4, 2, 1) == []


@pytest.mark.parametrize("with_prefix", [False, True])
def test_decode_batch_prefilled_in_parts_decodes_what_one_prefill_decodes(gqa_model, with_prefix):
    """decoding.decode_batch with prefill_rows: the batch's rows prefilled a few per forward into
    the one cache they then decode from (seeded by a shared prefix's cache or not) give the
    tokens of one prefill of all rows, each forward over the rows it was told."""
    import torch

    from py_trainer.models.decoding import decode_batch
    from py_trainer.models.loading import pad_batch, prefix_cache

    model = gqa_model
    torch.manual_seed(2)
    shared = torch.randint(3, 300, (5,)).tolist() if with_prefix else []
    rows = [shared + torch.randint(3, 300, (n,)).tolist() for n in (7, 7, 6, 5, 5, 4, 3)]
    ids, mask = pad_batch(rows, len(shared), 0, "cpu")
    kw = dict(cached=len(shared), max_new_tokens=8, eos_token_id=2, pad_token_id=0)
    windows: list[tuple[int, int]] = []
    seen: list[int] = []
    hook = model.register_forward_pre_hook(lambda m, a, k: seen.append(k["input_ids"].shape[0]), with_kwargs=True)
    with torch.no_grad():
        prefix = prefix_cache(model, shared, "cpu") if shared else None
        whole = decode_batch(model, ids, mask, prefix=prefix, **kw)
        seen.clear()
        prefix = prefix_cache(model, shared, "cpu") if shared else None
        seen.clear()
        parts = decode_batch(model, ids, mask, prefix=prefix, prefill_rows=3,
                             on_prefill_rows=lambda a, b: windows.append((a, b)), **kw)
    hook.remove()
    assert parts.tolist() == whole.tolist()
    assert windows == [(0, 3), (3, 6), (6, 7), (0, 7)]
    assert seen[:3] == [3, 3, 1] and seen[3] <= 7  # three prefill forwards, then the batch decodes together


def test_decode_steps_write_their_logits_into_one_buffer_bit_for_bit(gqa_model):
    """decoding.decode_batch's decode steps (issue 43): the LM head writes every step's logits
    into one reused buffer (a fresh [rows, 1, vocab] tensor per step was a fresh mmap on SmolLM2,
    page-faulted in each step), the same values `F.linear` gives, and the head is itself again
    afterwards; the tokens are generate's."""
    import torch
    import torch.nn.functional as F

    model = gqa_model
    head = model.get_output_embeddings()
    steps: list[tuple[int, bool]] = []  # (where the logits lie, equal to F.linear's) per decode step
    hook = head.register_forward_hook(
        lambda m, args, out: steps.append((out.data_ptr(), torch.equal(out, F.linear(args[0], m.weight)))))
    ids, mask = left_padded(3, 5, 8, {2: 4})
    got, ref = greedy_pair(model, ids, mask, 7, during=hook.remove)
    decode = steps[1:]  # the prefill's head call first
    assert len(decode) == len(got[0]) - 1 >= 3, steps
    assert len({ptr for ptr, _ in decode}) == 1 and all(same for _, same in decode), steps
    assert "forward" not in vars(head)
    assert got == ref


def test_head_into_one_buffer_leaves_other_heads_as_they_are():
    """HeadIntoOneBuffer only takes over a plain bias-free nn.Linear: a head with a bias, or with a
    forward of its own (accelerate's offload hooks set one on the instance), keeps its forward, and
    the instance's own forward is still there afterwards; a plain head writes into the buffer."""
    import torch

    from py_trainer.models.decoding import HeadIntoOneBuffer

    x = torch.randn(3, 1, 4)
    hooked = torch.nn.Linear(4, 6, bias=False)
    own = hooked.forward = lambda t: torch.zeros(t.shape[0], t.shape[1], 6)
    with HeadIntoOneBuffer(hooked, 3):
        assert torch.equal(hooked(x), torch.zeros(3, 1, 6))
    assert vars(hooked)["forward"] is own
    biased = torch.nn.Linear(4, 6)
    with HeadIntoOneBuffer(biased, 3):
        assert "forward" not in vars(biased)
    plain = torch.nn.Linear(4, 6, bias=False)
    with HeadIntoOneBuffer(plain, 3) as into, torch.no_grad():
        first, second = plain(x), plain(x[:2])
        assert first.data_ptr() == second.data_ptr() == into.buffer.data_ptr()
        assert torch.equal(second, torch.nn.functional.linear(x[:2], plain.weight))
        assert plain(torch.randn(4, 1, 4)).data_ptr() != into.buffer.data_ptr()  # more rows than the buffer
    with HeadIntoOneBuffer(plain, 3) as into:  # under autograd: F.linear (out= takes no grad)
        assert plain(x).requires_grad and into.buffer is None
    assert "forward" not in vars(plain)


STOPS = [2, 5, 7, 11]
"""Stop tokens for the episode-runner cases: four of the GQA model's 300, so random rows stop."""


def cut(row: list[int], budget: int) -> list[int]:
    """A row's tokens as the episode runner keeps them: up to its budget, through its first stop."""
    row = row[:budget]
    stop = next((i for i, t in enumerate(row) if t in STOPS), None)
    return row if stop is None else row[:stop + 1]


def decoded_and_generated(model, ids, mask, budgets, *, temperature, top_p, leave_share, seed=5, forwards=None):
    """(decode_batch's rows, generate's rows) cut as the episode runner cuts them, each from `seed`;
    `forwards` (a list) gets the number of rows of each of decode_batch's decode-step forwards."""
    import torch

    from py_trainer.models.decoding import LEAVE_SHARE, decode_batch

    hook = None
    if forwards is not None:
        hook = model.register_forward_pre_hook(
            lambda m, args, kwargs: forwards.append(kwargs["input_ids"].shape[0])
            if kwargs["input_ids"].shape[1] == 1 else None, with_kwargs=True)
    try:
        torch.manual_seed(seed)
        with torch.no_grad():
            got = decode_batch(model, ids, mask, cached=0, prefix=None, max_new_tokens=max(budgets),
                               eos_token_id=STOPS, pad_token_id=0, temperature=temperature, top_p=top_p,
                               budgets=budgets, leave_share=LEAVE_SHARE if leave_share is None else leave_share)
    finally:
        if hook is not None:
            hook.remove()
    torch.manual_seed(seed)
    with torch.no_grad():
        ref = model.generate(input_ids=ids, attention_mask=mask, do_sample=temperature > 0,
                             temperature=temperature or None, top_p=top_p if temperature else None,
                             top_k=0 if temperature else None, max_new_tokens=max(budgets), eos_token_id=STOPS,
                             pad_token_id=0)[:, ids.shape[1]:]
    return ([cut(r, b) for r, b in zip(got.tolist(), budgets)],
            [cut(r, b) for r, b in zip(ref.tolist(), budgets)])


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9)])
def test_sampled_decode_batch_draws_what_generate_draws_while_no_row_leaves(gqa_model, temperature, top_p):
    """The episode runner's sampled turns (issue 53): decode_batch with rows that never leave draws
    token for token what `generate(do_sample=True, top_k=0)` draws from the same seed, with several
    stop tokens and each row its own budget (the runner's per-episode token limit)."""
    ids, mask = left_padded(11, 12, 9, {1: 3, 4: 6, 9: 2})
    budgets = [40, 6, 40, 25, 40, 13, 40, 40, 2, 33, 40, 40]
    got, ref = decoded_and_generated(gqa_model, ids, mask, budgets, temperature=temperature, top_p=top_p,
                                     leave_share=0)
    assert got == ref
    stopped = sum(1 for r, b in zip(got, budgets) if len(r) < b)
    assert stopped >= 2 and len({len(r) for r in got}) >= 4, [len(r) for r in got]  # rows ended differently


@pytest.mark.slow
def test_rows_leave_a_sampled_turn_and_a_greedy_one_keeps_generates_tokens(gqa_model):
    """Ended rows (a stop drawn or the budget spent) leave decode_batch's batch: the decode forwards
    shrink, greedy rows are still generate's token for token, and sampling from the same seed
    is reproducible (its draws are the smaller batch's once a row has left)."""
    ids, mask = left_padded(12, 16, 7, {0: 4, 7: 1})
    budgets = [3, 5, 8, 40, 12, 40, 2, 40, 20, 4, 40, 6, 40, 9, 40, 40]
    forwards: list[int] = []
    got, ref = decoded_and_generated(gqa_model, ids, mask, budgets, temperature=0, top_p=1.0, leave_share=None,
                                     forwards=forwards)
    assert got == ref
    assert forwards[0] == 16 and forwards[-1] < 8 and forwards == sorted(forwards, reverse=True), forwards
    first: list[int] = []
    sampled, _ = decoded_and_generated(gqa_model, ids, mask, budgets, temperature=1.0, top_p=1.0, leave_share=None,
                                       forwards=first)
    again, _ = decoded_and_generated(gqa_model, ids, mask, budgets, temperature=1.0, top_p=1.0, leave_share=None)
    assert sampled == again and first[-1] < first[0], first
    assert all(len(r) == b or r[-1] in STOPS for r, b in zip(sampled, budgets))
