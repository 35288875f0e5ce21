package tuple_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// Seeds are fixed so that a failure reproduces; the failing tuple is in the
// message.

func TestPropertyUnpackInvertsPack(t *testing.T) {
	for _, small := range []bool{false, true} {
		g := newGen(1, true, small)
		for i := range 5000 {
			tp := g.tuple(0)
			packed, err := tp.Pack()
			require.NoError(t, err, "case %d: Pack(%v)", i, tp)
			got, err := tuple.Unpack(packed)
			require.NoError(t, err, "case %d: Unpack(%x) of %v", i, packed, tp)
			requireSameTuple(t, tp, got, "case %d (small=%v)", i, small)
		}
	}
}

// TestPropertyAnyIntTypePacksLikeCanonical checks that tuples with integers
// of any Go type pack like their normalised form: the round trip keeps the
// bytes, and Compare calls them equal.
func TestPropertyAnyIntTypePacksLikeCanonical(t *testing.T) {
	g := newGen(2, false, false)
	for i := range 5000 {
		tp := g.tuple(0)
		packed, err := tp.Pack()
		require.NoError(t, err, "case %d: Pack(%v)", i, tp)
		got, err := tuple.Unpack(packed)
		require.NoError(t, err, "case %d", i)
		require.Equal(t, packed, mustPack(t, got), "case %d: %v re-packed differently", i, tp)
		require.Zero(t, tuple.Compare(tp, got), "case %d: Compare(%v, %v)", i, tp, got)
	}
}

func TestPropertyCompareMatchesByteOrder(t *testing.T) {
	for _, small := range []bool{false, true} {
		g := newGen(3, false, small)
		ties := 0
		for i := range 20000 {
			a := g.tuple(0)
			var b tuple.Tuple
			if i%2 == 0 {
				b = g.mutate(a, 0) // close pairs: shared prefixes, same kinds
			} else {
				b = g.tuple(0)
			}
			pa, pb := mustPack(t, a), mustPack(t, b)
			want := bytes.Compare(pa, pb)
			require.Equal(t, want, tuple.Compare(a, b), "case %d: Compare(%v, %v); packed %x vs %x", i, a, b, pa, pb)
			require.Equal(t, -want, tuple.Compare(b, a), "case %d: Compare(%v, %v) not antisymmetric", i, b, a)
			if want == 0 {
				ties++
			}
		}
		if small {
			require.Greater(t, ties, 100, "the small-domain generator should produce ties")
		}
	}
}

// TestPropertySortedTuplesPackSorted sorts random tuples with Compare and
// checks that their packings come out sorted too.
func TestPropertySortedTuplesPackSorted(t *testing.T) {
	g := newGen(4, false, true)
	tuples := make([]tuple.Tuple, 3000)
	for i := range tuples {
		tuples[i] = g.tuple(0)
	}
	slices.SortStableFunc(tuples, tuple.Compare)
	for i := 1; i < len(tuples); i++ {
		a, b := mustPack(t, tuples[i-1]), mustPack(t, tuples[i])
		require.LessOrEqual(t, bytes.Compare(a, b), 0, "%v sorts before %v but packs after it", tuples[i-1], tuples[i])
	}
}

// TestPropertyPrefixConcatenation checks pack(a ++ b) == pack(a) ++ pack(b),
// which is what makes subspace prefixes work.
func TestPropertyPrefixConcatenation(t *testing.T) {
	g := newGen(5, false, false)
	for i := range 2000 {
		a, b := g.tuple(0), g.tuple(0)
		whole := mustPack(t, append(append(tuple.Tuple{}, a...), b...))
		require.Equal(t, append(mustPack(t, a), mustPack(t, b)...), whole, "case %d: %v ++ %v", i, a, b)
		appended, err := b.AppendPack(mustPack(t, a))
		require.NoError(t, err)
		require.Equal(t, whole, appended, "case %d: AppendPack", i)
	}
}

// TestCompareDeepNesting: Compare looks at every level Pack accepts, down to
// MaxDepth, and agrees with the byte order of the packings there.
func TestCompareDeepNesting(t *testing.T) {
	wrap := func(depth int, v any) tuple.Tuple {
		tp := tuple.Tuple{v}
		for range depth {
			tp = tuple.Tuple{tp}
		}
		return tp
	}
	for _, depth := range []int{4, 50, tuple.MaxDepth} {
		a, b := wrap(depth, int64(1)), wrap(depth, int64(2))
		require.Equal(t, -1, bytes.Compare(mustPack(t, a), mustPack(t, b)), "depth %d", depth)
		require.Equal(t, -1, tuple.Compare(a, b), "depth %d", depth)
		require.Equal(t, 1, tuple.Compare(b, a), "depth %d", depth)
	}
}
