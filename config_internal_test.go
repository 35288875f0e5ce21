package fdbqueue

import (
	"testing"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

func testGate() *confGate {
	return newConfGate("queue", Subspace{prefix: []byte("q")}, kv.KeyRange{Begin: []byte("q\x00"), End: []byte("q\xff")}, config{}, "")
}

// The gate parses a stored record once per distinct byte string: a hit
// compares bytes and allocates nothing, a changed record is parsed anew,
// and the cache keeps its own copy of the bytes it was given.
func TestConfGateParseCache(t *testing.T) {
	g := testGate()
	rec := g.want.pack()
	first, err := g.parse(rec)
	require.NoError(t, err)
	require.Equal(t, g.want, *first)

	again, err := g.parse(append([]byte(nil), rec...))
	require.NoError(t, err)
	require.Same(t, first, again, "an unchanged record is not parsed again")
	require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = g.parse(rec) }), "a cache hit allocates")

	// The caller's buffer is not the cache's: changing it afterwards
	// changes nothing.
	other := g.want
	other.staging = stagingSignal
	otherRec := other.pack()
	got, err := g.parse(otherRec)
	require.NoError(t, err)
	require.Equal(t, other, *got, "a changed record is parsed")
	otherRec[len(otherRec)-2] ^= 0xff
	got2, err := g.parse(other.pack())
	require.NoError(t, err)
	require.Same(t, got, got2, "the cache kept its own copy of the bytes")

	// A record that does not parse fails every time, and a good one after
	// it parses again.
	_, err = g.parse([]byte{0xff, 0x00})
	require.Error(t, err)
	_, err = g.parse([]byte{0xff, 0x00})
	require.Error(t, err)
	back, err := g.parse(rec)
	require.NoError(t, err)
	require.Equal(t, g.want, *back)
}

// cost is computed once and equals the bound computed from the record.
func TestConfGateCostOnce(t *testing.T) {
	g := testGate()
	require.Equal(t, g.computeCost(), g.cost())
	require.Positive(t, g.cost())
	require.Zero(t, (*confGate)(nil).cost())
	require.Zero(t, testing.AllocsPerRun(100, func() { _ = g.cost() }))
}
