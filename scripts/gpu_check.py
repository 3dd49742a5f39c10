#!/usr/bin/env python3
"""GPU check: ~20 real GRPO steps (TRL GRPOTrainer + PEFT LoRA) on a randomly initialised Qwen2 of
Qwen2.5-0.5B's shape, in bf16, and what one step costs; then a PPO-shaped step for memory.

Runs where only torch, transformers, peft and accelerate are installed, plus trl (e.g. from a
wheel next to this file: ``pip install trl-*.whl --no-deps``). It imports nothing of py_trainer
and downloads nothing: the tokenizer is built here (a word-level vocabulary as large as Qwen2.5's,
151,936 ids) and the weights are random, so rewards mean nothing; the point is step time and
memory at the real shape.

    python scripts/gpu_check.py                      # CUDA: Qwen2.5-0.5B shape, bf16, 20 steps
    python scripts/gpu_check.py --tiny --steps 3     # CPU: a tiny random shape, fp32
    python scripts/gpu_check.py --model-dir "$(.venv/bin/py-trainer init-model)" --steps 8   # the embedded
        # default model (or any local Qwen2-style folder), on CUDA when there is one, else CPU; prompts
        # are the AML train split's (agent-evals/tasks/aml_typology.jsonl) when it is there

Printed (one step = per_device_train_batch_size completions, G per prompt):
- step time split into generation / reward scoring / rollout log-probs (old and reference policy
  forward passes TRL runs before the loss) / forward-backward / optimizer / everything else,
  median over the measured steps (the first 2 steps are warm-up and not counted);
- tokens/s (prompt + completion tokens trained per second), peak GPU memory;
- an MFU estimate: model FLOPs per step / step time / the chip's dense bf16 peak, with
  FLOPs = 2 N per generated token + 2 N per trained token for the reference forward (beta > 0)
  + 4 N per trained token (forward + backward through frozen weights; LoRA's own weight
  gradients are negligible), N = non-embedding parameters;
- a PPO-shaped step measured side by side: the same LoRA policy step plus a policy-sized value
  model (the same backbone, full-parameter, a scalar head, AdamW) trained on the same tokens,
  its peak memory next to GRPO's (GRPO has no critic).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

# Dense bf16 peak FLOP/s by device name (vendor datasheets; sparse figures are twice these).
BF16_PEAK = {"H200": 989e12, "H100": 989e12, "H800": 989e12, "A100": 312e12, "A800": 312e12, "L40S": 362e12,
             "L40": 181e12, "L4": 121e12, "A10": 125e12, "RTX 4090": 165e12, "B200": 2250e12, "GH200": 989e12}
QWEN25_05B = dict(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                  intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768, rope_theta=1e6,
                  tie_word_embeddings=True)
TINY = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            intermediate_size=128, vocab_size=2000, max_position_embeddings=512, tie_word_embeddings=True)
PHASES = ("generation", "scoring", "rollout_logprobs", "forward", "backward", "optimizer", "other")


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def peak_for(name: str) -> float | None:
    for key in sorted(BF16_PEAK, key=len, reverse=True):
        if key in name:
            return BF16_PEAK[key]
    return None


# ---------------------------------------------------------------------------------------------
# Model and tokenizer, built here


def build_model_dir(shape: dict, dtype: torch.dtype, out: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    specials = ["<|endoftext|>", "<|pad|>"]
    vocab = {t: i for i, t in enumerate(specials)}
    vocab.update({f"w{i}": i for i in range(len(specials), shape["vocab_size"])})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<|endoftext|>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=specials[0], pad_token=specials[1])
    torch.manual_seed(0)
    cfg = Qwen2Config(**shape, eos_token_id=0, pad_token_id=1, bos_token_id=0)
    model = Qwen2ForCausalLM(cfg).to(dtype)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def prompts(n: int, words: int, vocab: int) -> list[str]:
    g = torch.Generator().manual_seed(1)
    return [" ".join(f"w{int(i)}" for i in torch.randint(2, vocab, (words,), generator=g)) for _ in range(n)]


# ---------------------------------------------------------------------------------------------
# Timing one step by phase


class PhaseTimer:
    def __init__(self):
        self.current: dict[str, float] = {p: 0.0 for p in PHASES}
        self.steps: list[dict[str, float]] = []
        self.step_start = 0.0

    def wrap(self, obj, name: str, phase: str) -> None:
        fn = getattr(obj, name)

        def timed(*a, **kw):
            sync()
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                sync()
                self.current[phase] = self.current.get(phase, 0.0) + time.perf_counter() - t

        setattr(obj, name, timed)

    def callback(self):
        from transformers import TrainerCallback

        timer = self

        class Cb(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                sync()
                timer.current = {p: 0.0 for p in PHASES}
                timer.step_start = time.perf_counter()

            def on_pre_optimizer_step(self, args, state, control, **kw):
                sync()
                timer._opt = time.perf_counter()

            def on_optimizer_step(self, args, state, control, **kw):
                sync()
                timer.current["optimizer"] += time.perf_counter() - timer._opt

            def on_step_end(self, args, state, control, **kw):
                sync()
                total = time.perf_counter() - timer.step_start
                c = dict(timer.current)
                c["rollout_logprobs"] = max(0.0, c.pop("_rollout", 0.0) - c["generation"] - c["scoring"])
                c["other"] = max(0.0, total - sum(v for k, v in c.items() if k != "other"))
                c["total"] = total
                timer.steps.append(c)

        return Cb()


def aml_prompts(n: int) -> list[str] | None:
    """The AML train split's prompts (cycled to n), when this script sits in the project's scripts/."""
    import json

    tasks = Path(__file__).resolve().parents[1] / "agent-evals" / "tasks" / "aml_typology.jsonl"
    if not tasks.is_file():
        return None
    rows = [json.loads(line) for line in tasks.read_text().splitlines() if line.strip()]
    train = [r["prompt"] for r in rows if r.get("split") == "train"]
    return [train[i % len(train)] for i in range(n)]


def run_grpo(model_dir: Path, args, dtype) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast
    from trl import GRPOConfig, GRPOTrainer

    # the word-level tokenizer as built (AutoTokenizer would pick Qwen2's BPE class for that folder);
    # a given --model-dir has its own
    tok = AutoTokenizer.from_pretrained(model_dir) if args.model_dir else PreTrainedTokenizerFast.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    cuda = torch.cuda.is_available() and not args.tiny
    if cuda:
        model = model.cuda()
    timer = PhaseTimer()
    counts = {"completion_tokens": 0}

    def reward(prompts, completions, completion_ids, **_):
        counts["completion_tokens"] += sum(len(c) for c in completion_ids)
        return [float(len(c) % 7) / 7 for c in completions]  # any deterministic score: timing only

    cfg = GRPOConfig(output_dir=tempfile.mkdtemp(prefix="gpu-check-"), use_cpu=not cuda, bf16=dtype == torch.bfloat16,
                     learning_rate=1e-4, max_steps=args.steps, per_device_train_batch_size=args.batch,
                     num_generations=args.generations, max_completion_length=args.completion_tokens,
                     beta=0.04, logging_steps=1, save_strategy="no", report_to=[], disable_tqdm=True,
                     temperature=1.0, seed=0, dataloader_num_workers=0,
                     gradient_checkpointing=False)  # py-trainer's default (runtime.gradient_checkpointing); TRL's is True
    n_prompts = args.steps * args.batch // args.generations + args.batch
    texts = (aml_prompts(n_prompts) if args.model_dir else None) or prompts(n_prompts, args.prompt_tokens, 1000)
    if args.model_dir:  # the real prompts' mean length, for tokens/s and the FLOPs estimate
        args.prompt_tokens = round(statistics.fmean(len(tok(t, add_special_tokens=False).input_ids) for t in texts))
    ds = Dataset.from_list([{"prompt": p} for p in texts])
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=cfg, train_dataset=ds, processing_class=tok,
                          peft_config=LoraConfig(r=16, lora_alpha=32, target_modules="all-linear",
                                                 task_type="CAUSAL_LM"),
                          callbacks=[timer.callback()])
    from transformers import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # the breakdown below is the output, not HF's log dicts
    timer.wrap(trainer, "_generate", "generation")
    timer.wrap(trainer, "_calculate_rewards", "scoring")
    timer.wrap(trainer, "_generate_and_score_completions", "_rollout")
    timer.wrap(trainer, "compute_loss", "forward")
    timer.wrap(trainer.accelerator, "backward", "backward")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    trainer.train()
    peak = torch.cuda.max_memory_allocated() if cuda else None
    n_params = sum(p.numel() for n, p in trainer.model.named_parameters() if "embed" not in n and "lora_" not in n)
    return {"timer": timer, "peak": peak, "n_params": n_params, "completion_tokens": counts["completion_tokens"],
            "cuda": cuda, "model": trainer.model}


def run_ppo_shaped(model_dir: Path, args, dtype, grpo_peak) -> dict | None:
    """One policy step (LoRA) plus a policy-sized value model trained on the same tokens."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoModel

    cuda = torch.cuda.is_available() and not args.tiny
    dev = "cuda" if cuda else "cpu"
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    policy = get_peft_model(AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype).to(dev),
                            LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"))
    backbone = AutoModel.from_pretrained(model_dir, dtype=dtype).to(dev)  # the critic: same size as the policy
    head = torch.nn.Linear(backbone.config.hidden_size, 1, dtype=dtype, device=dev)
    opt_p = torch.optim.AdamW([p for p in policy.parameters() if p.requires_grad], lr=1e-4)
    opt_v = torch.optim.AdamW(list(backbone.parameters()) + list(head.parameters()), lr=1e-5)
    seq = args.prompt_tokens + args.completion_tokens
    ids = torch.randint(2, 1000, (args.batch, seq), device=dev)
    times = []
    for _ in range(3):
        sync()
        t = time.perf_counter()
        logits = policy(input_ids=ids).logits
        loss_p = torch.nn.functional.cross_entropy(logits[:, :-1].float().reshape(-1, logits.size(-1)),
                                                   ids[:, 1:].reshape(-1))
        loss_p.backward()
        opt_p.step(), opt_p.zero_grad()
        values = head(backbone(input_ids=ids).last_hidden_state).squeeze(-1)
        loss_v = values.float().pow(2).mean()
        loss_v.backward()
        opt_v.step(), opt_v.zero_grad()
        sync()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() if cuda else None
    return {"peak": peak, "step": statistics.median(times),
            "critic_params": sum(p.numel() for p in backbone.parameters()) + sum(p.numel() for p in head.parameters())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiny", action="store_true", help="a tiny shape on CPU (what make bench runs)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32, help="completions per step")
    ap.add_argument("--generations", type=int, default=8, help="G, completions per prompt")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--completion-tokens", type=int, default=128)
    ap.add_argument("--model-dir", default="", help="time this model folder (e.g. the embedded default model: "
                    "`py-trainer init-model` prints it) instead of a random one; CPU when there is no CUDA")
    args = ap.parse_args(argv)
    if args.model_dir and not torch.cuda.is_available():
        args.tiny = True  # the model's own shape, on CPU
    cuda = torch.cuda.is_available() and not args.tiny
    if not cuda and not args.tiny:
        print("gpu_check: no CUDA device; run with --tiny for the CPU smoke version", file=sys.stderr)
        return 2
    dtype = torch.bfloat16 if cuda else torch.float32
    shape = TINY if args.tiny else QWEN25_05B
    if args.model_dir:
        import json

        cfg = json.loads((Path(args.model_dir) / "config.json").read_text())
        shape = {k: cfg[k] for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                     "intermediate_size", "vocab_size")}
    device_name = torch.cuda.get_device_name(0) if cuda else "cpu"
    import transformers
    import trl

    print(f"device {device_name}; torch {torch.__version__}, transformers {transformers.__version__}, trl {trl.__version__}")
    print(f"shape: hidden {shape['hidden_size']}, layers {shape['num_hidden_layers']}, heads "
          f"{shape['num_attention_heads']}/{shape['num_key_value_heads']} kv, intermediate {shape['intermediate_size']}, "
          f"vocab {shape['vocab_size']}; {str(dtype).removeprefix('torch.')}; batch {args.batch} completions "
          f"(G={args.generations}), {'the AML train prompts' if args.model_dir else args.prompt_tokens} prompt + up to "
          f"{args.completion_tokens} completion tokens" + (f"; model {args.model_dir}" if args.model_dir else ""))
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(args.model_dir) if args.model_dir else build_model_dir(shape, dtype, Path(tmp) / "model")
        t0 = time.perf_counter()
        g = run_grpo(model_dir, args, dtype)
        wall = time.perf_counter() - t0
        steps = g["timer"].steps[2:] or g["timer"].steps
        med = {k: statistics.median(s[k] for s in steps) for k in (*PHASES, "total")}
        print(f"GRPO: {len(g['timer'].steps)} steps in {wall:.1f} s; median over {len(steps)} measured steps:")
        for k in PHASES:
            print(f"  {k:<17} {med[k]:8.3f} s  {100 * med[k] / med['total']:5.1f}%")
        print(f"  {'step':<17} {med['total']:8.3f} s")
        comp_per_step = g["completion_tokens"] / max(1, len(g["timer"].steps))
        trained = args.batch * args.prompt_tokens + comp_per_step
        print(f"tokens/s (prompt + completion tokens trained): {trained / med['total']:.0f}")
        n = g["n_params"]
        # generate; the reference forward (beta > 0; with num_iterations 1 TRL needs no old-policy pass); fwd+bwd
        flops = 2 * n * comp_per_step + 2 * n * trained + 4 * n * trained
        peak = peak_for(device_name) if cuda else None
        if peak:
            print(f"MFU estimate: {flops / med['total'] / peak:.1%} of {peak / 1e12:.0f} TFLOP/s dense bf16 "
                  f"({flops / med['total'] / 1e12:.1f} TFLOP/s achieved; N = {n / 1e6:.0f}M non-embedding params)")
        else:
            print(f"achieved {flops / med['total'] / 1e9:.2f} GFLOP/s (N = {n / 1e6:.2f}M non-embedding params); "
                  "no bf16 peak known for this device, MFU not estimated")
        grpo_peak = g["peak"]
        if grpo_peak is not None:
            print(f"peak GPU memory, GRPO step: {grpo_peak / 2**30:.2f} GiB")
        del g
        p = run_ppo_shaped(model_dir, args, dtype, None)
        print(f"PPO-shaped step (LoRA policy + {p['critic_params'] / 1e6:.3g}M-param critic, full fine-tune, AdamW): "
              f"{p['step']:.3f} s for the policy + critic update alone")
        if p["peak"] is not None:
            print(f"peak GPU memory, PPO-shaped step: {p['peak'] / 2**30:.2f} GiB"
                  + (f" ({p['peak'] / grpo_peak:.2f}x GRPO's)" if grpo_peak else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
