package memdb_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// The fast paths of the read path without a latency model: the metadata
// version's Get (getMetadataVersionNow) and GetRange's bounds checks.

func bumpMV(t *testing.T, db *memdb.DB) {
	t.Helper()
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		kv.BumpMetadataVersion(tr)
		return nil
	}))
}

func readMV(t *testing.T, rt kv.ReadTransaction) []byte {
	t.Helper()
	v, err := rt.Get([]byte(kv.MetadataVersionKey)).Get()
	require.NoError(t, err)
	return v
}

func TestMetadataVersionGetTooOldAndClosed(t *testing.T) {
	db, clk := newDB(t)
	tr := newTx(t, db)
	readMV(t, tr) // obtains the read version
	clk.Advance(5*time.Second + time.Millisecond)
	before := db.Stats().TooOld
	_, err := tr.Get([]byte(kv.MetadataVersionKey)).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld, "a later read of the key checks the window")
	require.Equal(t, before+1, db.Stats().TooOld)

	tr = newTx(t, db)
	readMV(t, tr)
	require.NoError(t, db.Close())
	_, err = tr.Get([]byte(kv.MetadataVersionKey)).Get()
	require.ErrorIs(t, err, memdb.ErrClosed)
}

func TestMetadataVersionGetValueIsACopy(t *testing.T) {
	db, _ := newDB(t)
	bumpMV(t, db)
	tr := newTx(t, db)
	v := readMV(t, tr)
	require.Len(t, v, 10)
	want := bytes.Clone(v)
	for i := range v {
		v[i] = 0xee
	}
	require.Equal(t, want, readMV(t, tr), "the caller's copy is its own")
	require.Equal(t, want, readMV(t, newTx(t, db)), "and so is the history's")
}

func TestMetadataVersionGetConflictsWithWritesPresent(t *testing.T) {
	db, _ := newDB(t)
	for _, snap := range []bool{false, true} {
		err := commitAfter(t, db, func(tr kv.Transaction) {
			// Writes before the read take addReadConflictLocked's walk.
			tr.Set([]byte("a"), []byte("1"))
			tr.Set([]byte("\xfe"), []byte("1"))
			var rt kv.ReadTransaction = tr
			if snap {
				rt = tr.Snapshot()
			}
			readMV(t, rt)
			readMV(t, rt) // a second read, not fresh
		}, func(w kv.Transaction) { kv.BumpMetadataVersion(w) })
		if snap {
			require.NoError(t, err, "a snapshot read adds no conflict range")
		} else {
			require.ErrorIs(t, err, kv.ErrNotCommitted, "a normal read conflicts with a later bump")
		}
	}
	// The conflict key must stay intact across transactions: a bump
	// conflicts with a read of the key, not with one of another key.
	err := commitAfter(t, db, func(tr kv.Transaction) { readMV(t, tr) }, setKey("\xfe"))
	require.NoError(t, err)
}

func TestMetadataVersionGetAfterOwnBump(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("a"), []byte("1"))
	kv.BumpMetadataVersion(tr)
	_, err := tr.Get([]byte(kv.MetadataVersionKey)).Get()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable)
	_, err = tr.Snapshot().Get([]byte(kv.MetadataVersionKey)).Get()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable)
}

func TestGetRangeBoundsEdgeCases(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	tr := newTx(t, db)
	for _, r := range []kv.KeyRange{
		{Begin: []byte("\xff\x00"), End: []byte("a")}, // illegal and inverted
		{Begin: []byte("a"), End: []byte("\xff\xff")},
		{Begin: []byte("\xff\x00"), End: []byte("\xff")},
	} {
		for _, limit := range []int{0, 1, -1} {
			_, err := tr.GetRange(r, kv.RangeOptions{Limit: limit}).GetSlice()
			require.ErrorIs(t, err, kv.ErrKeyOutsideLegalRange, "%q limit %d: the legal range is tested first", r, limit)
		}
	}
	kvs, err := tr.GetRange(kv.KeyRange{Begin: []byte("\xff"), End: []byte("\xff")}, kv.RangeOptions{}).GetSlice()
	require.NoError(t, err, "\\xff itself is a legal bound")
	require.Empty(t, kvs)
	kvs, err = tr.GetRange(kv.KeyRange{Begin: []byte(""), End: []byte("\xff")}, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, keys(kvs))
	_, err = tr.GetRange(rng("b", "a"), kv.RangeOptions{Limit: -1}).GetSlice()
	require.ErrorIs(t, err, kv.ErrRangeLimitsInvalid, "a negative limit fails an inverted range too (RYW getRange checks the limits before the bounds' order)")

	// Bounds longer than any key are clamped: a begin past every key of
	// its prefix finds nothing, an end that long still includes them.
	long := append([]byte("a"), bytes.Repeat([]byte{0xff}, kv.MaxKeySize+10)...)
	kvs, err = tr.GetRange(kv.KeyRange{Begin: long, End: []byte("b")}, kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Empty(t, kvs)
	kvs, err = tr.GetRange(kv.KeyRange{Begin: []byte(""), End: long}, kv.RangeOptions{Reverse: true, Limit: 1}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, keys(kvs))
}

func TestInvertedRangeReadAddsNoConflict(t *testing.T) {
	db, _ := newDB(t)
	for _, limit := range []int{0, 1} {
		err := commitAfter(t, db, func(tr kv.Transaction) {
			kvs, err := tr.GetRange(rng("m", "c"), kv.RangeOptions{Limit: limit}).GetSlice()
			require.NoError(t, err)
			require.Empty(t, kvs)
			it := tr.GetRange(rng("m", "c"), kv.RangeOptions{Limit: limit}).Iterator()
			require.False(t, it.Next())
			require.NoError(t, it.Err())
		}, setKey("d"))
		require.NoError(t, err, "an inverted range reads nothing and depends on nothing")
	}
}

// The first batch of a limit-1 read (readFirstNow's one-row case).

func TestOneRowReadTooOldAndClosed(t *testing.T) {
	db, clk := newDB(t)
	mustSet(t, db, "q1", "v")
	for _, reverse := range []bool{false, true} {
		tr := newTx(t, db)
		get(t, tr, "k")
		clk.Advance(5*time.Second + time.Millisecond)
		before := db.Stats().TooOld
		_, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: reverse}).GetSlice()
		require.ErrorIs(t, err, kv.ErrTransactionTooOld)
		require.Equal(t, before+1, db.Stats().TooOld)
	}
	tr := newTx(t, db)
	get(t, tr, "k")
	require.NoError(t, db.Close())
	_, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1}).GetSlice()
	require.ErrorIs(t, err, memdb.ErrClosed)
}

func TestOneRowReadConflictsWithLongKeys(t *testing.T) {
	// Keys too long for the result's inline room: the conflict key goes
	// to the transaction's arena.
	long := func(c byte) string { return "q" + string(bytes.Repeat([]byte{c}, 300)) }
	check := func(reverse bool, write string) error {
		db, _ := newDB(t) // each check on its own DB: commitAfter writes
		mustSet(t, db, long('b'), "v")
		mustSet(t, db, long('d'), "v")
		want := long('b')
		if reverse {
			want = long('d')
		}
		return commitAfter(t, db, func(tr kv.Transaction) {
			kvs, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: reverse}).GetSlice()
			require.NoError(t, err)
			require.Equal(t, []string{want}, keys(kvs))
			kvs[0].Key[1] = 'a' // the caller's copy; the conflict key is not it
		}, setKey(write))
	}
	require.ErrorIs(t, check(false, long('b')), kv.ErrNotCommitted)
	require.ErrorIs(t, check(false, "q"), kv.ErrNotCommitted)
	require.NoError(t, check(false, long('b')+"\x01"))
	require.NoError(t, check(false, long('c')))
	require.ErrorIs(t, check(true, long('d')), kv.ErrNotCommitted)
	require.ErrorIs(t, check(true, long('e')), kv.ErrNotCommitted)
	require.NoError(t, check(true, long('c')))
	require.NoError(t, check(true, "r"))
}

func TestOneRowReadOfNothingConflictsOnTheRange(t *testing.T) {
	check := func(reverse, snap bool, write string) error {
		db, _ := newDB(t)
		mustSet(t, db, "p", "v")
		mustSet(t, db, "s", "v")
		return commitAfter(t, db, func(tr kv.Transaction) {
			var rt kv.ReadTransaction = tr
			if snap {
				rt = tr.Snapshot()
			}
			kvs, err := rt.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: reverse}).GetSlice()
			require.NoError(t, err)
			require.Empty(t, kvs)
		}, setKey(write))
	}
	for _, reverse := range []bool{false, true} {
		require.ErrorIs(t, check(reverse, false, "q5"), kv.ErrNotCommitted)
		require.ErrorIs(t, check(reverse, false, "q"), kv.ErrNotCommitted)
		require.NoError(t, check(reverse, false, "r"))
		require.NoError(t, check(reverse, true, "q5"), "a snapshot read adds no conflict range")
	}
}

func TestOneRowReadSeesOwnWritesAndClears(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "q2", "v")
	mustSet(t, db, "q4", "v")
	tr := newTx(t, db)
	tr.Set([]byte("q3"), []byte("mine"))
	kvs, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"q4"}, keys(kvs))
	tr = newTx(t, db)
	tr.ClearRange(rng("q", "q3"))
	kvs, err = tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"q4"}, keys(kvs), "a cleared key is not read")
	tr = newTx(t, db)
	tr.Clear([]byte("q4"))
	kvs, err = tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"q2"}, keys(kvs), "nor is one it cleared by key")
}

// TestFastReadsCheckTheTransactionState reads the metadata version and one
// row (checkReadLocked's quick answer) after a commit, a cancellation and
// the DB's close, and with a sticky error.
func TestFastReadsCheckTheTransactionState(t *testing.T) {
	reads := map[string]func(kv.Transaction) error{
		"metadata version": func(tr kv.Transaction) error {
			_, err := tr.Get([]byte(kv.MetadataVersionKey)).Get()
			return err
		},
		"one row": func(tr kv.Transaction) error {
			_, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1}).GetSlice()
			return err
		},
	}
	for name, read := range reads {
		db, _ := newDB(t)
		mustSet(t, db, "q1", "v")

		tr := newTx(t, db)
		tr.Set([]byte("k"), []byte("v"))
		require.NoError(t, tr.Commit())
		require.ErrorIs(t, read(tr), kv.ErrUsedDuringCommit, name)

		tr = newTx(t, db)
		tr.Cancel()
		require.ErrorIs(t, read(tr), kv.ErrTransactionCancelled, name)

		tr = newTx(t, db)
		tr.Set([]byte("\xff\x01"), []byte("v")) // a sticky key_outside_legal_range
		require.ErrorIs(t, read(tr), kv.ErrKeyOutsideLegalRange, name)

		tr = newTx(t, db)
		require.NoError(t, read(tr))
		require.NoError(t, db.Close())
		require.ErrorIs(t, read(tr), memdb.ErrClosed, name)
	}
}
