package queuetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

func fifoChecks() []check {
	var cs []check
	for _, m := range queueModes {
		cs = append(cs,
			check{"Order/" + m.name, func(t *testing.T, f *fixture) { testFIFOOrder(t, f, m) }},
			check{"BatchOrder/" + m.name, func(t *testing.T, f *fixture) { testFIFOBatchOrder(t, f, m) }},
			check{"PeekEmptyLen/" + m.name, func(t *testing.T, f *fixture) { testPeekEmptyLen(t, f, m) }},
			check{"SharedSubspace/" + m.name, func(t *testing.T, f *fixture) { testSharedSubspace(t, f, m) }},
		)
	}
	return cs
}

// testFIFOOrder: items enqueued one per transaction come out in commit order.
func testFIFOOrder(t *testing.T, f *fixture, m queueMode) {
	q := f.queue(t, "fifo", m.opts...)
	var want [][]byte
	for i := range 25 {
		want = append(want, fmt.Appendf(nil, "item-%02d", i))
	}
	f.enqueueAll(t, q, want)
	requireValues(t, want, f.drain(t, q), "a %s Queue must return items in the order their enqueues committed", m.name)
	_, err := q.Dequeue(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "a drained queue stays empty")
}

// testFIFOBatchOrder: batches keep their order inside and between them,
// and mix with single enqueues in commit order.
func testFIFOBatchOrder(t *testing.T, f *fixture, m queueMode) {
	q := f.queue(t, "batch", m.opts...)
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("first")))
	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, strs("a", "b", "c", "d", "e", "f", "g", "h")))
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("middle")))
	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, strs("x", "y", "z")))
	require.NoError(t, q.EnqueueBatch(f.ctx, f.db, nil), "an empty batch does nothing")
	got, err := q.DequeueBatch(f.ctx, f.db, 4)
	require.NoError(t, err)
	requireValues(t, strs("first", "a", "b", "c"), got, "DequeueBatch(4) takes the first four in order")
	got, err = q.DequeueBatch(f.ctx, f.db, 100)
	require.NoError(t, err)
	requireValues(t, strs("d", "e", "f", "g", "h", "middle", "x", "y", "z"), got, "DequeueBatch(100) takes the rest in order")
	_, err = q.DequeueBatch(f.ctx, f.db, 1)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testPeekEmptyLen: the read-only operations agree with the content.
func testPeekEmptyLen(t *testing.T, f *fixture, m queueMode) {
	q := f.queue(t, "peek", m.opts...)
	empty, err := q.Empty(f.ctx, f.db)
	require.NoError(t, err)
	require.True(t, empty, "a new queue is empty")
	n, err := q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n)
	_, err = q.Peek(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "Peek of an empty queue")

	f.enqueueAll(t, q, strs("p", "q", "r"))
	v, err := q.Peek(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("p"), v, "Peek returns the head")
	n, err = q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, 3, n, "Len counts the items")
	empty, err = q.Empty(f.ctx, f.db)
	require.NoError(t, err)
	require.False(t, empty)
	v, err = q.Dequeue(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("p"), v, "Peek removed nothing")
	require.NoError(t, q.Clear(f.ctx, f.db))
	n, err = q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "Clear removes every item")
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("after clear")))
	requireValues(t, strs("after clear"), f.drain(t, q), "a cleared queue works on")
}

// testSharedSubspace: two Queue values on one subspace (two clients) see
// one queue, in one order.
func testSharedSubspace(t *testing.T, f *fixture, m queueMode) {
	sub := f.sub(t, "shared")
	q1, err := fdbqueue.NewQueue(sub, m.opts...)
	require.NoError(t, err)
	q2, err := fdbqueue.NewQueue(sub, m.opts...)
	require.NoError(t, err)
	require.NoError(t, q1.Enqueue(f.ctx, f.db, []byte("1")))
	require.NoError(t, q2.Enqueue(f.ctx, f.db, []byte("2")))
	require.NoError(t, q1.EnqueueBatch(f.ctx, f.db, strs("3", "4")))
	require.NoError(t, q2.EnqueueBatch(f.ctx, f.db, strs("5", "6")))
	v, err := q2.Dequeue(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("1"), v)
	requireValues(t, strs("2", "3", "4", "5", "6"), f.drain(t, q1), "two clients of one subspace share one FIFO order")
}
