package sim

import (
	"math"

	"github.com/anishathalye/porcupine"
)

// withoutOpenOps returns history without those of its open operations that
// observably did nothing and without its Hides and Unhides, or nil when it
// has none of these.
//
// An open operation (Output.Unknown, Return at the end of time) may have
// taken effect at any point after its call, or not at all, and porcupine
// tries it at every one of those points: a few open dequeues in a history
// are what makes most checks time out. Every open operation of a queue or
// priority queue (an enqueue, a push, a dequeue or a pop) is a legal step
// in any state, and since it returns after everything, it may be
// linearized last. So a linearization of the history without them,
// followed by them, is one of the whole history: if the smaller history is
// linearizable, so is the whole one. The converse does not hold (an open
// dequeue may have taken an item that was needed to explain what others
// returned), so a check of the smaller history that fails says nothing
// and the whole history must be checked.
//
// The same holds for the Hide and Unhide of a failed staged take, which
// share one interval: the two may come together at any point of it that a
// linearization of the rest leaves (every operation that returned before
// the call precedes every one called after the return), and there the
// Hide takes the head aside and the Unhide puts it back where it was, or
// (by place: Tail, checked with FIFOPlaceModel) the Hide takes nothing.
// So they are left out too; if the take did move an item to the tail, the
// smaller check fails and the whole history is checked.
//
// The smaller history is only worth checking when the operations left out
// observably did nothing, so withoutOpenOps leaves out the open enqueues
// none of whose items came out anywhere, and the open dequeues only when
// no item went missing (every item of initial and of the other enqueues
// came out of a known operation or is still there at the Observe, so no
// open dequeue took one). It returns nil when it would leave out nothing.
//
// Items are counted by ID (twins share one): none is missing when, for
// each ID, the items that came out or are still there are at least as
// many as those of initial and of the other enqueues. An open enqueue is
// left out only when no item of any of its IDs came out, its twins' either.
func withoutOpenOps(history []porcupine.Operation, initial []Item) []porcupine.Operation {
	seen := map[uint64]int{}
	for _, o := range history {
		if out := o.Output.(Output); !out.Unknown {
			for _, it := range out.Items {
				seen[it.ID]++
			}
		}
	}
	isOpen := func(o porcupine.Operation) bool {
		return o.Output.(Output).Unknown && o.Return == math.MaxInt64
	}
	unseenEnqueue := func(o porcupine.Operation) bool {
		in := o.Input.(Input)
		if !isEnqueue(in.Kind) {
			return false
		}
		for _, id := range BatchIDs(in) {
			if seen[id] > 0 {
				return false
			}
		}
		return true
	}
	// Leave out the open dequeues too if no item is missing.
	need := map[uint64]int{}
	for _, it := range initial {
		need[it.ID]++
	}
	for _, o := range history {
		if !isOpen(o) || !unseenEnqueue(o) {
			for _, id := range BatchIDs(o.Input.(Input)) {
				need[id]++
			}
		}
	}
	noneMissing := true
	for id, n := range need {
		noneMissing = noneMissing && seen[id] >= n
	}
	var reduced []porcupine.Operation
	for i, o := range history {
		k := o.Input.(Input).Kind
		leave := isOpen(o) && (unseenEnqueue(o) || noneMissing && isTake(k)) || k == Hide || k == Unhide
		switch {
		case leave && reduced == nil:
			reduced = append(make([]porcupine.Operation, 0, len(history)), history[:i]...)
		case !leave && reduced != nil:
			reduced = append(reduced, o)
		}
	}
	return reduced
}
