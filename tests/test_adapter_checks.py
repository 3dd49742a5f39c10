"""Adapters and models checked from their files, before anything loads (issue 22, item 7), and
AdapterRef.checkpoint_step resolved to a finished run's complete checkpoint. Fast: the folders
are written by hand (safetensors headers over zero tensors), no model is built."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from safetensors.numpy import save_file

from py_trainer.core.errors import FailedPrecondition, InvalidArgument, NotFound
from py_trainer.core.model_files import check_adapter_fits_base, check_adapter_folder, check_model_folder
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.models.loading import resolve_adapter
from py_trainer.runs.artifacts import CHECKPOINT_COMPLETE, write_checkpoint_marker

HIDDEN, FFN = 16, 48


def write_base(folder: Path) -> Path:
    """A two-layer Qwen2-shaped model folder: config, tokenizer stand-in, weights of the right shapes."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen2"}')
    (folder / "tokenizer.json").write_text("{}")
    tensors = {"model.embed_tokens.weight": np.zeros((32, HIDDEN), np.float32)}
    for i in range(2):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"model.layers.{i}.self_attn.{name}.weight"] = np.zeros((HIDDEN, HIDDEN), np.float32)
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = np.zeros((FFN, HIDDEN), np.float32)
        tensors[f"model.layers.{i}.mlp.down_proj.weight"] = np.zeros((HIDDEN, FFN), np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    return folder


def write_adapter(folder: Path, r: int = 4, weights_r: int | None = None, module: str = "self_attn.q_proj",
                  shape_in: int = HIDDEN, **cfg) -> Path:
    """A LoRA adapter folder as PEFT saves one, on layers.0.<module>."""
    folder.mkdir(parents=True)
    wr = r if weights_r is None else weights_r
    key = f"base_model.model.model.layers.0.{module}"
    save_file({f"{key}.lora_A.weight": np.zeros((wr, shape_in), np.float32),
               f"{key}.lora_B.weight": np.zeros((HIDDEN, wr), np.float32)}, str(folder / "adapter_model.safetensors"))
    (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": r, "lora_alpha": 8,
                                                            "target_modules": [module.rsplit(".", 1)[-1]], **cfg}))
    return folder


def refused(fn, *args, code=FailedPrecondition) -> str:
    with pytest.raises(code) as ei:
        fn(*args)
    return str(ei.value)


def test_a_whole_adapter_passes(tmp_path):
    base, ad = write_base(tmp_path / "base"), write_adapter(tmp_path / "ad")
    check_adapter_folder(ad, "adapters[0].path", "'ad'")
    check_adapter_fits_base(ad, "adapters[0].path", "'ad'", "base", tmp_path)
    check_model_folder(base, "base", "base_model")


def test_rank_that_does_not_match_the_weights(tmp_path):
    ad = write_adapter(tmp_path / "ad", r=8, weights_r=4)
    msg = refused(check_adapter_folder, ad, "adapters[0].path", "'ad'")
    assert msg.startswith("adapters[0].path: 'ad': adapter_config.json says r = 8, but adapter_model.safetensors "
                          "holds rank-4 weights (model.layers.0.self_attn.q_proj.lora_A is [4, 16])"), msg


def test_rank_pattern_is_honoured(tmp_path):
    ad = write_adapter(tmp_path / "ad", r=8, weights_r=4, rank_pattern={"q_proj": 4})
    check_adapter_folder(ad, "adapters[0].path", "'ad'")


@pytest.mark.parametrize("cut", [3, 60, -10])
def test_truncated_adapter_weights(tmp_path, cut):
    ad = write_adapter(tmp_path / "ad")
    f = ad / "adapter_model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:cut] if cut > 0 else data[:cut])
    msg = refused(check_adapter_folder, ad, "adapter.path", "'ad'")
    assert msg.startswith("adapter.path: 'ad': adapter_model.safetensors is truncated ("), msg


def test_adapter_header_that_is_not_json(tmp_path):
    ad = write_adapter(tmp_path / "ad")
    (ad / "adapter_model.safetensors").write_bytes((40).to_bytes(8, "little") + b"{not json" + b" " * 31)
    msg = refused(check_adapter_folder, ad, "adapter.path", "'ad'")
    assert "adapter_model.safetensors has a header that does not read back" in msg, msg


def test_adapter_for_layers_the_base_lacks(tmp_path):
    write_base(tmp_path / "base")
    ad = write_adapter(tmp_path / "ad", module="attn.c_attn")
    msg = refused(check_adapter_fits_base, ad, "adapters[1].path", "'ad'", "base", tmp_path)
    assert msg.startswith("adapters[1].path: 'ad': adapter_config.json targets c_attn, none of which 'base' has"), msg
    ad2 = write_adapter(tmp_path / "ad2", module="self_attn.qq_proj", target_modules=["q_proj", "qq_proj"])
    msg = refused(check_adapter_fits_base, ad2, "adapters[0].path", "'ad2'", "base", tmp_path)
    assert "adapts model.layers.0.self_attn.qq_proj, which 'base' has no layer named" in msg, msg


def test_adapter_made_for_another_base_size(tmp_path):
    write_base(tmp_path / "base")
    ad = write_adapter(tmp_path / "ad", shape_in=HIDDEN * 2)
    msg = refused(check_adapter_fits_base, ad, "adapters[0].run_id", "run 'r1''s adapter/", "base", tmp_path)
    assert ("run 'r1''s adapter/: model.layers.0.self_attn.q_proj.lora_A is [4, 32], but 'base''s "
            "model.layers.0.self_attn.q_proj has 16 inputs, not 32") in msg, msg


def test_base_model_with_truncated_weights(tmp_path):
    base = write_base(tmp_path / "base")
    f = base / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-100])
    msg = refused(check_model_folder, base, "base", "base_model")
    assert msg.startswith("base_model: 'base': model.safetensors is truncated ("), msg


def test_sharded_base_with_a_missing_shard(tmp_path):
    base = write_base(tmp_path / "base")
    (base / "model.safetensors").rename(base / "model-00001-of-00002.safetensors")
    (base / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}))
    msg = refused(check_model_folder, base, "base", "base_model")
    assert msg == "base_model: 'base': model.safetensors.index.json names model-00002-of-00002.safetensors, which is missing"


# ---------------------------------------------------------------------------------------------
# AdapterRef.checkpoint_step


def run_with_checkpoints(tmp_path: Path, state: int, steps=(2, 4)) -> SimpleNamespace:
    folder = tmp_path / "runs" / "r1"
    for step in steps:
        ck = write_adapter(folder / "checkpoints" / f"checkpoint-{step}")
        write_checkpoint_marker(ck, step)
    write_adapter(folder / "checkpoints" / "checkpoint-6")  # saved without its marker: does not count
    return SimpleNamespace(state=state, folder=folder, steps_completed=4)


def ref(**kw) -> pb.AdapterRef:
    return pb.AdapterRef(name="a", **kw)


def test_checkpoint_step_of_a_failed_run(tmp_path):
    rec = run_with_checkpoints(tmp_path, pb.RUN_STATE_FAILED)
    got = resolve_adapter(ref(run_id="r1", checkpoint_step=2), "adapters[0]", tmp_path, lambda _id: rec)
    assert got == rec.folder / "checkpoints" / "checkpoint-2"


def test_checkpoint_step_refusals(tmp_path):
    rec = run_with_checkpoints(tmp_path, pb.RUN_STATE_CANCELLED)
    find = lambda _id: rec  # noqa: E731
    msg = refused(resolve_adapter, ref(run_id="r1", checkpoint_step=6), "adapters[0]", tmp_path, find, code=NotFound)
    assert msg == ("adapters[0].checkpoint_step: run 'r1' has no complete checkpoint at step 6 "
                   "(its complete checkpoints are at steps 2, 4)")
    ck4 = rec.folder / "checkpoints" / "checkpoint-4" / "adapter_model.safetensors"
    ck4.write_bytes(ck4.read_bytes()[:-4])  # damaged after its marker was written
    msg = refused(resolve_adapter, ref(run_id="r1", checkpoint_step=4), "adapters[0]", tmp_path, find, code=NotFound)
    assert msg.startswith("adapters[0].checkpoint_step: run 'r1''s checkpoint at step 4 is damaged: "
                          "adapter_model.safetensors is "), msg
    msg = refused(resolve_adapter, ref(path="x", checkpoint_step=2), "adapter", tmp_path, find, code=InvalidArgument)
    assert msg == "adapter.checkpoint_step: only applies to an adapter given by run_id"
    rec.state = pb.RUN_STATE_RUNNING
    msg = refused(resolve_adapter, ref(run_id="r1", checkpoint_step=2), "adapters[0]", tmp_path, find)
    assert msg.startswith("adapters[0].checkpoint_step: run 'r1' is RUN_STATE_RUNNING"), msg
    assert (rec.folder / "checkpoints" / "checkpoint-2" / CHECKPOINT_COMPLETE).is_file()
