package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// JobStats are a JobQueue's counts as of one read version and the
// clock's now.
//
// Queued, Dead and the leased jobs (Leased + ExpiredLeases) are exact:
// they are counters kept with atomic adds by every operation, and every
// job is in exactly one of them. Whether a job is due or delayed, and
// whether a lease is live or expired, changes with time without any write,
// so the queue also counts jobs per vesting-time bucket (JobQueueConfig.
// StatsResolution wide) and Stats sums the buckets after now: Delayed,
// Leased and ExpiredLeases are exact up to one bucket (the jobs of the
// bucket that holds now count as due, and its leases as expired).
type JobStats struct {
	Queued        int64 // jobs not leased (due or delayed)
	Due           int64 // jobs that Lease can take now: queued and due, plus expired leases
	Delayed       int64 // queued jobs not yet due
	Leased        int64 // live leases
	ExpiredLeases int64 // leases past their deadline whose job nobody leased again (counted in Due)
	Dead          int64 // jobs in the dead-letter list
	// OldestDue is how long the first due job has been due (0 if none).
	OldestDue time.Duration
}

// Stats returns the queue's counts without reading its jobs: three counter
// reads, two range reads of the bucket counters after now (one key per
// bucket that holds jobs) and a read of the first job's key, all snapshot
// reads issued together: one round trip. Its only read conflict, in a
// caller's transaction, is the stored configuration check's on the
// metadata version (as Queue.Depth's), which only a change of a record
// moves.
func (q *JobQueue) Stats(ctx context.Context, t kv.ReadTransactor) (JobStats, error) {
	if err := q.usable(); err != nil {
		return JobStats{}, err
	}
	if err := checkTransactor(t); err != nil {
		return JobStats{}, err
	}
	return kv.ReadTransact(ctx, q.journal.gate.reads(t), func(tr kv.ReadTransaction) (JobStats, error) { // config.go
		s := tr.Snapshot()
		now := q.cfg.Clock.Now()
		cur := q.bucketOf(now.UnixMicro())
		total, leased, dead := s.Get(q.total), s.Get(q.leased), s.Get(q.deadN)
		future := func(series string) kv.RangeResult {
			all, _ := q.sub.Range("c", series)
			return s.GetRange(kv.KeyRange{Begin: q.key("c", series, cur+1), End: all.End}, kv.RangeOptions{Mode: kv.StreamingModeWantAll})
		}
		delayed, live := future("p"), future("e")
		first := s.GetRange(q.items, kv.RangeOptions{Limit: 1})
		var st JobStats
		var n [3]int64
		for i, f := range []kv.FutureValue{total, leased, dead} {
			v, err := f.Get()
			if err != nil {
				return st, err
			}
			n[i] = counter(v)
		}
		var sums [2]int64
		for i, r := range []kv.RangeResult{delayed, live} {
			it := r.Iterator()
			for it.Next() {
				sums[i] += counter(it.KeyValue().Value)
			}
			if err := it.Err(); err != nil {
				return st, err
			}
		}
		st.Queued, st.Dead = n[0]-n[1], n[2]
		st.Delayed, st.Leased = sums[0], sums[1]
		st.ExpiredLeases = n[1] - st.Leased
		st.Due = st.Queued - st.Delayed + st.ExpiredLeases
		fk, err := firstKey(first)
		if err != nil {
			return st, err
		}
		if fk != nil {
			vest, _, err := q.parseItemKey(fk)
			if err != nil {
				return st, err
			}
			if age := now.Sub(time.UnixMicro(vest)); age > 0 {
				st.OldestDue = age
			}
		}
		return st, nil
	})
}

func counter(v []byte) int64 {
	if len(v) != 8 {
		var b [8]byte
		copy(b[:], v)
		return int64(binary.LittleEndian.Uint64(b[:]))
	}
	return int64(binary.LittleEndian.Uint64(v))
}

// DeadJob is a job in the dead-letter list.
type DeadJob struct {
	ID          JobID  // the job's ID, as Add returned it
	Value       []byte // the job's payload
	Attempts    int    // the attempts it used
	MaxAttempts int    // the job's maximum number of attempts
	Priority    int32  // the job's priority
	UniqueKey   string // the job's unique key, if any
	// Reason is why the job died: the last Nack's reason, or, when that
	// Nack gave none, the reason it had before (an earlier Nack's); a job
	// whose last lease expired died with "lease expired on the last
	// attempt".
	Reason string
	Added  time.Time // when it was added or last requeued
	Died   time.Time // when it died, to the microsecond
	// Cursor is where the next ListDead call starts to list the jobs
	// after this one.
	Cursor []byte
}

// DeadCursorAt returns a cursor from which ListDead lists the dead jobs
// that died at or after t (Died, recorded to the microsecond), without
// reading those that died before: the dead-letter list is kept in order
// of death, by the clocks of the clients that moved the jobs there. It
// reads nothing.
func (q *JobQueue) DeadCursorAt(t time.Time) []byte {
	if q.usable() != nil {
		return nil
	}
	us := t.UnixMicro() // rounded down
	if t.After(time.UnixMicro(us)) && us < math.MaxInt64 {
		us++ // t is within a microsecond: the next one is the first at or after it
	}
	// ("d", us) sorts before every ("d", us, id): ListDead starts after it.
	return q.key("d", us)
}

// ListDead returns up to limit dead jobs, oldest death first, starting
// after cursor (nil: from the start; else a DeadJob's Cursor, or one of
// DeadCursorAt); a limit
// below 1 fails with ErrInvalidArgument (page with Cursor to read them
// all). Cost: one range read of the dead list and a point read of each
// value, in two round trips; normal reads (a read-write transaction that
// lists and then requeues conflicts with a concurrent requeue). The values
// are read whole, so a page of large jobs is a large read: size limit so
// that a page is read well within FoundationDB's 5-second transaction
// window.
func (q *JobQueue) ListDead(ctx context.Context, t kv.ReadTransactor, cursor []byte, limit int) ([]DeadJob, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d, want at least 1", ErrInvalidArgument, limit)
	}
	r := q.dead
	if cursor != nil {
		if !bytes.HasPrefix(cursor, r.Begin[:len(r.Begin)-1]) {
			return nil, fmt.Errorf("%w: cursor is not a dead-letter cursor of this queue", ErrInvalidArgument)
		}
		r.Begin = append(bytes.Clone(cursor), 0x00)
	}
	return kv.ReadTransact(ctx, q.journal.gate.reads(t), func(tr kv.ReadTransaction) ([]DeadJob, error) { // config.go
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: limit}).GetSlice()
		if err != nil {
			return nil, err
		}
		out := make([]DeadJob, 0, len(kvs))
		vals := make([]kv.FutureValue, 0, len(kvs))
		for _, p := range kvs {
			id, err := q.parseDeadKey(p.Key)
			if err != nil {
				return nil, err
			}
			m, err := decodeMeta(p.Key, p.Value, id)
			if err != nil {
				return nil, err
			}
			out = append(out, m.toDead(p.Key))
			vals = append(vals, tr.Get(q.key("v", id[:])))
		}
		for i, f := range vals {
			if out[i].Value, err = f.Get(); err != nil {
				return nil, err
			}
		}
		return out, nil
	})
}

func (m jobMeta) toDead(key []byte) DeadJob {
	return DeadJob{ID: m.id, Attempts: m.attempts, MaxAttempts: m.maxAttempts, Priority: m.prio,
		UniqueKey: string(m.unique), Reason: string(m.reason), Added: time.UnixMicro(m.added),
		Died: time.UnixMicro(m.deadAt), Cursor: bytes.Clone(key)}
}

func (q *JobQueue) parseDeadKey(key []byte) (JobID, error) {
	var id JobID
	t, err := q.sub.Unpack(key)
	if err == nil && len(t) == 3 {
		_, ok1 := t[1].(int64)
		b, ok2 := t[2].([]byte)
		if ok1 && ok2 && len(b) == len(id) {
			copy(id[:], b)
			return id, nil
		}
	}
	return id, &ForeignKeyError{Key: bytes.Clone(key), Reason: "want (\"d\", death time, 16-byte job ID)"}
}

// jobAt is where the ID index says a job's record is.
type jobAt int

const (
	jobNowhere   jobAt = iota // no index entry: no such job
	jobQueued                 // in the queue: ("q", ...), leased or not
	jobDead                   // in the dead-letter list: ("d", ...)
	jobElsewhere              // an entry the queue did not write
)

// jobKey returns the record key that the ID index read x of job id
// holds, and where that key is: a key that is not a record key of job id
// (another job's, or none the queue writes) is elsewhere, so that no
// caller takes another job's record for id's.
func (q *JobQueue) jobKey(x kv.FutureValue, id JobID) ([]byte, jobAt, error) {
	key, err := x.Get()
	switch {
	case err != nil:
		return nil, jobNowhere, err
	case key == nil:
		return nil, jobNowhere, nil
	case bytes.HasPrefix(key, q.dead.Begin[:len(q.dead.Begin)-1]):
		if named, err := q.parseDeadKey(key); err == nil && named == id {
			return key, jobDead, nil
		}
	case bytes.HasPrefix(key, q.items.Begin[:len(q.items.Begin)-1]):
		if _, named, err := q.parseItemKey(key); err == nil && named == id {
			return key, jobQueued, nil
		}
	}
	return key, jobElsewhere, nil
}

// jobRecord reads (a normal read, unless tr is a snapshot) and decodes
// the record of job id at key, the key its index holds. A record missing
// is a job that is not there: ErrJobNotFound, with notFound's words.
func (q *JobQueue) jobRecord(tr kv.ReadTransaction, id JobID, key []byte, notFound string) (jobMeta, error) {
	rec, err := tr.Get(key).Get()
	if err != nil {
		return jobMeta{}, err
	}
	if rec == nil {
		return jobMeta{}, fmt.Errorf("%w: %s%s", ErrJobNotFound, id, notFound)
	}
	return decodeMeta(key, rec, id)
}

// findDead reads, with normal reads, the dead job id, whose index read
// x is already issued; ErrJobNotFound when it is not dead.
func (q *JobQueue) findDead(tr kv.Transaction, id JobID, x kv.FutureValue) (jobMeta, []byte, error) {
	const notDead = " is not a dead job"
	key, at, err := q.jobKey(x, id)
	if err != nil {
		return jobMeta{}, nil, err
	}
	if at != jobDead {
		return jobMeta{}, nil, fmt.Errorf("%w: %s%s", ErrJobNotFound, id, notDead)
	}
	m, err := q.jobRecord(tr, id, key, notDead)
	return m, key, err
}

// Requeue puts the dead job id back in the queue, due at once, with its
// attempts reset to zero; its value is untouched. It fails with
// ErrJobNotFound if no dead job has that ID, and with ErrUniqueKeyHeld if
// its unique key is held by another job in the queue (the job stays dead).
// Conflicts: normal reads of the job's index and record (and unique key),
// so it conflicts only with another Requeue or DeleteDead of the same job
// and with adds of the same unique key. Cost: two round trips (three with
// a unique key), then two writes (three with a unique key, which it
// takes again), a clear and four counter adds, and the journal record. Under
// commit_unknown_result the retry finds the journal record and returns
// nil.
func (q *JobQueue) Requeue(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	return q.jobOp(ctx, t, "requeue", id, opts, q.findDead, func(tr kv.Transaction, m jobMeta, key []byte) error {
		if len(m.unique) > 0 {
			uk := q.key("u", m.unique)
			owner, err := tr.Get(uk).Get()
			if err != nil {
				return err
			}
			if owner != nil && !bytes.Equal(owner, id[:]) {
				return fmt.Errorf("%w: %q", ErrUniqueKeyHeld, m.unique)
			}
			tr.Set(uk, id[:])
		}
		now := q.cfg.Clock.Now()
		tr.Clear(key)
		m.deadAt, m.attempts, m.lease = 0, 0, nil
		m.vest, m.added = now.UnixMicro(), now.UnixMicro()
		q.put(tr, m)
		q.bucket(tr, "p", m.vest, 1)
		tr.Add(q.total, one)
		tr.Add(q.deadN, minusOne)
		tr.Add(q.signal, one)
		return nil
	})
}

// DeleteDead removes the dead job id and its value for good. It fails
// with ErrJobNotFound if no dead job has that ID. Conflicts and cost are
// Requeue's (three clears, one counter add); exactly once with the
// journal.
func (q *JobQueue) DeleteDead(ctx context.Context, t kv.Transactor, id JobID, opts ...OpOption) error {
	return q.jobOp(ctx, t, "delete_dead", id, opts, q.findDead, func(tr kv.Transaction, _ jobMeta, key []byte) error {
		tr.Clear(key)
		tr.Clear(q.key("x", id[:]))
		tr.Clear(q.key("v", id[:]))
		tr.Add(q.deadN, minusOne)
		return nil
	})
}

// jobOp runs one journaled transaction on the job id, shared by Requeue,
// DeleteDead (find: findDead) and Cancel (findQueued): it checks the
// journal, reads the job's index entry with it, finds the job with find
// (ErrJobNotFound if it is not where find looks), calls apply with its
// metadata and record key, and records the op in the journal if apply
// succeeds. Under commit_unknown_result the retry finds the journal
// record and returns nil without calling apply again.
func (q *JobQueue) jobOp(ctx context.Context, t kv.Transactor, name string, id JobID, opts []OpOption,
	find func(tr kv.Transaction, id JobID, x kv.FutureValue) (jobMeta, []byte, error),
	apply func(tr kv.Transaction, m jobMeta, key []byte) error) error {
	if err := q.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	t = q.journal.track.observe(name, t)
	o := q.journal.begin(t, opts)
	var gate gateRead
	err := t.Transact(ctx, func(tr kv.Transaction) error {
		o.gate = q.journal.gate.issueInto(&gate, tr, false, o.owned) // config.go
		rec, err := o.check(tr)
		if err != nil {
			return err
		}
		x := tr.Get(q.key("x", id[:]))
		if _, done, err := o.applied(rec); err != nil || done {
			return err
		}
		m, key, err := find(tr, id, x)
		if err != nil {
			return err
		}
		if err := apply(tr, m, key); err != nil {
			return err
		}
		o.record(tr)
		return nil
	})
	o.end(err)
	return o.unknownResult(err)
}
