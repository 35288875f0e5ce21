package tuple_test

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/big"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// FuzzUnpack checks that Unpack never panics, that it fails only with
// ErrMalformed, and that whatever it accepts re-packs to the same bytes, with
// the two documented exceptions:
//
//   - a deprecated true (0x25) re-packs as 0x27, so the re-packed bytes may
//     differ from the input exactly where the input had 0x25 and the output
//     has 0x27;
//   - 2^64-1 and -(2^64-1) written as the Python binding does (1d 08 ...,
//     0b f7 ...) re-pack one byte shorter (1c ..., 0c ...); for a tuple
//     holding either value only the semantic round trip is checked;
//   - incomplete versionstamps are re-packed with PackWithVersionstamp (minus
//     its 4-byte offset), and a tuple with more than one cannot be re-packed
//     at all: Pack must then refuse it with ErrVersionstamp.
func FuzzUnpack(f *testing.F) {
	for _, v := range specVectors(f) {
		f.Add(mustHex(f, v.hex))
	}
	for _, s := range []string{
		"25", "05 25 00", "33 ff ff ff ff ff ff ff ff ff ff 00 01",
		"33 ff ff ff ff ff ff ff ff ff ff 00 01 05 33 ff ff ff ff ff ff ff ff ff ff 00 02 00",
		"1d 09 01 00 00 00 00 00 00 00 00", "0b f6 fe ff ff ff ff ff ff ff ff",
		"16 00 01", "05 05 05", "01 00 ff", "32 00",
		"1d 08 ff ff ff ff ff ff ff ff", "05 0b f7 00 00 00 00 00 00 00 00 00",
	} {
		f.Add(mustHex(f, s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		orig := bytes.Clone(in)
		tp, err := tuple.Unpack(in)
		require.Equal(t, orig, in, "Unpack modified its input")
		if err != nil {
			require.ErrorIs(t, err, tuple.ErrMalformed)
			return
		}

		var repacked []byte
		has, err := tp.HasIncompleteVersionstamp()
		switch {
		case err != nil:
			require.ErrorIs(t, err, tuple.ErrVersionstamp)
			_, err = tp.Pack()
			require.ErrorIs(t, err, tuple.ErrVersionstamp)
			return
		case has:
			key, err := tp.PackWithVersionstamp(nil)
			require.NoError(t, err)
			repacked = key[:len(key)-4]
			off := binary.LittleEndian.Uint32(key[len(key)-4:])
			require.LessOrEqual(t, int(off)+10, len(repacked))
			require.Equal(t, bytes.Repeat([]byte{0xff}, 10), repacked[off:off+10], "offset %d does not point at the placeholder", off)
		default:
			repacked, err = tp.Pack()
			require.NoError(t, err, "Unpack accepted %x as %v, which Pack refuses", in, tp)
		}

		again, err := tuple.Unpack(repacked)
		require.NoError(t, err)
		require.Zero(t, tuple.Compare(tp, again), "%v vs %v", tp, again)
		if holdsWidestUint64Magnitude(tp) {
			require.LessOrEqual(t, len(repacked), len(in))
			return
		}

		require.Len(t, repacked, len(in), "Unpack(%x) = %v re-packs as %x", in, tp, repacked)
		for i := range in {
			if in[i] != repacked[i] {
				require.True(t, in[i] == 0x25 && repacked[i] == 0x27,
					"Unpack(%x) = %v re-packs as %x: byte %d differs", in, tp, repacked, i)
			}
		}
	})
}

// holdsWidestUint64Magnitude reports whether tp holds 2^64-1 or -(2^64-1) at
// any depth, as Unpack returns them.
func holdsWidestUint64Magnitude(tp tuple.Tuple) bool {
	for _, e := range tp {
		switch e := e.(type) {
		case uint64:
			if e == math.MaxUint64 {
				return true
			}
		case *big.Int:
			if e.Cmp(new(big.Int).Neg(new(big.Int).SetUint64(math.MaxUint64))) == 0 {
				return true
			}
		case tuple.Tuple:
			if holdsWidestUint64Magnitude(e) {
				return true
			}
		}
	}
	return false
}
