package fdbkv

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// heldOnError is a control whose OnError future stays pending until
// release, as FDB's does during its backoff; Reset fails it with 1025
// only when the test says so (the Go waiter wakes asynchronously).
type heldOnError struct {
	*fakeFDB
	mu     sync.Mutex
	fut    *fakeCommit
	called chan struct{} // closed when OnError is called
}

func (h *heldOnError) OnError(e fdb.Error) fdb.FutureNil {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fut = &fakeCommit{done: make(chan struct{})}
	close(h.called)
	return h.fut
}

// A Commit in flight when the transaction is Reset: the new attempt's
// watch must be decided by the new attempt, not by the stale commit's
// outcome. (Found by an audit of the adapter: txState had no attempt
// generation, so a Commit or OnError waking after a Reset settled the
// next attempt's watches.)
func TestResetDuringCommitLeavesTheNewAttemptsWatchToIt(t *testing.T) {
	_, w := resetDuringCommit(t, fdb.Error{Code: 1025}) // FDB fails the in-flight commit so
	if err, ok := resolvedNow(w); ok {
		t.Errorf("a watch made after Reset was failed by the previous attempt's commit: %v", err)
	}
}

// resetDuringCommit resets tx while its commit is in flight, makes a watch
// of the new attempt, then lets the commit's waiter wake with outcome (the
// commit's error, or nil) and returns once Commit has returned.
func resetDuringCommit(t *testing.T, outcome error) (*transaction, *watch) {
	t.Helper()
	sent := make(chan struct{})
	f := &fakeFDB{holdCommit: true, commitSent: sent}
	tx := newFakeTransaction(t, t.Context(), f)
	result := make(chan error, 1)
	go func() { result <- tx.Commit() }()
	<-sent
	tx.Reset()
	w, _ := watchIn(tx) // a watch of the new attempt
	f.mu.Lock()
	f.inFlight.resolve(outcome)
	f.inFlight = nil
	f.mu.Unlock()
	<-result
	return tx, w
}

// Same, but the stale commit succeeded just before Reset: settle(nil)
// drops the new attempt's watch from the list, so the new attempt's
// Cancel no longer fails it (it stays pending forever).
func TestResetDuringACommitThatSucceedsKeepsTheNewWatchTracked(t *testing.T) {
	tx, w := resetDuringCommit(t, nil)
	tx.Cancel() // the new attempt is cancelled before any commit: kv says its watch fails
	if err, ok := resolvedNow(w); !ok || !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("new attempt's watch after Cancel: resolved %v with %v, want transaction_cancelled", ok, err)
	}
}

// kv.Transaction.OnError: "A Reset while it backs off makes it return
// ErrTransactionCancelled at once." The new attempt's watch must survive.
func TestResetDuringOnErrorLeavesTheNewAttemptsWatchToIt(t *testing.T) {
	h := &heldOnError{fakeFDB: &fakeFDB{}, called: make(chan struct{})}
	tx := &transaction{state: &txState{ctl: h, ctx: context.Background()}}
	result := make(chan error, 1)
	go func() { result <- tx.OnError(kv.ErrNotCommitted) }()
	<-h.called
	tx.Reset()
	w, _ := watchIn(tx)
	h.mu.Lock()
	h.fut.resolve(fdb.Error{Code: 1025}) // what FDB's reset does to the onError future
	h.mu.Unlock()
	if err := <-result; !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Fatalf("OnError = %v", err)
	}
	if err, ok := resolvedNow(w); ok {
		t.Errorf("a watch made after Reset was failed by the previous attempt's OnError: %v", err)
	}
}

// noHandle.OnError must give back an error without an FDB code unchanged
// (kv.Transaction.OnError); RetryLoop over it then returns fn's error.
func TestNoHandleOnErrorKeepsAPlainError(t *testing.T) {
	plain := errors.New("application error")
	tr := WrapTransaction(fdb.Transaction{})
	if err := kv.RetryLoop(context.Background(), tr, func(kv.Transaction) error { return plain }); !errors.Is(err, plain) {
		t.Errorf("RetryLoop over the zero transaction = %v, want the function's error %v", err, plain)
	}
}

// A nil context is taken as context.Background(), as memdb takes it: a
// transaction's Transact and ReadTransact run fn rather than panic.
func TestTransactionTransactTakesANilContext(t *testing.T) {
	tx := newFakeTransaction(t, t.Context(), &fakeFDB{})
	ran := 0
	var nilCtx context.Context
	if err := tx.Transact(nilCtx, func(kv.Transaction) error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := tx.ReadTransact(nilCtx, func(kv.ReadTransaction) error { ran++; return nil }); err != nil {
		t.Fatal(err)
	}
	if ran != 2 {
		t.Fatalf("fn ran %d times, want 2", ran)
	}
}
