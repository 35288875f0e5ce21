package fdbqueue

import (
	"github.com/fdbqueue/fdbqueue/kv"
)

// Transaction size as FoundationDB counts it. Commit fails with
// transaction_too_large (2101) when Transaction::getSize
// (fdbclient/NativeAPI.actor.cpp) exceeds 10,000,000 bytes: the bytes of
// the mutations plus those of the read and write conflict ranges, each
// range its begin and end keys.
//
//   - Set(k, v): a SetValue mutation (k+v) and the write conflict range
//     [k, k+\x00) (2k+1): Transaction::set. With the structs (below), about
//     3k + v + 89.
//   - Clear(k): a ClearRange mutation [k, k+\x00) and the same range as a
//     write conflict range, 2(2k+1): Transaction::clear(const KeyRef&).
//   - ClearRange(b, e): the mutation and the conflict range, 2(b+e).
//   - An atomic op counts as a Set; a versionstamped key's Set has no
//     conflict range (vstampSetCost).
//   - A normal read of a key, AddReadConflictKey and a watch (which reads
//     its key: RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp) add
//     [k, k+\x00) to the read conflict ranges (2k+1); a range read, its
//     begin and end.
//
// Each mutation and each range also counts the size of its struct, as
// VectorRef::expectedSize (flow/include/flow/Arena.h) adds sizeof(T) per
// element: sizeof(MutationRef) is 56 in FDB 7.3 (type, two StringRefs, the
// optional checksum and checksum index, a flag), sizeof(KeyRangeRef) 32.
// The read-your-writes layer merges overlapping conflict ranges before the
// commit, so these costs are upper bounds of FDB's count.
const (
	mutationRefSize = 56
	keyRangeRefSize = 32
)

func setCost(key, value int) int {
	return key + value + mutationRefSize + 2*key + 1 + keyRangeRefSize
}

func clearCost(key int) int { return 2*(2*key+1) + mutationRefSize + keyRangeRefSize }

func clearRangeCost(r kv.KeyRange) int {
	return 2*(len(r.Begin)+len(r.End)) + mutationRefSize + keyRangeRefSize
}

func conflictKeyCost(key int) int { return 2*key + 1 + keyRangeRefSize }

// MaxBatchBudget is the largest batch budget WithBatchBudget accepts: the
// 10,000,000-byte transaction limit less room for what a batch writes
// besides its items (the journal's clean-ups and expiry, read conflict
// ranges, the signal key) and for the one item a batch takes even when it
// alone exceeds the budget.
const MaxBatchBudget = 9_000_000

// itemKeyMax bounds the length of an item key the layers write after the
// subspace prefix: a tuple of an index (at most 9 bytes), or a priority and
// a count (18), and 20 random bytes (22: the suffix has no 0x00 byte to
// escape, see entropy.suffix). vstampKeyMax is a versionstamped key's: an
// incomplete versionstamp (13), the random bytes (22) and the 4-byte
// offset.
const (
	itemKeyMax   = 40
	vstampKeyMax = 39
)

// vstampSetCost is the cost of SetVersionstampedKey(key, value): its
// mutation only. FDB adds no write conflict range for it at the call
// (ReadYourWritesTransaction::atomicOp sets addWriteConflict false for
// SetVersionstampedKey, fdbclient/ReadYourWrites.actor.cpp; so does
// Transaction::atomicOp, NativeAPI.actor.cpp): the key is known only at
// commit.
func vstampSetCost(key, value int) int { return key + value + mutationRefSize }

// overheadCost is what an operation's transaction adds besides its items'
// costs: the journal read's conflict range, the clean-ups of up to
// maxCarriedCleanups completed operations' records, the declaration of
// the handle's retention and an expiry of old records; and the signal key
// a staged queue bumps. It is the worst case, whatever the operation
// carries and whether it writes records at all (an operation in a
// caller's transaction without WithOpID does not), so that whether a
// batch fits its budget does not depend on the transactor.
func (o *op) overheadCost(items kv.KeyRange) int {
	c := setCost(len(items.Begin)+16, 8) + o.j.gate.cost() + o.j.track.counterCost() // config.go, observe.go
	if o.j.disabled {
		return c
	}
	// A slot's write and read (takeSlot), bounded by its longest key:
	// shard, epoch (its 16 bytes all escaped) and slot number.
	slotKey := len(o.j.prefix) + 2 + 34 + 9
	c += setCost(slotKey, slotHeader) + conflictKeyCost(slotKey)
	// The record range's bounds, m and m+1 bytes long (see op.keys), and
	// its first key, m+1.
	m := o.recordPrefixMax()
	// The check's read conflict range: the first record key as a point,
	// longer than the record range (read only once the key is there).
	c += max(2*m+1, 2*(m+1)+1) + keyRangeRefSize
	// The marker of an ID the caller chose (journal.go markerKey): the
	// int -1 packs to 2 bytes; its value is the kind, the versionstamp and
	// its offset. A SetVersionstampedValue, whose key is known, adds a
	// write conflict range as a Set does (only SetVersionstampedKey is
	// exempt: ReadYourWritesTransaction::atomicOp,
	// fdbclient/ReadYourWrites.actor.cpp).
	c += setCost(m+2, maxMarkerKind+10+4)
	// A clean-up clears a record range, or a record's one key as a point
	// (journal.end): the point range [key0, key0+\x00) is the longer.
	c += maxCarriedCleanups * max(2*(2*m+1)+mutationRefSize+keyRangeRefSize, clearCost(m+1))
	// The declared retention (journal.declare): its Max and, in an
	// expiry, its read conflict key (the read itself is a snapshot read).
	c += setCost(len(o.j.declKey), len(o.j.declParam)) + conflictKeyCost(len(o.j.declKey))
	// expire's range clears: expireShards of (shard) to (shard, cutoff),
	// and once per sweep one more.
	return c + (expireShards+1)*(2*(2*len(o.j.prefix)+24)+mutationRefSize+keyRangeRefSize)
}

// maxCarriedCleanups is the most completed operations' record ranges an
// operation clears (journal.begin).
const maxCarriedCleanups = 8

// recordCost is the cost of the n-th journal record holding rec (counted
// even when this operation writes none: see overheadCost).
func (o *op) recordCost(n int, rec []byte) int {
	if o.j.disabled {
		return 0
	}
	return chunkedSetCost(o.recordPrefixMax()+packedIntLen(int64(n)), len(rec))
}

// chunkedSetCost is the cost of setChunked of a value of n bytes at a key:
// a Set per chunk of at most kv.MaxValueSize bytes, each chunk after the
// first at the key and a packed index (at most 9 bytes more).
func chunkedSetCost(key, n int) int {
	c := setCost(key, min(n, kv.MaxValueSize))
	for n -= kv.MaxValueSize; n > 0; n -= kv.MaxValueSize {
		c += setCost(key+9, min(n, kv.MaxValueSize))
	}
	return c
}

// writeCost is the size of a transaction that writes the stored values as
// new items of the range items (with versionstamped keys if vstamp), with
// the operation's journal record.
func writeCost(o *op, items kv.KeyRange, stored [][]byte, vstamp bool) int {
	c := o.overheadCost(items) + o.recordCost(0, nil)
	for _, s := range stored {
		if vstamp {
			c += vstampSetCost(len(items.Begin)+vstampKeyMax, len(s))
		} else {
			c += setCost(len(items.Begin)+itemKeyMax, len(s))
		}
	}
	return c
}

// headConflictCost is the read conflict range of a take from one end of r
// up to and including key: [r.Begin, key+\x00), or [key, r.End) reversed.
func headConflictCost(r kv.KeyRange, key []byte, reverse bool) int {
	if reverse {
		return len(key) + len(r.End) + keyRangeRefSize
	}
	return len(r.Begin) + len(key) + 1 + keyRangeRefSize
}

// spend tracks a transaction's size against a budget, for the staged
// dequeue's transactions, which write for several requests at once.
type spend struct{ used, budget int }

// fits reports whether cost more still fits the budget.
func (sp *spend) fits(cost int) bool { return sp.used+cost <= sp.budget }

// resultCost bounds what expiring the result r costs: its read conflict
// key and clear, and the item it holds written back (its key and value
// are inside the result's value), in place mode at the tail of items with
// a signal bump.
func resultCost(r kv.KeyValue, items kv.KeyRange) int {
	return conflictKeyCost(len(r.Key)) + clearCost(len(r.Key)) + 3*len(r.Value) + 1 +
		setCost(len(items.Begin)+itemKeyMax, 0) + setCost(len(items.Begin)+16, 8)
}

// dropCost is what dropping the request at key costs (drop: its read
// conflict key, its clear, the clear of its result key resKey).
func dropCost(key, resKey int) int {
	return conflictKeyCost(key) + clearCost(key) + clearCost(resKey)
}

// moveCost is what moving item it to the tail of items costs (requeueAt).
func moveCost(it kv.KeyValue, items kv.KeyRange) int {
	return conflictKeyCost(len(it.Key)) + clearCost(len(it.Key)) +
		setCost(len(items.Begin)+itemKeyMax, len(it.Value)) + setCost(len(items.Begin)+16, 8)
}
