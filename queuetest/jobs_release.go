package queuetest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// jobReleaseChecks: JobQueue.Release gives a lease back without counting
// its attempt, as its doc comment says.
func jobReleaseChecks() []check {
	return []check{
		{"Release/KeepsAttempts", testJobReleaseKeepsAttempts},
		{"Release/Delay", testJobReleaseDelay},
		{"Release/LeaseLost", testJobReleaseLeaseLost},
		{"Release/InCallerTransaction", testJobReleaseInCaller},
		{"Release/ConflictsOnItsJob", testJobReleaseConflicts},
		{"Release/WakesLeaseWait", testJobReleaseWakesLeaseWait},
	}
}

// testJobReleaseKeepsAttempts: a released job is due at once with the
// attempt its lease counted given back: a job with MaxAttempts 1, released
// twice, is leased a third time as attempt 1 (not buried), and its next
// Nack, its real last attempt, dead-letters it. The last Nack's reason,
// priority, unique key and value are kept.
func testJobReleaseKeepsAttempts(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "release-attempts", fdbqueue.JobQueueConfig{Choice: 1})
	once := f.add(t, q, fdbqueue.Job{Value: []byte("once"), MaxAttempts: 1, Priority: 7, UniqueKey: "u"})
	for i := range 2 {
		l := f.leaseOne(t, q, time.Minute)
		require.Equal(t, once.ID, l.JobID)
		require.Equal(t, 1, l.Attempt, "release %d gave the attempt back", i)
		f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})
		require.NoError(t, q.Release(f.ctx, f.db, l, 0))
		f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "due again at once, not leased")
	}
	dup := f.add(t, q, fdbqueue.Job{Value: []byte("dup"), UniqueKey: "u"})
	require.True(t, dup.Duplicate, "the released job still holds its unique key")
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, int32(7), l.Priority)
	require.Equal(t, "u", l.UniqueKey)
	requireValue(t, []byte("once"), l.Value)
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Reason: "real failure"})
	require.NoError(t, err)
	require.True(t, dead, "the one attempt, used by a Nack, dead-letters the job")
	f.requireStats(t, q, fdbqueue.JobStats{Dead: 1})

	q2, _ := f.jobQueue(t, "release-reason", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 3})
	f.add(t, q2, fdbqueue.Job{Value: []byte("flaky")})
	_, err = q2.Nack(f.ctx, f.db, f.leaseOne(t, q2, time.Minute), fdbqueue.NackOptions{Delay: -1, Reason: "r1"})
	require.NoError(t, err)
	l = f.leaseOne(t, q2, time.Minute)
	require.Equal(t, 2, l.Attempt)
	require.NoError(t, q2.Release(f.ctx, f.db, l, 0))
	l = f.leaseOne(t, q2, time.Minute)
	require.Equal(t, 2, l.Attempt, "the Nack's attempt stays counted, the release's does not")
	require.Equal(t, "r1", l.Reason, "Release keeps the last Nack's reason")
	require.NoError(t, q2.Ack(f.ctx, f.db, l))
	f.requireNoJobKeys(t, q2)
}

// testJobReleaseDelay: a release with a delay makes the job due exactly
// then (never a microsecond early), and a negative delay, as Nack's,
// makes it due at once.
func testJobReleaseDelay(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "release-delay", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("snoozed")})
	l := f.leaseOne(t, q, time.Minute)
	require.NoError(t, q.Release(f.ctx, f.db, l, 10*time.Minute))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1})
	c.Advance(10*time.Minute - time.Microsecond)
	f.requireNothingDue(t, q, "a microsecond before the release's delay ends")
	c.Advance(time.Microsecond)
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt)
	require.NoError(t, q.Release(f.ctx, f.db, l, -time.Hour))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "a negative delay: due at once")
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt)
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireNoJobKeys(t, q)
}

// testJobReleaseLeaseLost: Release fails with ErrLeaseLost, writing
// nothing, once the lease is no longer the job's: released already,
// acked, or expired and leased again by another consumer. A lease whose
// deadline passed but whose job nobody leased again is still released,
// as is a copy of the lease from before an Extend.
func testJobReleaseLeaseLost(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "release-lost", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("a")})

	l := f.leaseOne(t, q, time.Minute)
	require.NoError(t, q.Release(f.ctx, f.db, l, time.Hour))
	require.ErrorIs(t, q.Release(f.ctx, f.db, l, 0), fdbqueue.ErrLeaseLost, "released twice")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1}, "the second release wrote nothing")
	c.Advance(time.Hour)

	l = f.leaseOne(t, q, time.Minute)
	c.Advance(2 * time.Minute)
	require.NoError(t, q.Release(f.ctx, f.db, l, 0), "expired, but nobody leased it again")
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt)

	c.Advance(2 * time.Minute)
	other := f.leaseOne(t, q, time.Minute)
	require.Equal(t, l.JobID, other.JobID)
	require.Equal(t, 2, other.Attempt, "an expired lease keeps its attempt")
	require.ErrorIs(t, q.Release(f.ctx, f.db, l, 0), fdbqueue.ErrLeaseLost, "leased again by another consumer")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "nothing written")

	extended, err := q.Extend(f.ctx, f.db, other, time.Hour)
	require.NoError(t, err)
	require.NoError(t, q.Release(f.ctx, f.db, other, 0), "a copy from before an Extend")
	_, err = q.Extend(f.ctx, f.db, extended, time.Hour)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "released")
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 2, l.Attempt, "the expired lease's attempt stays counted, the released one's was given back")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	require.ErrorIs(t, q.Release(f.ctx, f.db, l, 0), fdbqueue.ErrLeaseLost, "acked")
	f.requireNoJobKeys(t, q)
}

// testJobReleaseInCaller: a Release in the caller's transaction commits
// with the caller's write, and rolls back with it when the caller's
// function fails.
func testJobReleaseInCaller(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "release-caller", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("a")})
	l := f.leaseOne(t, q, time.Minute)
	mark := f.key("release-mark")
	boom := errors.New("caller fails")
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(mark, []byte("rolled back"))
		if err := q.Release(f.ctx, tr, l, 0); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Nil(t, f.get(t, mark))
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "the release rolled back with the caller")

	id := c.opID()
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(mark, []byte("released"))
		return q.Release(f.ctx, tr, l, 0, fdbqueue.WithOpID(id))
	}))
	require.Equal(t, []byte("released"), f.get(t, mark))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "released with the caller's write")
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt)
}

// testJobReleaseConflicts: a Release conflicts with an Ack (or another
// operation) of the same job that committed after its read, so the job
// is never both acked and released; it does not conflict with a Lease of
// another job. FoundationDB fails the second commit of a conflicting pair
// with not_committed (1020, flow/include/flow/error_definitions.h).
func testJobReleaseConflicts(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "release-conflicts", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("a"), Priority: 2})
	f.add(t, q, fdbqueue.Job{Value: []byte("b"), Priority: 1})
	la := f.leaseOne(t, q, time.Minute)
	requireValue(t, []byte("a"), la.Value)
	pair := func(first, second func(kv.Transaction) error) error {
		t.Helper()
		tr1, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		tr2, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		require.NoError(t, first(tr1))
		require.NoError(t, second(tr2))
		require.NoError(t, tr1.Commit())
		return tr2.Commit()
	}
	var lb fdbqueue.Lease
	err := pair(func(tr kv.Transaction) error { return q.Release(f.ctx, tr, la, time.Hour) }, func(tr kv.Transaction) error {
		ls, err := q.Lease(f.ctx, tr, 1, time.Minute)
		if err == nil {
			lb = ls[0]
		}
		return err
	})
	require.NoError(t, err, "a Release and a Lease of another job do not conflict")
	requireValue(t, []byte("b"), lb.Value)
	err = pair(func(tr kv.Transaction) error { return q.Ack(f.ctx, tr, lb) },
		func(tr kv.Transaction) error { return q.Release(f.ctx, tr, lb, 0) })
	require.ErrorIs(t, err, kv.ErrNotCommitted, "a Release that read the job before its Ack committed")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1}, "a released, b acked only")
}

// testJobReleaseWakesLeaseWait: a LeaseWait asleep (its timer armed for
// the held job's deadline, an hour away) is woken at once by a Release
// of that job from another transaction, with the clock standing still.
func testJobReleaseWakesLeaseWait(t *testing.T, f *fixture) {
	c := newJobClock()
	q, _ := f.jobQueue(t, "release-wait", fdbqueue.JobQueueConfig{Choice: 1, Clock: c})
	f.add(t, q, fdbqueue.Job{Value: []byte("held")})
	held := f.leaseOne(t, q, time.Hour)
	c.Armed = make(chan time.Duration, 16)
	w := f.startLeaseWait(t, q, 1, time.Minute)
	w.asleep(t, c, "before the Release") // its watch is set, its timer armed
	require.NoError(t, q.Release(f.ctx, f.db, held, 0))
	ls := w.woken(t, "the Release")
	require.Len(t, ls, 1)
	require.Equal(t, held.JobID, ls[0].JobID, "woken by the Release")
	require.Equal(t, 1, ls[0].Attempt)
}
