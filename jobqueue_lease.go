package fdbqueue

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Lease is a job leased to one consumer until Deadline. Ack, Nack and
// Extend take it; they fail with ErrLeaseLost once another consumer has
// leased the job again.
type Lease struct {
	JobID JobID
	// ID changes at every lease of the job.
	ID [16]byte
	// Value is the job's payload.
	Value []byte
	// Attempt is the number of this lease: 1 for the first.
	Attempt     int
	MaxAttempts int
	// Deadline is when the job becomes due again unless it is acked,
	// nacked or extended.
	Deadline  time.Time
	Priority  int32
	UniqueKey string
	// Reason is the reason given by the last Nack of the job, if any.
	Reason string

	key []byte // the job's queue key while this lease holds it
}

// Lease leases up to n due jobs for d (0: the queue's LeaseDuration) and
// returns them in queue order; ErrEmpty when no job is due.
//
// Which jobs: the due jobs (vesting time at or before the clock's now) in
// key order — earlier vesting time first, then higher priority — of which
// it reads the first K+n−1 (K = JobQueueConfig.Choice) and takes n at
// random (K = 1: the first n). Each job taken gets a new lease ID, its
// attempt count goes up by one, and its vesting time becomes now + d, so
// no one else sees it as due until then. A job whose previous lease was
// its last attempt (it expired: its consumer crashed or stalled) is moved
// to the dead-letter list instead, and another candidate is taken.
//
// Conflicts: the candidates are read with a snapshot read, and a read
// conflict is added on the keys of the jobs taken only, so a Lease
// conflicts only with another Lease, Ack, Nack or Extend of the same job
// (with K = 1, concurrent consumers all want the first job and conflict).
// Cost: two round trips (the candidates and the journal together, then the
// values of the jobs taken) and one commit of, per job, a clear, two
// small writes and four atomic counter adds, plus the journal record.
//
// Exactly once: a retry after commit_unknown_result finds the journal
// record and returns the same leases. Given a Transaction, the leases take
// effect with the caller's commit. If Lease fails with an error for which
// kv.MaybeCommitted is true, jobs may have been leased: they come back
// when their leases expire (with one attempt counted), or call Lease again
// with the same WithOpID, within the journal retention, to get them.
func (q *JobQueue) Lease(ctx context.Context, t kv.Transactor, n int, d time.Duration, opts ...OpOption) ([]Lease, error) {
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	r, err := q.leaseOp(ctx, t, n, d, false, opts)
	if err == nil && len(r.leases) == 0 {
		err = ErrEmpty
	}
	return r.leases, err
}

type leaseResult struct {
	leases   []Lease
	earliest int64    // the first vesting time in the queue, when nothing was due (0: none)
	watch    kv.Watch // on the signal key, when asked for and nothing was due
}

func (q *JobQueue) leaseOp(ctx context.Context, t kv.Transactor, n int, d time.Duration, wait bool, opts []OpOption) (leaseResult, error) {
	if n < 1 || n > MaxLeaseBatch {
		return leaseResult{}, fmt.Errorf("%w: lease batch %d, want 1 to %d", ErrInvalidArgument, n, MaxLeaseBatch)
	}
	if d == 0 {
		d = q.cfg.LeaseDuration
	}
	if d < time.Millisecond {
		return leaseResult{}, fmt.Errorf("%w: lease duration %v, want at least 1ms", ErrInvalidArgument, d)
	}
	o := q.journal.begin(t, opts)
	var watch kv.Watch
	var mine []string // keys this call is taking: see picking
	var err error
	defer func() { q.picking.release(mine, err == nil) }()
	var res leaseResult
	res, err = kv.Transact(ctx, t, func(tr kv.Transaction) (leaseResult, error) {
		if watch != nil { // an earlier attempt's: its transaction was reset
			watch.Cancel()
			watch = nil
		}
		q.picking.release(mine, false) // an earlier attempt's, which failed
		mine = mine[:0]
		rec, err := o.check(tr)
		if err != nil {
			return leaseResult{}, err
		}
		now := q.cfg.Clock.Now()
		dueEnd := q.key("q", now.UnixMicro()+1)
		cand := tr.Snapshot().GetRange(kv.KeyRange{Begin: q.items.Begin, End: dueEnd},
			kv.RangeOptions{Limit: q.cfg.Choice + n - 1, Mode: kv.StreamingModeExact})
		var first kv.RangeResult
		if wait {
			first = tr.Snapshot().GetRange(q.items, kv.RangeOptions{Limit: 1})
		}
		if prev, done, err := o.applied(rec); err != nil {
			return leaseResult{}, err
		} else if done {
			ls, err := q.replayLeases(tr, prev)
			return leaseResult{leases: ls}, err
		}
		kvs, err := cand.GetSlice()
		if err != nil {
			return leaseResult{}, err
		}
		if len(kvs) == 0 {
			var r leaseResult
			if wait {
				if fk, err := firstKey(first); err != nil {
					return r, err
				} else if fk != nil {
					if r.earliest, _, err = q.parseItemKey(fk); err != nil {
						return r, err
					}
				}
				watch = tr.Watch(q.signal)
				r.watch = watch
			}
			return r, nil // nothing written: a read-only commit
		}
		leases, err := q.take(tr, kvs, n, now, d, &mine)
		if err != nil {
			return leaseResult{}, err
		}
		records := make([][]byte, len(leases))
		for i, l := range leases {
			records[i], _ = tuple.Tuple{l.JobID[:], l.ID[:], l.Deadline.UnixMicro(), int64(l.Priority)}.Pack()
		}
		o.record(tr, records...)
		return leaseResult{leases: leases}, nil
	})
	if err != nil && watch != nil {
		watch.Cancel()
	}
	if err == nil && len(res.leases) == 0 {
		o.end(ErrEmpty) // nothing recorded: hand the cleanups it took back
	} else {
		o.end(err)
	}
	return res, err
}

// take leases up to n of the candidates kvs in tr, and adds the keys it
// takes to *mine.
func (q *JobQueue) take(tr kv.Transaction, kvs []kv.KeyValue, n int, now time.Time, d time.Duration, mine *[]string) ([]Lease, error) {
	order := make([]int, len(kvs))
	for i := range order {
		order[i] = i
	}
	if q.cfg.Choice > 1 {
		mrand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		// Candidates that other calls on this JobQueue value are taking
		// right now go last: those would conflict.
		busy := q.picking.busy(kvs)
		sort.SliceStable(order, func(a, b int) bool { return !busy[order[a]] && busy[order[b]] })
	}
	type taken struct {
		at    int
		lease Lease
		value kv.FutureValue
	}
	var got []taken
	var firstErr error
	for _, i := range order {
		if len(got) == n {
			break
		}
		p := kvs[i]
		_, id, err := q.parseItemKey(p.Key)
		var m jobMeta
		if err == nil {
			m, err = decodeMeta(p.Key, p.Value, id)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue // leave a foreign key alone; take the others
		}
		// The snapshot read plus this conflict range is a normal read of
		// this one key. It must come before the writes: FDB leaves keys the
		// transaction wrote out of explicit read conflict ranges.
		if err := tr.AddReadConflictKey(p.Key); err != nil {
			return nil, err
		}
		q.picking.add(p.Key)
		*mine = append(*mine, string(p.Key))
		if m.attempts >= m.maxAttempts {
			q.bury(tr, m, p.Key, now, "lease expired on the last attempt")
			continue
		}
		tr.Clear(p.Key)
		q.unbucket(tr, m)
		if m.lease == nil {
			tr.Add(q.leased, one)
		}
		var lid [16]byte
		_, _ = rand.Read(lid[:])
		m.lease = lid[:]
		m.attempts++
		m.vest = now.Add(d).UnixMicro()
		q.put(tr, m)
		q.bucket(tr, "e", m.vest, 1)
		l := m.toLease()
		l.key = m.queueKey(q)
		got = append(got, taken{at: i, lease: l, value: tr.Snapshot().Get(q.key("v", m.id[:]))})
	}
	if len(got) == 0 && firstErr != nil {
		return nil, firstErr
	}
	sort.Slice(got, func(a, b int) bool { return got[a].at < got[b].at })
	out := make([]Lease, len(got))
	for i, g := range got {
		v, err := g.value.Get()
		if err != nil {
			return nil, err
		}
		if v == nil {
			return nil, &ForeignKeyError{Key: q.key("v", g.lease.JobID[:]), Reason: "job value missing"}
		}
		g.lease.Value = v
		out[i] = g.lease
	}
	return out, nil
}

func (m jobMeta) toLease() Lease {
	l := Lease{JobID: m.id, Attempt: m.attempts, MaxAttempts: m.maxAttempts, Deadline: time.UnixMicro(m.vest),
		Priority: m.prio, UniqueKey: string(m.unique), Reason: string(m.reason)}
	copy(l.ID[:], m.lease)
	return l
}

// unbucket removes m from the time bucket it is counted in.
func (q *JobQueue) unbucket(tr kv.Transaction, m jobMeta) {
	if m.lease == nil {
		q.bucket(tr, "p", m.vest, -1)
	} else {
		q.bucket(tr, "e", m.vest, -1)
	}
}

// bury moves the job whose record m is at key to the dead-letter list.
func (q *JobQueue) bury(tr kv.Transaction, m jobMeta, key []byte, now time.Time, reason string) {
	tr.Clear(key)
	q.unbucket(tr, m)
	if m.lease != nil {
		tr.Add(q.leased, minusOne)
	}
	tr.Add(q.total, minusOne)
	tr.Add(q.deadN, one)
	if len(m.unique) > 0 {
		tr.Clear(q.key("u", m.unique)) // held by this job while it was in the queue
	}
	if reason != "" {
		m.reason = cutReason(reason)
	}
	m.lease = nil
	m.deadAt = now.UnixMicro()
	dk := m.deadKey(q)
	tr.Set(dk, m.encode())
	tr.Set(q.key("x", m.id[:]), dk)
}

func cutReason(s string) []byte {
	b := []byte(s)
	if len(b) > MaxReasonSize {
		b = b[:MaxReasonSize]
	}
	return b
}

// replayLeases rebuilds the leases of an attempt that committed from its
// journal record. A job acked since (by someone who took it after the lease
// expired) is left out.
func (q *JobQueue) replayLeases(tr kv.Transaction, prev [][]byte) ([]Lease, error) {
	var out []Lease
	for _, p := range prev {
		if len(p) == 0 {
			continue // an attempt that leased nothing
		}
		t, err := tuple.Unpack(p)
		if err != nil || len(t) != 4 {
			return nil, fmt.Errorf("%w: bad lease record", ErrForeignKey)
		}
		id, ok1 := t[0].([]byte)
		lid, ok2 := t[1].([]byte)
		dl, ok3 := t[2].(int64)
		prio, ok4 := t[3].(int64)
		if !ok1 || !ok2 || !ok3 || !ok4 || len(id) != 16 || len(lid) != 16 {
			return nil, fmt.Errorf("%w: bad lease record", ErrForeignKey)
		}
		m := jobMeta{vest: dl, prio: int32(prio)}
		copy(m.id[:], id)
		key := m.queueKey(q)
		rec, err := tr.Get(key).Get()
		if err != nil {
			return nil, err
		}
		if rec == nil {
			continue
		}
		if m, err = decodeMeta(key, rec, m.id); err != nil {
			return nil, err
		}
		if !bytes.Equal(m.lease, lid) {
			continue
		}
		v, err := tr.Snapshot().Get(q.key("v", m.id[:])).Get()
		if err != nil {
			return nil, err
		}
		l := m.toLease()
		l.Value, l.key = v, key
		out = append(out, l)
	}
	return out, nil
}

// LeaseWait is Lease that blocks until a job is due or ctx ends. When
// nothing is due, the same transaction reads the earliest vesting time in
// the queue and sets a watch on the queue's signal key, which every Add,
// Nack and Requeue bumps; it then sleeps until the watch fires or the clock
// reaches that vesting time (a lease's deadline counts: an expired lease's
// job is due again), and tries again. It never polls. A sleeping call
// holds one watch.
func (q *JobQueue) LeaseWait(ctx context.Context, db kv.Database, n int, d time.Duration) ([]Lease, error) {
	if err := checkTransactor(db); err != nil {
		return nil, err
	}
	for {
		id := newOpIDAt(q.cfg.Clock.Now()) // one per attempt: an attempt that leased nothing wrote no record
		r, err := q.leaseOp(ctx, db, n, d, true, []OpOption{WithOpID(id)})
		if err != nil {
			return nil, err
		}
		if len(r.leases) > 0 {
			return r.leases, nil
		}
		if r.watch == nil {
			// The attempt committed without leasing: it dead-lettered the
			// candidates it took (their last lease had expired), or its
			// journal replay found its jobs gone. Look again at once.
			continue
		}
		if err := q.sleep(ctx, r); err != nil {
			return nil, err
		}
	}
}

func (q *JobQueue) sleep(ctx context.Context, r leaseResult) error {
	defer r.watch.Cancel()
	var timer <-chan time.Time
	if r.earliest != 0 {
		// Wake just after the earliest vesting time.
		wait := time.UnixMicro(r.earliest + 1).Sub(q.cfg.Clock.Now())
		if wait <= 0 {
			return nil
		}
		timer = q.cfg.Clock.After(wait)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fired := make(chan error, 1)
	go func() { fired <- r.watch.Wait(wctx) }()
	select {
	case err := <-fired:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil && !errors.Is(err, kv.ErrTransactionCancelled) {
			return err
		}
		return nil
	case <-timer:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

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
// commit together, exactly once; see ExampleJobQueue_Ack.
//
// It fails with ErrLeaseLost if the job no longer carries this lease: the
// lease expired and another consumer leased the job (or it was acked,
// nacked or dead-lettered), so nothing is written and a transaction that
// returns the error commits none of the job's effects. A lease whose
// deadline passed but whose job nobody leased again is still acked.
//
// Conflicts: a normal read of the job's key, so it conflicts with a
// concurrent Lease, Extend or Nack of the same job only. Cost: one round
// trip (two more if the lease was extended through another copy of the
// Lease), then four clears and three counter adds, and the journal record;
// under commit_unknown_result the retry finds the record and succeeds.
func (q *JobQueue) Ack(ctx context.Context, t kv.Transactor, l Lease, opts ...OpOption) error {
	if err := checkTransactor(t); err != nil {
		return err
	}
	o := q.journal.begin(t, opts)
	err := t.Transact(ctx, func(tr kv.Transaction) error {
		rec, err := o.check(tr)
		if err != nil {
			return err
		}
		at := tr.Get(q.leaseKey(l))
		if _, done, err := o.applied(rec); err != nil || done {
			return err
		}
		m, key, err := q.lookup(tr, l, at)
		if err != nil {
			return err
		}
		tr.Clear(key)
		tr.Clear(q.key("x", m.id[:]))
		tr.Clear(q.key("v", m.id[:]))
		if len(m.unique) > 0 {
			tr.Clear(q.key("u", m.unique))
		}
		q.unbucket(tr, m)
		tr.Add(q.leased, minusOne)
		tr.Add(q.total, minusOne)
		o.record(tr)
		return nil
	})
	o.end(err)
	return err
}

// NackOptions says what to do with a job that failed.
type NackOptions struct {
	// Delay before the job is due again. 0 takes the queue's exponential
	// backoff with jitter (JobQueueConfig.RetryBase, RetryMax); a negative
	// Delay makes it due at once.
	Delay time.Duration
	// Reason is kept with the job (cut to MaxReasonSize bytes) and shown
	// by later leases and the dead-letter list.
	Reason string
}

// Nack gives the leased job back after a failed attempt: it is due again
// after o.Delay, or, if that was its last attempt, it moves to the
// dead-letter list (dead reports which). It fails with ErrLeaseLost as Ack
// does. Conflicts, cost and exactly-once behaviour are Ack's, with two
// writes instead of the clears, and a bump of the signal key.
func (q *JobQueue) Nack(ctx context.Context, t kv.Transactor, l Lease, no NackOptions, opts ...OpOption) (dead bool, err error) {
	if err := checkTransactor(t); err != nil {
		return false, err
	}
	o := q.journal.begin(t, opts)
	dead, err = kv.Transact(ctx, t, func(tr kv.Transaction) (bool, error) {
		rec, err := o.check(tr)
		if err != nil {
			return false, err
		}
		at := tr.Get(q.leaseKey(l))
		if prev, done, err := o.applied(rec); err != nil || done {
			return len(prev) > 0 && bytes.Equal(prev[0], []byte{1}), err
		}
		m, key, err := q.lookup(tr, l, at)
		if err != nil {
			return false, err
		}
		now := q.cfg.Clock.Now()
		if m.attempts >= m.maxAttempts {
			q.bury(tr, m, key, now, no.Reason)
			o.record(tr, []byte{1})
			return true, nil
		}
		delay := no.Delay
		if delay == 0 {
			delay = q.Backoff(m.attempts)
		}
		tr.Clear(key)
		q.unbucket(tr, m)
		tr.Add(q.leased, minusOne)
		m.lease = nil
		m.vest = now.Add(max(delay, 0)).UnixMicro()
		m.reason = cutReason(no.Reason)
		q.put(tr, m)
		q.bucket(tr, "p", m.vest, 1)
		tr.Add(q.signal, one)
		o.record(tr, []byte{0})
		return false, nil
	})
	o.end(err)
	return dead, err
}

// Backoff returns the default delay after a job's attempt-th failed
// attempt: RetryBase·2^(attempt−1), at most RetryMax, less a random part of
// up to a half (jitter, so that jobs that failed together do not come back
// together).
func (q *JobQueue) Backoff(attempt int) time.Duration {
	d := q.cfg.RetryBase
	for i := 1; i < attempt && d < q.cfg.RetryMax; i++ {
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
// returned Lease from then on. It fails with ErrLeaseLost as Ack does,
// and a lease whose deadline passed but whose job nobody leased again is
// still extended.
//
// Conflicts: those of Ack. Cost: one round trip and a commit of a clear,
// two writes and two counter adds. It needs no journal: retried after
// commit_unknown_result, it finds the job still under its lease and
// extends it again from the new now.
func (q *JobQueue) Extend(ctx context.Context, t kv.Transactor, l Lease, d time.Duration) (Lease, error) {
	if err := checkTransactor(t); err != nil {
		return l, err
	}
	if d == 0 {
		d = q.cfg.LeaseDuration
	}
	if d < time.Millisecond {
		return l, fmt.Errorf("%w: lease duration %v, want at least 1ms", ErrInvalidArgument, d)
	}
	return kv.Transact(ctx, t, func(tr kv.Transaction) (Lease, error) {
		m, key, err := q.lookup(tr, l, tr.Get(q.leaseKey(l)))
		if err != nil {
			return l, err
		}
		tr.Clear(key)
		q.bucket(tr, "e", m.vest, -1)
		m.vest = q.cfg.Clock.Now().Add(d).UnixMicro()
		q.put(tr, m)
		q.bucket(tr, "e", m.vest, 1)
		out := l
		out.Deadline = time.UnixMicro(m.vest)
		out.key = m.queueKey(q)
		return out, nil
	})
}

// picking is what Lease calls on one JobQueue value are taking (between
// their choice and the end of their transaction) and have taken within
// the last MVCC window (5 s: no transaction reads at an older version, so
// no snapshot can show those jobs as due any longer). Lease tries the
// other candidates first, so that workers sharing a JobQueue value (one
// process, a pool) do not pick the same job and conflict; workers in
// other processes are kept apart by the random choice alone.
type picking struct {
	mu       sync.Mutex
	keys     map[string]int       // being taken
	recent   map[string]time.Time // taken, until then
	releases int
}

const pickMemory = 5 * time.Second

func (p *picking) add(key []byte) {
	p.mu.Lock()
	if p.keys == nil {
		p.keys, p.recent = map[string]int{}, map[string]time.Time{}
	}
	p.keys[string(key)]++
	p.mu.Unlock()
}

// release ends the picks of one attempt; taken says that it committed.
func (p *picking) release(keys []string, taken bool) {
	if len(keys) == 0 {
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		if p.keys[k]--; p.keys[k] <= 0 {
			delete(p.keys, k)
		}
		if taken {
			p.recent[k] = now.Add(pickMemory)
		}
	}
	if p.releases++; p.releases%256 == 0 {
		for k, until := range p.recent {
			if now.After(until) {
				delete(p.recent, k)
			}
		}
	}
}

// busy reports, for each candidate, whether another call is taking it or
// took it recently.
func (p *picking) busy(kvs []kv.KeyValue) []bool {
	out := make([]bool, len(kvs))
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, c := range kvs {
		until, ok := p.recent[string(c.Key)]
		out[i] = p.keys[string(c.Key)] > 0 || (ok && now.Before(until))
	}
	return out
}
