"""The real model's starting point on a task file (issue 27, the recipe's "before"): greedy
accuracy, pass@8 at T=1 and the answer forms of base SmolLM2-135M-Instruct (base_model
"smollm2-135m-instruct"), prompts through its chat template, 16 new tokens.

Two scores per completion: the project's strict exact_match (the <answer> tag the prompts ask
for) and "right in any form": the tag's content, else the number after the last "=", else the
whole completion as a bare number -- the answer, never the echoed question.

    flock /tmp/cpu.lock .venv/bin/python scripts/real_model_baseline.py 60
"""
import collections
import json
import re
import sys
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from py_trainer.base_models import resolve_base_model
from py_trainer.task_rewards import exact_match_reward
folder = resolve_base_model("smollm2-135m-instruct")
tok = AutoTokenizer.from_pretrained(folder); tok.padding_side = "left"
m = AutoModelForCausalLM.from_pretrained(folder).eval()
rows = [json.loads(l) for l in open(Path(__file__).resolve().parents[1] / "agent-evals/tasks/arithmetic.jsonl") if l.strip()]
rows = [r for r in rows if r["split"] == "test"]
N = int(sys.argv[1]) if len(sys.argv) > 1 else len(rows)
rows = rows[:N]
texts = [tok.apply_chat_template([{"role": "user", "content": r["prompt"]}], tokenize=False, add_generation_prompt=True) for r in rows]
def gen(texts, sample, k=1, seed=0):
    torch.manual_seed(seed)
    out = []
    for i in range(0, len(texts), 16):
        enc = tok(texts[i:i+16], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            o = m.generate(**enc, max_new_tokens=16, do_sample=sample, temperature=1.0 if sample else None, top_p=None, top_k=None, num_return_sequences=k, pad_token_id=tok.pad_token_id)
        out += tok.batch_decode(o[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return out
def form(c):
    c = c.strip()
    if re.fullmatch(r"<answer>\s*-?\d+\s*</answer>", c): return "tagged number"
    if re.fullmatch(r"-?\d+", c): return "bare number"
    if re.match(r"-?\d+\s*[-+]\s*-?\d+\s*=\s*-?\d+\s*$", c): return "echoed equation"
    return "other/run-on"
def right(c, gold):  # the answer, not the echo: the tag's content, else the number after the last '='
    t = re.findall(r"<answer>(.*?)</answer>", c)
    if t: return t[-1].strip() == gold
    eq = re.findall(r"=\s*(-?\d+)", c)
    if eq: return eq[-1] == gold

    return c.strip() == gold
t = time.time()
g = gen(texts, False)
print(f"greedy ({time.time()-t:.0f} s):", "strict exact_match (tag) %.3f" % (sum(exact_match_reward(c, r["answers"]) for c, r in zip(g, rows)) / N),
      "| answer right in any form %.3f" % (sum(right(c, r["answers"][0]) for c, r in zip(g, rows)) / N))
print("greedy forms:", dict(collections.Counter(form(c) for c in g)))
for c, r in list(zip(g, rows))[:6]: print("  ", repr(r["prompt"].split("Question: ")[1].strip()), "->", repr(c))
t = time.time()
s = gen(texts, True, k=8, seed=1)
print(f"sampled T=1 x8 ({time.time()-t:.0f} s):")
per = [s[i*8:(i+1)*8] for i in range(N)]
print("  pass@8 strict %.3f, any form %.3f; per-sample any form %.3f" % (
    sum(any(exact_match_reward(c, r["answers"]) for c in cs) for cs, r in zip(per, rows)) / N,
    sum(any(right(c, r["answers"][0]) for c in cs) for cs, r in zip(per, rows)) / N,
    sum(right(c, r["answers"][0]) for cs, r in zip(per, rows) for c in cs) / (8 * N)))
print("  sampled forms:", dict(collections.Counter(form(c) for c in s)))
