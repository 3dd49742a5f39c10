#!/usr/bin/env bash
# `make demo-agent`: the agent demo (docs/agents.md), through scripts/demo.sh's sidecar: the TS agent
# writes the orders task's demonstration episodes, the sidecar builds its embedded agent model from
# them (once, then cached), keeps baseline.json for that base, trains on episodes whose tool calls run
# in the TS process, evaluates base vs adapter on the test tasks and writes the run's report.md with
# the milestone. Its evals dir is agent-evals/orders/ (its own baseline.json beside the AML demo's).
# Extra arguments go to `agent demo` (e.g. --run-id ID, --seed N).
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_LOG=sidecar-data/sidecar-agent.log DEMO_INIT_MODEL=0 exec scripts/demo.sh \
  --agent-task agent-evals/agent-tasks/orders.agent.ts --config agent-evals/agent-tasks/orders-request.json --data-root . \
  --evals-dir agent-evals/orders "$@"
