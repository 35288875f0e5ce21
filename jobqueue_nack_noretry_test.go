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

// Nack with NoRetry dead-letters a job with attempts left, with its
// reason, and frees its unique key; the Delay is not used.
func TestNackNoRetry(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "nack-noretry", fdbqueue.JobQueueConfig{Clock: newFakeClock()})
	job := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: 5, UniqueKey: "u"})
	l := mustLease(t, db, q, 1, time.Minute)[0]
	dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{NoRetry: true, Delay: time.Hour, Reason: "malformed"})
	require.NoError(t, err)
	require.True(t, dead)
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q))
	ds, err := q.ListDead(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, job.ID, ds[0].ID)
	require.Equal(t, "malformed", ds[0].Reason)
	require.Equal(t, 1, ds[0].Attempts)
	_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{NoRetry: true})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "dead: the lease is gone")
	require.False(t, mustAdd(t, db, q, fdbqueue.Job{Value: []byte("again"), UniqueKey: "u"}).Duplicate, "the unique key is free")
}

// A NoRetry nack whose commit fails with commit_unknown_result ("may or
// may not have committed": flow/include/flow/error_definitions.h; the
// application must tell, documentation/sphinx/source/developer-guide.rst,
// "Transactions with unknown results") is retried by Nack's loop: the
// journal tells whether the first commit landed, and the job is
// dead-lettered once, Nack returning true either way. Without the NoRetry
// option the job, with attempts left, was nacked back to the queue.
func TestNackNoRetryUnknownResult(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			q := mustJobQueue(t, "nack-noretry-cur", fdbqueue.JobQueueConfig{Clock: newFakeClock()})
			mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: 5})
			l := mustLease(t, db, q, 1, time.Minute)[0]
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{NoRetry: true, Reason: "bad"})
			require.NoError(t, err, "the retry finds the nack applied, or applies it")
			require.True(t, dead, "the first attempt's result")
			require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q), "dead-lettered exactly once")
		})
	}
}

// A NoRetry nack whose commit was in flight when its caller gave up
// (interrupted: it lands later, as FoundationDB's does) is found by the
// same operation ID afterwards: the call replays the record and returns
// dead = true, not ErrLeaseLost, and writes nothing more.
func TestNackNoRetryReplayAfterInterruptedCommit(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "nack-noretry-replay", fdbqueue.JobQueueConfig{Clock: newFakeClock()})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: 5})
	l := mustLease(t, db, q, 1, time.Minute)[0]
	id := fdbqueue.NewOpID()
	nack := func(ctx context.Context) (bool, error) {
		return q.Nack(ctx, db, l, fdbqueue.NackOptions{NoRetry: true, Reason: "bad"}, fdbqueue.WithOpID(id))
	}
	land, err := interruptCommit(t, db, func(ctx context.Context) error { _, err := nack(ctx); return err })
	require.Error(t, err, "cut off while its commit was in flight")
	land()
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q), "the commit landed")
	dead, err := nack(context.Background())
	require.NoError(t, err, "the journal's record, not the lease's absence")
	require.True(t, dead, "the committed call's result")
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q))
}
