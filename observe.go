package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"

	"github.com/fdbqueue/fdbqueue/kv"
)

// This file holds the transaction wrapper through which every operation of
// a Queue or PriorityQueue runs: it maintains the depth counters (depth.go)
// in the same transaction as the items it adds or removes, and reports
// conflicts, retries and commit_unknown_result to the metrics (metrics.go).
//
// The hook sites are the entry points of the operations: EnqueueBatch,
// DequeueBatch, Clear, Push, PushBatch, popBatch, the staged take
// (stageSide.run) and Recover wrap their transactor with layer.observe
// before they begin.

// observed is a Transactor wrapped by an operation of kind op.
type observed interface{ opKind() string }

// tracker is what the wrappers of one queue share.
type tracker struct {
	counting bool        // maintain the depth counters (Queue, PriorityQueue)
	items    kv.KeyRange // the items' range
	// under is, when items is a subspace's range [p+\x00, p+\xff), its
	// prefix p (see in), else nil.
	under []byte
	depth depthKeys
	obs   *observer
}

func newTracker(queuePrefix []byte, cfg config) *tracker {
	return &tracker{depth: newDepthKeys(queuePrefix), obs: newObserver(queuePrefix, cfg.obs)}
}

// countDepth makes the operations maintain the depth counters of the
// items in r (hook: newLayer).
func (k *tracker) countDepth(r kv.KeyRange) {
	k.counting, k.items, k.under = true, r, nil
	if n := len(r.Begin) - 1; n >= 0 && len(r.End) == n+1 && r.Begin[n] == 0x00 && r.End[n] == 0xff && bytes.Equal(r.Begin[:n], r.End[:n]) {
		k.under = r.Begin[:n:n]
	}
}

// in reports whether key is in the items' range. For a subspace's range
// [p+\x00, p+\xff), that is: key starts with p and has a byte after it,
// not 0xff (a key that differs from p before p's end sorts below the
// range or above it at that byte; p alone sorts below p+\x00).
func (k *tracker) in(key []byte) bool {
	if p := k.under; p != nil {
		return len(key) > len(p) && key[len(p)] != 0xff && string(key[:len(p)]) == string(p)
	}
	return bytes.Compare(k.items.Begin, key) <= 0 && bytes.Compare(key, k.items.End) < 0
}

// observe wraps t for an operation of kind op: a Database stays a Database
// (its transactions are made here and run with kv.RetryLoop, as every
// backend's Transact does), a Transaction stays a caller's transaction
// (what it runs sees the wrapper; committing is the caller's).
func (k *tracker) observe(op string, t kv.Transactor) kv.Transactor {
	switch v := t.(type) {
	case *observedDB, *observedTr:
		return t
	case *trackedTx:
		if v.k == k {
			return t // already counted by this queue's tracker
		}
		return &observedTr{k: k, op: op, inner: v}
	case kv.Database:
		return k.observeDB(op, v)
	case kv.Transaction:
		return &observedTr{k: k, op: op, inner: v}
	}
	return t
}

// observeDB is observe for a Database.
func (k *tracker) observeDB(op string, db kv.Database) kv.Database {
	if o, ok := db.(*observedDB); ok {
		return o
	}
	return &observedDB{Database: db, k: k, op: op}
}

type observedDB struct {
	kv.Database
	k  *tracker
	op string
}

func (d *observedDB) opKind() string { return d.op }

// CreateTransaction returns a wrapped transaction of the backend.
func (d *observedDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return &trackedTx{Transaction: tr, k: d.k, op: d.op}, nil
}

// Transact runs fn through the database's own Transact, with a wrapped
// transaction whose depth change is written when fn returns. With a
// MeterProvider it instead runs fn with kv.RetryLoop over a transaction of
// the database's CreateTransaction, as every backend's Transact does
// (package kv: backends never retry on their own), so that it sees each
// commit's error; the transaction is bound to a context that ends when
// Transact returns, so the backend releases it.
func (d *observedDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if !d.k.obs.metered {
		t := &trackedTx{k: d.k, op: d.op}
		err := d.Database.Transact(ctx, func(tr kv.Transaction) error {
			t.Transaction = tr
			t.clearState() // an earlier attempt's
			err := fn(t)
			if err == nil {
				t.flush()
			}
			return err
		})
		if err == nil {
			t.report() // the last attempt committed
		}
		return err
	}
	return kv.RetryCreated(ctx, d, fn)
}

// observedTr wraps a caller's transaction: each Transact through it runs
// fn with a tracked view of the transaction, whose depth change is written
// when fn returns (the caller commits it, or not, with the items).
type observedTr struct {
	k     *tracker
	op    string
	inner kv.Transaction
}

func (o *observedTr) opKind() string { return o.op }

func (o *observedTr) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return o.inner.Transact(ctx, func(tr kv.Transaction) error {
		t := &trackedTx{Transaction: tr, k: o.k, op: o.op}
		err := fn(t)
		if err == nil {
			t.flush()
			t.report()
		}
		return err
	})
}

func (o *observedTr) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return o.inner.ReadTransact(ctx, fn)
}

// trackedTx is one transaction of an operation. It counts the items its
// writes add to and remove from the items' range, and writes the net change
// to one depth counter just before it commits (flush). Within the
// transaction it knows which item keys it set and cleared, so clearing a
// key twice, or setting one it cleared, counts right. It assumes what this
// package's operations guarantee: a key it clears was read in the same
// transaction (it exists, and a concurrent removal makes this commit
// conflict), a key it sets is new (random suffix or versionstamp).
type trackedTx struct {
	kv.Transaction
	k       *tracker
	op      string
	delta   int64
	reset   bool           // the items' range was cleared: the counters restart at delta
	touched []touch        // item keys written, in order (few: searched linearly)
	small   [2]touch       // touched's first backing array
	index   map[string]int // touched by key, once there are many
	failed  bool           // the last commit failed; a Reset now is a retry
	// shard, when not 0, is 1 + the depth counter flush adds to: random
	// bits the operation already drew (see newCall), instead of a draw
	// of its own.
	shard  uint8
	events []func() // to report once the commit succeeds (afterCommit)
}

func (t *trackedTx) opKind() string { return t.op }

func (t *trackedTx) inItems(key []byte) bool {
	return t.k.counting && t.k.in(key)
}

// touch is an item key written in the transaction and whether it is
// present after the writes so far.
type touch struct {
	key     []byte
	present bool
}

// indexAt is how many touched keys are searched linearly before they are
// indexed by a map (batches touch thousands).
const indexAt = 16

// note records that key is now present (set) or absent (cleared). The key
// is kept, not copied: the operations never change a key they wrote.
func (t *trackedTx) note(key []byte, present bool) {
	i := -1
	if t.index != nil {
		if j, ok := t.index[string(key)]; ok {
			i = j
		}
	} else {
		for j := range t.touched {
			if bytes.Equal(t.touched[j].key, key) {
				i = j
				break
			}
		}
	}
	if i >= 0 && t.touched[i].present == present {
		return // set again, or cleared again
	}
	if present {
		t.delta++
	} else {
		t.delta--
	}
	if i >= 0 {
		t.touched[i].present = present
		return
	}
	t.touched = append(t.touched, touch{key: key, present: present})
	switch {
	case t.index != nil:
		t.index[string(key)] = len(t.touched) - 1
	case len(t.touched) > indexAt:
		t.index = make(map[string]int, 2*len(t.touched))
		for j, tc := range t.touched {
			t.index[string(tc.key)] = j
		}
	}
}

func (t *trackedTx) Set(key, value []byte) {
	if t.inItems(key) {
		t.note(key, true)
	}
	t.Transaction.Set(key, value)
}

func (t *trackedTx) Clear(key []byte) {
	if t.inItems(key) {
		t.note(key, false)
	}
	t.Transaction.Clear(key)
}

// ClearRange of the whole items' range (Clear) empties the queue: the
// counters are cleared with it. The operations never clear part of it.
func (t *trackedTx) ClearRange(r kv.KeyRange) {
	if t.k.counting && bytes.Compare(r.Begin, t.k.items.Begin) <= 0 && bytes.Compare(r.End, t.k.items.End) >= 0 {
		t.delta, t.reset, t.touched, t.index = 0, true, t.small[:0], nil
	}
	t.Transaction.ClearRange(r)
}

// SetVersionstampedKey's key ends with the 4-byte offset of the stamp; a
// versionstamped key is always new.
func (t *trackedTx) SetVersionstampedKey(key, value []byte) {
	if len(key) > 4 && t.inItems(key[:len(key)-4]) {
		t.delta++
	}
	t.Transaction.SetVersionstampedKey(key, value)
}

// flush writes the net change of the depth: one atomic add to a counter
// picked at random (no read, no conflict), or, after Clear, a clear of
// every counter and the change since.
func (t *trackedTx) flush() {
	if t.reset {
		t.Transaction.ClearRange(t.k.depth.all)
	}
	if t.delta != 0 {
		i := int(t.shard) - 1
		if i < 0 {
			i = rand.IntN(depthShards)
		}
		t.Transaction.Add(t.k.depth.shard(i), counterParam(t.delta))
	}
	t.delta, t.reset = 0, false
	t.dropTouched()
}

func (t *trackedTx) clearState() {
	t.delta, t.reset = 0, false
	t.dropTouched()
	if t.events != nil {
		t.events = nil
	}
}

// dropTouched empties touched and drops the index, writing only what
// changed (see call.release): touched is t.small[:0] again unless a key
// was noted since, or it was never set.
func (t *trackedTx) dropTouched() {
	if len(t.touched) != 0 || t.touched == nil {
		t.touched = t.small[:0]
	}
	if t.index != nil {
		t.index = nil
	}
}

var (
	plusOne64  = []byte{1, 0, 0, 0, 0, 0, 0, 0}
	minusOne64 = []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
)

// counterParam is the 8-byte little-endian parameter of an add of d (the
// common ±1 without an allocation; the backend copies it).
func counterParam(d int64) []byte {
	switch d {
	case 1:
		return plusOne64
	case -1:
		return minusOne64
	}
	p := make([]byte, 8)
	binary.LittleEndian.PutUint64(p, uint64(d))
	return p
}

// report runs the events of a committed attempt.
func (t *trackedTx) report() {
	ev := t.events
	t.events = nil
	for _, f := range ev {
		f()
	}
}

// Commit writes the depth change, commits, and on success reports the
// attempt's events; a failed commit is counted (conflict, unknown result)
// and its events wait for OnError or Reset to drop them.
func (t *trackedTx) Commit() error {
	t.flush()
	err := t.Transaction.Commit()
	t.failed = err != nil
	if err != nil {
		t.k.obs.commitFailed(t.op, err)
		return err
	}
	t.report()
	return nil
}

func (t *trackedTx) OnError(err error) error {
	t.clearState()
	oerr := t.Transaction.OnError(err)
	if oerr == nil {
		t.k.obs.retried(t.op, err)
	}
	t.failed = false
	return oerr
}

func (t *trackedTx) Reset() {
	t.clearState()
	if t.failed {
		t.k.obs.retried(t.op, nil)
	}
	t.failed = false
	t.Transaction.Reset()
}

// Transact runs fn inside this transaction, through the wrapper.
func (t *trackedTx) Transact(_ context.Context, fn func(kv.Transaction) error) error {
	return fn(t)
}

// isConflict reports FDB's not_committed (1020).
func isConflict(err error) bool { return errors.Is(err, kv.ErrNotCommitted) }

// counterCost bounds what the depth change adds to a transaction's size:
// one atomic add (budget.go counts it in every operation's overhead; a
// Clear's range clear of the counters is not budgeted).
func (k *tracker) counterCost() int {
	if !k.counting {
		return 0
	}
	return setCost(len(k.depth.shards[depthShards-1]), 8)
}
