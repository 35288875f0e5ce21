package queuetest

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// jobConcurrencyChecks: the conflicts each operation's doc comment
// promises (and no others), LeaseWait woken by every write that makes a
// job due sooner, and keys the queue did not write.
func jobConcurrencyChecks() []check {
	return []check{
		{"Conflicts", testJobConflicts},
		{"LeaseWaitWokenBySignal", testJobLeaseWaitSignal},
		{"LeaseWaitLatestJobSleeps", testJobLeaseWaitLatest},
		{"ForeignKey", testJobForeignKey},
	}
}

// testJobConflicts runs pairs of operations in two transactions that both
// read before either commits, commits the first, then the second: a Lease
// conflicts only with another Lease (or Ack, Nack, Extend, Release) of the same
// job, and adds (and a Requeue) only when they carry the same unique key.
// FoundationDB fails the second commit of a conflicting pair with
// not_committed (1020, flow/include/flow/error_definitions.h): a read of a
// key that the first transaction wrote after the second's read version.
func testJobConflicts(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "conflicts", fdbqueue.JobQueueConfig{Choice: 1})
	for _, v := range []string{"a", "b", "c", "d"} {
		f.add(t, q, fdbqueue.Job{Value: []byte(v), Priority: int32('z' - v[0])}) // a first
	}
	la := f.leaseOne(t, q, time.Hour)
	requireValue(t, []byte("a"), la.Value)
	lease := func(into *fdbqueue.Lease) func(tr kv.Transaction) error {
		return func(tr kv.Transaction) error {
			ls, err := q.Lease(f.ctx, tr, 1, time.Hour)
			if err == nil {
				*into = ls[0]
			}
			return err
		}
	}
	pair := func(name string, first, second func(kv.Transaction) error, conflict bool) {
		t.Helper()
		tr1, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		tr2, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		require.NoError(t, first(tr1), "%s: first", name)
		require.NoError(t, second(tr2), "%s: second", name)
		require.NoError(t, tr1.Commit(), "%s: first commit", name)
		err = tr2.Commit()
		if conflict {
			require.ErrorIs(t, err, kv.ErrNotCommitted, "%s: the second must conflict", name)
		} else {
			require.NoError(t, err, "%s: the second must not conflict", name)
		}
	}

	var lb, lc, lx, lost fdbqueue.Lease
	pair("Ack(a) and Lease (takes b)", func(tr kv.Transaction) error { return q.Ack(f.ctx, tr, la) }, lease(&lb), false)
	requireValue(t, []byte("b"), lb.Value)
	pair("Add and Lease (takes c)", func(tr kv.Transaction) error {
		_, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("e")})
		return err
	}, lease(&lc), false)
	requireValue(t, []byte("c"), lc.Value)
	pair("Nack(b) and Extend(c)", func(tr kv.Transaction) error {
		_, err := q.Nack(f.ctx, tr, lb, fdbqueue.NackOptions{Delay: time.Hour})
		return err
	}, func(tr kv.Transaction) error { _, err := q.Extend(f.ctx, tr, lc, time.Hour); return err }, false)
	pair("two adds, no unique key", func(tr kv.Transaction) error {
		_, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("f")})
		return err
	}, func(tr kv.Transaction) error {
		_, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("g")})
		return err
	}, false)
	pair("two adds of one unique key", func(tr kv.Transaction) error {
		_, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("u1"), UniqueKey: "u"})
		return err
	}, func(tr kv.Transaction) error {
		_, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("u2"), UniqueKey: "u"})
		return err
	}, true)
	pair("two leases of one job (K = 1)", lease(&lx), lease(&lost), true)
	requireValue(t, []byte("d"), lx.Value)
	require.Equal(t, lx.JobID, lost.JobID, "both wanted the first due job")
	pair("Extend and Ack of one job", func(tr kv.Transaction) error {
		_, err := q.Extend(f.ctx, tr, lx, time.Hour)
		return err
	}, func(tr kv.Transaction) error { return q.Ack(f.ctx, tr, lx) }, true)

	// a acked; b nacked for an hour; c, d leased; e, f, g and u1 queued.
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 5, Due: 4, Delayed: 1, Leased: 2})
	all := f.leaseAll(t, q, 10)
	require.ElementsMatch(t, []string{"e", "f", "g", "u1"}, leaseValues(all), "the conflicting add of the key was not applied")
	require.NoError(t, q.Ack(f.ctx, f.db, lx), "the conflicting Ack did not apply; the Extend did, keeping the lease")

	// The other way round: an Extend that read the job before an Ack of it
	// committed must conflict, not write the acked job's record back.
	pair("Ack and Extend of one job", func(tr kv.Transaction) error { return q.Ack(f.ctx, tr, all[0]) },
		func(tr kv.Transaction) error { _, err := q.Extend(f.ctx, tr, all[0], time.Hour); return err }, true)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1, Leased: 4}, "b nacked; c and three of the four leased")
	_, err := q.Extend(f.ctx, f.db, all[0], time.Hour)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "acked")

	// A Requeue reads its job's unique key, so that it and an Add of that
	// key do not both take it.
	dq, _ := f.jobQueue(t, "conflicts-requeue", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
	dead := f.add(t, dq, fdbqueue.Job{Value: []byte("dead"), UniqueKey: "k"})
	_, err = dq.Nack(f.ctx, f.db, f.leaseOne(t, dq, time.Hour), fdbqueue.NackOptions{})
	require.NoError(t, err)
	pair("Add and Requeue of one unique key", func(tr kv.Transaction) error {
		_, err := dq.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("live"), UniqueKey: "k"})
		return err
	}, func(tr kv.Transaction) error { return dq.Requeue(f.ctx, tr, dead.ID) }, true)
	f.requireStats(t, dq, fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 1}, "the conflicting requeue was not applied")
	require.ErrorIs(t, dq.Requeue(f.ctx, f.db, dead.ID), fdbqueue.ErrUniqueKeyHeld)
}

// testJobLeaseWaitSignal: a LeaseWait asleep (it armed its timer for a
// leased job's deadline, an hour away) is woken at once by an Add, by a
// Nack that makes a job due, and by a Requeue, each from another
// transaction, with the clock standing still.
func testJobLeaseWaitSignal(t *testing.T, f *fixture) {
	c := newJobClock()
	q, _ := f.jobQueue(t, "wait-signal", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1, Clock: c})
	dead := f.add(t, q, fdbqueue.Job{Value: []byte("dead")})
	_, err := q.Nack(f.ctx, f.db, f.leaseOne(t, q, time.Minute), fdbqueue.NackOptions{})
	require.NoError(t, err)
	f.add(t, q, fdbqueue.Job{Value: []byte("held"), MaxAttempts: 2})
	held := f.leaseOne(t, q, time.Hour)
	c.Armed = make(chan time.Duration, 16)

	wakes := []struct {
		name string
		want string
		do   func()
	}{
		{"Add", "added", func() { f.add(t, q, fdbqueue.Job{Value: []byte("added")}) }},
		{"Nack", "held", func() {
			_, err := q.Nack(f.ctx, f.db, held, fdbqueue.NackOptions{Delay: -1})
			require.NoError(t, err)
		}},
		{"Requeue", "dead", func() { require.NoError(t, q.Requeue(f.ctx, f.db, dead.ID)) }},
	}
	var leases []fdbqueue.Lease
	for _, w := range wakes {
		lw := f.startLeaseWait(t, q, 1, 2*time.Hour)
		lw.asleep(t, c, "before "+w.name) // its watch is set, its timer armed
		w.do()
		ls := lw.woken(t, w.name)
		require.Len(t, ls, 1, w.name)
		require.Equal(t, w.want, string(ls[0].Value), "woken by %s", w.name)
		leases = append(leases, ls...)
	}
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 3})
	for _, l := range leases {
		require.NoError(t, q.Ack(f.ctx, f.db, l))
	}
}

// testJobForeignKey: a key in the queue's job range that the queue did
// not write (FoundationDB keys are anyone's) is left alone: Lease skips it
// while there are jobs to take and fails with ErrForeignKey, a
// *ForeignKeyError naming it, when it is all there is; Stats, which reads
// the first job's key, fails with ErrForeignKey too.
func testJobForeignKey(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "foreign", fdbqueue.JobQueueConfig{Choice: 4})
	foreign, err := q.Subspace().Pack(tuple.Tuple{"q", c.Now().Add(-time.Hour).UnixMicro(), "not a job"})
	require.NoError(t, err)
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error { tr.Set(foreign, []byte("x")); return nil }))
	_, err = q.Lease(f.ctx, f.db, 1, time.Minute)
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	require.Equal(t, foreign, fk.Key)
	_, err = q.Stats(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)

	f.add(t, q, fdbqueue.Job{Value: []byte("real")})
	l := f.leaseOne(t, q, time.Minute)
	requireValue(t, []byte("real"), l.Value, "the foreign key is skipped")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	require.Equal(t, []byte("x"), f.get(t, foreign), "and left alone")
}

// countingDB reports every Transact on the database it wraps.
type countingDB struct {
	kv.Database
	calls chan<- struct{}
}

// Transact reports the call, then runs fn on the wrapped database.
func (d countingDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	select {
	case d.calls <- struct{}{}:
	default: // nobody counting any more
	}
	return d.Database.Transact(ctx, fn)
}

// testJobLeaseWaitLatest: a LeaseWait whose earliest job vests at the
// latest time a job can carry sleeps (it arms its timer) instead of
// polling: computing the wake-up time as a microsecond count plus one
// overflowed there, making the wait negative, so LeaseWait ran one
// transaction after another. The check counts LeaseWait's transactions
// and fails if it runs a few without arming a timer.
func testJobLeaseWaitLatest(t *testing.T, f *fixture) {
	c := newJobClock()
	c.Armed = make(chan time.Duration, 16)
	q, _ := f.jobQueue(t, "wait-latest", fdbqueue.JobQueueConfig{Choice: 1, Clock: c})
	f.add(t, q, fdbqueue.Job{Value: []byte("latest"), RunAt: time.UnixMicro(math.MaxInt64)})
	calls := make(chan struct{}, 64)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel() // a failing check stops the waiter
	done := make(chan error, 1)
	go func() {
		_, err := q.LeaseWait(ctx, countingDB{Database: f.db, calls: calls}, 1, time.Minute)
		done <- err
	}()
	for n := 0; ; {
		select {
		case d := <-c.Armed:
			require.Positive(t, d, "the timer is for a time after now")
			cancel()
			select {
			case err := <-done:
				require.ErrorIs(t, err, context.Canceled)
			case <-f.ctx.Done():
				require.FailNow(t, "LeaseWait did not return once its context ended")
			}
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1})
			return
		case <-calls:
			n++
			require.Less(t, n, 5, "LeaseWait ran %d transactions without sleeping: it polls", n)
		case <-f.ctx.Done():
			cancel()
			require.FailNow(t, "LeaseWait neither slept nor polled")
		}
	}
}
