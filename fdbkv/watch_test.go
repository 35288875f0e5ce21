package fdbkv

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// fakeWatchFuture is the future of a watch: it becomes ready when fired,
// or fails with operation_cancelled (1101) when cancelled, as libfdb_c's
// fdb_future_cancel does (bindings/c/fdb_c.cpp).
type fakeWatchFuture struct {
	once      sync.Once
	done      chan struct{}
	err       error
	cancelled chan struct{} // closed by the first Cancel
}

func newFakeWatchFuture() *fakeWatchFuture {
	return &fakeWatchFuture{done: make(chan struct{}), cancelled: make(chan struct{})}
}

func (f *fakeWatchFuture) finish(err error) bool {
	first := false
	f.once.Do(func() { f.err, first = err, true; close(f.done) })
	return first
}

func (f *fakeWatchFuture) Get() error       { <-f.done; return f.err }
func (f *fakeWatchFuture) MustGet()         {}
func (f *fakeWatchFuture) BlockUntilReady() { <-f.done }
func (f *fakeWatchFuture) IsReady() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}
func (f *fakeWatchFuture) Cancel() {
	if f.finish(fdb.Error{Code: 1101}) {
		close(f.cancelled)
	}
}

var _ fdb.FutureNil = (*fakeWatchFuture)(nil)

func TestWatchWaitFiresCancelsAndTimesOut(t *testing.T) {
	f := newFakeWatchFuture()
	w := newWatch(f)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := w.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with an ended context = %v, want context.Canceled", err)
	}
	f.finish(nil)
	if err := w.Wait(t.Context()); err != nil {
		t.Errorf("Wait after the watch fired = %v, want nil", err)
	}

	f2 := newFakeWatchFuture()
	w2 := newWatch(f2)
	result := make(chan error, 1)
	go func() { result <- w2.Wait(context.Background()) }()
	w2.Cancel()
	if err := <-result; !errors.Is(err, kv.ErrTransactionCancelled) {
		t.Errorf("Wait on a cancelled watch = %v, want kv.ErrTransactionCancelled", err)
	}
}

// TestDroppedWatchIsCancelled: a watch dropped without Cancel, after a
// Wait that gave up (its goroutine still blocked on the future), is
// cancelled once unreachable. The old watch kept its future, and the
// watch on the storage server, forever.
func TestDroppedWatchIsCancelled(t *testing.T) {
	f := newFakeWatchFuture()
	func() {
		w := newWatch(f)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_ = w.Wait(ctx) // starts the goroutine, which blocks on f
	}()
	deadline := time.After(30 * time.Second) // a bound, not a synchronisation
	for {
		runtime.GC()
		select {
		case <-f.cancelled:
			return
		case <-deadline:
			t.Fatal("a dropped watch was not cancelled after 30 s of garbage collections")
		default:
			runtime.Gosched()
		}
	}
}

// TestWatchClusterVersionChangedIsASpuriousFire: a watch whose future
// fails with cluster_version_changed (1039), as the multi-version client
// fails it when it switches client library, makes Wait return nil, for a
// Wait already waiting (or about to) when it fails and for a later Wait.
func TestWatchClusterVersionChangedIsASpuriousFire(t *testing.T) {
	f := newFakeWatchFuture()
	w := newWatch(f)
	result := make(chan error, 1)
	go func() { result <- w.Wait(context.Background()) }()
	f.finish(fdb.Error{Code: 1039})
	if err := <-result; err != nil {
		t.Errorf("a blocked Wait when the watch failed with cluster_version_changed = %v, want nil", err)
	}
	if err := w.Wait(t.Context()); err != nil {
		t.Errorf("Wait on a watch failed with cluster_version_changed = %v, want nil", err)
	}
	w.Cancel()
}
