package kvtest

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// readTests cover point and range reads, read-your-writes (RYW) and the
// consistency of a transaction's view.
func readTests() []conformanceTest {
	return []conformanceTest{
		{"GetMissingKeyReturnsNil", testGetMissingKeyReturnsNil},
		{"GetEmptyValueReturnsEmptyNonNil", testGetEmptyValueReturnsEmptyNonNil},
		{"ValuesAreBinarySafe", testValuesAreBinarySafe},
		{"SetThenGetInSameTransaction", testSetThenGetInSameTransaction},
		{"SetKeepsNeitherSlice", testSetKeepsNeitherSlice},
		{"ClearThenGetInSameTransaction", testClearThenGetInSameTransaction},
		{"LastWriteWinsInSameTransaction", testLastWriteWinsInSameTransaction},
		{"CommittedWritesVisibleToLaterTransactions", testCommittedWritesVisibleToLaterTransactions},
		{"UncommittedWritesInvisibleToOthers", testUncommittedWritesInvisibleToOthers},
		{"ReadsSeeOneVersion", testReadsSeeOneVersion},
		{"ReadVersionStableWithinTransaction", testReadVersionStableWithinTransaction},
		{"RangeForward", testRangeForward},
		{"RangeReverse", testRangeReverse},
		{"RangeForwardLimit", testRangeForwardLimit},
		{"RangeReverseLimit", testRangeReverseLimit},
		{"RangeEmpty", testRangeEmpty},
		{"EmptyRangeReadTakesNoReadVersion", testEmptyRangeReadTakesNoReadVersion},
		{"RangeUnsignedByteOrder", testRangeUnsignedByteOrder},
		{"RangeIteratorMatchesGetSlice", testRangeIteratorMatchesGetSlice},
		{"ClearRangeIsHalfOpen", testClearRangeIsHalfOpen},
		{"OwnClearRangeKeepsOwnWriteAtItsEnd", testOwnClearRangeKeepsOwnWriteAtItsEnd},
		{"RYWRangeWithInterleavedWrites", testRYWRangeWithInterleavedWrites},
		{"RYWRangeReverseAndLimit", testRYWRangeReverseAndLimit},
		{"RYWRangeReadsAfterEachWrite", testRYWRangeReadsAfterEachWrite},
		{"RYWRangeIssuedBeforeWritesExcludesThem", testRYWRangeIssuedBeforeWritesExcludesThem},
		{"RYWIterator", testRYWIterator},
		{"SnapshotReadsSeeOwnWrites", testSnapshotReadsSeeOwnWrites},
		{"ResetDiscardsWrites", testResetDiscardsWrites},
		{"ReadTransactOnDatabase", testReadTransactOnDatabase},
		{"ReadTransactOnTransactionSeesOwnWrites", testReadTransactOnTransactionSeesOwnWrites},
	}
}

// testGetMissingKeyReturnsNil: a missing key reads as not present
// (fdb_future_get_value's out_present, bindings/c/fdb_c.cpp; the Go binding
// returns nil: bindings/go/src/fdb/futures.go).
func testGetMissingKeyReturnsNil(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	v, err := tr.Get(f.key("missing")).Get()
	require.NoError(t, err, "Get of a missing key must not fail")
	require.Nil(t, v, "Get of a missing key must return nil, got %q", v)
	v, err = tr.Snapshot().Get(f.key("missing")).Get()
	require.NoError(t, err, "snapshot Get of a missing key must not fail")
	require.Nil(t, v, "snapshot Get of a missing key must return nil, got %q", v)
}

// testGetEmptyValueReturnsEmptyNonNil: an empty value is present
// (Optional<Value> set, fdb_future_get_value's out_present,
// bindings/c/fdb_c.cpp), in the transaction's own writes too (WriteMap
// SetValue of an empty value).
func testGetEmptyValueReturnsEmptyNonNil(t *testing.T, f *fixture) {
	f.set(t, f.key("empty"), []byte{})
	v := f.get(t, f.key("empty"))
	require.NotNil(t, v, "a key set to an empty value exists: Get must return a non-nil empty slice, not nil")
	require.Empty(t, v, "a key set to an empty value must read back empty")

	tr := f.newTx(t)
	tr.Set(f.key("empty2"), nil)
	v = mustGet(t, tr, f.key("empty2"))
	require.NotNil(t, v, "RYW: a key set to an empty value in this transaction exists and must read as non-nil")
	require.Empty(t, v)
}

// testValuesAreBinarySafe: keys and values are byte strings (StringRef,
// flow/include/flow/Arena.h).
func testValuesAreBinarySafe(t *testing.T, f *fixture) {
	value := []byte{0, 1, 0xff, 0, 0x80, 0x7f, 0}
	key := f.key("bin\x00\xff\x00")
	f.set(t, key, value)
	require.Equal(t, value, f.get(t, key), "a binary key and value must round-trip unchanged")
}

// testSetThenGetInSameTransaction: reads see the transaction's own writes
// (RYWIterator, fdbclient/RYWIterator.cpp).
func testSetThenGetInSameTransaction(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("new"))
	tr.Set(f.key("b"), []byte("fresh"))
	require.Equal(t, []byte("new"), mustGet(t, tr, f.key("a")), "RYW: an overwritten key must read the transaction's own value")
	require.Equal(t, []byte("fresh"), mustGet(t, tr, f.key("b")), "RYW: a key set in the transaction must read the transaction's own value")
	commit(t, tr)
	f.requireValue(t, f.key("a"), []byte("new"), "the overwrite must be visible after commit")
	f.requireValue(t, f.key("b"), []byte("fresh"), "the new key must be visible after commit")
}

// testSetKeepsNeitherSlice pins kv.Transaction.Set's rule: the caller may
// reuse the key and value slices once Set returns (FDB's client copies
// them: ThreadSafeTransaction::set, fdbclient/ThreadSafeTransaction.cpp). One key buffer and one value buffer serve two Sets, and are then
// scribbled over: the transaction and the database hold what was set.
func testSetKeepsNeitherSlice(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	key, val := f.key("a"), []byte("first")
	tr.Set(key, val)
	key[len(key)-1], val[0] = 'b', 'F' // the same memory, now "b" and "First"
	tr.Set(key, val)
	key[len(key)-1], val[0] = 'c', 'X'
	require.Equal(t, []byte("first"), mustGet(t, tr, f.key("a")), "RYW: the value set at a changed with the caller's buffer after Set")
	require.Equal(t, []byte("First"), mustGet(t, tr, f.key("b")), "RYW: the value set at b changed with the caller's buffer after Set")
	kvs, err := tr.GetRange(f.all(), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []kv.KeyValue{{Key: f.key("a"), Value: []byte("first")}, {Key: f.key("b"), Value: []byte("First")}}, kvs,
		"RYW range: the keys or values set changed with the caller's buffers after Set")
	commit(t, tr)
	clear(key)
	clear(val)
	f.requireValue(t, f.key("a"), []byte("first"), "the committed value at a changed with the caller's buffer")
	f.requireValue(t, f.key("b"), []byte("First"), "the committed value at b changed with the caller's buffer")
	require.Equal(t, []kv.KeyValue{{Key: f.key("a"), Value: []byte("first")}, {Key: f.key("b"), Value: []byte("First")}}, f.getRange(t, f.all(), kv.RangeOptions{}),
		"the committed keys changed with the caller's buffer")
}

// testClearThenGetInSameTransaction: likewise its clears, and a Set after a
// ClearRange (WriteMap::clear and mutate, fdbclient/WriteMap.cpp).
func testClearThenGetInSameTransaction(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	tr.Clear(f.key("a"))
	tr.ClearRange(f.rng("b", "c"))
	require.Nil(t, mustGet(t, tr, f.key("a")), "RYW: a key cleared in the transaction must read as missing")
	require.Nil(t, mustGet(t, tr, f.key("b")), "RYW: a key in a range cleared in the transaction must read as missing")
	tr.Set(f.key("b"), []byte("again"))
	require.Equal(t, []byte("again"), mustGet(t, tr, f.key("b")), "RYW: a set after a clear-range must be visible")
	commit(t, tr)
	f.requireAbsent(t, f.key("a"), "the cleared key must be gone after commit")
	f.requireValue(t, f.key("b"), []byte("again"), "the set after the clear-range must win after commit")
}

// testLastWriteWinsInSameTransaction: a Set replaces the key's earlier
// writes (WriteMap::mutate, fdbclient/WriteMap.cpp).
func testLastWriteWinsInSameTransaction(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("k"), []byte("1"))
	tr.Set(f.key("k"), []byte("2"))
	tr.Clear(f.key("k"))
	tr.Set(f.key("k"), []byte("3"))
	require.Equal(t, []byte("3"), mustGet(t, tr, f.key("k")), "RYW: the last write to a key must win")
	commit(t, tr)
	f.requireValue(t, f.key("k"), []byte("3"), "the last write in a transaction must be the one committed")
}

// testCommittedWritesVisibleToLaterTransactions: a read version is at or
// after every commit acknowledged before it was obtained (Causality in
// documentation/sphinx/source/developer-guide.rst).
func testCommittedWritesVisibleToLaterTransactions(t *testing.T, f *fixture) {
	f.seed(t, "a")
	f.requireValue(t, f.key("a"), []byte("v:a"), "a committed write must be visible to a transaction started after the commit")
}

// testUncommittedWritesInvisibleToOthers: a transaction's writes stay in
// its own write map until the commit (ReadYourWritesTransaction,
// fdbclient/ReadYourWrites.actor.cpp).
func testUncommittedWritesInvisibleToOthers(t *testing.T, f *fixture) {
	tr1 := f.newTx(t)
	tr1.Set(f.key("a"), []byte("pending"))
	tr2 := f.newTx(t)
	require.Nil(t, mustGet(t, tr2, f.key("a")), "another transaction must not see uncommitted writes")
	require.Empty(t, mustRange(t, tr2, f.all(), kv.RangeOptions{}), "another transaction's range read must not see uncommitted writes")
}

// testReadsSeeOneVersion: every read of a transaction is at its one read
// version (Transaction::getReadVersion caches it,
// fdbclient/include/fdbclient/NativeAPI.actor.h).
func testReadsSeeOneVersion(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr1 := f.newTx(t)
	require.Equal(t, []byte("v:a"), mustGet(t, tr1, f.key("a")))

	tr2 := f.newTx(t)
	tr2.Set(f.key("a"), []byte("changed"))
	tr2.Clear(f.key("b"))
	tr2.Set(f.key("c"), []byte("new"))
	commit(t, tr2)

	require.Equal(t, []byte("v:a"), mustGet(t, tr1, f.key("a")), "a transaction must keep reading at its read version: a later commit's write must not be visible")
	require.Equal(t, []byte("v:b"), mustGet(t, tr1, f.key("b")), "a key cleared by a later commit must still be visible at the old read version")
	f.requireNames(t, mustRange(t, tr1, f.all(), kv.RangeOptions{}), []string{"a", "b"}, "a range read must see the database as of the read version")
	require.Equal(t, []byte("changed"), f.get(t, f.key("a")), "a new transaction must see the later commit")
}

// testReadVersionStableWithinTransaction: likewise GetReadVersion
// (readVersionFuture, NativeAPI.actor.h).
func testReadVersionStableWithinTransaction(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	v1 := readVersion(t, tr)
	f.seed(t, "a") // another commit in between
	v2 := readVersion(t, tr)
	require.Equal(t, v1, v2, "GetReadVersion must return the same version for the life of a transaction")
	require.GreaterOrEqual(t, v1, int64(0), "read versions are non-negative")
}

// testRangeForward: a range read returns [begin, end) ascending
// (ReadYourWritesTransaction::getRange with firstGreaterOrEqual selectors,
// bindings/go/src/fdb/range.go).
func testRangeForward(t *testing.T, f *fixture) {
	f.seed(t, "a", "b", "c", "d", "e")
	kvs := f.getRange(t, f.rng("b", "e"), kv.RangeOptions{})
	f.requireNames(t, kvs, []string{"b", "c", "d"}, "a forward range read returns [begin, end) in ascending order")
	for _, p := range kvs {
		require.Equal(t, "v:"+string(p.Key[len(f.prefix):]), string(p.Value), "range read values must belong to their keys")
	}
}

// testRangeReverse: Reverse returns the same pairs descending (getRange's
// reverse, fdbclient/ReadYourWrites.actor.cpp).
func testRangeReverse(t *testing.T, f *fixture) {
	f.seed(t, "a", "b", "c", "d", "e")
	kvs := f.getRange(t, f.rng("b", "e"), kv.RangeOptions{Reverse: true})
	f.requireNames(t, kvs, []string{"d", "c", "b"}, "a reverse range read returns [begin, end) in descending order")
}

// testRangeForwardLimit: a limit returns the first pairs; streaming modes
// change batching only (fdb_transaction_get_range_impl,
// bindings/c/fdb_c.cpp).
func testRangeForwardLimit(t *testing.T, f *fixture) {
	f.seed(t, "a", "b", "c", "d", "e")
	f.requireNames(t, f.getRange(t, f.rng("b", "z"), kv.RangeOptions{Limit: 2}), []string{"b", "c"}, "a forward limited read returns the first Limit pairs")
	f.requireNames(t, f.getRange(t, f.rng("b", "z"), kv.RangeOptions{Limit: 10}), []string{"b", "c", "d", "e"}, "a limit larger than the range returns the whole range")
	f.requireNames(t, f.getRange(t, f.rng("b", "z"), kv.RangeOptions{Limit: 2, Mode: kv.StreamingModeExact}), []string{"b", "c"}, "StreamingModeExact must not change the result")
	f.requireNames(t, f.getRange(t, f.rng("b", "z"), kv.RangeOptions{Limit: 3, Mode: kv.StreamingModeWantAll}), []string{"b", "c", "d"}, "StreamingModeWantAll must not change the result")
}

// testRangeReverseLimit: a reverse limit returns the last pairs
// (getRangeValueBack, fdbclient/ReadYourWrites.actor.cpp).
func testRangeReverseLimit(t *testing.T, f *fixture) {
	f.seed(t, "a", "b", "c", "d", "e")
	f.requireNames(t, f.getRange(t, f.rng("a", "e"), kv.RangeOptions{Limit: 2, Reverse: true}), []string{"d", "c"}, "a reverse limited read returns the last Limit pairs, descending")
	f.requireNames(t, f.getRange(t, f.rng("a", "z"), kv.RangeOptions{Limit: 1, Reverse: true}), []string{"e"}, "a reverse read with limit 1 returns the last key")
}

// testRangeEmpty: an empty range or one with no keys returns nothing
// (ReadYourWritesTransaction::getRange,
// fdbclient/ReadYourWrites.actor.cpp).
func testRangeEmpty(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	require.Empty(t, f.getRange(t, f.rng("b", "b"), kv.RangeOptions{}), "an empty range [k, k) returns nothing")
	require.Empty(t, f.getRange(t, f.rng("c", "z"), kv.RangeOptions{}), "a range with no keys returns nothing")
	require.Empty(t, f.getRange(t, f.rng("c", "z"), kv.RangeOptions{Reverse: true, Limit: 1}), "a reverse range with no keys returns nothing")
}

// testEmptyRangeReadTakesNoReadVersion: a read of an empty range [k, k)
// returns no pairs without reading (ReadYourWritesTransaction::getRange,
// fdbclient/ReadYourWrites.actor.cpp, returns an empty result when the
// selectors' keys cross or meet, before readWithConflictRange), so it does
// not fix the transaction's read version, however it is consumed: the
// transaction's first real read, after another transaction's commit, sees
// that commit.
func testEmptyRangeReadTakesNoReadVersion(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	rr := tr.GetRange(f.rng("k", "k"), kv.RangeOptions{})
	for i := range 2 {
		kvs, err := rr.GetSlice()
		require.NoError(t, err, "consumer %d of a read of [k, k)", i)
		require.Empty(t, kvs, "consumer %d of a read of [k, k)", i)
	}
	it := tr.GetRange(f.rng("k", "k"), kv.RangeOptions{Reverse: true, Limit: 1}).Iterator()
	require.False(t, it.Next(), "an iterator over [k, k) yields nothing")
	require.NoError(t, it.Err(), "an iterator over [k, k)")
	f.set(t, f.key("k"), []byte("later"))
	require.Equal(t, []byte("later"), mustGet(t, tr, f.key("k")), "the first read after reads of an empty range sees a commit made after them")
}

// testRangeUnsignedByteOrder: keys are ordered by unsigned byte comparison,
// a prefix first (StringRef's compare uses memcmp,
// flow/include/flow/Arena.h).
func testRangeUnsignedByteOrder(t *testing.T, f *fixture) {
	names := []string{"\x80", "\x00", "\xfe", "\x7f", "\x01", "\x00\x00", "a", "\x7f\xff"}
	f.seed(t, names...)
	want := []string{"\x00", "\x00\x00", "\x01", "a", "\x7f", "\x7f\xff", "\x80", "\xfe"}
	f.requireNames(t, f.getRange(t, f.all(), kv.RangeOptions{}), want, "keys must be ordered by unsigned byte comparison, a prefix before its extensions")
}

// testRangeIteratorMatchesGetSlice: the iterator's batches together are
// GetSlice's result (bindings/go/src/fdb/range.go).
func testRangeIteratorMatchesGetSlice(t *testing.T, f *fixture) {
	const n = 1000
	tr := f.newTx(t)
	for i := range n {
		tr.Set(f.key(fmt.Sprintf("k%04d", i)), []byte(fmt.Sprint(i)))
	}
	commit(t, tr)

	for _, opts := range []kv.RangeOptions{
		{},
		{Reverse: true},
		{Limit: 300},
		{Limit: 300, Reverse: true},
		{Mode: kv.StreamingModeWantAll},
	} {
		tr := f.newTx(t)
		want := mustRange(t, tr, f.all(), opts)
		wantLen := n
		if opts.Limit > 0 {
			wantLen = opts.Limit
		}
		require.Len(t, want, wantLen, "GetSlice with %+v", opts)
		var got []kv.KeyValue
		it := tr.GetRange(f.all(), opts).Iterator()
		for it.Next() {
			got = append(got, it.KeyValue())
		}
		require.NoError(t, it.Err(), "iterator with %+v", opts)
		require.Equal(t, want, got, "the iterator must yield exactly what GetSlice returns, with %+v", opts)
	}
}

// testClearRangeIsHalfOpen: ClearRange clears [begin, end), in the
// transaction's own reads too, where the database's key at end stays
// (WriteMap::clear, fdbclient/WriteMap.cpp, marks only [begin, end)
// cleared).
func testClearRangeIsHalfOpen(t *testing.T, f *fixture) {
	f.seed(t, "a", "b", "b\x00", "c", "d")
	tr := f.newTx(t)
	tr.ClearRange(f.rng("b", "d"))
	require.Nil(t, mustGet(t, tr, f.key("b")), "RYW: ClearRange clears its begin key")
	require.Equal(t, []byte("v:d"), mustGet(t, tr, f.key("d")), "RYW: ClearRange keeps the database's key at its end")
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{}), []string{"a", "d"}, "RYW: a range read after ClearRange sees [begin, end) cleared, end kept")
	commit(t, tr)
	f.requireNames(t, f.getRange(t, f.all(), kv.RangeOptions{}), []string{"a", "d"}, "ClearRange must clear [begin, end): begin included, end kept")
}

// rywSetup seeds a, c, e, g, i and applies, in one transaction: set b, clear
// c, overwrite e, clear-range [f, h) (removing g), set g2 inside the cleared
// range, clear-range [h, j) (removing i) and set j. The expected merged view
// is a, b, e(new), g2, j.
func rywSetup(t *testing.T, f *fixture) kv.Transaction {
	t.Helper()
	f.seed(t, "a", "c", "e", "g", "i")
	tr := f.newTx(t)
	tr.Set(f.key("b"), []byte("own:b"))
	tr.Clear(f.key("c"))
	tr.Set(f.key("e"), []byte("own:e"))
	tr.ClearRange(f.rng("f", "h"))
	tr.Set(f.key("g2"), []byte("own:g2"))
	tr.ClearRange(f.rng("h", "j"))
	tr.Set(f.key("j"), []byte("own:j"))
	return tr
}

// testRYWRangeWithInterleavedWrites: a range read merges the write map with
// the database (RYWIterator, fdbclient/RYWIterator.cpp), snapshot reads too
// (snapshotRywEnabled by default, fdbclient/ReadYourWrites.actor.cpp).
func testRYWRangeWithInterleavedWrites(t *testing.T, f *fixture) {
	tr := rywSetup(t, f)
	kvs := mustRange(t, tr, f.all(), kv.RangeOptions{})
	f.requireNames(t, kvs, []string{"a", "b", "e", "g2", "j"}, "RYW: a range read must merge the transaction's sets, clears and clear-ranges with the database")
	want := map[string]string{"a": "v:a", "b": "own:b", "e": "own:e", "g2": "own:g2", "j": "own:j"}
	for _, p := range kvs {
		k := string(p.Key[len(f.prefix):])
		require.Equal(t, want[k], string(p.Value), "RYW: wrong value for %q in a merged range read", k)
	}
	f.requireNames(t, mustRange(t, tr.Snapshot(), f.all(), kv.RangeOptions{}), []string{"a", "b", "e", "g2", "j"}, "RYW: a snapshot range read must merge the transaction's writes too")
}

// testRYWRangeReverseAndLimit: the limit and direction apply to the merged
// view (getRangeValue, getRangeValueBack,
// fdbclient/ReadYourWrites.actor.cpp).
func testRYWRangeReverseAndLimit(t *testing.T, f *fixture) {
	tr := rywSetup(t, f)
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{Reverse: true}), []string{"j", "g2", "e", "b", "a"}, "RYW: reverse merged range read")
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{Limit: 3}), []string{"a", "b", "e"}, "RYW: the limit applies to the merged view, forwards")
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{Limit: 2, Reverse: true}), []string{"j", "g2"}, "RYW: the limit applies to the merged view, in reverse")
	f.requireNames(t, mustRange(t, tr, f.rng("c", "h"), kv.RangeOptions{}), []string{"e", "g2"}, "RYW: a sub-range of the merged view")
	f.requireNames(t, mustRange(t, tr, f.rng("c", "h"), kv.RangeOptions{Limit: 1, Reverse: true}), []string{"g2"}, "RYW: reverse limit 1 over a sub-range of the merged view")
}

// testRYWRangeReadsAfterEachWrite: each read sees every write made before
// it (RYWIterator, fdbclient/RYWIterator.cpp).
func testRYWRangeReadsAfterEachWrite(t *testing.T, f *fixture) {
	f.seed(t, "a", "c")
	tr := f.newTx(t)
	read := func() []kv.KeyValue { return mustRange(t, tr, f.all(), kv.RangeOptions{}) }
	f.requireNames(t, read(), []string{"a", "c"}, "before any write")
	tr.Set(f.key("b"), []byte("x"))
	f.requireNames(t, read(), []string{"a", "b", "c"}, "after set b")
	tr.Clear(f.key("a"))
	f.requireNames(t, read(), []string{"b", "c"}, "after clear a")
	tr.ClearRange(f.rng("b", "z"))
	f.requireNames(t, read(), []string{}, "after clear-range [b, z)")
	tr.Set(f.key("c"), []byte("y"))
	f.requireNames(t, read(), []string{"c"}, "after set c inside the cleared range")
	commit(t, tr)
	f.requireNames(t, f.getRange(t, f.all(), kv.RangeOptions{}), []string{"c"}, "after commit")
}

// A range read sees the transaction's writes as they were when it was
// issued, not when its result is used: FoundationDB's read walks the write
// map at the version the map had then (a WriteMap::iterator takes the
// map's version, and later writes make new versions of its persistent
// tree: fdbclient/include/fdbclient/WriteMap.h), so writes made while the
// read is in flight are not in its result; a read issued after them is.
func testRYWRangeIssuedBeforeWritesExcludesThem(t *testing.T, f *fixture) {
	f.seed(t, "a", "c")
	tr := f.newTx(t)
	tr.Set(f.key("0"), []byte("mine"))
	before := tr.GetRange(f.all(), kv.RangeOptions{})
	tr.Set(f.key("b"), []byte("x"))
	tr.Clear(f.key("a"))
	kvs, err := before.GetSlice()
	require.NoError(t, err)
	f.requireNames(t, kvs, []string{"0", "a", "c"}, "the writes as they were when the read was issued")
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{}), []string{"0", "b", "c"}, "a read issued after the writes")
	commit(t, tr)
}

// testRYWIterator: the iterator merges the transaction's writes like
// GetSlice (each batch is a ReadYourWritesTransaction::getRange).
func testRYWIterator(t *testing.T, f *fixture) {
	tr := rywSetup(t, f)
	var got []kv.KeyValue
	it := tr.GetRange(f.all(), kv.RangeOptions{}).Iterator()
	for it.Next() {
		got = append(got, it.KeyValue())
	}
	require.NoError(t, it.Err())
	f.requireNames(t, got, []string{"a", "b", "e", "g2", "j"}, "RYW: the iterator must merge the transaction's writes like GetSlice")
}

// testSnapshotReadsSeeOwnWrites: snapshot reads see the transaction's own
// writes unless SNAPSHOT_RYW_DISABLE is set (readWithConflictRange,
// fdbclient/ReadYourWrites.actor.cpp).
func testSnapshotReadsSeeOwnWrites(t *testing.T, f *fixture) {
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("own"))
	tr.Clear(f.key("b"))
	tr.Set(f.key("c"), []byte("own:c"))
	snap := tr.Snapshot()
	require.Equal(t, []byte("own"), mustGet(t, snap, f.key("a")), "a snapshot read must see the transaction's own set")
	require.Nil(t, mustGet(t, snap, f.key("b")), "a snapshot read must see the transaction's own clear")
	f.requireNames(t, mustRange(t, snap, f.all(), kv.RangeOptions{}), []string{"a", "c"}, "a snapshot range read must see the transaction's own writes")
}

// testResetDiscardsWrites: Reset discards the write map
// (ReadYourWritesTransaction::reset, fdbclient/ReadYourWrites.actor.cpp).
func testResetDiscardsWrites(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	tr.Reset()
	require.Nil(t, mustGet(t, tr, f.key("a")), "after Reset the transaction's earlier writes must be gone")
	tr.Set(f.key("b"), []byte("y"))
	commit(t, tr)
	f.requireAbsent(t, f.key("a"), "a write made before Reset must not be committed")
	f.requireValue(t, f.key("b"), []byte("y"), "a write made after Reset must be committed")
}

// testReadTransactOnDatabase: ReadTransact runs fn in a transaction and
// returns its result (Database.ReadTransact,
// bindings/go/src/fdb/database.go).
func testReadTransactOnDatabase(t *testing.T, f *fixture) {
	f.seed(t, "a")
	var got []byte
	err := f.db.ReadTransact(f.ctx, func(rt kv.ReadTransaction) error {
		v, err := rt.Get(f.key("a")).Get()
		got = v
		return err
	})
	require.NoError(t, err, "ReadTransact on the database")
	require.Equal(t, []byte("v:a"), got)

	v, err := kv.ReadTransact(f.ctx, f.db, func(rt kv.ReadTransaction) ([]byte, error) {
		return rt.Get(f.key("a")).Get()
	})
	require.NoError(t, err, "kv.ReadTransact on the database")
	require.Equal(t, []byte("v:a"), v, "kv.ReadTransact must return fn's result")
}

// testReadTransactOnTransactionSeesOwnWrites: ReadTransact on a transaction
// or its snapshot runs fn in it (Transaction.ReadTransact calls f(t),
// bindings/go/src/fdb/transaction.go).
func testReadTransactOnTransactionSeesOwnWrites(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("own"))
	for name, rt := range map[string]kv.ReadTransactor{"transaction": tr, "snapshot": tr.Snapshot()} {
		v, err := kv.ReadTransact(f.ctx, rt, func(r kv.ReadTransaction) ([]byte, error) {
			return r.Get(f.key("a")).Get()
		})
		require.NoError(t, err, "ReadTransact on a %s", name)
		require.True(t, bytes.Equal([]byte("own"), v), "ReadTransact on a %s must run inside it and see its writes, got %q", name, v)
	}
}

// testOwnClearRangeKeepsOwnWriteAtItsEnd: a ClearRange removes the
// transaction's own writes in [begin, end) and keeps the one at end (a
// clear's range is half-open in the write map too: WriteMap::clear,
// fdbclient/WriteMap.cpp), also when the transaction has written many keys
// (more than fit a small write buffer).
func testOwnClearRangeKeepsOwnWriteAtItsEnd(t *testing.T, f *fixture) {
	for _, n := range []int{4, 40} {
		t.Run(fmt.Sprint(n, "_writes"), func(t *testing.T) {
			p := fmt.Sprintf("w%d-", n)
			name := func(i int) string { return fmt.Sprintf("%s%02d", p, i) }
			tr := f.newTx(t)
			for i := range n {
				tr.Set(f.key(name(i)), []byte(name(i)))
			}
			tr.ClearRange(f.rng(name(0), name(n/2)))
			want := make([]string, 0, n-n/2)
			for i := n / 2; i < n; i++ {
				want = append(want, name(i))
			}
			require.Equal(t, []byte(name(n/2)), mustGet(t, tr, f.key(name(n/2))), "RYW: the write at the clear's end stays")
			require.Nil(t, mustGet(t, tr, f.key(name(n/2-1))), "RYW: the write just before the clear's end is cleared")
			f.requireNames(t, mustRange(t, tr, f.rng(p, p+"\xff"), kv.RangeOptions{}), want, "RYW range read after the clear")
			commit(t, tr)
			f.requireNames(t, f.getRange(t, f.rng(p, p+"\xff"), kv.RangeOptions{}), want, "after the commit")
		})
	}
}
