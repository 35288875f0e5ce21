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

// The hashed claims of a long prefix (claimKey) tell every record this
// version can write apart, as the packed claims do: first writers of two
// of them conflict whatever the prefix.
func TestClaimKeysDistinct(t *testing.T) {
	long := Subspace{prefix: make([]byte, kv.MaxKeySize)}
	g := newConfGate("queue", long, kv.KeyRange{}, config{}, "")
	seen := map[string]storedConfig{}
	for _, kind := range []string{"queue", "priority queue"} {
		for _, layout := range []string{"index", "versionstamp"} {
			for _, enc := range []string{"raw", "tuple"} {
				for _, st := range []string{stagingNone, stagingSignal, stagingBatches, stagingPlace} {
					c := storedConfig{format: configFormat, kind: kind, layout: layout, encoding: enc, staging: st}
					claim := g.claimKey(c.pack())
					require.LessOrEqual(t, len(claim), len(g.claims.prefix)+9, "hashed")
					prev, dup := seen[string(claim)]
					require.False(t, dup, "%+v and %+v share a claim", prev, c)
					seen[string(claim)] = c
				}
			}
		}
	}
}
