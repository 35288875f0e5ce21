package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestStagedWaitOutlivesRetentionAfterAFailedTake: a DequeueWait without
// an operation ID renews its ID while it waits (DequeueWait's doc), also
// when one of its take attempts failed earlier: a take that did not commit
// left no record, so nothing ties the call to its first ID. Here the
// call's one plain attempt conflicts (another consumer takes the item
// first), the call waits for longer than the journal retention, and an
// item then arrives: the call must return it, not ErrOperationExpired.
func TestStagedWaitOutlivesRetentionAfterAFailedTake(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		const retention = time.Minute
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		db := stgDB(t)
		sub := stgSubspace(t, "retention")
		opts := append(m.opts(fdbqueue.StagingConfig{}), fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(retention))
		qW := stgQueue(t, sub, opts...) // the waiter's client
		q := stgQueue(t, sub, opts...)  // everybody else's
		require.NoError(t, q.Enqueue(ctx, db, []byte("a")))

		var steal, arm sync.Once
		armed := make(chan struct{})
		stolen := make(chan string, 1)
		fdbqueue.SetStagingHook(qW, func(p string) {
			switch p {
			case "taking":
				steal.Do(func() {
					// Another consumer takes the item first: the waiter's
					// take conflicts, and it files a request.
					var v []byte
					err := db.Transact(ctx, func(tr kv.Transaction) error {
						var err error
						v, err = q.Dequeue(ctx, tr)
						return err
					})
					if err != nil {
						stolen <- "error: " + err.Error()
						return
					}
					stolen <- string(v)
				})
			case "armed":
				arm.Do(func() { close(armed) })
			}
		})
		type res struct {
			v   []byte
			err error
		}
		done := make(chan res, 1)
		go func() {
			v, err := qW.DequeueWait(ctx, db)
			done <- res{v, err}
		}()
		select {
		case <-armed:
		case r := <-done:
			t.Fatalf("the waiter returned before waiting: %q, %v", r.v, r.err)
		case <-time.After(wakeTimeout):
			t.Fatal("the waiter neither slept nor returned")
		}
		require.Equal(t, "a", recvWithin(t, stolen, "the other consumer's take"), "the other consumer took the item")
		require.Equal(t, int64(1), takeConflicts(qW), "the waiter's take conflicted")

		clock.Advance(retention + time.Second) // the waiter waits long
		require.NoError(t, q.Enqueue(ctx, db, []byte("b")))
		r := recvWithin(t, done, "the waiter woken by b")
		require.NoError(t, r.err)
		require.Equal(t, "b", string(r.v))
		requireClean(t, db, sub)
	})
}

// takeConflicts counts the conflicted steps of q's staged calls that
// would have taken an item (the one plain attempt, or a take).
func takeConflicts(q *fdbqueue.Queue) int64 {
	var n int64
	for _, p := range q.StagingStats().Phases {
		if p.Phase == "fast" || p.Phase == "take" {
			n += p.Conflicts
		}
	}
	return n
}

// retentionCleanupCase is one way a staged call gives up once its
// operation is past its journal retention: with its context alive (the
// retry's journal read fails with ErrOperationExpired) or ended (the
// cleanup runs in a fresh context).
type retentionCleanupCase struct {
	name   string
	cancel bool // the caller's context ends as the take fails
}

var retentionCleanupCases = []retentionCleanupCase{{"context alive", false}, {"context ended", true}}

// cleanupRetention is the journal retention of the retention cleanup
// tests' targets.
const cleanupRetention = time.Minute

// forRetentionCleanup runs f as a subtest for each staged target (a
// Queue in each serving mode, a PriorityQueue's PopMin and PopMax) and
// each retentionCleanupCase. Each target is on a manual clock, with a
// journal retention of cleanupRetention, and holds a, b and c (a
// PriorityQueue's with rising priorities); before are their item keys.
func forRetentionCleanup(t *testing.T, name string, f func(t *testing.T, x *stagedTarget, c retentionCleanupCase, before [][]byte)) {
	for _, mk := range stagedTargetsWith(t, name, fdbqueue.StagingConfig{}, true, fdbqueue.WithJournalRetention(cleanupRetention)) {
		for _, c := range retentionCleanupCases {
			x := mk(t)
			t.Run(x.name+"/"+c.name, func(t *testing.T) {
				x.enqueue(t, "a", "b", "c")
				before := itemKeys(t, x.db, x.sub)
				require.Len(t, before, 3)
				f(t, x, c, before)
			})
		}
	}
}

// takeLandsThenExpires runs a staged Dequeue (or PopMin, PopMax) with
// opts on handle 0 of x: its take's commit applies but reports
// commit_unknown_result. The call stalls at the failure, before it goes
// on, while x's clock passes the retention (not twice it: no expiry may
// have cleared the record), atFailure runs, and for c.cancel the call's
// context ends. It returns the call's error.
func takeLandsThenExpires(t *testing.T, c retentionCleanupCase, x *stagedTarget, atFailure func(), opts ...fdbqueue.OpOption) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cctx, end := context.WithCancel(ctx)
	defer end()
	var taking sync.Once
	stall, failed, resume := stallOnceAt("failed")
	defer resume()
	x.setHook(0, func(p string) {
		if p == "taking" {
			taking.Do(func() { x.db.FailNextCommit(kv.ErrCommitUnknownResult, true) })
		}
		stall(p)
	})
	defer x.setHook(0, nil)
	done := make(chan error, 1)
	go func() {
		_, err := x.take(cctx, 0, false, opts...)
		done <- err
	}()
	recvWithin(t, failed, "the take's failure (commit_unknown_result, applied)")
	x.clock.Advance(cleanupRetention + time.Second)
	if atFailure != nil {
		atFailure()
	}
	if c.cancel {
		end()
	}
	resume()
	return recvWithin(t, done, "the staged call's return")
}

// TestStagedCleanupPastRetentionPutsTheTakeBack: a staged Dequeue's (or
// PopMin's, PopMax's) take applies although its commit reports
// commit_unknown_result, and the operation passes its journal retention
// before the call goes on (the record is still there: an expiry clears it
// at twice the retention). The retry fails with ErrOperationExpired, or
// the context ended; either way the call gives up and its cleanup runs.
// The cleanup read the record only within the retention (check's early
// age test), found nothing, and left the item in the record: with the
// context alive the call returned ErrOperationExpired (maybe committed,
// its doc says, but the item was stranded although it could have gone
// back), and with the context ended the context's plain error, not maybe
// committed: the item was lost. The cleanup now reads the record whatever
// its age and puts the item back: the call's error is ErrOperationExpired
// or the context's, the item is in the queue (a PriorityQueue's at its
// key, so with its priority: it pops first again), the record is gone,
// nothing is left staged, and every item pops once.
func TestStagedCleanupPastRetentionPutsTheTakeBack(t *testing.T) {
	forRetentionCleanup(t, "retention-cleanup", func(t *testing.T, x *stagedTarget, c retentionCleanupCase, before [][]byte) {
		// The journal keys the take wrote: its record.
		old := map[string]bool{}
		for _, k := range journalKeys(t, x.db, x.sub) {
			old[string(k)] = true
		}
		var record [][]byte
		landed := func() {
			for _, k := range journalKeys(t, x.db, x.sub) {
				if !old[string(k)] {
					record = append(record, k)
				}
			}
			require.NotEmpty(t, record, "the take applied: its record is there")
		}
		err := takeLandsThenExpires(t, c, x, landed)
		if c.cancel {
			require.ErrorIs(t, err, context.Canceled)
		} else {
			require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
		}
		require.False(t, kv.MaybeCommitted(err), "the cleanup put the item back: %v", err)
		left := map[string]bool{}
		for _, k := range journalKeys(t, x.db, x.sub) {
			left[string(k)] = true
		}
		for _, k := range record {
			require.False(t, left[string(k)], "the take's record %q was erased with the item's return", k)
		}
		x.requireBack(t, before, true)
	})
}

// TestStagedCleanupPastRetentionWithoutRecordIsMaybeCommitted: as
// TestStagedCleanupPastRetentionPutsTheTakeBack, but the take's record is
// gone when the cleanup reads (cleared here by hand, as an expiry by a
// client whose clock runs ahead may): past the retention the cleanup
// cannot tell a take that never applied from one whose record was
// cleared. It still withdraws (nothing is left staged), and the call's
// error wraps ErrOperationExpired (and the context's error when it
// ended) with kv.MaybeCommitted true. It was ErrOperationExpired alone,
// or the context's error alone, neither maybe committed.
func TestStagedCleanupPastRetentionWithoutRecordIsMaybeCommitted(t *testing.T) {
	forRetentionCleanup(t, "retention-cleanup-gone", func(t *testing.T, x *stagedTarget, c retentionCleanupCase, before [][]byte) {
		ctx := context.Background()
		id := fdbqueue.OpIDAt(x.clock.Now())
		clear := func() {
			require.NotEmpty(t, rangeKeys(t, x.db, x.recordRange(id)), "the take applied: its record is there")
			require.NoError(t, x.db.Transact(ctx, func(tr kv.Transaction) error {
				tr.ClearRange(x.recordRange(id))
				return nil
			}))
		}
		err := takeLandsThenExpires(t, c, x, clear, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
		if c.cancel {
			require.ErrorIs(t, err, context.Canceled)
		}
		require.True(t, kv.MaybeCommitted(err), "a take whose record may have expired may have applied: %v", err)
		require.Len(t, itemKeys(t, x.db, x.sub), len(before)-1, "the take applied and its record is gone: the item is not back")
		require.Empty(t, stagingKeys(t, x.db, x.sub), "the cleanup withdrew all the same")
		requireNoWatches(t, x.db)
		x.requireDrained(t, x.queued()[1:])
	})
}
