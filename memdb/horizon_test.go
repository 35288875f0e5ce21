package memdb_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// Garbage collection at the horizon's boundary: a transaction whose read
// version is the horizon itself still reads its snapshot and still
// conflicts with writes at the next version.

// TestGCKeepsAKeyClearedJustAfterTheHorizon: k's chain is due for
// collection at v2 (its second version) and is cleared at v3 while the
// oldest reader has read version v2. The collection that runs at v3 must
// keep the chain (written after the horizon): the reader still sees k's
// value, and its commit conflicts with the clear.
func TestGCKeepsAKeyClearedJustAfterTheHorizon(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "1")
	pin := newTx(t, db) // holds the horizon below k's second version
	get(t, pin, "k")
	mustSet(t, db, "k", "2")
	reader := newTx(t, db)
	require.Equal(t, "2", string(get(t, reader, "k")))
	pin.Reset() // the reader is now the oldest: the next commit's horizon is its read version
	require.NoError(t, db.Transact(t.Context(), clearTx("k")))

	require.Equal(t, "2", string(get(t, reader, "k")), "the reader's snapshot after the collection")
	reader.Set([]byte("unrelated"), []byte("x"))
	require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "k was cleared after the reader read it")
}

// TestResolverGCKeepsAWriteJustAfterTheHorizon: a commit at rv+1 clears a
// missing key that a transaction at rv read, and enough other missing
// ranges to make the resolver collect its history at once, while that
// transaction holds the horizon at rv. The write at rv+1 must survive the
// collection: the reader's commit conflicts.
func TestResolverGCKeepsAWriteJustAfterTheHorizon(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "z", "z") // (the clock stands still: later commits take the next versions)
	reader := newTx(t, db)
	require.Nil(t, get(t, reader, "a1"))
	rv, err := reader.GetReadVersion().Get()
	require.NoError(t, err)
	w := newTx(t, db)
	w.Clear([]byte("a1"))
	for i := range 1100 { // 2 resolver points each: past the first collection's threshold
		w.ClearRange(rng(fmt.Sprintf("x%05d", i), fmt.Sprintf("x%05d\x00", i)))
	}
	require.NoError(t, w.Commit())
	v, err := w.GetCommittedVersion()
	require.NoError(t, err)
	require.Equal(t, rv+1, v, "the clear is at the version just after the reader's")
	reader.Set([]byte("unrelated"), []byte("x"))
	require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "a1 was written after the reader read it")
}

// TestReadOnlyWatchCommitAfterTheWindowFires: a read-only transaction
// commits its watch after its read version left the MVCC window, and after
// the key it watched changed and was collected. The value the watch read
// is gone from the store, so the watch cannot be compared with it: it must
// fire (a spurious fire is allowed; a missed change is not).
func TestReadOnlyWatchCommitAfterTheWindowFires(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	mustSet(t, db, "k", "1")
	tr := newTx(t, db)
	require.Equal(t, "1", string(get(t, tr, "k")))
	w := tr.Watch([]byte("k"))
	mustSet(t, db, "k", "2")
	require.NoError(t, db.Transact(t.Context(), clearTx("k")))
	clk.Advance(2 * time.Second)
	mustSet(t, db, "other", "x") // collects k
	require.NoError(t, tr.Commit(), "a read-only commit sends nothing")
	done, err := fired(w)
	require.True(t, done, "k changed from the value the watch read (1) to missing")
	require.NoError(t, err)
}
