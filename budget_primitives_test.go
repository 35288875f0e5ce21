package fdbqueue_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// TestBudgetPrimitivesMatchFDBCount checks each cost the batch budget adds
// up (budget.go) against the size fdbDB counts for the one call it prices,
// as FoundationDB's Transaction::getSize counts it
// (fdbclient/NativeAPI.actor.cpp; see fdbDB): a Set, a Clear, a ClearRange,
// a read conflict key, a versionstamped key's Set and a take's read
// conflict range cost exactly what they count; a value written in chunks
// (setChunked: each chunk after the first at the key and a packed index)
// costs at most ChunkedSetCost. The budgets' totals are sums of these, so
// one that counts a byte short lets a batch exceed its budget, and the
// tests of whole batches, whose counts are upper bounds with some
// thousands of bytes of slack, would not see it.
func TestBudgetPrimitivesMatchFDBCount(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	n := 0
	size := func(fn func(tr kv.Transaction)) int {
		t.Helper()
		db := newFDBDB(raw)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { fn(tr); return nil }))
		st := db.st.snapshot()
		require.Equal(t, 1, st.commits)
		return st.maxSize
	}
	for _, l := range []int{1, 17, 300} {
		n++
		key := append([]byte(fmt.Sprintf("prim%d-", n)), bytes.Repeat([]byte{'k'}, l)...)
		k := len(key)
		t.Run(fmt.Sprintf("key %d bytes", k), func(t *testing.T) {
			val := []byte("value")
			require.Equal(t, fdbqueue.SetCost(k, len(val)), size(func(tr kv.Transaction) { tr.Set(key, val) }), "Set")
			require.Equal(t, fdbqueue.ClearCost(k), size(func(tr kv.Transaction) { tr.Clear(key) }), "Clear")
			r := kv.KeyRange{Begin: key, End: append(bytes.Clone(key), 0xff)}
			require.Equal(t, fdbqueue.ClearRangeCost(r), size(func(tr kv.Transaction) { tr.ClearRange(r) }), "ClearRange")
			require.Equal(t, fdbqueue.ConflictKeyCost(k), size(func(tr kv.Transaction) {
				require.NoError(t, tr.AddReadConflictKey(key))
			}), "AddReadConflictKey")

			// A versionstamped key: the key, ten bytes for the stamp and
			// the stamp's 4-byte offset.
			vk := binary.LittleEndian.AppendUint32(append(bytes.Clone(key), make([]byte, 10)...), uint32(k))
			require.Equal(t, fdbqueue.VstampSetCost(len(vk), len(val)), size(func(tr kv.Transaction) {
				tr.SetVersionstampedKey(vk, val)
			}), "SetVersionstampedKey")

			// A take's read conflict, up to and including the last key taken.
			items := kv.KeyRange{Begin: append(bytes.Clone(key), 0x00), End: append(bytes.Clone(key), 0xff)}
			last := append(bytes.Clone(key), 0x01, 0x02)
			require.Equal(t, fdbqueue.HeadConflictCost(items, last, false), size(func(tr kv.Transaction) {
				require.NoError(t, tr.AddReadConflictRange(kv.KeyRange{Begin: items.Begin, End: append(bytes.Clone(last), 0x00)}))
			}), "a take's read conflict")
			require.Equal(t, fdbqueue.HeadConflictCost(items, last, true), size(func(tr kv.Transaction) {
				require.NoError(t, tr.AddReadConflictRange(kv.KeyRange{Begin: last, End: items.End}))
			}), "a reverse take's read conflict")

			for _, vn := range []int{0, 10, kv.MaxValueSize, kv.MaxValueSize + 1, 2 * kv.MaxValueSize, 3*kv.MaxValueSize + 7} {
				v := bytes.Repeat([]byte{0xab}, vn)
				got := size(func(tr kv.Transaction) { fdbqueue.SetChunked(tr, key, v) })
				require.LessOrEqual(t, got, fdbqueue.ChunkedSetCost(k, vn), "setChunked of %d bytes", vn)
			}
		})
	}
}
