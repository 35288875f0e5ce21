package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Operations after a bump of the metadata version in the same transaction.
// FoundationDB fails a read of the metadata version after a bump in the
// same transaction with accessed_unreadable, and such a failed read fails
// the commit (RYWImpl::commit awaits every read issued:
// fdbclient/ReadYourWrites.actor.cpp). A record write bumps it, so the
// operations after it in the transaction must not read it (config_bumps.go).
func TestOperationsAfterARecordChangeInOneTransaction(t *testing.T) {
	ctx := context.Background()
	t.Run("WatchForItemsOnTwoQueues", func(t *testing.T) {
		db := newDB(t)
		q1 := mustQueue(t, "watch-two-1")
		q2 := mustQueue(t, "watch-two-2")
		for _, q := range []*fdbqueue.Queue{q1, q2} { // records that say no one waits
			require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
			_, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
		}
		var ws []kv.Watch
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			ws = ws[:0]
			for _, q := range []*fdbqueue.Queue{q1, q2} {
				w, err := q.WatchForItems(tr)
				if err != nil {
					return err
				}
				ws = append(ws, w)
			}
			return nil
		}), "each WatchForItems changes its queue's record and bumps the metadata version")
		for _, w := range ws {
			w.Cancel()
		}
	})
	t.Run("ReconfigureThenSchedule", func(t *testing.T) {
		db := newDB(t)
		q := mustQueue(t, "reconf-sched-queue")
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		jq := mustJobQueue(t, "reconf-sched", fdbqueue.JobQueueConfig{})
		_, err = jq.Schedule(ctx, db, hourly("warm-up"), time.Time{}) // its record, cached
		require.NoError(t, err)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			if err := q.Reconfigure(ctx, tr); err != nil {
				return err
			}
			_, err := jq.Schedule(ctx, tr, hourly("report"), time.Time{})
			return err
		}), "the Schedule after the Reconfigure's bump does not read the metadata version")
		require.Len(t, mustSchedules(t, db, jq, 10), 2)
	})
	t.Run("ReconfigureThenEnqueue", func(t *testing.T) {
		db := newDB(t)
		q := mustQueue(t, "reconf-enq")
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			if err := q.Reconfigure(ctx, tr); err != nil {
				return err
			}
			return q.Enqueue(ctx, tr, []byte("y"))
		}))
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "y", string(v))
	})
}

// A handle caches the stored record with the metadata version it read it
// at, and trusts the cache while the metadata version is unchanged. The
// cache must not hold a record that was never committed.
func TestConfigCacheHoldsOnlyCommittedRecords(t *testing.T) {
	for _, bumped := range []bool{false, true} {
		// The metadata version absent, or set by an earlier bump.
		t.Run(fmt.Sprintf("UncommittedRecord/bumped=%v", bumped), func(t *testing.T) {
			testUncommittedRecordNotCached(t, bumped)
		})
	}
}

func testUncommittedRecordNotCached(t *testing.T, bumped bool) {
	ctx := context.Background()
	sub := mustSubspace(t, "cache-uncommitted")
	newQ := func(opts ...fdbqueue.Option) *fdbqueue.Queue {
		q, err := fdbqueue.NewQueue(sub, opts...)
		require.NoError(t, err)
		return q
	}
	{
		db := newDB(t)
		if bumped {
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				kv.BumpMetadataVersion(tr)
				return nil
			}))
		}
		raw, tup := newQ(), newQ(fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
		abort := errors.New("abort")
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			// The first writes the record, the second reads it in the same
			// transaction, which then rolls back.
			for _, v := range []string{"x", "y"} {
				if err := raw.Enqueue(ctx, tr, []byte(v)); err != nil {
					return err
				}
			}
			return abort
		})
		require.ErrorIs(t, err, abort)
		require.NoError(t, tup.Enqueue(ctx, db, []byte("z")), "the queue's first record")
		require.ErrorIs(t, raw.Enqueue(ctx, db, []byte("w")), fdbqueue.ErrConfigMismatch)
	}
}

// TestConfigChangeAfterABumpInTheTransactionConflicts: in a transaction
// that bumped the metadata version (here, a Reconfigure of another queue),
// an operation cannot read the metadata version (accessed_unreadable,
// config_bumps.go) and conflicts on the queue's epoch key instead; a
// change of that queue's record committed meanwhile adds to the epoch key,
// so the operation does not commit under the old record. No claim
// conflict covers this: the transaction wrote only the other queue's
// record. Without it the item would be enqueued raw into a queue now
// stored as TupleValues.
func TestConfigChangeAfterABumpInTheTransactionConflicts(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	other := mustQueue(t, "bump-epoch-other")
	sub := mustSubspace(t, "bump-epoch")
	raw, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	tup, err := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	require.NoError(t, err)
	for _, q := range []*fdbqueue.Queue{other, raw} { // both have records
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, other.Reconfigure(ctx, tr), "bumps the metadata version in tr")
	require.NoError(t, raw.Enqueue(ctx, tr, []byte("y")))
	require.NoError(t, tup.Reconfigure(ctx, db))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the enqueue ran under the record replaced meanwhile")
	empty, err := tup.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
}
