package fdbkv

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/apple/foundationdb/bindings/go/src/fdb"
)

// watch is a kv.Watch over the fdb.FutureNil of fdb.Transaction.Watch.
//
// One goroutine per watch, started by the first Wait that finds the future
// not ready, blocks in the binding (BlockUntilReady, through Get) and
// closes done; Wait selects between done and its context. Only that
// goroutine ever blocks on the future, because the binding registers one C
// callback per blocked caller.
//
// The goroutine refers to the watchState, never to the watch, so a watch
// the application drops without Cancel still becomes unreachable; a
// cleanup then cancels its future, which ends the goroutine and releases
// the watch in the database. (Without it the blocked goroutine would keep
// the future, and the watch on the storage server, alive forever: the
// binding's own finalizer, which destroys a dropped future, could never
// run.)
type watch struct {
	s *watchState
}

// watchState is what the waiting goroutine shares with the watch.
type watchState struct {
	f         fdb.FutureNil
	start     sync.Once
	done      chan struct{}
	err       error // the future's error, valid once done is closed
	cancelled atomic.Bool

	mu sync.Mutex
	// failure, when set, is the error of the transaction that will not
	// register the watch (its commit failed, or it was cancelled): fail
	// cancelled the future for it (see txState.watches).
	failure error
}

// fail fails the watch with err, the error of its transaction, by
// cancelling its future (which FDB then fails with operation_cancelled,
// 1101): Wait returns err. A watch that fired or failed already keeps its
// outcome (cancelling a ready future does nothing).
func (s *watchState) fail(err error) {
	s.mu.Lock()
	if s.failure == nil {
		s.failure = err
	}
	s.mu.Unlock()
	s.f.Cancel()
}

// failed returns the error fail set, or nil.
func (s *watchState) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failure
}

// newWatch wraps the future of fdb.Transaction.Watch.
func newWatch(f fdb.FutureNil) *watch {
	s := &watchState{f: f, done: make(chan struct{})}
	w := &watch{s: s}
	runtime.AddCleanup(w, func(s *watchState) { s.f.Cancel() }, s)
	return w
}

// Wait returns nil when the key changed (or, spuriously, when the watch
// failed with cluster_version_changed: see watchError), the watch's error
// (translated; kv.ErrTransactionCancelled after Cancel; the error of its
// transaction's failed commit or cancellation) when it failed, and
// ctx.Err() when ctx ends first; the watch then stays registered until
// Cancel.
func (w *watch) Wait(ctx context.Context) error {
	ctx = orBackground(ctx)
	s := w.s
	if s.f.IsReady() {
		return watchError(s.f.Get(), s.cancelled.Load(), s.failed())
	}
	s.start.Do(func() {
		go func() {
			s.err = s.f.Get()
			close(s.done)
		}()
	})
	select {
	case <-s.done:
		return watchError(s.err, s.cancelled.Load(), s.failed())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cancel cancels the watch's future (fdb.FutureNil.Cancel), which releases
// the watch in the database.
func (w *watch) Cancel() {
	w.s.cancelled.Store(true)
	w.s.f.Cancel()
}
