package kvtest

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// retryTests cover the standard retry loop (Database.Transact), Transact on
// a Transaction, the generic helpers and the retry_limit and timeout
// options.
func retryTests() []conformanceTest {
	return []conformanceTest{
		{"TransactCommits", testTransactCommits},
		{"TransactRetriesConflict", testTransactRetriesConflict},
		{"TransactReturnsFnErrorWithoutCommitting", testTransactReturnsFnErrorWithoutCommitting},
		{"TransactRetriesRetryableFnError", testTransactRetriesRetryableFnError},
		{"TransactOnTransactionDoesNotCommit", testTransactOnTransactionDoesNotCommit},
		{"TransactOnTransactionDoesNotRetry", testTransactOnTransactionDoesNotRetry},
		{"TransactComposesLayers", testTransactComposesLayers},
		{"GenericTransactReturnsCommittedResult", testGenericTransactReturnsCommittedResult},
		{"GenericTransactOnTransaction", testGenericTransactOnTransaction},
		{"ReadTransactRetries", testReadTransactRetries},
		{"ContextCancelledBeforeTransact", testContextCancelledBeforeTransact},
		{"ContextCancelledDuringRetries", testContextCancelledDuringRetries},
		{"RetryLimit", testRetryLimit},
		{"RetryLimitZero", testRetryLimitZero},
		{"FailedOnErrorCancels", testFailedOnErrorCancels},
		{"InvalidOptionValues", testInvalidOptionValues},
		{"TimeoutExpires", testTimeoutExpires},
		{"TimeoutNotYetExpired", testTimeoutNotYetExpired},
		{"TimeoutZeroDisables", testTimeoutZeroDisables},
		{"TimeoutSpansRetries", testTimeoutSpansRetries},
		{"TimeoutCountsFromCreation", testTimeoutCountsFromCreation},
		{"MaxRetryDelayCapsBackoff", testMaxRetryDelayCapsBackoff},
	}
}

// testTransactCommits: Transact commits fn's writes (Database.Transact
// commits after fn: bindings/go/src/fdb/database.go).
func testTransactCommits(t *testing.T, f *fixture) {
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(f.key("a"), []byte("x"))
		return nil
	})
	require.NoError(t, err, "Transact")
	f.requireValue(t, f.key("a"), []byte("x"), "Transact on a database must commit")
}

// conflictOnFirstRun returns a transactional function that increments the
// counter at key; on its first run, after reading, another transaction sets
// the counter to 100, so that the first commit conflicts. runs counts the
// function's runs.
func (f *fixture) conflictOnFirstRun(t *testing.T, key []byte, runs *int) func(kv.Transaction) (int64, error) {
	return func(tr kv.Transaction) (int64, error) {
		*runs++
		v, err := tr.Get(key).Get()
		if err != nil {
			return 0, err
		}
		n := decodeCounter(t, v)
		if *runs == 1 {
			f.set(t, key, leInt64(100))
		}
		tr.Set(key, leInt64(n+1))
		return n + 1, nil
	}
}

// testTransactRetriesConflict: Transact passes a failed commit to OnError
// and runs fn again (retryable, bindings/go/src/fdb/database.go).
func testTransactRetriesConflict(t *testing.T, f *fixture) {
	key := f.key("counter")
	f.set(t, key, leInt64(0))
	runs := 0
	fn := f.conflictOnFirstRun(t, key, &runs)
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		_, err := fn(tr)
		return err
	})
	require.NoError(t, err, "Transact must retry not_committed and end committed")
	require.Equal(t, 2, runs, "the function must run twice: the first commit conflicts")
	require.Equal(t, int64(101), decodeCounter(t, f.get(t, key)), "the committed run must have read the other transaction's write")
}

// testTransactReturnsFnErrorWithoutCommitting: an error without an FDB
// code from fn ends Transact without a commit or a retry (retryable and
// Database.Transact, bindings/go/src/fdb/database.go).
func testTransactReturnsFnErrorWithoutCommitting(t *testing.T, f *fixture) {
	boom := errors.New("boom")
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		tr.Set(f.key("a"), []byte("x"))
		return boom
	})
	require.ErrorIs(t, err, boom, "Transact must return fn's error")
	require.Equal(t, 1, runs, "a non-retryable error from fn must not be retried")
	f.requireAbsent(t, f.key("a"), "Transact must not commit when fn fails")
}

// testTransactRetriesRetryableFnError: an FDB error returned by fn goes
// to OnError like a commit's (retryable, bindings/go/src/fdb/database.go).
func testTransactRetriesRetryableFnError(t *testing.T, f *fixture) {
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		tr.Set(f.key("a"), []byte{byte(run)})
		if run == 1 {
			return kv.ErrNotCommitted
		}
		return nil
	})
	require.NoError(t, err, "Transact must retry a retryable error returned by fn")
	require.Equal(t, 2, runs)
	f.requireValue(t, f.key("a"), []byte{2}, "only the second run's write may be committed")
}

// testTransactOnTransactionDoesNotCommit: Transact on a transaction only
// runs fn (Transaction.Transact, bindings/go/src/fdb/transaction.go).
func testTransactOnTransactionDoesNotCommit(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	err := tr.Transact(f.ctx, func(inner kv.Transaction) error {
		inner.Set(f.key("a"), []byte("x"))
		return nil
	})
	require.NoError(t, err, "Transact on a transaction")
	require.Equal(t, []byte("x"), mustGet(t, tr, f.key("a")), "fn must have run inside the transaction")
	f.requireAbsent(t, f.key("a"), "Transact on a transaction must not commit it")
	commit(t, tr)
	f.requireValue(t, f.key("a"), []byte("x"), "the caller's commit must apply what fn wrote")
}

// testTransactOnTransactionDoesNotRetry: nor does it retry
// (Transaction.Transact, bindings/go/src/fdb/transaction.go).
func testTransactOnTransactionDoesNotRetry(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	runs := 0
	err := tr.Transact(f.ctx, func(kv.Transaction) error {
		runs++
		return kv.ErrNotCommitted
	})
	requireCode(t, err, kv.ErrNotCommitted, "Transact on a transaction whose fn failed")
	require.Equal(t, 1, runs, "Transact on a transaction must not retry: retrying is the outermost caller's job")
}

// incrementLayer is what a layer function looks like: it takes a Transactor
// and works the same whether it is given a database or a transaction.
func incrementLayer(ctx context.Context, t *testing.T, tor kv.Transactor, key []byte) error {
	return tor.Transact(ctx, func(tr kv.Transaction) error {
		v, err := tr.Get(key).Get()
		if err != nil {
			return err
		}
		tr.Set(key, leInt64(decodeCounter(t, v)+1))
		return nil
	})
}

// testTransactComposesLayers: a function taking a Transactor works on a
// database and inside a transaction (the Go binding's Transactor,
// bindings/go/src/fdb/database.go).
func testTransactComposesLayers(t *testing.T, f *fixture) {
	a, b := f.key("a"), f.key("b")
	require.NoError(t, incrementLayer(f.ctx, t, f.db, a), "a layer called with the database commits")
	require.Equal(t, int64(1), decodeCounter(t, f.get(t, a)))

	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := incrementLayer(f.ctx, t, tr, a); err != nil {
			return err
		}
		return incrementLayer(f.ctx, t, tr, b)
	})
	require.NoError(t, err, "two layer calls joined in one transaction")
	require.Equal(t, int64(2), decodeCounter(t, f.get(t, a)))
	require.Equal(t, int64(1), decodeCounter(t, f.get(t, b)))

	boom := errors.New("boom")
	runs, err := f.transact(func(tr kv.Transaction, _ int) error {
		if err := incrementLayer(f.ctx, t, tr, a); err != nil {
			return err
		}
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, runs, "fn's own error must not be retried")
	require.Equal(t, int64(2), decodeCounter(t, f.get(t, a)), "a layer call inside a transaction that fails must not be applied")
}

// testGenericTransactReturnsCommittedResult: kv.Transact returns the
// committed run's result (Database.Transact returns f's value from the run
// whose commit succeeded: bindings/go/src/fdb/database.go).
func testGenericTransactReturnsCommittedResult(t *testing.T, f *fixture) {
	key := f.key("counter")
	f.set(t, key, leInt64(0))
	runs := 0
	got, err := kv.Transact(f.ctx, f.db, f.conflictOnFirstRun(t, key, &runs))
	require.NoError(t, err, "kv.Transact")
	require.Equal(t, 2, runs)
	require.Equal(t, int64(101), got, "kv.Transact must return the result of the run that committed (the first run would have returned 1)")
}

// testGenericTransactOnTransaction: kv.Transact on a transaction neither
// commits nor hides fn's error (Transaction.Transact,
// bindings/go/src/fdb/transaction.go).
func testGenericTransactOnTransaction(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	got, err := kv.Transact(f.ctx, tr, func(inner kv.Transaction) (string, error) {
		inner.Set(f.key("a"), []byte("x"))
		return "result", nil
	})
	require.NoError(t, err)
	require.Equal(t, "result", got)
	f.requireAbsent(t, f.key("a"), "kv.Transact on a transaction must not commit it")
	boom := errors.New("boom")
	got, err = kv.Transact(f.ctx, tr, func(kv.Transaction) (string, error) { return "ignored", boom })
	require.ErrorIs(t, err, boom, "kv.Transact must return fn's error")
	require.Empty(t, got, "kv.Transact must return the zero value with an error")
}

// testReadTransactRetries: ReadTransact retries a retryable error
// (Database.ReadTransact, bindings/go/src/fdb/database.go).
func testReadTransactRetries(t *testing.T, f *fixture) {
	f.seed(t, "a")
	runs := 0
	got, err := kv.ReadTransact(f.ctx, f.db, func(rt kv.ReadTransaction) ([]byte, error) {
		runs++
		if runs == 1 {
			return nil, kv.ErrTransactionTooOld
		}
		return rt.Get(f.key("a")).Get()
	})
	require.NoError(t, err, "ReadTransact on a database must retry a retryable error")
	require.Equal(t, 2, runs)
	require.Equal(t, []byte("v:a"), got)
}

// testContextCancelledBeforeTransact: a kv rule (the Go binding takes no
// context): an ended ctx stops Transact before fn commits.
func testContextCancelledBeforeTransact(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	cancel()
	err := f.db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(f.key("a"), []byte("x"))
		return nil
	})
	require.ErrorIs(t, err, context.Canceled, "Transact with a cancelled context must return an error matching context.Canceled")
	f.requireAbsent(t, f.key("a"), "Transact with a cancelled context must not commit")
}

// testContextCancelledDuringRetries: a kv rule (the Go binding takes no
// context): an ended ctx stops the retries, with both errors.
func testContextCancelledDuringRetries(t *testing.T, f *fixture) {
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	runs := 0
	err := f.db.Transact(ctx, func(tr kv.Transaction) error {
		runs++
		if runs == 2 {
			cancel()
		}
		return kv.ErrNotCommitted
	})
	require.ErrorIs(t, err, context.Canceled, "Transact must stop retrying once its context is cancelled, with an error matching context.Canceled")
	require.ErrorIs(t, err, kv.ErrNotCommitted, "the error must also match the last transaction error")
	require.Equal(t, 2, runs, "no run may start after the context was cancelled")
}

// testRetryLimit: retry_limit n allows n retries: RYWImpl::onError gives
// up once retries >= maxRetries (fdbclient/ReadYourWrites.actor.cpp).
func testRetryLimit(t *testing.T, f *fixture) {
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		if err := tr.Options().SetRetryLimit(2); err != nil {
			return err
		}
		return kv.ErrNotCommitted
	})
	requireCode(t, err, kv.ErrNotCommitted, "Transact with retry limit 2 and an always-conflicting function")
	require.Equal(t, 3, runs, "retry limit 2 allows the first run and 2 retries")
}

// testRetryLimitZero: retry_limit 0 allows none (RYWImpl::onError,
// fdbclient/ReadYourWrites.actor.cpp).
func testRetryLimitZero(t *testing.T, f *fixture) {
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		if err := tr.Options().SetRetryLimit(0); err != nil {
			return err
		}
		return kv.ErrNotCommitted
	})
	requireCode(t, err, kv.ErrNotCommitted, "Transact with retry limit 0")
	require.Equal(t, 1, runs, "retry limit 0 allows no retry")
}

// testTimeoutExpires: once the timeout expires, reads and Commit fail with
// transaction_timed_out, and OnError returns it (timebomb sets
// resetPromise; RYWImpl::onError throws resetPromise's error:
// fdbclient/ReadYourWrites.actor.cpp).
func testTimeoutExpires(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetTimeout(time.Second), "SetTimeout")
	tr.Set(f.key("b"), []byte("x"))
	f.h.AdvanceTime(2 * time.Second)
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrTransactionTimedOut, "Get after the timeout expired")
	err = tr.Commit()
	requireCode(t, err, kv.ErrTransactionTimedOut, "Commit after the timeout expired")
	f.requireAbsent(t, f.key("b"), "a timed-out transaction must apply nothing")
	requireCode(t, tr.OnError(err), kv.ErrTransactionTimedOut, "OnError must not retry transaction_timed_out")
}

// testTimeoutNotYetExpired: before it, the transaction works (timebomb
// fires at creationTime + timeout: fdbclient/ReadYourWrites.actor.cpp).
func testTimeoutNotYetExpired(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetTimeout(3*time.Second))
	f.h.AdvanceTime(2 * time.Second)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "a read before the timeout must succeed")
	tr.Set(f.key("b"), []byte("x"))
	commit(t, tr, "a commit before the timeout must succeed")
}

// testTimeoutZeroDisables: timeout 0 removes the timebomb
// (ReadYourWritesTransaction::resetTimeout, fdbclient/ReadYourWrites.actor.cpp).
func testTimeoutZeroDisables(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetTimeout(time.Second))
	require.NoError(t, tr.Options().SetTimeout(0))
	f.h.AdvanceTime(2 * time.Second)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "SetTimeout(0) must disable the timeout")
}

// testTimeoutSpansRetries: OnError keeps creationTime and re-applies the
// timeout (resetRyow, applyPersistentOptions: fdbclient/ReadYourWrites.actor.cpp),
// so time spent in retries counts.
func testTimeoutSpansRetries(t *testing.T, f *fixture) {
	f.seed(t, "a")
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		if err := tr.Options().SetTimeout(time.Second); err != nil {
			return err
		}
		f.h.AdvanceTime(600 * time.Millisecond)
		if run == 1 {
			return kv.ErrNotCommitted
		}
		_, err := tr.Get(f.key("a")).Get()
		return err
	})
	requireCode(t, err, kv.ErrTransactionTimedOut, "Transact whose runs together outlast the 1 s timeout")
	require.Equal(t, 2, runs, "the second run must hit the timeout: time spent in retries counts")
}

// testTimeoutCountsFromCreation: the timeout counts from the
// transaction's creation, not from SetTimeout or the first read: FDB's
// timebomb fires at creationTime + timeout (ReadYourWritesTransaction::
// resetTimeout, fdbclient/ReadYourWrites.actor.cpp; the constructor and
// reset set creationTime), so a timeout set once that much time has passed
// cancels the transaction at once.
func testTimeoutCountsFromCreation(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	tr.Set(f.key("b"), []byte("x"))
	f.h.AdvanceTime(2 * time.Second)
	require.NoError(t, tr.Options().SetTimeout(time.Second), "SetTimeout")
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrTransactionTimedOut, "a read after a 1 s timeout set 2 s after the creation")
	requireCode(t, tr.Commit(), kv.ErrTransactionTimedOut, "the Commit")
	f.requireAbsent(t, f.key("b"), "a timed-out transaction must apply nothing")
}

// testMaxRetryDelayCapsBackoff: max_retry_delay caps the backoff
// (Transaction::getBackoff, options.maxBackoff: fdbclient/NativeAPI.actor.cpp).
func testMaxRetryDelayCapsBackoff(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetMaxRetryDelay(time.Millisecond), "SetMaxRetryDelay")
	const retries = 20
	start := time.Now()
	for i := range retries {
		require.NoError(t, tr.OnError(kv.ErrNotCommitted), "OnError %d", i)
	}
	// Uncapped, 20 exponential backoffs from about 10 ms would take well
	// over 10 s; capped at 1 ms they take about 20 ms.
	require.Less(t, time.Since(start), 5*time.Second, "%d retries with max_retry_delay 1 ms took too long: the option must cap the backoff", retries)
}

// testFailedOnErrorCancels: an OnError that returns its error (not
// retryable, or the retry limit reached) leaves the transaction cancelled
// until Reset (RYWImpl::onError, fdbclient/ReadYourWrites.actor.cpp: from API
// version 610 its catch sends transaction_cancelled to resetPromise).
func testFailedOnErrorCancels(t *testing.T, f *fixture) {
	for _, tc := range []struct {
		name  string
		limit int
		err   error
	}{
		{"NotRetryable", -1, kv.ErrKeyTooLarge},
		{"RetryLimit", 0, kv.ErrNotCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := f.key(tc.name)
			tr := f.newTx(t)
			require.NoError(t, tr.Options().SetRetryLimit(tc.limit))
			require.ErrorIs(t, tr.OnError(tc.err), tc.err, "OnError returns the error it cannot retry")
			_, err := tr.Get(key).Get()
			requireCode(t, err, kv.ErrTransactionCancelled, "a read after OnError returned an error")
			tr.Set(key, []byte("x"))
			requireCode(t, tr.Commit(), kv.ErrTransactionCancelled, "a commit after OnError returned an error")
			f.requireAbsent(t, key, "the cancelled transaction wrote nothing")
			tr.Reset()
			tr.Set(key, []byte("x"))
			commit(t, tr, "Reset makes the transaction usable again")
		})
	}
}

// testInvalidOptionValues: values outside FDB's ranges (extractIntOption in
// ReadYourWritesTransaction::setOptionImpl and Transaction::setOption,
// fdbclient/: timeout and max_retry_delay 0 to MaxInt32 milliseconds,
// retry_limit -1 to MaxInt32) return invalid_option_value and change
// nothing. (A kv rule in part: FDB's C API reports the error at the
// transaction's next operation, ThreadSafeTransaction::setOption deferring
// it; kv backends check first.)
func testInvalidOptionValues(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	o := tr.Options()
	over := time.Duration(math.MaxInt32+1) * time.Millisecond
	requireCode(t, o.SetTimeout(-time.Millisecond), kv.ErrInvalidOptionValue, "a negative timeout")
	requireCode(t, o.SetTimeout(over), kv.ErrInvalidOptionValue, "a timeout over MaxInt32 ms")
	requireCode(t, o.SetMaxRetryDelay(-time.Millisecond), kv.ErrInvalidOptionValue, "a negative retry delay")
	requireCode(t, o.SetMaxRetryDelay(over), kv.ErrInvalidOptionValue, "a retry delay over MaxInt32 ms")
	requireCode(t, o.SetRetryLimit(-2), kv.ErrInvalidOptionValue, "a retry limit below -1")
	if math.MaxInt > math.MaxInt32 {
		requireCode(t, o.SetRetryLimit(math.MaxInt32+1), kv.ErrInvalidOptionValue, "a retry limit over MaxInt32")
	}
	require.NoError(t, o.SetTimeout(time.Duration(math.MaxInt32)*time.Millisecond), "the largest timeout")
	require.NoError(t, o.SetRetryLimit(math.MaxInt32), "the largest retry limit")
	tr.Set(f.key("a"), []byte("x"))
	commit(t, tr, "a transaction whose invalid option values were refused")
}
