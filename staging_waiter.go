package fdbqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// One staged call: its loop of steps, and the step that reads the
// request's state and picks the one transition it allows (the
// transitions and their invariants: staging_line.go).

// waiter is one staged operation in flight.
type waiter[T any] struct {
	s      *stageSide[T]
	db     kv.Database
	o      *op
	userID bool
	wait   bool // block while the queue is empty (the Wait forms)

	// reqKey and resKey are the current request's keys; nil when none.
	// Between a registration's commit and its versionstamp, and after a
	// registration commit with an unknown outcome, only resKey is set.
	reqKey, resKey []byte
	rid            []byte
	stamp          kv.FutureVersionstamp // of the registration in flight
	fastDone       bool                  // the one plain attempt was made
	renewAt        time.Time
	// deadline is the deadline the registration wrote: renewals only
	// push it later, so until then nobody can have expired the request.
	deadline time.Time
	// withdrawing is set when a withdrawal was attempted: if its commit's
	// outcome was unknown, the request may be gone because of it.
	withdrawing bool
	// regInDoubt is set when the last registration's commit failed with
	// an error that leaves it maybe committed (resolve).
	regInDoubt bool

	// taken holds the take attempts (fast take, self-service or collect)
	// made since the last step that committed, oldest first, one per item
	// taken: the commit of any of them may have had an unknown outcome, or
	// been cut short by a timeout and still be in flight (see step). With
	// the journal at most one of them applies: each reads and writes the
	// operation's record key (took). If the caller's context ends, the
	// cleanup (abandon) fences them all and puts back the item of the one
	// whose journal record it finds.
	taken []takeAttempt

	// ahead is how many requests were ahead of this one at the last look
	// (an upper bound of its place now); woke is set after a sleep, until
	// a step commits.
	ahead int
	woke  bool
	// ownFired is set when the watch of the waiter's own request woke it:
	// the request was most likely served, and the next step reads only
	// the request and its result before it reads the line.
	ownFired bool

	watches []kv.Watch
	// later is a watch the step left to arm after its commit (armLater).
	later     *lateWatch
	watchFail time.Duration
	reads     stepReads // the current step's range reads
}

// takeAttempt is a take a step attempted: the item it removed and the
// journal record it wrote.
type takeAttempt struct {
	item kv.KeyValue
	rec  []byte
}

// outcome is what one step decided; it holds once the step's commit
// succeeded.
type outcome[T any] struct {
	done       bool
	val        T
	err        error // with done: the result to return (ErrEmpty)
	noCommit   bool  // done without writing: skip the commit
	phase      int   // the transition chosen, for the statistics
	served     int   // other requests served
	armed      bool  // sleep on the watches
	registered bool
	forget     bool      // the in-doubt registration did not happen
	renewAt    time.Time // the step renewed the request: the next renewal's time
}

// run performs one staged take: Dequeue (wait false) or DequeueWait.
func (s *stageSide[T]) run(ctx context.Context, db kv.Database, wait bool, opts []OpOption) (T, error) {
	var zero T
	if err := checkTransactor(db); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	var c opConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	db = s.journal.track.observeDB(s.opKind(), db)
	w := &waiter[T]{s: s, db: db, o: s.begin(db, opts), userID: c.hasID, wait: wait}
	// The transaction is bound to a context that ends with the operation,
	// so the backend can release it.
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	val, err := w.loop(opCtx, ctx)
	w.cancelWatches()
	w.o.end(err)
	err = w.o.unknownResult(err)
	st := &s.st.stats
	st.calls.Add(1)
	st.callNanos.Add(int64(time.Since(start)))
	if err == nil {
		st.items.Add(1)
	}
	return val, err
}

// loop runs steps until the operation finishes. Each step is one
// transaction; a failed step is followed by a fresh one that re-reads the
// state (after a backoff when steps keep failing).
func (w *waiter[T]) loop(ctx, callerCtx context.Context) (T, error) {
	var zero T
	tr, err := w.db.CreateTransaction(ctx)
	if err != nil {
		return zero, err
	}
	stepOptions(tr)
	fails := 0
	timedOut := 0 // steps whose commit timed out in flight since the last success
	stop := func(err error) error { return w.abandon(callerCtx, err) }
	for {
		if err := callerCtx.Err(); err != nil {
			return zero, w.abandon(callerCtx, err)
		}
		t0 := time.Now()
		out, err := w.attempt(tr)
		st := &w.s.st.stats
		w.s.journal.track.obs.stagedStep(out.phase, err)
		if err == nil {
			st.commits[out.phase].Add(1)
			st.nanos[out.phase].Add(int64(time.Since(t0)))
			st.batch(out.served)
			fails, timedOut = 0, 0
			w.woke = false
			if out.done {
				return out.val, out.err
			}
			if out.forget {
				w.resKey, w.rid = nil, nil
			}
			if !out.renewAt.IsZero() {
				w.renewAt = out.renewAt
			}
			if !out.done && !out.noCommit && len(w.taken) > 0 {
				// The step read the journal (takes were attempted), found
				// no record, and committed a write conflict on the record
				// key every one of those takes read (step): none committed
				// and none ever will (FDB fences a commit before it reports
				// commit_unknown_result, but not one interrupted by a
				// timeout, which can land later), so nothing ties the
				// operation to its ID any more, and refreshOp may renew it
				// while the call waits.
				w.taken = nil
			}
			if out.registered {
				stamp, err := w.stamp.Get()
				if err == nil {
					w.reqKey, err = w.s.reqKeyOf(stamp, w.rid)
				}
				if err != nil {
					return zero, stop(err)
				}
				w.s.st.point("registered")
			}
			tr.Reset()
			stepOptions(tr)
			if out.armed && w.later != nil {
				out.armed = w.armAfter(tr)
				w.woke = !out.armed // the key changed: as if its watch fired
			}
			if out.armed {
				w.s.st.point("armed")
				if err := w.sleep(callerCtx); err != nil {
					return zero, stop(err)
				}
				w.woke = true
				// The next step starts now: a database's default
				// transaction timeout (FoundationDB's
				// transaction_timeout) counts from the transaction's
				// creation or last Reset (ReadYourWritesTransaction::
				// reset, fdbclient/ReadYourWrites.actor.cpp), and the
				// sleep must not use it up.
				tr.Reset()
				stepOptions(tr)
			}
			w.refreshOp()
			continue
		}
		if errors.Is(err, kv.ErrNotCommitted) {
			st.conflicts[out.phase].Add(1)
		} else {
			st.fails[out.phase].Add(1)
		}
		w.cancelWatches()
		w.s.st.point("failed")
		if out.registered {
			// The next step resolves the registration (resolve): only a
			// commit that may have applied leaves it in doubt.
			w.regInDoubt = kv.MaybeCommitted(err)
		}
		if callerCtx.Err() != nil || (!kv.IsRetryable(err) && !kv.MaybeCommitted(err)) {
			return zero, stop(err)
		}
		if !kv.IsRetryable(err) {
			// A commit that timed out in flight (transaction_timed_out,
			// maybe committed, which no retry loop retries). A few in a
			// row are a slow moment; many mean that the database's
			// default transaction timeout is shorter than a step, and
			// the call would retry without end: give up, as a plain
			// operation does at its first 1031, once the cleanup has
			// settled the takes in doubt (abandon).
			if timedOut++; timedOut >= maxTimedOutSteps {
				return zero, stop(fmt.Errorf("fdbqueue: staged dequeue gave up after %d steps in a row timed out in flight, the last with %v: %w",
					timedOut, err, kv.ErrTransactionTimedOut))
			}
		}
		// The first failure after progress is retried at once: it was most
		// likely a fulfiller's conflict that served this request.
		if fails++; fails == 1 || !kv.IsRetryable(err) {
			if fails > 1 {
				// A maybe-committed error OnError does not retry (a commit
				// that timed out in flight: transaction_timed_out) again:
				// back off as OnError does for the others, since commits
				// that keep outlasting the timeout mean a loaded cluster.
				w.s.st.point("backoff")
				if perr := pause(callerCtx, stepBackoff(fails)); perr != nil {
					return zero, stop(perr)
				}
			}
			tr.Reset()
			stepOptions(tr)
		} else if oerr := tr.OnError(err); oerr != nil {
			return zero, stop(oerr)
		}
	}
}

// stepBackoff is the pause before the retry of a step after fails
// failures in a row (fails >= 2) that OnError does not back off: 1 ms,
// doubling, up to maxStepBackoff.
func stepBackoff(fails int) time.Duration {
	return min(time.Millisecond<<min(fails-2, 16), maxStepBackoff)
}

// stepOptions sets the options of a step's transaction. It runs when the
// transaction is created and after every Reset: FoundationDB's Reset clears
// a transaction's options (ReadYourWritesTransaction::reset in
// fdbclient/ReadYourWrites.actor.cpp keeps only the database's defaults),
// while OnError keeps them.
func stepOptions(tr kv.Transaction) {
	// A failed step usually means another waiter made progress: back off
	// briefly, not for up to a second.
	_ = tr.Options().SetMaxRetryDelay(maxStepBackoff)
}

func (w *waiter[T]) attempt(tr kv.Transaction) (outcome[T], error) {
	w.reads.held = w.reads.held[:0]
	gate := w.s.journal.gate.issueStep(tr, w.reqKey == nil && w.s.stable && w.s.busy.Load()) // config.go
	out, err := w.step(tr)
	if err == nil {
		err = gate.settle() // config.go: before the commit
	}
	if err != nil {
		return out, err
	}
	if out.noCommit {
		return out, nil
	}
	if err := w.reads.wait(); err != nil {
		return out, err
	}
	if out.done && out.err == nil {
		w.s.st.point("taking")
	}
	if out.registered {
		w.s.st.point("registering")
	}
	if w.s.st.hook != nil {
		w.s.st.point("commit " + phaseNames[out.phase])
	}
	return out, tr.Commit()
}

func (w *waiter[T]) cancelWatches() {
	for _, wt := range w.watches {
		wt.Cancel()
	}
	w.watches = w.watches[:0]
	w.later = nil
}

// armAfter runs armLater in tr, counts it as a step of phase "arm", and
// resets tr for the next step. It reports whether the waiter may sleep;
// when it may not, the watches already armed are cancelled, and the next
// step runs at once.
func (w *waiter[T]) armAfter(tr kv.Transaction) bool {
	t0 := time.Now()
	ok, err := w.armLater(tr)
	st := &w.s.st.stats
	w.s.journal.track.obs.stagedStep(phaseArm, err)
	switch {
	case err == nil:
		st.commits[phaseArm].Add(1)
		st.nanos[phaseArm].Add(int64(time.Since(t0)))
	case errors.Is(err, kv.ErrNotCommitted):
		st.conflicts[phaseArm].Add(1)
	default:
		st.fails[phaseArm].Add(1)
	}
	tr.Reset()
	stepOptions(tr)
	if !ok {
		w.cancelWatches()
		w.s.st.point("unarmed")
	}
	return ok
}

// refreshOp replaces a random operation ID before it nears the journal
// retention, so that a long wait does not fail with ErrOperationExpired.
// Only while nothing was ever taken under it: then no record of it exists.
func (w *waiter[T]) refreshOp() {
	if w.userID || len(w.taken) > 0 || w.s.journal.disabled {
		return
	}
	if w.s.journal.now().Sub(w.o.id.Time()) < w.s.journal.retention/2 {
		return
	}
	w.o.end(errOpReplaced)
	w.o = w.s.begin(w.db, nil)
}

// begin starts a staged take's operation in the journal, under the side's
// journal kind (a PopMin's or a PopMax's).
func (s *stageSide[T]) begin(db kv.Database, opts []OpOption) *op {
	o := s.journal.beginMarked(db, s.mark, opts)
	s.journal.refuseLogged(o)
	return o
}

var errOpReplaced = errors.New("fdbqueue: operation ID replaced")

// step reads the request's state and buffers the one transition it allows.
func (w *waiter[T]) step(tr kv.Transaction) (out outcome[T], err error) {
	w.cancelWatches() // of an earlier attempt that did not commit
	s := w.s
	// The journal can hold a record of this operation only if a take of
	// it was attempted, or if the caller chose its ID (an earlier call with
	// that ID may have taken): otherwise the read is skipped.
	var rec kv.RangeResult
	if w.userID || len(w.taken) > 0 {
		if rec, err = w.o.check(tr); err != nil {
			return out, err
		}
		rec = w.reads.hold(rec)
	}
	if len(w.taken) > 0 && !w.o.off() {
		// Takes whose outcome is unknown: if a commit was interrupted (a
		// timeout), nothing fenced it, and it may still land. Each read
		// the operation's record key (took): a write conflict there makes
		// every one of them fail if it lands after this step's commit,
		// whatever this step then takes itself; if one landed before this
		// step's read version, the record read above finds it; in between,
		// that normal read, issued before this write conflict, makes this
		// step conflict. On the record key, which only this operation's
		// takes read, not on the items': that would make every other
		// consumer that read them conflict with this step too. (Without
		// the journal there is no record key: a take cut short by a
		// timeout can land after this step's commit, and its item be
		// lost, as WithoutIdempotency allows.)
		if err := tr.AddWriteConflictKey(w.o.recordKeyOrSlot()); err != nil {
			return out, err
		}
	}
	// A clock reading before the read version is known: only the blind
	// registration below, which reads nothing, acts on it. A step that
	// reads reads the clock again once a read returned: FoundationDB's
	// read version is a future (fdb_transaction_get_read_version, which
	// every read waits for) that can come after commits made once this
	// reading had passed a deadline, and the deadlines a step writes (a
	// result's, a renewal's) must come after every commit it sees (a
	// waiter relies on its result's coming after its registration: see
	// the withdrawal below).
	now := s.st.now()
	if w.reqKey == nil && w.resKey != nil {
		// The registration's commit had an unknown outcome.
		if prev, done, err := w.o.applied(rec); err != nil || done {
			return w.replayed(tr, prev, err)
		}
		return w.resolve(tr)
	}
	if w.reqKey == nil && s.stable && s.busy.Load() && !w.fastDone && rec == nil {
		// By place, while the line is long: the registration has nothing
		// to decide (no plain attempt, no watch to arm), so it reads
		// nothing and is a blind write; the next step reads the line.
		return w.join(tr, now, firstLook{})
	}
	if w.reqKey == nil {
		// The last request in the line: a new request stands behind it,
		// and in batch mode its waiter sleeps from the registration on,
		// until that request leaves the line or its own is served.
		last := w.reads.hold(tr.Snapshot().GetRange(s.liveRange(), kv.RangeOptions{Limit: 1, Reverse: true, Mode: kv.StreamingModeExact}))
		// The first requests: fewer than two live ones means this caller
		// would be one of the two oldest waiters (a helper).
		first := w.reads.hold(tr.Snapshot().GetRange(s.liveRange(), kv.RangeOptions{Limit: helpers, Mode: kv.StreamingModeExact}))
		var head kv.RangeResult
		if !s.busy.Load() || w.fastDone {
			// The read that decides on the one plain attempt; skipped
			// while the line is long (the takes see it), where it would
			// only find items reserved for requests ahead.
			head = w.reads.hold(tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: helpers + 1, Reverse: s.reverse, Mode: kv.StreamingModeExact}))
		}
		if prev, done, err := w.o.applied(rec); err != nil || done {
			return w.replayed(tr, prev, err)
		}
		firsts, err := first.GetSlice()
		if err != nil {
			return out, err
		}
		s.raiseFloor(firsts)
		now = s.st.now() // the read version is known
		look := firstLook{firsts: firsts, ahead: s.liveAmong(firsts, now), last: last}
		if head == nil {
			return w.join(tr, now, look)
		}
		return w.fresh(tr, now, head, look)
	}
	reqF := tr.Get(w.reqKey)
	resF := getChunked(tr, w.resKey)
	// The requests ahead and the items that reach this request's place
	// are read now too, so that a step takes one round trip; a waiter
	// that only collects wastes them. The place only moves forward, so
	// the last one seen bounds how far to read.
	limit := min(max(s.st.cfg.BatchSize, w.ahead+1), maxStagingBatch)
	// A helper woken from its sleep may serve the requests behind its
	// own; any other waiter reads only up to its own.
	reqs := s.liveRange()
	if !w.woke && s.stable {
		reqs.End = append(bytes.Clone(w.reqKey), 0x00)
	}
	var pending kv.RangeResult
	var pre prefetched
	readLine := func() {
		pending = w.reads.hold(tr.Snapshot().GetRange(reqs, kv.RangeOptions{Limit: limit, Mode: kv.StreamingModeExact}))
		// The few results a fulfilment expires too, when this waiter
		// may serve: woken, or one of the two oldest at its last look
		// (by place only while the line is short: in a long line a
		// registration looks at nothing, and a take at the waiter's
		// place is the likely step). Read later, in serve, they would
		// take a second round trip.
		serves := w.woke || (w.ahead < helpers && !(s.stable && s.busy.Load()))
		pre = s.prefetch(tr, limit, serves)
		pre.items, pre.results = w.reads.hold(pre.items), w.reads.hold(pre.results)
	}
	light := w.ownFired
	w.ownFired = false
	if !light {
		readLine()
	}
	if prev, done, err := w.o.applied(rec); err != nil || done {
		return w.replayed(tr, prev, err)
	}
	reqV, err := reqF.Get()
	if err != nil {
		return out, err
	}
	resV, err := resF.Get()
	if err != nil {
		return out, err
	}
	marker := false
	if marker = isMarker(resV); marker {
		resV = nil // waiting
	}
	// The read version is known: a drop or an expiry this step sees read
	// its clock before its commit, which precedes this read version,
	// which precedes this reading.
	now = s.st.now()
	switch {
	case resV != nil:
		return w.collect(tr, resV)
	case reqV == nil:
		if w.withdrawing && now.Before(w.deadline.Add(-s.st.cfg.ClaimTimeout/3)) {
			// A withdrawal was attempted (its commit's outcome unknown,
			// or it failed) and the request is gone: the withdrawal
			// removed it, since well before the request's deadline
			// (clocks agree to well within the claim timeout) nobody
			// else can have dropped it, nor expired a result handed to
			// it (a fulfiller writes a result's deadline a claim timeout
			// after a clock reading taken once its read version, which
			// followed this request's registration, was known).
			out.phase = phaseWithdraw
			out.done, out.err, out.noCommit = true, ErrEmpty, true
			return out, nil
		}
		// Dropped, or its result reclaimed, after its deadline: this
		// waiter stalled for the claim timeout, and its item went back to
		// the queue (by place to the tail) while the call was running. The
		// call fails: going on with a new request and returning another
		// item would not be linearizable. (After a withdrawal whose commit
		// had an unknown outcome, this late, the call cannot tell its
		// withdrawal from an expiry, and fails the same way: it took
		// nothing either way.)
		out.phase = phaseWait
		if marker {
			tr.Clear(w.resKey)
		}
		if err := w.fenceEarlier(tr); err != nil {
			return out, err
		}
		s.st.point("lost")
		out.done, out.err = true, ErrClaimExpired
		return out, nil
	default:
		if light {
			readLine() // woken by its request, yet not served: a second round trip
		}
		return w.fulfil(tr, now, pending, pre)
	}
}

// replayed returns the item an earlier attempt of the operation took, found
// in its journal record prev.
//
// A call under an ID its caller chose may be settling an earlier call
// whose cleanup (abandon) found that record, put the item back and erased
// the record, and whose commit was cut short by the cleanup's timeout: it
// goes on and can land after this call returned the item (FoundationDB
// fences an interrupted commit only before it reports
// commit_unknown_result: commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp), and the item would be in the queue
// again. The cleanup read the record key, so this call commits a write
// conflict there: the cleanup then fails if it lands later; if it landed
// before this call's read version, the record is gone and this call takes
// anew; in between, the record's normal read makes this call conflict.
func (w *waiter[T]) replayed(tr kv.Transaction, prev [][]byte, err error) (out outcome[T], _ error) {
	if err != nil {
		return out, err
	}
	out.phase = phaseWait
	if out.val, err = w.s.replay(prev[0]); err != nil {
		return out, err
	}
	out.done, out.noCommit = true, !w.userID
	if w.userID {
		if err := tr.AddWriteConflictKey(w.o.recordKeyOrSlot()); err != nil {
			return out, err
		}
	}
	return out, nil
}

// took records, in tr, that the operation takes item p.
func (w *waiter[T]) took(tr kv.Transaction, p kv.KeyValue, rec []byte) {
	if !w.o.off() {
		// Every take reads the operation's record key, which each take
		// under the ID writes, so a take whose commit was interrupted and
		// not fenced (a timeout; or its context ended and the cleanup
		// failed) conflicts with a retry or a settling call (WithOpID)
		// that committed first, and with the write conflict a retry puts
		// there (step). A fresh ID's first take would not read it
		// otherwise (check skips the read). Added before the record's
		// write: RYW adds no read conflict on a key the transaction wrote
		// (updateConflictMap, fdbclient/ReadYourWrites.actor.cpp).
		_ = tr.AddReadConflictKey(w.o.recordKeyOrSlot()) // never inverted
	}
	w.o.record(tr, rec)
	// Appended, not in place of an earlier take still in doubt: that one
	// may land yet, until a step commits or the cleanup fences it. A
	// retake of the same item replaces its entry.
	w.taken = slices.DeleteFunc(w.taken, func(a takeAttempt) bool { return bytes.Equal(a.item.Key, p.Key) })
	w.taken = append(w.taken, takeAttempt{item: kv.KeyValue{Key: bytes.Clone(p.Key), Value: bytes.Clone(p.Value)}, rec: rec})
}

// sleep blocks until a watch fires, the request is due for renewal, or ctx
// ends (then it returns ctx's error).
func (w *waiter[T]) sleep(ctx context.Context) error {
	d := w.renewAt.Sub(w.s.st.now())
	if !w.wait {
		// A plain Dequeue must not block: if the items ran out for the
		// requests ahead while it slept, nothing would wake it.
		d = min(d, recheckNoWait)
	}
	if d <= 0 {
		w.cancelWatches()
		return nil
	}
	slept := time.Now()
	defer func() {
		w.s.st.stats.sleeps.Add(1)
		w.s.st.stats.sleepNanos.Add(int64(time.Since(slept)))
	}()
	wctx, cancel := context.WithTimeout(ctx, d)
	type firing struct {
		i   int
		err error
	}
	fired := make(chan firing, len(w.watches))
	for i, wt := range w.watches {
		go func() { fired <- firing{i, wt.Wait(wctx)} }()
	}
	var werr error
	select {
	case f := <-fired:
		werr = f.err
		// The waiter's own request key is always the first watch.
		w.ownFired = f.i == 0 && f.err == nil
	case <-wctx.Done():
	}
	cancel()
	w.cancelWatches()
	w.s.st.point("woke")
	if err := ctx.Err(); err != nil {
		return err
	}
	if werr == nil || errors.Is(werr, context.DeadlineExceeded) || errors.Is(werr, context.Canceled) {
		w.watchFail = 0
		return nil
	}
	// A watch that fails at once (too many watches, ...) must not make the
	// waiter spin: back off, up to a second.
	w.watchFail = min(max(2*w.watchFail, time.Millisecond), time.Second)
	return pause(ctx, w.watchFail)
}
