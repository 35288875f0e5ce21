package fdbqueue

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Values written with setChunked next to each other come back whole from
// one range read over all of them, and one by one with getChunked; each
// chunk fits the value limit.
func TestChunkedValuesRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	sizes := []int{0, 1, kv.MaxValueSize - 1, kv.MaxValueSize, kv.MaxValueSize + 1, 2*kv.MaxValueSize + 7}
	var keys [][]byte
	var vals [][]byte
	for i, n := range sizes {
		k, err := tuple.Tuple{"v", int64(i)}.Pack()
		require.NoError(t, err)
		v := bytes.Repeat([]byte{byte(i), 0x00, 0xff}, n/3+1)[:n]
		keys, vals = append(keys, k), append(vals, v)
	}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range keys {
			setChunked(tr, keys[i], vals[i])
		}
		return nil
	}))
	all, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		r, _ := tuple.Tuple{"v"}.Pack()
		return tr.GetRange(kv.KeyRange{Begin: r[:len(r)-1], End: append(bytes.Clone(r[:len(r)-1]), 0xff)}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	for _, p := range all {
		require.LessOrEqual(t, len(p.Value), kv.MaxValueSize)
	}
	joined := joinChunks(all)
	require.Len(t, joined, len(keys))
	for i := range keys {
		require.Equal(t, keys[i], joined[i].Key)
		require.Equal(t, vals[i], joined[i].Value, "size %d", sizes[i])
		got, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) { return getChunked(tr, keys[i]).Get() })
		require.NoError(t, err)
		require.Equal(t, vals[i], got)
	}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { clearChunked(tr, keys[5]); return nil }))
	got, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) { return getChunked(tr, keys[5]).Get() })
	require.NoError(t, err)
	require.Nil(t, got, "clearChunked removes every chunk")
}

// A staged result round-trips with a limit-sized value and a limit-sized
// key, and a part of one (a read cut short) does not decode.
func TestResultEncoding(t *testing.T) {
	d := time.UnixMicro(1_700_000_000_123_456)
	key := bytes.Repeat([]byte{0}, kv.MaxKeySize)
	stored := bytes.Repeat([]byte{0xff}, kv.MaxValueSize)
	v := encodeResult(d, key, stored)
	require.Equal(t, 1+8+2+len(key)+3+len(stored), len(v), "no escaping: tag, deadline and two lengths only")
	gd, gk, gs, err := decodeResult(v)
	require.NoError(t, err)
	require.True(t, d.Equal(gd))
	require.Equal(t, key, gk)
	require.Equal(t, stored, gs)
	_, _, _, err = decodeResult(v[:kv.MaxValueSize])
	require.Error(t, err, "the first chunk alone is not a result")
	_, _, _, err = decodeResult(append(bytes.Clone(v), 0))
	require.Error(t, err)

	// A result of the earlier layout still decodes.
	old, err := tuple.Tuple{d.UnixMicro(), []byte("k"), []byte{0, 1}}.Pack()
	require.NoError(t, err)
	_, gk, gs, err = decodeResult(old)
	require.NoError(t, err)
	require.Equal(t, []byte("k"), gk)
	require.Equal(t, []byte{0, 1}, gs)
}

// A pop's journal record is the value and 9 bytes; records of the earlier
// layout still replay.
func TestPopRecordEncoding(t *testing.T) {
	stored := make([]byte, kv.MaxValueSize)
	rec := encodePopRecord(-5, stored)
	require.Len(t, rec, kv.MaxValueSize+9)
	p, s, err := decodePopRecord(rec)
	require.NoError(t, err)
	require.Equal(t, int64(-5), p)
	require.Equal(t, stored, s)
	old, err := tuple.Tuple{int64(7), []byte{0}}.Pack()
	require.NoError(t, err)
	p, s, err = decodePopRecord(old)
	require.NoError(t, err)
	require.Equal(t, int64(7), p)
	require.Equal(t, []byte{0}, s)
}

// FuzzDecodeResult: no input makes decodeResult panic.
func FuzzDecodeResult(f *testing.F) {
	f.Add(encodeResult(time.Unix(1, 0), []byte("k"), []byte("v")))
	f.Add([]byte{resultTag})
	f.Add([]byte{resultTag, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, v []byte) {
		_, _, _, _ = decodeResult(v)
		_, _, _ = decodePopRecord(v)
	})
}

// Recover pages through the results recoverBatch keys at a time: a result
// in two chunks that straddles a page's end is left to the next page
// (which starts at its first chunk), not decoded in part and skipped.
func TestRecoverResultAcrossPageEnd(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	sub, err := NewSubspace(tuple.Tuple{"recover-chunks"})
	require.NoError(t, err)
	q, err := NewQueue(sub, WithStaging(StagingConfig{Serving: ServeInBatches}))
	require.NoError(t, err)
	const n = recoverBatch + 44
	big := recoverBatch - 1 // its first chunk is the page's last key
	past := time.Now().Add(-time.Hour)
	want := map[string][]byte{}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range n {
			rid := make([]byte, 20)
			rid[0], rid[1] = byte(i>>8), byte(i)
			item, err := sub.Pack(tuple.Tuple{int64(i + 1), rid})
			require.NoError(t, err)
			v := []byte{byte(i)}
			if i == big {
				v = bytes.Repeat([]byte{0}, kv.MaxValueSize)
			}
			want[string(item)] = v
			setChunked(tr, q.stage.resKey(rid), encodeResult(past, item, v))
		}
		return nil
	}))
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, n, st.ReturnedItems, "every expired result, the one across the page end included")
	got, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(q.items, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, got, n)
	for _, p := range got {
		require.Equal(t, want[string(p.Key)], p.Value)
	}
}
