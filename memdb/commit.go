package memdb

import (
	"encoding/binary"
	"time"
	"unsafe"

	"github.com/fdbqueue/fdbqueue/kv"
)

// commitReq is what a transaction sends to the commit step: a snapshot of
// its buffers, which the transaction no longer modifies.
type commitReq struct {
	hasRV   bool
	rv      int64
	grvTime time.Duration // on db.clock
	// dropRV asks the commit step to unregister rv from db.readers if the
	// commit succeeds (commitResult.dropped), together with advancing the
	// horizon: one lock round trip rather than two. Only a commit run
	// while its transaction's mu is held asks for it, so that no reset can
	// unregister rv meanwhile.
	dropRV bool
	// kept: a late landing's rv registration of its own (readers.retain),
	// which landLate drops once the commit step ran.
	kept bool

	reads   []krange // read conflict ranges
	wconf   []krange // explicit write conflict ranges
	writes  *writeMap
	clears  clearSet
	vsKeys  []vsKeyOp
	watches []*watch
}

// vsKeyOp is a buffered SetVersionstampedKey.
type vsKeyOp struct {
	tmpl []byte // the key without its 4-byte offset
	off  int
	val  []byte
	// at is where FDB's write map holds the write: the argument, offset
	// included, with the read version's stamp (0 without one) placed
	// (transformVersionstampKey in ReadYourWritesTransaction::atomicOp).
	// A later clear that covers at drops the write (clearStampedLocked).
	at []byte
}

// commitResult is the outcome of the commit step.
type commitResult struct {
	version int64
	applied bool
	dropped bool // rv was unregistered (commitReq.dropRV)
	err     error
	// rv and rvTime are the read version the step resolved the commit at
	// and when, set when it applied: for a transaction that had none
	// (a blind write), they become its read version (finishCommitLocked).
	rv     int64
	rvTime time.Duration
}

// versionstamp returns the 10-byte versionstamp of a commit at v: the
// big-endian version and the transaction's (always 0) order in its batch.
func versionstamp(v int64) [10]byte {
	var s [10]byte
	binary.BigEndian.PutUint64(s[:8], uint64(v))
	return s
}

// stamped returns tmpl with the versionstamp written at off.
func stamped(tmpl []byte, off int, stamp [10]byte) []byte {
	out := make([]byte, len(tmpl))
	copy(out, tmpl)
	copy(out[off:], stamp[:])
	return out
}

// stampedKey is stamped for a versionstamped key, with key + \x00 in its
// memory: the resolver's range of the key costs no copy, and a later
// Clear of the key may share it (chain.hasEnd).
func stampedKey(tmpl []byte, off int, stamp [10]byte) []byte {
	out := make([]byte, len(tmpl)+1)
	copy(out, tmpl)
	copy(out[off:], stamp[:])
	return out[:len(tmpl):len(out)]
}

// commitStep resolves and applies one transaction atomically: it is the
// proxy, resolver and storage of a real cluster in one critical section.
// honourFaults is false for a commit whose transaction was cancelled while
// it was in flight (its fate was already drawn).
func (db *DB) commitStep(req *commitReq, forced *forcedFailure, fault faultKind) commitResult {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return commitResult{err: ErrClosed}
	}
	now := db.clock.Now()
	latest := db.version.Load()
	rv := latest
	if req.hasRV {
		rv = req.rv
		// FDB's resolver fails a commit as too old when `read_snapshot <
		// newOldestVersion && read_conflict_ranges.size()`
		// (ConflictBatch::addTransaction, fdbserver/SkipList.cpp), and
		// every commit that reaches it has a read conflict range: the
		// client makes one whose write conflict ranges meet none of its
		// read conflict ranges (none at all, say, when its reads were
		// snapshot reads) self-conflicting, with a read and a write
		// conflict range on a random \xff/SC/ key (commitMutations and
		// makeSelfConflicting, fdbclient/NativeAPI.actor.cpp; only the
		// causal_write_risky option, which memdb lacks, skips it). So any
		// commit with a read version past the window is too old; a blind
		// write gets its read version at commit, and a read-only commit
		// sends nothing (commitReadOnlyLocked).
		if db.tooOldLocked(rv, req.grvTime, now) {
			db.stats.tooOld.Add(1)
			return commitResult{err: kv.ErrTransactionTooOld}
		}
	}

	// Failures decided before the commit reaches the resolver.
	if forced != nil && !forced.applied {
		db.stats.injectedForced.Add(1)
		return commitResult{err: forced.err}
	}
	switch fault {
	case faultNotCommitted:
		db.stats.injectedNotCommitted.Add(1)
		return commitResult{err: kv.ErrNotCommitted}
	case faultTooOld:
		db.stats.injectedTooOld.Add(1)
		return commitResult{err: kv.ErrTransactionTooOld}
	case faultUnknownNotApplied:
		db.stats.injectedUnknownNotApplied.Add(1)
		return commitResult{err: kv.ErrCommitUnknownResult}
	case faultVersionChangedNotApplied:
		db.stats.injectedUnknownNotApplied.Add(1)
		return commitResult{err: kv.ErrClusterVersionChanged}
	}
	// Failures reported whatever the resolver decides.
	var reported error
	if forced != nil {
		db.stats.injectedForced.Add(1)
		reported = forced.err
	} else if fault == faultUnknownApplied {
		db.stats.injectedUnknownApplied.Add(1)
		reported = kv.ErrCommitUnknownResult
	} else if fault == faultVersionChangedApplied {
		db.stats.injectedUnknownApplied.Add(1)
		reported = kv.ErrClusterVersionChanged
	}

	// Resolve: a write committed after rv inside a read conflict range.
	if rv < latest {
		for _, r := range req.reads {
			if db.writtenAfterLocked(r, rv) {
				db.stats.conflicts.Add(1)
				if reported != nil {
					return commitResult{err: reported}
				}
				return commitResult{err: kv.ErrNotCommitted}
			}
		}
	}

	v := max(latest+1, db.versionAt(now)+1)
	touched := db.apply(req, v)
	db.version.Store(v)
	// Watches fire once v is every new transaction's read version (GRV
	// reads db.version without db.mu): a client that a watch woke sees
	// the change in its next transaction, as FDB's causality promises
	// (developer-guide.rst, "Causality"; a watch fires from the storage
	// server once it has applied a committed version).
	db.fireWatchesLocked(touched)
	db.registerWatchesLocked(req)
	drop := req.dropRV && reported == nil
	db.collectLocked(now, v, drop, req.rv)
	db.commits++
	return commitResult{version: v, applied: true, dropped: drop, err: reported, rv: rv, rvTime: now}
}

// writtenAfterLocked reports whether a write committed after rv falls in
// the read conflict range r. The caller holds db.mu.
func (db *DB) writtenAfterLocked(r krange, rv int64) bool {
	if len(r.b) > 0 && r.b[0] == 0xff {
		// The metadata version's range, the one read conflict range
		// allowed under \xff: its history says (metaversion.go).
		return db.mv.bumpedAfter(rv)
	}
	return db.res.conflicts(r.b, r.e, rv) || db.st.writtenAfter(r.b, r.e, rv)
}

// apply writes the transaction's mutations at version v and records its
// write conflict ranges: a point write on the key's store entry where it
// has one, everything else in the resolver. It returns the watched keys
// whose value may have changed, for fireWatchesLocked. The caller holds
// db.mu exclusively.
func (db *DB) apply(req *commitReq, v int64) (touched [][]byte) {
	st, res, h := db.st, db.res, db.horizon
	watching := db.watches.n > 0
	stamp := versionstamp(v)

	for _, c := range req.clears {
		if watching {
			touched = append(touched, db.watches.keysIn(c.b, c.e)...)
		}
		st.clearRange(c.b, c.e, v, h)
		res.write(c.b, c.e, v)
	}
	if m := req.writes; m != nil {
		if m.big == nil {
			for _, e := range m.small {
				if db.applyWrite(e, v, stamp) && watching {
					touched = append(touched, e.key)
				}
			}
		} else {
			m.each(func(e *wentry) bool {
				if db.applyWrite(e, v, stamp) && watching {
					touched = append(touched, e.key)
				}
				return true
			})
		}
	}
	// After the clears, even one that covers the stamped key: FDB sends
	// every clear before the atomic operations (writeRangeToNativeTransaction,
	// fdbclient/ReadYourWrites.actor.cpp). A later clear that covered the
	// write's point in the write map dropped it (clearStampedLocked).
	for _, op := range req.vsKeys {
		key := stampedKey(op.tmpl, op.off, stamp)
		if !st.write(key, op.val, true, v, h) {
			res.write(key, key[:len(key)+1], v)
		}
		if watching {
			touched = append(touched, key)
		}
	}
	for _, r := range req.wconf {
		res.write(r.b, r.e, v)
	}
	return touched
}

// fireWatchesLocked fires the watches on the keys touched whose value
// now differs from the one they saw. The caller holds db.mu exclusively.
func (db *DB) fireWatchesLocked(touched [][]byte) {
	for _, k := range touched {
		val, ok := db.latestLocked(k)
		db.watches.changed(k, val, ok)
	}
}

// latestLocked returns key's newest value: the metadata version's for
// that key (metaversion.go), else the store's. The caller holds db.mu.
func (db *DB) latestLocked(key []byte) ([]byte, bool) {
	if isMetadataVersionKey(key) {
		v := db.mv.latest()
		return v, v != nil
	}
	return db.st.latest(key)
}

// applyWrite writes e's key at version v (stamp is v's versionstamp) and
// reports whether a watch of the key may see a change. The caller holds
// db.mu exclusively.
func (db *DB) applyWrite(e *wentry, v int64, stamp [10]byte) bool {
	st, h := db.st, db.horizon
	if len(e.key) > 0 && e.key[0] == 0xff {
		// The metadata version key, bumped (metaversion.go).
		db.mv.bump(v, stamp, h) // and its conflicts: bumpedAfter
		return true
	}
	var val []byte
	var ok bool
	c := st.chainFor(e.c, e.key)
	switch e.st {
	case stKnown:
		val, ok = e.val, e.exists
	case stOps:
		var cur []byte
		var exists bool
		if c != nil {
			cur, exists = c.newest()
		}
		val, ok = foldCommit(&db.vals, cur, exists, e.ops)
		if e.inline && len(val) > 0 && unsafe.SliceData(val) == unsafe.SliceData(e.ops[0].param) {
			// The value is the first operand (an operation on a
			// missing key), in the entry's own memory, which may
			// share a range result's allocation (opRoom) and
			// with it keep the transaction reachable: the store
			// keeps a copy (an inline operand is small).
			val = db.vals.copy(val)
		}
	case stVS:
		val, ok = foldOps(stamped(e.val, int(e.vsOff), stamp), true, e.ops)
	}
	key := e.key
	if c == nil && e.inline {
		key, _ = e.keptKey() // a new chain keeps its key
	}
	if !st.writeAt(c, key, val, ok, v, h) {
		key, end := e.keptKey()
		db.res.write(key, end, v)
	}
	return true
}

// registerWatchesLocked registers the transaction's watches once it has
// committed (at a version, or read-only). A watch compares with the value
// its read saw (the transaction's own write of the key made before the
// watch, else the value at the read version), as FDB's does: RYWImpl::watch
// keeps that value (watch->value, fdbclient/ReadYourWrites.actor.cpp), and
// the storage server fires the watch once the key's latest value differs
// from it (watchWaitForValueChange, fdbserver/storageserver.actor.cpp),
// whatever the transaction wrote after the watch without firing it (a
// versionstamped key that became the watched key, say) and however old its
// read version is. A watch whose reference already differs from the
// current value fires at once, so no change after the read is missed. The
// caller holds db.mu exclusively.
func (db *DB) registerWatchesLocked(req *commitReq) {
	for _, w := range req.watches {
		if db.closed {
			w.finish(ErrClosed)
			continue
		}
		if cur, curOK := db.latestLocked(w.key); w.differs(cur, curOK) {
			w.finish(nil)
			continue
		}
		select {
		case <-w.done: // cancelled meanwhile
		default:
			db.watches.add(w)
		}
	}
}

// collectLocked advances the garbage collection horizon and collects old
// versions and conflict history. The caller holds db.mu exclusively and has
// just published version v at clock time now. If drop, it first
// unregisters the read version rv (see commitReq.dropRV).
func (db *DB) collectLocked(now time.Duration, v int64, drop bool, rv int64) {
	every := db.cfg.window / 256
	if n := len(db.samples); n == 0 || now-db.samples[n-1].t >= every {
		// Read the clock after publishing v: any transaction whose read
		// version was obtained after this time has a read version >= v.
		db.samples = append(db.samples, timeSample{t: db.clock.Now(), v: v})
	}
	cutoff := now - db.cfg.window
	for len(db.samples) >= 2 && db.samples[1].t < cutoff {
		db.samples = db.samples[1:]
	}
	// floor: no transaction whose read version is older may read or
	// commit any more (tooOldLocked), by clock or by version distance.
	floor := v - db.windowV
	if len(db.samples) > 0 && db.samples[0].t < cutoff {
		floor = max(floor, db.samples[0].v)
	}
	// The horizon is the oldest read version still in use, at least floor.
	var oldest int64
	if drop {
		oldest = db.readers.unregisterOldest(rv, floor, v)
	} else {
		oldest = db.readers.oldest(floor, v)
	}
	h := max(db.horizon, floor, oldest)
	db.horizon = h
	db.st.gc(h)
	db.res.maybeGC(h)
}
