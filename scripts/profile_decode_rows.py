"""What one greedy decode step costs on the real model, by the number of rows in the batch (issue 43).

One forward of one new token per row over a 48-token KV cache (`decoding.growing_cache`), for
SmolLM2-135M-Instruct in fp32 on this machine's threads: the median of 8 steps at each batch size.
A fixed part (reading every weight once per forward) plus a part per row: why decoding the base
and its adapters in the same batches (models/variants.py) pays, docs/real-model.md.

    GOMP_SPINCOUNT=5000 .venv/bin/python scripts/profile_decode_rows.py [--rows 8 32 64 128 256]

(GOMP_SPINCOUNT=5000 is the OpenMP wait py-trainer's workers run with, core/cpu_env.py; the
table of the third pass in docs/real-model.md was measured under OMP_WAIT_POLICY=PASSIVE, the
setting then, and says so.)
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[8, 32, 64, 128, 256])
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from pathlib import Path

    from py_trainer.models.base_models import resolve_base_model
    from py_trainer.models.decoding import growing_cache

    folder = resolve_base_model("smollm2-135m-instruct", Path("."))  # the converted folder (converted once)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    print(f"{folder}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    torch.manual_seed(0)
    for rows in args.rows:
        with torch.no_grad():
            cache = growing_cache(model, rows, 48 + args.steps + 1)
            model(input_ids=torch.randint(0, 40000, (rows, 48)), cache=cache, use_cache=True, logits_to_keep=1)
            token = torch.randint(0, 40000, (rows, 1))
            times = []
            for _ in range(args.steps):
                t = time.perf_counter()
                model(input_ids=token, cache=cache, use_cache=True, logits_to_keep=1)
                times.append(time.perf_counter() - t)
        ms = statistics.median(times) * 1000
        print(f"{rows:4d} rows: {ms:6.1f} ms per decode forward, {ms / rows:5.2f} ms per row", flush=True)


if __name__ == "__main__":
    main()
