package fdbqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// sweepReads runs op once per read it makes, the k-th read (k = 0, 1, ...)
// failing with err (memdb.DB.FailReadAfter, which op may arm again), until
// a run makes fewer than k+1 reads. op makes its own state each run.
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
		done := leaseWaitAsync(ctx, q, db)
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

// RepairDepth with each of its reads, then each of its read version
// requests, failing in turn, and with its first commit reported
// commit_unknown_result (applied) and then each read failing: it counts
// every item once and leaves the counters at the count.
func TestRepairDepthUnderReadFaults(t *testing.T) {
	ctx := context.Background()
	defer fdbqueue.SetRepairPage(7)()
	db := newDB(t)
	injected := func() int64 {
		s := db.Stats()
		return s.InjectedReadErrors + s.InjectedReadVersionErrors
	}
	for _, kind := range []struct {
		name string
		arm  func(k int)
	}{
		{"read", func(k int) { db.FailReadAfter(k, kv.ErrProcessBehind) }},
		{"read-version", func(k int) { db.FailReadVersionAfter(k, kv.ErrGRVProxyMemoryLimit) }},
		{"unknown-then-read", func(k int) {
			db.FailNextCommit(kv.ErrCommitUnknownResult, true)
			db.FailReadAfter(k, kv.ErrFutureVersion)
		}},
	} {
		runs := 0
		for k := 0; ; k++ {
			require.Less(t, k, 200, "the sweep does not end")
			runs++
			q := mustQueue(t, fmt.Sprintf("repair-%s-%d", kind.name, k))
			// A recipe client's 20 items: the counters say 0.
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				for i := range 20 {
					key, err := q.Subspace().Pack(tuple.Tuple{int64(i), []byte{byte(i)}})
					if err != nil {
						return err
					}
					tr.Set(key, []byte("recipe"))
				}
				return nil
			}))
			before := injected()
			kind.arm(k)
			got, err := q.RepairDepth(ctx, db)
			fired := injected() > before
			db.FailReadAfter(-1, nil)
			db.FailReadVersionAfter(-1, nil)
			require.NoError(t, err, "%s %d", kind.name, k)
			require.Equal(t, int64(20), got, "%s %d", kind.name, k)
			requireDepth(t, db, q, 20)
			if !fired {
				break
			}
		}
		require.Greater(t, runs, 2, kind.name)
	}
}
