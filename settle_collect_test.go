package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A staged Dequeue under an ID of the caller's is served by a helper (its
// request gets x in its result key); it collects, with its commit held in
// flight while its context ends, and its cleanup's commit fails: the call
// fails maybe committed. x is now in the result key, not in the queue. A
// settling call under the ID finds no record and an empty queue and
// returns ErrEmpty; it read nothing the collect writes, and must write a
// conflict the collect read (the ID's record key), or the collect lands
// after the answer: the operation took x while the caller was told it
// took nothing, and a later call under the ID returns x. FoundationDB's
// commit request goes on after a cancellation (RYWImpl::commit,
// fdbclient/ReadYourWrites.actor.cpp), as memdb's HoldNextCommitLate does.
// (Found by an audit of the staged paths; every serving mode, settled by
// a DequeueBatch and by a staged Dequeue.)
func TestSettlingEmptyAnswerFencesACollectInFlight(t *testing.T) {
	settleBatch := func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, opts ...fdbqueue.OpOption) error {
		_, err := q.DequeueBatch(ctx, db, 3, opts...)
		return err
	}
	settleStaged := func(ctx context.Context, db kv.Database, q *fdbqueue.Queue, opts ...fdbqueue.OpOption) error {
		_, err := q.Dequeue(ctx, db, opts...)
		return err
	}
	for _, m := range stagingModes {
		for _, s := range []struct {
			name   string
			settle func(context.Context, kv.Database, *fdbqueue.Queue, ...fdbqueue.OpOption) error
		}{{"DequeueBatch", settleBatch}, {"staged Dequeue", settleStaged}} {
			t.Run(m.name+"/"+s.name, func(t *testing.T) { testSettleWhileCollectInFlight(t, m, s.settle) })
		}
	}
}

func testSettleWhileCollectInFlight(t *testing.T, m stagingMode,
	settle func(context.Context, kv.Database, *fdbqueue.Queue, ...fdbqueue.OpOption) error) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "settle-collect")
	opts := m.opts(fdbqueue.StagingConfig{})
	q0 := stgQueue(t, sub, opts...) // producer, helper, settling call
	q1 := stgQueue(t, sub, opts...) // the operation's first call
	id := fdbqueue.NewOpID()

	// The first call is served x, collects it with its commit held in
	// flight, and fails maybe committed: x is in its result key.
	release := holdCollectInFlight(t, db, queueCollectFirstCall(t, db, q0, q1, id))
	require.Empty(t, itemKeys(t, db, sub))

	// The settling call: no record, no item.
	err := settle(ctx, db, q0, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.False(t, kv.MaybeCommitted(err), "%v", err)

	// The collect lands, or conflicts.
	release()
	vals, err := q0.DequeueBatch(ctx, db, 3, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty,
		"a later call under the ID must give the settling call's answer; got %q: the collect landed after the ErrEmpty and took x", toStrings(vals))
}

// The same on a staged PriorityQueue (served in batches): PopMinWait's
// collect in flight, settled by PopMinBatch or a staged PopMin under the ID.
func TestPQSettlingEmptyAnswerFencesACollectInFlight(t *testing.T) {
	for _, s := range []struct {
		name   string
		settle func(ctx context.Context, db kv.Database, pq *fdbqueue.PriorityQueue, opts ...fdbqueue.OpOption) ([]fdbqueue.Item, error)
	}{
		{"PopMinBatch", func(ctx context.Context, db kv.Database, pq *fdbqueue.PriorityQueue, opts ...fdbqueue.OpOption) ([]fdbqueue.Item, error) {
			return pq.PopMinBatch(ctx, db, 3, opts...)
		}},
		{"staged PopMin", func(ctx context.Context, db kv.Database, pq *fdbqueue.PriorityQueue, opts ...fdbqueue.OpOption) ([]fdbqueue.Item, error) {
			it, err := pq.PopMin(ctx, db, opts...)
			if err != nil {
				return nil, err
			}
			return []fdbqueue.Item{it}, nil
		}},
	} {
		t.Run(s.name, func(t *testing.T) {
			ctx := context.Background()
			db := stgDB(t)
			sub := stgSubspace(t, "pq-settle-collect")
			mk := func() *fdbqueue.PriorityQueue {
				pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
				require.NoError(t, err)
				return pq
			}
			pq0, pq1 := mk(), mk()
			id := fdbqueue.NewOpID()

			release := holdCollectInFlight(t, db, collectFirstCall{
				setHook: func(h func(string)) { fdbqueue.SetPQStagingHook(pq1, h) },
				call: func(ctx context.Context) error {
					_, err := pq1.PopMinWait(ctx, db, fdbqueue.WithOpID(id))
					return err
				},
				serve: func() {
					require.NoError(t, pq0.Push(ctx, db, []byte("x"), 7))
					n, err := fdbqueue.FulfilStagedPQ(ctx, db, pq0, false)
					require.NoError(t, err)
					require.Equal(t, 1, n)
				},
			})

			_, err := s.settle(ctx, db, pq0, fdbqueue.WithOpID(id))
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			require.False(t, kv.MaybeCommitted(err), "%v", err)

			release()
			items, err := pq0.PopMinBatch(ctx, db, 3, fdbqueue.WithOpID(id))
			require.ErrorIs(t, err, fdbqueue.ErrEmpty,
				"a later call under the ID must give the settling call's answer; got %v: the collect landed after the ErrEmpty and took x", items)
		})
	}
}

// collectFirstCall is the first call of holdCollectInFlight: call runs it
// (a staged Wait form under the operation's ID) until its context ends,
// setHook sets its handle's staging hook, and serve, once it sleeps, makes
// an item and hands it to its request.
type collectFirstCall struct {
	setHook func(func(string))
	call    func(context.Context) error
	serve   func()
}

// holdCollectInFlight runs f's call until it sleeps, serves it, and lets
// it wake and collect with its commit held in flight (memdb's
// HoldNextCommitLate); then its context ends and its cleanup's commit
// fails, so that it returns maybe committed, the item still in its
// result key. It returns the release of the held collect.
func holdCollectInFlight(t *testing.T, db *memdb.DB, f collectFirstCall) (release func()) {
	t.Helper()
	hook, stalled, resume := stallAtArm()
	t.Cleanup(resume)
	collecting := make(chan struct{}, 8)
	f.setHook(func(p string) {
		if p == "commit collect" {
			collecting <- struct{}{}
		}
		hook(p)
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	first := make(chan error, 1)
	go func() { first <- f.call(ctx) }()
	recvWithin(t, stalled, "the first call asleep")
	f.serve()
	held, release := db.HoldNextCommitLate()
	t.Cleanup(release)
	resume()
	recvWithin(t, held, "the collect in flight")
	recvWithin(t, collecting, "the held commit is the collect's")
	db.FailNextCommit(kv.ErrTransactionTooLarge, false) // the cleanup's
	cancel()
	err := recvWithin(t, first, "the first call's return")
	require.True(t, kv.MaybeCommitted(err), "the cleanup failed: %v", err)
	return release
}

// queueCollectFirstCall is holdCollectInFlight's first call on a Queue: a
// DequeueWait on q1 under id, served x that q0 enqueues and hands over.
func queueCollectFirstCall(t *testing.T, db kv.Database, q0, q1 *fdbqueue.Queue, id fdbqueue.OpID) collectFirstCall {
	ctx := context.Background()
	return collectFirstCall{
		setHook: func(h func(string)) { fdbqueue.SetStagingHook(q1, h) },
		call: func(ctx context.Context) error {
			_, err := q1.DequeueWait(ctx, db, fdbqueue.WithOpID(id))
			return err
		},
		serve: func() {
			require.NoError(t, q0.Enqueue(ctx, db, []byte("x")))
			n, err := fdbqueue.FulfilStaged(ctx, db, q0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		},
	}
}
