package fdbqueue

import (
	"bytes"
	"context"
	"math"

	"github.com/fdbqueue/fdbqueue/kv"
)

// queueEnd is one end of a queue's items, the end that takes remove from:
// the head of a Queue, the minimum or maximum of a PriorityQueue.
type queueEnd[T any] struct {
	items   kv.KeyRange
	reverse bool // take from the end of items (PopMax)
	// accept turns a pair into a result and the journal record that lets
	// a retry return the same result (it fails for a foreign key); replay
	// turns a record back into the result.
	accept func(kv.KeyValue) (T, []byte, error)
	replay func([]byte) (T, error)
	// acceptInto, if not nil, is accept building its record by appending
	// to rec (a take of one item passes the op's buffer, see op.recBuf).
	acceptInto func(p kv.KeyValue, rec []byte) (T, []byte, error)
	// take, if not nil, is accept without the record, for an operation
	// that writes none (no journal).
	take func(kv.KeyValue) (T, error)
	// reserved, if not nil, says how many items at the head are due to the
	// requests of a staged Queue's line (place mode): a take starts after
	// them, with a read conflict on each item taken instead of on the
	// range from the head.
	reserved func(kv.ReadTransaction) (int, error)
}

// batchLimit bounds one take: at most max items, and no more once their
// transaction's size reaches budget bytes (at least one item).
type batchLimit struct{ max, budget int }

// takeEnd removes up to lim.max items from e inside tr: the shared body of
// Queue.DequeueBatch and PriorityQueue's pops. It appends the results to
// dst (nil, or a caller's array to fill).
func takeEnd[T any](tr kv.Transaction, o *op, e queueEnd[T], lim batchLimit, dst []T) ([]T, error) {
	r, reverse, max, budget := e.items, e.reverse, lim.max, lim.budget
	o.headTake = true
	rec, err := o.check(tr)
	if err != nil {
		return nil, err
	}
	skip, err := skipped(tr, e.reserved)
	if err != nil {
		return nil, err
	}
	if skip > 0 {
		// Its read conflicts will cover the items it takes, not the
		// line's ahead of them: a call settling it may take others.
		o.recordConflict(tr)
	}
	// Read with an iterator that the loop below stops once the budget is
	// reached. In StreamingModeWantAll FDB fetches batches of 80,000 bytes
	// in 7.3 and 7.4 and 120,000 in later versions (WANT_ALL is SERIAL's byte
	// limit, mode_bytes_array in bindings/c/fdb_c.cpp), so it reads
	// at most one batch beyond, in one round trip for small items (the
	// iterator mode's first batches are 4 KB). StreamingModeExact has no
	// byte limit: it would fetch all skip+max items, values included.
	//
	// A take of one item that has no earlier attempt's record to look for
	// (a Dequeue, a pop) reads with a normal read instead of a snapshot
	// one: its read conflict range is then the one this function would
	// add. FDB's range read adds what its result depended on: with the
	// limit reached, [begin, keyAfter(last)) forwards or [last, end) in
	// reverse, else the whole range (addConflictRange for GetRangeReq in
	// fdbclient/ReadYourWrites.actor.cpp), at the read, so before the clears.
	// An attempt that may find its record keeps the snapshot read: a
	// replay depends on the record, not on the head.
	plain := skip == 0 && max == 1 && (rec == nil || rec == noRecords)
	// skip + max, or no limit where that overflows an int (a max of
	// math.MaxInt after a line): a negative limit fails the read with
	// range_limits_invalid (RYWImpl::getRange, limits.isValid).
	limit := skip + max
	if max > math.MaxInt-skip {
		limit = 0
	}
	opts := kv.RangeOptions{Limit: limit, Reverse: reverse, Mode: kv.StreamingModeWantAll}
	var head kv.RangeResult
	if plain {
		head = tr.GetRange(r, opts) // through tr: no Snapshot, no conversion to a ReadTransaction
	} else {
		head = tr.Snapshot().GetRange(r, opts)
	}
	if prev, done, err := o.applied(rec); err != nil {
		return nil, err
	} else if done {
		if err := waitRead(head, nil); err != nil {
			return nil, err
		}
		out := dst
		for _, p := range prev {
			v, err := e.replay(p)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	}
	it := rowsOf(head, limit)
	var lastDue []byte // the last item due to a request of the line
	for i := 0; i < skip && it.Next(); i++ {
		lastDue = it.KeyValue().Key
	}
	out := dst
	var records, taken [][]byte
	// used counts the transaction's size as FDB does (budget.go), so that
	// an accepted budget never makes the commit fail with 2101. A take of
	// one item (a Dequeue, a pop) always takes it: nothing to count.
	counted := max > 1
	used := 0
	if counted {
		used = o.overheadCost(r)
	}
	for len(out) < max && it.Next() {
		p := it.KeyValue()
		var v T
		var record []byte
		var err error
		switch {
		case e.take != nil && o.off():
			v, err = e.take(p)
		case e.acceptInto != nil && max == 1:
			// The record lives until o.record hands it to Set, which
			// keeps no slice (kv.Transaction.Set): the op's buffer serves.
			v, record, err = e.acceptInto(p, o.recBuf[:0])
			if record != nil {
				o.recBuf = record
			}
		default:
			v, record, err = e.accept(p)
		}
		if err != nil {
			if len(out) > 0 {
				break // take the good items before the bad one
			}
			return nil, err
		}
		if counted {
			cost := clearCost(len(p.Key)) + o.recordCost(len(out), record)
			last := 0 // the range's read conflict, should p be the last taken
			if skip > 0 {
				cost += conflictKeyCost(len(p.Key))
			} else {
				last = headConflictCost(r, p.Key, reverse)
			}
			if len(out) > 0 && used+cost+last > budget {
				break
			}
			used += cost
		}
		out = append(out, v)
		records = append(records, record)
		taken = append(taken, p.Key)
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	// The line's items are the requests', but an earlier call of this
	// operation may have taken some of them before those requests came,
	// and its commit may still land (one cut short in flight by its
	// context or a timeout is not fenced). It read the head up to what it
	// took, and an item due to a request stays where it is until the line
	// is served (the request's waiter, or another staged call, hands it
	// over), so that commit would land after this call, which skips those
	// items and clears none of them: the operation would take effect
	// twice, or, if this call takes nothing, take an item while the
	// caller is told ErrEmpty. This attempt fences it: a write conflict
	// over the line's items, committed even when it takes nothing.
	fence := lastDue != nil && o.mayLandLate()
	if len(out) == 0 {
		// Depend on the emptiness we saw, as a normal read would (and a
		// plain one did).
		if !plain {
			if err := tr.AddReadConflictRange(r); err != nil {
				return nil, err
			}
		}
		if fence {
			if err := fenceDue(tr, r, lastDue, reverse); err != nil {
				return nil, err
			}
		}
		if o.mayLandLate() {
			// An earlier call of the operation may also have taken its
			// item from elsewhere than the queue's range: a staged take
			// collects the item handed to its request from its result
			// key, which this call neither reads nor writes. That take
			// read the operation's record key, and so did every earlier
			// attempt: a write conflict there makes any of them fail if
			// it lands after this answer.
			if err := tr.AddWriteConflictKey(o.recordKeyOrSlot()); err != nil {
				return nil, err
			}
			return nil, errEmptyFenced
		}
		return nil, ErrEmpty
	}
	// The read conflict covers what the result depended on: from the end we
	// took from up to and including the last key taken. It must be added
	// before the clears: FDB leaves keys the transaction already wrote out
	// of an explicit read conflict range, and then a concurrent consumer
	// taking the same item would not conflict.
	if plain {
		// The read added it.
	} else if skip > 0 {
		// The items ahead are the line's, which takes them without
		// changing which items come after them.
		for _, k := range taken {
			if err := tr.AddReadConflictKey(k); err != nil {
				return nil, err
			}
		}
	} else if err := tr.AddReadConflictRange(headConflict(r, taken[len(taken)-1], reverse)); err != nil {
		return nil, err
	}
	for _, k := range taken {
		tr.Clear(k)
	}
	o.record(tr, records...)
	if fence {
		if err := fenceDue(tr, r, lastDue, reverse); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fenceDue adds takeEnd's fence: a write conflict over r's items from its
// end up to lastDue, the last item due to the line. It comes after the
// attempt's read conflicts, which FoundationDB would leave out where the
// transaction wrote.
func fenceDue(tr kv.Transaction, r kv.KeyRange, lastDue []byte, reverse bool) error {
	return tr.AddWriteConflictRange(headConflict(r, lastDue, reverse))
}

// headConflict is the range a take from r's head (its end in reverse)
// depended on, up to and including last, the last key taken.
func headConflict(r kv.KeyRange, last []byte, reverse bool) kv.KeyRange {
	if reverse {
		return kv.KeyRange{Begin: last, End: r.End}
	}
	return kv.KeyRange{Begin: r.Begin, End: append(bytes.Clone(last), 0x00)}
}

// skipped is how many items at the head reserved (nil: none) says are due
// to a staged line.
func skipped(tr kv.ReadTransaction, reserved func(kv.ReadTransaction) (int, error)) (int, error) {
	if reserved == nil {
		return 0, nil
	}
	return reserved(tr)
}

// peekEnd reads the first item of e (after those reserved) with a normal
// read, and returns it as a take would.
func peekEnd[T any](ctx context.Context, t kv.ReadTransactor, e queueEnd[T]) (T, error) {
	var zero T
	if err := checkTransactor(t); err != nil {
		return zero, err
	}
	return kv.ReadTransact(ctx, t, func(tr kv.ReadTransaction) (T, error) {
		skip, err := skipped(tr, e.reserved)
		if err != nil {
			return zero, err
		}
		kvs, err := tr.GetRange(e.items, kv.RangeOptions{Limit: skip + 1, Reverse: e.reverse}).GetSlice()
		if err != nil {
			return zero, err
		}
		kvs = kvs[min(skip, len(kvs)):]
		if len(kvs) == 0 {
			return zero, ErrEmpty
		}
		if e.take != nil {
			return e.take(kvs[0])
		}
		v, _, err := e.accept(kvs[0])
		return v, err
	})
}

func emptyRange(ctx context.Context, t kv.ReadTransactor, r kv.KeyRange, reserved func(kv.ReadTransaction) (int, error)) (bool, error) {
	if err := checkTransactor(t); err != nil {
		return false, err
	}
	return kv.ReadTransact(ctx, t, func(tr kv.ReadTransaction) (bool, error) {
		skip, err := skipped(tr, reserved)
		if err != nil {
			return false, err
		}
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: skip + 1}).GetSlice()
		return len(kvs) <= skip, err
	})
}

// rows reads a range result's pairs in order: with an iterator, or, for a
// read of one row (a Dequeue, a pop), with GetSlice, which reads the same
// one batch (the row is at most a value under FDB's 80,000-byte batch,
// 120,000 after 7.4)
// and lets a backend skip building an iterator. Its methods are those of
// kv.RangeIterator that takeEnd uses.
type rows struct {
	it  kv.RangeIterator // nil: kvs
	kvs []kv.KeyValue
	i   int // kvs[i-1] is the current pair
	err error
}

func rowsOf(rr kv.RangeResult, limit int) rows {
	if limit != 1 {
		return rows{it: rr.Iterator()}
	}
	kvs, err := rr.GetSlice()
	return rows{kvs: kvs, err: err}
}

func (r *rows) Next() bool {
	if r.it != nil {
		return r.it.Next()
	}
	if r.i < len(r.kvs) {
		r.i++
		return true
	}
	return false
}

func (r *rows) KeyValue() kv.KeyValue {
	if r.it != nil {
		return r.it.KeyValue()
	}
	return r.kvs[r.i-1]
}

func (r *rows) Err() error {
	if r.it != nil {
		return r.it.Err()
	}
	return r.err
}
