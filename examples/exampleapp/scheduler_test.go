package exampleapp

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// RunScheduler runs the tasks earliest due first, tasks due at the same
// time in the order they were pushed (the PriorityQueue is FIFO within a
// priority), reports the latest-due one first, and leaves nothing queued.
func TestRunSchedulerRunsEarliestDueFirst(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "scheduler"})
	if err != nil {
		t.Fatal(err)
	}
	pq, err := fdbqueue.NewPriorityQueue(sub)
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	tasks := []Task{
		{Name: "backup", Due: base.Add(90 * time.Minute)},
		{Name: "report", Due: base.Add(15 * time.Minute)},
		{Name: "cleanup", Due: base.Add(4 * time.Hour)},
		{Name: "email", Due: base.Add(15 * time.Minute)},
		{Name: "reindex", Due: base.Add(2 * time.Hour)},
	}
	byDue := slices.Clone(tasks)
	slices.SortStableFunc(byDue, func(a, b Task) int { return a.Due.Compare(b.Due) })
	var want []string
	for _, task := range byDue {
		want = append(want, task.Name)
	}

	ctx := context.Background()
	var out bytes.Buffer
	ran, err := RunScheduler(ctx, db, pq, tasks, &out)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	latest := byDue[len(byDue)-1]
	if !strings.Contains(out.String(), "latest due: "+latest.Name+" ") {
		t.Fatalf("the log must name %s as the latest due:\n%s", latest.Name, out.String())
	}
	if empty, err := pq.Empty(ctx, db); err != nil || !empty {
		t.Fatalf("the queue must be empty after the run: empty %v, %v", empty, err)
	}
}
