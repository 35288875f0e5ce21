package queuetest

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// valueChecks: a value the layers accept is given back unchanged by every
// later step (dequeue, pop, batch forms, staged hand-outs, dequeue inside a
// caller's transaction), however it is stored; a value one byte over the
// limit is refused before anything is written. Values: LimitValues.
func valueChecks() []check {
	var cs []check
	for _, m := range queueModes {
		for _, vc := range LimitValues(encodingOf(m.name)) {
			cs = append(cs, check{"Queue/" + m.name + "/" + vc.Name, func(t *testing.T, f *fixture) { testQueueValue(t, f, m, vc) }})
		}
		for _, fill := range Fills {
			cs = append(cs, check{"OverLimit/Queue/" + m.name + "/" + fill.Name, func(t *testing.T, f *fixture) { testQueueOverLimit(t, f, m, fill) }})
		}
	}
	for _, e := range encodings {
		opts := []fdbqueue.Option{fdbqueue.WithValueEncoding(e.enc)}
		for _, vc := range LimitValues(e.enc) {
			cs = append(cs, check{"PriorityQueue/" + e.name + "/" + vc.Name, func(t *testing.T, f *fixture) { testPQValue(t, f, opts, vc) }})
		}
		for _, fill := range Fills {
			cs = append(cs, check{"OverLimit/PriorityQueue/" + e.name + "/" + fill.Name, func(t *testing.T, f *fixture) { testPQOverLimit(t, f, opts, e.enc, fill) }})
		}
		for _, m := range stagedModes {
			for _, vc := range LimitValues(e.enc) {
				cs = append(cs, check{"Staged/" + m.name + "/" + e.name + "/" + vc.Name, func(t *testing.T, f *fixture) { testStagedValue(t, f, m, opts, vc) }})
			}
		}
	}
	return cs
}

func testQueueValue(t *testing.T, f *fixture, m queueMode, vc ValueCase) {
	q := f.queue(t, "value", m.opts...)
	v := vc.Value
	require.NoError(t, q.Enqueue(f.ctx, f.db, v), "Enqueue of %s (stored %d bytes, limit %d)", describe(v), StoredSize(encodingOf(m.name), v), kv.MaxValueSize)
	got, err := q.Peek(f.ctx, f.db)
	require.NoError(t, err, "Peek")
	requireValue(t, v, got, "Peek")
	got, err = q.Dequeue(f.ctx, f.db)
	require.NoError(t, err, "Dequeue of an item Enqueue accepted (%s)", describe(v))
	requireValue(t, v, got, "Dequeue")

	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, [][]byte{v, v, []byte("end")}), "EnqueueBatch of two %s", describe(v))
	gots, err := q.DequeueBatch(f.ctx, f.db, 3)
	require.NoError(t, err, "DequeueBatch of items EnqueueBatch accepted")
	requireValues(t, [][]byte{v, v, []byte("end")}, gots, "DequeueBatch")

	require.NoError(t, q.Enqueue(f.ctx, f.db, v))
	got, err = kv.Transact(f.ctx, f.db, func(tr kv.Transaction) ([]byte, error) { return q.Dequeue(f.ctx, tr) })
	require.NoError(t, err, "Dequeue inside the caller's transaction")
	requireValue(t, v, got, "Dequeue inside the caller's transaction")
	empty, err := q.Empty(f.ctx, f.db)
	require.NoError(t, err)
	require.True(t, empty, "every copy was taken once")
}

func testPQValue(t *testing.T, f *fixture, opts []fdbqueue.Option, vc ValueCase) {
	pq := f.pqueue(t, "value", opts...)
	v := vc.Value
	for _, p := range []int64{math.MinInt64, 0, math.MaxInt64, 0} {
		require.NoError(t, pq.Push(f.ctx, f.db, v, p), "Push of %s at %d", describe(v), p)
	}
	lo, err := pq.PeekMin(f.ctx, f.db)
	require.NoError(t, err, "PeekMin")
	requireValue(t, v, lo.Value, "PeekMin")
	hi, err := pq.PeekMax(f.ctx, f.db)
	require.NoError(t, err, "PeekMax")
	requireValue(t, v, hi.Value, "PeekMax")
	it, err := pq.PopMin(f.ctx, f.db)
	require.NoError(t, err, "PopMin of an item Push accepted (%s)", describe(v))
	require.Equal(t, int64(math.MinInt64), it.Priority)
	requireValue(t, v, it.Value, "PopMin")
	it, err = pq.PopMax(f.ctx, f.db)
	require.NoError(t, err, "PopMax of an item Push accepted (%s)", describe(v))
	require.Equal(t, int64(math.MaxInt64), it.Priority)
	requireValue(t, v, it.Value, "PopMax")
	its, err := pq.PopMinBatch(f.ctx, f.db, 1)
	require.NoError(t, err, "PopMinBatch")
	require.Len(t, its, 1)
	requireValue(t, v, its[0].Value, "PopMinBatch")
	its, err = pq.PopMaxBatch(f.ctx, f.db, 5)
	require.NoError(t, err, "PopMaxBatch")
	require.Len(t, its, 1)
	requireValue(t, v, its[0].Value, "PopMaxBatch")
	_, err = pq.PopMin(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testStagedValue: waiters asleep on an empty staged structure are handed
// limit values by a batch from another transaction (by place: each takes
// its own; in batches: a waiter serves the line, writing results).
func testStagedValue(t *testing.T, f *fixture, m stagedMode, opts []fdbqueue.Option, vc ValueCase) {
	ops := m.make(t, f, opts...)
	v := vc.Value
	var ws []*waiter
	for range 3 {
		ws = append(ws, f.startWaiter(t, "waiter", ops.wait))
	}
	require.NoError(t, ops.produce(f.ctx, f.db, [][]byte{v, v, v}), "producing three %s", describe(v))
	for i, w := range ws {
		got, err := w.result(t, f)
		require.NoError(t, err, "staged waiter %d handed %s", i, describe(v))
		requireValue(t, v, got, "staged waiter %d", i)
	}
	// And a take without contention.
	require.NoError(t, ops.produce(f.ctx, f.db, [][]byte{v}))
	got, err := ops.take(f.ctx, f.db)
	require.NoError(t, err, "staged take of %s", describe(v))
	requireValue(t, v, got)
	_, err = ops.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

func testQueueOverLimit(t *testing.T, f *fixture, m queueMode, fill Fill) {
	q := f.queue(t, "over", m.opts...)
	over := OverMaxValue(encodingOf(m.name), fill)
	err := q.Enqueue(f.ctx, f.db, over)
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "Enqueue of %s (stored %d bytes)", describe(over), StoredSize(encodingOf(m.name), over))
	require.ErrorIs(t, err, kv.ErrValueTooLarge, "ErrValueTooLarge also matches kv.ErrValueTooLarge")
	err = q.EnqueueBatch(f.ctx, f.db, [][]byte{[]byte("ok"), over})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "EnqueueBatch with one value over the limit")
	n, err := q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is written when a value is too large")
	require.NoError(t, q.Enqueue(f.ctx, f.db, MaxValue(encodingOf(m.name), fill)), "one byte less is accepted")
}

func testPQOverLimit(t *testing.T, f *fixture, opts []fdbqueue.Option, enc fdbqueue.ValueEncoding, fill Fill) {
	pq := f.pqueue(t, "over", opts...)
	over := OverMaxValue(enc, fill)
	err := pq.Push(f.ctx, f.db, over, 1)
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "Push of %s", describe(over))
	require.ErrorIs(t, err, kv.ErrValueTooLarge)
	n, err := pq.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is written when a value is too large")
	require.NoError(t, pq.Push(f.ctx, f.db, MaxValue(enc, fill), 1), "one byte less is accepted")
}
