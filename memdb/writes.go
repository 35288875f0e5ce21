package memdb

import (
	"bytes"
	"sort"

	"github.com/tidwall/btree"
)

// entryState says what a transaction knows about a key it wrote.
type entryState uint8

const (
	// stKnown: the key's value (or absence) is fully determined by the
	// transaction's writes.
	stKnown entryState = iota
	// stOps: atomic operations wait for the database's value.
	stOps
	// stVS: a versionstamped value, followed by ops, waits for the commit.
	stVS
)

// wentry is the transaction's buffered state of one key.
type wentry struct {
	key    []byte // its capacity holds key + \x00: see end
	st     entryState
	exists bool // stKnown: whether the key exists
	// inline: key shares the entry's own allocation (newOpEntryLocked), so
	// the store and the resolver keep a copy of it, not key itself.
	inline bool
	// unread: the transaction set the key's versionstamped value, then
	// set it again (st is no longer stVS), and has not cleared it since:
	// reads of it still fail with accessed_unreadable, as FDB's WriteMap
	// keeps is_unreadable through later writes of the key until a clear
	// (WriteMap::mutate and WriteMap::clear, fdbclient/WriteMap.cpp).
	unread bool
	vsOff  int32      // stVS: offset of the versionstamp in val
	val    []byte     // stKnown: the value; stVS: the template
	ops    []atomicOp // stOps, stVS: applied in order after the base
	// c is the key's store chain if the transaction read the key before
	// writing it (a hint for the commit, which then needs no lookup).
	c *chain
}

// end returns key + \x00, which shares the key's memory.
func (e *wentry) end() []byte { return e.key[:len(e.key)+1] }

// keptKey returns key and key + \x00 for the store or the resolver to keep:
// the entry's own, or a copy if they share the entry's memory.
func (e *wentry) keptKey() ([]byte, []byte) {
	if e.inline {
		end := keyAfter(e.key)
		return end[:len(e.key):len(e.key)], end
	}
	return e.key, e.end()
}

// unreadable reports whether reads of the key fail with
// accessed_unreadable: its value holds a versionstamp, or did before a
// later write of the key (see unread).
func (e *wentry) unreadable() bool { return e.st == stVS || e.unread }

// independent reports whether the entry's value does not depend on the
// database's, so that a read of the key adds no read conflict range: a
// known value, or a versionstamped value whatever atomic operations
// follow it (OperationStack::isDependent, fdbclient/WriteMap.cpp, looks
// at the first operation only, and SetVersionstampedValue is not
// dependent).
func (e *wentry) independent() bool { return e.st != stOps }

// smallMax is the size up to which a writeMap is a sorted slice; past it,
// it becomes a B-tree.
const smallMax = 32

// writeMap is the transaction's buffered point writes, ordered by key.
type writeMap struct {
	small []*wentry
	big   *btree.BTreeG[witem]
}

type witem struct {
	key []byte
	e   *wentry
}

func witemLess(a, b witem) bool { return bytes.Compare(a.key, b.key) < 0 }

func (m *writeMap) len() int {
	if m.big != nil {
		return m.big.Len()
	}
	return len(m.small)
}

// search returns the index of the first small entry with key >= k.
func (m *writeMap) search(k []byte) int {
	s := m.small
	// Writes usually come in increasing key order: check the end first,
	// then the start (a counter kept before the keys a transaction adds).
	n := len(s)
	if n == 0 || bytes.Compare(s[n-1].key, k) < 0 {
		return n
	}
	if bytes.Compare(s[0].key, k) >= 0 {
		return 0
	}
	// s[0] < k <= s[n-1]: a binary search of (0, n-1] (sort.Search, with
	// no closure to call).
	lo, hi := 1, n-1
	for lo < hi {
		h := int(uint(lo+hi) >> 1)
		if bytes.Compare(s[h].key, k) < 0 {
			lo = h + 1
		} else {
			hi = h
		}
	}
	return lo
}

func (m *writeMap) get(k []byte) *wentry {
	if m.big != nil {
		it, ok := m.big.Get(witem{key: k})
		if !ok {
			return nil
		}
		return it.e
	}
	i := m.search(k)
	if i < len(m.small) && bytes.Equal(m.small[i].key, k) {
		return m.small[i]
	}
	return nil
}

// find returns the entry for k, or nil and where an entry for k goes
// (for insert, if nothing changes the map meanwhile): get and put's
// search in one.
func (m *writeMap) find(k []byte) (*wentry, int) {
	if m.big != nil {
		return m.get(k), -1
	}
	i := m.search(k)
	if i < len(m.small) && bytes.Equal(m.small[i].key, k) {
		return m.small[i], i
	}
	return nil, i
}

// insert adds e, whose key the map does not hold, at i as find returned
// it.
func (m *writeMap) insert(i int, e *wentry) {
	if m.big != nil || len(m.small) >= smallMax {
		m.put(e)
		return
	}
	m.small = insertAt(m.small, i, e)
}

// insertAt inserts e at s[i], moving the entries after it one by one: a
// few single stores cost less than copy's call (typedslicecopy), and
// nothing moves for an entry added at the end.
func insertAt(s []*wentry, i int, e *wentry) []*wentry {
	s = append(s, e)
	for j := len(s) - 1; j > i; j-- {
		s[j] = s[j-1]
	}
	s[i] = e
	return s
}

// put inserts e, replacing any entry for the same key.
func (m *writeMap) put(e *wentry) (replaced *wentry) {
	if m.big != nil {
		old, _ := m.big.Set(witem{key: e.key, e: e})
		return old.e
	}
	i := m.search(e.key)
	if i < len(m.small) && bytes.Equal(m.small[i].key, e.key) {
		replaced, m.small[i] = m.small[i], e
		return replaced
	}
	if len(m.small) < smallMax {
		m.small = insertAt(m.small, i, e)
		return nil
	}
	m.big = btree.NewBTreeGOptions(witemLess, btree.Options{NoLocks: true})
	for _, x := range m.small {
		m.big.Load(witem{key: x.key, e: x})
	}
	m.small = nil
	m.big.Set(witem{key: e.key, e: e})
	return nil
}

// deleteRange removes the entries with keys in [b, e).
func (m *writeMap) deleteRange(b, e []byte) {
	if m.big != nil {
		var keys [][]byte
		m.big.Ascend(witem{key: b}, func(it witem) bool {
			if bytes.Compare(it.key, e) >= 0 {
				return false
			}
			keys = append(keys, it.key)
			return true
		})
		for _, k := range keys {
			m.big.Delete(witem{key: k})
		}
		return
	}
	i := m.search(b)
	j := i
	for j < len(m.small) && bytes.Compare(m.small[j].key, e) < 0 {
		j++
	}
	if j > i {
		n := copy(m.small[i:], m.small[j:])
		clear(m.small[i+n:])
		m.small = m.small[:i+n]
	}
}

// clone returns a copy of m whose entries are copies too, so that later
// writes (which replace entries or change them in place, as an atomic
// operation appends to ops) leave it as it is. The entries' byte slices
// and ops arrays are shared: they are never changed in place below their
// length.
func (m *writeMap) clone() writeMap {
	var c writeMap
	var es []*wentry
	m.each(func(e *wentry) bool {
		cp := *e
		es = append(es, &cp)
		return true
	})
	if len(es) <= smallMax {
		c.small = es
		return c
	}
	c.big = btree.NewBTreeGOptions(witemLess, btree.Options{NoLocks: true})
	for _, e := range es {
		c.big.Load(witem{key: e.key, e: e})
	}
	return c
}

// each calls f for every entry in key order until f returns false.
func (m *writeMap) each(f func(e *wentry) bool) {
	if m.big != nil {
		m.big.Scan(func(it witem) bool { return f(it.e) })
		return
	}
	for _, e := range m.small {
		if !f(e) {
			return
		}
	}
}

// cursor walks a writeMap within a range, forwards or backwards.
type cursor struct {
	m   *writeMap
	rev bool
	i   int
	it  btree.IterG[witem]
	ok  bool
	cur *wentry
}

// seek positions c on the first entry >= begin (forward) or the last entry
// < end (reverse).
func (c *cursor) seek(m *writeMap, key []byte, rev bool) {
	c.m, c.rev, c.cur = m, rev, nil
	if m == nil {
		return
	}
	if m.big == nil {
		c.i = m.search(key)
		if rev {
			c.i--
		}
		c.load()
		return
	}
	c.it = m.big.Iter()
	found := c.it.Seek(witem{key: key})
	if rev {
		if found {
			found = c.it.Prev()
		} else {
			found = c.it.Last()
		}
	}
	c.ok = found
	c.load()
}

func (c *cursor) load() {
	c.cur = nil
	if c.m.big == nil {
		if c.i >= 0 && c.i < len(c.m.small) {
			c.cur = c.m.small[c.i]
		}
		return
	}
	if c.ok {
		c.cur = c.it.Item().e
	}
}

func (c *cursor) next() {
	if c.cur == nil {
		return
	}
	if c.m.big == nil {
		if c.rev {
			c.i--
		} else {
			c.i++
		}
	} else if c.rev {
		c.ok = c.it.Prev()
	} else {
		c.ok = c.it.Next()
	}
	c.load()
}

// krange is a half-open key range [b, e).
type krange struct{ b, e []byte }

// clearSet is a sorted list of disjoint, non-touching cleared ranges.
type clearSet []krange

// add merges [b, e) into the set.
func (s clearSet) add(b, e []byte) clearSet {
	// First range whose end >= b (it touches or follows b).
	i := sort.Search(len(s), func(i int) bool { return bytes.Compare(s[i].e, b) >= 0 })
	j := i
	for j < len(s) && bytes.Compare(s[j].b, e) <= 0 {
		if bytes.Compare(s[j].b, b) < 0 {
			b = s[j].b
		}
		if bytes.Compare(s[j].e, e) > 0 {
			e = s[j].e
		}
		j++
	}
	if i == j {
		s = append(s, krange{})
		copy(s[i+1:], s[i:])
		s[i] = krange{b, e}
		return s
	}
	s[i] = krange{b, e}
	n := copy(s[i+1:], s[j:])
	clear(s[i+1+n:])
	return s[:i+1+n]
}

// find returns the cleared range containing k.
func (s clearSet) find(k []byte) (krange, bool) {
	if len(s) == 0 {
		return krange{}, false
	}
	i := sort.Search(len(s), func(i int) bool { return bytes.Compare(s[i].e, k) > 0 })
	if i < len(s) && bytes.Compare(s[i].b, k) <= 0 {
		return s[i], true
	}
	return krange{}, false
}

// keyAfter returns k + \x00, the first key after k.
func keyAfter(k []byte) []byte {
	out := make([]byte, len(k)+1)
	copy(out, k)
	return out
}
