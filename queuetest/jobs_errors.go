package queuetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// jobErrorChecks: every bad input the JobQueue documents fails with its
// typed error, never a panic, and writes nothing; the queue works on
// unchanged afterwards.
func jobErrorChecks() []check {
	return []check{
		{"Errors/NewJobQueue", testJobBadConfig},
		{"Errors/Add", testJobBadAdd},
		{"Errors/Lease", testJobBadLease},
		{"Errors/Extend", testJobBadExtend},
		{"Errors/ListDead", testJobBadListDead},
		{"Errors/UnknownLeaseOrJob", testJobUnknown},
		{"Errors/NilTransactor", testJobNilTransactor},
		{"Errors/OperationExpired", testJobOperationExpired},
		{"Errors/TinyBudget", testJobTinyBudget},
	}
}

// testJobBadConfig: NewJobQueue refuses each bad configuration field, an
// empty subspace and the Options a JobQueue does not take, with
// ErrInvalidArgument.
func testJobBadConfig(t *testing.T, f *fixture) {
	sub := f.sub(t, "bad-config")
	cfgs := []fdbqueue.JobQueueConfig{
		{LeaseDuration: -time.Second}, {LeaseDuration: time.Millisecond - 1},
		{MaxAttempts: -1},
		{Choice: -1}, {Choice: fdbqueue.MaxLeaseBatch + 1},
		{RetryBase: -time.Second}, {RetryBase: time.Minute, RetryMax: time.Second},
		{StatsResolution: -time.Second}, {StatsResolution: time.Millisecond - 1},
	}
	for _, cfg := range cfgs {
		q, err := fdbqueue.NewJobQueue(sub, cfg)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "%+v", cfg)
		require.Nil(t, q)
	}
	for name, opt := range map[string]fdbqueue.Option{
		"WithStaging":           fdbqueue.WithStaging(fdbqueue.StagingConfig{}),
		"WithVersionstampOrder": fdbqueue.WithVersionstampOrder(),
		"TupleValues":           fdbqueue.WithValueEncoding(fdbqueue.TupleValues),
	} {
		_, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{}, opt)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
	_, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes(nil), fdbqueue.JobQueueConfig{})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "an empty subspace")
	// The limits themselves are accepted.
	_, err = fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{LeaseDuration: time.Millisecond, MaxAttempts: 1,
		Choice: fdbqueue.MaxLeaseBatch, RetryBase: time.Second, RetryMax: time.Second, StatsResolution: time.Millisecond})
	require.NoError(t, err)
}

// testJobBadAdd: a bad job anywhere in a batch fails the whole batch with
// its typed error before anything is written.
func testJobBadAdd(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "bad-add", fdbqueue.JobQueueConfig{Choice: 1})
	good := fdbqueue.Job{Value: []byte("good"), UniqueKey: "g"}
	for name, bad := range map[string]fdbqueue.Job{
		"negative MaxAttempts": {Value: []byte("x"), MaxAttempts: -1},
		"long unique key":      {Value: []byte("x"), UniqueKey: string(make([]byte, fdbqueue.MaxUniqueKeySize+1))},
	} {
		_, err := q.Add(f.ctx, f.db, bad)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
		_, err = q.AddBatch(f.ctx, f.db, []fdbqueue.Job{good, bad})
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a batch with a %s", name)
	}
	f.requireStats(t, q, fdbqueue.JobStats{}, "nothing written")
	f.requireNoJobKeys(t, q)
	rs, err := q.AddBatch(f.ctx, f.db, nil)
	require.NoError(t, err, "an empty batch does nothing")
	require.Empty(t, rs)
	r := f.add(t, q, good)
	require.False(t, r.Duplicate, "the refused batches held no unique key")
}

// testJobBadLease: a lease batch outside 1..MaxLeaseBatch, and a lease
// duration under 1 ms, fail with ErrInvalidArgument and lease nothing.
func testJobBadLease(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "bad-lease", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("x")})
	for _, n := range []int{0, -1, fdbqueue.MaxLeaseBatch + 1} {
		ls, err := q.Lease(f.ctx, f.db, n, time.Minute)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "n = %d", n)
		require.Empty(t, ls)
	}
	for _, d := range []time.Duration{-time.Second, time.Millisecond - 1} {
		_, err := q.Lease(f.ctx, f.db, 1, d)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "d = %v", d)
	}
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "nothing leased")
	l := f.leaseOne(t, q, time.Millisecond)
	require.Equal(t, 1, l.Attempt, "no attempt counted")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// testJobBadExtend: a duration under 1 ms fails with ErrInvalidArgument
// and leaves the lease as it was.
func testJobBadExtend(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "bad-extend", fdbqueue.JobQueueConfig{Choice: 1})
	f.add(t, q, fdbqueue.Job{Value: []byte("x")})
	l := f.leaseOne(t, q, time.Minute)
	for _, d := range []time.Duration{-time.Second, time.Millisecond - 1} {
		_, err := q.Extend(f.ctx, f.db, l, d)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "d = %v", d)
	}
	c.Advance(time.Minute)
	f.requireStats(t, q, fdbqueue.JobStats{Due: 1, ExpiredLeases: 1}, "the deadline did not move")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// testJobBadListDead: a limit under 1, and a cursor that is not one of
// this queue's dead-letter cursors (another queue's included), fail with
// ErrInvalidArgument.
func testJobBadListDead(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "bad-list", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
	other, _ := f.jobQueue(t, "bad-list-other", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 1})
	for _, jq := range []*fdbqueue.JobQueue{q, other} {
		f.add(t, jq, fdbqueue.Job{Value: []byte("x")})
		_, err := jq.Nack(f.ctx, f.db, f.leaseOne(t, jq, time.Minute), fdbqueue.NackOptions{})
		require.NoError(t, err)
	}
	for _, limit := range []int{0, -1} {
		_, err := q.ListDead(f.ctx, f.db, nil, limit)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "limit %d", limit)
	}
	theirs, err := other.ListDead(f.ctx, f.db, nil, 1)
	require.NoError(t, err)
	require.Len(t, theirs, 1)
	for name, cursor := range map[string][]byte{
		"not a cursor":          []byte("not a cursor"),
		"empty":                 {},
		"another queue's":       theirs[0].Cursor,
		"this queue's subspace": q.Subspace().Bytes(),
	} {
		_, err := q.ListDead(f.ctx, f.db, cursor, 1)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "cursor %s", name)
	}
	ours, err := q.ListDead(f.ctx, f.db, nil, 1)
	require.NoError(t, err)
	require.Len(t, ours, 1)
}

// testJobUnknown: Ack, Nack, Extend and Release of a lease the queue never gave
// fail with ErrLeaseLost; Requeue and DeleteDead of an ID that is not a
// dead job (never added, or alive) fail with ErrJobNotFound. None writes.
func testJobUnknown(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "unknown", fdbqueue.JobQueueConfig{Choice: 1})
	r := f.add(t, q, fdbqueue.Job{Value: []byte("alive")})
	live := f.leaseOne(t, q, time.Minute)
	forged := live
	forged.ID[0] ^= 0xff
	for name, l := range map[string]fdbqueue.Lease{"zero": {}, "forged lease ID": forged, "unknown job": {JobID: fdbqueue.JobID{1}}} {
		require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost, "Ack of a %s lease", name)
		_, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
		require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "Nack of a %s lease", name)
		_, err = q.Extend(f.ctx, f.db, l, time.Minute)
		require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "Extend of a %s lease", name)
		require.ErrorIs(t, q.Release(f.ctx, f.db, l, 0), fdbqueue.ErrLeaseLost, "Release of a %s lease", name)
	}
	for name, id := range map[string]fdbqueue.JobID{"never added": {2}, "alive": r.ID} {
		require.ErrorIs(t, q.Requeue(f.ctx, f.db, id), fdbqueue.ErrJobNotFound, "Requeue of a job %s", name)
		require.ErrorIs(t, q.DeleteDead(f.ctx, f.db, id), fdbqueue.ErrJobNotFound, "DeleteDead of a job %s", name)
	}
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "nothing changed")
	require.NoError(t, q.Ack(f.ctx, f.db, live), "the real lease is intact")
}

// testJobNilTransactor: every operation given a nil Database fails with
// ErrInvalidArgument (never a panic).
func testJobNilTransactor(t *testing.T, f *fixture) {
	q, _ := f.jobQueue(t, "nil", fdbqueue.JobQueueConfig{Choice: 1})
	var db kv.Database
	var tr kv.Transaction
	ops := map[string]func() error{
		"Add":         func() error { _, err := q.Add(f.ctx, db, fdbqueue.Job{}); return err },
		"AddTr":       func() error { _, err := q.Add(f.ctx, tr, fdbqueue.Job{}); return err },
		"Lease":       func() error { _, err := q.Lease(f.ctx, db, 1, 0); return err },
		"LeaseWait":   func() error { _, err := q.LeaseWait(f.ctx, db, 1, 0); return err },
		"SettleLease": func() error { _, err := q.SettleLease(f.ctx, db, fdbqueue.NewOpID()); return err },
		"Ack":         func() error { return q.Ack(f.ctx, db, fdbqueue.Lease{}) },
		"Nack":        func() error { _, err := q.Nack(f.ctx, db, fdbqueue.Lease{}, fdbqueue.NackOptions{}); return err },
		"Extend":      func() error { _, err := q.Extend(f.ctx, db, fdbqueue.Lease{}, 0); return err },
		"Release":     func() error { return q.Release(f.ctx, db, fdbqueue.Lease{}, 0) },
		"Stats":       func() error { _, err := q.Stats(f.ctx, db); return err },
		"ListDead":    func() error { _, err := q.ListDead(f.ctx, db, nil, 1); return err },
		"Requeue":     func() error { return q.Requeue(f.ctx, db, fdbqueue.JobID{}) },
		"DeleteDead":  func() error { return q.DeleteDead(f.ctx, db, fdbqueue.JobID{}) },
		"Job":         func() error { _, err := q.Job(f.ctx, db, fdbqueue.JobID{}); return err },
		"Cancel":      func() error { return q.Cancel(f.ctx, db, fdbqueue.JobID{}) },
		"CancelTr":    func() error { return q.Cancel(f.ctx, tr, fdbqueue.JobID{}) },
	}
	for name, op := range ops {
		require.ErrorIs(t, op(), fdbqueue.ErrInvalidArgument, fmt.Sprint(name, " with a nil transactor"))
	}
}

// testJobOperationExpired: an operation whose WithOpID is older than the
// journal retention (by the queue's clock) fails with ErrOperationExpired
// and writes nothing: its record could have been cleared, so it could no
// longer tell whether it already took effect.
func testJobOperationExpired(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "op-expired", fdbqueue.JobQueueConfig{Choice: 1}, fdbqueue.WithJournalRetention(time.Minute))
	id := c.opID()
	c.Advance(time.Minute + time.Second)
	_, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("x")}, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired, "Add")
	f.requireStats(t, q, fdbqueue.JobStats{}, "nothing added")

	f.add(t, q, fdbqueue.Job{Value: []byte("y")})
	id = c.opID()
	c.Advance(time.Minute + time.Second)
	_, err = q.Lease(f.ctx, f.db, 1, time.Hour, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired, "Lease")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, OldestDue: time.Minute + time.Second}, "nothing leased")
	l := f.leaseOne(t, q, time.Hour)
	id = c.opID()
	c.Advance(time.Minute + time.Second)
	err = f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(f.key("effect"), []byte("done"))
		return q.Ack(f.ctx, tr, l, fdbqueue.WithOpID(id))
	})
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired, "Ack")
	require.Nil(t, f.get(t, f.key("effect")), "the caller's write did not commit")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1}, "nothing acked")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// testJobTinyBudget: under the smallest batch budget (1 byte), AddBatch
// refuses a batch of two jobs with ErrBatchTooLarge and accepts one (as
// EnqueueBatch accepts one item), and Lease still takes one job per call
// (a batch always handles its first item), never none while jobs are due.
func testJobTinyBudget(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "tiny-budget", fdbqueue.JobQueueConfig{Choice: 1})
	tiny, err := fdbqueue.NewJobQueue(q.Subspace(), fdbqueue.JobQueueConfig{Choice: 1, Clock: c}, fdbqueue.WithBatchBudget(1))
	require.NoError(t, err)
	_, err = tiny.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("x")}, {Value: []byte("y")}})
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	_, err = tiny.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("x")})
	require.NoError(t, err, "one job is always accepted")
	ls, err := tiny.Lease(f.ctx, f.db, 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 1, "the refused batch added nothing")
	require.Equal(t, "x", string(ls[0].Value))
	require.NoError(t, tiny.Ack(f.ctx, f.db, ls[0]))
	_, err = q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("a"), Priority: 3}, {Value: []byte("b"), Priority: 2}, {Value: []byte("c"), Priority: 1}})
	require.NoError(t, err)
	var got []string
	for range 3 {
		ls, err := tiny.Lease(f.ctx, f.db, 10, time.Minute)
		require.NoError(t, err)
		require.Len(t, ls, 1, "one job per lease under the smallest budget")
		got = append(got, string(ls[0].Value))
		require.NoError(t, tiny.Ack(f.ctx, f.db, ls[0]))
	}
	require.Equal(t, []string{"a", "b", "c"}, got)
	f.requireStats(t, q, fdbqueue.JobStats{})
}
