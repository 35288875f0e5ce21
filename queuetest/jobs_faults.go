package queuetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// jobFaultChecks: every JobQueue operation whose first commit fails with
// a conflict or with commit_unknown_result (applied or not) takes effect
// once and returns the first attempt's result: run on its own
// transactions (the journal), and inside the caller's retry loop with a
// WithOpID made once. They skip when the harness cannot inject faults.
func jobFaultChecks() []check {
	var cs []check
	for _, fk := range faultKinds {
		for _, op := range jobFaultOps() {
			cs = append(cs, check{"Faults/" + op.name + "/" + fk.name, func(t *testing.T, f *fixture) {
				fi := f.faults(t)
				op.run(t, f, func() { fi.FailNextCommit(fk.err, fk.applied) })
			}})
		}
		cs = append(cs, check{"Faults/LeaseRecoveredByOpID/" + fk.name, func(t *testing.T, f *fixture) { testJobLeaseByOpID(t, f, fk) }})
		cs = append(cs, check{"Faults/LeaseSettled/" + fk.name, func(t *testing.T, f *fixture) { testJobSettleLease(t, f, fk) }})
	}
	return cs
}

func jobFaultOps() []layerOp {
	return []layerOp{
		{"Add", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			inject()
			r, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("v"), UniqueKey: "k"})
			require.NoError(t, err, "Add retries the injected failure")
			require.False(t, r.Duplicate, "the retry returns the first attempt's result, not a duplicate of itself")
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "added exactly once")
			l := f.leaseOne(t, q, time.Minute)
			require.Equal(t, r.ID, l.JobID, "the ID returned is the job's")
			require.NoError(t, q.Ack(f.ctx, f.db, l))
			f.requireNothingDue(t, q)
		}},
		{"AddBatch", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			inject()
			rs, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("a"), Priority: 3}, {Value: []byte("b"), Priority: 2}, {Value: []byte("c"), Priority: 1}})
			require.NoError(t, err)
			require.Len(t, rs, 3)
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Due: 3})
			ls := f.leaseAll(t, q, 10)
			require.Equal(t, []string{"a", "b", "c"}, leaseValues(ls), "the batch is added exactly once")
			for i, l := range ls {
				require.Equal(t, rs[i].ID, l.JobID)
			}
		}},
		{"AddWithOpIDInCallerLoop", testJobAddCallerLoop},
		{"Lease", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			_, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("a"), Priority: 1}, {Value: []byte("b")}})
			require.NoError(t, err)
			inject()
			l := f.leaseOne(t, q, time.Minute)
			requireValue(t, []byte("a"), l.Value)
			require.Equal(t, 1, l.Attempt, "one lease, one attempt")
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Leased: 1}, "leased exactly once")
			require.NoError(t, q.Ack(f.ctx, f.db, l), "the lease returned is the job's")
			l = f.leaseOne(t, q, time.Minute)
			requireValue(t, []byte("b"), l.Value)
			require.Equal(t, 1, l.Attempt)
			require.NoError(t, q.Ack(f.ctx, f.db, l))
			f.requireStats(t, q, fdbqueue.JobStats{})
		}},
		{"Ack", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			f.add(t, q, fdbqueue.Job{Value: []byte("a"), UniqueKey: "k"})
			l := f.leaseOne(t, q, time.Minute)
			inject()
			require.NoError(t, q.Ack(f.ctx, f.db, l), "the retry finds the ack applied, or applies it")
			f.requireStats(t, q, fdbqueue.JobStats{})
			require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost)
			f.requireNoJobKeys(t, q)
		}},
		{"AckWithOpIDInCallerLoop", testJobAckCallerLoop},
		{"Nack", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			f.add(t, q, fdbqueue.Job{Value: []byte("a"), MaxAttempts: 2})
			l := f.leaseOne(t, q, time.Minute)
			inject()
			dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1, Reason: "once"})
			require.NoError(t, err)
			require.False(t, dead)
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
			l = f.leaseOne(t, q, time.Minute)
			require.Equal(t, 2, l.Attempt)
			require.Equal(t, "once", l.Reason)
			inject()
			dead, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Reason: "last"})
			require.NoError(t, err)
			require.True(t, dead, "the retry returns the first attempt's result")
			f.requireStats(t, q, fdbqueue.JobStats{Dead: 1}, "dead-lettered exactly once")
		}},
		{"Extend", func(t *testing.T, f *fixture, inject func()) {
			q, c := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			f.add(t, q, fdbqueue.Job{Value: []byte("a")})
			l := f.leaseOne(t, q, time.Minute)
			inject()
			l, err := q.Extend(f.ctx, f.db, l, time.Hour)
			require.NoError(t, err)
			require.Equal(t, c.Now().Add(time.Hour).UnixMicro(), l.Deadline.UnixMicro())
			f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})
			c.Advance(time.Hour - time.Microsecond)
			f.requireNothingDue(t, q, "extended")
			require.NoError(t, q.Ack(f.ctx, f.db, l))
			f.requireStats(t, q, fdbqueue.JobStats{})
			f.requireNoJobKeys(t, q)
		}},
		{"Release", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
			f.add(t, q, fdbqueue.Job{Value: []byte("a")})
			l := f.leaseOne(t, q, time.Minute)
			inject()
			require.NoError(t, q.Release(f.ctx, f.db, l, 0), "the retry finds the release applied, or applies it")
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "released exactly once")
			l = f.leaseOne(t, q, time.Minute)
			require.Equal(t, 1, l.Attempt, "the attempt was given back once")
			require.NoError(t, q.Ack(f.ctx, f.db, l))
			f.requireNoJobKeys(t, q)
		}},
		{"ReleaseWithOpIDInCallerLoop", testJobReleaseCallerLoop},
		{"Cancel", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			a := f.add(t, q, fdbqueue.Job{Value: []byte("a"), UniqueKey: "ka", Priority: 1})
			b := f.add(t, q, fdbqueue.Job{Value: []byte("b"), UniqueKey: "kb"})
			l := f.leaseOne(t, q, time.Minute)
			require.Equal(t, a.ID, l.JobID)
			inject()
			require.NoError(t, q.Cancel(f.ctx, f.db, a.ID), "the retry finds the cancel applied (not ErrJobNotFound), or applies it")
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "the leased job cancelled exactly once")
			require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost)
			inject()
			require.NoError(t, q.Cancel(f.ctx, f.db, b.ID), "the retry finds the cancel applied, or applies it")
			f.requireStats(t, q, fdbqueue.JobStats{}, "the queued job cancelled exactly once")
			f.requireNoJobKeys(t, q)
			require.ErrorIs(t, q.Cancel(f.ctx, f.db, b.ID), fdbqueue.ErrJobNotFound, "a new call finds it gone")
			require.False(t, f.add(t, q, fdbqueue.Job{UniqueKey: "ka"}).Duplicate)
		}},
		{"CancelWithOpIDInCallerLoop", testJobCancelCallerLoop},
		{"Unschedule", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
			r, err := q.Schedule(f.ctx, f.db, periodic(), time.Time{})
			require.NoError(t, err)
			inject()
			info, err := q.Unschedule(f.ctx, f.db, periodic().Name)
			require.NoError(t, err, "the retry finds the unschedule applied (not ErrScheduleNotFound), or applies it")
			key, err := q.Subspace().Pack(tuple.Tuple{"p", periodic().Name})
			require.NoError(t, err)
			require.Equal(t, fdbqueue.ScheduleInfo{Name: periodic().Name, Slot: r.Slot.UTC(), ID: r.ID, Key: key}, info, "the marker it removed")
			all, err := q.Schedules(f.ctx, f.db, nil, 10)
			require.NoError(t, err)
			require.Empty(t, all)
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "the slot's job stays")
			_, err = q.Unschedule(f.ctx, f.db, periodic().Name)
			require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound, "a new call finds it gone")
		}},
		{"RequeueAndDeleteDead", func(t *testing.T, f *fixture, inject func()) {
			q, _ := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
			rs, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("a"), Priority: 1}, {Value: []byte("b")}})
			require.NoError(t, err)
			for range 2 {
				dead, err := q.Nack(f.ctx, f.db, f.leaseOne(t, q, time.Minute), fdbqueue.NackOptions{})
				require.NoError(t, err)
				require.True(t, dead)
			}
			inject()
			require.NoError(t, q.Requeue(f.ctx, f.db, rs[0].ID))
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Dead: 1}, "requeued exactly once")
			inject()
			require.NoError(t, q.DeleteDead(f.ctx, f.db, rs[1].ID))
			f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "deleted exactly once")
			require.Equal(t, []string{"a"}, leaseValues(f.leaseAll(t, q, 10)))
		}},
	}
}

// testJobAddCallerLoop: an Add in the caller's retry loop with an ID made
// once outside it adds the job once, with the caller's write, and every
// attempt after an applied one returns the first attempt's result.
func testJobAddCallerLoop(t *testing.T, f *fixture, inject func()) {
	q, c := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
	mark := f.key("mark")
	id := c.opID()
	var results []fdbqueue.AddResult
	inject()
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(mark, []byte("done"))
		r, err := q.Add(f.ctx, tr, fdbqueue.Job{Value: []byte("once"), UniqueKey: "k"}, fdbqueue.WithOpID(id))
		results = append(results, r)
		return err
	}))
	if !f.sweeping {
		require.Len(t, results, 2, "the caller's loop retried the injected failure")
	}
	last := results[len(results)-1]
	require.False(t, last.Duplicate, "the retry reports the first attempt's add, not a duplicate")
	require.Equal(t, []byte("done"), f.get(t, mark))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "added exactly once")
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, last.ID, l.JobID)
	requireValue(t, []byte("once"), l.Value)
}

// testJobCancelCallerLoop: a Cancel with the caller's write in the
// caller's retry loop, with an ID made once outside it: the write and the
// cancel take effect once, and the attempt after an applied commit
// returns nil from the journal, not ErrJobNotFound.
func testJobCancelCallerLoop(t *testing.T, f *fixture, inject func()) {
	q, c := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
	r := f.add(t, q, fdbqueue.Job{Value: []byte("job"), UniqueKey: "k"})
	id := c.opID()
	f.inCallerLoop(t, inject, f.key("cancelled/"+r.ID.String()), []byte("yes"), func(tr kv.Transaction) error {
		return q.Cancel(f.ctx, tr, r.ID, fdbqueue.WithOpID(id))
	})
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// testJobAckCallerLoop: an Ack with the job's write in the caller's retry
// loop, with an ID made once outside it: the write and the ack take effect
// once, whatever the first commit did. The write is keyed by the job, as
// ExampleJobQueue_Ack writes it: a retry after an applied commit runs the
// caller's function again.
func testJobAckCallerLoop(t *testing.T, f *fixture, inject func()) {
	q, c := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("job")})
	l := f.leaseOne(t, q, time.Minute)
	effect := f.key("effect/" + l.JobID.String())
	id := c.opID()
	f.inCallerLoop(t, inject, effect, l.ID[:], func(tr kv.Transaction) error {
		return q.Ack(f.ctx, tr, l, fdbqueue.WithOpID(id))
	})
	f.requireStats(t, q, fdbqueue.JobStats{})
	require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost)
	f.requireNoJobKeys(t, q)
}

// testJobReleaseCallerLoop: a Release with the caller's write in the
// caller's retry loop, with an ID made once outside it: the write and the
// release take effect once, and the retry after an applied commit returns
// nil (from the journal), not ErrLeaseLost.
func testJobReleaseCallerLoop(t *testing.T, f *fixture, inject func()) {
	q, c := f.jobQueue(t, "fault", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("job")})
	l := f.leaseOne(t, q, time.Minute)
	mark := f.key("release/" + l.JobID.String())
	id := c.opID()
	f.inCallerLoop(t, inject, mark, l.ID[:], func(tr kv.Transaction) error {
		return q.Release(f.ctx, tr, l, 0, fdbqueue.WithOpID(id))
	})
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, 1, l.Attempt, "not dead: the attempt was given back")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// failedTxLease makes a job queue named name holding jobs a (priority 1:
// leased first) and b, and leases a in the caller's transaction under a
// new ID, whose commit then fails with fk. It returns the queue, the ID
// and the lease the failed transaction returned.
func (f *fixture) failedTxLease(t *testing.T, name string, fk fault) (*fdbqueue.JobQueue, fdbqueue.OpID, []fdbqueue.Lease) {
	fi := f.faults(t)
	q, c := f.jobQueue(t, name, fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("a"), Priority: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("b")})
	id := c.opID()
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	ls, err := q.Lease(f.ctx, tr, 1, time.Minute, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Len(t, ls, 1)
	fi.FailNextCommit(fk.err, fk.applied)
	require.ErrorIs(t, tr.Commit(), fk.err)
	return q, id, ls
}

// testJobLeaseByOpID: a Lease in the caller's transaction, whose commit
// fails, called again with the same ID: if the commit applied, the same
// lease (same lease ID) comes back; if not, the job is leased now. Either
// way it is leased once, with one attempt counted.
func testJobLeaseByOpID(t *testing.T, f *fixture, fk fault) {
	q, id, ls := f.failedTxLease(t, "recover", fk)
	again, err := q.Lease(f.ctx, f.db, 1, time.Minute, fdbqueue.WithOpID(id))
	require.NoError(t, err, "Lease again with the same ID")
	require.Len(t, again, 1)
	require.Equal(t, ls[0].JobID, again[0].JobID, "the same job")
	requireValue(t, []byte("a"), again[0].Value)
	require.Equal(t, 1, again[0].Attempt, "one attempt counted")
	if fk.applied {
		require.Equal(t, ls[0].ID, again[0].ID, "the applied lease is returned, not a new one")
		require.NoError(t, q.Ack(f.ctx, f.db, ls[0]), "the first attempt's lease holds the job")
	} else {
		require.NoError(t, q.Ack(f.ctx, f.db, again[0]))
	}
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
	require.Equal(t, []string{"b"}, leaseValues(f.leaseAll(t, q, 10)))
}

// testJobSettleLease: a Lease in the caller's transaction, whose commit
// fails, settled with SettleLease under its ID: if the commit applied,
// its lease comes back; if not, nothing is leased, and the jobs keep
// their order and attempts. Either way a Lease under the ID afterwards
// replays what SettleLease returned.
func testJobSettleLease(t *testing.T, f *fixture, fk fault) {
	q, id, ls := f.failedTxLease(t, "settle", fk)

	settled, err := q.SettleLease(f.ctx, f.db, id)
	require.NoError(t, err)
	again, againErr := q.Lease(f.ctx, f.db, 1, time.Minute, fdbqueue.WithOpID(id))
	if fk.applied {
		require.Len(t, settled, 1, "the applied lease comes back")
		require.Equal(t, ls[0].ID, settled[0].ID)
		require.NoError(t, againErr)
		require.Equal(t, settled[0].ID, again[0].ID, "Lease under the ID replays it")
		require.NoError(t, q.Release(f.ctx, f.db, settled[0], 0))
	} else {
		require.Empty(t, settled, "nothing was leased, and SettleLease leases nothing")
		require.ErrorIs(t, againErr, fdbqueue.ErrEmpty, "Lease under the ID replays the settled empty lease")
		f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 2})
		got := f.leaseAll(t, q, 10)
		require.Equal(t, []string{"a", "b"}, leaseValues(got), "the jobs keep their order")
		require.Equal(t, []int{1, 1}, []int{got[0].Attempt, got[1].Attempt}, "no attempt counted")
	}
}

// testJobLeaseByOpIDAfterReLease: Lease called again with the ID of a
// Lease that committed (here in the caller's transaction, whose journal
// record stays) returns only the jobs still under that call's leases. A
// job acked since is left out; so is a job nacked and leased again by
// another consumer, even when its new lease's deadline, and so its key,
// is the old one's: handing back that lease would give two consumers the
// same lease. A Lease that leased nothing is replayed as such.
func testJobLeaseByOpIDAfterReLease(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "recover-released", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("a"), Priority: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("b")})
	id := c.opID()
	var ls []fdbqueue.Lease
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		var err error
		ls, err = q.Lease(f.ctx, tr, 2, time.Minute, fdbqueue.WithOpID(id))
		return err
	}))
	require.Equal(t, []string{"a", "b"}, leaseValues(ls))
	require.NoError(t, q.Ack(f.ctx, f.db, ls[1]))
	_, err := q.Nack(f.ctx, f.db, ls[0], fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	other := f.leaseOne(t, q, time.Minute)
	require.Equal(t, ls[0].JobID, other.JobID)
	require.Equal(t, ls[0].Deadline, other.Deadline, "the clock has not moved: the new lease's key is the old one's")
	require.NotEqual(t, ls[0].ID, other.ID)

	again, err := q.Lease(f.ctx, f.db, 2, time.Minute, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "no job is still under the first call's leases; got %v", again)
	require.Empty(t, again)
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})
	require.ErrorIs(t, q.Ack(f.ctx, f.db, ls[0]), fdbqueue.ErrLeaseLost)
	require.NoError(t, q.Ack(f.ctx, f.db, other), "the other consumer's lease is untouched")
	f.requireNoJobKeys(t, q)

	// A Lease that committed having only buried its candidates (their last
	// lease expired) recorded that it leased nothing: called again with
	// its ID, it returns ErrEmpty again, not an error about its record.
	f.add(t, q, fdbqueue.Job{Value: []byte("last try"), MaxAttempts: 1})
	f.leaseOne(t, q, time.Minute)
	c.Advance(2 * time.Minute)
	buried := c.opID()
	for i := range 2 {
		_, err = q.Lease(f.ctx, f.db, 1, time.Minute, fdbqueue.WithOpID(buried))
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "call %d with the ID of a Lease that only buried", i+1)
	}
	f.requireStats(t, q, fdbqueue.JobStats{Dead: 1})
}
