package memdb_test

import (
	"context"
	"encoding/binary"
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
