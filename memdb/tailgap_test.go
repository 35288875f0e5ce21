package memdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
)

// checkGap requires the store's gap (liveGap), if any, to be true: lo in
// liveTree, hi the chain after it there. The caller holds db.mu.
func checkGap(t *testing.T, s *store) {
	t.Helper()
	g := s.gap.Load()
	if g == nil {
		return
	}
	if c, ok := s.liveTree.Get(ukey(g.lo.key)); !ok || c != g.lo {
		t.Fatalf("the gap's lo %q is not in liveTree", g.lo.key)
	}
	var next *chain
	s.liveTree.Ascend(ukey(g.lo.key), func(k string, c *chain) bool {
		if c == g.lo {
			return true
		}
		next = c
		return false
	})
	if next != g.hi {
		t.Fatalf("the gap (%q, %v): the chain after lo is %v", g.lo.key, keyOf(g.hi), keyOf(next))
	}
}

func keyOf(c *chain) any {
	if c == nil {
		return nil
	}
	return string(c.key)
}

// firstOfWalk returns the first row of the cursor's walk of [b, e) at
// tx's read version (the rangeCursor, which no gap shortens) and the
// one-row read's (store.firstAt, which uses the gap), and checks the gap
// before and after.
func firstOfWalk(t *testing.T, tx *transaction, b, e []byte, reverse bool) (want, got []string) {
	t.Helper()
	// Unlocked by defer: a failure must not leave db.mu held for Close.
	tx.db.mu.RLock()
	defer tx.db.mu.RUnlock()
	tx.mu.Lock()
	defer tx.mu.Unlock()
	checkGap(t, tx.db.st)
	defer checkGap(t, tx.db.st)
	all, err := tx.mergeLocked(b, e, 0, reverse, tx.rv)
	if err != nil {
		t.Fatal(err)
	}
	want = pairs(all)
	if len(want) > 1 {
		want = want[:1]
	}
	one, err := tx.mergeLocked(b, e, 1, reverse, tx.rv)
	if err != nil {
		t.Fatal(err)
	}
	return want, pairs(one)
}

// A reverse read of one row whose range ends before the tree's last key
// (a queue's tail, with the layer's counters after the items) takes the
// last key before the range's end from the store's gap rather than a
// search: the gap must give what the walk gives, while commits insert
// tails into the gap and around it, clear its keys (lo, hi and others,
// by Clear and ClearRange) and set them again, at the read versions of
// transactions that started before those commits as well as after, and
// for ranges ending elsewhere (which replace the gap).
func TestReverseReadOfOneRowThroughTheGapFindsWhatTheWalkFinds(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 16))
			db, _ := newTestDB(t)
			// A queue "q": items q\x00..., then meta keys q\xff...; other
			// keys before ("a...") and after ("z...") it.
			item := func(i int) []byte { return fmt.Appendf(nil, "q\x00%03d", i) }
			meta := func(i int) []byte { return fmt.Appendf(nil, "q\xff%d", i) }
			other := func(i int) []byte { return fmt.Appendf(nil, "%c%d", "az"[i%2], i/2) }
			const nitems, nmeta, nother = 40, 3, 4
			tail := 10
			commitT(t, db, func(tr kv.Transaction) {
				for i := range tail {
					tr.Set(item(i), []byte("old"))
				}
				for i := range nmeta {
					if r.IntN(3) > 0 {
						tr.Set(meta(i), []byte("meta"))
					}
				}
				for i := range nother {
					if r.IntN(2) == 0 {
						tr.Set(other(i), []byte("other"))
					}
				}
			})
			ends := [][]byte{[]byte("q\xff"), []byte("q\xff"), []byte("q\xff"), []byte("q\xff1"), []byte("r"), item(5), []byte("\xff")}
			begins := [][]byte{[]byte("q\x00"), []byte(""), item(3), []byte("q")}
			var held []*transaction
			for step := range 120 {
				commitT(t, db, func(tr kv.Transaction) {
					for range 1 + r.IntN(3) {
						switch n := r.IntN(10); {
						case n < 4: // an enqueue at the tail
							if tail < nitems {
								tr.Set(item(tail), fmt.Appendf(nil, "s%d", step))
								tail++
							}
						case n < 6: // a dequeue or a clear anywhere
							tr.Clear(item(r.IntN(nitems)))
						case n < 7: // the tail taken back
							if tail > 0 {
								tail--
								tr.Clear(item(tail))
							}
						case n < 8:
							tr.Set(meta(r.IntN(nmeta)), fmt.Appendf(nil, "m%d", step))
						case n < 9:
							k := meta(r.IntN(nmeta))
							if r.IntN(2) == 0 {
								tr.Clear(k)
							} else {
								tr.ClearRange(kv.KeyRange{Begin: k, End: []byte("q\xff\xff")})
							}
						default:
							k := other(r.IntN(nother))
							if r.IntN(2) == 0 {
								tr.Clear(k)
							} else {
								tr.Set(k, fmt.Appendf(nil, "o%d", step))
							}
						}
					}
				})
				tx := newTxT(t, db)
				if _, err := tx.GetReadVersion().Get(); err != nil {
					t.Fatal(err)
				}
				held = append(held, tx)
				if len(held) > 6 {
					held = slices.Delete(held, 0, 1+r.IntN(len(held)-1))
				}
				for range 4 {
					b, e := begins[r.IntN(len(begins))], ends[r.IntN(len(ends))]
					tx := held[r.IntN(len(held))]
					want, got := firstOfWalk(t, tx, b, e, true)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d [%q, %q) reverse at rv %d: %q, the walk's first %q", step, b, e, tx.rv, got, want)
					}
				}
			}
		})
	}
}

// Readers publish gaps under db.mu held shared, concurrently with one
// another, and commits move or drop them: with -race, any access to a gap
// that is not ordered by db.mu fails; each read is also checked against
// the walk.
func TestGapUnderConcurrentReadersAndCommits(t *testing.T) {
	db, _ := newTestDB(t)
	item := func(i int) []byte { return fmt.Appendf(nil, "q\x00%06d", i) }
	items := kv.KeyRange{Begin: []byte("q\x00"), End: []byte("q\xff")}
	commitT(t, db, func(tr kv.Transaction) {
		tr.Set([]byte("q\xffdepth"), []byte("0"))
		tr.Set(item(0), []byte("v"))
	})
	const rounds = 300
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				tx, err := db.newTransaction(context.Background())
				if err == nil {
					_, err = tx.GetReadVersion().Get()
				}
				if err != nil {
					errs <- err
					return
				}
				e := items.End
				if (i+w)%5 == 0 {
					e = []byte("q\xffdepth") // another range: replaces the gap
				}
				db.mu.RLock()
				tx.mu.Lock()
				all, err1 := tx.mergeLocked(items.Begin, e, 0, true, tx.rv)
				one, err2 := tx.mergeLocked(items.Begin, e, 1, true, tx.rv)
				tx.mu.Unlock()
				db.mu.RUnlock()
				if err1 != nil || err2 != nil {
					errs <- fmt.Errorf("%v %v", err1, err2)
					return
				}
				want := pairs(all)
				if len(want) > 1 {
					want = want[:1]
				}
				// (No t.Fatal here: another goroutine's.)
				if got := pairs(one); !slices.Equal(got, want) {
					errs <- fmt.Errorf("reader %d round %d: %q, the walk's first %q", w, i, got, want)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		head, tail := 0, 1
		for i := range rounds {
			err := db.Transact(context.Background(), func(tr kv.Transaction) error {
				if i%3 == 2 && head < tail {
					tr.Clear(item(head))
					head++
				} else {
					tr.Set(item(tail), []byte("v"))
					tail++
				}
				return nil
			})
			if err != nil {
				errs <- err
				return
			}
			// Drain the queue now and then, which drops the gap (its lo).
			if i%50 == 49 {
				err := db.Transact(context.Background(), func(tr kv.Transaction) error {
					tr.ClearRange(items)
					return nil
				})
				if err != nil {
					errs <- err
					return
				}
				head = tail
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db.mu.RLock()
	defer db.mu.RUnlock()
	checkGap(t, db.st)
}
