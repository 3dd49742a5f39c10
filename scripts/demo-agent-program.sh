#!/usr/bin/env bash
# `make demo-agent-program`: an agent program (docs/agent-programs.md) through scripts/demo.sh's
# sidecar: agent-evals/agent-programs/orders-openai.ts, an agent written with the `openai` npm package
# that owns its loop, trained with its base URL pointed at the sidecar's OpenAI-compatible endpoint.
# Its base is the embedded agent model `make demo-agent` builds (from orders.agent.ts's reference
# demonstrations: the program sends the same system prompt, tool and tool result). Its evals dir is
# agent-evals/orders-openai/. Extra arguments go to `agent demo` (e.g. --run-id ID, --seed N).
set -euo pipefail
cd "$(dirname "$0")/.."
DEMO_LOG=sidecar-data/sidecar-agent-program.log DEMO_INIT_MODEL=0 exec scripts/demo.sh \
  --agent-program agent-evals/agent-programs/orders-openai.ts --demonstrations-from agent-evals/agent-tasks/orders.agent.ts \
  --config agent-evals/agent-programs/orders-openai-request.json --data-root . --evals-dir agent-evals/orders-openai "$@"
