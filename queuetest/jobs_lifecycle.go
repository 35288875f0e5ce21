package queuetest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// testJobDeadLetter: attempts are counted; a nack of the last attempt, or
// the expiry of the last lease (at the next Lease), moves the job to the
// dead-letter list, which frees its unique key. ListDead lists the dead
// oldest death first, with their fields and a cursor; Requeue puts one
// back with its attempts reset (refused while its unique key is held);
// DeleteDead removes one for good.
// testJobDeadKeepsEarlierReason: a last Nack without a reason
// dead-letters the job with the reason it had (DeadJob.Reason), whereas
// an earlier Nack without one clears it (testJobNack).
func testJobDeadKeepsEarlierReason(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "dead-reason", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 2})
	j := f.add(t, q, fdbqueue.Job{Value: []byte("flaky")})
	l := f.leaseOne(t, q, time.Minute)
	_, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1, Reason: "r1"})
	require.NoError(t, err)
	l = f.leaseOne(t, q, time.Minute)
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, dead, "the last attempt's nack dead-letters the job")
	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, j.ID, ds[0].ID)
	require.Equal(t, "r1", ds[0].Reason, "a last nack without a reason keeps the earlier one")
}

func testJobDeadLetter(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "dead", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 2})
	start := c.Now()
	j1 := f.add(t, q, fdbqueue.Job{Value: []byte("flaky"), UniqueKey: "u", Priority: 5})
	j2 := f.add(t, q, fdbqueue.Job{Value: []byte("once"), MaxAttempts: 1, Priority: 1})
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 2})

	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, j1.ID, l.JobID)
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, 2, l.MaxAttempts, "the queue's MaxAttempts")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Leased: 1})
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1, Reason: "r1"})
	require.NoError(t, err)
	require.False(t, dead, "attempt 1 of 2")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 2})

	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, j1.ID, l.JobID)
	require.Equal(t, 2, l.Attempt, "attempts are counted")
	require.Equal(t, "r1", l.Reason, "the last nack's reason")
	dead, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Reason: "r2"})
	require.NoError(t, err)
	require.True(t, dead, "the last attempt's nack dead-letters the job")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 1})
	require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost, "a dead job's lease")
	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)

	other := f.add(t, q, fdbqueue.Job{Value: []byte("other"), UniqueKey: "u"})
	require.False(t, other.Duplicate, "a dead job does not hold its unique key")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 2, Dead: 1})

	// j2's only attempt expires: the next Lease buries it and takes another.
	l2 := f.leaseOne(t, q, time.Minute)
	require.Equal(t, j2.ID, l2.JobID)
	require.Equal(t, 1, l2.MaxAttempts, "the job's own MaxAttempts")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Leased: 1, Dead: 1})
	c.Advance(2 * time.Minute)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 2, ExpiredLeases: 1, Dead: 1, OldestDue: 2 * time.Minute})
	ls := f.lease(t, q, 2, time.Minute)
	require.Equal(t, []string{"other"}, leaseValues(ls), "the expired last attempt is dead-lettered, not leased")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1, Dead: 2})
	require.ErrorIs(t, q.Ack(f.ctx, f.db, l2), fdbqueue.ErrLeaseLost, "the buried job's lease")
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))
	f.requireStats(t, q, fdbqueue.JobStats{Dead: 2})

	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 2)
	d1, d2 := ds[0], ds[1]
	require.Equal(t, j1.ID, d1.ID, "oldest death first")
	requireValue(t, []byte("flaky"), d1.Value)
	require.Equal(t, 2, d1.Attempts)
	require.Equal(t, 2, d1.MaxAttempts)
	require.Equal(t, int32(5), d1.Priority)
	require.Equal(t, "u", d1.UniqueKey)
	require.Equal(t, "r2", d1.Reason)
	require.Equal(t, start.UnixMicro(), d1.Added.UnixMicro())
	require.Equal(t, start.UnixMicro(), d1.Died.UnixMicro())
	require.Equal(t, j2.ID, d2.ID)
	requireValue(t, []byte("once"), d2.Value)
	require.Equal(t, 1, d2.Attempts)
	require.NotEmpty(t, d2.Reason, "a job buried after its lease expired says why")
	require.Equal(t, c.Now().UnixMicro(), d2.Died.UnixMicro())

	p1, err := q.ListDead(f.ctx, f.db, nil, 1)
	require.NoError(t, err)
	require.Len(t, p1, 1)
	require.Equal(t, j1.ID, p1[0].ID)
	p2, err := q.ListDead(f.ctx, f.db, p1[0].Cursor, 1)
	require.NoError(t, err)
	require.Len(t, p2, 1)
	require.Equal(t, j2.ID, p2[0].ID, "the cursor continues after the job it came with")
	p3, err := q.ListDead(f.ctx, f.db, p2[0].Cursor, 1)
	require.NoError(t, err)
	require.Empty(t, p3)

	holder := f.add(t, q, fdbqueue.Job{Value: []byte("holder"), UniqueKey: "u"})
	require.False(t, holder.Duplicate)
	require.ErrorIs(t, q.Requeue(f.ctx, f.db, j1.ID), fdbqueue.ErrUniqueKeyHeld)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 2}, "a refused requeue changes nothing")
	require.NoError(t, q.Ack(f.ctx, f.db, f.leaseOne(t, q, time.Minute)))

	c.Advance(time.Second)
	require.NoError(t, q.Requeue(f.ctx, f.db, j1.ID))
	require.ErrorIs(t, q.Requeue(f.ctx, f.db, j1.ID), fdbqueue.ErrJobNotFound, "it is no longer dead")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 1})
	dup := f.add(t, q, fdbqueue.Job{Value: []byte("again"), UniqueKey: "u"})
	require.Equal(t, fdbqueue.AddResult{ID: j1.ID, Duplicate: true}, dup, "the requeued job holds its key again")
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, j1.ID, l.JobID)
	require.Equal(t, 1, l.Attempt, "requeue resets the attempts")
	requireValue(t, []byte("flaky"), l.Value)
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireStats(t, q, fdbqueue.JobStats{Dead: 1})

	require.NoError(t, q.DeleteDead(f.ctx, f.db, j2.ID))
	require.ErrorIs(t, q.DeleteDead(f.ctx, f.db, j2.ID), fdbqueue.ErrJobNotFound)
	require.ErrorIs(t, q.Requeue(f.ctx, f.db, j2.ID), fdbqueue.ErrJobNotFound)
	ds, err = q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Empty(t, ds)
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobExpiredLeaseLost: a lease past its deadline whose job nobody
// leased again is still its holder's (extend, ack); once another consumer
// leases the job, the old lease can neither be acked, nacked nor extended
// (ErrLeaseLost), an ack of it in the application's transaction commits
// none of its effects, and the new holder's lease is untouched.
func testJobExpiredLeaseLost(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "expired", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("x")})
	old := f.leaseOne(t, q, time.Minute)
	c.Advance(2 * time.Minute)
	f.requireStats(t, q, fdbqueue.JobStats{Due: 1, ExpiredLeases: 1, OldestDue: time.Minute})
	old, err := q.Extend(f.ctx, f.db, old, time.Minute)
	require.NoError(t, err, "an expired lease nobody took again can be extended")
	require.Equal(t, c.Now().Add(time.Minute).UnixMicro(), old.Deadline.UnixMicro())
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})

	c.Advance(2 * time.Minute)
	cur := f.leaseOne(t, q, time.Minute)
	require.Equal(t, 2, cur.Attempt)
	require.Equal(t, old.JobID, cur.JobID)
	require.NotEqual(t, old.ID, cur.ID, "every lease has a new ID")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})

	_, err = q.Extend(f.ctx, f.db, old, time.Hour)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "extend of a lease taken over")
	require.ErrorIs(t, q.Ack(f.ctx, f.db, old), fdbqueue.ErrLeaseLost, "ack of a lease taken over")
	_, err = q.Nack(f.ctx, f.db, old, fdbqueue.NackOptions{Delay: -1})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "nack of a lease taken over")
	effect := f.key("effect")
	err = f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(effect, []byte("old holder's effect"))
		return q.Ack(f.ctx, tr, old, fdbqueue.WithOpID(c.opID()))
	})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	require.Nil(t, f.get(t, effect), "the effects of an ack that lost its lease do not commit")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "the failed calls changed nothing")
	f.requireNothingDue(t, q, "the new holder's lease still hides the job")

	require.NoError(t, q.Ack(f.ctx, f.db, cur), "the new holder acks")
	f.requireStats(t, q, fdbqueue.JobStats{})

	// An expired lease nobody took again can be acked.
	f.add(t, q, fdbqueue.Job{Value: []byte("y")})
	l := f.leaseOne(t, q, time.Minute)
	c.Advance(time.Hour)
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobExtend: Extend moves the deadline to now + d (0: the queue's
// LeaseDuration), so the job is not due at its old deadline and is at the
// new one; a copy of the lease from before an Extend still works (through
// the job's index), until the job is leased again.
func testJobExtend(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "extend", fdbqueue.JobQueueConfig{Choice: 1, LeaseDuration: 10 * time.Minute})
	f.add(t, q, fdbqueue.Job{Value: []byte("long job")})
	l := f.leaseOne(t, q, time.Minute)
	c.Advance(30 * time.Second)
	l2, err := q.Extend(f.ctx, f.db, l, 5*time.Minute)
	require.NoError(t, err)
	require.Equal(t, c.Now().Add(5*time.Minute).UnixMicro(), l2.Deadline.UnixMicro())
	require.Equal(t, l.ID, l2.ID, "Extend keeps the lease")
	require.Equal(t, l.Attempt, l2.Attempt)
	c.Advance(time.Minute) // past the old deadline
	f.requireNothingDue(t, q, "the extended lease outlives its old deadline")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})

	l3, err := q.Extend(f.ctx, f.db, l2, 0)
	require.NoError(t, err)
	require.Equal(t, c.Now().Add(10*time.Minute).UnixMicro(), l3.Deadline.UnixMicro(), "d = 0 takes LeaseDuration")
	l4, err := q.Extend(f.ctx, f.db, l, 2*time.Minute)
	require.NoError(t, err, "an Extend through a copy from before an earlier Extend")
	require.Equal(t, c.Now().Add(2*time.Minute).UnixMicro(), l4.Deadline.UnixMicro())
	c.Advance(2*time.Minute - time.Microsecond)
	f.requireNothingDue(t, q, "a microsecond before the new deadline")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})
	c.Advance(time.Microsecond)
	f.requireStats(t, q, fdbqueue.JobStats{Due: 1, ExpiredLeases: 1})
	next := f.leaseOne(t, q, time.Minute)
	require.Equal(t, 2, next.Attempt, "due again at the extended deadline")
	for _, stale := range []fdbqueue.Lease{l, l2, l3, l4} {
		_, err := q.Extend(f.ctx, f.db, stale, time.Minute)
		require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	}
	require.NoError(t, q.Ack(f.ctx, f.db, next))
	f.requireStats(t, q, fdbqueue.JobStats{})
}

// testJobNack: Nack with a delay makes the job due exactly then; with no
// delay it takes the backoff RetryBase·2^(attempt−1), capped at RetryMax,
// less a jitter of at most a half; a negative delay makes it due at once.
// The reason goes with the next lease.
func testJobNack(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "nack", fdbqueue.JobQueueConfig{Choice: 1, RetryBase: time.Second, RetryMax: 4 * time.Second})
	f.add(t, q, fdbqueue.Job{Value: []byte("retry me")})
	l := f.leaseOne(t, q, time.Minute)
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: 10 * time.Second, Reason: "busy"})
	require.NoError(t, err)
	require.False(t, dead)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1})
	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "a nacked lease is spent")
	c.Advance(10*time.Second - time.Microsecond)
	f.requireNothingDue(t, q, "before the nack's delay")
	c.Advance(time.Microsecond)
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 2, l.Attempt)
	require.Equal(t, "busy", l.Reason)

	// Attempt 2: backoff 2 s less up to 1 s; attempt 3 (capped): 4 s less up to 2 s.
	for _, b := range []struct{ lo, hi time.Duration }{{time.Second, 2 * time.Second}, {2 * time.Second, 4 * time.Second}} {
		_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
		require.NoError(t, err)
		f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1})
		c.Advance(b.lo - time.Microsecond)
		f.requireNothingDue(t, q, "attempt %d: before the least backoff %v", l.Attempt, b.lo)
		c.Advance(b.hi - b.lo + time.Microsecond)
		next := f.leaseOne(t, q, time.Minute)
		require.Equal(t, l.Attempt+1, next.Attempt)
		require.Equal(t, "busy", next.Reason, "a nack without a reason keeps the last one")
		l = next
	}
	c.Advance(30 * time.Second) // RetryMax is 4 s: attempt 4 backs off 4 s at most, as attempt 3
	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	c.Advance(4 * time.Second)
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 5, l.Attempt, "RetryMax caps the backoff")

	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 6, l.Attempt, "a negative delay: due at once")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireStats(t, q, fdbqueue.JobStats{})
}

// testJobAckInCaller: an Ack in the application's transaction commits
// together with the job's write, or, when that transaction fails after
// the ack, neither commits: the job stays leased and can be acked later.
func testJobAckInCaller(t *testing.T, f *fixture, commit bool) {
	q, c := f.jobQueue(t, "ack-caller", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("job")})
	l := f.leaseOne(t, q, time.Minute)
	effect := f.key("effect")
	id := c.opID()
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(effect, l.JobID[:])
		if err := q.Ack(f.ctx, tr, l, fdbqueue.WithOpID(id)); err != nil {
			return err
		}
		if !commit {
			return errAbort
		}
		return nil
	})
	if commit {
		require.NoError(t, err)
		require.Equal(t, l.JobID[:], f.get(t, effect), "the job's write commits with the ack")
		f.requireStats(t, q, fdbqueue.JobStats{})
		require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost, "the ack committed")
		f.requireNoJobKeys(t, q)
		return
	}
	require.ErrorIs(t, err, errAbort)
	require.Nil(t, f.get(t, effect), "the job's write rolled back")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "an ack in a transaction that rolled back acks nothing")
	f.requireNothingDue(t, q, "the job is still leased")
	require.NoError(t, q.Ack(f.ctx, f.db, l), "the lease is intact")
	f.requireStats(t, q, fdbqueue.JobStats{})
}

// testJobAckCallerCommitFails: the caller's transaction acks and writes,
// and its commit then fails with a conflict (its holder extended the
// lease meanwhile from another transaction, moving the job's record, which
// the ack read): neither the write nor the ack takes effect.
func testJobAckCallerCommitFails(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "ack-fail", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("job")})
	l := f.leaseOne(t, q, time.Minute)
	effect := f.key("effect")
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	require.NoError(t, q.Ack(f.ctx, tr, l))
	tr.Set(effect, []byte("done"))
	l2, err := q.Extend(f.ctx, f.db, l, 5*time.Minute)
	require.NoError(t, err, "an Extend commits between the ack's read and its commit")
	err = tr.Commit()
	require.ErrorIs(t, err, kv.ErrNotCommitted, "the ack read the job's record, which the Extend moved")
	require.Nil(t, f.get(t, effect), "the job's write did not commit")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "the ack did not commit")
	require.NoError(t, q.Ack(f.ctx, f.db, l2))
	f.requireStats(t, q, fdbqueue.JobStats{})
}

// testJobAddLeaseRollBack: an Add or a Lease in a caller's transaction
// that rolls back leaves nothing: no job, no lease, no attempt counted.
func testJobAddLeaseRollBack(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "rollback", fdbqueue.JobQueueConfig{Choice: 1})
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if _, err := q.AddBatch(f.ctx, tr, []fdbqueue.Job{{Value: []byte("a"), UniqueKey: "k"}, {Value: []byte("b")}}); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	f.requireStats(t, q, fdbqueue.JobStats{}, "an add that rolled back adds nothing")
	f.requireNoJobKeys(t, q)

	r := f.add(t, q, fdbqueue.Job{Value: []byte("c"), UniqueKey: "k"})
	require.False(t, r.Duplicate, "the rolled-back add held no unique key")
	var leased []fdbqueue.Lease
	err = f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		ls, err := q.Lease(f.ctx, tr, 1, time.Minute)
		leased = ls
		if err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.Len(t, leased, 1, "inside the transaction the lease was taken")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "a lease that rolled back leases nothing")
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt, "the rolled-back lease counted no attempt")
	require.ErrorIs(t, q.Ack(f.ctx, f.db, leased[0]), fdbqueue.ErrLeaseLost, "the rolled-back lease is not the job's")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// testJobLeaseAckOneTransaction: leases and their acks in one caller
// transaction, with the effects: each sees the others' writes, and all
// commit together.
func testJobLeaseAckOneTransaction(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "one-tr", fdbqueue.JobQueueConfig{Choice: 1})
	_, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("a"), Priority: 2}, {Value: []byte("b"), Priority: 1}, {Value: []byte("c")}})
	require.NoError(t, err)
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		ls, err := q.Lease(f.ctx, tr, 2, time.Minute)
		if err != nil {
			return err
		}
		for _, l := range ls {
			tr.Set(f.key("effect/"+string(l.Value)), []byte("done"))
			if err := q.Ack(f.ctx, tr, l); err != nil {
				return err
			}
		}
		return nil
	}))
	require.Equal(t, []byte("done"), f.get(t, f.key("effect/a")))
	require.Equal(t, []byte("done"), f.get(t, f.key("effect/b")))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
	require.Equal(t, []string{"c"}, leaseValues(f.leaseAll(t, q, 10)))
}

// testJobStats: Stats splits queued jobs into due and delayed, and leases
// into live and expired, at its time-bucket resolution; counts the dead;
// and gives the first due job's age, after every step.
// testJobStatsResolutionStored: the queue stores its stats buckets'
// width (StatsResolution, in the record's layout); a handle with another
// width would count jobs in other buckets, so it fails with
// ErrConfigMismatch on the layout and writes nothing, while one with the
// same width to the microsecond works.
func testJobStatsResolutionStored(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "stats-resolution", fdbqueue.JobQueueConfig{})
	f.add(t, q, fdbqueue.Job{Value: []byte("now")})
	f.add(t, q, fdbqueue.Job{Value: []byte("later"), Delay: time.Hour})
	other, err := fdbqueue.NewJobQueue(q.Subspace(), fdbqueue.JobQueueConfig{Clock: c, StatsResolution: time.Minute})
	require.NoError(t, err)
	_, err = other.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("refused")})
	var me *fdbqueue.ConfigMismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, "layout", me.Field)
	_, err = other.Lease(f.ctx, f.db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
	_, err = other.Stats(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1})

	same, err := fdbqueue.NewJobQueue(q.Subspace(), fdbqueue.JobQueueConfig{Clock: c, StatsResolution: 1000 * time.Millisecond})
	require.NoError(t, err)
	l := f.leaseOne(t, same, time.Minute)
	require.Equal(t, "now", string(l.Value))
	require.NoError(t, same.Ack(f.ctx, f.db, l))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1})
}

func testJobStats(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "stats", fdbqueue.JobQueueConfig{Choice: 1})
	start := c.Now()
	for i := range 10 {
		f.add(t, q, fdbqueue.Job{Value: []byte{byte(i)}, Delay: time.Duration(i) * time.Minute})
	}
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 10, Due: 1, Delayed: 9})
	c.Advance(4*time.Minute + 30*time.Second)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 10, Due: 5, Delayed: 5, OldestDue: 4*time.Minute + 30*time.Second})
	ls := f.lease(t, q, 3, time.Minute)
	require.Len(t, ls, 3)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 7, Due: 2, Delayed: 5, Leased: 3, OldestDue: time.Minute + 30*time.Second})
	c.Advance(2 * time.Minute) // 6m30: the leases expired; jobs 7, 8, 9 delayed
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 7, Due: 7, Delayed: 3, ExpiredLeases: 3, OldestDue: 3*time.Minute + 30*time.Second})
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 7, Due: 6, Delayed: 3, ExpiredLeases: 2, OldestDue: 3*time.Minute + 30*time.Second})

	r := f.add(t, q, fdbqueue.Job{Value: []byte("doomed"), RunAt: start, MaxAttempts: 1})
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 8, Due: 7, Delayed: 3, ExpiredLeases: 2, OldestDue: 6*time.Minute + 30*time.Second})
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, r.ID, l.JobID)
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, dead)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 7, Due: 6, Delayed: 3, ExpiredLeases: 2, Dead: 1, OldestDue: 3*time.Minute + 30*time.Second})
	c.Advance(time.Hour)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 7, Due: 9, ExpiredLeases: 2, Dead: 1, OldestDue: time.Hour + 3*time.Minute + 30*time.Second})
	all := f.leaseAll(t, q, fdbqueue.MaxLeaseBatch)
	require.Len(t, all, 9)
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 9, Dead: 1})
	for _, l := range all {
		require.NoError(t, q.Ack(f.ctx, f.db, l))
	}
	require.NoError(t, q.DeleteDead(f.ctx, f.db, r.ID))
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobLeaseWait: LeaseWait sleeps on the queue's signal watch and on a
// timer (the queue's clock) for the earliest vesting time: an add wakes
// it; a delayed job and an expired lease wake it when the clock reaches
// them, not before; its context ends it. The check learns that the waiter
// armed its timer from the clock, never by sleeping.
func testJobLeaseWait(t *testing.T, f *fixture) {
	c := newJobClock()
	c.Armed = make(chan time.Duration, 16)
	q, _ := f.jobQueue(t, "wait", fdbqueue.JobQueueConfig{Choice: 1, Clock: c})
	type result struct {
		ls  []fdbqueue.Lease
		err error
	}
	wait := func(ctx context.Context) chan result {
		ch := make(chan result, 1)
		go func() {
			ls, err := q.LeaseWait(ctx, f.db, 1, time.Minute)
			ch <- result{ls, err}
		}()
		return ch
	}
	recv := func(ch chan result) result {
		select {
		case r := <-ch:
			return r
		case <-f.ctx.Done():
			require.FailNow(t, "LeaseWait never returned")
			return result{}
		}
	}
	armed := func() time.Duration {
		select {
		case d := <-c.Armed:
			return d
		case <-f.ctx.Done():
			require.FailNow(t, "LeaseWait never armed its timer")
			return 0
		}
	}
	// forget drops the timers an earlier LeaseWait armed: one that woke
	// early (a watch that failed, which on a cluster a storage server's
	// error can do) armed its timer again.
	forget := func() {
		for {
			select {
			case <-c.Armed:
			default:
				return
			}
		}
	}

	w := wait(f.ctx) // an empty queue: a watch only
	f.add(t, q, fdbqueue.Job{Value: []byte("now")})
	r := recv(w)
	require.NoError(t, r.err)
	require.Equal(t, []string{"now"}, leaseValues(r.ls), "an add wakes the waiter")
	require.NoError(t, q.Ack(f.ctx, f.db, r.ls[0]))

	f.add(t, q, fdbqueue.Job{Value: []byte("later"), Delay: 10 * time.Minute})
	forget()
	w = wait(f.ctx)
	d := armed()
	require.Equal(t, 10*time.Minute+time.Microsecond, d, "the timer is for the earliest vesting time")
	select {
	case r := <-w:
		require.FailNow(t, "LeaseWait returned before the job was due", "%v", r)
	default:
	}
	c.Advance(d)
	r = recv(w)
	require.NoError(t, r.err)
	require.Equal(t, []string{"later"}, leaseValues(r.ls))

	forget()
	w = wait(f.ctx) // the leased job falls due again at its deadline
	d = armed()
	require.Equal(t, time.Minute+time.Microsecond, d)
	c.Advance(d)
	r = recv(w)
	require.NoError(t, r.err)
	require.Equal(t, 2, r.ls[0].Attempt, "the expired lease's job, leased again")
	require.NoError(t, q.Ack(f.ctx, f.db, r.ls[0]))

	ctx, cancel := context.WithCancel(f.ctx)
	f.add(t, q, fdbqueue.Job{Value: []byte("much later"), Delay: time.Hour})
	forget()
	w = wait(ctx)
	armed()
	cancel()
	r = recv(w)
	require.ErrorIs(t, r.err, context.Canceled)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1}, "the cancelled waiter took nothing")
}
