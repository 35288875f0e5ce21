// Command quickstart is the README's quick start: a FIFO queue on the
// embedded engine, one call in its own transaction and one composed with
// the caller's writes.
package main

import (
	"context"
	"log"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb" // or fdbkv for FoundationDB
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	ctx := context.Background()
	db := memdb.New() // fdbkv.OpenWithAPIVersion(730, "") in production
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}

	// Each call runs its own transaction, retried.
	if err := q.Enqueue(ctx, db, []byte("resize img-1")); err != nil {
		log.Fatal(err)
	}
	v, err := q.Dequeue(ctx, db) // errors.Is(err, fdbqueue.ErrEmpty) when empty
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("dequeued %s", v)

	// Compose with your own writes: both commit or neither does.
	orderKey := []byte("order/42/status")
	id := fdbqueue.NewOpID() // one per operation, made outside the retry loop: exactly once across retries
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(orderKey, []byte("paid"))
		return q.Enqueue(ctx, tr, []byte("send receipt"), fdbqueue.WithOpID(id))
	})
	if err != nil {
		log.Fatal(err) // kv.MaybeCommitted(err): run it again under the same id to settle it
	}
	log.Print("order paid, receipt queued")
}
