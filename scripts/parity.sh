#!/usr/bin/env bash
# make parity: the Python ports (py_trainer/core/task_rewards.py, stats/) compute exactly what the TypeScript
# originals (ts_agent/src/agent/core/task-rewards.ts, core/stats/) compute.
#   1. regenerate the checked-in vectors tests/vectors/*.json from the TS code, and write the curve
#      thresholds (ts_agent/src/agent/report/thresholds.ts) to a temp file: the checked-in
#      py_trainer/py_trainer/core/curve_thresholds.json must equal it byte for byte (the sidecar
#      reads that file at run time, so a stale copy fails here instead of being rewritten);
#   2. have TS draw PARITY_RUNS random inputs per function (seed PARITY_SEED) and write them,
#      with its results, to a temp folder (one node process);
#   3. recompute every case of both in Python (one process), print a table per function and
#      exit non-zero on any mismatch. Discrete outputs must be equal; floats within the ulp
#      tolerance each file states (the ports are bit-identical by construction; see core/stats/index.ts);
#      py_trainer.core.curve_thresholds's constants must equal the TS thresholds;
#   4. the verdict's reward half (ts_agent/src/agent/verdict/held-out-reward.ts, from run.json's per-prompt
#      scores) must equal the sidecar's summary.json numbers for every run folder in
#      ts_agent/test/fixtures/runs and agent-evals/runs (src/parity/reward.ts writes, parity.py checks).
# Env: PARITY_RUNS (default 1000), PARITY_SEED (default 20261129), PY (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TSX=node_modules/.bin/tsx
RUNS=${PARITY_RUNS:-1000}
SEED=${PARITY_SEED:-20261129}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

echo "== 1/4 tests/vectors from TypeScript"
(cd ts_agent && "$TSX" src/parity/vectors.ts --out ../tests/vectors --thresholds "$tmp/curve_thresholds.json")
if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [ -n "$(git status --porcelain -- tests/vectors)" ]; then
  echo "   note: tests/vectors differ from the last commit; review and commit them with the TS change"
fi

echo "== 2/4 $RUNS random inputs per function through TypeScript (seed $SEED)"
(cd ts_agent && "$TSX" src/parity/random.ts --out "$tmp/random" --runs "$RUNS" --seed "$SEED")

echo "== 3/4 the verdict's reward half from the run folders' per-prompt scores (TypeScript)"
(cd ts_agent && "$TSX" src/parity/reward.ts --out "$tmp/reward.json" test/fixtures/runs ../agent-evals/runs)

echo "== 4/4 the same cases through Python, the reward half against summary.json"
"$PY" scripts/parity.py --thresholds "$tmp/curve_thresholds.json" --reward "$tmp/reward.json" tests/vectors "$tmp/random"
