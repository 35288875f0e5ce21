package memdb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// newDB returns a DB with a manual clock and tiny backoff, closed when the
// test ends.
func newDB(t testing.TB, opts ...memdb.Option) (*memdb.DB, *memdb.ManualClock) {
	t.Helper()
	clk := memdb.NewManualClock(epoch)
	all := append([]memdb.Option{memdb.WithClock(clk), memdb.WithBackoff(10*time.Microsecond, time.Millisecond)}, opts...)
	db := memdb.New(all...)
	t.Cleanup(func() { _ = db.Close() })
	return db, clk
}

// tombstoneAboutToGo returns a DB (1 s MVCC window) in which key "k" was
// set and then cleared, its tombstone still stored (a transaction that read
// "k" before the clear keeps it, and is returned), 600 ms after the clear:
// one more advance of the clock and a commit collect it.
func tombstoneAboutToGo(t testing.TB) (*memdb.DB, *memdb.ManualClock, kv.Transaction) {
	t.Helper()
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	mustSet(t, db, "k", "old")
	pin := newTx(t, db) // keeps k's chain until it is out of the window
	require.Equal(t, "old", string(get(t, pin, "k")))
	require.NoError(t, db.Transact(t.Context(), clearTx("k")))
	clk.Advance(600 * time.Millisecond)
	mustSet(t, db, "other", "x")
	return db, clk, pin
}

// newTx creates a transaction or fails the test.
func newTx(t testing.TB, db *memdb.DB) kv.Transaction {
	t.Helper()
	tr, err := db.CreateTransaction(context.Background())
	require.NoError(t, err)
	return tr
}

// mustSet commits key=value in its own transaction.
func mustSet(t testing.TB, db *memdb.DB, key, value string) {
	t.Helper()
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set([]byte(key), []byte(value))
		return nil
	}))
}

// mustGet reads key in its own transaction; ok reports whether it exists.
func mustGet(t testing.TB, db *memdb.DB, key string) (string, bool) {
	t.Helper()
	v, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]byte, error) {
		return tr.Get([]byte(key)).Get()
	})
	require.NoError(t, err)
	return string(v), v != nil
}

// get reads key in tr, failing the test on error.
func get(t testing.TB, tr kv.ReadTransaction, key string) []byte {
	t.Helper()
	v, err := tr.Get([]byte(key)).Get()
	require.NoError(t, err)
	return v
}

// keys returns the keys of kvs as strings.
func keys(kvs []kv.KeyValue) []string {
	out := make([]string, 0, len(kvs))
	for _, p := range kvs {
		out = append(out, string(p.Key))
	}
	return out
}

// rng is a key range of strings.
func rng(b, e string) kv.KeyRange { return kv.KeyRange{Begin: []byte(b), End: []byte(e)} }

// le64 encodes n as 8 little-endian bytes.
func le64(n int64) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(n))
	return b
}

// tenItems returns a DB with the real clock (a manual one costs an
// allocation per transaction) holding ten small items in r, as a queue's.
func tenItems(t *testing.T) (*memdb.DB, kv.KeyRange) {
	t.Helper()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	for i := range 10 {
		mustSet(t, db, fmt.Sprintf("q/%04d", i), "a small work item, 32 bytes long")
	}
	return db, kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
}

// readTail starts a transaction on db and reads r's last row with a
// snapshot read, as an enqueue finds its queue's tail (for the allocation
// counts of queue-shaped transactions).
func readTail(t *testing.T, db *memdb.DB, r kv.KeyRange) kv.Transaction {
	tr, err := db.CreateTransaction(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
	if err != nil || len(kvs) != 1 {
		t.Fatal(kvs, err)
	}
	return tr
}
