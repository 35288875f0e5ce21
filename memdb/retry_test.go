package memdb_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestOnErrorRetriesRetryableErrorsOnly(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	for _, err := range []error{kv.ErrTransactionTooOld, kv.ErrFutureVersion, kv.ErrNotCommitted,
		kv.ErrCommitUnknownResult, kv.ErrProcessBehind, kv.ErrTagThrottled} {
		require.NoError(t, tr.OnError(err), "%v is retryable", err)
	}
	require.Nil(t, get(t, tr, "k"), "OnError resets the transaction")
	require.Equal(t, int64(6), db.Stats().Retries)
	for _, err := range []error{kv.ErrTransactionCancelled, kv.ErrTransactionTimedOut, kv.ErrKeyTooLarge,
		kv.ErrInvertedRange, errors.New("application error"), kv.CommitInterrupted(kv.ErrTransactionCancelled)} {
		tr.Reset() // a failed OnError leaves the transaction cancelled (below)
		require.Equal(t, err, tr.OnError(err), "non-retryable errors come back unchanged")
	}
	require.Equal(t, int64(6), db.Stats().Retries)
}

// TestFailedOnErrorCancels: an OnError that returns its error, because the
// error is not retryable or the retry limit is reached, leaves the
// transaction cancelled until Reset, as FDB's does from API version 610
// (RYWImpl::onError, fdbclient/ReadYourWrites.actor.cpp: the catch sends
// transaction_cancelled to resetPromise; a later OnError then throws that).
func TestFailedOnErrorCancels(t *testing.T) {
	db, _ := newDB(t)
	for _, tc := range []struct {
		name  string
		limit int
		err   error
	}{
		{"not retryable", -1, kv.ErrKeyTooLarge},
		{"retry limit", 0, kv.ErrNotCommitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTx(t, db)
			require.NoError(t, tr.Options().SetRetryLimit(tc.limit))
			require.ErrorIs(t, tr.OnError(tc.err), tc.err)
			_, err := tr.Get([]byte("k")).Get()
			require.ErrorIs(t, err, kv.ErrTransactionCancelled, "a read after the failed OnError")
			tr.Set([]byte("k"), []byte("v"))
			require.ErrorIs(t, tr.Commit(), kv.ErrTransactionCancelled, "a commit after the failed OnError")
			require.ErrorIs(t, tr.OnError(kv.ErrNotCommitted), kv.ErrTransactionCancelled, "OnError of a cancelled transaction")
			tr.Reset()
			tr.Set([]byte("k"), []byte("v"))
			require.NoError(t, tr.Commit(), "Reset makes the transaction usable again")
		})
	}
}

func TestRetryLimitSurvivesOnErrorResetButNotReset(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetRetryLimit(2))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted))
	require.ErrorIs(t, tr.OnError(kv.ErrNotCommitted), kv.ErrNotCommitted, "the third retry exceeds the limit")
	tr.Reset()
	for range 5 {
		require.NoError(t, tr.OnError(kv.ErrNotCommitted), "Reset clears the retry limit, as FDB's reset clears every option")
	}
}

func TestTransactGivesUpAtRetryLimit(t *testing.T) {
	db, _ := newDB(t, memdb.WithFaults(memdb.Faults{NotCommitted: 1}))
	runs := 0
	err := db.Transact(t.Context(), func(tr kv.Transaction) error {
		runs++
		require.NoError(t, tr.Options().SetRetryLimit(3))
		tr.Set([]byte("k"), []byte("v"))
		return nil
	})
	require.ErrorIs(t, err, kv.ErrNotCommitted)
	require.Equal(t, 4, runs, "one run and three retries")
}

// TestMaxRetryDelayCapsBackoff: the option caps the DB's backoff (an hour
// here), and 0 is a cap of 0, not "no option" (Transaction::getBackoff,
// fdbclient/NativeAPI.actor.cpp, takes the minimum with
// options.maxBackoff whatever its value).
func TestMaxRetryDelayCapsBackoff(t *testing.T) {
	for _, capDelay := range []time.Duration{time.Microsecond, 0} {
		db, _ := newDB(t, memdb.WithBackoff(time.Hour, time.Hour))
		tr := newTx(t, db)
		require.NoError(t, tr.Options().SetMaxRetryDelay(capDelay))
		done := make(chan error, 1)
		go func() { done <- tr.OnError(kv.ErrNotCommitted) }()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(time.Minute):
			t.Fatalf("OnError ignored a max retry delay of %v", capDelay)
		}
	}
}

// transaction_too_old and future_version are retried after FDB's fixed
// FUTURE_VERSION_RETRY_DELAY (10 ms), not after the growing, randomized
// backoff of the other retryable errors (Transaction::onError,
// fdbclient/NativeAPI.actor.cpp; fdbclient/ClientKnobs.cpp): with an
// hour-long backoff, five in a row retry at once.
func TestTooOldAndFutureVersionRetryAfterAFixedDelay(t *testing.T) {
	for _, code := range []kv.Error{kv.ErrTransactionTooOld, kv.ErrFutureVersion} {
		t.Run(code.Error(), func(t *testing.T) {
			db, _ := newDB(t, memdb.WithBackoff(time.Hour, time.Hour))
			tr := newTx(t, db)
			done := make(chan error, 1)
			go func() {
				for range 5 {
					if err := tr.OnError(code); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(time.Minute):
				t.Fatalf("OnError(%v) waited out the hour-long backoff", code)
			}
		})
	}
}

func TestBackoffAbortsWhenContextEnds(t *testing.T) {
	db, _ := newDB(t, memdb.WithBackoff(time.Hour, time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- tr.OnError(kv.ErrNotCommitted) }()
	cancel()
	require.ErrorIs(t, <-done, kv.ErrTransactionCancelled)
}

func TestTransactReturnsContextError(t *testing.T) {
	db, _ := newDB(t, memdb.WithBackoff(time.Hour, time.Hour), memdb.WithFaults(memdb.Faults{NotCommitted: 1}))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	started := make(chan struct{}, 1)
	go func() {
		done <- db.Transact(ctx, func(tr kv.Transaction) error {
			select {
			case started <- struct{}{}:
			default:
			}
			tr.Set([]byte("k"), []byte("v"))
			return nil
		})
	}()
	<-started
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled, "Transact's error matches ctx.Err()")
	// It also carries the last transaction error: the conflict, or the
	// cancellation if the backoff was under way.
	require.True(t, errors.Is(err, kv.ErrTransactionCancelled) || errors.Is(err, kv.ErrNotCommitted), "got %v", err)
}

func TestContextCancelsTransaction(t *testing.T) {
	db, _ := newDB(t)
	ctx, cancel := context.WithCancel(t.Context())
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	get(t, tr, "k")
	cancel()
	require.Eventually(t, func() bool {
		_, err := tr.Get([]byte("k")).Get()
		return errors.Is(err, kv.ErrTransactionCancelled)
	}, time.Minute, time.Millisecond, "context.AfterFunc cancels the transaction")
	tr.Reset()
	_, err = tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled, "Reset cannot revive a transaction whose context ended")
}

func TestCancelAndReset(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	tr.Cancel()
	require.ErrorIs(t, tr.Commit(), kv.ErrTransactionCancelled)
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled)
	tr.Reset()
	require.Nil(t, get(t, tr, "k"), "after Reset the transaction works again, without its old writes")
}

func TestTimeoutOnTheClock(t *testing.T) {
	db, clk := newDB(t)
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetTimeout(time.Second))
	get(t, tr, "k")
	require.NoError(t, tr.OnError(kv.ErrNotCommitted))
	clk.Advance(1100 * time.Millisecond)
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTimedOut, "the timeout counts from creation, retries included")
	require.ErrorIs(t, tr.OnError(kv.ErrNotCommitted), kv.ErrTransactionTimedOut)
	tr.Reset()
	require.NoError(t, tr.Options().SetTimeout(time.Second)) // Reset cleared it
	get(t, tr, "k")                                          // and restarted the clock
	tr.Reset()
	clk.Advance(time.Hour)
	_, err = tr.GetReadVersion().Get()
	require.NoError(t, err, "Reset cleared the timeout")
}

func TestTimeoutInRealTimeInterruptsWaits(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Hour, Max: time.Hour}}))
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetTimeout(5*time.Millisecond))
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTimedOut)
}

// commitTimingOut commits a blind write of k on a database with latency
// lat, in a transaction whose timeout is timeout.
func commitTimingOut(t *testing.T, lat memdb.Latency, timeout time.Duration) (*memdb.DB, error) {
	t.Helper()
	db, _ := newDB(t, memdb.WithLatency(lat))
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetTimeout(timeout))
	tr.Set([]byte("k"), []byte("v"))
	return db, tr.Commit()
}

func TestCommitInterruptedByTimeoutMayHaveApplied(t *testing.T) {
	db, err := commitTimingOut(t, memdb.Latency{Commit: memdb.Span{Min: time.Hour, Max: time.Hour}}, 5*time.Millisecond)
	require.ErrorIs(t, err, kv.ErrTransactionTimedOut)
	require.True(t, kv.MaybeCommitted(err), "a commit in flight when the timeout hit may have applied")
	require.Equal(t, int64(1), db.Stats().Interrupted)
}

func TestCommitInterruptedByCancellationAppliesOrNot(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Commit: memdb.Span{Min: time.Hour, Max: time.Hour}}))
	const n = 40
	for i := range n {
		ctx, cancel := context.WithCancel(t.Context())
		tr, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		tr.Add([]byte("applied"), le64(1))
		done := make(chan error, 1)
		go func() { done <- tr.Commit() }()
		require.Eventually(t, func() bool { return db.Stats().CommitsInFlight == 1 }, time.Minute, 100*time.Microsecond)
		cancel()
		err = <-done
		require.ErrorIs(t, err, kv.ErrTransactionCancelled, "round %d", i)
		require.True(t, kv.MaybeCommitted(err))
		// OnError returns the error it is given when it does not retry
		// (kv.Transaction.OnError), maybe committed still.
		oerr := tr.OnError(err)
		require.ErrorIs(t, oerr, kv.ErrTransactionCancelled, "OnError of the interrupted commit")
		require.True(t, kv.MaybeCommitted(oerr), "OnError must keep the interrupted commit's uncertainty")
	}
	st := db.Stats()
	require.Equal(t, int64(n), st.Interrupted)
	require.Greater(t, st.Commits, int64(0), "some interrupted commits applied")
	require.Less(t, st.Commits, int64(n), "and some did not")
	v, _ := mustGet(t, db, "applied")
	require.Equal(t, le64(st.Commits), []byte(v), "exactly the counted ones applied")
}

// TestTimeoutNotYetAtItsEnd: the transaction times out only once more
// than its timeout has passed since its creation. FDB's timebomb waits
// while now() < creationTime + timeout, waking at the earliest 0.1 ms
// past that end (delayUntil(endTime + 0.0001)), and only then fails the
// transaction with transaction_timed_out (fdbclient/ReadYourWrites.actor.cpp).
func TestTimeoutNotYetAtItsEnd(t *testing.T) {
	db, clk := newDB(t)
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetTimeout(time.Minute)) // in real time too: far off
	clk.Advance(time.Minute)
	get(t, tr, "k") // exactly at the end: not timed out yet
	clk.Advance(time.Millisecond)
	_, err := tr.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTimedOut, "1 ms past the end")
}

// TestRaisedMaxRetryDelayGrowsFromTheOldCap: the backoff is kept capped.
// FDB's Transaction::getBackoff sets the next backoff to min(backoff ×
// growth, maxBackoff) (fdbclient/NativeAPI.actor.cpp), so after many
// retries under a small max_retry_delay, a larger one set later lets the
// backoff grow from the old cap, not from where doubling on and on would
// have taken it.
func TestRaisedMaxRetryDelayGrowsFromTheOldCap(t *testing.T) {
	db, _ := newDB(t) // initial backoff 10 µs
	tr := newTx(t, db)
	require.NoError(t, tr.Options().SetMaxRetryDelay(time.Millisecond))
	for range 40 { // uncapped, 10 µs would double to about 127 days
		require.NoError(t, tr.OnError(kv.ErrNotCommitted))
	}
	require.NoError(t, tr.Options().SetMaxRetryDelay(time.Hour))
	done := make(chan error, 1)
	go func() { done <- tr.OnError(kv.ErrNotCommitted) }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second): // a failure guard, not a wait for an event
		tr.Cancel()
		t.Fatal("the retry after raising the cap waits far longer than the old 1 ms cap")
	}
}
