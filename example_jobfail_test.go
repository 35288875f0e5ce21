package fdbqueue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// A handler that finds its job's payload malformed fails it for good with
// NoRetry: the job goes to the dead-letter list on its first attempt
// instead of using up its ten.
func ExampleNoRetry() {
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"orders"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: 10})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte(`{"order": `)}); err != nil {
		log.Fatal(err)
	}

	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		var order struct{ Order int }
		if err := json.Unmarshal(task.Value(), &order); err != nil {
			return fdbqueue.NoRetry(fmt.Errorf("bad order: %w", err))
		}
		return nil
	}
	err = q.Run(ctx, db, handler, fdbqueue.PoolOptions{
		Workers: 1,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o fdbqueue.Outcome) {
			fmt.Println(o.Result, "on attempt", o.Lease.Attempt, "of", o.Lease.MaxAttempts)
			stop()
		},
	})
	fmt.Println("pool stopped:", err)
	dead, err := q.ListDead(context.Background(), db, nil, 10)
	if err != nil || len(dead) == 0 {
		log.Fatal(err, dead)
	}
	fmt.Println("dead:", dead[0].Reason)
	// Output:
	// dead-lettered on attempt 1 of 10
	// pool stopped: <nil>
	// dead: no retry: bad order: unexpected end of JSON input
}
