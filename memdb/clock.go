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

// dbClock is a DB's time: how long after the DB was made, on its Clock.
// Versions, the MVCC window and timeouts need only durations, and with
// the default clock a duration is one monotonic clock read (time.Since of
// a monotonic time), without the arithmetic of building a time.Time or
// an interface call: a transaction reads the clock at least twice.
type dbClock struct {
	c     Clock
	real  bool // c is realClock
	start time.Time
}

func newDBClock(c Clock) dbClock {
	_, real := c.(realClock)
	return dbClock{c: c, real: real, start: c.Now()}
}

// Now returns the time elapsed since the DB was made.
func (c *dbClock) Now() time.Duration {
	if c.real {
		return time.Since(c.start)
	}
	return c.c.Now().Sub(c.start)
}

// at returns the time on the Clock of d, a duration from Now.
func (c *dbClock) at(d time.Duration) time.Time { return c.start.Add(d) }
