package fdbkv_test

import (
	"errors"
	"testing"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/fdbkv"
)

// TestQueueLayerOnFoundationDB is a smoke test of the root package's Queue
// on a real cluster: FIFO order with both key layouts, an enqueue joined to
// the application's own fdb transaction, ErrEmpty at the end. (The root
// package's own queue tests are package-internal and run on memdb; they are
// not exported for other backends.)
func TestQueueLayerOnFoundationDB(t *testing.T) {
	db := testDatabase(t)
	prefix := testPrefix(t, db)
	ctx := testContext(t)

	for _, tc := range []struct {
		name string
		opts []fdbqueue.Option
	}{
		{"indexed", nil},
		{"versionstamped", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes(key(prefix, tc.name+"/")), tc.opts...)
			if err != nil {
				t.Fatalf("NewQueue: %v", err)
			}
			for _, v := range []string{"a", "b", "c"} {
				if err := q.Enqueue(ctx, db, []byte(v)); err != nil {
					t.Fatalf("Enqueue(%q): %v", v, err)
				}
			}
			// The layer joins the application's own transaction, retried
			// by the binding's loop: one operation ID for every attempt.
			id := fdbqueue.NewOpID()
			_, err = db.FDB().Transact(func(tr fdb.Transaction) (any, error) {
				return nil, q.Enqueue(ctx, fdbkv.WrapTransaction(tr), []byte("d"), fdbqueue.WithOpID(id))
			})
			if err != nil {
				t.Fatalf("Enqueue inside the application's fdb transaction: %v", err)
			}
			if n, err := q.Len(ctx, db); err != nil || n != 4 {
				t.Fatalf("Len = %d, %v; want 4", n, err)
			}
			for _, want := range []string{"a", "b", "c", "d"} {
				got, err := q.Dequeue(ctx, db)
				if err != nil || string(got) != want {
					t.Fatalf("Dequeue = %q, %v; want %q (FIFO order)", got, err, want)
				}
			}
			if got, err := q.Dequeue(ctx, db); !errors.Is(err, fdbqueue.ErrEmpty) {
				t.Fatalf("Dequeue of an empty queue = %q, %v; want fdbqueue.ErrEmpty", got, err)
			}
		})
	}
}
