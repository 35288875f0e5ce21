package fdbqueue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Withdrawal, expiry and recovery: a request leaves the line without being
// served, and items handed to no one go back to the queue.

// giveBack writes an item back at its original key; keys outside the
// items' range (a corrupt result) are not written.
func (s *stageSide[T]) giveBack(tr kv.Transaction, key, stored []byte) bool {
	if !inRange(s.items, key) {
		return false
	}
	tr.Set(key, stored)
	return true
}

// putBack returns an item taken from the queue (handed to a request, or
// taken by a call that then failed) to it: in batch mode at its original
// key, where it was the head or close to it; in place mode at the tail,
// since the requests behind its own may already have taken the items after
// it (see stageSide.stable). Keys outside the items' range (a corrupt
// result) are not returned. It reports whether it wrote the item.
func (s *stageSide[T]) putBack(tr kv.Transaction, key, stored []byte) (bool, error) {
	if !s.stable {
		return s.giveBack(tr, key, stored), nil
	}
	if !inRange(s.items, key) {
		return false, nil
	}
	return true, s.requeue(tr, stored)
}

// expireResults writes back the items of expired results among rs (a
// range read of results, chunks and all) except the one at skip, as many as
// fit p's spend, and reports how many. A result cut short by the read's
// limit is left alone.
func (s *stageSide[T]) expireResults(p pass, rs []kv.KeyValue, skip []byte) (int, error) {
	tr, now, sp := p.tr, p.now, p.sp
	n := 0
	for _, r := range joinChunks(rs) {
		if bytes.Equal(r.Key, skip) {
			continue
		}
		d, key, stored, err := decodeResult(r.Value)
		if err != nil || now.Before(d) {
			continue // not ours to judge, or not expired
		}
		if cost := resultCost(r, s.items); n > 0 && !sp.fits(cost) {
			break // left for a later transaction
		} else {
			sp.used += cost
		}
		if err := tr.AddReadConflictRange(chunkRange(r.Key)); err != nil {
			return n, err
		}
		clearChunked(tr, r.Key)
		back, err := s.putBack(tr, key, stored)
		if err != nil {
			return n, err
		}
		if back {
			n++
		}
	}
	if n > 0 {
		s.st.bump(tr)
	}
	return n, nil
}

// withdraw clears the waiter's request: a plain Dequeue found no item for
// it. In place mode the items ended before its place, and it reads the whole
// item range (a read conflict): an item arriving before the commit would
// reach the place, and requests behind might take the items after it.
//
// When an earlier commit of the operation may still land (an earlier call
// under its ID failed with its commit in flight), the withdrawal writes a
// conflict on the operation's record key, which every such commit read:
// that commit may have taken an item that is now due to a request ahead
// of this one (by place, two or more requests ahead: the step serves
// none of them), which nothing here clears, and landing after this
// ErrEmpty it would take the item while the caller is told the operation
// took nothing.
func (w *waiter[T]) withdraw(tr kv.Transaction) (out outcome[T], err error) {
	if w.s.stable {
		if err := tr.AddReadConflictRange(w.s.items); err != nil {
			return out, err
		}
	}
	if err := w.fenceEarlier(tr); err != nil {
		return out, err
	}
	tr.Clear(w.reqKey)
	tr.Clear(w.resKey) // the registration's marker
	w.withdrawing = true
	out.phase = phaseWithdraw
	out.done, out.err = true, ErrEmpty
	return out, nil
}

// fenceEarlier writes a conflict on the operation's record key, when an
// earlier commit of the operation may still land: a step that answers the
// call took nothing (ErrEmpty, ErrClaimExpired) commits it, so that such a
// commit fails rather than landing after the answer. Every attempt of the
// operation read that key (its record's); a take or collect of an earlier
// call under the ID may have taken an item this step cannot see (handed
// to that call's request, in its result key) or does not clear.
func (w *waiter[T]) fenceEarlier(tr kv.Transaction) error {
	if !w.o.mayLandLate() {
		return nil
	}
	return tr.AddWriteConflictKey(w.o.recordKeyOrSlot())
}

// requestDropCost is what drop costs for the request at key: dropCost,
// with the clear of its result key when key parses as a request's.
func (s *stageSide[T]) requestDropCost(key []byte) int {
	cost := dropCost(len(key), 0)
	if _, rid, err := s.parseReq(key); err == nil {
		cost += clearCost(len(s.resKey(rid)))
	}
	return cost
}

// drop clears a request that expired (or is not one), and its
// registration's marker: a request that is still there was not served, so
// its result key holds nothing else.
func (s *stageSide[T]) drop(tr kv.Transaction, key []byte) error {
	if err := tr.AddReadConflictKey(key); err != nil {
		return err
	}
	tr.Clear(key)
	if _, rid, err := s.parseReq(key); err == nil {
		clearChunked(tr, s.resKey(rid))
	}
	return nil
}

// abandon undoes what the operation left in the database after it stopped
// with cause (its context ended, an error that is not retryable, or steps
// that kept timing out in flight): it
// withdraws the request (by place, moving the item due to it to the tail),
// returns a fulfilled item (putBack), and, when one of the takes attempted
// since the last step that committed (w.taken) did apply, returns that
// item too and erases its journal record. It runs in a fresh context
// bounded by the CleanupTimeout, since ctx is done.
//
// When ctx ended, the error returned is ctx's (the cleanup settled the
// outcome of any commit in flight); otherwise it is cause. The cleanup
// reads the journal record whatever the operation's age: past its
// retention (cause is then often ErrOperationExpired) a take's record is
// still there until an expiry clears it, at twice the retention, and its
// item goes back. If it finds no record past the retention while takes
// were in doubt, an expiry may have cleared the record of one that
// applied: the error then wraps ErrOperationExpired too, and
// kv.MaybeCommitted reports true for it. In batch mode, if the record
// found is that of several takes of equal items and the cleanup cannot
// tell which one applied (landedTake), it leaves the item in the record,
// and kv.MaybeCommitted reports true for the error too.
func (w *waiter[T]) abandon(ctx context.Context, cause error) error {
	w.cancelWatches()
	final := cause
	if cerr := ctx.Err(); cerr != nil {
		final = cerr
	}
	if w.resKey == nil && len(w.taken) == 0 {
		if kv.MaybeCommitted(cause) {
			return cause // nothing to settle it with: the caller must know
		}
		return final // nothing was written
	}
	s := w.s
	timeout := s.st.cfg.CleanupTimeout
	if timeout == 0 {
		timeout = DefaultStagingCleanupTimeout
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	undecided, ambiguous, err := w.withdrawOnce(cctx, timeout)
	if err != nil {
		// A take or a registration was attempted (above): the item may sit
		// in the journal (recoverable with WithOpID), or the request may
		// still be in the line, with an item due or handed to it that goes
		// back to the queue only when it expires, after this call
		// returned. Either way the call may have had an effect.
		return kv.CommitInterrupted(fmt.Errorf("%w (withdrawing the staged request failed, the claim timeout will return its item, or settle the operation under its ID if its take applied: %w; last error: %v)", final, err, cause))
	}
	if ambiguous {
		// The cleanup committed, but left the item of the take that
		// applied in its journal record (see landedTake): a call under
		// the operation's ID returns it.
		return kv.CommitInterrupted(fmt.Errorf("%w (the cleanup found the record of one of several takes of equal items and cannot tell which item it took: the item stays in the journal record; settle the operation under its ID)", final))
	}
	if undecided {
		// The cleanup committed (the request withdrawn, the result key
		// cleared, the place left), but it cannot tell whether a take
		// applied: its record, if it had one, may have been expired.
		if errors.Is(final, ErrOperationExpired) {
			return kv.CommitInterrupted(fmt.Errorf("%w (the cleanup found no record of the takes in doubt: one may have applied, its record cleared by an expiry)", final))
		}
		return kv.CommitInterrupted(fmt.Errorf("%w (the cleanup found no record of the takes in doubt, past the retention: %w; one may have applied, its record cleared by an expiry)", final, ErrOperationExpired))
	}
	return final
}

// withdrawOnce runs abandon's cleanup, which commits in one transaction
// (retried by the backend's retry loop), whose timeout is the cleanup's. undecided reports
// that the attempt that committed found no record of the takes in doubt
// while the operation was past its journal retention (see abandon);
// ambiguous, that it found the record of a take it could not tell from
// others (landedTake), and left it.
//
// A database's default timeout can fail the transaction before its
// attempt sets the cleanup's own: FoundationDB's timebomb, started at the
// creation, fails it when the default's time is up, and a timeout set
// later does not undo that (timebomb and resetTimeout,
// fdbclient/ReadYourWrites.cpp), so a client slower than the default
// loses the race. Such a failure, transaction_timed_out outside a commit
// (not kv.MaybeCommitted), committed nothing: the cleanup runs again in a
// new transaction, up to maxTimedOutSteps times, while cctx lasts.
func (w *waiter[T]) withdrawOnce(cctx context.Context, timeout time.Duration) (undecided, ambiguous bool, err error) {
	for tries := 1; ; tries++ {
		undecided, ambiguous, err = w.withdrawAttempt(cctx, timeout)
		if !errors.Is(err, kv.ErrTransactionTimedOut) || kv.MaybeCommitted(err) || cctx.Err() != nil || tries >= maxTimedOutSteps {
			return undecided, ambiguous, err
		}
	}
}

// withdrawAttempt is withdrawOnce's cleanup in one transaction of the
// database.
func (w *waiter[T]) withdrawAttempt(cctx context.Context, timeout time.Duration) (undecided, ambiguous bool, err error) {
	s := w.s
	err = w.db.Transact(cctx, func(tr kv.Transaction) error {
		undecided, ambiguous = false, false // of this attempt only
		// CleanupTimeout bounds the cleanup, not a database's default
		// transaction timeout (FoundationDB's transaction_timeout), which
		// would end it at its first slow attempt (1031 is retried by no
		// retry loop): the transaction's own option replaces the default
		// and, as cctx, counts from the transaction's creation, retries
		// included (the TIMEOUT case of
		// ReadYourWritesTransaction::setOptionImpl, and resetTimeout,
		// fdbclient/ReadYourWrites.actor.cpp).
		if err := tr.Options().SetTimeout(min(timeout, math.MaxInt32*time.Millisecond)); err != nil {
			return err
		}
		// Whatever the operation's age: past the retention the record of
		// a take that applied is normally still there (an expiry clears
		// it at twice the retention), and its item must go back.
		rec, err := w.o.checkAnyAge(tr)
		if err != nil {
			return err
		}
		if n := len(w.taken); n > 0 {
			// A take whose commit was interrupted (its transaction
			// cancelled with the caller's context, or timed out, after
			// which the call went on and took again) may still be in
			// flight and land after this cleanup: FoundationDB fences an
			// in-flight commit only before it reports
			// commit_unknown_result (commitDummyTransaction in
			// fdbclient/NativeAPI.actor.cpp), not when the caller cancels
			// or the transaction times out. Fence them the same way:
			// every take read the operation's record key (took), so a
			// write conflict there makes each one fail if it lands after
			// this commit; if one landed before this read version, the
			// record read above finds it, and its item goes back below;
			// in between, that normal read of the record makes this
			// transaction conflict and retry. The newest take also read
			// its item's key, which gets a write conflict too: without the
			// journal that is its only fence. (The takes after a
			// registration read the result key as well, which the cleanup
			// clears below. Without the journal, the one plain attempt,
			// made before the registration, is fenced by nothing once a
			// later take is the newest: if it timed out, it can still
			// land, and its item is lost, as WithoutIdempotency allows.)
			if !w.o.off() {
				if err := tr.AddWriteConflictKey(w.o.recordKeyOrSlot()); err != nil {
					return err
				}
			}
			if err := tr.AddWriteConflictKey(w.taken[n-1].item.Key); err != nil {
				return err
			}
		}
		var resF *chunkedValue
		if w.resKey != nil {
			f := getChunked(tr, w.resKey)
			resF = &f
		}
		prev, done, err := w.o.applied(rec)
		if errors.Is(err, ErrOperationExpired) {
			// No record, past the retention: the takes in doubt may have
			// applied, their record cleared by an expiry. The rest of
			// the cleanup goes on; the call reports the doubt.
			undecided, err = len(w.taken) > 0, nil
		}
		if err != nil {
			return err
		}
		back := false
		if done && len(prev) == 1 {
			// The record of whichever take applied: not always the
			// newest (a take that timed out, the call having gone on and
			// taken another item, can land before this read).
			t, amb, err := w.landedTake(tr, prev[0])
			if err != nil {
				return err
			}
			if ambiguous = amb; t != nil {
				if back, err = s.putBack(tr, t.item.Key, t.item.Value); err != nil {
					return err
				}
				tr.ClearRange(w.o.recordRange())
			}
		}
		if resF != nil {
			// The result key holds the registration's marker while the
			// request waits, the item once it is served, or nothing.
			// Clearing it even when empty makes this transaction conflict
			// with a registration still in flight, and a registration that
			// lands later conflict with this one (register's read conflict
			// on the key).
			resV, err := resF.Get()
			if err != nil {
				return err
			}
			reqKey := w.reqKey
			if isMarker(resV) {
				if reqKey == nil {
					if reqKey, err = s.findRequest(tr, resV, w.rid); err != nil {
						return err
					}
				}
				if reqKey != nil && s.stable {
					moved, err := s.leavePlace(tr, reqKey)
					if err != nil {
						return err
					}
					back = moved || back
				}
			} else if resV != nil {
				if _, key, stored, err := decodeResult(resV); err == nil {
					moved, err := s.putBack(tr, key, stored)
					if err != nil {
						return err
					}
					back = moved || back
				}
			}
			clearChunked(tr, w.resKey)
			if reqKey != nil {
				tr.Clear(reqKey)
			}
		}
		if back {
			s.st.bump(tr)
		}
		return nil
	})
	return undecided && err == nil, ambiguous && err == nil, err
}

// landedTake returns the take attempt whose journal record is rec, whose
// item the cleanup puts back, or nil. A record holds what the take
// returns (a Queue's stored value; a PriorityQueue's priority and stored
// value), not the item's key, so takes of equal items write equal records.
// By place that does not matter: an item goes back to the tail, whatever
// its key. In batch mode it goes back to its original key, which must be
// the key of the take that applied: the other takes did not apply, and
// their items may still be at their keys, where writing the item again
// would write nothing, and the item that applied would be lost. With the
// journal at most one take applies, and it cleared its item's key, which
// nobody writes again (keys end in a random suffix; only the holder of
// the item, this call, puts it back there): among several takes with
// that record, the cleanup reads their keys (normal reads: a write to one
// before its commit makes it retry), and the one whose key is empty
// applied. If several are empty (another consumer took, or the take that
// applied handed out, the item of one that did not), or none, ambiguous
// is set: the record is left for a call under the operation's ID to
// return the item.
func (w *waiter[T]) landedTake(tr kv.Transaction, rec []byte) (t *takeAttempt, ambiguous bool, err error) {
	var match []*takeAttempt
	for i := len(w.taken) - 1; i >= 0; i-- { // newest first
		if bytes.Equal(w.taken[i].rec, rec) {
			match = append(match, &w.taken[i])
		}
	}
	if len(match) == 0 {
		return nil, false, nil
	}
	if len(match) == 1 || w.s.stable {
		return match[0], false, nil
	}
	reads := make([]kv.FutureValue, len(match))
	for i, m := range match {
		reads[i] = tr.Get(m.item.Key)
	}
	for i, f := range reads {
		v, err := f.Get()
		if err != nil {
			return nil, false, err
		}
		if v == nil {
			if t != nil {
				return nil, true, nil
			}
			t = match[i]
		}
	}
	return t, t == nil, nil
}

// recover drops the side's expired requests and returns the items of its
// expired results.
func (s *stageSide[T]) recover(ctx context.Context, db kv.Database, stats *RecoverStats) error {
	db = s.journal.track.observeDB("recover", db)
	defer s.journal.track.obs.recovered(s.side(), stats)()
	ranges := []kv.KeyRange{s.reqRange, s.resRange}
	if s.stable {
		if err := s.recoverPlaces(ctx, db, stats); err != nil {
			return err
		}
		ranges = ranges[1:]
	}
	for _, r := range ranges {
		isReq := bytes.Equal(r.Begin, s.reqRange.Begin)
		begin := r.Begin
		for begin != nil {
			var dropped, returned int
			var next []byte
			err := db.Transact(ctx, func(tr kv.Transaction) error {
				dropped, returned, next = 0, 0, nil
				now := s.st.now()
				// Up to recoverBatch keys, and results only while writing
				// their items back fits the batch budget.
				it := tr.Snapshot().GetRange(kv.KeyRange{Begin: begin, End: r.End},
					kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeWantAll}).Iterator()
				// A page ends between values, never inside a chunked one.
				var kvs []kv.KeyValue
				var cur, stop []byte // the value being read; where the next page starts
				sp := &spend{budget: s.st.budget}
				for len(kvs) < recoverBatch && it.Next() {
					p := it.KeyValue()
					chunk := cur != nil && len(p.Key) > len(cur) && bytes.HasPrefix(p.Key, cur)
					if !isReq && !chunk && sp.used >= sp.budget {
						stop = bytes.Clone(p.Key)
						break
					}
					if !chunk {
						cur = p.Key
					}
					kvs = append(kvs, p)
					sp.used += resultCost(p, s.items)
				}
				if err := it.Err(); err != nil {
					return err
				}
				if stop != nil {
					next = stop
				} else if len(kvs) == recoverBatch {
					next = append(bytes.Clone(kvs[len(kvs)-1].Key), 0x00)
					if !isReq {
						// The last result may continue past the page:
						// the next page starts at its first chunk.
						if whole := joinChunks(kvs); len(whole) > 1 {
							next = whole[len(whole)-1].Key
							kvs = kvs[:len(kvs)-countChunks(kvs, next)]
						}
					}
				}
				if !isReq {
					var err error
					returned, err = s.expireResults(pass{tr, now, &spend{budget: sp.used}}, kvs, nil)
					return err
				}
				// Drops while they fit the batch budget (the first
				// whatever it costs): a page of long keys could
				// otherwise pass the transaction size limit, and fail
				// every time.
				drops := &spend{budget: s.st.budget}
				for _, p := range kvs {
					d, ok := decodeDeadline(p.Value)
					if _, _, perr := s.parseReq(p.Key); ok && perr == nil && now.Before(d) {
						continue
					}
					cost := s.requestDropCost(p.Key)
					if dropped > 0 && !drops.fits(cost) {
						next = bytes.Clone(p.Key) // the next page starts here
						break
					}
					drops.used += cost
					if err := s.drop(tr, p.Key); err != nil {
						return err
					}
					dropped++
				}
				return nil
			})
			if err != nil {
				return err
			}
			stats.DroppedRequests += dropped
			stats.ReturnedItems += returned
			begin = next
		}
	}
	return nil
}
