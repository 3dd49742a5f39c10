"""Models: device and dtype, the one model + tokenizer loader, adapters, and batched generation.

Loading always goes through `from_pretrained`, for the embedded default model (empty base_model)
as for a local folder under the data root or a hub id, so a real model works the same way on a
GPU machine. Generation left-pads prompts and re-seeds the torch generator per batch from
(seed, batch index): the same call gives the same completions whether it runs before or after
other work, which is what makes step-0 vs end held-out rewards comparable.

Every model load and generation of Evaluate and SampleGroups runs on one process's one
`INFERENCE` thread, one job at a time (in the sidecar, that process is the inference worker,
`inference_worker.py`): transformers' loading is not thread-safe (concurrent
`from_pretrained` calls fail with "Cannot copy out of meta tensor" and leave torch's global
state broken for every later load), and the torch RNG that seeds sampling is process-global, so
serialised jobs are also what makes a job's results identical to a solo run. Training runs in
its own worker process and is not affected.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from py_trainer.core.code_revision import code_revision
from py_trainer.core.errors import FailedPrecondition, InvalidArgument, NotFound, permission_refused
from py_trainer.core.model_files import cached_hub_file, check_adapter_folder, parse_base_model
from py_trainer.core.paths import resolve_under
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.runs.artifacts import CHECKPOINT_COMPLETE, cached_sha256, checkpoint_damage

# ---------------------------------------------------------------------------------------------
# Device, dtype, loading


def pick_device(device: str):
    """"auto" -> cuda when available, else cpu."""
    import torch

    if device in ("", "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(precision: str, device):
    """Empty precision = fp32 on CPU, bf16 on CUDA."""
    import torch

    if not precision:
        precision = "bf16" if device.type == "cuda" else "fp32"
    return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def resolve_model_path(base_model: str, data_root: Path) -> str:
    """A folder under the data root, else an embedded model ("" or "embedded:<tasks>"), a GGUF
    base's converted folder (converted on first use: call it in a worker process) or a hub id."""
    from py_trainer.models.base_models import resolve_base_model

    ref = parse_base_model(base_model, data_root)
    if ref.kind == "folder" and (Path(data_root) / ref.path).exists():
        return str((Path(data_root) / ref.path).resolve())
    return resolve_base_model(ref, Path(data_root))


def load_model(base_model: str, data_root: Path, runtime: pb.RuntimeSettings):
    """(model on its device, tokenizer with a pad token, resolved path, device, dtype)."""
    from transformers import AutoModelForCausalLM

    device = pick_device(runtime.device)
    dtype = pick_dtype(runtime.precision, device)
    path = resolve_model_path(base_model, data_root)
    tokenizer = load_tokenizer(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    extra = {"attn_implementation": runtime.attn_implementation} if runtime.attn_implementation else {}
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **extra).to(device)
    return model, tokenizer, path, device, dtype


# ---------------------------------------------------------------------------------------------
# What was loaded: the parts of an eval's fingerprint only the sidecar knows

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")
FINGERPRINT_LIBRARIES = ("torch", "transformers", "peft", "trl")
DTYPE_NAMES = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}
_HUB_BLOB = re.compile(r"[0-9a-f]{64}")


def config_refusal(err: Exception, field: str = "base_model") -> InvalidArgument | None:
    """transformers' strict config validation (huggingface_hub's StrictDataclass*ValidationError,
    raised while a config.json is read) as INVALID_ARGUMENT naming `field` and the config's field;
    None for any other error. Without it such a config.json was UNKNOWN on the wire."""
    from huggingface_hub.errors import StrictDataclassError

    if not isinstance(err, StrictDataclassError):
        return None
    head, _, cause = str(err).partition("\n")
    named = re.match(r"Validation error for field '([^']+)'", head)
    cause = cause.strip().split(": ", 1)[-1]
    return InvalidArgument(field, f"config.json: {named.group(1) + ': ' if named else ''}{cause}")


def load_tokenizer(path, field: str = "base_model"):
    """AutoTokenizer.from_pretrained(path), a config.json transformers refuses as `config_refusal`."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except Exception as err:
        refusal = config_refusal(err, field)
        if refusal is None:
            raise
        raise refusal from err


def model_files_folder(path: str) -> Path | None:
    """The folder holding a resolved model's files: the folder itself, or a hub id's cached snapshot."""
    if Path(path).is_dir():
        return Path(path)
    cfg = cached_hub_file(path, "config.json")
    return cfg.parent if cfg is not None else None


def file_sha256(path: Path) -> str:
    """sha256 of one file: a hub cache blob's own name (the hub names LFS blobs by their sha256),
    else hashed once per (file, size, mtime) (artifacts.cached_sha256)."""
    target = path.resolve()
    if path.is_symlink() and target.parent.name == "blobs" and _HUB_BLOB.fullmatch(target.name):
        return target.name
    return cached_sha256(target, target.stat())


def weights_sha256(folder: Path) -> str:
    """sha256 of the lines "<name> <sha256>\\n" of the folder's weight files in name order; "" when none."""
    lines = [f"{f.name} {file_sha256(f)}\n" for f in sorted(folder.iterdir())
             if f.suffix in WEIGHT_SUFFIXES and f.is_file()]
    return hashlib.sha256("".join(lines).encode()).hexdigest() if lines else ""


def library_versions() -> dict[str, str]:
    """Installed versions of the libraries that generate (a missing one is left out)."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in FINGERPRINT_LIBRARIES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            pass
    return out


def model_fingerprint(path: str, tokenizer, prompt_format: str, device, dtype) -> pb.EvalFingerprint:
    """The run-time half of an eval's fingerprint: the model's weights and revision, the prompt
    format as resolved and its chat template's hash, device, dtype and library versions."""
    from py_trainer.models.base_models import gguf_revision

    folder = model_files_folder(path)
    fmt = resolve_prompt_format(prompt_format, tokenizer)
    template = tokenizer.chat_template if fmt == "chat" else None
    if isinstance(template, dict):  # named templates: hash them all, in name order
        template = "\n".join(f"{k}\n{v}" for k, v in sorted(template.items()))
    return pb.EvalFingerprint(
        model=path,
        weights_sha256=weights_sha256(folder) if folder is not None else "",
        revision=(folder.name if folder.parent.name == "snapshots" else gguf_revision(folder)) if folder is not None else "",
        prompt_format=fmt,
        chat_template_sha256=hashlib.sha256(template.encode()).hexdigest() if template else "",
        device=device.type,
        dtype=DTYPE_NAMES.get(str(dtype).removeprefix("torch."), str(dtype)),
        library_versions=library_versions(),
        code_revision=pb.CodeRevision(**code_revision()),
    )


def adapter_sha256(folder: Path) -> str:
    """sha256 of an adapter folder's weights file (adapter_model.safetensors, else adapter_model.bin)."""
    for name in ("adapter_model.safetensors", "adapter_model.bin"):
        if (folder / name).is_file():
            return file_sha256(folder / name)
    return ""


# ---------------------------------------------------------------------------------------------
# Adapters


def resolve_adapter(ref: pb.AdapterRef, field: str, data_root: Path, find_run=None) -> Path:
    """The PEFT folder an AdapterRef names: a SUCCEEDED run's adapter/, or a CANCELLED run's kept
    adapter/ (saved after its last completed step; `find_run(run_id)` returns
    a record with .state and .folder, raising NotFound/InvalidArgument); with ``checkpoint_step``
    that run's complete checkpoint at that step (`checkpoint_adapter`); or a folder under the data
    root. Errors name `field` (``adapters[0].run_id: ...``)."""
    src = ref.WhichOneof("source")
    if ref.HasField("checkpoint_step") and src != "run_id":
        raise InvalidArgument(f"{field}.checkpoint_step", "only applies to an adapter given by run_id")
    if src == "run_id":
        if find_run is None:
            raise InvalidArgument(f"{field}.run_id", "needs the sidecar's run registry; pass a path instead")
        try:
            rec = find_run(ref.run_id)
        except (NotFound, InvalidArgument) as err:
            raise type(err)(f"{field}.run_id", err.message) from None
        if getattr(rec, "unreadable", False):
            raise FailedPrecondition(f"{field}.run_id", f"run {ref.run_id!r}: {rec.reason}")
        if ref.HasField("checkpoint_step"):
            return checkpoint_adapter(rec, ref.run_id, ref.checkpoint_step, field)
        path = resolve_under(rec.folder, "adapter", f"{field}.run_id", must_exist=False)
        kept = rec.state == pb.RUN_STATE_CANCELLED and (path / "adapter_config.json").is_file()
        if rec.state != pb.RUN_STATE_SUCCEEDED and not kept:
            raise FailedPrecondition(f"{field}.run_id", f"run {ref.run_id!r} is {pb.RunState.Name(rec.state)}, "
                                                        "not SUCCEEDED (nor CANCELLED with a kept adapter)")
        if not (path / "adapter_config.json").is_file():
            raise NotFound(f"{field}.run_id", f"run {ref.run_id!r} has no adapter/")
        check_adapter_folder(path, f"{field}.run_id", f"run {ref.run_id!r}'s adapter/")
        return path
    if src == "path":
        path = resolve_under(data_root, ref.path, f"{field}.path")
        check_adapter_folder(path, f"{field}.path", repr(ref.path))
        return path
    raise InvalidArgument(field, "needs `run_id` or `path`")


def adapter_access(ref: pb.AdapterRef, field: str, data_root: Path, runs_root: Path | None):
    """`errors.permission_refused` for reading the adapter `ref` names: its request field
    (`adapters[0].run_id`), the run it belongs to, and the roots its files are shown under."""
    if ref.WhichOneof("source") == "path":
        return permission_refused(f"{field}.path", "", (Path(data_root),))
    runs = (Path(runs_root) / ref.run_id, Path(runs_root)) if runs_root is not None else ()
    return permission_refused(f"{field}.run_id", f"run {ref.run_id!r}: ", (*runs, Path(data_root)))


def adapter_label(ref: pb.AdapterRef, field: str) -> tuple[str, str]:
    """(the request field that names the adapter, how messages call it) for a resolved AdapterRef."""
    if ref.WhichOneof("source") == "path":
        return f"{field}.path", repr(ref.path)
    if ref.HasField("checkpoint_step"):
        return f"{field}.checkpoint_step", f"run {ref.run_id!r}'s checkpoint-{ref.checkpoint_step}"
    return f"{field}.run_id", f"run {ref.run_id!r}'s adapter/"


FINISHED_STATES = (pb.RUN_STATE_SUCCEEDED, pb.RUN_STATE_FAILED, pb.RUN_STATE_CANCELLED)


def checkpoint_adapter(rec, run_id: str, step: int, field: str) -> Path:
    """runs/<id>/checkpoints/checkpoint-<step> of a finished run (any terminal state), counted only
    when its completion marker exists and the files it lists are intact (`artifacts.checkpoint_damage`,
    as a resume reads it): NOT_FOUND naming the step (and the complete steps there are) otherwise."""
    where = f"{field}.checkpoint_step"
    if rec.state not in FINISHED_STATES:
        raise FailedPrecondition(where, f"run {run_id!r} is {pb.RunState.Name(rec.state)}: a checkpoint is "
                                        "evaluated once the run has finished")
    folder = resolve_under(rec.folder, f"checkpoints/checkpoint-{step}", where, must_exist=False)
    if not (folder / CHECKPOINT_COMPLETE).is_file():
        steps = sorted(int(d.name.split("-", 1)[1]) for d in (Path(rec.folder) / "checkpoints").glob("checkpoint-*")
                       if d.name.split("-", 1)[1].isdigit() and (d / CHECKPOINT_COMPLETE).is_file())
        have = f"its complete checkpoints are at steps {', '.join(map(str, steps))}" if steps else \
            "it has no complete checkpoint"
        raise NotFound(where, f"run {run_id!r} has no complete checkpoint at step {step} ({have})")
    damage = checkpoint_damage(folder)
    if damage:
        raise NotFound(where, f"run {run_id!r}'s checkpoint at step {step} is damaged: {damage}")
    check_adapter_folder(folder, where, f"run {run_id!r}'s checkpoint-{step}")
    return folder


def name_adapter_base(folder: Path, base_name: str) -> None:
    """Make a saved PEFT folder name its base as `base_name` (adapter_config.json's
    base_model_name_or_path and the model card's ``base_model:``), not the path it was loaded from."""
    import json

    cfg_path = folder / "adapter_config.json"
    cfg = json.loads(cfg_path.read_text())
    old = cfg.get("base_model_name_or_path")
    cfg["base_model_name_or_path"] = base_name
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    card = folder / "README.md"
    if old and card.is_file():
        card.write_text(card.read_text().replace(old, base_name))


def save_adapter_atomic(model, dest: Path, base_name: str = "") -> None:
    """save_pretrained into a temp folder, fsync, rename: adapter/ is never half-written.
    `base_name`: what the adapter names as its base (see `name_adapter_base`)."""
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        model.save_pretrained(tmp)
        if base_name:
            name_adapter_base(tmp, base_name)
        for f in tmp.iterdir():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old")
            os.replace(dest, old)
            shutil.rmtree(old)
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def count_params(model, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


# ---------------------------------------------------------------------------------------------
# Generation


def resolve_prompt_format(prompt_format: str, tokenizer) -> str:
    """runtime.prompt_format with "auto" resolved: "chat" when the tokenizer carries a chat template."""
    if prompt_format in ("", "auto"):
        return "chat" if getattr(tokenizer, "chat_template", None) else "raw"
    if prompt_format == "chat" and not getattr(tokenizer, "chat_template", None):
        raise FailedPrecondition("runtime.prompt_format", "chat, but the tokenizer has no chat template (use raw or auto)")
    return prompt_format


def check_chat_template(runtime, base_model: str, data_root: Path) -> None:
    """Up front, for every request that loads a model (Train, Evaluate, SampleGroups): when
    `runtime.prompt_format` is chat, FAILED_PRECONDITION naming it if the base model's tokenizer
    has no chat template (else the mistake would surface only once generation starts)."""
    if runtime.prompt_format != "chat":
        return
    from py_trainer.models.base_models import chat_template_without_building

    template = chat_template_without_building(base_model, data_root)  # a GGUF base is not converted here
    if template is False and parse_base_model(base_model, data_root).built_here:
        template = None  # the embedded builder gives its tokenizer none: nothing is built to learn that
    if template is False:
        template = getattr(load_tokenizer(resolve_model_path(base_model, data_root)), "chat_template", None)
    if not template:
        raise FailedPrecondition("runtime.prompt_format",
                                 f"chat, but the tokenizer of {base_model or 'the embedded default model'!r} "
                                 "has no chat template (use raw or auto)")


def chat_messages(prompt: str) -> list[dict]:
    """A prompt as TRL's conversational format: one user message."""
    return [{"role": "user", "content": prompt}]


def format_prompts(tokenizer, prompts: list[str], prompt_format: str) -> list[str]:
    """The text the model sees: raw, or one user message through the chat template with the
    generation prompt, exactly as TRL's `maybe_apply_chat_template` renders a conversational row."""
    fmt = resolve_prompt_format(prompt_format, tokenizer)
    if fmt == "raw":
        return list(prompts)
    return [tokenizer.apply_chat_template(chat_messages(p), tokenize=False, add_generation_prompt=True)
            for p in prompts]



INFERENCE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
"""The one thread that loads models and generates in the sidecar process (see the module docstring)."""


class GenerationCancelled(Exception):
    """Raised between batches when the caller went away: stop generating for nobody."""


SHARED_PREFIX_MIN_TOKENS = 16
"""A prompt prefix shared by fewer tokens than this is not cached on its own (too little to save)."""
CPU_ROWS_PER_GENERATE = 64
"""On CPU, the most rows (prompts x k) one generate call decodes: every row of a call keeps decoding
until its last row ends, and each step concatenates the whole KV cache, so 64 prompts x 4 samples
in one call with one rambling sample took ~3.5x as long as four calls of 16 prompts (2 cores)."""


def shared_prefix_length(rows: list[list[int]]) -> int:
    """How many leading token ids every row has in common, leaving each row at least one of its own."""
    if len(rows) < 2:
        return 0
    first, n = rows[0], min(len(r) for r in rows) - 1
    for r in rows[1:]:
        i = 0
        while i < n and r[i] == first[i]:
            i += 1
        n = i
    return max(n, 0)


def prefix_cache(model, ids: list[int], device):
    """The KV cache of one row of token ids, or None where it cannot be resumed by `generate` as a
    plain prefix (anything but full-attention `DynamicLayer`s: sliding windows, linear attention)."""
    import torch
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    if getattr(model.config, "is_encoder_decoder", False):
        return None
    out = model(input_ids=torch.tensor([ids], device=device), use_cache=True, logits_to_keep=1)
    cache = getattr(out, "cache", None)
    if not isinstance(cache, DynamicCache) or not all(type(layer) is DynamicLayer for layer in cache.layers):
        return None
    return cache


def pad_batch(rows: list[list[int]], shared: int, pad_id: int, device):
    """Token rows as [shared prefix | left padding | the row's own tokens] plus the attention mask.
    The positions (the mask's running count) are those plain left padding gives, and the shared
    prefix sits at the front, where a cache of it says it is; `shared` = 0 is plain left padding."""
    import torch

    width = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for j, r in enumerate(rows):
        own = len(r) - shared
        input_ids[j, :shared] = torch.tensor(r[:shared], dtype=torch.long)
        mask[j, :shared] = 1
        input_ids[j, width - own:] = torch.tensor(r[shared:], dtype=torch.long)
        mask[j, width - own:] = 1
    return input_ids.to(device), mask.to(device)


def generate_completions(model, tokenizer, prompts: list[str], *, k: int = 1, temperature: float = 1.0,
                         top_p: float = 1.0, max_new_tokens: int = 32, seed: int = 0, batch_size: int = 64,
                         max_prompt_length: int | None = None,
                         on_batch: Callable[[int], None] | None = None) -> list[list[str]]:
    """Return `k` decoded completions per prompt (special tokens stripped), in prompt order.

    temperature 0 means greedy decoding (then all k samples are identical; pass k=1). Sampling
    re-seeds torch per batch from (seed, batch index), batches taken in prompt order.

    Three things cut the work without changing what is generated (tests/test_generation_speed.py):
    - the longest token prefix that all prompts share (the AML instruction block, about 40% of a
      prompt) runs through the model once; every batch starts from a copy of its KV cache, so only
      each prompt's own tokens are prefilled (vLLM's prefix caching, for the one shared prefix);
      greedy and sampling alike, for a model whose cache is plain full attention;
    - greedy decoding batches the prompts longest first (as lm-evaluation-harness does), so a
      batch pads to a near-equal length. Sampling keeps prompt order, so each sample stays drawn
      in the batch, and from the seed, it always was;
    - greedy decoding (k = 1) runs `decoding.decode_batch` instead of `generate` where that is plain
      greedy search: a row that ended leaves the batch, and the KV cache fills buffers allocated
      once instead of a `torch.cat` per step; sampling's `generate` gets such a cache too.
    On CPU a batch of more than CPU_ROWS_PER_GENERATE rows (prompts x k) is generated in consecutive
    slices of whole prompts after the batch's one seed: the same samples for the same call, not
    those of one big call (the held-out measurement's 64 prompts x 4; Evaluate's 64 x 1 is one call).
    `on_batch(done)` gets the number of prompts finished so far after every batch.
    """
    import torch

    from py_trainer.models.decoding import decode_batch, greedy_search_is_plain, sampling_cache

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = next(model.parameters()).device
    greedy = temperature == 0
    ids = tokenizer(list(prompts), truncation=max_prompt_length is not None, max_length=max_prompt_length,
                    add_special_tokens=False)["input_ids"] if prompts else []
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i])) if greedy else list(range(len(ids)))
    out: list[list[str]] = [[] for _ in ids]
    with torch.no_grad():
        shared_len = shared_prefix_length(ids)
        shared = prefix_cache(model, ids[0][:shared_len], device) if shared_len >= SHARED_PREFIX_MIN_TOKENS else None
        shared_len = shared_len if shared is not None else 0
        plain_greedy = greedy and k == 1 and greedy_search_is_plain(model)
        # On CPU one generate call decodes at most CPU_ROWS_PER_GENERATE rows (whole prompts x k)
        per_call = batch_size if device.type != "cpu" else max(1, min(batch_size, CPU_ROWS_PER_GENERATE // k))
        for b, start in enumerate(range(0, len(order), batch_size)):
            torch.manual_seed((seed * 1_000_003 + b) % 2**63)
            batch = order[start:start + batch_size]
            for sub in range(0, len(batch), per_call):
                rows = batch[sub:sub + per_call]
                input_ids, mask = pad_batch([ids[i] for i in rows], shared_len, tokenizer.pad_token_id, device)
                if plain_greedy:  # generate's greedy search, without its waste (decoding.py)
                    gen = decode_batch(model, input_ids, mask, cached=shared_len, prefix=shared,
                                       max_new_tokens=max_new_tokens, eos_token_id=tokenizer.eos_token_id,
                                       pad_token_id=tokenizer.pad_token_id)
                else:
                    # generate expands rows k times, not a cache
                    resume = {"cache": sampling_cache(model, shared, len(rows) * k, input_ids.shape[1] + max_new_tokens)}
                    gen = model.generate(input_ids=input_ids, attention_mask=mask, do_sample=not greedy,
                                         temperature=None if greedy else temperature, top_p=None if greedy else top_p,
                                         top_k=None if greedy else 0, max_new_tokens=max_new_tokens,
                                         num_return_sequences=k, pad_token_id=tokenizer.pad_token_id,
                                         eos_token_id=tokenizer.eos_token_id, **resume)
                texts = tokenizer.batch_decode(gen[:, 0 if plain_greedy else input_ids.shape[1]:],
                                               skip_special_tokens=True)
                for j, i in enumerate(rows):
                    out[i] = texts[j * k:(j + 1) * k]
            if on_batch:
                on_batch(min(start + batch_size, len(prompts)))
    if was_training:
        model.train()
    return out
