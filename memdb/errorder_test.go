package memdb_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// When a transaction has more than one reason to fail an operation, it
// reports them in FoundationDB's order: an invalid write's deferred error
// (ThreadSafeTransaction checks checkDeferredError before calling into the
// transaction), then used_during_commit once a commit started, cancelled
// or not (checkUsedDuringCommit), then the cancellation (resetPromise):
// ReadYourWritesTransaction::get and the other operations,
// fdbclient/ReadYourWrites.actor.cpp. memdb checked the cancellation first
// and the deferred error last.
func TestErrorOrderOfATransactionWithTwoErrors(t *testing.T) {
	db, _ := newDB(t)
	t.Run("invalid write, then Cancel", func(t *testing.T) {
		tr := newTx(t, db)
		tr.Set(bytes.Repeat([]byte("k"), kv.MaxKeySize+1), []byte("v"))
		tr.Cancel()
		_, err := tr.Get([]byte("a")).Get()
		require.ErrorIs(t, err, kv.ErrKeyTooLarge)
		require.ErrorIs(t, tr.Commit(), kv.ErrKeyTooLarge)
	})
	t.Run("committed, then Cancel", func(t *testing.T) {
		tr := newTx(t, db)
		tr.Set([]byte("a"), []byte("1"))
		require.NoError(t, tr.Commit())
		tr.Cancel()
		_, err := tr.Get([]byte("a")).Get()
		require.ErrorIs(t, err, kv.ErrUsedDuringCommit)
	})
}
