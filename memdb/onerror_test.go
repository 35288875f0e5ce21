package memdb_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TestResetDuringOnErrorBackoff: a Reset while OnError waits out its
// backoff makes OnError fail with transaction_cancelled, and OnError does
// not reset the transaction again afterwards. FDB's RYWImpl::onError
// (fdbclient/ReadYourWrites.actor.cpp) waits on resetPromise ||
// tr.onError(e); resetRyow fails the old promise with
// transaction_cancelled, and onError's catch, finding the new promise
// unset, sets it to transaction_cancelled (API 610 and later): the
// transaction stays cancelled until the next Reset. (Under the
// multi-version client, MultiVersionTransaction::reset replaces the inner
// transaction instead, and the new one is not cancelled.) memdb's OnError
// slept its whole backoff, returned nil and reset the transaction after
// the caller's Reset, dropping what the caller had done since.
func TestResetDuringOnErrorBackoff(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	var wrote bool
	db.SetBackingOff(func() {
		tr.Reset()
		tr.Set([]byte("k"), []byte("after the reset"))
		wrote = true
	})
	tr.Set([]byte("k"), []byte("first attempt"))
	err := tr.OnError(kv.ErrNotCommitted)
	require.True(t, wrote, "OnError backed off")
	require.ErrorIs(t, err, kv.ErrTransactionCancelled, "OnError interrupted by a Reset")
	_, err = tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled, "the transaction stays cancelled until the next Reset")
	require.ErrorIs(t, tr.Commit(), kv.ErrTransactionCancelled)
	require.Nil(t, get(t, newTx(t, db), "k"), "nothing was committed")

	db.SetBackingOff(nil)
	tr.Reset()
	tr.Set([]byte("k"), []byte("v"))
	require.NoError(t, tr.Commit(), "the next Reset makes it usable")
	require.Equal(t, "v", string(get(t, newTx(t, db), "k")))
}
