"""The memory preflight (issue 23): components from config.json alone, the parameter count equal
to transformers' own for the same config, LoRA parameters equal to PEFT's, the knob to lower, and
FAILED_PRECONDITION on CUDA when the estimate exceeds free memory."""

from __future__ import annotations

import pytest

from _builders import small_request
from py_trainer.core.errors import FailedPrecondition
from py_trainer.workers import memory_estimate as me

QWEN25_05B = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 896, "num_hidden_layers": 24,
              "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
              "tie_word_embeddings": True, "max_position_embeddings": 32768}


def effective(tmp_path, **grpo):
    from py_trainer.server.validate import validate_train_request

    return validate_train_request(small_request("mem", **grpo), tmp_path)


def meta_model(cfg: dict):
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(Qwen2Config(**cfg))


def test_parameter_count_equals_transformers_for_a_qwen25_05b_config():
    model = meta_model(QWEN25_05B)
    assert me.Shape.from_config(QWEN25_05B).parameters() == sum(p.numel() for p in model.parameters())
    untied = {**QWEN25_05B, "tie_word_embeddings": False, "num_hidden_layers": 2}
    assert me.Shape.from_config(untied).parameters() == sum(p.numel() for p in meta_model(untied).parameters())


def test_lora_parameters_equal_peft_for_all_linear_layers(tmp_path):
    from peft import get_peft_model

    from py_trainer.training.skeleton import lora_config

    req = effective(tmp_path)
    cfg = {**QWEN25_05B, "num_hidden_layers": 2}
    peft = get_peft_model(meta_model(cfg), lora_config(req.lora))
    trainable = sum(p.numel() for p in peft.parameters() if p.requires_grad)
    comps = {c.name: c for c in me.estimate(req, cfg, precision="bf16")}
    assert comps["lora_parameters"].bytes == 4 * trainable
    assert comps["optimizer_state"].bytes == 12 * trainable
    assert comps["weights"].bytes == 2 * me.Shape.from_config(cfg).parameters()


def test_the_components_follow_their_knobs(tmp_path):
    req = effective(tmp_path)
    base = {c.name: c.bytes for c in me.estimate(req, QWEN25_05B, precision="bf16")}
    g = req.grpo
    seq = g.max_prompt_length + g.max_completion_length
    assert base["kv_cache"] == g.per_device_train_batch_size * g.gradient_accumulation_steps * seq * 2 * 24 * 2 * 64 * 2
    req.runtime.gradient_checkpointing = True
    ckpt = {c.name: c.bytes for c in me.estimate(req, QWEN25_05B, precision="bf16")}
    assert ckpt["activations"] < base["activations"] and ckpt["weights"] == base["weights"]
    req.runtime.gradient_checkpointing = False
    req.grpo.per_device_train_batch_size *= 2
    double = {c.name: c.bytes for c in me.estimate(req, QWEN25_05B, precision="bf16")}
    assert double["activations"] == 2 * base["activations"] and double["kv_cache"] == 2 * base["kv_cache"]
    assert "reference" not in base  # under LoRA the reference is the base with the adapter disabled
    req.grpo.use_vllm = True
    vllm = {c.name: c.bytes for c in me.estimate(req, QWEN25_05B, precision="bf16", device_total_bytes=80 * 2**30)}
    assert vllm["vllm"] == int(0.3 * 80 * 2**30) and vllm["kv_cache"] == 0


def test_too_big_for_free_cuda_memory_is_failed_precondition_naming_the_knob(tmp_path):
    comps = me.estimate(effective(tmp_path, max_completion_length=2048), QWEN25_05B, precision="bf16")
    total = sum(c.bytes for c in comps)
    me.check_fits(comps, "cpu", total // 10)  # never enforced on CPU
    me.check_fits(comps, "cuda:0", total)  # fits exactly
    with pytest.raises(FailedPrecondition) as ei:
        me.check_fits(comps, "cuda:0", total // 2)
    assert ei.value.field == "grpo.per_device_train_batch_size"
    assert "exceeds" in str(ei.value) and "largest: activations" in str(ei.value)
    assert me.knob_to_lower(comps, total) == ""


def test_a_config_without_the_fields_names_base_model():
    from py_trainer.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as ei:
        me.Shape.from_config({"model_type": "bert"})
    assert ei.value.field == "base_model"


@pytest.mark.slow
def test_estimate_memory_rpc(tmp_path, tiny_model_home):
    import grpc

    from _sidecar import running_sidecar, sidecar_env, stub_for
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    with running_sidecar(tmp_path, env=sidecar_env(PY_TRAINER_HOME=str(tiny_model_home))) as sc:
        ch, stub = stub_for(sc)
        with ch:
            res = stub.EstimateMemory(pb.EstimateMemoryRequest(request=small_request("mem")), timeout=120)
            names = [c.name for c in res.components]
            assert names == ["weights", "lora_parameters", "optimizer_state", "activations", "kv_cache"]
            assert res.total_bytes == sum(c.bytes for c in res.components) > 0
            assert res.device == "cpu" and res.device_free_bytes > 0 and res.knob_to_lower == ""
            assert "params x 4 bytes (fp32)" in res.components[0].formula
            with pytest.raises(grpc.RpcError) as ei:
                stub.EstimateMemory(pb.EstimateMemoryRequest(request=small_request("mem", num_generations=1)), timeout=60)
            assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert ei.value.details().startswith("grpo.num_generations:")


@pytest.mark.parametrize("field,value", [
    ("hidden_size", 10**12), ("vocab_size", 1e300), ("num_attention_heads", 0), ("intermediate_size", -4),
    ("num_hidden_layers", float("inf")), ("head_dim", 0), ("num_key_value_heads", -1), ("hidden_size", 0),
    ("num_hidden_layers", 2.5), ("vocab_size", True), ("num_hidden_layers", "24"), ("hidden_size", float("nan")),
])
def test_a_hostile_number_in_config_json_is_invalid_argument_naming_the_field(field, value):
    """Issue 30, item 5: huge, zero, negative, infinite and non-integer dimensions were ValueError,
    ZeroDivisionError or OverflowError (UNKNOWN on the wire), or an estimate of 0 bytes."""
    from py_trainer.core.errors import InvalidArgument

    with pytest.raises(InvalidArgument) as ei:
        me.Shape.from_config({**QWEN25_05B, field: value})
    assert ei.value.field == "base_model"
    assert f"config.json: {field}" in str(ei.value), str(ei.value)


def test_all_zero_dimensions_are_refused_not_estimated_as_zero_bytes():
    from py_trainer.core.errors import InvalidArgument

    zeros = {**QWEN25_05B, **{k: 0 for k in ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                                             "num_attention_heads", "num_key_value_heads")}}
    with pytest.raises(InvalidArgument, match="config.json: vocab_size"):
        me.Shape.from_config(zeros)


def test_every_component_of_the_largest_accepted_config_fits_the_wire(tmp_path):
    """The bounds keep every byte count within int64 (protobuf raised 'Value out of range' on 1e300)."""
    biggest = {**QWEN25_05B, **{f: hi for f, (_lo, hi) in me.BOUNDS.items()}}
    req = effective(tmp_path)
    for c in me.estimate(req, biggest, precision="fp32"):
        assert 0 <= c.bytes < 2**63, c
    assert me.Shape.from_config(QWEN25_05B).heads == 14  # a real config still reads


def test_an_embedded_base_not_built_yet_is_estimated_from_its_builders_shape(tmp_path, monkeypatch):
    """Issue 30, item 2: EstimateMemory ("config alone, nothing is loaded") built the embedded model
    in the sidecar (19-20 s). Now an embedded base not built yet is estimated from tiny_model.SPEC
    and nothing is built; once built, its own config.json is read."""
    from py_trainer.models import tiny_model
    from py_trainer.models.tiny_model import SPEC

    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))  # nothing built here
    monkeypatch.setattr(tiny_model, "build_tiny_model", lambda *a, **k: pytest.fail("EstimateMemory built a model"))
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tasks.jsonl").write_text("")
    req = effective(tmp_path / "data")
    for base in ("", "embedded:tasks.jsonl"):
        req.base_model = base
        res = me.estimate_request(req, tmp_path / "data")
        weights = res.components[0]
        want = me.Shape.from_config({"vocab_size": SPEC.vocab_size, "hidden_size": SPEC.hidden_size,
                                     "num_hidden_layers": SPEC.num_hidden_layers, "intermediate_size": SPEC.intermediate_size,
                                     "num_attention_heads": SPEC.num_attention_heads, "model_type": "qwen2",
                                     "tie_word_embeddings": True}).parameters()
        assert weights.name == "weights" and weights.bytes == want * 4, (base, weights)
    assert not any((tmp_path / "home").rglob("config.json"))


@pytest.mark.slow
def test_the_activations_and_kv_cache_follow_the_longest_training_prompt(tmp_path, tiny_model_dir, tiny_model_home,
                                                                         monkeypatch):
    """Issue 27 item 6: the estimate took max_prompt_length (256) as every prompt's length, 3.9x the
    measured peak on SmolLM2-135M's recipe (47-token prompts). TRL pads a batch to its longest
    prompt and truncates none: the prompt term is the longest *training* prompt (a longer held-out
    row does not count), tokenized as TRL feeds it (here raw text, no special tokens)."""
    from transformers import AutoTokenizer

    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    monkeypatch.setenv("PY_TRAINER_HOME", str(tiny_model_home))
    req = effective(tmp_path)
    req.runtime.prompt_format = "raw"
    rows = req.dataset.inline.rows
    rows[-1].prompt = "a held-out prompt far longer than any training prompt " * 20  # the last 4 rows are held out
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    train = [r.prompt for r in rows[:-req.held_out.num_prompts]]
    want = max(len(tok(p, add_special_tokens=False)["input_ids"]) for p in train)
    assert want < len(tok(rows[-1].prompt, add_special_tokens=False)["input_ids"])
    assert me.longest_prompt_tokens(req, tmp_path) == want  # the default model's folder is its tokenizer's
    g = req.grpo
    comps = {c.name: c for c in me.estimate(req, QWEN25_05B, precision="bf16", prompt_tokens=want)}
    upper = {c.name: c for c in me.estimate(req, QWEN25_05B, precision="bf16")}
    seq = want + g.max_completion_length
    assert comps["kv_cache"].bytes == g.per_device_train_batch_size * g.gradient_accumulation_steps * seq * 2 * 24 * 2 * 64 * 2
    assert comps["activations"].bytes < upper["activations"].bytes
    assert f"the longest training prompt, {want} + {g.max_completion_length}" in comps["activations"].formula
    assert "max_prompt_length 256 (no local tokenizer" in upper["activations"].formula
    res = me.estimate_request(req, tmp_path)  # the RPC's path measures the prompts itself
    assert f"the longest training prompt, {want} +" in next(c.formula for c in res.components if c.name == "activations")
    assert isinstance(res, pb.EstimateMemoryResponse)


def test_a_base_whose_tokenizer_is_not_on_disk_falls_back_to_max_prompt_length(tmp_path, monkeypatch):
    monkeypatch.setenv("PY_TRAINER_HOME", str(tmp_path / "home"))  # the embedded base is not built here
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tasks.jsonl").write_text("")
    req = effective(tmp_path / "data")
    for base in ("", "embedded:tasks.jsonl"):
        req.base_model = base
        assert me.longest_prompt_tokens(req, tmp_path / "data") == 0
        acts = next(c for c in me.estimate_request(req, tmp_path / "data").components if c.name == "activations")
        assert "max_prompt_length 256" in acts.formula


HOSTILE = [("hidden_size", 10**12), ("hidden_size", 0), ("num_hidden_layers", -1), ("vocab_size", float("nan")),
           ("intermediate_size", float("inf")), ("hidden_size", 1e300), ("num_attention_heads", "14"),
           ("num_key_value_heads", -2), ("head_dim", 0.5)]


def local_base(data, cfg: dict) -> str:
    """A model folder under the data root with `cfg` as config.json and a tokenizer_config.json: the
    tokenizer is 'on disk', so the estimate measures the prompts with it."""
    import json

    folder = data / "hostile"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))  # NaN and Infinity as Python's json writes them
    (folder / "tokenizer_config.json").write_text('{"model_max_length": 64}')
    return "hostile"


@pytest.mark.parametrize("field,value", HOSTILE + [("all", 0)])
def test_estimate_request_refuses_a_hostile_local_config_before_transformers_reads_it(tmp_path, field, value):
    """Issue 44, item 1: with the base's tokenizer on disk, estimate_request loaded it (AutoTokenizer
    reads config.json through huggingface_hub's strict dataclasses) before the bounds check: NaN, a
    string or 1e300 raised StrictDataclass*ValidationError, UNKNOWN on the wire. The bounds check
    comes first now, naming the field."""
    from py_trainer.core.errors import InvalidArgument

    cfg = ({**QWEN25_05B, **{k: 0 for k in me.REQUIRED}} if field == "all" else {**QWEN25_05B, field: value})
    req = effective(tmp_path)
    req.base_model = local_base(tmp_path, cfg)
    with pytest.raises(InvalidArgument) as ei:
        me.estimate_request(req, tmp_path)
    assert ei.value.field == "base_model"
    assert f"config.json: {'vocab_size' if field == 'all' else field} is " in str(ei.value), str(ei.value)


@pytest.mark.parametrize("edit,named", [
    ({"max_position_embeddings": "x"}, "config.json: max_position_embeddings: "),
    ({"tie_word_embeddings": "no"}, "config.json: tie_word_embeddings: "),
    ({"layer_types": ["full_attention"]}, "config.json: `num_hidden_layers` (24) must be equal"),
])
def test_a_config_transformers_refuses_is_invalid_argument_naming_the_field(tmp_path, edit, named):
    """Issue 44, item 1: a field the bounds check does not read but transformers' strict config
    validation refuses (huggingface_hub's StrictDataclass*ValidationError) is INVALID_ARGUMENT
    naming base_model and the field, in the estimate and in the chat-template check."""
    from py_trainer.core.errors import InvalidArgument
    from py_trainer.models.loading import check_chat_template

    req = effective(tmp_path)
    req.base_model = local_base(tmp_path, {**QWEN25_05B, **edit})
    with pytest.raises(InvalidArgument) as ei:
        me.estimate_request(req, tmp_path)
    assert ei.value.field == "base_model" and named in str(ei.value), str(ei.value)
    req.runtime.prompt_format = "chat"
    with pytest.raises(InvalidArgument) as ei:
        check_chat_template(req.runtime, req.base_model, tmp_path)
    assert ei.value.field == "base_model" and named in str(ei.value), str(ei.value)
