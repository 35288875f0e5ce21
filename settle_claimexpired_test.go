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

// A staged DequeueWait under an ID of the caller's is served by a helper
// (x in its result key); it collects with its commit held in flight while
// its context ends, and its cleanup's commit fails: the call fails maybe
// committed. A settling DequeueWait under the ID files a request (the
// queue is empty: x is in the first call's result key), stalls past the
// claim timeout, and another consumer drops its request (by place moving
// y, due to it, to the tail; in batches taking y itself), without
// expiring x's result. The settling call resumes, finds its request gone
// and fails with ErrClaimExpired, "took nothing", committing at most a
// marker clear: nothing the first call's collect read. The collect then
// lands, and the operation took x after all: a later call under the ID
// replays x, which the caller was told was not taken. The settling step
// must write a conflict on the ID's record key, which the collect read.
// FoundationDB's commit request goes on after a cancellation
// (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp), as memdb's
// HoldNextCommitLate does. (Found by an audit of the claim expiry paths.)
func TestSettlingClaimExpiredFencesACollectInFlight(t *testing.T) {
	for _, m := range stagingModes {
		// The settling call's request is dropped while it sleeps: its
		// step finds the request and marker gone (staging_waiter.go).
		t.Run(m.name, func(t *testing.T) { testSettleClaimExpired(t, m, false) })
		// Its registration reports commit_unknown_result though it
		// applied, and the call stalls before resolving it: resolve finds
		// no marker past the deadline (staging_register.go).
		t.Run(m.name+"/registration in doubt", func(t *testing.T) { testSettleClaimExpired(t, m, true) })
	}
}

func testSettleClaimExpired(t *testing.T, m stagingMode, regInDoubt bool) {
	ctx := context.Background()
	const timeout = 10 * time.Second
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "settle-claim-expired")
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))
	q0 := stgQueue(t, sub, opts...) // producer, helper, later check
	q1 := stgQueue(t, sub, opts...) // the operation's first call
	q2 := stgQueue(t, sub, opts...) // the settling call
	q3 := stgQueue(t, sub, opts...) // another consumer, which drops the expired request
	id := fdbqueue.NewOpID()

	// The first call is served x, collects it with its commit held in
	// flight, and fails maybe committed: x is in its result key.
	release := holdCollectInFlight(t, db, queueCollectFirstCall(t, db, q0, q1, id))

	// The settling call files a request and stalls before it sleeps.
	hook2, stalled2, resume2 := stallAtArm()
	if regInDoubt {
		hook2, stalled2, resume2 = stallOnceAt("failed")
		db.FailNextCommit(kv.ErrCommitUnknownResult, true) // the registration's
	}
	t.Cleanup(resume2)
	fdbqueue.SetStagingHook(q2, hook2)
	settling := make(chan stagedCall, 1)
	go func() {
		v, err := q2.DequeueWait(ctx, db, fdbqueue.WithOpID(id))
		settling <- stagedCall{v, err}
	}()
	recvWithin(t, stalled2, "the settling call's request filed, the call stalled")

	// y arrives (by place due to the settling call's request); the claim
	// timeout passes; another consumer drops the expired request and gets
	// y. Nobody expires x's result.
	require.NoError(t, q0.Enqueue(ctx, db, []byte("y")))
	clock.Advance(timeout + time.Second)
	fdbqueue.SetStagingBusy(q3, true) // no first look: file a request at once
	v, err := q3.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "y", string(v))

	// The settling call resumes and finds its request gone.
	resume2()
	r := recvWithin(t, settling, "the settling call's return")
	require.ErrorIs(t, r.err, fdbqueue.ErrClaimExpired, "got %q", r.v)
	require.False(t, kv.MaybeCommitted(r.err), "%v", r.err)

	// The collect lands, or conflicts: the settling call said the
	// operation took nothing.
	release()
	vals, err := q0.DequeueBatch(ctx, db, 3, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty,
		"a later call under the ID must agree with ErrClaimExpired (took nothing); got %q: the first call's collect landed after the answer and took x", toStrings(vals))
}
