"""Evaluate's batched single-load path vs a naive loop, side by side, at N = 50, 200 and 800 tasks.

- batched: `py_trainer.evaluate.run_evaluation`, the code behind the Evaluate RPC: the base model
  loaded once, the adapter attached with PEFT and switched, prompts generated in left-padded
  batches;
- naive: one prompt at a time, and the model (and adapter) reloaded from disk for each variant.
Both evaluate two variants (base + one adapter), greedy decoding, the same max_new_tokens, the
same graders. Prints tasks/s for each and the speed-up ratio. Target: at least 5x.

    .venv/bin/python scripts/bench_eval.py [--sizes 50 200 800]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "agent-evals" / "tasks" / "aml_typology.jsonl"


def make_adapter(model_dir: str, out: Path) -> Path:
    """A LoRA adapter with non-zero weights (so switching it on changes the outputs)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.01)
    model.save_pretrained(out)
    return out


def naive(model_dir: str, adapter: Path, rows: list[dict], max_new_tokens: int) -> float:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.rewards import build_scorer

    score = build_scorer({"name": "exact_match"})
    t0 = time.perf_counter()
    for variant in ("base", "adapter"):
        tok = AutoTokenizer.from_pretrained(model_dir)
        model = AutoModelForCausalLM.from_pretrained(model_dir)
        if variant == "adapter":
            model = PeftModel.from_pretrained(model, str(adapter))
        model.eval()
        for r in rows:
            enc = tok(r["prompt"], return_tensors="pt", add_special_tokens=False)
            with torch.no_grad():
                out = model.generate(**enc, do_sample=False, max_new_tokens=max_new_tokens,
                                     pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
            text = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
            score(text, r["answers"])
    return time.perf_counter() - t0


def batched(data_root: Path, adapter: Path, rows_file: Path, n: int, max_new_tokens: int) -> float:
    from py_trainer.evaluate import plan_evaluation, run_evaluation
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb

    class Registry:
        def __init__(self, root):
            self.data_root = root

    req = pb.EvaluateRequest(tasks=pb.Dataset(jsonl_path=rows_file.name, limit=n),
                             adapters=[pb.AdapterRef(name="adapter", path=adapter.name)],
                             max_new_tokens=max_new_tokens, graders=[pb.RewardSpec(name="exact_match")])
    t0 = time.perf_counter()
    plan = plan_evaluation(req, Registry(data_root))
    run_evaluation(plan, data_root)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 200, 800])
    ap.add_argument("--max-new-tokens", type=int, default=16)
    args = ap.parse_args()
    from py_trainer.tiny_model import ensure_default_model

    model_dir = str(ensure_default_model())
    tmp = Path(tempfile.mkdtemp(prefix="bench-eval-"))
    adapter = make_adapter(model_dir, tmp / "adapter")
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    rows_file = tmp / "tasks.jsonl"
    rows_file.write_text("".join(json.dumps({"id": r["id"], "prompt": r["prompt"], "answers": r["answers"]}) + "\n"
                                 for r in rows))
    print(f"{'N':>5} {'naive tasks/s':>14} {'batched tasks/s':>16} {'ratio':>7}")
    for n in args.sizes:
        subset = rows[:n]
        t_naive = naive(model_dir, adapter, subset, args.max_new_tokens)
        t_batched = batched(tmp, adapter, rows_file, n, args.max_new_tokens)
        # tasks/s counts each task once per variant (2 variants).
        print(f"{n:>5} {2 * n / t_naive:>14.1f} {2 * n / t_batched:>16.1f} {t_naive / t_batched:>6.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
