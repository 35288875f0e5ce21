package memdb_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

func TestInvalidWritesPutTheTransactionInAnErrorState(t *testing.T) {
	big := func(n int) []byte { return bytes.Repeat([]byte("k"), n) }
	for _, c := range []struct {
		name  string
		write func(kv.Transaction)
		want  error
	}{
		{"key too large", func(tr kv.Transaction) { tr.Set(big(kv.MaxKeySize+1), nil) }, kv.ErrKeyTooLarge},
		{"value too large", func(tr kv.Transaction) { tr.Set([]byte("k"), big(kv.MaxValueSize+1)) }, kv.ErrValueTooLarge},
		{"atomic param too large", func(tr kv.Transaction) { tr.Add([]byte("k"), big(kv.MaxValueSize+1)) }, kv.ErrValueTooLarge},
		{"system key", func(tr kv.Transaction) { tr.Set([]byte("\xff/x"), nil) }, kv.ErrKeyOutsideLegalRange},
		{"system clear", func(tr kv.Transaction) { tr.Clear([]byte("\xff")) }, kv.ErrKeyOutsideLegalRange},
		{"system range", func(tr kv.Transaction) { tr.ClearRange(rng("a", "\xff\xff")) }, kv.ErrKeyOutsideLegalRange},
		{"inverted range", func(tr kv.Transaction) { tr.ClearRange(rng("b", "a")) }, kv.ErrInvertedRange},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t)
			tr := newTx(t, db)
			tr.Set([]byte("good"), []byte("v"))
			c.write(tr) // no error here, as in FDB
			_, err := tr.Get([]byte("good")).Get()
			require.ErrorIs(t, err, c.want, "the next read reports the invalid write")
			require.ErrorIs(t, tr.Commit(), c.want, "and so does Commit")
			require.False(t, kv.IsRetryable(c.want))
			_, ok := mustGet(t, db, "good")
			require.False(t, ok, "nothing of the transaction is applied")
		})
	}
}

func TestAcceptsLimitSizedKeysAndValues(t *testing.T) {
	db, _ := newDB(t)
	k := bytes.Repeat([]byte("k"), kv.MaxKeySize)
	v := bytes.Repeat([]byte("v"), kv.MaxValueSize)
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Set(k, v)
		tr.ClearRange(kv.KeyRange{Begin: []byte("a"), End: []byte("\xff")}) // the whole user space is legal
		tr.Set(k, v)
		return nil
	}))
	got, ok := mustGet(t, db, string(k))
	require.True(t, ok)
	require.Len(t, got, kv.MaxValueSize)
	// No key is longer than the limit, so reading one finds nothing.
	tr := newTx(t, db)
	require.Nil(t, get(t, tr, string(bytes.Repeat([]byte("k"), kv.MaxKeySize+1))))
}

func TestTransactionTooLarge(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	v := bytes.Repeat([]byte("v"), kv.MaxValueSize)
	for i := range kv.MaxTransactionSize/kv.MaxValueSize + 1 {
		tr.Set([]byte{byte(i >> 8), byte(i)}, v)
	}
	size, err := tr.GetApproximateSize().Get()
	require.NoError(t, err)
	require.Greater(t, size, int64(kv.MaxTransactionSize))
	require.ErrorIs(t, tr.Commit(), kv.ErrTransactionTooLarge)
	require.Equal(t, int64(0), db.Stats().Keys)
}

func TestRangeErrors(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	mustSet(t, db, "a", "1")
	mustSet(t, db, "b", "2")
	kvs, err := tr.GetRange(rng("b", "a"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err, "as FDB, an inverted range read returns nothing rather than inverted_range")
	require.Empty(t, kvs)
	it := tr.GetRange(rng("b", "a"), kv.RangeOptions{Reverse: true}).Iterator()
	require.False(t, it.Next())
	require.NoError(t, it.Err())
	_, err = tr.GetRange(rng("a", "\xff\x00"), kv.RangeOptions{}).GetSlice()
	require.ErrorIs(t, err, kv.ErrKeyOutsideLegalRange)
	_, err = tr.Get([]byte("\xff")).Get()
	require.ErrorIs(t, err, kv.ErrKeyOutsideLegalRange)
	require.ErrorIs(t, tr.AddReadConflictRange(rng("b", "a")), kv.ErrInvertedRange)
	require.ErrorIs(t, tr.AddWriteConflictRange(rng("b", "a")), kv.ErrInvertedRange)
	kvs, err = tr.GetRange(rng("a", "a"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err, "an empty range is fine")
	require.Empty(t, kvs)
}

// TestTransactionAtTheSizeLimitCommits: the size limit is inclusive. FDB
// fails a commit with transaction_too_large only when the size of its
// request exceeds the limit (commitMutations: transactionSize >
// trState->options.sizeLimit, fdbclient/NativeAPI.actor.cpp). A Set of a
// k-byte key and a v-byte value puts a mutation of sizeof(MutationRef) +
// k + v bytes and a write conflict range [key, key+\x00) of
// sizeof(KeyRangeRef) + 2k + 1 bytes in the request (size.go); the keys
// here are apart, so their conflict ranges do not merge.
func TestTransactionAtTheSizeLimitCommits(t *testing.T) {
	const (
		mutationRef = 56 // sizeof(MutationRef), FDB 7.3, 64-bit
		keyRangeRef = 32 // sizeof(KeyRangeRef)
		n, k        = 100, 4
		perSet      = mutationRef + k + keyRangeRef + 2*k + 1
		v           = (kv.MaxTransactionSize - n*perSet) / n
	)
	require.Zero(t, (kv.MaxTransactionSize-n*perSet)%n, "n Sets fill the limit exactly")
	for _, over := range []int{0, 1} {
		db, _ := newDB(t)
		tr := newTx(t, db)
		tr.Set([]byte("k000"), make([]byte, v+over)) // one byte over, or none
		for i := 1; i < n; i++ {
			tr.Set(fmt.Appendf(nil, "k%03d", i), make([]byte, v))
		}
		err := tr.Commit()
		if over == 0 {
			require.NoError(t, err, "a commit of exactly %d bytes", kv.MaxTransactionSize)
			require.Equal(t, int64(n), db.Stats().Keys)
		} else {
			require.ErrorIs(t, err, kv.ErrTransactionTooLarge, "a commit of %d bytes", kv.MaxTransactionSize+1)
		}
	}
}
