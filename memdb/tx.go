package memdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
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
)

// transaction implements kv.Transaction.
type transaction struct {
	db   *DB
	ctx  context.Context
	stop func() bool // releases the context.AfterFunc, if any

	mu  sync.Mutex
	gen uint64 // incremented by every reset: stale asynchronous work checks it

	createdAt time.Duration // on db.clock if created (real time: see createdRealLocked)

	// x holds what few transactions use; it is allocated on first use.
	x *txCold

	// Read version (and rvState, below).
	rv      int64
	grvTime time.Duration // on db.clock

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
	created    bool // createdAt is set
	committing bool
	committed  bool
	mutated    bool
	cancelled  bool // x.cancelErr is set
}

// txCold is the part of a transaction that few transactions use: retry
// state, timeouts, the retry delay cap, cancellation waits, versionstamps,
// explicit write conflict ranges and watches. It keeps the transaction
// itself small.
type txCold struct {
	// err is the sticky error of an invalid write.
	err error

	// Options and retry state; they survive OnError's reset, not Reset.
	retryLimit int   // -1: none
	retries    int32 // OnError's retries so far (it stops at MaxInt32)
	// reading counts the reads in flight (with a latency model); readsDone
	// is closed when it drops to zero, for a Commit waiting for them.
	// (Two int32 keep txCold in the 288-byte size class.)
	reading int32
	backoff time.Duration // the next retry's delay cap; 0: the DB's initial one

	// cancelErr is the cancellation's error (Cancel, the context, the
	// timeout or Close), set with transaction.cancelled; cancelCh is made
	// on demand and closed on cancellation.
	cancelErr error
	cancelCh  chan struct{}

	// createdReal is the creation time in real time, taken with createdAt
	// when the DB's clock is not the real one.
	createdReal time.Time

	timeout       time.Duration
	maxRetryDelay time.Duration
	timer         *time.Timer
	timerGen      uint64
	vsf           *stampFuture
	rvCh          chan struct{} // closed when a pending GRV completes

	clears    clearSet
	clearLog  []krange
	vsKeys    []vsKeyOp
	wconf     []krange
	watches   []*watch
	readsDone chan struct{} // see reading
	// unreadable are the ranges where the versionstamped keys may land;
	// reads that reach them fail with accessed_unreadable.
	unreadable []krange
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
	tx := &transaction{db: db, ctx: ctx}
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

// stampCreation marks the transaction as just created (or Reset). The
// clock is read lazily, at the first operation that needs it (its first
// read version, or SetTimeout), which spares a clock read per transaction:
// the timeout then counts from that moment, a negligible difference.
func (tx *transaction) stampCreation() {
	tx.created = false
	if tx.x != nil {
		tx.x.createdReal = time.Time{}
	}
}

// creationLocked returns the creation time on the DB's clock, taking now
// (db.clock.Now()) as the creation time if it was not taken yet.
func (tx *transaction) creationLocked(now time.Duration) time.Duration {
	if !tx.created {
		tx.created, tx.createdAt = true, now
		if !tx.db.clock.real {
			tx.cold().createdReal = time.Now()
		}
	}
	return tx.createdAt
}

// createdRealLocked returns the creation time in real time (for the
// timeout's timer); creationLocked must have been called.
func (tx *transaction) createdRealLocked() time.Time {
	if x := tx.x; x != nil && !x.createdReal.IsZero() {
		return x.createdReal
	}
	return tx.db.clock.at(tx.createdAt)
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
		tx.failWatchesLocked(err)
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
// operation issued while a Commit is in flight fails with
// used_during_commit and fails the commit with it too, as FDB's
// checkUsedDuringCommit does (it sets the transaction's resetPromise, which
// RYWImpl::commit waits on together with the commit: ReadYourWrites.actor.cpp).
func (tx *transaction) checkLocked() error {
	if err := tx.cancelledLocked(); err != nil {
		return err
	}
	if tx.committing {
		tx.cancelLocked(kv.ErrUsedDuringCommit)
		return kv.ErrUsedDuringCommit
	}
	if tx.committed {
		return kv.ErrUsedDuringCommit
	}
	if x := tx.x; x != nil {
		return x.err
	}
	return nil
}

// startReadLocked counts a read issued in the background.
func (tx *transaction) startReadLocked() {
	tx.cold().reading++
}

// endRead counts a background read as finished.
func (tx *transaction) endRead() {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	x := tx.x
	x.reading--
	if x.reading == 0 && x.readsDone != nil {
		close(x.readsDone)
		x.readsDone = nil
	}
}

// awaitReadsLocked waits until no read is in flight, as FDB's commit waits
// for the reads issued before it (RYWImpl::commit: wait(ryw->reading)), so
// that their read conflict ranges are part of the commit. It returns early
// if the transaction is cancelled.
func (tx *transaction) awaitReadsLocked() {
	for x := tx.x; x != nil && x.reading > 0 && !tx.cancelled; x = tx.x {
		if x.readsDone == nil {
			x.readsDone = make(chan struct{})
		}
		ch, cancel := x.readsDone, tx.cancelChanLocked()
		tx.mu.Unlock()
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
			now := tx.db.clock.Now()
			if now-tx.creationLocked(now) > x.timeout {
				tx.cancelLocked(kv.ErrTransactionTimedOut)
			}
		}
		if !tx.cancelled {
			return nil
		}
	}
	return tx.x.cancelErr
}

// sleep waits d in real time; it returns the cancellation error if the
// transaction is cancelled (or the DB closed) first.
func (tx *transaction) sleep(d time.Duration) error {
	tx.mu.Lock()
	if err := tx.cancelledLocked(); err != nil {
		tx.mu.Unlock()
		return err
	}
	ch := tx.cancelChanLocked()
	tx.mu.Unlock()
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ch:
			t.Stop()
		case <-tx.db.closeCh:
			t.Stop()
		}
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
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
	tx.grvTime = tx.db.clock.Now()
	tx.creationLocked(tx.grvTime)
	tx.rv = tx.db.readers.register(&tx.db.version)
	tx.rvReg = true
	tx.rvState = rvHave
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
func (tx *transaction) readVersion(gen uint64) (int64, time.Duration, error) {
	return tx.awaitReadVersion(gen, false)
}

// awaitReadVersion is readVersion; forCommit is for a Commit in progress,
// which only a cancellation (or Reset) stops.
func (tx *transaction) awaitReadVersion(gen uint64, forCommit bool) (int64, time.Duration, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	for {
		if tx.gen != gen {
			return 0, 0, kv.ErrTransactionCancelled
		}
		var err error
		if forCommit {
			err = tx.cancelledLocked()
		} else {
			err = tx.checkLocked()
		}
		if err != nil {
			return 0, 0, err
		}
		switch tx.rvState {
		case rvHave:
			return tx.rv, tx.grvTime, nil
		case rvNone:
			if !tx.db.latency {
				tx.obtainRVLocked()
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
	go func() {
		defer close(ch)
		err := tx.sleep(d)
		tx.mu.Lock()
		defer tx.mu.Unlock()
		if tx.gen != gen {
			return
		}
		if err != nil {
			tx.rvState = rvNone
			return
		}
		tx.obtainRVLocked()
	}()
}

// GetReadVersion returns the transaction's read version, obtaining it if
// needed.
func (tx *transaction) GetReadVersion() kv.FutureInt64 {
	tx.mu.Lock()
	gen := tx.gen
	if tx.rvState == rvHave && tx.checkLocked() == nil {
		rv := tx.rv
		tx.mu.Unlock()
		return intFuture{v: rv}
	}
	if tx.db.latency && tx.checkLocked() == nil {
		tx.startGRVLocked()
		tx.mu.Unlock()
		return &lazyInt{f: func() (int64, error) {
			rv, _, err := tx.readVersion(gen)
			return rv, err
		}}
	}
	tx.mu.Unlock()
	rv, _, err := tx.readVersion(gen)
	return intFuture{v: rv, err: err}
}

// ---- writes ----

// checkWriteKey validates a key to be written. The legal range is tested
// first, as in FDB's ReadYourWritesTransaction::set and atomicOp (a system
// key over the size limit is key_outside_legal_range, not key_too_large).
func checkWriteKey(key []byte) error {
	if len(key) > 0 && key[0] == 0xff {
		if isMetadataVersionKey(key) {
			// Only SetVersionstampedValue may write it (metaversion.go).
			return kv.ErrClientInvalidOp
		}
		return kv.ErrKeyOutsideLegalRange
	}
	if len(key) > maxKeySize {
		return kv.ErrKeyTooLarge
	}
	return nil
}

// writableLocked reports whether a write may be buffered now. A write
// during a Commit fails the commit with used_during_commit (see
// checkLocked).
func (tx *transaction) writableLocked() bool {
	if tx.cancelledLocked() != nil {
		return false
	}
	if tx.committing {
		tx.cancelLocked(kv.ErrUsedDuringCommit)
		return false
	}
	if tx.committed {
		tx.setErrLocked(kv.ErrUsedDuringCommit)
		return false
	}
	return true
}

// acceptWriteLocked reports whether a write of value (or an atomic
// operand) at key may be buffered; if not, it puts the transaction in the
// error state that the next read and Commit report, as FDB does.
func (tx *transaction) acceptWriteLocked(key, value []byte) bool {
	if !tx.writableLocked() {
		return false
	}
	if err := checkWriteKey(key); err != nil {
		tx.setErrLocked(err)
		return false
	}
	if len(value) > maxValueSize {
		tx.setErrLocked(kv.ErrValueTooLarge)
		return false
	}
	return true
}

// Set writes value at key.
func (tx *transaction) Set(key, value []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.acceptWriteLocked(key, value) {
		return
	}
	e, val := tx.newEntryLocked(key, value)
	e.st, e.exists, e.val = stKnown, true, val
	tx.writes.put(e)
	tx.size += sizeSet(key, len(value))
	tx.mutated = true
	tx.ownWriteLocked(key, nil, val, true, true)
}

// Clear removes key.
func (tx *transaction) Clear(key []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.writableLocked() {
		return
	}
	if len(key) > 0 && key[0] == 0xff {
		// The legal range first (ReadYourWritesTransaction::clear).
		tx.setErrLocked(kv.ErrKeyOutsideLegalRange)
		return
	}
	if len(key) > maxKeySize {
		return // no such key can exist
	}
	var e *wentry
	if rc := tx.rc; rc != nil && bytes.Equal(rc.key, key) && rc.hasEnd() {
		// The key the transaction last read (a dequeue's): its chain's
		// key, which the store never changes, serves as the entry's.
		e = tx.entryLocked()
		*e = wentry{key: rc.key[: len(key) : len(key)+1], c: rc}
	} else {
		e, _ = tx.newEntryLocked(key, nil)
	}
	e.st = stKnown
	tx.writes.put(e)
	tx.size += 2 * (int64(2*len(key)+1) + keyRangeRefSize) // RYW's clear(key)
	tx.mutated = true
	tx.ownWriteLocked(key, nil, nil, false, true)
}

// clampRangeKey shortens a range bound longer than any key can be: no key
// lies between the bound and its first maxKeySize+1 bytes.
func clampRangeKey(k []byte) []byte {
	if len(k) > maxKeySize+1 {
		return k[:maxKeySize+1]
	}
	return k
}

// checkRange validates a range to be read, cleared or added as a conflict
// range and returns copies of its (clamped) bounds.
func checkRange(r kv.KeyRange) ([]byte, []byte, error) {
	b, e, err := rangeBounds(r)
	if err != nil {
		return nil, nil, err
	}
	return copyBounds(b, e, nil)
}

// rangeBounds is checkRange without the copies: the bounds it returns are
// the caller's memory.
func rangeBounds(r kv.KeyRange) ([]byte, []byte, error) {
	b, e := clampRangeKey(r.Begin), clampRangeKey(r.End)
	if bytes.Compare(b, e) > 0 {
		return nil, nil, kv.ErrInvertedRange
	}
	if bytes.Compare(b, maxUserKey) > 0 || bytes.Compare(e, maxUserKey) > 0 {
		return nil, nil, kv.ErrKeyOutsideLegalRange
	}
	return b, e, nil
}

// copyBounds copies b and e into buf if they fit, else into one new
// allocation.
func copyBounds(b, e, buf []byte) ([]byte, []byte, error) {
	n := len(b) + len(e)
	if n > len(buf) {
		buf = make([]byte, n)
	}
	copy(buf, b)
	copy(buf[len(b):], e)
	return buf[:len(b):len(b)], buf[len(b):n:n], nil
}

// maxUserKey is the end of the user key space.
var maxUserKey = []byte{0xff}

// ClearRange removes every key in r.
func (tx *transaction) ClearRange(r kv.KeyRange) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.writableLocked() {
		return
	}
	b, e, err := checkRange(r)
	if err != nil {
		tx.setErrLocked(err)
		return
	}
	tx.mutated = true
	tx.size += mutationRefSize + 2*int64(len(b)+len(e)) + keyRangeRefSize
	if bytes.Equal(b, e) {
		return
	}
	x := tx.cold()
	x.clears = x.clears.add(b, e)
	tx.writes.deleteRange(b, e)
	if x := tx.x; x != nil && len(x.vsKeys) > 0 {
		x.clearLog = append(x.clearLog, krange{b, e})
	}
	tx.ownWriteLocked(b, e, nil, false, true)
}

// atomic buffers one atomic operation.
func (tx *transaction) atomic(kind opKind, key, param []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.acceptWriteLocked(key, param) {
		return
	}
	tx.mutated = true
	tx.size += sizeSet(key, len(param))
	tx.ownWriteLocked(key, nil, nil, false, false)
	e, at := tx.writes.find(key)
	if e == nil {
		var p []byte
		if _, cleared := tx.clearsLocked().find(key); cleared {
			e, p = tx.newEntryLocked(key, param)
			e.st = stKnown
			e.val, e.exists = applyOp(kind, nil, false, p)
		} else {
			e, p = tx.newOpEntryLocked(key, param)
			e.st = stOps
			e.ops = append(e.ops, atomicOp{kind: kind, param: p})
		}
		tx.writes.insert(at, e)
		return
	}
	p := bytes.Clone(param)
	if p == nil {
		p = []byte{}
	}
	if e.st == stKnown {
		e.val, e.exists = applyOp(kind, e.val, e.exists, p)
		return
	}
	e.ops = append(e.ops, atomicOp{kind: kind, param: p})
}

// Add adds param to the value at key (little-endian, param's width).
func (tx *transaction) Add(key, param []byte) { tx.atomic(opAdd, key, param) }

// Max stores the larger of the value and param (unsigned little-endian).
func (tx *transaction) Max(key, param []byte) { tx.atomic(opMax, key, param) }

// Min stores the smaller of the value and param (unsigned little-endian).
func (tx *transaction) Min(key, param []byte) { tx.atomic(opMin, key, param) }

// BitAnd stores the bitwise AND of the value and param.
func (tx *transaction) BitAnd(key, param []byte) { tx.atomic(opAnd, key, param) }

// BitOr stores the bitwise OR of the value and param.
func (tx *transaction) BitOr(key, param []byte) { tx.atomic(opOr, key, param) }

// BitXor stores the bitwise XOR of the value and param.
func (tx *transaction) BitXor(key, param []byte) { tx.atomic(opXor, key, param) }

// ByteMin stores the lexicographically smaller of the value and param.
func (tx *transaction) ByteMin(key, param []byte) { tx.atomic(opByteMin, key, param) }

// ByteMax stores the lexicographically larger of the value and param.
func (tx *transaction) ByteMax(key, param []byte) { tx.atomic(opByteMax, key, param) }

// AppendIfFits appends param to the value if the result fits.
func (tx *transaction) AppendIfFits(key, param []byte) { tx.atomic(opAppendIfFits, key, param) }

// CompareAndClear clears key if its value equals param.
func (tx *transaction) CompareAndClear(key, param []byte) { tx.atomic(opCompareAndClear, key, param) }

// splitStamped splits a versionstamp template into its body and offset.
func splitStamped(b []byte) ([]byte, int, error) {
	if len(b) < 4 {
		return nil, 0, kv.ErrClientInvalidOp
	}
	body := b[:len(b)-4]
	off := int(binary.LittleEndian.Uint32(b[len(b)-4:]))
	if off < 0 || off+10 > len(body) {
		return nil, 0, kv.ErrClientInvalidOp
	}
	return body, off, nil
}

// SetVersionstampedKey sets value at key with the commit's versionstamp
// written into key. Reads of this transaction that reach the range where
// the key may land fail with accessed_unreadable (1036), as in FDB.
func (tx *transaction) SetVersionstampedKey(key, value []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.writableLocked() {
		return
	}
	body, off, err := splitStamped(key)
	if err == nil {
		// checkWriteKey of the key with any stamp, without building it:
		// only its length and first byte matter, and a stamp at offset 0
		// starts with the version's first byte, never 0xff.
		probe := body[:1:1]
		if off == 0 {
			probe = []byte{0}
		}
		if err = checkWriteKey(probe); err == nil && len(body) > maxKeySize {
			err = kv.ErrKeyTooLarge
		}
	}
	if err == nil && len(value) > maxValueSize {
		err = kv.ErrValueTooLarge
	}
	if err != nil {
		tx.setErrLocked(err)
		return
	}
	x := tx.cold()
	if x.unreadable == nil && x.vsKeys == nil {
		// The first versionstamped key: room for one in both lists, in
		// one allocation.
		a := new(struct {
			u [1]krange
			k [1]vsKeyOp
		})
		x.unreadable, x.vsKeys = a.u[:0:1], a.k[:0:1]
	}
	// The template and the range's bounds share one allocation (they live
	// as long as the transaction); the value gets its own, which the store
	// keeps.
	n := len(body)
	buf := make([]byte, 3*n+1)
	tmpl := buf[:n:n]
	copy(tmpl, body)
	x.unreadable = append(x.unreadable, tx.stampRangeLocked(buf[n:], body, off))
	x.vsKeys = append(x.vsKeys, vsKeyOp{
		tmpl: tmpl, off: off, val: append([]byte{}, value...), nClears: len(x.clearLog),
	})
	tx.size += int64(len(body)+4+len(value)) + mutationRefSize // no write conflict range
	tx.mutated = true
}

// stampRangeLocked returns the range a versionstamped key with template
// body and stamp offset off may land in, as FDB's getVersionstampKeyRange
// (fdbclient/include/fdbclient/Atomic.h) computes it: from the template
// with the transaction's read version (0 if it has none yet) and batch
// order 0 in place of the stamp, to just after the template with ten 0xff
// bytes there, capped at the end of the user key space. Both bounds are
// written in buf (2*len(body)+1 zero bytes).
func (tx *transaction) stampRangeLocked(buf, body []byte, off int) krange {
	n := len(body)
	b, e := buf[:n:n], buf[n:2*n+1:2*n+1]
	copy(b, body)
	if tx.rvState == rvHave {
		binary.BigEndian.PutUint64(b[off:off+8], uint64(tx.rv))
	} else {
		clear(b[off : off+8])
	}
	b[off+8], b[off+9] = 0, 0
	copy(e, body)
	for i := off; i < off+10; i++ {
		e[i] = 0xff
	}
	e[n] = 0 // keyAfter
	if bytes.Compare(e, maxUserKey) > 0 {
		e = maxUserKey
	}
	return krange{b, e}
}

// unreadableLocked reports whether [b, e) reaches a range where one of the
// transaction's versionstamped keys may land: FDB's read then fails with
// accessed_unreadable (RYWIterator.cpp; the range is marked by
// addUnmodifiedAndUnreadableRange in ReadYourWrites.actor.cpp's atomicOp).
func (tx *transaction) unreadableLocked(b, e []byte) bool {
	x := tx.x
	if x == nil {
		return false
	}
	for _, r := range x.unreadable {
		if bytes.Compare(r.b, e) < 0 && bytes.Compare(b, r.e) < 0 {
			return true
		}
	}
	return false
}

// SetVersionstampedValue sets key to value with the commit's versionstamp
// written into value. Reading key in this transaction then fails with FDB's
// accessed_unreadable (1036).
func (tx *transaction) SetVersionstampedValue(key, value []byte) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.writableLocked() {
		return
	}
	var body []byte
	var off int
	var err error
	if isMetadataVersionKey(key) {
		body, off, err = checkMetadataVersionWrite(value) // metaversion.go
	} else if err = checkWriteKey(key); err == nil {
		body, off, err = splitStamped(value)
	}
	if err == nil && len(body) > maxValueSize {
		err = kv.ErrValueTooLarge
	}
	if err != nil {
		tx.setErrLocked(err)
		return
	}
	e, val := tx.newEntryLocked(key, body)
	e.st, e.val, e.vsOff = stVS, val, int32(off)
	tx.writes.put(e)
	tx.size += sizeSet(key, len(body)+4)
	tx.mutated = true
	tx.ownWriteLocked(key, nil, nil, false, false)
}

// ---- conflict ranges ----

// addReadConflictLocked adds [b, e) minus the keys the transaction's own
// writes determine (those reads did not depend on the database).
func (tx *transaction) addReadConflictLocked(b, e []byte) {
	if bytes.Compare(b, e) >= 0 {
		return
	}
	clears := tx.clearsLocked()
	if tx.writes.len() == 0 && len(clears) == 0 {
		tx.addReadLocked(b, e)
		return
	}
	emit := func(x, y []byte) {
		if bytes.Compare(x, y) < 0 {
			tx.addReadLocked(x, y)
		}
	}
	cur := b
	ci := 0
	for ci < len(clears) && bytes.Compare(clears[ci].e, b) <= 0 {
		ci++
	}
	var wc cursor
	wc.seek(&tx.writes, b, false)
	for bytes.Compare(cur, e) < 0 {
		for wc.cur != nil && (!wc.cur.known() || bytes.Compare(wc.cur.key, cur) < 0) {
			wc.next()
		}
		var ks, ke []byte
		useClear := ci < len(clears) && bytes.Compare(clears[ci].b, e) < 0
		useEntry := wc.cur != nil && bytes.Compare(wc.cur.key, e) < 0
		switch {
		case useClear && (!useEntry || bytes.Compare(clears[ci].b, wc.cur.key) <= 0):
			ks, ke = clears[ci].b, clears[ci].e
			ci++
		case useEntry:
			ks, ke = wc.cur.key, wc.cur.end()
			wc.next()
		default:
			emit(cur, e)
			return
		}
		if bytes.Compare(ks, cur) > 0 {
			if bytes.Compare(ks, e) > 0 {
				ks = e
			}
			emit(cur, ks)
		}
		if bytes.Compare(ke, cur) > 0 {
			cur = ke
		}
	}
}

// addReadLocked appends [b, e) to the read conflict ranges. It assigns
// the new element's fields rather than appending a krange value: while the
// Go GC marks, copying a struct with pointers into the heap costs a bulk
// write barrier (a span lookup and a walk of its pointer bitmap), which
// showed in the profile of a one-read transaction, where two pointer
// stores cost a plain write barrier each.
func (tx *transaction) addReadLocked(b, e []byte) {
	n := len(tx.reads)
	if n < cap(tx.reads) {
		tx.reads = tx.reads[:n+1] // both fields are assigned below
	} else {
		tx.reads = append(tx.reads, krange{})
	}
	r := &tx.reads[n]
	r.b, r.e = b, e
	tx.size += sizeRange(b, e)
}

// AddReadConflictRange adds r, minus keys this transaction wrote, to the
// read conflict ranges. Only inverted_range is returned: FDB's C client
// tests it when it builds the range (fdb_transaction_add_conflict_range,
// KeyRangeRef's constructor), and runs the rest on its network thread,
// whose errors (key_outside_legal_range, used_during_commit) become the
// transaction's deferred error (ThreadSafeTransaction.cpp: deferredError,
// checkDeferredError), reported by the next read and by Commit.
func (tx *transaction) AddReadConflictRange(r kv.KeyRange) error {
	b, e, ok := tx.conflictRangeLocked(r, false)
	if !ok.ok {
		return ok.err
	}
	defer tx.mu.Unlock()
	tx.addReadConflictLocked(b, e)
	return nil
}

// rangeCheck is conflictRangeLocked's verdict: ok, or the error to return
// (nil when the error is deferred or the call has no effect).
type rangeCheck struct {
	ok  bool
	err error
}

// conflictRangeLocked validates a conflict range as FDB does (see
// AddReadConflictRange) and returns copies of its bounds: for a write
// conflict range (kept by the resolver) on the heap, else from the
// transaction's arena. When it returns ok, tx.mu is held.
func (tx *transaction) conflictRangeLocked(r kv.KeyRange, write bool) ([]byte, []byte, rangeCheck) {
	b, e, err := rangeBounds(r)
	if err == kv.ErrInvertedRange {
		return nil, nil, rangeCheck{err: err}
	}
	if err == kv.ErrKeyOutsideLegalRange && !write && isMetadataVersionKey(r.Begin) && bytes.Equal(r.End, metadataVersionEnd) {
		// FDB allows the metadata version's range and no other under \xff
		// (ReadYourWritesTransaction::addReadConflictRange).
		b, e, err = r.Begin, r.End, nil
	}
	if !tx.conflictLocked(err) {
		return nil, nil, rangeCheck{}
	}
	if write {
		b, e, _ = copyBounds(b, e, nil)
	} else {
		b, e, _ = copyBounds(b, e, tx.allocLocked(len(b)+len(e)))
	}
	return b, e, rangeCheck{ok: true}
}

// conflictLocked takes tx.mu for a conflict range whose check found err
// (nil or deferred) and reports whether the range is to be added; if not,
// it releases tx.mu, having made err the transaction's deferred error.
func (tx *transaction) conflictLocked(err error) bool {
	tx.mu.Lock()
	if tx.cancelledLocked() != nil || (tx.x != nil && tx.x.err != nil) {
		tx.mu.Unlock()
		return false // the next read and Commit report it
	}
	if tx.committing || tx.committed {
		err = kv.ErrUsedDuringCommit
	}
	if err != nil {
		tx.setErrLocked(err)
		tx.mu.Unlock()
		return false
	}
	return true
}

// AddReadConflictKey adds [key, key+\x00) unless this transaction wrote key.
func (tx *transaction) AddReadConflictKey(key []byte) error {
	if len(key) > maxKeySize {
		// A long key is clamped, and its range may invert.
		return tx.AddReadConflictRange(kv.KeyRange{Begin: key, End: keyAfter(key)})
	}
	var err error
	if len(key) > 0 && key[0] == 0xff && !isMetadataVersionKey(key) { // key+\x00 is past \xff
		err = kv.ErrKeyOutsideLegalRange
	}
	if !tx.conflictLocked(err) {
		return nil
	}
	defer tx.mu.Unlock()
	e := tx.afterLocked(key)
	tx.addReadConflictLocked(e[:len(key):len(key)], e)
	return nil
}

// AddWriteConflictRange adds r to the write conflict ranges. Errors other
// than inverted_range are deferred, as for AddReadConflictRange.
func (tx *transaction) AddWriteConflictRange(r kv.KeyRange) error {
	b, e, ok := tx.conflictRangeLocked(r, true)
	if !ok.ok {
		return ok.err
	}
	defer tx.mu.Unlock()
	if bytes.Compare(b, e) < 0 {
		x := tx.cold()
		x.wconf = append(x.wconf, krange{b, e})
		tx.size += sizeRange(b, e)
	}
	tx.mutated = true
	return nil
}

// AddWriteConflictKey adds [key, key+\x00) to the write conflict ranges.
func (tx *transaction) AddWriteConflictKey(key []byte) error {
	return tx.AddWriteConflictRange(kv.KeyRange{Begin: key, End: keyAfter(key)})
}

// ---- watches ----

// Watch returns a watch on key, registered when the transaction commits.
// Like FDB's (RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp), it reads
// the key with a normal read: the read adds a read conflict range (unless
// the transaction wrote the key), its error fails the watch, and the value
// it saw is what the transaction's own later writes are compared with. Watch
// waits for that read (with a latency model, a read delay).
func (tx *transaction) Watch(key []byte) kv.Watch {
	if len(key) > 0 && key[0] == 0xff {
		return failedWatch(kv.ErrKeyOutsideLegalRange)
	}
	if len(key) > maxKeySize {
		return failedWatch(kv.ErrKeyTooLarge)
	}
	tx.mu.Lock()
	if err := tx.checkLocked(); err != nil {
		tx.mu.Unlock()
		return failedWatch(err)
	}
	tx.mu.Unlock()
	val, err := tx.get(key, false).Get()
	if err != nil {
		return failedWatch(err)
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkLocked(); err != nil {
		return failedWatch(err)
	}
	if !tx.db.reserveWatch() {
		return failedWatch(kv.ErrTooManyWatches)
	}
	w := &watch{db: tx.db, key: bytes.Clone(key), done: make(chan struct{})}
	if w.key == nil {
		w.key = []byte{}
	}
	w.ref, w.refOK = val, val != nil
	tx.db.trackWatch(w)
	x := tx.cold()
	x.watches = append(x.watches, w)
	return w
}

// ownWriteLocked fires at once the unregistered watches in [b, e) whose
// value the transaction's own write changes, as FDB's triggerWatches does
// (fdbclient/ReadYourWrites.actor.cpp; api-c.rst: "a watch will
// immediately report changes made by the transaction itself"). known is
// false for a write whose result depends on the database (an atomic
// operation, a versionstamped value): such a write fires the watch.
func (tx *transaction) ownWriteLocked(b, e, val []byte, ok, known bool) {
	x := tx.x
	if x == nil || len(x.watches) == 0 {
		return
	}
	kept := x.watches[:0]
	for _, w := range x.watches {
		in := bytes.Compare(w.key, b) >= 0 && (e == nil && bytes.Equal(w.key, b) || e != nil && bytes.Compare(w.key, e) < 0)
		if in && (!known || w.differs(val, ok)) {
			w.finish(nil)
			continue
		}
		kept = append(kept, w)
	}
	clear(x.watches[len(kept):])
	x.watches = kept
}

// failWatchesLocked fails the watches not yet registered.
func (tx *transaction) failWatchesLocked(err error) {
	x := tx.x
	if x == nil {
		return
	}
	for _, w := range x.watches {
		w.finish(err)
	}
	x.watches = nil
}

// ---- commit ----

// Commit sends the transaction's writes to the commit step. See the package
// documentation for latency, faults and interrupted commits.
func (tx *transaction) Commit() error {
	tx.mu.Lock()
	tx.awaitReadsLocked()
	if err := tx.checkLocked(); err != nil {
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
		req.wconf, req.clearLog, req.vsKeys, req.watches = x.wconf, x.clearLog, x.vsKeys, x.watches
		x.watches = nil
	}
	if !tx.mutated {
		err := tx.commitReadOnlyLocked(req)
		tx.mu.Unlock()
		return err
	}
	if tx.size > maxTxSize && tx.commitSizeLocked() > maxTxSize {
		tx.failWatchesLocked(kv.ErrTransactionTooLarge)
		tx.failStampLocked(kv.ErrTransactionTooLarge)
		tx.mu.Unlock()
		return kv.ErrTransactionTooLarge
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
	gen := tx.gen
	tx.mu.Unlock()

	res := tx.send(req, gen)

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
// the transaction's watches and versionstamp fail with the error.
func (tx *transaction) finishCommitLocked(req *commitReq, res commitResult) error {
	if res.err != nil {
		for _, w := range req.watches {
			w.finish(res.err)
		}
		tx.failStampLocked(res.err)
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

// send waits out the commit's latency and runs the commit step. gen is the
// transaction's generation when Commit started.
func (tx *transaction) send(req *commitReq, gen uint64) commitResult {
	db := tx.db
	if db.latency && !req.hasRV {
		// FDB's client obtains a read version for a transaction that has
		// none before it commits (NativeAPI commitMutations:
		// getReadVersion(FLAG_CAUSAL_READ_RISKY)), so a blind write pays a
		// GRV round trip first: the commit waits for the read version (or
		// for the request already in flight) and is resolved at it. Nothing
		// has been sent if that wait is cancelled.
		rv, grvTime, err := tx.awaitReadVersion(gen, true)
		if err != nil {
			return commitResult{err: err}
		}
		req.hasRV, req.rv, req.grvTime = true, rv, grvTime
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
	cerr := tx.sleep(delay)
	if cerr == nil && hold != nil {
		cerr = tx.waitHold(hold)
	}
	db.stats.inFlight.Add(-1)
	if cerr == nil {
		return db.commitStep(req, forced, fault)
	}
	// The commit was in flight: like a real cluster, it may or may not be
	// applied.
	var res commitResult
	if db.rng.float64() < 0.5 {
		applied := *req
		applied.watches = nil // they fail with the interruption
		res = db.commitStep(&applied, nil, faultNone)
	}
	db.stats.interrupted.Add(1)
	return commitResult{err: kv.CommitInterrupted(cerr), applied: res.applied}
}

// waitHold waits until h is released or the transaction is cancelled.
func (tx *transaction) waitHold(h *commitHold) error {
	tx.mu.Lock()
	ch := tx.cancelChanLocked()
	tx.mu.Unlock()
	close(h.held)
	select {
	case <-h.release:
	case <-ch:
	case <-tx.db.closeCh:
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.cancelledLocked()
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
		if req.hasRV && db.tooOldLocked(req.rv, req.grvTime, db.clock.Now()) {
			// The watches' reference values are gone: fire them, which is
			// allowed (watches may fire spuriously) and misses nothing.
			for _, w := range req.watches {
				w.finish(nil)
			}
		} else {
			db.registerWatchesLocked(req, req.rv, 0)
		}
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

// OnError resets the transaction and backs off if err is retryable;
// otherwise it returns err.
func (tx *transaction) OnError(err error) error {
	if err == nil {
		return nil
	}
	tx.mu.Lock()
	if cerr := tx.cancelledLocked(); cerr != nil {
		tx.mu.Unlock()
		if errorCode(err) == errorCode(cerr) {
			return err
		}
		return cerr
	}
	if !kv.IsRetryable(err) {
		tx.mu.Unlock()
		return err
	}
	x := tx.cold()
	if x.retryLimit >= 0 && int(x.retries) >= x.retryLimit {
		tx.mu.Unlock()
		return err
	}
	limit := tx.db.cfg.backoffMax
	if x.maxRetryDelay > 0 {
		limit = min(limit, x.maxRetryDelay)
	}
	b := x.backoff
	if b == 0 {
		b = tx.db.cfg.backoffInitial
	}
	cur := min(b, limit)
	x.backoff = min(b*2, limit)
	if x.retries < math.MaxInt32 {
		x.retries++
	}
	tx.mu.Unlock()
	tx.db.stats.retries.Add(1)

	delay := time.Duration(tx.db.rng.float64() * float64(cur))
	if serr := tx.sleep(delay); serr != nil {
		return serr
	}
	tx.mu.Lock()
	tx.resetLocked(false, err)
	tx.mu.Unlock()
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
		x.vsf, x.rvCh, x.err = nil, nil, nil
		x.clears, x.clearLog, x.vsKeys, x.wconf, x.unreadable = nil, nil, nil, nil, nil
	}
	tx.dropRVLocked()
	tx.rvState, tx.rv, tx.grvTime = rvNone, 0, 0
	tx.committing, tx.committed, tx.commitVer = false, false, 0
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
			x.timeout, x.maxRetryDelay = 0, 0
		}
		tx.stampCreation()
		if tx.ctx.Err() == nil && !tx.db.closedFlag.Load() {
			if x := tx.x; x != nil {
				tx.cancelled, x.cancelErr, x.cancelCh = false, nil, nil
			}
		}
		tx.armTimerLocked()
	}
}

// Cancel cancels the transaction: pending and later operations fail with
// kv.ErrTransactionCancelled until Reset.
func (tx *transaction) Cancel() {
	tx.cancelWith(kv.ErrTransactionCancelled)
}

// ---- options ----

// Options returns the transaction's options.
func (tx *transaction) Options() kv.TransactionOptions { return txOptions{tx} }

type txOptions struct{ tx *transaction }

// SetTimeout cancels the transaction with kv.ErrTransactionTimedOut once d
// has passed since it was created (or last Reset, which also clears the
// timeout), in real time or on the DB's clock, whichever comes first.
func (o txOptions) SetTimeout(d time.Duration) error {
	if d < 0 {
		return kv.ErrClientInvalidOp
	}
	tx := o.tx
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.cold().timeout = d
	tx.armTimerLocked()
	return nil
}

// armTimerLocked (re)starts the real-time timeout timer.
func (tx *transaction) armTimerLocked() {
	x := tx.x
	if x == nil {
		return // no timeout was ever set
	}
	if x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
	x.timerGen++
	if x.timeout <= 0 {
		return
	}
	tx.creationLocked(tx.db.clock.Now())
	createdReal := tx.createdRealLocked()
	left := x.timeout - time.Since(createdReal)
	if left <= 0 {
		tx.cancelLocked(kv.ErrTransactionTimedOut)
		return
	}
	gen := x.timerGen
	tx.timed.Store(true)
	x.timer = time.AfterFunc(left, func() {
		tx.mu.Lock()
		defer tx.mu.Unlock()
		if x.timerGen == gen {
			tx.cancelLocked(kv.ErrTransactionTimedOut)
		}
	})
}

// SetRetryLimit limits OnError to n retries; -1 means no limit.
func (o txOptions) SetRetryLimit(n int) error {
	if n < -1 {
		return kv.ErrClientInvalidOp
	}
	o.tx.mu.Lock()
	o.tx.cold().retryLimit = n
	o.tx.mu.Unlock()
	return nil
}

// SetMaxRetryDelay caps OnError's backoff.
func (o txOptions) SetMaxRetryDelay(d time.Duration) error {
	if d < 0 {
		return kv.ErrClientInvalidOp
	}
	o.tx.mu.Lock()
	o.tx.cold().maxRetryDelay = d
	o.tx.mu.Unlock()
	return nil
}

// ---- results of a commit ----

// GetCommittedVersion returns the commit version, -1 for a read-only
// transaction, and kv.ErrClientInvalidOp before a successful commit.
func (tx *transaction) GetCommittedVersion() (int64, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if !tx.committed {
		return -1, kv.ErrClientInvalidOp
	}
	return tx.commitVer, nil
}

// GetVersionstamp returns the versionstamp the commit will use.
func (tx *transaction) GetVersionstamp() kv.FutureVersionstamp {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.committed {
		if tx.commitVer < 0 {
			return &stampFuture{err: errNoCommitVersion}
		}
		stamp := versionstamp(tx.commitVer)
		return &stampFuture{stamp: stamp[:]}
	}
	if err := tx.cancelledLocked(); err != nil {
		return &stampFuture{err: err}
	}
	x := tx.cold()
	if x.vsf == nil {
		x.vsf = &stampFuture{done: make(chan struct{})}
	}
	return x.vsf
}

func (tx *transaction) failStampLocked(err error) {
	if x := tx.x; x != nil && x.vsf != nil {
		x.vsf.resolve(nil, err)
	}
}

// GetApproximateSize returns the size of the mutations and conflict ranges
// so far, counted call by call as FDB's approximateSize is (see size.go): an
// upper bound of the size Commit checks against the limit.
func (tx *transaction) GetApproximateSize() kv.FutureInt64 {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return intFuture{v: tx.size}
}

// ---- composition ----

// Transact runs fn inside this transaction; it neither commits nor retries.
func (tx *transaction) Transact(_ context.Context, fn func(kv.Transaction) error) error {
	return fn(tx)
}

// ReadTransact runs fn inside this transaction.
func (tx *transaction) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(tx)
}

// Snapshot returns a view of the transaction whose reads add no conflicts.
func (tx *transaction) Snapshot() kv.ReadTransaction { return snapshot{tx} }

// ---- futures ----

type intFuture struct {
	v   int64
	err error
}

func (f intFuture) Get() (int64, error) { return f.v, f.err }

type lazyInt struct {
	once sync.Once
	f    func() (int64, error)
	v    int64
	err  error
}

func (l *lazyInt) Get() (int64, error) {
	l.once.Do(func() { l.v, l.err = l.f() })
	return l.v, l.err
}

// stampFuture is the pending versionstamp of a commit.
type stampFuture struct {
	done  chan struct{}
	once  sync.Once
	stamp []byte
	err   error
}

func (f *stampFuture) resolve(stamp []byte, err error) {
	f.once.Do(func() {
		f.stamp, f.err = bytes.Clone(stamp), err
		close(f.done)
	})
}

func (f *stampFuture) Get() ([]byte, error) {
	if f.done != nil {
		<-f.done
	}
	return f.stamp, f.err
}
