package fdbqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Task.Ack's doc (and TypedTask.Ack's) names a Cancel of the job among
// the causes of ErrLeaseLost, as JobQueue.Ack's does: a handler whose job
// was cancelled while it ran gets ErrLeaseLost from its Ack, and the
// effects written with it do not commit.
func TestTaskAckAfterCancelFailsWithLeaseLost(t *testing.T) {
	ctx := context.Background()
	effect := []byte("effect")
	// ackCancelled, run by the handler, cancels its job, then acks it in
	// a transaction that writes an effect.
	ackCancelled := func(db kv.Database, q *fdbqueue.JobQueue, id fdbqueue.JobID, ack func(context.Context, kv.Transaction) error) error {
		if err := q.Cancel(ctx, db, id); err != nil {
			return fmt.Errorf("the Cancel failed: %w", err)
		}
		return db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(effect, []byte("x"))
			return ack(ctx, tr)
		})
	}
	noEffect := func(t *testing.T, db kv.Database) {
		require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
			v, err := tr.Get(effect).Get()
			require.Nil(t, v, "the effects written with the failed ack did not commit")
			return err
		}))
	}
	t.Run("Task", func(t *testing.T) {
		db := newDB(t)
		q := mustJobQueue(t, "ack-cancelled", fdbqueue.JobQueueConfig{})
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("doomed")})
		acked := make(chan error, 1)
		outcomes := make(chan fdbqueue.Outcome, 1)
		pool := startPool(t, q, db, func(_ context.Context, task *fdbqueue.Task) error {
			acked <- ackCancelled(db, q, task.Lease().JobID, task.Ack)
			return nil
		}, fdbqueue.PoolOptions{Workers: 1, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
		require.ErrorIs(t, recvWithin(t, acked, "the handler's ack"), fdbqueue.ErrLeaseLost)
		require.Equal(t, fdbqueue.LeaseLost, recvWithin(t, outcomes, "the job's outcome").Result)
		require.NoError(t, pool.stop())
		noEffect(t, db)
	})
	t.Run("TypedTask", func(t *testing.T) {
		db := newDB(t)
		q := mustJobQueue(t, "typed-ack-cancelled", fdbqueue.JobQueueConfig{})
		tj := fdbqueue.NewTypedJobQueue[string](q, fdbqueue.StringCodec{})
		_, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "doomed"})
		require.NoError(t, err)
		acked := make(chan error, 1)
		outs := typedPool(t, db, tj, 1, func(_ context.Context, task *fdbqueue.TypedTask[string]) error {
			acked <- ackCancelled(db, q, task.Lease().JobID, task.Ack)
			return nil
		})
		require.ErrorIs(t, recvWithin(t, acked, "the handler's ack"), fdbqueue.ErrLeaseLost)
		require.Equal(t, fdbqueue.LeaseLost, outs[0].Result)
		noEffect(t, db)
	})
}

// PoolOptions.ReleaseTimeout's doc: Run's bound on what settles the jobs
// at shutdown is on the queue's clock (TestJobPoolWaitsForItsWorkersPastTheReleaseTimeout
// moves it), and each release is also cut off on its own after
// ReleaseTimeout of wall time, whatever the queue's clock: here the
// queue's clock stands still, the release's commit is held, and the
// release still ends, with context.DeadlineExceeded, so that Run returns.
func TestJobPoolReleaseCutOffOnWallTime(t *testing.T) {
	const timeout = 50 * time.Millisecond // the wall time the release is given
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "release-wall", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("stubborn")})

	h := newBlockingHandler() // ignores ctx
	defer close(h.finish)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second, ReleaseTimeout: timeout, Logger: quietLog,
		OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, h.started, "the handler's start")
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock)) // the shutdown deadline
	held, land := db.HoldNextCommitLate()                // the release's commit
	clock.Advance(7 * time.Second)
	recvWithin(t, held, "the release's commit in flight")
	require.Equal(t, timeout, nextArmed(t, clock), "Run's bound on the release, on the queue's clock, which stays put")
	require.NoError(t, pool.wait("Run did not return once the release's own wall-time limit passed"))
	select {
	case o := <-outcomes:
		require.Equal(t, fdbqueue.Abandoned, o.Result)
		require.ErrorIs(t, o.Err, context.DeadlineExceeded, "the release ran out of its wall time")
	default:
		t.Fatal("Run returned before its worker reported the abandoned job's outcome")
	}
	land()
	db.AwaitLateLandings()
}
