package tuple_test

import (
	"bytes"
	"encoding/binary"
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

		require.Len(t, repacked, len(in), "Unpack(%x) = %v re-packs as %x", in, tp, repacked)
		for i := range in {
			if in[i] != repacked[i] {
				require.True(t, in[i] == 0x25 && repacked[i] == 0x27,
					"Unpack(%x) = %v re-packs as %x: byte %d differs", in, tp, repacked, i)
			}
		}
		again, err := tuple.Unpack(repacked)
		require.NoError(t, err)
		require.Zero(t, tuple.Compare(tp, again), "%v vs %v", tp, again)
	})
}
