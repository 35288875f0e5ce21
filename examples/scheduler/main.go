// Command scheduler shows fdbqueue.PriorityQueue ordering tasks by due time
// on the embedded engine: tasks are pushed with their due time as priority
// and run earliest first (at once, in due order: it does not wait for them
// to fall due).
//
//	go run ./examples/scheduler
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/examples/exampleapp"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "scheduler"})
	if err != nil {
		fail(err)
	}
	pq, err := fdbqueue.NewPriorityQueue(sub)
	if err != nil {
		fail(err)
	}
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	tasks := []exampleapp.Task{
		{Name: "backup", Due: base.Add(90 * time.Minute)},
		{Name: "report", Due: base.Add(15 * time.Minute)},
		{Name: "cleanup", Due: base.Add(4 * time.Hour)},
		{Name: "email", Due: base.Add(15 * time.Minute)},
		{Name: "reindex", Due: base.Add(2 * time.Hour)},
	}
	if _, err := exampleapp.RunScheduler(context.Background(), db, pq, tasks, os.Stdout); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scheduler:", err)
	os.Exit(1)
}
