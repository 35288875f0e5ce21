package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A take settling an operation under its ID, after the operation's first
// call failed with its commit in flight, on a Queue served by place, can
// find the item that first commit took due to a request that entered the
// line since: it skips it. Its answer settles the operation only if the
// first commit can no longer apply. That commit read the head up to the
// item it took, and that item stays where it is until the line is served
// (here the waiter is held), so the settling call must write there
// itself; otherwise the first
// commit lands, takes the item and writes the record, and the operation
// takes effect twice (the caller was told ErrEmpty or given another item,
// and the request's waiter never receives the item). Found by the
// simulation (TestSimulationTxTimeouts, seed 1: a DequeueBatch recovered
// at once returned empty while its first commit, timed out in flight,
// landed later and took the item). FoundationDB's commit request goes on
// after a cancellation (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp),
// as memdb's HoldNextCommitLate does; a commit of a write conflict range
// without mutations is not read-only, it goes to the resolvers
// (Transaction::commitMutations, fdbclient/NativeAPI.actor.cpp).
func TestSettlingTakeFencesAnAttemptInFlightBehindTheLine(t *testing.T) {
	dequeueBatch := func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, opts ...fdbqueue.OpOption) ([][]byte, error) {
		return q.DequeueBatch(ctx, db, 3, opts...)
	}
	t.Run("DequeueBatch, nothing after the line", func(t *testing.T) {
		testSettlingBehindTheLine(t, false, 1, nil, dequeueBatch)
	})
	// Under an ID the queue made and logged (its record goes to a journal
	// slot, and the first call's commit depends on the head only).
	t.Run("DequeueBatch under a logged ID, nothing after the line", func(t *testing.T) {
		testSettlingBehindTheLine(t, true, 1, nil, dequeueBatch)
	})
	t.Run("DequeueBatch under a logged ID, an item after the line", func(t *testing.T) {
		testSettlingBehindTheLine(t, true, 1, []string{"y"}, dequeueBatch)
	})
	// A staged Dequeue under the ID files a request behind the waiters',
	// finds nothing at its place and withdraws it: the same answer, and
	// the same requirement. With one waiter ahead its step hands x to the
	// waiter's request, clearing it from the head, which makes the first
	// commit conflict. With two ahead it stands at place 2, where a step
	// serves no one: its withdrawal writes a conflict on the operation's
	// record key, which the first commit read. (Found by reading the
	// code: the simulation recovers no staged take at once.)
	dequeue := func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, opts ...fdbqueue.OpOption) ([][]byte, error) {
		v, err := q.Dequeue(ctx, db, opts...)
		if err != nil {
			return nil, err
		}
		return [][]byte{v}, nil
	}
	t.Run("staged Dequeue, one waiter ahead", func(t *testing.T) {
		testSettlingBehindTheLine(t, false, 1, nil, dequeue)
	})
	t.Run("staged Dequeue, two waiters ahead", func(t *testing.T) {
		testSettlingBehindTheLine(t, false, 2, nil, dequeue)
	})
}

// testSettlingBehindTheLine: x is enqueued; the first call, a DequeueBatch
// (with an ID of the test's, or of the queue's own when logged), takes it
// with its commit held in flight and fails (a staged Dequeue would clean
// up after itself, settling that commit, unless its cleanup failed too); waiters' requests enter the line (x is due to
// the first); after are enqueued; the settling call runs under the ID and
// must return after (or ErrEmpty); the first commit is then released, the
// first waiter must receive x, and nothing must be left.
func testSettlingBehindTheLine(t *testing.T, logged bool, waiters int, after []string,
	take func(context.Context, kv.Database, *fdbqueue.Queue, ...fdbqueue.OpOption) ([][]byte, error)) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "settle-behind-line")
	opts := stagingModes[1].opts(fdbqueue.StagingConfig{}) // by place
	q0 := stgQueue(t, sub, opts...)                        // the operation's calls
	require.NoError(t, q0.Enqueue(ctx, db, []byte("x")))
	id := fdbqueue.NewOpID()
	var firstOpts []fdbqueue.OpOption
	if !logged {
		firstOpts = append(firstOpts, fdbqueue.WithOpID(id))
	}

	// The first call takes x; its commit is held in flight when its
	// context ends.
	held, release := db.HoldNextCommitLate()
	t.Cleanup(release)
	actx, cancel := context.WithCancel(ctx)
	first := make(chan error, 1)
	go func() {
		_, err := q0.DequeueBatch(actx, db, 3, firstOpts...)
		first <- err
	}()
	recvWithin(t, held, "the first call's commit in flight")
	cancel()
	err := recvWithin(t, first, "the first call's return")
	require.True(t, kv.MaybeCommitted(err), "the first call's commit is in flight: %v", err)
	if logged {
		var u *fdbqueue.UnknownResultError
		require.True(t, errors.As(err, &u), "%v", err)
		id = u.ID
	}

	// Waiters file requests (without reading the head, as when the line
	// is long), each on a Queue of its own: x is due to the first, by
	// place.
	type result struct {
		v   []byte
		err error
	}
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	var resumes []func()
	var results []chan result
	for range waiters {
		q := stgQueue(t, sub, opts...)
		fdbqueue.SetStagingBusy(q, true)
		hook, registered, resume := stallOnceAt("registered")
		t.Cleanup(resume)
		fdbqueue.SetStagingHook(q, hook)
		ch := make(chan result, 1)
		go func() {
			v, err := q.DequeueWait(wctx, db)
			ch <- result{v, err}
		}()
		recvWithin(t, registered, "a waiter's registration")
		resumes, results = append(resumes, resume), append(results, ch)
	}
	for _, v := range after {
		require.NoError(t, q0.Enqueue(ctx, db, []byte(v)))
	}

	// The settling call finds no record and x due to a request.
	got, err := take(ctx, db, q0, fdbqueue.WithOpID(id))
	if len(after) == 0 {
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		require.False(t, kv.MaybeCommitted(err), "%v", err)
	} else {
		require.NoError(t, err)
		require.Equal(t, after, toStrings(got))
	}

	// The first commit now lands, or conflicts: the settling call's
	// answer must be the operation's.
	release()
	for _, resume := range resumes {
		resume()
	}
	r := recvWithin(t, results[0], "the first waiter's item")
	require.NoError(t, r.err, "x was taken by the operation, whose settling call did not return it")
	require.Equal(t, "x", string(r.v))
	if len(after) == 0 {
		_, err = take(ctx, db, q0, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "a later call under the ID must give the same answer")
	}
	// The other waiters have nothing to receive: they give up.
	wcancel()
	for _, ch := range results[1:] {
		r := recvWithin(t, ch, "a waiter's return after its context ended")
		require.Error(t, r.err, "a waiter with no item due got %q", r.v)
	}
	// Every item was received once: nothing is left.
	_, err = q0.DequeueBatch(ctx, db, 10)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}
