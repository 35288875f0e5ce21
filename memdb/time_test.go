package memdb_test

import (
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestVersionsTrackTheClock(t *testing.T) {
	db, clk := newDB(t)
	commit := func() int64 {
		tr := newTx(t, db)
		tr.Set([]byte("k"), []byte("v"))
		require.NoError(t, tr.Commit())
		v, err := tr.GetCommittedVersion()
		require.NoError(t, err)
		return v
	}
	v1 := commit()
	v2 := commit()
	require.Equal(t, v1+1, v2, "at least one version per commit even when no time passes")
	clk.Advance(time.Second)
	v3 := commit()
	require.InDelta(t, 1_000_000, v3-v2, 2, "about a million versions per second")
	clk.Advance(1500 * time.Millisecond)
	v4 := commit()
	require.InDelta(t, 1_500_000, v4-v3, 2)
}

func TestTransactionTooOld(t *testing.T) {
	db, clk := newDB(t)
	mustSet(t, db, "k", "v")
	tr := newTx(t, db)
	get(t, tr, "k")
	clk.Advance(5 * time.Second)
	get(t, tr, "k") // exactly at the window: still fine
	clk.Advance(time.Millisecond)
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld, "reads more than 5s after the read version fail")
	require.True(t, kv.IsRetryable(err))
	_, err = tr.GetRange(rng("a", "z"), kv.RangeOptions{}).GetSlice()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld)
	tr.Set([]byte("k"), []byte("w"))
	require.ErrorIs(t, tr.Commit(), kv.ErrTransactionTooOld, "and so do commits (with the failed reads' error)")
	require.GreaterOrEqual(t, db.Stats().TooOld, int64(2))
	tr.Reset()
	mustSet(t, db, "x", "v")
	tr = newTx(t, db)
	get(t, tr, "k")
	clk.Advance(5*time.Second + time.Millisecond)
	tr.Set([]byte("k"), []byte("w"))
	require.ErrorIs(t, tr.Commit(), kv.ErrTransactionTooOld, "a commit past the window fails even with no read since")

	require.NoError(t, tr.OnError(kv.ErrTransactionTooOld), "too_old is retried")
	require.Equal(t, "v", string(get(t, tr, "k")), "after the reset the transaction has a fresh read version")
	tr.Set([]byte("k"), []byte("w"))
	require.NoError(t, tr.Commit())
}

func TestMVCCWindowOption(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(100*time.Millisecond))
	tr := newTx(t, db)
	get(t, tr, "k")
	clk.Advance(101 * time.Millisecond)
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld)
}

func TestTooOldByVersionDistanceWithFrozenClock(t *testing.T) {
	// With a clock that never moves, versions still advance one per commit;
	// a read version more than a window's worth of versions old is too old,
	// as on FDB, where the window is really 5,000,000 versions.
	db, _ := newDB(t, memdb.WithMVCCWindow(time.Millisecond)) // 1000 versions
	tr := newTx(t, db)
	get(t, tr, "k")
	for range 1001 {
		mustSet(t, db, "other", "v")
	}
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld)
}

func TestBlindWritesNeverTooOld(t *testing.T) {
	db, clk := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	clk.Advance(time.Minute)
	require.NoError(t, tr.Commit(), "a transaction that never read has no read version to expire")
}

// TestReadVersionAdvancesWhileIdle: with no commit, read versions still
// advance with time, as FoundationDB's do (its commit proxies commit an
// empty batch at least every 2 s, MAX_COMMIT_BATCH_INTERVAL), so that the
// distance between a read version and an item's commit version tells its
// age. Commits after it get later versions.
func TestReadVersionAdvancesWhileIdle(t *testing.T) {
	db, clk := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	require.NoError(t, tr.Commit())
	committed, err := tr.GetCommittedVersion()
	require.NoError(t, err)

	clk.Advance(time.Second)
	rv, err := newTx(t, db).GetReadVersion().Get()
	require.NoError(t, err)
	require.Equal(t, committed, rv, "within the 2-second batch interval the read version may stay")

	clk.Advance(4 * time.Second)
	old := newTx(t, db)
	rv, err = old.GetReadVersion().Get()
	require.NoError(t, err)
	require.GreaterOrEqual(t, rv-committed, int64(4_000_000), "5 s idle: about a million versions a second")
	require.Equal(t, "v", string(get(t, old, "k")), "a read at the advanced version sees the last commit")

	tr = newTx(t, db)
	tr.Set([]byte("k"), []byte("w"))
	require.NoError(t, tr.Commit())
	next, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	require.Greater(t, next, rv, "a commit after the advance")
}
