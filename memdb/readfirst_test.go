package memdb

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A read of one row with nothing of the transaction's own to merge (a
// queue's head or tail) takes store.firstAt, not the cursor: it must find
// what the cursor's walk finds first, at read versions before later clears
// (keys live at rv but dead now), later sets (keys live now, not at rv)
// and re-sets, with keys of the store before, inside and after the range
// (the tree's first or last key in the range, or not).
func TestReadOfOneRowFindsWhatTheWalkFindsFirst(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 11))
			db, _ := newTestDB(t)
			key := func(i int) []byte { return fmt.Appendf(nil, "k%02d", i) }
			const nkeys = 16
			commitT(t, db, func(tr kv.Transaction) {
				for i := range nkeys {
					if r.IntN(2) == 0 {
						tr.Set(key(i), []byte("old"))
					}
				}
			})
			tx := newTxT(t, db)
			_, err := tx.GetReadVersion().Get()
			if err != nil {
				t.Fatal(err)
			}
			for step := range 4 {
				commitT(t, db, func(tr kv.Transaction) {
					for range 1 + r.IntN(6) {
						k := key(r.IntN(nkeys))
						if r.IntN(2) == 0 {
							tr.Clear(k)
						} else {
							tr.Set(k, fmt.Appendf(nil, "new%d", step))
						}
					}
				})
			}
			bounds := [][]byte{[]byte(""), []byte("\xff")}
			for i := range nkeys + 1 {
				bounds = append(bounds, key(i), append(key(i), 0))
			}
			db.mu.RLock()
			defer db.mu.RUnlock()
			tx.mu.Lock()
			defer tx.mu.Unlock()
			for _, b := range bounds {
				for _, e := range bounds {
					for _, reverse := range []bool{false, true} {
						all, err := tx.mergeLocked(b, e, 0, reverse, tx.rv)
						if err != nil {
							t.Fatal(err)
						}
						want := pairs(all)
						if len(want) > 1 {
							want = want[:1]
						}
						one, err := tx.mergeLocked(b, e, 1, reverse, tx.rv)
						if err != nil {
							t.Fatal(err)
						}
						if got := pairs(one); !slices.Equal(got, want) {
							t.Fatalf("[%q, %q) reverse %v: %q, the walk's first %q", b, e, reverse, got, want)
						}
					}
				}
			}
		})
	}
}

// The transaction, its cold part and a first range result with its room
// for an atomic entry each stay within the size class they were sized for
// (512, 288 and 512 bytes): a field more would cost every transaction (or
// every one with a versionstamp, a retry or a timeout) a larger allocation.
func TestTransactionPartsStayInTheirSizeClasses(t *testing.T) {
	type firstResult struct {
		rangeResult
		room opEntry
	}
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"transaction", unsafe.Sizeof(transaction{}), 512},
		{"txCold", unsafe.Sizeof(txCold{}), 288},
		{"rangeResult", unsafe.Sizeof(rangeResult{}), 352},
		{"first range result", unsafe.Sizeof(firstResult{}), 512},
		{"opEntry", unsafe.Sizeof(opEntry{}), 160},
	} {
		if c.size > c.max {
			t.Errorf("%s: %d bytes, more than %d", c.name, c.size, c.max)
		}
	}
}
