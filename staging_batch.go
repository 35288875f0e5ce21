package fdbqueue

import (
	"bytes"
	"context"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Serving in batches: the fulfilment in which a helper hands items to the
// first requests, and the collect of a served waiter. fulfil is also
// where a waiter by place finds that the items reach it.

// serveAndTake hands items[i] to reqs[i] and takes the last item for the
// caller. The read conflict covers the items' range up to the one taken,
// as a plain dequeue's does, and each request served.
func (w *waiter[T]) serveAndTake(tr kv.Transaction, now time.Time, reqs, items []kv.KeyValue) (out outcome[T], err error) {
	s := w.s
	p := items[len(items)-1]
	v, rec, err := s.accept(p)
	if err != nil {
		return out, err
	}
	for _, it := range items[:len(reqs)] {
		if _, _, err := s.accept(it); err != nil {
			return out, err
		}
	}
	// Read conflicts go before the clears: keys the transaction already
	// wrote would be left out of them.
	conflict := kv.KeyRange{Begin: s.items.Begin, End: append(bytes.Clone(p.Key), 0x00)}
	if s.reverse {
		conflict = kv.KeyRange{Begin: p.Key, End: s.items.End}
	}
	if err := tr.AddReadConflictRange(conflict); err != nil {
		return out, err
	}
	for _, r := range reqs {
		if err := tr.AddReadConflictKey(r.Key); err != nil {
			return out, err
		}
	}
	for i, r := range reqs {
		_, rid, err := s.parseReq(r.Key)
		if err != nil {
			return out, err
		}
		tr.Clear(r.Key)
		tr.Clear(items[i].Key) // the result key's marker is overwritten below
		setChunked(tr, s.resKey(rid), encodeResult(now.Add(s.st.cfg.ClaimTimeout), items[i].Key, items[i].Value))
	}
	tr.Clear(p.Key)
	w.took(tr, p, rec)
	out.done, out.val, out.served = true, v, len(reqs)
	return out, nil
}

func (w *waiter[T]) collect(tr kv.Transaction, resV []byte) (out outcome[T], err error) {
	s := w.s
	out.phase = phaseCollect
	_, key, stored, err := decodeResult(resV)
	if err != nil {
		return out, err
	}
	p := kv.KeyValue{Key: key, Value: stored}
	clearChunked(tr, w.resKey)
	v, rec, aerr := s.accept(p)
	if aerr != nil {
		// Return the item to the queue (in batch mode where a plain
		// dequeue would have left it), and report why it cannot be taken.
		if _, err := s.putBack(tr, key, stored); err != nil {
			return out, err
		}
		s.st.bump(tr)
		w.reqKey, w.resKey = nil, nil
		out.done, out.err = true, aerr
		return out, nil
	}
	w.took(tr, p, rec)
	out.done, out.val = true, v
	return out, nil
}

// fulfil is the step of a waiter whose request is waiting. If the items
// reach its place it takes its item (takeAt). Otherwise, and when a helper
// (a waiter of the two oldest requests) just woke from a sleep, helpers
// serve the first requests with the first items in one transaction, so
// that waiters asleep when items arrive are served in a batch, not woken
// one by one. The other waiters sleep until their request changes (a
// helper served it) or the request ahead of theirs leaves. pending is the
// snapshot read of the requests up to this one (all of the first ones for
// a woken waiter).
func (w *waiter[T]) fulfil(tr kv.Transaction, now time.Time, pending kv.RangeResult, pre prefetched) (out outcome[T], err error) {
	s := w.s
	reqs, err := pending.GetSlice()
	if err != nil {
		return out, err
	}
	s.raiseFloor(reqs)
	items, complete, err := s.readItems(pre.items, pre.limit)
	if err != nil {
		return out, err
	}
	read := len(items)
	p := pass{tr, now, w.stepSpend()}
	// The step writes if p.sp.used grows past base (liveRequests and
	// serve count every write they buffer) or it renews: only a step that
	// does not write may arm watches on keys it did not write.
	base := p.sp.used
	line, pos, err := s.liveRequests(p, lineRead{reqs, items, complete}, w.reqKey)
	if err != nil {
		return out, err
	}
	live, items := line.reqs, line.items
	if len(items) < read {
		// Expired requests ahead gave their items to the tail, where this
		// transaction cannot take them (their keys are known only at
		// commit): commit that, and look again.
		out.phase = phaseWait
		return out, nil
	}
	w.ahead = pos
	if pos == len(live) {
		w.ahead = 2 * pre.limit // not among those read: further back
	}
	s.busy.Store(pos >= helpers)
	if pos < len(live) && pos < len(items) && (!w.woke || pos >= helpers) && (s.stable || pos == 0) {
		// Self-service: the items reach this request's place, so it takes
		// the item a fulfilment would hand it, without waiting for one.
		// The waiters ahead take theirs the same way, or are served.
		return w.takeAt(tr, items[pos])
	}
	if pos >= helpers {
		if !w.wait {
			// A plain Dequeue waits only if the items reach its request.
			// In batch mode it returns ErrEmpty only when the queue is
			// empty: items the requests ahead have not yet been handed
			// may still come to it (a request ahead withdrawn, a
			// consumer outside the line), and an ErrEmpty while they are
			// there would not be linearizable. It waits to be served, or
			// for the items to run out.
			short := len(items) <= pos && complete
			if !s.stable {
				short = len(items) == 0
			}
			if short {
				return w.withdraw(tr)
			}
		}
		renewed := !now.Before(w.renewAt)
		if renewed {
			out.renewAt = w.renew(tr, now)
		}
		// The own request key was read above (a read conflict already);
		// the request ahead was a snapshot read: a watch on it here would
		// add a read conflict, so a step that writes leaves it to
		// armLater.
		w.watches = append(w.watches, tr.Watch(w.reqKey))
		ahead := live[min(pos, len(live))-1]
		if renewed || p.sp.used != base {
			// A request key, once cleared, never comes back (its
			// versionstamp is its commit's): the same value means the
			// request still waits.
			seen := bytes.Clone(ahead.Value)
			w.later = &lateWatch{key: ahead.Key, same: func(v []byte) bool { return v != nil && bytes.Equal(v, seen) }}
		} else {
			w.watches = append(w.watches, tr.Watch(ahead.Key))
		}
		out.armed, out.phase = true, phaseWait
		return out, nil
	}
	out.phase = phaseFulfil
	res, err := s.serve(p, line, w, pre.results)
	if err != nil {
		return out, err
	}
	out.served = res.n
	if res.mine {
		out.served--
	}
	if res.mine {
		out.done, out.val = true, res.val
		return out, nil
	}
	renewed := !now.Before(w.renewAt)
	if renewed {
		out.renewAt = w.renew(tr, now)
	}
	if !res.emptyForMe {
		return out, nil // served others; the next step serves this one
	}
	if !w.wait {
		return w.withdraw(tr)
	}
	if renewed || p.sp.used != base {
		// The queue ran out before this request, but the step writes: a
		// watch on the signal key here would make it conflict with every
		// enqueue before its commit. The next step, which finds nothing
		// to write, arms the watches.
		return out, nil
	}
	w.arm(tr)
	out.armed = true
	return out, nil
}

// served is what one fulfilment pass did.
type served[T any] struct {
	n          int  // requests served
	mine       bool // the caller's own request was served: val is its item
	val        T
	emptyForMe bool // the queue ran out before the caller's request
}

// serve matches the live requests (line.reqs), oldest first, with the
// first items (line.items, as liveRequests left them) and buffers the
// transitions in p's transaction; it also returns the items of a few
// expired results, read from results (nil: read now). w is the waiter
// running it (its own request is served by taking the item directly), or
// nil.
func (s *stageSide[T]) serve(p pass, line lineRead, w *waiter[T], results kv.RangeResult) (res served[T], err error) {
	tr, now, sp := p.tr, p.now, p.sp
	live, items, complete := line.reqs, line.items, line.complete
	var mine, myRes []byte
	if w != nil {
		mine, myRes = w.reqKey, w.resKey
	}
	if results == nil {
		results = s.scanResults(tr)
	}
	// The results share the step's read budget with the items: their
	// values hold items too.
	left := s.st.budget
	for _, it := range items {
		left -= len(it.Key) + len(it.Value)
	}
	rs, _, err := readUpTo(results, resultScan, left)
	if err != nil {
		return res, err
	}
	if _, err := s.expireResults(p, rs, myRes); err != nil {
		return res, err
	}
	timeout := s.st.cfg.ClaimTimeout
	for _, r := range live {
		if res.n >= len(items) {
			break
		}
		it := items[res.n]
		v, rec, aerr := s.accept(it)
		if aerr != nil {
			if res.n == 0 {
				return res, aerr
			}
			break // serve the good items before the bad one
		}
		// Both keys are read conflicts and cleared; the request gets its
		// result, or the caller's own request its journal record.
		cost := conflictKeyCost(len(it.Key)) + conflictKeyCost(len(r.Key)) + clearCost(len(it.Key)) + clearCost(len(r.Key))
		_, rid, _ := s.parseReq(r.Key)
		var result []byte
		if mine != nil && bytes.Equal(r.Key, mine) {
			cost += clearCost(len(myRes)) + w.o.recordCost(0, rec)
		} else {
			result = encodeResult(now.Add(timeout), it.Key, it.Value)
			cost += chunkedSetCost(len(s.resKey(rid)), len(result))
		}
		if res.n > 0 && !sp.fits(cost) {
			break
		}
		sp.used += cost
		// Conflict keys go before the clears, which would hide them.
		if err := tr.AddReadConflictKey(it.Key); err != nil {
			return res, err
		}
		if err := tr.AddReadConflictKey(r.Key); err != nil {
			return res, err
		}
		tr.Clear(it.Key)
		tr.Clear(r.Key)
		res.n++
		if mine != nil && bytes.Equal(r.Key, mine) {
			tr.Clear(myRes) // the registration's marker
			w.took(tr, it, rec)
			res.mine, res.val = true, v
			continue
		}
		setChunked(tr, s.resKey(rid), result)
	}
	// The items ran out before the caller's request (every item read was
	// used, and the read reached the end of the queue).
	res.emptyForMe = !res.mine && res.n == len(items) && complete
	return res, nil
}

// fulfilOnce runs one fulfilment pass as a helper with no request of its
// own, and reports how many requests it served (used by tests).
func (s *stageSide[T]) fulfilOnce(ctx context.Context, db kv.Database) (int, error) {
	db = s.journal.track.observeDB(s.opKind(), db)
	return kv.Transact(ctx, db, func(tr kv.Transaction) (int, error) {
		n, _, err := s.fulfilPass(tr)
		return n, err
	})
}

// fulfilPass is fulfilOnce's work in tr: it returns how many requests it
// served and the size it counted for tr (see budget.go).
func (s *stageSide[T]) fulfilPass(tr kv.Transaction) (int, *spend, error) {
	limit := s.st.cfg.BatchSize
	pre := s.prefetch(tr, limit, true)
	reqs, err := tr.Snapshot().GetRange(s.reqRange, kv.RangeOptions{Limit: limit}).GetSlice()
	if err != nil {
		return 0, nil, err
	}
	items, complete, err := s.readItems(pre.items, limit)
	if err != nil {
		return 0, nil, err
	}
	p := pass{tr, s.st.now(), s.helperSpend()}
	live, _, err := s.liveRequests(p, lineRead{reqs, items, complete}, nil)
	if err != nil {
		return 0, p.sp, err
	}
	res, err := s.serve(p, live, nil, pre.results)
	return res.n, p.sp, err
}
