package fdbkv

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// These tests drive the race between a transaction's commit and its
// cancellation (by its context or Cancel) through every order, with a fake
// in place of the fdb.Transaction. The fake models what libfdb_c does
// (RYWImpl::commit and ReadYourWritesTransaction::cancel,
// fdbclient/ReadYourWrites.actor.cpp): a commit requested after the
// cancellation reached FDB fails with transaction_cancelled (1025) and is
// not sent; a commit requested before is sent, and a cancellation arriving
// while it is in flight fails it with 1025 although it may be applied.
// The fake's hooks block inside its calls so that each order is forced,
// without sleeps.

// fakeFDB is the FDB side of a transaction.
type fakeFDB struct {
	mu        sync.Mutex
	events    []string // "commit sent", "commit refused", "cancel", "reset", in FDB's order
	cancelled bool     // FDB has the cancellation (until a reset)
	// timedOut says the transaction's timeout fired (FDB's timebomb set
	// resetPromise to transaction_timed_out): a commit fails with 1031
	// without being sent (ReadYourWritesTransaction::commit).
	timedOut bool
	inFlight *fakeCommit

	// cancelEntered, when set, is closed when Cancel is called, before the
	// cancellation reaches FDB; Cancel then waits for cancelRelease.
	cancelEntered, cancelRelease chan struct{}
	// cancelDone, when set, is closed once the cancellation reached FDB.
	cancelDone chan struct{}
	// commitSent, when set, is closed when a commit is sent.
	commitSent chan struct{}
	// holdCommit makes a sent commit stay in flight until resolved.
	holdCommit bool
	// failCommit, when set, fails Commit with it before anything is sent,
	// as FDB fails it with a deferred error (ThreadSafeTransaction::commit
	// calls checkDeferredError) or a failed read (RYWImpl::commit waits
	// for the reads) before its native commit runs.
	failCommit error
	// onErrorResult is FDB's answer to OnError (nil: retry).
	onErrorResult func(fdb.Error) error
}

var _ control = (*fakeFDB)(nil)

func (f *fakeFDB) record(e string) { f.events = append(f.events, e) }

func (f *fakeFDB) Commit() fdb.FutureNil {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := &fakeCommit{done: make(chan struct{})}
	if f.cancelled || f.timedOut {
		f.record("commit refused")
		code := 1025
		if !f.cancelled {
			code = 1031
		}
		c.resolve(fdb.Error{Code: code})
		return c
	}
	if f.failCommit != nil {
		f.record("commit failed")
		c.resolve(f.failCommit)
		return c
	}
	f.record("commit sent")
	if f.commitSent != nil {
		close(f.commitSent)
		f.commitSent = nil
	}
	if f.holdCommit {
		f.inFlight = c
	} else {
		c.resolve(nil)
	}
	return c
}

func (f *fakeFDB) Cancel() {
	f.mu.Lock()
	entered, release := f.cancelEntered, f.cancelRelease
	f.cancelEntered = nil // only the first Cancel is held
	f.mu.Unlock()
	if entered != nil {
		close(entered)
		<-release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("cancel")
	f.cancelled = true
	if f.inFlight != nil {
		// The commit's future fails at once; the commit itself goes on.
		f.inFlight.resolve(fdb.Error{Code: 1025})
		f.inFlight = nil
	}
	if f.cancelDone != nil {
		close(f.cancelDone)
		f.cancelDone = nil
	}
}

func (f *fakeFDB) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("reset")
	f.cancelled = false
}

// OnError answers with onErrorResult, recording the code it got.
func (f *fakeFDB) OnError(e fdb.Error) fdb.FutureNil {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record(fmt.Sprintf("onError %d", e.Code))
	c := &fakeCommit{done: make(chan struct{})}
	c.resolve(f.onErrorResult(e))
	return c
}

func (f *fakeFDB) sent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.events {
		if e == "commit sent" {
			return true
		}
	}
	return false
}

// fakeCommit is the future of a commit.
type fakeCommit struct {
	done chan struct{}
	err  error
}

func (c *fakeCommit) resolve(err error) { c.err = err; close(c.done) }
func (c *fakeCommit) Get() error        { <-c.done; return c.err }
func (c *fakeCommit) MustGet() {
	if err := c.Get(); err != nil {
		panic(err)
	}
}
func (c *fakeCommit) BlockUntilReady() { <-c.done }
func (c *fakeCommit) IsReady() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}
func (c *fakeCommit) Cancel() {}

// newFakeTransaction returns a transaction over f, cancelled when ctx ends
// exactly as Database.CreateTransaction arranges it.
func newFakeTransaction(t *testing.T, ctx context.Context, f *fakeFDB) *transaction {
	tx := &transaction{state: &txState{ctl: f, ctx: ctx}}
	stop := tx.state.watchContext()
	t.Cleanup(func() { stop() })
	return tx
}

// checkCommitOutcome asserts the invariant of defect 11: a commit that was
// sent and failed is reported as maybe committed; one that was not sent
// fails with plain transaction_cancelled.
func checkCommitOutcome(t *testing.T, f *fakeFDB, err error) {
	t.Helper()
	if f.sent() {
		if err != nil && !kv.MaybeCommitted(err) {
			t.Errorf("the commit was sent and may have been applied, but Commit = %v with kv.MaybeCommitted false (events %v)", err, f.events)
		}
		return
	}
	if !errors.Is(err, kv.ErrTransactionCancelled) || kv.MaybeCommitted(err) {
		t.Errorf("no commit was sent, Commit = %v (maybe committed %v), want plain transaction_cancelled (events %v)", err, kv.MaybeCommitted(err), f.events)
	}
}

// TestCommitWhileContextCancelling is the interleaving of defect 11: the
// context's watcher has marked the transaction cancelled but has not yet
// told FDB when Commit runs. The old adapter read the mark, sent the commit
// anyway and reported its failure as plain 1025.
func TestCommitWhileContextCancelling(t *testing.T) {
	entered, release, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f := &fakeFDB{cancelEntered: entered, cancelRelease: release, cancelDone: done}
	ctx, cancel := context.WithCancel(t.Context())
	tx := newFakeTransaction(t, ctx, f)

	cancel()
	<-entered // the watcher is between its mark and FDB's cancel
	err := tx.Commit()
	close(release)
	<-done

	if f.sent() {
		t.Errorf("Commit sent the commit of a transaction it saw cancelled (events %v)", f.events)
	}
	checkCommitOutcome(t, f, err)
}

// TestContextCancelledWhileCommitInFlight: the commit was sent, then the
// context ended; the commit fails with 1025 but may have been applied.
func TestContextCancelledWhileCommitInFlight(t *testing.T) {
	sent, done := make(chan struct{}), make(chan struct{})
	f := &fakeFDB{holdCommit: true, commitSent: sent, cancelDone: done}
	ctx, cancel := context.WithCancel(t.Context())
	tx := newFakeTransaction(t, ctx, f)

	result := make(chan error, 1)
	go func() { result <- tx.Commit() }()
	<-sent
	cancel()
	<-done
	err := <-result

	if !f.sent() {
		t.Fatalf("the commit was not sent (events %v)", f.events)
	}
	if !errors.Is(err, kv.ErrTransactionCancelled) || !kv.MaybeCommitted(err) {
		t.Errorf("Commit = %v, want transaction_cancelled marked maybe committed", err)
	}
	checkCommitOutcome(t, f, err)
}

// TestCommitAfterContextCancelled: the cancellation completed before
// Commit; nothing is sent.
func TestCommitAfterContextCancelled(t *testing.T) {
	done := make(chan struct{})
	f := &fakeFDB{cancelDone: done}
	ctx, cancel := context.WithCancel(t.Context())
	tx := newFakeTransaction(t, ctx, f)

	cancel()
	<-done
	err := tx.Commit()
	if f.sent() {
		t.Errorf("a cancelled transaction sent its commit (events %v)", f.events)
	}
	checkCommitOutcome(t, f, err)
}

// TestExplicitCancelThenCommit: Cancel, then Commit: nothing is sent.
func TestExplicitCancelThenCommit(t *testing.T) {
	f := &fakeFDB{}
	tx := newFakeTransaction(t, t.Context(), f)
	tx.Cancel()
	err := tx.Commit()
	if f.sent() {
		t.Errorf("a cancelled transaction sent its commit (events %v)", f.events)
	}
	checkCommitOutcome(t, f, err)
}

// TestResetAfterContextEndedStaysCancelled: FDB's Reset undoes a
// cancellation (ReadYourWritesTransaction::resetRyow replaces the reset
// promise), so a loop that resets a transaction whose context has ended
// would otherwise run and commit a whole new attempt. The old adapter
// cleared its mark and FDB's cancellation both.
func TestResetAfterContextEndedStaysCancelled(t *testing.T) {
	done := make(chan struct{})
	f := &fakeFDB{cancelDone: done}
	ctx, cancel := context.WithCancel(t.Context())
	tx := newFakeTransaction(t, ctx, f)

	cancel()
	<-done
	tx.Reset()
	f.mu.Lock()
	fdbCancelled := f.cancelled
	f.mu.Unlock()
	if !fdbCancelled {
		t.Errorf("after Reset of a transaction whose context ended, FDB's transaction is not cancelled (events %v)", f.events)
	}
	err := tx.Commit()
	if f.sent() {
		t.Errorf("a transaction whose context ended sent a commit after Reset (events %v)", f.events)
	}
	checkCommitOutcome(t, f, err)
}

// TestResetUndoesCancel: with its context alive, Reset makes a cancelled
// transaction usable again, as in FDB.
func TestResetUndoesCancel(t *testing.T) {
	f := &fakeFDB{}
	tx := newFakeTransaction(t, t.Context(), f)
	tx.Cancel()
	tx.Reset()
	if err := tx.Commit(); err != nil || !f.sent() {
		t.Errorf("Commit after Cancel and Reset = %v, sent %v; want nil, sent (events %v)", err, f.sent(), f.events)
	}
}

// TestWrapTransactionNeverCancelledByContext: a wrapped transaction has no
// context of its own; Reset does not cancel it.
func TestWrapTransactionNeverCancelledByContext(t *testing.T) {
	f := &fakeFDB{}
	tx := wrapTransaction(fdb.Transaction{}) // the fake below stands for the handle
	tx.state.ctl = f
	tx.Reset()
	if err := tx.Commit(); err != nil || !f.sent() {
		t.Errorf("Commit of a wrapped transaction after Reset = %v, sent %v; want nil, sent", err, f.sent())
	}
}

// TestOnErrorHandsTheCodeToFDB: OnError asks FDB with the error's code and
// keeps the caller's error (and its maybe-committed mark) when FDB gives
// the same code back.
func TestOnErrorHandsTheCodeToFDB(t *testing.T) {
	retryable := map[int]bool{1020: true, 1021: true}
	f := &fakeFDB{onErrorResult: func(e fdb.Error) error {
		if retryable[e.Code] {
			return nil
		}
		if e.Code == 1007 {
			return fdb.Error{Code: 1031} // e.g. the timeout expired during the backoff
		}
		return e
	}}
	tx := newFakeTransaction(t, t.Context(), f)

	if err := tx.OnError(fmt.Errorf("layer: %w", kv.ErrNotCommitted)); err != nil {
		t.Errorf("OnError(not_committed) = %v, want nil (retry)", err)
	}
	if err := tx.OnError(translateError(fdb.Error{Code: 1021})); err != nil {
		t.Errorf("OnError(commit_unknown_result) = %v, want nil (retry)", err)
	}
	interrupted := kv.CommitInterrupted(translateError(fdb.Error{Code: 1025}))
	if err := tx.OnError(interrupted); err != interrupted || !kv.MaybeCommitted(err) {
		t.Errorf("OnError(interrupted commit) = %v, want the same error back, still maybe committed", err)
	}
	if err := tx.OnError(kv.ErrTransactionTooOld); !errors.Is(err, kv.ErrTransactionTimedOut) {
		t.Errorf("OnError when FDB answers another code = %v, want that code (1031)", err)
	}
	n := len(f.events)
	plain := errors.New("application error")
	if err := tx.OnError(plain); err != plain || len(f.events) != n {
		t.Errorf("OnError(application error) = %v and called FDB %d times; want the error back without FDB", err, len(f.events)-n)
	}
	want := []string{"onError 1020", "onError 1021", "onError 1025", "onError 1007"}
	if fmt.Sprint(f.events) != fmt.Sprint(want) {
		t.Errorf("FDB got %v, want %v", f.events, want)
	}
}

// TestOptionsRejectBadValuesBeforeFDB: out-of-range option values fail
// with kv.ErrInvalidOptionValue before the binding is called. The options
// here have no transaction behind them (a zero fdb.TransactionOptions),
// so a call into the binding would not return this error (against real
// libfdb_c it would crash); only the check in Go can.
func TestOptionsRejectBadValuesBeforeFDB(t *testing.T) {
	o := wrapTransaction(fdb.Transaction{}).Options()
	for name, err := range map[string]error{
		"SetTimeout(-1ns)":         o.SetTimeout(-time.Nanosecond),
		"SetTimeout(over INT_MAX)": o.SetTimeout(time.Duration(math.MaxInt32+1) * time.Millisecond),
		"SetMaxRetryDelay(-1s)":    o.SetMaxRetryDelay(-time.Second),
		"SetMaxRetryDelay(MaxInt)": o.SetMaxRetryDelay(time.Duration(math.MaxInt64)),
		"SetRetryLimit(-2)":        o.SetRetryLimit(-2),
		"SetRetryLimit(MinInt32)":  o.SetRetryLimit(math.MinInt32),
	} {
		if !errors.Is(err, kv.ErrInvalidOptionValue) {
			t.Errorf("%s = %v, want kv.ErrInvalidOptionValue", name, err)
		}
	}
}

// TestTimeoutBeforeCommitIsMaybeCommitted: a timeout that fired before
// Commit was called fails the commit with transaction_timed_out without
// sending it (ReadYourWritesTransaction::commit returns resetPromise's
// error). FDB's error does not say so, and only fdbkv's own cancellation is
// known not to send: the error is reported, on the safe side, as maybe
// committed.
func TestTimeoutBeforeCommitIsMaybeCommitted(t *testing.T) {
	f := &fakeFDB{timedOut: true}
	tx := newFakeTransaction(t, t.Context(), f)
	err := tx.Commit()
	if f.sent() {
		t.Fatalf("the fake sent a commit after its timeout (events %v)", f.events)
	}
	if !errors.Is(err, kv.ErrTransactionTimedOut) || !kv.MaybeCommitted(err) {
		t.Errorf("Commit after the timeout fired = %v (maybe committed %v), want transaction_timed_out, maybe committed", err, kv.MaybeCommitted(err))
	}
}

// multiVersionOnError models FDB's OnError as libfdb_c runs it, through
// MultiVersionTransaction::onError (fdbclient/
// MultiVersionTransaction.actor.cpp): cluster_version_changed (1039)
// replaces the inner transaction with a new one, not cancelled, and
// succeeds; any other code goes to the inner RYWImpl::onError, which
// fails with transaction_cancelled when the transaction is cancelled
// (fdbclient/ReadYourWrites.actor.cpp) and otherwise retries. It runs with
// f.mu held.
func multiVersionOnError(f *fakeFDB) func(fdb.Error) error {
	return func(e fdb.Error) error {
		if e.Code == kv.ErrClusterVersionChanged.Code {
			f.record("new inner transaction")
			f.cancelled = false
			return nil
		}
		if f.cancelled {
			return fdb.Error{Code: kv.ErrTransactionCancelled.Code}
		}
		return nil
	}
}

// TestOnErrorKeepsACancelledTransactionCancelled: OnError of a
// transaction cancelled by Cancel or by its context fails with
// transaction_cancelled and leaves FDB's transaction cancelled, whatever
// the code. The old adapter returned nil for cluster_version_changed,
// whose retry under the multi-version client is a new inner transaction,
// not cancelled: the loop's next attempt ran its reads past the ended
// context (only the commit was still refused).
func TestOnErrorKeepsACancelledTransactionCancelled(t *testing.T) {
	for _, how := range []string{"Cancel", "context"} {
		for _, code := range []kv.Error{kv.ErrClusterVersionChanged, kv.ErrNotCommitted} {
			t.Run(fmt.Sprintf("%s/%d", how, code.Code), func(t *testing.T) {
				done := make(chan struct{})
				f := &fakeFDB{cancelDone: done}
				f.onErrorResult = multiVersionOnError(f)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				tx := newFakeTransaction(t, ctx, f)
				if how == "Cancel" {
					tx.Cancel()
				} else {
					cancel()
					<-done
				}

				err := tx.OnError(fmt.Errorf("layer: %w", code))
				if !errors.Is(err, kv.ErrTransactionCancelled) {
					t.Errorf("OnError(%v) of a cancelled transaction = %v, want transaction_cancelled", code, err)
				}
				f.mu.Lock()
				fdbCancelled := f.cancelled
				f.mu.Unlock()
				if !fdbCancelled {
					t.Errorf("after OnError(%v), FDB's transaction is no longer cancelled: the next attempt's reads would run (events %v)", code, f.events)
				}
				if err := tx.Commit(); f.sent() {
					t.Errorf("Commit after OnError of a cancelled transaction sent a commit (%v; events %v)", err, f.events)
				}
			})
		}
	}
}
