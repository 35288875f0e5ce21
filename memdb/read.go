package memdb

import (
	"bytes"
	"context"
	"errors"
	"math"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/tidwall/btree"
)

// valueFuture is a pending point read. done is nil when it was resolved
// when issued.
type valueFuture struct {
	done chan struct{}
	val  []byte
	err  error
}

func (f *valueFuture) Get() ([]byte, error) {
	if f.done != nil {
		<-f.done
	}
	return f.val, f.err
}

// ownValue returns a copy of a value for the caller, who may modify it.
func ownValue(v []byte, ok bool) []byte {
	if !ok {
		return nil
	}
	out := make([]byte, len(v))
	copy(out, v)
	return out
}

// Get reads key; see kv.ReadTransaction.
func (tx *transaction) Get(key []byte) kv.FutureValue { return tx.get(key, false, nil) }

// get is a point read of key; snap: a snapshot read. watchGen, if not nil,
// makes it the read of a watch issued in that generation (Watch, which
// checked the transaction and the key): a reset since fails it with
// transaction_cancelled, a Commit started since does not (it waits for
// the watch), and its failure fails only the watch, not the commit (as in
// FDB: RYWImpl::watch reads with readWithConflictRange, not through
// ReadYourWritesTransaction::get's checks, adds a promise of its own to
// the reads the commit waits for, and sets it even when its read fails).
func (tx *transaction) get(key []byte, snap bool, watchGen *uint64) kv.FutureValue {
	watch := watchGen != nil
	if len(key) > 0 && key[0] == 0xff {
		if !isMetadataVersionKey(key) {
			return &valueFuture{err: tx.illegalReadErr()}
		}
		if !tx.db.latency {
			return tx.getMetadataVersionNow(snap, watchGen)
		}
	}
	tx.mu.Lock()
	var err error
	if watch {
		err = tx.deliverableLocked(*watchGen)
	} else {
		err = tx.checkLocked()
	}
	if err != nil {
		tx.mu.Unlock()
		return &valueFuture{err: err}
	}
	if len(key) > maxKeySize {
		tx.mu.Unlock()
		return &valueFuture{} // no such key can exist
	}
	if tx.x != nil && len(tx.x.unreadable) > 0 && tx.unreadableLocked(key, keyAfter(key)) {
		if !watch {
			tx.readFailedLocked(kv.ErrAccessedUnreadable)
		}
		tx.mu.Unlock()
		return &valueFuture{err: kv.ErrAccessedUnreadable}
	}
	// Read your writes: a value the transaction determined needs no read
	// and adds no conflict.
	e := tx.writes.get(key)
	var ops []atomicOp
	if e != nil {
		var f kv.FutureValue
		if f, ops = tx.ownReadLocked(e, !watch); f != nil {
			tx.mu.Unlock()
			return f
		}
	} else if _, cleared := tx.clearsLocked().find(key); cleared {
		tx.mu.Unlock()
		return &valueFuture{}
	}
	var k []byte
	if !snap {
		end := tx.allocLocked(len(key) + 1)
		copy(end, key)
		k = end[:len(key):len(key)]
		tx.addReadConflictLocked(k, end)
	}
	db := tx.db
	if !db.latency {
		fresh := tx.rvState != rvHave
		var err error
		if fresh {
			err = tx.grvLocked()
		}
		// tx.mu stays held during the read (it is taken before db.mu, as in
		// readRange), so that the key's chain is kept as the hint for a
		// write of the key by this transaction.
		var v []byte
		var ok bool
		var c *chain
		if err == nil {
			v, ok, c, err = db.readPoint(key, tx.rv, tx.grvTime, fresh)
		}
		if err != nil {
			if !watch {
				err = tx.readFailedLocked(err)
			}
			tx.mu.Unlock()
			return &valueFuture{err: err}
		}
		tx.rc = c
		f := tx.newFutureLocked()
		// The value gets its own allocation, never the transaction's
		// arena: a caller that keeps a small value must not keep the
		// whole transaction (its writes and buffers) reachable.
		tx.mu.Unlock()
		if ops != nil {
			v, ok = foldOps(v, ok, ops)
		}
		f.val = ownValue(v, ok)
		return f
	}
	if k == nil {
		k = bytes.Clone(key)
	}
	gen := tx.gen
	tx.startGRVLocked()
	tx.startReadLocked()
	f := tx.newFutureLocked()
	tx.mu.Unlock()
	f.done = make(chan struct{})
	go func() {
		defer close(f.done)
		defer tx.endRead(gen)
		rv, grvTime, err := tx.readVersion(gen, watch)
		if err == nil && !isMetadataVersionKey(k) {
			// The metadata version comes with the read version.
			err = tx.sleepIn(db.rng.sample(db.cfg.latency.Read), &gen)
		}
		if err == nil {
			err = tx.sameGen(gen)
		}
		if err != nil {
			f.err = err
			return
		}
		v, ok, _, err := db.readPoint(k, rv, grvTime, false)
		// The read ran without tx.mu: a reset or cancellation while it ran
		// fails it as one before it does (sameGen, sleep), rather than
		// deliver a value read at a read version the reset dropped. Range
		// reads hold tx.mu through theirs (readRangeAsIssued).
		tx.mu.Lock()
		if derr := tx.deliverableLocked(gen); derr != nil {
			err = derr
		} else if err != nil && !watch {
			tx.readFailedLocked(err)
		}
		tx.mu.Unlock()
		if err != nil {
			f.err = err
			return
		}
		if ops != nil {
			v, ok = foldOps(v, ok, ops)
		}
		f.val = ownValue(v, ok)
	}()
	return f
}

// getMetadataVersionNow is get of the metadata version key without a
// latency model (a layer reads it first in each transaction, as a cache
// check). It does what get does for that key, minus the steps that cannot
// apply to it: no clear covers it (Clear and ClearRange refuse keys after
// \xff), the transaction's only possible write of it is a
// SetVersionstampedValue (stVS), its read conflict range is the constant
// [key, key+\x00) (metadataVersionEnd, never modified, so no copy), and
// its value comes with the read version (mvHistory), without a store
// lookup. The caller checked that the DB has no latency model.
func (tx *transaction) getMetadataVersionNow(snap bool, watchGen *uint64) kv.FutureValue {
	tx.mu.Lock()
	var err error
	if watchGen != nil {
		err = tx.deliverableLocked(*watchGen) // see get
	} else {
		err = tx.checkReadLocked()
	}
	if err != nil {
		tx.mu.Unlock()
		return &valueFuture{err: err}
	}
	if x := tx.x; x != nil && len(x.unreadable) > 0 && tx.unreadableLocked(mvKey(), metadataVersionEnd) {
		err := tx.readFailedUnlessWatchLocked(kv.ErrAccessedUnreadable, watchGen != nil)
		tx.mu.Unlock()
		return &valueFuture{err: err}
	}
	var ops []atomicOp
	if tx.writes.len() > 0 {
		if e := tx.writes.get(mvKey()); e != nil {
			var f kv.FutureValue
			if f, ops = tx.ownReadLocked(e, watchGen == nil); f != nil {
				tx.mu.Unlock()
				return f
			}
		}
	}
	if !snap {
		tx.addReadConflictLocked(mvKey(), metadataVersionEnd)
	}
	fresh := tx.rvState != rvHave
	if fresh {
		if err := tx.grvLocked(); err != nil {
			err = tx.readFailedUnlessWatchLocked(err, watchGen != nil)
			tx.mu.Unlock()
			return &valueFuture{err: err}
		}
	}
	db := tx.db
	db.mu.RLock()
	if err := db.servesLocked(tx.rv, tx.grvTime, fresh); err != nil {
		db.mu.RUnlock()
		err = tx.readFailedUnlessWatchLocked(err, watchGen != nil)
		tx.mu.Unlock()
		return &valueFuture{err: err}
	}
	stamp := db.mv.at(tx.rv) // never modified
	db.mu.RUnlock()
	tx.rc = nil // the key has no chain (as readPoint returns)
	f := tx.newFutureLocked()
	tx.mu.Unlock()
	v, ok := stamp, stamp != nil
	if ops != nil {
		v, ok = foldOps(v, ok, ops)
	}
	f.val = ownValue(v, ok) // its own allocation (see get)
	return f
}

// ownRead is a point read of a key the transaction wrote (entry e): the
// value the transaction determined (a known value, or accessed_unreadable
// for a versionstamped one), which needs no read and adds no conflict; or
// nil and the atomic operations to fold into the database's value (e.ops
// is only ever appended to). record: record a failure for Commit
// (readFailedLocked; not for a watch's read).
func (tx *transaction) ownReadLocked(e *wentry, record bool) (kv.FutureValue, []atomicOp) {
	switch {
	case e.unreadable():
		if record {
			tx.readFailedLocked(kv.ErrAccessedUnreadable)
		}
		return &valueFuture{err: kv.ErrAccessedUnreadable}, nil
	case e.st == stKnown:
		return &valueFuture{val: ownValue(e.val, e.exists)}, nil
	}
	return nil, e.ops
}

// readFailedLocked records err, the error of a read the transaction issued,
// for its Commit, and returns it. FDB's commit waits for every read issued
// (ReadYourWritesTransaction::get and getRange add each to reading, an
// AndFuture that keeps failed futures: flow/include/flow/
// genericactors.actor.h; RYWImpl::commit awaits it,
// fdbclient/ReadYourWrites.actor.cpp), so a read that failed, with
// accessed_unreadable say, fails the commit with its error. Errors found
// before a read is issued (a cancellation, used_during_commit, a key outside
// the legal range, invalid limits) are not recorded: FDB returns them
// without adding a read.
func (tx *transaction) readFailedLocked(err error) error {
	var ke kv.Error
	if errors.As(err, &ke) && ke.Code > 0 && ke.Code <= math.MaxUint16 {
		if x := tx.cold(); x.readErr == 0 {
			x.readErr = uint16(ke.Code)
		}
	}
	return err
}

// readFailedUnlessWatchLocked is readFailedLocked, except for a watch's
// read (watch), whose failure fails only the watch.
func (tx *transaction) readFailedUnlessWatchLocked(err error, watch bool) error {
	if watch {
		return err
	}
	return tx.readFailedLocked(err)
}

// checkReadLocked is checkLocked, answered without calls in the common
// case: a transaction with no cold state (x: no sticky error, timeout or
// cancellation error), not cancelled, committing or committed, on an open
// DB, may read (checkLocked returns nil for it).
func (tx *transaction) checkReadLocked() error {
	if tx.x == nil && !tx.cancelled && !tx.commitStarted && !tx.db.closedFlag.Load() {
		return nil
	}
	return tx.checkLocked()
}

// mvKey returns the metadata version key as the prefix of
// metadataVersionEnd, capped so that an append copies.
func mvKey() []byte {
	n := len(metadataVersionEnd) - 1
	return metadataVersionEnd[:n:n]
}

// GetRange reads the keys in r; see kv.ReadTransaction. As FDB's binding
// does (bindings/go/src/fdb/transaction.go getRange), the first batch is
// issued when GetRange is called: its read conflict range is added then,
// whether or not the result is consumed. Further batches are read as the
// result is consumed.
func (tx *transaction) GetRange(r kv.KeyRange, opts kv.RangeOptions) kv.RangeResult {
	return tx.getRange(r, opts, false)
}

func (tx *transaction) getRange(r kv.KeyRange, opts kv.RangeOptions, snap bool) kv.RangeResult {
	if afterUserKeys(r.Begin) || afterUserKeys(r.End) {
		// FDB's getRange tests the legal range before the limits and the
		// order of the bounds (ReadYourWritesTransaction::getRange):
		// inverted ranges are refused too.
		return &rangeResult{tx: tx, err: tx.illegalReadErr()}
	}
	var rr *rangeResult
	var room *opEntry
	if !tx.roomAsked.Load() && tx.roomAsked.CompareAndSwap(false, true) {
		// A queue's operation reads an end, then counts: the attempt's
		// first range result comes with room for an atomic operation's
		// entry (one allocation of 512 bytes for both, a size class).
		a := &struct {
			rangeResult
			room opEntry
		}{rangeResult: rangeResult{tx: tx, snap: snap, opts: opts}}
		rr, room = &a.rangeResult, &a.room
	} else {
		rr = &rangeResult{tx: tx, snap: snap, opts: opts}
	}
	// The bounds are legal (above), and so are their clamped prefixes
	// (rangeBounds). A range whose begin is after its end is read as
	// given: FDB's getRange answers it with no pairs (its key selectors
	// cross), not inverted_range, and every read of [b, e) answers
	// b >= e with none and adds no conflict range (readRangeNow,
	// readRangeInto).
	b, e, _ := copyBounds(clampRangeKey(r.Begin), clampRangeKey(r.End), rr.buf[:])
	var err error
	if opts.Limit < 0 {
		err = kv.ErrRangeLimitsInvalid // see kv.RangeOptions.Limit
	}
	rr.b, rr.e, rr.err = b, e, err
	if err == nil {
		rr.kvs = rr.row[:0:1]
		var spare []byte
		if n := len(b) + len(e); n <= len(rr.buf) {
			// The rest of buf may take the conflict key.
			spare = rr.buf[n:]
		}
		tx.issueBatch(rr, spare, batchSize(opts, opts.Limit, firstBatch), room)
	} else if room != nil {
		tx.mu.Lock()
		tx.takeRoomLocked(room)
		tx.mu.Unlock()
	}
	return rr
}

// illegalReadErr returns the error of a read outside the legal range: the
// transaction's own error if it has one (an invalid write's, a
// cancellation's, used_during_commit, which also fails a Commit in flight),
// else key_outside_legal_range. FDB tests the transaction first:
// ThreadSafeTransaction's get and getRange call checkDeferredError, then
// ReadYourWritesTransaction's test checkUsedDuringCommit and resetPromise
// before the key (fdbclient/ThreadSafeTransaction.cpp,
// fdbclient/ReadYourWrites.actor.cpp). A transaction with both an invalid
// write's error and a cancellation reports the cancellation here
// (checkLocked's order), the write's error on FDB.
func (tx *transaction) illegalReadErr() error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkLocked(); err != nil {
		return err
	}
	return kv.ErrKeyOutsideLegalRange
}

// afterUserKeys reports whether k sorts after maxUserKey (\xff): whether
// it is longer and starts with \xff.
func afterUserKeys(k []byte) bool { return len(k) > 1 && k[0] == 0xff }

// batchSize is the number of rows to ask for in a batch of mode opts.Mode
// with left rows left under the limit (0: no limit) and next the iterator
// mode's batch size; 0 means everything.
func batchSize(opts kv.RangeOptions, left, next int) int {
	n := next
	switch opts.Mode {
	case kv.StreamingModeWantAll:
		n = 0
	case kv.StreamingModeExact:
		n = opts.Limit
	}
	if opts.Limit > 0 && (n == 0 || n > left) {
		n = left
	}
	return n
}

// wait waits for the first batch.
func (r *rangeResult) wait() {
	if r.done != nil {
		<-r.done
	}
}

// issueBatch starts reading r's first batch, up to n rows (0: all), their
// bytes in spare while they fit. Without a latency model it reads at once;
// with one, in a goroutine that Commit waits for, as FDB's commit waits
// for the reads issued before it (RYWImpl::commit waits on ryw->reading).
//
// room, if not nil, is room for an atomic operation's entry that the
// transaction takes (takeRoomLocked).
func (tx *transaction) issueBatch(r *rangeResult, spare []byte, n int, room *opEntry) {
	if !tx.db.latency {
		tx.readFirstNow(r, spare, n, room)
		return
	}
	dst, b, e, reverse, snap := r.kvs, r.b, r.e, r.opts.Reverse, r.snap
	tx.mu.Lock()
	tx.takeRoomLocked(room)
	// The checks of an issue (a Commit started: used_during_commit); the
	// read in flight then fails only with a reset or cancellation
	// (readRangeAsIssued).
	if err := tx.checkLocked(); err != nil {
		tx.mu.Unlock()
		r.batchErr = err
		return
	}
	r.done = make(chan struct{})
	tx.startReadLocked()
	gen, view := tx.gen, tx.holdViewLocked()
	tx.mu.Unlock()
	go func() {
		defer close(r.done)
		defer tx.endRead(gen)
		r.kvs, r.limited, r.batchErr = tx.readRangeAsIssued(dst, spare, b, e, n, reverse, snap, gen, view)
	}()
}

// rangeResult is a range read whose first batch was issued by GetRange.
//
// It holds inline what a small read needs, each part handed out at most
// once and never reused: the bounds' copies, the first batch's first row
// and its bytes (a queue's head or tail read). An iterator is allocated
// apart: GetSlice, the common way to read a few rows, needs none.
type rangeResult struct {
	tx   *transaction
	b, e []byte
	opts kv.RangeOptions
	err  error // the read could not be issued
	// The first batch, possibly still in flight (done is nil when it was
	// read when issued): its rows, whether it reached its size, its error.
	done     chan struct{}
	kvs      []kv.KeyValue
	batchErr error
	limited  bool
	snap     bool
	taken    atomic.Bool // the first batch was handed to a consumer
	row      [1]kv.KeyValue
	// buf holds the bounds' copies, then a limited read's conflict key
	// while they fit. Rows' bytes never go here (see mergeIntoLocked).
	buf [resultInline]byte
}

// resultInline is the room in a rangeResult for its bounds and a limited
// read's conflict key (the rangeResult is then 352 bytes, a size class).
const resultInline = 152

// GetSlice reads the whole (limited) range: the first batch, then the rest
// in one more read. A second consumer reads the range again, with the
// transaction's writes made since GetRange (FDB's binding would answer its
// first batch from the issued read: see kv.RangeResult).
func (r *rangeResult) GetSlice() ([]kv.KeyValue, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.taken.CompareAndSwap(false, true) {
		kvs, _, err := r.tx.readRange(r.b, r.e, r.opts.Limit, r.opts.Reverse, r.snap)
		return kvs, err
	}
	r.wait()
	if r.batchErr != nil {
		return nil, r.batchErr
	}
	n := len(r.kvs)
	if !r.limited || n == 0 || (r.opts.Limit > 0 && n >= r.opts.Limit) {
		return r.kvs, nil
	}
	b, e := r.b, r.e
	if last := r.kvs[n-1].Key; r.opts.Reverse {
		e = last
	} else {
		b = keyAfter(last)
	}
	left := 0
	if r.opts.Limit > 0 {
		left = r.opts.Limit - n
	}
	rest, _, err := r.tx.readRange(b, e, left, r.opts.Reverse, r.snap)
	if err != nil {
		return nil, err
	}
	return append(r.kvs, rest...), nil
}

// Iterator returns an iterator that reads the range in batches, starting
// with the batch GetRange issued.
func (r *rangeResult) Iterator() kv.RangeIterator { return r.iter() }

func (r *rangeResult) iter() *rangeIter {
	if r.err == nil && r.taken.CompareAndSwap(false, true) {
		// The first consumer takes the first batch, once. A later
		// consumer reads the range again (unlike FDB's binding: see
		// kv.RangeResult).
		return &rangeIter{r: r, first: true, b: r.b, e: r.e, left: r.opts.Limit, batch: firstBatch}
	}
	return &rangeIter{r: r, b: r.b, e: r.e, left: r.opts.Limit, err: r.err, batch: firstBatch}
}

// Batch sizes of StreamingModeIterator: the first batch is small, each
// further one twice as large, up to maxBatch.
const (
	firstBatch = 16
	maxBatch   = 4096
)

// rangeIter streams a range read.
type rangeIter struct {
	r     *rangeResult
	first bool   // the first batch (r's) is still to be taken
	b, e  []byte // what is left to read
	left  int    // rows left under the limit; 0: no limit
	buf   []kv.KeyValue
	i     int // buf[i-1] is the current pair, if i > 0
	err   error
	batch int32 // next batch size in iterator mode; 0: unbounded
	done  bool
}

func (it *rangeIter) Next() bool {
	for it.i >= len(it.buf) {
		if it.done || it.err != nil {
			return false
		}
		it.fetch()
	}
	it.i++
	return true
}

// fetch takes the next batch: the one GetRange issued, or a new read whose
// conflict range covers exactly what it depended on, so the batches
// together cover what was fetched.
func (it *rangeIter) fetch() {
	var kvs []kv.KeyValue
	var limited bool
	var err error
	if it.first {
		it.first = false
		r := it.r
		r.wait()
		kvs, limited, err = r.kvs, r.limited, r.batchErr
	} else {
		n := batchSize(it.r.opts, it.left, int(it.batch))
		kvs, limited, err = it.r.tx.readRange(it.b, it.e, n, it.r.opts.Reverse, it.r.snap)
	}
	if err != nil {
		it.err = err
		return
	}
	if len(kvs) > 0 {
		// An empty batch keeps buf, so that KeyValue still returns the
		// last pair once Next has returned false.
		it.buf, it.i = kvs, 0
	}
	if it.batch > 0 && it.batch < maxBatch && it.r.opts.Mode == kv.StreamingModeIterator {
		it.batch = min(it.batch*2, maxBatch)
	}
	if it.r.opts.Limit > 0 {
		it.left -= len(kvs)
		if it.left <= 0 {
			it.done = true
		}
	}
	if !limited || len(kvs) == 0 {
		it.done = true
	}
	if it.done {
		return
	}
	last := kvs[len(kvs)-1].Key
	if it.r.opts.Reverse {
		it.e = last
	} else {
		it.b = keyAfter(last)
	}
}

func (it *rangeIter) KeyValue() kv.KeyValue {
	if it.i == 0 {
		return kv.KeyValue{}
	}
	return it.buf[it.i-1]
}

func (it *rangeIter) Err() error { return it.err }

// readRange reads up to limit (0: all) pairs of [b, e), merging the
// database at the read version with the transaction's writes, and adds the
// read conflict range the result depended on. limited reports whether the
// limit was reached.
func (tx *transaction) readRange(b, e []byte, limit int, reverse, snap bool) ([]kv.KeyValue, bool, error) {
	return tx.readRangeInto(nil, nil, b, e, limit, reverse, snap)
}

// readRangeInto is readRange appending to dst (empty), whose array the
// result uses while it has room, and copying the rows' bytes into spare
// while it has room.
func (tx *transaction) readRangeInto(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool) ([]kv.KeyValue, bool, error) {
	if !tx.db.latency {
		return tx.readRangeNow(dst, spare, b, e, limit, reverse, snap, nil)
	}
	tx.mu.Lock()
	if err := tx.checkLocked(); err != nil {
		tx.mu.Unlock()
		return nil, false, err
	}
	gen, view := tx.gen, tx.holdViewLocked()
	tx.mu.Unlock()
	return tx.readRangeAsIssued(dst, spare, b, e, limit, reverse, snap, gen, view)
}

// readRangeAsIssued is readRangeInto under a latency model, for a read
// issued in generation gen that holds view (and lets go of it), the
// caller having made the checks of its issue (checkLocked): the
// transaction's writes made after the read was issued, versionstamped
// keys included, are not in its result and do not make it fail with
// accessed_unreadable, as on FoundationDB (see ownView); and a reset or
// cancellation since its issue fails it (see deliverableLocked), but not
// a Commit started since, which waits for it.
func (tx *transaction) readRangeAsIssued(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool, gen uint64, view *ownView) ([]kv.KeyValue, bool, error) {
	defer func() {
		tx.mu.Lock()
		tx.releaseViewLocked(view)
		tx.mu.Unlock()
	}()
	tx.mu.Lock()
	err := tx.deliverableLocked(gen)
	tx.mu.Unlock()
	if err != nil {
		return nil, false, err
	}
	if bytes.Compare(b, e) >= 0 {
		return nil, false, nil
	}
	db := tx.db
	rv, grvTime, err := tx.readVersion(gen, false)
	if err != nil {
		return nil, false, err
	}
	if err := tx.sleepIn(db.rng.sample(db.cfg.latency.Read), &gen); err != nil {
		return nil, false, err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.deliverableLocked(gen); err != nil {
		return nil, false, err
	}
	return tx.readStoreAsLocked(dst, spare, b, e, limit, reverse, snap, rv, grvTime, false, view)
}

// readRangeNow is readRangeInto without a latency model: the whole read
// under one hold of tx.mu, which also obtains the read version if needed
// and takes room (see issueBatch).
func (tx *transaction) readRangeNow(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool, room *opEntry) ([]kv.KeyValue, bool, error) {
	tx.mu.Lock()
	tx.takeRoomLocked(room)
	if err := tx.checkLocked(); err != nil {
		tx.mu.Unlock()
		return nil, false, err
	}
	if bytes.Compare(b, e) >= 0 {
		tx.mu.Unlock()
		return nil, false, nil
	}
	fresh := tx.rvState != rvHave
	if fresh {
		if err := tx.grvLocked(); err != nil {
			tx.readFailedLocked(err)
			tx.mu.Unlock()
			return nil, false, err
		}
	}
	out, limited, err := tx.readStoreLocked(dst, spare, b, e, limit, reverse, snap, tx.rv, tx.grvTime, fresh)
	tx.mu.Unlock()
	return out, limited, err
}

// readFirstNow is readRangeNow for r's first batch of up to n rows (0:
// all), its result stored in r. A read of one row (a queue's head or tail)
// by a transaction with no writes, clears or unreadable ranges in the way
// takes the store's firstAt directly, with what readStoreLocked and
// mergeIntoLocked would do for it done inline: one call instead of three,
// whose many arguments cost more than their work. Any other read goes
// through readStoreLocked.
func (tx *transaction) readFirstNow(r *rangeResult, spare []byte, n int, room *opEntry) {
	tx.mu.Lock()
	tx.takeRoomLocked(room)
	if err := tx.checkReadLocked(); err != nil {
		tx.mu.Unlock()
		r.batchErr = err
		return
	}
	b, e := r.b, r.e
	if bytes.Compare(b, e) >= 0 {
		tx.mu.Unlock()
		r.kvs = nil
		return
	}
	fresh := tx.rvState != rvHave
	if fresh {
		if err := tx.grvLocked(); err != nil {
			r.batchErr = tx.readFailedLocked(err)
			tx.mu.Unlock()
			return
		}
	}
	db := tx.db
	if n != 1 || tx.writes.len() > 0 || db.st.fullScan || db.readFaultsOn.Load() ||
		(tx.x != nil && (len(tx.x.clears) > 0 || len(tx.x.unreadable) > 0)) {
		r.kvs, r.limited, r.batchErr = tx.readStoreLocked(r.kvs, spare, b, e, n, r.opts.Reverse, r.snap, tx.rv, tx.grvTime, fresh)
		tx.mu.Unlock()
		return
	}
	// readStoreLocked's steps, for one row and nothing of the
	// transaction's own to merge (mergeIntoLocked's first case).
	db.mu.RLock()
	if err := db.servesLocked(tx.rv, tx.grvTime, fresh); err != nil {
		db.mu.RUnlock()
		r.batchErr = tx.readFailedLocked(err)
		tx.mu.Unlock()
		return
	}
	reverse := r.opts.Reverse
	c, v := db.st.firstAt(b, e, tx.rv, reverse)
	if c == nil {
		db.mu.RUnlock()
		db.stats.rangeReads.Add(1)
		r.kvs = nil
		if !r.snap {
			// b < e and nothing of the transaction's own to subtract
			// (addReadConflictLocked's first case); so below.
			tx.addReadLocked(b, e)
		}
		tx.mu.Unlock()
		return
	}
	r.row[0] = ownRow(c.key, v)
	db.mu.RUnlock()
	db.stats.rangeReads.Add(1)
	tx.rc = c // the hint for a write of the key (a dequeue's clear)
	r.kvs, r.limited = r.row[:1:1], true
	if !r.snap {
		key := tx.rowBoundLocked(r.row[0].Key, spare, reverse)
		// Not empty: the row is in [b, e).
		if reverse {
			tx.addReadLocked(key, e)
		} else {
			tx.addReadLocked(b, key)
		}
	}
	tx.mu.Unlock()
}

// readStoreLocked reads [b, e) at rv (obtained at grvTime; fresh: just
// now, so it cannot be too old) through the transaction's writes and adds
// the read conflict range. The caller holds tx.mu.
//
// The read may fail with an injected fault (Faults.ReadErrors), unless
// the transaction cleared the whole range: FDB's read-your-writes layer
// answers that without a storage server.
func (tx *transaction) readStoreLocked(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool, rv int64, grvTime time.Duration, fresh bool) ([]kv.KeyValue, bool, error) {
	return tx.readStoreAsLocked(dst, spare, b, e, limit, reverse, snap, rv, grvTime, fresh, nil)
}

// readStoreAsLocked is readStoreLocked for a read that sees the
// transaction's writes as view holds them (see readRangeAsIssued; nil: as
// they are now).
func (tx *transaction) readStoreAsLocked(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool, rv int64, grvTime time.Duration, fresh bool, view *ownView) ([]kv.KeyValue, bool, error) {
	writes, clears, unread := tx.ownStateLocked(view)
	if tx.db.readFaultsOn.Load() {
		if cr, ok := clears.find(b); !ok || bytes.Compare(cr.e, e) < 0 {
			if err := tx.db.readFault(); err != nil {
				return nil, false, tx.readFailedLocked(err)
			}
		}
	}
	out, limited, err := tx.readStoreOnceLocked(dst, spare, b, e, limit, reverse, snap, rv, grvTime, fresh, unread, writes, clears)
	if err != nil {
		tx.readFailedLocked(err)
	}
	return out, limited, err
}

func (tx *transaction) readStoreOnceLocked(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse, snap bool, rv int64, grvTime time.Duration, fresh bool, unread []krange, writes *writeMap, clears clearSet) ([]kv.KeyValue, bool, error) {
	db := tx.db
	db.mu.RLock()
	if err := db.servesLocked(rv, grvTime, fresh); err != nil {
		db.mu.RUnlock()
		return nil, false, err
	}
	out, spare, err := tx.mergeIntoLocked(dst, spare, b, e, limit, reverse, rv, writes, clears)
	db.mu.RUnlock()
	db.stats.rangeReads.Add(1)
	if err != nil {
		return nil, false, err
	}
	limited := limit > 0 && len(out) == limit
	if len(unread) > 0 {
		// The part of the range the read went through.
		sb, se := b, e
		if limited {
			if last := out[len(out)-1].Key; reverse {
				sb = last
			} else {
				se = keyAfter(last)
			}
		}
		if overlapsAny(unread, sb, se) {
			return nil, false, kv.ErrAccessedUnreadable
		}
	}
	if !snap {
		cb, ce := b, e
		if limited {
			k := tx.rowBoundLocked(out[len(out)-1].Key, spare, reverse)
			if reverse {
				cb = k
			} else {
				ce = k
			}
		}
		tx.addReadConflictAsLocked(cb, ce, writes, clears)
	}
	return out, limited, nil
}

// servesLocked reports whether the store can serve a read at rv, obtained
// at grvTime (fresh: just now, so it cannot be too old): ErrClosed, or
// transaction_too_old past the MVCC window. The caller holds db.mu.
func (db *DB) servesLocked(rv int64, grvTime time.Duration, fresh bool) error {
	if db.closed {
		return ErrClosed
	}
	if !fresh && db.tooOldLocked(rv, grvTime, db.clock.Now()) {
		db.stats.tooOld.Add(1)
		return kv.ErrTransactionTooOld
	}
	return nil
}

// rowBoundLocked returns the bound of a limited read's conflict range at
// its last row, whose key is last: after it (last+\x00) forwards, last
// itself in reverse. The key goes to spare (the result's room) if it fits,
// else to the arena; never the row's own copy, which the caller may
// modify. The caller holds tx.mu.
func (tx *transaction) rowBoundLocked(last, spare []byte, reverse bool) []byte {
	n := len(last)
	if !reverse {
		n++
	}
	if n <= len(spare) {
		k := spare[:n:n]
		copy(k, last)
		if !reverse {
			k[n-1] = 0
		}
		return k
	}
	if reverse {
		return tx.copyLocked(last)
	}
	return tx.afterLocked(last)
}

// mergeLocked reads [b, e) at rv through the transaction's writes. The
// caller holds tx.mu and db.mu (shared).
func (tx *transaction) mergeLocked(b, e []byte, limit int, reverse bool, rv int64) ([]kv.KeyValue, error) {
	out, _, err := tx.mergeIntoLocked(nil, nil, b, e, limit, reverse, rv, &tx.writes, tx.clearsLocked())
	return out, err
}

// mergeIntoLocked is mergeLocked appending to dst (empty), with the
// transaction's writes and clears as given (ownStateLocked). Each row's
// bytes get their own allocation; spare (the result's room for its
// conflict key) is returned untouched.
func (tx *transaction) mergeIntoLocked(dst []kv.KeyValue, spare, b, e []byte, limit int, reverse bool, rv int64, writes *writeMap, clears clearSet) ([]kv.KeyValue, []byte, error) {
	own := writes.len() > 0 || len(clears) > 0
	if !own && limit == 1 && !tx.db.st.fullScan {
		// A queue's head or tail read: no cursor needed.
		if c, v := tx.db.st.firstAt(b, e, rv, reverse); c != nil {
			tx.rc = c
			return append(dst, ownRow(c.key, v)), spare, nil
		}
		return nil, spare, nil
	}
	out := dst
	emit := func(k, v []byte) { out = append(out, ownRow(k, v)) }
	var dc rangeCursor
	dc.init(tx.db.st, b, e, rv, reverse)
	defer dc.release()

	if !own {
		// Nothing of the transaction's own to merge (a queue's head or
		// tail read): the database's keys live at rv, in order.
		for c := dc.cur; c != nil; c = dc.cur {
			if v, live := c.at(rv); live {
				emit(c.key, v)
				tx.rc = c // the hint for a write of the key (a dequeue's clear)
				if limit > 0 && len(out) >= limit {
					break // no need to find the next key
				}
			}
			dc.step()
		}
		if len(out) == 0 {
			return nil, spare, nil
		}
		return out, spare, nil
	}

	var wc cursor
	if reverse {
		wc.seek(writes, e, true)
	} else {
		wc.seek(writes, b, false)
	}

	for limit <= 0 || len(out) < limit {
		// The next database key live at rv and not cleared by the
		// transaction.
		var dk, dv []byte
		for c := dc.cur; c != nil; c = dc.cur {
			if cr, cleared := clears.find(c.key); cleared {
				if reverse {
					dc.seek(cr.b)
				} else {
					dc.seek(cr.e)
				}
				continue
			}
			if v, live := c.at(rv); live {
				dk, dv = c.key, v
				break
			}
			dc.step()
		}
		we := wc.cur
		if we != nil && !dc.inRange(we.key) {
			we = nil
		}
		if dk == nil && we == nil {
			break
		}
		if we == nil || (dk != nil && dc.before(dk, we.key)) {
			emit(dk, dv)
			tx.rc = dc.cur // the hint for a write of the key (a dequeue's clear)
			if limit > 0 && len(out) >= limit {
				break // no need to find the next key
			}
			dc.step()
			continue
		}
		// The transaction wrote we.key.
		var base []byte
		var baseOK bool
		if dk != nil && bytes.Equal(dk, we.key) {
			base, baseOK = dv, true
			dc.step()
		}
		wc.next()
		switch {
		case we.unreadable():
			return nil, nil, kv.ErrAccessedUnreadable
		case we.st == stKnown:
			if we.exists {
				emit(we.key, we.val)
			}
		case we.st == stOps:
			if v, ok := foldOps(base, baseOK, we.ops); ok {
				emit(we.key, v)
			}
		}
	}
	if len(out) == 0 {
		return nil, spare, nil // as without dst
	}
	return out, spare, nil
}

// ownRow returns the row (k, v) in its own allocation, never spare (the
// result's inline room): a caller that keeps a dequeued value must not
// keep the result and its transaction reachable.
func ownRow(k, v []byte) kv.KeyValue {
	buf := make([]byte, len(k)+len(v))
	copy(buf, k)
	copy(buf[len(k):], v)
	return kv.KeyValue{Key: buf[:len(k):len(k)], Value: buf[len(k):]}
}

// snapshot is a transaction's snapshot view: reads add no conflicts.
type snapshot struct{ tx *transaction }

var _ kv.ReadTransaction = snapshot{}

func (s snapshot) Get(key []byte) kv.FutureValue { return s.tx.get(key, true, nil) }

func (s snapshot) GetRange(r kv.KeyRange, opts kv.RangeOptions) kv.RangeResult {
	return s.tx.getRange(r, opts, true)
}

func (s snapshot) GetReadVersion() kv.FutureInt64 { return s.tx.GetReadVersion() }

func (s snapshot) Snapshot() kv.ReadTransaction { return s }

func (s snapshot) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(s)
}

// firstAt returns the first chain of [b, e) in the read's direction (the
// last one in reverse) that has a value at rv, and that value; nil if there
// is none. It finds what a rangeCursor's walk finds first, for a read of
// one row (a queue's head or tail), without the cursor's iterator: the
// tree's first (last) key when it is in the range, found by a descent
// without key comparisons, or in reverse the store's gap (liveGap) when
// the range ends in it (a queue's tail, before its counters), else a walk
// of liveTree from the range's bound;
// then dead, between the bound and the chain found, unless no chain was
// written after rv (maxWV). The caller holds db.mu (shared); not with
// fullScan.
func (s *store) firstAt(b, e []byte, rv int64, reverse bool) (*chain, []byte) {
	var c *chain
	var v []byte
	bk, ek := ukey(b), ukey(e)
	if reverse {
		g := s.gap.Load()
		if g != nil && ukey(g.lo.key) < ek && ek <= ukey(g.hi.key) {
			// The tree's last key before e is the gap's (a queue's tail
			// read, whose range ends before the queue's other keys).
			c, v = s.lastFrom(g.lo, bk, rv)
		} else if k, x, ok := s.liveTree.Max(); !ok || k < bk {
			// No key of the tree is in the range.
		} else if k < ek {
			c, v = s.lastFrom(x, bk, rv)
		} else if g == nil || s.gapMisses.Add(1)%gapReplace == 0 {
			c, v = s.lastBefore(bk, ek, rv)
		} else {
			// The gap is another range's (another queue's): search as
			// lastBefore does, without the cost of replacing it, which
			// reads of two queues taking turns would pay at each read.
			s.liveTree.Descend(ek, func(k string, x *chain) bool {
				if k < bk {
					return false
				}
				if xv, live := x.at(rv); live && k != ek {
					c, v = x, xv
					return false
				}
				return true
			})
		}
		if s.maxWV <= rv {
			return c, v // no chain was written after rv: none in dead matters
		}
		// dead and liveTree hold different chains: c.key is not in dead.
		stop := b
		if c != nil {
			stop = c.key
		}
		for d := s.dead.last(e, false, rv); d != nil && bytes.Compare(d.key, stop) >= 0; d = s.dead.last(d.key, false, rv) {
			if dv, live := d.at(rv); live {
				return d, dv
			}
		}
		return c, v
	}
	if k, x, ok := s.liveTree.Min(); !ok || k >= ek {
		// No key of the tree is in the range.
	} else if xv, live := x.at(rv); k >= bk && live {
		c, v = x, xv
	} else {
		s.liveTree.Ascend(bk, func(k string, x *chain) bool {
			if k >= ek {
				return false
			}
			if xv, live := x.at(rv); live {
				c, v = x, xv
				return false
			}
			return true
		})
	}
	if s.maxWV <= rv {
		return c, v
	}
	stop := e
	if c != nil {
		stop = c.key
	}
	for d := s.dead.first(b, false, rv); d != nil && bytes.Compare(d.key, stop) < 0; d = s.dead.first(d.key, true, rv) {
		if dv, live := d.at(rv); live {
			return d, dv
		}
	}
	return c, v
}

// lastFrom returns the first chain of liveTree from x (the tree's last
// before the range's end) backwards, not before bk, that has a value at
// rv, and that value; nil if there is none.
func (s *store) lastFrom(x *chain, bk string, rv int64) (*chain, []byte) {
	xk := ukey(x.key)
	if xk < bk {
		return nil, nil
	}
	if xv, live := x.at(rv); live {
		return x, xv
	}
	var c *chain
	var v []byte
	s.liveTree.Descend(xk, func(k string, x *chain) bool {
		if k < bk {
			return false
		}
		if xv, live := x.at(rv); live && k != xk {
			c, v = x, xv
			return false
		}
		return true
	})
	return c, v
}

// lastBefore is lastFrom for the tree's last chain before ek, found by a
// search; the tree has a key at or after ek. It publishes that chain and the
// one after it as the store's gap (liveGap), so that the next reverse read
// ending there needs no search.
func (s *store) lastBefore(bk, ek string, rv int64) (*chain, []byte) {
	it, ok := s.liveIters.Get().(*btree.MapIter[string, *chain])
	if !ok {
		i := s.liveTree.Iter()
		it = &i
	}
	defer s.liveIters.Put(it)
	// The caller found the tree's last key at or after ek: Seek finds one.
	if !it.Seek(ek) {
		panic("memdb: no key of liveTree at or after the range's end")
	}
	hi := it.Value()
	if !it.Prev() {
		return nil, nil // no key before ek
	}
	s.publishGap(it.Value(), hi)
	for ok := true; ok && it.Key() >= bk; ok = it.Prev() {
		if xv, live := it.Value().at(rv); live {
			return it.Value(), xv
		}
	}
	return nil, nil
}

// takeRoomLocked keeps room (if not nil) for the next atomic operation's
// entry (newOpEntryLocked) unless the transaction has some already. The
// room is part of a range result's allocation: the entry then keeps the
// result reachable while the transaction holds it, and the result already
// keeps the transaction reachable; a row or value never refers to either.
func (tx *transaction) takeRoomLocked(room *opEntry) {
	if room != nil && tx.opRoom == nil {
		tx.opRoom = room
	}
}
