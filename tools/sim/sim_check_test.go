package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// planted is a FIFO queue (checked with FIFOModel) whose observation and
// drain return planted items and whose operations fail; its journal is
// under prefix, where a test may plant records.
type planted struct {
	structure
	observed, drained []Item
}

func (p planted) name() string                         { return "planted" }
func (p planted) prefix() []byte                       { return []byte("planted") }
func (p planted) model(initial []Item) porcupine.Model { return FIFOModel(initial) }

func (p planted) run(context.Context, kv.Transactor, Input, fdbqueue.OpID) (Output, error) {
	return Output{}, errors.New("planted: nothing to run")
}

func (p planted) observe(context.Context, kv.Database) ([]Item, error) { return p.observed, nil }

func (p planted) drain(context.Context, kv.Database) ([]Item, error) { return p.drained, nil }

// plantedHarness is a harness of one planted target.
func plantedHarness(t *testing.T, p planted, staged bool) (*harness, *target) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Queue, cfg.PriorityQueue, cfg.Batches, cfg.MaxOpen = true, false, false, 1
	cfg.Faults = memdb.Faults{}
	h, err := newHarness(1, cfg)
	require.NoError(t, err)
	t.Cleanup(h.db.close)
	tgt := newTarget(p, 1, staged)
	h.targets = []*target{tgt}
	h.clock.Store(1000) // after the planted operations
	return h, tgt
}

// finish checks each structure's item accounts against its final drain:
// an item enqueued for sure that came out nowhere is lost (unless an
// unrecovered unknown dequeue may have taken it), one that came out twice
// (returned twice, or returned and drained) duplicated, one never
// enqueued a phantom, and a drain that is not the final Observe (in
// order) differs. Planted accounts, each with one problem, must fail on
// it and nothing else; the accounts of a sound run pass.
func TestFinishChecksTheAccounts(t *testing.T) {
	ids := func(ids ...uint64) []Item {
		var items []Item
		for _, id := range ids {
			items = append(items, Item{ID: id})
		}
		return items
	}
	// known counts each ID once per time it is listed (twins: twice).
	known := func(ids ...uint64) map[uint64]enqCount {
		m := map[uint64]enqCount{}
		for _, id := range ids {
			c := m[id]
			c.known++
			m[id] = c
		}
		return m
	}
	for _, tc := range []struct {
		name     string
		enqueued map[uint64]enqCount
		returned map[uint64]int
		capacity int
		state    []Item
		drained  []Item
		want     Result // Lost, Duplicated, Phantom, DrainDiffers
	}{
		{"sound", known(1, 2, 3), map[uint64]int{1: 1}, 0, ids(2, 3), ids(2, 3), Result{}},
		{"lost", known(1, 2, 3), map[uint64]int{1: 1}, 0, ids(3), ids(3), Result{Lost: 1}},
		{"missing, an unknown dequeue may have taken it", known(1, 2, 3), map[uint64]int{1: 1}, 1, ids(3), ids(3), Result{}},
		{"two missing, an unknown dequeue may have taken one", known(1, 2, 3), nil, 1, ids(3), ids(3), Result{Lost: 1}},
		{"an unknown enqueue's item missing", map[uint64]enqCount{1: {known: 1}, 2: {maybe: 1}}, nil, 0, ids(1), ids(1), Result{}},
		// Twins: an ID enqueued k times must come out k times.
		{"twins, each out once", known(1, 1, 2), map[uint64]int{1: 1}, 0, ids(1, 2), ids(1, 2), Result{}},
		{"twins, one lost", known(1, 1, 2), map[uint64]int{1: 1}, 0, ids(2), ids(2), Result{Lost: 1}},
		{"twins, both lost", known(1, 1, 2), nil, 0, ids(2), ids(2), Result{Lost: 2}},
		{"twins, one lost, an unknown dequeue may have taken it", known(1, 1, 2), nil, 1, ids(1, 2), ids(1, 2), Result{}},
		{"twins, one returned three times", known(1, 1), map[uint64]int{1: 3}, 0, nil, nil, Result{Duplicated: 1}},
		{"twins, returned twice and left", known(1, 1), map[uint64]int{1: 2}, 0, ids(1), ids(1), Result{Duplicated: 1}},
		{"a twin of an unknown enqueue out", map[uint64]enqCount{1: {known: 1, maybe: 1}}, map[uint64]int{1: 1}, 0, ids(1), ids(1), Result{}},
		{"a twin of an unknown enqueue missing", map[uint64]enqCount{1: {known: 1, maybe: 1}}, map[uint64]int{1: 1}, 0, nil, nil, Result{}},
		{"a known twin missing beside an unknown one", map[uint64]enqCount{1: {known: 2, maybe: 1}}, map[uint64]int{1: 1}, 0, nil, nil, Result{Lost: 1}},
		{"a twin of an unknown enqueue out too often", map[uint64]enqCount{1: {known: 1, maybe: 1}}, map[uint64]int{1: 2}, 0, ids(1), ids(1), Result{Duplicated: 1}},
		{"returned twice", known(1, 2), map[uint64]int{1: 2}, 0, ids(2), ids(2), Result{Duplicated: 1}},
		{"returned and left", known(1, 2), map[uint64]int{1: 1}, 0, ids(1, 2), ids(1, 2), Result{Duplicated: 1}},
		{"returned, never enqueued", known(1), map[uint64]int{1: 1, 9: 1}, 0, nil, nil, Result{Phantom: 1}},
		{"left, never enqueued", known(1), nil, 0, ids(1, 9), ids(1, 9), Result{Phantom: 1}},
		{"drained in another order", known(1, 2), nil, 0, ids(1, 2), ids(2, 1), Result{DrainDiffers: 1}},
		{"drained less", known(1, 2), nil, 0, ids(1, 2), ids(1), Result{DrainDiffers: 1, Lost: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, tgt := plantedHarness(t, planted{drained: tc.drained}, false)
			tgt.state, tgt.capacity = tc.state, tc.capacity
			for id, st := range tc.enqueued {
				tgt.enqueued[id] = st
			}
			for id, n := range tc.returned {
				tgt.returned[id] = n
			}
			h.targets = []*target{tgt}
			var res Result
			h.finish(context.Background(), &res)
			got := Result{Lost: res.Lost, Duplicated: res.Duplicated, Phantom: res.Phantom, DrainDiffers: res.DrainDiffers}
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.want == Result{}, res.OK())
			require.Equal(t, tc.want == Result{}, res.Failure == nil, "%v", res.Failure)
		})
	}
}

// settle checks a round's history against the model and what the
// observation settles: planted histories, the items each observation
// returns, must be found linearizable or not, an unknown enqueue whose
// item appeared enqueued for sure, an unknown dequeue left open an
// allowance of one item missing, and a staged take whose error was
// trusted but whose journal record says it took an item a violation.
func TestSettleChecksTheRound(t *testing.T) {
	ctx := context.Background()
	rec := func(call, ret int64, in Input, out Output, unknown bool) *record {
		return &record{op: op(int(call), call, ret, in, out), unknown: unknown}
	}
	enq1, enq2 := rec(1, 2, enq(1), ok, false), rec(3, 4, enq(2), ok, false)
	for _, tc := range []struct {
		name       string
		recs       []*record
		observed   []Item
		violations int
	}{
		{"in order", []*record{enq1, enq2, rec(5, 6, deq, got(1), false)}, []Item{{ID: 2}}, 0},
		{"out of order", []*record{enq1, enq2, rec(5, 6, deq, got(2), false)}, []Item{{ID: 1}}, 1},
		{"an item lost", []*record{enq1, enq2, rec(5, 6, deq, got(1), false)}, nil, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, tgt := plantedHarness(t, planted{observed: tc.observed}, false)
			var res Result
			recs := make([]*record, len(tc.recs))
			for i, r := range tc.recs {
				c := *r
				recs[i] = &c
			}
			h.settle(ctx, 0, tgt, recs, &res)
			require.Equal(t, 1, res.Histories)
			require.Equal(t, tc.violations, res.Violations)
			require.Equal(t, tc.violations == 0, res.OK())
			if tc.violations > 0 {
				require.True(t, res.Failure.HasVisualization(), "%v", res.Failure)
			} else {
				require.Nil(t, res.Failure)
			}
			require.Equal(t, tc.observed, tgt.state)
		})
	}
	t.Run("an unknown enqueue whose item appeared", func(t *testing.T) {
		h, tgt := plantedHarness(t, planted{observed: []Item{{ID: 2}}}, false)
		var res Result
		h.settle(ctx, 0, tgt, []*record{rec(1, 2, enq(1), unknown, true), rec(3, 4, enq(2), unknown, true)}, &res)
		require.Zero(t, res.Violations)
		require.Equal(t, enqCount{}, tgt.enqueued[1], "its item appeared nowhere and no open dequeue may have taken it")
		require.Equal(t, enqCount{known: 1}, tgt.enqueued[2], "its item appeared: enqueued for sure, so lost if it goes missing")
	})
	t.Run("an unknown enqueue whose twin's item appeared", func(t *testing.T) {
		// The item that appeared may be the known enqueue's: the unknown
		// one stays open (MaxOpen 1), maybe enqueued. Taken as enqueued
		// for sure, the history would hold two items where the
		// observation has one, a violation the layer did not commit.
		h, tgt := plantedHarness(t, planted{observed: []Item{{ID: 1}}}, false)
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, rec(3, 4, enq(1), unknown, true)}, &res)
		require.Zero(t, res.Violations, "%v", res.Failure)
		require.Equal(t, 1, res.Unknown)
		require.Equal(t, enqCount{known: 1, maybe: 1}, tgt.enqueued[1])
		require.Equal(t, 2, tgt.attempted[1])
	})
	t.Run("an unknown enqueue whose item and its twin's appeared", func(t *testing.T) {
		// Two items of ID 1 appeared and one known enqueue explains one:
		// the unknown one is open (maybe), which the observation decides.
		h, tgt := plantedHarness(t, planted{observed: []Item{{ID: 1}, {ID: 1}}}, false)
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, rec(3, 4, enq(1), unknown, true)}, &res)
		require.Zero(t, res.Violations, "%v", res.Failure)
		require.Equal(t, 1, res.TwinsTogether)
		require.Equal(t, enqCount{known: 1, maybe: 1}, tgt.enqueued[1])
	})
	t.Run("an unknown enqueue with twins that appeared nowhere", func(t *testing.T) {
		// No item of ID 1 appeared and no dequeue is open: neither
		// enqueue of it took effect, and the known one's item is lost.
		h, tgt := plantedHarness(t, planted{}, false)
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, rec(3, 4, enq(1), unknown, true)}, &res)
		require.Equal(t, 1, res.Violations)
		require.Equal(t, enqCount{known: 1}, tgt.enqueued[1])
	})
	t.Run("an unknown dequeue left open", func(t *testing.T) {
		h, tgt := plantedHarness(t, planted{}, false)
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, rec(3, 4, deq, unknown, true)}, &res)
		require.Zero(t, res.Violations)
		require.Equal(t, 1, res.Unknown)
		require.Equal(t, 1, tgt.capacity, "it may have taken one item")
	})
	t.Run("a written history lists the failed calls", func(t *testing.T) {
		// An item lost while a staged take failed with an error the
		// check trusts: the history names the take's error, which tells
		// what the take did (see docs/reliability.md, "Known gaps").
		h, tgt := plantedHarness(t, planted{}, true)
		take := rec(3, 4, Input{Kind: Dequeue}, unknown, true)
		take.trusted, take.layerID = true, true
		take.failed = "Dequeue: context deadline exceeded (" + take.failedAs() + ")"
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
		require.Equal(t, 1, res.Violations)
		require.True(t, res.Failure.HasVisualization(), "%v", res.Failure)
		var b strings.Builder
		require.NoError(t, res.Failure.WriteHistory(&b))
		require.Contains(t, b.String(), "failed calls (1):\n  #3 client 1 Dequeue: context deadline exceeded (a trusted staged take, under an ID the layer made); checked as a Hide and an Unhide\n")
	})
	t.Run("a written history lists the items held outside the queue", func(t *testing.T) {
		// The lost item sits in a journal record (a take kept it), in
		// the tuple encoding's escaped form: the history says so, and
		// names the record's key.
		h, tgt := plantedHarness(t, planted{}, true)
		take := rec(3, 4, Input{Kind: Dequeue}, unknown, true)
		take.trusted = true
		take.failed = "Dequeue: context deadline exceeded (" + take.failedAs() + ")"
		key, err := tuple.Tuple{"j", int64(7), []byte("op")}.AppendPack(append(tgt.s.prefix(), 0xff))
		require.NoError(t, err)
		stored, err := tuple.Tuple{binary.BigEndian.AppendUint64(nil, 1)}.AppendPack(nil)
		require.NoError(t, err)
		// A request left in the line is listed, the signal key is not.
		meta := append(tgt.s.prefix(), 0xff)
		req, err := tuple.Tuple{"s", "q", "r", int64(5)}.AppendPack(bytes.Clone(meta))
		require.NoError(t, err)
		sig, err := tuple.Tuple{"s", "sig"}.AppendPack(bytes.Clone(meta))
		require.NoError(t, err)
		require.NoError(t, h.db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(key, append([]byte("rec"), stored...))
			tr.Set(req, []byte("deadline"))
			tr.Set(sig, []byte{1})
			return nil
		}))
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
		require.Equal(t, 1, res.Violations)
		var b strings.Builder
		require.NoError(t, res.Failure.WriteHistory(&b))
		require.Contains(t, b.String(), "items and staging keys outside the queue (2 keys):\n"+
			"  (\"j\", 7, b\"op\") (20 bytes) holds [1]\n"+
			"  (\"s\", \"q\", \"r\", 5) (8 bytes) holds no item\n")
	})
	t.Run("a staged take under an ID the layer made that failed maybe committed", func(t *testing.T) {
		// Its cleanup could not tell which of several equal items its
		// take holds and left it in its journal record, failing maybe
		// committed (the layer's staging_withdraw.go, landedTake): the
		// take is open, an allowance of one item missing, not a Hide
		// and an Unhide that give the item back.
		h, tgt := plantedHarness(t, planted{}, true)
		take := rec(3, 4, Input{Kind: Dequeue}, unknown, true)
		take.layerID, take.inFlight = true, true
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
		require.Zero(t, res.Violations, "%v", res.Failure)
		require.Zero(t, res.Hidden)
		require.Equal(t, 1, res.Unknown)
		require.Equal(t, 1, tgt.capacity, "it may have taken one item")
		require.Contains(t, take.failed, "left open")
	})
	t.Run("a trusted staged take that took an item", func(t *testing.T) {
		h, tgt := plantedHarness(t, planted{observed: []Item{{ID: 1}}}, true)
		take := rec(3, 4, Input{Kind: Dequeue, Wait: true}, unknown, true)
		take.trusted = true
		take.id = fdbqueue.NewOpID()
		// Its journal record (fdbqueue's journal.go: (shard, ID) under
		// the prefix and 0xff).
		p, err := tuple.Tuple{"j", int64(take.id[8]), take.id[:]}.AppendPack(append(tgt.s.prefix(), 0xff))
		require.NoError(t, err)
		require.NoError(t, h.db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(append(p, 0), []byte{1}); return nil }))
		var res Result
		h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
		require.Equal(t, 1, res.Violations)
		require.Contains(t, res.Failure.Reason, "its journal record says it took an item")
	})
}

// A conservation failure is found only after the last round, so finish
// attaches the history of the last round that holds the lost item (in its
// starting state or its operations), which the soak and the tests write
// out: here item 2, lost, was last in round 1's starting state, and round
// 2 does not mention it.
func TestFinishShowsTheLastRoundOfALostItem(t *testing.T) {
	item := func(id uint64) Item { return Item{ID: id} }
	observe := func(items ...Item) porcupine.Operation {
		return porcupine.Operation{ClientId: 0, Input: Input{Kind: Observe}, Call: 1, Return: 2, Output: Output{Items: items}}
	}
	h, tgt := plantedHarness(t, planted{drained: []Item{item(1)}}, false)
	tgt.state = []Item{item(1)}
	tgt.enqueued[1], tgt.enqueued[2] = enqCount{known: 1}, enqCount{known: 1}
	start0, start1, start2 := []Item{item(1), item(2)}, []Item{item(1), item(2)}, []Item{item(1)}
	tgt.rounds = []checkedRound{
		{round: 0, start: start0, model: FIFOModel(start0), history: []porcupine.Operation{observe(start1...)}},
		{round: 1, start: start1, model: FIFOModel(start1), history: []porcupine.Operation{observe(start2...)}, failedCalls: []string{"a failed call"}},
		{round: 2, start: start2, model: FIFOModel(start2), history: []porcupine.Operation{observe(start2...)}},
	}
	var res Result
	h.finish(context.Background(), &res)
	require.Equal(t, 1, res.Lost)
	require.NotNil(t, res.Failure)
	require.True(t, res.Failure.HasVisualization(), "the failure holds a history to write")
	require.Equal(t, 1, res.Failure.Round, "the last round that holds item 2")
	require.Contains(t, res.Failure.Reason, "conservation: 1 lost")
	require.Equal(t, []string{"a failed call"}, res.Failure.failedCalls)
	var b strings.Builder
	require.NoError(t, res.Failure.WriteHistory(&b))
	require.Contains(t, b.String(), "round 1")
	require.Contains(t, b.String(), "longest linearizable prefix (0 operations)", "its one Observe lacks item 2")

	// A round whose check timed out is not checked again for porcupine's
	// linearizations (Failure.linearize): its history is written without
	// them, and there is nothing to visualize.
	tgt.rounds[1].undecided = true
	res = Result{}
	h.finish(context.Background(), &res)
	require.Equal(t, 1, res.Failure.Round)
	require.True(t, res.Failure.HasHistory())
	require.False(t, res.Failure.HasVisualization())
	b.Reset()
	require.NoError(t, res.Failure.WriteHistory(&b))
	require.Contains(t, b.String(), "round 1")
	require.Contains(t, b.String(), "longest linearizable prefix: not computed")
	require.Error(t, res.Failure.Visualize(filepath.Join(t.TempDir(), "h.html")))
}

// An operation that failed with ErrOperationExpired outlived its journal
// retention: a call under its ID fails so too, and an expiry may have
// cleared its record, so neither settles it, and the error's doc says to
// treat it as maybe committed. The errors are built as the layer builds
// them (staging_withdraw.go, abandon; journal.go, expired). Each history
// holds what the layer allows; the check must pass it, and fail the one
// it does not allow.
func TestSettleOperationsPastTheirRetention(t *testing.T) {
	ctx := context.Background()
	rec := func(call, ret int64, in Input, out Output) *record {
		return &record{op: op(int(call), call, ret, in, out), id: fdbqueue.NewOpID()}
	}
	expired := fmt.Errorf("%w: op x is 9s old, retention 8s", fdbqueue.ErrOperationExpired)
	// abandon's undecided case: the cleanup found no record of the takes
	// in doubt past the retention; one may have applied, its record
	// cleared by an expiry.
	undecided := kv.CommitInterrupted(fmt.Errorf("%w (the cleanup found no record of the takes in doubt: one may have applied, its record cleared by an expiry)", expired))
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("a staged take that may have committed, its record expired, trusting errors %v", trust), func(t *testing.T) {
			// The take applied and an expiry cleared its record: item
			// 1 is gone, which no Hide and Unhide explains.
			h, tgt := plantedHarness(t, planted{}, true)
			h.cfg.TrustErrors = trust
			enq1 := rec(1, 2, enq(1), ok)
			take := rec(3, 4, deq, unknown)
			h.classify(tgt, take, deq, undecided)
			require.True(t, take.unknown && take.inFlight && take.expired && !take.trusted && !take.dropped)
			var res Result
			h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
			require.Zero(t, res.Violations, "%v", res.Failure)
			require.Zero(t, res.Unexpected, "%v", res.Failure)
			require.Zero(t, res.Hidden)
			require.Equal(t, 1, res.Unknown)
			require.Equal(t, 1, tgt.capacity, "it may have taken one item")
			require.Contains(t, take.failed, "its commit maybe in flight, past its journal retention")
			require.Contains(t, take.failed, "left open")
		})
	}
	t.Run("a staged take that did not commit", func(t *testing.T) {
		// Without kv.MaybeCommitted its cleanup put back any item its
		// takes took: a Hide and an Unhide; a journal record of it is a
		// violation.
		for _, recorded := range []bool{false, true} {
			h, tgt := plantedHarness(t, planted{observed: []Item{{ID: 1}}}, true)
			enq1 := rec(1, 2, enq(1), ok)
			take := rec(3, 4, deq, unknown)
			h.classify(tgt, take, deq, expired)
			require.True(t, take.unknown && !take.inFlight && take.expired)
			if recorded {
				p, err := tuple.Tuple{"j", int64(take.id[8]), take.id[:]}.AppendPack(append(tgt.s.prefix(), 0xff))
				require.NoError(t, err)
				require.NoError(t, h.db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(append(p, 0), []byte{1}); return nil }))
			}
			var res Result
			h.settle(ctx, 0, tgt, []*record{enq1, take}, &res)
			require.Zero(t, res.Unexpected, "%v", res.Failure)
			if recorded {
				require.Equal(t, 1, res.Violations)
				require.Contains(t, res.Failure.Reason, "its journal record says it took an item")
				continue
			}
			require.Zero(t, res.Violations, "%v", res.Failure)
			require.Equal(t, 1, res.Hidden)
		}
	})
	t.Run("a dequeue to recover", func(t *testing.T) {
		// A recovery under its ID would fail with ErrOperationExpired
		// (here the planted structure fails every call): it stays open.
		h, tgt := plantedHarness(t, planted{}, false)
		take := rec(3, 4, deq, unknown)
		take.recover = true
		h.classify(tgt, take, deq, expired)
		var res Result
		h.settle(ctx, 0, tgt, []*record{rec(1, 2, enq(1), ok), take}, &res)
		require.Zero(t, res.Unexpected, "%v", res.Failure)
		require.Zero(t, res.Violations, "%v", res.Failure)
		require.Zero(t, res.Recovered)
		require.Equal(t, 1, res.Unknown)
		require.Equal(t, 1, tgt.capacity)
	})
	t.Run("operations beyond MaxOpen", func(t *testing.T) {
		// MaxOpen (1) is taken by the first dequeue: the expired
		// operations are not settled from the journal, which holds no
		// record of them (an expiry may have cleared it), but stay open.
		// Settled from it, the second dequeue would be left out, and the
		// absence of both items a violation; the enqueue, whose item
		// appeared nowhere while dequeues are open, left out too.
		h, tgt := plantedHarness(t, planted{}, false)
		first := rec(5, 6, deq, unknown)
		h.classify(tgt, first, deq, context.Canceled)
		second := rec(7, 8, deq, unknown)
		h.classify(tgt, second, deq, expired)
		third := rec(9, 10, enq(3), unknown)
		h.classify(tgt, third, enq(3), expired)
		var res Result
		h.settle(ctx, 0, tgt, []*record{rec(1, 2, enq(1), ok), rec(3, 4, enq(2), ok), first, second, third}, &res)
		require.Zero(t, res.Unexpected, "%v", res.Failure)
		require.Zero(t, res.Violations, "%v", res.Failure)
		require.Equal(t, 3, res.Unknown)
		require.Equal(t, 2, tgt.capacity)
		require.Equal(t, enqCount{maybe: 1}, tgt.enqueued[3], "its item may have been enqueued and taken by an open dequeue")
	})
}
