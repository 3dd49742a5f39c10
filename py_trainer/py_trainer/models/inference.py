"""A base model and its adapters loaded for generation (Evaluate, SampleGroups), every failure a
status that names the part that failed and why.

What the files say is checked before anything is queued (`model_files`: truncated weights, an
adapter whose rank or layers do not match). What only loading can tell is mapped here:
- a base model that does not load: FAILED_PRECONDITION on ``base_model`` with the library's reason;
- an adapter that does not load, or whose weights are not finite (a diverged run: NaN in, NaN
  probabilities out, and sampling fails): FAILED_PRECONDITION on that adapter's field;
- running out of memory (a MemoryError, torch's "can't allocate memory", a CUDA OOM):
  RESOURCE_EXHAUSTED with what it was doing;
- anything else: INTERNAL naming the stage, never gRPC's UNKNOWN.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from py_trainer.core.errors import FailedPrecondition, RequestError, ResourceExhausted
from py_trainer.models.loading import load_model

OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory", "os error 12",
               "std::bad_alloc")


class InferenceFailed(RequestError):
    """Generation failed for a reason that is not the caller's: INTERNAL, with the stage and the cause."""

    code = grpc.StatusCode.INTERNAL


@dataclass(frozen=True)
class AdapterSource:
    """An adapter to attach: its variant name, folder, the request field that named it and how
    messages call it ("run 'r1''s adapter/", "'my-adapter'")."""

    name: str
    folder: Path
    field: str
    what: str


def is_out_of_memory(exc: BaseException) -> bool:
    """A MemoryError, torch.OutOfMemoryError (CUDA), or an allocator's out-of-memory RuntimeError."""
    if isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryError":
        return True
    return any(m in str(exc).lower() for m in OOM_MARKERS)


def cause_text(exc: BaseException, limit: int = 300) -> str:
    """ "Type: first line of the message", short."""
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first}"[:limit]


def mapped_error(exc: Exception, field: str, what: str, doing: str) -> RequestError:
    """The status for `exc` raised while `doing` something with the part named by `field`/`what`."""
    if isinstance(exc, RequestError):
        return exc
    if is_out_of_memory(exc):
        return ResourceExhausted(field, f"out of memory while {doing} {what} ({cause_text(exc)})")
    return FailedPrecondition(field, f"{what} does not load: {cause_text(exc)}")


def nonfinite_weight(model, adapter_name: str) -> str:
    """The first LoRA parameter of `adapter_name` holding NaN or inf ("<name> (NaN)"), or ''."""
    import torch

    for pname, param in model.named_parameters():
        if "lora_" in pname and f".{adapter_name}." in f"{pname}.":
            if not torch.isfinite(param).all():
                kind = "NaN" if torch.isnan(param).any() else "inf"
                return f"{pname.replace(f'.{adapter_name}.', '.')} ({kind})"
    return ""


def load_for_inference(base_model: str, data_root: Path, runtime, adapters: list[AdapterSource]):
    """(model in eval mode with every adapter attached, the first one active; tokenizer; resolved
    path; device; dtype), or the status naming what did not load."""
    base = repr(base_model or "the embedded default model")
    try:
        model, tokenizer, path, device, dtype = load_model(base_model, Path(data_root), runtime)
    except Exception as exc:
        raise mapped_error(exc, "base_model", base, "loading") from None
    for i, a in enumerate(adapters):
        try:
            if i == 0:
                from peft import PeftModel

                model = PeftModel.from_pretrained(model, str(a.folder), adapter_name=a.name).to(device)
            else:
                model.load_adapter(str(a.folder), adapter_name=a.name)
        except Exception as exc:
            raise mapped_error(exc, a.field, a.what, "loading") from None
        bad = nonfinite_weight(model, a.name)
        if bad:
            raise FailedPrecondition(a.field, f"{a.what} has non-finite weights ({bad}): the run that made it "
                                              "diverged; evaluate an earlier checkpoint (checkpoint_step) or "
                                              "retrain with a lower learning rate")
    if adapters:
        model.set_adapter(adapters[0].name)
    model.eval()
    return model, tokenizer, path, device, dtype


def generation_error(exc: Exception, field: str, what: str) -> RequestError:
    """The status for `exc` raised while generating with the variant named by `field`/`what`."""
    if isinstance(exc, RequestError):
        return exc
    if is_out_of_memory(exc):
        return ResourceExhausted(field, f"out of memory while generating with {what} ({cause_text(exc)}): "
                                        "lower batch_size, samples_per_task or max_new_tokens")
    if "probability tensor contains" in str(exc):  # torch.multinomial on NaN/inf probabilities
        return FailedPrecondition(field, f"{what} gives non-finite probabilities when sampling "
                                         f"({cause_text(exc)}): its weights have diverged")
    return InferenceFailed(field, f"generating with {what} failed: {cause_text(exc)}")
