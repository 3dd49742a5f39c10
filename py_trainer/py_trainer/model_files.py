"""What a model or adapter folder holds, read without loading a model: cheap checks up front.

A request that names a model is checked before anything is queued: the folder must hold a model
(config.json that parses, a tokenizer), a hub id must be in the local cache when the hub is
offline, an adapter folder's adapter_config.json must parse, and ``lora.target_modules`` must
name layers the model has. Module names come from the safetensors header (names and shapes of
every tensor, a few KB at the start of the file), not from building the model, so the check
costs a file read and is safe next to a model being loaded in another thread.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

from py_trainer.errors import FailedPrecondition, InvalidArgument, NotFound

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
MAX_HEADER_BYTES = 64 * 1024 * 1024
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def hub_offline() -> bool:
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in OFFLINE_VARS)


def read_json_file(path: Path, field: str, what: str) -> dict:
    """A JSON object from `path`, or FAILED_PRECONDITION naming `field`, the file and the line."""
    try:
        obj = json.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise FailedPrecondition(field, f"{what} {path.name} is not UTF-8 (byte {err.start})") from None
    except json.JSONDecodeError as err:
        raise FailedPrecondition(field, f"{what} {path.name} line {err.lineno}: not valid JSON ({err.msg})") from None
    except RecursionError:
        raise FailedPrecondition(field, f"{what} {path.name}: nested too deeply") from None
    except OSError as err:
        raise FailedPrecondition(field, f"{what} {path.name}: {err.strerror}") from None
    if not isinstance(obj, dict):
        raise FailedPrecondition(field, f"{what} {path.name}: expected a JSON object")
    return obj


def check_model_folder(path: Path, name: str, field: str) -> None:
    """`path` holds a loadable model: config.json with a model_type, and a tokenizer."""
    if not path.is_dir():
        raise FailedPrecondition(field, f"{name!r} is not a folder")
    if not (path / "config.json").is_file():
        raise FailedPrecondition(field, f"{name!r} has no config.json (not a model folder)")
    cfg = read_json_file(path / "config.json", field, f"{name!r}:")
    if not cfg.get("model_type"):
        raise FailedPrecondition(field, f"{name!r}: config.json names no model_type (not a transformers model)")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise FailedPrecondition(field, f"{name!r} has no tokenizer ({', '.join(TOKENIZER_FILES)})")


def cached_hub_file(repo_id: str, filename: str) -> Path | None:
    """The local cache's copy of a hub file, or None."""
    from huggingface_hub import try_to_load_from_cache

    got = try_to_load_from_cache(repo_id, filename)
    return Path(got) if isinstance(got, str) else None


def check_hub_model(repo_id: str, field: str) -> None:
    """With the hub offline, a hub id must already be in the local cache (NOT_FOUND otherwise)."""
    if hub_offline() and cached_hub_file(repo_id, "config.json") is None:
        raise NotFound(field, f"{repo_id!r} is not in the local model cache and the hub is offline "
                              f"(HF_HUB_OFFLINE=1): put the model under the data root or download it first")


def model_folder(base_model: str, data_root: Path, default_folder: Path | None) -> Path | None:
    """The folder holding base_model's files without building or downloading anything: a folder
    under the data root, the embedded default model's `default_folder` if built, a cached hub snapshot."""
    if not base_model:
        return default_folder if default_folder is not None and (default_folder / "config.json").is_file() else None
    local = Path(data_root) / base_model
    if local.is_dir():
        return local
    cfg = cached_hub_file(base_model, "config.json")
    return cfg.parent if cfg is not None else None


def safetensors_shapes(folder: Path) -> dict[str, list[int]] | None:
    """tensor name -> shape from the safetensors header(s) in `folder`; None without safetensors."""
    index = folder / "model.safetensors.index.json"
    files = [folder / "model.safetensors"]
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({folder / f for f in weight_map.values()})
    shapes: dict[str, list[int]] = {}
    for f in files:
        if not f.is_file():
            return None
        with open(f, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            if n > MAX_HEADER_BYTES:
                return None
            header = json.loads(fh.read(n))
        shapes.update({k: v.get("shape", []) for k, v in header.items() if k != "__metadata__"})
    return shapes


def linear_module_names(shapes: dict[str, list[int]]) -> set[str]:
    """Dotted names of the modules with a 2-D weight (Linear, Embedding): what LoRA can adapt."""
    names = {key.removesuffix(".weight") for key, shape in shapes.items() if key.endswith(".weight") and len(shape) == 2}
    names.add("lm_head")  # tied to the embeddings, so often absent from the weights file
    return names


def check_target_modules(lora, base_model: str, data_root: Path, default_folder: Path | None = None) -> None:
    """Each lora.target_modules entry must match a layer of the model as PEFT matches a list entry
    (the full dotted name, or its ending after a dot); skipped when the weights are not at hand.
    `default_folder`: the embedded default model's folder (for an empty base_model)."""
    if not lora.target_modules:
        return
    folder = model_folder(base_model, data_root, default_folder)
    try:
        shapes = safetensors_shapes(folder) if folder is not None else None
    except (OSError, ValueError, struct.error):
        shapes = None
    if not shapes:
        return
    names = linear_module_names(shapes)
    for i, target in enumerate(lora.target_modules):
        if not any(n == target or n.endswith("." + target) for n in names):
            leaves = sorted({n.rsplit(".", 1)[-1] for n in names if not n.rsplit(".", 1)[-1].isdigit()})
            raise InvalidArgument(f"lora.target_modules[{i}]",
                                  f"{target!r} names no linear layer of {base_model or 'the embedded default model'!r} "
                                  f"(its layers: {', '.join(leaves)})")


def check_adapter_folder(path: Path, field: str, what: str) -> None:
    """A PEFT adapter folder: adapter_config.json that parses, names a peft_type, and weights."""
    cfg_path = path / "adapter_config.json"
    if not cfg_path.is_file():
        raise NotFound(field, f"{what} has no adapter_config.json (not a PEFT adapter folder)")
    cfg = read_json_file(cfg_path, field, f"{what}:")
    if not cfg.get("peft_type"):
        raise FailedPrecondition(field, f"{what}: adapter_config.json names no peft_type")
    if not any((path / f).is_file() for f in ("adapter_model.safetensors", "adapter_model.bin")):
        raise FailedPrecondition(field, f"{what} has no adapter weights (adapter_model.safetensors)")
