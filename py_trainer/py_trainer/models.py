"""Models: device and dtype, the one model + tokenizer loader, adapters, and batched generation.

Loading always goes through `from_pretrained`, for the embedded default model (empty base_model)
as for a local folder under the data root or a hub id, so a real model works the same way on a
GPU machine. Generation left-pads prompts and re-seeds the torch generator per batch from
(seed, batch index): the same call gives the same completions whether it runs before or after
other work, which is what makes step-0 vs end held-out rewards comparable.

In the sidecar, every model load and generation (Evaluate, SampleGroups) runs on the one
`INFERENCE` thread, one job at a time: transformers' loading is not thread-safe (concurrent
`from_pretrained` calls fail with "Cannot copy out of meta tensor" and leave torch's global
state broken for every later load), and the torch RNG that seeds sampling is process-global, so
serialised jobs are also what makes a job's results identical to a solo run. Training runs in
its own worker process and is not affected.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

from py_trainer.errors import FailedPrecondition, InvalidArgument, NotFound
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
from py_trainer.model_files import check_adapter_folder
from py_trainer.paths import resolve_under

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
    """A folder under the data root, else the embedded default model (empty) or a hub id."""
    from py_trainer.tiny_model import resolve_base_model

    if base_model and (Path(data_root) / base_model).exists():
        return str((Path(data_root) / base_model).resolve())
    return resolve_base_model(base_model)


def load_model(base_model: str, data_root: Path, runtime: pb.RuntimeSettings):
    """(model on its device, tokenizer with a pad token, resolved path, device, dtype)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    device = pick_device(runtime.device)
    dtype = pick_dtype(runtime.precision, device)
    path = resolve_model_path(base_model, data_root)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype).to(device)
    return model, tokenizer, path, device, dtype


# ---------------------------------------------------------------------------------------------
# Adapters


def resolve_adapter(ref: pb.AdapterRef, field: str, data_root: Path, find_run=None) -> Path:
    """The PEFT folder an AdapterRef names: a SUCCEEDED run's adapter/, or a CANCELLED run's kept
    adapter/ (saved after its last completed step; `find_run(run_id)` returns
    a record with .state and .folder, raising NotFound/InvalidArgument) or a folder under the data
    root. Errors name `field` (``adapters[0].run_id: ...``)."""
    src = ref.WhichOneof("source")
    if src == "run_id":
        if find_run is None:
            raise InvalidArgument(f"{field}.run_id", "needs the sidecar's run registry; pass a path instead")
        try:
            rec = find_run(ref.run_id)
        except (NotFound, InvalidArgument) as err:
            raise type(err)(f"{field}.run_id", err.message) from None
        path = Path(rec.folder) / "adapter"
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


def attach_adapters(model, adapters: list[tuple[str, Path]]):
    """`model` with every (name, folder) adapter loaded by PEFT (first one active); unchanged if none."""
    if not adapters:
        return model
    from peft import PeftModel

    device = next(model.parameters()).device
    first_name, first_path = adapters[0]
    model = PeftModel.from_pretrained(model, str(first_path), adapter_name=first_name).to(device)
    for name, path in adapters[1:]:
        model.load_adapter(str(path), adapter_name=name)
    return model


def save_adapter_atomic(model, dest: Path) -> None:
    """save_pretrained into a temp folder, fsync, rename: adapter/ is never half-written."""
    tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}."))
    try:
        model.save_pretrained(tmp)
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


INFERENCE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="inference")
"""The one thread that loads models and generates in the sidecar process (see the module docstring)."""


class GenerationCancelled(Exception):
    """Raised between batches when the caller went away: stop generating for nobody."""


def generate_completions(model, tokenizer, prompts: list[str], *, k: int = 1, temperature: float = 1.0,
                         top_p: float = 1.0, max_new_tokens: int = 32, seed: int = 0, batch_size: int = 64,
                         max_prompt_length: int | None = None,
                         on_batch: Callable[[int], None] | None = None) -> list[list[str]]:
    """Return `k` decoded completions per prompt (special tokens stripped), in prompt order.

    temperature 0 means greedy decoding (then all k samples are identical; pass k=1).
    """
    import torch

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    device = next(model.parameters()).device
    out: list[list[str]] = []
    greedy = temperature == 0
    with torch.no_grad():
        for b, start in enumerate(range(0, len(prompts), batch_size)):
            batch = prompts[start:start + batch_size]
            enc = tokenizer(batch, return_tensors="pt", padding=True, truncation=max_prompt_length is not None,
                            max_length=max_prompt_length, add_special_tokens=False).to(device)
            torch.manual_seed((seed * 1_000_003 + b) % 2**63)
            gen = model.generate(
                **enc,
                do_sample=not greedy,
                temperature=None if greedy else temperature,
                top_p=None if greedy else top_p,
                top_k=None if greedy else 0,
                max_new_tokens=max_new_tokens,
                num_return_sequences=k,
                pad_token_id=tokenizer.pad_token_id,
                eos_token_id=tokenizer.eos_token_id,
            )
            texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            for i in range(len(batch)):
                out.append(texts[i * k:(i + 1) * k])
            if on_batch:
                on_batch(min(start + batch_size, len(prompts)))
    if was_training:
        model.train()
    return out
