package fdbqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestItemKeysScratch pins when an attempt may build item keys in its
// call's memory (call.itemKeys): always for versionstamped keys (never
// kept), for an indexed key only on the tracked path (c.tx, cleared at
// each attempt and at release) and only for one item; never in a caller's
// transaction, whose tracked wrapper may outlive the call.
func TestItemKeysScratch(t *testing.T) {
	c := &call{}
	c.stored = c.store1[:]
	require.Nil(t, c.itemKeys(false), "a caller's transaction: keys of their own")
	require.Same(t, &c.key, c.itemKeys(true), "versionstamped keys: the call's memory")
	c.tracked = true
	require.Same(t, &c.key, c.itemKeys(false), "one item on the tracked path: the call's memory")
	c.stored = make([][]byte, 2)
	require.Nil(t, c.itemKeys(false), "a batch: keys of their own (trackedTx.note keeps each)")
}

// TestItemKeysAcrossAttempts retries Enqueue and Push whose key is built
// in the call's memory: the retry builds its key in the memory of the
// failed attempt's, so the depth counters are right only because the
// tracked transaction forgets the keys it noted at each attempt.
func TestItemKeysAcrossAttempts(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("ik-q")))
	require.NoError(t, err)
	pq, err := NewPriorityQueue(SubspaceFromBytes([]byte("ik-pq")))
	require.NoError(t, err)
	for i, fail := range []struct {
		err     error
		applied bool
	}{{kv.ErrNotCommitted, false}, {kv.ErrCommitUnknownResult, false}, {kv.ErrCommitUnknownResult, true}} {
		db.FailNextCommit(fail.err, fail.applied)
		require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
		db.FailNextCommit(fail.err, fail.applied)
		require.NoError(t, pq.Push(ctx, db, []byte{byte(i)}, int64(i)))
		for _, d := range []interface {
			Depth(context.Context, kv.ReadTransactor) (int64, error)
			Len(context.Context, kv.ReadTransactor) (int, error)
		}{q, pq} {
			depth, err := d.Depth(ctx, db)
			require.NoError(t, err)
			n, err := d.Len(ctx, db)
			require.NoError(t, err)
			require.Equal(t, int64(i+1), depth, "after %v (applied %v)", fail.err, fail.applied)
			require.Equal(t, i+1, n, "after %v (applied %v)", fail.err, fail.applied)
		}
	}
	for i := range 3 {
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, []byte{byte(i)}, v)
		it, err := pq.PopMin(ctx, db)
		require.NoError(t, err)
		require.Equal(t, Item{Value: []byte{byte(i)}, Priority: int64(i)}, it)
	}
}
