package queuetest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// jobByIDChecks: Job finds a job by its ID in every state, with what its
// record holds; Cancel removes a job in the queue (due, delayed, leased,
// an expired lease) for good, Stats staying exact and nothing of the job
// left; a Cancel racing another operation on the job resolves by one
// conflict; a pool's handler learns of the cancel; at the limits.
func jobByIDChecks() []check {
	cs := []check{
		{"ByID/Job", testJobLookup},
		{"ByID/JobInTransaction", testJobLookupInTransaction},
		{"ByID/Cancel", testJobCancel},
		{"ByID/CancelInTransaction", testJobCancelInTransaction},
		{"ByID/CancelRaces", testJobCancelRaces},
		{"ByID/CancelInPool", testJobCancelInPool},
	}
	for _, fill := range Fills {
		cs = append(cs, check{"ByID/CancelAtLimits/" + fill.Name, func(t *testing.T, f *fixture) { testJobCancelAtLimits(t, f, fill) }})
	}
	return cs
}

// job returns Job(id), which must succeed.
func (f *fixture) job(t *testing.T, q *fdbqueue.JobQueue, id fdbqueue.JobID) fdbqueue.JobInfo {
	t.Helper()
	info, err := q.Job(f.ctx, f.db, id)
	require.NoError(t, err, "Job(%s)", id)
	require.Equal(t, id, info.ID)
	return info
}

// requireGone requires that Job and Cancel find no job id, and that no
// key or value in the queue's subspace holds its ID: its record, value,
// index entry and unique key are gone.
func (f *fixture) requireGone(t *testing.T, q *fdbqueue.JobQueue, id fdbqueue.JobID, msgAndArgs ...any) {
	t.Helper()
	_, err := q.Job(f.ctx, f.db, id)
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, msgAndArgs...)
	require.ErrorIs(t, q.Cancel(f.ctx, f.db, id), fdbqueue.ErrJobNotFound, msgAndArgs...)
	r, err := q.Subspace().Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(f.ctx, f.db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	require.NoError(t, err)
	for _, p := range kvs {
		require.False(t, bytes.Contains(p.Key, id[:]) || bytes.Contains(p.Value, id[:]),
			"key %q = %q holds the ID of job %s, which is gone", p.Key, p.Value, id)
	}
}

// statsOf is what Stats must say of a queue holding those of ids that Job
// finds, at the clock's now: each job counted by the state and DueAt Job
// reports. (Exact while no job falls due within the Stats bucket that
// holds now: the checks keep due times and now on whole seconds.)
func (f *fixture) statsOf(t *testing.T, q *fdbqueue.JobQueue, now time.Time, ids ...fdbqueue.JobID) fdbqueue.JobStats {
	t.Helper()
	var s fdbqueue.JobStats
	var first time.Time
	for _, id := range ids {
		info, err := q.Job(f.ctx, f.db, id)
		if errors.Is(err, fdbqueue.ErrJobNotFound) {
			continue
		}
		require.NoError(t, err)
		due := !info.DueAt.After(now)
		switch info.State {
		case fdbqueue.JobDead:
			s.Dead++
			continue
		case fdbqueue.JobQueued:
			s.Queued++
			if due {
				s.Due++
			} else {
				s.Delayed++
			}
		case fdbqueue.JobLeased:
			if due {
				s.ExpiredLeases++
				s.Due++
			} else {
				s.Leased++
			}
		default:
			require.Failf(t, "unknown state", "job %s: %v", id, info.State)
		}
		if first.IsZero() || info.DueAt.Before(first) {
			first = info.DueAt
		}
	}
	if !first.IsZero() && now.After(first) {
		s.OldestDue = now.Sub(first)
	}
	return s
}

// requireInfo compares a JobInfo with want, times to the microsecond.
func requireInfo(t *testing.T, want, got fdbqueue.JobInfo, msgAndArgs ...any) {
	t.Helper()
	for _, p := range []struct {
		name      string
		want, got time.Time
	}{{"DueAt", want.DueAt, got.DueAt}, {"Added", want.Added, got.Added}, {"Died", want.Died, got.Died}} {
		require.Equal(t, p.want.IsZero(), p.got.IsZero(), "%s: want %v, got %v", p.name, p.want, p.got)
		if !p.want.IsZero() {
			require.Equal(t, p.want.UnixMicro(), p.got.UnixMicro(), "%s: want %v, got %v", p.name, p.want, p.got)
		}
	}
	requireValue(t, want.Value, got.Value, msgAndArgs...)
	want.DueAt, want.Added, want.Died, want.Value = time.Time{}, time.Time{}, time.Time{}, nil
	got.DueAt, got.Added, got.Died, got.Value = time.Time{}, time.Time{}, time.Time{}, nil
	require.Equal(t, want, got, msgAndArgs...)
}

// testJobLookup: Job reports a job in every state it passes through, with
// what the queue's other calls report of it (its Lease, ListDead): queued
// and delayed (DueAt its vesting time, rounded up to the microsecond),
// queued and due, leased (DueAt the lease's deadline, LeaseID the lease's
// ID), an expired lease taken over (a new LeaseID), released (the attempt
// given back), nacked (Reason, the retry time), dead (Died, no DueAt),
// requeued (attempts from 0), and gone once acked; an ID never added is
// ErrJobNotFound. Job writes nothing.
func testJobLookup(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "lookup", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 3})
	t0 := c.Now()
	j := f.add(t, q, fdbqueue.Job{Value: []byte("j"), Priority: -7, UniqueKey: "u-j"})
	later := f.add(t, q, fdbqueue.Job{Value: []byte("later"), Delay: 90*time.Minute + time.Nanosecond, Priority: 5, MaxAttempts: 9})
	want := fdbqueue.JobInfo{ID: j.ID, Value: []byte("j"), State: fdbqueue.JobQueued, DueAt: t0,
		MaxAttempts: 3, Priority: -7, UniqueKey: "u-j", Added: t0}
	requireInfo(t, want, f.job(t, q, j.ID), "queued and due")
	wantLater := fdbqueue.JobInfo{ID: later.ID, Value: []byte("later"), State: fdbqueue.JobQueued,
		DueAt: t0.Add(90*time.Minute + time.Microsecond), MaxAttempts: 9, Priority: 5, Added: t0}
	requireInfo(t, wantLater, f.job(t, q, later.ID), "delayed: its vesting time rounded up")

	before := f.rawKeys(t, q.Subspace())
	_, err := q.Job(f.ctx, f.db, fdbqueue.JobID{1, 2, 3})
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "an ID never added")
	require.Equal(t, before, f.rawKeys(t, q.Subspace()), "Job writes nothing")

	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, j.ID, l.JobID)
	want.State, want.DueAt, want.LeaseID, want.Attempts = fdbqueue.JobLeased, l.Deadline, l.ID, 1
	requireInfo(t, want, f.job(t, q, j.ID), "leased: DueAt is the lease's deadline")
	require.Equal(t, t0.Add(time.Minute).UnixMicro(), l.Deadline.UnixMicro())

	c.Advance(2 * time.Minute)
	info := f.job(t, q, j.ID)
	requireInfo(t, want, info, "an expired lease is still the job's state until another Lease takes it")
	require.True(t, info.DueAt.Before(c.Now()), "expired: its deadline has passed")
	f.requireStats(t, q, f.statsOf(t, q, c.Now(), j.ID, later.ID))
	l2 := f.leaseOne(t, q, time.Minute)
	require.Equal(t, j.ID, l2.JobID, "the expired lease's job is due again")
	want.DueAt, want.LeaseID, want.Attempts = l2.Deadline, l2.ID, 2
	requireInfo(t, want, f.job(t, q, j.ID), "taken over: a new lease")

	require.NoError(t, q.Release(f.ctx, f.db, l2, 5*time.Minute))
	want.State, want.DueAt, want.LeaseID, want.Attempts = fdbqueue.JobQueued, c.Now().Add(5*time.Minute), [16]byte{}, 1
	requireInfo(t, want, f.job(t, q, j.ID), "released: the attempt given back")

	c.Advance(5 * time.Minute)
	dead, err := q.Nack(f.ctx, f.db, f.leaseOne(t, q, time.Minute), fdbqueue.NackOptions{Delay: 10 * time.Minute, Reason: "boom"})
	require.NoError(t, err)
	require.False(t, dead)
	want.DueAt, want.Attempts, want.Reason = c.Now().Add(10*time.Minute), 2, "boom"
	requireInfo(t, want, f.job(t, q, j.ID), "nacked")
	f.requireStats(t, q, f.statsOf(t, q, c.Now(), j.ID, later.ID))

	c.Advance(10 * time.Minute)
	dead, err = q.Nack(f.ctx, f.db, f.leaseOne(t, q, time.Minute), fdbqueue.NackOptions{Reason: "last"})
	require.NoError(t, err)
	require.True(t, dead)
	want.State, want.DueAt, want.Died, want.Attempts, want.Reason = fdbqueue.JobDead, time.Time{}, c.Now(), 3, "last"
	info = f.job(t, q, j.ID)
	requireInfo(t, want, info, "dead")
	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, fdbqueue.DeadJob{ID: info.ID, Value: info.Value, Attempts: info.Attempts, MaxAttempts: info.MaxAttempts,
		Priority: info.Priority, UniqueKey: info.UniqueKey, Reason: info.Reason, Added: info.Added, Died: info.Died, Cursor: ds[0].Cursor},
		ds[0], "Job and ListDead agree")
	f.requireStats(t, q, f.statsOf(t, q, c.Now(), j.ID, later.ID))

	require.NoError(t, q.Requeue(f.ctx, f.db, j.ID))
	want = fdbqueue.JobInfo{ID: j.ID, Value: []byte("j"), State: fdbqueue.JobQueued, DueAt: c.Now(),
		MaxAttempts: 3, Priority: -7, UniqueKey: "u-j", Added: c.Now(), Reason: "last"}
	requireInfo(t, want, f.job(t, q, j.ID), "requeued")
	require.NoError(t, q.Ack(f.ctx, f.db, f.leaseOne(t, q, time.Minute)))
	_, err = q.Job(f.ctx, f.db, j.ID)
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "acked")
	requireInfo(t, wantLater, f.job(t, q, later.ID), "the other job is untouched")
	for _, s := range []fdbqueue.JobState{fdbqueue.JobQueued, fdbqueue.JobLeased, fdbqueue.JobDead, 0} {
		require.NotEmpty(t, s.String())
	}
	require.Equal(t, []string{"queued", "leased", "dead"},
		[]string{fdbqueue.JobQueued.String(), fdbqueue.JobLeased.String(), fdbqueue.JobDead.String()})
}

// testJobLookupInTransaction: Job inside a caller's transaction sees that
// transaction's writes (a job it added, a job it cancelled), and its
// reads are normal reads: a transaction that looked a job up and wrote
// fails with a conflict when the job changed since (another client leased
// it), and does not when it looked through tr.Snapshot(). (FoundationDB
// fails a commit whose read conflict ranges meet a write committed after
// its read version, not_committed 1020: fdbserver/Resolver.actor.cpp;
// snapshot reads add no read conflict range, fdbclient/ReadYourWrites.)
func testJobLookupInTransaction(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "lookup-tr", fdbqueue.JobQueueConfig{Choice: 1})
	a := f.add(t, q, fdbqueue.Job{Value: []byte("a")})
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		r, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("new"), Delay: time.Hour})
		if err != nil {
			return err
		}
		info, err := q.Job(f.ctx, tr, r.ID)
		if err != nil {
			return err
		}
		requireValue(t, []byte("new"), info.Value, "the transaction's own add")
		require.NoError(t, q.Cancel(f.ctx, tr, a.ID))
		_, err = q.Job(f.ctx, tr, a.ID)
		require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "the transaction's own cancel")
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "the caller rolled back: a is still queued, nothing added")

	for _, snapshot := range []bool{false, true} {
		tr, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		var rt kv.ReadTransactor = tr
		if snapshot {
			rt = tr.Snapshot()
		}
		info, err := q.Job(f.ctx, rt, a.ID)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.JobQueued, info.State)
		tr.Set(f.key("acted on the lookup"), []byte{1})
		l := f.leaseOne(t, q, time.Minute)
		require.Equal(t, a.ID, l.JobID)
		err = tr.Commit()
		if snapshot {
			require.NoError(t, err, "a lookup through tr.Snapshot() adds no conflict")
		} else {
			require.ErrorIs(t, err, kv.ErrNotCommitted, "the job changed after the lookup read it")
		}
		require.NoError(t, q.Release(f.ctx, f.db, l, 0))
	}
}

// testJobCancel: Cancel removes a due, a delayed, a leased and an
// expired-leased job, each with a unique key: after each, Stats agrees
// with the jobs present (its counters, and the buckets that split due
// from delayed and live from expired leases), nothing of the job is left
// in the subspace, its unique key is free, and its lease holder's Ack,
// Nack, Extend and Release fail with ErrLeaseLost. A dead job is not
// cancelled (ErrJobNotFound) and stays dead; a job not cancelled is
// leased as before.
func testJobCancel(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "cancel", fdbqueue.JobQueueConfig{Choice: 1})
	t0 := c.Now()
	add := func(v string, j fdbqueue.Job) fdbqueue.JobID {
		j.Value, j.UniqueKey = []byte(v), "k-"+v
		return f.add(t, q, j).ID
	}
	// Lease order: dead, expired, leased, due.
	dead := add("dead", fdbqueue.Job{RunAt: t0.Add(-4 * time.Second), MaxAttempts: 1})
	expired := add("expired", fdbqueue.Job{RunAt: t0.Add(-3 * time.Second)})
	leased := add("leased", fdbqueue.Job{RunAt: t0.Add(-2 * time.Second), Priority: 3})
	due := add("due", fdbqueue.Job{Priority: 1})
	delayed := add("delayed", fdbqueue.Job{Delay: time.Hour})
	kept := add("kept", fdbqueue.Job{Delay: 2 * time.Hour})
	ids := []fdbqueue.JobID{dead, expired, leased, due, delayed, kept}
	gone, err := q.Nack(f.ctx, f.db, f.leaseOne(t, q, time.Minute), fdbqueue.NackOptions{Reason: "no"})
	require.NoError(t, err)
	require.True(t, gone)
	lExpired := f.leaseOne(t, q, 10*time.Second)
	require.Equal(t, expired, lExpired.JobID)
	lLeased := f.leaseOne(t, q, time.Hour)
	require.Equal(t, leased, lLeased.JobID)
	c.Advance(30 * time.Second)

	want := fdbqueue.JobStats{Queued: 3, Due: 2, Delayed: 2, Leased: 1, ExpiredLeases: 1, Dead: 1, OldestDue: 30 * time.Second}
	require.Equal(t, want, f.statsOf(t, q, c.Now(), ids...), "the jobs are as set up")
	f.requireStats(t, q, want)

	steps := []struct {
		id    fdbqueue.JobID
		name  string
		lease *fdbqueue.Lease
		after fdbqueue.JobStats
	}{
		{due, "due", nil, fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 2, Leased: 1, ExpiredLeases: 1, Dead: 1, OldestDue: 20 * time.Second}},
		{delayed, "delayed", nil, fdbqueue.JobStats{Queued: 1, Due: 1, Delayed: 1, Leased: 1, ExpiredLeases: 1, Dead: 1, OldestDue: 20 * time.Second}},
		{leased, "leased", &lLeased, fdbqueue.JobStats{Queued: 1, Due: 1, Delayed: 1, ExpiredLeases: 1, Dead: 1, OldestDue: 20 * time.Second}},
		{expired, "expired", &lExpired, fdbqueue.JobStats{Queued: 1, Delayed: 1, Dead: 1}},
	}
	for _, s := range steps {
		require.NoError(t, q.Cancel(f.ctx, f.db, s.id), "Cancel of the %s job", s.name)
		f.requireGone(t, q, s.id, "the %s job", s.name)
		require.Equal(t, s.after, f.statsOf(t, q, c.Now(), ids...), "after cancelling the %s job", s.name)
		f.requireStats(t, q, s.after, "Stats agrees with the jobs present after cancelling the %s job", s.name)
		if s.lease != nil {
			l := *s.lease
			require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost, "Ack of the cancelled %s job", s.name)
			_, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
			require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "Nack of the cancelled %s job", s.name)
			_, err = q.Extend(f.ctx, f.db, l, time.Hour)
			require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "Extend of the cancelled %s job", s.name)
			require.ErrorIs(t, q.Release(f.ctx, f.db, l, 0), fdbqueue.ErrLeaseLost, "Release of the cancelled %s job", s.name)
		}
	}

	err = q.Cancel(f.ctx, f.db, dead)
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "a dead job is not cancelled")
	require.Equal(t, fdbqueue.JobDead, f.job(t, q, dead).State, "and stays dead")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1, Dead: 1})

	for _, s := range steps {
		r := f.add(t, q, fdbqueue.Job{Value: []byte("again"), UniqueKey: "k-" + s.name, Delay: 3 * time.Hour})
		require.False(t, r.Duplicate, "the cancelled %s job's unique key is free", s.name)
		ids = append(ids, r.ID)
		require.NoError(t, q.Cancel(f.ctx, f.db, r.ID))
		f.requireGone(t, q, r.ID)
	}
	require.True(t, f.add(t, q, fdbqueue.Job{UniqueKey: "k-kept"}).Duplicate, "the job not cancelled keeps its key")
	c.Advance(2 * time.Hour)
	ls := f.leaseAll(t, q, 10)
	require.Equal(t, []string{"kept"}, leaseValues(ls), "only the job not cancelled is leased")
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))
	require.NoError(t, q.DeleteDead(f.ctx, f.db, dead))
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobCancelInTransaction: Cancel composes with the caller's
// transaction: rolled back, it changes nothing; committed with an Add of
// the same unique key in the same transaction (replacing a job), the
// key goes to the new job: the Add reads the key through the Cancel's
// compare-and-clear of it, which the transaction's own read applies to
// the stored value (RYWIterator::kv, fdbclient/RYWIterator.cpp, through
// WriteMap::coalesceUnder and doCompareAndClear,
// fdbclient/include/fdbclient/Atomic.h: the key reads as cleared when its
// value equals the operand).
func testJobCancelInTransaction(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "cancel-tr", fdbqueue.JobQueueConfig{Choice: 1})
	old := f.add(t, q, fdbqueue.Job{Value: []byte("old"), UniqueKey: "k"})
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := q.Cancel(f.ctx, tr, old.ID); err != nil {
			return err
		}
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.Equal(t, fdbqueue.JobQueued, f.job(t, q, old.ID).State, "rolled back: still queued")

	var repl fdbqueue.AddResult
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := q.Cancel(f.ctx, tr, old.ID); err != nil {
			return err
		}
		repl, err = q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("new"), UniqueKey: "k"})
		return err
	}))
	require.False(t, repl.Duplicate, "the cancel freed the key within the transaction")
	f.requireGone(t, q, old.ID)
	require.Equal(t, fdbqueue.AddResult{ID: repl.ID, Duplicate: true}, f.add(t, q, fdbqueue.Job{UniqueKey: "k"}), "the new job holds the key")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
}

// testJobCancelRaces: a Cancel and a Lease, Ack, Nack (retried or to the
// dead-letter list), Extend or Release of the same job, in two
// transactions that both read before either commits: whichever commits
// second fails with not_committed (FoundationDB's resolver: a read of a
// key the other wrote after its read version, fdbserver/Resolver.actor.cpp),
// and run again it sees the first one's result: after the Cancel, the
// other finds the job gone (ErrLeaseLost, or ErrEmpty for a Lease); after
// the other, the Cancel removes the job as it is then, or finds it acked
// or dead (ErrJobNotFound).
func testJobCancelRaces(t *testing.T, f *fixture) {
	type race struct {
		name   string
		leased bool // the job is leased before the race
		other  func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error
		// What the other returns run after the Cancel, and the Cancel
		// after the other; dead: the other dead-letters the job.
		afterCancel, cancelAfter error
		dead                     bool
	}
	races := []race{
		{name: "Lease", other: func(q *fdbqueue.JobQueue, tr kv.Transactor, _ fdbqueue.Lease) error {
			_, err := q.Lease(f.ctx, tr, 1, time.Minute)
			return err
		}, afterCancel: fdbqueue.ErrEmpty},
		{name: "Ack", leased: true, other: func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error {
			return q.Ack(f.ctx, tr, l)
		}, afterCancel: fdbqueue.ErrLeaseLost, cancelAfter: fdbqueue.ErrJobNotFound},
		{name: "Nack", leased: true, other: func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error {
			_, err := q.Nack(f.ctx, tr, l, fdbqueue.NackOptions{Delay: time.Minute})
			return err
		}, afterCancel: fdbqueue.ErrLeaseLost},
		{name: "NackToDead", leased: true, other: func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error {
			_, err := q.Nack(f.ctx, tr, l, fdbqueue.NackOptions{NoRetry: true})
			return err
		}, afterCancel: fdbqueue.ErrLeaseLost, cancelAfter: fdbqueue.ErrJobNotFound, dead: true},
		{name: "Extend", leased: true, other: func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error {
			_, err := q.Extend(f.ctx, tr, l, time.Hour)
			return err
		}, afterCancel: fdbqueue.ErrLeaseLost},
		{name: "Release", leased: true, other: func(q *fdbqueue.JobQueue, tr kv.Transactor, l fdbqueue.Lease) error {
			return q.Release(f.ctx, tr, l, 0)
		}, afterCancel: fdbqueue.ErrLeaseLost},
	}
	for _, r := range races {
		for _, cancelFirst := range []bool{true, false} {
			name := r.name + map[bool]string{true: "/CancelFirst", false: "/CancelSecond"}[cancelFirst]
			q, _ := f.jobQueue(t, "race-"+name, fdbqueue.JobQueueConfig{Choice: 1})
			id := f.add(t, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k"}).ID
			var l fdbqueue.Lease
			if r.leased {
				l = f.leaseOne(t, q, time.Minute)
			}
			cancel := func(tr kv.Transactor) error { return q.Cancel(f.ctx, tr, id) }
			other := func(tr kv.Transactor) error { return r.other(q, tr, l) }
			first, second := other, cancel
			if cancelFirst {
				first, second = cancel, other
			}
			tr1, err := f.db.CreateTransaction(f.ctx)
			require.NoError(t, err)
			tr2, err := f.db.CreateTransaction(f.ctx)
			require.NoError(t, err)
			require.NoError(t, first(tr1), "%s: first", name)
			require.NoError(t, second(tr2), "%s: second, before the first commits", name)
			require.NoError(t, tr1.Commit(), "%s: first commit", name)
			require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted, "%s: the second commit conflicts", name)

			if cancelFirst {
				err := other(f.db)
				if r.afterCancel == nil {
					require.NoError(t, err, name)
				} else {
					require.ErrorIs(t, err, r.afterCancel, "%s: the retry sees the job cancelled", name)
				}
				f.requireGone(t, q, id, name)
				f.requireStats(t, q, fdbqueue.JobStats{}, name)
				f.requireNoJobKeys(t, q)
				continue
			}
			err = cancel(f.db)
			if r.cancelAfter != nil {
				require.ErrorIs(t, err, r.cancelAfter, "%s: the retry sees the other's result", name)
			} else {
				require.NoError(t, err, "%s: the retry cancels the job as the other left it", name)
			}
			if r.dead {
				require.Equal(t, fdbqueue.JobDead, f.job(t, q, id).State, name)
				f.requireStats(t, q, fdbqueue.JobStats{Dead: 1}, name)
				continue
			}
			f.requireGone(t, q, id, name)
			f.requireStats(t, q, fdbqueue.JobStats{}, name)
			f.requireNoJobKeys(t, q)
			if r.name == "Lease" {
				require.False(t, f.add(t, q, fdbqueue.Job{UniqueKey: "k"}).Duplicate, "%s: the key is free", name)
			}
		}
	}

	// An Add of the job's unique key that read the key before the Cancel
	// committed conflicts, since the Cancel's compare-and-clear of the key
	// is a write of it (an atomic op adds a write conflict range:
	// ReadYourWritesTransaction::atomicOp, fdbclient/ReadYourWrites.actor.cpp),
	// and, run again, finds the key free.
	q, _ := f.jobQueue(t, "race-unique", fdbqueue.JobQueueConfig{Choice: 1})
	id := f.add(t, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: "k"}).ID
	tr1, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	tr2, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	require.NoError(t, q.Cancel(f.ctx, tr1, id))
	dup, err := q.Add(f.ctx, tr2, fdbqueue.Job{Value: []byte("y"), UniqueKey: "k"})
	require.NoError(t, err)
	require.Equal(t, fdbqueue.AddResult{ID: id, Duplicate: true}, dup, "before the Cancel commits, the key is the job's")
	require.NoError(t, tr1.Commit())
	require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted, "the Add read the key the Cancel cleared")
	require.False(t, f.add(t, q, fdbqueue.Job{Value: []byte("y"), UniqueKey: "k"}).Duplicate, "run again, the Add finds the key free")
}

// testJobCancelInPool: a job cancelled while a pool's handler runs it
// ends the handler's context at the pool's next heartbeat (its extension
// finds the lease lost), and the job's outcome is LeaseLost; nothing of
// the job is left. The check moves the clock; it never sleeps.
func testJobCancelInPool(t *testing.T, f *fixture) {
	c := newJobClock()
	c.Armed = make(chan time.Duration, 64)
	q, _ := f.jobQueue(t, "cancel-pool", fdbqueue.JobQueueConfig{Clock: c})
	id := f.add(t, q, fdbqueue.Job{Value: []byte("long"), UniqueKey: "k"}).ID
	started, ended := make(chan fdbqueue.Lease, 1), make(chan error, 1)
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		started <- task.Lease()
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	}
	outcomes := make(chan fdbqueue.Outcome, 4)
	ctx, stop := context.WithCancel(f.ctx)
	defer stop()
	ran := make(chan error, 1)
	const every = 10 * time.Second
	go func() {
		ran <- q.Run(ctx, f.db, handler, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: every,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	}()
	recv := func(what string) {
		t.Helper()
		select {
		case d := <-c.Armed:
			require.Equal(t, every, d, what)
		case <-f.ctx.Done():
			require.FailNow(t, what)
		}
	}
	var l fdbqueue.Lease
	select {
	case l = <-started:
	case <-f.ctx.Done():
		require.FailNow(t, "the handler did not start")
	}
	require.Equal(t, id, l.JobID)
	recv("the heartbeat did not arm its timer")
	require.NoError(t, q.Cancel(f.ctx, f.db, id))
	select {
	case <-ended:
		require.FailNow(t, "the handler's context ended before the heartbeat")
	default:
	}
	c.Advance(every)
	select {
	case err := <-ended:
		require.ErrorIs(t, err, context.Canceled, "the handler's context ends")
	case <-f.ctx.Done():
		require.FailNow(t, "the handler's context did not end once the heartbeat found the job cancelled")
	}
	select {
	case o := <-outcomes:
		require.Equal(t, fdbqueue.LeaseLost, o.Result, "outcome error: %v", o.Err)
		require.ErrorIs(t, o.Err, fdbqueue.ErrLeaseLost)
	case <-f.ctx.Done():
		require.FailNow(t, "no outcome for the cancelled job")
	}
	stop()
	select {
	case err := <-ran:
		require.NoError(t, err)
	case <-f.ctx.Done():
		require.FailNow(t, "Run did not return after its context ended")
	}
	f.requireGone(t, q, id)
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobCancelAtLimits: a job with a 100,000-byte value and a unique key
// of MaxUniqueKeySize bytes of fill is found by Job intact, cancelled
// while leased and while queued, and leaves nothing behind; its key is
// free again.
func testJobCancelAtLimits(t *testing.T, f *fixture, fill Fill) {
	q, _ := f.jobQueue(t, "cancel-limits", fdbqueue.JobQueueConfig{Choice: 1})
	v := MaxValue(fdbqueue.RawValues, fill)
	require.Len(t, v, kv.MaxValueSize)
	key := string(MakeValue(fill, fdbqueue.MaxUniqueKeySize))
	for _, leased := range []bool{true, false} {
		r := f.add(t, q, fdbqueue.Job{Value: v, UniqueKey: key})
		require.False(t, r.Duplicate, "the key is free")
		info := f.job(t, q, r.ID)
		requireValue(t, v, info.Value, "Job")
		require.Equal(t, key, info.UniqueKey)
		if leased {
			l := f.leaseOne(t, q, time.Minute)
			requireValue(t, v, l.Value, "Lease")
			require.Equal(t, fdbqueue.JobLeased, f.job(t, q, r.ID).State)
		}
		require.NoError(t, q.Cancel(f.ctx, f.db, r.ID), "leased: %v", leased)
		f.requireGone(t, q, r.ID)
		f.requireStats(t, q, fdbqueue.JobStats{})
		f.requireNoJobKeys(t, q)
	}
	require.False(t, f.add(t, q, fdbqueue.Job{Value: v, UniqueKey: key}).Duplicate)
}
