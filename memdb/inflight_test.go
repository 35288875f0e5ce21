package memdb_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A commit in flight and what happens to it meanwhile.

// duringCommitStep commits a write of "k" in a new transaction of a DB
// whose commit is held (HoldNextCommit) and then runs during(tr) inside
// the commit step, as the step reads the DB's clock: too late to stop the
// commit, before Commit returns. fault, if not nil, fails the commit step
// (FailNextCommit, applied). It returns the transaction, the versionstamp
// asked for before Commit, and Commit's result.
func duringCommitStep(t *testing.T, fault error, during func(tr kv.Transaction)) (kv.Transaction, kv.FutureVersionstamp, error) {
	t.Helper()
	clk := &hookClock{ManualClock: memdb.NewManualClock(epoch)}
	db, _ := newDB(t, memdb.WithClock(clk))
	tr := newTx(t, db)
	t.Cleanup(tr.Cancel)
	tr.Set([]byte("k"), []byte("v"))
	stamp := tr.GetVersionstamp()
	held, release := db.HoldNextCommit()
	defer release()
	if fault != nil {
		db.FailNextCommit(fault, true)
	}
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	<-held
	hook := func() { during(tr) }
	clk.armed.Store(&hook) // the commit step's reading of the clock runs it
	release()
	return tr, stamp, <-done
}

// TestCancelDuringTheCommitStepLeavesTheVersionstamp: a Cancel too late to
// stop the commit (here while the commit step runs) leaves the commit's
// outcome, and the versionstamp's, to the commit: a Commit that succeeds
// has its versionstamp. FDB's commit sets the versionstamp when the reply
// comes (tryCommit sends versionstampPromise, fdbclient/NativeAPI.actor.cpp),
// before the commit future it waits on is set, and ReadYourWritesTransaction::
// getVersionstamp answers with whichever of that versionstamp and
// resetPromise comes first (waitOrError, fdbclient/ReadYourWrites.actor.cpp).
// cancelLocked leaves the versionstamp of a commit in flight to the commit.
func TestCancelDuringTheCommitStepLeavesTheVersionstamp(t *testing.T) {
	tr, stamp, err := duringCommitStep(t, nil, func(tr kv.Transaction) { tr.Cancel() })
	require.NoError(t, err, "the commit step ran: the Cancel came too late to stop it")
	v, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	got, err := stamp.Get()
	require.NoError(t, err, "the versionstamp of a commit that succeeded")
	require.Equal(t, uint64(v), binary.BigEndian.Uint64(got[:8]), "the commit's versionstamp")
}

// TestOperationDuringAnUnknownCommitResultMayHaveCommitted: an operation
// issued during a commit whose step then fails with commit_unknown_result
// fails the commit with used_during_commit, still maybe committed: FDB's
// checkUsedDuringCommit sets resetPromise, on which RYWImpl::commit waits
// beside the commit request, which may have been applied
// (fdbclient/ReadYourWrites.actor.cpp). memdb's Commit must not report the
// commit as not applied (a used_during_commit that is not maybe committed).
func TestOperationDuringAnUnknownCommitResultMayHaveCommitted(t *testing.T) {
	var during error
	_, _, err := duringCommitStep(t, kv.ErrCommitUnknownResult, func(tr kv.Transaction) {
		_, during = tr.Get([]byte("a")).Get()
	})
	require.ErrorIs(t, during, kv.ErrUsedDuringCommit, "a read issued while the commit step runs")
	require.ErrorIs(t, err, kv.ErrUsedDuringCommit, "the commit during which a read was issued")
	require.True(t, kv.MaybeCommitted(err), "the commit step's result was unknown: it may have been applied")
}

// TestResetInterruptsCommitWaitingOutItsLatency: a Reset while the commit
// waits out its latency (the request is on its way) makes Commit return
// transaction_cancelled at once, maybe committed: RYWImpl::commit waits on
// resetPromise || tr.commit(), and resetRyow fails the promise with
// transaction_cancelled (fdbclient/ReadYourWrites.actor.cpp).
// (TestResetInterruptsCommitInFlight holds the commit instead.)
func TestResetInterruptsCommitWaitingOutItsLatency(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Commit: memdb.Span{Min: time.Hour, Max: time.Hour}}))
	sleeping := notifySleeping(db)
	tr := newTx(t, db)
	defer tr.Cancel()
	tr.Set([]byte("k"), []byte("v"))
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	<-sleeping
	tr.Reset()
	select {
	case err := <-done:
		require.ErrorIs(t, err, kv.ErrTransactionCancelled, "the commit in flight at the Reset")
		require.True(t, kv.MaybeCommitted(err), "the request was on its way: it may have been applied")
	case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
		tr.Cancel()
		t.Fatal("the commit waits out its latency after Reset")
	}
}
