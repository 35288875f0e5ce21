package memdb

import (
	"bytes"
	"math"
	"unsafe"

	"github.com/tidwall/btree"
)

// store is the multi-version key-value data: a B-tree of keys, each with
// the chain of its values at the versions still needed. It is protected by
// DB.mu: readers hold it shared, commits and garbage collection exclusively.
type store struct {
	tree *btree.Map[string, *chain] // keyed by ukey(chain.key)
	gcq  gcQueue
	// maxWV is the largest wv of any chain, ever: no chain was written after
	// a read version at or above it.
	maxWV int64
	// live counts keys whose newest version is a value; versions counts
	// version entries (values and tombstones) in every chain.
	live, versions int64
}

// ukey returns b's bytes as a string without copying them, to index the
// B-tree: a btree.Map with string keys compares them natively, which makes
// a lookup about twice as fast as a BTreeG of []byte with a less function.
// The bytes must not change while the string is in use: the tree only
// keeps the keys of its chains, which are never modified, and lookups with
// other keys retain nothing.
func ukey(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// chain holds a key's versions, oldest first. Entries older than the GC
// horizon are dropped except the newest of them, which readers at the
// horizon still need.
//
// wv is the last commit version whose write conflict ranges covered the key
// by a write of the key itself (Set, Clear, atomic operation, versionstamped
// key or value, or a ClearRange while it was live): the conflict history of
// the key, kept here rather than in the resolver so that a point write costs
// no separate B-tree operation. wv is at least the version of every entry
// in vers. A chain is removed only once wv is at or below the GC horizon
// (every transaction still allowed to commit has a read version at or above
// the horizon, so it could no longer conflict with that write).
//
// head is a copy of the newest entry and v1 the version of the second
// oldest (math.MaxInt64 if there is none): the common reads and the prune
// check then stay within the chain itself, not the far ends of vers.
//
// Pruning drops entries from the front of vers by reslicing, which costs
// O(entries dropped) rather than a copy of the chain; arr is the size of
// the array under vers, so that a chain left with a small part of a large
// array moves to a smaller one.
type chain struct {
	key    []byte
	head   mvccVersion
	v1     int64
	wv     int64
	vers   []mvccVersion
	arr    int32
	queued bool // in the GC queue
}

// mvccVersion is a key's state as of a version: a value, or a tombstone
// when val is nil (an empty value is stored as emptyValue).
type mvccVersion struct {
	v   int64
	val []byte
}

// emptyValue is the stored form of an empty value, which nil would make a
// tombstone.
var emptyValue = []byte{}

func (e *mvccVersion) del() bool { return e.val == nil }

func newStore() *store {
	return &store{tree: new(btree.Map[string, *chain])}
}

// at returns the key's value as of version rv.
func (c *chain) at(rv int64) ([]byte, bool) {
	if c.head.v <= rv {
		return c.head.val, c.head.val != nil
	}
	for i := len(c.vers) - 2; i >= 0; i-- {
		if c.vers[i].v <= rv {
			return c.vers[i].val, c.vers[i].val != nil
		}
	}
	return nil, false
}

// newest returns the key's latest value.
func (c *chain) newest() ([]byte, bool) {
	return c.head.val, c.head.val != nil
}

// synced updates head and v1 after vers changed.
func (c *chain) synced() {
	c.head = c.vers[len(c.vers)-1]
	c.v1 = math.MaxInt64
	if len(c.vers) > 1 {
		c.v1 = c.vers[1].v
	}
}

// dead reports whether the chain was removed from the store.
func (c *chain) dead() bool { return len(c.vers) == 0 }

func (s *store) lookup(key []byte) *chain {
	c, _ := s.tree.Get(ukey(key))
	return c
}

// get returns key's value as of rv.
func (s *store) get(key []byte, rv int64) ([]byte, bool) {
	c := s.lookup(key)
	if c == nil {
		return nil, false
	}
	return c.at(rv)
}

// latest returns key's newest value.
func (s *store) latest(key []byte) ([]byte, bool) {
	c := s.lookup(key)
	if c == nil {
		return nil, false
	}
	return c.newest()
}

// write records key's state at version v (v is at least every version in
// the store) and, as the key's conflict history, that it was written at v.
// It returns false if the key has no entry to record that on (clearing a
// key that is not stored): the caller must then record the write in the
// resolver.
func (s *store) write(key, val []byte, exists bool, v, horizon int64) bool {
	return s.writeAt(s.lookup(key), key, val, exists, v, horizon)
}

// writeAt is write with c = s.chainFor(..., key).
func (s *store) writeAt(c *chain, key, val []byte, exists bool, v, horizon int64) bool {
	if c == nil {
		if !exists {
			return false // clearing a key that is not there
		}
		c = &chain{key: key, v1: math.MaxInt64, vers: make([]mvccVersion, 0, 1), arr: 1}
		s.tree.Set(ukey(c.key), c)
	}
	s.appendVersion(c, val, exists, v, horizon)
	return true
}

// chainFor returns key's chain, or nil. hint is key's chain as found
// earlier under db.mu (by a read of the same transaction), or nil; it may
// have been removed from the store since, and is then ignored.
func (s *store) chainFor(hint *chain, key []byte) *chain {
	if hint != nil && !hint.dead() {
		return hint
	}
	return s.lookup(key)
}

// appendVersion adds (or, for a second write at the same version, replaces)
// the chain's newest entry, and records the write in its wv.
func (s *store) appendVersion(c *chain, val []byte, exists bool, v, horizon int64) {
	c.wv = v
	s.maxWV = v
	switch {
	case !exists:
		val = nil
	case val == nil:
		val = emptyValue
	}
	_, wasLive := c.newest()
	if n := len(c.vers); n > 0 && c.vers[n-1].v == v {
		c.vers[n-1] = mvccVersion{v: v, val: val}
	} else if wasLive || exists { // else it is a tombstone already
		grow := len(c.vers) == cap(c.vers)
		c.vers = append(c.vers, mvccVersion{v: v, val: val})
		if grow { // a new array, under vers from its start
			c.arr = int32(min(cap(c.vers), math.MaxInt32))
		}
		s.versions++
		if len(c.vers) == 2 {
			c.v1 = v
		}
	}
	c.head = c.vers[len(c.vers)-1]
	switch {
	case exists && !wasLive:
		s.live++
	case !exists && wasLive:
		s.live--
	}
	s.prune(c, horizon)
	if !c.queued {
		c.queued = true
		s.gcq.push(gcEntry{c: c, due: v})
	}
}

// prune drops the chain's entries that no reader at or after horizon needs.
func (s *store) prune(c *chain, horizon int64) {
	if c.v1 > horizon {
		return // vers[0] is the newest entry at or below horizon
	}
	// i is the newest entry at or below horizon; scanning from the oldest
	// costs O(entries dropped).
	i := 0
	for i+1 < len(c.vers) && c.vers[i+1].v <= horizon {
		i++
	}
	if i == 0 {
		return
	}
	if n := len(c.vers) - i; c.arr > 8 && 4*n <= int(c.arr) {
		kept := make([]mvccVersion, n, 2*n)
		copy(kept, c.vers[i:])
		c.vers, c.arr = kept, int32(2*n)
	} else {
		clear(c.vers[:i]) // the array keeps them: drop their values
		c.vers = c.vers[i:]
	}
	c.synced()
	s.versions -= int64(i)
}

// clearRange writes tombstones at v for every live key in [begin, end).
func (s *store) clearRange(begin, end []byte, v, horizon int64) {
	s.tree.Ascend(ukey(begin), func(_ string, c *chain) bool {
		if bytes.Compare(c.key, end) >= 0 {
			return false
		}
		if _, ok := c.newest(); ok {
			s.appendVersion(c, nil, false, v, horizon)
		}
		return true
	})
}

// gc prunes the chains whose writes fell behind horizon, removing keys whose
// only remaining entry is a tombstone.
func (s *store) gc(horizon int64) {
	for {
		e, ok := s.gcq.peek()
		if !ok || e.due > horizon {
			return
		}
		s.gcq.pop()
		c := e.c
		c.queued = false
		s.prune(c, horizon)
		last := c.vers[len(c.vers)-1]
		switch {
		case c.wv > horizon: // (wv >= last.v)
			c.queued = true
			s.gcq.push(gcEntry{c: c, due: c.wv})
		case last.del():
			s.tree.Delete(ukey(c.key))
			s.versions -= int64(len(c.vers))
			c.vers, c.head = nil, mvccVersion{}
		}
	}
}

// writtenAfter reports whether a key in [b, e) was written (by a write
// recorded in its chain's wv) after rv.
func (s *store) writtenAfter(b, e []byte, rv int64) bool {
	if s.maxWV <= rv {
		return false
	}
	if isPointRange(b, e) {
		c := s.lookup(b)
		return c != nil && c.wv > rv
	}
	hit := false
	s.tree.Ascend(ukey(b), func(_ string, c *chain) bool {
		if bytes.Compare(c.key, e) >= 0 {
			return false
		}
		hit = c.wv > rv
		return !hit
	})
	return hit
}

// gcEntry asks to prune c once the horizon reaches due.
type gcEntry struct {
	c   *chain
	due int64
}

// gcQueue is a FIFO of gcEntry; dues are pushed in increasing order.
type gcQueue struct {
	buf  []gcEntry
	head int
}

func (q *gcQueue) push(e gcEntry) { q.buf = append(q.buf, e) }

func (q *gcQueue) len() int { return len(q.buf) - q.head }

func (q *gcQueue) peek() (gcEntry, bool) {
	if q.head == len(q.buf) {
		return gcEntry{}, false
	}
	return q.buf[q.head], true
}

func (q *gcQueue) pop() {
	q.buf[q.head] = gcEntry{}
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	} else if q.head >= 1024 && q.head*2 >= len(q.buf) {
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
}
