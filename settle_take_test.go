package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A take from an end of a queue needs no conflict on its record key to
// keep a late landing from applying after a settling call: its read
// conflict covers the end up to the item it took, and the settling call
// clears an item there (the same one, or one that came in ahead of it).
// Here the first call's commit, interrupted, lands after the settle: it
// must conflict, leaving the items the settle did not take.
func TestSettleHeadTakeLandingLate(t *testing.T) {
	ctx := context.Background()
	t.Run("Dequeue", func(t *testing.T) {
		db := newDB(t)
		logs, logger := loggedIDs()
		q := mustQueue(t, "settle-head-dequeue", logger)
		require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
		release, err := interruptCommit(db, func(ctx context.Context) error { _, err := q.Dequeue(ctx, db); return err })
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(logs.take(t)))
		require.NoError(t, err)
		require.Equal(t, "a", string(v))
		release()
		require.Equal(t, []string{"b"}, drain(t, db, q))
		n, err := q.Depth(ctx, db)
		require.NoError(t, err)
		require.Zero(t, n, "the depth counter was taken one from once per item")
	})
	t.Run("PopMin with a smaller item pushed in between", func(t *testing.T) {
		db := newDB(t)
		logs, logger := loggedIDs()
		pq := mustPQ(t, "settle-head-popmin", logger)
		require.NoError(t, pq.Push(ctx, db, []byte("x"), 5))
		release, err := interruptCommit(db, func(ctx context.Context) error { _, err := pq.PopMin(ctx, db); return err })
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		require.NoError(t, pq.Push(ctx, db, []byte("y"), 1))
		v, err := pq.PopMin(ctx, db, fdbqueue.WithOpID(logs.take(t)))
		require.NoError(t, err)
		require.Equal(t, "y", string(v.Value), "the first call had not committed: the settle pops the smallest now")
		release()
		v, err = pq.PopMin(ctx, db)
		require.NoError(t, err, "x was not popped by the late commit")
		require.Equal(t, "x", string(v.Value))
	})
}

// A take that skips the items due to a staged line (a handle made without
// WithStaging, on a queue served by place) conflicts only on the items it
// takes, and adds its record key's conflict besides. Here the line
// shrinks between the first call and the settle: the withdrawn request's
// item goes to the tail, so the settle takes the item the first call
// took, and the late landing of the first call's commit changes nothing.
func TestSettleTakeAfterLineLandingLate(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := stagingModes[1] // by place
	db := stgDB(t)
	sub := stgSubspace(t, "settle-after-line")
	logs, logger := loggedIDs()
	qs := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
	qp := stgQueue(t, sub, fdbqueue.WithVersionstampOrder(), logger)

	hook, armed, woke, resume := stallAfterWake()
	defer resume()
	fdbqueue.SetStagingHook(qs, hook)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	waiter := make(chan error, 1)
	go func() { _, err := qs.DequeueWait(wctx, db); waiter <- err }()
	<-armed
	require.NoError(t, qs.Enqueue(ctx, db, []byte("a"))) // due to the request
	<-woke
	require.NoError(t, qs.Enqueue(ctx, db, []byte("b")))
	_, err := qp.Len(ctx, db) // qp has seen the record: it skips the line's items
	require.NoError(t, err)

	release, err := interruptCommit(db, func(ctx context.Context) error { _, err := qp.Dequeue(ctx, db); return err })
	require.True(t, kv.MaybeCommitted(err), "%v", err) // it took b, after a

	wcancel() // the request leaves the line without its item
	resume()
	require.ErrorIs(t, <-waiter, context.Canceled)

	v, err := qp.Dequeue(ctx, db, fdbqueue.WithOpID(logs.take(t)))
	require.NoError(t, err)
	require.Equal(t, "b", string(v), "the first call had not committed: the settle takes the head, a having gone to the tail")
	release()
	require.Equal(t, []string{"a"}, drain(t, db, qp), "the late commit took nothing more")
	requireClean(t, db, sub)
}
