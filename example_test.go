package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
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

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	for _, job := range []string{"resize", "encode", "upload"} {
		if err := q.Enqueue(ctx, db, []byte(job)); err != nil {
			log.Fatal(err)
		}
	}
	n, err := q.Len(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("queued:", n)
	// Output: queued: 3
}

func ExampleQueue_Dequeue() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	if err := q.EnqueueBatch(ctx, db, [][]byte{[]byte("first"), []byte("second")}); err != nil {
		log.Fatal(err)
	}
	for {
		v, err := q.Dequeue(ctx, db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			fmt.Println(err)
			break
		}
		if err != nil {
			log.Fatal(err)
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

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"emails"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	orders, err := fdbqueue.NewSubspace(tuple.Tuple{"orders"})
	if err != nil {
		log.Fatal(err)
	}
	orderKey, err := orders.Pack(tuple.Tuple{int64(1042)})
	if err != nil {
		log.Fatal(err)
	}

	// The OpID is made once, outside the retry loop, so that a retry after
	// commit_unknown_result does not enqueue the email twice.
	id := fdbqueue.NewOpID()
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(orderKey, []byte("paid")) // idempotent: a Set
		return q.Enqueue(ctx, tr, []byte("receipt for order 1042"), fdbqueue.WithOpID(id))
	})
	if err != nil {
		log.Fatal(err)
	}
	status, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) { return tr.Get(orderKey).Get() })
	if err != nil {
		log.Fatal(err)
	}
	email, err := q.Peek(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order: %s, email: %s\n", status, email)
	// Output: order: paid, email: receipt for order 1042
}

// Two layers in one transaction: move the most urgent task from a priority
// queue to a FIFO work queue atomically. Each call gets an ID made once,
// outside the retry loop, so that a retry after commit_unknown_result does
// not move a second task.
func ExamplePriorityQueue_PopMin_composed() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	psub, err := fdbqueue.NewSubspace(tuple.Tuple{"backlog"})
	if err != nil {
		log.Fatal(err)
	}
	backlog, err := fdbqueue.NewPriorityQueue(psub)
	if err != nil {
		log.Fatal(err)
	}
	qsub, err := fdbqueue.NewSubspace(tuple.Tuple{"ready"})
	if err != nil {
		log.Fatal(err)
	}
	ready, err := fdbqueue.NewQueue(qsub)
	if err != nil {
		log.Fatal(err)
	}
	for _, task := range []struct {
		v string
		p int64
	}{{"low", 5}, {"urgent", 1}} {
		if err := backlog.Push(ctx, db, []byte(task.v), task.p); err != nil {
			log.Fatal(err)
		}
	}

	popID, enqID := fdbqueue.NewOpID(), fdbqueue.NewOpID()
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		it, err := backlog.PopMin(ctx, tr, fdbqueue.WithOpID(popID))
		if err != nil {
			return err
		}
		return ready.Enqueue(ctx, tr, it.Value, fdbqueue.WithOpID(enqID))
	})
	if err != nil {
		log.Fatal(err)
	}
	v, err := ready.Dequeue(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	left, err := backlog.Len(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("ready: %s, left in backlog: %d\n", v, left)
	// Output: ready: urgent, left in backlog: 1
}

func ExamplePriorityQueue_Push() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"tasks"})
	if err != nil {
		log.Fatal(err)
	}
	pq, err := fdbqueue.NewPriorityQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	for _, task := range []struct {
		v string
		p int64
	}{{"write docs", 3}, {"fix outage", 0}, {"refactor", 9}} {
		if err := pq.Push(ctx, db, []byte(task.v), task.p); err != nil {
			log.Fatal(err)
		}
	}

	lo, err := pq.PopMin(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	hi, err := pq.PopMax(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
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
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"crawl"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		log.Fatal(err)
	}
	jobs := fdbqueue.NewTypedQueue(q, fdbqueue.JSONCodec[Job]{})
	if err := jobs.Enqueue(ctx, db, Job{ID: 1, URL: "https://example.com"}); err != nil {
		log.Fatal(err)
	}
	j, err := jobs.Dequeue(ctx, db) // a *fdbqueue.CodecError holds the bytes of an item that does not decode
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d %s\n", j.ID, j.URL)
	// Output: 1 https://example.com
}

func ExampleSubspace() {
	app, err := fdbqueue.NewSubspace(tuple.Tuple{"app"})
	if err != nil {
		log.Fatal(err)
	}
	jobs, err := app.Sub("jobs")
	if err != nil {
		log.Fatal(err)
	}
	key, err := jobs.Pack(tuple.Tuple{int64(1), []byte{0xaa}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%x\n", key)
	t, err := jobs.Unpack(key)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(t[0], jobs.Contains(key))
	_, err = app.Unpack([]byte("elsewhere"))
	fmt.Println(errors.Is(err, fdbqueue.ErrKeyOutsideSubspace))
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

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder(), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	if err != nil {
		log.Fatal(err)
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
			log.Fatal(err)
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
