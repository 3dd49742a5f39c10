#!/usr/bin/env bash
# `make demo`: start the sidecar, then the TS agent does baseline -> train -> download -> eval -> report.
# The sidecar is stopped (SIGTERM, graceful) however the demo ends.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PY_TRAINER_HOME="${PY_TRAINER_HOME:-$HOME/.cache/py-trainer}"
mkdir -p sidecar-data
LOG="${DEMO_LOG:-sidecar-data/sidecar.log}"

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
# Checked (or built) while the sidecar starts: the sidecar needs the model only from the first
# Evaluate on, and a concurrent build waits on the model cache's lock.
# (scripts/demo-agent.sh skips it: its base is built from the agent task's demonstrations)
if [ "${DEMO_INIT_MODEL:-1}" = 1 ]; then
  echo "== embedded default model (built once, then cached in $PY_TRAINER_HOME)"
  .venv/bin/py-trainer init-model
fi
PORT=""
for _ in $(seq 1 600); do
  PORT=$(sed -n 's/^py-trainer listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$LOG" | head -1)
  [ -n "$PORT" ] && break
  kill -0 "$PID" 2>/dev/null || { cat "$LOG"; exit 1; }
  sleep 0.1
done
[ -n "$PORT" ] || { echo "sidecar did not start"; cat "$LOG"; exit 1; }
echo "== sidecar on 127.0.0.1:$PORT"
ts_agent/bin/agent demo --address "127.0.0.1:$PORT" "$@"
