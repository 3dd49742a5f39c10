#!/usr/bin/env bash
# `make demo-agent`: the agent demo (docs/agents.md): start the sidecar, then the TS agent writes
# the orders task's demonstration episodes, the sidecar builds its embedded agent model from them
# (once, then cached), trains on episodes whose tool calls run in the TS process, and evaluates
# base vs adapter on the test tasks. The sidecar is stopped (SIGTERM) however the demo ends.
# Extra arguments go to `agent demo` (e.g. --run-id ID, --config FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PY_TRAINER_HOME="${PY_TRAINER_HOME:-$HOME/.cache/py-trainer}"
mkdir -p sidecar-data
LOG=sidecar-data/sidecar-agent.log
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
echo "== sidecar on 127.0.0.1:$PORT"
ts_agent/bin/agent demo --agent-task agent-evals/agent-tasks/orders.agent.ts \
  --config agent-evals/agent-tasks/orders-request.json --data-root . --address "127.0.0.1:$PORT" "$@"
