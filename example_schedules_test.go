package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// List a queue's schedules: each schedule's marker, with the last slot
// scheduled and its job, in pages by name, each page after the last key
// of the one before. A schedule no process runs
// any more is listed too, its last slot falling behind.
func ExampleJobQueue_Schedules() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC))
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"schedules-example"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	for _, pj := range []fdbqueue.PeriodicJob{
		{Name: "report", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("report")} }},
		{Name: "cleanup", Every: 24 * time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("cleanup")} }},
	} {
		if _, err := q.Schedule(ctx, db, pj, time.Time{}); err != nil {
			log.Fatal(err)
		}
	}

	const page = 100
	var cursor []byte // nil: from the first
	for {
		schedules, err := q.Schedules(ctx, db, cursor, page)
		if err != nil {
			log.Fatal(err)
		}
		for _, s := range schedules {
			if s.Err != nil { // a marker this version cannot read, or another program's key
				fmt.Printf("%q: %v\n", s.Name, s.Err)
				continue
			}
			fmt.Printf("%s: last slot %s\n", s.Name, s.Slot.Format(time.RFC3339))
		}
		if len(schedules) < page {
			break
		}
		cursor = schedules[len(schedules)-1].Key // the next page starts after it
	}
	// Output:
	// cleanup: last slot 2026-01-01T00:00:00Z
	// report: last slot 2026-01-01T12:00:00Z
}

// A periodic job deleted from the code leaves its marker: once no process
// runs it (a scheduler still running it would write the marker again),
// Unschedule removes the marker. The jobs it added stay.
func ExampleJobQueue_Unschedule() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC))
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"unschedule-example"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock})
	if err != nil {
		log.Fatal(err)
	}
	legacy := fdbqueue.PeriodicJob{Name: "legacy-report", Every: time.Hour,
		Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("legacy report")} }}
	if _, err := q.Schedule(ctx, db, legacy, time.Time{}); err != nil {
		log.Fatal(err)
	}

	removed, err := q.Unschedule(ctx, db, "legacy-report")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", removed.Name, "last slot", removed.Slot.Format("15:04"))
	_, err = q.Unschedule(ctx, db, "legacy-report")
	fmt.Println("again:", errors.Is(err, fdbqueue.ErrScheduleNotFound))
	st, err := q.Stats(ctx, db)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs still queued:", st.Queued)
	// Output:
	// removed legacy-report last slot 12:00
	// again: true
	// jobs still queued: 1
}

// A typed periodic job: each slot's argument is encoded by the queue's
// codec before anything is written. Here a fake clock (queuetest.Clock)
// moves time; in production leave JobQueueConfig.Clock nil.
func ExampleTypedJobQueue_RunScheduler() {
	type digest struct {
		Since string `json:"since"`
	}
	ctx, stop := context.WithCancel(context.Background())
	db := memdb.New()
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	clock.Armed = make(chan time.Duration, 1) // tells when the scheduler sleeps
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"typed-periodic-example"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	if err != nil {
		log.Fatal(err)
	}
	tj := fdbqueue.NewTypedJobQueue(q, fdbqueue.JSONCodec[digest]{})
	hourly := fdbqueue.TypedPeriodicJob[digest]{
		Name:  "digest",
		Every: time.Hour,
		Job: func(slot time.Time) fdbqueue.TypedJob[digest] {
			return fdbqueue.TypedJob[digest]{Value: digest{Since: slot.Add(-time.Hour).Format("15:04")}}
		},
	}
	done := make(chan error, 1)
	go func() { done <- tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[digest]{hourly}) }()
	<-clock.Armed // the 12:00 slot's job is added
	clock.Advance(time.Hour)
	<-clock.Armed // and the 13:00 slot's
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}

	leases, err := tj.Lease(context.Background(), db, 10, time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range leases {
		fmt.Println("digest since", l.Value.Since)
	}
	// Output:
	// digest since 11:00
	// digest since 12:00
}
