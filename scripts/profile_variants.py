"""Where a greedy Evaluate of the base and one adapter spends its time on the real model, pass by
pass in one process (issue 43): `variants.generate_greedy_variants` (what Evaluate runs on CPU)
over the test split of agent-evals/tasks/arithmetic_chat.jsonl, SmolLM2-135M-Instruct through its
chat template, fp32, 16 new tokens, batch 64. Per pass: wall seconds, the seconds inside prefill
forwards (more than one position) and decode-step forwards (one), and the minor page faults of
the whole pass and of each kind of forward (memory touched for the first time, or again after
glibc gave it back). The first pass in a fresh process pays the first touch of the KV cache.

Run it with the environment py-trainer's workers get (core/cpu_env.py), alone on the machine:

    GOMP_SPINCOUNT=5000 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TOP_PAD_=67108864 \\
        MALLOC_TRIM_THRESHOLD_=1073741824 .venv/bin/python scripts/profile_variants.py \\
        --adapter agent-evals/real-model/runs/<run_id>/adapter [--passes 3] [--tasks 200]

--save FILE writes the completions ({"base": [...], "adapter": [...]}) to compare two versions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "agent-evals" / "tasks" / "arithmetic_chat.jsonl"


def faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--adapter", required=True, help="a PEFT LoRA adapter of SmolLM2-135M-Instruct")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--tasks", type=int, default=200, help="the first N test tasks")
    ap.add_argument("--save", default="", help="write the last pass's completions here as JSON")
    args = ap.parse_args()
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from py_trainer.models.base_models import resolve_base_model
    from py_trainer.models.loading import format_prompts
    from py_trainer.models.variants import generate_greedy_variants

    folder = resolve_base_model("smollm2-135m-instruct")
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    model = PeftModel.from_pretrained(model, args.adapter, adapter_name="adapter").eval()
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    prompts = format_prompts(tok, [r["prompt"] for r in rows if r["split"] == "test"][:args.tasks], "chat")
    spent = {"prefill": [0.0, 0, 0], "decode": [0.0, 0, 0]}  # seconds, forwards, faults
    started: dict[str, float] = {}

    def before(module, a, kw):
        started.update(t=time.perf_counter(), f=faults())

    def after(module, a, kw, out):
        kind = "prefill" if kw["input_ids"].shape[1] > 1 else "decode"
        spent[kind][0] += time.perf_counter() - started["t"]
        spent[kind][1] += 1
        spent[kind][2] += faults() - started["f"]

    base = model.get_base_model()
    base.register_forward_pre_hook(before, with_kwargs=True)
    base.register_forward_hook(after, with_kwargs=True)
    print(f"{len(prompts)} tasks x base + adapter, torch threads {torch.get_num_threads()}", flush=True)
    for n in range(args.passes):
        for kind in spent.values():
            kind[:] = [0.0, 0, 0]
        f0, t0 = faults(), time.perf_counter()
        out = generate_greedy_variants(model, tok, prompts, [None, "adapter"], max_new_tokens=16, batch_size=64)
        wall, total = time.perf_counter() - t0, faults() - f0
        p, d = spent["prefill"], spent["decode"]
        print(f"pass {n}: {wall:.2f} s; prefill {p[0]:.2f} s in {p[1]} forwards, decode {d[0]:.2f} s in {d[1]}; "
              f"minor faults {total} (prefill forwards {p[2]}, decode forwards {d[2]})", flush=True)
    if args.save:
        Path(args.save).write_text(json.dumps({"base": out[0], "adapter": out[1]}))


if __name__ == "__main__":
    main()
