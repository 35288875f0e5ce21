package fdbqueue

import (
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A step's reads: the small types that carry them, and the range reads
// issued together and waited for before the commit.

// pass is one transaction's work on the line: its transaction, the time
// it acts at (deadlines are compared with it) and the size it may still
// spend (see budget.go).
type pass struct {
	tr  kv.Transaction
	now time.Time
	sp  *spend
}

// lineRead is what a transaction read of the line and of the items: the
// first requests, the first items, and whether the read of the items
// reached the end of the queue.
type lineRead struct {
	reqs, items []kv.KeyValue
	complete    bool
}

// helperSpend starts the size count of a transaction that serves or
// drops requests without a request of its own (fulfilPass,
// recoverPlaces): the depth counter's atomic add, which its commit writes
// when the items it hands out or puts back change the depth
// (trackedTx.flush, observe.go). Everything else it writes is counted as
// it goes, each bump of the signal key with the move or the expiry that
// makes it (moveCost, resultCost).
func (s *stageSide[T]) helperSpend() *spend {
	return &spend{budget: s.st.budget, used: s.journal.track.counterCost()}
}

// prefetched holds a fulfilment's reads of the first items (up to limit)
// and of a few results (to expire), started together.
type prefetched struct {
	items, results kv.RangeResult
	limit          int
}

func (s *stageSide[T]) prefetch(tr kv.Transaction, limit int, results bool) prefetched {
	pre := prefetched{
		items: tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: limit, Reverse: s.reverse, Mode: kv.StreamingModeWantAll}),
		limit: limit,
	}
	if results {
		pre.results = s.scanResults(tr)
	}
	return pre
}

// readItems reads the first items from rr (a read of the items' range with
// limit), as a step uses them: at most limit, and no more once their bytes
// reach the batch budget, since a step hands out, or reaches its place
// through, no more than that. The read is an iterator over a read in
// StreamingModeWantAll, whose batches FDB limits to 80,000 bytes in 7.3
// and 7.4 and 120,000 later (bindings/c/fdb_c.cpp), so it fetches at most one
// batch beyond. Values are read although only keys are needed before a
// step's place: the kv interface, as FDB's API, has no key-only range
// read. complete reports that the read reached the end of the queue.
func (s *stageSide[T]) readItems(rr kv.RangeResult, limit int) (items []kv.KeyValue, complete bool, err error) {
	return readUpTo(rr, limit, s.st.budget)
}

// readUpTo reads rr with an iterator: at most limit pairs, and none after
// their bytes reached maxBytes (but at least one). complete reports that
// the range ended first.
func readUpTo(rr kv.RangeResult, limit, maxBytes int) (kvs []kv.KeyValue, complete bool, err error) {
	it := rr.Iterator()
	n := 0
	for len(kvs) < limit && (n < maxBytes || len(kvs) == 0) {
		if !it.Next() {
			return kvs, it.Err() == nil, it.Err()
		}
		p := it.KeyValue()
		kvs = append(kvs, p)
		n += len(p.Key) + len(p.Value)
	}
	return kvs, false, nil
}

// stepSpend starts the size count of a waiter's step (see budget.go): its
// journal's overhead, the normal reads of its two keys, a registration's
// read conflict on its result key, a renewal, the clears of its keys and
// two watches.
func (w *waiter[T]) stepSpend() *spend {
	k := max(len(w.reqKey), len(w.resKey))
	return &spend{budget: w.s.st.budget,
		used: w.o.overheadCost(w.s.items) + 5*conflictKeyCost(k) + setCost(k, 16) + 2*clearCost(k)}
}

// scanResults reads the first few results, for a fulfilment to expire.
func (s *stageSide[T]) scanResults(tr kv.Transaction) kv.RangeResult {
	return tr.Snapshot().GetRange(s.resRange, kv.RangeOptions{Limit: resultScan})
}

// stepReads are the range reads one step issued. On FoundationDB a range
// read is in flight from the GetRange call, as every read here overlaps
// the others of its step; a step waits for each one, itself, before it
// commits. Commit would wait for them too, and fail with the error of one
// that failed (RYWImpl::commit awaits reading, fdbclient/ReadYourWrites.actor.cpp),
// but a later batch of a range read is only fetched when consumed, and an
// operation issued once the commit started fails with used_during_commit
// (2017, checkUsedDuringCommit), while the commit may still apply.
type stepReads struct{ held []*heldRange }

// hold records rr (nil stays nil) and returns it with its result cached,
// so that waiting for it before the commit does not read it twice.
func (r *stepReads) hold(rr kv.RangeResult) kv.RangeResult {
	if rr == nil {
		return nil
	}
	h := &heldRange{rr: rr}
	r.held = append(r.held, h)
	return h
}

// wait waits for every read held that the step did not look at (for its
// first batch: later ones are fetched only when asked for) and returns the
// first error: the transaction would fail with it anyway.
func (r *stepReads) wait() error {
	var first error
	for _, h := range r.held {
		h.mu.Lock()
		used := h.used
		h.mu.Unlock()
		if !used {
			if err := waitRead(h.rr, nil); err != nil && first == nil {
				first = err
			}
		}
	}
	r.held = r.held[:0]
	return first
}

// heldRange is a range read whose GetSlice result is kept, so that
// several looks at it read it once.
type heldRange struct {
	rr   kv.RangeResult
	mu   sync.Mutex
	used bool // GetSlice or Iterator was called
	done bool
	kvs  []kv.KeyValue
	err  error
}

// GetSlice waits for the read.
func (h *heldRange) GetSlice() ([]kv.KeyValue, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.used = true
		h.kvs, h.err = h.rr.GetSlice()
		h.done = true
	}
	return h.kvs, h.err
}

// Iterator streams the read; the caller stops when it has enough.
func (h *heldRange) Iterator() kv.RangeIterator {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used = true
	if h.done {
		return &sliceIter{h: h, i: -1}
	}
	return h.rr.Iterator()
}

type sliceIter struct {
	h *heldRange
	i int
}

func (it *sliceIter) Next() bool {
	if kvs, err := it.h.GetSlice(); err != nil || it.i+1 >= len(kvs) {
		return false
	}
	it.i++
	return true
}

func (it *sliceIter) KeyValue() kv.KeyValue { return it.h.kvs[it.i] }

func (it *sliceIter) Err() error { return it.h.err }

// heldRead returns the read rr holds if it is a heldRange, else rr: a
// staged step's record read is held, and the journal still needs to know
// what it found (op.applied: a marker).
func heldRead(rr kv.RangeResult) kv.RangeResult {
	if h, ok := rr.(*heldRange); ok {
		return h.rr
	}
	return rr
}
