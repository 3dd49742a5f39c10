"""The real model on a task file, before and after training (issue 27): greedy accuracy, pass@k at
temperature T and the answer forms of SmolLM2-135M-Instruct (base_model "smollm2-135m-instruct"),
or of that base with a trained LoRA adapter (--adapter), prompts through its chat template (as
`prompt_format` auto resolves it for this model in training and Evaluate).

Scores per completion:
- strict exact_match: the <answer> tag the shipped arithmetic prompts ask for;
- final_number_match: the answer where the model puts it (the tag, else the number after the last
  "=", else a bare number), never the echoed question -- the real recipe's grader;
- stops_after_answer: the completion is just an answer and ends there.
Forms: bare number, tagged number, echoed equation (one equation ending in its result, nothing
after), run-on / other.

    flock /tmp/cpu.lock .venv/bin/python scripts/real_model_baseline.py --tasks agent-evals/tasks/arithmetic.jsonl -n 60
    flock /tmp/cpu.lock .venv/bin/python scripts/real_model_baseline.py --tasks agent-evals/tasks/arithmetic_chat.jsonl \\
        --adapter agent-evals/runs/<run_id>/adapter
"""
import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("--tasks", default="agent-evals/tasks/arithmetic.jsonl")
ap.add_argument("--split", default="test")
ap.add_argument("-n", type=int, default=0, help="first N tasks of the split (0 = all)")
ap.add_argument("--adapter", help="a LoRA adapter folder trained on this base")
ap.add_argument("--max-new-tokens", type=int, default=32, help="default 32, as agent eval")
ap.add_argument("-k", type=int, default=8, help="samples per task for pass@k (0 = greedy only)")
ap.add_argument("--temperature", type=float, default=1.0)
ap.add_argument("--examples", type=int, default=6)
args = ap.parse_args()

import torch  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from py_trainer.core.task_rewards import exact_match_reward, final_number_match_reward, stops_after_answer_reward  # noqa: E402
from py_trainer.models.base_models import resolve_base_model  # noqa: E402

folder = resolve_base_model("smollm2-135m-instruct")
tok = AutoTokenizer.from_pretrained(folder)
tok.padding_side = "left"
m = AutoModelForCausalLM.from_pretrained(folder)
if args.adapter:
    from peft import PeftModel
    m = PeftModel.from_pretrained(m, args.adapter).merge_and_unload()
m.eval()
rows = [json.loads(line) for line in open(REPO / args.tasks) if line.strip()]
rows = [r for r in rows if r["split"] == args.split]
rows = rows[: args.n] if args.n else rows
N = len(rows)
texts = [tok.apply_chat_template([{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True) for r in rows]


def gen(sample: bool, k: int = 1, seed: int = 0) -> list[str]:
    torch.manual_seed(seed)
    out = []
    for i in range(0, len(texts), 16):
        enc = tok(texts[i:i + 16], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            o = m.generate(**enc, max_new_tokens=args.max_new_tokens, do_sample=sample, temperature=args.temperature if sample else None,
                           top_p=None, top_k=None, num_return_sequences=k, pad_token_id=tok.pad_token_id)
        out += tok.batch_decode(o[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out


def form(c: str) -> str:
    c = c.strip()
    if re.fullmatch(r"<answer>\s*-?\d+\s*</answer>", c):
        return "tagged number"
    if re.fullmatch(r"-?\d+\.?", c):
        return "bare number"
    if stops_after_answer_reward(c):
        return "echoed equation"
    return "run-on/other"


def scores(cs: list[str], rs: list[dict]) -> dict:
    return {"strict exact_match": sum(exact_match_reward(c, r["answers"]) for c, r in zip(cs, rs)) / len(cs),
            "final_number_match": sum(final_number_match_reward(c, r["answers"]) for c, r in zip(cs, rs)) / len(cs),
            "stops_after_answer": sum(stops_after_answer_reward(c) for c in cs) / len(cs)}


def by(field: str, cs: list[str], rs: list[dict]) -> dict:
    groups = collections.defaultdict(list)
    for c, r in zip(cs, rs):
        groups[r.get(field, "-")].append(final_number_match_reward(c, r["answers"]))
    return {g: f"{sum(v) / len(v):.3f} ({len(v)})" for g, v in sorted(groups.items())}


print(f"model: smollm2-135m-instruct{' + ' + args.adapter if args.adapter else ''}; {args.tasks} split {args.split}, {N} tasks; "
      f"chat template; {args.max_new_tokens} new tokens")
t = time.time()
g = gen(False)
print(f"greedy ({time.time() - t:.0f} s): " + ", ".join(f"{k} {v:.3f}" for k, v in scores(g, rows).items()))
print("  forms:", dict(collections.Counter(form(c) for c in g)))
print("  final_number_match by operation:", by("operation", g, rows))
for c, r in list(zip(g, rows))[: args.examples]:
    print("   ", repr([line for line in r["prompt"].splitlines() if "?" in line][-1][-40:]), "->", repr(c))
if args.k:
    t = time.time()
    s = gen(True, k=args.k, seed=1)
    per = [s[i * args.k:(i + 1) * args.k] for i in range(N)]
    print(f"sampled T={args.temperature} x{args.k} ({time.time() - t:.0f} s): pass@{args.k} final_number_match "
          f"{sum(any(final_number_match_reward(c, r['answers']) for c in cs) for cs, r in zip(per, rows)) / N:.3f}, "
          f"strict {sum(any(exact_match_reward(c, r['answers']) for c in cs) for cs, r in zip(per, rows)) / N:.3f}; per sample: "
          + ", ".join(f"{k} {v:.3f}" for k, v in scores(s, [r for r in rows for _ in range(args.k)]).items()))
    print("  forms:", dict(collections.Counter(form(c) for c in s)))
sys.stdout.flush()
