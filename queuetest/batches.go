package queuetest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// maxBudget is the largest batch budget WithBatchBudget accepts (found by
// bisection, so that the suite follows the documented cap if it changes).
var maxBudget = func() int {
	lo, hi := 1, kv.MaxTransactionSize*2
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if _, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("b")), fdbqueue.WithBatchBudget(mid)); err == nil {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}()

// batchChecks: batch operations at their limits. A batch the budget
// accepts must commit (never transaction_too_large, 2101), and every
// later step must handle what it wrote.
func batchChecks() []check {
	var cs []check
	for i, m := range queueModes {
		// Small values at the largest budget: ~100,000 items a batch, so
		// (to keep the suite fast) on the recipe's layout only;
		// VersionstampBatchCountLimit fills a versionstamp batch.
		if i == 0 {
			cs = append(cs, check{"EnqueueAtBudget/" + m.name + "/small", func(t *testing.T, f *fixture) {
				testEnqueueAtBudget(t, f, m, maxBudget, smallValue)
			}})
		}
		for _, fill := range Fills {
			cs = append(cs, check{"EnqueueAtBudget/" + m.name + "/" + fill.Name + "-max", func(t *testing.T, f *fixture) {
				big := MaxValue(encodingOf(m.name), fill)
				testEnqueueAtBudget(t, f, m, fdbqueue.DefaultBatchBudget, func(int) []byte { return big })
			}})
		}
		cs = append(cs, check{"DequeueBatchSplitsAtBudget/" + m.name, func(t *testing.T, f *fixture) { testDequeueBatchBudget(t, f, m) }})
	}
	for _, e := range encodings {
		for _, fill := range Fills {
			cs = append(cs, check{"PopBatchAtBudget/" + e.name + "/" + fill.Name + "-max", func(t *testing.T, f *fixture) {
				testPopBatchAtBudget(t, f, e.enc, fill)
			}})
		}
	}
	cs = append(cs,
		check{"VersionstampBatchCountLimit", testVersionstampCountLimit},
		check{"VersionstampUserVersionWrap", testUserVersionWrap},
		check{"BudgetBounds", testBudgetBounds},
	)
	return cs
}

// smallValue is item i of a batch of small values: 3 bytes, big-endian i,
// so that order is checkable and zero bytes occur.
func smallValue(i int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(i))
	return b[1:]
}

// largestAccepted finds, by bisection, the largest n for which
// q.EnqueueBatch(values(0..n-1)) passes its budget check. It probes in a
// cancelled transaction: a batch over the budget fails with
// ErrBatchTooLarge before anything else, one within it gets as far as its
// first read, which fails with transaction_cancelled (or, reading nothing,
// returns nil), and no probe's transaction commits.
func (f *fixture) largestAccepted(t *testing.T, q *fdbqueue.Queue, budget int, value func(int) []byte) int {
	t.Helper()
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	tr.Cancel()
	accepts := func(n int) bool {
		vs := make([][]byte, n)
		for i := range vs {
			vs[i] = value(i)
		}
		err := q.EnqueueBatch(f.ctx, tr, vs)
		if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
			return false
		}
		// A versionstamp batch in a caller's transaction without WithOpID
		// reads nothing, so it returns nil; the cancelled transaction is
		// never committed either way.
		if err != nil {
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "probing a batch of %d in a cancelled transaction", n)
		}
		return true
	}
	// One value always fits; n items cost at least their stored bytes.
	lo, hi := 1, budget/max(1, len(value(0)))
	require.True(t, accepts(lo), "a batch of one value must fit the budget")
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if accepts(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}

// testEnqueueAtBudget: the largest batch EnqueueBatch accepts commits, one
// more item is refused with ErrBatchTooLarge, and DequeueBatch hands the
// items back in order, each of its transactions committing.
func testEnqueueAtBudget(t *testing.T, f *fixture, m queueMode, budget int, value func(int) []byte) {
	q := f.queue(t, "budget", with(m.opts, fdbqueue.WithBatchBudget(budget))...)
	// One item first, so that the batch does not start at a fresh
	// queue's first index (or user version).
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("before")))
	n := f.largestAccepted(t, q, budget, value)
	vs := make([][]byte, n)
	for i := range vs {
		vs[i] = value(i)
	}
	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, vs), "EnqueueBatch of %d items (%s each), the most the budget %d accepts, must commit", n, describe(vs[0]), budget)
	err := q.EnqueueBatch(f.ctx, f.db, append(vs, value(n)))
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "one item more than the budget accepts")

	want := append([][]byte{[]byte("before")}, vs...)
	var got [][]byte
	for calls := 0; len(got) < len(want); calls++ {
		require.Less(t, calls, len(want), "DequeueBatch must take at least one item per call")
		part, err := q.DequeueBatch(f.ctx, f.db, len(want))
		require.NoError(t, err, "DequeueBatch(%d) after %d of %d items, with budget %d", len(want), len(got), len(want), budget)
		require.NotEmpty(t, part)
		got = append(got, part...)
	}
	requireSameOrder(t, want, got, fmt.Sprintf("a batch of %d items at the budget", n))
	_, err = q.DequeueBatch(f.ctx, f.db, 1)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// requireSameOrder compares long lists of values, reporting the first
// difference.
func requireSameOrder(t *testing.T, want, got [][]byte, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: item count", what)
	for i := range want {
		if string(want[i]) != string(got[i]) {
			lo, hi := max(0, i-2), min(len(got), i+3)
			require.Failf(t, "items out of order", "%s: item %d is %s, want %s (got around it: %s, want %s)",
				what, i, describe(got[i]), describe(want[i]), describeAll(got[lo:hi]), describeAll(want[lo:hi]))
		}
	}
}

// testDequeueBatchBudget: DequeueBatch takes fewer items than asked when
// their values exceed the budget, at least one even when a single item
// does, and loses none.
func testDequeueBatchBudget(t *testing.T, f *fixture, m queueMode) {
	q := f.queue(t, "split", with(m.opts, fdbqueue.WithBatchBudget(1000))...)
	var want [][]byte
	for i := range 8 {
		want = append(want, MakeValue(Fills[2], 300+i))
	}
	f.enqueueAll(t, q, want)
	var got [][]byte
	for len(got) < len(want) {
		part, err := q.DequeueBatch(f.ctx, f.db, 100)
		require.NoError(t, err)
		require.NotEmpty(t, part)
		require.Less(t, len(part), 8, "items of 300 bytes with a 1,000-byte budget cannot all come in one batch")
		got = append(got, part...)
	}
	requireValues(t, want, got, "split batches keep order and lose nothing")

	// A value over the budget, enqueued by a client with the default budget.
	big := MaxValue(encodingOf(m.name), Fills[1])
	other, err := fdbqueue.NewQueue(q.Subspace(), m.opts...)
	require.NoError(t, err)
	require.NoError(t, other.Enqueue(f.ctx, f.db, big))
	part, err := q.DequeueBatch(f.ctx, f.db, 5)
	require.NoError(t, err, "DequeueBatch takes one item even when it alone exceeds the budget")
	requireValues(t, [][]byte{big}, part)
}

// testPopBatchAtBudget: more limit-sized items than one batch budget holds
// come out of PopMinBatch and PopMaxBatch, in order, with every
// transaction committing.
func testPopBatchAtBudget(t *testing.T, f *fixture, enc fdbqueue.ValueEncoding, fill Fill) {
	pq := f.pqueue(t, "popbudget", fdbqueue.WithValueEncoding(enc))
	v := MaxValue(enc, fill)
	const n = 12 // 12 limit-sized values exceed the default budget
	for i := range n {
		p := int64(i)
		if i%2 == 1 {
			p = math.MaxInt64 - int64(i)
		}
		require.NoError(t, pq.Push(f.ctx, f.db, v, p), "Push %d of %s", i, describe(v))
	}
	taken := 0
	for calls := 0; taken < n; calls++ {
		require.Less(t, calls, n)
		pop, name := pq.PopMinBatch, "PopMinBatch"
		if calls%2 == 1 {
			pop, name = pq.PopMaxBatch, "PopMaxBatch"
		}
		its, err := pop(f.ctx, f.db, n)
		require.NoError(t, err, "%s of limit-sized items (%s) after %d taken", name, describe(v), taken)
		require.NotEmpty(t, its)
		for i := 1; i < len(its); i++ {
			if calls%2 == 0 {
				require.Less(t, its[i-1].Priority, its[i].Priority, "%s order", name)
			} else {
				require.Greater(t, its[i-1].Priority, its[i].Priority, "%s order", name)
			}
		}
		for _, it := range its {
			requireValue(t, v, it.Value)
		}
		taken += len(its)
	}
	require.Equal(t, n, taken)
	_, err := pq.PopMin(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testVersionstampCountLimit: a versionstamp transaction has 65,536 user
// versions; a batch of exactly that many items after another item must
// keep FIFO order.
func testVersionstampCountLimit(t *testing.T, f *fixture) {
	q := f.queue(t, "vscount", fdbqueue.WithVersionstampOrder(), fdbqueue.WithBatchBudget(maxBudget))
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("before")))
	vs := make([][]byte, 1<<16)
	for i := range vs {
		vs[i] = smallValue(i)
	}
	err := q.EnqueueBatch(f.ctx, f.db, append(vs, smallValue(1<<16)))
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "a versionstamp batch of 65,537 items cannot have distinct user versions")
	require.ErrorContains(t, err, "allows 65536 per call", "refused for its count, before its size")
	skipUnlessFits(t, f, q.EnqueueBatch(f.ctx, f.db, vs), len(vs))
	want := append([][]byte{[]byte("before")}, vs...)
	var got [][]byte
	for len(got) < len(want) {
		part, err := q.DequeueBatch(f.ctx, f.db, len(want))
		require.NoError(t, err, "DequeueBatch(%d) after %d of %d items, with budget %d: an accepted budget must never give transaction_too_large", len(want), len(got), len(want), maxBudget)
		require.NotEmpty(t, part)
		got = append(got, part...)
	}
	requireSameOrder(t, want, got, "a versionstamp batch of 65,536 items after one item")
}

// testUserVersionWrap: the reproduction of the user version wrap:
// after 65,534 earlier items through one Queue value, a batch a..e must
// still come out a..e.
func testUserVersionWrap(t *testing.T, f *fixture) {
	q := f.queue(t, "wrap", fdbqueue.WithVersionstampOrder(), fdbqueue.WithBatchBudget(maxBudget))
	earlier := make([][]byte, 65_534)
	for i := range earlier {
		earlier[i] = smallValue(i)
	}
	skipUnlessFits(t, f, q.EnqueueBatch(f.ctx, f.db, earlier), len(earlier))
	require.NoError(t, q.Clear(f.ctx, f.db))
	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, strs("a", "b", "c", "d", "e")))
	requireValues(t, strs("a", "b", "c", "d", "e"), f.drain(t, q), "a batch after 65,534 earlier items must keep FIFO order (user versions must not wrap inside a transaction)")
}

// testBudgetBounds: WithBatchBudget accepts [1, maxBudget], a cap below
// FoundationDB's 10,000,000-byte transaction limit, and refuses the rest
// with ErrInvalidArgument.
func testBudgetBounds(t *testing.T, f *fixture) {
	require.Less(t, maxBudget, kv.MaxTransactionSize, "the budget cap must leave room below the transaction limit")
	for _, b := range []int{1, maxBudget} {
		_, err := fdbqueue.NewQueue(f.sub(t, "b"), fdbqueue.WithBatchBudget(b))
		require.NoError(t, err, "budget %d", b)
	}
	for _, b := range []int{0, -1, maxBudget + 1} {
		_, err := fdbqueue.NewQueue(f.sub(t, "b"), fdbqueue.WithBatchBudget(b))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "budget %d", b)
	}
}

// skipUnlessFits skips the check when err, that of a versionstamp batch of
// n small items at the largest budget, says they do not fit the budget:
// each item counts its key against it, and on a harness prefix longer than
// about 24 bytes (Harness.Prefix) 65,536 of them do not fit. Any other
// error fails the check.
func skipUnlessFits(t *testing.T, f *fixture, err error, n int) {
	t.Helper()
	if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
		t.Skipf("a batch of %d items does not fit the batch budget under the harness prefix of %d bytes (keep it to about 24: Harness.Prefix): %v",
			n, len(f.prefix), err)
	}
	require.NoError(t, err, "a batch of %d items", n)
}
