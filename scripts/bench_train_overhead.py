"""Sidecar overhead on a training run: the same request trained two ways, side by side, and where
a training step's time goes on the embedded default model.

A) in-process: `py-trainer train --config` (TRL GRPOTrainer in this very process, no server);
B) through the sidecar: the TS client calls Train on a running `py-trainer serve`, which spawns a
   worker process and streams its events back;
C) in-process with TRL's fused LM head as TRL ships it, i.e. `fused_head.compact_fused_head_on_cpu`
   switched off: on CPU every prompt position goes through the head (what a user running bare TRL
   gets; `scripts/gpu_check.py` times bare TRL without our run around it).
A's and C's clocks include process start, imports and the model load; B's runs from the Train call
to the run's last event, so it includes the worker's start, imports and model load (the TS
client's own start is not counted). Repeats are interleaved (A B C, C B A, ...) so drift on a
shared machine hits every arm alike. Printed: each repeat, the ratio of medians B/A, and the
geometric mean of the per-repeat ratios B_i/A_i with a 95% t-interval on their logs (the CI over
repeats; target <= 1.02); the same for C/A (how much faster than TRL as shipped, same request).
Then each arm's step-time breakdown from the runs' summary.json
(`training.StepTimer`: generation / scoring / rollout log-probs / forward / backward / optimizer /
other / between steps), medians over the repeats, and the run phases outside the training loop.

    .venv/bin/python scripts/bench_train_overhead.py --steps 20 --repeats 8
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))
from _sidecar import launch, sidecar_env  # noqa: E402
from py_trainer.training.step_timer import STEP_PHASES  # noqa: E402  (the phases summary.json's time_breakdown has)

# Arm C: the CLI with the compact fused head switched off (bench only; the product has no such switch)
AS_SHIPPED = ("import sys; import py_trainer.training.skeleton as t; t.compact_fused_head_on_cpu = lambda: False; "
              "from py_trainer.server.cli import main; sys.exit(main(sys.argv[1:]))")


def request(steps: int, run_id: str) -> dict:
    return {
        "run_id": run_id,
        "dataset": {"jsonl_path": "agent-evals/tasks/aml_typology.jsonl", "split": "train"},
        "rewards": [{"name": "exact_match"}],
        "grpo": {"max_steps": steps, "seed": 1, "save_steps": 1000},
        "held_out": {"num_prompts": 16, "samples_per_prompt": 2},
    }


def ratio_ci(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """Geometric mean of b_i / a_i and its 95% t-interval (on the logs; n - 1 degrees of freedom)."""
    from scipy import stats

    logs = [math.log(y / x) for x, y in zip(a, b)]
    m = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(m), math.nan, math.nan
    half = stats.t.ppf(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(m), math.exp(m - half), math.exp(m + half)


def breakdown_table(label_summaries: list[tuple[str, list[dict]]]) -> None:
    """Median over repeats of each phase's seconds per step and share of the training loop."""
    heads = "".join(f"{label:>26}" for label, _ in label_summaries)
    print(f"{'phase (median step)':<22}{heads}")
    for p in STEP_PHASES:
        cells = ""
        for _, sums in label_summaries:
            sec = statistics.median(s["median_step_seconds"][p] for s in sums)
            share = statistics.median(s["step_share"][p] for s in sums)
            cells += f"{sec:>15.4f} s {100 * share:>6.1f}%"
        print(f"{p:<22}{cells}")
    cells = "".join(f"{statistics.median(s['median_step_total_seconds'] for s in sums):>15.4f} s {'':>7}"
                    for _, sums in label_summaries)
    print(f"{'step':<22}{cells}")
    keys = list(label_summaries[0][1][0]["run_seconds"])
    print("outside the training loop (median seconds per run):")
    for k in keys:
        cells = "".join(f"{statistics.median(s['run_seconds'].get(k, 0.0) for s in sums):>17.3f} s{'':>7}"
                        for _, sums in label_summaries)
        print(f"  {k:<20}{cells}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=8, help="interleaved pairs (ABBA order)")
    args = ap.parse_args()
    env = sidecar_env(PY_TRAINER_HOME=os.environ.get("PY_TRAINER_HOME", str(Path.home() / ".cache/py-trainer")))
    subprocess.run([sys.executable, "-m", "py_trainer.server.cli", "init-model"], check=True, env=env, cwd=REPO,
                   stdout=subprocess.DEVNULL)
    tmp = Path(tempfile.mkdtemp(prefix="bench-train-"))
    sc = launch(tmp / "sidecar-runs", REPO, env=env)

    def in_process(i: int, as_shipped: bool = False) -> float:
        name = f"{'shipped' if as_shipped else 'inproc'}-{i}"
        cfg = tmp / f"{name}.json"
        cfg.write_text(json.dumps(request(args.steps, name)))
        argv = ["train", "--config", str(cfg), "--runs-root", str(tmp / "inproc-runs"), "--data-root", str(REPO)]
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", AS_SHIPPED, *argv] if as_shipped else
                       [sys.executable, "-m", "py_trainer.server.cli", *argv],
                       check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    def via_sidecar(i: int) -> float:
        cfg = tmp / f"b{i}.json"
        cfg.write_text(json.dumps(request(args.steps, f"sidecar-{i}")))
        out = subprocess.run([str(REPO / "ts_agent/node_modules/.bin/tsx"), "src/bench/train-client.ts",
                              "--address", sc.address, "--config", str(cfg)],
                             check=True, cwd=REPO / "ts_agent", capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]

    a_times, b_times, c_times = [], [], []
    arms = {"A": (a_times, lambda i: in_process(i)), "B": (b_times, lambda i: via_sidecar(i)),
            "C": (c_times, lambda i: in_process(i, as_shipped=True))}
    try:
        for i in range(args.repeats):
            order = "ABC" if i % 2 == 0 else "CBA"
            for arm in order:
                times, run = arms[arm]
                times.append(run(i))
            print(f"repeat {i} ({' '.join(order)}): in-process {a_times[-1]:.2f} s   via sidecar (TS client) "
                  f"{b_times[-1]:.2f} s   TRL's head as shipped {c_times[-1]:.2f} s   "
                  f"B/A {b_times[-1] / a_times[-1]:.3f}   C/A {c_times[-1] / a_times[-1]:.3f}", flush=True)
    finally:
        sc.stop()
    a, b, c = statistics.median(a_times), statistics.median(b_times), statistics.median(c_times)
    gm, lo, hi = ratio_ci(a_times, b_times)
    verdict = ("resolved: below 1.02" if hi <= 1.02 else "resolved: above 1.02" if lo > 1.02
               else "not resolved at this n (the CI straddles 1.02)")
    print(f"\n{args.steps} GRPO steps, {args.repeats} repeats: median in-process {a:.2f} s, via sidecar {b:.2f} s, "
          f"TRL's head as shipped {c:.2f} s; ratio of medians B/A {b / a:.3f}, C/A {c / a:.3f}")
    print(f"per-repeat ratio B/A (sidecar overhead): geometric mean {gm:.3f}, 95% t-interval [{lo:.3f}, {hi:.3f}] "
          f"(target <= 1.02; {verdict}); in-process spread {min(a_times):.2f}-{max(a_times):.2f} s")
    gm, lo, hi = ratio_ci(a_times, c_times)
    print(f"per-repeat ratio C/A (TRL's fused head as shipped vs compact on CPU, whole run): geometric mean "
          f"{gm:.3f}, 95% t-interval [{lo:.3f}, {hi:.3f}]")

    def summaries(folder: str, prefix: str) -> list[dict]:
        return [json.loads((tmp / folder / f"{prefix}-{i}" / "summary.json").read_text())["time_breakdown"]
                for i in range(args.repeats)]

    sums_a, sums_b, sums_c = summaries("inproc-runs", "inproc"), summaries("sidecar-runs", "sidecar"), \
        summaries("inproc-runs", "shipped")
    g = json.loads((tmp / "inproc-runs" / "inproc-0" / "request.json").read_text())["grpo"]
    print(f"\nstep-time breakdown, embedded default model ({args.steps} steps of "
          f"{g['per_device_train_batch_size']} completions, G = {g['num_generations']}, up to "
          f"{g['max_completion_length']} new tokens; median over {args.repeats} runs of summary.json's time_breakdown):")
    breakdown_table([("in-process", sums_a), ("via sidecar", sums_b), ("TRL's head as shipped", sums_c)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
