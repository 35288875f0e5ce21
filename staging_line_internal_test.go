package fdbqueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// TestRecoverDropsARequestWithAnIncompleteVersionstamp: a key in the line
// whose versionstamp is incomplete (0xff bytes: no commit's) was filed by
// no registration, whatever its value says; Recover drops it as it drops
// an expired request, rather than keeping it as a live request that no
// waiter renews.
func TestRecoverDropsARequestWithAnIncompleteVersionstamp(t *testing.T) {
	ctx := context.Background()
	db, q := stagedOnMemdb(t, "incomplete-req", StagingConfig{})
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // stores the configuration
	s := q.stage
	stamped, err := tuple.Tuple{tuple.IncompleteVersionstamp(0), []byte("rid")}.PackWithVersionstamp(s.reqs.prefix)
	require.NoError(t, err)
	key := stamped[:len(stamped)-4] // without the offset: the stamp stays incomplete
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(key, encodeDeadline(time.Now().Add(time.Hour)))
		return nil
	}))
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, st.DroppedRequests)
	reqs, err := kvGetRange(ctx, db, s.reqRange)
	require.NoError(t, err)
	require.Empty(t, reqs)
}

// TestFloorOnlyFromVersionstampedRequests: the floor (the first request
// key a read of the line found) rises only to a versionstamped request,
// which no later request can precede; a request of an earlier version of
// this package, ordered by an index read at registration, does not raise
// it, since another such request can be filed before it. It never moves
// back.
func TestFloorOnlyFromVersionstampedRequests(t *testing.T) {
	q, err := NewQueue(SubspaceFromBytes([]byte("floor")), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	s := q.stage
	old, err := s.reqs.Pack(tuple.Tuple{int64(5), []byte("rid")})
	require.NoError(t, err)
	s.raiseFloor([]kv.KeyValue{{Key: old}})
	require.Nil(t, s.floor.Load(), "an earlier version's request")
	require.Equal(t, s.reqRange, s.liveRange())

	stamped := func(b byte) []byte {
		k, err := s.reqKeyOf([]byte{9: b}, []byte("rid"))
		require.NoError(t, err)
		return k
	}
	s.raiseFloor([]kv.KeyValue{{Key: stamped(2)}, {Key: stamped(3)}})
	require.Equal(t, stamped(2), s.liveRange().Begin, "the first request read")
	s.raiseFloor([]kv.KeyValue{{Key: stamped(1)}})
	require.Equal(t, stamped(2), s.liveRange().Begin, "never lower")
}

// TestUnstagedHandleTakesTheHeadOfABatchStagedQueue: a handle made without
// WithStaging on a versionstamp-ordered queue whose consumers serve in
// batches takes the head, although requests wait in the line: in batch
// mode no item is due to a request by its place (Queue.reserved is 0),
// and skipping one item per request would take out of order.
func TestUnstagedHandleTakesTheHeadOfABatchStagedQueue(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	sub := SubspaceFromBytes([]byte("unstaged-batch"))
	staged, err := NewQueue(sub, WithVersionstampOrder(), WithStaging(StagingConfig{Serving: ServeInBatches}))
	require.NoError(t, err)
	require.NoError(t, staged.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")})) // stores the configuration
	s := staged.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return w.register(tr, time.Now()) }))

	plain, err := NewQueue(sub, WithVersionstampOrder())
	require.NoError(t, err)
	v, err := plain.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "a", string(v), "the head")
}

// TestPriorityQueueRecoverDropsBothSides: a PriorityQueue's Recover drops
// the expired requests of its PopMin line and of its PopMax line.
func TestPriorityQueueRecoverDropsBothSides(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	pq, err := NewPriorityQueue(SubspaceFromBytes([]byte("pq-recover")), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	require.NoError(t, pq.Push(ctx, db, []byte("x"), 1)) // stores the configuration
	long := time.Now().Add(-time.Hour)                   // expired long ago
	for _, max := range []bool{false, true} {
		s := pq.side(max)
		w := &waiter[Item]{s: s, db: db, o: s.journal.begin(db, nil)}
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return w.register(tr, long) }))
	}
	st, err := pq.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 2, st.DroppedRequests, "one request on each side")
	for _, max := range []bool{false, true} {
		reqs, err := kvGetRange(ctx, db, pq.side(max).reqRange)
		require.NoError(t, err)
		require.Empty(t, reqs, "max %v", max)
	}
}
