package fdbqueue_test

import (
	"context"
	"fmt"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func ExamplePriorityQueue_PushBatch() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"tickets"})
	pq, _ := fdbqueue.NewPriorityQueue(sub)
	// One transaction: all three are pushed, or none.
	err := pq.PushBatch(ctx, db, []fdbqueue.PushItem{
		{Value: []byte("reply to customer"), Priority: 2},
		{Value: []byte("restart the node"), Priority: 0},
		{Value: []byte("update the ticket"), Priority: 2},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	taken, _ := pq.PopMinBatch(ctx, db, 2)
	fmt.Printf("took %q, %q\n", taken[0].Value, taken[1].Value)

	// A popped Item converts to a PushItem: put the second one back.
	_ = pq.PushBatch(ctx, db, []fdbqueue.PushItem{fdbqueue.PushItem(taken[1])})
	rest, _ := pq.PopMinBatch(ctx, db, 10)
	for _, it := range rest {
		fmt.Printf("%d: %s\n", it.Priority, it.Value)
	}
	// Output:
	// took "restart the node", "reply to customer"
	// 2: update the ticket
	// 2: reply to customer
}
