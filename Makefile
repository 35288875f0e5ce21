# fdbqueue — common tasks. `make test` is what CI runs.
GO ?= go
SHELL := /bin/bash
FUZZTIME ?= 10s
SEEDS ?= 20
DURATION ?= 10m

.PHONY: test unit example bench bench-all fuzz golden lint fdbkv-check integration soak queuebench memflat

## test: lint, build without cgo, every test with -race, memdb's 1M-transaction
## memory check (without -race), and the fdbkv compile check
test: lint unit fdbkv-check

unit:
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) test -race -count=1 ./...
	$(MAKE) --no-print-directory memflat

## example: run the main example on the embedded engine
example:
	$(GO) run ./examples/workqueue

## bench: the workload table (bench_test.go): Enqueue+Dequeue, Push+PopMin
## and the 1-read-1-write floor on one core, each with its ratio to the floor
bench:
	bash scripts/benchtable.sh

## bench-all: every micro-benchmark with allocations
bench-all:
	$(GO) test -run '^$$' -bench . -benchmem ./...

## fuzz: every fuzz target for a short, bounded time
fuzz:
	bash scripts/fuzz.sh $(FUZZTIME)

## golden: regenerate tuple/testdata/golden.json with the npm fdb-tuple package
golden:
	bash tuple/testdata/golden.sh

## lint: gofmt, go vet and go mod tidy, in every module
lint:
	bash scripts/lint.sh

## fdbkv-check: compile the fdbkv adapter and its tests against a stub libfdb_c
fdbkv-check:
	bash scripts/fdbkv-check.sh

## integration: run fdbkv's tests against a throwaway local fdbserver
integration:
	bash scripts/integration.sh

## soak: long deterministic simulation runs (SEEDS=N DURATION=...)
soak:
	$(GO) run ./cmd/soak -seeds $(SEEDS) -duration $(DURATION)

## queuebench: the contention benchmark table, CSV and chart
queuebench:
	$(GO) run ./cmd/queuebench

## memflat: memdb's heap over 1,000,000 transactions with a steady key count
memflat:
	set -o pipefail; MEMDB_LONG=1 $(GO) test -count=1 -run '^TestMemoryStaysFlat$$' -v ./memdb/ | grep -E 'after +(100000|500000|1000000) |^(--- |ok|FAIL)'
