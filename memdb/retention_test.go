package memdb

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"weak"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A value read from a transaction (by Get, or as a range read's row: a
// dequeued item) is the caller's own memory: keeping it keeps neither the
// transaction nor the range result reachable, so an application that keeps
// many small values does not keep their transactions (their writes and
// buffers) alive. The official binding copies values into Go memory too.
func TestReadValuesKeepNoTransactionReachable(t *testing.T) {
	db := New()
	defer db.Close()
	ctx := context.Background()
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range 4 {
			tr.Set(fmt.Appendf(nil, "q/%d", i), []byte("a small value"))
		}
		return nil
	}))
	var kept [][]byte
	var txs []weak.Pointer[transaction]
	for i := range 8 {
		tr, err := db.newTransaction(ctx)
		require.NoError(t, err)
		txs = append(txs, weak.Make(tr))
		if i%2 == 0 {
			v, err := tr.Get([]byte("q/0")).Get()
			require.NoError(t, err)
			kept = append(kept, v)
		} else {
			kvs, err := tr.GetRange(kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}, kv.RangeOptions{Limit: 1}).GetSlice()
			require.NoError(t, err)
			require.Len(t, kvs, 1)
			kept = append(kept, kvs[0].Value, kvs[0].Key)
		}
		tr.Set([]byte("other"), []byte("x"))
		require.NoError(t, tr.Commit())
	}
	runtime.GC()
	runtime.GC()
	for i, w := range txs {
		require.Nil(t, w.Value(), "transaction %d is still reachable through a value it read", i)
	}
	for _, v := range kept {
		require.NotEmpty(t, v)
	}
	runtime.KeepAlive(kept)
}

// A value the store keeps keeps no transaction reachable either: an atomic
// operation on a missing key stores its operand, which an inline entry
// holds in its own memory, and the entry may share the allocation of the
// transaction's first range result (opRoom), which refers to the
// transaction. The commit stores a copy.
func TestStoredOperandKeepsNoTransactionReachable(t *testing.T) {
	db := New()
	defer db.Close()
	ctx := context.Background()
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set([]byte("q/0"), []byte("a small value"))
		return nil
	}))
	var txs []weak.Pointer[transaction]
	for i := range 8 {
		tr, err := db.newTransaction(ctx)
		require.NoError(t, err)
		txs = append(txs, weak.Make(tr))
		_, err = tr.GetRange(kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}, kv.RangeOptions{Limit: 1}).GetSlice()
		require.NoError(t, err)
		tr.Add(fmt.Appendf(nil, "c/%d", i), []byte{1, 0, 0, 0, 0, 0, 0, 0}) // a missing key
		tr.Add([]byte("c/all"), []byte{1, 0, 0, 0, 0, 0, 0, 0})             // missing, then present
		require.NoError(t, tr.Commit())
	}
	runtime.GC()
	runtime.GC()
	for i, w := range txs {
		require.Nil(t, w.Value(), "transaction %d is still reachable through a value the store keeps", i)
	}
	require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		v, err := tr.Get([]byte("c/all")).Get()
		require.Equal(t, []byte{8, 0, 0, 0, 0, 0, 0, 0}, v)
		for i := range 8 {
			v, err := tr.Get(fmt.Appendf(nil, "c/%d", i)).Get()
			require.NoError(t, err)
			require.Equal(t, []byte{1, 0, 0, 0, 0, 0, 0, 0}, v)
		}
		return err
	}))
}
