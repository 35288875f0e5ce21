package memdb

import (
	"bytes"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A transaction's explicit read and write conflict ranges, and the read
// conflict ranges its reads add.

// addReadConflictLocked adds [b, e) minus the keys the transaction's own
// writes determine (those reads did not depend on the database): cleared
// keys and keys with an independent entry (see wentry.independent), as
// RYW's updateConflictMap skips independent writes (fdbclient/
// ReadYourWrites.actor.cpp).
func (tx *transaction) addReadConflictLocked(b, e []byte) {
	tx.addReadConflictAsLocked(b, e, &tx.writes, tx.clearsLocked())
}

// addReadConflictAsLocked is addReadConflictLocked against the writes and
// clears given: a read in flight's, as they were at its issue (see
// ownView), since FoundationDB computes a read's conflict range with the
// WriteMap::iterator the read made then (addConflictRange, called with
// it.extractWriteMapIterator() in readWithConflictRangeRYW), a snapshot
// that later writes leave as it is (fdbclient/include/fdbclient/
// WriteMap.h): a key written after the read was issued was read from the
// database, and its range stays in.
func (tx *transaction) addReadConflictAsLocked(b, e []byte, writes *writeMap, clears clearSet) {
	if bytes.Compare(b, e) >= 0 {
		return
	}
	if writes.len() == 0 && len(clears) == 0 {
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
	wc.seek(writes, b, false)
	for bytes.Compare(cur, e) < 0 {
		for wc.cur != nil && (!wc.cur.independent() || bytes.Compare(wc.cur.key, cur) < 0) {
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
	if tx.usedDuringCommitLocked() {
		tx.mu.Unlock()
		return false // the next read and Commit report it
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
		// An empty range adds nothing and leaves a read-only transaction
		// read-only (ReadYourWritesTransaction::addWriteConflictRange,
		// fdbclient/ReadYourWrites.actor.cpp: "if (r.empty()) return;").
		x := tx.cold()
		x.wconf = append(x.wconf, krange{b, e})
		tx.size += sizeRange(b, e)
		tx.mutated = true
	}
	return nil
}

// AddWriteConflictKey adds [key, key+\x00) to the write conflict ranges.
func (tx *transaction) AddWriteConflictKey(key []byte) error {
	return tx.AddWriteConflictRange(kv.KeyRange{Begin: key, End: keyAfter(key)})
}
