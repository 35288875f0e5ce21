package memdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
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
		db, _, release := interruptedLateWrite(t)
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

// TestLateLandingFault: with Faults.LateLanding 1, a commit interrupted in
// flight returns at once (maybe committed) and lands afterwards, seen here
// by a watch on its key.
func TestLateLandingFault(t *testing.T) {
	db, _ := newDB(t, memdb.WithFaults(memdb.Faults{LateLanding: 1}))
	w := newTx(t, db)
	watch := w.Watch([]byte("k"))
	require.NoError(t, w.Commit())
	defer watch.Cancel()

	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("late"))
	held, release := db.HoldNextCommit() // to cancel it in flight
	defer release()
	cancelInFlight(t, tr, held)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, watch.Wait(ctx), "the commit lands after Commit returned")
	require.Equal(t, "late", string(get(t, newTx(t, db), "k")))
}

// cancelInFlight commits tr, cancels it once its commit is held (held
// closed), and requires Commit's error to be the interruption: maybe
// committed.
func cancelInFlight(t *testing.T, tr kv.Transaction, held <-chan struct{}) {
	t.Helper()
	interruptInFlight(t, tr, held, tr.Cancel)
}

// interruptInFlight is cancelInFlight with interrupt in place of Cancel.
func interruptInFlight(t *testing.T, tr kv.Transaction, held <-chan struct{}, interrupt func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	<-held
	interrupt()
	select {
	case err := <-done:
		require.ErrorIs(t, err, kv.ErrTransactionCancelled)
		require.True(t, kv.MaybeCommitted(err), "the commit was in flight")
	case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
		t.Fatal("Commit still waits for its held commit after the interruption")
	}
}

// TestResetInterruptsCommitInFlight: a Reset while the commit is in
// flight makes Commit return transaction_cancelled at once, maybe
// committed, and the request goes on and lands: FDB's RYWImpl::commit
// waits on resetPromise || tr.commit(), and resetRyow fails the promise
// with transaction_cancelled (fdbclient/ReadYourWrites.actor.cpp); fdbkv
// marks that error as maybe committed (commitError). memdb's commit
// waited for the hold's release and returned its outcome, nil here.
func TestResetInterruptsCommitInFlight(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("late"))
	held, release := db.HoldNextCommitLate()
	defer release()
	interruptInFlight(t, tr, held, tr.Reset)
	release()
	require.Equal(t, "late", string(get(t, newTx(t, db), "k")), "landed at release")
}

// interruptedLateWrite returns a database holding "a" = "1" and a
// transaction that read "a" and set "k" to "late", its commit cancelled in
// flight (see cancelInFlight) and held until the test calls release
// (memdb's HoldNextCommitLate).
func interruptedLateWrite(t *testing.T) (*memdb.DB, kv.Transaction, func()) {
	t.Helper()
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	tr := newTx(t, db)
	require.Equal(t, "1", string(get(t, tr, "a")))
	tr.Set([]byte("k"), []byte("late"))
	held, release := db.HoldNextCommitLate()
	cancelInFlight(t, tr, held)
	return db, tr, release
}

// TestInterruptedCommitLandsLateAfterReset: the client resets the
// transaction of an interrupted commit and goes on committing; the commit
// request is still in flight and lands later. FoundationDB's resolver
// judges it too old only when its read version is more than the MVCC
// window behind the batch's version (ConflictBatch::addTransaction,
// fdbserver/SkipList.cpp: read_snapshot < newOldestVersion, which
// Resolver.actor.cpp sets to req.version -
// MAX_WRITE_TRANSACTION_LIFE_VERSIONS), whatever its client did since: it
// lands, or conflicts, as if the client had kept the transaction. memdb
// must keep what the resolution needs until it lands.
func TestInterruptedCommitLandsLateAfterReset(t *testing.T) {
	for _, conflict := range []bool{false, true} {
		db, tr, release := interruptedLateWrite(t)
		tr.Reset() // the client retries; its next commits move the history on
		mustSet(t, db, "other", "x")
		if conflict {
			mustSet(t, db, "a", "2")
		}
		mustSet(t, db, "other", "y")
		release()
		got := get(t, newTx(t, db), "k")
		if conflict {
			require.Nil(t, got, "a's write after its read version conflicts")
		} else {
			require.Equal(t, "late", string(got), "landed at release, not failed as too old")
		}
	}
}
