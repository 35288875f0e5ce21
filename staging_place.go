package fdbqueue

import (
	"bytes"
	"context"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Serving by place: the i-th request of the line is due the i-th item, and
// its waiter takes it itself; requests that leave move their item to the
// tail.

// requeueAt moves item it, the item at the place of a request that leaves
// the line without it (withdrawn or expired), from its key to the tail, in
// place mode: the requests behind keep their items, and the history reads
// as if the failed call had taken it and it had been enqueued again. The
// read conflict on its key makes anyone else taking it conflict.
//
// A key without the queue's layout (a foreign key) is left where it is:
// moving its value would make an item of it. It reports whether it moved
// the item.
func (s *stageSide[T]) requeueAt(tr kv.Transaction, it kv.KeyValue) (bool, error) {
	if s.checkKey != nil && s.checkKey(it.Key) != nil {
		return false, nil
	}
	if err := tr.AddReadConflictKey(it.Key); err != nil {
		return false, err
	}
	tr.Clear(it.Key)
	if err := s.requeue(tr, it.Value); err != nil {
		return false, err
	}
	s.st.bump(tr)
	return true, nil
}

// takeAt takes item it for the waiter's request, whose place in the line
// is the item's place in the queue: it clears both and records the item in
// the journal. The request was read with a normal read and the item gets a
// read conflict key, so a fulfilment or another waiter that hands out
// either one at the same time conflicts with this step.
func (w *waiter[T]) takeAt(tr kv.Transaction, it kv.KeyValue) (out outcome[T], err error) {
	out, err = w.takeItem(tr, it, !w.s.stable)
	out.phase = phaseTake
	if err == nil {
		tr.Clear(w.reqKey)
		tr.Clear(w.resKey) // the registration's marker
	}
	return out, err
}

// takeItem takes item it for the caller: a read conflict on its key (so
// that anyone else handing it out conflicts), its clear and the journal
// record.
//
// fromHead makes the read conflict cover the items' range from its start
// to it, as a plain dequeue's does: the take then also conflicts with an
// item put ahead of it.
func (w *waiter[T]) takeItem(tr kv.Transaction, it kv.KeyValue, fromHead bool) (out outcome[T], err error) {
	v, rec, err := w.s.accept(it)
	if err != nil {
		return out, err
	}
	conflict := kv.KeyRange{Begin: it.Key, End: append(bytes.Clone(it.Key), 0x00)}
	if fromHead {
		if w.s.reverse {
			conflict.End = w.s.items.End
		} else {
			conflict.Begin = w.s.items.Begin
		}
	}
	if err := tr.AddReadConflictRange(conflict); err != nil {
		return out, err
	}
	tr.Clear(it.Key)
	w.took(tr, it, rec)
	out.done, out.val = true, v
	return out, nil
}

// liveRequests drops, in p's transaction, the expired requests among
// line.reqs (their waiters stopped renewing them) and returns the others,
// as live.reqs, with the place of the request mine among them
// (len(live.reqs) when it is not there). line.items are the first items,
// read in the same transaction, and line.complete says the read reached
// the end of the queue.
//
// In place mode the i-th request of the line is due the i-th item, so an
// expired request cannot simply leave: if an item reaches its place, that
// item is moved to the tail with it (requeueAt); if the items end before
// its place (complete), it leaves with a read conflict on the whole item
// range, so that an item arriving meanwhile makes the drop conflict; if the
// read does not tell, it keeps its place for now. live.items are
// line.items without those moved, so that live.reqs[i] is due
// live.items[i]. In batch mode they are line.items.
func (s *stageSide[T]) liveRequests(p pass, line lineRead, mine []byte) (lineRead, int, error) {
	tr, now, sp, complete := p.tr, p.now, p.sp, line.complete
	var live []kv.KeyValue
	pos, rest, dropped := -1, line.items, 0
	for _, r := range line.reqs {
		if mine != nil && bytes.Equal(r.Key, mine) {
			pos = len(live)
			live = append(live, r)
			continue
		}
		d, ok := decodeDeadline(r.Value)
		_, _, perr := s.parseReq(r.Key)
		if ok && perr == nil && now.Before(d) {
			live = append(live, r)
			continue
		}
		// Over the budget, an expired request stays for a later
		// transaction to drop: by place it keeps its place (as if live);
		// in batches it is passed over. The first one goes whatever it
		// costs, as a batch takes its first item: by place the item moved
		// with it can alone exceed the budget, and it would otherwise
		// hold its place for good.
		cost := s.requestDropCost(r.Key) + len(s.items.Begin) + len(s.items.End)
		if s.stable && perr == nil && len(live) < len(rest) {
			cost += moveCost(rest[len(live)], s.items)
		}
		if dropped > 0 && !sp.fits(cost) {
			if s.stable && perr == nil {
				live = append(live, r)
			}
			continue
		}
		sp.used += cost
		if s.stable && perr == nil {
			switch i := len(live); {
			case i < len(rest):
				moved, err := s.requeueAt(tr, rest[i])
				if err != nil {
					return lineRead{}, 0, err
				}
				if moved {
					rest = append(rest[:i:i], rest[i+1:]...)
				}
			case !complete:
				live = append(live, r) // not known whether an item reaches it
				continue
			default:
				if err := tr.AddReadConflictRange(s.items); err != nil {
					return lineRead{}, 0, err
				}
			}
		}
		// Expired, or not a request: drop it.
		if err := s.drop(tr, r.Key); err != nil {
			return lineRead{}, 0, err
		}
		dropped++
	}
	if pos < 0 {
		pos = len(live)
	}
	return lineRead{reqs: live, items: rest, complete: complete}, pos, nil
}

// placesBefore counts, with a snapshot read of the line, the requests
// before the key end (nil: the whole line).
func (s *stageSide[T]) placesBefore(tr kv.ReadTransaction, end []byte) (int, error) {
	r := s.liveRange()
	if end != nil {
		r.End = end
	}
	reqs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	return s.places(reqs), err
}

// places counts the requests among reqs, a read of the line: in place mode
// each holds a place, expired or not, until a transaction drops it.
func (s *stageSide[T]) places(reqs []kv.KeyValue) int {
	n := 0
	for _, r := range reqs {
		if _, _, err := s.parseReq(r.Key); err == nil {
			n++
		}
	}
	return n
}

// leavePlace prepares, in place mode, the withdrawal of the waiting request
// at reqKey: if an item reaches its place, the requests behind may already
// have taken the items after it, so that item moves to the tail (the
// history reads as if the call had taken it and it had been enqueued
// again); if none does, the transaction reads the whole item range, so
// that an item arriving before its commit makes it conflict. It reports
// whether it moved an item.
//
// It reads the items up to the place, values included (the kv interface
// has no key-only read and no key selector with an offset), whatever their
// bytes: the decision needs the item at the place itself. It runs only
// when a call gives up.
func (s *stageSide[T]) leavePlace(tr kv.Transaction, reqKey []byte) (bool, error) {
	p, err := s.placesBefore(tr, reqKey)
	if err != nil {
		return false, err
	}
	items, err := tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: p + 1, Mode: kv.StreamingModeExact}).GetSlice()
	if err != nil {
		return false, err
	}
	if p < len(items) {
		return s.requeueAt(tr, items[p])
	}
	return false, tr.AddReadConflictRange(s.items)
}

// recoverPlaces drops the expired requests in place mode: the places of
// the line's requests depend on all the requests ahead, so it examines the
// first recoverBatch requests with as many items in one transaction (see
// liveRequests).
func (s *stageSide[T]) recoverPlaces(ctx context.Context, db kv.Database, stats *RecoverStats) error {
	var dropped, returned int
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		dropped, returned = 0, 0
		now := s.st.now()
		itemsF := tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeWantAll})
		reqs, err := tr.Snapshot().GetRange(s.reqRange, kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeExact}).GetSlice()
		if err != nil {
			return waitRead(itemsF, err)
		}
		items, complete, err := s.readItems(itemsF, recoverBatch)
		if err != nil {
			return err
		}
		live, _, err := s.liveRequests(pass{tr, now, s.helperSpend()}, lineRead{reqs, items, complete}, nil)
		if err != nil {
			return err
		}
		dropped, returned = len(reqs)-len(live.reqs), len(items)-len(live.items)
		return nil
	})
	if err != nil {
		return err
	}
	stats.DroppedRequests += dropped
	stats.ReturnedItems += returned
	return nil
}
