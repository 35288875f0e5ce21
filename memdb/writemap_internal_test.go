package memdb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// find and insert (an atomic operation's one search) keep a writeMap as
// put does: keys in order, one entry each, below, at and past smallMax
// (where the slice becomes a B-tree), whatever order the keys come in.
func TestWriteMapFindInsertKeepsOrder(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 3))
		var m writeMap
		model := map[string]*wentry{}
		for range 3 * smallMax {
			k := fmt.Appendf(nil, "k%03d", r.IntN(2*smallMax))
			e, at := m.find(k)
			if e != model[string(k)] {
				t.Fatalf("seed %d: find %q: %v, want %v", seed, k, e, model[string(k)])
			}
			if e == nil {
				e = &wentry{key: k}
				if r.IntN(2) == 0 {
					m.insert(at, e)
				} else {
					m.put(e)
				}
				model[string(k)] = e
			}
			var keys []string
			m.each(func(e *wentry) bool {
				keys = append(keys, string(e.key))
				if model[string(e.key)] != e {
					t.Fatalf("seed %d: entry of %q is not the one put", seed, e.key)
				}
				return true
			})
			want := make([]string, 0, len(model))
			for k := range model {
				want = append(want, k)
			}
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Fatalf("seed %d: keys %q, want %q", seed, keys, want)
			}
		}
	}
}
