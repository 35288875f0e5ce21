package memdb_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

// A range result holds its first row and its bounds inline: each belongs
// to one result and one consumer only, and two iterators of one result
// are independent.
func TestRangeResultsDoNotShareInlineParts(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	mustSet(t, db, "b", "2")
	tr := newTx(t, db)
	r := kv.KeyRange{Begin: []byte("a"), End: []byte("z")}
	first, err := tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	second, err := tr.GetRange(r, kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
	require.NoError(t, err)
	first[0].Value[0] = 'x'
	require.Equal(t, "b", string(second[0].Key))
	require.Equal(t, "2", string(second[0].Value), "results share no memory")

	res := tr.GetRange(r, kv.RangeOptions{})
	it1, it2 := res.Iterator(), res.Iterator()
	require.True(t, it1.Next())
	require.True(t, it2.Next())
	require.True(t, it2.Next())
	require.Equal(t, "a", string(it1.KeyValue().Key), "a second iterator does not move the first")
	require.Equal(t, "b", string(it2.KeyValue().Key))
}

// After Next returns false, KeyValue still returns the last pair, also
// when the iterator had to fetch an empty batch to find the end.
func TestIteratorKeyValueAfterEnd(t *testing.T) {
	db, _ := newDB(t)
	for i := range 16 { // exactly the iterator mode's first batch
		mustSet(t, db, fmt.Sprintf("k%02d", i), "v")
	}
	tr := newTx(t, db)
	it := tr.GetRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}, kv.RangeOptions{}).Iterator()
	require.Equal(t, kv.KeyValue{}, it.KeyValue(), "no pair before the first Next")
	n := 0
	for it.Next() {
		n++
	}
	require.NoError(t, it.Err())
	require.Equal(t, 16, n)
	require.Equal(t, "k15", string(it.KeyValue().Key))
}

// AddReadConflictKey builds [key, key+\x00) itself: a key at \xff makes
// the range reach past the user key space, an error that FDB's client
// defers to the next read and Commit (as for AddReadConflictRange).
func TestAddReadConflictKeyOutsideLegalRange(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	require.NoError(t, tr.AddReadConflictKey([]byte{0xff}))
	_, err := tr.Get([]byte("a")).Get()
	require.ErrorIs(t, err, kv.ErrKeyOutsideLegalRange)
	require.ErrorIs(t, tr.Commit(), kv.ErrKeyOutsideLegalRange)
}

// Read conflict keys of every size, up to the key size limit, conflict
// with a write of that key (the arena and its spill blocks, or a heap
// copy past them).
func TestAddReadConflictKeySizes(t *testing.T) {
	for _, n := range []int{1, 40, 47, 48, 63, 64, 200, 1023, 10_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db, _ := newDB(t)
			keys := [][]byte{bytes.Repeat([]byte{0x00}, n), bytes.Repeat([]byte{0xfe}, n)}
			tr := newTx(t, db)
			_, err := tr.Get([]byte("start")).Get() // a read version
			require.NoError(t, err)
			for _, k := range keys {
				require.NoError(t, tr.AddReadConflictKey(k))
			}
			tr.Set([]byte("out"), []byte("x"))
			mustSet(t, db, string(keys[1]), "changed")
			require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
		})
	}
}

// An atomic operation whose key and operand sit inside its entry: the
// result is exact at the counter's limits (all-0xff operands wrap).
func TestAtomicInlineEntryWraps(t *testing.T) {
	db, _ := newDB(t)
	ff := bytes.Repeat([]byte{0xff}, 8)
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Add([]byte("n"), ff)
		return nil
	}))
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Add([]byte("n"), le64(1))
		return nil
	}))
	require.Equal(t, le64(0), get(t, newTx(t, db), "n"))
}

// A range result copies its first rows' bytes into its own inline room
// while they fit, and further rows apart: at every size around the room's
// end, each row is the caller's alone (changing or appending to one
// changes no other row, and no later read).
func TestRangeRowsInlineRoom(t *testing.T) {
	for _, n := range []int{0, 1, 100, 147, 148, 149, 150, 151, 200, 100_000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db, _ := newDB(t)
			big := bytes.Repeat([]byte{0xff}, n)
			mustSet(t, db, "a", string(big))
			mustSet(t, db, "b", "")
			mustSet(t, db, "c", "\x00\x00")
			r := kv.KeyRange{Begin: []byte("a"), End: []byte("z")}
			for _, opts := range []kv.RangeOptions{{}, {Limit: 1}, {Reverse: true}, {Mode: kv.StreamingModeWantAll}} {
				tr := newTx(t, db)
				kvs, err := tr.GetRange(r, opts).GetSlice()
				require.NoError(t, err)
				if opts.Limit == 0 {
					require.Len(t, kvs, 3)
				}
				for i := range kvs {
					kvs[i].Key = append(kvs[i].Key, 'X')
					for j := range kvs[i].Value {
						kvs[i].Value[j] = 'x'
					}
				}
				again, err := tr.GetRange(r, opts).GetSlice()
				require.NoError(t, err)
				require.Len(t, again, len(kvs))
				want := map[string]string{"a": string(big), "b": "", "c": "\x00\x00"}
				for _, p := range again {
					require.Equal(t, want[string(p.Key)], string(p.Value), "key %q", p.Key)
				}
				for _, p := range kvs {
					require.Equal(t, byte('X'), p.Key[len(p.Key)-1])
					require.Equal(t, len(want[string(p.Key[:len(p.Key)-1])]), len(p.Value))
				}
			}
		})
	}
}

// A value read with Get is the caller's alone: modifying or appending to it
// changes nothing the transaction holds, and the read conflict keys that
// the transaction's arena takes afterwards do not overwrite it.
func TestGetValueIsTheCallers(t *testing.T) {
	for _, n := range []int{0, 1, 20, 47, 48, 49, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			db, _ := newDB(t)
			val := bytes.Repeat([]byte{0xff}, n)
			mustSet(t, db, "k", string(val))
			tr := newTx(t, db)
			v1, err := tr.Snapshot().Get([]byte("k")).Get()
			require.NoError(t, err)
			require.NotNil(t, v1, "an empty value is not a missing key")
			v2 := get(t, tr, "k") // adds a conflict key through the arena
			require.NoError(t, tr.AddReadConflictKey(bytes.Repeat([]byte{0x01}, 40)))
			require.Equal(t, val, v1)
			require.Equal(t, val, v2)
			if n > 0 {
				v1[0] = 0
				require.Equal(t, byte(0xff), v2[0], "two reads share no memory")
			}
			_ = append(v1, 0x00, 0x00) // its capacity ends with it
			_ = append(v2, 0x00, 0x00)
			require.Equal(t, val, v2)
			require.Equal(t, val, get(t, tr, "k"))
			tr.Set([]byte("out"), []byte("x"))
			mustSet(t, db, string(bytes.Repeat([]byte{0x01}, 40)), "changed")
			require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the conflict key after the value is intact")
		})
	}
}

// A limit-1 range read with nothing of the transaction's own in range (a
// queue's head or tail read) allocates its result (which holds its bounds
// and rows) and the row's bytes: two allocations. The row's bytes are apart
// from the result so that keeping a value keeps neither the result nor its
// transaction reachable.
func TestSmallRangeReadAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	db, _ := newDB(t)
	for i := range 10 {
		mustSet(t, db, fmt.Sprintf("q/%04d", i), "a small work item, 32 bytes long")
	}
	tr := newTx(t, db)
	_ = get(t, tr, "q/0000") // the read version
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	for _, reverse := range []bool{false, true} {
		allocs := testing.AllocsPerRun(100, func() {
			kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1, Reverse: reverse}).GetSlice()
			if err != nil || len(kvs) != 1 {
				t.Fatal(kvs, err)
			}
		})
		require.Equal(t, 2.0, allocs, "reverse=%v", reverse)
	}
}

// A limited range read's conflict range ends at its last key (\x00 after
// it forwards), kept apart from the row handed out: changing the row's
// key changes nothing. Keys short and long enough to leave the result's
// inline room.
func TestLimitedReadConflictKeyIsItsOwn(t *testing.T) {
	for _, n := range []int{1, 60, 73, 74, 75, 140, 300} {
		for _, reverse := range []bool{false, true} {
			t.Run(fmt.Sprint(n, reverse), func(t *testing.T) {
				db, _ := newDB(t)
				lo, hi := "k"+string(bytes.Repeat([]byte{'a'}, n-1)), "k"+string(bytes.Repeat([]byte{'b'}, n-1))
				mustSet(t, db, lo, "1")
				mustSet(t, db, hi, "2")
				r := kv.KeyRange{Begin: []byte("k"), End: []byte("l")}
				read, beyond := lo, hi // what the read returns, and the key past it
				if reverse {
					read, beyond = hi, lo
				}
				for _, write := range []string{read, beyond} {
					tr := newTx(t, db)
					kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: 1, Reverse: reverse}).GetSlice()
					require.NoError(t, err)
					require.Equal(t, read, string(kvs[0].Key))
					for i := range kvs[0].Key {
						kvs[0].Key[i] = 0xfe
					}
					tr.Set([]byte("out"), []byte("x"))
					mustSet(t, db, write, "changed")
					if write == read {
						require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
					} else {
						require.NoError(t, tr.Commit(), "a key past the last one read does not conflict")
					}
				}
			})
		}
	}
}

// A queue's operation reads an end, then adds to a counter: the atomic
// entry takes the room that the attempt's first range result brought, so
// the transaction allocates itself, the result and the row's bytes, and
// nothing for the add. A second atomic operation, and one after a retry,
// get their own entries; the counters come out exact.
func TestRangeResultRoomTakesTheAtomicEntry(t *testing.T) {
	db, r := tenItems(t)
	if !raceEnabled {
		one, depth := le64(1), []byte("c/depth")
		allocs := testing.AllocsPerRun(100, func() {
			tr := readTail(t, db, r)
			tr.Add(depth, one)
		})
		require.Equal(t, 3.0, allocs)
	}
	tr := newTx(t, db)
	for range 2 {
		_, err := tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
		require.NoError(t, err)
		tr.Add([]byte("c/a"), le64(1))
		tr.Add([]byte("c/b"), le64(2))
		tr.Add([]byte("c/a"), le64(4))
		mustSet(t, db, "q/0000", "changed") // the read conflicts
		require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
		require.NoError(t, tr.OnError(kv.ErrNotCommitted))
	}
	_, err := tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err)
	tr.Add([]byte("c/a"), le64(1))
	tr.Add([]byte("c/b"), le64(2))
	require.NoError(t, tr.Commit())
	require.Equal(t, le64(1), get(t, newTx(t, db), "c/a"))
	require.Equal(t, le64(2), get(t, newTx(t, db), "c/b"))
}
