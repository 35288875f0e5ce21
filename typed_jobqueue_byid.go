package fdbqueue

import (
	"context"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
)

// The TypedJobQueue's operations on a job by its ID: Job decodes what the
// JobQueue's Job finds; Cancel, Requeue and DeleteDead take no value and
// are the JobQueue's.

// TypedJobInfo is a job as TypedJobQueue.Job found it: the JobInfo, whose
// fields are promoted (State, DueAt, Attempts, ...) but for Value, which
// is the decoded T; the stored bytes stay in JobInfo.Value.
type TypedJobInfo[T any] struct {
	JobInfo
	Value T // the job's decoded value
}

// Job returns the job id as it is now, wherever it is, with its value
// decoded; see JobQueue.Job for the states, errors, cost and reads (t's:
// given your Transaction, normal reads of the job's keys).
//
// A value the codec fails to decode (or whose Decode panics) hides
// nothing: the result holds the JobInfo (its Value the stored bytes, the
// TypedJobInfo's Value the zero T), and the error is a *CodecError holding
// the bytes (Raw), the job's priority and the JobInfo (Job). Job reads
// only, so the job is as it was: Cancel it, or, once dead, Requeue it when
// the codec can read it. A nil TypedJobQueue, or one made with a nil
// JobQueue or codec, fails with ErrInvalidArgument before any read.
func (tj *TypedJobQueue[T]) Job(ctx context.Context, t kv.ReadTransactor, id JobID) (TypedJobInfo[T], error) {
	if err := tj.check(); err != nil {
		return TypedJobInfo[T]{}, err
	}
	info, err := tj.q.Job(ctx, t, id)
	if err != nil {
		return TypedJobInfo[T]{}, err
	}
	v, err := decodeTyped(tj.codec, info.Value)
	if ce, ok := err.(*CodecError); ok {
		ce.Err = fmt.Errorf("job %s: %w", id, ce.Err)
		ce.Priority = int64(info.Priority)
		ce.Job = &info
	}
	return TypedJobInfo[T]{JobInfo: info, Value: v}, err
}

// Cancel removes the job id from the queue for good, whether it is due,
// delayed or leased; see JobQueue.Cancel for its errors (ErrJobNotFound),
// conflicts, cost and behaviour under commit_unknown_result. It decodes
// nothing: a job whose value does not decode is cancelled as any other.
// A nil TypedJobQueue, or one made with a nil JobQueue or codec, fails with
// ErrInvalidArgument before any transaction.
func (tj *TypedJobQueue[T]) Cancel(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	if err := tj.check(); err != nil {
		return err
	}
	return tj.q.Cancel(ctx, t, id, opts...)
}

// Requeue puts the dead job id back in the queue, due at once with its
// attempts reset; see JobQueue.Requeue for its errors, conflicts, cost and
// behaviour under commit_unknown_result. Its value is not decoded: a job
// dead-lettered because its value did not decode comes back as it is (Run
// would dead-letter it again after one attempt unless the codec now reads
// it). A nil TypedJobQueue, or one made with a nil JobQueue or codec,
// fails with ErrInvalidArgument before any transaction.
func (tj *TypedJobQueue[T]) Requeue(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	if err := tj.check(); err != nil {
		return err
	}
	return tj.q.Requeue(ctx, t, id, opts...)
}

// DeleteDead removes the dead job id and its value for good; see
// JobQueue.DeleteDead. A nil TypedJobQueue, or one made with a nil
// JobQueue or codec, fails with ErrInvalidArgument before any transaction.
func (tj *TypedJobQueue[T]) DeleteDead(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	if err := tj.check(); err != nil {
		return err
	}
	return tj.q.DeleteDead(ctx, t, id, opts...)
}
