package fdbqueue_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// EmailArgs is a job's typed argument, stored as JSON.
type EmailArgs struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// Typed job arguments: jobs carry a struct, encoded by a Codec, and the
// pool's handler gets it decoded. A job whose value does not decode is
// dead-lettered at once rather than retried.
func ExampleTypedJobQueue() {
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"emails"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	if err != nil {
		log.Fatal(err)
	}
	emails := fdbqueue.NewTypedJobQueue(q, fdbqueue.JSONCodec[EmailArgs]{})
	job := fdbqueue.TypedJob[EmailArgs]{Value: EmailArgs{To: "ada@example.com", Subject: "Welcome"}, UniqueKey: "welcome-ada"}
	if _, err := emails.Add(ctx, db, job); err != nil {
		log.Fatal(err)
	}

	handler := func(ctx context.Context, task *fdbqueue.TypedTask[EmailArgs]) error {
		args := task.Value()
		fmt.Printf("to %s: %s (attempt %d)\n", args.To, args.Subject, task.Lease().Attempt)
		return nil // acked
	}
	err = emails.Run(ctx, db, handler, fdbqueue.PoolOptions{
		Workers: 1,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o fdbqueue.Outcome) {
			fmt.Println(o.Result)
			stop() // one job, then shut down
		},
	})
	fmt.Println("pool stopped:", err)
	// Output:
	// to ada@example.com: Welcome (attempt 1)
	// acked
	// pool stopped: <nil>
}
