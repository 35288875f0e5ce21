package fdbqueue_test

import (
	"context"
	"fmt"
	"log"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func ExamplePriorityQueue_PushBatch() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"tickets"})
	if err != nil {
		log.Fatal(err)
	}
	pq, err := fdbqueue.NewPriorityQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	// One transaction: all three are pushed, or none.
	err = pq.PushBatch(ctx, db, []fdbqueue.PushItem{
		{Value: []byte("reply to customer"), Priority: 2},
		{Value: []byte("restart the node"), Priority: 0},
		{Value: []byte("update the ticket"), Priority: 2},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	taken, err := pq.PopMinBatch(ctx, db, 2)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("took %q, %q\n", taken[0].Value, taken[1].Value)

	// A popped Item converts to a PushItem: push the second one again (it
	// goes behind "update the ticket", pushed earlier at its priority).
	if err := pq.PushBatch(ctx, db, []fdbqueue.PushItem{fdbqueue.PushItem(taken[1])}); err != nil {
		log.Fatal(err)
	}
	rest, err := pq.PopMinBatch(ctx, db, 10)
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range rest {
		fmt.Printf("%d: %s\n", it.Priority, it.Value)
	}
	// Output:
	// took "restart the node", "reply to customer"
	// 2: update the ticket
	// 2: reply to customer
}
