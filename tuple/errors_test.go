package tuple_test

import (
	"bytes"
	"errors"
	"math/big"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

func TestUnpackRejectsMalformed(t *testing.T) {
	cases := []struct {
		name   string
		hex    string
		offset int
		path   []int
		detail string
	}{
		{"unknown code", "15 01 03", 2, []int{1}, "unknown"},
		{"80-bit versionstamp", "32 00 00 00 00 00 00 00 00 00 00", 0, []int{0}, "unsupported"},
		{"user type", "40", 0, []int{0}, "unknown"},
		{"escape byte as code", "ff", 0, []int{0}, "unknown"},
		{"top-level null then ff", "00 ff", 1, []int{1}, "unknown"},
		{"unterminated bytes", "01 61 62", 0, []int{0}, "terminating"},
		{"bytes ending in escaped zero", "01 61 00 ff", 0, []int{0}, "terminating"},
		{"unterminated string", "02", 0, []int{0}, "terminating"},
		{"unterminated nested", "05 15 01", 0, []int{0}, "nested tuple"},
		{"unterminated nested null", "05 00 ff", 0, []int{0}, "nested tuple"},
		{"error inside nested", "05 15 01 05 16 01", 4, []int{0, 1, 0}, "needs 2 bytes"},
		{"truncated positive int", "16 01", 0, []int{0}, "needs 2 bytes"},
		{"truncated negative int", "0c 00", 0, []int{0}, "needs 8 bytes"},
		{"non-minimal positive", "16 00 01", 0, []int{0}, "minimally"},
		{"non-minimal positive zero", "15 00", 0, []int{0}, "minimally"},
		{"non-minimal negative", "12 ff fe", 0, []int{0}, "minimally"},
		{"negative zero", "13 ff", 0, []int{0}, "minimally"},
		{"non-minimal 8-byte positive", "1c 00 ff ff ff ff ff ff ff", 0, []int{0}, "minimally"},
		{"non-minimal 8-byte negative", "0c ff 00 00 00 00 00 00 00", 0, []int{0}, "minimally"},
		{"big positive that fits 8 bytes", "1d 08 01 00 00 00 00 00 00 00", 0, []int{0}, "fixed-width"},
		{"big negative that fits 8 bytes", "0b f7 fe ff ff ff ff ff ff ff", 0, []int{0}, "fixed-width"},
		{"big positive leading zero", "1d 09 00 01 00 00 00 00 00 00 00", 0, []int{0}, "minimally"},
		{"big negative leading zero", "0b f6 ff fe ff ff ff ff ff ff ff", 0, []int{0}, "minimally"},
		{"big positive zero length", "1d 00", 0, []int{0}, "fixed-width"},
		{"big truncated length", "1d", 0, []int{0}, "length"},
		{"big truncated payload", "1d 09 01", 0, []int{0}, "needs 9 bytes"},
		{"truncated float32", "20 80 00", 0, []int{0}, "float32"},
		{"truncated float64", "21 80", 0, []int{0}, "float64"},
		{"truncated uuid", "30 00", 0, []int{0}, "UUID"},
		{"truncated versionstamp", "14 33 00 00", 1, []int{1}, "versionstamp"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tuple.Unpack(mustHex(t, c.hex))
			require.Error(t, err, "Unpack(%s) = %v", c.hex, got)
			assert.Nil(t, got)
			require.ErrorIs(t, err, tuple.ErrMalformed)
			var te *tuple.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, "unpack", te.Op)
			assert.Equal(t, c.offset, te.Offset, "offset in %v", err)
			assert.Equal(t, c.path, te.Path, "path in %v", err)
			assert.Contains(t, err.Error(), c.detail)
			assert.Contains(t, err.Error(), "malformed")
		})
	}
}

func TestPackRejectsUnsupported(t *testing.T) {
	huge := new(big.Int).Lsh(big.NewInt(1), 255*8) // needs 256 bytes
	cases := []struct {
		name string
		t    tuple.Tuple
		path []int
		typ  string
	}{
		{"struct", tuple.Tuple{struct{}{}}, []int{0}, "struct {}"},
		{"map", tuple.Tuple{int64(1), map[string]int{}}, []int{1}, "map[string]int"},
		{"[]any is not a Tuple", tuple.Tuple{[]any{1}}, []int{0}, "[]interface {}"},
		{"pointer to string", tuple.Tuple{new(string)}, []int{0}, "*string"},
		{"nil *big.Int", tuple.Tuple{(*big.Int)(nil)}, []int{0}, "*big.Int"},
		{"integer over 255 bytes", tuple.Tuple{"a", huge}, []int{1}, "*big.Int"},
		{"negative integer over 255 bytes", tuple.Tuple{new(big.Int).Neg(huge)}, []int{0}, "*big.Int"},
		{"nested", tuple.Tuple{nil, tuple.Tuple{"x", tuple.Tuple{complex(1, 2)}}}, []int{1, 1, 0}, "complex128"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := c.t.Pack()
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			var te *tuple.Error
			require.ErrorAs(t, err, &te)
			assert.Equal(t, "pack", te.Op)
			assert.Equal(t, c.path, te.Path)
			assert.Equal(t, c.typ, te.Type)
			assert.Equal(t, -1, te.Offset)

			dst := []byte("keep")
			out, err := c.t.AppendPack(dst)
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			assert.Equal(t, []byte("keep"), out, "AppendPack must leave dst unchanged on error")

			_, err = c.t.PackWithVersionstamp(nil)
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			_, err = c.t.Range()
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
		})
	}
}

func TestLargestBigIntPacks(t *testing.T) {
	max := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255*8), big.NewInt(1)) // 255 bytes of 0xff
	for _, v := range []*big.Int{max, new(big.Int).Neg(max)} {
		packed := mustPack(t, tuple.Tuple{v})
		require.Len(t, packed, 2+255)
		got, err := tuple.Unpack(packed)
		require.NoError(t, err)
		requireSameTuple(t, tuple.Tuple{v}, got)
	}
}

// nest returns a tuple nested depth levels deep around a single 1.
func nest(depth int) tuple.Tuple {
	t := tuple.Tuple{int64(1)}
	for range depth {
		t = tuple.Tuple{t}
	}
	return t
}

func TestNestingLimit(t *testing.T) {
	ok := nest(tuple.MaxDepth)
	packed := mustPack(t, ok)
	got, err := tuple.Unpack(packed)
	require.NoError(t, err)
	requireSameTuple(t, ok, got)
	assert.Zero(t, tuple.Compare(ok, got))

	_, err = nest(tuple.MaxDepth + 1).Pack()
	require.ErrorIs(t, err, tuple.ErrUnsupportedType)

	deep := append([]byte{0x05}, packed...)
	deep = append(deep, 0x00)
	_, err = tuple.Unpack(deep)
	require.ErrorIs(t, err, tuple.ErrMalformed)
	assert.Contains(t, err.Error(), "MaxDepth")

	// A hostile input of nothing but nested-tuple codes fails cleanly.
	_, err = tuple.Unpack([]byte(strings.Repeat("\x05", 1<<20)))
	require.ErrorIs(t, err, tuple.ErrMalformed)
}

func TestCyclicTupleFailsCleanly(t *testing.T) {
	cyclic := tuple.Tuple{int64(1), nil}
	cyclic[1] = cyclic
	_, err := cyclic.Pack()
	require.ErrorIs(t, err, tuple.ErrUnsupportedType)
	assert.Contains(t, err.Error(), "cyclic")
	// Compare and String terminate too.
	assert.Zero(t, tuple.Compare(cyclic, cyclic))
	assert.Contains(t, cyclic.String(), "...")
}

func TestCompareUnsupportedTypesSortLast(t *testing.T) {
	weird := tuple.Tuple{struct{}{}}
	for _, e := range []any{nil, []byte{0xff}, "z", tuple.Tuple{}, int64(9), float32(1), 1.0, false, true, tuple.UUID{}, tuple.Versionstamp{}} {
		assert.Equal(t, -1, tuple.Compare(tuple.Tuple{e}, weird), "%v vs unsupported", e)
		assert.Equal(t, 1, tuple.Compare(weird, tuple.Tuple{e}), "unsupported vs %v", e)
	}
	assert.Zero(t, tuple.Compare(weird, tuple.Tuple{make(chan int)}))
	assert.Zero(t, tuple.Compare(tuple.Tuple{(*big.Int)(nil)}, weird))
}

func TestErrorMessageIsInformative(t *testing.T) {
	_, err := tuple.Unpack(mustHex(t, "05 16 00 01 00"))
	require.Error(t, err)
	assert.Equal(t, "tuple: unpack element [0 0] (code 0x16) at offset 1: integer is not minimally encoded (leading zero byte): malformed tuple encoding", err.Error())
	assert.True(t, errors.Is(err, tuple.ErrMalformed))
	assert.False(t, errors.Is(err, tuple.ErrUnsupportedType))
}

// TestUnpackRejectsShortBigIntLengths: codes 0x1d and 0x0b carry integers
// wider than 8 bytes; narrower ones have the fixed-width codes 0x0c..0x1c
// (TupleUtil.java, encode(BigInteger): 0x1d/0x0b only when n > Long.BYTES).
// Unpack accepts canonical encodings only, so every length from 0 to 7 is
// rejected, whatever the magnitude bytes.
func TestUnpackRejectsShortBigIntLengths(t *testing.T) {
	for n := range 8 {
		pos := append([]byte{0x1d, byte(n)}, bytes.Repeat([]byte{0x01}, n)...)
		neg := append([]byte{0x0b, ^byte(n)}, bytes.Repeat([]byte{0xfe}, n)...)
		for _, in := range [][]byte{pos, neg} {
			got, err := tuple.Unpack(in)
			require.ErrorIs(t, err, tuple.ErrMalformed, "Unpack(%x) = %v", in, got)
			assert.Contains(t, err.Error(), "fixed-width", "Unpack(%x)", in)
		}
	}
}

// TestErrorMessageFields: Error prints the path, type and offset only when
// they apply, offset 0 included.
func TestErrorMessageFields(t *testing.T) {
	_, err := tuple.Unpack([]byte{0x40})
	require.Error(t, err)
	assert.Equal(t, "tuple: unpack element [0] (code 0x40) at offset 0: unknown or unsupported type code: malformed tuple encoding", err.Error())

	_, err = tuple.Tuple{int64(1), make(chan int)}.Pack()
	require.Error(t, err)
	assert.Equal(t, "tuple: pack element [1] (chan int): element type not supported: unsupported tuple element", err.Error())

	_, err = tuple.Strinc([]byte{0xff})
	require.Error(t, err)
	assert.Equal(t, "tuple: strinc: prefix is empty or made only of 0xff bytes: prefix has no successor", err.Error())
}
