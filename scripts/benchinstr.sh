#!/usr/bin/env bash
# Counts the instructions of BenchmarkWorkload (bench_test.go) per layer
# operation with valgrind's callgrind, and prints each workload's ratio to
# the floor. Unlike CPU time, the count does not move with the machine's
# load or frequency, so it shows small changes; it leaves out what a count
# cannot show (cache misses, and the GC, which is off: GOGC=off).
#
# Each workload runs twice, N and 3N iterations (N: NPAIRS, default
# 10,000; the floor 10 times as many), and the difference is divided by 2N:
# the setup and the runtime's start cancel out. valgrind is installed with
# apt-get when missing. Go's asynchronous preemption is off: callgrind
# asserts on its signals now and then.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v valgrind >/dev/null; then
  apt-get update -qq && apt-get install -y -qq valgrind >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" .
n=${NPAIRS:-10000}

# total BENCH ITERATIONS: callgrind's instruction total for one run.
total() {
  local out="$tmp/cg.out"
  for _ in 1 2 3; do
    rm -f "$out"
    if GODEBUG=asyncpreemptoff=1 GOGC=off valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$tmp/bench.test" -test.run '^$' -test.bench "^BenchmarkWorkload/$1\$" -test.cpu 1 \
      -test.benchtime "${2}x" >/dev/null 2>&1 && [ -s "$out" ]; then
      grep -m1 -E '^(summary|totals):' "$out" | awk '{print $2}'
      return
    fi
  done
  echo "benchinstr: callgrind failed three times on $1" >&2
  exit 1
}

# perop BENCH ITERATIONS OPS_PER_ITERATION
perop() {
  local a b
  a=$(total "$1" "$2")
  b=$(total "$1" $((3 * $2)))
  echo $(((b - a) / (2 * $2 * $3)))
}

floor=$(perop floor-1r1w $((10 * n)) 1)
printf "%-30s %16s %10s\n" workload "instructions/op" "x floor"
printf "%-30s %16d %10.2f\n" floor-1r1w "$floor" 1
for w in queue-journal-indexed queue-journal-versionstamp queue-nojournal-indexed \
  queue-nojournal-versionstamp pq-journal pq-nojournal; do
  i=$(perop "$w" "$n" 2)
  printf "%-30s %16d %10.2f\n" "$w" "$i" "$(echo "$i $floor" | awk '{print $1 / $2}')"
done
