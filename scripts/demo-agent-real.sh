#!/usr/bin/env bash
# `make demo-agent-real` (docs/agents.md "A real model learns the shop task"): a real pretrained model,
# SmolLM2-135M-Instruct (converted once from its PyPI GGUF wheel, then cached), learns the shop task
# (agent-evals/agent-tasks/shop.agent.ts: two tool calls, copied arguments and a copied tool result),
# which its base never attempts, in the two stages the anchors use:
#   1. agent warmstart: LoRA SFT (TRL's SFTTrainer) on a few of the task's reference demonstrations;
#   2. agent train --init-from: GRPO (TRL's GRPOTrainer) from that adapter, its preflight first;
#   3. agent eval: base, warm start and warm start + GRPO on the task's first 200 test tasks, one
#      episode each sampled at temperature 1 (the run's), what the warm start gave and what RL added,
#      each a paired comparison with its verdict;
#   4. agent report: the run's report.md.
# One sidecar (scripts/demo.sh's way: started here, stopped however the demo ends). Its evals dir is
# agent-evals/shop-real/ (per machine, gitignored); the demonstrations go under sidecar-data/.
#   scripts/demo-agent-real.sh [--seed N] [--run-id ID] [--evals-dir DIR]
# (seed: the SFT's and the GRPO's, default 1; run id: shop-real-s<seed>-<time>, the warm start's is
# <run id>-warm; evals dir: agent-evals/shop-real)
# The last line is "[demo] what RL added: VERDICT" (CONFIRMED / PASS / FAIL / INCONCLUSIVE).
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=1
RUN=""
EVALS=agent-evals/shop-real
while [ $# -gt 0 ]; do
  case "$1" in
    --seed) SEED="${2:?--seed needs a number}"; shift 2 ;;
    --run-id) RUN="${2:?--run-id needs an id}"; shift 2 ;;
    --evals-dir) EVALS="${2:?--evals-dir needs a folder}"; shift 2 ;;
    *) echo "demo-agent-real: unknown argument '$1' (--seed N, --run-id ID, --evals-dir DIR)" >&2; exit 2 ;;
  esac
done
case "$SEED" in ''|*[!0-9]*) echo "demo-agent-real: --seed: a whole number, got '$SEED'" >&2; exit 2 ;; esac
RUN="${RUN:-shop-real-s$SEED-$(date -u +%Y%m%d-%H%M%S)}"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PY_TRAINER_HOME="${PY_TRAINER_HOME:-$HOME/.cache/py-trainer}"
TASK=agent-evals/agent-tasks/shop.agent.ts
mkdir -p sidecar-data "$EVALS"
CONFIG="sidecar-data/$RUN.json"
# the shipped request with this seed for both stages (written whole, then renamed: never half a file)
.venv/bin/python - "$SEED" "$CONFIG" <<'EOF'
import json, os, sys
seed, out = sys.argv[1], sys.argv[2]
req = json.load(open("agent-evals/agent-tasks/shop-smollm2-request.json"))
req["sft"]["seed"] = req["grpo"]["seed"] = seed
with open(out + ".tmp", "w") as f:
    json.dump(req, f, indent=1)
os.replace(out + ".tmp", out)
EOF
LOG=sidecar-data/sidecar-agent-real.log
echo "== starting the sidecar (log: $LOG)"
.venv/bin/py-trainer serve --host 127.0.0.1 --port 0 --runs-root sidecar-data/runs --data-root . >"$LOG" 2>&1 &
PID=$!
stop() {
  if kill -0 "$PID" 2>/dev/null; then
    kill -TERM "$PID"
    wait "$PID" || true
    echo "== sidecar stopped"
  fi
}
trap stop EXIT
PORT=""
for _ in $(seq 1 600); do
  PORT=$(sed -n 's/^py-trainer listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "sidecar did not start"; cat "$LOG"; exit 1; }
agent() { ts_agent/bin/agent "$@" --address "127.0.0.1:$PORT"; }
T0=$SECONDS
echo "== [1/4] warm start: LoRA SFT on the shop task's reference demonstrations (seed $SEED)"
agent warmstart --agent-task "$TASK" --config "$CONFIG" --run-id "$RUN-warm" --data-root . --evals-dir "$EVALS"
echo "== [2/4] GRPO from the warm start"
agent train --agent-task "$TASK" --init-from "$RUN-warm" --config "$CONFIG" --run-id "$RUN" --evals-dir "$EVALS"
echo "== [3/4] base, warm start and warm start + GRPO on the test tasks"
EVAL_OUT=$(mktemp)
# sampled at the run's temperature (1, the OpenAI API's default): one episode per task on the first
# 200 test tasks (the milestone's minimum); greedy, the warm start alone already solves ~92%
agent eval "$RUN" --agent-task "$TASK" --temperature 1 --limit 200 --evals-dir "$EVALS" | tee "$EVAL_OUT"
echo "== [4/4] report"
agent report "$RUN" --evals-dir "$EVALS"
echo "[demo] wall time $((SECONDS - T0)) s (seed $SEED, run $RUN, evals dir $EVALS)"
VERDICT=$(sed -n 's/^what RL added (.*: \([A-Z]*\)$/\1/p' "$EVAL_OUT" | tail -1)
rm -f "$EVAL_OUT"
echo "[demo] what RL added: ${VERDICT:-unknown}"
