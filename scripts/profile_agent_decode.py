"""Where a sampled episode turn's time goes on SmolLM2-135M-Instruct (docs/agents.md, "A real model
learns the shop task"): `run_episodes` over `scripts/bench_agent.py`'s setup (its shop prompts and
fixed-output tool host, the base model, one turn), N episodes at temperature 1, a warm-up of 8
tokens, then torch.profiler over a 32-token turn; prints the wall time and the ops by self CPU time.

    .venv/bin/python scripts/profile_agent_decode.py [N]     # N episodes in the batch (default 64)

Run it alone: another torch process on the same cores changes every number. A profile, not a test.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_agent as b  # noqa: E402


def main() -> int:
    import torch
    from torch.profiler import ProfilerActivity, profile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    torch.set_num_threads(2)
    model, tok, _ = b.load("smollm2-135m-instruct")
    server, address = b.serve_host()
    setup = b.agent_setup(address, 1)
    host = b.ToolHost(address, setup.tool_timeout_ms)

    def batch():
        return b.start_episodes(tok, setup, [(f"t{i}", b.prompt(i)) for i in range(n)], [f"e{i}" for i in range(n)])

    try:
        b.run_episodes(model, tok, setup, host, batch(), temperature=1.0, top_p=1.0, max_new_tokens=8,
                       max_total_tokens=None, seed=0)
        eps = batch()
        with profile(activities=[ProfilerActivity.CPU]) as p:
            t0 = time.perf_counter()
            b.run_episodes(model, tok, setup, host, eps, temperature=1.0, top_p=1.0, max_new_tokens=32,
                           max_total_tokens=None, seed=0)
            seconds = time.perf_counter() - t0
    finally:
        host.close()
        server.stop(0)
    print(f"{n} episodes, one 32-token turn at temperature 1: {seconds:.1f} s "
          f"(prompt {len(eps[0].prompt_ids)} tokens, {sum(len(e.completion_ids) for e in eps)} generated)")
    print(p.key_averages().table(sort_by="self_cpu_time_total", row_limit=15))
    return 0


if __name__ == "__main__":
    sys.exit(main())
