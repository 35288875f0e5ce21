package kvtest

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// specErrors lists the error codes the suite checks: each code, its FDB
// name (flow/include/flow/error_definitions.h) and the kv sentinel for it.
var specErrors = []struct {
	name     string
	sentinel kv.Error
}{
	{"transaction_too_old", kv.ErrTransactionTooOld},
	{"future_version", kv.ErrFutureVersion},
	{"not_committed", kv.ErrNotCommitted},
	{"commit_unknown_result", kv.ErrCommitUnknownResult},
	{"commit_unknown_result_fatal", kv.ErrCommitUnknownResultFatal},
	{"transaction_cancelled", kv.ErrTransactionCancelled},
	{"transaction_timed_out", kv.ErrTransactionTimedOut},
	{"accessed_unreadable", kv.ErrAccessedUnreadable},
	{"process_behind", kv.ErrProcessBehind},
	{"database_locked", kv.ErrDatabaseLocked},
	{"cluster_version_changed", kv.ErrClusterVersionChanged},
	{"commit_proxy_memory_limit_exceeded", kv.ErrCommitProxyMemoryLimit},
	{"batch_transaction_throttled", kv.ErrBatchTransactionThrottled},
	{"grv_proxy_memory_limit_exceeded", kv.ErrGRVProxyMemoryLimit},
	{"tag_throttled", kv.ErrTagThrottled},
	{"proxy_tag_throttled", kv.ErrProxyTagThrottled},
	{"transaction_throttled_hot_shard", kv.ErrHotShardThrottled},
	{"transaction_rejected_range_locked", kv.ErrRangeLocked},
	{"used_during_commit", kv.ErrUsedDuringCommit},
	{"key_outside_legal_range", kv.ErrKeyOutsideLegalRange},
	{"inverted_range", kv.ErrInvertedRange},
	{"transaction_too_large", kv.ErrTransactionTooLarge},
	{"key_too_large", kv.ErrKeyTooLarge},
	{"value_too_large", kv.ErrValueTooLarge},
	{"invalid_option_value", kv.ErrInvalidOptionValue},
	{"range_limits_invalid", kv.ErrRangeLimitsInvalid},
}

// errorTests cover error classification and the transaction methods that
// act on errors (OnError, Cancel, Reset).
func errorTests() []conformanceTest {
	tests := make([]conformanceTest, 0, len(specErrors)+10)
	for _, e := range specErrors {
		tests = append(tests, conformanceTest{
			fmt.Sprintf("Classification/%s_%d", e.name, e.sentinel.Code),
			func(t *testing.T, f *fixture) { testClassification(t, f, e.name, e.sentinel) },
		})
	}
	return append(tests,
		conformanceTest{"MaybeCommittedForInterruptedCommit", testMaybeCommittedForInterruptedCommit},
		conformanceTest{"CancelFailsReads", testCancelFailsReads},
		conformanceTest{"CancelFailsCommit", testCancelFailsCommit},
		conformanceTest{"OnErrorRetryableResets", testOnErrorRetryableResets},
		conformanceTest{"OnErrorWrappedRetryable", testOnErrorWrappedRetryable},
		conformanceTest{"OnErrorNonRetryableReturnsIt", testOnErrorNonRetryableReturnsIt},
		conformanceTest{"OnErrorForeignErrorReturnsIt", testOnErrorForeignErrorReturnsIt},
		conformanceTest{"ResetClearsOptions", testResetClearsOptions},
		conformanceTest{"OperationDuringCommitFailsCommit", testOperationDuringCommitFailsCommit},
		conformanceTest{"CancelDuringCommitFailsVersionstamp", testCancelDuringCommitFailsVersionstamp},
		conformanceTest{"ConflictRangeDuringCommitFailsCommit", testConflictRangeDuringCommitFailsCommit},
		conformanceTest{"OnErrorKeepsOptions", testOnErrorKeepsOptions},
		conformanceTest{"FailedCommitLeavesUsedDuringCommit", testFailedCommitLeavesUsedDuringCommit},
		conformanceTest{"AfterCommit", testAfterCommit},
		conformanceTest{"ReadVersionOfBlindCommit", testReadVersionOfBlindCommit},
		conformanceTest{"CancelFailsVersionstamp", testCancelFailsVersionstamp},
		conformanceTest{"ApproximateSizeReportsInvalidWrite", testApproximateSizeReportsInvalidWrite},
		conformanceTest{"NegativeRangeLimit", testNegativeRangeLimit},
	)
}

// testFailedCommitLeavesUsedDuringCommit: once a Commit started, FDB keeps
// commitStarted set whatever the outcome (RYWImpl::commit clears it only
// below API 410; fdbclient/ReadYourWrites.actor.cpp), so after a failed commit
// every read, write and Commit fails with used_during_commit, which
// checkUsedDuringCommit also puts in resetPromise: the OnError that would
// have retried then returns it. Call OnError (or Reset) straight after a
// failed Commit. GetCommittedVersion stays -1, with no error.
func testFailedCommitLeavesUsedDuringCommit(t *testing.T, f *fixture) {
	f.seed(t, "b")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("b"))
	tr.Set(f.key("c"), []byte("x"))
	f.set(t, f.key("b"), []byte("changed"))
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "the commit of a transaction whose read was overwritten")
	v, err := tr.GetCommittedVersion()
	require.NoError(t, err, "GetCommittedVersion after a failed commit")
	require.Equal(t, int64(-1), v, "no committed version after a failed commit")
	_, err = tr.Get(f.key("b")).Get()
	requireCode(t, err, kv.ErrUsedDuringCommit, "a read after a failed commit")
	requireCode(t, tr.Commit(), kv.ErrUsedDuringCommit, "a second Commit after a failed one")
	f.requireAbsent(t, f.key("c"), "the second Commit applied nothing")
	requireCode(t, tr.OnError(kv.ErrNotCommitted), kv.ErrUsedDuringCommit, "OnError after a read that followed the failed commit")
	tr.Reset()
	tr.Set(f.key("c"), []byte("x"))
	commit(t, tr, "Reset makes the transaction usable again")

	tr = f.newTx(t)
	mustGet(t, tr, f.key("b"))
	tr.Set(f.key("d"), []byte("x"))
	f.set(t, f.key("b"), []byte("again"))
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "the commit of a transaction whose read was overwritten")
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "OnError straight after the failed commit retries")
	mustGet(t, tr, f.key("b"))
	tr.Set(f.key("d"), []byte("x"))
	commit(t, tr, "the retry")
	f.requireValue(t, f.key("d"), []byte("x"), "the retry's write")
}

// testAfterCommit: after a successful commit, GetReadVersion still answers
// (ReadYourWritesTransaction::getReadVersion checks only resetPromise),
// GetCommittedVersion gives the version, and GetVersionstamp fails with
// used_during_commit (ReadYourWritesTransaction::getVersionstamp starts
// with checkUsedDuringCommit): ask for the versionstamp before Commit.
// Before Commit, GetCommittedVersion is -1 with no error
// (Transaction::getCommittedVersion, fdbclient/NativeAPI.actor.cpp).
func testAfterCommit(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	v, err := tr.GetCommittedVersion()
	require.NoError(t, err, "GetCommittedVersion before Commit")
	require.Equal(t, int64(-1), v, "no committed version before Commit")
	rv := readVersion(t, tr)
	tr.Set(f.key("a"), []byte("x"))
	commit(t, tr, "a write")
	got, err := tr.GetReadVersion().Get()
	require.NoError(t, err, "GetReadVersion after the commit")
	require.Equal(t, rv, got, "the read version after the commit")
	cv, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	require.GreaterOrEqual(t, cv, rv, "the committed version")
	_, err = tr.GetVersionstamp().Get()
	requireCode(t, err, kv.ErrUsedDuringCommit, "GetVersionstamp asked after the commit")
}

// testReadVersionOfBlindCommit: a transaction that wrote without reading
// obtains its read version when it commits (tryCommit calls
// trState->startTransaction(FLAG_CAUSAL_READ_RISKY), fdbclient/
// NativeAPI.actor.cpp), and GetReadVersion then answers with that version
// (Transaction::getReadVersion returns the transaction's
// readVersionFuture; ReadYourWritesTransaction::getReadVersion checks only
// resetPromise), which is before the commit's version: not a new one.
func testReadVersionOfBlindCommit(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	commit(t, tr, "a blind write")
	cv, err := tr.GetCommittedVersion()
	require.NoError(t, err, "GetCommittedVersion after the commit")
	rv := readVersion(t, tr)
	require.Less(t, rv, cv, "the read version after a blind commit is the one the commit used, before its commit version")
	require.Equal(t, rv, readVersion(t, tr), "asked again, the read version is the same")
}

// testCancelFailsVersionstamp: a versionstamp future fails when the
// transaction is cancelled before its commit (FDB's is waitOrError(...,
// resetPromise): ReadYourWritesTransaction::getVersionstamp).
func testCancelFailsVersionstamp(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.SetVersionstampedKey(stampedKey(f.key("vs/"), ""), []byte("x"))
	fv := tr.GetVersionstamp()
	tr.Cancel()
	done := make(chan error, 1)
	go func() { _, err := fv.Get(); done <- err }()
	select {
	case err := <-done:
		requireCode(t, err, kv.ErrTransactionCancelled, "the versionstamp of a cancelled transaction")
	case <-time.After(firedWait):
		t.Fatal("the versionstamp future of a cancelled transaction did not resolve")
	}
}

// testApproximateSizeReportsInvalidWrite: GetApproximateSize fails with the
// deferred error of an invalid write (ThreadSafeTransaction::
// getApproximateSize calls checkDeferredError first).
func testApproximateSizeReportsInvalidWrite(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set([]byte("\xffsystem"), []byte("x"))
	_, err := tr.GetApproximateSize().Get()
	requireCode(t, err, kv.ErrKeyOutsideLegalRange, "GetApproximateSize after a write outside the legal range")
}

// testNegativeRangeLimit: a negative limit fails the read with
// range_limits_invalid (kv.RangeOptions.Limit; FDB's
// ReadYourWritesTransaction::getRange: !limits.isValid()).
func testNegativeRangeLimit(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	for _, limit := range []int{-1, -2} {
		_, err := tr.GetRange(f.all(), kv.RangeOptions{Limit: limit}).GetSlice()
		requireCode(t, err, kv.ErrRangeLimitsInvalid, fmt.Sprintf("GetSlice with limit %d", limit))
		it := tr.Snapshot().GetRange(f.all(), kv.RangeOptions{Limit: limit}).Iterator()
		require.False(t, it.Next())
		requireCode(t, it.Err(), kv.ErrRangeLimitsInvalid, fmt.Sprintf("a snapshot iterator with limit %d", limit))
	}
	f.requireNames(t, mustRange(t, tr, f.all(), kv.RangeOptions{}), []string{"a"}, "the failed reads leave the transaction usable")
}

// testClassification: kv.IsRetryable and kv.MaybeCommitted follow
// fdb_error_predicate (bindings/c/fdb_c.cpp; see retryableBySpec), and
// OnError retries exactly the retryable codes (Transaction::onError,
// fdbclient/NativeAPI.actor.cpp; see onErrorMayReturn).
func testClassification(t *testing.T, f *fixture, name string, sentinel kv.Error) {
	code := sentinel.Code
	wrapped := fmt.Errorf("backend detail: %w", sentinel)
	var e kv.Error
	require.True(t, errors.As(wrapped, &e), "errors.As must find the kv.Error in a wrapped %s", name)
	require.Equal(t, code, e.Code, "%s must map to code %d", name, code)
	require.ErrorIs(t, wrapped, sentinel, "errors.Is must match the wrapped sentinel")
	require.ErrorIs(t, wrapped, kv.Error{Code: code}, "errors.Is must match any kv.Error with the same code")
	require.Contains(t, sentinel.Error(), name, "the message must name the error")
	require.Contains(t, sentinel.Error(), strconv.Itoa(code), "the message must carry the code")
	require.Equal(t, retryableBySpec[code], kv.IsRetryable(wrapped), "kv.IsRetryable(%s) must follow fdb_error_predicate(RETRYABLE)", name)
	require.Equal(t, maybeCommittedBySpec[code], kv.MaybeCommitted(wrapped), "kv.MaybeCommitted(%s) must follow fdb_error_predicate(MAYBE_COMMITTED), plus commit_unknown_result_fatal", name)

	// OnError must classify the same way, but for the codes it may retry
	// or return (onErrorMayReturn).
	tr := f.newTx(t)
	err := tr.OnError(wrapped)
	if onErrorMayReturn[code] && err != nil {
		require.ErrorIs(t, err, sentinel, "OnError must retry or return %s", name)
	} else if retryableBySpec[code] {
		require.NoError(t, err, "OnError must retry %s", name)
	} else {
		require.ErrorIs(t, err, sentinel, "OnError must return the non-retryable %s", name)
	}
}

// testMaybeCommittedForInterruptedCommit: a commit that Cancel or the
// timeout interrupts may have been applied: RYWImpl::commit waits on
// resetPromise || tr.commit() and stops waiting when either ends, while a
// commit request already sent goes on (simulateTimeoutInFlightCommit,
// fdbclient/ReadYourWrites.actor.cpp); neither error is retryable
// (fdb_error_predicate, bindings/c/fdb_c.cpp).
func testMaybeCommittedForInterruptedCommit(t *testing.T, f *fixture) {
	for _, cause := range []kv.Error{kv.ErrTransactionCancelled, kv.ErrTransactionTimedOut} {
		err := kv.CommitInterrupted(cause)
		require.True(t, kv.MaybeCommitted(err), "a commit interrupted by %v may have been applied", cause)
		require.ErrorIs(t, err, cause, "an interrupted commit's error must still match its cause")
		require.False(t, kv.IsRetryable(err), "an interrupted commit (%v) is not retried by the loop", cause)
	}
}

// testCancelFailsReads: after Cancel, reads and GetReadVersion fail with
// transaction_cancelled (ReadYourWritesTransaction::cancel sets
// resetPromise, which get, getRange and getReadVersion check first:
// fdbclient/ReadYourWrites.actor.cpp).
func testCancelFailsReads(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	tr.Cancel()
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrTransactionCancelled, "Get after Cancel")
	_, err = tr.GetRange(f.all(), kv.RangeOptions{}).GetSlice()
	requireCode(t, err, kv.ErrTransactionCancelled, "GetRange after Cancel")
	_, err = tr.GetReadVersion().Get()
	requireCode(t, err, kv.ErrTransactionCancelled, "GetReadVersion after Cancel")
}

// testCancelFailsCommit: Commit after Cancel fails with
// transaction_cancelled and applies nothing, and OnError returns it
// (ReadYourWritesTransaction::commit and RYWImpl::onError throw
// resetPromise's error: fdbclient/ReadYourWrites.actor.cpp).
func testCancelFailsCommit(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	tr.Cancel()
	err := tr.Commit()
	requireCode(t, err, kv.ErrTransactionCancelled, "Commit after Cancel")
	f.requireAbsent(t, f.key("a"), "a transaction cancelled before Commit must apply nothing")
	require.ErrorIs(t, tr.OnError(err), kv.ErrTransactionCancelled, "OnError must not retry transaction_cancelled")
}

// testOnErrorRetryableResets: OnError of a retryable error discards the
// transaction's writes (RYWImpl::onError calls resetRyow, which clears
// the write map: fdbclient/ReadYourWrites.actor.cpp).
func testOnErrorRetryableResets(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "OnError(not_committed)")
	require.Nil(t, mustGet(t, tr, f.key("a")), "OnError must reset the transaction: its writes are discarded")
	tr.Set(f.key("b"), []byte("y"))
	commit(t, tr)
	f.requireAbsent(t, f.key("a"), "a write made before OnError's reset must not be committed")
	f.requireValue(t, f.key("b"), []byte("y"), "a write made after OnError's reset must be committed")
}

// testOnErrorWrappedRetryable: OnError finds the FDB error in a wrapped
// error, as the Go binding's retry loop does with errors.As (retryable,
// bindings/go/src/fdb/database.go).
func testOnErrorWrappedRetryable(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	require.NoError(t, tr.OnError(fmt.Errorf("layer: dequeue: %w", kv.ErrNotCommitted)), "OnError must classify wrapped errors with errors.As")
}

// testOnErrorNonRetryableReturnsIt: OnError returns an error it does not
// retry (Transaction::onError returns e: fdbclient/NativeAPI.actor.cpp).
func testOnErrorNonRetryableReturnsIt(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	err := tr.OnError(kv.ErrValueTooLarge)
	requireCode(t, err, kv.ErrValueTooLarge, "OnError(value_too_large)")
}

func testOnErrorForeignErrorReturnsIt(t *testing.T, f *fixture) {
	boom := errors.New("boom")
	tr := f.newTx(t)
	require.ErrorIs(t, tr.OnError(boom), boom, "OnError must return an error that is not a kv.Error")
	tr.Set(f.key("a"), []byte("x"))
	commit(t, tr, "an error without an FDB code leaves the transaction usable (FDB's onError takes only FDB errors)")

	// On a cancelled transaction too: the error comes back unchanged (the
	// Go binding's Transaction.OnError takes an fdb.Error only, so an
	// adapter returns any other error without calling it), not replaced
	// by the cancellation's.
	tr = f.newTx(t)
	tr.Cancel()
	require.ErrorIs(t, tr.OnError(boom), boom, "OnError on a cancelled transaction must return an error that is not a kv.Error unchanged")
}

// Reset clears the transaction's options: ReadYourWritesTransaction::reset
// (fdbclient/ReadYourWrites.actor.cpp) clears persistentOptions and calls
// options.reset, re-applying only the database's defaults.
func testResetClearsOptions(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetRetryLimit(0))
	require.NoError(t, tr.Options().SetTimeout(time.Second))
	tr.Reset()
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "OnError after Reset: the retry limit 0 set before Reset must be gone")
	f.h.AdvanceTime(2 * time.Second)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "a read 2 s after Reset: the 1 s timeout set before Reset must be gone")
}

// OnError keeps the options (API version 610 and later): RYWImpl::onError
// calls resetRyow, which re-applies persistentOptions
// (fdbclient/ReadYourWrites.actor.cpp; fdb.options marks timeout,
// retry_limit and max_retry_delay persistent).
func testOnErrorKeepsOptions(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetRetryLimit(1))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "the first retry is within the limit")
	requireCode(t, tr.OnError(kv.ErrNotCommitted), kv.ErrNotCommitted, "the second OnError: the retry limit set before the first OnError must still hold")
}

// A read (or write) issued while the transaction's commit is in flight
// fails with used_during_commit, and so does the commit:
// ReadYourWritesTransaction::checkUsedDuringCommit sets the transaction's
// resetPromise to used_during_commit, and RYWImpl::commit waits on
// resetPromise || tr.commit() (fdbclient/ReadYourWrites.actor.cpp). The
// commit request may already have been sent, so the commit may have been
// applied: kv.MaybeCommitted must be true. (A range result consumed by a
// goroutine while its transaction commits does exactly this.)
func testOperationDuringCommitFailsCommit(t *testing.T, f *fixture) {
	holder, ok := f.faults(t).(CommitHolder)
	if !ok {
		t.Skip("capability missing: the backend cannot hold a commit in flight (FaultInjector is not a kvtest.CommitHolder)")
	}
	f.seed(t, "a")
	tr, done, release := f.commitHeld(t, holder, nil)
	defer release()
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrUsedDuringCommit, "a read issued while the commit is in flight")
	release()
	err = <-done
	requireCode(t, err, kv.ErrUsedDuringCommit, "the commit during which a read was issued")
	require.True(t, kv.MaybeCommitted(err), "the commit was in flight: it may have been applied")
	requireCode(t, tr.OnError(err), kv.ErrUsedDuringCommit, "OnError does not retry used_during_commit")
}

// A conflict range added while the commit is in flight fails the commit
// with used_during_commit, as a read does (OperationDuringCommitFailsCommit):
// ReadYourWritesTransaction::addReadConflictRange and addWriteConflictRange
// call checkUsedDuringCommit first (fdbclient/ReadYourWrites.actor.cpp), and
// the error of the call itself is deferred (ThreadSafeTransaction.cpp).
func testConflictRangeDuringCommitFailsCommit(t *testing.T, f *fixture) {
	holder, ok := f.faults(t).(CommitHolder)
	if !ok {
		t.Skip("capability missing: the backend cannot hold a commit in flight (FaultInjector is not a kvtest.CommitHolder)")
	}
	for name, add := range map[string]func(tr kv.Transaction) error{
		"read":  func(tr kv.Transaction) error { return tr.AddReadConflictKey(f.key("a")) },
		"write": func(tr kv.Transaction) error { return tr.AddWriteConflictKey(f.key("a")) },
	} {
		tr, done, release := f.commitHeld(t, holder, nil)
		require.NoError(t, add(tr), "a %s conflict range added during the commit: its error is deferred", name)
		release()
		err := <-done
		requireCode(t, err, kv.ErrUsedDuringCommit, "the commit during which a "+name+" conflict range was added")
		require.True(t, kv.MaybeCommitted(err), "the commit was in flight: it may have been applied")
	}
}

// A Cancel while the commit is in flight fails the commit with
// transaction_cancelled, maybe committed, and the versionstamp asked for
// before the commit with transaction_cancelled too, not with the
// transaction_invalid_version of a failed commit: RYWImpl::commit waits on
// resetPromise || tr.commit(), getVersionstamp returns
// waitOrError(tr.getVersionstamp(), resetPromise), and cancel sets
// resetPromise to transaction_cancelled (fdbclient/ReadYourWrites.actor.cpp).
func testCancelDuringCommitFailsVersionstamp(t *testing.T, f *fixture) {
	holder, ok := f.faults(t).(CommitHolder)
	if !ok {
		t.Skip("capability missing: the backend cannot hold a commit in flight (FaultInjector is not a kvtest.CommitHolder)")
	}
	var stamp kv.FutureVersionstamp
	tr, done, release := f.commitHeld(t, holder, func(tr kv.Transaction) { stamp = tr.GetVersionstamp() })
	defer release()
	tr.Cancel()
	release()
	err := <-done
	requireCode(t, err, kv.ErrTransactionCancelled, "the commit cancelled in flight")
	require.True(t, kv.MaybeCommitted(err), "the commit was in flight: it may have been applied")
	_, err = stamp.Get()
	requireCode(t, err, kv.ErrTransactionCancelled, "the versionstamp of the commit cancelled in flight")
}

// commitHeld starts the commit of a new transaction that has a read
// version and writes key b, and returns once holder holds it in flight:
// the transaction, the commit's result and the hold's release.
// prepare, if not nil, runs on the transaction before its commit starts.
func (f *fixture) commitHeld(t *testing.T, holder CommitHolder, prepare func(kv.Transaction)) (kv.Transaction, <-chan error, func()) {
	tr := f.newTx(t)
	readVersion(t, tr)
	tr.Set(f.key("b"), []byte("x"))
	if prepare != nil {
		prepare(tr)
	}
	held, release := holder.HoldNextCommit()
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	<-held
	return tr, done, release
}
