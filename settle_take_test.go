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
		release, err := interruptCommit(t, db, func(ctx context.Context) error { _, err := q.Dequeue(ctx, db); return err })
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
		release, err := interruptCommit(t, db, func(ctx context.Context) error { _, err := pq.PopMin(ctx, db); return err })
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
// took, and the late landing of the first call's commit changes nothing
// (the item's conflict fences it; the case that needs the record key's:
// TestSettleTakeAfterGrownLineLandingLate).
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
	recvWithin(t, armed, "the waiter asleep")
	require.NoError(t, qs.Enqueue(ctx, db, []byte("a"))) // due to the request
	recvWithin(t, woke, "the waiter woken")
	require.NoError(t, qs.Enqueue(ctx, db, []byte("b")))
	_, err := qp.Len(ctx, db) // qp has seen the record: it skips the line's items
	require.NoError(t, err)

	release, err := interruptCommit(t, db, func(ctx context.Context) error { _, err := qp.Dequeue(ctx, db); return err })
	require.True(t, kv.MaybeCommitted(err), "%v", err) // it took b, after a

	wcancel() // the request leaves the line without its item
	resume()
	require.ErrorIs(t, recvWithin(t, waiter, "the cancelled waiter's return"), context.Canceled)

	v, err := qp.Dequeue(ctx, db, fdbqueue.WithOpID(logs.take(t)))
	require.NoError(t, err)
	require.Equal(t, "b", string(v), "the first call had not committed: the settle takes the head, a having gone to the tail")
	release()
	require.Equal(t, []string{"a"}, drain(t, db, qp), "the late commit took nothing more")
	requireClean(t, db, sub)
}

// The case takeEnd's conflict on the record key is for: the line grows
// between the first call's take and the settle, so the settle skips more
// items and takes another one than the first call did. The first call,
// after two requests' items, took c, the third item, with a read conflict
// on c only; a third request then joins the line, and c is due to it; the
// settle takes d. Nobody wrote c, so without the conflict on the record
// key (which the settle writes) the first call's commit, interrupted and
// landing late, would apply: c, the new request's item, would be gone,
// and one Dequeue would have removed two items. FoundationDB lets a
// commit a cancellation interrupted land later (RYWImpl::commit in
// fdbclient/ReadYourWrites.actor.cpp); only a conflict fences it.
func TestSettleTakeAfterGrownLineLandingLate(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	db := stgDB(t)
	sub := stgSubspace(t, "settle-grown-line")
	logs, logger := loggedIDs()
	qp := stgQueue(t, sub, fdbqueue.WithVersionstampOrder(), logger)

	wctx, wcancel := context.WithCancel(ctx)
	got := make(chan string, 3)
	var resumes []func()
	defer func() {
		wcancel()
		for _, r := range resumes {
			r()
		}
	}()
	// start runs a DequeueWait on a handle of its own with hook, and waits
	// until the hook says it stopped with its request in the line.
	start := func(name string, hook func(string), stalled <-chan struct{}, resume func()) {
		t.Helper()
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		fdbqueue.SetStagingHook(q, hook)
		resumes = append(resumes, resume)
		go func() {
			v, err := q.DequeueWait(wctx, db)
			if err != nil {
				v = []byte(name + ": " + err.Error())
			}
			got <- string(v)
		}()
		select {
		case <-stalled:
		case <-time.After(wakeTimeout):
			t.Fatalf("%s never stopped with its request in the line", name)
		}
	}
	hook, stalled, resume := stallAtArm()
	start("W1", hook, stalled, resume)
	hook, stalled, resume = stallAtArm()
	start("W2", hook, stalled, resume)
	require.NoError(t, qp.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}))
	_, err := qp.Len(ctx, db) // qp has seen the record: it skips the line's items
	require.NoError(t, err)

	release, err := interruptCommit(t, db, func(ctx context.Context) error { _, err := qp.Dequeue(ctx, db); return err })
	defer release()
	require.True(t, kv.MaybeCommitted(err), "%v", err) // it took c, after a and b

	// Two requests ahead: W3 files one without a plain attempt, and
	// stops once it is filed, before it takes c at its place.
	hook, stalled, resume = stallOnceAt("registered")
	start("W3", hook, stalled, resume)

	v, err := qp.Dequeue(ctx, db, fdbqueue.WithOpID(logs.take(t)))
	require.NoError(t, err)
	require.Equal(t, "d", string(v), "the first call had not committed: the settle takes the item after the three requests'")
	release()
	require.Equal(t, 3, len(itemKeys(t, db, sub)), "the late commit took nothing: a, b and c are left for the three requests")

	for _, r := range resumes {
		r()
	}
	require.ElementsMatch(t, []string{"a", "b", "c"}, recvN(t, got, 3, "a waiter was not served"))
	requireClean(t, db, sub)
}
