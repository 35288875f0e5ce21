package memdb_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// heldRead sets up a transaction with a point read of "a" held in flight
// (the DB's clock, read as the read is served, blocks it) and returns it
// with the read and let, which lets the read go on.
func heldRead(t *testing.T) (db *memdb.DB, tr kv.Transaction, read kv.FutureValue, let func()) {
	t.Helper()
	clk := &hookClock{ManualClock: memdb.NewManualClock(epoch)}
	db, _ = newDB(t, memdb.WithClock(clk), memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	mustSet(t, db, "a", "1")
	tr = newTx(t, db)
	t.Cleanup(tr.Cancel)
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err)

	served, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let = func() { once.Do(func() { close(release) }) }
	t.Cleanup(let) // a failed check leaves nothing blocked
	hook := func() { close(served); <-release }
	clk.armed.Store(&hook)
	read = tr.Get([]byte("a"))
	<-served // the read is in flight, held
	return db, tr, read, let
}

// commitWaiting sets up a transaction whose Commit waits for a held read
// (heldRead), with a write of "w". It calls during, on the test's
// goroutine, while the commit waits (returned is closed when Commit
// returns); then lets the read go on and returns the read's and the
// commit's results.
func commitWaiting(t *testing.T, during func(tr kv.Transaction, returned <-chan struct{})) (readErr, commitErr error, db *memdb.DB) {
	t.Helper()
	db, tr, read, let := heldRead(t)
	waiting := make(chan struct{}, 1)
	db.SetAwaitingReads(func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	})
	tr.Set([]byte("w"), []byte("x"))
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		commitErr = tr.Commit()
	}()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
		t.Fatal("Commit did not wait for the read in flight")
	}
	during(tr, returned)
	let()
	_, readErr = read.Get()
	<-returned
	return readErr, commitErr, db
}

// A Reset drops the reads in flight from what a later Commit waits for:
// FDB's resetRyow starts a new reading (reading = AndFuture(),
// fdbclient/ReadYourWrites.actor.cpp), so the commit of the transaction's
// next use does not wait for the old read (nor take its conflict range).
// memdb's count of reads in flight survived the Reset, and the Commit
// waited until the old read ended. (The commit is read-only: the held
// read holds the DB's lock, which a commit with writes would wait for.)
func TestCommitAfterResetDoesNotWaitForOldReads(t *testing.T) {
	_, tr, read, let := heldRead(t)
	tr.Reset()
	returned := make(chan error, 1)
	go func() { returned <- tr.Commit() }()
	select {
	case err := <-returned:
		require.NoError(t, err)
	case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
		t.Error("Commit after Reset waits for a read issued before the Reset")
	}
	let()
	_, err := read.Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled, "the read the Reset dropped")
}

// A read waiting out its latency when the transaction is reset fails with
// transaction_cancelled at once: FDB's reads wait on resetPromise beside
// the read (readWithConflictRangeRYW, fdbclient/ReadYourWrites.actor.cpp),
// and resetRyow sends it transaction_cancelled. memdb's read slept out its
// latency (here an hour) and failed only then. The same holds for a read
// version request (its waiters are the reads).
func TestResetEndsReadsWaitingOutLatency(t *testing.T) {
	for _, c := range []struct {
		name string
		lat  memdb.Latency
	}{
		{"read", memdb.Latency{Read: memdb.Span{Min: time.Hour, Max: time.Hour}}},
		{"read version", memdb.Latency{GRV: memdb.Span{Min: time.Hour, Max: time.Hour}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t, memdb.WithLatency(c.lat))
			sleeping := notifySleeping(db)
			tr := newTx(t, db)
			defer tr.Cancel()
			point := tr.Get([]byte("a"))
			rng := tr.GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("b")}, kv.RangeOptions{})
			<-sleeping
			tr.Reset()
			got := make(chan error, 2)
			go func() {
				_, err := point.Get()
				got <- err
				_, err = rng.GetSlice()
				got <- err
			}()
			for _, what := range []string{"point read", "range read"} {
				select {
				case err := <-got:
					require.ErrorIs(t, err, kv.ErrTransactionCancelled, what)
				case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
					tr.Cancel()
					t.Fatalf("the %s waits out its latency after Reset", what)
				}
			}
		})
	}
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
	readErr, commitErr, db := commitWaiting(t, func(tr kv.Transaction, _ <-chan struct{}) {
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
// committed nothing with no error. The commit returns at once, while the
// read is still held: it waits on resetPromise || reading, and the reset
// fails the promise. memdb's Commit waited for the read to end.
func TestResetDuringCommitWaitCancelsCommit(t *testing.T) {
	readErr, commitErr, db := commitWaiting(t, func(tr kv.Transaction, returned <-chan struct{}) {
		tr.Reset()
		select {
		case <-returned:
		case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
			t.Error("Commit still waits for the held read after Reset")
		}
	})
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
	readErr, commitErr, db := commitWaiting(t, func(kv.Transaction, <-chan struct{}) {})
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

// notifySleeping returns a channel that receives when an operation of db
// starts waiting out simulated latency (a send is dropped while one is
// pending).
func notifySleeping(db *memdb.DB) <-chan struct{} {
	sleeping := make(chan struct{}, 1)
	db.SetSleeping(func() {
		select {
		case sleeping <- struct{}{}:
		default:
		}
	})
	return sleeping
}
