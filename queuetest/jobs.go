package queuetest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// The Jobs area checks the JobQueue (the lease layer): what its doc
// comments and "Job queue with leases" in docs/design.md promise. Every
// check gives its queue a Clock, so vesting times, deadlines and
// backoffs are moved by the check, never waited for, and never by moving
// the backend's clock.
func jobChecks() []check {
	cs := []check{
		{"AddLeaseAck", testJobRoundTrip},
		{"DelayAndRunAtNeverEarly", testJobDelay},
		{"ExtremeTimes", testJobExtremeTimes},
		{"SubMicrosecondNeverEarly", testJobSubMicrosecond},
		{"NegativeDelayDueNow", testJobNegativeDelay},
		{"StatsBeforeEpoch", testJobStatsBeforeEpoch},
		{"StrictOrder", testJobStrictOrder},
		{"ChoiceWindow", testJobChoiceWindow},
		{"UniqueKey", testJobUnique},
		{"DeadLetter", testJobDeadLetter},
		{"DeadKeepsEarlierReason", testJobDeadKeepsEarlierReason},
		{"ExpiredLeaseLost", testJobExpiredLeaseLost},
		{"Extend", testJobExtend},
		{"NackDelayAndBackoff", testJobNack},
		{"AckCommitsWithCallerWrite", func(t *testing.T, f *fixture) { testJobAckInCaller(t, f, true) }},
		{"AckRollsBackWithCaller", func(t *testing.T, f *fixture) { testJobAckInCaller(t, f, false) }},
		{"AckCallerCommitFails", testJobAckCallerCommitFails},
		{"AddAndLeaseRollBackWithCaller", testJobAddLeaseRollBack},
		{"LeaseAndAckInOneTransaction", testJobLeaseAckOneTransaction},
		{"Stats", testJobStats},
		{"StatsResolutionStored", testJobStatsResolutionStored},
		{"LeaseWait", testJobLeaseWait},
		{"LeaseByOpIDAfterReLease", testJobLeaseByOpIDAfterReLease},
		{"Pool", testJobPool},
		{"PoolFailures", testJobPoolFailures},
	}
	cs = append(cs, jobReleaseChecks()...)
	cs = append(cs, jobByIDChecks()...)
	cs = append(cs, jobConcurrencyChecks()...)
	cs = append(cs, jobFaultChecks()...)
	cs = append(cs, jobLimitChecks()...)
	cs = append(cs, jobErrorChecks()...)
	cs = append(cs, jobPeriodicChecks()...)
	return cs
}

// newJobClock starts a Clock at the current hour (aligned, so that Stats'
// time buckets fall the same way on every run).
func newJobClock() *Clock {
	return NewClock(time.Now().UTC().Truncate(time.Hour))
}

// opID returns a new operation ID stamped with the clock's time (an
// OpID's first 8 bytes are its creation time in big-endian Unix µs, see
// fdbqueue.OpID), so that the journal, which ages IDs by the queue's
// clock, never finds it expired however far the check moved the clock.
// Its random part has no 0x00 byte, so every such ID packs to the same
// length and a batch's size as the queue counts it does not depend on it.
func (c *Clock) opID() fdbqueue.OpID {
	id := fdbqueue.NewOpID()
	us := uint64(c.Now().UnixMicro())
	for i := range 8 {
		id[i] = byte(us >> (56 - 8*i))
	}
	for i := 8; i < len(id); i++ {
		if id[i] == 0 {
			id[i] = 1
		}
	}
	return id
}

// jobQueue makes a JobQueue in a fresh subspace with a clock of its own
// (cfg.Clock, unless the check passes one).
func (f *fixture) jobQueue(t *testing.T, name string, cfg fdbqueue.JobQueueConfig, opts ...fdbqueue.Option) (*fdbqueue.JobQueue, *Clock) {
	t.Helper()
	c, _ := cfg.Clock.(*Clock)
	if cfg.Clock == nil {
		c = newJobClock()
		cfg.Clock = c
	}
	q, err := fdbqueue.NewJobQueue(f.sub(t, name), cfg, opts...)
	require.NoError(t, err, "NewJobQueue(%s)", name)
	return q, c
}

// add adds one job in its own transaction.
func (f *fixture) add(t *testing.T, q *fdbqueue.JobQueue, j fdbqueue.Job) fdbqueue.AddResult {
	t.Helper()
	r, err := q.Add(f.ctx, f.db, j)
	require.NoError(t, err, "Add of %s", describe(j.Value))
	return r
}

// lease leases up to n jobs for d and requires at least one.
func (f *fixture) lease(t *testing.T, q *fdbqueue.JobQueue, n int, d time.Duration) []fdbqueue.Lease {
	t.Helper()
	ls, err := q.Lease(f.ctx, f.db, n, d)
	require.NoError(t, err, "Lease(%d)", n)
	require.NotEmpty(t, ls, "Lease returned no lease and no error")
	require.LessOrEqual(t, len(ls), n, "Lease(%d) returned more leases than asked", n)
	return ls
}

// leaseOne leases exactly one job for d.
func (f *fixture) leaseOne(t *testing.T, q *fdbqueue.JobQueue, d time.Duration) fdbqueue.Lease {
	t.Helper()
	return f.lease(t, q, 1, d)[0]
}

// requireNothingDue requires Lease to find no due job.
func (f *fixture) requireNothingDue(t *testing.T, q *fdbqueue.JobQueue, msgAndArgs ...any) {
	t.Helper()
	ls, err := q.Lease(f.ctx, f.db, fdbqueue.MaxLeaseBatch, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, msgAndArgs...)
	require.Empty(t, ls, msgAndArgs...)
}

// requireStats compares the whole of Stats with want.
func (f *fixture) requireStats(t *testing.T, q *fdbqueue.JobQueue, want fdbqueue.JobStats, msgAndArgs ...any) {
	t.Helper()
	got, err := q.Stats(f.ctx, f.db)
	require.NoError(t, err, "Stats")
	require.Equal(t, want, got, msgAndArgs...)
}

// requireNoJobKeys requires that no job is left in the queue's keys: no
// record, value, index, unique key or dead record, and no time-bucket
// counter (cleared when it reaches zero), per the key layout in
// docs/design.md. The three counters and the signal stay, as does the
// journal (outside the subspace's range).
func (f *fixture) requireNoJobKeys(t *testing.T, q *fdbqueue.JobQueue) {
	t.Helper()
	sub := q.Subspace()
	for _, elems := range [][]any{{"q"}, {"v"}, {"x"}, {"u"}, {"d"}, {"c", "p"}, {"c", "e"}} {
		r, err := sub.Range(elems...)
		require.NoError(t, err)
		kvs, err := kv.ReadTransact(f.ctx, f.db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			return tr.GetRange(r, kv.RangeOptions{Limit: 3}).GetSlice()
		})
		require.NoError(t, err)
		require.Empty(t, kvs, "keys of kind %v are left behind", elems)
	}
}

// leaseValues leases every due job, n at a time, for an hour, and returns
// the leases in the order taken.
func (f *fixture) leaseAll(t *testing.T, q *fdbqueue.JobQueue, n int) []fdbqueue.Lease {
	t.Helper()
	var out []fdbqueue.Lease
	for {
		ls, err := q.Lease(f.ctx, f.db, n, time.Hour)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			return out
		}
		require.NoError(t, err, "Lease after %d leases", len(out))
		require.NotEmpty(t, ls)
		out = append(out, ls...)
		require.LessOrEqual(t, len(out), 1_000_000, "Lease never reports ErrEmpty")
	}
}

func leaseValues(ls []fdbqueue.Lease) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = string(l.Value)
	}
	return out
}

// testJobRoundTrip: a job is added, leased with every field of the Lease
// set as documented, invisible while leased, and gone once acked; an ack,
// nack or extend of the acked lease fails with ErrLeaseLost.
func testJobRoundTrip(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "jobs", fdbqueue.JobQueueConfig{Choice: 1})
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNothingDue(t, q, "an empty queue")
	r := f.add(t, q, fdbqueue.Job{Value: []byte("a"), Priority: 3, UniqueKey: "ua", MaxAttempts: 4})
	require.False(t, r.Duplicate)
	require.NotEqual(t, fdbqueue.JobID{}, r.ID)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})

	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, r.ID, l.JobID)
	requireValue(t, []byte("a"), l.Value)
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, 4, l.MaxAttempts)
	require.Equal(t, int32(3), l.Priority)
	require.Equal(t, "ua", l.UniqueKey)
	require.Empty(t, l.Reason)
	require.Equal(t, c.Now().Add(time.Minute).UnixMicro(), l.Deadline.UnixMicro(), "the deadline is now + d")
	f.requireStats(t, q, fdbqueue.JobStats{Leased: 1})
	f.requireNothingDue(t, q, "a leased job is invisible until its deadline")

	require.NoError(t, q.Ack(f.ctx, f.db, l))
	f.requireStats(t, q, fdbqueue.JobStats{})
	require.ErrorIs(t, q.Ack(f.ctx, f.db, l), fdbqueue.ErrLeaseLost, "a second ack")
	_, err := q.Extend(f.ctx, f.db, l, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "an extend after the ack")
	_, err = q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost, "a nack after the ack")
	c.Advance(time.Hour)
	f.requireNothingDue(t, q, "an acked job never comes back")
	f.requireStats(t, q, fdbqueue.JobStats{})
	f.requireNoJobKeys(t, q)

	// The default attempts: the queue's MaxAttempts, else DefaultMaxAttempts.
	f.add(t, q, fdbqueue.Job{Value: []byte("b")})
	l = f.leaseOne(t, q, time.Minute)
	require.Equal(t, fdbqueue.DefaultMaxAttempts, l.MaxAttempts)
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	q3, _ := f.jobQueue(t, "jobs3", fdbqueue.JobQueueConfig{MaxAttempts: 3})
	f.add(t, q3, fdbqueue.Job{Value: []byte("c")})
	require.Equal(t, 3, f.leaseOne(t, q3, time.Minute).MaxAttempts)
}

// testJobDelay: a delayed job and a run-at job are never leased before
// their vesting time, to the microsecond, and are leased at it; a run-at
// time in the past is due at once.
func testJobDelay(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "delay", fdbqueue.JobQueueConfig{Choice: 1})
	start := c.Now()
	f.add(t, q, fdbqueue.Job{Value: []byte("in an hour"), Delay: time.Hour})
	f.add(t, q, fdbqueue.Job{Value: []byte("at 30 min"), RunAt: start.Add(30 * time.Minute)})
	f.add(t, q, fdbqueue.Job{Value: []byte("an hour ago"), RunAt: start.Add(-time.Hour)})
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Due: 1, Delayed: 2, OldestDue: time.Hour})

	ls := f.lease(t, q, 10, 2*time.Hour)
	require.Equal(t, []string{"an hour ago"}, leaseValues(ls), "only the job whose time has come")
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))

	for _, step := range []time.Duration{0, time.Minute, 29*time.Minute - time.Microsecond} {
		c.Advance(step)
		f.requireNothingDue(t, q, "at %v", c.Now().Sub(start))
	}
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Delayed: 2})
	c.Advance(time.Microsecond) // exactly 30 minutes
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1})
	ls = f.lease(t, q, 10, time.Hour)
	require.Equal(t, []string{"at 30 min"}, leaseValues(ls))
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))

	c.Advance(30*time.Minute - time.Microsecond)
	f.requireNothingDue(t, q, "a microsecond before the hour")
	c.Advance(time.Microsecond)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1})
	ls = f.lease(t, q, 10, time.Minute)
	require.Equal(t, []string{"in an hour"}, leaseValues(ls))
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))
	f.requireStats(t, q, fdbqueue.JobStats{})
}

// testJobStrictOrder: with Choice = 1, due jobs are leased by earlier
// vesting time, then higher priority (int32 extremes included), one at a
// time and in batches (returned in queue order); a job not yet due is
// not leased whatever its priority.
func testJobStrictOrder(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "order", fdbqueue.JobQueueConfig{Choice: 1})
	now := c.Now()
	jobs := []fdbqueue.Job{
		{Value: []byte("late"), RunAt: now.Add(-time.Second), Priority: 100},
		{Value: []byte("low"), RunAt: now.Add(-time.Minute), Priority: -5},
		{Value: []byte("high"), RunAt: now.Add(-time.Minute), Priority: 7},
		{Value: []byte("max"), RunAt: now.Add(-time.Minute), Priority: 1<<31 - 1},
		{Value: []byte("min"), RunAt: now.Add(-time.Minute), Priority: -1 << 31},
		{Value: []byte("oldest"), RunAt: now.Add(-time.Hour)},
		{Value: []byte("now"), Priority: 1000},
		{Value: []byte("future"), RunAt: now.Add(time.Microsecond), Priority: 1<<31 - 1},
	}
	_, err := q.AddBatch(f.ctx, f.db, jobs)
	require.NoError(t, err)
	want := []string{"oldest", "max", "high", "low", "min", "late", "now"}
	ls := f.lease(t, q, 3, time.Hour)
	require.Equal(t, want[:3], leaseValues(ls), "a batch lease takes the first jobs, in queue order")
	var got []string
	for {
		l, err := q.Lease(f.ctx, f.db, 1, time.Hour)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(l[0].Value))
		require.LessOrEqual(t, len(got), len(jobs))
	}
	require.Equal(t, want[3:], got, "then one at a time, in strict order")
	c.Advance(time.Microsecond)
	require.Equal(t, []string{"future"}, leaseValues(f.lease(t, q, 10, time.Hour)))
}

// testJobChoiceWindow: with Choice = K, Lease(n) takes jobs only among
// the first K+n−1 due jobs (design.md: "a job is never passed over for a
// job K+n−1 or more places behind it"), and returns them in queue order.
func testJobChoiceWindow(t *testing.T, f *fixture) {
	const k, n, jobs = 4, 2, 24
	q, c := f.jobQueue(t, "choice", fdbqueue.JobQueueConfig{Choice: k})
	now := c.Now()
	batch := make([]fdbqueue.Job, jobs)
	order := make([]string, jobs) // queue order: earlier vesting time first
	for i := range batch {
		order[i] = string(rune('A' + i))
		batch[i] = fdbqueue.Job{Value: []byte(order[i]), RunAt: now.Add(time.Duration(i-jobs) * time.Second)}
	}
	_, err := q.AddBatch(f.ctx, f.db, batch)
	require.NoError(t, err)
	remaining := order
	for len(remaining) > 0 {
		ls := f.lease(t, q, n, time.Hour)
		window := remaining[:min(k+n-1, len(remaining))]
		require.Len(t, ls, min(n, len(remaining)))
		pos := -1
		for _, l := range ls {
			v := string(l.Value)
			i := indexOf(window, v)
			require.GreaterOrEqual(t, i, 0, "leased %q, not among the first %d due jobs %v", v, k+n-1, window)
			require.Greater(t, i, pos, "the leases are in queue order")
			pos = i
			remaining = remove(remaining, v)
		}
	}
	f.requireNothingDue(t, q)
	f.requireStats(t, q, fdbqueue.JobStats{Leased: jobs})
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

func remove(ss []string, s string) []string {
	i := indexOf(ss, s)
	return append(append([]string(nil), ss[:i]...), ss[i+1:]...)
}

// testJobUnique: adding a job whose unique key is held (by a queued or
// leased job, or an earlier job of the same batch) is a no-op whose result
// says Duplicate and names the holder; once the holder is acked the key is
// free again.
func testJobUnique(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "unique", fdbqueue.JobQueueConfig{Choice: 1})
	a := f.add(t, q, fdbqueue.Job{Value: []byte("first"), UniqueKey: "k"})
	require.False(t, a.Duplicate)
	b := f.add(t, q, fdbqueue.Job{Value: []byte("second"), UniqueKey: "k", Delay: time.Hour})
	require.True(t, b.Duplicate, "a second add of a pending key")
	require.Equal(t, a.ID, b.ID, "a duplicate names the job that holds the key")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1}, "the duplicate added nothing")

	c.Advance(time.Second)
	rs, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{
		{Value: []byte("x"), UniqueKey: "k2"},
		{Value: []byte("y"), UniqueKey: "k2"},
		{Value: []byte("z"), UniqueKey: "k"},
		{Value: []byte("free")},
	})
	require.NoError(t, err)
	require.Len(t, rs, 4)
	require.False(t, rs[0].Duplicate)
	require.Equal(t, fdbqueue.AddResult{ID: rs[0].ID, Duplicate: true}, rs[1], "an earlier job of the batch holds the key")
	require.Equal(t, fdbqueue.AddResult{ID: a.ID, Duplicate: true}, rs[2])
	require.False(t, rs[3].Duplicate)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Due: 3, OldestDue: time.Second})

	la := f.leaseOne(t, q, time.Minute)
	require.Equal(t, a.ID, la.JobID)
	requireValue(t, []byte("first"), la.Value, "the duplicates changed nothing")
	d := f.add(t, q, fdbqueue.Job{Value: []byte("while leased"), UniqueKey: "k"})
	require.Equal(t, fdbqueue.AddResult{ID: a.ID, Duplicate: true}, d, "a leased job holds its key")
	require.NoError(t, q.Ack(f.ctx, f.db, la))

	e := f.add(t, q, fdbqueue.Job{Value: []byte("after ack"), UniqueKey: "k"})
	require.False(t, e.Duplicate, "the key is free once its job is acked")
	require.NotEqual(t, a.ID, e.ID)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Due: 3})
	got := leaseValues(f.leaseAll(t, q, 10))
	require.ElementsMatch(t, []string{"x", "free", "after ack"}, got, "each job once, no duplicate")
}

// testJobExtremeTimes: the earliest and latest run-at times a job can
// carry (the Unix-microsecond range of an int64, in which the queue keys
// vesting times) and the longest delay, lease and extension: the earliest
// is due at once and first, the latest is never due; a run-at time
// outside that range fails with ErrInvalidArgument instead of wrapping
// around (which made a job in year 300,000 due at once).
func testJobExtremeTimes(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "extreme", fdbqueue.JobQueueConfig{Choice: 1})
	earliest, latest := time.UnixMicro(math.MinInt64), time.UnixMicro(math.MaxInt64)
	for _, at := range []time.Time{
		latest.Add(time.Microsecond), time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC),
		earliest.Add(-time.Microsecond), time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC),
	} {
		_, err := q.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("out of range"), RunAt: at})
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "RunAt %v", at)
		_, err = q.AddBatch(f.ctx, f.db, []fdbqueue.Job{{Value: []byte("ok")}, {RunAt: at}})
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a batch with RunAt %v", at)
	}
	f.requireStats(t, q, fdbqueue.JobStats{}, "nothing written")

	_, err := q.AddBatch(f.ctx, f.db, []fdbqueue.Job{
		{Value: []byte("latest"), RunAt: latest, Priority: math.MaxInt32},
		{Value: []byte("longest delay"), Delay: math.MaxInt64},
		{Value: []byte("now")},
		{Value: []byte("earliest"), RunAt: earliest, Priority: math.MinInt32},
	})
	require.NoError(t, err)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 4, Due: 2, Delayed: 2, OldestDue: c.Now().Sub(earliest)})
	ls := f.lease(t, q, 10, math.MaxInt64)
	require.Equal(t, []string{"earliest", "now"}, leaseValues(ls), "only the due jobs, earliest first")
	require.Equal(t, c.Now().Add(math.MaxInt64).UnixMicro(), ls[0].Deadline.UnixMicro(), "the longest lease")
	l, err := q.Extend(f.ctx, f.db, ls[1], math.MaxInt64)
	require.NoError(t, err, "the longest extension")
	_, err = q.Nack(f.ctx, f.db, ls[0], fdbqueue.NackOptions{Delay: math.MaxInt64})
	require.NoError(t, err, "the longest retry delay")
	c.Advance(100 * 365 * 24 * time.Hour)
	f.requireNothingDue(t, q, "a century later")
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Delayed: 3, Leased: 1})
	require.NoError(t, q.Ack(f.ctx, f.db, l))
}

// testJobSubMicrosecond: the queue keys vesting times in microseconds,
// and a clock tells nanoseconds. A job due a fraction of a microsecond
// into the future (a RunAt, a Delay, a Nack's delay) is still never leased
// before its time; a job added with no delay is due at once.
func testJobSubMicrosecond(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "sub-micro", fdbqueue.JobQueueConfig{Choice: 1})
	t0 := c.Now() // a whole microsecond
	c.Advance(300 * time.Nanosecond)
	f.add(t, q, fdbqueue.Job{Value: []byte("run at"), RunAt: t0.Add(1500 * time.Nanosecond)})
	f.add(t, q, fdbqueue.Job{Value: []byte("delay"), Delay: 1200 * time.Nanosecond})
	f.add(t, q, fdbqueue.Job{Value: []byte("now")})
	ls := f.lease(t, q, 10, time.Minute)
	require.Equal(t, []string{"now"}, leaseValues(ls), "a job with no delay is due at once, the others are not")
	require.NoError(t, q.Ack(f.ctx, f.db, ls[0]))
	c.Advance(700 * time.Nanosecond) // t0 + 1 µs: before both
	f.requireNothingDue(t, q, "at %v, before t0 + 1.5 µs", c.Now().Sub(t0))
	c.Advance(time.Microsecond) // t0 + 2 µs: after both
	ls = f.lease(t, q, 10, time.Minute)
	require.ElementsMatch(t, []string{"run at", "delay"}, leaseValues(ls))
	_, err := q.Nack(f.ctx, f.db, ls[0], fdbqueue.NackOptions{Delay: 1500 * time.Nanosecond})
	require.NoError(t, err)
	c.Advance(time.Microsecond) // t0 + 3 µs: before the retry at t0 + 3.5 µs
	f.requireNothingDue(t, q, "at %v, before the nack's delay", c.Now().Sub(t0))
	c.Advance(time.Microsecond)
	require.Equal(t, ls[0].JobID, f.leaseOne(t, q, time.Minute).JobID)
}

// testJobNegativeDelay: a negative Delay, given to Add or to Nack, makes
// the job due at once, that is at the time of the call: it is queued
// behind the jobs that were due before it, not an hour back in time ahead
// of them, and Stats does not age it.
func testJobNegativeDelay(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "negative-delay", fdbqueue.JobQueueConfig{Choice: 1})
	a := f.add(t, q, fdbqueue.Job{Value: []byte("nacked")})
	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, a.ID, l.JobID)
	c.Advance(time.Second)
	f.add(t, q, fdbqueue.Job{Value: []byte("due first")})
	c.Advance(time.Second)
	f.add(t, q, fdbqueue.Job{Value: []byte("added"), Delay: -time.Hour, Priority: 1})
	_, err := q.Nack(f.ctx, f.db, l, fdbqueue.NackOptions{Delay: -time.Hour})
	require.NoError(t, err)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 3, Due: 3, OldestDue: time.Second}, "the oldest due job is the one added a second ago")
	require.Equal(t, []string{"due first", "added", "nacked"}, leaseValues(f.lease(t, q, 10, time.Minute)),
		"the jobs given a negative delay are due now, behind the job due a second ago (then by priority)")
}

// testJobStatsBeforeEpoch: Stats' time buckets are StatsResolution wide
// on both sides of the Unix epoch, so that a job delayed past the bucket
// that holds now counts as delayed also with a clock before 1970 (a
// bucket number is the floor of the time over the resolution, not its
// truncation, which would make the bucket around the epoch twice as wide).
func testJobStatsBeforeEpoch(t *testing.T, f *fixture) {
	c := NewClock(time.Unix(0, 0).Add(-500 * time.Millisecond))
	q, _ := f.jobQueue(t, "before-epoch", fdbqueue.JobQueueConfig{Choice: 1, Clock: c})
	f.add(t, q, fdbqueue.Job{Value: []byte("after the epoch"), Delay: time.Second})
	f.add(t, q, fdbqueue.Job{Value: []byte("past"), RunAt: c.Now().Add(-time.Second)})
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1, OldestDue: time.Second},
		"at %v, the job due at %v is in a later bucket", c.Now().UnixMicro(), c.Now().Add(time.Second).UnixMicro())
	ls := f.lease(t, q, 10, 3*time.Second)
	require.Equal(t, []string{"past"}, leaseValues(ls))
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1, Leased: 1})
	c.Advance(time.Second)
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Due: 1, Leased: 1})
}

// wakeTimeout bounds the wait for a LeaseWait to go to sleep, or to wake
// after a change that wakes it at once, and for a call to return once its
// context ended: a failure bound, never a synchronisation.
const wakeTimeout = 10 * time.Second

// leaseWait is a LeaseWait running in a goroutine of its own, which never
// touches the test's t: the check asserts on what it returned, on the
// test's goroutine, within wakeTimeout.
type leaseWait struct {
	done     chan leaseWaitResult // its result, once
	finished chan struct{}        // closed once it returned
	cancel   context.CancelFunc
}

type leaseWaitResult struct {
	leases []fdbqueue.Lease
	err    error
}

// startLeaseWait runs q.LeaseWait(n, lease) in the background, under a
// context that the check's end cancels; the check's cleanup waits for it
// to return (within wakeTimeout), before the harness closes.
func (f *fixture) startLeaseWait(t *testing.T, q *fdbqueue.JobQueue, n int, lease time.Duration) *leaseWait {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	w := &leaseWait{done: make(chan leaseWaitResult, 1), finished: make(chan struct{}), cancel: cancel}
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.finished:
		case <-time.After(wakeTimeout):
		}
	})
	go func() {
		defer close(w.finished)
		ls, err := q.LeaseWait(ctx, f.db, n, lease)
		w.done <- leaseWaitResult{ls, err}
	}()
	return w
}

// asleep waits until w armed a timer on c (it went to sleep); it fails
// the check if w returned first, or did neither within wakeTimeout.
func (w *leaseWait) asleep(t *testing.T, c *Clock, what string) {
	t.Helper()
	select {
	case <-c.Armed:
	case r := <-w.done:
		require.FailNow(t, "LeaseWait returned instead of sleeping", "%s: %d leases, error %v", what, len(r.leases), r.err)
	case <-time.After(wakeTimeout):
		require.FailNow(t, "LeaseWait never slept", what)
	}
}

// woken returns w's leases after a change that wakes it at once; it fails
// the check if w failed, or did not return within wakeTimeout.
func (w *leaseWait) woken(t *testing.T, what string) []fdbqueue.Lease {
	t.Helper()
	select {
	case r := <-w.done:
		require.NoError(t, r.err, "LeaseWait woken by %s", what)
		return r.leases
	case <-time.After(wakeTimeout):
		w.cancel()
		require.FailNow(t, "LeaseWait was not woken", "by %s within %v", what, wakeTimeout)
		return nil
	}
}
