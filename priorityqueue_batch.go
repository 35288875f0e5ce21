package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	"math"

	"github.com/fdbqueue/fdbqueue/kv"
)

// PushItem is a value to push with its priority: an element of a
// PushBatch. Its fields are Item's, in the same order, so an Item a pop
// returned converts to one (PushItem(it)) to be pushed back.
type PushItem struct {
	Value    []byte
	Priority int64
}

// PushBatch pushes items in one transaction: all or none are pushed.
// Priorities may be any int64, MinInt64 and MaxInt64 included. The items
// of one priority get consecutive counts after its last, in batch order,
// so they come out in that order among themselves, after the items
// already there, as from as many Pushes one after another; items of
// different priorities are independent.
//
// Limits are EnqueueBatch's, checked before anything is written: a value
// whose stored form (with TupleValues, the packed tuple) exceeds 100,000
// bytes fails with ErrValueTooLarge naming its index, and a batch of
// several items whose transaction size, counted as FoundationDB counts it
// (see WithBatchBudget), exceeds the batch budget with ErrBatchTooLarge (a
// single item is always accepted); an item costs what one of EnqueueBatch
// does. An empty batch does nothing. A priority whose last key (another
// client's) has a count that leaves no room in an int64 for its items
// fails with ErrForeignKey, nothing written.
//
// Conflicts: none with other pushers (each priority's last count is found
// with a snapshot read) nor with pops, as Push (a pop whose read covers a
// pushed priority conflicts instead: see PopMin, PopMax). A batch that
// commits concurrently with other pushes of a priority may share counts
// with them: its items then interleave with theirs at random, staying in
// batch order among themselves. Cost: one snapshot range read (limit 1,
// reverse) per distinct priority and, on a retry, one journal point read,
// all issued together (one round trip), then one write per item, one
// journal record for the call and a depth counter's atomic add.
//
// Under commit_unknown_result the retry finds the record of the attempt
// that committed and does nothing, so the batch is pushed exactly once; an
// error for which kv.MaybeCommitted is true leaves it unknown whether it
// was: call PushBatch again under the same ID (yours, or the one in the
// *UnknownResultError) to settle it (see WithOpID; in your own
// transaction's retry loop, pass one). Without a
// journal (made WithoutIdempotency, where WithOpID does nothing, or given
// a Transaction without WithOpID), a retry after an applied
// commit_unknown_result pushes the whole batch a second time, as it would
// a Push's item.
func (pq *PriorityQueue) PushBatch(ctx context.Context, t kv.Transactor, items []PushItem, opts ...OpOption) error {
	if err := pq.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	if len(items) == 0 {
		return nil
	}
	stored := make([][]byte, len(items))
	for i, it := range items {
		s, err := encodeOne(pq.cfg.encoding, i, it.Value)
		if err != nil {
			return err
		}
		stored[i] = s
	}
	t = pq.journal.track.observe("push", t)
	var kind string
	if ob, ok := t.(observed); ok {
		kind = ob.opKind()
	}
	_, owned := t.(kv.Database)
	o := &op{}
	// Recorded in a journal slot when the call makes its ID, as Push's.
	pq.journal.beginInto(o, kind, owned, true, opts)
	// One item is always accepted, as Push accepts it: it fits the room
	// MaxBatchBudget leaves under the transaction limit. The reads are
	// snapshot reads: they add no conflict range to count.
	if len(items) > 1 {
		if size := writeCost(o, pq.items, stored, false); size > pq.cfg.batchBudget {
			err := fmt.Errorf("%w: %d items, about %d bytes, budget %d", ErrBatchTooLarge, len(items), size, pq.cfg.batchBudget)
			o.end(err) // hand back the clean-ups it took
			return err
		}
	}
	b := pq.newPushBatch(items, stored)
	var gate gateRead
	err := t.Transact(ctx, func(tr kv.Transaction) error {
		o.gate = pq.journal.gate.issueInto(&gate, tr, true, o.owned) // config.go
		return b.attempt(tr, o)
	})
	o.end(err)
	return o.unknownResult(err)
}

// pushBatch is a PushBatch's items grouped by priority.
type pushBatch struct {
	pq     *PriorityQueue
	items  []PushItem
	stored [][]byte
	group  []int       // the group of each item
	groups []pushGroup // in order of first appearance
	tails  []kv.RangeResult
	keyLen int // the longest item key
}

// pushGroup is one priority's part of a batch: its items' range, how many
// the batch pushes, and, in an attempt, the next count.
type pushGroup struct {
	r    kv.KeyRange
	n    int
	next int64
}

func (pq *PriorityQueue) newPushBatch(items []PushItem, stored [][]byte) *pushBatch {
	b := &pushBatch{pq: pq, items: items, stored: stored, group: make([]int, len(items))}
	b.keyLen = len(pq.sub.prefix) + 9 + 9 + suffixKeySize
	at := make(map[int64]int)
	for i, it := range items {
		g, ok := at[it.Priority]
		if !ok {
			g = len(b.groups)
			at[it.Priority] = g
			b.groups = append(b.groups, pushGroup{r: pq.priorityRange(it.Priority)})
		}
		b.group[i] = g
		b.groups[g].n++
	}
	b.tails = make([]kv.RangeResult, len(b.groups))
	return b
}

// priorityRange is the range of the items of priority p, in one
// allocation of its own.
func (pq *PriorityQueue) priorityRange(p int64) kv.KeyRange {
	r, _ := appendPriorityRange(make([]byte, 0, 2*(len(pq.sub.prefix)+10)), pq.sub.prefix, p)
	return r
}

// attempt is one attempt of the batch in tr: the journal check and every
// priority's tail read issued before any is waited for, then the items
// at their counts, the record and the signal.
func (b *pushBatch) attempt(tr kv.Transaction, o *op) error {
	rec, err := o.check(tr)
	if err != nil {
		return err
	}
	snap := tr.Snapshot()
	for g := range b.groups {
		b.tails[g] = snap.GetRange(b.groups[g].r, kv.RangeOptions{Limit: 1, Reverse: true})
	}
	if _, done, err := o.applied(rec); err != nil || done {
		for _, tail := range b.tails {
			err = waitRead(tail, err) // no read in flight at commit
		}
		return err
	}
	// Every read waited for before any error returns: none is left in
	// flight in a caller's transaction.
	var first error
	for g := range b.groups {
		last, err := firstKey(b.tails[g])
		if err == nil {
			err = b.startCount(g, last)
		}
		if first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	pq := b.pq
	// The keys in one allocation, each with a capacity of its own: the
	// tracked transaction keeps the item keys it sees (trackedTx.note).
	buf := make([]byte, 0, len(b.items)*b.keyLen)
	for i, it := range b.items {
		g := &b.groups[b.group[i]]
		off := len(buf)
		key := buf[off:off:min(off+b.keyLen, cap(buf))]
		key = appendPackedInt(appendPackedInt(append(key, pq.sub.prefix...), it.Priority), g.next)
		if key, err = pq.rand.appendSuffix(key); err != nil {
			return err
		}
		buf = buf[:off+len(key)]
		g.next++
		tr.Set(key, b.stored[i])
	}
	o.record(tr)
	pq.stager.bump(tr)
	return nil
}

// startCount sets group g's first count after last, its priority's last
// key (nil: none, count 0). The counts must fit an int64: past MaxInt64
// they would wrap to negative ones, keys before the priority's older
// items (only a key written by another client can be that high).
func (b *pushBatch) startCount(g int, last []byte) error {
	grp := &b.groups[g]
	grp.next = 0
	if last == nil {
		return nil
	}
	_, c, err := b.pq.parse(last)
	if err != nil {
		return err
	}
	if c > math.MaxInt64-int64(grp.n) {
		return &ForeignKeyError{Key: bytes.Clone(last), Reason: fmt.Sprintf("count %d leaves no room for %d more items in an int64", c, grp.n)}
	}
	grp.next = c + 1
	return nil
}
