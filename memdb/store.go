package memdb

import (
	"bytes"
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/tidwall/btree"
)

// store is the multi-version key-value data: the keys, each with
// the chain of its values at the versions still needed. It is protected by
// DB.mu: readers hold it shared, commits and garbage collection exclusively.
//
// Queue-shaped workloads clear keys at the head of a range all the time,
// and the tombstones stay for the MVCC window, so no ordered structure
// holds every chain: keys finds a chain by its key (a hash map: a point
// read or write costs no tree search among the tombstones), and the
// chains are split between liveTree, the ordered chains whose newest
// version is a value, and dead, those whose newest version is a
// tombstone. The chains that have no value now
// but had one at a read version, or were written after it, were cleared
// after it: dead finds them in logarithmic time, however many other keys
// were cleared since. See rangeCursor and writtenAfter.
type store struct {
	keys map[string]*chain // every chain, keyed by ukey(chain.key)
	// liveTree holds the chains of tree whose newest version is a value.
	liveTree *btree.Map[string, *chain]
	// liveMax is liveTree's last chain, nil when it is empty (liveInsert
	// and liveDelete keep it).
	liveMax *chain
	// gap, when not nil, holds two neighbours of liveTree: a queue's
	// tail and the first key after its items (see liveGap). gapSpare is
	// a gap that nothing uses any more, for the next one.
	gap, gapSpare atomic.Pointer[liveGap]
	// gapMisses counts reverse reads that searched while gap was
	// another range's: every gapReplace-th replaces it.
	gapMisses atomic.Uint32
	// dead holds the other chains.
	dead deadIndex
	// fullScan makes range reads and conflict checks scan every chain,
	// tombstones included, in an ordered copy of keys (allTree), as they
	// did before liveTree and dead: tests compare the two ways.
	fullScan bool
	scratch  []*chain // clearRange's list of chains to clear
	// hot holds chains chainFor looked up, each in the slot of its key's
	// hotSlot (they may have been removed since: chainFor checks).
	hot [hotSlots]*chain
	// liveIters holds iterators of liveTree for rangeCursor to reuse: an
	// iterator allocates its path on first use.
	liveIters sync.Pool
	// keysGen counts insertions into and deletions from keys; allTree is
	// the ordered copy built at allGen (under allMu: readers build it).
	keysGen uint64
	allMu   sync.Mutex
	allTree *btree.Map[string, *chain]
	allGen  uint64
	gcq     gcQueue
	// maxWV is the largest wv of any chain, ever: no chain was written after
	// a read version at or above it.
	maxWV int64
	// live counts keys whose newest version is a value; versions counts
	// version entries (values and tombstones) in every chain.
	live, versions int64
}

// ukey returns b's bytes as a string without copying them, to index keys
// and the B-trees: a btree.Map with string keys compares them natively, which makes
// a lookup about twice as fast as a BTreeG of []byte with a less function.
// The bytes must not change while the string is in use: the indexes only
// keep the keys of their chains, which are never modified, and lookups with
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
// The chain caches nothing that vers holds (its newest entry, the version
// of its second): a chain stays live for the whole MVCC window, so every
// byte and pointer it holds is work for each garbage collection cycle,
// and a key's first two versions share the chain's allocation anyway (see
// newChain): a chain and its two versions take 144 bytes.
//
// Pruning drops entries from the front of vers by reslicing, which costs
// O(entries dropped) rather than a copy of the chain; arr is the size of
// the array under vers, so that a chain left with a small part of a large
// array moves to a smaller one.
//
// d is the chain's node in store.dead while its newest version is a
// tombstone.
type chain struct {
	key    []byte
	wv     int64
	vers   []mvccVersion
	arr    int32
	queued bool // in the GC queue
	d      dnode
}

// array returns the whole array under vers (not empty): prune reslices
// vers from the front only, so the array ends where vers's capacity does.
func (c *chain) array() []mvccVersion {
	off := int(c.arr) - cap(c.vers)
	return unsafe.Slice((*mvccVersion)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(c.vers[:1])), -off*int(unsafe.Sizeof(mvccVersion{})))), int(c.arr))
}

// hasEnd reports whether key + \x00 is in the chain's key's memory (see
// wentry.end): a key stored from its write's entry is (initEntryLocked),
// a copy is not (wentry.keptKey, a versionstamped key). A chain's key
// and its memory never change, so a transaction's entry for the key may
// share them (a Clear of a key the transaction read).
func (c *chain) hasEnd() bool {
	k := c.key
	return cap(k) > len(k) && k[:len(k)+1][len(k)] == 0
}

// newChain allocates a chain for key and the array of its first two
// versions together: a queue's key is set, then cleared, then collected.
func newChain(key []byte) *chain {
	a := new(struct {
		c   chain
		arr [2]mvccVersion
	})
	a.c = chain{key: key, vers: a.arr[:0:2], arr: 2}
	return &a.c
}

// mvccVersion is a key's state as of a version: a value of n bytes at p,
// or a tombstone when p is nil (an empty value points at emptyByte). It
// holds a pointer and a length rather than a slice: 24 bytes, not 32, in
// every chain and in every version of a key written at each commit.
type mvccVersion struct {
	v int64
	p *byte
	n int
}

// emptyByte is where an empty value points, which nil would make a
// tombstone (and a zero-length slice may point just past its array).
var emptyByte byte

// mkVersion returns the state at v: val, or a tombstone if !exists.
func mkVersion(v int64, val []byte, exists bool) mvccVersion {
	switch {
	case !exists:
		return mvccVersion{v: v}
	case len(val) == 0:
		return mvccVersion{v: v, p: &emptyByte}
	}
	return mvccVersion{v: v, p: unsafe.SliceData(val), n: len(val)}
}

// value returns the value (its capacity is its length) and whether it
// exists.
func (e *mvccVersion) value() ([]byte, bool) {
	if e.p == nil {
		return nil, false
	}
	return unsafe.Slice(e.p, e.n), true
}

func (e *mvccVersion) del() bool { return e.p == nil }

// liveDegree is liveTree's B-tree degree (nodes of up to 2*liveDegree-1
// keys; the library's default is 32). A queue inserts at its tail and
// deletes at its head, and each shifts the rest of the leaf: its items
// hold pointers, so while the Go GC marks (much of the time with a small
// heap) every shifted item costs write barriers. Smaller leaves shift
// less for a slightly deeper tree (BenchmarkWorkload: 5-10% less CPU per
// Enqueue+Dequeue at 8 than at 32).
const liveDegree = 8

func newStore() *store {
	return &store{
		keys:     make(map[string]*chain),
		liveTree: btree.NewMap[string, *chain](liveDegree),
	}
}

// at returns the key's value as of version rv.
func (c *chain) at(rv int64) ([]byte, bool) {
	for i := len(c.vers) - 1; i >= 0; i-- {
		if c.vers[i].v <= rv {
			return c.vers[i].value()
		}
	}
	return nil, false
}

// newest returns the key's latest value.
func (c *chain) newest() ([]byte, bool) {
	if n := len(c.vers); n > 0 {
		return c.vers[n-1].value()
	}
	return nil, false
}

// dead reports whether the chain was removed from the store.
func (c *chain) dead() bool { return len(c.vers) == 0 }

func (s *store) lookup(key []byte) *chain {
	return s.keys[ukey(key)]
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
		c = newChain(key)
		s.keys[ukey(c.key)] = c
		s.keysGen++
	}
	s.appendVersion(c, val, exists, v, horizon)
	return true
}

// chainFor returns key's chain, or nil. hint is key's chain as found
// earlier under db.mu (by a read of the same transaction), or nil; it may
// have been removed from the store since, and is then ignored.
//
// It checks first the chain it found last in the key's slot of s.hot:
// the keys that most commits write without reading them (a queue's
// counters and journal slot) are then found without a hash lookup in a
// large map. The caller holds DB.mu exclusively.
func (s *store) chainFor(hint *chain, key []byte) *chain {
	if hint != nil && !hint.dead() {
		return hint
	}
	return s.hotChain(key)
}

// hotChain is chainFor without a hint.
func (s *store) hotChain(key []byte) *chain {
	slot := &s.hot[hotSlot(key)]
	if h := *slot; h != nil && !h.dead() && bytes.Equal(h.key, key) {
		return h
	}
	c := s.lookup(key)
	if c != nil {
		*slot = c
	}
	return c
}

// hotSlots is the number of slots of store.hot, a power of two.
const hotSlots = 8

// hotSlot returns key's slot in store.hot: from its length and last byte,
// which tell apart the keys a queue rewrites (the shards of a counter
// differ in their last byte, a counter and a journal slot in length).
func hotSlot(key []byte) int {
	n := len(key)
	if n == 0 {
		return 0
	}
	return (n*5 + int(key[n-1])) & (hotSlots - 1)
}

// appendVersion adds (or, for a second write at the same version, replaces)
// the chain's newest entry, and records the write in its wv.
func (s *store) appendVersion(c *chain, val []byte, exists bool, v, horizon int64) {
	// Prune first (v is after horizon, so the new entry changes nothing
	// prune drops), which makes room for it.
	s.prune(c, horizon)
	c.wv = v
	s.maxWV = v
	ver := mkVersion(v, val, exists)
	_, wasLive := c.newest()
	if n := len(c.vers); n > 0 && c.vers[n-1].v == v {
		c.vers[n-1] = ver
	} else if wasLive || exists { // else it is a tombstone already
		if n := len(c.vers); n == cap(c.vers) && int(c.arr) >= 2*n && n > 0 {
			// prune dropped entries from the front of the array, at least
			// as many as remain: move these back to its start rather than
			// allocate (a key written at every commit, with readers
			// keeping only its newest versions, would otherwise need a new
			// array every few writes).
			full := c.array()
			moveVersions(full, full[len(full)-n:])
			clearValues(full[n:])
			c.vers = full[:n]
		}
		if len(c.vers) == cap(c.vers) {
			// A new array, under vers from its start, twice as large:
			// append grows a large slice by a quarter, which for a key
			// written at every commit (a counter) allocates and copies
			// five times its versions rather than twice.
			grown := make([]mvccVersion, len(c.vers), max(2*cap(c.vers), 4))
			copy(grown, c.vers)
			c.vers = grown
			c.arr = int32(min(cap(grown), math.MaxInt32))
		}
		c.vers = append(c.vers, ver)
		s.versions++
	}
	switch {
	case exists && !wasLive:
		s.live++
		s.liveInsert(c)
		if c.d.indexed() {
			s.dead.remove(c)
		}
	case !exists && wasLive:
		s.live--
		s.liveDelete(c)
		s.dead.insert(c)
	case !exists: // cleared again
		s.dead.raised(c)
	}
	// A chain whose only version is a value (a new key) gives garbage
	// collection nothing to do, neither a version to prune nor a
	// tombstone to remove: it is queued with its next version. A queue's
	// item is then queued once, when it is cleared, not twice.
	if !c.queued && (len(c.vers) > 1 || !exists) {
		c.queued = true
		s.gcq.push(gcEntry{c: c, due: v})
	}
}

// liveInsert adds c to liveTree. A queue appends at its tail: when c's key
// is the largest, Load appends it to the last leaf without a search (it
// falls back to Set when that leaf is full). Otherwise Set searches for
// its place: comparing with liveMax first spares a Load that would
// descend to the last leaf and fail, as it does for a queue whose tail
// is followed by other keys (the layer's counters and journal).
//
// A key between the chains of the gap (a queue's new tail) becomes the
// gap's first chain.
func (s *store) liveInsert(c *chain) {
	k := ukey(c.key)
	if s.liveMax == nil || k > ukey(s.liveMax.key) {
		s.liveTree.Load(k, c)
		s.liveMax = c
		return // (after every chain, so after the gap)
	}
	s.liveTree.Set(k, c)
	if g := s.gap.Load(); g != nil && k > ukey(g.lo.key) && k < ukey(g.hi.key) {
		g.lo = c
	}
}

// liveDelete takes c out of liveTree. A queue clears its head: when that
// is the smallest live key, PopMin takes it from the leftmost leaf without
// comparing keys on the way down (Delete searches each level, comparing
// keys that share a long prefix); Min finds that leaf the same way.
func (s *store) liveDelete(c *chain) {
	if k, _, ok := s.liveTree.Min(); ok && k == ukey(c.key) {
		s.liveTree.PopMin()
	} else {
		s.liveTree.Delete(ukey(c.key))
	}
	if c == s.liveMax {
		_, s.liveMax, _ = s.liveTree.Max()
	}
	if g := s.gap.Load(); g != nil && (c == g.lo || c == g.hi) {
		s.gap.Store(nil)
		*g = liveGap{} // keep no chain reachable
		s.gapSpare.Store(g)
	}
}

// liveGap is two neighbours of liveTree: lo, and hi the chain after it.
// No chain of liveTree is between them, so lo is the last chain before
// any key k with lo.key < k <= hi.key: a queue's
// tail, the answer to the reverse read of its items, whose range ends
// before the queue's other keys (the layer's counters and journal)
// rather than at the tree's end.
//
// A reverse read that found lo by a search publishes the gap (store.gap);
// a commit keeps it true (liveInsert, liveDelete). Readers hold DB.mu
// shared and only read a published gap; commits hold it exclusively and
// move lo to a key inserted between lo and hi (an enqueue's new tail), or
// drop the gap when lo or hi leaves liveTree.
type liveGap struct {
	lo, hi *chain
}

// gapReplace is how many reverse reads of other ranges it takes to
// replace a published gap: one queue's tail read keeps the gap it
// published while reads of other queues come and go, and a queue that
// becomes the busy one takes it over soon.
const gapReplace = 64

// publishGap makes lo and hi (see liveGap) the store's gap. The caller
// holds DB.mu, shared or exclusive, and found them in liveTree under it.
func (s *store) publishGap(lo, hi *chain) {
	g := s.gapSpare.Swap(nil)
	if g == nil {
		g = new(liveGap)
	}
	// g is the caller's alone until published: a spare was dropped by a
	// commit under DB.mu held exclusively, so no reader still uses it.
	g.lo, g.hi = lo, hi
	// It replaces the gap of another range (another queue's). The one
	// replaced may still be in use by another reader: it is left to the
	// garbage collector, never reused.
	s.gap.Store(g)
}

// moveVersions is copy(dst, src) and clearValues drops the values of vs
// (making them tombstones, which nothing reads: they are outside vers).
// For the few entries a prune usually moves or drops they store each
// pointer on its own: while the Go GC marks, copy and clear of memory with
// pointers cost a bulk write barrier each (a span lookup and a walk of its
// pointer bitmap), more than a plain barrier per pointer.
func moveVersions(dst, src []mvccVersion) {
	if len(src) > 4 {
		copy(dst, src)
		return
	}
	for j := range src {
		d, s := &dst[j], &src[j]
		d.v, d.p, d.n = s.v, s.p, s.n
	}
}

func clearValues(vs []mvccVersion) {
	if len(vs) > 4 {
		clear(vs)
		return
	}
	for j := range vs {
		vs[j].p = nil
	}
}

// prune drops the chain's entries that no reader at or after horizon needs.
func (s *store) prune(c *chain, horizon int64) {
	if len(c.vers) < 2 || c.vers[1].v > horizon {
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
		clearValues(c.vers[:i]) // the array keeps them: drop their values
		c.vers = c.vers[i:]
	}
	s.versions -= int64(i)
}

// clearRange writes tombstones at v for every live key in [begin, end).
func (s *store) clearRange(begin, end []byte, v, horizon int64) {
	// Collect the chains first: appendVersion removes them from liveTree,
	// which must not change while it is iterated.
	todo := s.scratch[:0]
	s.liveTree.Ascend(ukey(begin), func(_ string, c *chain) bool {
		if bytes.Compare(c.key, end) >= 0 {
			return false
		}
		todo = append(todo, c)
		return true
	})
	for _, c := range todo {
		s.appendVersion(c, nil, false, v, horizon)
	}
	clear(todo)
	if cap(todo) > 1024 {
		todo = nil // do not keep a large clear's list
	}
	s.scratch = todo[:0]
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
			delete(s.keys, ukey(c.key))
			s.keysGen++
			s.dead.remove(c)
			s.versions -= int64(len(c.vers))
			c.vers = nil
		}
	}
}

// writtenAfter reports whether a key in [b, e) was written (by a write
// recorded in its chain's wv) after rv.
//
// wv is only ever set by appendVersion, and a chain is removed from keys
// only once its wv is at or below the horizon, so the chains of keys with
// wv above rv are the live ones with it (in liveTree, scanned over the
// range) and those without a value now (in dead, which answers in
// logarithmic time).
func (s *store) writtenAfter(b, e []byte, rv int64) bool {
	if s.maxWV <= rv {
		return false
	}
	if isPointRange(b, e) {
		c := s.lookup(b)
		return c != nil && c.wv > rv
	}
	if s.fullScan {
		return s.writtenAfterScan(b, e, rv)
	}
	if s.dead.anyAfter(b, e, rv) {
		return true
	}
	hit := false
	s.liveTree.Ascend(ukey(b), func(_ string, c *chain) bool {
		if bytes.Compare(c.key, e) >= 0 {
			return false
		}
		hit = c.wv > rv
		return !hit
	})
	return hit
}

// writtenAfterScan is writtenAfter for a range by scanning its chains in
// order, as writtenAfter did before liveTree and dead (tests compare the
// two).
func (s *store) writtenAfterScan(b, e []byte, rv int64) bool {
	if s.maxWV <= rv {
		return false
	}
	hit := false
	s.all().Ascend(ukey(b), func(_ string, c *chain) bool {
		if bytes.Compare(c.key, e) >= 0 {
			return false
		}
		hit = c.wv > rv
		return !hit
	})
	return hit
}

// all returns an ordered copy of keys, for the full-scan path of tests: it
// is rebuilt when keys changed since the last copy. The caller holds
// DB.mu, shared or exclusive; a copy is never modified once built.
func (s *store) all() *btree.Map[string, *chain] {
	s.allMu.Lock()
	defer s.allMu.Unlock()
	if s.allTree == nil || s.allGen != s.keysGen {
		t := new(btree.Map[string, *chain])
		for k, c := range s.keys {
			t.Set(k, c)
		}
		s.allTree, s.allGen = t, s.keysGen
	}
	return s.allTree
}

// gcEntry asks to prune c once the horizon reaches due.
type gcEntry struct {
	c   *chain
	due int64
}

// gcQueue is a FIFO of gcEntry; dues are pushed in increasing order. It
// holds every chain written within the MVCC window, so its entries live
// in fixed-size blocks: a push never copies the queue (a slice would copy
// it whole each time it grows), and a pop frees whole blocks, one of which
// is kept for reuse.
type gcQueue struct {
	blocks     []*[gcBlock]gcEntry
	head, tail int // positions, from blocks[0][0], of the first entry and of the next push
	spare      *[gcBlock]gcEntry
}

// gcBlock is the number of entries in a block of a gcQueue (4 KiB).
const gcBlock = 256

func (q *gcQueue) push(e gcEntry) {
	if q.tail == len(q.blocks)*gcBlock {
		b := q.spare
		if b == nil {
			b = new([gcBlock]gcEntry)
		}
		q.spare = nil
		q.blocks = append(q.blocks, b)
	}
	q.blocks[q.tail/gcBlock][q.tail%gcBlock] = e
	q.tail++
}

func (q *gcQueue) len() int { return q.tail - q.head }

func (q *gcQueue) peek() (gcEntry, bool) {
	if q.head == q.tail {
		return gcEntry{}, false
	}
	return q.blocks[0][q.head], true
}

// pop drops the first entry. An emptied queue starts its block again: a
// queue emptied by most commits (no reader holds the horizon back) then
// never needs a second block, where walking on would, at each block's
// end, need one while a commit's pushes come before its pops.
func (q *gcQueue) pop() {
	q.blocks[0][q.head] = gcEntry{} // release the chain
	q.head++
	if q.head == q.tail {
		q.head, q.tail = 0, 0 // (tail <= gcBlock: one block)
		return
	}
	if q.head == gcBlock {
		q.spare = q.blocks[0]
		q.blocks[0] = nil
		q.blocks = q.blocks[1:]
		q.head = 0
		q.tail -= gcBlock
	}
}

// rangeCursor walks, in a range read's direction, the chains of [b, e)
// that may have a value at read version rv: every chain with one comes up,
// in key order, and the caller skips those without. It merges liveTree
// with the chains of dead that had a value at rv (they were cleared after
// rv), so its cost does not grow with the tombstones in the range nor with
// the clears elsewhere since rv. With store.fullScan it walks all chains
// instead, tombstones included.
type rangeCursor struct {
	s       *store
	b, e    []byte
	rv      int64
	reverse bool
	scan    bool // it walks every chain (all), else liveTree merged with dead
	it      *btree.MapIter[string, *chain]
	itOK    bool
	x       *chain // the current (or next) chain of dead in the walk
	cur     *chain // nil once past the range
	curTree bool   // cur is it's, not x
}

// init puts the cursor on the first chain of [b, e) in the read's
// direction.
func (rc *rangeCursor) init(s *store, b, e []byte, rv int64, reverse bool) {
	*rc = rangeCursor{s: s, b: b, e: e, rv: rv, reverse: reverse, scan: s.fullScan}
	if rc.scan {
		it := s.all().Iter()
		rc.it = &it
	} else if it, ok := s.liveIters.Get().(*btree.MapIter[string, *chain]); ok {
		rc.it = it
	} else {
		it := s.liveTree.Iter()
		rc.it = &it
	}
	if reverse {
		rc.seek(e)
	} else {
		rc.seek(b)
	}
}

// release hands the cursor's iterator back for reuse; the cursor is then
// unusable. A cursor that is not released only costs an allocation.
func (rc *rangeCursor) release() {
	if rc.it == nil {
		return
	}
	if !rc.scan {
		rc.s.liveIters.Put(rc.it)
	}
	*rc = rangeCursor{}
}

// seek moves to the first chain at or after k forwards, or the last one
// before k in reverse.
//
// A queue reads its head (forwards from the range's begin, before every
// key) and its tail (in reverse from its end, after every key): the tree's
// first or last key then is the answer, found by a descent without key
// comparisons, where a search compares keys at every level (and a reverse
// search past the last key descends twice). Elsewhere the check costs one
// such descent and one comparison before the search.
func (rc *rangeCursor) seek(k []byte) {
	rc.itOK = rc.seekTree(ukey(k))
	if !rc.scan {
		if rc.reverse {
			rc.x = rc.deadFrom(rc.s.dead.last(k, false, rc.rv))
		} else {
			rc.x = rc.deadFrom(rc.s.dead.first(k, false, rc.rv))
		}
	}
	rc.pick()
}

// seekTree positions the iterator for seek and reports whether it is on a
// chain.
func (rc *rangeCursor) seekTree(k string) bool {
	it := rc.it
	if rc.reverse {
		if !it.Last() {
			return false // an empty tree
		}
		if it.Key() < k {
			return true // every key is before k
		}
		if !it.Seek(k) {
			return it.Last()
		}
		return it.Prev()
	}
	if !it.First() {
		return false
	}
	if it.Key() >= k {
		return true // every key is at or after k
	}
	return it.Seek(k)
}

// deadFrom returns the first chain of dead from c on, in the walk's
// direction and within the range, that had a value at rv, or nil. Each
// step costs O(log n) and skips only chains of the range written after rv.
func (rc *rangeCursor) deadFrom(c *chain) *chain {
	for c != nil && rc.inRange(c.key) {
		if _, ok := c.at(rc.rv); ok {
			return c
		}
		if rc.reverse {
			c = rc.s.dead.last(c.key, false, rc.rv)
		} else {
			c = rc.s.dead.first(c.key, true, rc.rv)
		}
	}
	return nil
}

// step moves to the next chain.
func (rc *rangeCursor) step() {
	switch {
	case rc.cur == nil:
		return
	case !rc.curTree:
		if rc.reverse {
			rc.x = rc.deadFrom(rc.s.dead.last(rc.x.key, false, rc.rv))
		} else {
			rc.x = rc.deadFrom(rc.s.dead.first(rc.x.key, true, rc.rv))
		}
	case rc.reverse:
		rc.itOK = rc.it.Prev()
	default:
		rc.itOK = rc.it.Next()
	}
	rc.pick()
}

// pick sets cur to the next chain of the walk: the iterator's or x,
// whichever comes first (they never hold the same chain).
func (rc *rangeCursor) pick() {
	var c *chain
	rc.curTree = true
	if rc.itOK {
		c = rc.it.Value()
	}
	if x := rc.x; x != nil && (c == nil || rc.before(x.key, c.key)) {
		c, rc.curTree = x, false
	}
	if c != nil && !rc.inRange(c.key) {
		c = nil
	}
	rc.cur = c
}

// inRange reports whether k is within the range on the side the walk goes.
func (rc *rangeCursor) inRange(k []byte) bool {
	if rc.reverse {
		return bytes.Compare(k, rc.b) >= 0
	}
	return bytes.Compare(k, rc.e) < 0
}

// before reports whether x comes before y in the walk's direction.
func (rc *rangeCursor) before(x, y []byte) bool {
	c := bytes.Compare(x, y)
	if rc.reverse {
		return c > 0
	}
	return c < 0
}
