package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A feeder's batch, and the backlog feeders keep: enough that the fastest
// mode never finds the queue empty.
const feedChunk, feedBacklog = 200, 4000

// feeder keeps a cell's queue topped up: write adds feedChunk items numbered
// from first; consumers count what they take in done. Both the dequeue and
// the lease cells use it.
type feeder struct {
	write       func(first int64) error
	added, done atomic.Int64
}

// fill writes one chunk.
func (f *feeder) fill() error {
	if err := f.write(f.added.Load()); err != nil {
		return err
	}
	f.added.Add(feedChunk)
	return nil
}

// prefill writes the whole backlog before the clock starts.
func (f *feeder) prefill() error {
	for range feedBacklog / feedChunk {
		if err := f.fill(); err != nil {
			return err
		}
	}
	return nil
}

// start runs n goroutines that keep the backlog full until ctx ends; a
// goroutine sends its first error to errc and stops. Wait on the result.
func (f *feeder) start(ctx context.Context, n int, errc chan<- error) *sync.WaitGroup {
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if f.added.Load()-f.done.Load() >= feedBacklog {
					time.Sleep(time.Millisecond) // the bench's own pacing, not synchronisation
					continue
				}
				if err := f.fill(); err != nil && ctx.Err() == nil {
					errc <- err
					return
				}
			}
		}()
	}
	return &wg
}
