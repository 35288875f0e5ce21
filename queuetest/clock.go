package queuetest

import (
	"sync"
	"time"
)

// Clock is a fdbqueue.Clock (for JobQueueConfig.Clock) that moves only
// when Advance is called, so that tests of delays, leases and timers never
// sleep. The suite's job checks use it, and so can a backend's or an
// application's own tests. It is safe for concurrent use.
type Clock struct {
	// Armed, when not nil, receives the duration of every After call
	// (set it before the clock is in use): a test learns from it that a
	// waiter (LeaseWait, the pool's heartbeat) is asleep on its timer
	// without sleeping itself.
	Armed chan time.Duration

	mu     sync.Mutex
	now    time.Time
	timers []clockTimer
}

type clockTimer struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a Clock reading start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives when Advance reaches now + d (at
// once if d <= 0).
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
	} else {
		c.timers = append(c.timers, clockTimer{at: c.now.Add(d), ch: ch})
	}
	armed := c.Armed
	c.mu.Unlock()
	if armed != nil {
		armed <- d
	}
	return ch
}

// Advance moves the clock by d and fires the timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if !tm.at.After(c.now) {
			tm.ch <- c.now
		} else {
			kept = append(kept, tm)
		}
	}
	c.timers = kept
}
