#!/usr/bin/env bash
# Runs BenchmarkWorkload (bench_test.go) on one core, in one `go test` run,
# and prints each workload's CPU time per operation, allocations per
# iteration and ratio to the floor (a 1-read-1-write transaction).
# The benchmark runs COUNT times (default 5, interleaved) and each
# workload's least CPU time is kept: other processes on a shared machine
# only ever add to it. BENCHTIME (default 0.5s) is passed to -benchtime.
# BENCH_YIELD=n makes the loop yield to the scheduler every n iterations
# (see benchYield in bench_test.go).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(go test -run '^$' -bench '^BenchmarkWorkload$' -benchmem -cpu 1 -count "${COUNT:-5}" \
  -benchtime "${BENCHTIME:-0.5s}" .)
echo "$out" | grep -E '^(goos|goarch|cpu):' || true
if [ "${BENCH_YIELD:-0}" != 0 ]; then echo "yielding to the scheduler every ${BENCH_YIELD} iterations"; fi
echo "$out" | awk '
/^BenchmarkWorkload\// {
  name = $1; sub(/^BenchmarkWorkload\//, "", name); sub(/-[0-9]+$/, "", name)
  cpu = ""; allocs = ""
  for (i = 2; i < NF; i++) {
    if ($(i+1) == "cpu-ns/op") cpu = $i
    if ($(i+1) == "allocs/op") allocs = $i
  }
  if (cpu == "") { print "no cpu-ns/op for " name > "/dev/stderr"; exit 1 }
  if (!(name in idx)) { n++; idx[name] = n; names[n] = name; cpus[n] = cpu; allocss[n] = allocs }
  i = idx[name]
  if (cpu + 0 < cpus[i] + 0) cpus[i] = cpu
  if (name == "floor-1r1w") floor = cpus[i]
}
END {
  if (n == 0 || floor == "") { print "benchtable: no results" > "/dev/stderr"; exit 1 }
  printf "%-30s %12s %14s %10s\n", "workload", "min cpu-ns/op", "allocs/iter", "x floor"
  for (i = 1; i <= n; i++)
    printf "%-30s %12.0f %14s %10.2f\n", names[i], cpus[i], allocss[i], cpus[i] / floor
}'
