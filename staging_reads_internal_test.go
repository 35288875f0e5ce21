package fdbqueue

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestHeldRangeIteratorAfterGetSlice: a held read looked at whole
// (GetSlice) and then streamed (Iterator) streams every pair of the
// cached result, the first included.
func TestHeldRangeIteratorAfterGetSlice(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	r := kv.KeyRange{Begin: []byte("k"), End: []byte("l")}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range 3 {
			tr.Set([]byte(fmt.Sprintf("k%d", i)), []byte{byte(i)})
		}
		return nil
	}))
	require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		var reads stepReads
		h := reads.hold(tr.GetRange(r, kv.RangeOptions{}))
		all, err := h.GetSlice()
		require.NoError(t, err)
		require.Len(t, all, 3)
		got, complete, err := readUpTo(h, 10, 1_000)
		require.NoError(t, err)
		require.True(t, complete)
		require.Equal(t, all, got, "the cached pairs, from the first")
		return reads.wait()
	}))
}
