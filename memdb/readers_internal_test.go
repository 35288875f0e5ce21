package memdb

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"

	"github.com/stretchr/testify/require"
)

// TestReadersOldest: the registry answers the oldest registered read
// version, counts transactions sharing one, drops those out of the window
// and ignores their later unregistration.
func TestReadersOldest(t *testing.T) {
	var r readers
	var latest atomic.Int64
	reg := func(v int64) int64 {
		latest.Store(v)
		return r.register(&latest)
	}
	require.Equal(t, int64(50), r.oldest(0, 50), "none registered: the latest")
	reg(10)
	reg(10)
	reg(20)
	reg(30)
	require.Equal(t, 4, r.len())
	require.Equal(t, int64(10), r.oldest(0, 40))
	r.unregister(10)
	require.Equal(t, int64(10), r.oldest(0, 40), "one of the two at 10 remains")
	r.unregister(20)
	r.unregister(10)
	require.Equal(t, int64(30), r.oldest(0, 40))
	require.Equal(t, int64(25), r.oldest(0, 25), "never after the latest")
	require.Equal(t, int64(40), r.oldest(35, 40), "30 is out of the window")
	require.Equal(t, 0, r.len())
	r.unregister(30) // dropped already: ignored
	require.Equal(t, 0, r.len())

	// Many registrations released out of order: the front compacts.
	for v := int64(100); v < 1100; v++ {
		reg(v)
	}
	for v := int64(1099); v >= 100; v -= 2 {
		r.unregister(v)
	}
	require.Equal(t, 500, r.len())
	for v := int64(100); v < 1100; v += 2 {
		require.Equal(t, v, r.oldest(0, 2000))
		r.unregister(v)
	}
	require.Equal(t, 0, r.len())
	require.Equal(t, int64(2000), r.oldest(0, 2000))
	require.LessOrEqual(t, len(r.rvs), 1)
}

// TestReadersUnregisterOldest: a commit drops its read version and gets
// the new oldest in one call, with oldest's window rule.
func TestReadersUnregisterOldest(t *testing.T) {
	var r readers
	var latest atomic.Int64
	latest.Store(10)
	r.register(&latest)
	r.register(&latest)
	latest.Store(20)
	r.register(&latest)
	require.Equal(t, int64(10), r.unregisterOldest(10, 0, 30), "one of the two at 10 remains")
	require.Equal(t, int64(20), r.unregisterOldest(10, 0, 30))
	require.Equal(t, int64(30), r.unregisterOldest(20, 0, 30), "none left: the latest")
	require.Equal(t, 0, r.len())
	r.register(&latest)
	require.Equal(t, int64(30), r.unregisterOldest(99, 25, 30), "an unknown version is ignored; 20 is out of the window")
	require.Equal(t, 0, r.len())
}

// TestCommitDropsItsReadVersion: a transaction that commits no longer
// holds the horizon back at its own commit (its read version is
// unregistered inside the commit step, before the horizon is computed),
// and a Reset after the commit does not unregister it a second time (which
// would release another transaction's registration of the same version).
func TestCommitDropsItsReadVersion(t *testing.T) {
	for _, slow := range []bool{false, true} {
		t.Run(fmt.Sprintf("slow=%v", slow), func(t *testing.T) {
			var opts []Option
			if slow {
				// A fault model makes every commit take send's path,
				// which unregisters after the commit step.
				opts = append(opts, WithFaults(Faults{ExtraLatency: time.Nanosecond, ExtraLatencyProb: 1}))
			}
			db := New(opts...)
			defer db.Close()
			ctx := context.Background()
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				tr.Set([]byte("k"), []byte("v0"))
				return nil
			}))
			other, err := db.newTransaction(ctx)
			require.NoError(t, err)
			_, err = other.GetReadVersion().Get() // same version as tx's
			require.NoError(t, err)

			tx, err := db.newTransaction(ctx)
			require.NoError(t, err)
			_, err = tx.Get([]byte("k")).Get()
			require.NoError(t, err)
			rv := tx.rv
			require.Equal(t, other.rv, rv)
			tx.Set([]byte("k"), []byte("v1"))
			require.NoError(t, tx.Commit())
			require.False(t, tx.rvReg)
			require.Equal(t, 1, db.readers.len(), "other's registration remains")
			tx.Reset()
			require.Equal(t, 1, db.readers.len(), "Reset after the commit unregisters nothing")
			other.Reset()
			require.Equal(t, 0, db.readers.len())

			// Alone, a transaction's commit advances the horizon to its
			// own commit version (on send's path, the horizon stays at
			// its read version until the next commit).
			if slow {
				return
			}
			tx2, err := db.newTransaction(ctx)
			require.NoError(t, err)
			_, err = tx2.Get([]byte("k")).Get()
			require.NoError(t, err)
			tx2.Set([]byte("k"), []byte("v2"))
			require.NoError(t, tx2.Commit())
			v, err := tx2.GetCommittedVersion()
			require.NoError(t, err)
			require.Equal(t, v, db.Stats().OldestVersion)
		})
	}
}

// TestReadersMatchAModel registers and unregisters read versions in
// random orders (in order, out of order, shared versions, repeats of
// dropped ones, enough to compact) and checks the registry against a
// plain count per version.
func TestReadersMatchAModel(t *testing.T) {
	var r readers
	var latest atomic.Int64
	model := map[int64]int{}
	var held []int64
	seed := uint64(1)
	maxHead, compacted := 0, false
	rnd := func(n int) int {
		seed = seed*6364136223846793005 + 1442695040888963407
		return int(seed>>33) % n
	}
	for step := range 20000 {
		switch op := rnd(10); {
		case op < 4 || (step/2500)%2 == 0 && op < 7: // phases of growth
			if rnd(3) > 0 {
				latest.Add(1)
			}
			v := r.register(&latest)
			model[v]++
			held = append(held, v)
		case len(held) > 0:
			i := 0 // mostly the oldest, as in order
			if op >= 8 {
				i = rnd(len(held))
			}
			v := held[i]
			held = append(held[:i], held[i+1:]...)
			r.unregister(v)
			if model[v]--; model[v] == 0 {
				delete(model, v)
			}
			if op == 9 {
				r.unregister(v) // not held: ignored unless another holds v
				if model[v] > 0 {
					model[v]--
					for j, h := range held {
						if h == v {
							held = append(held[:j], held[j+1:]...)
							break
						}
					}
					if model[v] == 0 {
						delete(model, v)
					}
				}
			}
		}
		n, oldest := 0, latest.Load()
		for v, c := range model {
			n += c
			oldest = min(oldest, v)
		}
		compacted = compacted || (r.head == 0 && len(r.rvs) > 0 && maxHead >= 64)
		maxHead = max(maxHead, r.head)
		require.Equal(t, n, r.len(), "step %d", step)
		require.Equal(t, oldest, r.oldest(0, latest.Load()), "step %d", step)
	}
	require.True(t, compacted, "the registry compacted with versions still registered")
}
