"""Sweep throughput with 2 slots against 1 on this machine (issue 28, item 6).

One run of this script measures both, side by side: two sidecars on this machine, one
`py-trainer serve --slots 1` (a run gets every core) and one `--slots 2` (each run gets half of
them: cores // 2 threads), and the same `agent sweep` (the product path: every seed submitted at
once; the sidecar's slots decide how many train at once) on each, alternating which goes first in
each repeat. Only one sweep runs at a time; the idle sidecar uses no CPU.

The request is the demo's (agent-evals/demo-request.json, or --config) with `--steps` GRPO steps
(a checkpoint only at the end), evaluated on the first `--limit` test tasks. Per sweep it records
the wall time of `agent sweep` (train, download, eval, report of every seed: what a user waits
for) and the training span (the first seed's RUNNING start to the last one's end, from the sweep's
own record). The throughput ratio of one repeat is wall(1 slot) / wall(2 slots) (the same seeds,
so seeds per second scale the same way); the interval is Student's t over the repeats' log ratios
(py_trainer.core.stats.interval_over_runs), exponentiated: a ratio's interval, not symmetric around it.

    .venv/bin/python scripts/bench_slots.py                     # 2 seeds of 20 steps, 4 repeats (~8 min on 2 cores)
    .venv/bin/python scripts/bench_slots.py --seeds 4 --repeats 3 --steps 10

Run it alone (under `flock /tmp/cpu.lock` on a shared machine): other processes on the same cores
change every number here. The last line is `slots 2 vs 1: sweep throughput x R (95% CI a-b, ...)`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "py_trainer"))
sys.path.insert(0, str(REPO / "scripts"))
from bench_seeds import AGENT, PY_TRAINER, bench_env  # noqa: E402
from py_trainer.core import stats  # noqa: E402
from py_trainer.core.devices import cpu_cores  # noqa: E402

DEMO_REQUEST = REPO / "agent-evals" / "demo-request.json"


def start_sidecar(slots: int, work: Path) -> tuple[subprocess.Popen, int]:
    """`py-trainer serve --slots N` on a free port, its runs and log under `work`."""
    log_path = work / f"sidecar-{slots}.log"
    proc = subprocess.Popen([str(PY_TRAINER), "serve", "--host", "127.0.0.1", "--port", "0", "--slots", str(slots),
                             "--runs-root", str(work / f"runs-{slots}"), "--data-root", str(REPO)],
                            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, cwd=REPO)
    for _ in range(600):
        if m := re.search(r"^py-trainer listening on 127\.0\.0\.1:(\d+)$", log_path.read_text(), re.M):
            return proc, int(m.group(1))
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"bench_slots: the {slots}-slot sidecar did not start; see {log_path}")


class Parser(argparse.ArgumentParser):
    """A command-line mistake is one line on stderr, exit 2."""

    def error(self, message: str):
        print(f"bench_slots: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


def sweep_once(port: int, evals: Path, config: Path, sweep_id: str, args, env) -> tuple[float, float]:
    """One `agent sweep`: (its wall seconds, the training span in seconds)."""
    cmd = [str(AGENT), "sweep", "--address", f"127.0.0.1:{port}", "--config", str(config), "--seeds", str(args.seeds),
           "--first-seed", str(args.first_seed), "--sweep-id", sweep_id, "--limit", str(args.limit), "--evals-dir", str(evals)]
    t0 = time.monotonic()
    with open(evals / f"{sweep_id}.log", "w") as log:
        rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO).returncode
    wall = time.monotonic() - t0
    if rc != 0:
        raise SystemExit(f"bench_slots: agent sweep exited {rc}; see {evals / f'{sweep_id}.log'}")
    seeds = json.loads((evals / "sweeps" / sweep_id / "sweep.json").read_text())["seeds"]
    starts = [s["placement"]["startMs"] for s in seeds]
    ends = [s["placement"]["endMs"] for s in seeds]
    return wall, (max(ends) - min(starts)) / 1000


def ratio_interval(ratios: list[float]) -> tuple[float, float, float, str]:
    """Geometric mean of the ratios and a t interval on their logs, back on the ratio scale."""
    r = stats.interval_over_runs([math.log(x) for x in ratios])
    return math.exp(r.mean), math.exp(r.lower), math.exp(r.upper), r.method + " of log ratios"


def main(argv: list[str] | None = None) -> int:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=2, help="seeds per sweep (default 2)")
    ap.add_argument("--first-seed", type=int, default=1, help="seeds S..S+N-1 (default 1)")
    ap.add_argument("--steps", type=int, default=20, help="GRPO steps per run (default 20)")
    ap.add_argument("--limit", type=int, default=32, help="test tasks evaluated per run (default 32)")
    ap.add_argument("--repeats", type=int, default=4, help="sweeps per sidecar (default 4; the interval is over these)")
    ap.add_argument("--config", type=Path, help="a TrainRequest in proto JSON (default agent-evals/demo-request.json)")
    ap.add_argument("--work-dir", type=Path, help="keep runs, evals and logs here (default: a temp folder, removed)")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.steps < 1 or args.limit < 1 or args.repeats < 2 or args.first_seed < 0:
        ap.error("--seeds, --steps and --limit must be >= 1, --repeats >= 2 and --first-seed >= 0")
    source = args.config or DEMO_REQUEST
    if not source.is_file():
        ap.error(f"--config {source}: no such file")
    env = bench_env("bench_slots")
    if env is None:
        return 2
    env.pop("OMP_NUM_THREADS", None)  # the sidecars split the machine's cores themselves
    os.environ.pop("OMP_NUM_THREADS", None)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="bench-slots-"))
    work.mkdir(parents=True, exist_ok=True)
    request = json.loads(source.read_text())
    request.setdefault("grpo", {}).update(maxSteps=args.steps, saveSteps=args.steps)
    config = work / "request.json"
    config.write_text(json.dumps(request))
    subprocess.run([str(PY_TRAINER), "init-model"], check=True, stdout=subprocess.DEVNULL, env=env)
    cores = cpu_cores()
    print(f"== {cores} cores; sweeps of {args.seeds} seed(s) x {args.steps} steps (eval --limit {args.limit}) of {source.name}, "
          f"{args.repeats} repeats per sidecar (work dir {work})", flush=True)
    sidecars = {}
    try:
        for slots in (1, 2):
            proc, port = start_sidecar(slots, work)
            evals = work / f"evals-{slots}"
            evals.mkdir(exist_ok=True)
            sidecars[slots] = (proc, port, evals)
            # untimed: the baseline eval and the sidecar's inference worker, which every sweep then finds warm
            subprocess.run([str(AGENT), "baseline", "set", "--address", f"127.0.0.1:{port}", "--limit", str(args.limit),
                            "--evals-dir", str(evals)], check=True, stdout=subprocess.DEVNULL, env=env, cwd=REPO)
        walls: dict[int, list[float]] = {1: [], 2: []}
        spans: dict[int, list[float]] = {1: [], 2: []}
        print(f"{'repeat':>6}  {'slots':>5}  {'threads/run':>11}  {'sweep wall s':>12}  {'training span s':>15}")
        for r in range(args.repeats):
            for slots in ((1, 2) if r % 2 == 0 else (2, 1)):  # alternate who goes first: drift hits both
                _, port, evals = sidecars[slots]
                wall, span = sweep_once(port, evals, config, f"bench-{r}", args, env)
                walls[slots].append(wall)
                spans[slots].append(span)
                print(f"{r + 1:>6}  {slots:>5}  {max(1, cores // slots):>11}  {wall:>12.1f}  {span:>15.1f}", flush=True)
    finally:
        for proc, _, _ in sidecars.values():
            proc.send_signal(signal.SIGTERM)
        for proc, _, _ in sidecars.values():
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    print()
    for name, xs in (("training span", spans), ("sweep wall", walls)):
        g, lo, hi, method = ratio_interval([a / b for a, b in zip(xs[1], xs[2])])
        print(f"{name}: 1 slot median {sorted(xs[1])[len(xs[1]) // 2]:.1f} s, 2 slots median {sorted(xs[2])[len(xs[2]) // 2]:.1f} s; "
              f"throughput 2 slots / 1 slot x {g:.2f} (95% CI {lo:.2f}-{hi:.2f}, {method})")
    if not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    print(f"slots 2 vs 1: sweep throughput x {g:.2f} (95% CI {lo:.2f}-{hi:.2f}, {method}; {args.repeats} repeats, "
          f"{args.seeds} seeds x {args.steps} steps, {cores} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
