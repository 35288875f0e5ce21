package fdbqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TypedPeriodicJob is a schedule of a TypedJobQueue: PeriodicJob's fields,
// with a Job function that returns a TypedJob[T], whose value the queue's
// codec encodes.
type TypedPeriodicJob[T any] struct {
	// Name and Every are PeriodicJob's: the schedule's name in the queue
	// (a typed and an untyped schedule of one name are one schedule) and
	// its period.
	Name  string
	Every time.Duration
	// Job returns the job to add for the slot that starts at slot; its
	// RunAt is replaced by slot and its Delay ignored, as PeriodicJob.Job's.
	// Required.
	Job func(slot time.Time) TypedJob[T]
}

// periodic returns pj as Schedule runs it: its job function encodes the
// slot's value, and fails with a *CodecError naming the schedule and the
// slot when the codec cannot.
func (pj TypedPeriodicJob[T]) periodic(codec Codec[T]) periodic {
	p := periodic{Name: pj.Name, Every: pj.Every}
	if pj.Job != nil {
		p.job = func(slot time.Time) (Job, error) {
			j := pj.Job(slot)
			b, err := encodeValue(codec, j.Value)
			if err != nil {
				return Job{}, &CodecError{Err: fmt.Errorf("periodic job %q, slot %s: %w", pj.Name, slot.UTC().Format(time.RFC3339Nano), err),
					Priority: int64(j.Priority)}
			}
			return Job{Value: b, Delay: j.Delay, RunAt: j.RunAt, Priority: j.Priority, UniqueKey: j.UniqueKey, MaxAttempts: j.MaxAttempts}, nil
		}
	}
	return p
}

// Schedule adds pj's job, its value encoded, for the slot that holds now
// (the queue's Clock when now is zero), unless that slot or a later one is
// already scheduled; see JobQueue.Schedule for the marker, the slots,
// conflicts, cost and behaviour under commit_unknown_result, and the bad
// schedules it refuses with ErrInvalidArgument.
//
// pj.Job is called, and its value encoded, once per call, before the
// transaction: a value the codec fails to encode fails the call with a
// *CodecError naming the schedule and the slot, and nothing is written
// (no job, no marker: the slot is not scheduled, and a later call in it
// tries again). A nil TypedJobQueue, or one made with a nil JobQueue or
// codec, fails with ErrInvalidArgument before any transaction.
func (tj *TypedJobQueue[T]) Schedule(ctx context.Context, t kv.Transactor, pj TypedPeriodicJob[T], now time.Time) (ScheduleResult, error) {
	if err := tj.check(); err != nil {
		return ScheduleResult{}, err
	}
	return tj.q.schedule(ctx, t, pj.periodic(tj.codec), now)
}

// RunScheduler runs the schedules jobs until ctx ends, then returns nil,
// as JobQueue.RunScheduler does, each slot's value encoded by the queue's
// codec. A value the codec fails to encode fails that slot, writing
// nothing, and ends RunScheduler, which returns the *CodecError naming
// the schedule and the slot, as it returns any Schedule's error: restart
// it once the value encodes (the next call adds the latest slot). A nil
// TypedJobQueue, or one made with a nil JobQueue or codec, fails with
// ErrInvalidArgument before any transaction.
func (tj *TypedJobQueue[T]) RunScheduler(ctx context.Context, db kv.Database, jobs []TypedPeriodicJob[T]) error {
	if err := tj.check(); err != nil {
		return err
	}
	ps := make([]periodic, len(jobs))
	for i, pj := range jobs {
		ps[i] = pj.periodic(tj.codec)
	}
	return tj.q.runScheduler(ctx, db, ps)
}

// Schedules returns up to limit keys of the queue's schedule markers'
// range after cursor (nil: from the first; else a ScheduleInfo's Key, or
// one of JobQueue().ScheduleCursorAt), typed and untyped schedules alike,
// and another program's keys there too; see JobQueue.Schedules, and page
// with the last entry's Key. A nil TypedJobQueue, or one made with a nil
// JobQueue or codec, fails with ErrInvalidArgument before any read.
func (tj *TypedJobQueue[T]) Schedules(ctx context.Context, t kv.ReadTransactor, cursor []byte, limit int) ([]ScheduleInfo, error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	return tj.q.Schedules(ctx, t, cursor, limit)
}

// Unschedule removes the marker of the schedule name, leaving its jobs;
// see JobQueue.Unschedule (ErrScheduleNotFound, and a scheduler still
// running it, which writes the marker again). A nil TypedJobQueue, or one
// made with a nil JobQueue or codec, fails with ErrInvalidArgument before
// any transaction.
func (tj *TypedJobQueue[T]) Unschedule(ctx context.Context, t kv.Transactor, name string, opts ...OpOption) (ScheduleInfo, error) {
	if err := tj.check(); err != nil {
		return ScheduleInfo{}, err
	}
	return tj.q.Unschedule(ctx, t, name, opts...)
}
