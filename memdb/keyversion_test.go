package memdb_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// Point writes of stored keys are recorded on the key's store entry, not in
// the resolver's history. These tests pin down the cases where that
// record could be missed or lost.

func TestPointWritesKeepNoResolverHistory(t *testing.T) {
	db, _ := newDB(t)
	for i := range 100 {
		mustSet(t, db, "k", string(rune('a'+i%26)))
	}
	require.Equal(t, int64(0), db.Stats().ConflictHistory, "writes of stored keys live on their entries")
	require.ErrorIs(t, commitAfter(t, db, readKey(t, "k"), setKey("k")), kv.ErrNotCommitted)
}

func readKey(t *testing.T, k string) func(kv.Transaction) {
	return func(tr kv.Transaction) {
		_, err := tr.Get([]byte(k)).Get()
		require.NoError(t, err)
	}
}

func clearKey(k string) func(kv.Transaction) {
	return func(tr kv.Transaction) { tr.Clear([]byte(k)) }
}

func TestPointReadConflictsWithEveryKindOfPointWrite(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "live", "v")
	mustSet(t, db, "dead", "v")
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Clear([]byte("dead")) // a tombstone entry
		return nil
	}))
	cases := []struct {
		name  string
		key   string
		write func(kv.Transaction)
	}{
		{"set of a stored key", "live", setKey("live")},
		{"set of a new key", "new1", setKey("new1")},
		{"clear of a stored key", "live", clearKey("live")},
		{"clear of a missing key", "never", clearKey("never")},
		{"clear of a tombstone", "dead", clearKey("dead")},
		{"atomic add", "live", func(tr kv.Transaction) { tr.Add([]byte("live"), le64(1)) }},
		{"atomic add to a missing key", "new2", func(tr kv.Transaction) { tr.Add([]byte("new2"), le64(1)) }},
		{"compare and clear", "live", func(tr kv.Transaction) { tr.CompareAndClear([]byte("live"), []byte("nope")) }},
		{"versionstamped value", "live", func(tr kv.Transaction) {
			tr.SetVersionstampedValue([]byte("live"), append(make([]byte, 10), 0, 0, 0, 0))
		}},
		{"explicit write conflict key", "live", func(tr kv.Transaction) { _ = tr.AddWriteConflictKey([]byte("live")) }},
		{"clear range", "live", func(tr kv.Transaction) { tr.ClearRange(rng("live", "live\x00")) }},
	}
	for _, c := range cases {
		require.ErrorIs(t, commitAfter(t, db, readKey(t, c.key), c.write), kv.ErrNotCommitted, c.name)
		require.NoError(t, commitAfter(t, db, readKey(t, c.key+"x"), c.write), "%s: another key does not conflict", c.name)
	}
}

func TestVersionstampedKeyConflictsWithPointRead(t *testing.T) {
	db, _ := newDB(t)
	// The stamped key is "vs" + 10 stamp bytes; a reader of the range sees it.
	readRange := func(tr kv.Transaction) {
		_, err := tr.GetRange(rng("vs", "vt"), kv.RangeOptions{}).GetSlice()
		require.NoError(t, err)
	}
	stampKey := func(tr kv.Transaction) {
		tr.SetVersionstampedKey(append([]byte("vs"), append(make([]byte, 10), 2, 0, 0, 0)...), []byte("x"))
	}
	require.ErrorIs(t, commitAfter(t, db, readRange, stampKey), kv.ErrNotCommitted)
}

func TestRangeReadConflictsWithStoredKeyWrites(t *testing.T) {
	db, _ := newDB(t)
	for _, k := range []string{"r1", "r3", "r5"} {
		mustSet(t, db, k, "v")
	}
	whole := func(tr kv.Transaction) {
		_, err := tr.GetRange(rng("r", "s"), kv.RangeOptions{}).GetSlice()
		require.NoError(t, err)
	}
	explicit := func(tr kv.Transaction) { require.NoError(t, tr.AddReadConflictRange(rng("r2", "r4"))) }
	require.ErrorIs(t, commitAfter(t, db, whole, setKey("r3")), kv.ErrNotCommitted, "an existing key in the range")
	require.ErrorIs(t, commitAfter(t, db, whole, setKey("r4")), kv.ErrNotCommitted, "a new key in the range")
	require.ErrorIs(t, commitAfter(t, db, whole, clearKey("r5")), kv.ErrNotCommitted, "a cleared key in the range")
	require.ErrorIs(t, commitAfter(t, db, whole, clearKey("r7")), kv.ErrNotCommitted, "a missing key cleared in the range")
	require.NoError(t, commitAfter(t, db, whole, setKey("s")), "a key at the range's end")
	require.NoError(t, commitAfter(t, db, whole, setKey("q")), "a key before the range")
	require.ErrorIs(t, commitAfter(t, db, explicit, setKey("r3")), kv.ErrNotCommitted)
	require.NoError(t, commitAfter(t, db, explicit, setKey("r4")), "r4 is the explicit range's end")
	require.NoError(t, commitAfter(t, db, explicit, setKey("r1")))
}

// TestKeyWriteVersionSurvivesGC: a key whose newest entry is an old
// tombstone is removed by garbage collection, but not while a write of it
// (here a second Clear, which adds no entry) is recent enough to conflict
// with a transaction still allowed to commit.
func TestKeyWriteVersionSurvivesGC(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	mustSet(t, db, "k", "v")
	pin := newTx(t, db) // a reader that keeps the tombstone until it is out of the window
	require.Equal(t, "v", string(get(t, pin, "k")))
	require.NoError(t, db.Transact(t.Context(), clearTx("k"))) // tombstone, due for GC after a window
	clk.Advance(500 * time.Millisecond)
	mustSet(t, db, "other", "x")

	reader := newTx(t, db)
	require.Nil(t, get(t, reader, "k"))

	clk.Advance(600 * time.Millisecond)
	// The tombstone is now past the horizon, so this commit's collection
	// would remove k's entry if it ignored the write it has just recorded.
	require.NoError(t, db.Transact(t.Context(), clearTx("k")))
	require.Equal(t, int64(0), db.Stats().ConflictHistory)

	reader.Set([]byte("unrelated"), []byte("x"))
	require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "the second clear of k conflicts with the read of k")

	// Once no transaction can conflict with it, the entry goes away.
	clk.Advance(2 * time.Second)
	mustSet(t, db, "other", "y")
	mustSet(t, db, "other", "z")
	st := db.Stats()
	require.Equal(t, int64(1), st.Keys)
	require.Equal(t, int64(1), st.Versions, "k's entries are collected; no reader needs other's x or y")
}

func clearTx(k string) func(kv.Transaction) error {
	return func(tr kv.Transaction) error {
		tr.Clear([]byte(k))
		return nil
	}
}

// TestResolverHistoryGCKeepsRecentRanges: range writes stay in the resolver,
// whose collection must keep those a live transaction can still conflict
// with, while point writes of stored keys never reach it.
func TestResolverHistoryGCKeepsRecentRanges(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	for i := range 3000 {
		require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
			tr.ClearRange(kv.KeyRange{Begin: be("c/", 2*i), End: be("c/", 2*i+1)})
			tr.Set([]byte("point"), []byte("x"))
			return nil
		}))
		clk.Advance(time.Millisecond)
	}
	st := db.Stats()
	require.Less(t, st.ConflictHistory, int64(2*2000+1024+16), "old range history is collected")
	require.ErrorIs(t, commitAfter(t, db, func(tr kv.Transaction) {
		require.NoError(t, tr.AddReadConflictRange(kv.KeyRange{Begin: []byte("a"), End: []byte("b")}))
	}, func(tr kv.Transaction) { tr.ClearRange(rng("a0", "a1")) }), kv.ErrNotCommitted)
	require.ErrorIs(t, commitAfter(t, db, readKey(t, "point"), setKey("point")), kv.ErrNotCommitted)
}

func be(prefix string, i int) []byte {
	return binary.BigEndian.AppendUint64([]byte(prefix), uint64(i))
}

// TestWriteAfterReadOfCollectedKey: a transaction reads a key whose
// tombstone is then garbage collected (its entry removed from the store)
// before the transaction writes the key and commits: the commit must not
// write to the removed entry (the read's hint) but store the key anew.
func TestWriteAfterReadOfCollectedKey(t *testing.T) {
	db, clk, _ := tombstoneAboutToGo(t)

	tr := newTx(t, db)
	require.Nil(t, get(t, tr, "k"))
	before := db.Stats().Versions

	clk.Advance(600 * time.Millisecond)
	mustSet(t, db, "other", "y") // collects k's entry
	require.Less(t, db.Stats().Versions, before+1, "k's value and tombstone were collected")

	tr.Set([]byte("k"), []byte("new"))
	require.NoError(t, tr.Commit())
	v, ok := mustGet(t, db, "k")
	require.True(t, ok)
	require.Equal(t, "new", v)
	require.Equal(t, int64(2), db.Stats().Keys)

	// And the new entry carries the write's version for conflicts.
	require.ErrorIs(t, commitAfter(t, db, readKey(t, "k"), setKey("k")), kv.ErrNotCommitted)
}
