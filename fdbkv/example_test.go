package fdbkv_test

import (
	"context"
	"fmt"
	"log"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// The README's snippets, compiled (they need a cluster, so they are not run).

// Select the API version and open the default cluster file's database; the
// handle belongs to db and db.Close destroys it.
func ExampleOpenWithAPIVersion() {
	ctx := context.Background()
	db, err := fdbkv.OpenWithAPIVersion(730, "") // "" = the default cluster file
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"myapp", "jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.Enqueue(ctx, db, []byte("job 1")); err != nil { // its own transaction, retried
		log.Fatal(err)
	}
	job, err := q.Dequeue(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", job)
}

// Enqueue inside the application's own transaction, retried by the
// binding's loop: the operation ID is made once, outside the loop, so a
// retry after commit_unknown_result does not enqueue the item twice.
func ExampleWrapTransaction() {
	ctx := context.Background()
	if err := fdb.APIVersion(730); err != nil {
		log.Fatal(err)
	}
	fdbDB, err := fdb.OpenDatabase("") // the application's handle: it closes it
	if err != nil {
		log.Fatal(err)
	}
	defer fdbDB.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"myapp", "receipts"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	orderKey, order, orderID := fdb.Key("myapp/orders/42"), []byte("paid"), []byte("42")

	id := fdbqueue.NewOpID() // once per logical enqueue, outside the loop
	_, err = fdbDB.Transact(func(tr fdb.Transaction) (any, error) {
		tr.Set(orderKey, order)
		return nil, q.Enqueue(ctx, fdbkv.WrapTransaction(tr), orderID, fdbqueue.WithOpID(id))
	})
	if err != nil {
		log.Fatal(err)
	}
}
