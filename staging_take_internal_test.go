package fdbqueue

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestStagedBatchTakeConflictsWithAnItemPutAhead: in batch mode the
// oldest waiter takes the head with a plain dequeue's read conflict range,
// from the start of the items to the item it takes (takeItem's fromHead;
// the design's "take" in staging_line.go). An item put back ahead of it
// meanwhile, at its original key, as an expired result's item is
// (putBack), then makes the take conflict (a write inside a read conflict
// range after the read version fails the commit: ConflictBatch::
// checkReadConflictRanges, fdbserver/SkipList.cpp), and a retry sees it;
// with a conflict on its own item only, the take would commit with an
// older item at the head, a dequeue out of FIFO order.
func TestStagedBatchTakeConflictsWithAnItemPutAhead(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("take-ahead")), WithStaging(StagingConfig{Serving: ServeInBatches}))
	require.NoError(t, err)
	s := q.stage
	require.False(t, s.stable, "batch mode")
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y")}))
	items, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(q.items, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, items, 2)
	x, y := items[0], items[1]

	// x is handed to a request (a fulfilment moved it into a result):
	// y is the head.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Clear(x.Key)
		return nil
	}))

	// The oldest waiter's step: it reads the head (a snapshot read, as
	// readItems does) and takes y.
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil), rid: []byte("rid")}
	w.resKey = s.resKey(w.rid)
	w.reqKey = append(bytes.Clone(s.liveRange().Begin), 0x01)
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	head, err := tr.Snapshot().GetRange(q.items, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, y.Key, head[0].Key)
	out, err := w.takeAt(tr, head[0])
	require.NoError(t, err)
	require.Equal(t, "y", string(out.val))

	// Before it commits, the result expires and x goes back to its key,
	// ahead of y.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		back, err := s.putBack(tr, x.Key, x.Value)
		require.True(t, back)
		return err
	}))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the take read the head up to y, and x was put ahead of it")
}
