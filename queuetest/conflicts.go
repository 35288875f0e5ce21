package queuetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// conflictChecks: what a take, a peek or a count inside a caller's
// transaction depends on, seen through FoundationDB's conflict check (a
// transaction whose reads a commit wrote since its read version fails
// with not_committed, 1020: fdbserver/Resolver.actor.cpp).
func conflictChecks() []check {
	return []check{
		{"BatchTakeFoundEmpty", testBatchTakeFoundEmpty},
		{"OverlappingBatchPops", testOverlappingBatchPops},
		{"PeekReadsTheHead", testPeekReadsTheHead},
		{"CountsReadNoConflict", testCountsReadNoConflict},
	}
}

// inTx runs op in a new transaction of f.db, then other on the database,
// and returns the transaction's commit error. The transaction also writes
// a key of its own, so that it has something to commit.
func (f *fixture) inTx(t *testing.T, op func(tr kv.Transaction), other func()) error {
	t.Helper()
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	op(tr)
	tr.Set(f.key("conflicts"), []byte("x"))
	other()
	return tr.Commit()
}

// testBatchTakeFoundEmpty: a take that is not a plain one-item read (a
// batch, or a Dequeue or pop with WithOpID, whose first read is the
// journal's) and finds the queue empty depends on that emptiness, as a
// normal read would: an item committed meanwhile makes it conflict.
func testBatchTakeFoundEmpty(t *testing.T, f *fixture) {
	q := f.queue(t, "empty-batch")
	pq := f.pqueue(t, "empty-batch-pq")
	// The first operation of each writes the stored configuration.
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("first")))
	f.drain(t, q)
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("first"), 0))
	f.drainPQ(t, pq)
	takes := map[string]func(tr kv.Transaction) error{
		"DequeueBatch": func(tr kv.Transaction) error { _, err := q.DequeueBatch(f.ctx, tr, 3); return err },
		"Dequeue with WithOpID": func(tr kv.Transaction) error {
			_, err := q.Dequeue(f.ctx, tr, fdbqueue.WithOpID(fdbqueue.NewOpID()))
			return err
		},
		"PopMinBatch": func(tr kv.Transaction) error { _, err := pq.PopMinBatch(f.ctx, tr, 3); return err },
		"PopMaxBatch": func(tr kv.Transaction) error { _, err := pq.PopMaxBatch(f.ctx, tr, 3); return err },
		"PopMax with WithOpID": func(tr kv.Transaction) error {
			_, err := pq.PopMax(f.ctx, tr, fdbqueue.WithOpID(fdbqueue.NewOpID()))
			return err
		},
	}
	for name, take := range takes {
		err := f.inTx(t, func(tr kv.Transaction) {
			require.ErrorIs(t, take(tr), fdbqueue.ErrEmpty, name)
		}, func() {
			require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("late")))
			require.NoError(t, pq.Push(f.ctx, f.db, []byte("late"), 0))
		})
		require.ErrorIs(t, err, kv.ErrNotCommitted, "%s found the queue empty, then an item was committed: a conflict", name)
		requireValues(t, strs("late"), f.drain(t, q))
		require.Len(t, f.drainPQ(t, pq), 1)
	}
}

// testOverlappingBatchPops: batch pops from the two ends of a priority
// queue that meet on one item conflict, whichever end commits first: the
// read conflict of each covers the last item it took (PopMinBatch up to
// and including it, PopMaxBatch from it), so the item is returned once.
func testOverlappingBatchPops(t *testing.T, f *fixture) {
	for _, maxFirst := range []bool{false, true} {
		pq := f.pqueue(t, "overlap")
		for p := range int64(3) {
			require.NoError(t, pq.Push(f.ctx, f.db, []byte{byte('a' + p)}, p))
		}
		pop := func(tr kv.Transactor, max bool) []fdbqueue.Item {
			var items []fdbqueue.Item
			var err error
			if max {
				items, err = pq.PopMaxBatch(f.ctx, tr, 2)
			} else {
				items, err = pq.PopMinBatch(f.ctx, tr, 2)
			}
			require.NoError(t, err)
			require.Len(t, items, 2)
			require.Equal(t, int64(1), items[1].Priority, "both batches end on the middle item")
			return items
		}
		err := f.inTx(t, func(tr kv.Transaction) { pop(tr, !maxFirst) }, func() { pop(f.db, maxFirst) })
		require.ErrorIs(t, err, kv.ErrNotCommitted, "the middle item was taken by the other end meanwhile (max first: %v)", maxFirst)
		left := f.drainPQ(t, pq)
		require.Len(t, left, 1, "one item is left: the far end of the batch that did not commit")
	}
}

// testPeekReadsTheHead: Peek is a normal read of the head, so a caller's
// transaction that peeked conflicts with a Dequeue committed meanwhile.
func testPeekReadsTheHead(t *testing.T, f *fixture) {
	q := f.queue(t, "peek-conflict")
	f.enqueueAll(t, q, strs("a", "b"))
	err := f.inTx(t, func(tr kv.Transaction) {
		v, err := q.Peek(f.ctx, tr)
		require.NoError(t, err)
		requireValue(t, []byte("a"), v)
	}, func() {
		v, err := q.Dequeue(f.ctx, f.db)
		require.NoError(t, err)
		requireValue(t, []byte("a"), v)
	})
	require.ErrorIs(t, err, kv.ErrNotCommitted, "the head peeked was dequeued meanwhile")
}

// testCountsReadNoConflict: Len and Depth read with snapshot reads, so a
// caller's transaction that counted commits whatever producers and
// consumers commit meanwhile.
func testCountsReadNoConflict(t *testing.T, f *fixture) {
	q := f.queue(t, "counts")
	f.enqueueAll(t, q, strs("a", "b"))
	for name, count := range map[string]func(tr kv.Transaction) (int64, error){
		"Len": func(tr kv.Transaction) (int64, error) {
			n, err := q.Len(f.ctx, tr)
			return int64(n), err
		},
		"Depth": func(tr kv.Transaction) (int64, error) { return q.Depth(f.ctx, tr) },
	} {
		err := f.inTx(t, func(tr kv.Transaction) {
			n, err := count(tr)
			require.NoError(t, err, name)
			require.Equal(t, int64(2), n, name)
		}, func() {
			require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("c")))
			_, err := q.Dequeue(f.ctx, f.db)
			require.NoError(t, err)
		})
		require.NoError(t, err, "%s adds no read conflict", name)
	}
}
