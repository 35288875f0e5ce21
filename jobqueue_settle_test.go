package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// interruptedLease runs a Lease of one job under a new ID whose commit is
// held in flight while its context ends (interruptCommit: FoundationDB's
// commit request goes on after a cancellation, RYWImpl::commit in
// fdbclient/ReadYourWrites.actor.cpp), checks that it failed maybe
// committed, and returns the ID and the function that lands the commit.
func interruptedLease(t *testing.T, db *memdb.DB, q *fdbqueue.JobQueue) (fdbqueue.OpID, func()) {
	t.Helper()
	id := fdbqueue.NewOpID()
	release, err := interruptCommit(t, db, func(ctx context.Context) error {
		_, err := q.Lease(ctx, db, 1, time.Minute, fdbqueue.WithOpID(id))
		return err
	})
	require.True(t, kv.MaybeCommitted(err), "the lease was interrupted in its commit: %v", err)
	return id, release
}

// SettleLease after a Lease whose commit landed returns that call's lease,
// and a Lease under the ID afterwards returns the same one.
func TestSettleLeaseReturnsTheLeaseThatLanded(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "settle-landed", fdbqueue.JobQueueConfig{Choice: 1})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	id, land := interruptedLease(t, db, q)
	land()
	db.AwaitLateLandings()

	ls, err := q.SettleLease(context.Background(), db, id)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, x.ID, ls[0].JobID)
	require.Equal(t, 1, ls[0].Attempt)
	again, err := q.Lease(context.Background(), db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, ls[0].ID, again[0].ID, "the ID settles once: Lease under it replays the same lease")
	require.NoError(t, q.Ack(context.Background(), db, ls[0]))
	require.Zero(t, mustStats(t, db, q).Queued)
}

// SettleLease before a Lease's interrupted commit lands leases nothing,
// touches no job, and makes the commit conflict when it lands: both jobs
// keep their places (x due before y) and no attempt is counted. A Lease
// under the ID, which leases anew when the first call did not commit, would
// have taken x, and releasing it would have put it behind y.
func TestSettleLeaseOfALeaseThatDidNotLandTakesNothing(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "settle-not-landed", fdbqueue.JobQueueConfig{Choice: 1})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	y := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y")})
	id, land := interruptedLease(t, db, q)

	ls, err := q.SettleLease(context.Background(), db, id)
	require.NoError(t, err)
	require.Empty(t, ls, "the lease had not landed: nothing to return, and nothing leased")
	land() // it read the record key SettleLease wrote, after its read version: the resolver fails it
	db.AwaitLateLandings()

	st := mustStats(t, db, q)
	require.Equal(t, int64(2), st.Queued)
	require.Equal(t, int64(2), st.Due, "neither job is leased")
	_, err = q.Lease(context.Background(), db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the ID is settled as having leased nothing")
	got := mustLease(t, db, q, 2, time.Minute)
	require.Equal(t, []fdbqueue.JobID{x.ID, y.ID}, []fdbqueue.JobID{got[0].JobID, got[1].JobID}, "x is still due before y")
	require.Equal(t, []int{1, 1}, []int{got[0].Attempt, got[1].Attempt}, "no attempt counted")
}

// Under an ID no Lease ran with, SettleLease leases nothing either, and
// the ID cannot lease afterwards: it names the settled call.
func TestSettleLeaseUnderAnUnusedIDLeasesNothing(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "settle-unused", fdbqueue.JobQueueConfig{})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	id := fdbqueue.NewOpID()
	ls, err := q.SettleLease(context.Background(), db, id)
	require.NoError(t, err)
	require.Empty(t, ls)
	require.Equal(t, int64(1), mustStats(t, db, q).Due)
	_, err = q.Lease(context.Background(), db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

func TestSettleLeaseBadInput(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "settle-bad", fdbqueue.JobQueueConfig{})
	_, err := q.SettleLease(ctx, nil, fdbqueue.NewOpID())
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "nil transactor")
	_, err = q.SettleLease(ctx, db, fdbqueue.OpID{})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "the zero OpID")
	_, err = q.SettleLease(ctx, db, fdbqueue.OpIDAt(time.Now().Add(-2*fdbqueue.DefaultJournalRetention)))
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
	nj := mustJobQueue(t, "settle-nojournal", fdbqueue.JobQueueConfig{}, fdbqueue.WithoutIdempotency())
	_, err = nj.SettleLease(ctx, db, fdbqueue.NewOpID())
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "no journal to settle with")
}

// SettleLease's record is kept only as any call's is: given a Database,
// the handle's next operation clears it, and a Lease under the ID after
// that leases anew (the doc said a later Lease under the ID returned the
// same leases, none, once and for all). The interrupted Lease's commit,
// landing after that clear, still conflicts: it read the record key,
// which the settling call and the clear wrote after its read version
// (the resolver checks a commit's read conflict ranges against every
// write committed since its read version, fdbserver/Resolver.actor.cpp).
func TestSettleLeaseRecordIsKeptAsAnyCallsIs(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "settle-kept", fdbqueue.JobQueueConfig{Choice: 1})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	id, land := interruptedLease(t, db, q)
	ls, err := q.SettleLease(ctx, db, id)
	require.NoError(t, err)
	require.Empty(t, ls)
	_, err = q.Lease(ctx, db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the record is kept: replayed as leasing nothing")

	y := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y")}) // carries the clear of SettleLease's record
	land()
	db.AwaitLateLandings()
	require.Equal(t, int64(2), mustStats(t, db, q).Due, "the late commit conflicted: nothing leased")

	again, err := q.Lease(ctx, db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.NoError(t, err, "the record cleared, a Lease under the ID leases anew")
	require.Equal(t, x.ID, again[0].JobID)
	require.NoError(t, q.Ack(ctx, db, again[0]))
	got := mustLease(t, db, q, 2, time.Minute)
	require.Len(t, got, 1)
	require.Equal(t, y.ID, got[0].JobID)
}

// The ID a JobQueue logs for a Lease that failed maybe committed names
// that Lease: a call of another kind under it (an Add) fails with
// ErrInvalidArgument and writes nothing, as under an ID of the caller's
// whose marker names another kind, rather than take the Lease's record
// for its own; SettleLease under it then settles the Lease. (A fresh ID's
// call writes no marker: the queue value remembers the kind it logged.)
func TestLoggedLeaseIDRefusesAnotherKind(t *testing.T) {
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			q := mustJobQueue(t, "logged-kind", fdbqueue.JobQueueConfig{Choice: 1}, logger)
			x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
			land := f.fail(t, db, func(ctx context.Context) error {
				_, err := q.Lease(ctx, db, 1, time.Minute)
				return err
			})
			id := logs.take(t)
			_, err := q.Add(context.Background(), db, fdbqueue.Job{Value: []byte("y")}, fdbqueue.WithOpID(id))
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "an Add under the Lease's logged ID")
			st := mustStats(t, db, q)
			require.Equal(t, int64(1), st.Queued+st.Leased, "nothing added")

			ls, err := q.SettleLease(context.Background(), db, id)
			require.NoError(t, err)
			land()
			db.AwaitLateLandings()
			if f.applied {
				require.Len(t, ls, 1, "the Lease applied")
				require.Equal(t, x.ID, ls[0].JobID)
				require.NoError(t, q.Ack(context.Background(), db, ls[0]))
				require.Zero(t, mustStats(t, db, q).Queued)
				return
			}
			require.Empty(t, ls)
			require.Equal(t, int64(1), mustStats(t, db, q).Due, "the job was not leased")
		})
	}
}

// A Lease replayed from its journal record after commit_unknown_result
// returns a lease that is still held although its job's record moved
// since: extended in the Lease's own transaction here, so that the record
// is no longer at the key of the deadline the journal recorded. The replay
// read that key only, found nothing, and left the lease out: the retry got
// ErrEmpty, and the job stayed leased to nobody for the hour of the
// extension, its attempt spent.
func TestLeaseReplayFindsALeaseExtendedSince(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "replay-extended", fdbqueue.JobQueueConfig{Clock: clock})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	id := fdbqueue.NewOpID()
	db.FailNextCommit(kv.ErrCommitUnknownResult, true) // applied, reported unknown
	var held fdbqueue.Lease
	attempts := 0
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		attempts++
		ls, err := q.Lease(ctx, tr, 1, time.Minute, fdbqueue.WithOpID(id))
		if err != nil {
			return err
		}
		held, err = q.Extend(ctx, tr, ls[0], time.Hour)
		return err
	})
	require.Equal(t, 2, attempts, "the first commit was reported unknown")
	require.NoError(t, err, "the retry finds the lease it took, still held")
	require.Equal(t, x.ID, held.JobID)
	require.Equal(t, 1, held.Attempt)
	require.True(t, clock.Now().Add(time.Hour).Equal(held.Deadline), "the retry's Extend from the replayed lease: %v", held.Deadline)
	require.NoError(t, q.Ack(ctx, db, held))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// Extend has no journal: retried after commit_unknown_result whose commit
// applied, with the job cancelled in between (here while the first
// attempt's outcome is settled, as another client would), it fails with
// ErrLeaseLost although its first attempt extended the lease, as its doc
// says; the job is gone, nothing of it left.
func TestExtendRetriedAfterACancelFindsTheLeaseLost(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "extend-cancelled", fdbqueue.JobQueueConfig{Clock: clock})
	x := mustAdd(t, raw, q, fdbqueue.Job{Value: []byte("x")})
	ls, err := q.Lease(ctx, raw, 1, time.Minute)
	require.NoError(t, err)
	clock.Advance(time.Second)
	var seen time.Time
	db := &betweenDB{DB: raw, between: func() {
		info, err := q.Job(ctx, raw, x.ID)
		require.NoError(t, err)
		seen = info.DueAt
		require.NoError(t, q.Cancel(ctx, raw, x.ID))
	}}
	raw.FailNextCommit(kv.ErrCommitUnknownResult, true) // applied, reported unknown
	_, err = q.Extend(ctx, db, ls[0], time.Hour)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	require.True(t, clock.Now().Add(time.Hour).Equal(seen), "the first attempt extended the lease: %v", seen)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, raw, q))
}

// A Lease under the ID of a Lease whose commit is in flight, on a handle
// whose clock is behind (within what JobQueueConfig.Clock allows), finds
// no job due yet and returns ErrEmpty. That answer must hold: the first
// commit, landing later, must conflict rather than lease the job under
// the ID. It read the key its record goes to, so the call that found
// nothing writes a conflict there and commits it (a commit of a write
// conflict range alone is not read-only: Transaction::commitMutations,
// fdbclient/NativeAPI.actor.cpp).
func TestLeaseUnderAnIDThatFindsNothingFencesTheFirstCommit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	behind := queuetest.NewClock(clock.Now().Add(-2 * time.Second))
	q := mustJobQueue(t, "lease-fence", fdbqueue.JobQueueConfig{Clock: clock})
	late := mustJobQueue(t, "lease-fence", fdbqueue.JobQueueConfig{Clock: behind})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")}) // due now, by q's clock
	id, land := interruptedLease(t, db, q)

	_, err := late.Lease(ctx, db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "x is not due yet by this handle's clock")
	land()
	db.AwaitLateLandings()
	st := mustStats(t, db, q)
	require.Equal(t, int64(1), st.Due, "the first commit leased x after the call under its ID found nothing")
}
