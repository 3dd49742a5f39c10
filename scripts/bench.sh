#!/usr/bin/env bash
# `make bench`: the benchmark scripts (ratios measured side by side in one run, not timed tests).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PY_TRAINER_HOME="${PY_TRAINER_HOME:-$PWD/.cache/py-trainer}"
echo "== CLI start: agent --help from the compiled dist/ vs through tsx"
scripts/bench_cli.sh
echo
echo "== training: in-process TRL vs through the sidecar from the TS client"
.venv/bin/python scripts/bench_train_overhead.py "$@"
echo
echo "== evaluation: batched single-load Evaluate vs a naive loop"
.venv/bin/python scripts/bench_eval.py
