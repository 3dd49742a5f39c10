"""Where an Evaluate's time goes on the real model, phase by phase (issue 43, item 1).

Runs Evaluate's own pieces (`inference.load_for_inference`, `models.format_prompts`,
`models.generate_completions`, the graders) on the first --tasks test rows of
agent-evals/tasks/arithmetic_chat.jsonl with SmolLM2-135M-Instruct, base then a LoRA adapter
(--adapter, else a random r16 LoRA on every linear layer, B ~ N(0, --lora-std)), greedy, and
times each phase. Inside `generate`, every forward of the model is timed by a hook: a forward
over more than one position is prefill, one position is a decode step; what `generate` spends
outside forwards (logits processing, stopping criteria, cache bookkeeping) is its overhead.
"wasted rows" counts decode-step rows whose sequence had already ended (EOS) but kept decoding
until its batch ended. --torch-profile adds torch.profiler's top ops over one variant.

    .venv/bin/python scripts/profile_eval.py --tasks 32 --max-new-tokens 16
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "agent-evals" / "tasks" / "arithmetic_chat.jsonl"


class Phases:
    """Seconds per named phase, summed."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)

    def add(self, name: str, seconds: float, n: int = 1) -> None:
        self.seconds[name] += seconds
        self.counts[name] += n

    def timed(self, name: str):
        phases = self

        class Timer:
            def __enter__(self):
                self.t = time.perf_counter()

            def __exit__(self, *exc):
                phases.add(name, time.perf_counter() - self.t)

        return Timer()


def random_lora(model_dir: str, out: Path, std: float) -> Path:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir),
                           LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, std)
    model.save_pretrained(out)
    return out


def forward_hooks(model, phases: Phases):
    """Time every forward of the underlying causal LM: prefill (> 1 position) vs decode (1)."""
    import torch

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    state = {}

    def pre(mod, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        state["n"] = ids.shape[1] if ids is not None else kwargs["inputs_embeds"].shape[1]
        state["rows"] = ids.shape[0] if ids is not None else 0
        state["t"] = time.perf_counter()

    def post(mod, args, kwargs, out):
        dt = time.perf_counter() - state["t"]
        if state.get("outside"):  # the shared-prefix cache's own forward
            return
        if state["n"] > 1:
            phases.add("generate: prefill forwards", dt)
        else:
            phases.add("generate: decode forwards", dt)
            phases.add("decode rows", 0, state["rows"])

    forward_hooks.state = state
    h1 = inner.register_forward_pre_hook(pre, with_kwargs=True)
    h2 = inner.register_forward_hook(post, with_kwargs=True)
    del torch
    return [h1, h2]


def compare_paths(model, tok, prompts, args, hooks) -> None:
    """Rounds of (loop, generate) / (generate, loop), each over base + adapter: seconds and identical completions."""
    from py_trainer.models import decoding
    from py_trainer.models import loading as models

    for h in hooks:
        h.remove()
    plain = decoding.greedy_search_is_plain
    times = {"greedy loop": [], "HF generate": []}
    got = {}
    for r in range(args.compare):
        arms = ["greedy loop", "HF generate"] if r % 2 == 0 else ["HF generate", "greedy loop"]
        for arm in arms:
            decoding.greedy_search_is_plain = plain if arm == "greedy loop" else (lambda m: False)
            wall, cpu = time.perf_counter(), time.process_time()
            out = []
            for variant in ("base", "adapter"):
                if variant == "base":
                    with model.disable_adapter():
                        out.append(models.generate_completions(model, tok, prompts, k=1, temperature=0,
                                                               max_new_tokens=args.max_new_tokens,
                                                               batch_size=args.batch_size))
                else:
                    model.set_adapter("adapter")
                    out.append(models.generate_completions(model, tok, prompts, k=1, temperature=0,
                                                           max_new_tokens=args.max_new_tokens,
                                                           batch_size=args.batch_size))
            times[arm].append((time.perf_counter() - wall, time.process_time() - cpu))
            got[arm] = out
    decoding.greedy_search_is_plain = plain
    print(f"\n{args.compare} interleaved rounds, base + adapter, {len(prompts)} prompts each (wall s / CPU s):")
    for arm, ts in times.items():
        print(f"  {arm:12} " + "  ".join(f"{w:.2f}/{c:.2f}" for w, c in ts)
              + f"   min wall {min(w for w, _ in ts):.2f}, min CPU {min(c for _, c in ts):.2f}")
    same = sum(a == b for v in range(2) for a, b in zip(got["greedy loop"][v], got["HF generate"][v]))
    print(f"  identical completions: {same}/{2 * len(prompts)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=32)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--adapter", default="", help="a PEFT adapter of the model (default: a random r16 LoRA)")
    ap.add_argument("--lora-std", type=float, default=0.01)
    ap.add_argument("--merge", action="store_true",
                    help="a third variant: the adapter merged into the weights (merge_adapter) for its duration")
    ap.add_argument("--compare", type=int, default=0, metavar="ROUNDS",
                    help="then ROUNDS interleaved rounds of generate_completions' greedy loop vs HF generate "
                         "(decoding.greedy_search_is_plain forced false), base and adapter, wall and CPU seconds")
    ap.add_argument("--precision", default="", help="runtime.precision (fp32, bf16; empty: fp32 on CPU)")
    ap.add_argument("--save", default="", help="write {variant: completions} as JSON here")
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--torch-profile", action="store_true", help="also torch.profiler's top ops (adapter variant)")
    args = ap.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    from py_trainer.core.rewards import build_scorer
    from py_trainer.gen.grpo.trainer.v1 import trainer_service_pb2 as pb
    from py_trainer.models import loading as models
    from py_trainer.models.base_models import resolve_base_model
    from py_trainer.models.inference import AdapterSource, load_for_inference

    phases = Phases()
    model_dir = resolve_base_model("smollm2-135m-instruct")
    tmp = Path(tempfile.mkdtemp(prefix="profile-eval-"))
    adapter = Path(args.adapter) if args.adapter else random_lora(model_dir, tmp / "adapter", args.lora_std)
    rows = [json.loads(line) for line in TASKS.read_text().splitlines()]
    rows = [r for r in rows if r["split"] == "test"][: args.tasks]
    runtime = pb.RuntimeSettings(prompt_format="chat", precision=args.precision)
    print(f"{len(rows)} tasks, greedy, {args.max_new_tokens} new tokens, batch {args.batch_size}, "
          f"torch {torch.__version__}, threads {torch.get_num_threads()}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '')}; adapter {args.adapter or f'random LoRA std {args.lora_std}'}")

    with phases.timed("load model + adapter"):
        model, tok, _, _, _ = load_for_inference("smollm2-135m-instruct", REPO, runtime,
                                                 [AdapterSource("adapter", adapter, "adapters[0]", "adapter")])
    score = build_scorer({"name": "final_number_match"})
    with phases.timed("prompt formatting (chat template)"):
        prompts = models.format_prompts(tok, [r["prompt"] for r in rows], "chat")
    with phases.timed("tokenization"):
        ids = tok(prompts, add_special_tokens=False)["input_ids"]
    shared = models.shared_prefix_length(ids)
    print(f"prompt tokens: {min(map(len, ids))}-{max(map(len, ids))}, shared prefix {shared}")

    # time the pieces generate_completions calls, by wrapping them where it looks them up
    orig_prefix, orig_decode = models.prefix_cache, tok.batch_decode

    def prefix(*a, **kw):
        forward_hooks.state["outside"] = True
        try:
            with phases.timed("shared-prefix cache"):
                return orig_prefix(*a, **kw)
        finally:
            forward_hooks.state["outside"] = False

    def batch_decode(*a, **kw):
        with phases.timed("detokenization"):
            return orig_decode(*a, **kw)

    models.prefix_cache, tok.batch_decode = prefix, batch_decode
    hooks = forward_hooks(model, phases)
    orig_generate = model.generate
    completions = {}
    steps_rows = {"total": 0, "live": 0}

    def generate(*a, **kw):
        t = time.perf_counter()
        out = orig_generate(*a, **kw)
        phases.add("generate (whole call)", time.perf_counter() - t)
        new = out[:, kw["input_ids"].shape[1]:]
        ended = (new == tok.eos_token_id) | (new == tok.pad_token_id)
        # a row is live at step s if it had not ended before s
        done_before = torch.cumsum(ended.long(), dim=1) - ended.long()
        steps_rows["total"] += new.numel()
        steps_rows["live"] += int((done_before == 0).sum())
        return out

    model.generate = generate
    from py_trainer.models import decoding

    orig_greedy = decoding.decode_batch

    def decode_batch(*a, **kw):  # the greedy path (models/decoding.py) instead of generate
        t = time.perf_counter()
        new = orig_greedy(*a, **kw)
        phases.add("generate (whole call)", time.perf_counter() - t)
        ended = (new == tok.eos_token_id) | (new == tok.pad_token_id)
        done_before = torch.cumsum(ended.long(), dim=1) - ended.long()
        steps_rows["total"] += new.numel()
        steps_rows["live"] += int((done_before == 0).sum())
        return new

    decoding.decode_batch = decode_batch
    kept = dict(phases.seconds)  # an untimed warm-up (oneDNN's first calls), then the phases again
    models.generate_completions(model, tok, prompts[:4], k=1, temperature=0, max_new_tokens=2)
    phases.seconds.clear(), phases.counts.clear(), phases.seconds.update(kept)
    steps_rows.update(total=0, live=0)
    variants = ["base", "adapter"] + (["adapter merged"] if args.merge else [])
    for variant in variants:
        with phases.timed("adapter switch"):
            ctx = model.disable_adapter() if variant == "base" else None
            if ctx is not None:
                ctx.__enter__()
            else:
                model.set_adapter("adapter")
            if variant == "adapter merged":
                model.merge_adapter()
        t = time.perf_counter()
        comps = models.generate_completions(model, tok, prompts, k=1, temperature=0,
                                            max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
        phases.add("generate_completions (whole)", time.perf_counter() - t)
        with phases.timed("grading"):
            scores = [score(c[0], r["answers"]) for c, r in zip(comps, rows)]
        with phases.timed("adapter switch"):
            if ctx is not None:
                ctx.__exit__(None, None, None)
            if variant == "adapter merged":
                model.unmerge_adapter()
        completions[variant] = comps
        print(f"{variant}: generate_completions {time.perf_counter() - t:.2f} s")
        print(f"{variant}: mean final_number_match {sum(s or 0 for s in scores) / len(scores):.3f}; "
              f"e.g. {comps[0][0]!r}")

    if args.save:
        Path(args.save).write_text(json.dumps({v: [c[0] for c in cs] for v, cs in completions.items()}))
    if args.merge:
        same = sum(a == b for a, b in zip(completions["adapter"], completions["adapter merged"]))
        print(f"adapter merged vs unmerged: {same}/{len(rows)} identical completions")
    s = phases.seconds
    s["generate: outside forwards"] = s["generate (whole call)"] - s["generate: prefill forwards"] - \
        s["generate: decode forwards"]
    total = sum(v for k, v in s.items() if k not in ("generate: prefill forwards", "generate: decode forwards",
                                                         "generate: outside forwards", "generate (whole call)",
                                                         "generate_completions (whole)", "decode rows"))
    total += s["generate_completions (whole)"] - s["shared-prefix cache"] - s["detokenization"]
    print(f"\n{'phase':40} {'s':>8} {'share':>6}")
    order = ["load model + adapter", "prompt formatting (chat template)", "tokenization", "shared-prefix cache",
             "generate: prefill forwards", "generate: decode forwards", "generate: outside forwards",
             "detokenization", "grading", "adapter switch"]
    for k in order:
        print(f"{k:40} {s[k]:8.3f} {100 * s[k] / total:5.1f}%")
    print(f"{'total':40} {total:8.3f}")
    gen_tokens = steps_rows["total"]
    print(f"decode steps: {phases.counts['generate: decode forwards']} forwards, {phases.counts['decode rows']} rows; "
          f"generated positions {gen_tokens}, live (before EOS) {steps_rows['live']} "
          f"({100 * steps_rows['live'] / max(gen_tokens, 1):.0f}%): wasted rows {gen_tokens - steps_rows['live']}")
    print(f"tokens/s over generate calls: {gen_tokens / s['generate (whole call)']:.1f} positions/s, "
          f"{steps_rows['live'] / s['generate (whole call)']:.1f} live tokens/s; "
          f"per decode forward {1000 * s['generate: decode forwards'] / max(phases.counts['generate: decode forwards'], 1):.1f} ms")

    if args.compare:
        compare_paths(model, tok, prompts, args, hooks)
        hooks = []
    if args.torch_profile:
        from torch.profiler import ProfilerActivity, profile

        for h in hooks:
            h.remove()
        model.set_adapter("adapter")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            models.generate_completions(model, tok, prompts, k=1, temperature=0,
                                        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size)
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=20))
    return 0


if __name__ == "__main__":
    sys.exit(main())
