package fdbqueue

import (
	"context"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// call is the state of one Enqueue, Dequeue, Push or pop in flight: the
// operation's journal state, its tracked transaction (observe.go), its read
// of the stored configuration and its arguments and results, in one
// object taken from a pool, with the function each attempt runs bound to
// it once. An operation on a Database thus allocates none of these per
// call, nor a closure or a wrapper per attempt.
//
// Nothing outside the operation keeps a pointer into a call: the backend
// sees only the function it runs and its own transaction (the tracked one
// wraps it and is dropped with it), and what the operation hands on (the
// record range queued for clearing, the items returned) is allocated apart.
type call struct {
	kind callKind
	q    *Queue
	pq   *PriorityQueue
	// Enqueue, Push: the stored values (store1 backs a single one);
	// Push's priority and the range of its items.
	stored   [][]byte
	store1   [1][]byte
	priority int64
	prio     kv.KeyRange
	// key backs the item key an enqueue or push writes, from one
	// operation to the next (see itemKeys); room is where a push packs
	// its key, after its range (see PriorityQueue.prioRange).
	key  []byte
	room []byte
	// Takes: the bound, which end (pops), and the results: vals for a
	// Queue, items for a PriorityQueue. keepOne says the caller wants one
	// result and copies it out: the results then fill one1 or item1.
	lim     batchLimit
	started time.Time // when the last attempt of a batch take began (see slowBatch)
	reverse bool
	keepOne bool
	// empty: the last attempt took nothing and committed a fence
	// (emptied); the call returns ErrEmpty.
	empty bool
	vals  [][]byte
	one1  [1][]byte
	items []Item
	item1 [1]Item

	op   op
	gate gateRead
	// Without a MeterProvider, a call on a Database runs db.Transact
	// itself with tx as each attempt's tracked transaction (what
	// observedDB.Transact does, without the wrapper); otherwise t is the
	// observed transactor (tracker.observe) and the attempt runs on what
	// it is given.
	tracked bool
	db      kv.Database
	t       kv.Transactor
	tx      trackedTx

	trackedFn, plainFn func(kv.Transaction) error // c.trackedAttempt, c.plainAttempt
}

type callKind uint8

const (
	callEnqueue callKind = iota + 1
	callDequeue
	callPush
	callPop
)

var calls = sync.Pool{New: func() any {
	c := &call{}
	c.trackedFn = c.trackedAttempt
	c.plainFn = c.plainAttempt
	return c
}}

// newCall returns a call from the pool for an operation of kind (named
// opName for the metrics, and mark, if not empty, for the journal: see
// op.journalKind) of l on t, with its journal state begun.
func newCall(kind callKind, l *layer, opName, mark string, t kv.Transactor, opts []OpOption) *call {
	c := calls.Get().(*call)
	c.kind = kind
	c.op.mark = mark
	k := l.journal.track
	db, isDB := t.(kv.Database)
	if _, wrapped := t.(*observedDB); isDB && !wrapped && !k.obs.metered {
		c.tracked, c.db = true, db
		c.tx.k, c.tx.op = k, opName
		l.journal.beginInto(&c.op, opName, true, true, opts)
		if c.op.fresh && !l.journal.disabled {
			// The ID's last byte is random (newOpIDAt) and used for
			// nothing else: it picks the depth counter, one draw fewer.
			c.tx.shard = 1 + c.op.id[len(c.op.id)-1]%depthShards
		}
		return c
	}
	c.t = k.observe(opName, t)
	var kindName string
	if ob, ok := c.t.(observed); ok {
		kindName = ob.opKind()
	}
	_, owned := c.t.(kv.Database)
	l.journal.beginInto(&c.op, kindName, owned, true, opts)
	return c
}

// run runs the operation's transaction (its attempts call c.attempt). An
// error that leaves it unknown whether the operation took effect carries
// the ID that settles it (op.unknownResult).
func (c *call) run(ctx context.Context) error {
	if !c.tracked {
		return c.op.unknownResult(c.t.Transact(ctx, c.plainFn))
	}
	err := c.db.Transact(ctx, c.trackedFn)
	if err == nil {
		c.tx.report() // the last attempt committed
		return nil
	}
	return c.op.unknownResult(err)
}

// trackedAttempt is one attempt on the backend's transaction tr, through
// c.tx, as observedDB.Transact runs it.
func (c *call) trackedAttempt(tr kv.Transaction) error {
	t := &c.tx
	t.Transaction = tr
	t.clearState() // an earlier attempt's
	err := c.attempt(t)
	if err == nil {
		t.flush()
	}
	return err
}

func (c *call) plainAttempt(tr kv.Transaction) error { return c.attempt(tr) }

// slowBatch halves the budget of a batch take whose last attempt took more
// than slowAttempt: FoundationDB fails a transaction with
// transaction_too_old once its read version is 5 s old, and an attempt
// that read and committed close to that budget would likely fail the same
// way again on a retry, forever (a take at MaxBatchBudget reads some 110
// batches of 80 KB on a 7.3 or 7.4 client, 75 of 120 KB later, one after
// another). It goes no lower than
// minSlowBudget; a take still returns at least one item.
func (c *call) slowBatch() {
	if c.lim.max <= 1 {
		return
	}
	now := time.Now()
	if !c.started.IsZero() && now.Sub(c.started) > slowAttempt {
		c.lim.budget = max(c.lim.budget/2, min(c.lim.budget, minSlowBudget))
	}
	c.started = now
}

// slowAttempt is half of FoundationDB's 5-second transaction lifetime
// (MAX_READ_TRANSACTION_LIFE_VERSIONS), and minSlowBudget the smallest
// budget slowBatch halves to.
const (
	slowAttempt   = 2500 * time.Millisecond
	minSlowBudget = 100_000
)

// attempt runs the operation's body in tr.
func (c *call) attempt(tr kv.Transaction) error {
	switch c.kind {
	case callEnqueue:
		return c.q.enqueueAttempt(tr, c)
	case callDequeue:
		c.slowBatch()
		c.op.gate = c.q.journal.gate.issueInto(&c.gate, tr, false, c.op.owned) // config.go
		vals, err := takeEnd(tr, &c.op, c.q.head, c.lim, c.valsDst())
		c.vals = vals
		return c.emptied(err)
	case callPush:
		return c.pq.pushAttempt(tr, c)
	case callPop:
		c.slowBatch()
		c.op.gate = c.pq.journal.gate.issueInto(&c.gate, tr, false, c.op.owned)
		items, err := takeEnd(tr, &c.op, c.pq.ends[boolIndex(c.reverse)], c.lim, c.itemsDst())
		c.items = items
		return c.emptied(err)
	}
	panic("fdbqueue: unknown call kind")
}

// emptied is a take attempt's error: nil, so that the attempt commits,
// for a take that found nothing but added a fence (errEmptyFenced), which
// it notes in c.empty for takeResult.
func (c *call) emptied(err error) error {
	c.empty = err == errEmptyFenced
	if c.empty {
		return nil
	}
	return err
}

// takeResult is the error of a take whose run returned err.
func (c *call) takeResult(err error) error {
	if err == nil && c.empty {
		return ErrEmpty
	}
	return c.op.emptyTaken(err)
}

// itemKeys returns where an attempt may build the item keys it writes
// one at a time, each handed to Set (or SetVersionstampedKey) before the
// next is built; nil when each key needs memory of its own. The backend
// keeps neither slice (kv.Transaction.Set), so what matters is whether
// the tracked transaction keeps the key: trackedTx.note keeps each item
// key Set through it until its state is cleared. On a Database without
// a MeterProvider that is c.tx, cleared at each attempt's start and at
// release, so one key, the only one of an Enqueue or Push, may use c.key;
// otherwise the tracked transaction may be a caller's, which outlives the
// call. A versionstamped key is never kept (SetVersionstampedKey notes
// none), so every key of a versionstamp-mode batch may use c.key.
func (c *call) itemKeys(versionstamped bool) *[]byte {
	if versionstamped || c.tracked && len(c.stored) == 1 {
		return &c.key
	}
	return nil
}

func (c *call) valsDst() [][]byte {
	if c.keepOne {
		return c.one1[:0]
	}
	return nil
}

func (c *call) itemsDst() []Item {
	if c.keepOne {
		return c.item1[:0]
	}
	return nil
}

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// release returns c to the pool, dropping every reference it holds.
//
// It writes only the fields the operation set: a pointer written while
// the GC marks costs a write barrier, even a nil over a nil, and a queue
// operation on memdb runs with the GC marking much of the time.
func (c *call) release() {
	switch c.kind {
	case callEnqueue:
		c.q, c.store1[0], c.stored = nil, nil, nil
	case callDequeue:
		c.q, c.one1[0], c.vals = nil, nil, nil
	case callPush:
		c.pq, c.store1[0], c.stored, c.priority, c.prio, c.room = nil, nil, nil, 0, kv.KeyRange{}, nil
	case callPop:
		c.pq, c.item1[0], c.items = nil, Item{}, nil
	default:
		c.q, c.pq = nil, nil
	}
	c.kind, c.lim, c.reverse, c.keepOne, c.empty = 0, batchLimit{}, false, false, false
	c.started = time.Time{}
	if cap(c.key) > maxKeptSlotVal {
		c.key = nil
	}
	c.op.reset()
	if c.gate.g != nil {
		c.gate = gateRead{}
	}
	if c.tracked {
		c.tracked, c.db = false, nil
		c.tx.release()
	} else {
		c.t = nil
	}
	calls.Put(c)
}

// reset makes o a zero op again, keeping its cleanups' backing array. It
// writes only the pointers an operation sets (see call.release).
func (o *op) reset() {
	if len(o.cleanups) > 0 {
		clear(o.cleanups)
		o.cleanups = o.cleanups[:0]
	}
	o.j, o.id, o.owned, o.skip, o.gate, o.kind, o.mark = nil, OpID{}, false, false, nil, "", ""
	if o.key0 != nil {
		o.rng, o.key0 = kv.KeyRange{}, nil
	}
	if o.slotted {
		o.slotKey = nil
		if cap(o.slotVal) > maxKeptSlotVal {
			o.slotVal = nil
		}
	}
	if cap(o.recBuf) > maxKeptSlotVal {
		o.recBuf = nil
	}
	o.wide, o.fresh, o.slotted, o.slot, o.slotGen, o.resumed, o.loggedFor = false, false, false, 0, 0, false, ""
	o.recorded.Store(false)
	o.decl = declRead{}
	o.headTake = false
}

// release drops what t refers to, keeping its first backing array.
func (t *trackedTx) release() {
	t.clearState()
	if t.small[0].key != nil {
		// Not clear(t.small[:]): memclrHasPointers costs more than the
		// two pointers.
		t.small[0].key, t.small[1].key = nil, nil
	}
	t.Transaction, t.k, t.op, t.failed, t.shard = nil, nil, "", false, 0
}
