package fdbkv

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// These tests hold fdbkv to kv's promise for the watches of an attempt
// that does not commit (kv.Transaction.Cancel, Watch): they fail, with
// the cancellation's error or the failed commit's. The fake watch future
// stands for a watch whose read completed: FDB has handed it to the
// native transaction, and only that transaction's commit, reset or
// destruction would fail it (RYWImpl::watch,
// fdbclient/ReadYourWrites.actor.cpp; commitAndWatch,
// Transaction::resetImpl, ~Transaction, fdbclient/NativeAPI.actor.cpp).
// None of the cases of TestWatchesOfAnAttemptThatDoesNotCommitFail runs
// them, and the binding keeps the transaction alive while the watch's
// future is: the old adapter left those watches pending until their own
// Cancel. The other tests guard the bookkeeping that decides which
// watches fdbkv fails (FDB's reset fails a retried attempt's watches
// itself; the fake does not).

// resolvedNow returns the watch's outcome if it has one already, without
// blocking: Wait with an ended context returns the context's error for a
// watch still pending.
func resolvedNow(w *watch) (error, bool) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := w.Wait(ctx)
	if errors.Is(err, context.Canceled) {
		return nil, false
	}
	return err, true
}

// watchIn makes a watch in tx over a fake future, as transaction.Watch
// does over the binding's.
func watchIn(tx *transaction) (*watch, *fakeWatchFuture) {
	f := newFakeWatchFuture()
	w := newWatch(f)
	tx.state.track(w.s)
	return w, f
}

func TestWatchesOfAnAttemptThatDoesNotCommitFail(t *testing.T) {
	tooLarge := translateError(fdb.Error{Code: kv.ErrKeyTooLarge.Code})
	for _, tc := range []struct {
		name string
		fdb  func() *fakeFDB
		// end ends the attempt; it returns the error the watch must fail
		// with.
		end func(t *testing.T, tx *transaction, f *fakeFDB, cancel context.CancelFunc) kv.Error
	}{
		{"Cancel", func() *fakeFDB { return &fakeFDB{} },
			func(t *testing.T, tx *transaction, f *fakeFDB, _ context.CancelFunc) kv.Error {
				tx.Cancel()
				return kv.ErrTransactionCancelled
			}},
		{"ContextEnds", func() *fakeFDB { return &fakeFDB{cancelDone: make(chan struct{})} },
			func(t *testing.T, tx *transaction, f *fakeFDB, cancel context.CancelFunc) kv.Error {
				done := f.cancelDone
				cancel()
				<-done
				return kv.ErrTransactionCancelled
			}},
		{"CommitFailsBeforeSending", func() *fakeFDB { return &fakeFDB{failCommit: fdb.Error{Code: kv.ErrKeyTooLarge.Code}} },
			func(t *testing.T, tx *transaction, f *fakeFDB, _ context.CancelFunc) kv.Error {
				if err := tx.Commit(); !errors.Is(err, kv.ErrKeyTooLarge) {
					t.Fatalf("Commit = %v, want key_too_large", err)
				}
				return kv.ErrKeyTooLarge
			}},
		{"OnErrorGivesUp", func() *fakeFDB {
			return &fakeFDB{onErrorResult: func(e fdb.Error) error { return e }}
		},
			func(t *testing.T, tx *transaction, f *fakeFDB, _ context.CancelFunc) kv.Error {
				if err := tx.OnError(tooLarge); !errors.Is(err, kv.ErrKeyTooLarge) {
					t.Fatalf("OnError(key_too_large) = %v, want it back", err)
				}
				return kv.ErrTransactionCancelled // FDB leaves it cancelled
			}},
		{"OnErrorAfterTimeout", func() *fakeFDB {
			return &fakeFDB{onErrorResult: func(fdb.Error) error { return fdb.Error{Code: kv.ErrTransactionTimedOut.Code} }}
		},
			func(t *testing.T, tx *transaction, f *fakeFDB, _ context.CancelFunc) kv.Error {
				if err := tx.OnError(kv.ErrTransactionTooOld); !errors.Is(err, kv.ErrTransactionTimedOut) {
					t.Fatalf("OnError after the timeout = %v, want transaction_timed_out", err)
				}
				return kv.ErrTransactionTimedOut
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fdb()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			tx := newFakeTransaction(t, ctx, f)
			w, _ := watchIn(tx)
			want := tc.end(t, tx, f, cancel)
			err, ok := resolvedNow(w)
			if !ok {
				t.Fatalf("the watch of an attempt that ended without committing is still pending (events %v)", f.events)
			}
			if !errors.Is(err, want) {
				t.Errorf("Wait = %v, want %v", err, want)
			}
			var fe fdb.Error
			if !errors.As(err, &fe) || fe.Code != want.Code {
				t.Errorf("Wait = %v, which has no fdb.Error of code %d in its chain", err, want.Code)
			}
		})
	}
}

// TestWatchMadeAfterCancelFails: a watch made in a transaction already
// cancelled fails at once.
func TestWatchMadeAfterCancelFails(t *testing.T) {
	tx := newFakeTransaction(t, t.Context(), &fakeFDB{})
	tx.Cancel()
	w, _ := watchIn(tx)
	if err, ok := resolvedNow(w); !ok || !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("a watch made after Cancel: resolved %v with %v, want transaction_cancelled", ok, err)
	}
}

// TestWatchesOfACommitAreLeftToItsOutcome: once a commit is sent, its
// outcome alone decides its watches. A watch of a commit that succeeded
// belongs to the database: neither a later cancellation nor a Reset
// touches it. One whose commit was interrupted in flight fails with the
// commit's error (kv.Transaction.Watch), not before Commit returns it.
func TestWatchesOfACommitAreLeftToItsOutcome(t *testing.T) {
	t.Run("Committed", func(t *testing.T) {
		f := &fakeFDB{}
		ctx, cancel := context.WithCancel(t.Context())
		tx := newFakeTransaction(t, ctx, f)
		w, fw := watchIn(tx)
		if err := tx.Commit(); err != nil {
			t.Fatalf("Commit = %v", err)
		}
		tx.Cancel()
		cancel()
		tx.Reset()
		if err, ok := resolvedNow(w); ok {
			t.Fatalf("the watch of a committed transaction resolved with %v after Cancel and Reset; it must stay registered", err)
		}
		fw.finish(nil)
		if err := w.Wait(t.Context()); err != nil {
			t.Errorf("the committed watch fired: Wait = %v, want nil", err)
		}
	})
	t.Run("InterruptedInFlight", func(t *testing.T) {
		sent, done := make(chan struct{}), make(chan struct{})
		f := &fakeFDB{holdCommit: true, commitSent: sent, cancelDone: done}
		ctx, cancel := context.WithCancel(t.Context())
		tx := newFakeTransaction(t, ctx, f)
		w, _ := watchIn(tx)
		result := make(chan error, 1)
		go func() { result <- tx.Commit() }()
		<-sent
		cancel()
		<-done
		err := <-result
		if !kv.MaybeCommitted(err) {
			t.Fatalf("Commit = %v, want an interrupted commit", err)
		}
		werr, ok := resolvedNow(w)
		if !ok || !errors.Is(werr, kv.ErrTransactionCancelled) || !kv.MaybeCommitted(werr) {
			t.Errorf("the watch of the interrupted commit: resolved %v with %v, want the commit's error %v", ok, werr, err)
		}
	})
}

// TestWatchesOfARetriedAttemptFail: OnError's retry and Reset start a new
// attempt; the old one's watches fail with transaction_cancelled (as FDB's
// reset fails them), and the new attempt's commit decides only its own.
func TestWatchesOfARetriedAttemptFail(t *testing.T) {
	for _, how := range []string{"OnError", "Reset"} {
		t.Run(how, func(t *testing.T) {
			f := &fakeFDB{onErrorResult: func(fdb.Error) error { return nil }}
			tx := newFakeTransaction(t, t.Context(), f)
			old, _ := watchIn(tx)
			if how == "OnError" {
				if err := tx.OnError(kv.ErrNotCommitted); err != nil {
					t.Fatalf("OnError(not_committed) = %v, want a retry", err)
				}
			} else {
				tx.Reset()
			}
			if err, ok := resolvedNow(old); !ok || !errors.Is(err, kv.ErrTransactionCancelled) {
				t.Errorf("the old attempt's watch: resolved %v with %v, want transaction_cancelled", ok, err)
			}
			w, _ := watchIn(tx)
			if err := tx.Commit(); err != nil || !f.sent() {
				t.Fatalf("the new attempt's Commit = %v (sent %v)", err, f.sent())
			}
			if err, ok := resolvedNow(w); ok {
				t.Errorf("the new attempt's committed watch resolved with %v; it must stay registered", err)
			}
		})
	}
}

// TestWatchFailureIsTheCommitsError: the watches of a commit FDB failed
// before its native commit ran fail with that commit's error, every one.
func TestWatchFailureIsTheCommitsError(t *testing.T) {
	f := &fakeFDB{failCommit: fdb.Error{Code: kv.ErrAccessedUnreadable.Code}}
	tx := newFakeTransaction(t, t.Context(), f)
	var ws []*watch
	for range 3 {
		w, _ := watchIn(tx)
		ws = append(ws, w)
	}
	cerr := tx.Commit()
	for i, w := range ws {
		if err, ok := resolvedNow(w); !ok || err != cerr {
			t.Errorf("watch %d: resolved %v with %v, want the commit's error %v", i, ok, err, cerr)
		}
	}
	if fmt.Sprint(f.events) != "[commit failed]" {
		t.Errorf("FDB got %v, want one failed commit", f.events)
	}
}
