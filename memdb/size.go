package memdb

import (
	"bytes"
	"slices"
)

// Transaction size, as FoundationDB 7.3 counts it.
//
// GetApproximateSize reports FDB's ReadYourWritesTransaction::approximateSize
// (fdbclient/ReadYourWrites.actor.cpp): every call adds its bytes, with no
// merging. A Set adds key + value + sizeof(MutationRef) and its write
// conflict range (sizeof(KeyRangeRef) + 2×key + 1), so about 3×key + value;
// a Clear adds its range [key, key+\x00) twice; a read that adds a read
// conflict range adds it.
//
// The commit's limit check is NativeAPI's Transaction::getSize
// (fdbclient/NativeAPI.actor.cpp, commitMutations: transaction_too_large
// when it exceeds 10,000,000): the mutations, read conflict ranges and write
// conflict ranges of the commit request, each counted as its bytes plus the
// size of its struct (VectorRef::expectedSize). The request is built from
// RYW's merged state, so repeated Sets of one key count once and repeated
// reads of one key add one conflict range. approximateSize is at least
// that size except for point Clears, whose mutation FDB's approximateSize
// counts 24 bytes short (sizeof(KeyRangeRef) instead of sizeof(MutationRef)),
// and keys written inside a range the transaction cleared, each of which
// splits the range's ClearRange mutation in two (clearMutationsSizeLocked):
// 3k+113 bytes in the commit for a Set of a k-byte key and an empty value,
// 3k+89 in approximateSize. Budget with a margin of 24 bytes per cleared key
// and per key written inside a cleared range (the commit computes the exact
// size when it may matter: sizeCheckFrom).
const (
	// mutationRefSize is sizeof(MutationRef) in FDB 7.3 on 64-bit builds:
	// the type byte, two StringRefs (16 bytes each), the optional checksum
	// and accumulative checksum index, and a flag, padded to 8 bytes.
	mutationRefSize = 56
	// keyRangeRefSize is sizeof(KeyRangeRef): two StringRefs.
	keyRangeRefSize = 32
)

// sizeCheckFrom is the approximate size past which a commit computes its
// exact size (commitSizeLocked). The approximate size is at least the
// commit's but for point clears, which it counts as 4k+66 bytes (k the
// key's length) against at most 4k+90 in the commit (a ClearRange
// mutation and a write conflict range of [key, key+\x00)), and for keys
// written inside a cleared range (3k+v+89 against 3k+v+113, a ratio
// above 66/90): a commit can exceed maxTxSize only once the approximate
// size exceeds 66/90 of it.
const sizeCheckFrom = maxTxSize / 90 * 66

// sizeSet is what a Set (or an atomic operation) of key with a
// value (operand) of n bytes adds to the approximate size.
func sizeSet(key []byte, n int) int64 {
	return int64(len(key)+n+mutationRefSize) + int64(keyRangeRefSize+2*len(key)+1)
}

// sizeRange is what a conflict range [b, e) adds.
func sizeRange(b, e []byte) int64 {
	return int64(len(b) + len(e) + keyRangeRefSize)
}

// commitSizeLocked returns the size NativeAPI's getSize would find in the
// commit request built from the transaction's merged state. It is only
// computed when the approximate size exceeds the limit.
func (tx *transaction) commitSizeLocked() int64 {
	var n int64
	var wconf []krange
	tx.writes.each(func(e *wentry) bool {
		k := int64(len(e.key))
		switch e.st {
		case stKnown:
			if e.exists {
				n += mutationRefSize + k + int64(len(e.val))
			} else if _, in := tx.clearsLocked().find(e.key); !in {
				// A clear of [key, key+\x00); inside a cleared range, FDB's
				// write map holds none (WriteMap::clear).
				n += mutationRefSize + 2*k + 1
			}
		case stVS:
			n += mutationRefSize + k + int64(len(e.val)) + 4
		}
		for _, op := range e.ops {
			n += mutationRefSize + k + int64(len(op.param))
		}
		wconf = append(wconf, krange{e.key, e.end()})
		return true
	})
	n += tx.clearMutationsSizeLocked()
	for _, c := range tx.clearsLocked() {
		wconf = append(wconf, c)
	}
	if x := tx.x; x != nil {
		for _, op := range x.vsKeys {
			n += mutationRefSize + int64(len(op.tmpl)+4+len(op.val))
		}
		wconf = append(wconf, x.wconf...)
	}
	return n + mergedSize(wconf) + mergedSize(slices.Clone(tx.reads))
}

// mergedSize sorts rs, merges overlapping and touching ranges (as FDB's
// coalesced conflict range maps do) and returns their size as conflict
// ranges.
func mergedSize(rs []krange) int64 {
	slices.SortFunc(rs, func(a, b krange) int { return bytes.Compare(a.b, b.b) })
	var n int64
	for i := 0; i < len(rs); {
		b, e := rs[i].b, rs[i].e
		j := i + 1
		for ; j < len(rs) && bytes.Compare(rs[j].b, e) <= 0; j++ {
			if bytes.Compare(rs[j].e, e) > 0 {
				e = rs[j].e
			}
		}
		n += sizeRange(b, e)
		i = j
	}
	return n
}

// clearMutationsSizeLocked returns the size of the ClearRange mutations
// the commit request holds for the transaction's cleared ranges. FDB
// sends one per run of cleared segments of its write map
// (writeRangeToNativeTransaction, fdbclient/ReadYourWrites.cpp), and a key
// the transaction wrote after clearing its range (a Set, a versionstamped
// value, an atomic operation) is a segment of its own that ends the run:
// ClearRange(a, z) then Set(m) sends the clears [a, m) and [m\x00, z), a
// mutation and 2|m|+1 bytes more than the ClearRange alone. A point Clear
// there adds no segment (WriteMap::clear of a range already cleared), and
// neither do the write map's entries of SetVersionstampedKey, which memdb
// does not count here.
func (tx *transaction) clearMutationsSizeLocked() int64 {
	clears := tx.clearsLocked()
	if len(clears) == 0 {
		return 0
	}
	var n int64
	i := 0 // the next clear
	var b []byte
	var open bool // b begins a run of clears[i] not yet counted
	flush := func(e []byte) {
		if open && bytes.Compare(b, e) < 0 {
			n += mutationRefSize + int64(len(b)+len(e))
		}
		open = false
	}
	tx.writes.each(func(e *wentry) bool {
		if e.st == stKnown && !e.exists {
			return true // a clear: no segment of its own inside a cleared range
		}
		for i < len(clears) && bytes.Compare(clears[i].e, e.key) <= 0 {
			// clears[i] ends before e: count it (or the rest of it).
			if !open {
				b, open = clears[i].b, true
			}
			flush(clears[i].e)
			i++
		}
		if i < len(clears) && bytes.Compare(clears[i].b, e.key) <= 0 {
			// e is inside clears[i]: the run so far ends at e, the next
			// begins after it.
			if !open {
				b, open = clears[i].b, true
			}
			flush(e.key)
			b, open = e.end(), true
		}
		return true
	})
	for ; i < len(clears); i++ {
		if !open {
			b, open = clears[i].b, true
		}
		flush(clears[i].e)
	}
	return n
}
