package memdb

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

// Range reads and range conflict checks take one of two paths (a scan of
// every chain, or the live index merged with the dead index's chains
// written after the read version); these tests run each through both and
// compare with the full scan, which is how they worked before the
// indexes, and with models.

// scanPath configures a store to take one path.
type scanPath struct {
	name     string
	fullScan bool
}

// scanPaths are the paths tested: the full scan (the old path) and the
// indexes.
var scanPaths = []scanPath{
	{"full-scan", true},
	{"index", false},
}

func (p scanPath) set(s *store) { s.fullScan = p.fullScan }

// defaultPath restores the store's default settings.
func defaultPath(s *store) { s.fullScan = false }

// newTestDB returns a DB with a manual clock, closed when the test ends.
func newTestDB(t *testing.T, opts ...Option) (*DB, *ManualClock) {
	t.Helper()
	clk := NewManualClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	db := New(append([]Option{WithClock(clk), WithBackoff(10*time.Microsecond, time.Millisecond)}, opts...)...)
	t.Cleanup(func() { _ = db.Close() })
	return db, clk
}

func commitT(t *testing.T, db *DB, fn func(tr kv.Transaction)) {
	t.Helper()
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		fn(tr)
		return nil
	}))
}

func newTxT(t *testing.T, db *DB) *transaction {
	t.Helper()
	tx, err := db.newTransaction(context.Background())
	require.NoError(t, err)
	return tx
}

// pairs renders kvs as "k=v" strings.
func pairs(kvs []kv.KeyValue) []string {
	out := make([]string, 0, len(kvs))
	for _, p := range kvs {
		out = append(out, string(p.Key)+"="+string(p.Value))
	}
	return out
}

// readEveryPath reads [b, e) in tx through the public API on every path
// and requires the same result from each; it returns it.
func readEveryPath(t *testing.T, tx *transaction, b, e string, limit int, reverse bool) []string {
	t.Helper()
	var first []string
	for i, p := range scanPaths {
		p.set(tx.db.st)
		kvs, err := tx.Snapshot().GetRange(kv.KeyRange{Begin: []byte(b), End: []byte(e)},
			kv.RangeOptions{Limit: limit, Reverse: reverse}).GetSlice()
		require.NoError(t, err)
		got := pairs(kvs)
		if i == 0 {
			first = got
		} else {
			require.Equal(t, first, got, "path %s, [%s, %s) limit %d reverse %v", p.name, b, e, limit, reverse)
		}
	}
	defaultPath(tx.db.st)
	return first
}

// TestRangeReadsAtAnOldVersionSeeLaterClears: keys cleared (and re-set,
// and cleared again) after a transaction's read version are still there
// for its range reads, forwards and in reverse, with limits, on every path.
func TestRangeReadsAtAnOldVersionSeeLaterClears(t *testing.T) {
	db, _ := newTestDB(t)
	commitT(t, db, func(tr kv.Transaction) {
		for i := range 10 {
			tr.Set(fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
		}
	})
	old := newTxT(t, db)
	_, err := old.GetReadVersion().Get()
	require.NoError(t, err)

	commitT(t, db, func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("k0"), End: []byte("k3")}) })
	commitT(t, db, func(tr kv.Transaction) { tr.Clear([]byte("k4")) })
	commitT(t, db, func(tr kv.Transaction) { tr.Set([]byte("k1"), []byte("again")) })
	commitT(t, db, func(tr kv.Transaction) { tr.Clear([]byte("k1")) })
	commitT(t, db, func(tr kv.Transaction) { tr.Clear([]byte("k9")) })
	commitT(t, db, func(tr kv.Transaction) { tr.Set([]byte("k05"), []byte("new")) })
	mid := newTxT(t, db)
	_, err = mid.GetReadVersion().Get()
	require.NoError(t, err)
	commitT(t, db, func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}) })

	all := []string{"k0=v0", "k1=v1", "k2=v2", "k3=v3", "k4=v4", "k5=v5", "k6=v6", "k7=v7", "k8=v8", "k9=v9"}
	require.Equal(t, all, readEveryPath(t, old, "k", "l", 0, false))
	require.Equal(t, all[:3], readEveryPath(t, old, "k", "l", 3, false))
	require.Equal(t, []string{"k9=v9", "k8=v8"}, readEveryPath(t, old, "k", "l", 2, true))
	require.Equal(t, []string{"k4=v4", "k3=v3", "k2=v2"}, readEveryPath(t, old, "k2", "k5", 0, true))

	atMid := []string{"k05=new", "k3=v3", "k5=v5", "k6=v6", "k7=v7", "k8=v8"}
	require.Equal(t, atMid, readEveryPath(t, mid, "k", "l", 0, false))
	require.Equal(t, []string{"k8=v8", "k7=v7"}, readEveryPath(t, mid, "k", "l", 2, true))

	fresh := newTxT(t, db)
	require.Empty(t, readEveryPath(t, fresh, "k", "l", 0, false))
	require.Empty(t, readEveryPath(t, fresh, "k", "l", 1, true))
}

// TestRangeReadsMergeOwnWritesOverLaterClears: a transaction's own writes
// and clears merge with keys cleared in the database after its read
// version, on every path.
func TestRangeReadsMergeOwnWritesOverLaterClears(t *testing.T) {
	db, _ := newTestDB(t)
	commitT(t, db, func(tr kv.Transaction) {
		for i := range 10 {
			tr.Set(fmt.Appendf(nil, "k%d", i), fmt.Appendf(nil, "v%d", i))
		}
		tr.Set([]byte("n"), []byte{5})
	})
	tx := newTxT(t, db)
	_, err := tx.GetReadVersion().Get()
	require.NoError(t, err)
	commitT(t, db, func(tr kv.Transaction) {
		tr.ClearRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")})
		tr.Clear([]byte("n"))
	})

	tx.Set([]byte("k3"), []byte("mine"))                                     // over a key cleared later
	tx.Clear([]byte("k6"))                                                   // own point clear
	tx.ClearRange(kv.KeyRange{Begin: []byte("k7"), End: []byte("k9")})       // own range clear
	tx.Add([]byte("k1"), []byte{1})                                          // folds over v1 at the read version (1 byte wide)
	tx.Set([]byte("k45"), []byte("between"))                                 // interleaved
	tx.Add([]byte("n"), []byte{2})                                           // on a key cleared later
	tx.ClearRange(kv.KeyRange{Begin: []byte("m"), End: []byte("m\x00\x00")}) // empty of keys
	want := []string{"k0=v0", "k1=w", "k2=v2", "k3=mine", "k4=v4", "k45=between", "k5=v5", "k9=v9", "n=\x07"}
	require.Equal(t, want, readEveryPath(t, tx, "", "\xff", 0, false))
	rev := append([]string(nil), want...)
	slices.Reverse(rev)
	require.Equal(t, rev, readEveryPath(t, tx, "", "\xff", 0, true))
	require.Equal(t, want[:4], readEveryPath(t, tx, "", "\xff", 4, false))
	require.Equal(t, rev[:5], readEveryPath(t, tx, "", "\xff", 5, true))
	require.Equal(t, []string{"k5=v5", "k45=between", "k4=v4"}, readEveryPath(t, tx, "k35", "k6", 0, true))
}

// TestRangeReadsAfterManyClears: a read version followed by clears of
// the keys it reads, one per commit, reads them all on every path.
func TestRangeReadsAfterManyClears(t *testing.T) {
	db, _ := newTestDB(t)
	commitT(t, db, func(tr kv.Transaction) {
		for i := range 20 {
			tr.Set(fmt.Appendf(nil, "k%02d", i), []byte("v"))
		}
	})
	tx := newTxT(t, db)
	_, err := tx.GetReadVersion().Get()
	require.NoError(t, err)
	var want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("k%02d=v", i))
	}
	for i := range 10 { // one clear after the read version per commit
		commitT(t, db, func(tr kv.Transaction) { tr.Clear(fmt.Appendf(nil, "k%02d", 2*i)) })
		require.Equal(t, want, readEveryPath(t, tx, "k", "l", 0, false))
		require.Equal(t, []string{"k19=v", "k18=v", "k17=v"}, readEveryPath(t, tx, "k", "l", 3, true))
		require.Equal(t, []string{"k00=v", "k01=v"}, readEveryPath(t, tx, "k", "l", 2, false))
		require.Equal(t, want[5:9], readEveryPath(t, tx, "k05", "k09", 0, false))
	}
}

// TestRangeConflictsFromClearsOnly: a range read conflicts with a later
// commit whose only writes in the range are clears (of a live key, of a
// key already cleared, of a missing key, of a range), on every path; and
// the store's check (writtenAfter) agrees with a scan of the range.
func TestRangeConflictsFromClearsOnly(t *testing.T) {
	clears := map[string]func(tr kv.Transaction){
		"live key":      func(tr kv.Transaction) { tr.Clear([]byte("k5")) },
		"cleared key":   func(tr kv.Transaction) { tr.Clear([]byte("k2")) },
		"missing key":   func(tr kv.Transaction) { tr.Clear([]byte("k55")) },
		"range":         func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("k6"), End: []byte("k8")}) },
		"empty range":   func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("k22"), End: []byte("k25")}) },
		"outside (key)": func(tr kv.Transaction) { tr.Clear([]byte("z")) },
		"outside range": func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: []byte("l"), End: []byte("z")}) },
	}
	for name, clear := range clears {
		for _, p := range scanPaths {
			t.Run(name+"/"+p.name, func(t *testing.T) {
				db, _ := newTestDB(t)
				p.set(db.st)
				commitT(t, db, func(tr kv.Transaction) {
					for i := range 10 {
						tr.Set(fmt.Appendf(nil, "k%d", i), []byte("v"))
					}
					tr.Set([]byte("z"), []byte("v"))
				})
				commitT(t, db, func(tr kv.Transaction) { tr.Clear([]byte("k2")) })
				tx := newTxT(t, db)
				kvs, err := tx.GetRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}, kv.RangeOptions{}).GetSlice()
				require.NoError(t, err)
				require.Len(t, kvs, 9)
				commitT(t, db, clear)
				commitT(t, db, func(tr kv.Transaction) { tr.Set([]byte("other"), []byte("v")) })
				st := db.st
				b, e := []byte("k"), []byte("l")
				require.Equal(t, st.writtenAfterScan(b, e, tx.rv), st.writtenAfter(b, e, tx.rv))
				tx.Set([]byte("mine"), []byte("v"))
				err = tx.Commit()
				if name == "outside (key)" || name == "outside range" {
					require.NoError(t, err)
				} else {
					require.ErrorIs(t, err, kv.ErrNotCommitted)
				}
			})
		}
	}
}

// TestRangeIndexRandomized runs random commits (sets, clears, range clears,
// atomic adds) with the clock moving so that garbage collection runs, and
// checks at random read versions still in the window that range reads
// (with the transaction's own writes merged) and range conflict checks give
// the same results on every path as the full scan, that reads without own
// writes match a model of every committed state, that conflict checks
// match a model of every commit's write ranges, and that the live index
// and the write log are consistent with the tree.
func TestRangeIndexRandomized(t *testing.T) {
	seeds := 10
	if testing.Short() {
		seeds = 3
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { randomizedRangeIndex(t, uint64(seed)) })
	}
}

// modelCommit is a committed state and its write conflict ranges.
type modelCommit struct {
	v      int64
	state  map[string]string
	writes []krange
}

func randomizedRangeIndex(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 7))
	db, clk := newTestDB(t, WithMVCCWindow(2*time.Millisecond))
	const nkeys = 24
	key := func(i int) []byte { return fmt.Appendf(nil, "k%02d", i) }
	randKey := func() []byte {
		if r.IntN(8) == 0 {
			return fmt.Appendf(nil, "k%02d\x00", r.IntN(nkeys)) // between keys
		}
		return key(r.IntN(nkeys))
	}
	randRange := func() ([]byte, []byte) {
		b, e := randKey(), randKey()
		if bytes.Compare(b, e) > 0 {
			b, e = e, b
		}
		if r.IntN(10) == 0 {
			b, e = []byte(""), []byte("\xff")
		}
		return b, e
	}

	state := map[string]string{}
	hist := []modelCommit{{v: 0, state: map[string]string{}}}
	var pool []*transaction // transactions holding read versions

	for step := range 600 {
		// A commit of a few random writes.
		var next map[string]string
		var writes []krange
		require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
			next = make(map[string]string, len(state))
			for k, v := range state {
				next[k] = v
			}
			writes = nil
			for range 1 + r.IntN(4) {
				k := key(r.IntN(nkeys))
				switch op := r.IntN(10); {
				case op < 4:
					val := fmt.Sprintf("s%d", step)
					tr.Set(k, []byte(val))
					next[string(k)] = val
					writes = append(writes, krange{k, keyAfter(k)})
				case op < 7:
					tr.Clear(k)
					delete(next, string(k))
					writes = append(writes, krange{k, keyAfter(k)})
				case op < 9:
					b, e := randRange()
					tr.ClearRange(kv.KeyRange{Begin: b, End: e})
					for kk := range next {
						if kk >= string(b) && kk < string(e) {
							delete(next, kk)
						}
					}
					if bytes.Compare(b, e) < 0 {
						writes = append(writes, krange{b, e})
					}
				default:
					tr.Add(k, []byte{1})
					cur, ok := next[string(k)]
					if v, ok := applyOp(opAdd, []byte(cur), ok, []byte{1}); ok {
						next[string(k)] = string(v)
					} else {
						delete(next, string(k))
					}
					writes = append(writes, krange{k, keyAfter(k)})
				}
			}
			return nil
		}))
		state = next
		hist = append(hist, modelCommit{v: db.version.Load(), state: next, writes: writes})
		clk.Advance(time.Duration(r.IntN(200)) * time.Microsecond)

		// Sometimes a new transaction takes a read version, with some
		// buffered writes of its own.
		if r.IntN(3) == 0 {
			tx := newTxT(t, db)
			_, err := tx.GetReadVersion().Get()
			require.NoError(t, err)
			if r.IntN(2) == 0 {
				for range r.IntN(4) {
					k := key(r.IntN(nkeys))
					switch r.IntN(4) {
					case 0:
						tx.Set(k, []byte("own"))
					case 1:
						tx.Clear(k)
					case 2:
						b, e := randRange()
						tx.ClearRange(kv.KeyRange{Begin: b, End: e})
					default:
						tx.Add(k, []byte{2})
					}
				}
			}
			pool = append(pool, tx)
		}

		// Probe the transactions still allowed to read.
		pool = probe(t, db, pool, r, randRange, hist, step%50 == 0)
	}
	probe(t, db, nil, r, randRange, hist, true)
}

// probe checks range reads and conflict checks of the transactions of pool
// that may still read, and returns them; check also checks the indexes.
// It holds db.mu shared meanwhile, as a read does.
func probe(t *testing.T, db *DB, pool []*transaction, r *rand.Rand, randRange func() ([]byte, []byte),
	hist []modelCommit, check bool) []*transaction {
	db.mu.RLock()
	defer db.mu.RUnlock() // also when a check fails: the test's cleanup closes db
	kept := pool[:0]
	for _, tx := range pool {
		if db.tooOldLocked(tx.rv, tx.grvTime, db.clock.Now()) {
			continue
		}
		kept = append(kept, tx)
		for range 3 {
			b, e := randRange()
			limit := 0
			if r.IntN(2) == 0 {
				limit = 1 + r.IntN(5)
			}
			reverse := r.IntN(2) == 0
			checkPaths(t, tx, b, e, limit, reverse, hist)
			checkConflicts(t, db, b, e, tx.rv, hist)
		}
	}
	if check {
		checkIndexes(t, db.st)
	}
	return kept
}

func checkPaths(t *testing.T, tx *transaction, b, e []byte, limit int, reverse bool, hist []modelCommit) {
	st := tx.db.st
	defer defaultPath(st)
	tx.mu.Lock()
	defer tx.mu.Unlock()
	var want []string
	for i, p := range scanPaths {
		p.set(st)
		out, err := tx.mergeLocked(b, e, limit, reverse, tx.rv)
		if err != nil {
			t.Fatal(err)
		}
		got := pairs(out)
		if i == 0 {
			want = got
			continue
		}
		if !slices.Equal(want, got) {
			t.Fatalf("path %s: [%q, %q) limit %d reverse %v at %d: %q, the full scan %q", p.name, b, e, limit, reverse, tx.rv, got, want)
		}
	}
	if tx.writes.len() > 0 || len(tx.clearsLocked()) > 0 {
		return
	}
	// The model: the state committed last at or before rv.
	i := sort.Search(len(hist), func(i int) bool { return hist[i].v > tx.rv }) - 1
	var ks []string
	for k := range hist[i].state {
		if k >= string(b) && k < string(e) {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	if reverse {
		sort.Sort(sort.Reverse(sort.StringSlice(ks)))
	}
	if limit > 0 && len(ks) > limit {
		ks = ks[:limit]
	}
	var model []string
	for _, k := range ks {
		model = append(model, k+"="+hist[i].state[k])
	}
	if !slices.Equal(model, want) {
		t.Fatalf("[%q, %q) limit %d reverse %v at %d: %q, the model %q", b, e, limit, reverse, tx.rv, want, model)
	}
}

// checkConflicts checks the conflict check of [b, e) at rv on every path
// against the full scan and against the model: whether a commit after rv
// wrote a range overlapping it. The caller holds db.mu shared.
func checkConflicts(t *testing.T, db *DB, b, e []byte, rv int64, hist []modelCommit) {
	st := db.st
	defer defaultPath(st)
	if bytes.Compare(b, e) >= 0 {
		return
	}
	want := st.writtenAfterScan(b, e, rv)
	for _, p := range scanPaths {
		p.set(st)
		if got := st.writtenAfter(b, e, rv); got != want {
			t.Fatalf("path %s: [%q, %q) at %d: written after: %v, the full scan %v", p.name, b, e, rv, got, want)
		}
	}
	model := false
	for _, c := range hist {
		if c.v <= rv {
			continue
		}
		for _, w := range c.writes {
			if bytes.Compare(w.b, e) < 0 && bytes.Compare(b, w.e) < 0 {
				model = true
			}
		}
	}
	if got := db.res.conflicts(b, e, rv) || want; got != model {
		t.Fatalf("[%q, %q) at %d: conflict %v, the model %v", b, e, rv, got, model)
	}
	// A point range takes writtenAfter's lookup.
	pe := keyAfter(b)
	if st.writtenAfterScan(b, pe, rv) != st.writtenAfter(b, pe, rv) {
		t.Fatalf("point %q at %d: written after differs from the scan", b, rv)
	}
}

// checkIndexes checks that liveTree holds exactly the chains of tree whose
// newest version is a value and dead exactly the others, and dead's order,
// heap order and subtree maxima. The caller holds db.mu.
func checkIndexes(t *testing.T, s *store) {
	t.Helper()
	live := 0
	s.all().Scan(func(k string, c *chain) bool {
		lc, ok := s.liveTree.Get(k)
		_, isLive := c.newest()
		require.Equal(t, isLive, ok, "key %q in the live index iff its newest version is a value", k)
		require.Equal(t, !isLive, c.d.indexed(), "key %q in the dead index iff its newest version is a tombstone", k)
		if ok {
			require.Same(t, c, lc)
			live++
		}
		return true
	})
	require.Equal(t, live, s.liveTree.Len())
	_, maxC, _ := s.liveTree.Max()
	require.Same(t, maxC, s.liveMax, "liveMax is liveTree's last chain")
	require.Equal(t, int64(live), s.live)
	s.dead.flush()
	n, _ := checkTreap(t, s.dead.root, nil, nil)
	require.Equal(t, len(s.keys)-live, n)
	require.Equal(t, len(s.keys)-live, s.dead.n)
}

// checkTreap checks the subtree at n (keys within (lo, hi), nil unbounded)
// and returns its size and the largest wv in it, which n's bound must
// cover.
func checkTreap(t *testing.T, n *chain, lo, hi []byte) (int, int64) {
	if n == nil {
		return 0, 0
	}
	require.True(t, n.d.in)
	require.False(t, n.dead(), "a removed chain is still indexed")
	require.True(t, lo == nil || bytes.Compare(lo, n.key) < 0, "key order")
	require.True(t, hi == nil || bytes.Compare(n.key, hi) < 0, "key order")
	for _, ch := range []*chain{n.d.l, n.d.r} {
		if ch != nil {
			require.LessOrEqual(t, ch.d.prio, n.d.prio, "heap order")
		}
	}
	nl, ml := checkTreap(t, n.d.l, lo, n.key)
	nr, mr := checkTreap(t, n.d.r, n.key, hi)
	m := max(n.wv, ml, mr)
	require.GreaterOrEqual(t, n.d.max, m, "the bound of %q covers its subtree", n.key)
	return 1 + nl + nr, m
}

// TestDeadIndex checks the dead index against a map: inserts, removals,
// raised versions, and the queries at random versions.
func TestDeadIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var x deadIndex
	model := map[string]*chain{}
	v := int64(0)
	for step := range 20_000 {
		k := fmt.Appendf(nil, "k%03d", r.IntN(500))
		c := model[string(k)]
		switch op := r.IntN(10); {
		case op < 5 && c == nil:
			v++
			c = &chain{key: k, wv: v, vers: []mvccVersion{{v: v}}}
			x.insert(c)
			model[string(k)] = c
		case op < 5:
			v++
			c.wv = v
			x.raised(c)
		case c != nil:
			x.remove(c)
			require.False(t, c.d.indexed())
			delete(model, string(k))
		}
		if step%500 == 0 {
			x.flush()
			n, _ := checkTreap(t, x.root, nil, nil)
			require.Equal(t, len(model), n)
		}
		rv := v - int64(r.IntN(200))
		b := fmt.Appendf(nil, "k%03d", r.IntN(500))
		e := fmt.Appendf(nil, "k%03d", r.IntN(500))
		var first, last *chain
		any := false
		for _, m := range model {
			if m.wv <= rv {
				continue
			}
			if bytes.Compare(m.key, b) >= 0 && (first == nil || bytes.Compare(m.key, first.key) < 0) {
				first = m
			}
			if bytes.Compare(m.key, b) < 0 && (last == nil || bytes.Compare(m.key, last.key) > 0) {
				last = m
			}
			any = any || bytes.Compare(m.key, b) >= 0 && bytes.Compare(m.key, e) < 0
		}
		require.Same(t, first, x.first(b, false, rv))
		require.Same(t, last, x.last(b, false, rv))
		require.Equal(t, any, x.anyAfter(b, e, rv))
		if c := model[string(b)]; c != nil && c.wv > rv {
			require.Same(t, c, x.last(b, true, rv))
			require.NotSame(t, c, x.first(b, true, rv))
		}
	}
}
