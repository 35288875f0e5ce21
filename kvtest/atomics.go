package kvtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// atomicTests cover the atomic read-modify-write operations: their results,
// and that they add no read conflict.
func atomicTests() []conformanceTest {
	return []conformanceTest{
		{"AddWidthsAndWraparound", testAddWidthsAndWraparound},
		{"AddMissingKeyCountsAsZero", testAddMissingKeyCountsAsZero},
		{"AddNegativeTwosComplement", testAddNegativeTwosComplement},
		{"AddOperandLengthSetsWidth", testAddOperandLengthSetsWidth},
		{"MaxUnsignedLittleEndian", testMaxUnsignedLittleEndian},
		{"MinUnsignedLittleEndian", testMinUnsignedLittleEndian},
		{"MaxAndMinOnMissingKeyStoreParam", testMaxAndMinOnMissingKeyStoreParam},
		{"BitAndOrXor", testBitAndOrXor},
		{"BitOrXorOnMissingKey", testBitOrXorOnMissingKey},
		{"ByteMinByteMax", testByteMinByteMax},
		{"ByteMinByteMaxOnMissingKeyStoreParam", testByteMinByteMaxOnMissingKeyStoreParam},
		{"CompareAndClear", testCompareAndClear},
		{"AppendIfFits", testAppendIfFits},
		{"AppendIfFitsCoalescesInTransaction", testAppendIfFitsCoalescesInTransaction},
		{"ConcurrentAddsDoNotConflict", testConcurrentAddsDoNotConflict},
		{"AtomicAppliesToValueAtCommit", testAtomicAppliesToValueAtCommit},
		{"AtomicThenReadSeesResult", testAtomicThenReadSeesResult},
		{"AtomicAfterSetOrClearInSameTransaction", testAtomicAfterSetOrClearInSameTransaction},
		{"AtomicAfterOwnClearRangeStartsFromMissing", testAtomicAfterOwnClearRangeStartsFromMissing},
		{"AtomicsComposeInOneTransaction", testAtomicsComposeInOneTransaction},
		{"AtomicEdgeOperands", testAtomicEdgeOperands},
	}
}

// atomicResult stores initial at a fresh key (none when initial is nil),
// applies op in a second transaction, commits, and returns the value read
// back by a third.
func atomicResult(t *testing.T, f *fixture, name string, initial []byte, op func(tr kv.Transaction, key []byte)) []byte {
	t.Helper()
	key := f.key(name)
	if initial != nil {
		f.set(t, key, initial)
	}
	tr := f.newTx(t)
	op(tr, key)
	commit(t, tr, "committing the atomic op on %s", f.name(key))
	return f.get(t, key)
}

// testAddWidthsAndWraparound: Add is little-endian with carry, in the
// operand's width, wrapping around (doLittleEndianAdd,
// fdbclient/include/fdbclient/Atomic.h).
func testAddWidthsAndWraparound(t *testing.T, f *fixture) {
	for _, w := range []int{1, 2, 3, 4, 8, 16} {
		got := atomicResult(t, f, fmt.Sprintf("wrap%d", w), bytes.Repeat([]byte{0xff}, w), func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, w)) })
		require.Equal(t, make([]byte, w), got, "Add of 1 to the all-ones %d-byte value must wrap around to zero", w)
		if w >= 2 {
			got = atomicResult(t, f, fmt.Sprintf("carry%d", w), le(255, w), func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, w)) })
			require.Equal(t, le(256, w), got, "Add must carry little-endian: 255+1 in %d bytes", w)
		}
		got = atomicResult(t, f, fmt.Sprintf("sum%d", w), le(100, w), func(tr kv.Transaction, k []byte) { tr.Add(k, le(27, w)) })
		require.Equal(t, le(127, w), got, "Add 100+27 in %d bytes", w)
	}
	got := atomicResult(t, f, "big", le(0x00ff_ffff_ffff_ffff, 8), func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, 8)) })
	require.Equal(t, le(0x0100_0000_0000_0000, 8), got, "Add must carry across all eight bytes")
}

// testAddMissingKeyCountsAsZero: on a missing (or empty) value Add stores
// the operand (doLittleEndianAdd, Atomic.h).
func testAddMissingKeyCountsAsZero(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "missing", nil, func(tr kv.Transaction, k []byte) { tr.Add(k, le(5, 4)) })
	require.Equal(t, le(5, 4), got, "Add on a missing key must treat it as zero and store the operand")
}

// testAddNegativeTwosComplement: Add is byte-wise with carry, so two's
// complement operands subtract (doLittleEndianAdd, Atomic.h).
func testAddNegativeTwosComplement(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "neg", leInt64(5), func(tr kv.Transaction, k []byte) { tr.Add(k, leInt64(-7)) })
	require.Equal(t, leInt64(-2), got, "Add of -7 (two's complement) to 5 must give -2")
}

// testAddOperandLengthSetsWidth: the result has the operand's length; the
// value is cut or zero-extended (doLittleEndianAdd, Atomic.h).
func testAddOperandLengthSetsWidth(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "shorter", le(0x0101, 2), func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, 1)) })
	require.Equal(t, []byte{0x02}, got, "a 1-byte operand on a 2-byte value must truncate the value to 1 byte")
	got = atomicResult(t, f, "longer", []byte{0xff}, func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, 2)) })
	require.Equal(t, []byte{0x00, 0x01}, got, "a 2-byte operand on a 1-byte value must zero-extend the value to 2 bytes")
}

// testMaxUnsignedLittleEndian: Max compares as unsigned little-endian
// integers, from the last byte (doMax, Atomic.h).
func testMaxUnsignedLittleEndian(t *testing.T, f *fixture) {
	// 256 is {0x00, 0x01} and 255 is {0xff, 0x00}: a byte-wise comparison
	// would get these wrong.
	got := atomicResult(t, f, "max1", le(256, 2), func(tr kv.Transaction, k []byte) { tr.Max(k, le(255, 2)) })
	require.Equal(t, le(256, 2), got, "Max(256, 255) compared as little-endian unsigned must keep 256")
	got = atomicResult(t, f, "max2", le(256, 2), func(tr kv.Transaction, k []byte) { tr.Max(k, le(257, 2)) })
	require.Equal(t, le(257, 2), got, "Max(256, 257) must store 257")
	got = atomicResult(t, f, "max3", le(1, 8), func(tr kv.Transaction, k []byte) { tr.Max(k, leInt64(-1)) })
	require.Equal(t, leInt64(-1), got, "Max compares unsigned: all-ones is the largest 8-byte value")
}

// testMinUnsignedLittleEndian: likewise Min (doMin, Atomic.h; the client
// sends MinV2 from API version 510: ReadYourWritesTransaction::atomicOp).
func testMinUnsignedLittleEndian(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "min1", le(256, 2), func(tr kv.Transaction, k []byte) { tr.Min(k, le(255, 2)) })
	require.Equal(t, le(255, 2), got, "Min(256, 255) compared as little-endian unsigned must store 255")
	got = atomicResult(t, f, "min2", le(256, 2), func(tr kv.Transaction, k []byte) { tr.Min(k, le(257, 2)) })
	require.Equal(t, le(256, 2), got, "Min(256, 257) must keep 256")
}

// testMaxAndMinOnMissingKeyStoreParam: on a missing key Max and Min store
// the operand (doMax; doMinV2, Atomic.h).
func testMaxAndMinOnMissingKeyStoreParam(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "maxmissing", nil, func(tr kv.Transaction, k []byte) { tr.Max(k, le(7, 4)) })
	require.Equal(t, le(7, 4), got, "Max on a missing key must store the operand")
	got = atomicResult(t, f, "minmissing", nil, func(tr kv.Transaction, k []byte) { tr.Min(k, le(7, 4)) })
	require.Equal(t, le(7, 4), got, "Min on a missing key must store the operand (not zero)")
}

// testBitAndOrXor: byte-wise And, Or, Xor (doAndV2, doOr, doXor, Atomic.h).
func testBitAndOrXor(t *testing.T, f *fixture) {
	initial := []byte{0b1100, 0xf0}
	param := []byte{0b1010, 0x3c}
	got := atomicResult(t, f, "and", initial, func(tr kv.Transaction, k []byte) { tr.BitAnd(k, param) })
	require.Equal(t, []byte{0b1000, 0x30}, got, "BitAnd")
	got = atomicResult(t, f, "or", initial, func(tr kv.Transaction, k []byte) { tr.BitOr(k, param) })
	require.Equal(t, []byte{0b1110, 0xfc}, got, "BitOr")
	got = atomicResult(t, f, "xor", initial, func(tr kv.Transaction, k []byte) { tr.BitXor(k, param) })
	require.Equal(t, []byte{0b0110, 0xcc}, got, "BitXor")
}

// testBitOrXorOnMissingKey: on a missing key Or and Xor store the operand
// (doOr, doXor, Atomic.h).
func testBitOrXorOnMissingKey(t *testing.T, f *fixture) {
	param := []byte{0x5a, 0x01}
	got := atomicResult(t, f, "or", nil, func(tr kv.Transaction, k []byte) { tr.BitOr(k, param) })
	require.Equal(t, param, got, "BitOr on a missing key (zero) must store the operand")
	got = atomicResult(t, f, "xor", nil, func(tr kv.Transaction, k []byte) { tr.BitXor(k, param) })
	require.Equal(t, param, got, "BitXor on a missing key (zero) must store the operand")
}

// testByteMinByteMax: ByteMin and ByteMax compare values as unsigned byte
// strings, a prefix first (doByteMin, doByteMax, Atomic.h: StringRef's
// operator<).
func testByteMinByteMax(t *testing.T, f *fixture) {
	for _, c := range []struct {
		initial, param, wantMin, wantMax string
	}{
		{"b", "a", "a", "b"},
		{"b", "c", "b", "c"},
		{"ab", "b", "ab", "b"},
		{"ab", "abc", "ab", "abc"},
		{"\x80", "\x7f", "\x7f", "\x80"},
	} {
		got := atomicResult(t, f, "min:"+c.initial+"/"+c.param, []byte(c.initial), func(tr kv.Transaction, k []byte) { tr.ByteMin(k, []byte(c.param)) })
		require.Equal(t, c.wantMin, string(got), "ByteMin(%q, %q) is the lexicographically smaller", c.initial, c.param)
		got = atomicResult(t, f, "max:"+c.initial+"/"+c.param, []byte(c.initial), func(tr kv.Transaction, k []byte) { tr.ByteMax(k, []byte(c.param)) })
		require.Equal(t, c.wantMax, string(got), "ByteMax(%q, %q) is the lexicographically larger", c.initial, c.param)
	}
}

// testByteMinByteMaxOnMissingKeyStoreParam: on a missing key both store the
// operand (doByteMin, doByteMax, Atomic.h).
func testByteMinByteMaxOnMissingKeyStoreParam(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "bmin", nil, func(tr kv.Transaction, k []byte) { tr.ByteMin(k, []byte("m")) })
	require.Equal(t, []byte("m"), got, "ByteMin on a missing key must store the operand (as FDB does), not an empty value")
	got = atomicResult(t, f, "bmax", nil, func(tr kv.Transaction, k []byte) { tr.ByteMax(k, []byte("m")) })
	require.Equal(t, []byte("m"), got, "ByteMax on a missing key must store the operand")
}

// testCompareAndClear: the key is cleared when the whole value equals the
// operand, or is missing (doCompareAndClear, Atomic.h).
func testCompareAndClear(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "equal", []byte("x"), func(tr kv.Transaction, k []byte) { tr.CompareAndClear(k, []byte("x")) })
	require.Nil(t, got, "CompareAndClear with an equal operand must clear the key")
	got = atomicResult(t, f, "different", []byte("x"), func(tr kv.Transaction, k []byte) { tr.CompareAndClear(k, []byte("y")) })
	require.Equal(t, []byte("x"), got, "CompareAndClear with a different operand must keep the key")
	got = atomicResult(t, f, "prefix", []byte("xy"), func(tr kv.Transaction, k []byte) { tr.CompareAndClear(k, []byte("x")) })
	require.Equal(t, []byte("xy"), got, "CompareAndClear compares whole values, not prefixes")
	got = atomicResult(t, f, "missing", nil, func(tr kv.Transaction, k []byte) { tr.CompareAndClear(k, []byte("x")) })
	require.Nil(t, got, "CompareAndClear on a missing key must leave it missing")
}

// testAppendIfFits: appends unless the result would exceed
// VALUE_SIZE_LIMIT, then keeps the value without error (doAppendIfFits,
// Atomic.h).
func testAppendIfFits(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "missing", nil, func(tr kv.Transaction, k []byte) { tr.AppendIfFits(k, []byte("cd")) })
	require.Equal(t, []byte("cd"), got, "AppendIfFits on a missing key must store the operand")
	got = atomicResult(t, f, "append", []byte("ab"), func(tr kv.Transaction, k []byte) { tr.AppendIfFits(k, []byte("cd")) })
	require.Equal(t, []byte("abcd"), got, "AppendIfFits must append")

	almost := bytes.Repeat([]byte{'v'}, kv.MaxValueSize-1)
	got = atomicResult(t, f, "exact", almost, func(tr kv.Transaction, k []byte) { tr.AppendIfFits(k, []byte("!")) })
	require.Len(t, got, kv.MaxValueSize, "AppendIfFits reaching exactly the value size limit must append")
	got = atomicResult(t, f, "over", almost, func(tr kv.Transaction, k []byte) { tr.AppendIfFits(k, []byte("!!")) })
	require.Equal(t, almost, got, "AppendIfFits that would exceed the value size limit must leave the value unchanged (and not fail)")
}

// testAppendIfFitsCoalescesInTransaction: two AppendIfFits of one key
// whose value the transaction does not know are merged into one operation
// before the commit (WriteMap::coalesceOver, fdbclient/WriteMap.cpp:
// AppendIfFits is associative, so same-typed operations are coalesced with
// doAppendIfFits, fdbclient/include/fdbclient/Atomic.h; the merged stack
// is what ReadYourWritesTransaction::writeRangeToNativeTransaction sends).
// The value then grows by both operands or by neither: at 99,999 bytes,
// appending "a" then "b" leaves it unchanged (99,999 + 2 is over the
// limit), where applying them one by one would have taken "a". A read in
// the transaction sees the same (WriteMap::coalesceUnder).
func testAppendIfFitsCoalescesInTransaction(t *testing.T, f *fixture) {
	almost := bytes.Repeat([]byte{'v'}, kv.MaxValueSize-1)
	key := f.key("k")
	f.set(t, key, almost)
	tr := f.newTx(t)
	tr.AppendIfFits(key, []byte("a"))
	tr.AppendIfFits(key, []byte("b"))
	got := mustGet(t, tr, key)
	require.True(t, bytes.Equal(almost, got), "RYW: two AppendIfFits whose operands together do not fit leave the value unchanged, got %d bytes", len(got))
	commit(t, tr)
	got = f.get(t, key)
	require.True(t, bytes.Equal(almost, got), "two AppendIfFits in one transaction are one append of both operands: over the limit, neither is appended; got %d bytes", len(got))

	short := bytes.Repeat([]byte{'v'}, kv.MaxValueSize-3)
	key = f.key("fits")
	f.set(t, key, short)
	tr = f.newTx(t)
	tr.AppendIfFits(key, []byte("a"))
	tr.AppendIfFits(key, []byte("b"))
	commit(t, tr)
	got = f.get(t, key)
	require.True(t, bytes.Equal(append(bytes.Clone(short), "ab"...), got), "two AppendIfFits that fit together are both appended; got %d bytes", len(got))
}

// testConcurrentAddsDoNotConflict: an atomic operation adds a write
// conflict range only, no read conflict (Transaction::atomicOp,
// fdbclient/NativeAPI.actor.cpp; ReadYourWritesTransaction::atomicOp).
func testConcurrentAddsDoNotConflict(t *testing.T, f *fixture) {
	key := f.key("counter")
	a := f.newTx(t)
	b := f.newTx(t)
	readVersion(t, a)
	readVersion(t, b)
	a.Add(key, le(1, 8))
	b.Add(key, le(2, 8))
	commit(t, b, "an Add must not conflict")
	commit(t, a, "two transactions that both Add to one key must both commit: atomic ops add no read conflict")
	require.Equal(t, le(3, 8), f.get(t, key), "both Adds must be applied")
}

// testAtomicAppliesToValueAtCommit: the storage server applies the
// operation to the value at the commit version, not the read version (the
// mutation carries the operand: Transaction::atomicOp,
// fdbclient/NativeAPI.actor.cpp).
func testAtomicAppliesToValueAtCommit(t *testing.T, f *fixture) {
	key := f.key("counter")
	f.set(t, key, le(1, 8))
	tr := f.newTx(t)
	readVersion(t, tr)
	f.set(t, key, le(100, 8)) // after tr's read version
	tr.Add(key, le(1, 8))
	commit(t, tr)
	require.Equal(t, le(101, 8), f.get(t, key), "an atomic op must apply to the value at commit time, not at the read version")
}

// testAtomicThenReadSeesResult: a read of the key in the same transaction
// applies the pending operations to the database's value
// (WriteMap::coalesceUnder, fdbclient/WriteMap.cpp).
func testAtomicThenReadSeesResult(t *testing.T, f *fixture) {
	f.set(t, f.key("n"), le(5, 8))
	f.set(t, f.key("c"), []byte("x"))
	tr := f.newTx(t)
	tr.Add(f.key("n"), le(3, 8))
	tr.Add(f.key("fresh"), le(4, 8))
	tr.CompareAndClear(f.key("c"), []byte("x"))
	require.Equal(t, le(8, 8), mustGet(t, tr, f.key("n")), "RYW: a read after Add in the same transaction must see the sum")
	require.Equal(t, le(4, 8), mustGet(t, tr, f.key("fresh")), "RYW: a read after Add on a missing key must see the operand")
	require.Nil(t, mustGet(t, tr, f.key("c")), "RYW: a read after a matching CompareAndClear must see the key missing")
	kvs := mustRange(t, tr, f.all(), kv.RangeOptions{})
	f.requireNames(t, kvs, []string{"fresh", "n"}, "RYW: a range read after atomic ops must see their results")
	require.Equal(t, le(4, 8), kvs[0].Value)
	require.Equal(t, le(8, 8), kvs[1].Value)
	tr.Add(f.key("n"), le(10, 8))
	require.Equal(t, le(18, 8), mustGet(t, tr, f.key("n")), "RYW: a second Add after a read must see both")
	commit(t, tr)
	require.Equal(t, le(18, 8), f.get(t, f.key("n")), "after commit")
}

// testAtomicAfterSetOrClearInSameTransaction: an operation after a Set or
// Clear of the key is folded into it, a Set after it replaces it
// (WriteMap::mutate and coalesce, fdbclient/WriteMap.cpp).
func testAtomicAfterSetOrClearInSameTransaction(t *testing.T, f *fixture) {
	f.set(t, f.key("cleared"), le(50, 8))
	tr := f.newTx(t)
	tr.Set(f.key("set"), le(10, 8))
	tr.Add(f.key("set"), le(5, 8))
	tr.Add(f.key("overwritten"), le(5, 8))
	tr.Set(f.key("overwritten"), le(1, 8))
	tr.Clear(f.key("cleared"))
	tr.Add(f.key("cleared"), le(2, 8))
	require.Equal(t, le(15, 8), mustGet(t, tr, f.key("set")), "RYW: Set then Add")
	require.Equal(t, le(1, 8), mustGet(t, tr, f.key("overwritten")), "RYW: Add then Set")
	require.Equal(t, le(2, 8), mustGet(t, tr, f.key("cleared")), "RYW: Clear then Add starts from zero")
	commit(t, tr)
	require.Equal(t, le(15, 8), f.get(t, f.key("set")), "Set then Add, after commit")
	require.Equal(t, le(1, 8), f.get(t, f.key("overwritten")), "Add then Set, after commit")
	require.Equal(t, le(2, 8), f.get(t, f.key("cleared")), "Clear then Add, after commit")
}

// testAtomicsComposeInOneTransaction: operations of different types on one
// key are kept in order and applied in order (WriteMap::coalesceOver pushes
// them, fdbclient/WriteMap.cpp).
func testAtomicsComposeInOneTransaction(t *testing.T, f *fixture) {
	got := atomicResult(t, f, "compose", le(1, 8), func(tr kv.Transaction, k []byte) {
		tr.Add(k, le(1, 8))
		tr.Add(k, le(2, 8))
		tr.Max(k, le(3, 8))
		tr.Min(k, le(10, 8))
		tr.BitOr(k, le(8, 8))
	})
	require.Equal(t, le(12, 8), got, "atomic ops in one transaction must apply in order: ((1+1+2) max 3 min 10) | 8 = 12")
}

// testAtomicAfterOwnClearRangeStartsFromMissing: an atomic operation on a
// key inside a range the transaction cleared applies to a missing value,
// not the database's (WriteMap::mutate, fdbclient/WriteMap.cpp: over a
// cleared range a dependent operation is coalesced over a SetValue of
// nothing), both when the transaction reads the key and after the commit.
func testAtomicAfterOwnClearRangeStartsFromMissing(t *testing.T, f *fixture) {
	f.set(t, f.key("k"), le(50, 8))
	tr := f.newTx(t)
	tr.ClearRange(f.rng("a", "z"))
	tr.Add(f.key("k"), le(2, 8))
	require.Equal(t, le(2, 8), mustGet(t, tr, f.key("k")), "RYW: ClearRange then Add starts from zero")
	commit(t, tr)
	require.Equal(t, le(2, 8), f.get(t, f.key("k")), "ClearRange then Add, after commit")
}

// testAtomicEdgeOperands: every atomic operation on the edges of
// FoundationDB's algorithms (fdbclient/include/fdbclient/Atomic.h, with the
// API-version-510 variants doAndV2 and doMinV2 the bindings use): an empty
// operand, a missing key, a key whose value is empty (which BitAnd and Min
// treat unlike a missing one), operands shorter and longer than the value,
// and AppendIfFits at the value size limit. The committed value and a read
// in the operation's own transaction (WriteMap::coalesceUnder applies the
// same functions) must agree with FDB's. In the table, nil is a missing
// key and "" an empty value.
func testAtomicEdgeOperands(t *testing.T, f *fixture) {
	type op func(kv.Transaction, []byte, []byte)
	b := func(x ...byte) []byte { return x }
	none := []byte(nil)
	empty := []byte{}
	full := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	cases := []struct {
		name        string
		initial     []byte
		op          op
		param, want []byte
	}{
		// An empty operand: the result is empty (doLittleEndianAdd, doAnd,
		// doOr, doXor, doMax and doMin return it), but for ByteMax (the
		// value is larger), AppendIfFits (nothing to append) and
		// CompareAndClear (not equal).
		{"Add empty", b(1, 2), kv.Transaction.Add, empty, empty},
		{"BitAnd empty", b(1, 2), kv.Transaction.BitAnd, empty, empty},
		{"BitOr empty", b(1, 2), kv.Transaction.BitOr, empty, empty},
		{"BitXor empty", b(1, 2), kv.Transaction.BitXor, empty, empty},
		{"Max empty", b(1, 2), kv.Transaction.Max, empty, empty},
		{"Min empty", b(1, 2), kv.Transaction.Min, empty, empty},
		{"ByteMin empty", b(1, 2), kv.Transaction.ByteMin, empty, empty},
		{"ByteMax empty", b(1, 2), kv.Transaction.ByteMax, empty, b(1, 2)},
		{"AppendIfFits empty", b(1, 2), kv.Transaction.AppendIfFits, empty, b(1, 2)},
		{"CompareAndClear empty", b(1, 2), kv.Transaction.CompareAndClear, empty, b(1, 2)},
		// An empty operand on a missing key stores an empty value, but
		// CompareAndClear leaves the key missing.
		{"Add empty on missing", none, kv.Transaction.Add, empty, empty},
		{"BitAnd empty on missing", none, kv.Transaction.BitAnd, empty, empty},
		{"Min empty on missing", none, kv.Transaction.Min, empty, empty},
		{"ByteMax empty on missing", none, kv.Transaction.ByteMax, empty, empty},
		{"AppendIfFits empty on missing", none, kv.Transaction.AppendIfFits, empty, empty},
		{"CompareAndClear empty on missing", none, kv.Transaction.CompareAndClear, empty, none},
		// BitAnd on a missing key stores the operand (doAndV2).
		{"BitAnd on missing", none, kv.Transaction.BitAnd, b(0x0f, 0xf0), b(0x0f, 0xf0)},
		// An empty value is present: BitAnd and Min combine with it as
		// zero bytes (doAnd; doMin of a non-zero operand), where on a
		// missing key they store the operand.
		{"Add on empty", empty, kv.Transaction.Add, b(1, 2), b(1, 2)},
		{"BitAnd on empty", empty, kv.Transaction.BitAnd, b(1, 2), b(0, 0)},
		{"BitOr on empty", empty, kv.Transaction.BitOr, b(1, 2), b(1, 2)},
		{"BitXor on empty", empty, kv.Transaction.BitXor, b(1, 2), b(1, 2)},
		{"Max on empty", empty, kv.Transaction.Max, b(1, 2), b(1, 2)},
		{"Min on empty", empty, kv.Transaction.Min, b(1, 2), b(0, 0)},
		{"Min zero on empty", empty, kv.Transaction.Min, b(0, 0), b(0, 0)},
		{"ByteMin on empty", empty, kv.Transaction.ByteMin, b(1, 2), empty},
		{"ByteMax on empty", empty, kv.Transaction.ByteMax, b(1, 2), b(1, 2)},
		{"AppendIfFits on empty", empty, kv.Transaction.AppendIfFits, b(1, 2), b(1, 2)},
		{"CompareAndClear empty on empty", empty, kv.Transaction.CompareAndClear, empty, none},
		// The operand's length sets the result's: a longer value is cut to
		// it (and compared cut), a shorter one is extended with zeros.
		{"Max shorter operand", b(0x05, 0x01), kv.Transaction.Max, b(0xff), b(0xff)},
		{"Max shorter operand keeps cut value", b(0xff, 0x01), kv.Transaction.Max, b(0x05), b(0xff)},
		{"Max longer operand", b(0xff), kv.Transaction.Max, b(0x00, 0x01), b(0x00, 0x01)},
		{"Max longer operand keeps extended value", b(0x05), kv.Transaction.Max, b(0x03, 0x00), b(0x05, 0x00)},
		{"Min shorter operand", b(0x05, 0x01), kv.Transaction.Min, b(0xff), b(0x05)},
		{"Min longer operand", b(0x05), kv.Transaction.Min, b(0x03, 0x01), b(0x05, 0x00)},
		{"Min longer operand smaller", b(0x05), kv.Transaction.Min, b(0x03, 0x00), b(0x03, 0x00)},
		{"BitAnd shorter operand", b(0xff, 0xff), kv.Transaction.BitAnd, b(0x0f), b(0x0f)},
		{"BitAnd longer operand", b(0x0f), kv.Transaction.BitAnd, b(0xff, 0xff), b(0x0f, 0x00)},
		{"BitOr shorter operand", b(0x01, 0x02), kv.Transaction.BitOr, b(0x10), b(0x11)},
		{"BitOr longer operand", b(0x01), kv.Transaction.BitOr, b(0x10, 0x20), b(0x11, 0x20)},
		{"BitXor shorter operand", b(0xff, 0x02), kv.Transaction.BitXor, b(0x0f), b(0xf0)},
		{"BitXor longer operand", b(0x0f), kv.Transaction.BitXor, b(0xff, 0x20), b(0xf0, 0x20)},
		// AppendIfFits at the value size limit.
		{"AppendIfFits full operand on missing", none, kv.Transaction.AppendIfFits, full, full},
		{"AppendIfFits full operand on empty", empty, kv.Transaction.AppendIfFits, full, full},
		{"AppendIfFits empty onto full", full, kv.Transaction.AppendIfFits, empty, full},
		{"AppendIfFits one byte onto full", full, kv.Transaction.AppendIfFits, b('x'), full},
		{"AppendIfFits full operand onto one byte", b('x'), kv.Transaction.AppendIfFits, full, b('x')},
	}
	for i, c := range cases {
		key := f.key(fmt.Sprintf("edge%02d", i))
		if c.initial != nil {
			f.set(t, key, c.initial)
		}
		check := func(got []byte, where string) {
			t.Helper()
			require.Equal(t, c.want != nil, got != nil, "%s: %s must leave the key %s", c.name, where, map[bool]string{true: "present", false: "missing"}[c.want != nil])
			require.True(t, bytes.Equal(c.want, got), "%s: %s: want %x, got %x", c.name, where, short(c.want), short(got))
		}
		tr := f.newTx(t)
		c.op(tr, key, c.param)
		check(mustGet(t, tr, key), "a read in the same transaction")
		commit(t, tr, "committing %s", c.name)
		check(f.get(t, key), "the committed value")
	}
}

// short returns b, or its first bytes and its length if it is long.
func short(b []byte) string {
	if len(b) > 16 {
		return fmt.Sprintf("%x... (%d bytes)", b[:8], len(b))
	}
	return fmt.Sprintf("%x", b)
}
