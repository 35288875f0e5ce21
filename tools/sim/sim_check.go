package sim

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// settle ends a target's round: recover some unknown operations, observe,
// resolve what the observation settles, check the history, and update the
// item accounts.
func (h *harness) settle(ctx context.Context, round int, t *target, recs []*record, res *Result) {
	fail := func(reason string) {
		if res.Failure == nil {
			res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(), Reason: reason}
		}
	}
	// Recover in call order, so that a seed recovers the same operations
	// as far as scheduling allows.
	sort.Slice(recs, func(i, j int) bool { return recs[i].op.Call < recs[j].op.Call })
	t.noteEnqueues(recs)
	// An operation of unknown outcome whose commit may have been in
	// flight when it returned may have taken effect after that: a commit
	// interrupted in flight goes on (on FoundationDB, and in memdb with
	// Faults.LateLanding), up to the quiescent point (round). Whatever
	// settles it below, its effect then lies between its call and now.
	// (Without late landings memdb decides such a commit before Commit
	// returns, and the shorter interval keeps checks fast.) One that
	// failed otherwise had the layer settle its outcome within the call:
	// if it did not, the check fails.
	if h.cfg.Faults.LateLanding > 0 || h.cfg.DB != nil {
		settleStart := h.now()
		for _, r := range recs {
			if r.unknown && r.inFlight {
				r.op.Return = settleStart
			}
		}
	}
	var extra []*record
	for _, r := range recs {
		if !r.unknown || h.cfg.WithoutIdempotency {
			continue
		}
		in := r.op.Input.(Input)
		isStaged := t.staged && (in.Kind == Dequeue || in.Kind == PopMin || in.Kind == PopMax)
		if !r.recover && !isStaged {
			continue
		}
		if r.expired && !isStaged {
			// Past its journal retention: a call under its ID fails with
			// ErrOperationExpired too, and whether it took effect is not
			// known (ErrOperationExpired's doc). It stays open below.
			r.failed += "; left open"
			continue
		}
		if isStaged {
			// A staged take that failed either kept its item (then its
			// journal record is there and the recovery below returns it)
			// or wrote it back when its context ended (or took nothing):
			// a Hide and an Unhide within its call.
			//
			// One under an ID the layer made has no record the harness
			// can read: it is a Hide and an Unhide. That is what the
			// layer promises (docs/design.md, "Staged dequeue": when the
			// caller's context ends, the cleanup returns an item already
			// handed to it; a take whose claim expired took nothing; a
			// cleanup that failed is reported above as a failed
			// withdrawal). Had it kept its item, nothing could recover
			// it: the item would be missing and the check would fail.
			//
			// Unless the layer said so: a take that failed maybe
			// committed (its cleanup found several takes of equal items
			// and could not tell which one its take holds, so it left
			// the item in the take's journal record for a call under the
			// ID the error names) is of unknown outcome. Under an ID the
			// layer made it is abandoned, as other calls under such IDs
			// are: it stays open below, a dequeue that may have taken an
			// item.
			//
			// So is one past its journal retention that the layer says
			// may have committed: its cleanup found no record of the
			// takes in doubt, and an expiry may have cleared the record
			// of one that applied (ErrOperationExpired's doc). Its
			// journal cannot settle it, nor a call under its ID, which
			// fails with ErrOperationExpired too.
			if r.inFlight && (r.layerID || r.expired) {
				r.failed += "; left open"
				continue
			}
			applied := false
			if !r.layerID {
				var err error
				if applied, err = journaled(ctx, h.db, t.s.prefix(), r.id); err != nil {
					res.Unexpected++
					fail(fmt.Sprintf("reading the journal: %v", err))
					continue
				}
			}
			if applied && (r.trusted || r.expired) {
				// An expired one that the layer does not say may have
				// committed put back the item of the take whose record
				// its cleanup found, and erased the record.
				res.Violations++
				fail(fmt.Sprintf("%v failed with an error kv.MaybeCommitted rejects, yet its journal record says it took an item", in.Kind))
				continue
			}
			if !applied {
				tag := r.op.Call
				r.op.Input = Input{Kind: Hide, Tag: uint64(tag), Max: in.Kind == PopMax, Tail: t.byPlace()}
				r.op.Output = Output{}
				r.unknown = false
				un := &record{op: r.op}
				un.op.Input = Input{Kind: Unhide, Tag: uint64(tag), Max: in.Kind == PopMax, Tail: t.byPlace()}
				un.op.ClientId = -2 - len(extra) // a client of its own, for the visualization
				extra = append(extra, un)
				r.failed += "; checked as a Hide and an Unhide"
				res.Hidden++
				continue
			}
			// The first call took effect; the recovery replays it.
			in.Wait = false
			r.op.Input = in
		}
		// The journal's layout is documented (package fdbqueue, "Key
		// layout"): its record tells whether the first call took effect.
		// If it did, the operation took effect within the first call; if
		// not (memdb decides a commit before Commit returns), the recovery
		// performs it now. Either way its interval is short, which keeps
		// the check fast; if the record lied, the check would fail.
		applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("reading the journal: %v", err))
			continue
		}
		call := h.now()
		out, err := t.s.run(ctx, h.db, in, r.id)
		switch {
		case err == nil:
			r.op.Output = out
		case errors.Is(err, fdbqueue.ErrEmpty):
			r.op.Output = Output{Empty: true}
		case errors.Is(err, fdbqueue.ErrOperationExpired):
			// The round outlasted the journal retention (a short one,
			// on a loaded machine): the call under its ID no longer
			// settles it (ErrOperationExpired's doc). It stays open, as
			// a call that expired itself does.
			r.failed += "; left open (recovered past its retention)"
			continue
		default:
			res.Unexpected++
			fail(fmt.Sprintf("recovering %v: %v", in.Kind, err))
			continue
		}
		if ret := h.now(); !applied {
			r.op.Call, r.op.Return = call, ret
		}
		r.unknown = false
		res.Recovered++
	}

	recs = append(recs, extra...)

	observed, err := t.s.observe(ctx, h.db)
	if err != nil {
		res.Unexpected++
		fail(fmt.Sprintf("observe: %v", err))
		return
	}
	observe := porcupine.Operation{ClientId: -1, Input: Input{Kind: Observe}, Call: h.now(), Output: Output{Items: observed}}
	observe.Return = h.now()

	// Dequeues of unknown outcome that were not recovered: up to MaxOpen
	// of them stay open (they may have removed an item at any time after
	// their call, or nothing). Beyond that, or to keep the checks short,
	// the journal says whether they took effect: if so, they removed an
	// item nobody saw within their call; if not, they are left out. Those
	// the journal cannot settle stay open whatever their number
	// (record.journalBlind).
	open := 0
	for _, r := range recs {
		in := r.op.Input.(Input)
		if !r.unknown || isEnqueue(in.Kind) {
			continue
		}
		if h.cfg.WithoutIdempotency || open < h.cfg.MaxOpen || r.journalBlind() {
			r.op.Output = Output{Unknown: true}
			r.op.Return = math.MaxInt64
			open++
			continue
		}
		applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("reading the journal: %v", err))
		}
		r.op.Output = Output{Unknown: true}
		r.dropped = !applied
	}

	// An item that came out of a known dequeue or is still there was
	// enqueued; memdb decides a commit before Commit returns, so an
	// enqueue of unknown outcome whose item appeared took effect within
	// its call. One whose item appeared nowhere did not take effect,
	// unless an open dequeue may have taken it. An item with twins
	// (t.attempted) that appeared tells nothing about one enqueue: it may
	// be a twin's.
	appeared := map[uint64]bool{}
	for _, it := range observed {
		appeared[it.ID] = true
	}
	res.TwinsTogether += len(observed) - len(appeared)
	for _, r := range recs {
		if !r.dropped && !r.unknown {
			for _, it := range r.op.Output.(Output).Items {
				appeared[it.ID] = true
			}
		}
	}

	history := make([]porcupine.Operation, 0, len(recs)+1)
	for _, r := range recs {
		if r.dropped {
			continue
		}
		in := r.op.Input.(Input)
		switch in.Kind {
		case Enqueue, EnqueueBatch, Push, PushBatch:
			ids := BatchIDs(in)
			mark := func(maybe bool) {
				for _, x := range ids {
					c := t.enqueued[x]
					if maybe {
						c.maybe++
					} else {
						c.known++
					}
					t.enqueued[x] = c
				}
			}
			switch {
			case !r.unknown:
				mark(false)
			case slices.ContainsFunc(ids, func(x uint64) bool { return appeared[x] && t.attempted[x] == 1 }):
				// A batch is all or none: one of its items seen is
				// all of them enqueued (an item no other enqueue
				// has: not one with twins).
				r.op.Output = Output{}
				mark(false)
			case open == 0 && !slices.ContainsFunc(ids, func(x uint64) bool { return appeared[x] }):
				continue // it did not take effect
			case h.cfg.WithoutIdempotency || open < h.cfg.MaxOpen || r.journalBlind():
				r.op.Output = Output{Unknown: true}
				r.op.Return = math.MaxInt64
				mark(true)
				res.Unknown++
				open++
			default:
				// Settled from the journal: if it took effect, an open
				// dequeue took its item, or its item is one of those of
				// its IDs that appeared (it has twins).
				applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
				if err != nil {
					res.Unexpected++
					fail(fmt.Sprintf("reading the journal: %v", err))
				}
				if !applied {
					continue
				}
				r.op.Output = Output{}
				mark(false)
			}
		default:
			if r.unknown {
				res.Unknown++
				t.capacity += max(in.N, 1)
			} else {
				for _, it := range r.op.Output.(Output).Items {
					t.returned[it.ID]++
					if t.attempted[it.ID] > 1 {
						res.TwinsTaken++
					}
				}
			}
		}
		history = append(history, r.op)
	}
	history = append(history, observe)
	clients := map[int]int{}
	for i := range history {
		// porcupine wants small client numbers for its visualization.
		id, ok := clients[history[i].ClientId]
		if !ok {
			id = len(clients)
			clients[history[i].ClientId] = id
		}
		history[i].ClientId = id
	}

	model := t.s.model(t.state)
	failed := failedCalls(recs, clients)
	t.rounds = append(t.rounds, checkedRound{round: round, start: t.state, model: model, history: history, failedCalls: failed})
	res.Histories++
	res.Operations += len(history)
	began := time.Now()
	defer h.pause(began) // the checks take no time on the layers' clock
	// Illegal until a smaller history is found linearizable or undecided.
	cr := porcupine.Illegal
	if reduced := withoutOpenOps(history, t.state); reduced != nil {
		// Without the open operations that observably did nothing and
		// the failed takes' Hides and Unhides: if that history is
		// linearizable, so is this one (reduce.go). If it is not, this
		// one is checked. If its check timed out, this one, which holds
		// more to search, is not checked: the check is inconclusive,
		// and takes no longer than one check (in CI's runs, no history
		// whose smaller check timed out was decided by the whole one).
		cr = porcupine.CheckOperationsTimeout(model, reduced, h.cfg.CheckTimeout)
		if cr == porcupine.Ok {
			res.DecidedWithoutOpen++
		}
	}
	if cr == porcupine.Illegal {
		cr = porcupine.CheckOperationsTimeout(model, history, h.cfg.CheckTimeout)
	}
	if h.cfg.Log != nil {
		h.cfg.Log("seed %d round %d %s: %d operations, %d open: %v in %v", h.seed, round, t.s.name(), len(history), open, cr, time.Since(began).Round(time.Millisecond))
	}
	switch cr {
	case porcupine.Illegal:
		res.Violations++
		if res.Failure == nil {
			res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(),
				Reason: fmt.Sprintf("history of %d operations is not linearizable", len(history)),
				model:  model, history: history, failedCalls: failed}
			res.Failure.linearize(h.cfg.CheckTimeout)
			ids := make([]uint64, 0, len(t.enqueued))
			for id := range t.enqueued {
				ids = append(ids, id)
			}
			held, rerr := residue(ctx, h.db, t.s.prefix(), ids)
			if rerr != nil {
				held = []string{fmt.Sprintf("reading the meta subspace failed: %v", rerr)}
			}
			res.Failure.residue = held
			res.Failure.twins = t.twinsIn(history)
		}
	case porcupine.Unknown:
		res.Inconclusive++
		t.rounds[len(t.rounds)-1].undecided = true
	}
	t.state = observed
}

// journalBlind reports whether the journal cannot settle r: it ran under
// an ID the layer made (a slot, whose key the harness does not know), or
// it failed past its journal retention (an expiry may have cleared its
// record).
func (r *record) journalBlind() bool { return r.layerID || r.expired }

// journaled reports whether the journal of the queue at prefix holds a
// record of the operation id.
func journaled(ctx context.Context, db kv.Database, prefix []byte, id fdbqueue.OpID) (bool, error) {
	p, err := tuple.Tuple{"j", int64(id[8]), id[:]}.AppendPack(append(bytes.Clone(prefix), 0xff)) // (shard, ID): see fdbqueue's journal.go
	if err != nil {
		return false, err
	}
	r := kv.KeyRange{Begin: append(bytes.Clone(p), 0x00), End: append(p, 0xff)}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
	})
	return len(kvs) > 0, err
}

// finish drains every target and checks the item accounts.
func (h *harness) finish(ctx context.Context, res *Result) {
	h.db.setFaults(memdb.Faults{})
	for _, t := range h.targets {
		fail := func(reason string) {
			if res.Failure == nil {
				res.Failure = &Failure{Seed: h.seed, Round: h.cfg.Rounds, Structure: t.s.name(), Reason: reason}
			}
		}
		drained, err := t.s.drain(ctx, h.db)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("drain: %v", err))
		}
		if !sameItems(drained, t.state) {
			res.DrainDiffers++
			fail(fmt.Sprintf("the final drain returned %s, the final read %s", describeItems(drained, true), describeItems(t.state, true)))
		}
		c := t.account(drained)
		res.Lost += c.lost
		res.Duplicated += c.duplicated
		res.Phantom += c.phantom
		if c.lost+c.duplicated+c.phantom > 0 {
			reason := fmt.Sprintf("conservation: %d lost, %d duplicated, %d phantom (e.g. item %d)", c.lost, c.duplicated, c.phantom, c.example)
			if res.Failure == nil {
				res.Failure = t.lastRoundWith(ctx, h, c.example, reason)
			}
			fail(reason)
		}
	}
}

// lastRoundWith returns a failure, for reason, that holds the history of
// the last round whose starting state or operations hold item id, with
// porcupine's partial linearizations of it (so that it can be written and
// visualized) and the meta keys whose values hold items: the round where
// a lost item was last seen. Nil if no round mentions id.
func (t *target) lastRoundWith(ctx context.Context, h *harness, id uint64, reason string) *Failure {
	mentions := func(r checkedRound) bool {
		for _, it := range r.start {
			if it.ID == id {
				return true
			}
		}
		for _, o := range r.history {
			if slices.Contains(BatchIDs(o.Input.(Input)), id) {
				return true
			}
			for _, it := range o.Output.(Output).Items {
				if it.ID == id {
					return true
				}
			}
		}
		return false
	}
	for i := len(t.rounds) - 1; i >= 0; i-- {
		r := t.rounds[i]
		if !mentions(r) {
			continue
		}
		f := &Failure{Seed: h.seed, Round: r.round, Structure: t.s.name(),
			Reason: fmt.Sprintf("%s; the history of round %d, the last that holds the item", reason, r.round),
			model:  r.model, history: r.history, failedCalls: r.failedCalls}
		if !r.undecided {
			// Its check decided: the verbose one does too. One that timed
			// out could run far past its timeout (Failure.linearize).
			f.linearize(h.cfg.CheckTimeout)
		}
		held, err := residue(ctx, h.db, t.s.prefix(), []uint64{id})
		if err != nil {
			held = []string{fmt.Sprintf("reading the meta subspace failed: %v", err)}
		}
		f.residue = held
		f.twins = t.twinsIn(r.history)
		return f
	}
	return nil
}

type counts struct {
	lost, duplicated, phantom int
	example                   uint64
}

// account checks that every item is accounted for: returned or left once,
// never when it was not enqueued, and missing only as far as unrecovered
// unknown dequeues explain. Items are counted by ID as a multiset (twins
// share an ID): an ID enqueued k times for sure, and m times more by
// enqueues left open, must come out between k and k+m times; fewer are
// missing, more are duplicated.
func (t *target) account(left []Item) counts {
	seen := map[uint64]int{}
	for id, n := range t.returned {
		seen[id] += n
	}
	for _, it := range left {
		seen[it.ID]++
	}
	var c counts
	missing := 0
	for id, n := range seen {
		e := t.enqueued[id]
		switch most := e.known + e.maybe; {
		case n > 0 && most == 0:
			c.phantom++
			c.duplicated += n - 1
			c.example = id
		case n > most:
			c.duplicated += n - most
			c.example = id
		}
	}
	for id, e := range t.enqueued {
		if n := seen[id]; e.known > n {
			missing += e.known - n
			if missing > t.capacity {
				c.example = id
			}
		}
	}
	c.lost = max(0, missing-t.capacity)
	return c
}

// twinsIn returns, in order, the IDs of the items of history (and of the
// state it starts from) that have twins: whose value was enqueued more
// than once.
func (t *target) twinsIn(history []porcupine.Operation) []uint64 {
	var ids []uint64
	note := func(id uint64) {
		if t.attempted[id] > 1 {
			ids = append(ids, id)
		}
	}
	for _, it := range t.state {
		note(it.ID)
	}
	for _, o := range history {
		for _, id := range BatchIDs(o.Input.(Input)) {
			note(id)
		}
		for _, it := range o.Output.(Output).Items {
			note(it.ID)
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// noteEnqueues counts the items of the round's enqueues in t.attempted,
// and makes them the twin pool of the next round.
func (t *target) noteEnqueues(recs []*record) {
	var pool []twinSource
	for _, r := range recs {
		in := r.op.Input.(Input)
		if !isEnqueue(in.Kind) {
			continue
		}
		for _, it := range batchItems(in) {
			t.attempted[it.ID]++
			pool = append(pool, twinSource{item: it, single: in.Kind == Push})
		}
	}
	slices.SortFunc(pool, func(a, b twinSource) int {
		return cmp.Or(cmp.Compare(a.item.ID, b.item.ID), cmp.Compare(a.item.Priority, b.item.Priority), compareBool(a.single, b.single))
	})
	t.twinPool = pool
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

func sameItems(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// failedCalls describes, for a written history, each call of recs that
// failed: its call time (the tag of a failed staged take's Hide and
// Unhide), its client as the history numbers it, what it failed with, and
// how the check took it (record.failed).
func failedCalls(recs []*record, clients map[int]int) []string {
	var out []string
	for _, r := range recs {
		if r.failed == "" {
			continue
		}
		out = append(out, fmt.Sprintf("#%d client %d %s", r.op.Call, clients[r.op.ClientId], r.failed))
	}
	return out
}
