package memdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// A queue's operation writes an item, its journal slot and a counter: the
// journal's entry brings the room the writes then need, so the counter's
// entry (the room of the attempt's range result) costs no allocation to
// insert. The transaction allocates itself, the range result and its
// row's bytes, the item's bytes, the journal's entry and its bytes.
func TestQueueShapedWritesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	db := memdb.New() // the real clock: a manual one costs an allocation per transaction
	defer db.Close()
	for i := range 10 {
		mustSet(t, db, fmt.Sprintf("q/%04d", i), "a small work item, 32 bytes long")
	}
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	item, slot, depth := []byte("q/0010"), []byte("z/journal/slot"), []byte("c/depth")
	value, record, one := []byte("a small work item, 32 bytes long"), []byte("a journal record"), le64(1)
	allocs := testing.AllocsPerRun(100, func() {
		tr, err := db.CreateTransaction(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
		if err != nil || len(kvs) != 1 {
			t.Fatal(kvs, err)
		}
		tr.Set(item, value)
		tr.Set(slot, record)
		tr.Add(depth, one)
	})
	require.Equal(t, 6.0, allocs)
}

// Whatever the order and mix of Sets, Clears and atomic operations, and
// however many keys (through the inline array, the room an entry brings,
// its growth and the B-tree past smallMax), a transaction reads its own
// writes in order and commits exactly them.
func TestWriteMixesReadAndCommitTheirWrites(t *testing.T) {
	for seed := range uint64(60) {
		r := rand.New(rand.NewPCG(seed, 7))
		db, _ := newDB(t)
		model := map[string][]byte{}
		for i := range 8 {
			k := fmt.Sprintf("k%02d", i)
			v := le64(int64(i))
			mustSet(t, db, k, string(v))
			model[k] = v
		}
		tr := newTx(t, db)
		if r.IntN(2) == 0 {
			_, err := tr.GetRange(rng("k", "l"), kv.RangeOptions{Limit: 1}).GetSlice()
			require.NoError(t, err)
		}
		n := 1 + r.IntN(40)
		for range n {
			k := fmt.Sprintf("k%02d", r.IntN(48))
			switch r.IntN(3) {
			case 0:
				v := fmt.Appendf(nil, "v%d", r.IntN(1000))
				tr.Set([]byte(k), v)
				model[k] = v
			case 1:
				tr.Clear([]byte(k))
				delete(model, k)
			default:
				d := int64(r.IntN(10))
				tr.Add([]byte(k), le64(d))
				cur := model[k]
				sum := make([]byte, 8)
				copy(sum, cur)
				model[k] = le64(int64(leU64(sum)) + d)
			}
		}
		want := make([]string, 0, len(model))
		for k := range model {
			want = append(want, k)
		}
		slices.Sort(want)
		check := func(tr kv.ReadTransaction, what string) {
			kvs, err := tr.GetRange(rng("k", "l"), kv.RangeOptions{}).GetSlice()
			require.NoError(t, err)
			require.Equal(t, want, keys(kvs), "seed %d: %s", seed, what)
			for _, x := range kvs {
				require.Equal(t, model[string(x.Key)], x.Value, "seed %d: %s: %q", seed, what, x.Key)
			}
		}
		check(tr, "own writes")
		require.NoError(t, tr.Commit(), "seed %d", seed)
		check(newTx(t, db), "committed")
	}
}

func leU64(b []byte) uint64 {
	var n uint64
	for i := 7; i >= 0; i-- {
		n = n<<8 | uint64(b[i])
	}
	return n
}
