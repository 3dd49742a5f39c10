#!/usr/bin/env bash
# Generate Python (grpcio) and TypeScript (protoc-gen-es) code from the one contract in proto/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY_OUT=py_trainer/py_trainer/gen
TS_OUT=ts_agent/src/gen
rm -rf "$PY_OUT" "$TS_OUT"
mkdir -p "$PY_OUT" "$TS_OUT"
.venv/bin/python -m grpc_tools.protoc -Iproto \
  --python_out="$PY_OUT" --pyi_out="$PY_OUT" --grpc_python_out="$PY_OUT" \
  --plugin=protoc-gen-es=ts_agent/node_modules/.bin/protoc-gen-es \
  --es_out="$TS_OUT" --es_opt=target=ts \
  grpo/trainer/v1/trainer_service.proto
# The standard health protocol, for the TS client only (Python uses grpcio-health-checking).
.venv/bin/python -m grpc_tools.protoc -Ithird_party/proto \
  --plugin=protoc-gen-es=ts_agent/node_modules/.bin/protoc-gen-es \
  --es_out="$TS_OUT" --es_opt=target=ts \
  grpc/health/v1/health.proto
# protoc writes absolute imports ("from grpo.trainer.v1 import ..."); make them package-relative
# so the generated code lives inside py_trainer instead of claiming a top-level `grpo` package.
sed -i 's/^from grpo\.trainer\.v1 import/from py_trainer.gen.grpo.trainer.v1 import/' \
  "$PY_OUT"/grpo/trainer/v1/*.py
for d in "$PY_OUT" "$PY_OUT/grpo" "$PY_OUT/grpo/trainer" "$PY_OUT/grpo/trainer/v1"; do
  touch "$d/__init__.py"
done
echo "generated $PY_OUT and $TS_OUT"
