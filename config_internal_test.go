package fdbqueue

import (
	"bytes"
	"math"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/stretchr/testify/require"
)

func testGate() *confGate {
	return newConfGate("queue", Subspace{prefix: []byte("q")}, kv.KeyRange{Begin: []byte("q\x00"), End: []byte("q\xff")}, config{}, "", "")
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
	g := newConfGate("queue", long, kv.KeyRange{}, config{}, "", "")
	seen := map[string]storedConfig{}
	for _, kind := range []string{kindQueue, kindPriority, kindJobs} {
		for _, layout := range []string{"index", "versionstamp", jobsLayout(time.Second)} {
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

// A JobQueue's keys and its stored configuration cannot collide: every
// key the job queue writes in its subspace is a tuple starting with a
// string (type code 0x02), so it lies in the subspace's range, outside
// the ranges its gate treats as foreign, and never under the meta
// subspace (prefix + 0xff: 0xff is the tuple layer's reserved escape, never
// a type code; FoundationDB's design/tuple.md), where the record
// (prefix + 0xff + ("c",)) lives. The foreign ranges and the job keys'
// range together are the subspace's whole range. And the record of a job
// queue is its own: its gate's cost is counted (overheadCost) and its
// record differs from every queue's.
func TestJobQueueKeysApartFromRecord(t *testing.T) {
	sub := Subspace{prefix: []byte("jobs")}
	q, err := NewJobQueue(sub, JobQueueConfig{})
	require.NoError(t, err)
	g := q.journal.gate
	require.NotNil(t, g)
	all, _ := sub.Range()
	meta := metaSubspace(sub.prefix).prefix
	in := func(k []byte, r kv.KeyRange) bool {
		return bytes.Compare(k, r.Begin) >= 0 && bytes.Compare(k, r.End) < 0
	}
	id := JobID{1, 2, 3}
	m := jobMeta{id: id, vest: math.MinInt64, prio: math.MinInt32, deadAt: math.MaxInt64}
	keys := [][]byte{m.queueKey(q), m.deadKey(q), q.key("v", id[:]), q.key("x", id[:]), q.key("u", []byte{0xff, 0x00}),
		q.key("c", "p", int64(math.MinInt64)), q.key("c", "e", int64(math.MaxInt64)), q.total, q.leased, q.deadN, q.signal}
	for _, k := range keys {
		require.True(t, in(k, all), "%q in the subspace's range", k)
		require.Equal(t, byte(0x02), k[len(sub.prefix)], "%q starts with a string", k)
		require.False(t, bytes.HasPrefix(k, meta), "%q under the meta subspace", k)
		for _, f := range g.foreign {
			require.False(t, in(k, f), "%q in a foreign range", k)
		}
		require.NotEqual(t, g.key, k)
	}
	require.True(t, bytes.HasPrefix(g.key, meta))
	require.False(t, in(g.key, all), "the record is outside the subspace's range")
	require.Len(t, g.foreign, 2)
	require.Equal(t, all.Begin, g.foreign[0].Begin)
	require.Equal(t, append(bytes.Clone(sub.prefix), 0x02), g.foreign[0].End)
	require.Equal(t, append(bytes.Clone(sub.prefix), 0x03), g.foreign[1].Begin)
	require.Equal(t, all.End, g.foreign[1].End)

	require.Equal(t, storedConfig{format: configFormat, kind: kindJobs, layout: jobsLayout(time.Second), encoding: "raw", staging: stagingNone}, g.want)
	require.Positive(t, g.cost())
	o := q.journal.begin(nil, nil)
	withGate := o.overheadCost(q.items)
	q.journal.gate = nil
	require.Equal(t, withGate-g.cost(), o.overheadCost(q.items), "the budget counts the gate")
	q.journal.gate = g
	for _, kind := range []string{kindQueue, kindPriority} {
		other := newConfGate(kind, sub, all, config{}, "", "")
		require.ErrorIs(t, g.compare(other.want), ErrConfigMismatch)
		require.ErrorIs(t, other.compare(g.want), ErrConfigMismatch)
	}
}
