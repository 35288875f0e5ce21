package memdb_test

import (
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// commitAfter runs read in a transaction, then commits write in another
// transaction, then commits the first (which also writes an unrelated key)
// and returns its commit error.
func commitAfter(t *testing.T, db *memdb.DB, read func(kv.Transaction), write func(kv.Transaction)) error {
	t.Helper()
	tr := newTx(t, db)
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err)
	read(tr)
	require.NoError(t, db.Transact(t.Context(), func(w kv.Transaction) error {
		write(w)
		return nil
	}))
	tr.Set([]byte("zz-unrelated"), []byte("x"))
	return tr.Commit()
}

func setKey(k string) func(kv.Transaction) {
	return func(tr kv.Transaction) { tr.Set([]byte(k), []byte("w")) }
}

func TestLimitedRangeReadConflictsOnlyUpToLastKey(t *testing.T) {
	db, _ := newDB(t)
	for _, k := range []string{"q1", "q2", "q3"} {
		mustSet(t, db, k, "v")
	}
	firstOne := func(tr kv.Transaction) {
		kvs, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1}).GetSlice()
		require.NoError(t, err)
		require.Equal(t, []string{"q1"}, keys(kvs))
	}
	require.NoError(t, commitAfter(t, db, firstOne, setKey("q9")),
		"a forward read limited to its first key must not conflict with a write at the tail")
	require.ErrorIs(t, commitAfter(t, db, firstOne, setKey("q1")), kv.ErrNotCommitted)
	require.NoError(t, commitAfter(t, db, firstOne, setKey("q1\x01")), "the conflict range ends right after the last key")
	require.ErrorIs(t, commitAfter(t, db, firstOne, func(tr kv.Transaction) { tr.Clear([]byte("q0")) }), kv.ErrNotCommitted,
		"the conflict range starts at the range's begin")

	lastOne := func(tr kv.Transaction) {
		kvs, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
		require.NoError(t, err)
		require.Equal(t, []string{"q9"}, keys(kvs))
	}
	require.NoError(t, commitAfter(t, db, lastOne, setKey("q1")), "a reverse limited read conflicts only from its last key")
	require.ErrorIs(t, commitAfter(t, db, lastOne, setKey("q95")), kv.ErrNotCommitted)

	whole := func(tr kv.Transaction) {
		_, err := tr.GetRange(rng("q", "r"), kv.RangeOptions{Limit: 100}).GetSlice()
		require.NoError(t, err)
	}
	require.ErrorIs(t, commitAfter(t, db, whole, setKey("qz")), kv.ErrNotCommitted,
		"a read that did not reach its limit depends on the whole range")
}

func TestReadsOfOwnWritesAddNoConflict(t *testing.T) {
	db, _ := newDB(t)
	ownPoint := func(tr kv.Transaction) {
		tr.Set([]byte("k"), []byte("mine"))
		get(t, tr, "k")
	}
	require.NoError(t, commitAfter(t, db, ownPoint, setKey("k")), "reading a key the transaction wrote depends on nothing")

	ownRange := func(tr kv.Transaction) {
		tr.ClearRange(rng("c", "d"))
		tr.Set([]byte("e1"), []byte("x"))
		_, err := tr.GetRange(rng("c", "f"), kv.RangeOptions{}).GetSlice()
		require.NoError(t, err)
	}
	require.NoError(t, commitAfter(t, db, ownRange, setKey("c5")), "a cleared part of a range read adds no conflict")
	require.NoError(t, commitAfter(t, db, ownRange, setKey("e1")), "a written key inside a range read adds no conflict")
	require.ErrorIs(t, commitAfter(t, db, ownRange, setKey("e2")), kv.ErrNotCommitted,
		"the parts not written still conflict")

	atomicThenRead := func(tr kv.Transaction) {
		tr.Add([]byte("n"), le64(1))
		get(t, tr, "n")
	}
	require.ErrorIs(t, commitAfter(t, db, atomicThenRead, setKey("n")), kv.ErrNotCommitted,
		"reading an atomic op's result depends on the database value")
}

func TestAddReadConflictRangeSkipsWrittenKeys(t *testing.T) {
	db, _ := newDB(t)
	explicit := func(tr kv.Transaction) {
		tr.Set([]byte("m2"), []byte("x"))
		require.NoError(t, tr.AddReadConflictRange(rng("m", "n")))
	}
	require.NoError(t, commitAfter(t, db, explicit, setKey("m2")))
	require.ErrorIs(t, commitAfter(t, db, explicit, setKey("m3")), kv.ErrNotCommitted)
	key := func(tr kv.Transaction) { require.NoError(t, tr.AddReadConflictKey([]byte("p"))) }
	require.ErrorIs(t, commitAfter(t, db, key, setKey("p")), kv.ErrNotCommitted)
	require.NoError(t, commitAfter(t, db, key, setKey("p\x00")))
}

func TestEveryWriteAddsWriteConflicts(t *testing.T) {
	db, _ := newDB(t)
	readK := func(tr kv.Transaction) { get(t, tr, "k") }
	for name, w := range map[string]func(kv.Transaction){
		"Set":                   setKey("k"),
		"Clear":                 func(tr kv.Transaction) { tr.Clear([]byte("k")) },
		"ClearRange":            func(tr kv.Transaction) { tr.ClearRange(rng("j", "l")) },
		"Add":                   func(tr kv.Transaction) { tr.Add([]byte("k"), le64(1)) },
		"Max":                   func(tr kv.Transaction) { tr.Max([]byte("k"), le64(1)) },
		"CompareAndClear":       func(tr kv.Transaction) { tr.CompareAndClear([]byte("k"), []byte("nomatch")) },
		"AddWriteConflictKey":   func(tr kv.Transaction) { require.NoError(t, tr.AddWriteConflictKey([]byte("k"))) },
		"AddWriteConflictRange": func(tr kv.Transaction) { require.NoError(t, tr.AddWriteConflictRange(rng("a", "z"))) },
		"SetVersionstampedValue": func(tr kv.Transaction) {
			tr.SetVersionstampedValue([]byte("k"), append(make([]byte, 10), 0, 0, 0, 0))
		},
	} {
		require.ErrorIs(t, commitAfter(t, db, readK, w), kv.ErrNotCommitted, "%s must add a write conflict", name)
	}
	require.NoError(t, commitAfter(t, db, readK, func(tr kv.Transaction) { tr.Clear([]byte("k\x00")) }),
		"a write next to the key does not conflict")
}

func TestAtomicOpsAddNoReadConflict(t *testing.T) {
	db, _ := newDB(t)
	atomic := func(tr kv.Transaction) {
		tr.Add([]byte("n"), le64(1))
		tr.Max([]byte("m"), le64(1))
		tr.ByteMin([]byte("b"), []byte("x"))
		tr.AppendIfFits([]byte("ap"), []byte("x"))
		tr.CompareAndClear([]byte("c"), []byte("x"))
	}
	both := func(tr kv.Transaction) {
		for _, k := range []string{"n", "m", "b", "ap", "c"} {
			tr.Set([]byte(k), le64(3))
		}
	}
	require.NoError(t, commitAfter(t, db, atomic, both), "atomic operations read nothing")
}
