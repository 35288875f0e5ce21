package fdbqueue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Lease is a job leased to one consumer until Deadline. Ack, Nack,
// Extend and Release take it; they fail with ErrLeaseLost once another
// consumer has leased the job again.
type Lease struct {
	// JobID is the leased job's ID.
	JobID JobID
	// ID changes at every lease of the job.
	ID [16]byte
	// Value is the job's payload.
	Value []byte
	// Attempt is this lease's attempt number: 1 for the first. A
	// Release gives its attempt back, so the next lease has its number.
	Attempt     int
	MaxAttempts int // the job's maximum number of attempts
	// Deadline is when the job becomes due again unless it is acked,
	// nacked or extended.
	Deadline  time.Time
	Priority  int32  // the job's priority
	UniqueKey string // the job's unique key, if any
	// Reason is the reason given by the last Nack of the job that gave
	// one, if any.
	Reason string

	key []byte // the job's queue key while this lease holds it
}

// Lease leases up to n due jobs (1 to MaxLeaseBatch) for d (0: the
// queue's LeaseDuration; at least 1ms), ErrInvalidArgument otherwise, and
// returns them in queue order; ErrEmpty when no job is due, or when its
// whole batch budget went to moving jobs to the dead-letter list (below:
// it commits that, and the next call goes on past them). It takes fewer
// than n when more would take its transaction, as FoundationDB counts its
// size, over the batch budget (WithBatchBudget; about 2,000 bytes per job
// with small records on a short prefix, 4 KB with the largest unique key
// and reason, 6 KB when those are all 0x00 bytes, each packed as two).
//
// Which jobs: the due jobs (vesting time at or before the clock's now) in
// key order — earlier vesting time first, then higher priority — of which
// it reads the first K+n−1 (K = JobQueueConfig.Choice) and takes n at
// random (K = 1: the first n). Each job taken gets a new lease ID, its
// attempt count goes up by one, and its vesting time becomes now + d, so
// no one else sees it as due until then. A job whose previous lease was
// its last attempt (it expired: its consumer crashed or stalled) is moved
// to the dead-letter list instead, and another candidate is taken; when
// every candidate read was moved so, it reads on past them. A key in the
// queue's range that the queue did not write is left alone and skipped;
// when no candidate could be taken because of one, Lease fails with
// ErrForeignKey naming it.
//
// Conflicts: the candidates are read with a snapshot read, and a read
// conflict is added on the keys of the jobs taken only, so a Lease
// conflicts only with another Lease, Ack, Nack, Extend, Release or Cancel
// of the same job (with K = 1, concurrent consumers all want the first job and
// conflict).
// Cost: two round trips (the candidates and the journal together, then the
// values of the jobs taken), one more for each read past moved candidates
// (twice as many each time), and one commit of, per job, a clear, two
// small writes, four atomic counter operations (three adds and a
// compare-and-clear) and a journal record.
//
// Exactly once: a retry after commit_unknown_result finds the journal
// record and returns the leases it took that are still held (one extended
// since at its new deadline; a job acked, nacked, released or cancelled
// since, or leased again after its lease expired, is left out; ErrEmpty
// when none is), leasing nothing more. Given
// a Transaction, the leases take effect with the caller's commit. If Lease
// fails with an error for which kv.MaybeCommitted is true, jobs may have
// been leased: they come back when their leases expire (with one attempt
// counted), or, within the journal retention, call Lease again with the
// same WithOpID (the ID in the *UnknownResultError) to get them (or, if
// that call did not commit, to lease anew), or SettleLease to get them
// without leasing any other. Under an ID an earlier call used, a Lease
// that finds no job due commits a write conflict on the ID's record key,
// so that the earlier call's commit, landing later, fails and ErrEmpty
// holds (the earlier call's job may not be due by this client's clock).
func (q *JobQueue) Lease(ctx context.Context, t kv.Transactor, n int, d time.Duration, opts ...OpOption) ([]Lease, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	r, err := q.leaseOp(ctx, t, n, d, leaseNow, opts)
	if err == nil && len(r.leases) == 0 {
		err = ErrEmpty
	}
	return r.leases, err
}

// SettleLease settles a Lease under id that failed with an error for
// which kv.MaybeCommitted is true (its context ended during the commit),
// without leasing anything itself: it returns the leases that call took
// if its commit landed (those still held), and otherwise none, and
// records under id that none were taken, so that the commit, should it
// land later, conflicts and takes nothing. Call it where a consumer stops
// and will not process more jobs: a Lease under id would lease due jobs
// when the first call's did not commit, and releasing them would move
// them behind jobs that fell due after them. Release or process the
// leases it returns, as those of Lease.
//
// id is the ID the Lease ran under: one given with WithOpID, or the one
// its *UnknownResultError holds (also logged, WithLogger), from any
// handle of the queue. (A Lease in the caller's transaction without WithOpID keeps no
// record, and SettleLease cannot tell what it did.) Once SettleLease has
// returned, that Lease's commit can no longer take a job. A later Lease
// or SettleLease under id returns the same leases (none, once recorded
// so) while the records are kept: given a Database, SettleLease's
// record, like that of any call that returned without error (see
// WithOpID), is cleared by a later operation of the handle, and a Lease under
// id after that leases anew. Given a Transaction, it takes effect with
// the caller's commit. It fails with ErrInvalidArgument on a queue made
// WithoutIdempotency, which keeps no record to settle with, or given the
// zero OpID, and with ErrOperationExpired for an id older than the
// retention.
//
// Cost: one round trip (the journal record and the ID's marker); when the
// Lease committed, two more (the rest of its records, then the jobs' keys
// and values together), up to two more when a job's record has moved since
// (its ID index entries, then the records they name), and a commit that
// writes nothing but a write conflict on the record's key, as any call
// that finds its records under an ID of yours; otherwise a commit of the
// journal record and the marker. Conflicts: with the first call's commit, when it lands
// meanwhile (the retry then finds its record), and, when the Lease
// committed, with a change to one of its jobs. Under
// commit_unknown_result the retry finds its own record.
func (q *JobQueue) SettleLease(ctx context.Context, t kv.Transactor, id OpID) ([]Lease, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(t); err != nil {
		return nil, err
	}
	if q.journal.disabled {
		return nil, fmt.Errorf("%w: SettleLease on a queue made WithoutIdempotency, which keeps no journal", ErrInvalidArgument)
	}
	r, err := q.leaseOp(ctx, t, 1, 0, leaseSettling, []OpOption{WithOpID(id)})
	return r.leases, err
}

// leaseMode is what leaseOp does besides leasing due jobs.
type leaseMode int

const (
	// leaseNow: Lease.
	leaseNow leaseMode = iota
	// leaseWaiting: LeaseWait's attempt, which, when nothing is due,
	// reads the earliest vesting time and sets a watch.
	leaseWaiting
	// leaseSettling: settle a Lease under its ID without leasing. It
	// returns the leases an earlier call under the ID recorded (those
	// still held: see replayLeases), and when there is no record it
	// records that the call leased nothing, instead of taking a due job:
	// an earlier attempt's commit that lands later then conflicts (it
	// read the record's key, op.check), and no job is touched that the
	// call did not lease. The pool settles so at shutdown (settleLease),
	// where a job leased only to be released would lose its place in the
	// queue (Release makes it due now, behind the jobs that fell due
	// after it).
	leaseSettling
)

type leaseResult struct {
	leases   []Lease
	earliest int64    // the first vesting time in the queue, when nothing was due (0: none)
	watch    kv.Watch // on the signal key, when asked for and nothing was due
}

func (q *JobQueue) leaseOp(ctx context.Context, t kv.Transactor, n int, d time.Duration, mode leaseMode, opts []OpOption) (leaseResult, error) {
	if n < 1 || n > MaxLeaseBatch {
		return leaseResult{}, fmt.Errorf("%w: lease batch %d, want 1 to %d", ErrInvalidArgument, n, MaxLeaseBatch)
	}
	if d == 0 {
		d = q.cfg.LeaseDuration
	}
	if d < time.Millisecond {
		return leaseResult{}, fmt.Errorf("%w: lease duration %v, want at least 1ms", ErrInvalidArgument, d)
	}
	t = q.journal.track.observe("lease", t)
	o := q.journal.begin(t, opts)
	wait, settling := mode == leaseWaiting, mode == leaseSettling
	var watch kv.Watch
	var mine []string // keys this call is taking: see picking
	var err error
	defer func() { q.picking.release(mine, err == nil) }()
	var res leaseResult
	var gate gateRead
	res, err = kv.Transact(ctx, t, func(tr kv.Transaction) (leaseResult, error) {
		if watch != nil { // an earlier attempt's: its transaction was reset
			watch.Cancel()
			watch = nil
		}
		q.picking.release(mine, false) // an earlier attempt's, which failed
		mine = mine[:0]
		o.gate = q.journal.gate.issueInto(&gate, tr, false, o.owned) // config.go
		rec, err := o.check(tr)
		if err != nil {
			return leaseResult{}, err
		}
		now := q.cfg.Clock.Now()
		dueEnd := q.key("q", now.UnixMicro()+1)
		var cand, first kv.RangeResult
		if !settling {
			cand = tr.Snapshot().GetRange(kv.KeyRange{Begin: q.items.Begin, End: dueEnd},
				kv.RangeOptions{Limit: q.cfg.Choice + n - 1, Mode: kv.StreamingModeExact})
		}
		if wait {
			first = tr.Snapshot().GetRange(q.items, kv.RangeOptions{Limit: 1})
		}
		if prev, done, err := o.applied(rec); err != nil {
			return leaseResult{}, err
		} else if done {
			ls, err := q.replayLeases(tr, prev)
			return leaseResult{leases: ls}, err
		}
		if settling {
			o.record(tr) // leased nothing: an empty record
			return leaseResult{}, nil
		}
		kvs, err := cand.GetSlice()
		if err != nil {
			return leaseResult{}, err
		}
		if len(kvs) == 0 {
			var r leaseResult
			if !wait && o.mayLandLate() {
				// An earlier call's commit under the ID may still land
				// (one cut short in flight is not fenced), with a job
				// that is not due here (this client's clock is behind
				// its): it read the key its record goes to, so a write
				// conflict there makes it fail, and ErrEmpty stays the
				// call's only outcome. (A LeaseWait needs no fence: it
				// does not return empty, and each of its rounds runs
				// under a new ID; a round whose commit failed in
				// flight ended the call, which JobQueue.Run settles
				// with Lease or SettleLease, both fenced.)
				if err := tr.AddWriteConflictKey(o.recordKeyOrSlot()); err != nil {
					return r, err
				}
			}
			if wait {
				if fk, err := firstKey(first); err != nil {
					return r, err
				} else if fk != nil {
					if r.earliest, _, err = q.parseItemKey(fk); err != nil {
						return r, err
					}
				}
				// Registered at this read-only commit, as FDB sets up a
				// transaction's watches after its commit, read-only or not
				// (commitAndWatch in fdbclient/NativeAPI.actor.cpp); it fires
				// at once if the signal changed since the read version.
				watch = tr.Watch(q.signal)
				r.watch = watch
			}
			return r, nil // nothing written: a read-only commit, but for the fence
		}
		leases, err := q.take(tr, o, kvs, q.cfg.Choice+n-1, dueEnd, n, now, d, &mine)
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
	switch {
	case err == nil && len(res.leases) == 0 && settling:
		o.endAs(nil, ErrEmpty) // its empty record committed: cleared later
	case err == nil && len(res.leases) == 0:
		o.end(ErrEmpty) // nothing recorded (or a replay): hand the cleanups it took back
	default:
		o.end(err)
	}
	return res, o.unknownResult(err)
}

// LeaseWait is Lease that blocks until a job is due or ctx ends. When
// nothing is due, the same transaction reads the earliest vesting time in
// the queue and sets a watch on the queue's signal key, which every Add,
// Nack, Release and Requeue bumps, and an Extend that shortens a lease; it
// then sleeps until the watch fires or the clock reaches that vesting time (a
// lease's deadline counts: an expired lease's job is due again), and
// tries again. It never polls. A watch that fails with a retryable error
// (FoundationDB's may: future_version, a failed read) or broken_promise
// (FoundationDB 7.3's, for a lagging storage server) makes it look again
// after a short pause; any other failure of the watch (too_many_watches)
// is returned, for the caller to back off. A sleeping call holds one watch. It must
// read the vesting time of the queue's first key, so a key there that the
// queue did not write fails it with ErrForeignKey, as it fails Stats, even
// while Lease, which reads only the due keys, reports ErrEmpty.
func (q *JobQueue) LeaseWait(ctx context.Context, db kv.Database, n int, d time.Duration) ([]Lease, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(db); err != nil {
		return nil, err
	}
	return q.leaseWait(ctx, db, n, d, nil)
}

// leaseWait is LeaseWait. When lastID is not nil, it holds the ID of the
// last lease attempt made, so that a caller can settle one that failed
// with an error for which kv.MaybeCommitted is true (JobQueue.Run).
func (q *JobQueue) leaseWait(ctx context.Context, db kv.Database, n int, d time.Duration, lastID *OpID) ([]Lease, error) {
	for {
		id := newOpIDAt(q.cfg.Clock.Now()) // one per attempt: an attempt that leased nothing wrote no record
		if lastID != nil {
			*lastID = id
		}
		r, err := q.leaseOp(ctx, db, n, d, leaseWaiting, []OpOption{WithOpID(id)})
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
		// Wake just after the earliest vesting time (adding to the time,
		// not to the microsecond count, which overflows at the latest).
		wait := time.UnixMicro(r.earliest).Add(time.Microsecond).Sub(q.cfg.Clock.Now())
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
		if err == nil || errors.Is(err, kv.ErrTransactionCancelled) {
			return nil
		}
		if kv.IsRetryable(err) || errors.Is(err, kv.ErrBrokenPromise) {
			// FoundationDB fails a watch with a retryable error when its
			// read fails (RYWImpl::watch; the commit succeeds all the same)
			// and, once registered, when a storage server does not reach
			// the watch's version in time (waitForVersionNoTooOld,
			// fdbserver/storageserver.actor.cpp): NativeAPI's watchValue
			// passes future_version on after a pause, and in 7.3 a key's
			// only watch then fails with broken_promise instead
			// (watchStorageServerResp drops the watch's promise). Look
			// again, after a pause of the same length (real time, like
			// OnError's backoff), so that watches that keep failing do not
			// spin.
			return pause(ctx, watchRetryPause)
		}
		return err
	case <-timer:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watchRetryPause is how long a waiter whose watch failed with a retryable
// error waits before looking again: FDB's FUTURE_VERSION_RETRY_DELAY
// (fdbclient/ClientKnobs.cpp), which its watchValue waits before passing a
// storage server's error on.
const watchRetryPause = 10 * time.Millisecond

// pause waits d, or until ctx ends (then its error): a waiter's pause
// after its watch failed.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
