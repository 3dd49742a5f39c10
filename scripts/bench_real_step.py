"""One GRPO step on the real model (SmolLM2-135M-Instruct, base_model "smollm2-135m-instruct"), on
CPU, three ways side by side in one run, same shape (P prompts x G generations, T new tokens,
LoRA r16 on q_proj/v_proj, beta 0):

A) the project's step: `py-trainer train --config` in a child process (the sidecar's worker runs
   the same `training.run_training`); its summary.json's per-step median (training.StepTimer);
B) TRL as shipped: a bare `GRPOTrainer` in a child process (TRL's own fused LM head, TRL's
   defaults for everything the shape does not fix, OpenMP's default wait policy), timed per step
   with the same StepTimer;
C) plain PyTorch: `model.generate` (sampling, KV cache) of the P*G completions, then one
   forward + backward of the P*G sequences with logits only at the completion positions, and an
   AdamW step on the LoRA weights: the arithmetic a GRPO step cannot avoid.

Attribution arms (`--arms`): trl-passive = B with OMP_WAIT_POLICY=PASSIVE; trl-passive-nockpt =
that and gradient_checkpointing off (TRL's GRPOConfig turns it on by default).

Printed: each arm's median step (past the first step, a warm-up) and its phases, and A / C
(target <= 2). Run it under the CPU lock on a shared machine:

    flock /tmp/cpu.lock .venv/bin/python scripts/bench_real_step.py --steps 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASE = "smollm2-135m-instruct"
TASKS = "agent-evals/tasks/arithmetic.jsonl"
LORA = {"r": 16, "lora_alpha": 32, "target_modules": ["q_proj", "v_proj"]}


def prompts(n: int) -> list[str]:
    rows = [json.loads(line) for line in (REPO / TASKS).read_text().splitlines() if line.strip()]
    return [r["prompt"] for r in rows if r["split"] == "train"][:n]


def project_arm(a, tmp: Path) -> dict:
    req = {"run_id": "bench-real-step", "base_model": BASE,
           "dataset": {"jsonl_path": TASKS, "split": "train"},
           "rewards": [{"name": "exact_match", "params": {"require_tag": False, "match": "contains"}}],
           "grpo": {"max_steps": a.steps, "seed": 1, "save_steps": 100000, "beta": 0.0,
                    "per_device_train_batch_size": a.prompts * a.generations, "num_generations": a.generations,
                    "max_completion_length": a.new_tokens},
           "lora": {"r": LORA["r"], "alpha": LORA["lora_alpha"], "target_modules": LORA["target_modules"]},
           "held_out": {"num_prompts": 1, "samples_per_prompt": 1},
           "runtime": {"prompt_format": "chat"}}
    (tmp / "req.json").write_text(json.dumps(req))
    t = time.perf_counter()
    proc = subprocess.run([str(REPO / ".venv/bin/py-trainer"), "train", "--config", str(tmp / "req.json"),
                           "--runs-root", str(tmp / "runs"), "--data-root", str(REPO)],
                          capture_output=True, text=True, env=os.environ)
    if proc.returncode != 0:
        raise SystemExit(f"project arm failed:\n{proc.stderr[-3000:]}")
    s = json.loads((tmp / "runs/bench-real-step/summary.json").read_text())["time_breakdown"]
    return {"step": s["median_step_total_seconds"], "phases": s["median_step_seconds"],
            "wall": time.perf_counter() - t}


def trl_arm(a, folder: str, tmp: Path, **config) -> dict:
    from datasets import Dataset
    from peft import LoraConfig
    from trl import GRPOConfig, GRPOTrainer

    from py_trainer.models.fused_head import restore_fused_head
    from py_trainer.training.step_timer import StepTimer

    restore_fused_head()  # TRL's head exactly as shipped
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in prompts(64)])

    def reward(completions, **_):
        return [float(len(c[-1]["content"])) for c in completions]

    args = GRPOConfig(output_dir=str(tmp / "trl"), use_cpu=True, per_device_train_batch_size=a.prompts * a.generations,
                      num_generations=a.generations, max_completion_length=a.new_tokens, beta=0.0,
                      max_steps=a.steps, logging_steps=1, report_to=[], save_strategy="no", seed=1, **config)
    trainer = GRPOTrainer(model=folder, reward_funcs=reward, args=args, train_dataset=data,
                          peft_config=LoraConfig(task_type="CAUSAL_LM", **LORA))
    timer = StepTimer()
    timer.attach(trainer)
    trainer.train()
    s = timer.summary({})
    return {"step": s["median_step_total_seconds"], "phases": s["median_step_seconds"]}


def plain_arm(a, folder: str) -> dict:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    tok.padding_side = "left"
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(folder), LoraConfig(task_type="CAUSAL_LM", **LORA))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts(a.prompts) for _ in range(a.generations)]
    times = []
    for step in range(a.steps):
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        P = enc["input_ids"].shape[1]
        t0 = time.perf_counter()
        model.eval()
        with torch.no_grad():
            out = model.generate(**enc, do_sample=True, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                                 pad_token_id=tok.pad_token_id)
        t1 = time.perf_counter()
        model.train()
        mask = torch.cat([enc["attention_mask"], torch.ones_like(out[:, P:])], dim=1)
        T = out.shape[1] - P
        logits = model(input_ids=out, attention_mask=mask, logits_to_keep=T + 1).logits[:, :-1]
        logp = torch.log_softmax(logits.float(), -1).gather(-1, out[:, P:, None]).squeeze(-1)
        adv = torch.randn(out.shape[0], 1)
        loss = -(logp * adv).mean()
        t2 = time.perf_counter()
        loss.backward()
        t3 = time.perf_counter()
        opt.step()
        opt.zero_grad(set_to_none=True)
        t4 = time.perf_counter()
        times.append({"generation": t1 - t0, "forward": t2 - t1, "backward": t3 - t2, "optimizer": t4 - t3})
    measured = times[1:] or times
    phases = {k: statistics.median(t[k] for t in measured) for k in measured[0]}
    return {"step": statistics.median(sum(t.values()) for t in measured), "phases": phases}


def run_arm(arm: str, a, tmp: Path) -> dict:
    """Each arm in its own process, so each gets the OpenMP and malloc settings it names (they are
    read once, when the process or torch loads): the project's CLI sets its own
    (`core/cpu_env.py`); TRL as shipped runs with the environment this script was started
    with, minus the OpenMP wait variables; plain PyTorch with the project's settings; the
    trl-passive arms with OMP_WAIT_POLICY=PASSIVE."""
    if arm == "project":
        return project_arm(a, tmp)
    from py_trainer.core.cpu_env import OPENMP_WAIT_VARS, cpu_process_env

    env = {k: v for k, v in os.environ.items() if k not in OPENMP_WAIT_VARS}
    if arm == "plain":
        env.update(cpu_process_env(env))
    elif arm in ("trl-passive", "trl-passive-nockpt"):
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    argv = [sys.executable, __file__, "--one-arm", arm, "--prompts", str(a.prompts), "--generations",
            str(a.generations), "--new-tokens", str(a.new_tokens), "--steps", str(a.steps)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{arm} arm failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=2)
    ap.add_argument("--generations", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=12)
    ap.add_argument("--steps", type=int, default=3, help="steps per arm; the first is a warm-up (default 3)")
    ap.add_argument("--arms", default="project,trl,plain",
                    help="comma-separated subset of project,trl,plain; attribution arms: trl-passive (TRL as shipped "
                         "with OMP_WAIT_POLICY=PASSIVE), trl-passive-nockpt (also gradient_checkpointing off)")
    ap.add_argument("--one-arm", help=argparse.SUPPRESS)
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from py_trainer.models.base_models import resolve_base_model

    folder = resolve_base_model(BASE)
    if a.one_arm:
        with tempfile.TemporaryDirectory() as d:
            if a.one_arm == "plain":
                r = plain_arm(a, folder)
            else:  # trl, trl-passive: as shipped; trl-passive-nockpt: without gradient checkpointing too
                r = trl_arm(a, folder, Path(d), **({"gradient_checkpointing": False} if a.one_arm.endswith("nockpt") else {}))
        print(json.dumps(r))
        return 0
    import torch

    arms = a.arms.split(",")
    print(f"shape: {a.prompts} prompts x {a.generations} generations, {a.new_tokens} new tokens, LoRA r16 q,v, "
          f"beta 0; {a.steps} steps per arm; torch {torch.__version__}, {torch.get_num_threads()} threads, "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f}")
    res = {}
    with tempfile.TemporaryDirectory() as d:
        for arm in arms:
            t = time.perf_counter()
            res[arm] = run_arm(arm, a, Path(d))
            print(f"[{arm}] median step {res[arm]['step']:.2f} s ({time.perf_counter() - t:.0f} s for the arm; "
                  f"load average {os.getloadavg()[0]:.1f})", flush=True)
    phases = sorted({p for r in res.values() for p in r["phases"]})
    print(f"\n{'phase (median step, s)':<24}" + "".join(f"{arm:>12}" for arm in arms))
    for p in phases:
        print(f"{p:<24}" + "".join(f"{res[arm]['phases'].get(p, 0.0):>12.2f}" for arm in arms))
    print(f"{'step':<24}" + "".join(f"{res[arm]['step']:>12.2f}" for arm in arms))
    if "plain" in res:
        for arm in arms:
            if arm != "plain":
                print(f"{arm} / plain = {res[arm]['step'] / res['plain']['step']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
