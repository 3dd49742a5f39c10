#!/usr/bin/env bash
# `make bench`: the benchmark scripts (ratios measured side by side in one run, not timed tests).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PY_TRAINER_HOME="${PY_TRAINER_HOME:-$HOME/.cache/py-trainer}"
echo "== CLI start: agent --help from the compiled dist/ vs through tsx"
scripts/bench_cli.sh
echo
echo "== training: in-process vs through the sidecar from the TS client vs TRL's fused LM head as shipped (interleaved repeats, CIs over repeats), and the step-time breakdown"
.venv/bin/python scripts/bench_train_overhead.py "$@"
echo
echo "== evaluation: Evaluate vs lm-evaluation-harness (same tasks, model folder, decoding) and vs a naive loop"
.venv/bin/python scripts/bench_eval.py
# ... and with the newest trained adapter on this machine (the demo's), the completions Evaluate really sees
ADAPTER=$(ls -td agent-evals/runs/*/adapter 2>/dev/null | head -1 || true)
if [ -n "$ADAPTER" ]; then .venv/bin/python scripts/bench_eval.py --sizes --adapter "$ADAPTER"; fi
echo
echo "== GRPO step-time breakdown of the embedded default model in bare TRL, and a PPO-shaped step (scripts/gpu_check.py; on CUDA run it without --model-dir for the Qwen2.5-0.5B shape)"
.venv/bin/python scripts/gpu_check.py --model-dir "$(.venv/bin/py-trainer init-model)" --steps 12 --batch 16 --generations 8 --completion-tokens 32
echo
echo "== memory preflight: memory_estimate's total vs the measured peak RSS of one GRPO step on CPU (embedded model; a random-init Qwen2.5-0.5B-shaped model)"
.venv/bin/python scripts/bench_memory.py
