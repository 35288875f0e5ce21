package sim

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// TestValuesCoverTheAcceptedRange checks the simulation's values: every
// shape occurs among a history's worth of IDs, limit-sized values are
// stored at the value limit (within the tuple escapes' one byte) under
// each encoding, and values decode to their ID and nothing else.
func TestValuesCoverTheAcceptedRange(t *testing.T) {
	for _, enc := range []fdbqueue.ValueEncoding{fdbqueue.RawValues, fdbqueue.TupleValues} {
		seen := map[valueShape]int{}
		for id := uint64(0); id < 200; id++ {
			v := encodeValue(enc, id)
			shape := shapeOf(id)
			seen[shape]++
			stored := len(v)
			if enc == fdbqueue.TupleValues {
				p, err := tuple.Tuple{v}.Pack()
				require.NoError(t, err)
				stored = len(p)
			}
			require.LessOrEqual(t, stored, kv.MaxValueSize, "item %d (%s) must be accepted", id, shape)
			if shape >= shapeZerosMax {
				require.GreaterOrEqual(t, stored, kv.MaxValueSize-1, "item %d (%s) is limit-sized", id, shape)
			}
			got, err := decodeValue(enc, v)
			require.NoError(t, err)
			require.Equal(t, id, got)
			bad := append([]byte(nil), v...)
			bad[len(bad)-1] ^= 1
			if len(bad) > 8 {
				_, err = decodeValue(enc, bad)
				require.Error(t, err, "a corrupt value of item %d is noticed", id)
			}
		}
		for s := shapePattern; s <= shapeBinaryMax; s++ {
			require.Positive(t, seen[s], "shape %s never drawn", s)
		}
	}
}
