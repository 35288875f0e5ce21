package memdb

import (
	"bytes"
	"encoding/binary"
	"slices"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A transaction's mutations: Set, Clear, ClearRange, the atomic
// operations and the versionstamped writes.

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
	if tx.cancelledLocked() != nil || tx.usedDuringCommitLocked() {
		return false
	}
	tx.freezeViewLocked() // the write comes after the reads in flight
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
	if old := tx.writes.put(e); old != nil && old.unreadable() {
		e.unread = true
	}
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
	if x := tx.x; x != nil && (len(x.unreadable) > 0 || len(x.vsKeys) > 0) {
		tx.clearStampedLocked(key, keyAfter(key)) // FDB: writes.clear(singleKeyRange(key))
	}
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
	tx.size += mutationRefSize + 2*int64(len(b)+len(e)) + keyRangeRefSize
	if bytes.Equal(b, e) {
		// FDB counts the size but writes nothing: an empty range leaves a
		// read-only transaction read-only (ReadYourWritesTransaction::clear
		// and Transaction::clear, fdbclient/: "if (r.empty()) return;").
		return
	}
	tx.mutated = true
	x := tx.cold()
	x.clears = x.clears.add(b, e)
	tx.writes.deleteRange(b, e)
	if len(x.unreadable) > 0 || len(x.vsKeys) > 0 {
		tx.clearStampedLocked(b, e)
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
	if n := len(e.ops); e.st == stOps && coalesces(e.ops[n-1], kind, p) && !tx.unreadableLocked(key, keyAfter(key)) {
		// FDB merges the operation into the one before it and sends the
		// merged one (WriteMap::coalesceOver, fdbclient/WriteMap.cpp;
		// writeRangeToNativeTransaction): the commit request holds one
		// operation, which counts once toward the size limit. The value
		// is the same as applying them one by one, but for AppendIfFits
		// at the size limit: the value grows by both operands or by
		// neither. A new slice: a pending read may hold e.ops.
		merged, _ := applyOp(kind, e.ops[n-1].param, true, p)
		e.ops = append(e.ops[:n-1:n-1], atomicOp{kind: kind, param: merged})
		return
	}
	e.ops = append(e.ops, atomicOp{kind: kind, param: p})
}

// coalesces reports whether FDB's write map merges an operation of kind
// with operand p into last, the key's previous operation
// (WriteMap::coalesceOver, fdbclient/WriteMap.cpp): when both have the
// same type but CompareAndClear, and, for the types that are not
// associative across widths (NON_ASSOCIATIVE_MASK,
// fdbclient/include/fdbclient/CommitTransaction.h: Add, BitOr, BitXor,
// Max, Min), operands of the same length. BitAnd, ByteMin, ByteMax and
// AppendIfFits merge whatever the lengths. The merged operand is the
// operation applied to last's operand (WriteMap::coalesce).
func coalesces(last atomicOp, kind opKind, p []byte) bool {
	if last.kind != kind {
		return false
	}
	switch kind {
	case opAnd, opByteMin, opByteMax, opAppendIfFits:
		return true
	case opAdd, opOr, opXor, opMax, opMin:
		return len(last.param) == len(p)
	}
	return false // opCompareAndClear, opSetVS
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
	// FDB checks the arguments as given, the template with its 4-byte
	// offset, before it places a stamp (ReadYourWritesTransaction::atomicOp,
	// fdbclient/ReadYourWrites.actor.cpp): the legal range, the key's size (so
	// the key written is at most maxKeySize-4 bytes), the value's size,
	// then the offset.
	err := checkWriteKey(key)
	if err == nil && len(value) > maxValueSize {
		err = kv.ErrValueTooLarge
	}
	var body []byte
	var off int
	if err == nil {
		body, off, err = splitStamped(key)
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
	// The template, the write's point in FDB's write map and the range's
	// bounds share one allocation (they live as long as the transaction);
	// the value gets its own, which the store keeps. The point is the
	// range's beginning followed by the offset bytes
	// (transformVersionstampKey(k, readVersion, 0) on the argument as
	// given, in ReadYourWritesTransaction::atomicOp).
	n := len(body)
	buf := make([]byte, 3*n+5)
	tmpl := buf[:n:n]
	copy(tmpl, body)
	r := tx.stampRangeLocked(buf[n:], body, off)
	at := buf[n : 2*n+4 : 2*n+4]
	copy(at[n:], key[n:])
	x.unreadable = append(x.unreadable, r)
	x.vsKeys = append(x.vsKeys, vsKeyOp{
		tmpl: tmpl, off: off, val: append([]byte{}, value...), at: at,
	})
	tx.size += int64(len(body)+4+len(value)) + mutationRefSize // no write conflict range
	tx.mutated = true
	// FDB fires the transaction's watches on the write's point, as for any
	// atomic operation (triggerWatches(k, ..., valueKnown false) after
	// transformVersionstampKey, in ReadYourWritesTransaction::atomicOp).
	tx.ownWriteLocked(at, nil, nil, false, false)
}

// stampRangeLocked returns the range a versionstamped key with template
// body and stamp offset off may land in, as FDB's getVersionstampKeyRange
// (fdbclient/include/fdbclient/Atomic.h) computes it in FDB 7.3: from the
// template with the transaction's read version (0 if it has none yet:
// ReadYourWritesTransaction::atomicOp passes
// getCachedReadVersion().orDefault(0)) and batch order 0 in place of the
// stamp, so that keys stamped by commits before the read version stay
// readable (a key stamped at the read version does not: FDB 7.4 starts
// the range at the version after it, apple/foundationdb#11424), to just
// after the template with ten 0xff bytes there, capped at the end of the
// user key space. Both bounds are written in buf (2*len(body)+5 zero
// bytes: the beginning, 4 bytes left for the caller, then the end).
func (tx *transaction) stampRangeLocked(buf, body []byte, off int) krange {
	n := len(body)
	b, e := buf[:n:n], buf[n+4:2*n+5:2*n+5]
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

// clearStampedLocked applies a clear of [b, e) to the versionstamped keys,
// as FDB's WriteMap::clear (fdbclient/WriteMap.cpp) does to the write map:
// it removes every entry in the range, a versionstamped key's write among
// them if its point (vsKeyOp.at) is there, and marks the range cleared and
// readable (is_unreadable false). A clear that misses the point leaves the
// write, even if it covers the key the commit will stamp: FDB sends clears
// before atomic operations. b and e may be the caller's memory.
func (tx *transaction) clearStampedLocked(b, e []byte) {
	x := tx.x
	in := func(k []byte) bool { return bytes.Compare(b, k) <= 0 && bytes.Compare(k, e) < 0 }
	if slices.ContainsFunc(x.vsKeys, func(op vsKeyOp) bool { return in(op.at) }) {
		// A new slice: a late commit's request may hold the old one.
		x.vsKeys = slices.DeleteFunc(slices.Clone(x.vsKeys), func(op vsKeyOp) bool { return in(op.at) })
	}
	var out []krange
	for i, r := range x.unreadable {
		if bytes.Compare(r.b, e) >= 0 || bytes.Compare(b, r.e) >= 0 {
			if out != nil {
				out = append(out, r)
			}
			continue
		}
		if out == nil {
			out = append(make([]krange, 0, len(x.unreadable)+1), x.unreadable[:i]...)
		}
		if bytes.Compare(r.b, b) < 0 {
			out = append(out, krange{r.b, bytes.Clone(b)})
		}
		if bytes.Compare(e, r.e) < 0 {
			out = append(out, krange{bytes.Clone(e), r.e})
		}
	}
	if out != nil {
		x.unreadable = out
	}
}

// unreadableLocked reports whether [b, e) reaches a range where one of the
// transaction's versionstamped keys may land: FDB's read then fails with
// accessed_unreadable (RYWIterator.cpp; the range is marked by
// addUnmodifiedAndUnreadableRange in ReadYourWrites.actor.cpp's atomicOp).
func (tx *transaction) unreadableLocked(b, e []byte) bool {
	return overlapsAny(tx.unreadableNowLocked(), b, e)
}

// unreadableNowLocked returns the transaction's unreadable ranges as they
// are now. The slice is never changed in place: a write appends to it or
// replaces it (clearStampedLocked), so a frozen ownView may keep it.
func (tx *transaction) unreadableNowLocked() []krange {
	if tx.x == nil {
		return nil
	}
	return tx.x.unreadable
}

// overlapsAny reports whether [b, e) overlaps one of rs.
func overlapsAny(rs []krange, b, e []byte) bool {
	for _, r := range rs {
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
		// The value's size as given, offset included, then the offset
		// (ReadYourWritesTransaction::atomicOp): the value written is at
		// most maxValueSize-4 bytes.
		if len(value) > maxValueSize {
			err = kv.ErrValueTooLarge
		} else {
			body, off, err = splitStamped(value)
		}
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
