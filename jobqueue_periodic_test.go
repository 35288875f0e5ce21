package fdbqueue_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func hourly(name string) fdbqueue.PeriodicJob {
	return fdbqueue.PeriodicJob{Name: name, Every: time.Hour, Job: func(slot time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte(slot.UTC().Format(time.RFC3339)), Delay: time.Hour}
	}}
}

// mustInfo returns the job id's JobInfo.
func mustInfo(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, id fdbqueue.JobID) fdbqueue.JobInfo {
	t.Helper()
	info, err := q.Job(context.Background(), db, id)
	require.NoError(t, err)
	return info
}

// Schedule adds the slot's job, due at the slot's start (not at Delay
// after now), added (JobInfo.Added) at the queue's clock, not at the now
// given, once: a second call in the same slot adds nothing and names the
// job; the next slot adds the next job.
func TestScheduleOncePerSlot(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-once", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	now := clock.Now().Add(25 * time.Minute)
	slot := clock.Now() // the fake clock starts on the hour

	r, err := q.Schedule(ctx, db, pj, now)
	require.NoError(t, err)
	require.True(t, r.Added)
	require.False(t, r.Duplicate)
	require.True(t, r.Slot.Equal(slot), "slot %v", r.Slot)
	info := mustInfo(t, db, q, r.ID)
	require.True(t, info.DueAt.Equal(slot), "due at the slot, not %v", info.DueAt)
	require.Equal(t, slot.UTC().Format(time.RFC3339), string(info.Value), "the Job function got the slot")
	require.True(t, info.Added.Equal(clock.Now()), "added at the queue's clock, not at the now given: %v", info.Added)

	again, err := q.Schedule(ctx, db, pj, now.Add(30*time.Minute))
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: slot, ID: r.ID}, again, "same slot: nothing added")

	next, err := q.Schedule(ctx, db, pj, now.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, next.Added)
	require.True(t, next.Slot.Equal(slot.Add(time.Hour)))
	require.NotEqual(t, r.ID, next.ID)

	// A lagging scheduler (an earlier now) adds nothing.
	late, err := q.Schedule(ctx, db, pj, now)
	require.NoError(t, err)
	require.False(t, late.Added)
	require.Equal(t, fdbqueue.JobID{}, late.ID)

	s := mustStats(t, db, q)
	require.Equal(t, int64(2), s.Queued)
	dead, err := q.ListDead(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Empty(t, dead, "the marker is not a dead job")
}

// Two schedulers of one slot whose transactions overlap (both read the
// marker before either commits) add one job: the second commit conflicts
// on the marker (a normal read; FDB's read conflict ranges,
// fdbserver/Resolver.actor.cpp) and its retry finds the slot scheduled.
// The slot's job is then acked: the schedule still adds no second one,
// where a unique key alone, freed by the ack, would.
func TestScheduleTwoSchedulersOneJob(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-two", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	now := clock.Now()

	tr1, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	tr2, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	r1, err := q.Schedule(ctx, tr1, pj, now)
	require.NoError(t, err)
	r2, err := q.Schedule(ctx, tr2, pj, now)
	require.NoError(t, err)
	require.True(t, r1.Added)
	require.True(t, r2.Added, "neither saw the other's marker yet")
	require.NoError(t, tr1.Commit())
	err = tr2.Commit()
	require.ErrorIs(t, err, kv.ErrNotCommitted, "the second scheduler conflicts on the marker")

	// Its retry (a new transaction) finds the slot scheduled by the first.
	retry, err := q.Schedule(ctx, db, pj, now)
	require.NoError(t, err)
	require.False(t, retry.Added)
	require.Equal(t, r1.ID, retry.ID)
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)

	ls := mustLease(t, db, q, 1, time.Minute)
	require.Len(t, ls, 1)
	require.NoError(t, q.Ack(ctx, db, ls[0]))
	after, err := q.Schedule(ctx, db, pj, now.Add(time.Minute))
	require.NoError(t, err)
	require.False(t, after.Added, "an acked slot is still scheduled")
	require.Equal(t, int64(0), mustStats(t, db, q).Queued)
}

// A scheduler back after several periods adds the latest slot only.
func TestScheduleMissedSlotsAddLatestOnly(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-missed", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	start := clock.Now()
	_, err := q.Schedule(ctx, db, pj, start)
	require.NoError(t, err)

	r, err := q.Schedule(ctx, db, pj, start.Add(5*time.Hour+10*time.Minute))
	require.NoError(t, err)
	require.True(t, r.Added)
	require.True(t, r.Slot.Equal(start.Add(5*time.Hour)))
	require.True(t, mustInfo(t, db, q, r.ID).DueAt.Equal(start.Add(5*time.Hour)))
	require.Equal(t, int64(2), mustStats(t, db, q).Queued, "slots 1 to 4 are skipped, not caught up")
}

// Under commit_unknown_result the retry finds the marker: a commit that
// landed is reported as this call's add (Added, its ID), once; one that
// did not land is retried and adds the job. FDB retries 1021 in
// Transaction::onError (fdbclient/NativeAPI.actor.cpp), and its commit
// may or may not have applied.
func TestScheduleUnknownResultNoDuplicate(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(map[bool]string{true: "applied", false: "not applied"}[applied], func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			clock := newFakeClock()
			q := mustJobQueue(t, "periodic-unknown", fdbqueue.JobQueueConfig{Clock: clock})
			// The first write stores the configuration record, so that the
			// next commit is Schedule's own.
			_, err := q.Schedule(ctx, db, hourly("warm-up"), clock.Now())
			require.NoError(t, err)

			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			r, err := q.Schedule(ctx, db, hourly("report"), clock.Now())
			require.NoError(t, err)
			require.True(t, r.Added, "the call's own add, applied once")
			require.Equal(t, int64(2), mustStats(t, db, q).Queued)
			require.Equal(t, fdbqueue.JobQueued, mustInfo(t, db, q, r.ID).State)
		})
	}
}

// unscheduleRace is a JobQueue whose next commit (a Schedule's) reports
// commit_unknown_result after applying, seen through db, which runs an
// Unschedule of "report" between that attempt and the next (first is the
// job ID the removed marker named), then, if lease, a lease of the slot's
// job, and if ack its ack. The queue holds a job not due, added first so
// that the next commit is the Schedule's and a lease takes the slot's job.
type unscheduleRace struct {
	mdb   *memdb.DB
	db    *betweenDB
	clock *queuetest.Clock
	q     *fdbqueue.JobQueue
	first fdbqueue.JobID
}

func newUnscheduleRace(t *testing.T, name string, lease, ack bool) *unscheduleRace {
	t.Helper()
	ctx := context.Background()
	r := &unscheduleRace{mdb: newDB(t), clock: newFakeClock()}
	r.q = mustJobQueue(t, name, fdbqueue.JobQueueConfig{Clock: r.clock})
	mustAdd(t, r.mdb, r.q, fdbqueue.Job{Value: []byte("later"), Delay: 24 * time.Hour})
	r.db = &betweenDB{DB: r.mdb, between: func() {
		info, err := r.q.Unschedule(ctx, r.mdb, "report")
		require.NoError(t, err, "the first attempt's marker is there")
		r.first = info.ID
		if lease {
			ls := mustLease(t, r.mdb, r.q, 10, time.Minute)
			require.Len(t, ls, 1)
			require.Equal(t, r.first, ls[0].JobID)
			if ack {
				require.NoError(t, r.q.Ack(ctx, r.mdb, ls[0]))
			}
		}
	}}
	r.mdb.FailNextCommit(kv.ErrCommitUnknownResult, true)
	return r
}

// A Schedule whose commit reported commit_unknown_result after applying,
// and an Unschedule of the name committed before its retry (the retry
// runs from OnError, as FDB's Transaction::onError retries 1021,
// fdbclient/NativeAPI.actor.cpp): the retry finds no marker, but finds the
// job its first attempt added, by its ID, queued or leased, and reports
// that add (Added, that ID), writing nothing. It used to write the job a
// second time under the same ID: the counters then said one job more than
// the queue held, and a leased job got a second record. When the job was
// also acked before the retry, nothing tells the slot was added: the
// retry adds it again (the duplicate Schedule's doc admits), under a
// fresh ID, not the acked job's.
func TestScheduleUnknownResultRacingUnschedule(t *testing.T) {
	for _, c := range []struct {
		name    string
		lease   bool // a worker leases the slot's job before the retry
		ack     bool // and acks it
		stats   fdbqueue.JobStats
		another bool // the retry adds a second job
	}{
		{name: "queued", stats: fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1}},
		{name: "leased", lease: true, stats: fdbqueue.JobStats{Queued: 1, Delayed: 1, Leased: 1}},
		{name: "acked", lease: true, ack: true, stats: fdbqueue.JobStats{Queued: 2, Due: 1, Delayed: 1}, another: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			race := newUnscheduleRace(t, "periodic-unknown-unschedule", c.lease, c.ack)
			mdb, clock, q := race.mdb, race.clock, race.q
			r, err := q.Schedule(ctx, race.db, hourly("report"), clock.Now())
			require.NoError(t, err)
			require.True(t, r.Added)
			require.NotEqual(t, fdbqueue.JobID{}, race.first, "the Unschedule ran between the attempts")
			if c.another {
				require.NotEqual(t, race.first, r.ID, "a second job, under an ID of its own")
			} else {
				require.Equal(t, race.first, r.ID, "the first attempt's job")
			}

			s := mustStats(t, mdb, q)
			s.OldestDue = 0
			require.Equal(t, c.stats, s)
			// The counters agree with the jobs there are: lease them all.
			clock.Advance(48 * time.Hour)
			require.Len(t, mustLease(t, mdb, q, 10, time.Minute), int(c.stats.Queued+c.stats.Leased))
			all := mustSchedules(t, mdb, q, 10)
			require.Equal(t, c.another, len(all) == 1, "only the add under a fresh ID writes the marker again")
		})
	}
}

// A job whose unique key is held skips the slot: nothing added, the slot
// counted as scheduled, the holder named.
func TestScheduleUniqueKeyHeldSkipsSlot(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-unique", fdbqueue.JobQueueConfig{Clock: clock})
	holder := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("running"), UniqueKey: "sync"})
	pj := fdbqueue.PeriodicJob{Name: "sync", Every: time.Minute, Job: func(time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte("sync"), UniqueKey: "sync"}
	}}
	r, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.False(t, r.Added)
	require.True(t, r.Duplicate)
	require.Equal(t, holder.ID, r.ID)
	again, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.Equal(t, r, again, "the skipped slot stays skipped")
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)
}

// Bad schedules fail with ErrInvalidArgument and write nothing.
func TestScheduleBadInput(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-bad", fdbqueue.JobQueueConfig{Clock: clock})
	ok := hourly("ok")
	with := func(f func(*fdbqueue.PeriodicJob)) fdbqueue.PeriodicJob { pj := ok; f(&pj); return pj }
	for name, pj := range map[string]fdbqueue.PeriodicJob{
		"empty name":        with(func(p *fdbqueue.PeriodicJob) { p.Name = "" }),
		"long name":         with(func(p *fdbqueue.PeriodicJob) { p.Name = strings.Repeat("n", fdbqueue.MaxScheduleNameSize+1) }),
		"zero period":       with(func(p *fdbqueue.PeriodicJob) { p.Every = 0 }),
		"negative period":   with(func(p *fdbqueue.PeriodicJob) { p.Every = -time.Hour }),
		"short period":      with(func(p *fdbqueue.PeriodicJob) { p.Every = fdbqueue.MinPeriod - time.Millisecond }),
		"fractional period": with(func(p *fdbqueue.PeriodicJob) { p.Every = time.Second + time.Nanosecond }),
		"nil job function":  with(func(p *fdbqueue.PeriodicJob) { p.Job = nil }),
		"bad job": with(func(p *fdbqueue.PeriodicJob) {
			p.Job = func(time.Time) fdbqueue.Job { return fdbqueue.Job{MaxAttempts: -1} }
		}),
		"unique key too big": with(func(p *fdbqueue.PeriodicJob) {
			p.Job = func(time.Time) fdbqueue.Job { return fdbqueue.Job{UniqueKey: strings.Repeat("u", 1001)} }
		}),
	} {
		t.Run(name, func(t *testing.T) {
			_, err := q.Schedule(ctx, db, pj, clock.Now())
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			err = q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj})
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		})
	}
	_, err := q.Schedule(ctx, db, ok, time.Date(-300000, 1, 1, 0, 0, 0, 0, time.UTC))
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a time outside the queue's microseconds")
	require.ErrorIs(t, q.RunScheduler(ctx, db, nil), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{ok, ok}), fdbqueue.ErrInvalidArgument, "two schedules of one name")
	require.Equal(t, int64(0), mustStats(t, db, q).Queued)

	// A now past the queue's last microsecond fails too, however far past
	// (its Unix microseconds would wrap around to a slot in the distant
	// past).
	for _, past := range []time.Duration{time.Microsecond, time.Hour + time.Minute} {
		_, err = q.Schedule(ctx, db, ok, time.UnixMicro(math.MaxInt64).Add(past))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a time %v after the queue's last", past)
	}
	require.Equal(t, int64(0), mustStats(t, db, q).Queued)
	require.Empty(t, mustSchedules(t, db, q, 10), "no marker written")

	// The slot was not marked either: a good call adds it.
	r, err := q.Schedule(ctx, db, ok, clock.Now())
	require.NoError(t, err)
	require.True(t, r.Added)

	// The shortest period, MinPeriod itself, is a good one.
	shortest := with(func(p *fdbqueue.PeriodicJob) { p.Name, p.Every = "shortest", fdbqueue.MinPeriod })
	r, err = q.Schedule(ctx, db, shortest, clock.Now())
	require.NoError(t, err, "a period of MinPeriod")
	require.True(t, r.Added)
}

// Slots are aligned to the Unix epoch, before 1970 too.
func TestScheduleSlotAlignment(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "periodic-align", fdbqueue.JobQueueConfig{})
	pj := fdbqueue.PeriodicJob{Name: "7s", Every: 7 * time.Second, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}
	for _, c := range []struct{ now, slot int64 }{{20, 14}, {-1, -7}, {-7, -7}, {-8, -14}} {
		r, err := q.Schedule(ctx, db, fdbqueue.PeriodicJob{Name: pj.Name + "/" + time.Unix(c.now, 0).String(), Every: pj.Every, Job: pj.Job}, time.Unix(c.now, 0))
		require.NoError(t, err)
		require.Equal(t, c.slot, r.Slot.Unix(), "slot of %d", c.now)
	}
}

// The slot that starts at Go's zero time (0001-01-01 00:00 UTC, a whole
// number of hours since 1970) is a slot like any other: its job is due at
// the slot's start. It used to be due at the queue's clock, as a Job whose
// RunAt is zero (none) is.
func TestScheduleSlotAtTheZeroTime(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-zero-time", fdbqueue.JobQueueConfig{Clock: clock})
	r, err := q.Schedule(ctx, db, hourly("report"), time.Date(1, 1, 1, 0, 30, 0, 0, time.UTC))
	require.NoError(t, err)
	require.True(t, r.Added)
	require.True(t, r.Slot.IsZero(), "slot %v", r.Slot)
	info := mustInfo(t, db, q, r.ID)
	require.True(t, info.DueAt.Equal(r.Slot), "due at the slot's start, not %v", info.DueAt)
}

// RunScheduler, driven by a fake clock, adds one job per slot: three
// slots, three jobs, each due at its slot; it returns nil when ctx ends.
func TestRunSchedulerFakeClock(t *testing.T) {
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	q := mustJobQueue(t, "periodic-run", fdbqueue.JobQueueConfig{Clock: clock})
	start := clock.Now()
	pj := fdbqueue.PeriodicJob{Name: "tick", Every: time.Minute, Job: func(slot time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte(slot.Sub(start).String())}
	}}
	stop := runScheduler(t, db, q, pj)

	for i := range 3 {
		d := <-clock.Armed // the slot's job is in: asleep until the next slot
		require.Equal(t, time.Minute, d, "sleeps until the next slot")
		require.Equal(t, int64(i+1), mustStats(t, db, q).Queued)
		if i < 2 {
			clock.Advance(time.Minute)
		}
	}
	stop()

	ls := mustLease(t, db, q, 10, time.Minute)
	var got []string
	for _, l := range ls {
		got = append(got, string(l.Value))
	}
	require.ElementsMatch(t, []string{"0s", "1m0s", "2m0s"}, got)
}

// RunScheduler of two schedules sleeps until the earlier of their next
// slots (a minute, not an hour), and at a slot of one calls Schedule for
// that one only: the hourly schedule, unscheduled and its job cancelled
// in the hour RunScheduler scheduled, is not added again at the next
// minute (Unschedule's doc: a RunScheduler that scheduled the slot itself
// does not call again before the next slot).
func TestRunSchedulerSeveralSchedules(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	q := mustJobQueue(t, "periodic-several", fdbqueue.JobQueueConfig{Clock: clock})
	jobs := []fdbqueue.PeriodicJob{named("hourly", time.Hour, ""), named("minutely", time.Minute, "")}
	stop := runScheduler(t, db, q, jobs...)

	require.Equal(t, time.Minute, <-clock.Armed, "asleep until the minute schedule's next slot")
	all := mustSchedules(t, db, q, 10)
	require.Len(t, all, 2)
	info, err := q.Unschedule(ctx, db, "hourly")
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, db, info.ID))

	clock.Advance(time.Minute)
	require.Equal(t, time.Minute, <-clock.Armed)
	all = mustSchedules(t, db, q, 10)
	require.Len(t, all, 1, "the hourly schedule was not called again in its hour")
	require.Equal(t, "minutely", all[0].Name)
	require.True(t, all[0].Slot.Equal(clock.Now()), "the minute's next slot: %v", all[0].Slot)
	require.Equal(t, int64(2), mustStats(t, db, q).Queued, "the minute schedule's two jobs")
	stop()
}

// A ctx that ends while RunScheduler's Schedule runs (here in the Job
// function, before its transaction) ends RunScheduler with nil, as a ctx
// that ends while it sleeps does, not with the Schedule's error, the
// context's; the slot is not scheduled. Given a ctx that has ended, it
// returns nil before any Schedule.
func TestRunSchedulerContextEndsDuringSchedule(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-ctx", fdbqueue.JobQueueConfig{Clock: clock})
	pj := fdbqueue.PeriodicJob{Name: "tick", Every: time.Minute, Job: func(time.Time) fdbqueue.Job {
		cancel()
		return fdbqueue.Job{}
	}}
	require.NoError(t, q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj}))
	require.Equal(t, int64(0), mustStats(t, db, q).Queued)
	require.Empty(t, mustSchedules(t, db, q, 10))

	// Given a ctx that has ended, it returns nil at once, calling no Job
	// function.
	calls := 0
	pj.Job = func(time.Time) fdbqueue.Job { calls++; return fdbqueue.Job{} }
	require.NoError(t, q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj}))
	require.Zero(t, calls)
	require.Empty(t, mustSchedules(t, db, q, 10))
}

// RunScheduler in the last slot of the queue's time range (the Unix
// microseconds of an int64), whose next slot would start past it, adds
// that slot's job and sleeps until the range's last instant: the next
// slot's start, computed in int64, would wrap around to a time before
// 1970 and a sleep of no time, at once and again.
func TestRunSchedulerInTheLastSlot(t *testing.T) {
	db := newDB(t)
	last := time.UnixMicro(math.MaxInt64)
	clock := queuetest.NewClock(last.Add(-30 * time.Second))
	clock.Armed = make(chan time.Duration, 1)
	q := mustJobQueue(t, "periodic-last-slot", fdbqueue.JobQueueConfig{Clock: clock})
	stop := runScheduler(t, db, q, named("tick", time.Minute, ""))
	require.Equal(t, last.Sub(clock.Now()), <-clock.Armed, "asleep until the range's last instant")
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)
	stop()
}

// A schedule's error ends RunScheduler with that error.
func TestRunSchedulerReturnsScheduleError(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "periodic-err", fdbqueue.JobQueueConfig{})
	pj := fdbqueue.PeriodicJob{Name: "big", Every: time.Hour, Job: func(time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: make([]byte, kv.MaxValueSize+1)}
	}}
	err := q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj})
	require.True(t, errors.Is(err, fdbqueue.ErrValueTooLarge), "%v", err)
}

// RunScheduler sleeps until the next slot from the clock's time after its
// calls: a call that took 10 s (the Job function moves the fake clock)
// leaves a 50 s sleep to the next minute, not 60 s.
func TestRunSchedulerSleepsFromAfterItsCalls(t *testing.T) {
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	q := mustJobQueue(t, "periodic-slow", fdbqueue.JobQueueConfig{Clock: clock})
	pj := fdbqueue.PeriodicJob{Name: "slow", Every: time.Minute, Job: func(time.Time) fdbqueue.Job {
		clock.Advance(10 * time.Second) // no timer armed yet: fires nothing
		return fdbqueue.Job{}
	}}
	stop := runScheduler(t, db, q, pj)
	require.Equal(t, 50*time.Second, <-clock.Armed)
	stop()
}

// A now in the first period of the queue's time range (the Unix
// microseconds of an int64) has a slot that starts before that range:
// Schedule refuses it with ErrInvalidArgument and writes nothing, where the
// slot's start, computed in int64 microseconds, used to wrap around to a
// time in the year 294,000, marking the schedule so far ahead that no
// later call ever added a job. The time range's last instant still works.
func TestScheduleExtremeNowNoWrap(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-extreme", fdbqueue.JobQueueConfig{Clock: clock})
	first := time.UnixMicro(math.MinInt64)
	for _, every := range []time.Duration{7 * time.Second, time.Hour, math.MaxInt64 / 1000 * 1000} {
		pj := fdbqueue.PeriodicJob{Name: "extreme/" + every.String(), Every: every, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}
		for _, now := range []time.Time{first, first.Add(time.Microsecond)} {
			r, err := q.Schedule(ctx, db, pj, now)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "every %v, now %v: slot %v", every, now, r.Slot)
		}
		// The next slot starts within the range: its job is added.
		r, err := q.Schedule(ctx, db, pj, first.Add(every))
		require.NoError(t, err)
		require.True(t, r.Added, "every %v", every)
		require.False(t, r.Slot.Before(first))
		require.False(t, r.Slot.After(first.Add(every)))
		// The marker holds that slot: a call at a sane time adds its slot.
		r, err = q.Schedule(ctx, db, pj, clock.Now())
		require.NoError(t, err)
		require.True(t, r.Added, "every %v", every)
		require.False(t, r.Slot.After(clock.Now()))
	}
	require.Equal(t, int64(6), mustStats(t, db, q).Queued)

	// A period that divides the range's start (2^20 µs divides 2^63): the
	// slot of that first instant starts there, within the range, and is
	// added.
	pow := fdbqueue.PeriodicJob{Name: "extreme/pow2", Every: 1 << 20 * time.Microsecond, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}
	r, err := q.Schedule(ctx, db, pow, first)
	require.NoError(t, err, "the slot starting at the range's first instant")
	require.True(t, r.Added)
	require.True(t, r.Slot.Equal(first), "slot %v", r.Slot)
	require.Equal(t, int64(7), mustStats(t, db, q).Queued)

	last := time.UnixMicro(math.MaxInt64)
	pj := fdbqueue.PeriodicJob{Name: "last", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}
	r, err = q.Schedule(ctx, db, pj, last)
	require.NoError(t, err)
	require.True(t, r.Added)
	require.False(t, r.Slot.After(last))
	require.Less(t, last.Sub(r.Slot), time.Hour)
}

// setMarker writes v as the marker of schedule name, as another version
// of the library might have.
func setMarker(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, name string, v []byte) {
	t.Helper()
	key, err := q.Subspace().Pack(tuple.Tuple{"p", name})
	require.NoError(t, err)
	_, err = kv.Transact(context.Background(), db, func(tr kv.Transaction) (struct{}, error) {
		tr.Set(key, v)
		return struct{}{}, nil
	})
	require.NoError(t, err)
}

// A marker with fields after the three this version writes (a later
// version's) is read by its first three: the slot it names is scheduled,
// and the next slot is added, the marker rewritten in this version's
// form. It used to fail every Schedule with ErrForeignKey, so that a
// rollback to this version after a later one had scheduled stopped the
// schedule (RunScheduler returning the error at each start). A marker
// whose first fields are not this version's fails with ErrForeignKey and
// nothing is added or rewritten.
func TestScheduleMarkerOfAnotherVersion(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-format", fdbqueue.JobQueueConfig{Clock: clock})
	pj := hourly("report")
	slot := clock.Now()
	held := fdbqueue.JobID{7, 7, 7}
	later, err := tuple.Tuple{slot.UnixMicro(), held[:], false, "a later field", int64(3)}.Pack()
	require.NoError(t, err)
	setMarker(t, db, q, pj.Name, later)
	marker, err := q.Subspace().Pack(tuple.Tuple{"p", pj.Name})
	require.NoError(t, err)

	r, err := q.Schedule(ctx, db, pj, slot.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: slot, ID: held}, r, "the slot is scheduled, by the job the marker names")
	r, err = q.Schedule(ctx, db, pj, slot.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, r.Added, "the next slot is added")
	again, err := q.Schedule(ctx, db, pj, slot.Add(time.Hour+time.Minute))
	require.NoError(t, err)
	require.Equal(t, r.ID, again.ID, "the marker now names this version's job")
	require.Equal(t, int64(1), mustStats(t, db, q).Queued)

	for name, v := range map[string]tuple.Tuple{
		"slot not an integer": {"soon", held[:], false},
		"short ID":            {slot.UnixMicro(), held[:3], false},
		"two fields":          {slot.UnixMicro(), held[:]},
	} {
		b, err := v.Pack()
		require.NoError(t, err)
		setMarker(t, db, q, pj.Name, b)
		_, err = q.Schedule(ctx, db, pj, slot.Add(5*time.Hour))
		var fk *fdbqueue.ForeignKeyError
		require.ErrorAs(t, err, &fk, name)
		require.Equal(t, marker, fk.Key, "%s: the error names the marker's key", name)
		require.Equal(t, int64(1), mustStats(t, db, q).Queued, "%s: nothing added", name)
	}
	setMarker(t, db, q, pj.Name, []byte{0xff, 0x01})
	_, err = q.Schedule(ctx, db, pj, slot.Add(5*time.Hour))
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "not a tuple")

	// The error shows a value of up to 64 bytes whole, a longer one's
	// first 64 bytes and its length.
	for _, n := range []int{64, 65} {
		v := bytes.Repeat([]byte{0xfe}, n)
		setMarker(t, db, q, pj.Name, v)
		_, err = q.Schedule(ctx, db, pj, slot.Add(5*time.Hour))
		require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "%d bytes", n)
		shown := hex.EncodeToString(v[:64])
		if n > 64 {
			shown += fmt.Sprintf("... (%d bytes)", n)
		}
		require.Contains(t, err.Error(), "periodic job marker "+shown+": want", "%d bytes", n)
	}
}

// A Schedule inside the caller's own transaction (no journal, and each
// attempt a new call: kv.Transact runs the closure again after
// commit_unknown_result, as FDB's Transaction::onError retries 1021,
// fdbclient/NativeAPI.actor.cpp) whose first commit landed, with an
// Unschedule of the name committed before the retry: the retry finds no
// marker, and no ID of its own to look up, but it finds the job added
// for its slot by the ID's slot prefix, and adds nothing: one job for the
// slot, reported as not this call's (Added false) with that job's ID. It
// used to add the slot's job a second time. When that job was also
// acked before the retry, nothing is left that tells the slot was added:
// the retry adds it again (documented in Schedule).
func TestScheduleOwnTransactionUnknownResultRacingUnschedule(t *testing.T) {
	for _, c := range []struct {
		name string
		ack  bool // a worker leases and acks the slot's job before the retry
	}{
		{name: "queued"},
		{name: "acked", ack: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			race := newUnscheduleRace(t, "periodic-own-unschedule", c.ack, c.ack)
			mdb, clock, q, first := race.mdb, race.clock, race.q, &race.first
			attempts := 0
			r, err := kv.Transact(ctx, race.db, func(tr kv.Transaction) (fdbqueue.ScheduleResult, error) {
				attempts++
				return q.Schedule(ctx, tr, hourly("report"), clock.Now())
			})
			require.NoError(t, err)
			require.Equal(t, 2, attempts, "the closure ran again after the lost commit")
			require.NotEqual(t, fdbqueue.JobID{}, *first, "the Unschedule ran between the attempts")
			s := mustStats(t, mdb, q)
			if c.ack {
				require.True(t, r.Added, "nothing tells the acked slot was added: added again")
				require.NotEqual(t, *first, r.ID)
				require.Equal(t, int64(2), s.Queued, "the slot's second job and the later one")
				return
			}
			require.Equal(t, int64(2), s.Queued, "the slot's one job and the later one")
			require.False(t, r.Added, "the job found is not known to be this call's")
			require.Equal(t, *first, r.ID, "the slot's job, found by its ID")
			require.Empty(t, mustSchedules(t, mdb, q, 10), "nothing written: the Unschedule stands")
		})
	}
}

// A Schedule whose commit reported commit_unknown_result after applying,
// whose job was then leased and acked, and whose marker another scheduler
// moved on to the next slot, all before the retry (FDB retries 1021 in
// Transaction::onError, fdbclient/NativeAPI.actor.cpp): the retry finds
// neither its job nor its marker, but the marker names the job it named
// before, the first attempt's, so the retry reports that add (Added, its
// ID), adding nothing. It used to report Added false and the later slot
// as Ahead, for a slot this call did add.
func TestScheduleUnknownResultMarkerMovedOn(t *testing.T) {
	ctx := context.Background()
	mdb := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-unknown-moved", fdbqueue.JobQueueConfig{Clock: clock})
	// Stores the configuration record, so that the next commit is
	// Schedule's own; not due, so that a lease takes the slot's job.
	mustAdd(t, mdb, q, fdbqueue.Job{Value: []byte("later"), Delay: 24 * time.Hour})
	pj := hourly("report")
	var first, next fdbqueue.ScheduleResult
	db := &betweenDB{DB: mdb, between: func() {
		ls := mustLease(t, mdb, q, 10, time.Minute)
		require.Len(t, ls, 1, "the first attempt's job")
		require.NoError(t, q.Ack(ctx, mdb, ls[0]))
		var err error
		next, err = q.Schedule(ctx, mdb, pj, clock.Now().Add(time.Hour))
		require.NoError(t, err)
		require.True(t, next.Added, "the next slot, by another scheduler")
		first.ID = ls[0].JobID
	}}
	mdb.FailNextCommit(kv.ErrCommitUnknownResult, true)
	r, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.NotEqual(t, fdbqueue.JobID{}, first.ID, "the lease, ack and next slot ran between the attempts")
	require.Equal(t, fdbqueue.ScheduleResult{Slot: clock.Now(), Added: true, ID: first.ID}, r)
	s := mustStats(t, mdb, q)
	require.Equal(t, int64(2), s.Queued, "the next slot's job and the later one: nothing added by the retry")
	all := mustSchedules(t, mdb, q, 10)
	require.Len(t, all, 1)
	require.Equal(t, next.ID, all[0].ID, "the marker is the next slot's")
}

// As TestScheduleUnknownResultMarkerMovedOn, but the other scheduler's
// slot was skipped (its job's unique key, freed by the ack, held by a job
// added meanwhile): the marker it wrote, a Duplicate one, still names the
// job it replaced, the first attempt's, so the retry reports that add
// (Added, its ID), adding nothing, not the later slot as Ahead.
func TestScheduleUnknownResultMarkerMovedOnBySkippedSlot(t *testing.T) {
	ctx := context.Background()
	mdb := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-unknown-moved-dup", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, mdb, q, fdbqueue.Job{Value: []byte("later"), Delay: 24 * time.Hour})
	pj := named("report", time.Hour, "report")
	var first fdbqueue.JobID
	var holder fdbqueue.AddResult
	db := &betweenDB{DB: mdb, between: func() {
		ls := mustLease(t, mdb, q, 10, time.Minute)
		require.Len(t, ls, 1, "the first attempt's job")
		require.NoError(t, q.Ack(ctx, mdb, ls[0]))
		first = ls[0].JobID
		holder = mustAdd(t, mdb, q, fdbqueue.Job{Value: []byte("holder"), UniqueKey: "report", Delay: 24 * time.Hour})
		next, err := q.Schedule(ctx, mdb, pj, clock.Now().Add(time.Hour))
		require.NoError(t, err)
		require.True(t, next.Duplicate, "the next slot, skipped by another scheduler")
	}}
	mdb.FailNextCommit(kv.ErrCommitUnknownResult, true)
	r, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.NotEqual(t, fdbqueue.JobID{}, first, "the lease, ack and next slot ran between the attempts")
	require.Equal(t, fdbqueue.ScheduleResult{Slot: clock.Now(), Added: true, ID: first}, r)
	require.Equal(t, int64(2), mustStats(t, mdb, q).Queued, "the holder and the later job: nothing added by the retry")
	all := mustSchedules(t, mdb, q, 10)
	require.Len(t, all, 1)
	require.True(t, all[0].Duplicate, "the marker is the skipped slot's")
	require.Equal(t, holder.ID, all[0].ID)
}

// A LeaseWait asleep (on its watch of the signal key and a timer for a
// job due in ten minutes) is woken by the job a Schedule adds, due at
// once, without the clock moving: Schedule bumps the signal as Add does.
func TestScheduleWakesLeaseWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 16)
	q := mustJobQueue(t, "periodic-wakes", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("later"), Delay: 10 * time.Minute})
	w := leaseWaitAsync(ctx, q, db)
	require.Equal(t, 10*time.Minute+time.Microsecond, nextArmed(t, clock), "asleep until the later job")

	r, err := q.Schedule(ctx, db, hourly("report"), clock.Now())
	require.NoError(t, err)
	require.True(t, r.Added)
	got := recvWithin(t, w, "the LeaseWait the scheduled job wakes")
	require.NoError(t, got.err)
	require.Len(t, got.ls, 1)
	require.Equal(t, r.ID, got.ls[0].JobID)
}

// A slot whose ID tag (the ID's first 12 bytes) ends in 0xff: the range
// of the slot's ID index entries ends at the tag with that byte dropped
// and the one before it incremented, not at a 0xff incremented (which
// would wrap to 0x00, a range that ends before it begins). After an
// Unschedule, Schedule in that slot finds the slot's job by its ID and
// adds nothing, as for any other tag.
func TestScheduleSlotTagEndingInFF(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "periodic-tag-ff", fdbqueue.JobQueueConfig{Clock: clock})
	var pj fdbqueue.PeriodicJob
	var r fdbqueue.ScheduleResult
	for i := 0; ; i++ {
		require.Less(t, i, 10000, "no tag ending in 0xff among the names tried")
		pj = named(fmt.Sprintf("report-%d", i), time.Hour, "")
		var err error
		r, err = q.Schedule(ctx, db, pj, clock.Now())
		require.NoError(t, err)
		require.True(t, r.Added)
		if r.ID[11] == 0xff {
			break
		}
	}
	_, err := q.Unschedule(ctx, db, pj.Name)
	require.NoError(t, err)
	again, err := q.Schedule(ctx, db, pj, clock.Now())
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: r.Slot, ID: r.ID}, again, "the slot's job, found by its ID")
}

// runScheduler runs q.RunScheduler with jobs in the background; the stop
// it returns ends its context and requires RunScheduler to return nil.
func runScheduler(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, jobs ...fdbqueue.PeriodicJob) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- q.RunScheduler(ctx, db, jobs) }()
	return func() {
		t.Helper()
		cancel()
		require.NoError(t, recvWithin(t, done, "RunScheduler's return once its context ended"))
	}
}
