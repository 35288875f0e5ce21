package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: 1}) // Choice 1: strict order
	at := time.Now()
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("send newsletter"), Delay: time.Hour})
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("resize img-1"), RunAt: at, UniqueKey: "img-1"})
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("charge order 7"), RunAt: at, Priority: 10})
	r, _ := q.Add(ctx, db, fdbqueue.Job{Value: []byte("resize img-1 again"), UniqueKey: "img-1"})
	fmt.Println("duplicate:", r.Duplicate) // img-1 is already queued

	leases, err := q.Lease(ctx, db, 2, 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, l := range leases {
		fmt.Printf("%s (attempt %d)\n", l.Value, l.Attempt)
		_ = q.Ack(ctx, db, l) // errors.Is(err, fdbqueue.ErrLeaseLost) if it expired and was leased again
	}
	s, _ := q.Stats(ctx, db)
	fmt.Printf("due %d, delayed %d, leased %d\n", s.Due, s.Delayed, s.Leased)
	// Output:
	// duplicate: true
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"emails"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("order 1042")})
	l, _ := q.Lease(ctx, db, 1, time.Minute)

	sent, _ := fdbqueue.NewSubspace(tuple.Tuple{"sent"})
	key, _ := sent.Pack(tuple.Tuple{l[0].JobID[:]}) // an idempotent write, keyed by the job
	id := fdbqueue.NewOpID()                        // once, outside the retry loop
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(key, []byte("receipt for "+string(l[0].Value)))
		return q.Ack(ctx, tr, l[0], fdbqueue.WithOpID(id))
	})
	fmt.Println("acked:", err == nil)
	s, _ := q.Stats(ctx, db)
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"flaky"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	job, _ := q.Add(ctx, db, fdbqueue.Job{Value: []byte("call partner API"), MaxAttempts: 2})
	for {
		l, err := q.Lease(ctx, db, 1, time.Minute)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		dead, _ := q.Nack(ctx, db, l[0], fdbqueue.NackOptions{Delay: -1, Reason: "HTTP 503"})
		fmt.Printf("attempt %d failed, dead: %v\n", l[0].Attempt, dead)
	}
	deadJobs, _ := q.ListDead(ctx, db, nil, 10)
	fmt.Printf("dead: %s after %d attempts (%s)\n", deadJobs[0].Value, deadJobs[0].Attempts, deadJobs[0].Reason)
	_ = q.Requeue(ctx, db, job.ID)
	s, _ := q.Stats(ctx, db)
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"thumbnails"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: 1, RetryBase: time.Millisecond})
	_, _ = q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("img-1")}, {Value: []byte("img-2")}})

	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		if l := task.Lease(); string(l.Value) == "img-2" && l.Attempt == 1 {
			return errors.New("decoder busy") // nacked: retried after a backoff
		}
		fmt.Println("resized", string(task.Value()))
		return nil // acked
	}
	done := 0
	err := q.Run(ctx, db, handler, fdbqueue.PoolOptions{
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"exports"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: 1})
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("report-7")})

	snoozes := 0
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		if snoozes < 2 { // say, its input is not ready
			snoozes++
			return fdbqueue.Snooze(5 * time.Millisecond)
		}
		fmt.Printf("exported %s on attempt %d of %d\n", task.Value(), task.Lease().Attempt, task.Lease().MaxAttempts)
		return nil
	}
	err := q.Run(ctx, db, handler, fdbqueue.PoolOptions{
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"reminders"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	start := time.Now()
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("remind in 20ms"), Delay: 20 * time.Millisecond})
	leases, err := q.LeaseWait(ctx, db, 1, time.Minute)
	if err != nil {
		fmt.Println(err)
		return
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

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"snooze"})
	q, _ := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: 1})
	_, _ = q.Add(ctx, db, fdbqueue.Job{Value: []byte("call the partner API")})

	ls, _ := q.Lease(ctx, db, 1, time.Minute)
	fmt.Printf("%s (attempt %d of %d)\n", ls[0].Value, ls[0].Attempt, ls[0].MaxAttempts)
	if err := q.Release(ctx, db, ls[0], 0); err != nil { // 0: due again at once
		fmt.Println(err)
		return
	}
	ls, _ = q.Lease(ctx, db, 1, time.Minute)
	fmt.Printf("%s (attempt %d of %d)\n", ls[0].Value, ls[0].Attempt, ls[0].MaxAttempts)
	_ = q.Ack(ctx, db, ls[0])
	// Output:
	// call the partner API (attempt 1 of 1)
	// call the partner API (attempt 1 of 1)
}
