package memdb

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Read version states.
const (
	rvNone uint8 = iota
	rvPending
	rvHave
	rvFailed // the request failed (injected): x.rvErr until a reset
)

// transaction implements kv.Transaction.
type transaction struct {
	db   *DB
	ctx  context.Context
	stop func() bool // releases the context.AfterFunc, if any

	mu  sync.Mutex
	gen uint64 // incremented by every reset: stale asynchronous work checks it

	createdAt time.Duration // on db.clock (real time: see createdRealLocked)

	// x holds what few transactions use; it is allocated on first use.
	x *txCold

	// Read version (and rvState, below).
	rv      int64
	grvTime time.Duration // on db.clock

	// commitVer is the version of the last commit that succeeded, -1 for
	// a read-only one or none yet. Reset and OnError keep it, as FDB's
	// TransactionState::cloneAndReset copies committedVersion
	// (fdbclient/NativeAPI.actor.cpp).
	commitVer int64

	writes writeMap
	reads  []krange
	size   int64

	// rc is the chain of the key last read from the store (nil if it was
	// not stored), the hint for a write of that key (wentry.c).
	rc *chain
	// opRoom is room for the next atomic operation's entry, given by the
	// attempt's first range read (rangeResult.opRoom), or nil.
	opRoom *opEntry

	// Inline storage for the first attempt's small buffers, which saves
	// allocations on the fast path. Retries allocate afresh, since a commit
	// in flight may still reference the first attempt's buffers.
	readsBuf [2]krange
	smallBuf [2]*wentry

	// Inline objects, each handed out at most once in the transaction's
	// life (never reused, so whoever holds one keeps it intact): the first
	// point read's future, the first written entry, and an arena for
	// conflict range keys, which nothing outside the transaction retains.
	vf    valueFuture
	ent   wentry
	arena [arenaSize]byte
	// spill continues the arena once it is full: blocks allocated on
	// demand, each twice the previous one (up to spillMax), handed out
	// likewise once; len(spill) is the part handed out.
	spill bumpBlock

	// timed is set once a timeout timer was armed (x.timer), so that
	// release locks tx.mu only then.
	timed atomic.Bool
	// roomAsked is set once a range read of the attempt allocated room
	// for an atomic operation's entry (opRoom), so that only one does.
	roomAsked atomic.Bool

	// Small state, kept together to save padding (vfUsed, entUsed and
	// arenaUsed go with vf, ent and arena above).
	vfUsed     bool
	entUsed    bool
	arenaUsed  uint8
	rvState    uint8
	rvReg      bool // rv is registered in db.readers
	committing bool
	committed  bool
	// commitStarted is set when Commit starts and stays set, whatever the
	// commit's outcome, until Reset or OnError's reset, as FDB's is (API
	// 410 and later: RYWImpl::commit clears it only for older versions).
	commitStarted bool
	mutated       bool
	cancelled     bool // x.cancelErr is set
}

// txCold is the part of a transaction that few transactions use: retry
// state, timeouts, the retry delay cap, cancellation waits, versionstamps,
// explicit write conflict ranges and watches. It keeps the transaction
// itself small.
type txCold struct {
	// err is the sticky error of an invalid write.
	err error

	// Options and retry state; they survive OnError's reset, not Reset.
	retryLimit int32 // -1: none (SetRetryLimit refuses values over MaxInt32)
	retries    int32 // OnError's retries so far (it stops at MaxInt32)
	// reading counts the reads in flight (with a latency model); readsDone
	// is closed when it drops to zero, for a Commit waiting for them.
	// (The int32 fields and delaySet keep txCold in the 288-byte size
	// class.)
	reading  int32
	delaySet bool // max_retry_delay was set (0 included)
	// backingOff is set while an OnError waits out its backoff: a Reset
	// meanwhile leaves the transaction cancelled (resetLocked).
	backingOff bool
	// readErr is the code of the error of the first read that failed
	// (readFailedLocked), which Commit returns; 0 if none.
	readErr uint16
	// rvErr is the code of the read version request's injected failure
	// (rvFailed).
	rvErr   uint16
	backoff time.Duration // the next retry's delay cap; 0: the DB's initial one

	// cancelErr is the cancellation's error (Cancel, the context, the
	// timeout or Close), set with transaction.cancelled; cancelCh is made
	// on demand and closed on cancellation.
	cancelErr error
	cancelCh  chan struct{}

	// createdReal is the creation time in real time when the DB's clock
	// is not the real one (see createdRealLocked); zero until needed.
	createdReal time.Time

	timeout       time.Duration
	maxRetryDelay time.Duration // the option's value, if delaySet
	timer         *time.Timer
	timerGen      uint64
	vsf           *stampFuture
	rvCh          chan struct{} // closed when a pending GRV completes

	clears    clearSet
	vsKeys    []vsKeyOp
	wconf     []krange
	watches   []*watch
	readsDone chan struct{} // see reading
	// resetCh is made on demand and closed by the next reset, which ends
	// the waits of the work then in flight (sleepIn).
	resetCh chan struct{}
	// unreadable are the ranges where the versionstamped keys may land,
	// less what later clears covered; reads that reach them fail with
	// accessed_unreadable.
	unreadable []krange
	// view is what the range reads in flight under a latency model see of
	// the transaction's writes (see ownView); nil when none is held.
	view *ownView
}

// ownView is the transaction's own writes as the range reads issued since
// its last write see them: a read under a latency model is served after
// its delay, and must not see the writes made meanwhile, as FoundationDB's
// read walks the write map at the version it had when the read was issued
// (WriteMap::iterator takes the map's version, and later writes make new
// versions of its persistent tree: fdbclient/include/fdbclient/
// WriteMap.h). While frozen is false the view is the transaction's current
// writes; the first write made while a read holds it freezes it, copying
// them, and later reads get a new one.
type ownView struct {
	refs   int // reads in flight holding it
	frozen bool
	writes writeMap
	clears clearSet
	unread []krange // the unreadable ranges (never changed in place)
}

// holdViewLocked returns the view a range read issued now sees, held until
// releaseViewLocked.
func (tx *transaction) holdViewLocked() *ownView {
	x := tx.cold()
	if x.view == nil {
		x.view = &ownView{}
	}
	x.view.refs++
	return x.view
}

// releaseViewLocked lets go of v once its read is served.
func (tx *transaction) releaseViewLocked(v *ownView) {
	if v != nil {
		v.refs--
	}
}

// freezeViewLocked is called before each write: a view that reads in
// flight hold keeps the writes as they are now.
func (tx *transaction) freezeViewLocked() {
	x := tx.x
	if x == nil || x.view == nil {
		return
	}
	if v := x.view; v.refs > 0 {
		v.writes, v.clears, v.unread, v.frozen = tx.writes.clone(), slices.Clone(x.clears), x.unreadable, true
	}
	x.view = nil
}

// ownStateLocked returns the writes and clears a read holding v (nil: a
// read served at once) merges with, and the unreadable ranges it checks.
func (tx *transaction) ownStateLocked(v *ownView) (*writeMap, clearSet, []krange) {
	if v != nil && v.frozen {
		return &v.writes, v.clears, v.unread
	}
	return &tx.writes, tx.clearsLocked(), tx.unreadableNowLocked()
}

// clearsLocked returns the ranges cleared by the transaction.
func (tx *transaction) clearsLocked() clearSet {
	if tx.x == nil {
		return nil
	}
	return tx.x.clears
}

// cold returns tx.x, allocating it if needed.
func (tx *transaction) cold() *txCold {
	if tx.x == nil {
		tx.x = &txCold{retryLimit: -1}
	}
	return tx.x
}

// arenaSize is the size of a transaction's inline arena; spillSize that
// of each block it continues in.
const (
	arenaSize = 48
	spillMin  = 64
	spillMax  = 1024
)

// newFutureLocked returns a new valueFuture.
func (tx *transaction) newFutureLocked() *valueFuture {
	if !tx.vfUsed {
		tx.vfUsed = true
		return &tx.vf
	}
	return &valueFuture{}
}

// allocLocked returns n zero bytes for data that only the transaction and
// its commit reference (read conflict range keys): from the inline arena
// while it lasts, then from spill blocks. Arena bytes are handed out once
// and never reused (a commit in flight, or a result, may reference them).
func (tx *transaction) allocLocked(n int) []byte {
	if u := int(tx.arenaUsed); n <= arenaSize-u {
		tx.arenaUsed += uint8(n)
		return tx.arena[u : u+n : u+n]
	}
	if out, ok := tx.spill.take(n); ok {
		return out
	}
	size := min(max(2*cap(tx.spill), spillMin), spillMax)
	if n > size/2 {
		return make([]byte, n)
	}
	tx.spill = make(bumpBlock, 0, size)
	out, _ := tx.spill.take(n)
	return out
}

// copyLocked returns a copy of b from allocLocked.
func (tx *transaction) copyLocked(b []byte) []byte {
	out := tx.allocLocked(len(b))
	copy(out, b)
	return out
}

// afterLocked returns k + \x00 from allocLocked.
func (tx *transaction) afterLocked(k []byte) []byte {
	out := tx.allocLocked(len(k) + 1)
	copy(out, k)
	return out
}

// newEntryLocked allocates an entry whose key, key+\x00 and payload share
// one allocation; the payload part is returned. The entry takes the chain
// hint if the transaction last read its key.
//
// The first entry is the transaction's inline one. The entry that would
// fill the writes' inline array (tx.smallBuf) comes with room for
// entryRoom entries in its allocation, where the writes then move: a
// queue's operation writes an item, its journal slot and a counter, and
// the third would otherwise grow the array, an allocation of its own.
func (tx *transaction) newEntryLocked(key, payload []byte) (*wentry, []byte) {
	e := tx.entryLocked()
	return e, tx.initEntryLocked(e, key, payload, nil)
}

// entryLocked returns a zero entry: see newEntryLocked.
func (tx *transaction) entryLocked() *wentry {
	switch m := &tx.writes; {
	case !tx.entUsed:
		tx.entUsed = true
		return &tx.ent
	case m.big == nil && len(m.small)+1 == cap(m.small) && cap(m.small) < entryRoom:
		a := new(struct {
			e    wentry
			room [entryRoom]*wentry
		})
		for i, x := range m.small { // one store each: see moveVersions
			a.room[i] = x
		}
		m.small = a.room[:len(m.small)]
		return &a.e
	}
	return new(wentry)
}

// entryRoom is the room for the writes' entries that an entry brings
// (newEntryLocked): the entry is then 120 bytes (a 128-byte size class).
const entryRoom = 4

// newOpEntryLocked is newEntryLocked for an atomic operation: the entry
// comes with room for its first operation (e.ops, empty) and, when they
// are small (a counter's), its key and payload, all in one allocation.
// The entry's memory then holds its key: whatever outlives the commit
// must copy the key (wentry.inline).
func (tx *transaction) newOpEntryLocked(key, payload []byte) (*wentry, []byte) {
	n := len(key) + 1 + len(payload)
	if n > opInline {
		a := new(struct {
			e  wentry
			op [1]atomicOp
		})
		p := tx.initEntryLocked(&a.e, key, payload, nil)
		a.e.ops = a.op[:0:1]
		return &a.e, p
	}
	a := tx.opRoom
	if a != nil {
		tx.opRoom = nil
	} else {
		a = new(opEntry)
	}
	p := tx.initEntryLocked(&a.e, key, payload, a.buf[:n:n])
	a.e.ops = a.op[:0:1]
	a.e.inline = true
	return &a.e, p
}

// opEntry is an atomic operation's entry with room for its first
// operation and, when they are small, its key and operand.
type opEntry struct {
	e   wentry
	op  [1]atomicOp
	buf [opInline]byte
}

// opInline is the room for key, \x00 and operand in an atomic operation's
// entry (the entry is then 160 bytes, a size class).
const opInline = 40

// initEntryLocked sets up e for key (see newEntryLocked), in buf if it
// is not nil (zero, len(key)+1+len(payload) bytes).
func (tx *transaction) initEntryLocked(e *wentry, key, payload, buf []byte) []byte {
	n := len(key)
	if buf == nil {
		buf = make([]byte, n+1+len(payload))
	}
	copy(buf, key)
	copy(buf[n+1:], payload)
	*e = wentry{key: buf[: n : n+1]} // buf[n] is the \x00 of end()
	if rc := tx.rc; rc != nil && bytes.Equal(rc.key, key) {
		e.c = rc
	}
	return buf[n+1:]
}

var _ kv.Transaction = (*transaction)(nil)

func (db *DB) newTransaction(ctx context.Context) (*transaction, error) {
	if db.closedFlag.Load() {
		return nil, ErrClosed
	}
	if ctx == nil {
		ctx = context.Background()
	}
	db.stats.transactions.Add(1)
	tx := &transaction{db: db, ctx: ctx, commitVer: -1}
	tx.stampCreation()
	tx.reads = tx.readsBuf[:0]
	tx.writes.small = tx.smallBuf[:0]
	if ctx.Done() != nil {
		if err := ctx.Err(); err != nil {
			tx.cancelled, tx.cold().cancelErr = true, kv.ErrTransactionCancelled
		} else {
			tx.stop = context.AfterFunc(ctx, func() { tx.cancelWith(kv.ErrTransactionCancelled) })
		}
	}
	return tx, nil
}

// stampCreation marks the transaction as just created (or Reset): its
// timeout counts from now on the DB's clock, as FDB's counts from
// creationTime, which its constructor and reset set
// (ReadYourWritesTransaction::resetTimeout, fdbclient/
// ReadYourWrites.actor.cpp), whatever the transaction did before
// SetTimeout.
func (tx *transaction) stampCreation() {
	tx.createdAt = tx.db.clock.Now()
	if tx.x != nil {
		tx.x.createdReal = time.Time{}
	}
}

// createdRealLocked returns the creation time in real time, for the
// timeout's timer. With a Clock other than the real one, the real time is
// taken at the first call (a SetTimeout): the timer then counts from
// there, while the DB's clock still counts from the creation
// (cancelledLocked).
func (tx *transaction) createdRealLocked() time.Time {
	if tx.db.clock.real {
		return tx.db.clock.at(tx.createdAt)
	}
	x := tx.cold()
	if x.createdReal.IsZero() {
		x.createdReal = time.Now()
	}
	return x.createdReal
}

// release drops the transaction's context binding and timer.
func (tx *transaction) release() {
	if tx.stop != nil {
		tx.stop()
	}
	if !tx.timed.Load() {
		return // no timer was ever armed: nothing to lock tx.mu for
	}
	tx.mu.Lock()
	if x := tx.x; x != nil && x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
	tx.mu.Unlock()
}

// cancelWith cancels the transaction with err unless it is cancelled
// already.
func (tx *transaction) cancelWith(err error) {
	tx.mu.Lock()
	tx.cancelLocked(err)
	tx.mu.Unlock()
}

func (tx *transaction) cancelLocked(err error) {
	if tx.cancelled {
		return
	}
	x := tx.cold()
	tx.cancelled, x.cancelErr = true, err
	if x.cancelCh != nil {
		close(x.cancelCh)
	}
	if !tx.committing {
		// A commit in flight resolves both with its outcome. Otherwise they
		// fail now: FDB's versionstamp future is waitOrError(...,
		// resetPromise) (ReadYourWritesTransaction::getVersionstamp).
		tx.failWatchesLocked(err)
		tx.failStampLocked(err)
	}
}

// cancelChanLocked returns a channel closed when the transaction is
// cancelled.
func (tx *transaction) cancelChanLocked() chan struct{} {
	x := tx.cold()
	if x.cancelCh == nil {
		x.cancelCh = make(chan struct{})
		if tx.cancelled {
			close(x.cancelCh)
		}
	}
	return x.cancelCh
}

// checkLocked returns the error that stops any operation now. An
// operation issued once a Commit started fails with used_during_commit
// (see usedDuringCommitLocked).
func (tx *transaction) checkLocked() error {
	// FDB's order: the deferred error of an invalid write first
	// (ThreadSafeTransaction's checkDeferredError), then
	// checkUsedDuringCommit, which answers used_during_commit once a
	// commit started, cancelled or not, then the cancellation
	// (resetPromise; ReadYourWritesTransaction::get and the other
	// operations, fdbclient/ReadYourWrites.actor.cpp).
	if x := tx.x; x != nil && x.err != nil {
		return x.err
	}
	cerr := tx.cancelledLocked() // notices a timeout or a closed DB first
	if tx.usedDuringCommitLocked() {
		return kv.ErrUsedDuringCommit
	}
	return cerr
}

// usedDuringCommitLocked reports whether a Commit has started since the
// last reset, and if so cancels the transaction with used_during_commit,
// as FDB's checkUsedDuringCommit does (fdbclient/ReadYourWrites.actor.cpp: it
// sets resetPromise, which RYWImpl::commit waits on together with the
// commit, and which a later OnError returns). The operation that calls it
// fails with used_during_commit, and so does a commit in flight (it may
// have been applied); after a failed commit, so does the OnError that
// would have retried it.
func (tx *transaction) usedDuringCommitLocked() bool {
	if !tx.commitStarted {
		return false
	}
	tx.cancelLocked(kv.ErrUsedDuringCommit)
	return true
}

// startReadLocked counts a read issued in the background.
func (tx *transaction) startReadLocked() {
	tx.cold().reading++
}

// endRead counts a background read issued in generation gen as finished.
// A reset since then has already stopped counting it (resetLocked).
func (tx *transaction) endRead(gen uint64) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.endReadLocked(gen)
}

// endReadLocked is endRead with tx.mu held.
func (tx *transaction) endReadLocked(gen uint64) {
	if tx.gen != gen {
		return
	}
	x := tx.x
	x.reading--
	if x.reading == 0 {
		x.wakeReadWaiterLocked()
	}
}

// wakeReadWaiterLocked wakes a Commit waiting in awaitReadsLocked.
func (x *txCold) wakeReadWaiterLocked() {
	if x.readsDone != nil {
		close(x.readsDone)
		x.readsDone = nil
	}
}

// awaitReadsLocked waits until no read is in flight, as FDB's commit waits
// for the reads issued before it (RYWImpl::commit: wait(ryw->reading)), so
// that their read conflict ranges are part of the commit. It returns early
// if the transaction is cancelled or reset (the caller checks tx.gen).
func (tx *transaction) awaitReadsLocked() {
	for x, gen := tx.x, tx.gen; x != nil && x.reading > 0 && !tx.cancelled && tx.gen == gen; x = tx.x {
		if x.readsDone == nil {
			x.readsDone = make(chan struct{})
		}
		ch, cancel := x.readsDone, tx.cancelChanLocked()
		tx.mu.Unlock()
		if f := tx.db.awaitingReads; f != nil {
			f()
		}
		select {
		case <-ch:
		case <-cancel:
		case <-tx.db.closeCh:
		}
		tx.mu.Lock()
	}
}

// cancelledLocked returns the cancellation error, if any, noticing a
// timeout on the DB's clock and a closed DB.
func (tx *transaction) cancelledLocked() error {
	if !tx.cancelled {
		if tx.db.closedFlag.Load() {
			tx.cancelLocked(ErrClosed)
		} else if x := tx.x; x != nil && x.timeout > 0 {
			if tx.db.clock.Now()-tx.createdAt > x.timeout {
				tx.cancelLocked(kv.ErrTransactionTimedOut)
			}
		}
		if !tx.cancelled {
			return nil
		}
	}
	return tx.x.cancelErr
}

// sleepIn waits d in real time for work of generation *gen in flight (a
// read, the read version request, a commit, OnError's backoff); it
// returns the cancellation error if the transaction is cancelled (or the
// DB closed) first, and transaction_cancelled at once if the transaction
// is reset meanwhile, as FDB's operations wait on resetPromise beside
// their work (see sameGen). With a nil gen, only a cancellation ends it.
func (tx *transaction) sleepIn(d time.Duration, gen *uint64) error {
	tx.mu.Lock()
	if err := tx.cancelledLocked(); err != nil {
		tx.mu.Unlock()
		return err
	}
	var reset chan struct{}
	if gen != nil {
		if tx.gen != *gen {
			tx.mu.Unlock()
			return kv.ErrTransactionCancelled
		}
		reset = tx.resetChanLocked()
	}
	ch := tx.cancelChanLocked()
	tx.mu.Unlock()
	if d > 0 {
		if f := tx.db.sleeping; f != nil && gen != nil {
			f()
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ch:
			t.Stop()
		case <-reset:
			t.Stop()
		case <-tx.db.closeCh:
			t.Stop()
		}
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.cancelledLocked(); err != nil {
		return err
	}
	if gen != nil && tx.gen != *gen {
		return kv.ErrTransactionCancelled
	}
	return nil
}

// resetChanLocked returns a channel that the transaction's next reset
// closes (resetLocked).
func (tx *transaction) resetChanLocked() chan struct{} {
	x := tx.cold()
	if x.resetCh == nil {
		x.resetCh = make(chan struct{})
	}
	return x.resetCh
}

// sameGen returns transaction_cancelled if the transaction was reset
// (Reset, OnError's retry) since generation gen, when a read in flight
// was issued: FoundationDB's reads wait on the transaction's resetPromise
// beside the read itself (readWithConflictRangeRYW and its siblings,
// fdbclient/ReadYourWrites.actor.cpp), and resetRyow sends it
// transaction_cancelled, so a read in flight at a reset fails with it.
func (tx *transaction) sameGen(gen uint64) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.gen != gen {
		return kv.ErrTransactionCancelled
	}
	return nil
}

// deliverableLocked returns the error a read in flight, issued in
// generation gen, fails with when its result is ready: transaction_cancelled
// after a reset since, or the error of a cancellation (Cancel, a timeout,
// an operation during the commit, a closed DB). On FoundationDB the read
// waits on resetPromise beside the read itself (see sameGen), which all of
// these set.
func (tx *transaction) deliverableLocked(gen uint64) error {
	if tx.gen != gen {
		return kv.ErrTransactionCancelled
	}
	return tx.cancelledLocked()
}

// setErrLocked records the first invalid write.
func (tx *transaction) setErrLocked(err error) {
	if x := tx.cold(); x.err == nil {
		x.err = err
	}
}

// ---- read version ----

// obtainRVLocked takes the latest committed version as read version. The
// clock is read first: the version is then at least every version
// committed before that time, which garbage collection relies on.
func (tx *transaction) obtainRVLocked() {
	db := tx.db
	tx.grvTime = db.clock.Now()
	if db.versionAt(tx.grvTime)-db.version.Load() > idleVersions {
		db.advanceIdle(tx.grvTime)
	}
	tx.rv = db.readers.register(&db.version)
	tx.rvReg = true
	tx.rvState = rvHave
}

// grvLocked obtains a read version as obtainRVLocked does, unless the
// request fails (an injected fault, or one that failed before): then the
// transaction keeps the failure (rvFailed) and grvLocked returns it.
func (tx *transaction) grvLocked() error {
	if tx.rvState == rvFailed {
		return tx.rvErrLocked()
	}
	if err := tx.db.grvFault(); err != nil {
		tx.failRVLocked(err)
		return err
	}
	tx.obtainRVLocked()
	return nil
}

// failRVLocked records the read version request's failure with err.
func (tx *transaction) failRVLocked(err error) {
	tx.rvState = rvFailed
	tx.cold().rvErr = uint16(errorCode(err))
}

// rvErrLocked returns the failure of the read version request (rvFailed).
func (tx *transaction) rvErrLocked() error {
	return kv.Error{Code: int(tx.x.rvErr)}
}

// dropRVLocked unregisters the read version once the transaction can no
// longer read at it (committed or reset): see readers.
func (tx *transaction) dropRVLocked() {
	if tx.rvReg {
		tx.rvReg = false
		tx.db.readers.unregister(tx.rv)
	}
}

// readVersion returns the transaction's read version, obtaining one (after
// the GRV latency) if needed. gen is the generation the caller started in.
// A failed request fails the read, and Commit with it (readFailedLocked),
// unless watch: a watch's read fails only the watch.
func (tx *transaction) readVersion(gen uint64, watch bool) (int64, time.Duration, error) {
	if watch {
		return tx.awaitReadVersion(gen, grvForWatch)
	}
	return tx.awaitReadVersion(gen, grvForRead)
}

// Who waits for a read version (awaitReadVersion).
const (
	grvForRead   = iota // a read in flight, which only a cancellation (or Reset) stops
	grvForWatch         // a watch's read: as grvForRead
	grvForCommit        // a Commit in progress: as grvForRead
	grvForAsk           // GetReadVersion: grvCheckLocked
)

// awaitReadVersion is readVersion for the waiter who (grvFor*).
func (tx *transaction) awaitReadVersion(gen uint64, who int) (int64, time.Duration, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for {
		if tx.gen != gen {
			return 0, 0, kv.ErrTransactionCancelled
		}
		var err error
		if who == grvForAsk {
			err = tx.grvCheckLocked()
		} else {
			// A read or commit in flight: its issue was checked, and only
			// a cancellation stops it now (see deliverableLocked), not a
			// Commit started since, which waits for the read.
			err = tx.cancelledLocked()
		}
		if err != nil {
			return 0, 0, err
		}
		switch tx.rvState {
		case rvHave:
			return tx.rv, tx.grvTime, nil
		case rvFailed:
			err := tx.rvErrLocked()
			if who == grvForRead {
				tx.readFailedLocked(err)
			}
			return 0, 0, err
		case rvNone:
			if !tx.db.latency {
				tx.grvLocked() // rvHave or rvFailed
				continue
			}
			tx.startGRVLocked()
		}
		ch, cancel := tx.x.rvCh, tx.cancelChanLocked() // startGRVLocked made x
		tx.mu.Unlock()
		select {
		case <-ch:
		case <-cancel:
		case <-tx.db.closeCh:
		}
		tx.mu.Lock()
	}
}

// startGRVLocked starts obtaining a read version after the GRV latency.
func (tx *transaction) startGRVLocked() {
	if tx.rvState != rvNone {
		return
	}
	tx.rvState = rvPending
	ch := make(chan struct{})
	tx.cold().rvCh = ch
	gen := tx.gen
	d := tx.db.rng.sample(tx.db.cfg.latency.GRV)
	hold := tx.db.takeGRVHold()
	go func() {
		defer close(ch)
		err := tx.sleepIn(d, &gen)
		if err == nil && hold != nil {
			err = tx.waitHold(hold, gen) // as a held commit waits
		}
		tx.mu.Lock()
		defer tx.mu.Unlock()
		if tx.gen != gen {
			return
		}
		if err != nil {
			tx.rvState = rvNone
			return
		}
		tx.grvLocked() // rvHave or rvFailed
	}()
}

// GetReadVersion returns the transaction's read version, obtaining it if
// needed.
func (tx *transaction) GetReadVersion() kv.FutureInt64 {
	tx.mu.Lock()
	gen := tx.gen
	if tx.rvState == rvHave && tx.grvCheckLocked() == nil {
		rv := tx.rv
		tx.mu.Unlock()
		return intFuture{v: rv}
	}
	if tx.db.latency && tx.grvCheckLocked() == nil {
		tx.startGRVLocked()
		tx.mu.Unlock()
		return &lazyInt{f: func() (int64, error) {
			rv, _, err := tx.awaitReadVersion(gen, grvForAsk)
			return rv, err
		}}
	}
	tx.mu.Unlock()
	rv, _, err := tx.awaitReadVersion(gen, grvForAsk)
	return intFuture{v: rv, err: err}
}

// grvCheckLocked is checkLocked for GetReadVersion, which FDB answers
// during and after a commit without failing it: ThreadSafeTransaction::
// getReadVersion checks the deferred error, then ReadYourWritesTransaction::
// getReadVersion only resetPromise (a cancellation), not commitStarted.
func (tx *transaction) grvCheckLocked() error {
	if x := tx.x; x != nil && x.err != nil {
		return x.err
	}
	return tx.cancelledLocked()
}
