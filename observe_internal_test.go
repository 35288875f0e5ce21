package fdbqueue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Within one transaction the tracker counts a key once however often it is
// set or cleared: clearing twice removes one item, setting a key cleared
// in the same transaction puts it back, clearing a key set in it removes
// it.
func TestTrackedTransactionCountsEachKeyOnce(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("trk")))
	require.NoError(t, err)
	k := q.journal.track
	key := func(i int64) []byte { b, _ := q.sub.Pack([]any{i, []byte{1}}); return b }
	run := func(fn func(tr kv.Transaction)) int64 {
		t.Helper()
		tdb := k.observeDB("test", db)
		require.NoError(t, tdb.Transact(ctx, func(tr kv.Transaction) error { fn(tr); return nil }))
		d, err := q.Depth(ctx, db)
		require.NoError(t, err)
		return d
	}
	require.Equal(t, int64(2), run(func(tr kv.Transaction) { tr.Set(key(1), nil); tr.Set(key(2), nil); tr.Set(key(2), nil) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Clear(key(1)); tr.Clear(key(1)) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Clear(key(2)); tr.Set(key(2), []byte("again")) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Set(key(3), nil); tr.Clear(key(3)) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Set([]byte("trk\xff"), nil); tr.Clear([]byte("trj")) }), "outside the items' range")
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: key(2), End: key(3)}) }), "a partial range clear is not the operations'")
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.ClearRange(q.items); tr.Set(key(5), nil) }), "Clear, then one item")
}
