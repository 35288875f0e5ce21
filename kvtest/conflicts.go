package kvtest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// conflictCase is one deterministic interleaving of two transactions:
//
//  1. seed is committed;
//  2. the reader obtains a read version and runs read;
//  3. the writer runs write and commits (it must succeed);
//  4. the reader writes a marker key outside every range the cases read
//     (unless readOnly) and commits.
//
// The reader's commit must fail with not_committed exactly when conflict is
// set; a failed commit must apply none of its writes.
type conflictCase struct {
	name     string
	seed     []string
	read     func(t *testing.T, f *fixture, reader kv.Transaction)
	write    func(t *testing.T, f *fixture, writer kv.Transaction)
	readOnly bool
	conflict bool
}

// conflictTests cover which reads and writes add conflict ranges, and what
// makes a commit fail with not_committed.
func conflictTests() []conformanceTest {
	cases := []conflictCase{
		// Point reads: a normal read of a key adds [key, key+\x00) to the
		// read conflict ranges (addConflictRange(GetValueReq) and
		// updateConflictMap, fdbclient/ReadYourWrites.actor.cpp), and every
		// write of the key, atomic ones included, adds it to the write
		// conflict ranges (Transaction::set, clear, atomicOp,
		// fdbclient/NativeAPI.actor.cpp); the resolver fails the reader if a
		// commit after its read version wrote into them (ConflictSet,
		// fdbserver/SkipList.cpp).
		{name: "PointReadThenWriteConflicts", seed: []string{"b"}, read: getKey("b"), write: setKeys("b"), conflict: true},
		{name: "PointReadOfMissingKeyConflictsWithInsert", read: getKey("b"), write: setKeys("b"), conflict: true},
		{name: "PointReadDoesNotConflictWithNextKey", seed: []string{"b"}, read: getKey("b"), write: setKeys("b\x00")},
		{name: "PointReadDoesNotConflictWithPreviousKey", seed: []string{"b"}, read: getKey("b"), write: setKeys("a\xff")},
		{name: "PointReadThenClearConflicts", seed: []string{"b"}, read: getKey("b"), write: clearKey("b"), conflict: true},
		{name: "PointReadThenClearRangeConflicts", seed: []string{"b"}, read: getKey("b"), write: clearRange("a", "c"), conflict: true},
		{name: "PointReadThenAtomicAddConflicts", read: getKey("b"), write: addKey("b"), conflict: true},
		{name: "PointReadThenAtomicMaxConflicts", read: getKey("b"), write: func(t *testing.T, f *fixture, w kv.Transaction) { w.Max(f.key("b"), le(1, 8)) }, conflict: true},
		{name: "PointReadThenVersionstampedValueConflicts", read: getKey("b"), write: func(t *testing.T, f *fixture, w kv.Transaction) {
			w.SetVersionstampedValue(f.key("b"), append(make([]byte, 10), 0, 0, 0, 0))
		}, conflict: true},

		// Snapshot reads add no conflict range (readWithConflictRangeRYW
		// calls addConflictRange only `if (!snapshot)`,
		// fdbclient/ReadYourWrites.actor.cpp).
		{name: "SnapshotPointReadNoConflict", seed: []string{"b"}, read: snapshotGet("b"), write: setKeys("b")},
		{name: "SnapshotRangeReadNoConflict", seed: []string{"b", "c"}, read: snapshotRange("", "\xff"), write: setKeys("b", "bb", "c")},

		// Writes alone add no read conflict, and a transaction with no
		// mutation and no write conflict range commits without the resolver
		// (Transaction::commitMutations, fdbclient/NativeAPI.actor.cpp).
		{name: "WriteWriteOverlapNoConflict", read: func(t *testing.T, f *fixture, r kv.Transaction) { r.Set(f.key("b"), []byte("reader")) }, write: setKeys("b")},
		{name: "ClearRangeOverlapNoConflict", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) { r.ClearRange(f.rng("a", "z")) }, write: setKeys("b", "c")},
		{name: "AtomicAddOverlapNoConflict", read: func(t *testing.T, f *fixture, r kv.Transaction) { r.Add(f.key("b"), le(1, 8)) }, write: setKeys("b")},
		{name: "ReadOnlyTransactionAlwaysCommits", seed: []string{"b"}, read: getKey("b"), write: setKeys("b"), readOnly: true},
		{name: "ReadOnlyRangeReadAlwaysCommits", seed: []string{"b"}, read: rangeRead("", "\xff", 0, false, "b"), write: setKeys("b", "c"), readOnly: true},
		// An empty ClearRange or write conflict range writes nothing, so the
		// transaction stays read-only ("if (r.empty()) return;" in
		// ReadYourWritesTransaction::clear and addWriteConflictRange,
		// fdbclient/ReadYourWrites.actor.cpp).
		{name: "EmptyClearRangeKeepsReadOnly", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			mustGet(t, r, f.key("b"))
			r.ClearRange(f.rng("c", "c"))
		}, write: setKeys("b"), readOnly: true},
		{name: "EmptyWriteConflictRangeKeepsReadOnly", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			mustGet(t, r, f.key("b"))
			require.NoError(t, r.AddWriteConflictRange(f.rng("c", "c")))
		}, write: setKeys("b"), readOnly: true},

		// Range reads that ran to the end of the range: the whole range
		// (addConflictRange(GetRangeReq), fdbclient/ReadYourWrites.actor.cpp:
		// the end key unless the limit was reached).
		{name: "FullRangeReadConflictsWithInsertAtBegin", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: setKeys("b"), conflict: true},
		{name: "FullRangeReadConflictsWithInsertInMiddle", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: setKeys("d"), conflict: true},
		{name: "FullRangeReadConflictsWithInsertAfterLastKey", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: setKeys("x"), conflict: true},
		{name: "FullRangeReadConflictsWithClearOfReadKey", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: clearKey("e"), conflict: true},
		{name: "FullRangeReadNoConflictAtEnd", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: setKeys("y")},
		{name: "FullRangeReadNoConflictBeforeBegin", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, false, "c", "e"), write: setKeys("a", "a\xff")},
		{name: "FullReverseRangeReadConflictsWithInsert", seed: []string{"c", "e"}, read: rangeRead("b", "y", 0, true, "e", "c"), write: setKeys("b"), conflict: true},
		{name: "EmptyRangeReadConflictsWithInsert", read: rangeRead("b", "y", 0, false), write: setKeys("m"), conflict: true},
		{name: "LimitNotReachedForwardConflictsWholeRange", seed: []string{"c"}, read: rangeRead("b", "y", 5, false, "c"), write: setKeys("x"), conflict: true},
		{name: "LimitNotReachedReverseConflictsWholeRange", seed: []string{"x"}, read: rangeRead("b", "y", 5, true, "x"), write: setKeys("b"), conflict: true},

		// Forward range reads truncated by their limit: [begin, lastKey+\x00)
		// (addConflictRange(GetRangeReq<false>), ReadYourWrites.actor.cpp).
		{name: "ForwardLimitNoConflictAfterLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, false, "b"), write: setKeys("c", "e")},
		{name: "ForwardLimitNoConflictJustAfterLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, false, "b"), write: setKeys("b\x00")},
		{name: "ForwardLimitConflictAtLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, false, "b"), write: setKeys("b"), conflict: true},
		{name: "ForwardLimitConflictBeforeLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, false, "b"), write: setKeys("a"), conflict: true},
		{name: "ForwardLimitTwoConflictAtSecondKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 2, false, "b", "c"), write: clearKey("c"), conflict: true},
		{name: "ForwardLimitTwoNoConflictAfterSecondKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 2, false, "b", "c"), write: setKeys("c\x00", "d")},

		// Reverse range reads truncated by their limit: [lastKey, end)
		// (addConflictRange(GetRangeReq<true>), ReadYourWrites.actor.cpp).
		{name: "ReverseLimitNoConflictBeforeLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, true, "d"), write: setKeys("c", "a")},
		{name: "ReverseLimitNoConflictJustBeforeLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, true, "d"), write: setKeys("c\xff")},
		{name: "ReverseLimitConflictAtLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, true, "d"), write: setKeys("d"), conflict: true},
		{name: "ReverseLimitConflictAfterLastKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 1, true, "d"), write: setKeys("d\x00"), conflict: true},
		// A limit of two takes the general read path (not the one-row
		// path): the range starts at the second key, which it includes.
		{name: "ReverseLimitTwoConflictAtSecondKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 2, true, "d", "c"), write: setKeys("c"), conflict: true},
		{name: "ReverseLimitTwoNoConflictBeforeSecondKey", seed: []string{"b", "c", "d"}, read: rangeRead("", "\xff", 2, true, "d", "c"), write: setKeys("b", "b\x00")},

		// A range read is issued when GetRange is called (the Go binding's
		// getRange calls doGetRange at once: bindings/go/src/fdb/
		// transaction.go), and the commit waits for reads in flight
		// (RYWImpl::commit waits on ryw->reading), so an unconsumed result
		// still adds the conflict range of its first batch.
		{name: "UnconsumedRangeReadConflicts", seed: []string{"b", "d"}, read: unconsumedRange("", "\xff", 0), write: setKeys("c"), conflict: true},
		{name: "UnconsumedLimitedRangeReadConflictsAtFirstKey", seed: []string{"b", "d"}, read: unconsumedRange("", "\xff", 1), write: setKeys("b"), conflict: true},
		{name: "UnconsumedLimitedRangeReadNoConflictAfterLimit", seed: []string{"b", "d"}, read: unconsumedRange("", "\xff", 1), write: setKeys("c")},

		// Iterators: each batch read adds its own conflict range, as above
		// (bindings/go/src/fdb/range.go reads batch by batch).
		{name: "IteratorReadToEndConflictsWithInsert", seed: []string{"b", "d"}, read: iterate("", "\xff", -1, "b", "d"), write: setKeys("c"), conflict: true},
		{name: "IteratorPartialReadConflictsWithFetchedKey", seed: []string{"b", "d"}, read: iterate("", "\xff", 1, "b"), write: setKeys("b"), conflict: true},

		// Reads answered from the transaction's own writes add no conflict
		// range for keys whose value does not depend on the database
		// (updateConflictMap skips independent operations and cleared ranges,
		// fdbclient/ReadYourWrites.actor.cpp).
		{name: "ReadOfOwnWriteNoConflict", read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Set(f.key("b"), []byte("own"))
			require.Equal(t, []byte("own"), mustGet(t, r, f.key("b")))
		}, write: setKeys("b")},
		{name: "ReadOfOwnClearNoConflict", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Clear(f.key("b"))
			require.Nil(t, mustGet(t, r, f.key("b")))
		}, write: setKeys("b")},
		{name: "ReadBeforeOwnWriteStillConflicts", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			require.Equal(t, []byte("v:b"), mustGet(t, r, f.key("b")))
			r.Set(f.key("b"), []byte("own"))
		}, write: setKeys("b"), conflict: true},
		{name: "RangeReadOverOwnClearedRangeNoConflict", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.ClearRange(f.rng("a", "y"))
			r.Set(f.key("c"), []byte("own"))
			f.requireNames(t, mustRange(t, r, f.rng("a", "y"), kv.RangeOptions{}), []string{"c"})
		}, write: setKeys("b", "d")},
		{name: "RangeReadSkipsOwnWrittenKey", seed: []string{"b", "d"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Set(f.key("c"), []byte("own"))
			f.requireNames(t, mustRange(t, r, f.rng("a", "y"), kv.RangeOptions{}), []string{"b", "c", "d"})
		}, write: setKeys("c")},
		{name: "RangeReadWithOwnWritesConflictsOnOtherKeys", seed: []string{"b", "d"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Set(f.key("c"), []byte("own"))
			f.requireNames(t, mustRange(t, r, f.rng("a", "y"), kv.RangeOptions{}), []string{"b", "c", "d"})
		}, write: setKeys("e"), conflict: true},
		// A range read issued before the transaction writes or clears keys
		// in its range read them from the database: its conflict range is
		// computed with the write map as it was at the read's issue (the
		// read's own WriteMap::iterator, a snapshot later writes leave as
		// it is: addConflictRange in readWithConflictRangeRYW,
		// fdbclient/ReadYourWrites.actor.cpp; fdbclient/include/fdbclient/
		// WriteMap.h), so it keeps those keys, whenever its result is used.
		{name: "RangeReadIssuedBeforeOwnSetConflictsOnTheKey", seed: []string{"b", "d"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			issued := r.GetRange(f.rng("a", "y"), kv.RangeOptions{})
			r.Set(f.key("b"), []byte("own"))
			kvs, err := issued.GetSlice()
			require.NoError(t, err)
			f.requireNames(t, kvs, []string{"b", "d"})
			require.Equal(t, []byte("v:b"), kvs[0].Value, "the database's value, as at the read's issue")
		}, write: setKeys("b"), conflict: true},
		{name: "RangeReadIssuedBeforeOwnClearRangeConflicts", seed: []string{"b", "d"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			issued := r.GetRange(f.rng("a", "y"), kv.RangeOptions{})
			r.ClearRange(f.rng("a", "y"))
			kvs, err := issued.GetSlice()
			require.NoError(t, err)
			f.requireNames(t, kvs, []string{"b", "d"})
		}, write: setKeys("d"), conflict: true},

		// Explicit conflict ranges (ReadYourWritesTransaction::
		// addReadConflictRange goes through updateConflictMap too, so it skips
		// the transaction's own independent writes; addWriteConflictRange,
		// fdbclient/ReadYourWrites.actor.cpp).
		{name: "AddReadConflictKeyConflicts", read: addReadConflictKey("b"), write: setKeys("b"), conflict: true},
		{name: "AddReadConflictKeyNoConflictWithNextKey", read: addReadConflictKey("b"), write: setKeys("b\x00")},
		{name: "AddReadConflictRangeConflictsAtBegin", read: addReadConflictRange("b", "d"), write: setKeys("b"), conflict: true},
		{name: "AddReadConflictRangeConflictsInside", read: addReadConflictRange("b", "d"), write: setKeys("c\xff"), conflict: true},
		{name: "AddReadConflictRangeNoConflictAtEnd", read: addReadConflictRange("b", "d"), write: setKeys("d", "a")},
		{name: "AddReadConflictRangeSkipsOwnWrites", read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Set(f.key("c"), []byte("own"))
			require.NoError(t, r.AddReadConflictRange(f.rng("b", "d")))
		}, write: setKeys("c")},
		// A versionstamped value does not depend on the database, so a read
		// conflict range adds nothing for its key (OperationStack::isDependent,
		// fdbclient/WriteMap.cpp; RYW's updateConflictMap).
		{name: "AddReadConflictKeySkipsOwnVersionstampedValue", read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.SetVersionstampedValue(f.key("b"), stampedValue("", ""))
			require.NoError(t, r.AddReadConflictKey(f.key("b")))
		}, write: setKeys("b")},
		{name: "AddReadConflictRangeWithOwnWritesConflictsOnOtherKeys", read: func(t *testing.T, f *fixture, r kv.Transaction) {
			r.Set(f.key("c"), []byte("own"))
			require.NoError(t, r.AddReadConflictRange(f.rng("b", "d")))
		}, write: setKeys("b"), conflict: true},
		{name: "AddWriteConflictKeyCausesConflict", seed: []string{"b"}, read: getKey("b"), write: func(t *testing.T, f *fixture, w kv.Transaction) {
			require.NoError(t, w.AddWriteConflictKey(f.key("b")))
			w.Set(f.markerKey("writer"), []byte("w"))
		}, conflict: true},
		{name: "AddWriteConflictKeyNoConflictWithNextKey", seed: []string{"b"}, read: getKey("b"), write: func(t *testing.T, f *fixture, w kv.Transaction) {
			require.NoError(t, w.AddWriteConflictKey(f.key("b\x00")))
			w.Set(f.markerKey("writer"), []byte("w"))
		}},
		{name: "AddWriteConflictRangeCausesConflict", read: getKey("c"), write: func(t *testing.T, f *fixture, w kv.Transaction) {
			require.NoError(t, w.AddWriteConflictRange(f.rng("b", "d")))
			w.Set(f.markerKey("writer"), []byte("w"))
		}, conflict: true},
		{name: "AddWriteConflictRangeNoConflictAtEnd", read: getKey("d"), write: func(t *testing.T, f *fixture, w kv.Transaction) {
			require.NoError(t, w.AddWriteConflictRange(f.rng("b", "d")))
			w.Set(f.markerKey("writer"), []byte("w"))
		}},
		// A write conflict range of the reader's own does not hide its later
		// reads of the range: WriteMap::addConflictRange gives a key it
		// did not write an entry with an empty operation stack, which the
		// write map's iterator reads as an unmodified range (offset, in
		// WriteMap::iterator::skip, fdbclient/WriteMap.cpp), and RYW's
		// updateConflictMap adds read conflicts for unmodified ranges
		// (fdbclient/ReadYourWrites.actor.cpp).
		{name: "ReadAfterOwnWriteConflictKeyConflicts", seed: []string{"b"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			require.NoError(t, r.AddWriteConflictKey(f.key("b")))
			require.Equal(t, []byte("v:b"), mustGet(t, r, f.key("b")))
		}, write: setKeys("b"), conflict: true},
		{name: "RangeReadAfterOwnWriteConflictRangeConflicts", seed: []string{"b", "d"}, read: func(t *testing.T, f *fixture, r kv.Transaction) {
			require.NoError(t, r.AddWriteConflictRange(f.rng("a", "y")))
			f.requireNames(t, mustRange(t, r, f.rng("a", "y"), kv.RangeOptions{}), []string{"b", "d"})
		}, write: setKeys("c"), conflict: true},
	}

	tests := make([]conformanceTest, 0, len(cases)+4)
	for _, c := range cases {
		tests = append(tests, conformanceTest{c.name, func(t *testing.T, f *fixture) { runConflictCase(t, f, c) }})
	}
	return append(tests,
		conformanceTest{"ConflictErrorIsClassified", testConflictErrorIsClassified},
		conformanceTest{"WriteWriteLaterCommitWins", testWriteWriteLaterCommitWins},
		conformanceTest{"CommitBeforeReadVersionNoConflict", testCommitBeforeReadVersionNoConflict},
		conformanceTest{"ReadModifyWriteRaceOneLoses", testReadModifyWriteRaceOneLoses},
	)
}

func runConflictCase(t *testing.T, f *fixture, c conflictCase) {
	f.seed(t, c.seed...)
	reader := f.newTx(t)
	readVersion(t, reader)
	c.read(t, f, reader)

	writer := f.newTx(t)
	c.write(t, f, writer)
	require.NoError(t, writer.Commit(), "the interfering writer must commit")

	marker := f.markerKey("reader")
	if !c.readOnly {
		reader.Set(marker, []byte("reader"))
	}
	err := reader.Commit()
	if !c.conflict {
		require.NoError(t, err, "the reader's commit must succeed: the writer touched nothing in its read conflict ranges")
		if !c.readOnly {
			f.requireValue(t, marker, []byte("reader"), "the reader's writes must be applied after its commit succeeded")
		}
		return
	}
	requireCode(t, err, kv.ErrNotCommitted, "the reader's commit, after the writer changed what it read")
	f.requireAbsent(t, marker, "a transaction that failed with not_committed must apply none of its writes")
}

// The helpers below build the read and write steps of conflict cases.

func getKey(name string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		mustGet(t, r, f.key(name))
	}
}

func snapshotGet(name string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		require.NotNil(t, mustGet(t, r.Snapshot(), f.key(name)), "the snapshot read must see the seeded key")
	}
}

func snapshotRange(begin, end string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		require.NotEmpty(t, mustRange(t, r.Snapshot(), f.rng(begin, end), kv.RangeOptions{}), "the snapshot range read must see the seeded keys")
	}
}

// rangeRead reads [begin, end) with the given limit and direction and
// requires the result to be want, so that each case checks the truncation it
// relies on.
func rangeRead(begin, end string, limit int, reverse bool, want ...string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		kvs := mustRange(t, r, f.rng(begin, end), kv.RangeOptions{Limit: limit, Reverse: reverse})
		f.requireNames(t, kvs, want, "the reader's range read (limit %d, reverse %v)", limit, reverse)
	}
}

// unconsumedRange calls GetRange on [begin, end) with limit and never
// consumes the result.
func unconsumedRange(begin, end string, limit int) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		require.NotNil(t, r.GetRange(f.rng(begin, end), kv.RangeOptions{Limit: limit}))
	}
}

// iterate reads [begin, end) with an iterator, stopping after n pairs (or
// at the end when n < 0), and requires the pairs seen to be want.
func iterate(begin, end string, n int, want ...string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		var got []kv.KeyValue
		it := r.GetRange(f.rng(begin, end), kv.RangeOptions{}).Iterator()
		for (n < 0 || len(got) < n) && it.Next() {
			got = append(got, it.KeyValue())
		}
		require.NoError(t, it.Err())
		f.requireNames(t, got, want, "the reader's iterator")
	}
}

func addReadConflictKey(name string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		require.NoError(t, r.AddReadConflictKey(f.key(name)), "AddReadConflictKey")
	}
}

func addReadConflictRange(begin, end string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, r kv.Transaction) {
		t.Helper()
		require.NoError(t, r.AddReadConflictRange(f.rng(begin, end)), "AddReadConflictRange")
	}
}

func setKeys(names ...string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, w kv.Transaction) {
		for _, n := range names {
			w.Set(f.key(n), []byte("writer"))
		}
	}
}

func clearKey(name string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, w kv.Transaction) { w.Clear(f.key(name)) }
}

func clearRange(begin, end string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, w kv.Transaction) { w.ClearRange(f.rng(begin, end)) }
}

func addKey(name string) func(*testing.T, *fixture, kv.Transaction) {
	return func(t *testing.T, f *fixture, w kv.Transaction) { w.Add(f.key(name), le(1, 8)) }
}

// testConflictErrorIsClassified: a conflict is not_committed (1020), which
// is retryable and never applied (fdb_error_predicate, bindings/c/fdb_c.cpp;
// flow/include/flow/error_definitions.h), and OnError resets the
// transaction to a new read version (Transaction::onError,
// fdbclient/NativeAPI.actor.cpp).
func testConflictErrorIsClassified(t *testing.T, f *fixture) {
	f.seed(t, "b")
	reader := f.newTx(t)
	mustGet(t, reader, f.key("b"))
	f.set(t, f.key("b"), []byte("changed"))
	reader.Set(f.key("c"), []byte("x"))
	err := reader.Commit()
	requireCode(t, err, kv.ErrNotCommitted, "commit after a conflicting write")
	require.False(t, kv.MaybeCommitted(err), "not_committed means the commit was certainly not applied: MaybeCommitted must be false")
	require.NoError(t, reader.OnError(err), "OnError must accept not_committed (it is retryable) and reset the transaction")
	require.Equal(t, []byte("changed"), mustGet(t, reader, f.key("b")), "after OnError the transaction must read at a new read version")
	reader.Set(f.key("c"), []byte("y"))
	commit(t, reader, "the retried transaction must commit")
	f.requireValue(t, f.key("c"), []byte("y"))
}

// testWriteWriteLaterCommitWins: blind writes add no read conflict, so
// overlapping ones both commit and the later commit version's value stays
// (ConflictSet checks reads only, fdbserver/SkipList.cpp).
func testWriteWriteLaterCommitWins(t *testing.T, f *fixture) {
	first := f.newTx(t)
	second := f.newTx(t)
	readVersion(t, first)
	readVersion(t, second)
	second.Set(f.key("k"), []byte("second"))
	first.Set(f.key("k"), []byte("first"))
	commit(t, second, "blind writes never conflict")
	commit(t, first, "blind writes never conflict, even when they overlap")
	f.requireValue(t, f.key("k"), []byte("first"), "with overlapping blind writes the transaction that committed last must win")
}

// testCommitBeforeReadVersionNoConflict: the read version is taken at the
// first read (lazily: Transaction::getReadVersion,
// fdbclient/include/fdbclient/NativeAPI.actor.h), and only writes
// committed after it conflict (fdbserver/Resolver.actor.cpp, SkipList.cpp).
func testCommitBeforeReadVersionNoConflict(t *testing.T, f *fixture) {
	f.seed(t, "b")
	reader := f.newTx(t)
	f.set(t, f.key("b"), []byte("earlier")) // commits before reader has a read version
	require.Equal(t, []byte("earlier"), mustGet(t, reader, f.key("b")), "the read version is obtained at the first read, after the other commit")
	reader.Set(f.key("c"), []byte("x"))
	commit(t, reader, "a write committed before the reader's read version must not conflict")
}

// testReadModifyWriteRaceOneLoses: of two read-modify-writes of one key at
// overlapping versions the second to commit fails with not_committed
// (ConflictSet, fdbserver/SkipList.cpp).
func testReadModifyWriteRaceOneLoses(t *testing.T, f *fixture) {
	f.set(t, f.key("n"), leInt64(10))
	a := f.newTx(t)
	b := f.newTx(t)
	na := decodeCounter(t, mustGet(t, a, f.key("n")))
	nb := decodeCounter(t, mustGet(t, b, f.key("n")))
	a.Set(f.key("n"), leInt64(na+1))
	b.Set(f.key("n"), leInt64(nb+1))
	commit(t, b, "the first of two read-modify-write transactions must commit")
	requireCode(t, a.Commit(), kv.ErrNotCommitted, "the second read-modify-write of the same key")
	require.Equal(t, int64(11), decodeCounter(t, f.get(t, f.key("n"))), "exactly one increment must have been applied (no lost update, no double apply)")
}
