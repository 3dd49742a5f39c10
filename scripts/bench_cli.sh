#!/usr/bin/env bash
# `make bench`, CLI start: `agent --help` (and `agent train --help`, which loads the gRPC stack) run
# from the compiled dist/ that `make setup` builds vs. through tsx (the sources compiled at each
# start, as ts_agent/bin/agent did before), side by side in one run. Median of N runs, in seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
N="${BENCH_CLI_RUNS:-7}"
TS=ts_agent
[[ -f $TS/dist/.built ]] || (cd $TS && npm run --silent build)

median() { sort -n | awk '{a[NR]=$1} END {m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; printf "%.3f", m}'; }
time_runs() {  # time_runs CMD...: N wall-clock times, one per line
  for _ in $(seq "$N"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1
    t1=$(date +%s%N)
    echo "scale=4; ($t1 - $t0) / 1000000000" | bc
  done
}

printf "%-22s %12s %12s %8s\n" "command" "dist (s)" "tsx (s)" "ratio"
for args in "--help" "train --help"; do
  # shellcheck disable=SC2086
  d=$(time_runs node $TS/dist/cli.js $args | median)
  # shellcheck disable=SC2086
  t=$(time_runs $TS/node_modules/.bin/tsx $TS/src/cli.ts $args | median)
  printf "%-22s %12s %12s %7.1fx\n" "agent $args" "$d" "$t" "$(echo "scale=2; $t / $d" | bc)"
done
# what users run: bin/agent picks dist/ when it is fresh
b=$(time_runs $TS/bin/agent --help | median)
printf "%-22s %12s\n" "bin/agent --help" "$b"
echo "(median of $N runs each; target: agent --help under 0.3 s)"
