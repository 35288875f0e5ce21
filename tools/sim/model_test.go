package sim

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// op builds an operation for hand-written histories.
func op(client int, call, ret int64, in Input, out Output) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

func enq(id uint64) Input           { return Input{Kind: Enqueue, Item: Item{ID: id}} }
func push(id uint64, p int64) Input { return Input{Kind: Push, Item: Item{ID: id, Priority: p}} }
func got(ids ...uint64) Output {
	out := Output{}
	for _, id := range ids {
		out.Items = append(out.Items, Item{ID: id})
	}
	return out
}
func gotP(id uint64, p int64) Output { return Output{Items: []Item{{ID: id, Priority: p}}} }
func observe(items ...Item) Output   { return Output{Items: items} }

var (
	ok      = Output{}
	empty   = Output{Empty: true}
	unknown = Output{Unknown: true}
	deq     = Input{Kind: Dequeue}
	obs     = Input{Kind: Observe}
	end     = int64(math.MaxInt64)
)

func TestFIFOModel(t *testing.T) {
	for _, tc := range []struct {
		name    string
		initial []Item
		history []porcupine.Operation
		want    bool
	}{
		{"sequential FIFO", nil, []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(2), ok),
			op(1, 5, 6, deq, got(1)), op(1, 7, 8, deq, got(2)), op(1, 9, 10, deq, empty),
		}, true},
		{"out of order", nil, []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(2), ok), op(1, 5, 6, deq, got(2)),
		}, false},
		{"concurrent enqueues in either order", nil, []porcupine.Operation{
			op(0, 1, 4, enq(1), ok), op(1, 2, 3, enq(2), ok),
			op(2, 5, 6, deq, got(2)), op(2, 7, 8, deq, got(1)),
		}, true},
		{"an item returned twice", nil, []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(1, 3, 4, deq, got(1)), op(2, 5, 6, deq, got(1)),
		}, false},
		{"an item lost", nil, []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(2), ok),
			op(1, 5, 6, deq, got(2)), op(2, 7, 8, obs, observe()),
		}, false},
		{"empty while an item is there", []Item{{ID: 9}}, []porcupine.Operation{
			op(1, 1, 2, deq, empty),
		}, false},
		{"the initial state carries over", []Item{{ID: 9}}, []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(1, 3, 4, deq, got(9)), op(2, 5, 6, obs, observe(Item{ID: 1})),
		}, true},
		{"a batch takes a prefix, maybe shorter than asked", []Item{{ID: 1}, {ID: 2}, {ID: 3}}, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: DequeueBatch, N: 3}, got(1, 2)), op(0, 3, 4, obs, observe(Item{ID: 3})),
		}, true},
		{"a batch longer than asked", []Item{{ID: 1}, {ID: 2}, {ID: 3}}, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: DequeueBatch, N: 2}, got(1, 2, 3)),
		}, false},
		{"a batch is appended as a block", []Item{{ID: 9}}, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: EnqueueBatch, Item: Item{ID: 1}, N: 3}, ok),
			op(1, 3, 4, Input{Kind: DequeueBatch, N: 10}, got(9, 1, 1+1<<32, 1+2<<32)),
		}, true},
		{"an item inside a batch", nil, []porcupine.Operation{
			op(0, 1, 4, Input{Kind: EnqueueBatch, Item: Item{ID: 1}, N: 2}, ok), op(1, 2, 3, enq(7), ok),
			op(2, 5, 6, obs, observe(Item{ID: 1}, Item{ID: 7}, Item{ID: 1 + 1<<32})),
		}, false},
		{"a batch out of order", nil, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: EnqueueBatch, Item: Item{ID: 1}, N: 2}, ok),
			op(1, 3, 4, obs, observe(Item{ID: 1 + 1<<32}, Item{ID: 1})),
		}, false},
		{"an unknown enqueue that happened", nil, []porcupine.Operation{
			op(0, 1, end, enq(1), unknown), op(1, 2, 3, deq, got(1)), op(2, 4, 5, obs, observe()),
		}, true},
		{"an unknown enqueue that did not happen", nil, []porcupine.Operation{
			op(0, 1, end, enq(1), unknown), op(1, 2, 3, deq, empty), op(2, 4, 5, obs, observe()),
		}, true},
		{"an unknown dequeue that took an item nobody saw", []Item{{ID: 1}, {ID: 2}}, []porcupine.Operation{
			op(0, 1, end, deq, unknown), op(1, 2, 3, deq, got(2)), op(2, 4, 5, obs, observe()),
		}, true},
		{"an unknown dequeue after a known one", []Item{{ID: 1}, {ID: 2}}, []porcupine.Operation{
			op(1, 1, 2, deq, got(1)), op(0, 3, end, deq, unknown), op(2, 4, 5, obs, observe(Item{ID: 2})),
		}, true},
		{"an unknown dequeue does not explain two losses", []Item{{ID: 1}, {ID: 2}}, []porcupine.Operation{
			op(0, 1, end, deq, unknown), op(2, 4, 5, obs, observe()),
		}, false},
		{"a staged take hides the head and puts it back", []Item{{ID: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 7}, ok), op(3, 1, 10, Input{Kind: Unhide, Tag: 7}, ok),
			op(1, 2, 3, deq, empty), op(1, 4, 5, enq(2), ok), op(2, 11, 12, obs, observe(Item{ID: 1}, Item{ID: 2})),
		}, true},
		{"a hidden item comes back at the head", []Item{{ID: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 7}, ok), op(3, 1, 10, Input{Kind: Unhide, Tag: 7}, ok),
			op(1, 2, 3, deq, empty), op(1, 4, 5, enq(2), ok), op(2, 11, 12, obs, observe(Item{ID: 2}, Item{ID: 1})),
		}, false},
		{"a wait never returns empty", nil, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: Dequeue, Wait: true}, empty),
		}, false},
		{"an unknown batch takes at most n", []Item{{ID: 1}, {ID: 2}, {ID: 3}}, []porcupine.Operation{
			op(0, 1, end, Input{Kind: DequeueBatch, N: 2}, unknown), op(1, 2, 3, obs, observe()),
		}, false},
		{"a staged take that kept its item", []Item{{ID: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 7}, ok), op(3, 1, 10, Input{Kind: Unhide, Tag: 7}, ok), op(2, 11, 12, obs, observe()),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(FIFOModel(tc.initial), tc.history))
		})
	}
}

func TestPriorityModel(t *testing.T) {
	popMin, popMax := Input{Kind: PopMin}, Input{Kind: PopMax}
	for _, tc := range []struct {
		name    string
		initial []Item
		history []porcupine.Operation
		want    bool
	}{
		{"by priority", nil, []porcupine.Operation{
			op(0, 1, 2, push(1, 5), ok), op(0, 3, 4, push(2, -3), ok), op(0, 5, 6, push(3, math.MaxInt64), ok),
			op(1, 7, 8, popMin, gotP(2, -3)), op(1, 9, 10, popMax, gotP(3, math.MaxInt64)), op(1, 11, 12, popMin, gotP(1, 5)),
			op(1, 13, 14, popMax, empty),
		}, true},
		{"PopMin is FIFO among equal priorities", nil, []porcupine.Operation{
			op(0, 1, 2, push(1, 0), ok), op(0, 3, 4, push(2, 0), ok), op(1, 5, 6, popMin, gotP(2, 0)),
		}, false},
		{"PopMax takes the last pushed among equals", nil, []porcupine.Operation{
			op(0, 1, 2, push(1, 0), ok), op(0, 3, 4, push(2, 0), ok), op(1, 5, 6, popMax, gotP(2, 0)),
			op(1, 7, 8, popMax, gotP(1, 0)),
		}, true},
		{"concurrent pushes of one priority in either order", nil, []porcupine.Operation{
			op(0, 1, 4, push(1, 0), ok), op(1, 2, 3, push(2, 0), ok), op(2, 5, 6, popMin, gotP(2, 0)),
		}, true},
		{"the priority is part of the item", nil, []porcupine.Operation{
			op(0, 1, 2, push(1, 4), ok), op(1, 3, 4, popMin, gotP(1, 5)),
		}, false},
		{"MinInt64 and MaxInt64 sort at the ends", []Item{{ID: 5, Priority: 0}}, []porcupine.Operation{
			op(0, 1, 2, push(1, math.MinInt64), ok), op(0, 3, 4, push(2, math.MaxInt64), ok),
			op(1, 5, 6, obs, observe(Item{ID: 1, Priority: math.MinInt64}, Item{ID: 5}, Item{ID: 2, Priority: math.MaxInt64})),
		}, true},
		{"an unknown pop takes the minimum", []Item{{ID: 1, Priority: 1}, {ID: 2, Priority: 2}}, []porcupine.Operation{
			op(0, 1, end, popMin, unknown), op(1, 2, 3, obs, observe(Item{ID: 2, Priority: 2})),
		}, true},
		{"an unknown pop does not take the maximum", []Item{{ID: 1, Priority: 1}, {ID: 2, Priority: 2}}, []porcupine.Operation{
			op(0, 1, end, popMin, unknown), op(1, 2, 3, obs, observe(Item{ID: 1, Priority: 1})),
		}, false},
		{"a hidden maximum goes back last among its equals", []Item{{ID: 1, Priority: 1}, {ID: 2, Priority: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 3, Max: true}, ok), op(2, 1, 10, Input{Kind: Unhide, Tag: 3, Max: true}, ok),
			op(1, 2, 3, popMax, gotP(1, 1)), op(1, 4, 5, obs, observe(Item{ID: 2, Priority: 1})),
		}, true},
		{"a hidden minimum does not go back last among its equals", []Item{{ID: 1, Priority: 1}, {ID: 2, Priority: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 3}, ok), op(2, 1, 10, Input{Kind: Unhide, Tag: 3}, ok),
			op(1, 11, 12, obs, observe(Item{ID: 2, Priority: 1}, Item{ID: 1, Priority: 1})),
		}, false},
		{"a staged pop that kept its item", []Item{{ID: 1, Priority: 1}}, []porcupine.Operation{
			op(0, 1, 10, Input{Kind: Hide, Tag: 3}, ok), op(2, 1, 10, Input{Kind: Unhide, Tag: 3}, ok), op(1, 11, 12, obs, observe()),
		}, false},
		{"a wait never returns empty", nil, []porcupine.Operation{
			op(0, 1, 2, Input{Kind: PopMin, Wait: true}, empty),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(PriorityModel(tc.initial), tc.history))
		})
	}
}

// mixedBatch returns a PushBatch of n items from base whose priorities
// (BatchPriorities) repeat one and hold at least two, and the indices i <
// j of two items of one priority.
func mixedBatch(t *testing.T, n int, base int64) (in Input, i, j int) {
	t.Helper()
	for id := uint64(1); id < 1000; id++ {
		in = Input{Kind: PushBatch, Item: Item{ID: id, Priority: base}, N: n}
		ps := BatchPriorities(in)
		if slices.Min(ps) == slices.Max(ps) {
			continue
		}
		for i := range ps {
			for j := i + 1; j < len(ps); j++ {
				if ps[i] == ps[j] {
					return in, i, j
				}
			}
		}
	}
	t.Fatal("no batch mixes priorities with a repeat")
	return
}

// sortedByPriority is items stably sorted by priority: the order of a
// priority queue into which they were pushed one after another.
func sortedByPriority(items ...[]Item) []Item {
	all := slices.Concat(items...)
	slices.SortStableFunc(all, func(a, b Item) int { return cmp.Compare(a.Priority, b.Priority) })
	return all
}

func TestBatchPriorities(t *testing.T) {
	mixed, repeats := 0, 0
	for id := uint64(1); id <= 100; id++ {
		in := Input{Kind: PushBatch, Item: Item{ID: id, Priority: 16}, N: 4}
		ps := BatchPriorities(in)
		require.Equal(t, ps, BatchPriorities(in), "not deterministic")
		require.Len(t, ps, 4)
		distinct := map[int64]bool{}
		for _, p := range ps {
			require.True(t, p >= 16 && p <= 18, "priority %d outside base..base+2", p)
			distinct[p] = true
		}
		if len(distinct) > 1 {
			mixed++
		}
		if len(distinct) < 4 {
			repeats++
		}
	}
	require.Greater(t, mixed, 50, "batches should mostly mix priorities")
	require.Greater(t, repeats, 50, "batches should mostly repeat a priority")
	for id := uint64(1); id <= 20; id++ {
		for _, p := range BatchPriorities(Input{Kind: PushBatch, Item: Item{ID: id, Priority: math.MaxInt64}, N: 6}) {
			require.True(t, p <= math.MaxInt64 && p >= math.MaxInt64-2)
		}
	}
}

func TestPriorityModelPushBatch(t *testing.T) {
	in, i, j := mixedBatch(t, 5, 16)
	items := batchItems(in)
	// Items already there at each of the batch's priorities, and one below.
	initial := []Item{{ID: 90, Priority: 15}, {ID: 91, Priority: 16}, {ID: 92, Priority: 17}, {ID: 93, Priority: 18}}
	want := sortedByPriority(initial, items)
	swapped := slices.Clone(want)
	a, b := slices.Index(swapped, items[i]), slices.Index(swapped, items[j])
	swapped[a], swapped[b] = swapped[b], swapped[a]
	partial := slices.DeleteFunc(slices.Clone(want), func(it Item) bool { return it == items[j] })
	duplicated := slices.Insert(slices.Clone(want), slices.Index(want, items[j]), items[j])
	// A Push of items[i]'s priority concurrent with the batch, seen between
	// items[i] and items[j]: it would need the batch's items apart.
	x := Item{ID: 7, Priority: items[i].Priority}
	between := slices.Insert(slices.Clone(want), slices.Index(want, items[j]), x)
	before := sortedByPriority(initial, []Item{x}, items)
	batch := func(out Output) porcupine.Operation { return op(0, 1, 4, in, out) }
	for _, tc := range []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"in batch order, after the items there", []porcupine.Operation{
			batch(ok), op(1, 5, 6, obs, observe(want...)),
		}, true},
		{"out of batch order within a priority", []porcupine.Operation{
			batch(ok), op(1, 5, 6, obs, observe(swapped...)),
		}, false},
		{"a partial batch", []porcupine.Operation{
			batch(ok), op(1, 5, 6, obs, observe(partial...)),
		}, false},
		{"an item pushed twice", []porcupine.Operation{
			batch(ok), op(1, 5, 6, obs, observe(duplicated...)),
		}, false},
		{"a concurrent push before the batch", []porcupine.Operation{
			batch(ok), op(1, 2, 3, push(x.ID, x.Priority), ok), op(1, 5, 6, obs, observe(before...)),
		}, true},
		{"a concurrent push inside the batch", []porcupine.Operation{
			batch(ok), op(1, 2, 3, push(x.ID, x.Priority), ok), op(1, 5, 6, obs, observe(between...)),
		}, false},
		{"pops take the batch's items in order", []porcupine.Operation{
			op(0, 1, 2, in, ok),
			op(1, 3, 4, Input{Kind: PopMin}, gotP(90, 15)), op(1, 5, 6, Input{Kind: PopMin}, gotP(want[1].ID, want[1].Priority)),
			op(1, 7, 8, Input{Kind: PopMax}, gotP(want[len(want)-1].ID, want[len(want)-1].Priority)),
			op(1, 9, 10, obs, observe(want[2:len(want)-1]...)),
		}, true},
		{"an unknown batch that happened", []porcupine.Operation{
			op(0, 1, end, in, unknown), op(1, 5, 6, obs, observe(want...)),
		}, true},
		{"an unknown batch that did not happen", []porcupine.Operation{
			op(0, 1, end, in, unknown), op(1, 5, 6, obs, observe(initial...)),
		}, true},
		{"an unknown batch did not happen in part", []porcupine.Operation{
			op(0, 1, end, in, unknown), op(1, 5, 6, obs, observe(partial...)),
		}, false},
		{"an unknown batch did not happen twice", []porcupine.Operation{
			op(0, 1, end, in, unknown), op(1, 5, 6, obs, observe(duplicated...)),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(PriorityModel(initial), tc.history))
		})
	}
}
