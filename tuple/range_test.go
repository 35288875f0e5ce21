package tuple_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

func TestTupleRange(t *testing.T) {
	base := tuple.Tuple{"q", int64(3)}
	r, err := base.Range()
	require.NoError(t, err)
	packed := mustPack(t, base)
	assert.Equal(t, append(append([]byte{}, packed...), 0x00), r.Begin)
	assert.Equal(t, append(append([]byte{}, packed...), 0xff), r.End)

	inside := func(k []byte) bool { return bytes.Compare(k, r.Begin) >= 0 && bytes.Compare(k, r.End) < 0 }
	assert.False(t, inside(packed), "the range excludes the tuple itself")
	for _, child := range []any{nil, []byte{}, "", tuple.Tuple{}, int64(-1 << 40), int64(1), 1.5, false, true, tuple.UUID{0xff}, tuple.Versionstamp{}} {
		k := mustPack(t, append(append(tuple.Tuple{}, base...), child, "more"))
		assert.True(t, inside(k), "child %v of %v must be in the range", child, base)
	}
	for _, other := range []tuple.Tuple{{"q", int64(2), "x"}, {"q", int64(4)}, {"q"}, {"r"}} {
		assert.False(t, inside(mustPack(t, other)), "%v must be outside the range of %v", other, base)
	}

	all, err := tuple.Tuple{}.Range()
	require.NoError(t, err)
	assert.Equal(t, []byte{0x00}, all.Begin)
	assert.Equal(t, []byte{0xff}, all.End)
}

func TestStrinc(t *testing.T) {
	cases := []struct{ in, want string }{
		{"a", "b"},
		{"a\xff", "b"},
		{"a\xff\xff", "b"},
		{"\x00", "\x01"},
		{"ab\xfe", "ab\xff"},
		{"\x01\xff\x02\xff", "\x01\xff\x03"},
	}
	for _, c := range cases {
		in := []byte(c.in)
		got, err := tuple.Strinc(in)
		require.NoError(t, err, "%x", c.in)
		assert.Equal(t, []byte(c.want), got, "Strinc(%x)", c.in)
		assert.Equal(t, []byte(c.in), in, "Strinc must not modify its input")
	}
	for _, bad := range []string{"", "\xff", "\xff\xff\xff"} {
		got, err := tuple.Strinc([]byte(bad))
		require.ErrorIs(t, err, tuple.ErrNoSuccessor, "Strinc(%x)", bad)
		assert.Nil(t, got)
		_, err = tuple.PrefixRange([]byte(bad))
		require.ErrorIs(t, err, tuple.ErrNoSuccessor, "PrefixRange(%x)", bad)
	}
}

func TestPrefixRange(t *testing.T) {
	prefix := []byte("jobs\xff")
	r, err := tuple.PrefixRange(prefix)
	require.NoError(t, err)
	assert.Equal(t, []byte("jobs\xff"), r.Begin)
	assert.Equal(t, []byte("jobt"), r.End)
	r.Begin[0] = 'X'
	assert.Equal(t, []byte("jobs\xff"), prefix, "PrefixRange must copy its input")
}
