package fdbqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// JobState is where a job is: in the queue (JobQueued), leased to a
// consumer (JobLeased) or in the dead-letter list (JobDead). Whether a
// queued job is due and whether a lease has expired change with time
// alone, without a write: JobInfo.DueAt tells.
type JobState int

// The states of a job. The zero JobState is none of them.
const (
	// JobQueued: in the queue and not leased; due (Lease may take it) once
	// JobInfo.DueAt is at or before the clock's now, delayed until then.
	JobQueued JobState = iota + 1
	// JobLeased: leased to a consumer until JobInfo.DueAt, the lease's
	// deadline; at or after it the lease has expired and the job is due
	// again (the next Lease takes it, or dead-letters it after its last
	// attempt).
	JobLeased
	// JobDead: in the dead-letter list (ListDead, Requeue, DeleteDead).
	JobDead
)

// String returns the state's name: "queued", "leased" or "dead".
func (s JobState) String() string {
	switch s {
	case JobQueued:
		return "queued"
	case JobLeased:
		return "leased"
	case JobDead:
		return "dead"
	}
	return fmt.Sprintf("JobState(%d)", int(s))
}

// JobInfo is a job as Job found it: what its record holds, and its value.
type JobInfo struct {
	ID    JobID    // the job's ID, as Add returned it
	Value []byte   // the job's payload
	State JobState // queued, leased or dead
	// DueAt is, for a queued job, its vesting time: when it is due (its
	// Delay or RunAt when added, its retry time after a Nack or Release,
	// the requeue time after Requeue); for a leased job, its lease's
	// deadline. Kept to the microsecond (a future time rounded up). Zero
	// for a dead job.
	DueAt time.Time
	// LeaseID is the current lease's ID (Lease.ID) for a leased job, zero
	// otherwise: a Lease whose ID differs has lost the job.
	LeaseID [16]byte
	// Attempts is the number of leases taken so far, the current one
	// included (a leased job's Lease.Attempt); a Release gives its attempt
	// back, and Requeue starts again from 0.
	Attempts    int
	MaxAttempts int       // the job's maximum number of attempts
	Priority    int32     // the job's priority
	UniqueKey   string    // the job's unique key, if any
	Added       time.Time // when it was added or last requeued, to the microsecond
	// Reason is the reason kept with the job: the last one a Nack gave,
	// as Lease.Reason; for a dead job, why it died, as DeadJob.Reason.
	Reason string
	// Died is when a dead job died, to the microsecond; zero for a job in
	// the queue.
	Died time.Time
}

// toInfo returns the JobInfo of the record m, dead or in the queue, and
// its value.
func (m jobMeta) toInfo(dead bool, value []byte) JobInfo {
	info := JobInfo{ID: m.id, Value: value, State: JobQueued, Attempts: m.attempts, MaxAttempts: m.maxAttempts,
		Priority: m.prio, UniqueKey: string(m.unique), Added: time.UnixMicro(m.added), Reason: string(m.reason)}
	switch {
	case dead:
		info.State, info.Died = JobDead, time.UnixMicro(m.deadAt)
	case m.lease != nil:
		info.State, info.DueAt = JobLeased, time.UnixMicro(m.vest)
		copy(info.LeaseID[:], m.lease)
	default:
		info.DueAt = time.UnixMicro(m.vest)
	}
	return info
}

// Job returns the job id as it is now, wherever it is: queued (due or
// delayed), leased (a live or an expired lease) or dead. It fails with
// ErrJobNotFound when the queue holds no job with that ID (never added, or
// acked, cancelled or deleted since), and with ErrForeignKey when the
// job's index entry or value is not what the queue writes.
//
// Cost: two round trips (the job's index entry and its value together,
// then its record), three point reads, no write. Its reads are t's: given
// a Database, a read-only transaction of its own, which conflicts with
// nothing; given your Transaction, normal reads of the job's keys, so
// that a transaction that acts on what Job returned (it cancels the job
// only while it is delayed, say) fails with a conflict, and retries, if
// the job changed meanwhile; given tr.Snapshot(), snapshot reads, which
// add no conflict range.
func (q *JobQueue) Job(ctx context.Context, t kv.ReadTransactor, id JobID) (JobInfo, error) {
	if err := q.usable(); err != nil {
		return JobInfo{}, err
	}
	if err := checkTransactor(t); err != nil {
		return JobInfo{}, err
	}
	return kv.ReadTransact(ctx, q.journal.gate.reads(t), func(tr kv.ReadTransaction) (JobInfo, error) { // config.go
		x := tr.Get(q.key("x", id[:]))
		vk := q.key("v", id[:])
		v := tr.Get(vk)
		key, at, err := q.jobKey(x, id)
		switch {
		case err != nil:
			return JobInfo{}, err
		case at == jobNowhere:
			return JobInfo{}, fmt.Errorf("%w: %s", ErrJobNotFound, id)
		case at == jobElsewhere:
			return JobInfo{}, &ForeignKeyError{Key: q.key("x", id[:]), Reason: "job index entry points at no record of this job"}
		}
		m, err := q.jobRecord(tr, id, key, "")
		if err != nil {
			return JobInfo{}, err
		}
		value, err := v.Get()
		if err != nil {
			return JobInfo{}, err
		}
		if value == nil {
			return JobInfo{}, &ForeignKeyError{Key: vk, Reason: "job value missing"}
		}
		return m.toInfo(at == jobDead, value), nil
	})
}

// Cancel removes the job id from the queue for good, whether it is due,
// delayed or leased: its record, value and index entry, its unique key
// (so that a later Add may take it; cleared only while it names this job)
// and its counts in Stats. A cancelled job is never leased again. Cancel
// fails with ErrJobNotFound when no job in the queue has that ID: never
// added, acked or cancelled already, or dead (a dead job does not run
// again unless requeued: DeleteDead removes it).
//
// A leased job's holder loses its lease: its Ack, Nack, Extend and
// Release fail with ErrLeaseLost, so effects written in the transaction
// of its Ack do not commit. The processing under way is not interrupted
// by Cancel itself: a pool (Run) that runs the job finds the lease lost
// at its next heartbeat extension (within PoolOptions.ExtendEvery), which
// ends the handler's context, and reports the job's Outcome as LeaseLost
// (a handler that has called Task.Ack keeps its context, and its
// Task.Ack fails with ErrLeaseLost).
//
// Conflicts: normal reads of the job's index entry and record, so it
// conflicts with a Lease, Ack, Nack, Extend, Release or Cancel of the
// same job only: of two that race, one commit fails with a conflict and
// its retry sees the other's result (a Cancel after an Ack fails with
// ErrJobNotFound, an Ack after a Cancel with ErrLeaseLost, a Lease after
// a Cancel takes other jobs). The unique key is cleared by an atomic
// compare-and-clear, which reads nothing: an Add of the same unique key
// that read it before the Cancel committed retries and finds it free.
// Cost: two round trips (the journal and the index entry together, then
// the record), then three clears, two counter adds (three for a leased
// job), a compare-and-clear (two with a unique key) and the journal
// record. It does not bump the signal key that wakes LeaseWait: a removal
// makes no job due sooner (a LeaseWait sleeping until the cancelled job's
// vesting time wakes then, finds nothing new and sleeps on).
//
// Exactly once: under commit_unknown_result the retry finds the journal
// record and returns nil, not ErrJobNotFound. Inside your own transaction
// pass WithOpID (see the package documentation, "Exactly once"); a
// Cancel that failed with an *UnknownResultError is settled by calling it
// again with WithOpID(its ID).
func (q *JobQueue) Cancel(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	return q.jobOp(ctx, t, "cancel", id, opts, q.findQueued, func(tr kv.Transaction, m jobMeta, key []byte) error {
		tr.Clear(key)
		tr.Clear(q.key("x", id[:]))
		tr.Clear(q.key("v", id[:]))
		if len(m.unique) > 0 {
			// Cleared if it holds this job's ID (FDB's doCompareAndClear,
			// fdbclient/include/fdbclient/Atomic.h), as AddBatch and
			// Requeue leave it; no read, no read conflict.
			tr.CompareAndClear(q.key("u", m.unique), id[:])
		}
		q.unbucket(tr, m)
		if m.lease != nil {
			tr.Add(q.leased, minusOne)
		}
		tr.Add(q.total, minusOne)
		return nil
	})
}

// findQueued reads, with normal reads, the job id in the queue (leased or
// not), whose index read x is already issued; ErrJobNotFound when it is
// not in the queue.
func (q *JobQueue) findQueued(tr kv.Transaction, id JobID, x kv.FutureValue) (jobMeta, []byte, error) {
	const notQueued = " is not in the queue"
	key, at, err := q.jobKey(x, id)
	switch {
	case err != nil:
		return jobMeta{}, nil, err
	case at == jobDead:
		return jobMeta{}, nil, fmt.Errorf("%w: %s is dead (DeleteDead removes it)", ErrJobNotFound, id)
	case at != jobQueued:
		return jobMeta{}, nil, fmt.Errorf("%w: %s%s", ErrJobNotFound, id, notQueued)
	}
	m, err := q.jobRecord(tr, id, key, notQueued)
	return m, key, err
}
