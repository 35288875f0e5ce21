package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A DequeueBatch under an OpID whose earlier call failed with its commit
// in flight, on a Queue served by place, can find the head item due to a
// request that entered the line since: it takes nothing and returns
// ErrEmpty. That answer settles the operation only if the earlier commit
// can no longer apply. It read the head up to the item it took, and no one
// cleared that item (it waits for the request), so the settling call
// must write there itself; otherwise the earlier commit lands, takes the
// item and writes the record, and the operation has two outcomes: the
// caller was told it took nothing, a later call under the ID returns the
// item, and the request's waiter never receives it. Found by the
// simulation (TestSimulationTxTimeouts, seed 1: a DequeueBatch recovered
// at once returned empty while its first commit, timed out in flight,
// landed later and took the item).
func TestSettlingTakeFencesAnAttemptInFlightBehindTheLine(t *testing.T) {
	t.Run("DequeueBatch", func(t *testing.T) {
		testSettlingBehindTheLine(t, func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, id fdbqueue.OpID) error {
			_, err := q.DequeueBatch(ctx, db, 3, fdbqueue.WithOpID(id))
			return err
		})
	})
	// A staged Dequeue under the ID files a request behind the waiter's,
	// finds nothing at its place and withdraws it: the same answer, and
	// the same requirement.
	t.Run("staged Dequeue", func(t *testing.T) {
		testSettlingBehindTheLine(t, func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, id fdbqueue.OpID) error {
			_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
			return err
		})
	})
}

func testSettlingBehindTheLine(t *testing.T, settle func(context.Context, kv.Database, *fdbqueue.Queue, fdbqueue.OpID) error) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "settle-behind-line")
	opts := stagingModes[1].opts(fdbqueue.StagingConfig{}) // by place
	q0 := stgQueue(t, sub, opts...)                        // the operation's calls
	q1 := stgQueue(t, sub, opts...)                        // a waiter
	require.NoError(t, q0.Enqueue(ctx, db, []byte("x")))
	id := fdbqueue.NewOpID()

	// The first call takes x; its commit is held in flight when its
	// context ends.
	held, release := db.HoldNextCommitLate()
	t.Cleanup(release)
	actx, cancel := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() {
		_, err := q0.DequeueBatch(actx, db, 3, fdbqueue.WithOpID(id))
		first <- err
	}()
	recvWithin(t, held, "the first call's commit in flight")
	cancel()
	err := recvWithin(t, first, "the first call's return")
	require.True(t, kv.MaybeCommitted(err), "the first call's commit is in flight: %v", err)

	// A waiter files a request (without reading the head, as when the
	// line is long): x is due to it, by place.
	fdbqueue.SetStagingBusy(q1, true)
	hook, registered, resume := stallOnceAt("registered")
	t.Cleanup(resume)
	fdbqueue.SetStagingHook(q1, hook)
	type result struct {
		v   []byte
		err error
	}
	waiter := make(chan result, 1)
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	go func() {
		v, err := q1.DequeueWait(wctx, db)
		waiter <- result{v, err}
	}()
	recvWithin(t, registered, "the waiter's registration")

	// The settling call finds no record and x due to the request.
	err = settle(ctx, db, q0, id)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.False(t, kv.MaybeCommitted(err), "%v", err)

	// The first commit now lands, or conflicts: the settling call's
	// answer must be the operation's.
	release()
	resume()
	r := recvWithin(t, waiter, "the waiter's item")
	require.NoError(t, r.err)
	require.Equal(t, "x", string(r.v), "x was taken by the operation the settling call said took nothing")
	err = settle(ctx, db, q0, id)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "a later call under the ID must give the same answer")
}
