package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// A Cancel interrupted in its commit (held in flight while its context
// ends: interruptCommit) fails with an *UnknownResultError; settled under
// its ID before the held commit lands, it cancels the job, and the late
// commit then conflicts instead of applying a second time (it read the
// journal record key that the settling call wrote after its read
// version; FoundationDB's resolver fails such a commit,
// fdbserver/Resolver.actor.cpp, and goes on with an interrupted commit,
// RYWImpl::commit in fdbclient/ReadYourWrites.actor.cpp). Applied twice,
// its counter adds would count the job out twice: Stats would no longer
// match the job left.
func TestJobCancelInterruptedCommitLandsOnce(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "cancel-interrupted", fdbqueue.JobQueueConfig{})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k"})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y")})
	mustLease(t, db, q, 2, 0) // both leased: the cancel's counter adds are those of a leased job
	land, err := interruptCommit(t, db, func(ctx context.Context) error { return q.Cancel(ctx, db, x.ID) })
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	var ure *fdbqueue.UnknownResultError
	require.ErrorAs(t, err, &ure)
	require.Equal(t, "cancel", ure.Op)

	require.NoError(t, q.Cancel(ctx, db, x.ID, fdbqueue.WithOpID(ure.ID)), "settled: the held commit had not landed, so this call cancels")
	land()
	db.AwaitLateLandings()
	require.Equal(t, fdbqueue.JobStats{Leased: 1}, mustStats(t, db, q), "the job cancelled once, the other still counted")
	require.NoError(t, q.Cancel(ctx, db, x.ID, fdbqueue.WithOpID(ure.ID)), "the ID settles once: its record answers")
	require.ErrorIs(t, q.Cancel(ctx, db, x.ID), fdbqueue.ErrJobNotFound)
}

// Cancel clears the job's unique key only while the key names the job
// (a compare-and-clear): a key that names another job, which the queue
// itself never leaves (Add and Requeue write it only when free), is kept.
func TestJobCancelKeepsAUniqueKeyNamingAnotherJob(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "cancel-unique-other", fdbqueue.JobQueueConfig{})
	r := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k"})
	uk, err := q.Subspace().Pack(tuple.Tuple{"u", []byte("k")})
	require.NoError(t, err)
	require.Equal(t, r.ID[:], readKey(t, db, uk), "the key layout: (\"u\", unique key) = job ID")
	other := fdbqueue.JobID{9, 9, 9}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(uk, other[:]); return nil }))
	require.NoError(t, q.Cancel(ctx, db, r.ID))
	require.Equal(t, other[:], readKey(t, db, uk), "the key names another job: kept")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// Job reports an index entry that points outside the job records, or a
// job whose value is missing, as keys the queue did not write
// (ErrForeignKey), rather than as a job or as no job.
func TestJobForeignEntries(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "job-foreign", fdbqueue.JobQueueConfig{})
	r := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	pack := func(elems ...any) []byte {
		k, err := q.Subspace().Pack(tuple.Tuple(elems))
		require.NoError(t, err)
		return k
	}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(pack("v", r.ID[:])); return nil }))
	_, err := q.Job(ctx, db, r.ID)
	var fe *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fe, "a job without its value")
	require.Equal(t, pack("v", r.ID[:]), fe.Key)

	stray := fdbqueue.JobID{7}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(pack("x", stray[:]), pack("z", "not a record"))
		return nil
	}))
	_, err = q.Job(ctx, db, stray)
	require.ErrorAs(t, err, &fe, "an index entry pointing elsewhere")
	require.Equal(t, pack("x", stray[:]), fe.Key)
	require.ErrorIs(t, q.Cancel(ctx, db, stray), fdbqueue.ErrJobNotFound, "Cancel finds no job in the queue there")
}
