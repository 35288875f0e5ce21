package sim

import (
	"math/rand/v2"
	"slices"
)

// twinSource is an earlier item a twin may repeat: its ID and priority,
// and whether a Push pushed it (single), whose priority, in a
// PriorityQueue, only its own twins may share without the model rejecting
// an order the layer may legitimately produce (see Config.TwinProb).
type twinSource struct {
	item   Item
	single bool
}

// twinner makes some of one client's enqueued items twins of earlier
// items (Config.TwinProb), drawing from a source of its own so that the
// client's other draws are those of a run without twins.
type twinner struct {
	rng  *rand.Rand
	prob float64
	// private: pushes have priorities of their own (staged seeds without
	// StagingReorder), so a PushBatch may give a twin the priority of an
	// earlier Push's item, which only that item's twins share.
	private bool
	pool    []twinSource // the target's previous round's items (read only)
	mine    []twinSource // this client's items of the round, latest last
	made    int          // twin items made
	// hot is the round's hot item of a PriorityQueue, which every client
	// repeats now and then (as many callers push one message, "refresh
	// the cache", at once), so that equal items are pushed concurrently
	// at one priority while pops take them: a Push's item of the previous
	// round at the largest priority (even rounds) or the smallest (odd
	// ones), whose twins are mostly pushed at its priority; nil when there
	// is none. (A Queue has none: its checks' search, with concurrent
	// enqueues of equal items, times out too often.)
	hot *twinSource
}

// newTwinner returns the twinner of client c of target ti in round, or
// nil when the configuration makes no twins.
func (h *harness) newTwinner(t *target, round, ti, c int) *twinner {
	if h.cfg.TwinProb <= 0 {
		return nil
	}
	return &twinner{
		rng:     rand.New(rand.NewPCG(mix(uint64(h.seed)^0x7717), uint64(round)<<32|uint64(ti)<<16|uint64(c))),
		prob:    h.cfg.TwinProb,
		private: t.staged && !h.cfg.StagingReorder,
		pool:    t.twinPool,
		hot:     hotItem(t, round),
	}
}

// hotItem returns round's hot item of t (see twinner.hot), or nil.
func hotItem(t *target, round int) *twinSource {
	if _, ok := t.s.(*prio); !ok {
		return nil
	}
	var hot *twinSource
	for i, s := range t.twinPool {
		if !s.single {
			continue
		}
		if hot == nil || round%2 == 0 && s.item.Priority > hot.item.Priority || round%2 == 1 && s.item.Priority < hot.item.Priority {
			hot = &t.twinPool[i]
		}
	}
	return hot
}

// pick returns an earlier item to repeat: a third of the time the
// round's hot item, else half the time the client's latest, else one of
// the client's items of the round or of the previous round's, at random.
func (w *twinner) pick() (twinSource, bool) {
	if w.hot != nil && w.rng.IntN(3) == 0 {
		return *w.hot, true
	}
	n := len(w.mine) + len(w.pool)
	switch {
	case n == 0:
		return twinSource{}, false
	case len(w.mine) > 0 && w.rng.IntN(2) == 0:
		return w.mine[len(w.mine)-1], true
	}
	if i := w.rng.IntN(n); i < len(w.mine) {
		return w.mine[i], true
	} else {
		return w.pool[i-len(w.mine)], true
	}
}

// apply returns in with some of its items made twins (Input.Items set), if
// in is an enqueue; other operations it returns as they are.
func (w *twinner) apply(in Input) Input {
	if !isEnqueue(in.Kind) {
		return in
	}
	items := batchItems(in)
	twins := false
	for j := range items {
		if w.rng.Float64() >= w.prob {
			continue
		}
		if j > 0 && w.rng.IntN(2) == 0 {
			// An earlier item of the batch, priority and all: a batch's
			// priorities are its own.
			items[j] = items[w.rng.IntN(j)]
		} else {
			src, ok := w.pick()
			if !ok {
				continue
			}
			items[j].ID = src.item.ID
			samePrio := in.Kind == Push && src.single || in.Kind == PushBatch && src.single && w.private
			if samePrio && w.rng.IntN(4) != 0 {
				items[j].Priority = src.item.Priority
			}
		}
		twins = true
		w.made++
	}
	for _, it := range items {
		w.mine = append(w.mine, twinSource{item: it, single: in.Kind == Push})
	}
	if twins {
		in.Items = slices.Clip(items)
		in.Item = items[0]
	}
	return in
}
