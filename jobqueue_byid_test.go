package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/queuetest"
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

// An index entry of an ID that names another job's record (in the queue
// or dead), which the queue never writes (("x", id) holds the key of id's
// own record), is no job of that ID: Job reports the entry as foreign,
// and Cancel, DeleteDead and Requeue find no job, leaving the job whose
// record it names alone. They took that record for the ID's and removed
// it, leaving that job's value and index behind and Stats without it.
func TestJobIndexEntryNamingAnotherJob(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "job-index-other", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock})
	queued, dead := addQueuedAndDead(t, db, q, clock, fdbqueue.Job{Value: []byte("queued"), UniqueKey: "k"})
	pack := func(elems ...any) []byte {
		k, err := q.Subspace().Pack(tuple.Tuple(elems))
		require.NoError(t, err)
		return k
	}
	strayQ, strayD := fdbqueue.JobID{7}, fdbqueue.JobID{8}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(pack("x", strayQ[:]), readKey(t, db, pack("x", queued.ID[:])))
		tr.Set(pack("v", strayQ[:]), []byte("stray"))
		tr.Set(pack("x", strayD[:]), readKey(t, db, pack("x", dead.ID[:])))
		tr.Set(pack("v", strayD[:]), []byte("stray"))
		return nil
	}))
	want := fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 1}
	require.Equal(t, want, mustStats(t, db, q))

	for _, stray := range []fdbqueue.JobID{strayQ, strayD} {
		_, err := q.Job(ctx, db, stray)
		var fe *fdbqueue.ForeignKeyError
		require.ErrorAs(t, err, &fe, "Job(%s): an entry naming another job's record", stray)
		require.Equal(t, pack("x", stray[:]), fe.Key)
	}
	require.ErrorIs(t, q.Cancel(ctx, db, strayQ), fdbqueue.ErrJobNotFound)
	require.ErrorIs(t, q.DeleteDead(ctx, db, strayD), fdbqueue.ErrJobNotFound)
	require.ErrorIs(t, q.Requeue(ctx, db, strayD), fdbqueue.ErrJobNotFound)

	require.Equal(t, want, mustStats(t, db, q), "the jobs whose records the entries name are untouched")
	info, err := q.Job(ctx, db, queued.ID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobQueued, info.State)
	require.Equal(t, []byte("queued"), info.Value)
	info, err = q.Job(ctx, db, dead.ID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobDead, info.State)
	require.True(t, mustAdd(t, db, q, fdbqueue.Job{UniqueKey: "k"}).Duplicate, "the queued job keeps its unique key")
}

// Requeue fails with ErrUniqueKeyHeld only when the job's unique key names
// another job: a key that already names the dead job itself (the queue
// frees the key when the job dies, so only another writer leaves it so)
// is the job's own, and Requeue puts the job back, the key naming it.
func TestJobRequeueUniqueKeyNamingTheJobItself(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "requeue-unique-self", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock})
	r := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k", MaxAttempts: 1})
	l := mustLease(t, db, q, 1, time.Minute)[0]
	gone, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, gone, "dead after its only attempt")
	uk, err := q.Subspace().Pack(tuple.Tuple{"u", []byte("k")})
	require.NoError(t, err)
	require.Nil(t, readKey(t, db, uk), "the key is freed when the job dies")
	setRaw(t, db, uk, r.ID[:])

	require.NoError(t, q.Requeue(ctx, db, r.ID), "the key names the job itself: not held by another")
	require.Equal(t, r.ID[:], readKey(t, db, uk))
	info, err := q.Job(ctx, db, r.ID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobQueued, info.State)
	require.Equal(t, 0, info.Attempts)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q))
}

// An index entry that names the job's own record key, a record that is no
// longer there (the queue clears the entry with the record, so only
// another writer leaves it so), is no job: Job, Cancel, Requeue and
// DeleteDead fail with ErrJobNotFound, as for an ID never added, rather
// than taking the missing record for a malformed one.
func TestJobIndexEntryOfAMissingRecord(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "job-index-missing", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock})
	queued, dead := addQueuedAndDead(t, db, q, clock, fdbqueue.Job{Value: []byte("queued")})
	for _, id := range []fdbqueue.JobID{queued.ID, dead.ID} {
		x, err := q.Subspace().Pack(tuple.Tuple{"x", id[:]})
		require.NoError(t, err)
		rec := readKey(t, db, x)
		require.NotNil(t, readKey(t, db, rec), "the entry names the job's record")
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(rec); return nil }))
		_, err = q.Job(ctx, db, id)
		require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "Job(%s)", id)
	}
	require.ErrorIs(t, q.Cancel(ctx, db, queued.ID), fdbqueue.ErrJobNotFound)
	require.ErrorIs(t, q.Requeue(ctx, db, dead.ID), fdbqueue.ErrJobNotFound)
	require.ErrorIs(t, q.DeleteDead(ctx, db, dead.ID), fdbqueue.ErrJobNotFound)
}

// addQueuedAndDead adds the job queued, then a job that dies at once
// (leased and nacked on its only attempt, due before the other so the
// lease takes it).
func addQueuedAndDead(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, clock *queuetest.Clock, queued fdbqueue.Job) (fdbqueue.AddResult, fdbqueue.AddResult) {
	t.Helper()
	qr := mustAdd(t, db, q, queued)
	dead := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("dead"), MaxAttempts: 1, RunAt: clock.Now().Add(-time.Second)})
	l := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, dead.ID, l.JobID)
	gone, err := q.Nack(context.Background(), db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, gone)
	return qr, dead
}
