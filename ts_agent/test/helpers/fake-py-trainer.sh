#!/bin/sh
# A stand-in for `py-trainer plot confusion IN OUT` in report tests that are not about the figure
# (the real one starts Python and matplotlib: ~1.5 s per report). Writes an 8-byte PNG signature.
[ "$1 $2" = "plot confusion" ] || { echo "fake-py-trainer: only 'plot confusion IN OUT'" >&2; exit 2; }
printf '\211PNG\r\n\032\n' > "$4"
