package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

func TestWithoutOpenOps(t *testing.T) {
	enq := func(id uint64) Input { return Input{Kind: Enqueue, Item: Item{ID: id}} }
	deq := Input{Kind: Dequeue}
	open := Output{Unknown: true}
	got := func(ids ...uint64) Output {
		out := Output{}
		for _, id := range ids {
			out.Items = append(out.Items, Item{ID: id})
		}
		return out
	}
	observe := func(at int64, ids ...uint64) porcupine.Operation {
		return op(-1, at, at, Input{Kind: Observe}, got(ids...))
	}

	t.Run("open operations that did nothing are left out", func(t *testing.T) {
		h := []porcupine.Operation{
			op(0, 0, 10, enq(1), Output{}),
			op(1, 5, math.MaxInt64, deq, open),    // took nothing
			op(2, 6, math.MaxInt64, enq(2), open), // its item never came out
			op(3, 7, 12, enq(3), Output{}),
			op(0, 20, 30, deq, got(1)),
			observe(40, 3),
		}
		r := withoutOpenOps(h, nil)
		require.Equal(t, []porcupine.Operation{h[0], h[3], h[4], h[5]}, r)
		require.True(t, porcupine.CheckOperations(FIFOModel(nil), r))
	})
	t.Run("an item nobody saw again: an open dequeue may have taken it", func(t *testing.T) {
		h := []porcupine.Operation{
			op(0, 0, 10, enq(1), Output{}),
			op(1, 5, math.MaxInt64, deq, open),
			observe(40),
		}
		require.Nil(t, withoutOpenOps(h, nil))
		require.Nil(t, withoutOpenOps([]porcupine.Operation{h[1], h[2]}, []Item{{ID: 7}}))
	})
	t.Run("with an item missing, only open enqueues nobody saw are left out", func(t *testing.T) {
		h := []porcupine.Operation{
			op(0, 0, 10, enq(1), Output{}),
			op(1, 5, math.MaxInt64, deq, open),
			op(2, 6, math.MaxInt64, enq(2), open),
			observe(40),
		}
		require.Equal(t, []porcupine.Operation{h[0], h[1], h[3]}, withoutOpenOps(h, nil))
	})
	t.Run("the Hide and Unhide of a failed staged take are left out", func(t *testing.T) {
		h := []porcupine.Operation{
			op(0, 0, 10, enq(1), Output{}),
			op(1, 5, 20, Input{Kind: Hide, Tag: 1, Tail: true}, Output{}),
			op(-2, 5, 20, Input{Kind: Unhide, Tag: 1, Tail: true}, Output{}),
			op(0, 30, 40, deq, got(1)),
			observe(50),
		}
		require.Equal(t, []porcupine.Operation{h[0], h[3], h[4]}, withoutOpenOps(h, nil))
	})
	t.Run("an open enqueue whose item came out took effect", func(t *testing.T) {
		h := []porcupine.Operation{
			op(0, 0, math.MaxInt64, enq(1), open),
			op(1, 5, 10, deq, got(1)),
			observe(40),
		}
		require.Nil(t, withoutOpenOps(h, nil))
	})
	t.Run("a twin nobody saw again: an open dequeue may have taken it", func(t *testing.T) {
		// Two items of ID 1, one seen: one is missing, so the open
		// dequeue stays, as with distinct values.
		h := []porcupine.Operation{
			op(0, 0, 10, enq(1), Output{}),
			op(0, 11, 12, enq(1), Output{}),
			op(1, 5, math.MaxInt64, deq, open),
			observe(40, 1),
		}
		require.Nil(t, withoutOpenOps(h, nil))
		require.Nil(t, withoutOpenOps([]porcupine.Operation{h[2], h[3]}, []Item{{ID: 1}, {ID: 1}}))
		both := append(h[:3:3], observe(40, 1, 1)) // both seen: none missing
		require.Equal(t, []porcupine.Operation{both[0], both[1], both[3]}, withoutOpenOps(both, nil))
	})
	t.Run("an open enqueue whose twin came out is kept", func(t *testing.T) {
		// The item that came out may be the open enqueue's.
		h := []porcupine.Operation{
			op(0, 0, math.MaxInt64, enq(1), open),
			op(1, 5, 10, enq(1), Output{}),
			observe(40, 1),
		}
		require.Nil(t, withoutOpenOps(h, nil))
	})
	t.Run("nothing open", func(t *testing.T) {
		h := []porcupine.Operation{op(0, 0, 10, enq(1), Output{}), observe(40, 1)}
		require.Nil(t, withoutOpenOps(h, nil))
	})
}

// TestWithoutOpenOpsIsSound checks, on random small histories of a FIFO
// queue (by place when it has failed staged takes that may move an item to
// the tail) and a priority queue, legal and not, that whenever the history
// without its open operations, Hides and Unhides is linearizable the whole
// one is too, which is what the simulation relies on: porcupine decides
// both.
func TestWithoutOpenOpsIsSound(t *testing.T) {
	checkWithoutOpenOps(t, rand.New(rand.NewPCG(1, 2)), false)
}

// TestWithoutOpenOpsIsSoundWithTwins is TestWithoutOpenOpsIsSound on
// histories whose items include twins, items that repeat the ID (and,
// in a priority queue, mostly the priority) of earlier ones, as
// Config.TwinProb makes them.
func TestWithoutOpenOpsIsSoundWithTwins(t *testing.T) {
	checkWithoutOpenOps(t, rand.New(rand.NewPCG(3, 4)), true)
}

func checkWithoutOpenOps(t *testing.T, rng *rand.Rand, twins bool) {
	var reducedOK, illegal, bothIllegal int
	for i := range 3000 {
		prio := i%3 == 2
		h, initial := randomHistory(rng, prio, twins)
		model := FIFOModel(initial)
		switch {
		case prio:
			model = PriorityModel(initial)
		case slices.ContainsFunc(h, func(o porcupine.Operation) bool { return o.Input.(Input).Tail }):
			model = FIFOPlaceModel(initial) // as the harness checks a Queue staged by place
		}
		full := porcupine.CheckOperations(model, h)
		if !full {
			illegal++
		}
		r := withoutOpenOps(h, initial)
		if r == nil {
			continue
		}
		if !porcupine.CheckOperations(model, r) {
			if !full {
				bothIllegal++
			}
			continue
		}
		reducedOK++
		require.True(t, full, "history %d: linearizable without its open operations, yet not with them:\n%v", i, h)
	}
	// The histories exercise both sides: reductions that decide, and
	// histories that are not linearizable, with and without their open
	// operations.
	t.Logf("%d histories decided without their open operations; %d not linearizable, %d of them reduced", reducedOK, illegal, bothIllegal)
	require.Greater(t, reducedOK, 300)
	require.Greater(t, bothIllegal, 30)
}

// randomHistory runs a random sequence of operations on a sequential
// queue (a priority queue if prio), gives each an interval around its
// point, leaves the outcome of some unknown (applied or not; open, or
// settled within the call), and corrupts some outputs, so that some
// histories are not linearizable. With twins, a third of the items
// repeat an earlier item's ID (in a priority queue, mostly with its
// priority).
func randomHistory(rng *rand.Rand, prio, twins bool) ([]porcupine.Operation, []Item) {
	var q, made []Item
	next := uint64(1)
	newItem := func() Item {
		if twins && len(made) > 0 && rng.IntN(3) == 0 {
			it := made[rng.IntN(len(made))]
			if prio && rng.IntN(4) == 0 {
				it.Priority = rng.Int64N(3)
			}
			return it
		}
		it := Item{ID: next}
		if prio {
			it.Priority = rng.Int64N(3)
		}
		next++
		made = append(made, it)
		return it
	}
	insert := func(it Item) {
		if !prio {
			q = append(q, it)
			return
		}
		i := len(q)
		for i > 0 && q[i-1].Priority > it.Priority {
			i--
		}
		q = append(q[:i], append([]Item{it}, q[i:]...)...)
	}
	for range rng.IntN(3) {
		insert(newItem())
	}
	initial := append([]Item(nil), q...)
	var h []porcupine.Operation
	n := 4 + rng.IntN(8)
	for i := range n {
		at := int64(10 * (i + 1))
		call, ret := at-rng.Int64N(25), at+rng.Int64N(25)
		isOpen := rng.IntN(4) == 0
		applied := !isOpen || rng.IntN(2) == 0
		var in Input
		var out Output
		if len(q) > 0 && rng.IntN(8) == 0 {
			// A failed staged take: a Hide and an Unhide over one
			// interval, which put the head back where it was or, by
			// place (Tail, FIFO only), moved it to the tail or took
			// nothing.
			tail := !prio && rng.IntN(2) == 0
			tag := uint64(i + 1)
			hide := Input{Kind: Hide, Tag: tag, Tail: tail}
			un := Input{Kind: Unhide, Tag: tag, Tail: tail}
			if tail && rng.IntN(2) == 0 {
				q = append(q[1:], q[0])
			}
			h = append(h, porcupine.Operation{ClientId: i % 4, Input: hide, Call: call, Output: Output{}, Return: ret},
				porcupine.Operation{ClientId: -2 - i, Input: un, Call: call, Output: Output{}, Return: ret})
			continue
		}
		if rng.IntN(2) == 0 {
			it := newItem()
			in = Input{Kind: Enqueue, Item: it}
			if prio {
				in.Kind = Push
			}
			if applied {
				insert(it)
			}
		} else {
			in = Input{Kind: Dequeue}
			if prio {
				in.Kind = PopMin
				if rng.IntN(3) == 0 {
					in.Kind = PopMax
				}
			}
			switch {
			case len(q) == 0:
				out.Empty = true
			case in.Kind == PopMax:
				out.Items = []Item{q[len(q)-1]}
				if applied {
					q = q[:len(q)-1]
				}
			default:
				out.Items = []Item{q[0]}
				if applied {
					q = q[1:]
				}
			}
		}
		if isOpen {
			// Open, or settled within its call (as a dequeue the harness
			// found in the journal): unknown output, but a finite return.
			out = Output{Unknown: true}
			if rng.IntN(2) == 0 {
				ret = math.MaxInt64
			}
		}
		h = append(h, porcupine.Operation{ClientId: i % 4, Input: in, Call: call, Output: out, Return: ret})
	}
	end := int64(10*n + 100)
	h = append(h, porcupine.Operation{ClientId: -1, Input: Input{Kind: Observe}, Call: end, Return: end,
		Output: Output{Items: append([]Item(nil), q...)}})
	if rng.IntN(2) == 0 {
		// Corrupt one known output that has items: another item.
		var with []int
		for i, o := range h {
			if out := o.Output.(Output); !out.Unknown && len(out.Items) > 0 {
				with = append(with, i)
			}
		}
		if len(with) > 0 {
			i := with[rng.IntN(len(with))]
			out := h[i].Output.(Output)
			out.Items = append([]Item(nil), out.Items...)
			out.Items[rng.IntN(len(out.Items))].ID = uint64(1 + rng.IntN(int(next)))
			h[i].Output = out
		}
	}
	return h, initial
}
