"""Seed sweep of the demo's recipe: does `make demo`'s verdict replicate across training seeds?

A training result is one draw of the training randomness: the seed, and the floating-point order of
the CPU or GPU it ran on (another CPU type, thread count or library version picks another
trajectory from the same seed). A sweep over seeds on one machine is the honest stand-in for "any
machine". This script runs the product path, not a copy of it: one sidecar (`py-trainer serve`,
runs and evals in a temp folder unless --work-dir), then `agent sweep` with the demo's request
(agent-evals/demo-request.json, or --config), which for each seed S..S+N-1, one at a time, trains
through the sidecar, evaluates base vs adapter on the test split and the held-out-template split
(`agent eval`) and judges the milestone (`agent report`, docs/verdict.md). It prints:

- one row per seed: held-out reward start -> end, relative change with its CI, the downstream
  delta with its decision CI, the held-out-template delta, the verdict, training seconds;
- the PASS count on both criteria with a Wilson interval (py_trainer.core.stats.wilson_interval), and
  the median and maximum wall time per seed (submitted to reported: with every seed submitted at
  once, a seed's wait for a slot is included; the table's `train s` is its training alone).

The last line is exactly `seeds: k/N PASS both criteria (Wilson 95% CI a-b), median T s`.

    .venv/bin/python scripts/bench_seeds.py                     # 10 seeds from 1 (about 25 min on 2 cores)
    .venv/bin/python scripts/bench_seeds.py --seeds 3 --first-seed 11
    make bench-seeds ARGS="--seeds 5"
    .venv/bin/python scripts/bench_seeds.py --config agent-evals/demo-real-request.json \
        --tasks agent-evals/tasks/arithmetic_chat.jsonl --seeds 1 --first-seed 2   # the real recipe, one seed

Run it alone: other torch processes on the same cores slow every seed 3-10x and change nothing
else (each run is deterministic for its seed on this machine).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "py_trainer"))
from py_trainer.core import stats  # noqa: E402

PY_TRAINER = REPO / ".venv" / "bin" / "py-trainer"
AGENT = REPO / "ts_agent" / "bin" / "agent"


def bench_env(prog: str) -> dict[str, str] | None:
    """The offline environment for the sidecar and the agent, set in this process too; None (after
    one line on stderr) when `make setup` has not built them. The model cache is the sidecar's own
    default ($PY_TRAINER_HOME, else ~/.cache/py-trainer), as `make` uses."""
    for tool in (PY_TRAINER, AGENT):
        if not tool.exists():
            print(f"{prog}: {tool} not found (run `make setup`)", file=sys.stderr)
            return None
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    os.environ.update(env)
    return env


def start_sidecar(runs_root: Path, log_path: Path) -> tuple[subprocess.Popen, int]:
    log = open(log_path, "w")
    proc = subprocess.Popen([str(PY_TRAINER), "serve", "--host", "127.0.0.1", "--port", "0", "--runs-root", str(runs_root),
                             "--data-root", str(REPO)], stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    deadline = time.time() + 120
    while time.time() < deadline:
        m = re.search(r"^py-trainer listening on 127\.0\.0\.1:(\d+)$", log_path.read_text(), re.M)
        if m:
            return proc, int(m.group(1))
        if proc.poll() is not None:
            raise SystemExit(f"bench_seeds: the sidecar exited ({proc.returncode}); see {log_path}")
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"bench_seeds: the sidecar did not start in 120 s; see {log_path}")


def to_fixed(x: float, digits: int) -> str:
    """JavaScript's Number.prototype.toFixed, so a number prints here as in the sweep's report.md:
    the exact binary value rounded half away from zero (Python's format rounds a tie to even:
    6.25 -> '6.2' where toFixed gives '6.3')."""
    from decimal import ROUND_HALF_UP, Decimal

    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def signed(x: float, digits: int) -> str:
    """As the sweep report's ppText / pctText: '+' before a value >= 0."""
    return ("+" if x >= 0 else "") + to_fixed(x, digits)


def pct(x: float | None) -> str:
    return "-" if x is None or x != x else f"{signed(x * 100, 0)}%"


def pp(x: float | None) -> str:
    return "-" if x is None or x != x else signed(x * 100, 1)


def delta_cell(d: dict | None) -> str:
    return "-" if not d else f"{pp(d['delta'])} pp [{pp(d['ciLow'])}, {pp(d['ciHigh'])}]"


def print_table(summary: dict) -> None:
    head = f"{'seed':>4}  {'held-out reward':<15}  {'relative (95% CI)':<20}  {'test delta (decision CI)':<26}  " \
           f"{'held-out templates':<24}  {'verdict':<12}  {'train s':>7}"
    print(head)
    print("-" * len(head))
    for s in summary["seeds"]:
        h = s.get("heldOut")
        reward = f"{to_fixed(h['start'], 3)} -> {to_fixed(h['end'], 3)}" if h else "-"
        rel = f"{pct(h['relativeChange'])} [{pct(h['ciLow'])}, {pct(h['ciHigh'])}]" if h else "-"
        verdict = s["verdict"] + ("" if s["state"] == "SUCCEEDED" else f" ({s['state']})")
        print(f"{s['seed']:>4}  {reward:<15}  {rel:<20}  {delta_cell(s.get('downstream')):<26}  "
              f"{delta_cell(s.get('heldOutTemplate')):<24}  {verdict:<12}  {'-' if s['trainSeconds'] is None else to_fixed(s['trainSeconds'], 0):>7}")


class Parser(argparse.ArgumentParser):
    """A command-line mistake is one line on stderr, exit 2."""

    def error(self, message: str):
        print(f"bench_seeds: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def main(argv: list[str] | None = None) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=10, help="how many training seeds (default 10)")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds S..S+N-1 (default 1, the demo's seed)")
    ap.add_argument("--config", type=Path, help="a TrainRequest in proto JSON (default agent-evals/demo-request.json)")
    ap.add_argument("--tasks", type=Path, help="the task file to train and evaluate on (agent sweep --tasks; e.g. the real recipe's "
                    "agent-evals/tasks/arithmetic_chat.jsonl); default: the request's own")
    ap.add_argument("--work-dir", type=Path, help="keep runs, evals and the sweep report here (default: a temp folder, removed)")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.first_seed < 0:
        ap.error("--seeds must be >= 1 and --first-seed >= 0")
    if args.config and not args.config.is_file():
        ap.error(f"--config {args.config}: no such file")
    if args.tasks and not args.tasks.is_file():
        ap.error(f"--tasks {args.tasks}: no such file")
    env = bench_env("bench_seeds")
    if env is None:
        return 2
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-seeds-"))
    work.mkdir(parents=True, exist_ok=True)
    evals = work / "evals"
    evals.mkdir(parents=True, exist_ok=True)
    sweep_id = f"bench-seeds-{args.first_seed}-{args.seeds}-{int(time.time())}"
    subprocess.run([str(PY_TRAINER), "init-model"], check=True, stdout=subprocess.DEVNULL, env=env)
    proc, port = start_sidecar(work / "runs", work / "sidecar.log")
    try:
        cmd = [str(AGENT), "sweep", "--address", f"127.0.0.1:{port}", "--seeds", str(args.seeds),
               "--first-seed", str(args.first_seed), "--sweep-id", sweep_id, "--evals-dir", str(evals)]
        if args.config:
            cmd += ["--config", str(args.config.resolve())]
        if args.tasks:
            cmd += ["--tasks", str(args.tasks.resolve())]
        print(f"== {' '.join(cmd[1:])}  (log: {work / 'sweep.log'})", flush=True)
        with open(work / "sweep.log", "w") as log:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO).returncode
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    sweep_file = evals / "sweeps" / sweep_id / "sweep.json"
    if not sweep_file.exists():
        print((work / "sweep.log").read_text()[-4000:], file=sys.stderr)
        print(f"bench_seeds: agent sweep wrote no {sweep_file} (exit {rc})", file=sys.stderr)
        return 1
    summary = json.loads(sweep_file.read_text())
    print_table(summary)
    print()
    d = summary.get("delta")
    if d:
        ci = "" if d["lower"] is None else f", 95% CI {pp(d['lower'])} to {pp(d['upper'])} pp ({d['method']})"
        print(f"downstream delta over seeds: mean {pp(d['mean'])} pp, between-seed SD {to_fixed(d['sd'] * 100, 1)} pp{ci}"
              if d["sd"] is not None else f"downstream delta: {pp(d['mean'])} pp (one seed)")
    walls = [s["wallSeconds"] for s in summary["seeds"]]
    k, n = summary["passed"], len(summary["seeds"])
    w = stats.wilson_interval(k, n)
    print(f"wall time per seed (submitted to reported, queue wait included): median {to_fixed(statistics.median(walls), 0)} s, max {to_fixed(max(walls), 0)} s")
    print(f"sweep report: {evals / 'sweeps' / sweep_id / 'report.md'}" + ("" if args.work_dir else " (temp folder, removed)"))
    print(f"seeds: {k}/{n} PASS both criteria (Wilson 95% CI {to_fixed(w.lower, 2)}-{to_fixed(w.upper, 2)}), "
          f"median {to_fixed(statistics.median(walls), 0)} s")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
