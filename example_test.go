package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func ExampleQueue_Enqueue() {
	ctx := context.Background()
	db := memdb.New() // on FoundationDB: fdbkv.OpenWithAPIVersion(730, clusterFile)
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	q, _ := fdbqueue.NewQueue(sub)
	for _, job := range []string{"resize", "encode", "upload"} {
		if err := q.Enqueue(ctx, db, []byte(job)); err != nil {
			fmt.Println("enqueue:", err)
			return
		}
	}
	n, _ := q.Len(ctx, db)
	fmt.Println("queued:", n)
	// Output: queued: 3
}

func ExampleQueue_Dequeue() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	q, _ := fdbqueue.NewQueue(sub)
	_ = q.EnqueueBatch(ctx, db, [][]byte{[]byte("first"), []byte("second")})
	for {
		v, err := q.Dequeue(ctx, db)
		if err != nil {
			fmt.Println(err) // errors.Is(err, fdbqueue.ErrEmpty)
			break
		}
		fmt.Println(string(v))
	}
	// Output:
	// first
	// second
	// fdbqueue: queue is empty
}

// Enqueue an item and write an application record in one transaction: both
// commit, or neither does.
func ExampleQueue_Enqueue_withinTransaction() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"emails"})
	q, _ := fdbqueue.NewQueue(sub)
	orders, _ := fdbqueue.NewSubspace(tuple.Tuple{"orders"})
	orderKey, _ := orders.Pack(tuple.Tuple{int64(1042)})

	// The OpID is made once, outside the retry loop, so that a retry after
	// commit_unknown_result does not enqueue the email twice.
	id := fdbqueue.NewOpID()
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(orderKey, []byte("paid")) // idempotent: a Set
		return q.Enqueue(ctx, tr, []byte("receipt for order 1042"), fdbqueue.WithOpID(id))
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	status, _ := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) { return tr.Get(orderKey).Get() })
	email, _ := q.Peek(ctx, db)
	fmt.Printf("order: %s, email: %s\n", status, email)
	// Output: order: paid, email: receipt for order 1042
}

// Two layers in one transaction: move the most urgent task from a priority
// queue to a FIFO work queue atomically.
func ExamplePriorityQueue_PopMin_composed() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	psub, _ := fdbqueue.NewSubspace(tuple.Tuple{"backlog"})
	backlog, _ := fdbqueue.NewPriorityQueue(psub)
	qsub, _ := fdbqueue.NewSubspace(tuple.Tuple{"ready"})
	ready, _ := fdbqueue.NewQueue(qsub)
	_ = backlog.Push(ctx, db, []byte("low"), 5)
	_ = backlog.Push(ctx, db, []byte("urgent"), 1)

	err := db.Transact(ctx, func(tr kv.Transaction) error {
		it, err := backlog.PopMin(ctx, tr)
		if err != nil {
			return err
		}
		return ready.Enqueue(ctx, tr, it.Value)
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	v, _ := ready.Dequeue(ctx, db)
	left, _ := backlog.Len(ctx, db)
	fmt.Printf("ready: %s, left in backlog: %d\n", v, left)
	// Output: ready: urgent, left in backlog: 1
}

func ExamplePriorityQueue_Push() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"tasks"})
	pq, _ := fdbqueue.NewPriorityQueue(sub)
	_ = pq.Push(ctx, db, []byte("write docs"), 3)
	_ = pq.Push(ctx, db, []byte("fix outage"), 0)
	_ = pq.Push(ctx, db, []byte("refactor"), 9)

	lo, _ := pq.PopMin(ctx, db)
	hi, _ := pq.PopMax(ctx, db)
	fmt.Printf("min %q (%d), max %q (%d)\n", lo.Value, lo.Priority, hi.Value, hi.Priority)
	// Output: min "fix outage" (0), max "refactor" (9)
}

func ExampleTypedQueue() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	type Job struct {
		ID  int    `json:"id"`
		URL string `json:"url"`
	}
	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"crawl"})
	q, _ := fdbqueue.NewQueue(sub)
	jobs := fdbqueue.NewTypedQueue(q, fdbqueue.JSONCodec[Job]{})
	_ = jobs.Enqueue(ctx, db, Job{ID: 1, URL: "https://example.com"})
	j, _ := jobs.Dequeue(ctx, db)
	fmt.Printf("%d %s\n", j.ID, j.URL)
	// Output: 1 https://example.com
}

func ExampleSubspace() {
	app, _ := fdbqueue.NewSubspace(tuple.Tuple{"app"})
	jobs, _ := app.Sub("jobs")
	key, _ := jobs.Pack(tuple.Tuple{int64(1), []byte{0xaa}})
	fmt.Printf("%x\n", key)
	t, _ := jobs.Unpack(key)
	fmt.Println(t[0], jobs.Contains(key))
	_, err := app.Unpack([]byte("elsewhere"))
	fmt.Println(err != nil)
	// Output:
	// 0261707000026a6f627300150101aa00
	// 1 true
	// true
}

// Many consumers on one queue: WithStaging makes Dequeue and DequeueWait
// stop competing for the head. With WithVersionstampOrder each waiting
// consumer takes the item at its place in the line of requests (the
// default serving mode for that layout); DequeueWait blocks on watches
// until an item arrives.
func ExampleWithStaging() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder(), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	if err != nil {
		fmt.Println(err)
		return
	}
	const consumers, jobs = 8, 40
	got := make(chan string, jobs)
	var wg sync.WaitGroup
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs / consumers {
				v, err := q.DequeueWait(ctx, db) // waits while the queue is empty
				if err != nil {
					fmt.Println("dequeue:", err)
					return
				}
				got <- string(v)
			}
		}()
	}
	for i := range jobs {
		if err := q.Enqueue(ctx, db, fmt.Appendf(nil, "job-%02d", i)); err != nil {
			fmt.Println("enqueue:", err)
			return
		}
	}
	wg.Wait()
	close(got)
	seen := map[string]bool{}
	for v := range got {
		seen[v] = true
	}
	fmt.Println("distinct jobs delivered:", len(seen))

	// A waiter whose context ends withdraws its request: nothing is lost.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	_, err = q.DequeueWait(wctx, db)
	fmt.Println(errors.Is(err, context.DeadlineExceeded))
	// Output:
	// distinct jobs delivered: 40
	// true
}
