package exampleapp

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// RunWorkQueue, the main example's logic, moves every item exactly once
// while the engine answers some commits with commit_unknown_result, with
// plain dequeues (batch 1) and batch dequeues alike, and says so in its
// summary.
func TestRunWorkQueueMovesEveryItemOnce(t *testing.T) {
	for _, batch := range []int{1, 8} {
		t.Run(fmt.Sprintf("batch-%d", batch), func(t *testing.T) {
			db := memdb.New(MemdbOptions(3, 0.1, false)...)
			defer db.Close()
			sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
			if err != nil {
				t.Fatal(err)
			}
			q, err := fdbqueue.NewQueue(sub)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			const items = 300
			s, err := RunWorkQueue(ctx, db, q, WorkQueueConfig{Producers: 3, Consumers: 3, Items: items, Batch: batch})
			if err != nil {
				t.Fatal(err)
			}
			if s.Items != items || s.Dequeued != items || s.Lost != 0 || s.Duplicates != 0 {
				t.Fatalf("want %d items enqueued and dequeued once each: %+v", items, s)
			}
			if s.Stats == nil || s.Stats.InjectedUnknownApplied+s.Stats.InjectedUnknownNotApplied == 0 {
				t.Fatalf("the run must have met commit_unknown_result: %+v", s.Stats)
			}
			if empty, err := q.Empty(ctx, db); err != nil || !empty {
				t.Fatalf("the queue must be empty after the run: empty %v, %v", empty, err)
			}
		})
	}
}

func TestRunWorkQueueRefusesAnEmptyConfig(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
	q, _ := fdbqueue.NewQueue(sub)
	_, err := RunWorkQueue(context.Background(), db, q, WorkQueueConfig{Producers: 1, Consumers: 1, Items: 1})
	if !errors.Is(err, fdbqueue.ErrInvalidArgument) {
		t.Fatalf("batch 0: want ErrInvalidArgument, got %v", err)
	}
}
