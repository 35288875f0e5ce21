package kvtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// limitTests cover the size limits, the system key space and inverted
// ranges, and how an invalid write is reported.
func limitTests() []conformanceTest {
	tests := []conformanceTest{
		{"KeyAtSizeLimit", testKeyAtSizeLimit},
		{"KeyTooLarge", testKeyTooLarge},
		{"KeyTooLargeForAtomicOp", testKeyTooLargeForAtomicOp},
		{"AtomicOpSizeLimits", testAtomicOpSizeLimits},
		{"ValueAtSizeLimit", testValueAtSizeLimit},
		{"ValueTooLarge", testValueTooLarge},
		{"VersionstampedKeySizeCountsOffset", testVersionstampedKeySizeCountsOffset},
		{"VersionstampedValueSizeCountsOffset", testVersionstampedValueSizeCountsOffset},
		{"TransactionUnderSizeLimit", testTransactionUnderSizeLimit},
		{"TransactionTooLarge", testTransactionTooLarge},
		{"TouchingReadConflictRangesCountOnce", testTouchingReadConflictRangesCountOnce},
		{"AtomicOpsOfAnUnreadableKeyNotMerged", testAtomicOpsOfAnUnreadableKeyNotMerged},
		{"PointClearsOverSizeLimit", testPointClearsOverSizeLimit},
		{"SetsInsideOwnClearRangeOverSizeLimit", testSetsInsideOwnClearRangeOverSizeLimit},
		{"AtomicOperandsOverSizeLimit", testAtomicOperandsOverSizeLimit},
		{"VersionstampedKeysOverSizeLimit", testVersionstampedKeysOverSizeLimit},
		{"ReadConflictRangesOverSizeLimit", testReadConflictRangesOverSizeLimit},
		{"ApproximateSizeGrowsWithWrites", testApproximateSizeGrowsWithWrites},
		{"InvalidWriteFailsLaterReads", testInvalidWriteFailsLaterReads},
		{"InvertedRangeRead", testInvertedRangeRead},
		{"InvertedRangeIterator", testInvertedRangeIterator},
		{"InvertedClearRange", testInvertedClearRange},
		{"InvertedConflictRanges", testInvertedConflictRanges},
		{"ConflictRangeIntoSystemKeysIsDeferred", testConflictRangeIntoSystemKeysIsDeferred},
		{"RangeReadInSystemKeys", testRangeReadInSystemKeys},
		{"SystemKeyReadReportsTransactionErrorFirst", testSystemKeyReadReportsTransactionErrorFirst},
		{"OversizedSystemKeyWrites", testOversizedSystemKeyWrites},
		{"SizeCountsWriteConflictRanges", testSizeCountsWriteConflictRanges},
		{"SizeCountsClearedKeyTwice", testSizeCountsClearedKeyTwice},
		{"RepeatedSetsOfOneKeyCountOnce", testRepeatedSetsOfOneKeyCountOnce},
		{"RepeatedAtomicOpsOfOneKeyCoalesce", testRepeatedAtomicOpsOfOneKeyCoalesce},
		{"RepeatedReadsOfOneKeyCountOnce", testRepeatedReadsOfOneKeyCountOnce},
		{"ApproximateSizeCountsConflictRanges", testApproximateSizeCountsConflictRanges},
	}
	for _, c := range []struct {
		name  string
		write func(tr kv.Transaction)
	}{
		{"Set", func(tr kv.Transaction) { tr.Set([]byte("\xffsystem"), []byte("x")) }},
		{"SetAtFF", func(tr kv.Transaction) { tr.Set([]byte("\xff"), []byte("x")) }},
		{"Clear", func(tr kv.Transaction) { tr.Clear([]byte("\xffsystem")) }},
		{"ClearRange", func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("\xff"), End: []byte("\xff\x01")}) }},
		{"Add", func(tr kv.Transaction) { tr.Add([]byte("\xffcounter"), le(1, 8)) }},
		{"SetVersionstampedValue", func(tr kv.Transaction) { tr.SetVersionstampedValue([]byte("\xffvv"), stampedValue("", "")) }},
		{"SetVersionstampedKey", func(tr kv.Transaction) { tr.SetVersionstampedKey(stampedKey([]byte("\xffvs"), ""), []byte("x")) }},
	} {
		// A write at or above \xff without system access throws
		// key_outside_legal_range (ReadYourWritesTransaction::set, clear,
		// atomicOp: key >= getMaxWriteKey(), fdbclient/ReadYourWrites.actor.cpp),
		// deferred to the commit (ThreadSafeTransaction).
		tests = append(tests, conformanceTest{"KeyOutsideLegalRange" + c.name, func(t *testing.T, f *fixture) {
			tr := f.newTx(t)
			c.write(tr)
			tr.Set(f.key("ok"), []byte("x"))
			requireCode(t, tr.Commit(), kv.ErrKeyOutsideLegalRange, fmt.Sprintf("commit after a %s in the system key space", c.name))
			f.requireAbsent(t, f.key("ok"), "a transaction that failed with key_outside_legal_range must apply none of its writes")
		}})
	}
	return tests
}

// testKeyAtSizeLimit: a key of KEY_SIZE_LIMIT (10,000) bytes is accepted
// (key.size() > getMaxWriteKeySize in ReadYourWritesTransaction::set,
// fdbclient/ReadYourWrites.actor.cpp; fdbclient/ClientKnobs.cpp).
func testKeyAtSizeLimit(t *testing.T, f *fixture) {
	key := f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize-len(f.prefix))))
	require.Len(t, key, kv.MaxKeySize)
	f.set(t, key, []byte("x"))
	f.requireValue(t, key, []byte("x"), "a key of exactly %d bytes must be accepted", kv.MaxKeySize)
}

// testKeyTooLarge: a longer one throws key_too_large in set, which the C
// client keeps as the transaction's deferredError
// (ThreadSafeTransaction::set, fdbclient/ThreadSafeTransaction.cpp) and the
// commit reports.
func testKeyTooLarge(t *testing.T, f *fixture) {
	key := f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize+1-len(f.prefix))))
	tr := f.newTx(t)
	tr.Set(key, []byte("x"))
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrKeyTooLarge, fmt.Sprintf("commit after a Set with a %d-byte key", len(key)))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with key_too_large must apply none of its writes")
}

// testKeyTooLargeForAtomicOp: likewise for an atomic operation
// (ReadYourWritesTransaction::atomicOp).
func testKeyTooLargeForAtomicOp(t *testing.T, f *fixture) {
	key := f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize+1-len(f.prefix))))
	tr := f.newTx(t)
	tr.Add(key, le(1, 8))
	requireCode(t, tr.Commit(), kv.ErrKeyTooLarge, fmt.Sprintf("commit after an Add with a %d-byte key", len(key)))
}

// testAtomicOpSizeLimits: every atomic operation takes a key of up to
// kv.MaxKeySize bytes and an operand of up to kv.MaxValueSize, and a larger
// operand puts the transaction in the value_too_large state, which the
// commit reports, whatever the operation (ReadYourWritesTransaction::
// atomicOp, fdbclient/ReadYourWrites.actor.cpp: operand.size() >
// VALUE_SIZE_LIMIT).
func testAtomicOpSizeLimits(t *testing.T, f *fixture) {
	ops := map[string]func(kv.Transaction, []byte, []byte){
		"Add": kv.Transaction.Add, "Max": kv.Transaction.Max, "Min": kv.Transaction.Min,
		"BitAnd": kv.Transaction.BitAnd, "BitOr": kv.Transaction.BitOr, "BitXor": kv.Transaction.BitXor,
		"ByteMin": kv.Transaction.ByteMin, "ByteMax": kv.Transaction.ByteMax,
		"AppendIfFits": kv.Transaction.AppendIfFits, "CompareAndClear": kv.Transaction.CompareAndClear,
	}
	key := f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize-len(f.prefix)-2)))
	for name, op := range ops {
		big := bytes.Repeat([]byte{1}, kv.MaxValueSize)
		tr := f.newTx(t)
		op(tr, append(bytes.Clone(key), name[:2]...), big)
		commit(t, tr, "%s with a %d-byte key and a %d-byte operand", name, kv.MaxKeySize, kv.MaxValueSize)

		tr = f.newTx(t)
		op(tr, f.key(name), append(big, 1))
		tr.Set(f.key("ok"), []byte("x"))
		requireCode(t, tr.Commit(), kv.ErrValueTooLarge, fmt.Sprintf("commit after %s with a %d-byte operand", name, kv.MaxValueSize+1))
		f.requireAbsent(t, f.key(name), "the operation with an operand over the limit must not be applied")
		f.requireAbsent(t, f.key("ok"), "a transaction that failed with value_too_large must apply none of its writes")
	}
}

// testValueAtSizeLimit: a value of VALUE_SIZE_LIMIT (100,000) bytes is
// accepted (ReadYourWritesTransaction::set; fdbclient/ClientKnobs.cpp).
func testValueAtSizeLimit(t *testing.T, f *fixture) {
	value := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	f.set(t, f.key("big"), value)
	f.requireValue(t, f.key("big"), value, "a value of exactly %d bytes must be accepted", kv.MaxValueSize)
}

// testValueTooLarge: a longer one is value_too_large, deferred to the
// commit (ReadYourWritesTransaction::set, ThreadSafeTransaction::set).
func testValueTooLarge(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("big"), bytes.Repeat([]byte{'v'}, kv.MaxValueSize+1))
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrValueTooLarge, fmt.Sprintf("commit after a Set with a %d-byte value", kv.MaxValueSize+1))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with value_too_large must apply none of its writes")
}

// testVersionstampedKeySizeCountsOffset: a versionstamped key's argument
// is checked as given, its 4-byte offset included
// (ReadYourWritesTransaction::atomicOp, fdbclient/ReadYourWrites.actor.cpp:
// key.size() > getMaxWriteKeySize before the stamp is placed), so the
// largest key it can write is kv.MaxKeySize-4 bytes.
func testVersionstampedKeySizeCountsOffset(t *testing.T, f *fixture) {
	head := func(argLen int) []byte { // the key before the stamp, for an argument of argLen bytes
		return f.key(string(bytes.Repeat([]byte{'k'}, argLen-14-len(f.prefix))))
	}
	tr := f.newTx(t)
	tr.SetVersionstampedKey(stampedKey(head(kv.MaxKeySize+1), ""), []byte("x"))
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrKeyTooLarge, fmt.Sprintf("commit after a SetVersionstampedKey with a %d-byte argument", kv.MaxKeySize+1))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with key_too_large must apply none of its writes")

	tr = f.newTx(t)
	tr.SetVersionstampedKey(stampedKey(head(kv.MaxKeySize), ""), []byte("x"))
	commit(t, tr, "a SetVersionstampedKey with a %d-byte argument", kv.MaxKeySize)
	kvs := f.getRange(t, f.all(), kv.RangeOptions{})
	require.Len(t, kvs, 1)
	require.Len(t, kvs[0].Key, kv.MaxKeySize-4, "the key written is the argument without its offset")
}

// testVersionstampedValueSizeCountsOffset: likewise for a versionstamped
// value (operand.size() > VALUE_SIZE_LIMIT in atomicOp): the largest value
// it can write is kv.MaxValueSize-4 bytes.
func testVersionstampedValueSizeCountsOffset(t *testing.T, f *fixture) {
	arg := func(n int) []byte { return stampedValue("", string(bytes.Repeat([]byte{'v'}, n-14))) }
	tr := f.newTx(t)
	tr.SetVersionstampedValue(f.key("big"), arg(kv.MaxValueSize+1))
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrValueTooLarge, fmt.Sprintf("commit after a SetVersionstampedValue with a %d-byte argument", kv.MaxValueSize+1))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with value_too_large must apply none of its writes")

	tr = f.newTx(t)
	tr.SetVersionstampedValue(f.key("big"), arg(kv.MaxValueSize))
	commit(t, tr, "a SetVersionstampedValue with a %d-byte argument", kv.MaxValueSize)
	require.Len(t, f.get(t, f.key("big")), kv.MaxValueSize-4, "the value written is the argument without its offset")
}

// testPointClearsOverSizeLimit: the commit's size limit applies to the
// commit request's size (Transaction::getSize in commitMutations,
// fdbclient/NativeAPI.actor.cpp), in which a point clear of a k-byte key
// is a ClearRange mutation and a write conflict range, 4k+90 bytes, while
// the approximate size counts it as 4k+66 (ReadYourWritesTransaction::
// clear). Clears whose approximate size is under the limit can exceed it.
func testPointClearsOverSizeLimit(t *testing.T, f *fixture) {
	key := func(i int) []byte { return f.key(fmt.Sprintf("c%07d", i)) }
	k := len(key(0))
	n := kv.MaxTransactionSize / (4*k + 78) // between the two counts
	tr := f.newTx(t)
	for i := range n {
		tr.Clear(key(i))
	}
	tr.Set(f.key("ok"), []byte("x"))
	size, err := tr.GetApproximateSize().Get()
	require.NoError(t, err)
	require.Less(t, size, int64(kv.MaxTransactionSize), "the approximate size of %d clears of %d-byte keys", n, k)
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of %d clears of %d-byte keys (%d bytes in the commit request)", n, k, n*(4*k+90)))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// testSetsInsideOwnClearRangeOverSizeLimit: a key set inside a range the
// transaction cleared splits the range's ClearRange mutation in the commit
// request (writeRangeToNativeTransaction, fdbclient/ReadYourWrites.cpp,
// sends one ClearRange per run of cleared segments of the write map, and
// the written key's segment ends a run). A Set of a k-byte key costs its
// mutation and the split, 3k+113 bytes, where alone it costs its mutation
// and its write conflict range, 3k+89. Sets that commit alone fail inside
// a ClearRange around them.
func testSetsInsideOwnClearRangeOverSizeLimit(t *testing.T, f *fixture) {
	key := func(i int) []byte { return f.key(fmt.Sprintf("s%07d", i)) }
	k := len(key(0))
	n := kv.MaxTransactionSize / (3*k + 101) // between the two counts
	tr := f.newTx(t)
	for i := range n {
		tr.Set(key(i), nil)
	}
	commit(t, tr, "%d Sets of %d-byte keys (%d bytes in the commit request)", n, k, n*(3*k+89))
	tr = f.newTx(t)
	tr.ClearRange(kv.KeyRange{Begin: f.key("s"), End: f.key("t")})
	for i := range n {
		tr.Set(key(i), nil)
	}
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of a ClearRange and %d Sets of %d-byte keys inside it (%d bytes in the commit request)", n, k, n*(3*k+113)))
}

// The commit's size (Transaction::getSize, fdbclient/NativeAPI.actor.cpp:
// its mutations, read conflict ranges and write conflict ranges) counts
// every kind of mutation and the read conflict ranges: each of the next
// three checks goes over the limit with one kind alone, beside one small
// Set.

// testAtomicOperandsOverSizeLimit: atomic operations' operands count.
func testAtomicOperandsOverSizeLimit(t *testing.T, f *fixture) {
	n := kv.MaxTransactionSize/kv.MaxValueSize + 1
	operand := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	tr := f.newTx(t)
	for i := range n {
		tr.ByteMax(f.key(fmt.Sprintf("op%04d", i)), operand)
	}
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of %d ByteMax operations with %d-byte operands", n, kv.MaxValueSize))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// testVersionstampedKeysOverSizeLimit: versionstamped keys' values count.
func testVersionstampedKeysOverSizeLimit(t *testing.T, f *fixture) {
	n := kv.MaxTransactionSize/kv.MaxValueSize + 1
	value := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	tr := f.newTx(t)
	for i := range n {
		tr.SetVersionstampedKey(stampedKey(f.key("vs"), fmt.Sprintf("%04d", i)), value)
	}
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of %d versionstamped keys with %d-byte values", n, kv.MaxValueSize))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// testReadConflictRangesOverSizeLimit: read conflict ranges count (each
// [key, key+\x00) of a k-byte key is 2k+1 bytes and its KeyRangeRef).
func testReadConflictRangesOverSizeLimit(t *testing.T, f *fixture) {
	pad := string(bytes.Repeat([]byte{'r'}, 5000))
	key := func(i int) []byte { return f.key(fmt.Sprintf("rc%04d%s", i, pad)) }
	n := kv.MaxTransactionSize/(2*len(key(0))+1) + 1
	tr := f.newTx(t)
	for i := range n {
		require.NoError(t, tr.AddReadConflictKey(key(i)))
	}
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of %d read conflict keys of %d bytes", n, len(key(0))))
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// testTouchingReadConflictRangesCountOnce: read conflict ranges that
// touch count once toward the size limit. RYW keeps them in readConflicts,
// a CoalescedKeyRefRangeMap<bool> that merges adjacent ranges, and the
// commit sends its merged ranges (RYWImpl::commit,
// fdbclient/ReadYourWrites.actor.cpp), whose size commitMutations checks
// (fdbclient/NativeAPI.actor.cpp). Apart, these would be over the limit.
func testTouchingReadConflictRangesCountOnce(t *testing.T, f *fixture) {
	pad := string(bytes.Repeat([]byte{'r'}, 5000))
	key := func(i int) []byte { return f.key(fmt.Sprintf("rc%04d%s", i, pad)) }
	n := kv.MaxTransactionSize/(2*len(key(0))) + 1
	tr := f.newTx(t)
	for i := range n {
		require.NoError(t, tr.AddReadConflictRange(kv.KeyRange{Begin: key(i), End: key(i + 1)}))
	}
	tr.Set(f.key("ok"), []byte("x"))
	commit(t, tr, fmt.Sprintf("commit of %d touching read conflict ranges of %d-byte keys, one range once merged", n, len(key(0))))
	f.requireValue(t, f.key("ok"), []byte("x"), "the commit applied")
}

// testAtomicOpsOfAnUnreadableKeyNotMerged: the write map does not merge
// an atomic operation into the one before it on a key where one of the
// transaction's versionstamped keys may land (an unreadable key):
// WriteMap::mutate coalesces only a readable entry's operations (`else if
// (!is_unreadable && e.stack.size() > 0) coalesceOver(...)`, otherwise it
// pushes the operation: fdbclient/WriteMap.cpp), so the commit request
// holds each of them, and 101 ByteMax of 100,000-byte operands of one key
// exceed the limit (RepeatedAtomicOpsOfOneKeyCoalesce merges them).
func testAtomicOpsOfAnUnreadableKeyNotMerged(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.SetVersionstampedKey(stampedKey(f.key("vs/"), ""), []byte("x"))
	key := f.key("vs/\xff") // between vs/ + the stamp at the read version and vs/ + ten 0xff bytes
	n := kv.MaxTransactionSize/kv.MaxValueSize + 1
	operand := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	for range n {
		tr.ByteMax(key, operand)
	}
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("%d ByteMax of %d-byte operands of a key where the versionstamped key may land are not merged", n, kv.MaxValueSize))
}

// fillTransaction sets n distinct keys to values of the maximum size.
func (f *fixture) fillTransaction(tr kv.Transaction, n int) {
	value := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	for i := range n {
		tr.Set(f.key(fmt.Sprintf("fill%04d", i)), value)
	}
}

// testTransactionUnderSizeLimit: a commit request under
// TRANSACTION_SIZE_LIMIT (10,000,000) commits
// (Transaction::commitMutations, fdbclient/NativeAPI.actor.cpp).
func testTransactionUnderSizeLimit(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	const n = kv.MaxTransactionSize / kv.MaxValueSize / 2
	f.fillTransaction(tr, n)
	commit(t, tr, "a transaction of about half the size limit must commit")
	require.Len(t, f.getRange(t, f.all(), kv.RangeOptions{Limit: n + 1}), n)
}

// testTransactionTooLarge: one over it fails with transaction_too_large and
// applies nothing (Transaction::commitMutations,
// fdbclient/NativeAPI.actor.cpp).
func testTransactionTooLarge(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	n := kv.MaxTransactionSize/kv.MaxValueSize + 1
	f.fillTransaction(tr, n)
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, fmt.Sprintf("commit of %d values of %d bytes", n, kv.MaxValueSize))
	require.Empty(t, f.getRange(t, f.all(), kv.RangeOptions{Limit: 1}), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// testApproximateSizeGrowsWithWrites: each Set adds at least its key and
// value to the approximate size (approximateSize in
// ReadYourWritesTransaction::set, fdbclient/ReadYourWrites.actor.cpp).
func testApproximateSizeGrowsWithWrites(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	size := func() int64 {
		t.Helper()
		s, err := tr.GetApproximateSize().Get()
		require.NoError(t, err, "GetApproximateSize")
		return s
	}
	empty := size()
	tr.Set(f.key("a"), bytes.Repeat([]byte{'v'}, 1000))
	one := size()
	require.GreaterOrEqual(t, one-empty, int64(1000), "a 1000-byte value must add at least 1000 bytes to the approximate size (was %d, now %d)", empty, one)
	tr.Set(f.key("b"), bytes.Repeat([]byte{'v'}, 5000))
	two := size()
	require.GreaterOrEqual(t, two-one, int64(5000), "a 5000-byte value must add at least 5000 bytes (was %d, now %d)", one, two)
}

// testInvalidWriteFailsLaterReads: an invalid write's error is the
// transaction's deferredError, which later reads and the commit report
// (ThreadSafeTransaction::get, getRange and commit call checkDeferredError,
// fdbclient/ThreadSafeTransaction.cpp).
func testInvalidWriteFailsLaterReads(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	tr.Set(f.key("big"), bytes.Repeat([]byte{'v'}, kv.MaxValueSize+1))
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrValueTooLarge, "a read after an invalid write in the same transaction")
	_, err = tr.GetRange(f.all(), kv.RangeOptions{}).GetSlice()
	requireCode(t, err, kv.ErrValueTooLarge, "a range read after an invalid write in the same transaction")
	requireCode(t, tr.Commit(), kv.ErrValueTooLarge, "commit after an invalid write")
}

// An inverted range read returns no pairs and no error: FDB's
// ReadYourWritesTransaction::getRange (fdbclient/ReadYourWrites.actor.cpp)
// answers crossing key selectors with an empty result ("RYW range
// inverted"), and neither fdb_transaction_get_range (bindings/c/fdb_c.cpp)
// nor the Go binding tests the order of the bounds, so a read never fails
// with inverted_range.
func testInvertedRangeRead(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	for _, opts := range []kv.RangeOptions{{}, {Reverse: true}, {Limit: 1}} {
		kvs, err := tr.GetRange(f.rng("b", "a"), opts).GetSlice()
		require.NoError(t, err, "GetRange with begin after end, %+v: FDB answers it with no pairs, not inverted_range", opts)
		require.Empty(t, kvs, "GetRange with begin after end must return no pairs, %+v", opts)
	}
}

// testInvertedRangeIterator: likewise for an iterator.
func testInvertedRangeIterator(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	it := tr.GetRange(f.rng("b", "a"), kv.RangeOptions{}).Iterator()
	require.False(t, it.Next(), "an iterator over an inverted range must yield nothing")
	require.NoError(t, it.Err(), "an iterator over an inverted range: FDB answers it with no pairs, not inverted_range")
}

// testInvertedClearRange: an inverted ClearRange throws inverted_range on
// the network thread (ThreadSafeTransaction::clear(begin, end),
// fdbclient/ThreadSafeTransaction.cpp), deferred to the commit.
func testInvertedClearRange(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	tr.ClearRange(f.rng("b", "a"))
	requireCode(t, tr.Commit(), kv.ErrInvertedRange, "commit after ClearRange with begin after end")
	f.requireNames(t, f.getRange(t, f.all(), kv.RangeOptions{}), []string{"a", "b"}, "the inverted clear-range must not remove anything")
}

// testInvertedConflictRanges: an inverted conflict range is returned at
// once (fdb_transaction_add_conflict_range builds a KeyRangeRef, which
// throws inverted_range: bindings/c/fdb_c.cpp,
// fdbclient/include/fdbclient/FDBTypes.h).
func testInvertedConflictRanges(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	requireCode(t, tr.AddReadConflictRange(f.rng("b", "a")), kv.ErrInvertedRange, "AddReadConflictRange with begin after end")
	tr = f.newTx(t)
	requireCode(t, tr.AddWriteConflictRange(f.rng("b", "a")), kv.ErrInvertedRange, "AddWriteConflictRange with begin after end")
}

// An AddReadConflictRange or AddWriteConflictRange that reaches into the
// system key space returns no error: fdb_transaction_add_conflict_range
// (bindings/c/fdb_c.cpp) only builds the KeyRangeRef (inverted_range is
// thrown there), and ThreadSafeTransaction::addReadConflictRange runs the
// legal-range test of ReadYourWritesTransaction::addReadConflictRange on the
// network thread, where its error becomes the transaction's deferredError;
// checkDeferredError then fails the next read and the commit.
func testConflictRangeIntoSystemKeysIsDeferred(t *testing.T, f *fixture) {
	f.seed(t, "a")
	for name, add := range map[string]func(tr kv.Transaction) error{
		"read": func(tr kv.Transaction) error {
			return tr.AddReadConflictRange(kv.KeyRange{Begin: f.key("a"), End: []byte("\xff\x01")})
		},
		"write": func(tr kv.Transaction) error {
			return tr.AddWriteConflictRange(kv.KeyRange{Begin: []byte("\xff"), End: []byte("\xff\x01")})
		},
	} {
		tr := f.newTx(t)
		require.NoError(t, add(tr), "Add%sConflictRange into \\xff: the C client defers the error", name)
		_, err := tr.Get(f.key("a")).Get()
		requireCode(t, err, kv.ErrKeyOutsideLegalRange, "the read after a deferred "+name+" conflict range error")
		tr.Set(f.key("b"), []byte("x"))
		requireCode(t, tr.Commit(), kv.ErrKeyOutsideLegalRange, "the commit after a deferred "+name+" conflict range error")
		f.requireAbsent(t, f.key("b"), "the failed transaction applied nothing")
	}
}

// A range read is tested against the legal range before anything else
// (ReadYourWritesTransaction::getRange: begin or end above \xff is
// key_outside_legal_range, before its inverted-range test), so a range that
// begins in the system key space fails even when it is inverted or empty.
func testRangeReadInSystemKeys(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	for _, r := range []kv.KeyRange{
		{Begin: []byte("\xff\x00"), End: []byte("\xff")},
		{Begin: []byte("\xff\x00"), End: []byte("\xff\x01")},
		{Begin: f.key("a"), End: []byte("\xff\x01")},
	} {
		_, err := tr.GetRange(r, kv.RangeOptions{}).GetSlice()
		requireCode(t, err, kv.ErrKeyOutsideLegalRange, fmt.Sprintf("GetRange(%q, %q)", r.Begin, r.End))
		it := tr.GetRange(r, kv.RangeOptions{Reverse: true}).Iterator()
		require.False(t, it.Next())
		requireCode(t, it.Err(), kv.ErrKeyOutsideLegalRange, fmt.Sprintf("an iterator over (%q, %q)", r.Begin, r.End))
	}
	kvs, err := tr.GetRange(kv.KeyRange{Begin: []byte("\xff"), End: []byte("\xff")}, kv.RangeOptions{}).GetSlice()
	require.NoError(t, err, "[\\xff, \\xff) is within the legal range (its bounds are not above \\xff)")
	require.Empty(t, kvs)
}

// testSystemKeyReadReportsTransactionErrorFirst: a read outside the legal
// range of a transaction that already has an error reports that error, as
// FDB tests the transaction's state before the key: the error of an
// invalid write first (ThreadSafeTransaction::get and getRange call
// checkDeferredError), then a cancellation (ReadYourWritesTransaction::get
// and getRange return resetPromise's error before key_outside_legal_range,
// fdbclient/ReadYourWrites.actor.cpp), and during a commit
// used_during_commit (with a CommitHolder).
func testSystemKeyReadReportsTransactionErrorFirst(t *testing.T, f *fixture) {
	system := kv.KeyRange{Begin: f.key("a"), End: []byte("\xff\x01")}
	read := func(tr kv.Transaction, want kv.Error, state string) {
		t.Helper()
		_, err := tr.Get([]byte("\xff\x01")).Get()
		requireCode(t, err, want, "Get of a system key, "+state)
		_, err = tr.GetRange(system, kv.RangeOptions{}).GetSlice()
		requireCode(t, err, want, "GetRange into the system keys, "+state)
		_, err = tr.Snapshot().GetRange(system, kv.RangeOptions{Reverse: true}).GetSlice()
		requireCode(t, err, want, "a snapshot GetRange into the system keys, "+state)
	}
	tr := f.newTx(t)
	tr.Set(f.key("big"), bytes.Repeat([]byte{'v'}, kv.MaxValueSize+1))
	read(tr, kv.ErrValueTooLarge, "after a Set of a value over the limit")
	tr = f.newTx(t)
	tr.Cancel()
	read(tr, kv.ErrTransactionCancelled, "after Cancel")

	// During a commit: used_during_commit, which fails the commit too
	// (checkUsedDuringCommit).
	holder, ok := f.h.Faults().(CommitHolder) // nil without an injector
	if !ok {
		return
	}
	tr, done, release := f.commitHeld(t, holder, nil)
	defer release()
	_, err := tr.GetRange(system, kv.RangeOptions{}).GetSlice()
	requireCode(t, err, kv.ErrUsedDuringCommit, "GetRange into the system keys while the commit is in flight")
	release()
	requireCode(t, <-done, kv.ErrUsedDuringCommit, "the commit during which a read into the system keys was issued")
}

// A Set or Clear of a system key over the key size limit fails with
// key_outside_legal_range: ReadYourWritesTransaction::set and ::clear(key)
// test the legal range before the key size (and clear of an oversized
// normal key is silently ignored, as no such key can exist).
func testOversizedSystemKeyWrites(t *testing.T, f *fixture) {
	big := append([]byte{0xff}, bytes.Repeat([]byte{'k'}, kv.MaxKeySize)...)
	for name, write := range map[string]func(tr kv.Transaction){
		"Set":   func(tr kv.Transaction) { tr.Set(big, []byte("x")) },
		"Clear": func(tr kv.Transaction) { tr.Clear(big) },
		"Add":   func(tr kv.Transaction) { tr.Add(big, le(1, 8)) },
	} {
		tr := f.newTx(t)
		write(tr)
		requireCode(t, tr.Commit(), kv.ErrKeyOutsideLegalRange, name+" of a system key over the size limit")
	}
	tr := f.newTx(t)
	tr.Clear(f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize))))
	tr.Set(f.key("ok"), []byte("x"))
	commit(t, tr, "a Clear of a normal key over the size limit is ignored")
	f.requireValue(t, f.key("ok"), []byte("x"))
}

// The size limit covers the commit request's mutations and its conflict
// ranges: Transaction::commitMutations (fdbclient/NativeAPI.actor.cpp)
// fails with transaction_too_large when getSize() (mutations + read
// conflict ranges + write conflict ranges, each with its struct size)
// exceeds 10,000,000 bytes. A Set's write conflict range repeats its key
// twice, so 1,100 Sets of 9,000-byte keys (9.9 MB of keys and values, ~30 MB
// counted) fail. (Verified on FoundationDB 7.3.79.)
func testSizeCountsWriteConflictRanges(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	for i := range 1100 {
		tr.Set(f.bigKey(i, 9000), []byte("v"))
	}
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, "1,100 Sets of 9,000-byte keys")
}

// bigKey returns a key of exactly n bytes under the prefix, distinct per i.
func (f *fixture) bigKey(i, n int) []byte {
	k := f.key(fmt.Sprintf("big%06d/", i))
	return append(k, bytes.Repeat([]byte{'k'}, n-len(k))...)
}

// A Clear is a clear-range mutation of [key, key+\x00) plus the same write
// conflict range (NativeAPI.actor.cpp Transaction::clear), so each cleared
// key counts about four times: 60,000 Clears of 60-byte keys (7 MB if each
// range were counted once) exceed the limit.
func testSizeCountsClearedKeyTwice(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	for i := range 60_000 {
		tr.Clear(f.bigKey(i, 60))
	}
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, "60,000 Clears of 60-byte keys")
}

// RYW's WriteMap merges repeated Sets of one key into one mutation
// (ReadYourWrites.actor.cpp writeRangeToNativeTransaction sends the merged
// operations), so the commit request holds one: 150 Sets of one key with
// a 100,000-byte value (15 MB written by the calls) commit.
func testRepeatedSetsOfOneKeyCountOnce(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	value := bytes.Repeat([]byte{'v'}, kv.MaxValueSize)
	for i := range 150 {
		value[0] = byte(i)
		tr.Set(f.key("one"), value)
	}
	commit(t, tr, "150 Sets of one key: the commit request holds the last one only")
	f.requireValue(t, f.key("one"), value)
}

// RYW's WriteMap also merges an atomic operation into the one before it
// on the same key when both have the same type (WriteMap::coalesceOver,
// fdbclient/WriteMap.cpp): always for ByteMax (and ByteMin, BitAnd,
// AppendIfFits), and for the types that are not associative across
// widths (Add, BitOr, BitXor, Max, Min) when the operands have the same
// length; never for CompareAndClear. The commit request then holds one
// operation (writeRangeToNativeTransaction): 150 ByteMax and 150 Adds of
// 100,000-byte operands on two keys (30 MB written by the calls) commit,
// with the values of the operations applied one by one. Adds whose
// operands alternate between two lengths, and CompareAndClears, are sent
// one by one: 150 of them exceed the limit.
func testRepeatedAtomicOpsOfOneKeyCoalesce(t *testing.T, f *fixture) {
	operand := func(i, n int) []byte {
		p := make([]byte, n)
		p[0], p[n-1] = byte(i), byte(i) // ByteMax keeps the last one
		return p
	}
	tr := f.newTx(t)
	one := le(1, kv.MaxValueSize)
	for i := range 150 {
		tr.ByteMax(f.key("bytemax"), operand(i, kv.MaxValueSize))
		tr.Add(f.key("add"), one)
	}
	commit(t, tr, "150 ByteMax and 150 Adds of one key each: the commit request holds one operation per key")
	f.requireValue(t, f.key("bytemax"), operand(149, kv.MaxValueSize))
	f.requireValue(t, f.key("add"), le(150, kv.MaxValueSize))

	tr = f.newTx(t)
	for i := range 150 {
		tr.Add(f.key("widths"), one[:kv.MaxValueSize-i%2])
	}
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, "150 Adds of one key whose operands alternate between two lengths are not merged")
	tr = f.newTx(t)
	for i := range 150 {
		tr.CompareAndClear(f.key("cac"), operand(i, kv.MaxValueSize))
	}
	tr.Set(f.key("ok"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, "150 CompareAndClears of one key are not merged")
	f.requireAbsent(t, f.key("ok"), "a transaction that failed with transaction_too_large must apply none of its writes")
}

// RYW keeps read conflict ranges in a coalesced map (readConflicts, a
// CoalescedKeyRefRangeMap: fdbclient/ReadYourWrites.actor.cpp), so reading one key many times adds one range:
// 1,200 reads of a 9,000-byte key (21 MB of ranges if each were kept) and a
// small write commit.
func testRepeatedReadsOfOneKeyCountOnce(t *testing.T, f *fixture) {
	key := f.bigKey(0, 9000)
	f.set(t, key, []byte("x"))
	tr := f.newTx(t)
	for range 1200 {
		require.Equal(t, []byte("x"), mustGet(t, tr, key))
	}
	tr.Set(f.key("small"), []byte("y"))
	commit(t, tr, "1,200 reads of one key add one read conflict range")
}

// GetApproximateSize counts what the commit will count, conflict ranges
// included (RYW's approximateSize adds sizeof(MutationRef), the key, the
// value and the write conflict range of each Set): a layer budgeting with
// it stays under the limit.
func testApproximateSizeCountsConflictRanges(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	size := func() int64 {
		t.Helper()
		s, err := tr.GetApproximateSize().Get()
		require.NoError(t, err, "GetApproximateSize")
		return s
	}
	before := size()
	tr.Set(f.bigKey(0, 9000), []byte("v"))
	require.GreaterOrEqual(t, size()-before, int64(3*9000), "a Set of a 9,000-byte key counts the key in the mutation and twice in its write conflict range")
	// Fill up to the limit, budgeting with GetApproximateSize: the commit
	// must not fail with transaction_too_large.
	tr = f.newTx(t)
	for i := 0; ; i++ {
		if size()+3*9000+64+200 > kv.MaxTransactionSize {
			break
		}
		tr.Set(f.bigKey(i, 9000), []byte("v"))
	}
	commit(t, tr, "a transaction whose approximate size stayed within the limit")
}
