package fdbqueue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// TestCollectOfAnUnacceptableResultReturnsIt: a waiter that collects a
// result whose pair it cannot take (here a key without the queue's
// layout, as a corrupt result would hold) reports why, and in the same
// commit that clears its result writes the pair back where a plain
// dequeue would have left it (batch mode: its original key): the pair is
// neither lost nor handed out.
func TestCollectOfAnUnacceptableResultReturnsIt(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	sub := SubspaceFromBytes([]byte("collect-bad"))
	q, err := NewQueue(sub, WithStaging(StagingConfig{Serving: ServeInBatches}))
	require.NoError(t, err)
	s := q.stage
	foreign, err := sub.Pack(tuple.Tuple{"not an item"})
	require.NoError(t, err)
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil), resKey: s.resKey([]byte("rid")), rid: []byte("rid")}
	res := encodeResult(time.Now().Add(time.Hour), foreign, []byte("v"))
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		setChunked(tr, w.resKey, res)
		return nil
	}))

	out, err := kv.Transact(ctx, db, func(tr kv.Transaction) (outcome[[]byte], error) { return w.collect(tr, res) })
	require.NoError(t, err)
	require.True(t, out.done)
	var fk *ForeignKeyError
	require.True(t, errors.As(out.err, &fk), "the call reports why: %v", out.err)
	require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		v, err := tr.Get(foreign).Get()
		if err != nil {
			return err
		}
		require.Equal(t, "v", string(v), "the pair is back at its key")
		v, err = tr.Get(w.resKey).Get()
		require.Nil(t, v, "the result is cleared")
		return err
	}))
}
