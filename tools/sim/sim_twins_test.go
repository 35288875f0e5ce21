package sim

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// The models keep a sequence of items, so twins (items of one ID) are
// counted: each must come out once, none may be lost or come out again.
func TestModelsWithTwins(t *testing.T) {
	twins := Input{Kind: EnqueueBatch, Item: Item{ID: 1}, N: 3, Items: []Item{{ID: 1}, {ID: 2}, {ID: 1}}}
	batch := Input{Kind: DequeueBatch, N: 5}
	for _, tc := range []struct {
		name    string
		model   porcupine.Model
		history []porcupine.Operation
		want    bool
	}{
		{"fifo: each twin out once", FIFOModel(nil), []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(1), ok),
			op(1, 5, 6, deq, got(1)), op(1, 7, 8, deq, got(1)), op(1, 9, 10, deq, empty),
		}, true},
		{"fifo: a twin lost", FIFOModel(nil), []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(1), ok),
			op(1, 5, 6, deq, got(1)), op(1, 9, 10, obs, observe()),
		}, false},
		{"fifo: a twin out once too often", FIFOModel(nil), []porcupine.Operation{
			op(0, 1, 2, enq(1), ok), op(0, 3, 4, enq(1), ok),
			op(1, 5, 6, deq, got(1)), op(1, 7, 8, deq, got(1)), op(1, 9, 10, deq, got(1)),
		}, false},
		{"fifo: a batch with twins is appended as a block", FIFOModel([]Item{{ID: 9}}), []porcupine.Operation{
			op(0, 1, 2, twins, ok), op(1, 3, 4, batch, got(9, 1, 2, 1)),
		}, true},
		{"fifo: a batch's twins in another order", FIFOModel(nil), []porcupine.Operation{
			op(0, 1, 2, twins, ok), op(1, 3, 4, batch, got(1, 1, 2)),
		}, false},
		{"fifo: a failed take put a twin back at the head", FIFOModel([]Item{{ID: 1}, {ID: 1}}), []porcupine.Operation{
			op(0, 1, 4, Input{Kind: Hide, Tag: 1}, ok), op(-2, 1, 4, Input{Kind: Unhide, Tag: 1}, ok),
			op(1, 2, 3, deq, got(1)), op(1, 5, 6, obs, observe(Item{ID: 1})),
		}, true},
		{"fifo: a failed take lost its twin", FIFOModel([]Item{{ID: 1}, {ID: 1}}), []porcupine.Operation{
			op(0, 1, 4, Input{Kind: Hide, Tag: 1}, ok), op(-2, 1, 4, Input{Kind: Unhide, Tag: 1}, ok),
			op(1, 2, 3, deq, got(1)), op(1, 5, 6, obs, observe()),
		}, false},
		{"by place: a failed take moved a twin to the tail", FIFOPlaceModel([]Item{{ID: 1}, {ID: 2}}), []porcupine.Operation{
			op(0, 1, 2, enq(1), ok),
			op(1, 3, 4, Input{Kind: Hide, Tag: 1, Tail: true}, ok), op(-2, 3, 4, Input{Kind: Unhide, Tag: 1, Tail: true}, ok),
			op(1, 5, 6, obs, observe(Item{ID: 2}, Item{ID: 1}, Item{ID: 1})),
		}, true},
		{"by place: a failed take lost a twin", FIFOPlaceModel([]Item{{ID: 1}, {ID: 2}}), []porcupine.Operation{
			op(0, 1, 2, enq(1), ok),
			op(1, 3, 4, Input{Kind: Hide, Tag: 1, Tail: true}, ok), op(-2, 3, 4, Input{Kind: Unhide, Tag: 1, Tail: true}, ok),
			op(1, 5, 6, obs, observe(Item{ID: 2}, Item{ID: 1})),
		}, false},
		{"priority: twins of one priority", PriorityModel(nil), []porcupine.Operation{
			op(0, 1, 2, push(1, 5), ok), op(1, 1, 2, push(1, 5), ok),
			op(0, 3, 4, Input{Kind: PopMax}, gotP(1, 5)), op(0, 5, 6, Input{Kind: PopMin}, gotP(1, 5)),
			op(0, 7, 8, Input{Kind: PopMin}, empty),
		}, true},
		{"priority: a twin of one priority lost", PriorityModel(nil), []porcupine.Operation{
			op(0, 1, 2, push(1, 5), ok), op(1, 1, 2, push(1, 5), ok),
			op(0, 3, 4, Input{Kind: PopMax}, gotP(1, 5)), op(0, 5, 6, obs, observe()),
		}, false},
		{"priority: a twin out twice", PriorityModel(nil), []porcupine.Operation{
			op(0, 1, 2, push(1, 5), ok), op(1, 1, 2, push(1, 7), ok),
			op(0, 3, 4, Input{Kind: PopMax}, gotP(1, 7)), op(0, 5, 6, Input{Kind: PopMax}, gotP(1, 7)),
		}, false},
		{"priority: a batch of twins", PriorityModel(nil), []porcupine.Operation{
			op(0, 1, 2, Input{Kind: PushBatch, Item: Item{ID: 1, Priority: 5}, N: 3, Items: []Item{{ID: 1, Priority: 5}, {ID: 2, Priority: 6}, {ID: 1, Priority: 5}}}, ok),
			op(0, 3, 4, obs, observe(Item{ID: 1, Priority: 5}, Item{ID: 1, Priority: 5}, Item{ID: 2, Priority: 6})),
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(tc.model, tc.history))
		})
	}
}

// With twins, a round's check and the final accounts still report a
// planted loss and a planted duplicate: an item of an ID enqueued twice
// that is missing, and one that comes out a third time. Planted rounds
// without a problem pass.
func TestChecksCatchTwinsLostOrDuplicated(t *testing.T) {
	ctx := context.Background()
	rec := func(call, ret int64, in Input, out Output) *record {
		return &record{op: op(int(call), call, ret, in, out)}
	}
	for _, tc := range []struct {
		name       string
		recs       []*record
		observed   []Item // and drained
		violations int
		want       Result // Lost, Duplicated, Phantom
	}{
		{"sound", []*record{rec(1, 2, enq(1), ok), rec(3, 4, enq(1), ok), rec(5, 6, deq, got(1))},
			[]Item{{ID: 1}}, 0, Result{}},
		{"a twin lost", []*record{rec(1, 2, enq(1), ok), rec(3, 4, enq(1), ok), rec(5, 6, deq, got(1))},
			nil, 1, Result{Lost: 1}},
		{"a twin lost, in a batch", []*record{rec(1, 2, Input{Kind: EnqueueBatch, Item: Item{ID: 1}, N: 2, Items: []Item{{ID: 1}, {ID: 1}}}, ok)},
			[]Item{{ID: 1}}, 1, Result{Lost: 1}},
		{"a twin returned and left", []*record{rec(1, 2, enq(1), ok), rec(3, 4, enq(1), ok), rec(5, 6, deq, got(1)), rec(7, 8, deq, got(1))},
			[]Item{{ID: 1}}, 1, Result{Duplicated: 1}},
		{"a twin returned three times", []*record{rec(1, 2, enq(1), ok), rec(3, 4, enq(1), ok), rec(5, 6, deq, got(1)), rec(7, 8, deq, got(1)), rec(9, 10, deq, got(1))},
			nil, 1, Result{Duplicated: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, tgt := plantedHarness(t, planted{observed: tc.observed, drained: tc.observed}, false)
			var res Result
			h.settle(ctx, 0, tgt, tc.recs, &res)
			require.Equal(t, tc.violations, res.Violations, "%v", res.Failure)
			taken := 0
			for _, r := range tc.recs {
				taken += len(r.op.Output.(Output).Items)
			}
			require.Equal(t, taken, res.TwinsTaken, "every item taken has a twin")
			h.finish(ctx, &res)
			require.Equal(t, tc.want, Result{Lost: res.Lost, Duplicated: res.Duplicated, Phantom: res.Phantom})
			require.Equal(t, tc.want == Result{} && tc.violations == 0, res.OK())
			if tc.violations > 0 {
				require.Contains(t, res.Failure.Reason, "not linearizable")
				require.Equal(t, []uint64{1}, res.Failure.twins, "the history names the items with twins")
			}
		})
	}
}

// A twinner makes twins of earlier items (its client's, the previous
// round's, the round's hot item), and in a PriorityQueue gives a
// twin an earlier item's priority only where the model allows it: a
// Push's twin of a Push's item; a PushBatch's twin of an item of the same
// batch, or, with priorities of their own (private), of a Push's item.
func TestTwinnerKeepsPrioritiesApart(t *testing.T) {
	for _, private := range []bool{false, true} {
		pool := []twinSource{{Item{ID: 1 << 40, Priority: 7}, true}, {Item{ID: 1<<40 + 1, Priority: 9}, false}}
		w := &twinner{rng: rand.New(rand.NewPCG(1, 2)), prob: 0.5, private: private, pool: pool, hot: &pool[0]}
		rng := rand.New(rand.NewPCG(3, 4))
		next := uint64(1)
		var twinned, samePrio int
		for range 2000 {
			var in Input
			switch rng.IntN(4) {
			case 0:
				in = Input{Kind: Enqueue, Item: Item{ID: next}}
			case 1:
				in = Input{Kind: EnqueueBatch, Item: Item{ID: next}, N: 2 + rng.IntN(5)}
			case 2:
				in = Input{Kind: Push, Item: Item{ID: next, Priority: int64(rng.Uint64())}}
			default:
				in = Input{Kind: PushBatch, Item: Item{ID: next, Priority: int64(rng.Uint64())}, N: 2 + rng.IntN(5)}
			}
			next++
			own := batchItems(in)
			out := w.apply(in)
			items := batchItems(out)
			require.Len(t, items, len(own))
			if out.Items != nil {
				require.Equal(t, items[0], out.Item)
				require.Equal(t, len(items), max(out.N, 1))
			}
			earlier := append(slices.Clone(pool), w.mine[:len(w.mine)-len(items)]...)
			for j, it := range items {
				if it == own[j] {
					continue
				}
				twinned++
				inBatch := slices.Contains(items[:j], it)
				require.True(t, inBatch || slices.ContainsFunc(earlier, func(s twinSource) bool { return s.item.ID == it.ID }),
					"item %d of %v repeats no earlier item", j, out)
				if it.Priority == own[j].Priority {
					continue
				}
				// A priority not its own: an earlier item's.
				fromPush := slices.ContainsFunc(earlier, func(s twinSource) bool { return s.single && s.item == it })
				switch in.Kind {
				case Push:
					require.True(t, fromPush, "a Push's twin at the priority of a batch's item")
				case PushBatch:
					require.True(t, inBatch || private && fromPush, "a PushBatch's twin at a priority not its batch's (private %v)", private)
				}
				samePrio++
			}
		}
		require.Equal(t, twinned, w.made)
		require.Greater(t, twinned, 1000)
		require.Greater(t, samePrio, 100)
	}
}
