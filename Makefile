# fdbqueue — common tasks. `make test` is what CI runs.
GO ?= go
FUZZTIME ?= 10s
SEEDS ?= 20
DURATION ?= 10m

.PHONY: test unit example bench fuzz golden lint fdbkv-check integration soak queuebench

## test: vet, build without cgo, run every test with -race, compile-check fdbkv
test: lint unit fdbkv-check

unit:
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) test -race -count=1 ./...

## example: run the main example on the embedded engine
example:
	$(GO) run ./examples/workqueue

## bench: micro-benchmarks with allocations
bench:
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
