package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// lookup finds the job that l leased, as of tr, with a normal read; it
// fails with ErrLeaseLost when the job no longer carries l's lease.
// l.key, the key as of the lease (or its last Extend), answers in one read;
// a lease extended through another copy of it takes two more, through the
// ID index.
func (q *JobQueue) lookup(tr kv.Transaction, l Lease, at kv.FutureValue) (jobMeta, []byte, error) {
	key := l.key
	rec, err := at.Get()
	if err != nil {
		return jobMeta{}, nil, err
	}
	if rec == nil {
		if key, err = tr.Get(q.key("x", l.JobID[:])).Get(); err != nil {
			return jobMeta{}, nil, err
		}
		if key == nil || !bytes.HasPrefix(key, q.items.Begin[:len(q.items.Begin)-1]) {
			return jobMeta{}, nil, fmt.Errorf("%w: job %s is gone", ErrLeaseLost, l.JobID)
		}
		if rec, err = tr.Get(key).Get(); err != nil {
			return jobMeta{}, nil, err
		}
		if rec == nil {
			return jobMeta{}, nil, fmt.Errorf("%w: job %s is gone", ErrLeaseLost, l.JobID)
		}
	}
	m, err := decodeMeta(key, rec, l.JobID)
	if err != nil {
		return m, nil, err
	}
	if m.deadAt != 0 || !bytes.Equal(m.lease, l.ID[:]) {
		return m, nil, fmt.Errorf("%w: job %s was leased again (attempt %d)", ErrLeaseLost, l.JobID, m.attempts)
	}
	return m, key, nil
}

func (q *JobQueue) leaseKey(l Lease) []byte {
	if l.key != nil {
		return l.key
	}
	m := jobMeta{id: l.JobID, vest: l.Deadline.UnixMicro(), prio: l.Priority}
	return m.queueKey(q)
}

// Ack completes the leased job: it deletes the job, its value and its
// unique key. Call it inside the transaction that writes the job's
// effects (with WithOpID, made once per job) and the effects and the ack
// commit together; see ExampleJobQueue_Ack. The ack takes effect exactly
// once; the effects do too if they are idempotent writes (a Set, a Clear).
// After commit_unknown_result your retry loop runs your function again and
// Ack returns nil from its record, so an effect that is not idempotent (an
// atomic add) would apply twice: guard it with a read of a key the first
// attempt wrote.
//
// It fails with ErrLeaseLost if the job no longer carries this lease: the
// lease expired and another consumer leased the job (or it was acked,
// nacked, released, dead-lettered or cancelled), so nothing is written and a transaction that
// returns the error commits none of the job's effects. A lease whose
// deadline passed but whose job nobody leased again is still acked.
//
// Conflicts: a normal read of the job's key, so it conflicts with a
// concurrent Lease, Ack, Nack, Extend, Release or Cancel of the same job only. Cost: one round
// trip (two more if the lease was extended through another copy of the
// Lease), then three clears (four with a unique key), three counter adds
// and a compare-and-clear, and the journal record; under
// commit_unknown_result the retry finds the record and succeeds.
func (q *JobQueue) Ack(ctx context.Context, t kv.Transactor, l Lease, opts ...OpOption) error {
	_, err := q.heldOp(ctx, t, "ack", l, opts, func(tr kv.Transaction, m jobMeta, key []byte) ([]byte, error) {
		tr.Clear(key)
		tr.Clear(q.key("x", m.id[:]))
		tr.Clear(q.key("v", m.id[:]))
		if len(m.unique) > 0 {
			tr.Clear(q.key("u", m.unique))
		}
		q.unbucket(tr, m)
		tr.Add(q.leased, minusOne)
		tr.Add(q.total, minusOne)
		return nil, nil
	})
	return err
}

// heldOp runs apply on the job that l leased, as Ack, Nack and Release
// do: it checks the journal, finds the job (ErrLeaseLost if it no longer
// carries l's lease), calls apply with its metadata and key, and records
// what apply returns (nil: an empty record). It returns that record, or,
// under commit_unknown_result, the committed attempt's, found in the
// journal without calling apply again.
func (q *JobQueue) heldOp(ctx context.Context, t kv.Transactor, name string, l Lease, opts []OpOption,
	apply func(tr kv.Transaction, m jobMeta, key []byte) ([]byte, error)) ([]byte, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	t = q.journal.track.observe(name, t)
	o := q.journal.begin(t, opts)
	var gate gateRead
	out, err := kv.Transact(ctx, t, func(tr kv.Transaction) ([]byte, error) {
		o.gate = q.journal.gate.issueInto(&gate, tr, false, o.owned) // config.go
		rec, err := o.check(tr)
		if err != nil {
			return nil, err
		}
		at := tr.Get(q.leaseKey(l))
		if prev, done, err := o.applied(rec); err != nil || done {
			if len(prev) > 0 {
				return prev[0], err
			}
			return nil, err
		}
		m, key, err := q.lookup(tr, l, at)
		if err != nil {
			return nil, err
		}
		r, err := apply(tr, m, key)
		if err != nil {
			return nil, err
		}
		if r == nil {
			o.record(tr)
		} else {
			o.record(tr, r)
		}
		return r, nil
	})
	o.end(err)
	return out, o.unknownResult(err)
}

// NackOptions says what to do with a job that failed.
type NackOptions struct {
	// Delay before the job is due again. 0 takes the queue's exponential
	// backoff with jitter (JobQueueConfig.RetryBase, RetryMax); a negative
	// Delay makes it due at once.
	Delay time.Duration
	// Reason is kept with the job (cut to MaxReasonSize bytes) and shown
	// by later leases and the dead-letter list; an empty Reason keeps the
	// one an earlier Nack gave.
	Reason string
	// NoRetry moves the job to the dead-letter list now, whatever attempts
	// it has left, as a nack of its last attempt does (asynq's SkipRetry,
	// river's JobCancel): for a job that can never succeed, such as one
	// whose payload is malformed. Delay is then unused.
	NoRetry bool
}

// Nack gives the leased job back after a failed attempt: it is due again
// after no.Delay, or, if that was its last attempt or no.NoRetry is set,
// it moves to the dead-letter list (dead reports which). It fails with
// ErrLeaseLost as Ack does. Conflicts, cost and exactly-once behaviour are
// Ack's, except that instead of Ack's clears and counter changes it writes
// a clear, two writes, three counter adds, a compare-and-clear and a bump
// of the signal key (when the job goes to the dead-letter list: four
// counter adds, no bump, and a clear of its unique key if any). Under
// commit_unknown_result the retry finds the record and returns the first
// attempt's dead, so a job is dead-lettered once, and a NoRetry nack
// whose commit landed returns true.
func (q *JobQueue) Nack(ctx context.Context, t kv.Transactor, l Lease, no NackOptions, opts ...OpOption) (dead bool, err error) {
	rec, err := q.heldOp(ctx, t, "nack", l, opts, func(tr kv.Transaction, m jobMeta, key []byte) ([]byte, error) {
		now := q.cfg.Clock.Now()
		if no.NoRetry || m.attempts >= m.maxAttempts {
			q.bury(tr, m, key, now, no.Reason)
			return []byte{1}, nil
		}
		delay := no.Delay
		if delay == 0 {
			delay = q.Backoff(m.attempts)
		}
		tr.Clear(key)
		q.unbucket(tr, m)
		tr.Add(q.leased, minusOne)
		m.lease = nil
		m.vest = vestMicros(now.Add(max(delay, 0)), now)
		if no.Reason != "" { // as bury: an empty Reason keeps the last one given
			m.reason = cutReason(no.Reason)
		}
		q.put(tr, m)
		q.bucket(tr, "p", m.vest, 1)
		tr.Add(q.signal, one)
		return []byte{0}, nil
	})
	return bytes.Equal(rec, []byte{1}), err
}

// Backoff returns the default delay after a job's attempt-th failed
// attempt: RetryBase·2^(attempt−1), at most RetryMax, less a random part of
// up to a half (jitter, so that jobs that failed together do not come back
// together).
func (q *JobQueue) Backoff(attempt int) time.Duration {
	if q.usable() != nil {
		return 0
	}
	d := q.cfg.RetryBase
	for i := 1; i < attempt && d < q.cfg.RetryMax; i++ {
		if d > q.cfg.RetryMax/2 { // doubling would pass RetryMax, or overflow
			d = q.cfg.RetryMax
			break
		}
		d *= 2
	}
	d = min(d, q.cfg.RetryMax)
	if d <= 1 {
		return d
	}
	return d - time.Duration(mrand.Int64N(int64(d/2)+1))
}

// Extend moves the lease's deadline to now + d (0: the queue's
// LeaseDuration) and returns the lease with its new deadline; use the
// returned Lease from then on. On error it returns l, which still works
// for Ack, Nack, Release and Extend even if the extension committed (at
// the cost of the round trips a lease extended through another copy
// costs). It fails with ErrLeaseLost as Ack does, and a lease whose
// deadline passed but whose job nobody leased again is still extended.
//
// Conflicts: those of Ack. Cost: one round trip and a commit of a clear, two
// writes, two counter adds and a compare-and-clear, and a bump of the signal
// key when the deadline moves earlier (the job is due sooner). It needs no
// journal: retried after commit_unknown_result, it finds the job still
// under its lease and extends it again from the new now, or, if the job
// was cancelled in between, fails with ErrLeaseLost though the earlier
// attempt's extension may have committed (the job is gone either way).
// With a MeterProvider it is counted in fdbqueue.lease.extensions by
// outcome (WithMeterProvider).
func (q *JobQueue) Extend(ctx context.Context, t kv.Transactor, l Lease, d time.Duration) (Lease, error) {
	if err := q.usable(); err != nil {
		return l, err
	}
	if err := checkTransactor(t); err != nil {
		return l, err
	}
	if d == 0 {
		d = q.cfg.LeaseDuration
	}
	if d < time.Millisecond {
		return l, fmt.Errorf("%w: lease duration %v, want at least 1ms", ErrInvalidArgument, d)
	}
	out, err := q.extend(ctx, t, l, d)
	q.journal.track.obs.leaseExtended(err)
	return out, err
}

// extend is Extend once its arguments are checked (d at least 1ms),
// without counting it in fdbqueue.lease.extensions: a pool's heartbeat
// counts its own (heartbeat).
func (q *JobQueue) extend(ctx context.Context, t kv.Transactor, l Lease, d time.Duration) (Lease, error) {
	t = q.journal.track.observe("extend", t) // its conflicts and retries
	_, own := t.(kv.Database)
	var gate gateRead
	out, err := kv.Transact(ctx, t, func(tr kv.Transaction) (Lease, error) {
		g := q.journal.gate.issueInto(&gate, tr, false, own) // config.go
		at := tr.Get(q.leaseKey(l))
		if err := g.settle(); err != nil { // before any write
			return l, err
		}
		m, key, err := q.lookup(tr, l, at)
		if err != nil {
			return l, err
		}
		tr.Clear(key)
		q.bucket(tr, "e", m.vest, -1)
		old := m.vest
		m.vest = q.cfg.Clock.Now().Add(d).UnixMicro()
		q.put(tr, m)
		q.bucket(tr, "e", m.vest, 1)
		if m.vest < old {
			tr.Add(q.signal, one) // due sooner: wake LeaseWait sleeping until the old deadline
		}
		out := l
		out.Deadline = time.UnixMicro(m.vest)
		out.key = m.queueKey(q)
		return out, nil
	})
	if err != nil {
		return l, err
	}
	return out, nil
}

// Release gives the leased job back without counting the attempt: the job is
// due again after delay (0 or less makes it due at once: unlike Nack's, a 0
// delay takes no backoff), its attempt count goes back to what it was before
// this lease, and its Reason (the last Nack's) is kept. Use it for a job
// that was interrupted rather than failed: a worker shutting down
// (JobQueue.Run releases the jobs it abandons at shutdown), a job that must
// wait for something (river's JobSnooze, asynq's requeue on shutdown).
// Release does not count toward MaxAttempts, so a job that is released again
// and again is never dead-lettered: bound snoozes in the handler (say by a
// count in your own keys) if a job may never make progress.
//
// It fails with ErrLeaseLost as Ack does: the lease expired and another
// consumer leased the job, or the job was acked, nacked, released,
// dead-lettered or cancelled since; nothing is written then. A lease whose deadline
// passed but whose job nobody leased again is still released.
//
// Conflicts, cost and exactly-once behaviour are Nack's: a normal read of
// the job's key (it conflicts with a Lease, Ack, Nack, Extend, Release or
// Cancel of the same job only), one round trip (two more if the lease was extended
// through another copy of the Lease), then a clear, two writes, three
// counter adds, a compare-and-clear, a bump of the signal key (so a
// LeaseWait sleeping on the queue wakes) and the journal record. Under
// commit_unknown_result the retry finds the record and returns nil, so the
// attempt is given back once; given your own Transaction, pass WithOpID as
// for Ack.
func (q *JobQueue) Release(ctx context.Context, t kv.Transactor, l Lease, delay time.Duration, opts ...OpOption) error {
	_, err := q.heldOp(ctx, t, "release", l, opts, func(tr kv.Transaction, m jobMeta, key []byte) ([]byte, error) {
		now := q.cfg.Clock.Now()
		tr.Clear(key)
		q.unbucket(tr, m)
		tr.Add(q.leased, minusOne)
		m.lease = nil
		if m.attempts > 0 { // a leased job has at least 1: the lease's own
			m.attempts--
		}
		m.vest = vestMicros(now.Add(max(delay, 0)), now)
		q.put(tr, m)
		q.bucket(tr, "p", m.vest, 1)
		tr.Add(q.signal, one)
		return nil, nil
	})
	return err
}
