package sim

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFIFOQMatchesASlice steps fifoQs the way the checker does, deriving
// new states from any earlier one (so that states share logs and push or
// prepend over entries that other states wrote), and compares each with
// a plain slice stepped alike: same IDs, equal exactly when the slices
// are, and equal sequences hash alike.
func TestFIFOQMatchesASlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	type pair struct {
		q    fifoQ
		want []uint64
	}
	states := []pair{{newFIFOQ(nil), nil}, {newFIFOQ([]uint64{7, 8}), []uint64{7, 8}}}
	for range 20000 {
		p := states[rng.IntN(len(states))]
		id := uint64(rng.IntN(4)) // few IDs: pushes often meet an entry another state wrote
		var next pair
		switch op := rng.IntN(3); {
		case op == 0:
			next = pair{p.q.push(id), append(slices.Clone(p.want), id)}
		case op == 1:
			next = pair{p.q.prepend(id), append([]uint64{id}, p.want...)}
		case len(p.want) > 0:
			n := 1 + rng.IntN(len(p.want))
			next = pair{p.q.drop(n), slices.Clone(p.want[n:])}
		default:
			continue
		}
		states = append(states, next)
	}
	for i, s := range states {
		require.Equal(t, len(s.want), s.q.len())
		if len(s.want) > 0 {
			require.Equal(t, s.want, s.q.ids(), "state %d", i)
			require.Equal(t, s.want[0], s.q.head())
		}
		o := states[rng.IntN(len(states))]
		same := slices.Equal(s.want, o.want)
		require.Equal(t, same, s.q.equal(o.q), "states %d and %v", i, o.want)
		if same {
			require.Equal(t, s.q.h, o.q.h)
			require.Equal(t, s.q.pn, o.q.pn)
		}
		fresh := newFIFOQ(s.want)
		require.True(t, s.q.equal(fresh))
		require.Equal(t, fresh.h, s.q.h, "a sequence hashes alike however it was built")
	}
}

func TestHashBaseInverse(t *testing.T) {
	require.Equal(t, uint64(1), hashBase*hashBaseInv)
}
