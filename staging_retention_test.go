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
