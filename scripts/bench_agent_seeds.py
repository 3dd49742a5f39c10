"""Seed sweep of the agent demo (`make demo-agent`): does its verdict replicate across training seeds?

The product path, not a copy of it: one sidecar (`py-trainer serve`, runs in a temp folder), then
for each seed S..S+N-1, one at a time, `agent demo --agent-task FILE --seed S` (the task's
demonstrations and its embedded agent model -- built once, then cached --, GRPO on episodes
through the sidecar, base vs adapter on the test tasks, docs/agents.md). It prints one row per seed
(base and adapter success on the test tasks, the paired delta with its decision interval, the
downstream verdict and the milestone -- held-out reward and downstream, the run's report.md --,
the seed's wall time) and the share of seeds whose milestone PASSes (PASS or CONFIRMED) with a Wilson interval (py_trainer.core.stats.wilson_interval). The last line is exactly
`seeds: k/N PASS (Wilson 95% CI a-b), median T s`.

    .venv/bin/python scripts/bench_agent_seeds.py                 # 5 seeds from 1
    .venv/bin/python scripts/bench_agent_seeds.py --seeds 3 --first-seed 11
    .venv/bin/python scripts/bench_agent_seeds.py --program   # make demo-agent-program's agent program
    .venv/bin/python scripts/bench_agent_seeds.py --real      # make demo-agent-real: SmolLM2, warm start + GRPO

With --real each seed is `scripts/demo-agent-real.sh --seed S` (its own sidecar; a warm start, GRPO
from it, base / warm start / warm start + GRPO on the 240 test tasks): one row per seed with the
three variants' success, what RL added (warm start -> warm start + GRPO: delta, decision interval,
verdict) and the seed's wall time; the last line is `seeds: k/N CONFIRMED (Wilson 95% CI a-b),
median T s` (CONFIRMED: what RL added, the issue-53 goal).

Run it alone: other torch processes on the same cores slow every seed and change nothing else.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_seeds import AGENT, REPO, bench_env, start_sidecar  # noqa: E402

from py_trainer.core.stats import wilson_interval  # noqa: E402

TASK = "agent-evals/agent-tasks/orders.agent.ts"
CONFIG = "agent-evals/agent-tasks/orders-request.json"
PROGRAM = "agent-evals/agent-programs/orders-openai.ts"
PROGRAM_CONFIG = "agent-evals/agent-programs/orders-openai-request.json"
VARIANT = re.compile(r"^(?P<variant>base|adapter)\s+\S+ (?P<pct>[\d.]+)% \(95% CI", re.M)
DELTA = re.compile(r"^adapter - base: (?P<delta>\S+ pp) \(95% CI (?P<lo>\S+ pp) to (?P<hi>\S+ pp), .*\), n=(?P<n>\d+)", re.M)
DOWNSTREAM = re.compile(r"^downstream: (?P<downstream>[A-Z]+)", re.M)
MILESTONE = re.compile(r"^\[demo\] milestone: (?P<verdict>[A-Z]+)", re.M)
REAL_VARIANT = re.compile(r"^(?P<variant>base|warm-start|adapter)\s+\S+ (?P<pct>[\d.]+)% \(95% CI", re.M)
RL_ADDED = re.compile(r"^what RL added \(warm-start -> warm-start \+ GRPO\): (?P<delta>\S+ pp) \(95% CI (?P<lo>\S+ pp) to "
                      r"(?P<hi>\S+ pp), .*: (?P<verdict>[A-Z]+)$", re.M)


def parse_real(stdout: str) -> dict | None:
    """What one `scripts/demo-agent-real.sh` printed: the three variants' success and what RL added."""
    variants = {m["variant"]: m["pct"] for m in REAL_VARIANT.finditer(stdout)}
    rl = RL_ADDED.search(stdout)
    if not (rl and {"base", "warm-start", "adapter"} <= variants.keys()):
        return None
    return {"base": variants["base"], "warm": variants["warm-start"], "adapter": variants["adapter"], **rl.groupdict()}


def sweep_real(seeds: range, env: dict[str, str]) -> int:
    """`make demo-agent-real` once per seed, one at a time (each starts and stops its own sidecar)."""
    work = Path(tempfile.mkdtemp(prefix="agent-real-seeds-"))
    rows = []
    for seed in seeds:
        t0 = time.monotonic()
        out = subprocess.run(["scripts/demo-agent-real.sh", "--seed", str(seed), "--evals-dir", str(work / "evals")],
                             cwd=REPO, env=env, capture_output=True, text=True)
        seconds = time.monotonic() - t0
        got = parse_real(out.stdout)
        if got is None:
            print(f"seed {seed}: no verdict (exit {out.returncode})\n{out.stdout[-2000:]}{out.stderr[-2000:]}", file=sys.stderr)
            rows.append({"seed": seed, "verdict": "ERROR", "seconds": seconds})
            continue
        rows.append({"seed": seed, **got, "seconds": seconds})
        r = rows[-1]
        print(f"seed {seed}: base {r['base']}%, warm start {r['warm']}%, + GRPO {r['adapter']}%; what RL added {r['delta']} "
              f"[{r['lo']}, {r['hi']}] {r['verdict']}, {seconds:.0f} s", flush=True)
    print("\n| seed | base | warm start | warm start + GRPO | what RL added [95% CI] | verdict | wall |\n|---|---|---|---|---|---|---|")
    for r in rows:
        wall = f"{int(r['seconds'] // 60)} min {int(r['seconds'] % 60)} s"
        if r["verdict"] == "ERROR":
            print(f"| {r['seed']} | | | | | ERROR | {wall} |")
        else:
            print(f"| {r['seed']} | {r['base']}% | {r['warm']}% | {r['adapter']}% | {r['delta']} [{r['lo']}, {r['hi']}] | "
                  f"{r['verdict']} | {wall} |")
    confirmed = sum(r["verdict"] == "CONFIRMED" for r in rows)
    ci = wilson_interval(confirmed, len(rows))
    median = statistics.median(r["seconds"] for r in rows)
    print(f"seeds: {confirmed}/{len(rows)} CONFIRMED (Wilson 95% CI {ci.lower:.2f}-{ci.upper:.2f}), median {median:.0f} s")
    return 0


def parse(stdout: str) -> dict | None:
    """What one `agent demo --agent-task` printed: each variant's success, the paired delta with
    its decision interval, the downstream verdict and the milestone (the product's verdict)."""
    variants = {m["variant"]: m["pct"] for m in VARIANT.finditer(stdout)}
    d, ds, ms = DELTA.search(stdout), DOWNSTREAM.search(stdout), MILESTONE.search(stdout)
    if not (d and ds and ms and "base" in variants and "adapter" in variants):
        return None
    return {"base": variants["base"], "adapter": variants["adapter"], **d.groupdict(), "downstream": ds["downstream"], "verdict": ms["verdict"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench_agent_seeds", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5, help="how many seeds (default 5)")
    parser.add_argument("--first-seed", type=int, default=1, help="the first seed (default 1)")
    parser.add_argument("--agent-task", default=TASK, help=f"the agent task (default {TASK})")
    parser.add_argument("--config", default=None, help=f"the TrainRequest knobs (default {CONFIG}, or with --program "
                                                        f"{PROGRAM_CONFIG})")
    parser.add_argument("--program", action="store_true",
                        help=f"sweep `make demo-agent-program` instead: the agent program {PROGRAM}, its base built "
                             f"from --agent-task's demonstrations (docs/agent-programs.md)")
    parser.add_argument("--real", action="store_true",
                        help="sweep `make demo-agent-real` instead: SmolLM2-135M-Instruct on the shop task, warm start + GRPO "
                             "(docs/agents.md); --agent-task and --config do not apply")
    args = parser.parse_args(argv)
    if args.real and (args.program or args.config or args.agent_task != TASK):
        parser.error("--real runs scripts/demo-agent-real.sh as it is: --program, --config and --agent-task do not apply")
    config = args.config or (PROGRAM_CONFIG if args.program else CONFIG)
    what = (["--agent-program", PROGRAM, "--demonstrations-from", args.agent_task] if args.program
            else ["--agent-task", args.agent_task])
    if args.seeds < 1:
        parser.error("--seeds must be >= 1")
    env = bench_env("bench_agent_seeds")
    if env is None:
        return 2
    if args.real:
        return sweep_real(range(args.first_seed, args.first_seed + args.seeds), env)
    work = Path(tempfile.mkdtemp(prefix="agent-seeds-"))
    proc, port = start_sidecar(work / "runs", work / "sidecar.log")
    rows = []
    try:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            t0 = time.monotonic()
            out = subprocess.run([str(AGENT), "demo", *what, "--config", config,
                                  "--seed", str(seed), "--run-id", f"agent-seed-{seed}", "--data-root", str(REPO),
                                  "--evals-dir", str(work / "evals"), "--address", f"127.0.0.1:{port}"],
                                 cwd=REPO, env=env, capture_output=True, text=True)
            seconds = time.monotonic() - t0
            got = parse(out.stdout)
            if got is None:
                print(f"seed {seed}: no verdict (exit {out.returncode})\n{out.stdout[-2000:]}{out.stderr[-2000:]}", file=sys.stderr)
                rows.append({"seed": seed, "verdict": "ERROR", "seconds": seconds})
                continue
            rows.append({"seed": seed, **got, "seconds": seconds})
            r = rows[-1]
            print(f"seed {seed}: base {r['base']}% -> adapter {r['adapter']}% (n={r['n']}), delta {r['delta']} "
                  f"[{r['lo']}, {r['hi']}], downstream {r['downstream']}, milestone {r['verdict']}, {seconds:.0f} s", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    print("\n| seed | base | adapter | delta [95% CI] | downstream | milestone | wall s |\n|---|---|---|---|---|---|---|")
    for r in rows:
        if r["verdict"] == "ERROR":
            print(f"| {r['seed']} | | | | | ERROR | {r['seconds']:.0f} |")
        else:
            print(f"| {r['seed']} | {r['base']}% | {r['adapter']}% | {r['delta']} [{r['lo']}, {r['hi']}] | {r['downstream']} | {r['verdict']} | {r['seconds']:.0f} |")
    passed = sum(r["verdict"] in ("PASS", "CONFIRMED") for r in rows)
    ci = wilson_interval(passed, len(rows))
    median = statistics.median(r["seconds"] for r in rows)
    print(f"seeds: {passed}/{len(rows)} PASS (Wilson 95% CI {ci.lower:.2f}-{ci.upper:.2f}), median {median:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
