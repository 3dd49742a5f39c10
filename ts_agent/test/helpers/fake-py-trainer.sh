#!/bin/sh
# $PY_TRAINER_BIN for report tests that are not about the figure: a binary that exists (run-report.ts
# checks), never run there (helpers/plot-stub.ts draws in-process). Run, it stands in for
# `py-trainer plot confusion IN OUT` and writes an 8-byte PNG signature.
[ "$1 $2" = "plot confusion" ] || { echo "fake-py-trainer: only 'plot confusion IN OUT'" >&2; exit 2; }
printf '\211PNG\r\n\032\n' > "$4"
