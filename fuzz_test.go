package fdbqueue_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// FuzzSubspaceUnpack checks that Subspace.Unpack never panics, fails only
// with ErrKeyOutsideSubspace (exactly for keys without the prefix) or
// ErrMalformedKey, and that what it accepts packs back to the same key,
// with the tuple layer's documented exceptions (see tuple.FuzzUnpack): a
// deprecated true (0x25) packs as 0x27, and a tuple holding an incomplete
// versionstamp is refused by Pack.
func FuzzSubspaceUnpack(f *testing.F) {
	for _, c := range []struct{ prefix, key string }{
		{"\x02app\x00", "\x02app\x00\x15\x01"},
		{"\x02app\x00", "\x02app\x00\x15\x01\x01ab\x00"},
		{"\x02app\x00", "\x02ap"},
		{"\x02app\x00", "\x02app\x00\xff"},
		{"\x02app\x00", "\x02app\x00\x25"},
		{"\x02app\x00", "\x02app\x00\x33\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x00\x01"},
		{"", "\x01\x00\xff\x00"},
		{"", ""},
		{"q", "q\x05\x05\x00\x00"},
		{"q", "q\x1d\x09\x01\x00\x00\x00\x00\x00\x00\x00\x00"},
	} {
		f.Add([]byte(c.prefix), []byte(c.key))
	}
	f.Fuzz(func(t *testing.T, prefix, key []byte) {
		s := fdbqueue.SubspaceFromBytes(prefix)
		orig := bytes.Clone(key)
		tp, err := s.Unpack(key)
		require.Equal(t, orig, key, "Unpack modified its input")
		require.Equal(t, bytes.HasPrefix(key, prefix), s.Contains(key))
		if !bytes.HasPrefix(key, prefix) {
			require.ErrorIs(t, err, fdbqueue.ErrKeyOutsideSubspace)
			return
		}
		if err != nil {
			require.ErrorIs(t, err, fdbqueue.ErrMalformedKey)
			require.ErrorIs(t, err, tuple.ErrMalformed, "the tuple error is wrapped")
			return
		}
		repacked, err := s.Pack(tp)
		if err != nil {
			require.ErrorIs(t, err, tuple.ErrVersionstamp, "only an incomplete versionstamp may fail to re-pack")
			return
		}
		require.Len(t, repacked, len(key))
		for i := range key {
			if key[i] != repacked[i] {
				require.True(t, key[i] == 0x25 && repacked[i] == 0x27, "byte %d: key %x re-packs as %x", i, key, repacked)
			}
		}
	})
}

// fuzzOurs marks the values the fuzz targets enqueue; the nonce, fresh per
// process, keeps the fuzzer from forging them as foreign values.
var fuzzOurs = func() []byte {
	b := []byte("fdbqueue-fuzz:")
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return append(b, nonce[:]...)
}()

// oursValue is value i: a padding whose shape the fuzzer picks, then the
// marker and i. Shapes cover the whole accepted range: no padding, short
// and limit-sized paddings of 0x00 (which the tuple encoding escapes into
// two bytes), of 0xff and of binary bytes; a limit-sized value's stored form
// is exactly FoundationDB's value limit (or one byte under it, when the
// tuple encoding's escapes do not let it land on the limit).
func oursValue(enc fdbqueue.ValueEncoding, shape byte, i int) []byte {
	tail := binary.BigEndian.AppendUint32(bytes.Clone(fuzzOurs), uint32(i))
	fill := queuetest.Fills[int(shape)%len(queuetest.Fills)]
	var pad []byte
	switch (shape / 4) % 3 {
	case 0: // just the marker
	case 1:
		pad = queuetest.MakeValue(fill, int(shape)%37)
	case 2:
		pad = fitPad(enc, fill, tail)
	}
	return append(pad, tail...)
}

// fitPad returns the longest padding of fill that, followed by tail, is
// stored within kv.MaxValueSize under enc. The tuple encoding stores a
// byte string as 0x01, the bytes with each 0x00 as 0x00 0xff, and 0x00.
func fitPad(enc fdbqueue.ValueEncoding, fill queuetest.Fill, tail []byte) []byte {
	cost := func(b byte) int {
		if enc == fdbqueue.TupleValues && b == 0 {
			return 2
		}
		return 1
	}
	room := kv.MaxValueSize
	if enc == fdbqueue.TupleValues {
		room -= 2
	}
	for _, b := range tail {
		room -= cost(b)
	}
	var pad []byte
	for i := 0; ; i++ {
		b := fill.Byte(i)
		if room < cost(b) {
			return pad
		}
		room -= cost(b)
		pad = append(pad, b)
	}
}

// isOurs returns the number in one of our values.
func isOurs(v []byte) (int, bool) {
	n := len(fuzzOurs) + 4
	if len(v) < n || !bytes.HasPrefix(v[len(v)-n:], fuzzOurs) {
		return 0, false
	}
	return int(binary.BigEndian.Uint32(v[len(v)-4:])), true
}

// TestFuzzValuesAtTheLimit checks the fuzzers' value shapes: limit-sized
// shapes are stored at the value limit, within the tuple escapes' one byte.
func TestFuzzValuesAtTheLimit(t *testing.T) {
	for _, enc := range []fdbqueue.ValueEncoding{fdbqueue.RawValues, fdbqueue.TupleValues} {
		for shape := byte(8); shape < 12; shape++ {
			v := oursValue(enc, shape, 0x00ff00)
			n := queuetest.StoredSize(enc, v)
			require.LessOrEqual(t, n, kv.MaxValueSize, "encoding %d shape %d", enc, shape)
			require.GreaterOrEqual(t, n, kv.MaxValueSize-1, "encoding %d shape %d: a limit-sized value", enc, shape)
			i, ok := isOurs(v)
			require.True(t, ok)
			require.Equal(t, 0x00ff00, i)
		}
	}
}

// writeForeign writes the fuzzer's raw pairs under prefix: foreign is a
// sequence of records [flags][key length][key][value length][value];
// flags bit 0 puts the key in the meta area (prefix + 0xff) instead.
func writeForeign(t *testing.T, db kv.Database, prefix, foreign []byte) {
	t.Helper()
	next := func(n int) ([]byte, bool) {
		if len(foreign) < n {
			return nil, false
		}
		b := foreign[:n]
		foreign = foreign[n:]
		return b, true
	}
	err := db.Transact(context.Background(), func(tr kv.Transaction) error {
		for len(foreign) >= 2 {
			hdr, _ := next(2)
			k, ok := next(int(hdr[1]))
			if !ok {
				break
			}
			key := bytes.Clone(prefix)
			if hdr[0]&1 == 1 {
				key = append(key, 0xff)
			}
			key = append(key, k...)
			var v []byte
			if l, ok := next(1); ok {
				v, _ = next(int(l[0]))
			}
			tr.Set(key, v)
		}
		return nil
	})
	require.NoError(t, err)
}

// layerError fails t unless err is nil or one of the layers' typed errors.
func layerError(t *testing.T, op string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, want := range []error{fdbqueue.ErrEmpty, fdbqueue.ErrForeignKey, fdbqueue.ErrCodec, fdbqueue.ErrBatchTooLarge, fdbqueue.ErrConfigMismatch} {
		if errors.Is(err, want) {
			return
		}
	}
	t.Fatalf("%s: untyped or unexpected error: %v", op, err)
}

// account checks that each of our n values came out at most once and, if
// not, is still stored: nothing ours was lost or duplicated.
func account(t *testing.T, n int, returned map[int]int, stored [][]byte) {
	t.Helper()
	left := map[int]int{}
	for _, v := range stored {
		if i, ok := isOurs(v); ok {
			left[i]++
		}
	}
	for i := range n {
		require.Equal(t, 1, returned[i]+left[i], "item %d: returned %d times, stored %d times", i, returned[i], left[i])
	}
}

func storedValues(t *testing.T, db kv.Database, sub fdbqueue.Subspace, enc fdbqueue.ValueEncoding) [][]byte {
	t.Helper()
	kvs := subspacePairs(t, db, sub)
	var out [][]byte
	for _, p := range kvs {
		v := p.Value
		if enc == fdbqueue.TupleValues {
			tp, err := tuple.Unpack(v)
			if err != nil || len(tp) != 1 {
				continue
			}
			b, ok := tp[0].([]byte)
			if !ok {
				continue
			}
			v = b
		}
		out = append(out, v)
	}
	return out
}

// fuzzFlags picks a queue's options from the fuzzer's flags.
func fuzzFlags(flags byte, forQueue bool) (fdbqueue.ValueEncoding, []fdbqueue.Option) {
	enc := fdbqueue.RawValues
	if flags&1 == 1 {
		enc = fdbqueue.TupleValues
	}
	opts := []fdbqueue.Option{fdbqueue.WithValueEncoding(enc)}
	if flags&2 == 2 {
		opts = append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Second}))
	}
	if forQueue && flags&4 == 4 {
		opts = append(opts, fdbqueue.WithVersionstampOrder())
	}
	return enc, opts
}

// batchMax is a batch operation's max: small, or far beyond what one
// budget holds (the operation must then take what fits).
func batchMax(b byte) int {
	if b%4 == 3 {
		return 10_000
	}
	return 1 + int(b)%5
}

var fuzzCorpus = []struct {
	foreign []byte
	ops     []byte
	flags   byte
}{
	{nil, []byte{0, 0, 1, 2, 1, 3}, 0},
	{[]byte("\x00\x02\x15\x01\x01x"), []byte{0, 1, 1, 0, 2, 4}, 0},      // (1,) in the items range
	{[]byte("\x00\x03\x15\x07\x02\x02hi"), []byte{0, 0, 2, 1, 1, 5}, 1}, // (7, "...") with a non-tuple value
	{[]byte("\x01\x03\x02j\x00\x00"), []byte{0, 1, 0, 1}, 0},            // junk in the journal's area
	{[]byte("\x01\x04\x02s\x00\x00\x01\x00"), []byte{0, 1, 0, 1, 1}, 2}, // junk in the staging area
	{[]byte("\x00\x01\xff\x00\x00\x01\x00\x00"), []byte{0, 6, 1, 2}, 4},
	{[]byte("\x00\x02\x27\x00\x01z"), []byte{0, 0, 0, 2, 2, 1}, 3},
	// Limit-sized values (Queue: 63 zeros, 70 0xff, 77 binary; 76 a batch
	// of 12 around the budget, 23 a DequeueBatch of 10,000), raw, tuple,
	// staged, tuple in versionstamp order.
	{nil, []byte{63, 70, 77, 1, 23, 63, 1, 76, 23, 23, 23}, 0},
	{nil, []byte{63, 70, 77, 1, 23, 63, 1, 76, 23, 23, 23}, 1},
	{nil, []byte{63, 70, 77, 1, 23, 63, 1, 76, 23, 23, 23}, 2},
	{nil, []byte{63, 70, 77, 1, 23, 63, 1, 76, 23, 23, 23}, 5},
	// PriorityQueue: 72 zeros, 80 0xff, 88 binary, limit-sized; 27 a
	// PopMinBatch of 10,000.
	{nil, []byte{72, 80, 88, 1, 72, 2, 80, 88, 27, 72, 80, 88, 27}, 0},
	{nil, []byte{72, 80, 88, 1, 72, 2, 80, 88, 27, 72, 80, 88, 27}, 1},
	{nil, []byte{72, 80, 88, 1, 72, 2, 80, 88, 27, 72, 80, 88, 27}, 2},
}

// FuzzQueueForeignKeys runs a sequence of Queue operations over a subspace
// pre-seeded with arbitrary keys and values (in the items' range and in
// the meta area). Every operation must succeed or fail with a typed error,
// nothing may panic, and each item the operations enqueued must come out
// exactly once or still be stored.
func FuzzQueueForeignKeys(f *testing.F) {
	for _, c := range fuzzCorpus {
		f.Add(c.foreign, c.ops, c.flags)
	}
	f.Fuzz(func(t *testing.T, foreign, ops []byte, flags byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		ctx := context.Background()
		db := memdb.New()
		defer db.Close()
		sub := fdbqueue.SubspaceFromBytes([]byte("fz"))
		enc, opts := fuzzFlags(flags, true)
		q, err := fdbqueue.NewQueue(sub, opts...)
		require.NoError(t, err)
		writeForeign(t, db, sub.Bytes(), foreign)

		n := 0
		returned := map[int]int{}
		got := func(vs ...[]byte) {
			for _, v := range vs {
				if i, ok := isOurs(v); ok {
					returned[i]++
				}
			}
		}
		for i, op := range ops {
			name := fmt.Sprintf("op %d (%d)", i, op%7)
			switch op % 7 {
			case 0:
				err := q.Enqueue(ctx, db, oursValue(enc, op/7, n))
				layerError(t, name, err)
				if err == nil {
					n++
				}
			case 1:
				v, err := q.Dequeue(ctx, db)
				layerError(t, name, err)
				got(v)
			case 2:
				vs, err := q.DequeueBatch(ctx, db, batchMax(op/7))
				layerError(t, name, err)
				got(vs...)
			case 3:
				_, err := q.Peek(ctx, db)
				layerError(t, name, err)
			case 4:
				_, err := q.Len(ctx, db)
				layerError(t, name, err)
			case 5:
				_, err := q.Empty(ctx, db)
				layerError(t, name, err)
			case 6:
				// Up to 12 values: with limit-sized ones, batches around
				// the default budget (1 MB), accepted or ErrBatchTooLarge.
				vs := make([][]byte, 2+int(op/7)%11)
				for j := range vs {
					vs[j] = oursValue(enc, op/7+byte(j), n+j)
				}
				err := q.EnqueueBatch(ctx, db, vs)
				layerError(t, name, err)
				if err == nil {
					n += len(vs)
				}
			}
		}
		account(t, n, returned, storedValues(t, db, sub, enc))
	})
}

// FuzzPriorityQueueForeignKeys is FuzzQueueForeignKeys for a PriorityQueue.
func FuzzPriorityQueueForeignKeys(f *testing.F) {
	for _, c := range fuzzCorpus {
		f.Add(c.foreign, c.ops, c.flags)
	}
	f.Fuzz(func(t *testing.T, foreign, ops []byte, flags byte) {
		if len(ops) > 64 {
			ops = ops[:64]
		}
		ctx := context.Background()
		db := memdb.New()
		defer db.Close()
		sub := fdbqueue.SubspaceFromBytes([]byte("fz"))
		enc, opts := fuzzFlags(flags, false)
		pq, err := fdbqueue.NewPriorityQueue(sub, opts...)
		require.NoError(t, err)
		writeForeign(t, db, sub.Bytes(), foreign)

		n := 0
		returned := map[int]int{}
		got := func(its ...fdbqueue.Item) {
			for _, it := range its {
				if i, ok := isOurs(it.Value); ok {
					returned[i]++
				}
			}
		}
		for i, op := range ops {
			name := fmt.Sprintf("op %d (%d)", i, op%8)
			switch op % 8 {
			case 0:
				err := pq.Push(ctx, db, oursValue(enc, op/8, n), int64(op/8)-16)
				layerError(t, name, err)
				if err == nil {
					n++
				}
			case 1:
				it, err := pq.PopMin(ctx, db)
				layerError(t, name, err)
				got(it)
			case 2:
				it, err := pq.PopMax(ctx, db)
				layerError(t, name, err)
				got(it)
			case 3:
				its, err := pq.PopMinBatch(ctx, db, batchMax(op/8))
				layerError(t, name, err)
				got(its...)
			case 4:
				its, err := pq.PopMaxBatch(ctx, db, batchMax(op/8))
				layerError(t, name, err)
				got(its...)
			case 5:
				_, err := pq.PeekMin(ctx, db)
				layerError(t, name, err)
				_, err = pq.PeekMax(ctx, db)
				layerError(t, name, err)
			case 6:
				_, err := pq.Len(ctx, db)
				layerError(t, name, err)
			case 7:
				p := int64(-1) << 63
				if op&0x80 != 0 {
					p = 1<<63 - 1
				}
				err := pq.Push(ctx, db, oursValue(enc, op/8+8, n), p)
				layerError(t, name, err)
				if err == nil {
					n++
				}
			}
		}
		account(t, n, returned, storedValues(t, db, sub, enc))
	})
}
