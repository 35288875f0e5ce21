package memdb

import (
	"context"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
)

// clearMutationsSizeLocked counts the ClearRange mutations FDB's commit
// request holds: one per run of cleared segments of the write map, which a
// key written inside a cleared range ends (writeRangeToNativeTransaction,
// fdbclient/ReadYourWrites.cpp). Each case's want is the sum, over those
// clears [b, e), of sizeof(MutationRef) + |b| + |e|.
func TestClearMutationsSizeSplitsAtWrittenKeys(t *testing.T) {
	const m = mutationRefSize
	r := func(b, e string) kv.KeyRange { return kv.KeyRange{Begin: []byte(b), End: []byte(e)} }
	cases := []struct {
		name string
		ops  func(tx kv.Transaction)
		want int64
	}{
		{"no clear", func(tx kv.Transaction) { tx.Set([]byte("m"), nil) }, 0},
		{"a clear alone", func(tx kv.Transaction) { tx.ClearRange(r("a", "z")) }, m + 2},
		{"a set inside", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "z"))
			tx.Set([]byte("m"), []byte("v"))
		}, 2*m + 2 + 3}, // [a, m) [m\x00, z)
		{"a set at the begin", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "z"))
			tx.Set([]byte("a"), nil)
		}, m + 3}, // [a\x00, z)
		{"a set filling the range", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "a\x00"))
			tx.Set([]byte("a"), nil)
		}, 0},
		{"a set just before the end", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "m\x00"))
			tx.Set([]byte("m"), nil)
		}, m + 2}, // [a, m)
		{"a point clear inside does not split", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "z"))
			tx.Clear([]byte("m"))
		}, m + 2},
		{"an atomic operation inside", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "z"))
			tx.Add([]byte("m"), []byte{1})
		}, 2*m + 2 + 3},
		{"a set before the clear is cleared", func(tx kv.Transaction) {
			tx.Set([]byte("m"), nil)
			tx.ClearRange(r("a", "z"))
		}, m + 2},
		{"two clears, sets inside, between and after", func(tx kv.Transaction) {
			tx.ClearRange(r("a", "c"))
			tx.ClearRange(r("x", "z"))
			for _, k := range []string{"b", "bb", "m", "y", "zz"} {
				tx.Set([]byte(k), nil)
			}
		}, 5*m + (1 + 1) + (2 + 2) + (3 + 1) + (1 + 1) + (2 + 1)}, // [a, b) [b\x00, bb) [bb\x00, c) [x, y) [y\x00, z)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := New()
			defer db.Close()
			tr, err := db.CreateTransaction(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c.ops(tr)
			tx := tr.(*transaction)
			tx.mu.Lock()
			got := tx.clearMutationsSizeLocked()
			tx.mu.Unlock()
			if got != c.want {
				t.Fatalf("size of the clear mutations: %d, want %d", got, c.want)
			}
		})
	}
}

// A point Clear inside a range the transaction cleared adds nothing to the
// commit request: FDB's write map holds no entry for it (WriteMap::clear of
// a range already cleared, fdbclient/WriteMap.cpp).
func TestCommitSizeOfAPointClearInsideAClearedRange(t *testing.T) {
	size := func(ops func(tx kv.Transaction)) int64 {
		t.Helper()
		db := New()
		defer db.Close()
		tr, err := db.CreateTransaction(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ops(tr)
		tx := tr.(*transaction)
		tx.mu.Lock()
		defer tx.mu.Unlock()
		return tx.commitSizeLocked()
	}
	clear := func(tx kv.Transaction) { tx.ClearRange(kv.KeyRange{Begin: []byte("a"), End: []byte("z")}) }
	alone := size(clear)
	inside := size(func(tx kv.Transaction) { clear(tx); tx.Clear([]byte("m")) })
	if inside != alone {
		t.Fatalf("a ClearRange and a point Clear inside it: %d bytes, the ClearRange alone: %d", inside, alone)
	}
	outside := size(func(tx kv.Transaction) { clear(tx); tx.Clear([]byte("zz")) })
	if outside <= alone {
		t.Fatalf("a point Clear outside the range must count: %d bytes, the ClearRange alone: %d", outside, alone)
	}
}
