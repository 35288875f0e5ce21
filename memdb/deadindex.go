package memdb

import (
	"bytes"
	"sync"
)

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
// skip list with per-node maximum versions (fdbserver/SkipList.cpp, class SkipList); a
// treap is the smaller structure to write. Operations are recursive: the
// expected depth is O(log n).
//
// A cleared chain first goes to log, a list in commit order, at O(1);
// it moves into the treap only when a query at a read version below its
// wv needs it. A query at a read version at or above every logged wv (a
// transaction that started after the clears: the common case) needs
// nothing from the log, and most logged chains leave the index (garbage
// collected after the MVCC window, or given a value again) without ever
// paying for the treap. A query that needs the log moves all of it first,
// each chain once, at O(log n) each: every query still costs O(log n)
// plus, amortised over the clears, O(log n) per clear at most.
//
// The store's commits modify the index under DB.mu held exclusively;
// queries come under DB.mu held shared, from several readers at once, and
// a query that needs the log moves it under mu (queries hold mu shared).
type deadIndex struct {
	mu   sync.RWMutex
	root *chain
	n    int    // chains in the index: in the treap or logged
	seed uint64 // the state of the priority generator (splitmix64)
	// log holds, oldest first, the chains cleared (or cleared again) at
	// version v since the last move into the treap. An entry is current
	// while its chain is logged and v is still its wv (every write of a
	// chain in the index changes its wv and logs it again, or takes it out
	// of the index); others are skipped, and dropped once at the front.
	log []logEntry
}

// logEntry is a chain cleared at version v.
type logEntry struct {
	c *chain
	v int64
}

func (e logEntry) current() bool { return e.c.d.logged && e.c.wv == e.v }

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
	l, r   *chain
	max    int64  // an upper bound of the largest wv in the subtree
	prio   uint32 // a heap order on priorities keeps the treap balanced
	in     bool   // the chain is in the treap
	logged bool   // the chain is in the log, not yet in the treap
}

// indexed reports whether the chain is in the index (treap or log).
func (d *dnode) indexed() bool { return d.in || d.logged }

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

// insert adds c, which is not in the index, to the log.
func (x *deadIndex) insert(c *chain) {
	x.logAppend(c)
	x.n++
}

// logAppend logs c at its wv and drops the entries at the front of the log
// that are no longer current.
func (x *deadIndex) logAppend(c *chain) {
	c.d.logged = true
	i := 0
	for i < len(x.log) && !x.log[i].current() {
		x.log[i] = logEntry{} // release the chain
		i++
	}
	if i > 0 && len(x.log) == cap(x.log) && 2*i >= len(x.log) {
		// Reuse the array's front rather than grow a new one (chains are
		// collected soon after they are cleared when no reader needs them).
		n := copy(x.log, x.log[i:])
		clear(x.log[n:])
		x.log, i = x.log[:n], 0
	}
	x.log = append(x.log[i:], logEntry{c: c, v: c.wv})
}

// needs reports whether a query at rv needs chains of the log: whether
// one was cleared after rv. The caller holds mu.
func (x *deadIndex) needs(rv int64) bool {
	n := len(x.log)
	return n > 0 && x.log[n-1].v > rv
}

// rlock takes mu shared for a query at rv, having moved the log into the
// treap first if the query needs it. No commit changes the log meanwhile:
// the caller holds DB.mu.
func (x *deadIndex) rlock(rv int64) {
	x.mu.RLock()
	for x.needs(rv) {
		x.mu.RUnlock()
		x.mu.Lock()
		x.flush()
		x.mu.Unlock()
		x.mu.RLock()
	}
}

// flush moves the log's current chains into the treap. The caller holds mu
// exclusively, or DB.mu exclusively.
func (x *deadIndex) flush() {
	for i, e := range x.log {
		if e.current() {
			e.c.d.logged = false
			x.treapInsert(e.c)
		}
		x.log[i] = logEntry{}
	}
	x.log = x.log[:0]
	if cap(x.log) > 1024 {
		x.log = nil // do not keep a long log's array
	}
}

// treapInsert adds c, which is not in the index, to the treap.
func (x *deadIndex) treapInsert(c *chain) {
	x.seed += 0x9e3779b97f4a7c15
	z := x.seed
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	c.d = dnode{prio: uint32(z >> 32), max: c.wv, in: true}
	x.root = x.ins(x.root, c)
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

// remove takes c, which is in the index, out of it. A logged chain's
// entries stop being current.
func (x *deadIndex) remove(c *chain) {
	if c.d.in {
		x.root = x.del(x.root, c)
	}
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
// its path becomes that wv. A logged chain is logged again at its new wv.
func (x *deadIndex) raised(c *chain) {
	if c.d.logged {
		x.logAppend(c)
		return
	}
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
	x.rlock(rv)
	defer x.mu.RUnlock()
	return anyAfter(x.root, b, e, rv)
}

// anyAfter descends only into subtrees whose bound is above rv, to the
// first node within [b, e). Below it, the left subtree's keys are all
// before e and the right's all at or after b, so each side needs one
// comparison per node (anyFrom, anyBefore): the cost is that of two paths
// from the root.
func anyAfter(n *chain, b, e []byte, rv int64) bool {
	for n != nil && n.d.max > rv {
		switch {
		case bytes.Compare(n.key, b) < 0:
			n = n.d.r
		case bytes.Compare(n.key, e) >= 0:
			n = n.d.l
		default:
			return n.wv > rv || anyFrom(n.d.l, b, rv) || anyBefore(n.d.r, e, rv)
		}
	}
	return false
}

// anyFrom reports whether a chain of n's subtree, whose keys are all
// before the query's end, is at or after b with wv above rv.
func anyFrom(n *chain, b []byte, rv int64) bool {
	for n != nil && n.d.max > rv {
		if bytes.Compare(n.key, b) < 0 {
			n = n.d.r
			continue
		}
		if n.wv > rv || anyIn(n.d.r, rv) {
			return true
		}
		n = n.d.l
	}
	return false
}

// anyBefore reports whether a chain of n's subtree, whose keys are all at
// or after the query's begin, is before e with wv above rv.
func anyBefore(n *chain, e []byte, rv int64) bool {
	for n != nil && n.d.max > rv {
		if bytes.Compare(n.key, e) >= 0 {
			n = n.d.l
			continue
		}
		if n.wv > rv || anyIn(n.d.l, rv) {
			return true
		}
		n = n.d.r
	}
	return false
}

// anyIn reports whether a chain of n's subtree has wv above rv. A bound
// above rv nearly always means a hit on the first path tried; a stale one
// (see dnode) costs at most one more path.
func anyIn(n *chain, rv int64) bool {
	for n != nil && n.d.max > rv {
		if n.wv > rv || anyIn(n.d.l, rv) {
			return true
		}
		n = n.d.r
	}
	return false
}

// first returns the chain with the smallest key at or after k (after k if
// strict) whose wv is above rv, or nil.
func (x *deadIndex) first(k []byte, strict bool, rv int64) *chain {
	x.rlock(rv)
	defer x.mu.RUnlock()
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
	x.rlock(rv)
	defer x.mu.RUnlock()
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
