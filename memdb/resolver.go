package memdb

import (
	"bytes"

	"github.com/tidwall/btree"
)

// resolver remembers, for every part of the key space, the last version at
// which a committed transaction wrote it (its write conflict ranges), as
// FoundationDB's resolvers do. A transaction with read version rv conflicts
// when a range it read was written at a version above rv.
//
// It holds only the writes that the store cannot record on a key's entry
// (chain.wv): range writes (ClearRange, AddWriteConflictRange) and point
// writes of keys that are not stored (clearing a missing key). A read
// conflict range therefore conflicts if the resolver says so or if a
// stored key inside it has a wv above the read version (store.writtenAfter).
//
// The key space is a step function kept as boundary points: a point (k, v)
// says that keys from k up to the next point were last written at v. Before
// the first point the version is 0. Versions at or below the GC horizon are
// indistinguishable from 0 to every transaction still allowed to commit, so
// gc folds them into 0 and merges equal neighbours.
type resolver struct {
	// points maps each boundary key, as ukey of a slice the resolver
	// retains, to its version: a Map of strings compares keys natively.
	points *btree.Map[string, int64]
	// maxV is the largest version ever written: no range was written after
	// a read version at or above it.
	maxV int64
	// sizeAfterGC is the number of points after the last gc; the next gc runs
	// once the count has doubled, which keeps its cost amortised O(1).
	sizeAfterGC int
	scratch     []string // write's list of points to delete
}

func newResolver() *resolver {
	return &resolver{points: new(btree.Map[string, int64])}
}

// versionAt returns the version of the step containing key.
func (r *resolver) versionAt(key []byte) int64 {
	var v int64
	r.points.Descend(ukey(key), func(_ string, pv int64) bool {
		v = pv
		return false
	})
	return v
}

// conflicts reports whether [begin, end) was written after rv.
func (r *resolver) conflicts(begin, end []byte, rv int64) bool {
	if r.maxV <= rv {
		return false
	}
	if r.versionAt(begin) > rv {
		return true
	}
	hit := false
	ek := ukey(end)
	r.points.Ascend(ukey(begin), func(k string, v int64) bool {
		if k >= ek {
			return false
		}
		hit = v > rv
		return !hit
	})
	return hit
}

// write records that [begin, end) was written at v, which is at least every
// version recorded so far. The keys are retained: callers pass slices they
// will not modify.
//
// It costs three searches of the tree (one to find the step containing
// end and whether points lie inside the range, two to set the range's
// bounds), plus a scan and a deletion per point inside the range.
func (r *resolver) write(begin, end []byte, v int64) {
	if bytes.Compare(begin, end) >= 0 {
		return
	}
	r.maxV = v
	bk, ek := ukey(begin), ukey(end)
	// The last point before end, and whether one lies at end (it stays).
	var last string
	var after int64
	found, atEnd := false, false
	r.points.Descend(ek, func(k string, pv int64) bool {
		if k == ek {
			atEnd = true
			return true
		}
		last, after, found = k, pv, true
		return false
	})
	if found && last > bk {
		// Points strictly inside (begin, end) go; one at begin is set below.
		del := r.scratch[:0]
		r.points.Ascend(bk, func(k string, _ int64) bool {
			if k >= ek {
				return false
			}
			if k != bk {
				del = append(del, k)
			}
			return true
		})
		for _, k := range del {
			r.points.Delete(k)
		}
		clear(del)
		if cap(del) > 1024 {
			del = nil // do not keep a large range's list
		}
		r.scratch = del[:0]
	}
	r.points.Set(bk, v)
	if !atEnd {
		r.points.Set(ek, after)
	}
}

// isPointRange reports whether [b, e) holds the single key b (e is b+\x00).
func isPointRange(b, e []byte) bool {
	return len(e) == len(b)+1 && e[len(b)] == 0 && bytes.Equal(b, e[:len(b)])
}

// len returns the number of boundary points held.
func (r *resolver) len() int { return r.points.Len() }

// maybeGC folds versions at or below horizon into 0 when the point count has
// doubled since the last collection.
func (r *resolver) maybeGC(horizon int64) {
	if n := r.points.Len(); n < 2*r.sizeAfterGC+1024 {
		return
	}
	r.gc(horizon)
}

func (r *resolver) gc(horizon int64) {
	kept := new(btree.Map[string, int64])
	prev := int64(0)
	r.points.Scan(func(k string, v int64) bool {
		if v <= horizon {
			v = 0
		}
		if v != prev {
			kept.Load(k, v)
			prev = v
		}
		return true
	})
	r.points = kept
	r.sizeAfterGC = kept.Len()
}
