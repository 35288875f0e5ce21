package memdb

import (
	"errors"
	"math"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A transaction's commit, and its retries (OnError, Reset, Cancel).

// Commit sends the transaction's writes to the commit step. See the package
// documentation for latency, faults and interrupted commits.
func (tx *transaction) Commit() error {
	tx.mu.Lock()
	if err := tx.checkLocked(); err != nil {
		tx.failWatchesLocked(err)
		tx.failStampLocked(err)
		tx.mu.Unlock()
		return err
	}
	// Started before it waits for the reads issued before it, as FDB's
	// (RYWImpl::commit sets commitStarted, then waits on resetPromise ||
	// reading, fdbclient/ReadYourWrites.actor.cpp): an operation issued
	// meanwhile, from another goroutine, fails with used_during_commit
	// (checkUsedDuringCommit), and so does the commit, having sent
	// nothing. A Reset meanwhile fails it with transaction_cancelled.
	tx.commitStarted = true
	gen := tx.gen
	tx.awaitReadsLocked()
	if tx.gen != gen {
		tx.mu.Unlock()
		return kv.ErrTransactionCancelled
	}
	if err := tx.cancelledLocked(); err != nil {
		tx.failWatchesLocked(err)
		tx.failStampLocked(err)
		tx.mu.Unlock()
		return err
	}
	if x := tx.x; x != nil && x.readErr != 0 {
		// A read of this transaction failed: its commit fails with the
		// read's error (see readFailedLocked), having sent nothing.
		err := kv.Error{Code: int(x.readErr)}
		tx.failWatchesLocked(err)
		tx.failStampLocked(err)
		tx.mu.Unlock()
		return err
	}
	writes := tx.writes // Reset replaces tx.writes; the commit keeps this one
	req := &commitReq{
		hasRV:   tx.rvState == rvHave,
		rv:      tx.rv,
		grvTime: tx.grvTime,
		reads:   tx.reads,
		writes:  &writes,
		clears:  tx.clearsLocked(),
	}
	if x := tx.x; x != nil {
		req.wconf, req.vsKeys, req.watches = x.wconf, x.vsKeys, x.watches
		x.watches = nil
	}
	if !tx.mutated {
		err := tx.commitReadOnlyLocked(req)
		tx.mu.Unlock()
		return err
	}
	if tx.size > sizeCheckFrom && tx.commitSizeLocked() > maxTxSize {
		for _, w := range req.watches { // taken from x.watches above
			w.finish(kv.ErrTransactionTooLarge)
		}
		tx.failStampLocked(errInvalidVersion)
		tx.mu.Unlock()
		return kv.ErrTransactionTooLarge
	}
	if tx.rvState != rvHave && tx.db.readFaultsOn.Load() || tx.rvState == rvFailed {
		// FDB's commit waits for the transaction's read version, requesting
		// one if it has none (tryCommit waits for startTransaction,
		// fdbclient/NativeAPI.actor.cpp): a failed request fails the
		// commit, having sent nothing. With a latency model, send waits for
		// the request.
		var err error
		if tx.rvState == rvFailed {
			err = tx.rvErrLocked()
		} else if !tx.db.latency {
			err = tx.db.grvFault()
		}
		if err != nil {
			for _, w := range req.watches {
				w.finish(err)
			}
			tx.failStampLocked(errInvalidVersion)
			tx.mu.Unlock()
			return err
		}
	}
	if db := tx.db; !db.latency && !db.faultsOn.Load() {
		// Nothing to wait for (send would run the commit step at once):
		// the step runs with tx.mu held, which it may be since tx.mu is
		// taken before db.mu (as by reads). That spares unlocking and
		// relocking tx.mu, and the step drops the read version's
		// registration with the same lock round trip as its garbage
		// collection: no Reset can unregister it meanwhile. Nothing can be
		// issued during the commit, so nothing fails it with
		// used_during_commit.
		req.dropRV = tx.rvReg
		res := db.commitStep(req, nil, faultNone)
		if res.dropped {
			tx.rvReg = false
		}
		err := tx.finishCommitLocked(req, res)
		tx.mu.Unlock()
		return err
	}
	tx.committing = true
	var late *commitReq
	if tx.db.faultsOn.Load() {
		late = tx.lateCopyLocked()
	}
	tx.mu.Unlock()

	res := tx.send(req, late, gen)

	tx.mu.Lock()
	defer tx.mu.Unlock()
	if res.err != nil {
		for _, w := range req.watches {
			w.finish(res.err)
		}
	}
	if tx.gen != gen {
		return res.err
	}
	tx.committing = false
	if tx.cancelled && errors.Is(tx.x.cancelErr, kv.ErrUsedDuringCommit) && !errors.Is(res.err, kv.ErrUsedDuringCommit) {
		// An operation issued during the commit failed it, whatever the
		// commit step decided: like FDB's, the commit may have applied.
		if res.err == nil || kv.MaybeCommitted(res.err) {
			res.err = kv.CommitInterrupted(kv.ErrUsedDuringCommit)
		} else {
			res.err = kv.ErrUsedDuringCommit
		}
	}
	return tx.finishCommitLocked(req, res)
}

// finishCommitLocked records the outcome of the commit step: on failure,
// the transaction's watches fail with the error, and its versionstamp with
// transaction_invalid_version (errInvalidVersion), or with the
// cancellation's error if one interrupted the commit.
func (tx *transaction) finishCommitLocked(req *commitReq, res commitResult) error {
	if res.applied && tx.rvState == rvNone {
		// A blind write had no read version: FDB's commit obtains one
		// first (tryCommit: trState->startTransaction(FLAG_CAUSAL_READ_RISKY),
		// fdbclient/NativeAPI.actor.cpp), and GetReadVersion answers with
		// it afterwards, a version before the commit's. It is not
		// registered: no read can use it (every read now fails with
		// used_during_commit).
		tx.rv, tx.grvTime, tx.rvState = res.rv, res.rvTime, rvHave
	}
	if res.err != nil {
		for _, w := range req.watches {
			w.finish(res.err)
		}
		if tx.cancelled {
			// Interrupted in flight: FDB's versionstamp future waits on
			// resetPromise too (ReadYourWritesTransaction::
			// getVersionstamp), which the cancellation set first.
			tx.failStampLocked(tx.x.cancelErr)
		} else {
			tx.failStampLocked(errInvalidVersion)
		}
		return res.err
	}
	tx.committed = true
	tx.dropRVLocked()
	tx.commitVer = res.version
	if x := tx.x; x != nil && x.vsf != nil {
		stamp := versionstamp(res.version)
		x.vsf.resolve(stamp[:], nil)
	}
	return nil
}

// lateCopyLocked returns a commit request of the transaction's state, for
// a commit that lands after Commit returned (HoldNextCommitLate). It is
// built from the transaction's fields, not from Commit's request, whose
// write map is Commit's own copy: that would escape to the heap on every
// commit for the sake of this rare one. Its watches are left out: they
// fail with the interruption.
func (tx *transaction) lateCopyLocked() *commitReq {
	w := tx.writes
	r := &commitReq{hasRV: tx.rvState == rvHave, rv: tx.rv, grvTime: tx.grvTime,
		reads: tx.reads, writes: &w, clears: tx.clearsLocked()}
	if x := tx.x; x != nil {
		r.wconf, r.vsKeys = x.wconf, x.vsKeys
	}
	return r
}

// send waits out the commit's latency and runs the commit step. late, if
// not nil, is the request to land later should a late hold interrupt it
// (see lateCopyLocked). gen is the transaction's generation when Commit
// started.
func (tx *transaction) send(req, late *commitReq, gen uint64) commitResult {
	db := tx.db
	if db.latency && !req.hasRV {
		// FDB's client obtains a read version for a transaction that has
		// none before it commits (NativeAPI commitMutations:
		// getReadVersion(FLAG_CAUSAL_READ_RISKY)), so a blind write pays a
		// GRV round trip first: the commit waits for the read version (or
		// for the request already in flight) and is resolved at it. Nothing
		// has been sent if that wait is cancelled.
		rv, grvTime, err := tx.awaitReadVersion(gen, grvForCommit)
		if err != nil {
			return commitResult{err: err}
		}
		req.hasRV, req.rv, req.grvTime = true, rv, grvTime
		if late != nil {
			late.hasRV, late.rv, late.grvTime = true, rv, grvTime
		}
	}
	hold := db.takeHold()
	forced, fault, extra := db.takeFaults(true)
	delay := extra
	if db.latency {
		delay += db.rng.sample(db.cfg.latency.Commit)
	}
	if delay <= 0 && hold == nil {
		return db.commitStep(req, forced, fault)
	}
	db.stats.inFlight.Add(1)
	// A reset interrupts the commit in flight as a cancellation does:
	// FDB's RYWImpl::commit waits on resetPromise || tr.commit(), and
	// resetRyow fails the promise with transaction_cancelled while the
	// request goes on (fdbclient/ReadYourWrites.actor.cpp).
	cerr := tx.sleepIn(delay, &gen)
	if cerr == nil && hold != nil {
		cerr = tx.waitHold(hold, gen)
	}
	db.stats.inFlight.Add(-1)
	if cerr == nil {
		res := db.commitStep(req, forced, fault)
		if hold != nil && hold.late {
			close(hold.done)
		}
		return res
	}
	// A commit that goes on lands (or conflicts) later: at a late hold's
	// release (HoldNextCommitLate), or up to maxLateLanding from now
	// (Faults.LateLanding).
	var at <-chan struct{}
	var done chan struct{}
	switch {
	case late == nil:
	case hold != nil && hold.late:
		at, done = hold.release, hold.done
	case db.drawLateLanding():
		ch := make(chan struct{})
		time.AfterFunc(time.Duration(db.rng.float64()*float64(maxLateLanding)), func() { close(ch) })
		at = ch
	}
	if at != nil {
		// The read version stays registered until the commit lands: its
		// transaction may be reset (which unregisters it) and others
		// commit, and the resolution needs the history since it. FDB's
		// resolver fails a commit as too old only past the MVCC window
		// (ConflictBatch::addTransaction, fdbserver/SkipList.cpp),
		// whatever its client did since.
		late.kept = late.hasRV && db.readers.retain(late.rv)
		db.landLate(late, at, done)
		db.stats.interrupted.Add(1)
		return commitResult{err: kv.CommitInterrupted(cerr)}
	}
	// The commit was in flight: like a real cluster, it may or may not be
	// applied.
	var res commitResult
	if db.rng.float64() < 0.5 {
		applied := *req
		applied.watches = nil // they fail with the interruption
		res = db.commitStep(&applied, nil, faultNone)
	}
	if hold != nil && hold.late {
		close(hold.done) // no late copy (the hold came after Commit looked)
	}
	db.stats.interrupted.Add(1)
	return commitResult{err: kv.CommitInterrupted(cerr), applied: res.applied, rv: res.rv, rvTime: res.rvTime}
}

// landLate runs the commit step of late, a commit interrupted in flight,
// once at is closed (unless the DB closes first), then closes done if it
// is not nil. AwaitLateLandings waits for it.
func (db *DB) landLate(late *commitReq, at <-chan struct{}, done chan struct{}) {
	db.lateLandings.Add(1)
	go func() {
		defer db.lateLandings.Done()
		if done != nil {
			defer close(done)
		}
		select {
		case <-at:
			db.commitStep(late, nil, faultNone)
		case <-db.closeCh:
		}
		if late.kept {
			db.readers.unregister(late.rv)
		}
	}()
}

// waitHold waits until h is released or the transaction is cancelled or
// reset since generation gen.
func (tx *transaction) waitHold(h *commitHold, gen uint64) error {
	tx.mu.Lock()
	if tx.gen != gen {
		tx.mu.Unlock()
		close(h.held)
		return kv.ErrTransactionCancelled
	}
	ch, reset := tx.cancelChanLocked(), tx.resetChanLocked()
	tx.mu.Unlock()
	close(h.held)
	select {
	case <-h.release:
	case <-ch:
	case <-reset:
	case <-tx.db.closeCh:
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.cancelledLocked(); err != nil {
		return err
	}
	if tx.gen != gen {
		return kv.ErrTransactionCancelled
	}
	return nil
}

// commitReadOnlyLocked "commits" a transaction that wrote nothing: nothing
// is sent, it always succeeds (unless FailNextCommit says otherwise), and
// its watches are registered.
func (tx *transaction) commitReadOnlyLocked(req *commitReq) error {
	db := tx.db
	if forced, _, _ := db.takeFaults(false); forced != nil {
		db.stats.injectedForced.Add(1)
		for _, w := range req.watches {
			w.finish(forced.err)
		}
		tx.failStampLocked(forced.err)
		return forced.err
	}
	if len(req.watches) > 0 {
		db.mu.Lock()
		db.registerWatchesLocked(req)
		db.mu.Unlock()
	}
	db.stats.readOnlyCommits.Add(1)
	tx.committed = true
	tx.dropRVLocked()
	tx.commitVer = -1
	tx.failStampLocked(errNoCommitVersion)
	return nil
}

// ---- retries ----

// futureVersionRetryDelay is FDB's FUTURE_VERSION_RETRY_DELAY knob
// (fdbclient/ClientKnobs.cpp): how long OnError waits before retrying
// transaction_too_old and future_version.
const futureVersionRetryDelay = 10 * time.Millisecond

// OnError resets the transaction and backs off if err is retryable (a
// fixed 10 ms for transaction_too_old and future_version, as FDB waits;
// otherwise a random share of a backoff that doubles per retry);
// otherwise, or once the retry limit is reached, it returns err and leaves
// the transaction cancelled until Reset (an error without an FDB code
// comes back unchanged and changes nothing), as FDB does from API version 610
// (RYWImpl::onError, fdbclient/ReadYourWrites.actor.cpp: its catch sends
// transaction_cancelled to resetPromise). Watches that a retry drops fail
// with kv.ErrTransactionCancelled (Transaction::onError resets, and
// resetImpl calls cancelWatches, whose default error is
// transaction_cancelled: fdbclient/NativeAPI.actor.cpp). A Cancel, a
// timeout or a Reset during the backoff ends it with its error
// (transaction_cancelled for a Reset, which then leaves the transaction
// cancelled: see resetLocked).
//
// cluster_version_changed (1039) is retried at once whatever the retry
// limit, and the retry starts the count, the backoff and the timeout
// afresh: only FDB's multi-version client reports it, and its onError
// answers it by replacing the transaction with a new one, without calling
// the inner onError (MultiVersionTransaction::onError and
// updateTransaction, fdbclient/MultiVersionTransaction.actor.cpp).
func (tx *transaction) OnError(err error) error {
	if err == nil {
		return nil
	}
	var ke kv.Error
	if !errors.As(err, &ke) {
		// Not an FDB error: FDB's onError takes only those (fdbkv returns
		// such an error without calling it), so nothing changes, on a
		// cancelled transaction too.
		return err
	}
	tx.mu.Lock()
	if cerr := tx.cancelledLocked(); cerr != nil {
		tx.mu.Unlock()
		if errorCode(err) == errorCode(cerr) {
			return err
		}
		return cerr
	}
	x := tx.cold()
	versionChanged := errorCode(err) == kv.ErrClusterVersionChanged.Code
	if !kv.IsRetryable(err) || (!versionChanged && x.retryLimit >= 0 && x.retries >= x.retryLimit) {
		tx.cancelLocked(kv.ErrTransactionCancelled)
		tx.mu.Unlock()
		return err
	}
	limit := tx.db.cfg.backoffMax
	if x.delaySet {
		// The option replaces the default cap, 0 included
		// (Transaction::getBackoff, fdbclient/NativeAPI.actor.cpp:
		// backoff = min(backoff * growth, options.maxBackoff)). memdb caps
		// the first delay too; FDB's is the initial backoff (10 ms).
		limit = x.maxRetryDelay
	}
	var delay time.Duration
	switch c := errorCode(err); {
	case versionChanged:
		// No backoff: the multi-version client retries at once.
	case c == kv.ErrTransactionTooOld.Code || c == kv.ErrFutureVersion.Code:
		// A read version too old or too new: FDB retries after a fixed
		// FUTURE_VERSION_RETRY_DELAY (10 ms) under the cap, without
		// jitter, and leaves the backoff as it was (Transaction::onError,
		// fdbclient/NativeAPI.actor.cpp; fdbclient/ClientKnobs.cpp).
		delay = min(futureVersionRetryDelay, limit)
	default:
		b := x.backoff
		if b == 0 {
			b = tx.db.cfg.backoffInitial
		}
		cur := min(b, limit)
		x.backoff = min(b*2, limit)
		delay = time.Duration(tx.db.rng.float64() * float64(cur))
	}
	if x.retries < math.MaxInt32 {
		x.retries++
	}
	gen := tx.gen
	x.backingOff = true
	tx.mu.Unlock()
	tx.db.stats.retries.Add(1)

	if f := tx.db.backingOff; f != nil {
		f()
	}
	serr := tx.sleepIn(delay, &gen)
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.gen != gen {
		// A Reset during the backoff ended it, and left the transaction
		// cancelled (resetLocked): FDB's RYWImpl::onError waits on
		// resetPromise || tr.onError(e), so resetRyow's
		// transaction_cancelled ends it, and its catch then sets the new
		// resetPromise (API 610 and later). Nothing of the transaction
		// since the Reset is touched.
		return kv.ErrTransactionCancelled
	}
	x.backingOff = false
	if serr != nil {
		return serr
	}
	if err := tx.cancelledLocked(); err != nil {
		return err
	}
	tx.resetLocked(false, kv.ErrTransactionCancelled)
	if versionChanged {
		// A new transaction: its retry count and backoff start again, and
		// its timeout (re-applied as a persistent option) counts from now.
		x.retries, x.backoff = 0, 0
		tx.stampCreation()
		tx.armTimerLocked()
	}
	return nil
}

// Reset returns the transaction to its initial state and clears its
// options, as FDB's reset does.
func (tx *transaction) Reset() {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.resetLocked(true, kv.ErrTransactionCancelled)
}

// resetLocked clears the transaction's state. full also clears the options
// and restarts the retry count, backoff and timeout clock (Reset, not
// OnError). Watches not
// yet registered fail with watchErr.
func (tx *transaction) resetLocked(full bool, watchErr error) {
	tx.gen++
	tx.failWatchesLocked(watchErr)
	tx.failStampLocked(kv.ErrTransactionCancelled)
	if x := tx.x; x != nil {
		// The reads in flight no longer count for a commit, and they and
		// a Commit waiting for them fail with transaction_cancelled at
		// once, as FDB's resetRyow starts a new reading and fails the old
		// resetPromise, on which both wait
		// (fdbclient/ReadYourWrites.actor.cpp).
		x.reading = 0
		x.wakeReadWaiterLocked()
		if x.resetCh != nil {
			close(x.resetCh)
			x.resetCh = nil
		}
		x.vsf, x.rvCh, x.err = nil, nil, nil
		x.clears, x.vsKeys, x.wconf, x.unreadable, x.readErr, x.view = nil, nil, nil, nil, 0, nil
	}
	tx.dropRVLocked()
	tx.rvState, tx.rv, tx.grvTime = rvNone, 0, 0
	tx.committing, tx.committed, tx.commitStarted = false, false, false
	tx.writes = writeMap{}
	tx.reads = nil
	tx.size, tx.mutated = 0, false
	tx.rc, tx.opRoom = nil, nil
	tx.roomAsked.Store(false)
	if full {
		// FDB's ReadYourWritesTransaction::reset clears the options
		// (persistentOptions.clear(), options.reset; only database defaults
		// are re-applied, and memdb has none), while onError's resetRyow
		// re-applies them.
		if x := tx.x; x != nil {
			x.retries, x.retryLimit, x.backoff = 0, -1, 0
			x.timeout, x.maxRetryDelay, x.delaySet = 0, 0, false
		}
		tx.stampCreation()
		if tx.ctx.Err() == nil && !tx.db.closedFlag.Load() {
			if x := tx.x; x != nil {
				tx.cancelled, x.cancelErr, x.cancelCh = false, nil, nil
			}
		}
		tx.armTimerLocked()
		if x := tx.x; x != nil && x.backingOff {
			// An OnError is waiting out its backoff: the reset ends it
			// with transaction_cancelled (OnError), and leaves the
			// transaction cancelled, as FDB's does: RYWImpl::onError's
			// catch finds the promise that resetRyow made unset and fails
			// it with transaction_cancelled (API 610 and later), all
			// within the reset. (Under the multi-version client,
			// MultiVersionTransaction::reset makes a new inner
			// transaction instead, not cancelled.)
			x.backingOff = false
			tx.cancelLocked(kv.ErrTransactionCancelled)
		}
	}
}

// Cancel cancels the transaction: pending and later operations fail with
// kv.ErrTransactionCancelled until Reset.
func (tx *transaction) Cancel() {
	tx.cancelWith(kv.ErrTransactionCancelled)
}
