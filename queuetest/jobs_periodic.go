package queuetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// jobPeriodicChecks: Schedule's one job per slot, which rests on the
// backend's conflict detection, and its handling of missed slots;
// Schedules' listing in name order, which rests on the backend's key
// order, and Unschedule, which conflicts with a Schedule of the name.
func jobPeriodicChecks() []check {
	return []check{
		{"ScheduleOverlappingSchedulersOneJob", testJobScheduleOverlap},
		{"ScheduleMissedSlotsLatestOnly", testJobScheduleMissed},
		{"SchedulesAndUnschedule", testJobSchedulesUnschedule},
		{"UnscheduleConflictsWithSchedule", testJobUnscheduleConflict},
	}
}

// periodic is the checks' schedule: one job a minute, its value the slot.
func periodic() fdbqueue.PeriodicJob {
	return fdbqueue.PeriodicJob{Name: "every-minute", Every: time.Minute, Job: func(slot time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte(slot.UTC().Format(time.RFC3339))}
	}}
}

// queuedJobs returns q's count of queued jobs.
func (f *fixture) queuedJobs(t *testing.T, q *fdbqueue.JobQueue) int64 {
	t.Helper()
	s, err := q.Stats(f.ctx, f.db)
	require.NoError(t, err)
	return s.Queued
}

// testJobScheduleOverlap: two schedulers of one slot in transactions that
// both read the schedule's marker before either commits. The second
// commit must fail with not_committed (1020: it read the marker the first
// wrote after its read version), and its retry must find the slot
// scheduled; once the slot's job is acked, the slot is still scheduled.
func testJobScheduleOverlap(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "schedule-overlap", fdbqueue.JobQueueConfig{Choice: 1})
	pj := periodic()
	tr1, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	tr2, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	r1, err := q.Schedule(f.ctx, tr1, pj, time.Time{})
	require.NoError(t, err)
	_, err = q.Schedule(f.ctx, tr2, pj, time.Time{})
	require.NoError(t, err)
	require.NoError(t, tr1.Commit())
	require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted, "the second scheduler must conflict on the marker")

	retry, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.False(t, retry.Added, "the slot is scheduled")
	require.Equal(t, r1.ID, retry.ID, "the slot's job is the first scheduler's")
	require.Equal(t, int64(1), f.queuedJobs(t, q))

	l := f.leaseOne(t, q, time.Minute)
	require.Equal(t, r1.ID, l.JobID)
	require.Equal(t, r1.Slot.UTC().Format(time.RFC3339), string(l.Value), "the job of the slot")
	require.NoError(t, q.Ack(f.ctx, f.db, l))
	c.Advance(time.Second)
	after, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.False(t, after.Added, "an acked slot is still scheduled")
	require.Equal(t, int64(0), f.queuedJobs(t, q))
}

// testJobScheduleMissed: after five missed minutes, Schedule adds one job,
// for the latest slot, due at that slot's start.
func testJobScheduleMissed(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "schedule-missed", fdbqueue.JobQueueConfig{Choice: 1})
	pj := periodic()
	first, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, first.Added)
	c.Advance(5*time.Minute + 20*time.Second)
	r, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, r.Added)
	require.True(t, r.Slot.Equal(first.Slot.Add(5*time.Minute)), "slot %v, want %v", r.Slot, first.Slot.Add(5*time.Minute))
	require.Equal(t, int64(2), f.queuedJobs(t, q), "the missed slots are not caught up")
	info, err := q.Job(f.ctx, f.db, r.ID)
	require.NoError(t, err)
	require.True(t, info.DueAt.Equal(r.Slot), "due at %v, want the slot %v", info.DueAt, r.Slot)
}

// testJobSchedulesUnschedule: Schedules lists every schedule in the
// order of its name's bytes (a 0x00 byte in a name escaped by the tuple
// layer, a name that is not UTF-8), pages after a key and from a name on
// (ScheduleCursorAt), and Unschedule
// removes one marker, leaving the jobs, and returns what it held; a
// second Unschedule finds nothing; a Schedule after it in the same slot
// finds that slot's job and adds nothing, and one in the next slot
// schedules afresh.
func testJobSchedulesUnschedule(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "schedules", fdbqueue.JobQueueConfig{Choice: 1})
	names := []string{"a", "a\x00", "a\x00b", "a\x01", "b", "\xff"} // in byte order
	slots := map[string]fdbqueue.ScheduleResult{}
	for _, name := range []string{"b", "\xff", "a\x00b", "a", "a\x01", "a\x00"} {
		pj := periodic()
		pj.Name = name
		r, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
		require.NoError(t, err)
		require.True(t, r.Added, "%q", name)
		slots[name] = r
	}
	keys := map[string][]byte{}
	list := func(cursor []byte, limit int) []string {
		t.Helper()
		page, err := q.Schedules(f.ctx, f.db, cursor, limit)
		require.NoError(t, err)
		var got []string
		for _, s := range page {
			key, err := q.Subspace().Pack(tuple.Tuple{"p", s.Name})
			require.NoError(t, err)
			require.Equal(t, fdbqueue.ScheduleInfo{Name: s.Name, Slot: slots[s.Name].Slot.UTC(), ID: slots[s.Name].ID, Key: key}, s)
			keys[s.Name] = s.Key
			got = append(got, s.Name)
		}
		return got
	}
	require.Equal(t, names, list(nil, 10), "in the order of the names' bytes")
	require.Equal(t, names[:2], list(nil, 2))
	require.Equal(t, names[2:4], list(keys[names[1]], 2), "the page after a key")
	require.Equal(t, names[2:], list(q.ScheduleCursorAt(names[2]), 10), "from a name on")

	info, err := q.Unschedule(f.ctx, f.db, "a\x00")
	require.NoError(t, err)
	require.Equal(t, "a\x00", info.Name)
	require.Equal(t, slots["a\x00"].ID, info.ID)
	require.Equal(t, []string{"a", "a\x00b", "a\x01", "b", "\xff"}, list(nil, 10))
	require.Equal(t, int64(len(names)), f.queuedJobs(t, q), "the jobs stay")
	_, err = q.Unschedule(f.ctx, f.db, "a\x00")
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound)

	pj := periodic()
	pj.Name = "a\x00"
	r, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: slots["a\x00"].Slot, ID: slots["a\x00"].ID}, r,
		"without its marker, the slot's job is found by its ID (a range read of the ID index) and not added again")
	require.Equal(t, int64(len(names)), f.queuedJobs(t, q))
	c.Advance(time.Minute)
	r, err = q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, r.Added, "the next slot is scheduled afresh")
	require.Equal(t, int64(len(names)+1), f.queuedJobs(t, q))
}

// testJobUnscheduleConflict: an Unschedule and a Schedule of one name in
// transactions that both read the marker before either commits. The
// second commit must fail with not_committed (1020: it read the marker
// the first wrote after its read version), and its retry sees the first's
// result.
func testJobUnscheduleConflict(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "unschedule-conflict", fdbqueue.JobQueueConfig{Choice: 1})
	pj := periodic()
	first, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	_, err = q.Unschedule(f.ctx, tr, pj.Name)
	require.NoError(t, err)
	c.Advance(time.Minute)
	next, err := q.Schedule(f.ctx, f.db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, next.Added)
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the Unschedule must conflict on the marker the Schedule wrote")
	info, err := q.Unschedule(f.ctx, f.db, pj.Name)
	require.NoError(t, err)
	require.Equal(t, next.ID, info.ID, "the retry removes the marker of the slot added meanwhile, not %s", first.ID)
}
