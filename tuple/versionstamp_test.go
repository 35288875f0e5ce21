package tuple_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

func TestIncompleteVersionstamp(t *testing.T) {
	v := tuple.IncompleteVersionstamp(0x0102)
	assert.False(t, v.IsComplete())
	assert.Equal(t, uint16(0x0102), v.UserVersion)
	assert.Equal(t, bytes.Repeat([]byte{0xff}, 10), v.TransactionVersion[:])

	complete := v
	complete.TransactionVersion[9] = 0xfe
	assert.True(t, complete.IsComplete())
	assert.True(t, tuple.Versionstamp{}.IsComplete())
}

func TestPackWithVersionstamp(t *testing.T) {
	prefix := []byte("sub\x00")
	tp := tuple.Tuple{"q", tuple.Tuple{int64(5), tuple.IncompleteVersionstamp(9)}}
	key, err := tp.PackWithVersionstamp(prefix)
	require.NoError(t, err)

	body := mustHex(t, "02 71 00 05 15 05 33 ff ff ff ff ff ff ff ff ff ff 00 09 00")
	want := binary.LittleEndian.AppendUint32(append(append([]byte{}, prefix...), body...), uint32(len(prefix)+7))
	assert.Equal(t, want, key)
	assert.Equal(t, []byte("sub\x00"), prefix, "prefix must not be modified")

	// What the database does at commit: overwrite the ten bytes at the
	// offset and strip the offset. The result unpacks to a complete stamp.
	offset := binary.LittleEndian.Uint32(key[len(key)-4:])
	committed := append([]byte{}, key[:len(key)-4]...)
	copy(committed[offset:], []byte{0, 0, 0, 0, 0, 0, 0, 7, 0, 1})
	got, err := tuple.Unpack(committed[len(prefix):])
	require.NoError(t, err)
	requireSameTuple(t, tuple.Tuple{"q", tuple.Tuple{int64(5), tuple.Versionstamp{TransactionVersion: [10]byte{7: 7, 9: 1}, UserVersion: 9}}}, got)
}

func TestVersionstampCountErrors(t *testing.T) {
	none := tuple.Tuple{"a", tuple.Versionstamp{UserVersion: 1}}
	one := tuple.Tuple{"a", tuple.IncompleteVersionstamp(1)}
	two := tuple.Tuple{tuple.IncompleteVersionstamp(1), tuple.Tuple{tuple.IncompleteVersionstamp(2)}}

	has, err := none.HasIncompleteVersionstamp()
	require.NoError(t, err)
	assert.False(t, has)
	_, err = none.PackWithVersionstamp(nil)
	require.ErrorIs(t, err, tuple.ErrVersionstamp)
	assert.Contains(t, err.Error(), "has none")

	has, err = one.HasIncompleteVersionstamp()
	require.NoError(t, err)
	assert.True(t, has)
	_, err = one.Pack()
	require.ErrorIs(t, err, tuple.ErrVersionstamp, "Pack must refuse an incomplete versionstamp")
	_, err = one.AppendPack(nil)
	require.ErrorIs(t, err, tuple.ErrVersionstamp)
	_, err = one.Range()
	require.ErrorIs(t, err, tuple.ErrVersionstamp)

	has, err = two.HasIncompleteVersionstamp()
	require.ErrorIs(t, err, tuple.ErrVersionstamp)
	assert.True(t, has)
	_, err = two.PackWithVersionstamp(nil)
	require.ErrorIs(t, err, tuple.ErrVersionstamp)
	assert.Contains(t, err.Error(), "at most one")

	has, err = tuple.Tuple{make(chan int)}.HasIncompleteVersionstamp()
	require.ErrorIs(t, err, tuple.ErrUnsupportedType)
	assert.False(t, has)
}

// TestUnpackIncompleteVersionstamp: a placeholder decodes as an incomplete
// versionstamp that PackWithVersionstamp turns back into the same bytes.
func TestUnpackIncompleteVersionstamp(t *testing.T) {
	packed := mustHex(t, "15 01 33 ff ff ff ff ff ff ff ff ff ff 00 2a")
	got, err := tuple.Unpack(packed)
	require.NoError(t, err)
	requireSameTuple(t, tuple.Tuple{int64(1), tuple.IncompleteVersionstamp(42)}, got)
	key, err := got.PackWithVersionstamp(nil)
	require.NoError(t, err)
	assert.Equal(t, binary.LittleEndian.AppendUint32(packed, 3), key)
}

func TestVersionstampsOrder(t *testing.T) {
	a := tuple.Versionstamp{TransactionVersion: [10]byte{9: 1}, UserVersion: 5}
	b := tuple.Versionstamp{TransactionVersion: [10]byte{9: 1}, UserVersion: 6}
	c := tuple.Versionstamp{TransactionVersion: [10]byte{8: 1}, UserVersion: 0}
	for _, pair := range [][2]tuple.Versionstamp{{a, b}, {b, c}, {a, c}} {
		x, y := tuple.Tuple{pair[0]}, tuple.Tuple{pair[1]}
		assert.Equal(t, -1, tuple.Compare(x, y), "%v < %v", x, y)
		assert.Equal(t, -1, bytes.Compare(mustPack(t, x), mustPack(t, y)), "packed %v < %v", x, y)
	}
}

// TestPackWithVersionstampPrefix: the key is built in fresh memory, so a
// prefix with spare capacity (a shared subspace prefix) is neither written
// into nor shared between keys; and the offset is the 4-byte little-endian
// form of API version 520 and later (bindings/python/fdb/tuple.py,
// _pack_maybe_with_versionstamp: struct.pack("<L", version_pos)), so a
// prefix longer than 64 KiB still gets its exact offset.
func TestPackWithVersionstampPrefix(t *testing.T) {
	backing := make([]byte, 3, 64)
	copy(backing, "pfx")
	prefix := backing[:3]
	k1, err := tuple.Tuple{tuple.IncompleteVersionstamp(1)}.PackWithVersionstamp(prefix)
	require.NoError(t, err)
	k2, err := tuple.Tuple{"x", tuple.IncompleteVersionstamp(2)}.PackWithVersionstamp(prefix)
	require.NoError(t, err)
	assert.Equal(t, make([]byte, 61), backing[3:64], "spare capacity of the prefix was written")
	assert.Equal(t, append([]byte("pfx\x33"), append(bytes.Repeat([]byte{0xff}, 10), 0x00, 0x01, 4, 0, 0, 0)...), k1)
	assert.Equal(t, append([]byte("pfx\x02x\x00\x33"), append(bytes.Repeat([]byte{0xff}, 10), 0x00, 0x02, 7, 0, 0, 0)...), k2)

	long := bytes.Repeat([]byte{'a'}, 70_000)
	key, err := tuple.Tuple{tuple.IncompleteVersionstamp(3)}.PackWithVersionstamp(long)
	require.NoError(t, err)
	require.Len(t, key, 70_000+13+4)
	assert.Equal(t, uint32(70_001), binary.LittleEndian.Uint32(key[len(key)-4:]))
	assert.Equal(t, bytes.Repeat([]byte{0xff}, 10), key[70_001:70_011])
}
