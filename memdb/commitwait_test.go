package memdb_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// commitWaiting sets up a transaction whose Commit waits for a point read
// of "a" held in flight (the DB's clock, read as the read is served,
// blocks it), with a write of "w". It calls during, on the test's
// goroutine, while the commit waits; then lets the read go on and returns
// the read's and the commit's results.
func commitWaiting(t *testing.T, during func(tr kv.Transaction)) (readErr, commitErr error, db *memdb.DB) {
	t.Helper()
	clk := &hookClock{ManualClock: memdb.NewManualClock(epoch)}
	db, _ = newDB(t, memdb.WithClock(clk), memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	mustSet(t, db, "a", "1")
	waiting := make(chan struct{}, 1)
	db.SetAwaitingReads(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	tr := newTx(t, db)
	defer tr.Cancel()
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err)

	served, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let() // a failed check leaves nothing blocked
	hook := func() { close(served); <-release }
	clk.armed.Store(&hook)
	read := tr.Get([]byte("a"))
	<-served // the read is in flight, held

	tr.Set([]byte("w"), []byte("x"))
	committed := make(chan error, 1)
	go func() { committed <- tr.Commit() }()
	<-waiting
	during(tr)
	let()
	_, readErr = read.Get()
	return readErr, <-committed, db
}

// A read issued while Commit waits for the reads issued before it (here
// from the test's goroutine, the commit running on another) fails with
// used_during_commit (2017), and so do the commit, having sent nothing,
// and the read it waited for. FDB's commit marks itself started before it
// waits (RYWImpl::commit: commitStarted = true, then wait(resetPromise ||
// reading)); the read's checkUsedDuringCommit then sets resetPromise to
// used_during_commit (fdbclient/ReadYourWrites.actor.cpp), on which the
// commit and every read in flight wait, and the Go binding returns the
// code as an fdb.Error. memdb set commitStarted only once the reads were
// done: the read succeeded, and the commit with it. (Not a kvtest rule:
// no backend but memdb can hold a read in flight for a test.)
func TestReadDuringCommitWaitFailsWithUsedDuringCommit(t *testing.T) {
	var during, rng error
	readErr, commitErr, db := commitWaiting(t, func(tr kv.Transaction) {
		_, during = tr.Get([]byte("b")).Get()
		_, rng = tr.GetRange(kv.KeyRange{Begin: []byte("b"), End: []byte("c")}, kv.RangeOptions{}).GetSlice()
	})
	require.ErrorIs(t, during, kv.ErrUsedDuringCommit, "a read issued while the commit waits")
	require.ErrorIs(t, rng, kv.ErrUsedDuringCommit, "a range read issued while the commit waits")
	require.ErrorIs(t, readErr, kv.ErrUsedDuringCommit, "the read the commit waited for")
	require.ErrorIs(t, commitErr, kv.ErrUsedDuringCommit)
	require.False(t, kv.MaybeCommitted(commitErr), "nothing was sent")
	require.Nil(t, getNew(t, db, "w"), "nothing written")
}

// A Reset while Commit waits for the reads issued before it fails the
// commit with transaction_cancelled (resetRyow sends it to the old
// resetPromise, on which RYWImpl::commit waits). memdb's Commit went on
// after the wait with the transaction's state as the Reset left it, and
// committed nothing with no error.
func TestResetDuringCommitWaitCancelsCommit(t *testing.T) {
	readErr, commitErr, db := commitWaiting(t, func(tr kv.Transaction) { tr.Reset() })
	require.ErrorIs(t, readErr, kv.ErrTransactionCancelled, "the read the commit waited for")
	require.ErrorIs(t, commitErr, kv.ErrTransactionCancelled)
	require.Nil(t, getNew(t, db, "w"), "nothing written")
}

// A read issued before Commit and still in flight when Commit starts does
// not fail it: the commit waits for it and its read conflict range counts
// (RYWImpl::commit waits on reading). Marking the commit started before
// the wait must not make the read, as it is served, fail with
// used_during_commit.
func TestHeldReadAtCommitCompletes(t *testing.T) {
	readErr, commitErr, db := commitWaiting(t, func(kv.Transaction) {})
	require.NoError(t, readErr)
	require.NoError(t, commitErr)
	require.Equal(t, []byte("x"), getNew(t, db, "w"))
}

// getNew reads key in a new transaction.
func getNew(t *testing.T, db *memdb.DB, key string) []byte {
	t.Helper()
	var v []byte
	require.NoError(t, db.ReadTransact(t.Context(), func(tr kv.ReadTransaction) error {
		var err error
		v, err = tr.Get([]byte(key)).Get()
		return err
	}))
	return v
}

// Reads issued before Commit and in flight when it starts, in any of
// their steps (waiting for the read version, or for the read itself), do
// not fail the commit nor themselves: the commit waits for them
// (TestHeldReadAtCommitCompletes holds one deterministically; here
// the latency model keeps them in flight, and a read that had finished
// first would pass the same checks).
func TestReadsInFlightAtCommitComplete(t *testing.T) {
	const delay = 50 * time.Millisecond
	for _, c := range []struct {
		name string
		lat  memdb.Latency
	}{
		{"awaiting the read version", memdb.Latency{GRV: memdb.Span{Min: delay, Max: delay}}},
		{"being read", memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t, memdb.WithLatency(c.lat))
			mustSet(t, db, "a", "1")
			tr := newTx(t, db)
			defer tr.Cancel()
			point := tr.Get([]byte("a"))
			rng := tr.GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("b")}, kv.RangeOptions{})
			tr.Set([]byte("w"), []byte("x"))
			require.NoError(t, tr.Commit())
			v, err := point.Get()
			require.NoError(t, err)
			require.Equal(t, []byte("1"), v)
			kvs, err := rng.GetSlice()
			require.NoError(t, err)
			require.Len(t, kvs, 1)
			require.Equal(t, []byte("x"), getNew(t, db, "w"))
		})
	}
}
