package fdbqueue

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TypedJobQueue is a JobQueue whose jobs carry values of type T, converted
// by a Codec: typed job arguments. It adds nothing to the stored layout: a
// TypedJobQueue and a JobQueue on the same subspace see the same jobs. Job
// decodes the job it finds (TypedJobInfo), and Schedule and RunScheduler
// encode their periodic jobs' values (TypedPeriodicJob); Cancel, Requeue,
// DeleteDead, Schedules and Unschedule take no value and are the
// JobQueue's. The operations on a held lease (Ack, Nack, Extend, Release)
// take no value either: call them on JobQueue(), with a TypedLease's
// Lease.
type TypedJobQueue[T any] struct {
	q     *JobQueue
	codec Codec[T]
}

// NewTypedJobQueue wraps q with codec. Given a nil q or codec (a nil
// pointer of a codec type included), every operation of the result fails
// with ErrInvalidArgument, reading and writing nothing.
func NewTypedJobQueue[T any](q *JobQueue, codec Codec[T]) *TypedJobQueue[T] {
	return &TypedJobQueue[T]{q: q, codec: codec}
}

// check refuses a wrapper made with a nil queue or codec before anything is
// read or written: a nil codec met only once a lease had committed would
// leave the job leased to nobody until its lease expired.
func (tj *TypedJobQueue[T]) check() error {
	if tj == nil || tj.q == nil {
		return fmt.Errorf("%w: TypedJobQueue without a JobQueue", ErrInvalidArgument)
	}
	if nilCodec(tj.codec) {
		return fmt.Errorf("%w: TypedJobQueue without a codec", ErrInvalidArgument)
	}
	return nil
}

// JobQueue returns the underlying job queue, for the operations the
// TypedJobQueue does not have, which take no value: Ack, Nack, Extend and
// Release (with a TypedLease's Lease), SettleLease, Backoff,
// DeadCursorAt and ScheduleCursorAt.
func (tj *TypedJobQueue[T]) JobQueue() *JobQueue {
	if tj == nil {
		return nil
	}
	return tj.q
}

// Subspace returns the queue's subspace (the zero Subspace for a
// TypedJobQueue made with a nil JobQueue).
func (tj *TypedJobQueue[T]) Subspace() Subspace {
	if tj == nil || tj.q == nil {
		return Subspace{}
	}
	return tj.q.Subspace()
}

// TypedJob describes a job to add to a TypedJobQueue: Job's fields, with a
// value of type T.
type TypedJob[T any] struct {
	// Value is the job's argument, stored encoded by the queue's codec (at
	// most 100,000 bytes encoded).
	Value T
	// Delay makes the job due Delay after it is added; RunAt, if not zero,
	// at RunAt instead. See Job.
	Delay time.Duration
	RunAt time.Time
	// Priority orders jobs with the same vesting time: higher first.
	Priority int32
	// UniqueKey, if not empty, makes the add a no-op while a job with the
	// same key is in the queue; see Job.
	UniqueKey string
	// MaxAttempts overrides the queue's default when positive; see Job.
	MaxAttempts int
}

// Add encodes the job's value and adds the job; see AddBatch.
func (tj *TypedJobQueue[T]) Add(ctx context.Context, t kv.Transactor, job TypedJob[T], opts ...OpOption) (AddResult, error) {
	r, err := tj.AddBatch(ctx, t, []TypedJob[T]{job}, opts...)
	if err != nil {
		return AddResult{}, err
	}
	return r[0], nil
}

// AddBatch encodes the jobs' values and adds the jobs in one transaction,
// all or none; see JobQueue.AddBatch for the results, limits (an encoded
// value over 100,000 bytes fails with ErrValueTooLarge), conflicts and
// behaviour under commit_unknown_result. A value the codec fails to encode
// (or whose Encode panics) fails the call, before anything is written,
// with a *CodecError whose message gives the job's index in jobs.
func (tj *TypedJobQueue[T]) AddBatch(ctx context.Context, t kv.Transactor, jobs []TypedJob[T], opts ...OpOption) ([]AddResult, error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	raw := make([]Job, len(jobs))
	for i, j := range jobs {
		b, err := encodeValue(tj.codec, j.Value)
		if err != nil {
			return nil, &CodecError{Err: fmt.Errorf("job %d: %w", i, err), Priority: int64(j.Priority)}
		}
		raw[i] = Job{Value: b, Delay: j.Delay, RunAt: j.RunAt, Priority: j.Priority, UniqueKey: j.UniqueKey, MaxAttempts: j.MaxAttempts}
	}
	return tj.q.AddBatch(ctx, t, raw, opts...)
}

// TypedLease is a leased job with its value decoded. The embedded Lease's
// fields are promoted (JobID, Attempt, Deadline, ...) but for Value,
// which is the decoded T; the stored bytes stay in Lease.Value. Pass
// Lease to the JobQueue's Ack, Nack, Extend and Release.
type TypedLease[T any] struct {
	Lease
	Value T // the job's decoded value
}

// Lease leases up to n due jobs and decodes their values; see
// JobQueue.Lease for which jobs, the limits, conflicts and behaviour under
// commit_unknown_result.
//
// A job whose value the codec fails to decode (or whose Decode panics) has
// been leased all the same, and its lease is still held: it is left out of
// the result and reported in a *CodecError holding its bytes (Raw), its
// priority and its lease (Lease), with which to Nack it (NackOptions
// NoRetry dead-letters it) or Release it; left alone, it comes back when
// the lease expires, with the attempt counted. The leases that decoded are
// returned with that error (the *CodecErrors joined with errors.Join when
// there are several; errors.As finds the first): process them even when
// the error is not nil.
func (tj *TypedJobQueue[T]) Lease(ctx context.Context, t kv.Transactor, n int, d time.Duration, opts ...OpOption) ([]TypedLease[T], error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	return tj.decodeAll(tj.q.Lease(ctx, t, n, d, opts...))
}

// LeaseWait leases up to n jobs and decodes their values, waiting while
// none is due; see JobQueue.LeaseWait for the wait, and Lease for a value
// that does not decode (its lease is held and comes back in a
// *CodecError).
func (tj *TypedJobQueue[T]) LeaseWait(ctx context.Context, db kv.Database, n int, d time.Duration) ([]TypedLease[T], error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	return tj.decodeAll(tj.q.LeaseWait(ctx, db, n, d))
}

// decodeAll decodes the leases a Lease or LeaseWait returned with err.
func (tj *TypedJobQueue[T]) decodeAll(ls []Lease, err error) ([]TypedLease[T], error) {
	if err != nil {
		return nil, err
	}
	out := make([]TypedLease[T], 0, len(ls))
	var errs []error
	for _, l := range ls {
		v, err := tj.decode(l)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, TypedLease[T]{Lease: l, Value: v})
	}
	return out, joinCodecErrors(errs)
}

// decode decodes l's value; on failure, the *CodecError names the job and
// holds its bytes, priority and lease.
func (tj *TypedJobQueue[T]) decode(l Lease) (T, error) {
	v, err := decodeTyped(tj.codec, l.Value)
	if ce, ok := err.(*CodecError); ok {
		ce.Err = fmt.Errorf("job %s: %w", l.JobID, ce.Err)
		ce.Priority = int64(l.Priority)
		ce.Lease = &l
	}
	return v, err
}

// TypedHandler processes one leased job of a TypedJobQueue's pool; see
// Handler for what its error does.
type TypedHandler[T any] func(ctx context.Context, task *TypedTask[T]) error

// TypedTask is a job being processed by a TypedJobQueue's pool, with its
// value decoded; made by the pool (a nil or zero TypedTask's Ack fails with
// ErrInvalidArgument).
type TypedTask[T any] struct {
	task  *Task
	value T
}

// Value returns the job's decoded value.
func (tt *TypedTask[T]) Value() T {
	if tt == nil {
		var zero T
		return zero
	}
	return tt.value
}

// Lease returns the task's lease as of its last extension (its Value holds
// the stored bytes); see Task.Lease.
func (tt *TypedTask[T]) Lease() Lease {
	if tt == nil {
		return Lease{}
	}
	return tt.task.Lease()
}

// Ack acks the job inside tr, the transaction that writes its effects;
// see Task.Ack. It fails with ErrLeaseLost when the task no longer holds
// the job: another consumer has it, or JobQueue.Cancel removed it.
func (tt *TypedTask[T]) Ack(ctx context.Context, tr kv.Transaction) error {
	if tt == nil {
		return errZeroTask
	}
	return tt.task.Ack(ctx, tr)
}

// Run is JobQueue.Run with handler given each job's decoded value. A job
// whose value the codec fails to decode (or whose Decode panics) is not
// handed to handler, and is not retried, which could not help: it is
// failed for good as if a handler had returned NoRetry with the
// *CodecError (which holds its bytes and lease), so it moves to the
// dead-letter list after that one attempt, with the error's text as its
// reason, and the Outcome is DeadLettered, its Err the NoRetry error
// wrapping the *CodecError. (At shutdown, once ShutdownTimeout has
// passed, it is released instead, as any failure then.) Requeue it once
// the codec can read it. A nil handler fails with ErrInvalidArgument.
func (tj *TypedJobQueue[T]) Run(ctx context.Context, db kv.Database, handler TypedHandler[T], o PoolOptions) error {
	if err := tj.check(); err != nil {
		return err
	}
	if handler == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	return tj.q.Run(ctx, db, func(ctx context.Context, task *Task) error {
		v, err := tj.decode(task.Lease())
		if err != nil {
			return NoRetry(err)
		}
		return handler(ctx, &TypedTask[T]{task: task, value: v})
	}, o)
}

// Stats returns the queue's counts; see JobQueue.Stats.
func (tj *TypedJobQueue[T]) Stats(ctx context.Context, t kv.ReadTransactor) (JobStats, error) {
	if err := tj.check(); err != nil {
		return JobStats{}, err
	}
	return tj.q.Stats(ctx, t)
}

// ListDead returns up to limit dead jobs after cursor; see
// JobQueue.ListDead. Their values are the stored bytes, undecoded: among
// them may be jobs that Run dead-lettered because their values did not
// decode.
func (tj *TypedJobQueue[T]) ListDead(ctx context.Context, t kv.ReadTransactor, cursor []byte, limit int) ([]DeadJob, error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	return tj.q.ListDead(ctx, t, cursor, limit)
}

// RegisterGauges registers the job queue's gauges; see
// JobQueue.RegisterGauges.
func (tj *TypedJobQueue[T]) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := tj.check(); err != nil {
		return nil, err
	}
	return tj.q.RegisterGauges(db)
}
