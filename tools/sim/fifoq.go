package sim

import "slices"

// fifoQ is a FIFO model's sequence of item IDs, head first, as a value
// that the checker can keep in many states at once: a window [lo, hi) of
// a log that the states derived from one another share. The checker
// steps every state it explores, and most steps append at the tail or
// take the head, so a state costs O(1) to make instead of a copy of the
// whole queue (which took most of a simulation's checking time).
//
// A log is append-only: an entry, once written, never changes, so every
// window over it stays as it was. A push onto a window that ends where
// the log does appends in place; one that ends before (another state
// derived from the same one pushed already) shares that entry if it is
// the same ID, else copies the window into a new log. Prepending works
// the same way at the window's start. A log belongs to one check: the
// checker steps its states on one goroutine, and Init makes a new log.
//
// h hashes the sequence as a polynomial, sum of mix(id_k) * hashBase^k
// with k counted from the head (mod 2^64; mix is sim.go's), and pn is hashBase^len: both
// follow a push, a prepend and a take in O(1) (hashBase is odd, so it has
// an inverse mod 2^64), and equal sequences hash alike however they were
// built.
type fifoQ struct {
	log    *fifoLog
	lo, hi int
	h, pn  uint64
}

type fifoLog struct{ ids []uint64 }

const hashBase uint64 = 0x9e3779b97f4a7c15 // odd

// hashBaseInv is hashBase's inverse mod 2^64 (Newton's iteration: each
// step doubles the bits that are right, and hashBase is its own inverse
// mod 8).
var hashBaseInv = func() uint64 {
	inv := hashBase
	for range 5 {
		inv *= 2 - hashBase*inv
	}
	return inv
}()

func newFIFOQ(ids []uint64) fifoQ {
	q := fifoQ{log: &fifoLog{ids: make([]uint64, 0, len(ids)+16)}, pn: 1}
	for _, id := range ids {
		q = q.push(id)
	}
	return q
}

func (q fifoQ) len() int { return q.hi - q.lo }

// ids returns the sequence; the caller must not modify it.
func (q fifoQ) ids() []uint64 { return q.log.ids[q.lo:q.hi:q.hi] }

// head returns the first ID; the queue must not be empty.
func (q fifoQ) head() uint64 { return q.log.ids[q.lo] }

// push returns q with id appended.
func (q fifoQ) push(id uint64) fifoQ {
	l := q.log
	switch {
	case q.hi == len(l.ids):
		l.ids = append(l.ids, id)
	case l.ids[q.hi] == id: // appended by another state: share it
	default:
		n := q.len()
		ids := make([]uint64, n, 2*n+16)
		copy(ids, q.ids())
		q.log, q.lo, q.hi = &fifoLog{ids: append(ids, id)}, 0, n
	}
	q.hi++
	q.h += mix(id) * q.pn
	q.pn *= hashBase
	return q
}

// prepend returns q with id before its head.
func (q fifoQ) prepend(id uint64) fifoQ {
	if q.lo == 0 || q.log.ids[q.lo-1] != id {
		// No room before the window, or another ID there: a new log with
		// room at both ends.
		n := q.len()
		room := n/2 + 8
		ids := make([]uint64, room+n, room+2*n+16)
		copy(ids[room:], q.ids())
		ids[room-1] = id
		q.log, q.lo, q.hi = &fifoLog{ids: ids}, room, room+n
	}
	q.lo--
	q.h = mix(id) + q.h*hashBase
	q.pn *= hashBase
	return q
}

// drop returns q without its first n IDs (n <= q.len()).
func (q fifoQ) drop(n int) fifoQ {
	for _, id := range q.log.ids[q.lo : q.lo+n] {
		q.h = (q.h - mix(id)) * hashBaseInv
		q.pn *= hashBaseInv
	}
	q.lo += n
	return q
}

// equal reports whether q and r hold the same sequence.
func (q fifoQ) equal(r fifoQ) bool {
	if q.len() != r.len() || q.h != r.h {
		return false
	}
	if q.log == r.log && q.lo == r.lo {
		return true
	}
	return slices.Equal(q.ids(), r.ids())
}
