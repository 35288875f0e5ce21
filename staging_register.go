package fdbqueue

import (
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A waiter without a request: the one plain attempt, and the
// registration that files a request at the end of the line.

// firstLook is what a waiter without a request read of the line: the
// first few requests (firsts), the live ones among them (ahead), and the
// read of the last request (last; nil: not read).
type firstLook struct {
	firsts, ahead []kv.KeyValue
	last          kv.RangeResult
}

// fresh is the step of a waiter without a request: the one plain attempt,
// or registration. head is the read of the first items.
func (w *waiter[T]) fresh(tr kv.Transaction, now time.Time, head kv.RangeResult, look firstLook) (out outcome[T], err error) {
	firsts, ahead := look.firsts, look.ahead
	heads, err := head.GetSlice()
	if err != nil {
		return out, err
	}
	if len(heads) == 0 && !w.wait {
		out.phase = phaseWithdraw
		out.done, out.err, out.noCommit = true, ErrEmpty, true
		if w.o.mayLandLate() {
			// As takeEnd's empty answer: an earlier call's take, a
			// collect from its result key say, may still land.
			if err := w.fenceEarlier(tr); err != nil {
				return out, err
			}
			out.noCommit = false
		}
		return out, nil
	}
	if !w.fastDone && len(ahead) < helpers && len(heads) > len(ahead) && !w.s.stable {
		// The one plain attempt of a PriorityQueue: serve the few waiting
		// requests and take the next item, in one transaction.
		w.fastDone = true
		out, err = w.serveAndTake(tr, now, ahead, heads[:len(ahead)+1])
		out.phase = phaseFast
		return out, err
	}
	// In place mode every request in the line holds a place, expired or
	// not, until a transaction drops it: the read must have seen the
	// whole line (fewer than its limit).
	if n := w.s.places(firsts); w.s.stable && !w.fastDone && len(firsts) < helpers && len(heads) > n {
		// The one plain attempt: take the item after those of the few
		// waiting requests (with nobody waiting, the head), which is
		// where a request filed now would stand.
		w.fastDone = true
		out, err = w.takeItem(tr, heads[n], n == 0)
		out.phase = phaseFast
		return out, err
	}
	// File a request; the next steps take the head (the oldest waiter),
	// serve the line (the two oldest), take the item at its place
	// (by place, if the items reach it), or sleep until served.
	return w.join(tr, now, look)
}

// liveAmong returns the requests among reqs whose deadline has not passed.
func (s *stageSide[T]) liveAmong(reqs []kv.KeyValue, now time.Time) []kv.KeyValue {
	var live []kv.KeyValue
	for _, r := range reqs {
		if d, ok := decodeDeadline(r.Value); ok && now.Before(d) {
			live = append(live, r)
		}
	}
	return live
}

// join files a request, after the reads in look (all empty: none). In
// batch mode a waiter that is not among the two oldest cannot do anything
// for its request but wait, on its result key (a fulfilment writes it, an
// expiry clears it) and on the last request ahead (when that one leaves
// the line, this one may have become one of the two oldest), so that it
// sleeps from the commit on, without a step that reads the line again.
// Any other waiter runs its next step at once.
//
// Only the watch on its own result key is armed here: the registration
// writes that key (the marker), and a watch on a key the transaction wrote
// reads the transaction's own write and adds no read conflict. A watch on
// the request ahead would add one (FoundationDB's RYWImpl::watch reads the
// key with a normal read, fdbclient/ReadYourWrites.actor.cpp), so that the
// registration, which writes, would fail whenever that request left the
// line between its read version and its commit; it is armed right after
// the commit, in a read-only transaction (armLater), which never
// conflicts.
func (w *waiter[T]) join(tr kv.Transaction, now time.Time, look firstLook) (out outcome[T], err error) {
	last, ahead := look.last, look.ahead
	out.phase = phaseRegister
	w.fastDone = true
	var lasts []kv.KeyValue
	if last != nil {
		if lasts, err = last.GetSlice(); err != nil {
			return out, err
		}
	}
	// The writes come after the reads have returned: on FoundationDB a
	// range read over the line after the versionstamped write into it
	// would be unreadable.
	if err := w.register(tr, now); err != nil {
		return out, err
	}
	out.registered = true
	w.ahead = len(ahead)
	if w.s.stable || len(lasts) == 0 || len(ahead) < helpers {
		return out, nil
	}
	// The request ahead is watched at its result key, which changes when
	// it leaves the line in any way (served, taken, withdrawn, dropped)
	// and not when it is renewed. Its request key would not do on
	// FoundationDB: it lies in the range this transaction's versionstamped
	// key makes unreadable.
	_, lastRID, err := w.s.parseReq(lasts[0].Key)
	if err != nil {
		return out, nil // not a request: the next step drops it
	}
	w.watches = append(w.watches, tr.Watch(w.resKey))
	// The registration saw the request ahead waiting (in the line), so
	// its result key held its marker then; a marker is written once, by
	// its request's registration, and never comes back once changed.
	w.later = &lateWatch{key: w.s.resKey(lastRID), same: isMarker}
	out.armed = true
	return out, nil
}

// resolve is the step after a registration whose commit failed: the
// registration's marker, at its result key, tells whether it was applied
// (then findRequest finds its request), or the result is already there;
// nothing there is ambiguous once the request may have expired (see
// below). The
// read is a normal read and, when nothing is there, the step clears the
// key so that it commits: a registration still in flight that lands later
// makes it conflict, and the next attempt finds it.
func (w *waiter[T]) resolve(tr kv.Transaction) (out outcome[T], err error) {
	out.phase = phaseWait
	v, err := getChunked(tr, w.resKey).Get()
	if err != nil {
		return out, err
	}
	if v == nil {
		// Nothing there: the registration did not happen, or it did and
		// its request expired and was dropped (by place with the item due
		// to it, moved to the tail), or was served and its result
		// expired, since a drop and an expiry clear the key too. After a
		// commit that surely failed, or well before the deadline the
		// registration wrote (the clock read now that the read version
		// is known, clocks agreeing to well within the claim timeout),
		// when nobody can have dropped or expired anything of it, it did
		// not happen, and the call files a new request. Otherwise the
		// call fails, having taken nothing, as one whose request expired:
		// going on could return an item after the one moved for it.
		tr.Clear(w.resKey)
		s := w.s
		if !w.regInDoubt || s.st.now().Before(w.deadline.Add(-s.st.cfg.ClaimTimeout/3)) {
			out.forget = true
			return out, nil
		}
		if err := w.fenceEarlier(tr); err != nil {
			return out, err
		}
		s.st.point("lost")
		out.done, out.err = true, ErrClaimExpired
		return out, nil
	}
	if isMarker(v) {
		if w.reqKey, err = w.s.findRequest(tr, v, w.rid); err != nil || w.reqKey != nil {
			out.noCommit = true
			return out, err
		}
		// A marker without its request (not made by this package): clear
		// it and file a new request.
		tr.Clear(w.resKey)
		out.forget = true
		return out, nil
	}
	return w.collect(tr, v)
}

// register files a request: its key is ordered by the versionstamp of the
// commit, so a request filed later stands behind, and the waiter learns
// the key from the versionstamp once the commit succeeded. A marker at the
// result key holds the versionstamp too, for a waiter whose commit had an
// unknown outcome (see resolve).
func (w *waiter[T]) register(tr kv.Transaction, now time.Time) error {
	s := w.s
	rid, err := s.st.newRID(now)
	if err != nil {
		return err
	}
	key, err := s.stampedReqKey(rid)
	if err != nil {
		return err
	}
	timeout := s.st.cfg.ClaimTimeout
	tr.SetVersionstampedKey(key, encodeDeadline(now.Add(timeout)))
	w.rid, w.resKey = rid, s.resKey(rid)
	// A read conflict on the result key, before the marker's write (RYW
	// adds none on a key the transaction wrote: updateConflictMap,
	// fdbclient/ReadYourWrites.actor.cpp): a cleanup (resolve, abandon) reads
	// and clears the key, and a registration that lands after it must
	// fail, not leave a request no one waits for. On FoundationDB a commit
	// interrupted by a cancellation or a timeout goes on and can land
	// after the cleanup (RYWImpl::commit returns as soon as resetPromise
	// is set); only the new request's own key is involved, so nothing else
	// conflicts with it.
	_ = tr.AddReadConflictKey(w.resKey)
	tr.Set(w.resKey, markerValue)
	w.stamp = tr.GetVersionstamp()
	w.renewAt = now.Add(timeout / 3)
	w.deadline = now.Add(timeout)
	w.withdrawing = false
	// If this commit fails, the next step looks for the marker (resolve).
	w.reqKey = nil
	return nil
}

// renew writes the request with a new deadline, and returns when the next
// renewal is due. The step's outcome carries it (outcome.renewAt), and the
// waiter counts it only once the step committed: a renewal whose commit
// failed (a conflict, or a timeout while in flight, after which it may
// never land) left the deadline where it was, and the next step renews
// again. Counted at once, a failed renewal would leave the request a third
// of the claim timeout less, and two in a row would let it expire while
// its waiter lives.
func (w *waiter[T]) renew(tr kv.Transaction, now time.Time) time.Time {
	timeout := w.s.st.cfg.ClaimTimeout
	tr.Set(w.reqKey, encodeDeadline(now.Add(timeout)))
	return now.Add(timeout / 3)
}

// arm watches the request key (fulfilment, expiry and withdrawal all clear
// it) and the signal key (a staged enqueue bumps it). A watch compares with
// the value this transaction saw, so a change after its read version is
// never missed.
func (w *waiter[T]) arm(tr kv.Transaction) {
	w.watches = append(w.watches, tr.Watch(w.reqKey), tr.Watch(w.s.st.sig))
}

// lateWatch is a watch that a step which writes leaves to armLater: armed
// in the step's own transaction, its read of the key would add a read
// conflict, and the step would fail whenever someone changed the key
// before its commit.
type lateWatch struct {
	key []byte
	// same reports whether a value of key is still what the step saw.
	same func(v []byte) bool
}

// armLater arms w.later in tr, a fresh transaction run right after the
// step committed, and reports whether the waiter may sleep. tr only reads,
// and a read-only commit never conflicts (Transaction::commitMutations in
// fdbclient/NativeAPI.actor.cpp returns at once when there are no
// mutations and no write conflict ranges). The watch compares with the
// value at tr's read version (Transaction::setupWatches registers the
// watches of a read-only commit at its read version), so it fires on any
// change after that version; a change between the step's read version and
// tr's is seen in the value read, and then the waiter does not sleep but
// runs its next step at once, as if the watch had fired. Either way no
// change is missed. If tr fails, the waiter does not sleep either.
//
// Cost: a read version, one point read (the watch's own read of the same
// key overlaps it) and no commit round trip.
func (w *waiter[T]) armLater(tr kv.Transaction) (bool, error) {
	lw := w.later
	w.later = nil
	f := tr.Snapshot().Get(lw.key)
	wt := tr.Watch(lw.key)
	v, err := f.Get()
	if err == nil && !lw.same(v) {
		wt.Cancel()
		return false, nil
	}
	if err == nil {
		w.s.st.point("commit arm")
		err = tr.Commit()
	}
	if err != nil {
		wt.Cancel()
		return false, err
	}
	w.watches = append(w.watches, wt)
	return true, nil
}
