"""The check behind `export --merge`: a merged model must behave as base + adapter.

Merged exports that silently differ from the adapter are a recurring bug class (a merger that
did not fold the LoRA weights in; an export script that corrupted weights), so `export --merge`
loads the merged model it just wrote (from disk, with `from_pretrained`) next to base + adapter
(PEFT, unmerged) and compares them on N test prompts (default 32), in prompt order:

1. greedy completions, token for token identical (decoded text compared);
2. the logits at every prompt position within the dtype's tolerance, elementwise
   |merged - adapted| <= atol + rtol * |adapted| (`TOLERANCE`: merging changes only the rounding
   of W + BA, which is about 1e-6 relative in fp32 and a few bf16 ulps).

The first prompt that fails either is named (its index, id and what differed) and the export is
refused; the result is returned as a dict for export-check.json either way.
"""

from __future__ import annotations

from pathlib import Path

from py_trainer.core.errors import FailedPrecondition, InvalidArgument
from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

DEFAULT_CHECK_PROMPTS = 32
CHECK_MAX_NEW_TOKENS = 32
TOLERANCE = {"float32": (1e-3, 1e-3), "bfloat16": (1e-1, 2e-2), "float16": (2e-2, 1e-2)}
"""dtype -> (atol, rtol) of the logit comparison."""


def quiet_libraries() -> None:
    """`export`'s output is its own lines (agent export passes it to the user's terminal): no
    transformers or hub progress bars ("Loading weights", "Writing model shards"), no transformers
    info or warning logs, no FutureWarning about a library's own deprecations (issue 45 item 6).
    Its errors still print: they are the export's own one-line messages."""
    import os
    import warnings

    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    from huggingface_hub.utils import disable_progress_bars
    from transformers.utils import logging as transformers_logging

    disable_progress_bars()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()


class MergeMismatch(FailedPrecondition):
    """The merged model differs from base + adapter; `result` is what export-check.json records."""

    def __init__(self, message: str, result: dict):
        super().__init__("--merge", message)
        self.result = result


def check_prompts(tasks: Path, split: str, n: int) -> list[pb.TaskRow]:
    """The first `n` rows of `split` in a task file (docs/tasks.md format)."""
    from py_trainer.data.request_data import task_rows

    if n < 1:
        raise InvalidArgument("--check-prompts", f"must be >= 1, got {n}")
    tasks = Path(tasks).resolve()
    if not tasks.is_file():
        raise InvalidArgument("--check-tasks", f"{tasks}: no such file")
    rows = task_rows(pb.Dataset(jsonl_path=tasks.name, split=split, limit=n), tasks.parent, "--check-tasks",
                     need_answers=False)
    if not rows:
        raise InvalidArgument("--check-tasks", f"{tasks}: no rows with split {split!r}")
    return rows


def _logits(model, tokenizer, prompts: list[str]):
    """Per prompt, the logits at its (unpadded) positions, float32, on the CPU."""
    import torch

    out = []
    device = next(model.parameters()).device
    with torch.no_grad():
        for p in prompts:
            ids = tokenizer(p, return_tensors="pt").input_ids.to(device)
            out.append(model(ids).logits[0].float().cpu())
    return out


def compare_merged(adapted, merged, tokenizer, rows: list[pb.TaskRow], *, prompt_format: str,
                   max_new_tokens: int = CHECK_MAX_NEW_TOKENS) -> dict:
    """Compare `merged` with `adapted` (base + adapter) on `rows`; the result dict, or MergeMismatch
    naming the first differing prompt."""
    from py_trainer.models.loading import format_prompts, generate_completions

    dtype = str(next(merged.parameters()).dtype).removeprefix("torch.")
    atol, rtol = TOLERANCE.get(dtype, TOLERANCE["bfloat16"])
    prompts = format_prompts(tokenizer, [r.prompt for r in rows], prompt_format)
    gen = dict(k=1, temperature=0.0, max_new_tokens=max_new_tokens)
    want = [c[0] for c in generate_completions(adapted, tokenizer, prompts, **gen)]
    got = [c[0] for c in generate_completions(merged, tokenizer, prompts, **gen)]
    la, lm = _logits(adapted, tokenizer, prompts), _logits(merged, tokenizer, prompts)
    worst = 0.0
    result = {"prompts": len(rows), "dtype": dtype, "atol": atol, "rtol": rtol, "max_new_tokens": max_new_tokens,
              "greedy_identical": True, "logits_within_tolerance": True}
    for i, row in enumerate(rows):
        diff = (lm[i] - la[i]).abs()
        excess = float((diff - (atol + rtol * la[i].abs())).max())
        worst = max(worst, float(diff.max()))
        failed = []
        if got[i] != want[i]:
            failed.append(f"greedy completion {got[i]!r} vs base + adapter {want[i]!r}")
            result["greedy_identical"] = False
        if excess > 0:
            failed.append(f"logits differ by up to {float(diff.max()):.3g} (tolerance {atol:g} + {rtol:g} x |logit|, "
                          f"{dtype})")
            result["logits_within_tolerance"] = False
        if failed:
            result.update(passed=False, first_differing_prompt={"index": i, "id": row.id, "prompt": row.prompt},
                          max_abs_logit_diff=worst)
            raise MergeMismatch(f"the merged model differs from base + adapter on test prompt {i} "
                                f"(id {row.id!r}): {'; '.join(failed)}", result)
    result.update(passed=True, max_abs_logit_diff=worst)
    return result


def verify_merged_folder(base_path: str, adapter: Path, merged_dir: Path, rows: list[pb.TaskRow], *,
                         prompt_format: str = "auto", max_new_tokens: int = CHECK_MAX_NEW_TOKENS) -> dict:
    """Load `merged_dir` and base + `adapter` as `from_pretrained` does and compare them
    (`compare_merged`)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(merged_dir))
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    merged = AutoModelForCausalLM.from_pretrained(str(merged_dir)).eval()
    adapted = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base_path, dtype=merged.dtype),
                                        str(adapter)).eval()
    return compare_merged(adapted, merged, tokenizer, rows, prompt_format=prompt_format,
                          max_new_tokens=max_new_tokens)
