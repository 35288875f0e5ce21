package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// newDB returns a fresh embedded database with a short retry backoff so
// that contended tests stay fast.
func newDB(t testing.TB, opts ...memdb.Option) *memdb.DB {
	t.Helper()
	return backoffDB(t, 100*time.Microsecond, 5*time.Millisecond, opts...)
}

// backoffDB returns a fresh embedded database with the retry backoff
// between lo and hi, closed when the test ends.
func backoffDB(t testing.TB, lo, hi time.Duration, opts ...memdb.Option) *memdb.DB {
	t.Helper()
	opts = append([]memdb.Option{memdb.WithBackoff(lo, hi)}, opts...)
	db := memdb.New(opts...)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func mustSubspace(t testing.TB, elems ...any) fdbqueue.Subspace {
	t.Helper()
	s, err := fdbqueue.NewSubspace(tuple.Tuple(elems))
	require.NoError(t, err)
	return s
}

func mustQueue(t testing.TB, name string, opts ...fdbqueue.Option) *fdbqueue.Queue {
	t.Helper()
	q, err := fdbqueue.NewQueue(mustSubspace(t, "test", name), opts...)
	require.NoError(t, err)
	return q
}

func mustPQ(t testing.TB, name string, opts ...fdbqueue.Option) *fdbqueue.PriorityQueue {
	t.Helper()
	pq, err := fdbqueue.NewPriorityQueue(mustSubspace(t, "test", name), opts...)
	require.NoError(t, err)
	return pq
}

// drain dequeues until the queue is empty and returns the items as strings.
func drain(t testing.TB, db kv.Database, q *fdbqueue.Queue) []string {
	t.Helper()
	var out []string
	for {
		v, err := q.Dequeue(context.Background(), db)
		if err != nil {
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			return out
		}
		out = append(out, string(v))
	}
}

// rawKeys lists every key under prefix (items, journal and all).
func rawKeys(t testing.TB, db kv.Database, prefix []byte) [][]byte {
	t.Helper()
	r, err := tuple.PrefixRange(prefix)
	require.NoError(t, err)
	return rangeKeys(t, db, r)
}

// rangeKeys lists the keys in r.
func rangeKeys(t testing.TB, db kv.Database, r kv.KeyRange) [][]byte {
	t.Helper()
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	keys := make([][]byte, len(kvs))
	for i, p := range kvs {
		keys[i] = p.Key
	}
	return keys
}

// getKey reads one key in its own transaction.
func getKey(ctx context.Context, db kv.Database, key []byte) ([]byte, error) {
	return kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) {
		return tr.Get(key).Get()
	})
}

// subspacePairs returns the pairs in sub's range (the items of a queue in
// it; its journal and staging keys lie past the range).
func subspacePairs(t testing.TB, db kv.Database, sub fdbqueue.Subspace) []kv.KeyValue {
	t.Helper()
	r, err := sub.Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	return kvs
}

// interruptCommit runs op with a context that is cancelled once op's next
// commit is in flight, held there by memdb's HoldNextCommitLate, and
// returns op's error. The commit lands when release is called (as
// FoundationDB's goes on after a cancellation): call it to make it land
// after whatever the test does in between. It fails the test if op
// returns before a commit of it is held, or does not return once
// cancelled (within wakeTimeout).
func interruptCommit(t testing.TB, db *memdb.DB, op func(ctx context.Context) error) (release func(), err error) {
	t.Helper()
	held, release := db.HoldNextCommitLate()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	select {
	case <-held:
	case err := <-done:
		t.Fatalf("the operation returned (err %v) before a commit of it was in flight", err)
	case <-time.After(wakeTimeout):
		t.Fatalf("waited %v for the operation's commit to be in flight", wakeTimeout)
	}
	cancel()
	return release, recvWithin(t, done, "the interrupted operation's return")
}

// withReadFaults adds to f the read-side faults the layers' fault tests
// run under: a read (a point read, a range read's batch) fails with
// transaction_too_old, future_version or process_behind, and a read
// version request with grv_proxy_memory_limit_exceeded or database_locked,
// as on FoundationDB (memdb.Faults.ReadErrors, ReadVersionErrors).
func withReadFaults(f memdb.Faults) memdb.Faults {
	f.ReadErrors, f.ReadVersionErrors = 0.03, 0.01
	return f
}

// The bounds below are on a test's waits for the code under test: failure
// bounds, never a synchronisation. A wait that a bug could leave blocked
// (a value never sent, a waiter never woken, a call that never returns)
// goes through recvWithin, waitWithin or the like, so that the test fails
// saying what it waited for, instead of hanging until go test's timeout,
// which hides which test broke and every later test's result. They fail
// with t.Fatalf: call them from the test's goroutine.

// wakeTimeout bounds the wait for what the code under test does at once
// or nearly: a waiter woken or asleep, a timer armed, a commit in flight,
// a call's return once its context ended, a pool's outcome.
const wakeTimeout = 10 * time.Second

// workTimeout bounds the wait for a concurrent workload (goroutines that
// run many operations each) to finish.
const workTimeout = 2 * time.Minute

// recvWithin receives from ch, failing the test if nothing comes within
// wakeTimeout.
func recvWithin[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	return recvBounded(t, ch, wakeTimeout, what)
}

// recvBounded receives from ch, failing the test if nothing comes within d.
func recvBounded[T any](t testing.TB, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("waited %v for %s", d, what)
		var zero T
		return zero
	}
}

// recvN receives n values from ch, failing the test (with failure, and
// what came) if one does not come within wakeTimeout.
func recvN[T any](t testing.TB, ch <-chan T, n int, failure string) []T {
	t.Helper()
	var all []T
	for range n {
		select {
		case v := <-ch:
			all = append(all, v)
		case <-time.After(wakeTimeout):
			t.Fatalf("%s (got %v)", failure, all)
		}
	}
	return all
}

// waitWithin waits for wg, failing the test if it is not done within d
// (wakeTimeout, or workTimeout for a workload).
func waitWithin(t testing.TB, wg *sync.WaitGroup, d time.Duration, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	recvBounded(t, done, d, what)
}

// goT is a test's t for the goroutines it starts (and the hooks its code
// under test calls): it reports their failures while the test runs and
// drops them once the test's cleanup has begun. A goroutine that a failed
// bounded wait left behind fails when the cleanup closes the database;
// reporting that on t once the test has completed would panic ("Fail in
// goroutine after ... has completed") and end the whole test binary.
type goT struct {
	t     testing.TB
	mu    sync.Mutex
	ended bool
}

// forGoroutines returns t's goT.
func forGoroutines(t testing.TB) *goT {
	g := &goT{t: t}
	t.Cleanup(func() {
		g.mu.Lock()
		g.ended = true
		g.mu.Unlock()
	})
	return g
}

// Errorf reports a goroutine's failure (t.Errorf) while the test runs.
func (g *goT) Errorf(format string, args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.t.Errorf(format, args...)
	}
}

// Error reports a goroutine's failure (t.Error) while the test runs.
func (g *goT) Error(args ...any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		g.t.Error(args...)
	}
}
