package memdb

import "bytes"

// deadIndex holds the chains of a store whose newest version is a
// tombstone (the complement of liveTree in tree), ordered by key, so that
// a read or a conflict check at a read version rv finds the cleared keys
// that matter to it, those written after rv, in logarithmic time however
// many other keys were cleared since rv.
//
// It is a treap whose nodes are the chains themselves (no allocation per
// entry), each node augmented with the largest wv in its subtree: a
// subtree whose maximum is at or below rv holds nothing written after rv
// and is skipped whole. FoundationDB's resolver gets the same bound from a
// skip list with per-node maximum versions (fdbserver/SkipList.cpp); a
// treap is the smaller structure to write. Operations are recursive: the
// expected depth is O(log n).
type deadIndex struct {
	root *chain
	n    int
	seed uint64 // the state of the priority generator (splitmix64)
}

// dnode is a chain's part in a deadIndex.
//
// max is an upper bound of the wv in the subtree, not always the exact
// maximum: recomputing it would read both children of every node on a
// path, a cache miss each in a large index. An insertion (whose wv is the
// largest ever: writes come in version order) and a raised wv set it
// exactly along their path; a removal, a rotation or a merge keeps a bound
// that still covers the subtree. A bound above the true maximum can only
// come from a chain that left the index: through garbage collection, with
// a wv at or below the horizon and so at or below every read version that
// queries it, which changes nothing; or because its key got a value again
// (a write after those read versions, in the key's own range), which can
// add to a query at most one path per such key. Queries test each node's
// own wv, so the results are exact either way.
type dnode struct {
	l, r *chain
	max  int64  // an upper bound of the largest wv in the subtree
	prio uint32 // a heap order on priorities keeps the treap balanced
	in   bool   // the chain is in the index
}

// rotateRight lifts n's left child above n. n's bound still covers its
// new, smaller subtree; the child's must now cover n's too.
func rotateRight(n *chain) *chain {
	l := n.d.l
	n.d.l, l.d.r = l.d.r, n
	l.d.max = max(l.d.max, n.d.max)
	return l
}

// rotateLeft lifts n's right child above n.
func rotateLeft(n *chain) *chain {
	r := n.d.r
	n.d.r, r.d.l = r.d.l, n
	r.d.max = max(r.d.max, n.d.max)
	return r
}

// insert adds c, which is not in the index.
func (x *deadIndex) insert(c *chain) {
	x.seed += 0x9e3779b97f4a7c15
	z := x.seed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	c.d = dnode{prio: uint32(z >> 32), max: c.wv, in: true}
	x.root = x.ins(x.root, c)
	x.n++
}

func (x *deadIndex) ins(n, c *chain) *chain {
	if n == nil {
		return c
	}
	n.d.max = max(n.d.max, c.wv)
	if bytes.Compare(c.key, n.key) < 0 {
		n.d.l = x.ins(n.d.l, c)
		if n.d.l.d.prio > n.d.prio {
			return rotateRight(n)
		}
	} else {
		n.d.r = x.ins(n.d.r, c)
		if n.d.r.d.prio > n.d.prio {
			return rotateLeft(n)
		}
	}
	return n
}

// remove takes c, which is in the index, out of it.
func (x *deadIndex) remove(c *chain) {
	x.root = x.del(x.root, c)
	c.d = dnode{}
	x.n--
}

func (x *deadIndex) del(n, c *chain) *chain {
	if n == c {
		return merge(n.d.l, n.d.r)
	}
	if bytes.Compare(c.key, n.key) < 0 {
		n.d.l = x.del(n.d.l, c)
	} else {
		n.d.r = x.del(n.d.r, c)
	}
	return n // its bound still covers the smaller subtree
}

// merge joins two treaps, every key of a before every key of b.
func merge(a, b *chain) *chain {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.d.prio > b.d.prio:
		a.d.r = merge(a.d.r, b)
		a.d.max = max(a.d.max, b.d.max)
		return a
	default:
		b.d.l = merge(a, b.d.l)
		b.d.max = max(b.d.max, a.d.max)
		return b
	}
}

// raised records that c, which is in the index, has a new wv, at least
// every wv in the index (writes come in version order): every bound on
// its path becomes that wv.
func (x *deadIndex) raised(c *chain) {
	for n := x.root; n != nil; {
		n.d.max = max(n.d.max, c.wv)
		if n == c {
			return
		}
		if bytes.Compare(c.key, n.key) < 0 {
			n = n.d.l
		} else {
			n = n.d.r
		}
	}
}

// anyAfter reports whether a chain of [b, e) has wv above rv.
func (x *deadIndex) anyAfter(b, e []byte, rv int64) bool {
	return anyAfter(x.root, b, e, rv)
}

// anyAfter descends only into subtrees whose bound is above rv; one that
// lies wholly within [b, e) then holds a hit (but for the stale bounds
// dnode describes), so the cost is that of two paths from the root.
func anyAfter(n *chain, b, e []byte, rv int64) bool {
	for n != nil && n.d.max > rv {
		switch {
		case bytes.Compare(n.key, b) < 0:
			n = n.d.r
		case bytes.Compare(n.key, e) >= 0:
			n = n.d.l
		default:
			return n.wv > rv || anyAfter(n.d.l, b, e, rv) || anyAfter(n.d.r, b, e, rv)
		}
	}
	return false
}

// first returns the chain with the smallest key at or after k (after k if
// strict) whose wv is above rv, or nil.
func (x *deadIndex) first(k []byte, strict bool, rv int64) *chain {
	return firstAfter(x.root, k, strict, rv)
}

func firstAfter(n *chain, k []byte, strict bool, rv int64) *chain {
	for n != nil && n.d.max > rv {
		c := bytes.Compare(n.key, k)
		if c < 0 || (c == 0 && strict) {
			n = n.d.r
			continue
		}
		if f := firstAfter(n.d.l, k, strict, rv); f != nil {
			return f
		}
		if n.wv > rv {
			return n
		}
		n = n.d.r
	}
	return nil
}

// last returns the chain with the largest key before k (at or before k if
// incl) whose wv is above rv, or nil.
func (x *deadIndex) last(k []byte, incl bool, rv int64) *chain {
	return lastBefore(x.root, k, incl, rv)
}

func lastBefore(n *chain, k []byte, incl bool, rv int64) *chain {
	for n != nil && n.d.max > rv {
		c := bytes.Compare(n.key, k)
		if c > 0 || (c == 0 && !incl) {
			n = n.d.l
			continue
		}
		if f := lastBefore(n.d.r, k, incl, rv); f != nil {
			return f
		}
		if n.wv > rv {
			return n
		}
		n = n.d.l
	}
	return nil
}
