package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// sweepReads runs op once per read it makes, the k-th read (k = 0, 1, ...)
// failing with err (memdb.DB.FailReadAfter), until a run makes fewer than
// k+1 reads; fresh gives each run its own state.
func sweepReads(t *testing.T, db *memdb.DB, err error, op func(t *testing.T, k int)) {
	t.Helper()
	for k := 0; ; k++ {
		if k > 200 {
			t.Fatal("the operation still reads after 200 runs")
		}
		before := db.Stats().InjectedReadErrors
		db.FailReadAfter(k, err)
		op(t, k)
		if db.Stats().InjectedReadErrors == before {
			db.FailReadAfter(-1, nil)
			return
		}
	}
}

// LeaseWait sleeps on a watch, which FoundationDB may fail with a
// retryable error: the watch's read (RYWImpl::watch: any read error, and
// the commit still succeeds), or, once registered, future_version from a
// storage server that does not reach the watch's version in time
// (watchValueWaitForVersion and waitForVersionNoTooOld in
// fdbserver/storageserver.actor.cpp; NativeAPI's watchValue rethrows it).
// A LeaseWait whose watch fails so waits on: it does not return the error.
func TestLeaseWaitRetriesAFailedWatch(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	n := 0
	sweepReads(t, db, kv.ErrFutureVersion, func(t *testing.T, k int) {
		n++
		clock := newFakeClock()
		clock.Armed = make(chan time.Duration)
		q := mustJobQueue(t, "leasewait-"+string(rune('a'+k%26))+string(rune('a'+k/26)), fdbqueue.JobQueueConfig{Clock: clock})
		db.FailReadAfter(-1, nil)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("later"), Delay: time.Minute})
		db.FailReadAfter(k, kv.ErrFutureVersion)
		type result struct {
			ls  []fdbqueue.Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			ls, err := q.LeaseWait(ctx, db, 1, time.Minute)
			done <- result{ls, err}
		}()
		for {
			select {
			case r := <-done:
				require.NoError(t, r.err, "LeaseWait with read %d failing", k)
				require.Len(t, r.ls, 1)
				require.Equal(t, []byte("later"), r.ls[0].Value)
				return
			case d := <-clock.Armed:
				clock.Advance(d)
			}
		}
	})
	require.Greater(t, n, 2, "the sweep ran over LeaseWait's reads")
}
