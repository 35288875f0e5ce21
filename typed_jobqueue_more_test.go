package fdbqueue_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// TypedJobQueue.Job decodes the job it finds, in any state, its JobInfo's
// fields promoted; the stored bytes stay in JobInfo.Value. An ID no job
// has fails with ErrJobNotFound, as JobQueue.Job does.
func TestTypedJobQueueJob(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-job", fdbqueue.JSONCodec[resizeArgs]{}, fdbqueue.JobQueueConfig{Choice: 1, Clock: newFakeClock()})
	v := resizeArgs{Image: "img-1", Width: 100}
	r, err := tj.Add(ctx, db, fdbqueue.TypedJob[resizeArgs]{Value: v, Priority: 3, UniqueKey: "img-1"})
	require.NoError(t, err)
	info, err := tj.Job(ctx, db, r.ID)
	require.NoError(t, err)
	plain := mustInfo(t, db, tj.JobQueue(), r.ID)
	require.Equal(t, fdbqueue.TypedJobInfo[resizeArgs]{JobInfo: plain, Value: v}, info)
	require.Equal(t, fdbqueue.JobQueued, info.State)
	require.Equal(t, int32(3), info.Priority)

	ls, err := tj.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	info, err = tj.Job(ctx, db, r.ID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobLeased, info.State)
	require.Equal(t, ls[0].ID, info.LeaseID)
	require.Equal(t, v, info.Value)

	_, err = tj.Job(ctx, db, fdbqueue.JobID{9})
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound)
}

// A job whose value does not decode (bad bytes, a Decode that panics) is
// not hidden: Job returns its JobInfo with the zero value and a
// *CodecError holding the bytes, its priority and the JobInfo; the job is
// untouched, and Cancel removes it.
func TestTypedJobQueueJobDecodeFails(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	plain := mustJobQueue(t, "typed-job-bad", fdbqueue.JobQueueConfig{Choice: 1, Clock: newFakeClock()})
	id := mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("not json"), Priority: -4}).ID
	want := mustInfo(t, db, plain, id)
	for name, err := range map[string]error{
		"bad bytes": func() error {
			info, err := fdbqueue.NewTypedJobQueue(plain, fdbqueue.JSONCodec[resizeArgs]{}).Job(ctx, db, id)
			require.Equal(t, fdbqueue.TypedJobInfo[resizeArgs]{JobInfo: want}, info, "the JobInfo, the zero value")
			return err
		}(),
		"Decode panics": func() error {
			var info fdbqueue.TypedJobInfo[int]
			var err error
			require.NotPanics(t, func() { info, err = fdbqueue.NewTypedJobQueue[int](plain, panicCodec{}).Job(ctx, db, id) })
			require.Equal(t, fdbqueue.TypedJobInfo[int]{JobInfo: want}, info)
			return err
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, err, fdbqueue.ErrCodec)
			var ce *fdbqueue.CodecError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, []byte("not json"), ce.Raw)
			require.Equal(t, int64(-4), ce.Priority)
			require.NotNil(t, ce.Job)
			require.Equal(t, want, *ce.Job)
			require.Nil(t, ce.Lease)
			require.Contains(t, ce.Error(), id.String())
		})
	}
	require.Equal(t, want, mustInfo(t, db, plain, id), "the job is untouched")
	tj := fdbqueue.NewTypedJobQueue(plain, fdbqueue.JSONCodec[resizeArgs]{})
	require.NoError(t, tj.Cancel(ctx, db, id), "a job that does not decode is cancelled as any other")
	_, err := tj.Job(ctx, db, id)
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound)
}

// Cancel, Requeue and DeleteDead are the JobQueue's: a queued job
// cancelled, a dead one requeued and then, dead again, deleted; each
// fails with ErrJobNotFound where the JobQueue's does.
func TestTypedJobQueueByID(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-byid", fdbqueue.StringCodec{}, fdbqueue.JobQueueConfig{Choice: 1, Clock: newFakeClock()})
	q := tj.JobQueue()
	queued, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "queued"})
	require.NoError(t, err)
	require.NoError(t, tj.Cancel(ctx, db, queued.ID))
	require.ErrorIs(t, tj.Cancel(ctx, db, queued.ID), fdbqueue.ErrJobNotFound)

	dead, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "dies", MaxAttempts: 1})
	require.NoError(t, err)
	kill := func() {
		ls, err := tj.Lease(ctx, db, 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, ls, 1)
		died, err := q.Nack(ctx, db, ls[0].Lease, fdbqueue.NackOptions{})
		require.NoError(t, err)
		require.True(t, died)
	}
	kill()
	require.ErrorIs(t, tj.Cancel(ctx, db, dead.ID), fdbqueue.ErrJobNotFound, "a dead job is not cancelled")
	require.NoError(t, tj.Requeue(ctx, db, dead.ID))
	info, err := tj.Job(ctx, db, dead.ID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobQueued, info.State)
	require.Equal(t, "dies", info.Value)
	require.ErrorIs(t, tj.DeleteDead(ctx, db, dead.ID), fdbqueue.ErrJobNotFound, "not dead")
	kill()
	require.NoError(t, tj.DeleteDead(ctx, db, dead.ID))
	require.ErrorIs(t, tj.Requeue(ctx, db, dead.ID), fdbqueue.ErrJobNotFound)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// A typed schedule adds the slot's job with its value encoded, due at
// the slot's start, with the TypedJob's priority, unique key and maximum
// attempts, once per slot; a typed and an untyped schedule of one
// name are one schedule; Schedules and Unschedule are the JobQueue's.
func TestTypedSchedule(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	tj := mustTypedJobs(t, "typed-schedule", fdbqueue.JSONCodec[resizeArgs]{}, fdbqueue.JobQueueConfig{Choice: 1, Clock: clock})
	pj := fdbqueue.TypedPeriodicJob[resizeArgs]{Name: "thumbs", Every: time.Hour, Job: func(slot time.Time) fdbqueue.TypedJob[resizeArgs] {
		return fdbqueue.TypedJob[resizeArgs]{Value: resizeArgs{Image: slot.UTC().Format(time.RFC3339), Width: 64}, Priority: 2, Delay: time.Hour,
			UniqueKey: "thumbs", MaxAttempts: 3}
	}}
	r, err := tj.Schedule(ctx, db, pj, clock.Now().Add(10*time.Minute))
	require.NoError(t, err)
	require.True(t, r.Added)
	require.True(t, r.Slot.Equal(clock.Now()))
	info, err := tj.Job(ctx, db, r.ID)
	require.NoError(t, err)
	require.Equal(t, resizeArgs{Image: clock.Now().UTC().Format(time.RFC3339), Width: 64}, info.Value)
	require.Equal(t, int32(2), info.Priority)
	require.Equal(t, "thumbs", info.UniqueKey)
	require.Equal(t, 3, info.MaxAttempts)
	require.True(t, info.DueAt.Equal(r.Slot), "due at the slot, Delay ignored")

	again, err := tj.Schedule(ctx, db, pj, clock.Now().Add(20*time.Minute))
	require.NoError(t, err)
	require.Equal(t, fdbqueue.ScheduleResult{Slot: r.Slot, ID: r.ID}, again)
	untyped, err := tj.JobQueue().Schedule(ctx, db, fdbqueue.PeriodicJob{Name: "thumbs", Every: time.Hour,
		Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("{}")} }}, clock.Now())
	require.NoError(t, err)
	require.False(t, untyped.Added, "one schedule, typed or not")

	all, err := tj.Schedules(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.ScheduleInfo{{Name: "thumbs", Slot: r.Slot.UTC(), ID: r.ID, Key: markerKey(t, tj.JobQueue(), "thumbs")}}, all)
	page, err := tj.Schedules(ctx, db, all[0].Key, 10)
	require.NoError(t, err)
	require.Empty(t, page, "nothing after its key")
	removed, err := tj.Unschedule(ctx, db, "thumbs")
	require.NoError(t, err)
	require.Equal(t, all[0], removed)
	_, err = tj.Unschedule(ctx, db, "thumbs")
	require.ErrorIs(t, err, fdbqueue.ErrScheduleNotFound)
}

// A typed schedule whose value the codec fails to encode fails its slot
// with a *CodecError naming the schedule and the slot, carrying the job's
// priority, and writes nothing: no job, no marker, so a later call in the
// same slot whose value encodes adds it. Bad schedules fail with
// ErrInvalidArgument, as the JobQueue's.
func TestTypedScheduleEncodeFails(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	tj := fdbqueue.NewTypedJobQueue[int](mustJobQueue(t, "typed-schedule-enc", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock}), signCodec{})
	value := -1
	pj := fdbqueue.TypedPeriodicJob[int]{Name: "count", Every: time.Minute, Job: func(time.Time) fdbqueue.TypedJob[int] {
		return fdbqueue.TypedJob[int]{Value: value, Priority: 7}
	}}
	before := allPairs(t, db)
	_, err := tj.Schedule(ctx, db, pj, time.Time{})
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.ErrorIs(t, err, errNegative)
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(7), ce.Priority)
	require.Nil(t, ce.Raw)
	require.Contains(t, ce.Error(), `periodic job "count", slot `+clock.Now().UTC().Format(time.RFC3339))
	require.Equal(t, before, allPairs(t, db), "nothing written")

	value = 5
	r, err := tj.Schedule(ctx, db, pj, time.Time{})
	require.NoError(t, err)
	require.True(t, r.Added, "the slot was not marked")
	info, err := tj.Job(ctx, db, r.ID)
	require.NoError(t, err)
	require.Equal(t, 5, info.Value)

	for name, bad := range map[string]fdbqueue.TypedPeriodicJob[int]{
		"empty name":   {Every: time.Minute, Job: pj.Job},
		"long name":    {Name: strings.Repeat("n", fdbqueue.MaxScheduleNameSize+1), Every: time.Minute, Job: pj.Job},
		"short period": {Name: "x", Every: time.Millisecond, Job: pj.Job},
		"nil Job":      {Name: "x", Every: time.Minute},
	} {
		_, err := tj.Schedule(ctx, db, bad, time.Time{})
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
		require.ErrorIs(t, tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[int]{bad}), fdbqueue.ErrInvalidArgument, name)
	}
	require.ErrorIs(t, tj.RunScheduler(ctx, db, nil), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[int]{pj, pj}), fdbqueue.ErrInvalidArgument)
}

// The typed RunScheduler adds one job per slot, its value encoded, and
// ends with the *CodecError of the first slot whose value does not
// encode, having written nothing for that slot.
func TestTypedRunScheduler(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 1)
	tj := fdbqueue.NewTypedJobQueue[int](mustJobQueue(t, "typed-run-scheduler", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock}), signCodec{})
	start := clock.Now()
	pj := fdbqueue.TypedPeriodicJob[int]{Name: "minutes", Every: time.Minute, Job: func(slot time.Time) fdbqueue.TypedJob[int] {
		return fdbqueue.TypedJob[int]{Value: 1 - int(slot.Sub(start)/time.Minute)} // 1, 0, then -1: not encoded
	}}
	done := make(chan error, 1)
	go func() { done <- tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[int]{pj}) }()
	<-clock.Armed
	clock.Advance(time.Minute)
	<-clock.Armed
	clock.Advance(time.Minute)
	err := <-done
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.True(t, errors.Is(err, errNegative), "%v", err)
	require.Contains(t, err.Error(), start.Add(2*time.Minute).UTC().Format(time.RFC3339))

	ls, err := tj.Lease(context.Background(), db, 10, time.Minute)
	require.NoError(t, err)
	var got []int
	for _, l := range ls {
		got = append(got, l.Value)
	}
	require.ElementsMatch(t, []int{1, 0}, got, "the first two slots; nothing for the third")
	all, err := tj.Schedules(context.Background(), db, nil, 10)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.True(t, all[0].Slot.Equal(start.Add(time.Minute)), "the third slot is not marked: %v", all[0].Slot)
}
