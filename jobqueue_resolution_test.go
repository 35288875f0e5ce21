package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// A job queue counts its jobs in buckets of StatsResolution by vesting
// time, and every write moves a job from one bucket to another: a handle
// with another resolution would add to one bucket and take from another,
// leaving counters that never return to zero (Stats then gave Due -1 for
// an empty queue). The resolution is stored with the
// queue (the record's layout), and a handle with another one is refused
// before it writes, however it is used.
func TestJobQueueStatsResolutionStored(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "jobres", "q")
	clock := newFakeClock()
	second, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock})
	require.NoError(t, err)
	mustAdd(t, db, second, fdbqueue.Job{Value: []byte("one")})
	mustAdd(t, db, second, fdbqueue.Job{Value: []byte("two"), Delay: time.Hour})
	want := fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1}
	require.Equal(t, want, mustStats(t, db, second))
	before := allPairs(t, db)

	minute, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock, StatsResolution: time.Minute})
	require.NoError(t, err)
	for name, op := range jobOps(minute) {
		err := op(ctx, db)
		var me *fdbqueue.ConfigMismatchError
		require.True(t, errors.As(err, &me), "%s: %v", name, err)
		require.Equal(t, "layout", me.Field, name)
		require.Equal(t, "vesting, buckets of 1s", me.Stored, name)
		require.Equal(t, "vesting, buckets of 1m0s", me.Handle, name)
	}
	require.Equal(t, before, allPairs(t, db), "the refused handle wrote nothing")

	// The same width however written, to the microsecond, is the same.
	same, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock, StatsResolution: 1000*time.Millisecond + 999})
	require.NoError(t, err)
	ls := mustLease(t, db, same, 1, time.Minute)
	require.Len(t, ls, 1)
	require.NoError(t, same.Ack(ctx, db, ls[0]))
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, mustStats(t, db, second))
}
