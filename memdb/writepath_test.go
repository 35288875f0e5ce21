package memdb_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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
	db, r := tenItems(t)
	item, slot, depth := []byte("q/0010"), []byte("z/journal/slot"), []byte("c/depth")
	value, record, one := []byte("a small work item, 32 bytes long"), []byte("a journal record"), le64(1)
	allocs := testing.AllocsPerRun(100, func() {
		tr := readTail(t, db, r)
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

// A queue's dequeue reads its head, clears it, records its journal slot
// and adds to a counter: the Clear's entry shares the key of the chain
// the read found, so it allocates nothing for the key. The transaction
// allocates itself, the range result and its row's bytes, the journal's
// entry and its bytes.
func TestDequeueShapedWritesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	db, r := tenItems(t)
	slot, depth := []byte("z/journal/slot"), []byte("c/depth")
	record, minusOne := []byte("a journal record"), le64(-1)
	allocs := testing.AllocsPerRun(100, func() {
		tr, err := db.CreateTransaction(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
		if err != nil || len(kvs) != 1 {
			t.Fatal(kvs, err)
		}
		tr.Clear(kvs[0].Key)
		tr.Set(slot, record)
		tr.Add(depth, minusOne)
	})
	require.Equal(t, 5.0, allocs)
}

// A Clear of the key the transaction last read, whatever wrote the key
// (a Set or a versionstamped key, stored with key+\x00 in their memory;
// an atomic operation on a missing key, stored as a copy without it):
// the transaction no longer sees the key, a reader of it conflicts, the
// commit clears it and nothing else, and the key can be set again. Also
// when the key's chain was collected between the read and the commit.
func TestClearOfReadKey(t *testing.T) {
	writers := map[string]func(kv.Transaction) []byte{
		"set": func(tr kv.Transaction) []byte {
			tr.Set([]byte("k/1"), []byte("v"))
			return []byte("k/1")
		},
		"set-empty": func(tr kv.Transaction) []byte {
			tr.Set([]byte("k/1"), nil)
			return []byte("k/1")
		},
		"add": func(tr kv.Transaction) []byte {
			tr.Add([]byte("k/1"), le64(3))
			return []byte("k/1")
		},
		"versionstamped": func(tr kv.Transaction) []byte {
			tr.SetVersionstampedKey(vsKey("k/1", ""), []byte("v"))
			return nil
		},
	}
	for name, write := range writers {
		for _, read := range []string{"get", "range", "reverse"} {
			t.Run(name+"/"+read, func(t *testing.T) {
				db, _ := newDB(t)
				mustSet(t, db, "k/0", "before")
				mustSet(t, db, "k/2", "after")
				require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
					write(tr)
					return nil
				}))
				kvs, err := newTx(t, db).GetRange(rng("k/1", "k/2"), kv.RangeOptions{}).GetSlice()
				require.NoError(t, err)
				require.Len(t, kvs, 1)
				key := kvs[0].Key

				tr := newTx(t, db)
				switch read {
				case "get":
					_, err = tr.Get(key).Get()
				case "range", "reverse":
					_, err = tr.GetRange(rng("k/1", "k/2"), kv.RangeOptions{Limit: 1, Reverse: read == "reverse"}).GetSlice()
				}
				require.NoError(t, err)
				reader := newTx(t, db)
				_, err = reader.Get(key).Get()
				require.NoError(t, err)

				tr.Clear(key)
				got, err := tr.Get(key).Get()
				require.NoError(t, err)
				require.Nil(t, got)
				rows, err := tr.GetRange(rng("k/", "k0"), kv.RangeOptions{}).GetSlice()
				require.NoError(t, err)
				require.Equal(t, []string{"k/0", "k/2"}, keys(rows))
				require.NoError(t, tr.Commit())

				reader.Set([]byte("zz"), []byte("x"))
				require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "the Clear is a write of the key")
				rows, err = newTx(t, db).GetRange(rng("k/", "k0"), kv.RangeOptions{}).GetSlice()
				require.NoError(t, err)
				require.Equal(t, []string{"k/0", "k/2"}, keys(rows))

				mustSet(t, db, string(key), "again")
				v, ok := mustGet(t, db, string(key))
				require.True(t, ok)
				require.Equal(t, "again", v)
			})
		}
	}
	t.Run("collected", func(t *testing.T) {
		// As TestWriteAfterReadOfCollectedKey, with a Clear.
		db, clk, _ := tombstoneAboutToGo(t)

		tr := newTx(t, db)
		require.Nil(t, get(t, tr, "k"))
		reader := newTx(t, db)
		require.Nil(t, get(t, reader, "k"))
		clk.Advance(600 * time.Millisecond)
		mustSet(t, db, "other", "y") // collects k's chain

		tr.Clear([]byte("k"))
		require.NoError(t, tr.Commit())
		reader.Set([]byte("zz"), []byte("x"))
		require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "a Clear of a key that is not stored is a write of it")
		_, ok := mustGet(t, db, "k")
		require.False(t, ok)
	})
}

// A transaction that reads one key and writes one, committed, allocates
// the transaction, the value read and the written entry's bytes: Commit
// allocates nothing (its request, and its copy of the write map, stay on
// its stack). The benchmark's floor is this transaction.
func TestReadWriteCommitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	db := memdb.New() // the real clock, as the benchmark's: old versions go
	defer db.Close()
	mustSet(t, db, "k", "v")
	ctx := context.Background() // a context that can end costs its AfterFunc
	key, value := []byte("k"), []byte("value")
	allocs := testing.AllocsPerRun(100, func() {
		if err := db.Transact(ctx, func(tr kv.Transaction) error {
			if _, err := tr.Get(key).Get(); err != nil {
				return err
			}
			tr.Set(key, value)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
	require.Equal(t, 3.0, allocs)
}
