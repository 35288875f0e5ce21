package memdb

import (
	"sort"
	"sync"
	"sync/atomic"
)

// readers registers the read versions of the transactions that may still
// read or commit at them, so that garbage collection keeps only what they
// need: the horizon is the oldest of them (or the latest version if there
// is none), but never older than the MVCC window allows, since a
// transaction older than that fails with transaction_too_old anyway.
//
// Without it the horizon would trail the latest version by the whole
// window (5 s), and every version and tombstone written in that time
// would stay live: for a queue, one chain per item enqueued in the last
// 5 s, which every garbage collection cycle of the Go runtime scans.
//
// A transaction registers its read version when it obtains it (under mu,
// together with reading the latest version, so that a concurrent commit
// either sees the registration or published its version before it) and
// unregisters it once it can no longer read at it: after a successful
// Commit (its operations then fail with used_during_commit; a commit run
// inline drops it in the commit step, before the step computes the
// horizon) or a reset.
// A transaction that is abandoned without either stays registered until
// its read version falls out of the window, which then drops it: the
// horizon is never later than it would be without the registry. Should a
// transaction read at an unregistered version older than the horizon,
// tooOldLocked fails it with transaction_too_old (rv < horizon), never
// with a value that garbage collection removed.
type readers struct {
	mu sync.Mutex
	// rvs and counts, from head, are the registered read versions in
	// increasing order and how many transactions hold each (0 once all have
	// unregistered; such entries leave from the front).
	rvs    []int64
	counts []int32
	head   int
}

// register reads the latest version and registers it as a read version.
func (r *readers) register(latest *atomic.Int64) int64 {
	r.mu.Lock()
	rv := latest.Load()
	if n := len(r.rvs); n > r.head && r.rvs[n-1] == rv {
		r.counts[n-1]++
	} else {
		// Versions only grow, so rv is the largest.
		r.rvs = append(r.rvs, rv)
		r.counts = append(r.counts, 1)
	}
	r.mu.Unlock()
	return rv
}

// retain adds a registration of rv, a read version still registered (by
// the transaction that holds it), and reports whether it did: false if rv
// is no longer registered.
func (r *readers) retain(rv int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	live := r.rvs[r.head:]
	i := sort.Search(len(live), func(i int) bool { return live[i] >= rv })
	if i < len(live) && live[i] == rv && r.counts[r.head+i] > 0 {
		r.counts[r.head+i]++
		return true
	}
	return false
}

// unregister drops one registration of rv. It may have been dropped
// already, as out of the window.
func (r *readers) unregister(rv int64) {
	r.mu.Lock()
	r.unregisterLocked(rv)
	r.mu.Unlock()
}

func (r *readers) unregisterLocked(rv int64) {
	if h := r.head; h < len(r.rvs) && r.rvs[h] == rv {
		// The oldest, as for transactions that end in the order they
		// began. Its count is not 0 (trimLocked drops such entries at
		// the front); only its drop to 0 lets trimLocked do anything.
		if c := r.counts[h]; c > 1 {
			r.counts[h] = c - 1
		} else if c == 1 {
			r.counts[h] = 0
			if h+1 == len(r.rvs) {
				// The only one left: trimLocked's first case.
				r.rvs, r.counts, r.head = r.rvs[:0], r.counts[:0], 0
			} else {
				r.trimLocked()
			}
		}
		return
	}
	live := r.rvs[r.head:]
	i := 0
	if len(live) > 8 {
		i = sort.Search(len(live), func(i int) bool { return live[i] >= rv })
	} else {
		for i < len(live) && live[i] < rv {
			i++
		}
	}
	if i < len(live) && live[i] == rv && r.counts[r.head+i] > 0 {
		r.counts[r.head+i]--
		r.trimLocked()
	}
}

// oldest drops the registrations older than floor (they are out of the
// window) and returns the oldest remaining read version, or latest if
// there is none.
func (r *readers) oldest(floor, latest int64) int64 {
	r.mu.Lock()
	h := r.oldestLocked(floor, latest)
	r.mu.Unlock()
	return h
}

// unregisterOldest is unregister(rv) then oldest(floor, latest) in one
// critical section: a commit drops its transaction's read version and
// advances the horizon with one lock round trip.
func (r *readers) unregisterOldest(rv, floor, latest int64) int64 {
	r.mu.Lock()
	r.unregisterLocked(rv)
	h := r.oldestLocked(floor, latest)
	r.mu.Unlock()
	return h
}

func (r *readers) oldestLocked(floor, latest int64) int64 {
	if r.head < len(r.rvs) && r.rvs[r.head] < floor {
		for r.head < len(r.rvs) && r.rvs[r.head] < floor {
			r.counts[r.head] = 0
			r.head++
		}
		r.trimLocked()
	}
	h := latest
	if r.head < len(r.rvs) {
		h = min(r.rvs[r.head], latest)
	}
	return h
}

// trimLocked drops the released entries at the front and compacts the
// slices once most of them is behind head.
func (r *readers) trimLocked() {
	for r.head < len(r.rvs) && r.counts[r.head] == 0 {
		r.head++
	}
	switch {
	case r.head == len(r.rvs):
		r.rvs, r.counts, r.head = r.rvs[:0], r.counts[:0], 0
	case r.head >= 64 && 2*r.head >= len(r.rvs):
		n := copy(r.rvs, r.rvs[r.head:])
		copy(r.counts, r.counts[r.head:])
		r.rvs, r.counts, r.head = r.rvs[:n], r.counts[:n], 0
	}
}

// len returns the number of registered read versions (tests).
func (r *readers) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts[r.head:] {
		n += int(c)
	}
	return n
}
