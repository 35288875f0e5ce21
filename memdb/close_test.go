package memdb_test

import (
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestClose(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "v")
	tr := newTx(t, db)
	get(t, tr, "k")
	require.NoError(t, db.Close())
	require.NoError(t, db.Close(), "Close is idempotent")

	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, memdb.ErrClosed)
	require.ErrorIs(t, tr.Commit(), memdb.ErrClosed)
	require.ErrorIs(t, tr.OnError(kv.ErrNotCommitted), memdb.ErrClosed, "a closed DB is not retried")
	_, err = db.CreateTransaction(t.Context())
	require.ErrorIs(t, err, memdb.ErrClosed)
	err = db.Transact(t.Context(), func(kv.Transaction) error { return nil })
	require.ErrorIs(t, err, memdb.ErrClosed)
	require.False(t, kv.IsRetryable(err))
}

func TestStatsCountTransactionsAndCommits(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	mustSet(t, db, "b", "2")
	mustGet(t, db, "a")
	st := db.Stats()
	require.Equal(t, int64(3), st.Transactions)
	require.Equal(t, int64(2), st.Commits)
	require.Equal(t, int64(2), st.Keys)
	require.Equal(t, int64(1), st.Reads)
	require.Equal(t, int64(2), st.Versions)
	require.Greater(t, st.Version, int64(0))
}
