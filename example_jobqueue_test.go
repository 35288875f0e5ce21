package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Add jobs, lease one, and ack it when done. A job that is not acked
// before its lease's deadline is due again, for another consumer.
func ExampleJobQueue() {
	ctx := context.Background()
	db := memdb.New() // on FoundationDB: fdbkv.OpenWithAPIVersion(730, clusterFile)
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: 1}) // Choice 1: strict order
	if err != nil {
		log.Fatal(err)
	}
	at := time.Now()
	for _, job := range []fdbqueue.Job{
		{Value: []byte("send newsletter"), Delay: time.Hour},
		{Value: []byte("resize img-1"), RunAt: at, UniqueKey: "img-1"},
		{Value: []byte("charge order 7"), RunAt: at, Priority: 10},
		{Value: []byte("resize img-1 again"), UniqueKey: "img-1"},
	} {
		r, err := q.Add(ctx, db, job)
		if err != nil {
			log.Fatal(err)
		}
		if r.Duplicate {
			fmt.Println("duplicate:", string(job.Value)) // img-1 is already queued
		}
	}

	leases, err := q.Lease(ctx, db, 2, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Printf("%s (attempt %d)\n", l.Value, l.Attempt)
		if err := q.Ack(ctx, db, l); err != nil { // ErrLeaseLost if it expired and was leased again
			log.Fatal(err)
		}
	}
	s, err := q.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("due %d, delayed %d, leased %d\n", s.Due, s.Delayed, s.Leased)
	// Output:
	// duplicate: resize img-1 again
	// charge order 7 (attempt 1)
	// resize img-1 (attempt 1)
	// due 0, delayed 1, leased 0
}

// Ack the job in the transaction that writes its effect: the effect and
// the ack commit together, once, even if the commit's outcome is unknown
// and the transaction is retried; if the lease was lost, neither commits.
func ExampleJobQueue_Ack() {
	ctx := context.Background()
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
	if _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("order 1042")}); err != nil {
		log.Fatal(err)
	}
	l, err := q.Lease(ctx, db, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}

	sent, err := fdbqueue.NewSubspace(tuple.Tuple{"sent"})
	if err != nil {
		log.Fatal(err)
	}
	key, err := sent.Pack(tuple.Tuple{l[0].JobID.Bytes()}) // an idempotent write, keyed by the job
	if err != nil {
		log.Fatal(err)
	}
	id := fdbqueue.NewOpID() // once, outside the retry loop
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(key, []byte("receipt for "+string(l[0].Value)))
		return q.Ack(ctx, tr, l[0], fdbqueue.WithOpID(id))
	})
	// ErrLeaseLost: the lease expired, and neither committed;
	// kv.MaybeCommitted(err): run it again under id to settle it.
	fmt.Println("acked:", err == nil)
	s, err := q.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs left:", s.Queued+s.Leased+s.ExpiredLeases)
	// Output:
	// acked: true
	// jobs left: 0
}

// A failed attempt is nacked: the job comes back after a backoff, and
// after its last attempt it moves to the dead-letter list, from which it
// can be requeued.
func ExampleJobQueue_Nack() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"flaky"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	if err != nil {
		log.Fatal(err)
	}
	job, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("call partner API"), MaxAttempts: 2})
	if err != nil {
		log.Fatal(err)
	}
	for {
		l, err := q.Lease(ctx, db, 1, time.Minute)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		dead, err := q.Nack(ctx, db, l[0], fdbqueue.NackOptions{Delay: -1, Reason: "HTTP 503"})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("attempt %d failed, dead: %v\n", l[0].Attempt, dead)
	}
	deadJobs, err := q.ListDead(ctx, db, nil, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("dead: %s after %d attempts (%s)\n", deadJobs[0].Value, deadJobs[0].Attempts, deadJobs[0].Reason)
	if err := q.Requeue(ctx, db, job.ID); err != nil {
		log.Fatal(err)
	}
	s, err := q.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("due after requeue:", s.Due)
	// Output:
	// attempt 1 failed, dead: false
	// attempt 2 failed, dead: true
	// dead: call partner API after 2 attempts (HTTP 503)
	// due after requeue: 1
}

// A worker pool: leases are extended while a handler runs, failures are
// retried, and cancelling the context shuts the pool down gracefully.
func ExampleJobQueue_Run() {
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"thumbnails"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: 1, RetryBase: time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("img-1")}, {Value: []byte("img-2")}}); err != nil {
		log.Fatal(err)
	}

	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		if l := task.Lease(); string(l.Value) == "img-2" && l.Attempt == 1 {
			return errors.New("decoder busy") // nacked: retried after a backoff
		}
		fmt.Println("resized", string(task.Value()))
		return nil // acked
	}
	done := 0
	err = q.Run(ctx, db, handler, fdbqueue.PoolOptions{
		Workers: 1,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o fdbqueue.Outcome) {
			if o.Result == fdbqueue.Acked {
				if done++; done == 2 {
					stop()
				}
			}
		},
	})
	fmt.Println("pool stopped:", err)
	// Output:
	// resized img-1
	// resized img-2
	// pool stopped: <nil>
}

// A handler that cannot run its job yet snoozes it: the job comes back
// after the delay without using an attempt, so a job of one attempt is
// not dead-lettered for waiting.
func ExampleSnooze() {
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"exports"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: 1})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("report-7")}); err != nil {
		log.Fatal(err)
	}

	snoozes := 0
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		if snoozes < 2 { // say, its input is not ready
			snoozes++
			return fdbqueue.Snooze(5 * time.Millisecond)
		}
		fmt.Printf("exported %s on attempt %d of %d\n", task.Value(), task.Lease().Attempt, task.Lease().MaxAttempts)
		return nil
	}
	err = q.Run(ctx, db, handler, fdbqueue.PoolOptions{
		Workers: 1,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnOutcome: func(o fdbqueue.Outcome) {
			fmt.Println(o.Result)
			if o.Result == fdbqueue.Acked {
				stop()
			}
		},
	})
	fmt.Println("pool stopped:", err)
	// Output:
	// snoozed
	// snoozed
	// exported report-7 on attempt 1 of 1
	// acked
	// pool stopped: <nil>
}

// LeaseWait blocks until a job is due: it sleeps on a watch (woken by
// Add, Nack and Requeue) and on a timer for the earliest vesting time,
// without polling.
func ExampleJobQueue_LeaseWait() {
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
	start := time.Now()
	if _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("remind in 20ms"), Delay: 20 * time.Millisecond}); err != nil {
		log.Fatal(err)
	}
	leases, err := q.LeaseWait(ctx, db, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s, after at least 20ms: %v\n", leases[0].Value, time.Since(start) >= 20*time.Millisecond)
	// Output: remind in 20ms, after at least 20ms: true
}

// Release a job that cannot run yet (a rate limit, a resource held
// elsewhere) to run later without using an attempt: a job with one
// attempt, released, is leased again as attempt 1 instead of being
// dead-lettered. Nack would have counted the attempt.
func ExampleJobQueue_Release() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"snooze"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: 1})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("call the partner API")}); err != nil {
		log.Fatal(err)
	}

	ls, err := q.Lease(ctx, db, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (attempt %d of %d)\n", ls[0].Value, ls[0].Attempt, ls[0].MaxAttempts)
	if err := q.Release(ctx, db, ls[0], 0); err != nil { // 0: due again at once
		log.Fatal(err)
	}
	ls, err = q.Lease(ctx, db, 1, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s (attempt %d of %d)\n", ls[0].Value, ls[0].Attempt, ls[0].MaxAttempts)
	if err := q.Ack(ctx, db, ls[0]); err != nil {
		log.Fatal(err)
	}
	// Output:
	// call the partner API (attempt 1 of 1)
	// call the partner API (attempt 1 of 1)
}
