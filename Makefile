# fdbqueue — common tasks. `make test` is what CI runs.
#
# Three Go modules: the library (.), fdbkv/ (the FoundationDB adapter, cgo)
# and tools/ (simulation, soak, benchmark; porcupine and gonum/plot live
# only there). PUREGO are the modules built and tested without cgo.
GO ?= go
SHELL := /bin/bash
FUZZTIME ?= 10s
SEEDS ?= 20
DURATION ?= 10m
# SOAKFLAGS: more soak flags, e.g. SOAKFLAGS=-leases for the job-queue soak
SOAKFLAGS ?=
PUREGO := . tools

.PHONY: test unit example bench bench-instr bench-all fuzz golden lint fdbkv-check release-check doccounts integration soak queuebench memflat

## test: lint, build without cgo, every test with -race (the library and
## tools/, which holds the simulation), memdb's 1M-transaction memory check
## (without -race), the fdbkv compile check, the release check and the
## README's counts of the suites' checks
test: lint unit fdbkv-check release-check doccounts

unit:
	set -e; for m in $(PUREGO); do \
	  echo "== $$m"; \
	  (cd $$m && CGO_ENABLED=0 $(GO) build ./... && $(GO) test -race -count=1 ./...); \
	done
	$(MAKE) --no-print-directory memflat

## example: run the main example on the embedded engine
example:
	$(GO) run ./examples/workqueue

## bench: the workload table (bench_test.go): Enqueue+Dequeue, Push+PopMin
## and the 1-read-1-write floor on one core, each with its ratio to the floor
bench:
	bash scripts/benchtable.sh

## bench-instr: the same workloads counted in instructions per operation
## with valgrind's callgrind (installed if missing): steady where CPU time
## is noisy, for comparing two versions of the code; about a minute
bench-instr:
	bash scripts/benchinstr.sh

## bench-all: every micro-benchmark with allocations, in the library and tools/
bench-all:
	set -e; for m in $(PUREGO); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem ./...); done

## fuzz: every fuzz target for a short, bounded time
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

## golden: regenerate tuple/testdata/golden.json with the npm fdb-tuple package
golden:
	bash tuple/testdata/golden.sh

## lint: gofmt, go vet and go mod tidy, in every module
lint:
	bash scripts/lint.sh

## fdbkv-check: compile the fdbkv adapter, its tests and the soak's
## FoundationDB mode (-tags fdb) against a stub libfdb_c
fdbkv-check:
	bash scripts/fdbkv-check.sh

## doccounts: the README's counts of kvtest's and queuetest's checks are
## the suites' own (scripts/doccounts.sh)
doccounts:
	bash scripts/doccounts.sh

## release-check: `go get` the library and fdbkv at v0.1.0 from a local
## file proxy into a throwaway consumer, build it, and check its module graph
release-check:
	bash scripts/release-check.sh

## integration: fdbkv's tests, the examples and a short soak against a
## throwaway local fdbserver (skips, with instructions, without one)
integration:
	bash scripts/integration.sh

## soak: long deterministic simulation runs (SEEDS=N DURATION=...;
## SOAKFLAGS=-leases soaks the job queue instead)
soak:
	cd tools && $(GO) run ./cmd/soak -seeds $(SEEDS) -duration $(DURATION) $(SOAKFLAGS)

## queuebench: the contention benchmark table, CSV and chart (into ./out)
queuebench:
	cd tools && $(GO) run ./cmd/queuebench -out $(CURDIR)/out

## memflat: memdb's heap over 1,000,000 transactions with a steady key count
memflat:
	set -o pipefail; MEMDB_LONG=1 $(GO) test -count=1 -run '^TestMemoryStaysFlat$$' -v ./memdb/ | grep -E 'after +(100000|500000|1000000) |^(--- |ok|FAIL)'
	$(GO) test -count=1 -run 'Allocations$$' ./memdb/ ./tuple/
