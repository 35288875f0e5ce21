package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// A consumer that takes a job and records its result in one transaction,
// so that a job is never taken without its result or done twice, and that
// sleeps on a watch while the queue is empty instead of polling.
func ExampleQueue_WatchForItems() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	jobs, err := fdbqueue.NewSubspace(tuple.Tuple{"jobs"})
	if err != nil {
		log.Fatal(err)
	}
	results, err := fdbqueue.NewSubspace(tuple.Tuple{"results"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(jobs)
	if err != nil {
		log.Fatal(err)
	}

	waiting := make(chan struct{})
	finished := make(chan struct{})
	go func() { // the consumer
		defer close(finished)
		for done := 0; done < 3; {
			var watch kv.Watch
			err := db.Transact(ctx, func(tr kv.Transaction) error {
				watch = nil
				job, err := q.Dequeue(ctx, tr)
				if errors.Is(err, fdbqueue.ErrEmpty) {
					watch, err = q.WatchForItems(tr) // armed when tr commits
					return err
				}
				if err != nil {
					return err
				}
				key, err := results.Pack(tuple.Tuple{string(job)})
				if err != nil {
					return err
				}
				tr.Set(key, []byte("ok")) // in the same commit as the dequeue
				return nil
			})
			if err != nil {
				fmt.Println("consumer:", err)
				return
			}
			if watch == nil {
				done++
				continue
			}
			waiting <- struct{}{}
			err = watch.Wait(ctx) // blocks until an enqueue bumps the signal
			watch.Cancel()
			if err != nil && !kv.IsRetryable(err) { // a retryable error: look again
				fmt.Println("watch:", err)
				return
			}
		}
	}()

	for _, job := range []string{"resize", "encode", "upload"} {
		<-waiting // the consumer found the queue empty and sleeps
		if err := q.Enqueue(ctx, db, []byte(job)); err != nil {
			log.Fatal(err)
		}
	}
	<-finished
	r, err := results.Range()
	if err != nil {
		log.Fatal(err)
	}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, p := range kvs {
		t, err := results.Unpack(p.Key)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(t[0], string(p.Value))
	}
	// Output:
	// encode ok
	// resize ok
	// upload ok
}
