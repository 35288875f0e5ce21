package tuple_test

import (
	"encoding/hex"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// specVector is a tuple in its canonical (Unpack-normalised) form and its
// packing.
type specVector struct {
	name string
	t    tuple.Tuple
	hex  string
}

// specVectors are the vectors of /work/shared/specs/tuple-encoding.md plus
// the boundaries of every type code.
func specVectors(t testing.TB) []specVector {
	uuid := tuple.UUID{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}
	return []specVector{
		// From the specification.
		{"spec bytes", tuple.Tuple{[]byte("foo\x00bar")}, "01 66 6f 6f 00 ff 62 61 72 00"},
		{"spec string", tuple.Tuple{"FÔO\x00bar"}, "02 46 c3 94 4f 00 ff 62 61 72 00"},
		{"spec nested", tuple.Tuple{tuple.Tuple{[]byte("foo\x00bar"), nil, tuple.Tuple{}}}, "05 01 66 6f 6f 00 ff 62 61 72 00 00 ff 05 00 00"},
		{"spec -5551212", tuple.Tuple{int64(-5551212)}, "11 ab 4b 93"},
		{"spec float32 -42", tuple.Tuple{float32(-42)}, "20 3d d7 ff ff"},
		{"spec -1", tuple.Tuple{int64(-1)}, "13 fe"},
		{"spec 0", tuple.Tuple{int64(0)}, "14"},
		{"spec 1", tuple.Tuple{int64(1)}, "15 01"},
		{"spec 255", tuple.Tuple{int64(255)}, "15 ff"},
		{"spec 256", tuple.Tuple{int64(256)}, "16 01 00"},
		{"spec empty", tuple.Tuple{}, ""},
		{"spec true", tuple.Tuple{true}, "27"},
		{"spec false", tuple.Tuple{false}, "26"},
		{"spec null", tuple.Tuple{nil}, "00"},

		// Byte strings and strings.
		{"empty bytes", tuple.Tuple{[]byte{}}, "01 00"},
		{"only zeros", tuple.Tuple{[]byte{0, 0}}, "01 00 ff 00 ff 00"},
		{"0xff bytes", tuple.Tuple{[]byte{0xff, 0x00, 0xff}}, "01 ff 00 ff ff 00"},
		{"empty string", tuple.Tuple{""}, "02 00"},
		{"snowman", tuple.Tuple{"☃"}, "02 e2 98 83 00"},
		{"invalid utf8 kept", tuple.Tuple{"\xff\xfe"}, "02 ff fe 00"},

		// Nested tuples and nulls.
		{"empty nested", tuple.Tuple{tuple.Tuple{}}, "05 00"},
		{"nested null", tuple.Tuple{tuple.Tuple{nil}}, "05 00 ff 00"},
		{"nested nested", tuple.Tuple{tuple.Tuple{tuple.Tuple{nil, int64(1)}}, nil}, "05 05 00 ff 15 01 00 00 00"},
		{"null then nested", tuple.Tuple{nil, tuple.Tuple{nil, nil}}, "00 05 00 ff 00 ff 00"},

		// Integer width boundaries.
		{"-255", tuple.Tuple{int64(-255)}, "13 00"},
		{"-256", tuple.Tuple{int64(-256)}, "12 fe ff"},
		{"65535", tuple.Tuple{int64(65535)}, "16 ff ff"},
		{"65536", tuple.Tuple{int64(65536)}, "17 01 00 00"},
		{"MaxInt32", tuple.Tuple{int64(math.MaxInt32)}, "18 7f ff ff ff"},
		{"MinInt32", tuple.Tuple{int64(math.MinInt32)}, "10 7f ff ff ff"},
		{"MaxInt64", tuple.Tuple{int64(math.MaxInt64)}, "1c 7f ff ff ff ff ff ff ff"},
		{"MinInt64", tuple.Tuple{int64(math.MinInt64)}, "0c 7f ff ff ff ff ff ff ff"},
		{"MinInt64+1", tuple.Tuple{int64(math.MinInt64 + 1)}, "0c 80 00 00 00 00 00 00 00"},
		{"MaxInt64+1", tuple.Tuple{uint64(math.MaxInt64 + 1)}, "1c 80 00 00 00 00 00 00 00"},
		{"MaxUint64", tuple.Tuple{uint64(math.MaxUint64)}, "1c ff ff ff ff ff ff ff ff"},
		{"MinInt64-1", tuple.Tuple{bigFromString(t, "-9223372036854775809")}, "0c 7f ff ff ff ff ff ff fe"},
		{"-MaxUint64", tuple.Tuple{bigFromString(t, "-18446744073709551615")}, "0c 00 00 00 00 00 00 00 00"},
		{"2^64", tuple.Tuple{bigFromString(t, "0x10000000000000000")}, "1d 09 01 00 00 00 00 00 00 00 00"},
		{"-2^64", tuple.Tuple{bigFromString(t, "-0x10000000000000000")}, "0b f6 fe ff ff ff ff ff ff ff ff"},
		{"2^64+1", tuple.Tuple{bigFromString(t, "0x10000000000000001")}, "1d 09 01 00 00 00 00 00 00 00 01"},
		{"-(2^64+1)", tuple.Tuple{bigFromString(t, "-0x10000000000000001")}, "0b f6 fe ff ff ff ff ff ff ff fe"},

		// Floats: signs, zeros, infinities and NaNs.
		{"float32 0", tuple.Tuple{float32(0)}, "20 80 00 00 00"},
		{"float32 -0", tuple.Tuple{float32(math.Copysign(0, -1))}, "20 7f ff ff ff"},
		{"float32 1", tuple.Tuple{float32(1)}, "20 bf 80 00 00"},
		{"float32 +inf", tuple.Tuple{float32(math.Inf(1))}, "20 ff 80 00 00"},
		{"float32 -inf", tuple.Tuple{float32(math.Inf(-1))}, "20 00 7f ff ff"},
		{"float32 NaN", tuple.Tuple{math.Float32frombits(0x7fc00000)}, "20 ff c0 00 00"},
		{"float32 -NaN", tuple.Tuple{math.Float32frombits(0xffc00000)}, "20 00 3f ff ff"},
		{"float64 0", tuple.Tuple{float64(0)}, "21 80 00 00 00 00 00 00 00"},
		{"float64 -0", tuple.Tuple{math.Copysign(0, -1)}, "21 7f ff ff ff ff ff ff ff"},
		{"float64 -42", tuple.Tuple{float64(-42)}, "21 3f ba ff ff ff ff ff ff"},
		{"float64 +inf", tuple.Tuple{math.Inf(1)}, "21 ff f0 00 00 00 00 00 00"},
		{"float64 NaN payload", tuple.Tuple{math.Float64frombits(0x7ff0000000000001)}, "21 ff f0 00 00 00 00 00 01"},

		// UUIDs and versionstamps.
		{"uuid", tuple.Tuple{uuid}, "30 01 23 45 67 89 ab cd ef fe dc ba 98 76 54 32 10"},
		{"versionstamp", tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 2}, UserVersion: 0x0304}}, "33 00 00 00 00 00 00 00 01 00 02 03 04"},

		// A typical queue key.
		{"queue key", tuple.Tuple{"q", int64(1000), []byte{1, 0, 2}}, "02 71 00 16 03 e8 01 01 00 ff 02 00"},
	}
}

func TestSpecVectorsPack(t *testing.T) {
	for _, v := range specVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			got, err := v.t.Pack()
			require.NoError(t, err)
			assert.Equal(t, hex.EncodeToString(mustHex(t, v.hex)), hex.EncodeToString(got), "Pack(%v)", v.t)
		})
	}
}

func TestSpecVectorsUnpack(t *testing.T) {
	for _, v := range specVectors(t) {
		t.Run(v.name, func(t *testing.T) {
			got, err := tuple.Unpack(mustHex(t, v.hex))
			require.NoError(t, err)
			requireSameTuple(t, v.t, got)
		})
	}
}

// TestIntegerTypesPackAlike checks that every Go integer type packs a value
// to the same bytes and unpacks to the normalised type.
func TestIntegerTypesPackAlike(t *testing.T) {
	cases := []struct {
		in   any
		want any
		hex  string
	}{
		{int(-3), int64(-3), "13 fc"},
		{int8(-128), int64(-128), "13 7f"},
		{int16(300), int64(300), "16 01 2c"},
		{int32(-70000), int64(-70000), "11 fe ee 8f"},
		{int64(7), int64(7), "15 07"},
		{uint(7), int64(7), "15 07"},
		{uint8(255), int64(255), "15 ff"},
		{uint16(256), int64(256), "16 01 00"},
		{uint32(math.MaxUint32), int64(math.MaxUint32), "18 ff ff ff ff"},
		{uint64(math.MaxUint64), uint64(math.MaxUint64), "1c ff ff ff ff ff ff ff ff"},
		{uint(0), int64(0), "14"},
		{big.NewInt(-3), int64(-3), "13 fc"},
		{*big.NewInt(513), int64(513), "16 02 01"},
		{new(big.Int).SetUint64(math.MaxUint64), uint64(math.MaxUint64), "1c ff ff ff ff ff ff ff ff"},
	}
	for _, c := range cases {
		got, err := tuple.Tuple{c.in}.Pack()
		require.NoError(t, err, "%T(%v)", c.in, c.in)
		assert.Equal(t, mustHex(t, c.hex), got, "Pack(%T(%v))", c.in, c.in)
		back, err := tuple.Unpack(got)
		require.NoError(t, err)
		requireSameTuple(t, tuple.Tuple{c.want}, back, "Unpack of %T(%v)", c.in, c.in)
	}
}

func TestDeprecatedTrueDecodes(t *testing.T) {
	got, err := tuple.Unpack([]byte{0x25, 0x05, 0x25, 0x00})
	require.NoError(t, err)
	requireSameTuple(t, tuple.Tuple{true, tuple.Tuple{true}}, got)
	// It re-packs with the current code.
	assert.Equal(t, []byte{0x27, 0x05, 0x27, 0x00}, mustPack(t, got))
}

func TestUnpackedBytesDoNotAlias(t *testing.T) {
	in := mustHex(t, "01 61 62 00 01 63 00 ff 64 00")
	got, err := tuple.Unpack(in)
	require.NoError(t, err)
	for i := range in {
		in[i] = 0
	}
	requireSameTuple(t, tuple.Tuple{[]byte("ab"), []byte("c\x00d")}, got)
}

func TestStringFormatsTuples(t *testing.T) {
	tp := tuple.Tuple{nil, []byte{0}, "a", tuple.Tuple{int64(1)}, float32(1.5), 2.5, true,
		tuple.UUID{15: 1}, tuple.IncompleteVersionstamp(3)}
	assert.Equal(t, `(nil, b"\x00", "a", (1,), float32(1.5), 2.5, true, UUID(00000000-0000-0000-0000-000000000001), Versionstamp(ffffffffffffffffffff:3))`, tp.String())
}

// TestUnpackPythonEightByteBigInts: FDB's Python binding packs 2^64-1 and
// -(2^64-1) with the arbitrary-precision codes and a length of 8
// (bindings/python/fdb/tuple.py, _encode: `value >= _size_limits[-1]` and
// `-value >= _size_limits[-1]`), where Java, Go and this package use 0x1c and
// 0x0c. The Java (TupleUtil.decode) and Go (decodeBigInt) decoders read those
// bytes, so Unpack must too, or a key written by a Python client is
// unreadable here. Other 8-byte 0x1d/0x0b forms, which no binding writes,
// stay rejected.
func TestUnpackPythonEightByteBigInts(t *testing.T) {
	cases := []struct {
		name, python, canonical string
		want                    tuple.Tuple
	}{
		{"2^64-1", "1d 08 ff ff ff ff ff ff ff ff", "1c ff ff ff ff ff ff ff ff", tuple.Tuple{uint64(math.MaxUint64)}},
		{"-(2^64-1)", "0b f7 00 00 00 00 00 00 00 00", "0c 00 00 00 00 00 00 00 00", tuple.Tuple{bigFromString(t, "-18446744073709551615")}},
		{"nested", "05 15 01 1d 08 ff ff ff ff ff ff ff ff 00", "05 15 01 1c ff ff ff ff ff ff ff ff 00", tuple.Tuple{tuple.Tuple{int64(1), uint64(math.MaxUint64)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tuple.Unpack(mustHex(t, c.python))
			require.NoError(t, err, "Unpack of the Python binding's packing %s", c.python)
			requireSameTuple(t, c.want, got)
			assert.Equal(t, mustHex(t, c.canonical), mustPack(t, got), "re-packs in the canonical form")
		})
	}
	for _, bad := range []string{"1d 08 ff ff ff ff ff ff ff fe", "0b f7 00 00 00 00 00 00 00 01", "1d 08 ff ff"} {
		_, err := tuple.Unpack(mustHex(t, bad))
		require.ErrorIs(t, err, tuple.ErrMalformed, "Unpack(%s)", bad)
	}
}

// TestPackCapacityIsExact: Pack and PackWithVersionstamp size their result
// in a first pass and promise exactly the needed capacity, so an error in
// that size computation (an element's length, a null's escape byte inside
// a nested tuple, a big integer's length byte) shows as cap != len.
func TestPackCapacityIsExact(t *testing.T) {
	minusMaxUint64 := new(big.Int).Neg(new(big.Int).SetUint64(math.MaxUint64))
	fixed := []tuple.Tuple{
		{nil},
		{tuple.Tuple{nil, tuple.Tuple{nil}}},
		{tuple.Tuple{}},
		{[]byte{0, 1, 0}, "\x00a\x00"},
		{float32(-1.5), -2.5, true, false},
		{tuple.UUID{1}, tuple.Versionstamp{UserVersion: 3}},
		{uint64(math.MaxUint64), uint(1) << 63, int64(math.MinInt64), int8(-1)},
		{minusMaxUint64, *big.NewInt(-70000), *new(big.Int).Lsh(big.NewInt(1), 100), new(big.Int).Lsh(big.NewInt(-1), 100)},
	}
	check := func(tp tuple.Tuple) {
		t.Helper()
		packed, err := tp.Pack()
		require.NoError(t, err, "Pack(%v)", tp)
		require.Equal(t, len(packed), cap(packed), "Pack(%v) = %x", tp, packed)
		stamped := append(append(tuple.Tuple{}, tp...), tuple.IncompleteVersionstamp(1))
		key, err := stamped.PackWithVersionstamp([]byte("p"))
		require.NoError(t, err, "PackWithVersionstamp(%v)", stamped)
		require.Equal(t, len(key), cap(key), "PackWithVersionstamp(%v) = %x", stamped, key)
	}
	for _, tp := range fixed {
		check(tp)
	}
	g := newGen(7, false, false)
	for range 2000 {
		check(g.tuple(0))
	}
}

// TestUnpackEscapedNoExtraAllocations: Unpack sizes each byte string and
// string in one scan before copying it, counting an escaped 0x00 as one
// byte; a miscount shows as an extra allocation when the copy grows.
func TestUnpackEscapedNoExtraAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	for _, code := range []byte{0x01, 0x02} {
		plain := []byte{code, 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 0x00}
		escaped := []byte{code, 'a', 0x00, 0xff, 'c', 0x00, 0xff, 'e', 'f', 'g', 'h', 'i', 'j', 0x00}
		unpack := func(b []byte) func() {
			return func() {
				if _, err := tuple.Unpack(b); err != nil {
					panic(err)
				}
			}
		}
		want := testing.AllocsPerRun(100, unpack(plain))
		got := testing.AllocsPerRun(100, unpack(escaped))
		assert.Equal(t, want, got, "code 0x%02x: allocations with escapes vs without", code)
	}
}

// TestUUIDString checks every group of the 8-4-4-4-12 form (RFC 4122,
// section 3), bytes in order.
func TestUUIDString(t *testing.T) {
	var u tuple.UUID
	for i := range u {
		u[i] = byte(i) | byte(i)<<4
	}
	assert.Equal(t, "00112233-4455-6677-8899-aabbccddeeff", u.String())
}

// TestStringFormatsEmptyTuples: the Python-like notation has no trailing
// comma for an empty tuple, as in Python's repr(()) and repr(((),)).
func TestStringFormatsEmptyTuples(t *testing.T) {
	assert.Equal(t, "()", tuple.Tuple{}.String())
	assert.Equal(t, "((),)", tuple.Tuple{tuple.Tuple{}}.String())
}

// TestVersionstampString: hexadecimal transaction version, decimal user
// version.
func TestVersionstampString(t *testing.T) {
	v := tuple.Versionstamp{TransactionVersion: [10]byte{7: 1, 9: 0x0a}, UserVersion: 300}
	assert.Equal(t, "0000000000000001000a:300", v.String())
}
