package exampleapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Task is a scheduled piece of work in the scheduler example.
type Task struct {
	Name string    `json:"name"`
	Due  time.Time `json:"due"`
}

// RunScheduler pushes tasks into a priority queue keyed by due time
// (Unix milliseconds), logs the latest-due task (PeekMax), then takes the
// tasks earliest first (PopMin; tasks due at the same time in the order
// they were pushed), logging each to out. It returns the names in the
// order they were run. It runs them at once, in due order: a scheduler that
// waits would PeekMin and sleep until the first task is due.
func RunScheduler(ctx context.Context, db kv.Database, pq *fdbqueue.PriorityQueue, tasks []Task, out io.Writer) ([]string, error) {
	tq := fdbqueue.NewTypedPriorityQueue(pq, fdbqueue.JSONCodec[Task]{})
	for _, t := range tasks {
		if err := tq.Push(ctx, db, t, t.Due.UnixMilli()); err != nil {
			return nil, fmt.Errorf("schedule %s: %w", t.Name, err)
		}
	}
	fmt.Fprintf(out, "scheduled %d tasks\n", len(tasks))
	switch last, err := tq.PeekMax(ctx, db); {
	case err == nil:
		fmt.Fprintf(out, "latest due: %s at %s\n", last.Value.Name, last.Value.Due.UTC().Format(time.TimeOnly))
	case !errors.Is(err, fdbqueue.ErrEmpty):
		return nil, err
	}
	var ran []string
	for {
		it, err := tq.PopMin(ctx, db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			return ran, nil
		}
		if err != nil {
			return ran, err
		}
		fmt.Fprintf(out, "run %-10s due %s\n", it.Value.Name, it.Value.Due.UTC().Format(time.TimeOnly))
		ran = append(ran, it.Value.Name)
	}
}
