package memdb

import (
	"sync"
	"time"
)

// Clock tells the time that a DB uses for versions, the MVCC window
// (transaction_too_old) and transaction timeouts. It must never go
// backwards.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
}

// realClock is the default Clock: the system's monotonic time. It reads
// only the monotonic clock, which costs less than half of time.Now (which
// reads the wall clock too): its times are base plus the monotonic time
// elapsed since base, so their wall clock part ignores adjustments of the
// system clock made since base, which no user of a DB's times cares about.
type realClock struct{ base time.Time }

func newRealClock() realClock { return realClock{base: time.Now()} }

// Now returns the current time.
func (c realClock) Now() time.Time { return c.base.Add(time.Since(c.base)) }

// ManualClock is a Clock that moves only when Advance is called, so that
// tests can make the MVCC window expire without sleeping. It is safe for
// concurrent use.
type ManualClock struct {
	mu  sync.Mutex
	now time.Time
}

// NewManualClock returns a ManualClock reading start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start}
}

// Now returns the clock's current time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d; a negative d is ignored, since a
// Clock never goes backwards.
func (c *ManualClock) Advance(d time.Duration) {
	if d <= 0 {
		return
	}
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
