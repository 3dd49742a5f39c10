"""Sidecar overhead on a training run: the same request trained two ways, side by side.

A) in-process: `py-trainer train --config` (TRL GRPOTrainer in this very process, no server);
B) through the sidecar: the TS client calls Train on a running `py-trainer serve`, which spawns a
   worker process and streams its events back.
Both clocks include process start, imports and the model load, i.e. what a user waits for.
Runs are interleaved (A B A B ...) so drift on a shared machine hits both; prints each time and
the ratio of medians B/A. Target: overhead under 5%.

    .venv/bin/python scripts/bench_train_overhead.py --steps 30 --repeats 2
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
sys.path.insert(0, str(REPO / "tests"))
from _sidecar import launch, sidecar_env  # noqa: E402


def request(steps: int, run_id: str) -> dict:
    return {
        "run_id": run_id,
        "dataset": {"jsonl_path": "agent-evals/tasks/aml_typology.jsonl", "split": "train"},
        "rewards": [{"name": "exact_match"}],
        "grpo": {"max_steps": steps, "seed": 1, "save_steps": 1000},
        "held_out": {"num_prompts": 16, "samples_per_prompt": 2},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    env = sidecar_env(PY_TRAINER_HOME=os.environ.get("PY_TRAINER_HOME", str(REPO / ".cache/py-trainer")))
    subprocess.run([sys.executable, "-m", "py_trainer.cli", "init-model"], check=True, env=env, cwd=REPO,
                   stdout=subprocess.DEVNULL)
    tmp = Path(tempfile.mkdtemp(prefix="bench-train-"))
    sc = launch(tmp / "sidecar-runs", REPO, env=env)
    a_times, b_times = [], []
    try:
        for i in range(args.repeats):
            cfg = tmp / f"a{i}.json"
            cfg.write_text(json.dumps(request(args.steps, f"inproc-{i}")))
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "py_trainer.cli", "train", "--config", str(cfg),
                            "--runs-root", str(tmp / "inproc-runs"), "--data-root", str(REPO)],
                           check=True, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            a_times.append(time.perf_counter() - t0)
            cfg = tmp / f"b{i}.json"
            cfg.write_text(json.dumps(request(args.steps, f"sidecar-{i}")))
            out = subprocess.run([str(REPO / "ts_agent/node_modules/.bin/tsx"), "src/bench/train-client.ts",
                                  "--address", sc.address, "--config", str(cfg)],
                                 check=True, cwd=REPO / "ts_agent", capture_output=True, text=True)
            b_times.append(json.loads(out.stdout.strip().splitlines()[-1])["seconds"])
            print(f"repeat {i}: in-process {a_times[-1]:.1f} s   via sidecar (TS client) {b_times[-1]:.1f} s", flush=True)
    finally:
        sc.stop()
    a, b = statistics.median(a_times), statistics.median(b_times)
    print(f"\n{args.steps} GRPO steps, median of {args.repeats}: in-process {a:.1f} s, via sidecar {b:.1f} s, "
          f"ratio {b / a:.3f} (overhead {(b / a - 1) * 100:+.1f}%; target < +5%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
