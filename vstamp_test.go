package fdbqueue_test

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// vstampQueue returns a versionstamp-ordered queue whose batches may hold
// 65,536 small items.
func vstampQueue(t *testing.T, name string) *fdbqueue.Queue {
	return mustQueue(t, name, fdbqueue.WithVersionstampOrder(), fdbqueue.WithBatchBudget(5_000_000))
}

// counted returns n values holding 0, 1, ... as 4 bytes big-endian.
func counted(n int) [][]byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = binary.BigEndian.AppendUint32(nil, uint32(i))
	}
	return vals
}

// itemValues reads every item value of q in key order.
func itemValues(t *testing.T, db kv.Database, q *fdbqueue.Queue) [][]byte {
	t.Helper()
	r, err := q.Subspace().Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	out := make([][]byte, len(kvs))
	for i, p := range kvs {
		out[i] = p.Value
	}
	return out
}

// Defect 2 of issue 12: the per-Queue 16-bit user version wrapped in the
// middle of a batch, so after 65,534 earlier items a batch a..e dequeued
// as c, d, e, a, b.
func TestVersionstampBatchOrderAcrossUserVersionWrap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := vstampQueue(t, "vs-wrap")
	require.NoError(t, q.EnqueueBatch(ctx, db, counted(65_534)))
	require.NoError(t, q.Clear(ctx, db))
	batch := [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d"), []byte("e")}
	require.NoError(t, q.EnqueueBatch(ctx, db, batch))
	require.Equal(t, []string{"a", "b", "c", "d", "e"}, drain(t, db, q))
}

// Every start of the counter near the wrap, and the largest batch.
func TestVersionstampUserVersionBlocks(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := vstampQueue(t, "vs-blocks")
	for _, start := range []uint32{65_530, 65_531, 65_535, 65_536} {
		fdbqueue.SetUserVersion(q, start)
		require.NoError(t, q.EnqueueBatch(ctx, db, counted(6)))
		require.Equal(t, counted(6), itemValues(t, db, q), "start %d", start)
		require.NoError(t, q.Clear(ctx, db))
	}
	for _, start := range []uint32{0, 1, 65_535} {
		fdbqueue.SetUserVersion(q, start)
		all := counted(65_536)
		require.NoError(t, q.EnqueueBatch(ctx, db, all), "a batch of 65,536 items fits any start")
		require.Equal(t, all, itemValues(t, db, q), "start %d", start)
		require.NoError(t, q.Clear(ctx, db))
	}
	err := q.EnqueueBatch(ctx, db, counted(65_537))
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "more items than user versions")
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Zero(t, n, "nothing was written")
}
