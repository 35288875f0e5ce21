package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// fakeClock is a fdbqueue.Clock that moves only when Advance is called.
// Every After call is announced on armed (if not nil), so that a test
// knows a waiter is asleep without sleeping itself.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []fakeTimer
	armed  chan time.Duration
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, fakeTimer{at: c.now.Add(d), ch: ch})
	}
	armed := c.armed
	c.mu.Unlock()
	if armed != nil {
		armed <- d
	}
	return ch
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.at.After(c.now) {
			t.ch <- c.now
		} else {
			kept = append(kept, t)
		}
	}
	c.timers = kept
}

func mustJobQueue(t testing.TB, name string, cfg fdbqueue.JobQueueConfig, opts ...fdbqueue.Option) *fdbqueue.JobQueue {
	t.Helper()
	q, err := fdbqueue.NewJobQueue(mustSubspace(t, "test", name), cfg, opts...)
	require.NoError(t, err)
	return q
}

func mustStats(t testing.TB, db kv.Database, q *fdbqueue.JobQueue) fdbqueue.JobStats {
	t.Helper()
	s, err := q.Stats(context.Background(), db)
	require.NoError(t, err)
	return s
}

func mustAdd(t testing.TB, db kv.Database, q *fdbqueue.JobQueue, j fdbqueue.Job) fdbqueue.AddResult {
	t.Helper()
	r, err := q.Add(context.Background(), db, j)
	require.NoError(t, err)
	return r
}

func mustLease(t testing.TB, db kv.Database, q *fdbqueue.JobQueue, n int, d time.Duration) []fdbqueue.Lease {
	t.Helper()
	ls, err := q.Lease(context.Background(), db, n, d)
	require.NoError(t, err)
	return ls
}
