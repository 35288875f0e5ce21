package memdb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// randKey returns a key drawn to stress the resolver's abbreviated keys:
// short keys over a few bytes (0x00 and 0xff among them: k and k+\x00
// pairs, keys that are prefixes of others), and keys with a long shared
// prefix whose suffixes agree on 7 bytes or more (ties on abbreviations).
func randKey(r *rand.Rand) []byte {
	alpha := []byte{0x00, 0x01, 'a', 'b', 0xff}
	var k []byte
	switch r.IntN(3) {
	case 0:
	case 1:
		k = append(k, "queue/items/"...)
	case 2:
		k = append(k, "queue/items/0000000"...)
	}
	for n := r.IntN(11); n > 0; n-- {
		k = append(k, alpha[r.IntN(len(alpha))])
	}
	return k
}

// modelWrite is a write the reference model remembers: [b, e) at v.
type modelWrite struct {
	b, e []byte
	v    int64
}

// TestResolverRandomized checks the resolver against the simplest model of
// its contract: [b, e) conflicts at rv iff a write after rv overlaps it,
// for every read version at or above the last gc horizon (gc may forget
// what is older), and checks its layout's invariants after every step.
// Enough points are written to split chunks, and range writes delete them
// across chunks.
func TestResolverRandomized(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 7))
			res := newResolver()
			var hist []modelWrite
			maxChunks := 0
			v, horizon := int64(0), int64(0)
			for step := range 3000 {
				v += int64(1 + r.IntN(2))
				b, e := randKey(r), randKey(r)
				if seed%2 == 1 { // queue-shaped: many numbered keys, short ranges
					i := r.IntN(1_000_000)
					b = fmt.Appendf(nil, "q/%08d", i)
					e = fmt.Appendf(nil, "q/%08d", i+r.IntN(1000))
				}
				switch x := r.IntN(1000); {
				case x < 700: // a point write, as a clear of a missing key records
					e = append(slices.Clip(b), 0)
				case x < 996: // a short range
					e = slices.Clip(b)
					for n := 1 + r.IntN(3); n > 0; n-- {
						e = append(e, byte(r.IntN(256)))
					}
				case x < 999: // a random range
				default: // everything
					b, e = nil, []byte{0xff, 0xff}
				}
				if bytes.Compare(b, e) > 0 {
					b, e = e, b
				}
				res.write(b, e, v)
				if bytes.Compare(b, e) < 0 {
					hist = append(hist, modelWrite{b, e, v})
				}
				maxChunks = max(maxChunks, len(res.chunks))
				if r.IntN(200) == 0 {
					horizon = max(horizon, v-2000-int64(r.IntN(100))) // never lowered, as in DB
					res.gc(horizon)
				}
				checkResolverLayout(t, res)
				for range 4 {
					qb, qe := randKey(r), randKey(r)
					if seed%2 == 1 && r.IntN(4) != 0 {
						i := r.IntN(1_000_000)
						qb = fmt.Appendf(nil, "q/%08d", i)
						qe = fmt.Appendf(nil, "q/%08d", i+r.IntN(10000))
					}
					if r.IntN(3) == 0 {
						qe = append(slices.Clip(qb), 0)
					}
					if bytes.Compare(qb, qe) >= 0 {
						continue
					}
					rv := max(horizon, v-int64(r.IntN(3000)))
					if r.IntN(2) == 0 { // only the last few writes count
						rv = max(horizon, v-int64(r.IntN(10)))
					}
					want := false
					for _, w := range hist {
						if w.v > rv && bytes.Compare(w.b, qe) < 0 && bytes.Compare(qb, w.e) < 0 {
							want = true
							break
						}
					}
					if got := res.conflicts(qb, qe, rv); got != want {
						t.Fatalf("step %d: [%q, %q) at %d: conflict %v, the model %v", step, qb, qe, rv, got, want)
					}
				}
			}
		})
	}
}

// checkResolverLayout checks the resolver's invariants: points in strictly
// increasing order across chunks, no empty chunk, the index holding each
// chunk's first key, every key array's prefix and abbreviations current,
// each chunk's version bound covering its versions, and the point count.
func checkResolverLayout(t *testing.T, res *resolver) {
	t.Helper()
	checkKeyArr(t, &res.top)
	if len(res.top.keys) != len(res.chunks) || len(res.cmax) != len(res.chunks) {
		t.Fatalf("%d index keys, %d bounds for %d chunks", len(res.top.keys), len(res.cmax), len(res.chunks))
	}
	n := 0
	prev := ""
	for i, c := range res.chunks {
		checkKeyArr(t, &c.keyArr)
		if len(c.keys) == 0 || len(c.keys) > chunkMax || len(c.vers) != len(c.keys) {
			t.Fatalf("chunk %d: %d keys, %d versions", i, len(c.keys), len(c.vers))
		}
		if res.top.keys[i] != c.keys[0] {
			t.Fatalf("chunk %d starts at %q, the index says %q", i, c.keys[0], res.top.keys[i])
		}
		if i > 0 && c.keys[0] <= prev {
			t.Fatalf("chunk %d starts at %q, not after %q", i, c.keys[0], prev)
		}
		if m := slices.Max(c.vers); m > res.cmax[i] {
			t.Fatalf("chunk %d: version %d above its bound %d", i, m, res.cmax[i])
		}
		prev = c.keys[len(c.keys)-1]
		n += len(c.keys)
	}
	if n != res.n {
		t.Fatalf("%d points counted as %d", n, res.n)
	}
}

func checkKeyArr(t *testing.T, a *keyArr) {
	t.Helper()
	if len(a.ab) != len(a.keys) {
		t.Fatalf("%d abbreviations for %d keys", len(a.ab), len(a.keys))
	}
	for i, k := range a.keys {
		if !strings.HasPrefix(k, a.p) {
			t.Fatalf("key %q lacks the prefix %q", k, a.p)
		}
		if a.ab[i] != abbrev(k, len(a.p)) {
			t.Fatalf("key %q: stale abbreviation", k)
		}
		if i > 0 && a.keys[i-1] >= k {
			t.Fatalf("keys %q, %q out of order", a.keys[i-1], k)
		}
	}
}

// TestKeyArrSearch checks upper and lower against sort.Search over key
// sets built to tie on abbreviations: keys sharing a long prefix, keys
// agreeing on 7 or more bytes past it, keys that are prefixes of others,
// and probes inside, before, after and outside the shared prefix.
func TestKeyArrSearch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		set := map[string]bool{}
		for n := r.IntN(40); n > 0; n-- {
			set[string(randKey(r))] = true
		}
		keys := make([]string, 0, len(set))
		for k := range set {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var a keyArr
		if r.IntN(2) == 0 {
			a.load(keys)
		} else { // built by insertions in random order: p shrinks as it goes
			for _, i := range r.Perm(len(keys)) {
				a.insert(sort.SearchStrings(a.keys, keys[i]), keys[i])
			}
		}
		checkKeyArr(t, &a)
		for range 50 {
			x := string(randKey(r))
			if len(keys) > 0 && r.IntN(2) == 0 {
				x = keys[r.IntN(len(keys))]
				if r.IntN(2) == 0 {
					x += "\x00"
				}
			}
			up := sort.Search(len(keys), func(i int) bool { return keys[i] > x })
			lo := sort.SearchStrings(keys, x)
			if got := a.upper(x); got != up {
				t.Fatalf("upper(%q) in %q = %d, want %d", x, keys, got, up)
			}
			if got := a.lower(x); got != lo {
				t.Fatalf("lower(%q) in %q = %d, want %d", x, keys, got, lo)
			}
		}
	}
}

// TestResolverGCBoundsPoints: clears of missing keys at ever newer versions
// leave the resolver no more than about twice the points written within
// the horizon's reach, and repeated range clears over the same keys leave
// the chunks packed.
func TestResolverGCBoundsPoints(t *testing.T) {
	res := newResolver()
	for v := int64(1); v <= 200_000; v++ {
		k := fmt.Appendf(nil, "q/%08d", v)
		res.write(k, append(k, 0), v)
		res.maybeGC(v - 1000) // 1,000 versions of 2 points each are live
		if res.len() > 2*2000+1024+2 {
			t.Fatalf("version %d: %d points", v, res.len())
		}
	}
	checkResolverLayout(t, res)
	// A range clear over everything leaves two points.
	res.write([]byte("q/"), []byte("q0"), 200_001)
	if res.len() != 2 || len(res.chunks) != 1 {
		t.Fatalf("%d points in %d chunks after a clear of everything", res.len(), len(res.chunks))
	}
	checkResolverLayout(t, res)
}
