package queuetest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// jobLimitChecks: values at every accepted limit, unique keys at theirs,
// and AddBatch at the edge of its budget, each then leased, nacked,
// dead-lettered, requeued and acked intact; one byte over a limit is
// refused with its typed error before anything is written.
func jobLimitChecks() []check {
	var cs []check
	for _, vc := range LimitValues(fdbqueue.RawValues) {
		cs = append(cs, check{"Values/" + vc.Name, func(t *testing.T, f *fixture) { testJobValue(t, f, vc) }})
	}
	for _, fill := range Fills {
		cs = append(cs,
			check{"Values/OverLimit/" + fill.Name, func(t *testing.T, f *fixture) { testJobOverLimit(t, f, fill) }},
			check{"UniqueKeyAtLimit/" + fill.Name, func(t *testing.T, f *fixture) { testJobUniqueAtLimit(t, f, fill) }},
		)
	}
	cs = append(cs,
		check{"Batches/MaxValuesAtBudget", func(t *testing.T, f *fixture) {
			testJobBatchAtBudget(t, f, func(i int) fdbqueue.Job {
				return fdbqueue.Job{Value: MaxValue(fdbqueue.RawValues, Fills[i%len(Fills)])}
			})
		}},
		check{"Batches/SmallJobsAtBudget", func(t *testing.T, f *fixture) {
			testJobBatchAtBudget(t, f, func(i int) fdbqueue.Job { return fdbqueue.Job{Value: []byte(fmt.Sprint(i))} })
		}},
		check{"Batches/LongUniqueKeysAtBudget", func(t *testing.T, f *fixture) {
			testJobBatchAtBudget(t, f, func(i int) fdbqueue.Job {
				k := MakeValue(Fills[1], fdbqueue.MaxUniqueKeySize)
				copy(k, fmt.Sprint(i, "/"))
				return fdbqueue.Job{Value: []byte(fmt.Sprint(i)), UniqueKey: string(k), Priority: -1 << 31}
			})
		}},
	)
	return cs
}

// testJobValue: a value Add accepts comes back unchanged from Lease, after
// a Nack, from ListDead once dead, after Requeue, from AddBatch, and is
// acked inside the caller's transaction.
func testJobValue(t *testing.T, f *fixture, vc ValueCase) {
	q, c := f.jobQueue(t, "value", fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 2})
	v := vc.Value
	r, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: v})
	require.NoError(t, err, "Add of %s (limit %d)", describe(v), kv.MaxValueSize)
	l := f.leaseOne(t, q, time.Minute)
	requireValue(t, v, l.Value, "Lease")
	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	l = f.leaseOne(t, q, time.Minute)
	requireValue(t, v, l.Value, "Lease after a Nack")
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, dead)
	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	requireValue(t, v, ds[0].Value, "ListDead")
	require.NoError(t, q.Requeue(f.ctx, f.db, r.ID))
	l = f.leaseOne(t, q, time.Minute)
	requireValue(t, v, l.Value, "Lease after Requeue")
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		return q.Ack(f.ctx, tr, l, fdbqueue.WithOpID(c.opID()))
	}))

	_, err = q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: v}, {Value: v}, {Value: []byte("end")}})
	require.NoError(t, err, "AddBatch of two %s", describe(v))
	ls := f.leaseAll(t, q, 3)
	require.Len(t, ls, 3)
	for _, l := range ls {
		require.NoError(t, q.Ack(f.ctx, f.db, l))
	}
	requireValues(t, [][]byte{v, v, []byte("end")}, sortedByValueTail(ls, v), "AddBatch, then Lease")
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}

// sortedByValueTail returns the leases' values with those equal to v
// first (jobs added in one batch at one time are in job-ID order).
func sortedByValueTail(ls []fdbqueue.Lease, v []byte) [][]byte {
	var same, other [][]byte
	for _, l := range ls {
		if bytes.Equal(l.Value, v) {
			same = append(same, l.Value)
		} else {
			other = append(other, l.Value)
		}
	}
	return append(same, other...)
}

// testJobOverLimit: one byte over the value limit fails with
// ErrValueTooLarge (also kv.ErrValueTooLarge), alone or in a batch, and
// writes nothing; the largest value is accepted.
func testJobOverLimit(t *testing.T, f *fixture, fill Fill) {
	q, _ := f.jobQueue(t, "over", fdbqueue.JobQueueConfig{Choice: 1})
	over := OverMaxValue(fdbqueue.RawValues, fill)
	_, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: over, UniqueKey: "k"})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "Add of %s", describe(over))
	require.ErrorIs(t, err, kv.ErrValueTooLarge)
	_, err = q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("ok"), UniqueKey: "k"}, {Value: over}})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "AddBatch with one value over the limit")
	f.requireStats(t, q, fdbqueue.JobStats{}, "nothing is written when a value is too large")
	f.requireNoJobKeys(t, q)
	r := f.add(t, q, fdbqueue.Job{Value: MaxValue(fdbqueue.RawValues, fill), UniqueKey: "k"})
	require.False(t, r.Duplicate, "the refused adds held no unique key")
}

// testJobUniqueAtLimit: a unique key of MaxUniqueKeySize bytes of fill
// works (duplicate while held, free after ack); one byte more fails with
// ErrInvalidArgument and writes nothing.
func testJobUniqueAtLimit(t *testing.T, f *fixture, fill Fill) {
	q, _ := f.jobQueue(t, "unique-limit", fdbqueue.JobQueueConfig{Choice: 1})
	key := string(MakeValue(fill, fdbqueue.MaxUniqueKeySize))
	_, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("x"), UniqueKey: key + "!"})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a unique key over the limit")
	f.requireStats(t, q, fdbqueue.JobStats{})
	a := f.add(t, q, fdbqueue.Job{Value: []byte("a"), UniqueKey: key})
	require.False(t, a.Duplicate)
	b := f.add(t, q, fdbqueue.Job{Value: []byte("b"), UniqueKey: key})
	require.Equal(t, fdbqueue.AddResult{ID: a.ID, Duplicate: true}, b)
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, key, l.UniqueKey)
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	c := f.add(t, q, fdbqueue.Job{Value: []byte("c"), UniqueKey: key})
	require.False(t, c.Duplicate, "free after the ack")
	l = f.leaseOne(t, q, time.Minute)
	dead, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -1, Reason: string(MakeValue(fill, 3*fdbqueue.MaxReasonSize))})
	require.NoError(t, err)
	require.False(t, dead)
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, string(MakeValue(fill, fdbqueue.MaxReasonSize)), l.Reason, "a long reason is cut to MaxReasonSize")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireNoJobKeys(t, q)
}

// testJobBatchAtBudget: the largest batch of jobs made by job that AddBatch
// accepts under the default budget (found by probing inside transactions
// that roll back) is added, and one more job is refused with
// ErrBatchTooLarge, writing nothing. Every job is then leased, in leases
// of up to MaxLeaseBatch (Lease takes fewer when more would pass the
// budget), once each and with its value intact, and acked.
func testJobBatchAtBudget(t *testing.T, f *fixture, job func(i int) fdbqueue.Job) {
	q, c := f.jobQueue(t, "budget", fdbqueue.JobQueueConfig{Choice: 1})
	batch := func(n int) []fdbqueue.Job {
		out := make([]fdbqueue.Job, n)
		for i := range out {
			out[i] = job(i)
		}
		return out
	}
	fits := func(n int) bool {
		err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
			if _, err := q.AddBatch(f.ctx, tr, batch(n), fdbqueue.WithOpID(c.opID())); err != nil {
				return err
			}
			return errAbort
		})
		if err == errAbort {
			return true
		}
		require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "probing a batch of %d", n)
		return false
	}
	lo, hi := 1, 2 // fits(lo); find hi that does not
	require.True(t, fits(lo), "a batch of one job fits the budget")
	for fits(hi) {
		lo, hi = hi, 2*hi
		require.Less(t, hi, 1<<20, "AddBatch never reports ErrBatchTooLarge")
	}
	for hi-lo > 1 {
		if mid := (lo + hi) / 2; fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	n := lo
	t.Logf("AddBatch takes %d such jobs under the default budget", n)

	_, err := q.AddBatch(f.ctx, f.db, batch(n+1), fdbqueue.WithOpID(c.opID()))
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "one job more than fits")
	f.requireStats(t, q, fdbqueue.JobStats{}, "a refused batch writes nothing")
	jobs := batch(n)
	rs, err := q.AddBatch(f.ctx, f.db, jobs, fdbqueue.WithOpID(c.opID()))
	require.NoError(t, err, "the largest batch that fits, on its own transaction")
	require.Len(t, rs, n)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: int64(n), Due: int64(n)})

	byID := make(map[fdbqueue.JobID]int, n)
	for i, r := range rs {
		require.False(t, r.Duplicate, "job %d", i)
		byID[r.ID] = i
	}
	require.Len(t, byID, n, "every job has its own ID")
	ls := f.leaseAll(t, q, fdbqueue.MaxLeaseBatch)
	require.Len(t, ls, n, "every job is leased once")
	for _, l := range ls {
		i, ok := byID[l.JobID]
		require.True(t, ok, "a lease of a job never added")
		delete(byID, l.JobID)
		requireValue(t, jobs[i].Value, l.Value, "job %d", i)
		require.Equal(t, jobs[i].UniqueKey, l.UniqueKey, "job %d", i)
		require.Equal(t, jobs[i].Priority, l.Priority, "job %d", i)
	}
	f.requireStats(t, q, fdbqueue.JobStats{Leased: int64(n)})
	for _, l := range ls {
		require.NoError(t, q.Ack(f.ctx, f.db, l))
	}
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)
}
