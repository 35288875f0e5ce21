package memdb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TestInterruptedCommitLandsLate: with HoldNextCommitLate, a commit whose
// transaction is cancelled while it is in flight returns at once (maybe
// committed) and lands when released, after transactions that began once
// its client gave up, as FoundationDB's commit request does
// (RYWImpl::commit returns once resetPromise is set; the request goes on).
// It is resolved then: a write to what it read in between makes it
// conflict.
func TestInterruptedCommitLandsLate(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		db, _ := newDB(t)
		mustSet(t, db, "a", "1")
		tr := newTx(t, db)
		require.Equal(t, "1", string(get(t, tr, "a")))
		tr.Set([]byte("k"), []byte("late"))
		held, release := db.HoldNextCommitLate()
		done := make(chan error, 1)
		go func() { done <- tr.Commit() }()
		<-held
		tr.Cancel()
		err := <-done
		require.ErrorIs(t, err, kv.ErrTransactionCancelled)
		require.True(t, kv.MaybeCommitted(err), "the commit was in flight")
		require.Nil(t, get(t, newTx(t, db), "k"), "not landed yet")
		if conflict {
			mustSet(t, db, "a", "2")
		}
		release()
		got := get(t, newTx(t, db), "k")
		if conflict {
			require.Nil(t, got, "resolved when it lands: a's write after its read version conflicts")
		} else {
			require.Equal(t, "late", string(got), "landed at release")
		}
	}
}
