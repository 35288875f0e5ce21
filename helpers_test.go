package fdbqueue_test

import (
	"context"
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
// after whatever the test does in between.
func interruptCommit(db *memdb.DB, op func(ctx context.Context) error) (release func(), err error) {
	held, release := db.HoldNextCommitLate()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- op(ctx) }()
	<-held
	cancel()
	return release, <-done
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
