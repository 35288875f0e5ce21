package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// TestStagedPQSettleUnderLoggedID: a staged PopMax (or PopMin) that fails
// maybe committed, under an ID of its own making, is settled by a PopMax
// (PopMin) given that ID on the same PriorityQueue value, which returns the item the
// first call's take recorded. The handle remembers the kind of the
// operation it logged (a pop max, a pop min) so that a call of another kind under the
// ID is refused; the staged settling call must be of that kind when it is
// checked, not only once it starts.
//
// The first call's take of a is held in flight while its context ends,
// and its cleanup's commit fails (an error its retry loop does not retry):
// nothing fences the take, which lands once released.
func TestStagedPQSettleUnderLoggedID(t *testing.T) {
	for _, side := range []struct {
		name string
		pop  func(pq *fdbqueue.PriorityQueue, ctx context.Context, t kv.Transactor, opts ...fdbqueue.OpOption) (fdbqueue.Item, error)
	}{
		{"max", (*fdbqueue.PriorityQueue).PopMax},
		{"min", (*fdbqueue.PriorityQueue).PopMin},
	} {
		t.Run(side.name, func(t *testing.T) {
			testStagedPQSettleUnderLoggedID(t, side.pop)
		})
	}
}

func testStagedPQSettleUnderLoggedID(t *testing.T, pop func(pq *fdbqueue.PriorityQueue, ctx context.Context, t kv.Transactor, opts ...fdbqueue.OpOption) (fdbqueue.Item, error)) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "pq-settle-logged")
	pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err)
	require.NoError(t, pq.Push(ctx, db, []byte("warm-up"), 1))
	it, err := pop(pq, ctx, db)
	require.NoError(t, err)
	require.Equal(t, "warm-up", string(it.Value))
	require.NoError(t, pq.Push(ctx, db, []byte("a"), 1))

	held, release := db.HoldNextCommitLate()
	defer release()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := pop(pq, cctx, db)
		done <- err
	}()
	recvWithin(t, held, "the take of a in flight")
	db.FailNextCommit(kv.ErrTransactionTooLarge, false) // the cleanup's
	cancel()
	err = recvWithin(t, done, "the cancelled PopMax's return")
	require.True(t, kv.MaybeCommitted(err), "the cleanup failed: %v", err)
	var ure *fdbqueue.UnknownResultError
	require.ErrorAs(t, err, &ure)
	release() // the take lands

	it, err = pop(pq, ctx, db, fdbqueue.WithOpID(ure.ID))
	require.NoError(t, err, "settled under the logged ID")
	require.Equal(t, "a", string(it.Value))
	_, err = pop(pq, ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	requireClean(t, db, sub)
}
