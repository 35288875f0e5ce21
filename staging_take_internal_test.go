package fdbqueue

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestStagedBatchTakeConflictsWithAnItemPutAhead: in batch mode the
// oldest waiter takes the head with a plain dequeue's read conflict range,
// from the start of the items to the item it takes (takeItem's fromHead;
// the design's "take" in staging_line.go). An item put back ahead of it
// meanwhile, at its original key, as an expired result's item is
// (putBack), then makes the take conflict (a write inside a read conflict
// range after the read version fails the commit: ConflictBatch::
// checkReadConflictRanges, fdbserver/SkipList.cpp), and a retry sees it;
// with a conflict on its own item only, the take would commit with an
// older item at the head, a dequeue out of FIFO order.
func TestStagedBatchTakeConflictsWithAnItemPutAhead(t *testing.T) {
	ctx := context.Background()
	db, q := stagedOnMemdb(t, "take-ahead", StagingConfig{Serving: ServeInBatches})
	s := q.stage
	require.False(t, s.stable, "batch mode")
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y")}))
	items, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(q.items, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, items, 2)
	x, y := items[0], items[1]

	// x is handed to a request (a fulfilment moved it into a result):
	// y is the head.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Clear(x.Key)
		return nil
	}))

	// The oldest waiter's step: it reads the head (a snapshot read, as
	// readItems does) and takes y.
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil), rid: []byte("rid")}
	w.resKey = s.resKey(w.rid)
	w.reqKey = append(bytes.Clone(s.liveRange().Begin), 0x01)
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	head, err := tr.Snapshot().GetRange(q.items, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, y.Key, head[0].Key)
	out, err := w.takeAt(tr, head[0])
	require.NoError(t, err)
	require.Equal(t, "y", string(out.val))

	// Before it commits, the result expires and x goes back to its key,
	// ahead of y.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		back, err := s.putBack(tr, x.Key, x.Value)
		require.True(t, back)
		return err
	}))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the take read the head up to y, and x was put ahead of it")
}

// TestStagedFastTakeAtItsPlaceIgnoresTheItemsAhead: by place, the one
// plain attempt of a call with a request already in the line takes the
// item at the place behind it, and its read conflict covers that item
// only (takeItem without fromHead): the waiter ahead taking its own item
// meanwhile (clearing it, its request and marker) does not make the
// attempt conflict. Waiters at different places do not conflict
// (ServeByPlace); a conflict range from the head would fail the attempt
// (a write inside a read conflict range after the read version:
// ConflictBatch::checkReadConflictRanges, fdbserver/SkipList.cpp).
func TestStagedFastTakeAtItsPlaceIgnoresTheItemsAhead(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("take-place")), WithVersionstampOrder(), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	s := q.stage
	require.True(t, s.stable, "by place")
	// A request waits in the line (its waiter is elsewhere), then two
	// items arrive: the first is its.
	a := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return a.register(tr, time.Now()) }))
	stamp, err := a.stamp.Get()
	require.NoError(t, err)
	aKey, err := s.reqKeyOf(stamp, a.rid)
	require.NoError(t, err)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a's"), []byte("next")}))
	items, err := kvGetRange(ctx, db, q.items)
	require.NoError(t, err)
	require.Len(t, items, 2)

	var once sync.Once
	SetStagingHook(q, func(point string) {
		if point != "commit fast" {
			return
		}
		once.Do(func() { // the waiter ahead takes its item first
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				tr.Clear(items[0].Key)
				tr.Clear(aKey)
				tr.Clear(a.resKey)
				return nil
			}))
		})
	})
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "next", string(v), "the item at its place")
	fast := q.StagingStats().Phases[phaseFast]
	require.EqualValues(t, 1, fast.Commits)
	require.Zero(t, fast.Conflicts, "the take ahead did not touch its conflict range")
}

// TestStagedPlainAttemptCountsExpiredRequestsInItsLook: by place, every
// request in the line holds a place, expired or not, until a transaction
// drops it, so the one plain attempt runs only when the read of the line
// (limited to two requests) saw all of it. With an expired request and two
// live ones waiting, a call must not take the third item, due to the
// third request: it files a request, the expired one is dropped (its item
// moved to the tail), and the call gets the item at its own place.
func TestStagedPlainAttemptCountsExpiredRequestsInItsLook(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("place-expired")), WithVersionstampOrder(), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	s := q.stage
	require.True(t, s.stable, "by place")
	for _, at := range []time.Time{time.Now().Add(-time.Hour), time.Now(), time.Now()} { // the first has expired
		w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return w.register(tr, at) }))
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}))
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "d", string(v), "b and c are due to the live requests ahead")
}
