package memdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A read still in flight when its transaction is reset, by Reset or by
// OnError's retry, fails with transaction_cancelled (1025), a point read
// as a range read: FoundationDB's reads wait on the transaction's
// resetPromise beside the read itself (readWithConflictRangeRYW and its
// siblings in fdbclient/ReadYourWrites.actor.cpp), and resetRyow sends
// transaction_cancelled to it. A point read returned the value it read at
// the read version of before the reset instead, which the transaction no
// longer holds.
func TestReadInFlightFailsWhenItsTransactionIsReset(t *testing.T) {
	const delay = 50 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}))
	mustSet(t, db, "k", "old")
	for _, c := range []struct {
		name  string
		reset func(tr kv.Transaction)
	}{
		{"Reset", func(tr kv.Transaction) { tr.Reset() }},
		{"OnError", func(tr kv.Transaction) { require.NoError(t, tr.OnError(kv.ErrNotCommitted)) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr, err := db.CreateTransaction(context.Background())
			require.NoError(t, err)
			defer tr.Cancel()
			// The read version first: the reads are then past it, in
			// their own delay, when the reset comes.
			_, err = tr.GetReadVersion().Get()
			require.NoError(t, err)
			point := tr.Get([]byte("k"))
			snapPoint := tr.Snapshot().Get([]byte("k"))
			rng := tr.GetRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}, kv.RangeOptions{})
			c.reset(tr)
			v, err := point.Get()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a point read in flight at the reset (got %q)", v)
			v, err = snapPoint.Get()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a snapshot point read in flight at the reset (got %q)", v)
			_, err = rng.GetSlice()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a range read in flight at the reset")
			// The transaction works on after the reset.
			v, err = tr.Get([]byte("k")).Get()
			require.NoError(t, err)
			require.Equal(t, []byte("old"), v)
		})
	}
}
