package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Look a job up by the ID Add returned, and cancel it before it runs:
// it is gone for good, and its unique key is free again.
func ExampleJobQueue_Cancel() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"reminders"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("remind order 42"), Delay: time.Hour, UniqueKey: "order-42"})
	if err != nil {
		log.Fatal(err)
	}

	info, err := q.Job(ctx, db, r.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %s, delayed %v, attempts %d\n", info.Value, info.State, info.DueAt.After(time.Now()), info.Attempts)

	// The order was paid: the reminder must not run. A leased job can be
	// cancelled too: its holder's Ack then fails with ErrLeaseLost.
	if err := q.Cancel(ctx, db, r.ID); err != nil {
		log.Fatal(err) // ErrJobNotFound: already acked, cancelled or dead
	}
	_, err = q.Job(ctx, db, r.ID)
	fmt.Println("found after cancel:", !errors.Is(err, fdbqueue.ErrJobNotFound))

	again, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("remind order 42"), Delay: time.Hour, UniqueKey: "order-42"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("unique key free:", !again.Duplicate)
	// Output:
	// remind order 42: queued, delayed true, attempts 0
	// found after cancel: false
	// unique key free: true
}
