package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// newFakeClock returns the suite's manual clock (queuetest.Clock) at a
// fixed date: it moves only when Advance is called, and announces every
// After on its Armed channel when set.
func newFakeClock() *queuetest.Clock {
	return queuetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
}

func mustJobQueue(t testing.TB, name string, cfg fdbqueue.JobQueueConfig, opts ...fdbqueue.Option) *fdbqueue.JobQueue {
	t.Helper()
	q, err := fdbqueue.NewJobQueue(mustSubspace(t, "test", name), cfg, opts...)
	require.NoError(t, err)
	return q
}

func mustStats(t testing.TB, db kv.Database, q *fdbqueue.JobQueue) fdbqueue.JobStats {
	t.Helper()
	s, err := q.Stats(context.Background(), db)
	require.NoError(t, err)
	return s
}

func mustAdd(t testing.TB, db kv.Database, q *fdbqueue.JobQueue, j fdbqueue.Job) fdbqueue.AddResult {
	t.Helper()
	r, err := q.Add(context.Background(), db, j)
	require.NoError(t, err)
	return r
}

func mustLease(t testing.TB, db kv.Database, q *fdbqueue.JobQueue, n int, d time.Duration) []fdbqueue.Lease {
	t.Helper()
	ls, err := q.Lease(context.Background(), db, n, d)
	require.NoError(t, err)
	return ls
}

// leaseWaitResult is what a LeaseWait returned.
type leaseWaitResult struct {
	ls  []fdbqueue.Lease
	err error
}

// leaseWaitAsync runs q.LeaseWait(ctx, db, 1, time.Minute) in a goroutine
// and returns the channel its result arrives on.
func leaseWaitAsync(ctx context.Context, q *fdbqueue.JobQueue, db kv.Database) <-chan leaseWaitResult {
	ch := make(chan leaseWaitResult, 1)
	go func() {
		ls, err := q.LeaseWait(ctx, db, 1, time.Minute)
		ch <- leaseWaitResult{ls, err}
	}()
	return ch
}
