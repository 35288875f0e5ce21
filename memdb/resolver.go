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
	points *btree.BTreeG[rpoint]
	// maxV is the largest version ever written: no range was written after
	// a read version at or above it.
	maxV int64
	// sizeAfterGC is the number of points after the last gc; the next gc runs
	// once the count has doubled, which keeps its cost amortised O(1).
	sizeAfterGC int
}

type rpoint struct {
	key []byte
	v   int64
}

func rpointLess(a, b rpoint) bool { return bytes.Compare(a.key, b.key) < 0 }

func newResolver() *resolver {
	return &resolver{points: btree.NewBTreeGOptions(rpointLess, btree.Options{NoLocks: true})}
}

// versionAt returns the version of the step containing key.
func (r *resolver) versionAt(key []byte) int64 {
	var v int64
	r.points.Descend(rpoint{key: key}, func(p rpoint) bool {
		v = p.v
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
	r.points.Ascend(rpoint{key: begin}, func(p rpoint) bool {
		if bytes.Compare(p.key, end) >= 0 {
			return false
		}
		if p.v > rv {
			hit = true
			return false
		}
		return true
	})
	return hit
}

// write records that [begin, end) was written at v, which is at least every
// version recorded so far. The keys are retained: callers pass slices they
// will not modify.
func (r *resolver) write(begin, end []byte, v int64) {
	if bytes.Compare(begin, end) >= 0 {
		return
	}
	r.maxV = v
	if isPointRange(begin, end) {
		// No key lies strictly between k and k+\x00.
		if _, ok := r.points.Get(rpoint{key: end}); ok {
			r.points.Set(rpoint{key: begin, v: v})
			return
		}
		after := r.versionAt(begin)
		r.points.Set(rpoint{key: begin, v: v})
		r.points.Set(rpoint{key: end, v: after})
		return
	}
	after := r.versionAt(end)
	// Remove the points inside [begin, end); a point exactly at end stays.
	for {
		var inside rpoint
		found := false
		r.points.Ascend(rpoint{key: begin}, func(p rpoint) bool {
			if bytes.Compare(p.key, end) < 0 {
				inside, found = p, true
			}
			return false
		})
		if !found {
			break
		}
		r.points.Delete(inside)
	}
	r.points.Set(rpoint{key: begin, v: v})
	if _, ok := r.points.Get(rpoint{key: end}); !ok {
		r.points.Set(rpoint{key: end, v: after})
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
	kept := btree.NewBTreeGOptions(rpointLess, btree.Options{NoLocks: true})
	prev := int64(0)
	r.points.Scan(func(p rpoint) bool {
		v := p.v
		if v <= horizon {
			v = 0
		}
		if v != prev {
			kept.Load(rpoint{key: p.key, v: v})
			prev = v
		}
		return true
	})
	r.points = kept
	r.sizeAfterGC = kept.Len()
}
