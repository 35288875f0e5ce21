package exampleapp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// WorkQueueConfig sizes the work-queue example.
type WorkQueueConfig struct {
	Producers int       // goroutines enqueuing
	Consumers int       // goroutines dequeuing
	Items     int       // items to move in all
	Batch     int       // items per dequeue transaction (DequeueBatch's max)
	Progress  io.Writer // where the live progress line goes (nil: none)
}

// WorkQueueSummary is what the example measured.
type WorkQueueSummary struct {
	Items      int           // items enqueued
	Dequeued   int           // items dequeued (each counted once per time it came out)
	Duplicates int           // items that came out more than once (must be 0)
	Lost       int           // items that never came out (must be 0)
	Elapsed    time.Duration // wall time of the whole run
	Stats      *memdb.Stats  // engine statistics, when the database is memdb
}

// ItemsPerSecond is the dequeue throughput.
func (s WorkQueueSummary) ItemsPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Dequeued) / s.Elapsed.Seconds()
}

// String renders the summary in a few lines.
func (s WorkQueueSummary) String() string {
	out := fmt.Sprintf("items:       %d enqueued, %d dequeued (%d duplicated, %d lost)\n", s.Items, s.Dequeued, s.Duplicates, s.Lost)
	out += fmt.Sprintf("throughput:  %.0f items/s over %v\n", s.ItemsPerSecond(), s.Elapsed.Round(time.Millisecond))
	if s.Stats != nil {
		out += fmt.Sprintf("engine:      %d commits, %d conflicts, %d retries, %d unknown results injected\n",
			s.Stats.Commits, s.Stats.Conflicts, s.Stats.Retries,
			s.Stats.InjectedUnknownApplied+s.Stats.InjectedUnknownNotApplied)
	} else {
		out += "engine:      statistics not available on this backend\n"
	}
	return out
}

// RunWorkQueue moves cfg.Items items through q with concurrent producers and
// consumers and checks that each came out exactly once. The consumers share
// nothing with the producers but the database, as separate processes would
// (see consume), except how they learn to stop: once the producers are done
// (an in-process signal, producing) and the queue is empty.
func RunWorkQueue(ctx context.Context, db kv.Database, q *fdbqueue.Queue, cfg WorkQueueConfig) (WorkQueueSummary, error) {
	if cfg.Producers < 1 || cfg.Consumers < 1 || cfg.Items < 1 || cfg.Batch < 1 {
		return WorkQueueSummary{}, fmt.Errorf("%w: producers, consumers, items and batch must be at least 1", fdbqueue.ErrInvalidArgument)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	producing, producersDone := context.WithCancel(ctx)
	defer producersDone()
	start := time.Now()
	var enqueued, dequeued atomic.Int64
	errc := make(chan error, cfg.Producers+cfg.Consumers)
	fail := func(err error) {
		errc <- err
		cancel()
	}

	var pwg sync.WaitGroup
	for p := range cfg.Producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < cfg.Items; i += cfg.Producers {
				if err := q.Enqueue(ctx, db, []byte(fmt.Sprintf("job-%07d", i))); err != nil {
					fail(fmt.Errorf("enqueue: %w", err))
					return
				}
				enqueued.Add(1)
			}
		}()
	}
	go func() { pwg.Wait(); producersDone() }()

	counts := make([]int32, cfg.Items)
	take := func(vals [][]byte) error {
		for _, v := range vals {
			var i int
			if _, err := fmt.Sscanf(string(v), "job-%d", &i); err != nil || i < 0 || i >= cfg.Items {
				return fmt.Errorf("unexpected item %q", v)
			}
			atomic.AddInt32(&counts[i], 1)
		}
		dequeued.Add(int64(len(vals)))
		return nil
	}
	var cwg sync.WaitGroup
	for range cfg.Consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			if err := consume(ctx, producing, db, q, cfg.Batch, take); err != nil {
				fail(err)
			}
		}()
	}

	stopProgress := startProgress(cfg.Progress, start, &enqueued, &dequeued, cfg.Items)
	cwg.Wait()
	// The consumers can end first (a failure, Ctrl-C): wait for the
	// producers too before closing errc, which a failing one sends on.
	pwg.Wait()
	stopProgress()
	close(errc)
	if err := <-errc; err != nil {
		return WorkQueueSummary{}, err
	}

	s := WorkQueueSummary{Items: int(enqueued.Load()), Dequeued: int(dequeued.Load()), Elapsed: time.Since(start)}
	for _, c := range counts {
		switch {
		case c == 0:
			s.Lost++
		case c > 1:
			s.Duplicates++
		}
	}
	if m, ok := db.(*memdb.DB); ok {
		st := m.Stats()
		s.Stats = &st
	}
	return s, nil
}

// consume dequeues up to batch items per transaction and hands them to
// take, until it finds the queue empty after producing has ended. Each
// DequeueBatch runs in a transaction of its own, exactly once under
// commit_unknown_result (the queue's journal returns what a committed
// attempt took). On an empty queue it waits as a consumer in another
// process must: a small transaction checks that the queue is still empty
// and arms a watch (Queue.WatchForItems) at the same read version, so an
// enqueue committed in between is either seen or fires the watch; it
// commits, then blocks on the watch. producing ending wakes it too, for
// one last look.
func consume(ctx, producing context.Context, db kv.Database, q *fdbqueue.Queue, batch int, take func([][]byte) error) error {
	for {
		// Once the producers are done, every enqueue has committed, and a
		// transaction begun after that sees them all: if it finds the
		// queue empty, there is nothing left to wait for.
		last := producing.Err() != nil
		vals, err := q.DequeueBatch(ctx, db, batch)
		switch {
		case err == nil:
			if err := take(vals); err != nil {
				return err
			}
			continue
		case !errors.Is(err, fdbqueue.ErrEmpty):
			return fmt.Errorf("dequeue: %w", err)
		case last:
			return nil
		}
		var watch kv.Watch
		err = db.Transact(ctx, func(tr kv.Transaction) error {
			watch = nil
			empty, err := q.Empty(ctx, tr)
			if err != nil || !empty {
				return err // an item arrived since: take it
			}
			watch, err = q.WatchForItems(tr) // armed when tr commits
			return err
		})
		if err != nil {
			return fmt.Errorf("watch: %w", err)
		}
		if watch == nil {
			continue
		}
		err = watch.Wait(producing) // an item may have arrived, or the producers are done
		watch.Cancel()
		// A retryable error (FDB fails a watch whose read fails, or a
		// registered one that fell behind) is a wake-up too: look again.
		if err != nil && producing.Err() == nil && !kv.IsRetryable(err) {
			return fmt.Errorf("watch: %w", err)
		}
	}
}

// startProgress redraws one status line five times a second until stopped.
func startProgress(w io.Writer, start time.Time, enq, deq *atomic.Int64, total int) (stop func()) {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	draw := func() {
		el := time.Since(start)
		d := deq.Load()
		fmt.Fprintf(w, "\r%6.1fs  enqueued %7d/%d  dequeued %7d  %7.0f items/s ", el.Seconds(), enq.Load(), total, d, float64(d)/max(el.Seconds(), 1e-9))
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				draw()
			case <-done:
				draw()
				fmt.Fprintln(w)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}
