package fdbqueue_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Add a report job every minute. Every process may run RunScheduler: they
// add one job per minute between them. Here a fake clock (queuetest.Clock)
// moves time, so that the example does not wait; in production leave
// JobQueueConfig.Clock nil.
func ExampleJobQueue_RunScheduler() {
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()

	clock := queuetest.NewClock(time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC))
	clock.Armed = make(chan time.Duration, 1) // tells when the scheduler sleeps
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"periodic-example"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	if err != nil {
		log.Fatal(err)
	}
	report := fdbqueue.PeriodicJob{
		Name:  "report",
		Every: time.Minute,
		Job: func(slot time.Time) fdbqueue.Job {
			return fdbqueue.Job{Value: []byte("report for " + slot.Format("15:04"))}
		},
	}
	done := make(chan error, 1)
	go func() { done <- q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{report}) }()
	for range 2 {
		<-clock.Armed // the slot's job is added; the scheduler sleeps
		clock.Advance(time.Minute)
	}
	<-clock.Armed

	// Another scheduler in the same minute adds nothing.
	r, err := q.Schedule(ctx, db, report, time.Time{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second scheduler added:", r.Added)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	leases, err := q.Lease(context.Background(), db, 10, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Println(string(l.Value))
	}
	// Output:
	// second scheduler added: false
	// report for 12:00
	// report for 12:01
	// report for 12:02
}
