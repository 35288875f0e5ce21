package fdbkv

import (
	"context"
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
type watch struct {
	f         fdb.FutureNil
	start     sync.Once
	done      chan struct{}
	err       error // the future's error, valid once done is closed
	cancelled atomic.Bool
}

// newWatch wraps the future of fdb.Transaction.Watch.
func newWatch(f fdb.FutureNil) *watch {
	return &watch{f: f, done: make(chan struct{})}
}

// Wait returns nil when the key changed, the watch's error (translated;
// kv.ErrTransactionCancelled after Cancel) when it failed, and ctx.Err()
// when ctx ends first; the watch then stays registered until Cancel.
func (w *watch) Wait(ctx context.Context) error {
	if w.f.IsReady() {
		return watchError(w.f.Get(), w.cancelled.Load())
	}
	w.start.Do(func() {
		go func() {
			w.err = w.f.Get()
			close(w.done)
		}()
	})
	select {
	case <-w.done:
		return watchError(w.err, w.cancelled.Load())
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cancel cancels the watch's future (fdb.FutureNil.Cancel), which releases
// the watch in the database.
func (w *watch) Cancel() {
	w.cancelled.Store(true)
	w.f.Cancel()
}
