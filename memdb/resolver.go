package memdb

import (
	"bytes"
	"slices"
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
//
// The points are kept in a two-level layout: chunks of up to chunkMax
// points in key order, and an index of each chunk's first key. Each chunk
// has an upper bound of its versions, so a range check skips, at O(1)
// each, the chunks written at or before its read version (FoundationDB's
// resolver keeps per-node maximum versions in its skip list for the same
// reason: fdbserver/SkipList.cpp, class SkipList). Both
// levels search abbreviated keys (see keyArr), so finding the step that
// holds a key costs two binary searches over integers, about log2 n steps
// in all, and rarely a string comparison: a few nanoseconds at 200,000
// points (BenchmarkResolverConflicts, and conflict-missing in
// BenchmarkClearsAfterReadVersion).
type resolver struct {
	top    keyArr    // top.keys[i] is chunks[i].keys[0]
	chunks []*rchunk // none is empty
	// cmax[i] is at least every version in chunks[i]: exact after a split
	// or gc, an upper bound after deletions (a stale bound only makes a
	// range check read the chunk's versions, which decide exactly). It is
	// kept apart from the chunks so that a range check skips them with a
	// scan of one array.
	cmax []int64
	n    int // points held
	// maxV is the largest version ever written: no range was written after
	// a read version at or above it.
	maxV int64
	// sizeAfterGC is the number of points after the last gc; the next gc runs
	// once the count has doubled, which keeps its cost amortised O(1).
	sizeAfterGC int
}

// chunkMax is the most points a chunk holds; a full chunk splits in two.
// gc packs chunks to chunkFill, leaving room to insert. A chunk's arrays
// have room for chunkCap points: a write adds up to two before the split.
const (
	chunkMax  = 128
	chunkFill = chunkMax * 3 / 4
	chunkCap  = chunkMax + 2
)

// rchunk is a run of consecutive boundary points.
type rchunk struct {
	keyArr
	vers []int64 // vers[i] is the version of the step starting at keys[i]
}

// remove deletes the points at positions [i, j).
func (c *rchunk) remove(i, j int) {
	c.keyArr.remove(i, j)
	c.vers = slices.Delete(c.vers, i, j)
}

func newResolver() *resolver { return &resolver{} }

// conflicts reports whether [begin, end) was written after rv.
//
// It costs a search of each level for the step containing begin; a range
// that reaches past that chunk costs one more search of the index, a look
// at the version bound of each chunk it spans, and a scan of the versions
// of those chunks written after rv (the first one found ends the check).
func (r *resolver) conflicts(begin, end []byte, rv int64) bool {
	if r.maxV <= rv || len(r.chunks) == 0 {
		return false
	}
	bk, ek := ukey(begin), ukey(end)
	// The step containing begin.
	ci, i := r.top.upper(bk)-1, 0
	if ci < 0 {
		ci = 0 // begin precedes every point: its step is at version 0
	} else {
		c := r.chunks[ci]
		j := c.upper(bk) - 1
		if c.vers[j] > rv {
			return true
		}
		i = j + 1
	}
	// The points inside (begin, end): first in chunk ci, from i on.
	c := r.chunks[ci]
	if i < len(c.keys) && c.keys[len(c.keys)-1] >= ek {
		return newerThan(c.vers[i:c.lower(ek)], rv) // the range ends here
	}
	if r.cmax[ci] > rv && newerThan(c.vers[i:], rv) {
		return true
	}
	// Then in the chunks that start before end.
	ce := r.top.lower(ek) - 1
	for j := ci + 1; j < ce; j++ {
		if r.cmax[j] > rv && newerThan(r.chunks[j].vers, rv) {
			return true
		}
	}
	if ce > ci && r.cmax[ce] > rv {
		c := r.chunks[ce]
		return newerThan(c.vers[:c.lower(ek)], rv)
	}
	return false
}

// newerThan reports whether a version in vers is above rv.
func newerThan(vers []int64, rv int64) bool {
	for _, v := range vers {
		if v > rv {
			return true
		}
	}
	return false
}

// write records that [begin, end) was written at v, which is at least every
// version recorded so far. The keys are retained: callers pass slices they
// will not modify.
//
// It costs a few searches of both levels, a deletion of the points inside
// the range, and two insertions into chunks of at most chunkMax points
// (a split, when a chunk is full, also inserts into the index).
func (r *resolver) write(begin, end []byte, v int64) {
	if bytes.Compare(begin, end) >= 0 {
		return
	}
	r.maxV = v
	bk, ek := ukey(begin), ukey(end)
	if isPointRange(begin, end) && r.writePoint(bk, ek, v) {
		return
	}
	// The step containing end (its version continues after the range) and
	// where the points at or after end start.
	var after int64
	atEnd := false
	ce, je := r.top.upper(ek)-1, 0
	if ce >= 0 {
		c := r.chunks[ce]
		j := c.upper(ek) - 1
		after, atEnd = c.vers[j], c.keys[j] == ek
		je = j + 1
		if atEnd {
			je = j
		}
		// Where the points at or after begin start.
		cb, jb := r.top.upper(bk)-1, 0
		if cb < 0 {
			cb = 0
		} else {
			jb = r.chunks[cb].lower(bk)
		}
		r.deleteRange(cb, jb, ce, je)
	}
	r.insert(bk, v)
	if !atEnd {
		r.insert(ek, after)
	}
}

// writePoint is write of [k, k+\x00) (ek), the range of a single key,
// which has no point strictly inside it: one search of each level finds
// the step containing k, and one insertion into its chunk adds k, ek or
// both. It reports false, having done nothing, when k precedes every
// point.
func (r *resolver) writePoint(k, ek string, v int64) bool {
	ci := r.top.upper(k) - 1
	if ci < 0 {
		return false
	}
	c := r.chunks[ci]
	j := c.upper(k) - 1
	// The point after k, if any, is the next in key order.
	atEnd := false
	if j+1 < len(c.keys) {
		atEnd = c.keys[j+1] == ek
	} else if ci+1 < len(r.chunks) {
		atEnd = r.top.keys[ci+1] == ek
	}
	// ek's step, unless it has its own point, is k's step before this write.
	after := c.vers[j]
	r.cmax[ci] = max(r.cmax[ci], v)
	n := len(c.keys)
	switch {
	case c.keys[j] == k && atEnd:
		c.vers[j] = v
		return true
	case c.keys[j] == k:
		c.vers[j] = v
		c.insert(j+1, ek)
		c.vers = slices.Insert(c.vers, j+1, after)
	case atEnd:
		c.insert(j+1, k)
		c.vers = slices.Insert(c.vers, j+1, v)
	default:
		c.insert(j+1, k, ek)
		c.vers = slices.Insert(c.vers, j+1, v, after)
	}
	r.n += len(c.keys) - n
	if len(c.keys) > chunkMax {
		r.split(ci, j == n-1) // the new points came last
	}
	return true
}

// deleteRange removes the points from position (cb, jb) up to, not
// including, position (ce, je); (cb, jb) is not after (ce, je).
func (r *resolver) deleteRange(cb, jb, ce, je int) {
	if cb == ce {
		if jb < je {
			r.chunks[cb].remove(jb, je)
			r.n -= je - jb
			r.fixChunks(cb, cb)
		}
		return
	}
	first := r.chunks[cb]
	r.n -= len(first.keys) - jb
	first.remove(jb, len(first.keys))
	for _, c := range r.chunks[cb+1 : ce] {
		r.n -= len(c.keys)
		c.remove(0, len(c.keys))
	}
	r.n -= je
	r.chunks[ce].remove(0, je)
	r.fixChunks(cb, ce)
}

// fixChunks drops the empty chunks among chunks[lo..hi] and updates the
// index's keys of the others, whose first points may have changed.
func (r *resolver) fixChunks(lo, hi int) {
	w := lo
	for i := lo; i <= hi; i++ {
		if len(r.chunks[i].keys) > 0 {
			r.chunks[w], r.cmax[w] = r.chunks[i], r.cmax[i]
			w++
		}
	}
	if w <= hi {
		r.chunks = slices.Delete(r.chunks, w, hi+1)
		r.cmax = slices.Delete(r.cmax, w, hi+1)
		r.top.remove(w, hi+1)
	}
	for i := lo; i < w; i++ {
		if k := r.chunks[i].keys[0]; k != r.top.keys[i] {
			r.top.set(i, k)
		}
	}
}

// insert adds the point (k, v); no point is at k.
func (r *resolver) insert(k string, v int64) {
	r.n++
	if len(r.chunks) == 0 {
		c := &rchunk{keyArr: keyArr{keys: make([]string, 0, chunkCap), ab: make([]uint64, 0, chunkCap)},
			vers: make([]int64, 0, chunkCap)}
		c.insert(0, k)
		c.vers = append(c.vers, v)
		r.chunks = append(r.chunks, c)
		r.cmax = append(r.cmax, v)
		r.top.insert(0, k)
		return
	}
	ci := max(r.top.upper(k)-1, 0)
	c := r.chunks[ci]
	j := c.upper(k)
	c.insert(j, k)
	c.vers = slices.Insert(c.vers, j, v)
	r.cmax[ci] = max(r.cmax[ci], v)
	if j == 0 {
		r.top.set(ci, k)
	}
	if len(c.keys) > chunkMax {
		r.split(ci, j == len(c.keys)-1)
	}
}

// split moves the upper half of chunks[ci] into a new chunk after it, or
// only its last eighth when the point just inserted was its last: keys
// recorded in ascending order (a queue's head moving on) then leave chunks
// mostly full rather than half full.
func (r *resolver) split(ci int, last bool) {
	c := r.chunks[ci]
	h := len(c.keys) / 2
	if last {
		h = len(c.keys) - len(c.keys)/8
	}
	hi := &rchunk{vers: make([]int64, 0, chunkCap)}
	hi.load(c.keys[h:])
	hi.vers = append(hi.vers, c.vers[h:]...)
	c.remove(h, len(c.keys))
	c.load(c.keys) // the lower half's prefix may be longer
	r.cmax[ci] = slices.Max(c.vers)
	r.chunks = slices.Insert(r.chunks, ci+1, hi)
	r.cmax = slices.Insert(r.cmax, ci+1, slices.Max(hi.vers))
	r.top.insert(ci+1, hi.keys[0])
}

// isPointRange reports whether [b, e) holds the single key b (e is b+\x00).
func isPointRange(b, e []byte) bool {
	return len(e) == len(b)+1 && e[len(b)] == 0 && bytes.Equal(b, e[:len(b)])
}

// len returns the number of boundary points held.
func (r *resolver) len() int { return r.n }

// maybeGC folds versions at or below horizon into 0 when the point count has
// doubled since the last collection, or repacks the chunks when deletions
// have left them less than an eighth full on average.
func (r *resolver) maybeGC(horizon int64) {
	if r.n < 2*r.sizeAfterGC+1024 && len(r.chunks)*chunkMax/8 <= r.n+chunkMax {
		return
	}
	r.gc(horizon)
}

func (r *resolver) gc(horizon int64) {
	var keys []string
	var vers []int64
	prev := int64(0)
	for _, c := range r.chunks {
		for i, k := range c.keys {
			v := c.vers[i]
			if v <= horizon {
				v = 0
			}
			if v != prev {
				keys = append(keys, k)
				vers = append(vers, v)
				prev = v
			}
		}
	}
	r.chunks, r.cmax, r.top = nil, nil, keyArr{}
	for i := 0; i < len(keys); i += chunkFill {
		j := min(i+chunkFill, len(keys))
		c := &rchunk{vers: make([]int64, 0, chunkCap)}
		c.load(keys[i:j])
		c.vers = append(c.vers, vers[i:j]...)
		r.chunks = append(r.chunks, c)
		r.cmax = append(r.cmax, slices.Max(c.vers))
	}
	firsts := make([]string, len(r.chunks))
	for i, c := range r.chunks {
		firsts[i] = c.keys[0]
	}
	r.top.load(firsts)
	r.n = len(keys)
	r.sizeAfterGC = r.n
}

// keyArr is a sorted array of distinct keys searched by abbreviated keys:
// all its keys share the prefix p, and ab[i] packs the 7 bytes of keys[i]
// that follow p (zero-padded) with the length of that remainder capped at 8.
// Abbreviations order like the keys they abbreviate; two equal ones with a
// length below 8 are equal keys, and only equal ones with length 8 (keys
// agreeing on 7 bytes past p) need a string comparison. A lookup is then a
// binary search over integers, plus a few string comparisons in a tie.
// Ties are rare when the keys share a prefix and differ soon after it (a
// chunk of one queue's keys); a chunk spanning unrelated keys has a short
// prefix, and its keys may tie on 7 bytes and pay string comparisons
// (about twice the cost at 20 points: BenchmarkResolverConflicts).
type keyArr struct {
	p    string // a prefix of every key: the longest one when last computed
	ab   []uint64
	keys []string
}

// abbrev returns the abbreviation of k, which has prefix length pre.
func abbrev(k string, pre int) uint64 {
	s := k[pre:]
	if len(s) >= 8 {
		return uint64(s[0])<<56 | uint64(s[1])<<48 | uint64(s[2])<<40 | uint64(s[3])<<32 |
			uint64(s[4])<<24 | uint64(s[5])<<16 | uint64(s[6])<<8 | 8
	}
	var x uint64
	for i := 0; i < len(s); i++ {
		x |= uint64(s[i]) << (56 - 8*i)
	}
	return x | uint64(len(s))
}

// upper returns the number of keys at or before x.
func (a *keyArr) upper(x string) int {
	n := len(a.keys)
	if n == 0 {
		return 0
	}
	if len(x) < len(a.p) || x[:len(a.p)] != a.p {
		// x is outside the keys' common prefix: before or after them all.
		if x < a.p {
			return 0
		}
		return n
	}
	xa := abbrev(x, len(a.p))
	lo, hi := 0, n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a.ab[m] <= xa {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if xa&0xff < 8 || lo == 0 || a.ab[lo-1] != xa {
		return lo
	}
	// Keys tied with x on their abbreviation: compare them whole.
	hi = lo
	lo = 0
	for l := hi; lo < l; {
		m := int(uint(lo+l) >> 1)
		if a.ab[m] < xa {
			lo = m + 1
		} else {
			l = m
		}
	}
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a.keys[m] <= x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// lower returns the number of keys before x.
func (a *keyArr) lower(x string) int {
	i := a.upper(x)
	if i > 0 && a.keys[i-1] == x {
		i--
	}
	return i
}

// load replaces the contents with keys, sorted and distinct (keys may be
// a.keys itself).
func (a *keyArr) load(keys []string) {
	if cap(a.keys) < len(keys) {
		a.keys = make([]string, 0, max(len(keys), chunkCap))
		a.ab = make([]uint64, 0, cap(a.keys))
	}
	a.keys = append(a.keys[:0], keys...)
	a.ab = a.ab[:len(keys)]
	a.p = ""
	if len(keys) > 0 {
		a.p = keys[0][:lcp(keys[0], keys[len(keys)-1])]
	}
	a.reabbrev()
}

func (a *keyArr) reabbrev() {
	for i, k := range a.keys {
		a.ab[i] = abbrev(k, len(a.p))
	}
}

// insert puts ks at position i, which keeps the keys in order.
func (a *keyArr) insert(i int, ks ...string) {
	if len(a.keys) == 0 {
		a.p = ks[0]
	}
	a.keys = slices.Insert(a.keys, i, ks...)
	var zero [2]uint64
	a.ab = slices.Insert(a.ab, i, zero[:len(ks)]...)
	for j := range ks {
		a.fix(i + j)
	}
}

// set replaces the key at position i with k, which keeps the keys in order.
func (a *keyArr) set(i int, k string) {
	a.keys[i] = k
	a.fix(i)
}

// fix abbreviates keys[i], first shortening p if keys[i] lies outside it.
func (a *keyArr) fix(i int) {
	k := a.keys[i]
	if len(k) < len(a.p) || k[:len(a.p)] != a.p {
		a.p = a.p[:lcp(a.p, k)]
		a.reabbrev()
		return
	}
	a.ab[i] = abbrev(k, len(a.p))
}

// remove deletes the keys at positions [i, j). The prefix stays: it is
// still common to the keys left.
func (a *keyArr) remove(i, j int) {
	a.keys = slices.Delete(a.keys, i, j)
	a.ab = slices.Delete(a.ab, i, j)
}

// lcp returns the length of the longest common prefix of a and b.
func lcp(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
