package memdb_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

func TestAtomicOpSemantics(t *testing.T) {
	b := func(x ...byte) []byte { return x }
	for _, c := range []struct {
		name    string
		initial []byte // nil: the key is missing
		op      func(kv.Transaction, []byte, []byte)
		param   []byte
		want    []byte // nil: the key is missing afterwards
	}{
		{"Add missing", nil, kv.Transaction.Add, b(5, 0), b(5, 0)},
		{"Add carry", b(0xff, 0), kv.Transaction.Add, b(1, 0), b(0, 1)},
		{"Add negative", le64(10), kv.Transaction.Add, le64(-3), le64(7)},
		{"Add wraps at width", b(0xff), kv.Transaction.Add, b(1), b(0)},
		{"Add param sets width (truncates)", b(1, 2, 3), kv.Transaction.Add, b(1), b(2)},
		{"Add param sets width (extends)", b(1), kv.Transaction.Add, b(1, 0, 0), b(2, 0, 0)},
		{"Max missing", nil, kv.Transaction.Max, b(3), b(3)},
		{"Max keeps larger", b(9, 0), kv.Transaction.Max, b(3, 0), b(9, 0)},
		{"Max little-endian", b(0xff, 0), kv.Transaction.Max, b(0, 1), b(0, 1)},
		{"Min missing stores param", nil, kv.Transaction.Min, b(3), b(3)},
		{"Min keeps smaller", b(2, 0), kv.Transaction.Min, b(3, 0), b(2, 0)},
		{"Min extends existing", b(2), kv.Transaction.Min, b(3, 1), b(2, 0)},
		{"BitAnd missing stores param", nil, kv.Transaction.BitAnd, b(0x0f), b(0x0f)},
		{"BitAnd", b(0x3c, 0xff), kv.Transaction.BitAnd, b(0x0f, 0xf0), b(0x0c, 0xf0)},
		{"BitAnd shorter existing", b(0xff), kv.Transaction.BitAnd, b(0xff, 0xff), b(0xff, 0)},
		{"BitOr", b(0x30), kv.Transaction.BitOr, b(0x03, 0x01), b(0x33, 0x01)},
		{"BitXor", b(0xff, 0x0f), kv.Transaction.BitXor, b(0x0f, 0x0f), b(0xf0, 0)},
		{"ByteMin", []byte("banana"), kv.Transaction.ByteMin, []byte("apple"), []byte("apple")},
		{"ByteMin missing", nil, kv.Transaction.ByteMin, []byte("z"), []byte("z")},
		{"ByteMax", []byte("banana"), kv.Transaction.ByteMax, []byte("apple"), []byte("banana")},
		{"AppendIfFits", []byte("ab"), kv.Transaction.AppendIfFits, []byte("cd"), []byte("abcd")},
		{"AppendIfFits missing", nil, kv.Transaction.AppendIfFits, []byte("cd"), []byte("cd")},
		{"AppendIfFits too big", bytes.Repeat([]byte("x"), kv.MaxValueSize), kv.Transaction.AppendIfFits, []byte("y"),
			bytes.Repeat([]byte("x"), kv.MaxValueSize)},
		{"CompareAndClear equal", []byte("v"), kv.Transaction.CompareAndClear, []byte("v"), nil},
		{"CompareAndClear different", []byte("v"), kv.Transaction.CompareAndClear, []byte("w"), []byte("v")},
		{"CompareAndClear missing", nil, kv.Transaction.CompareAndClear, []byte(""), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t)
			if c.initial != nil {
				mustSet(t, db, "k", string(c.initial))
			}
			// Through the commit (applied on the stored value) ...
			require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
				c.op(tr, []byte("k"), c.param)
				return nil
			}))
			got, ok := mustGet(t, db, "k")
			require.Equal(t, c.want != nil, ok, "existence after the op")
			if ok {
				require.Equal(t, c.want, []byte(got))
			}
			// ... and through read-your-writes in the same transaction.
			tr := newTx(t, db)
			if c.initial != nil {
				tr.Set([]byte("k2"), c.initial)
			} else {
				tr.Clear([]byte("k2"))
			}
			c.op(tr, []byte("k2"), c.param)
			require.Equal(t, c.want, get(t, tr, "k2"), "read-your-writes must agree with the commit")
		})
	}
}

func TestAtomicOpsCompose(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "n", string(le64(100)))
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Add([]byte("n"), le64(5))
		tr.Max([]byte("n"), le64(50))  // 105 stays
		tr.Add([]byte("n"), le64(-10)) // 95
		tr.Min([]byte("n"), le64(90))  // 90
		return nil
	}))
	v, _ := mustGet(t, db, "n")
	require.Equal(t, uint64(90), binary.LittleEndian.Uint64([]byte(v)))
}

// TestAtomicOpsCoalesceAsFDB: FDB's write map merges an atomic operation
// into the key's previous one when both have the same type
// (WriteMap::coalesceOver, fdbclient/WriteMap.cpp), except
// CompareAndClear, and except, for the types in NON_ASSOCIATIVE_MASK
// (fdbclient/include/fdbclient/CommitTransaction.h: Add, Or, Xor, Max,
// Min), operands of different lengths; the commit request holds what is
// left (writeRangeToNativeTransaction), and its size is what the 10 MB
// limit applies to. 150 operations of one type on one key, with
// 100,000-byte operands, commit when they merge and fail with
// transaction_too_large when they do not. The value is the same either
// way (the merge is associative where FDB applies it), but for
// AppendIfFits, whose merge this test leaves to kvtest.
func TestAtomicOpsCoalesceAsFDB(t *testing.T) {
	type op func(kv.Transaction, []byte, []byte)
	for _, c := range []struct {
		name              string
		op                op
		sameLen, mixedLen bool // whether 150 ops merge, with one operand length and with two
	}{
		{"Add", kv.Transaction.Add, true, false},
		{"BitOr", kv.Transaction.BitOr, true, false},
		{"BitXor", kv.Transaction.BitXor, true, false},
		{"Max", kv.Transaction.Max, true, false},
		{"Min", kv.Transaction.Min, true, false},
		{"BitAnd", kv.Transaction.BitAnd, true, true},
		{"ByteMin", kv.Transaction.ByteMin, true, true},
		{"ByteMax", kv.Transaction.ByteMax, true, true},
		{"CompareAndClear", kv.Transaction.CompareAndClear, false, false},
	} {
		for _, mixed := range []bool{false, true} {
			db, _ := newDB(t)
			tr := newTx(t, db)
			for i := range 150 {
				p := bytes.Repeat([]byte{byte(i)}, kv.MaxValueSize-i%2*btoi(mixed))
				c.op(tr, []byte("k"), p)
			}
			merges := c.sameLen
			if mixed {
				merges = c.mixedLen
			}
			if err := tr.Commit(); merges {
				require.NoError(t, err, "%s: 150 operations of one key (mixed lengths %v) merge into one", c.name, mixed)
			} else {
				require.ErrorIs(t, err, kv.ErrTransactionTooLarge, "%s: 150 operations of one key (mixed lengths %v) are sent one by one", c.name, mixed)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
