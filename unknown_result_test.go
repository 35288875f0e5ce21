package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// endsAfterUnknown is a database whose next transaction's commit fails
// with commit_unknown_result (1021), applied or not (memdb's
// FailNextCommit), and whose context then ends before the retry runs:
// kv.RetryLoop retries 1021, as FoundationDB's onError does
// (fdbclient/NativeAPI.actor.cpp, Transaction::onError), and returns the
// context's error marked maybe-committed. That is the error a caller
// sees when its deadline passes while an operation retries after an
// unknown commit outcome.
type endsAfterUnknown struct {
	*memdb.DB
	mu     sync.Mutex
	armed  bool
	cancel context.CancelFunc
	// beforeRetry, if set, runs before the retry instead of ending the
	// context.
	beforeRetry func()
}

// arm makes the next transaction fail as described, and returns the
// context to run it with.
func (d *endsAfterUnknown) arm(applied bool) context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	d.armed, d.cancel = true, cancel
	d.mu.Unlock()
	d.FailNextCommit(kv.ErrCommitUnknownResult, applied)
	return ctx
}

func (d *endsAfterUnknown) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	d.mu.Lock()
	armed, cancel := d.armed, d.cancel
	d.armed = false
	d.mu.Unlock()
	if !armed {
		return d.DB.Transact(ctx, fn)
	}
	attempts := 0
	return d.DB.Transact(ctx, func(tr kv.Transaction) error {
		if attempts++; attempts == 2 { // the retry after the unknown result
			if d.beforeRetry != nil {
				d.beforeRetry()
				return fn(tr)
			}
			cancel()
			return ctx.Err()
		}
		return fn(tr)
	})
}

// unknownCase is one operation run into an unknown result and settled.
type unknownCase struct {
	name string
	// setup prepares the queue on db and returns the operation (run with
	// opts on t) and the check, after settling, that it took effect once.
	setup func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (op func(ctx context.Context, t kv.Transactor, opts ...fdbqueue.OpOption) error, once func(t *testing.T))
}

var unknownCases = []unknownCase{
	{"Queue.Enqueue", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustQueue(t, "unknown-enq", opts...)
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				return q.Enqueue(ctx, tr, []byte("x"), o...)
			}, func(t *testing.T) {
				require.Equal(t, []string{"x"}, drain(t, db, q), "enqueued once")
			}
	}},
	{"Queue.Dequeue", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustQueue(t, "unknown-deq", opts...)
		require.NoError(t, q.EnqueueBatch(context.Background(), db, [][]byte{[]byte("a"), []byte("b")}))
		var got []string
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				v, err := q.Dequeue(ctx, tr, o...)
				if err == nil {
					got = append(got, string(v))
				}
				return err
			}, func(t *testing.T) {
				require.Equal(t, []string{"a"}, got, "the settling call returns the first item")
				require.Equal(t, []string{"b"}, drain(t, db, q), "nothing lost, nothing taken twice")
			}
	}},
	{"PriorityQueue.PopMax", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		pq := mustPQ(t, "unknown-pop", opts...)
		require.NoError(t, pq.Push(context.Background(), db, []byte("low"), 1))
		require.NoError(t, pq.Push(context.Background(), db, []byte("high"), 9))
		var got []string
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				it, err := pq.PopMax(ctx, tr, o...)
				if err == nil {
					got = append(got, string(it.Value))
				}
				return err
			}, func(t *testing.T) {
				require.Equal(t, []string{"high"}, got)
				it, err := pq.PopMax(context.Background(), db)
				require.NoError(t, err)
				require.Equal(t, "low", string(it.Value))
				_, err = pq.PopMax(context.Background(), db)
				require.ErrorIs(t, err, fdbqueue.ErrEmpty, "nothing lost, nothing taken twice")
			}
	}},
	{"PriorityQueue.PushBatch", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		pq := mustPQ(t, "unknown-pushbatch", opts...)
		items := []fdbqueue.PushItem{{Value: []byte("a"), Priority: 1}, {Value: []byte("b"), Priority: 2}}
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				return pq.PushBatch(ctx, tr, items, o...)
			}, func(t *testing.T) {
				n, err := pq.Len(context.Background(), db)
				require.NoError(t, err)
				require.Equal(t, 2, n, "pushed once")
			}
	}},
	{"JobQueue.Add", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustJobQueue(t, "unknown-add", fdbqueue.JobQueueConfig{}, opts...)
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				_, err := q.Add(ctx, tr, fdbqueue.Job{Value: []byte("x")}, o...)
				return err
			}, func(t *testing.T) {
				require.Equal(t, int64(1), mustStats(t, db, q).Queued, "added once")
			}
	}},
	{"JobQueue.Ack", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustJobQueue(t, "unknown-ack", fdbqueue.JobQueueConfig{}, opts...)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y"), Delay: time.Hour})
		l := mustLease(t, db, q, 1, time.Minute)[0]
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				return q.Ack(ctx, tr, l, o...)
			}, func(t *testing.T) {
				require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, mustStats(t, db, q), "acked; the other job untouched")
			}
	}},
	{"JobQueue.Requeue", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustJobQueue(t, "unknown-requeue", fdbqueue.JobQueueConfig{MaxAttempts: 1}, opts...)
		added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		dead, err := q.Nack(context.Background(), db, mustLease(t, db, q, 1, time.Minute)[0], fdbqueue.NackOptions{})
		require.NoError(t, err)
		require.True(t, dead)
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				return q.Requeue(ctx, tr, added.ID, o...)
			}, func(t *testing.T) {
				s := mustStats(t, db, q)
				require.Equal(t, [3]int64{1, 1, 0}, [3]int64{s.Queued, s.Due, s.Dead}, "requeued once")
			}
	}},
	{"JobQueue.Cancel", func(t *testing.T, db *memdb.DB, opts ...fdbqueue.Option) (func(context.Context, kv.Transactor, ...fdbqueue.OpOption) error, func(*testing.T)) {
		q := mustJobQueue(t, "unknown-cancel", fdbqueue.JobQueueConfig{}, opts...)
		added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k"})
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y"), Delay: time.Hour})
		return func(ctx context.Context, tr kv.Transactor, o ...fdbqueue.OpOption) error {
				return q.Cancel(ctx, tr, added.ID, o...)
			}, func(t *testing.T) {
				require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, mustStats(t, db, q), "cancelled once; the other job untouched")
			}
	}},
}

// A journaled operation whose commit outcome is unknown and whose context
// then ends returns an *UnknownResultError holding its ID, the one the
// queue logs, or the caller's own WithOpID: errors.As finds it,
// kv.MaybeCommitted and errors.Is(context.Canceled) still hold, and a call
// under that ID settles the operation, whether the unknown commit applied
// or not: it takes effect once. Before, the ID was only in the log line.
func TestUnknownResultErrorSettles(t *testing.T) {
	for _, c := range unknownCases {
		for _, applied := range []bool{true, false} {
			for _, own := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/applied=%v/own ID=%v", c.name, applied, own), func(t *testing.T) {
					mem := newDB(t)
					db := &endsAfterUnknown{DB: mem}
					logs, logger := loggedIDs()
					op, once := c.setup(t, mem, logger)
					var opts []fdbqueue.OpOption
					ownID := fdbqueue.NewOpID()
					if own {
						opts = append(opts, fdbqueue.WithOpID(ownID))
					}
					err := op(db.arm(applied), db, opts...)
					require.Error(t, err)
					require.True(t, kv.MaybeCommitted(err), "%v", err)
					require.ErrorIs(t, err, context.Canceled)
					var ure *fdbqueue.UnknownResultError
					require.ErrorAs(t, err, &ure)
					require.NotZero(t, ure.ID)
					require.NotEmpty(t, ure.Op)
					require.Contains(t, err.Error(), ure.ID.String())
					if own {
						require.Equal(t, ownID, ure.ID, "the caller's ID")
					} else {
						require.Equal(t, logs.take(t), ure.ID, "the ID the queue logs")
					}
					require.NoError(t, op(context.Background(), mem, fdbqueue.WithOpID(ure.ID)), "settled under the error's ID")
					once(t)
				})
			}
		}
	}
}

// A Lease whose outcome is unknown is settled under its error's ID with
// SettleLease: the leases it took if its commit applied, none otherwise,
// and in either case the job is leased at most once.
func TestUnknownResultErrorSettlesLease(t *testing.T) {
	ctx := context.Background()
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			mem := newDB(t)
			db := &endsAfterUnknown{DB: mem}
			q := mustJobQueue(t, "unknown-lease", fdbqueue.JobQueueConfig{})
			added := mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("x")})
			_, err := q.Lease(db.arm(applied), db, 1, time.Minute)
			require.True(t, kv.MaybeCommitted(err), "%v", err)
			var ure *fdbqueue.UnknownResultError
			require.ErrorAs(t, err, &ure)
			ls, err := q.SettleLease(ctx, mem, ure.ID)
			require.NoError(t, err)
			if applied {
				require.Len(t, ls, 1)
				require.Equal(t, added.ID, ls[0].JobID)
				require.Equal(t, fdbqueue.JobStats{Leased: 1}, mustStats(t, mem, q))
			} else {
				require.Empty(t, ls)
				require.Equal(t, int64(1), mustStats(t, mem, q).Due, "not leased")
			}
		})
	}
}

// Without the journal (WithoutIdempotency) the same failure carries no
// ID: a call under one would apply the operation anew. The error is the
// retry loop's, maybe-committed as before.
func TestUnknownResultErrorNotWithoutIdempotency(t *testing.T) {
	for _, c := range unknownCases {
		t.Run(c.name, func(t *testing.T) {
			mem := newDB(t)
			db := &endsAfterUnknown{DB: mem}
			op, _ := c.setup(t, mem, fdbqueue.WithoutIdempotency())
			err := op(db.arm(true), db)
			require.True(t, kv.MaybeCommitted(err), "%v", err)
			require.ErrorIs(t, err, context.Canceled)
			var ure *fdbqueue.UnknownResultError
			require.False(t, errors.As(err, &ure), "no ID to settle with: %v", err)
		})
	}
}

// A take that failed with ErrEmpty after an unknown outcome took nothing
// (its retry read its record key and found no record, and FDB reports
// commit_unknown_result only once that commit can no longer land): it
// carries no ID, as the queue logs none. Here the unknown commit did not
// apply and another consumer took the item before the retry.
func TestUnknownResultErrorNotForEmpty(t *testing.T) {
	ctx := context.Background()
	mem := newDB(t)
	q := mustQueue(t, "unknown-empty")
	require.NoError(t, q.Enqueue(ctx, mem, []byte("a")))
	ran := false
	db := &endsAfterUnknown{DB: mem, beforeRetry: func() {
		ran = true
		v, err := q.Dequeue(ctx, mem)
		require.NoError(t, err)
		require.Equal(t, "a", string(v))
	}}
	_, err := q.Dequeue(db.arm(false), db)
	require.True(t, ran, "the retry ran after the unknown result")
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	var ure *fdbqueue.UnknownResultError
	require.False(t, errors.As(err, &ure), "%v", err)
}

// A staged Dequeue that fails maybe-committed (its take cut short by the
// caller's context, then its cleanup's commit outcome unknown: see
// TestStagedMaybeCommittedCleanupThenSettle) returns an
// *UnknownResultError holding the ID the queue logs, and a Dequeue under
// it settles the call: x is received once.
func TestUnknownResultErrorStagedDequeue(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		c := newCutTake(t, m, "unknown-staged")
		done, resume := c.cut(t, c.db)
		c.db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true) // the cleanup's commit
		resume()
		err := recvWithin(t, done, "the call's end")
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		var ure *fdbqueue.UnknownResultError
		require.ErrorAs(t, err, &ure)
		require.Equal(t, "dequeue", ure.Op)
		require.Equal(t, c.logs.take(t), ure.ID)
		v, err := c.q.Dequeue(context.Background(), c.db, fdbqueue.WithOpID(ure.ID))
		require.NoError(t, err)
		c.requireReceivedOnce(t, v)
	})
}
