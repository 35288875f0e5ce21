package fdbqueue_test

import (
	"bytes"
	"context"
	"sync"

	"github.com/fdbqueue/fdbqueue/kv"
)

// costDB wraps a kv.Database and counts, for each transaction that
// committed (or, read-only, returned; or ended with its function's own
// error; or, a staged step, was reset or left without a commit: see
// flush), what the layers asked of it: the reads, the writes, the
// conflict ranges they added and the round trips their reads took. The
// doc comments' "Cost:" paragraphs are checked against these counts
// (cost_claims*_test.go).
//
// A round trip is a wait on a read that was issued since the last wait:
// FoundationDB's client sends a read when it is issued (Get, GetRange)
// and a wait blocks until its reply, so reads issued together before one
// wait are one round trip, and a wait on a read that an earlier wait
// already covered costs none. A range read is waited on at GetSlice or at
// its iterator's first Next; its later batches are not counted (the
// ranges read here fit one batch).
//
// A read of \xff/metadataVersion is counted apart and costs no round
// trip: FoundationDB sends the metadata version with every read version,
// and Transaction::get returns it from there instead of asking a storage
// server (fdbclient/NativeAPI.actor.cpp, in Transaction::get: "if (key ==
// metadataVersionKey) ... return trState->metadataVersion.getFuture()";
// documentation/sphinx/source/release-notes/release-notes-610.rst: "The
// value of this key is sent with every read version"). The read version
// itself, which every transaction waits for once, is not counted.
type costDB struct {
	kv.Database

	mu   sync.Mutex
	log  []cost // one per finished transaction, in order
	fail []error
	open []*costTx // every transaction made, for flush
	// logged, when set, is called after each transaction is logged, with
	// the number logged since the last take (tests that drive waiters
	// wait on it).
	logged func(n int)
	// quiet, when set, names keys whose watches never report a change
	// (their Wait returns only when its context ends): a test that wakes
	// a waiter with two watches firing at once picks which one it sees.
	quiet func(key []byte) bool
}

func newCostDB(db kv.Database) *costDB { return &costDB{Database: db} }

// cost is what one transaction did. Conflict ranges are those added
// explicitly (AddReadConflict*, AddWriteConflict*): a normal read's own
// read conflict range and a write's own write conflict range are implied
// by the read or write.
type cost struct {
	Get, SnapGet                           int // point reads, the metadata version's excluded
	Range, SnapRange                       int // range reads
	MetadataVersion                        int // reads of \xff/metadataVersion: no round trip
	RoundTrips                             int
	Set, Clear                             int
	ClearRange                             int
	Add, CompareAndClear, Max, OtherAtomic int
	VersionstampedKey, VersionstampedValue int
	ReadConflict, WriteConflict            int
	Watch                                  int
}

// failCommits makes the next len(errs) commits fail with errs, in order,
// without committing: the transaction retries as after a conflict.
func (d *costDB) failCommits(errs ...error) {
	d.mu.Lock()
	d.fail = append(d.fail, errs...)
	d.mu.Unlock()
}

// onLog sets logged (see costDB).
func (d *costDB) onLog(f func(n int)) {
	d.mu.Lock()
	d.logged = f
	d.mu.Unlock()
}

// setQuiet sets quiet (see costDB).
func (d *costDB) setQuiet(f func(key []byte) bool) {
	d.mu.Lock()
	d.quiet = f
	d.mu.Unlock()
}

// take returns the costs logged since the last take.
func (d *costDB) take() []cost {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.log
	d.log = nil
	return out
}

func (d *costDB) record(c cost) {
	d.mu.Lock()
	d.log = append(d.log, c)
	n, f := len(d.log), d.logged
	d.mu.Unlock()
	if f != nil {
		f(n)
	}
}

// flush logs, in the order they were made, the transactions that read
// and then ended neither with a commit nor with a failure: a staged step
// that returned without committing (its reads are all it cost; a
// read-only commit would add nothing on FoundationDB). A step that is
// reset logs itself (see Reset); flush is for the last one, which a
// staged call leaves as it is when it returns.
func (d *costDB) flush() {
	d.mu.Lock()
	open := d.open
	d.open = nil
	d.mu.Unlock()
	for _, t := range open {
		t.logOpen()
	}
}

func (d *costDB) nextFailure() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.fail) == 0 {
		return nil
	}
	err := d.fail[0]
	d.fail = d.fail[1:]
	return err
}

func (d *costDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	t := &costTx{Transaction: tr, db: d}
	d.mu.Lock()
	d.open = append(d.open, t)
	d.mu.Unlock()
	return t, nil
}

// Transact logs each attempt that committed and, when fn fails with an
// error of its own (ErrEmpty, say), the last attempt's reads.
func (d *costDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	err = kv.RetryLoop(ctx, tr, fn)
	if err != nil {
		tr.(*costTx).logOpen()
	}
	return err
}

// ReadTransact logs the last attempt's reads, whether fn succeeded or not
// (a read-only transaction has no commit to wait for).
func (d *costDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	tr, err := d.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	t := tr.(*costTx)
	err = kv.ReadRetryLoop(ctx, t, fn)
	t.mu.Lock()
	c := t.c
	t.logged = true
	t.mu.Unlock()
	d.record(c)
	return err
}

// costTx is a transaction of costDB.
type costTx struct {
	kv.Transaction
	db *costDB

	mu    sync.Mutex
	c     cost
	batch int // reads issued since the last wait carry this number
	// logged says the attempt's counts were logged (it committed);
	// failed that a read or the commit failed: a Reset then drops them.
	logged, failed bool
}

func (t *costTx) count(f func(c *cost)) {
	t.mu.Lock()
	f(&t.c)
	t.mu.Unlock()
}

// issue counts a read with f and returns the batch it goes out with.
func (t *costTx) issue(f func(c *cost)) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	f(&t.c)
	return t.batch
}

// wait is a wait on a read of batch b: a round trip, unless an earlier
// wait covered b.
func (t *costTx) wait(b int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b == t.batch {
		t.c.RoundTrips++
		t.batch++
	}
}

func (t *costTx) clearCounts() {
	t.mu.Lock()
	t.c = cost{}
	t.batch++
	t.logged, t.failed = false, false
	t.mu.Unlock()
}

// logOpen logs the attempt's counts if it read or wrote something and
// ended neither logged nor failed.
func (t *costTx) logOpen() {
	t.mu.Lock()
	c, log := t.c, !t.logged && !t.failed && t.c != cost{}
	t.logged = t.logged || log
	t.mu.Unlock()
	if log {
		t.db.record(c)
	}
}

// failedOn marks the attempt failed when err is not nil.
func (t *costTx) failedOn(err error) {
	if err != nil {
		t.mu.Lock()
		t.failed = true
		t.mu.Unlock()
	}
}

func isMetadataVersion(key []byte) bool { return string(key) == kv.MetadataVersionKey }

func (t *costTx) get(r kv.ReadTransaction, key []byte, snapshot bool) kv.FutureValue {
	if isMetadataVersion(key) {
		t.count(func(c *cost) { c.MetadataVersion++ })
		return r.Get(key)
	}
	b := t.issue(func(c *cost) {
		if snapshot {
			c.SnapGet++
		} else {
			c.Get++
		}
	})
	return costValue{FutureValue: r.Get(key), t: t, b: b}
}

func (t *costTx) getRange(r kv.ReadTransaction, kr kv.KeyRange, o kv.RangeOptions, snapshot bool) kv.RangeResult {
	b := t.issue(func(c *cost) {
		if snapshot {
			c.SnapRange++
		} else {
			c.Range++
		}
	})
	return &costRange{RangeResult: r.GetRange(kr, o), t: t, b: b}
}

func (t *costTx) Get(key []byte) kv.FutureValue { return t.get(t.Transaction, key, false) }
func (t *costTx) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	return t.getRange(t.Transaction, r, o, false)
}
func (t *costTx) Snapshot() kv.ReadTransaction {
	return costSnap{ReadTransaction: t.Transaction.Snapshot(), t: t}
}

func (t *costTx) Set(k, v []byte) { t.count(func(c *cost) { c.Set++ }); t.Transaction.Set(k, v) }
func (t *costTx) Clear(k []byte)  { t.count(func(c *cost) { c.Clear++ }); t.Transaction.Clear(k) }
func (t *costTx) ClearRange(r kv.KeyRange) {
	t.count(func(c *cost) { c.ClearRange++ })
	t.Transaction.ClearRange(r)
}
func (t *costTx) Add(k, p []byte) { t.count(func(c *cost) { c.Add++ }); t.Transaction.Add(k, p) }
func (t *costTx) Max(k, p []byte) { t.count(func(c *cost) { c.Max++ }); t.Transaction.Max(k, p) }
func (t *costTx) CompareAndClear(k, p []byte) {
	t.count(func(c *cost) { c.CompareAndClear++ })
	t.Transaction.CompareAndClear(k, p)
}
func (t *costTx) other()             { t.count(func(c *cost) { c.OtherAtomic++ }) }
func (t *costTx) Min(k, p []byte)    { t.other(); t.Transaction.Min(k, p) }
func (t *costTx) BitAnd(k, p []byte) { t.other(); t.Transaction.BitAnd(k, p) }
func (t *costTx) BitOr(k, p []byte)  { t.other(); t.Transaction.BitOr(k, p) }
func (t *costTx) BitXor(k, p []byte) { t.other(); t.Transaction.BitXor(k, p) }
func (t *costTx) ByteMin(k, p []byte) {
	t.other()
	t.Transaction.ByteMin(k, p)
}
func (t *costTx) ByteMax(k, p []byte) {
	t.other()
	t.Transaction.ByteMax(k, p)
}
func (t *costTx) AppendIfFits(k, p []byte) {
	t.other()
	t.Transaction.AppendIfFits(k, p)
}
func (t *costTx) SetVersionstampedKey(k, v []byte) {
	t.count(func(c *cost) { c.VersionstampedKey++ })
	t.Transaction.SetVersionstampedKey(k, v)
}
func (t *costTx) SetVersionstampedValue(k, v []byte) {
	t.count(func(c *cost) { c.VersionstampedValue++ })
	t.Transaction.SetVersionstampedValue(k, v)
}
func (t *costTx) AddReadConflictRange(r kv.KeyRange) error {
	t.count(func(c *cost) { c.ReadConflict++ })
	return t.Transaction.AddReadConflictRange(r)
}
func (t *costTx) AddReadConflictKey(k []byte) error {
	t.count(func(c *cost) { c.ReadConflict++ })
	return t.Transaction.AddReadConflictKey(k)
}
func (t *costTx) AddWriteConflictRange(r kv.KeyRange) error {
	t.count(func(c *cost) { c.WriteConflict++ })
	return t.Transaction.AddWriteConflictRange(r)
}
func (t *costTx) AddWriteConflictKey(k []byte) error {
	t.count(func(c *cost) { c.WriteConflict++ })
	return t.Transaction.AddWriteConflictKey(k)
}
func (t *costTx) Watch(k []byte) kv.Watch {
	t.count(func(c *cost) { c.Watch++ })
	return costWatch{Watch: t.Transaction.Watch(k), db: t.db, key: bytes.Clone(k)}
}

// costWatch is a watch of costDB: see costDB.quiet.
type costWatch struct {
	kv.Watch
	db  *costDB
	key []byte
}

func (w costWatch) Wait(ctx context.Context) error {
	err := w.Watch.Wait(ctx)
	w.db.mu.Lock()
	quiet := w.db.quiet
	w.db.mu.Unlock()
	if err == nil && quiet != nil && quiet(w.key) {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (t *costTx) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(t) }
func (t *costTx) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(t)
}

func (t *costTx) Commit() error {
	if err := t.db.nextFailure(); err != nil {
		t.failedOn(err)
		return err
	}
	err := t.Transaction.Commit()
	t.failedOn(err)
	if err == nil {
		t.mu.Lock()
		c := t.c
		t.logged = true
		t.mu.Unlock()
		t.db.record(c)
	}
	return err
}

func (t *costTx) OnError(err error) error {
	if e := t.Transaction.OnError(err); e != nil {
		return e
	}
	t.clearCounts()
	return nil
}

// Reset logs an attempt that read and ended without a commit or a
// failure (a staged step that needed no commit), then starts afresh.
func (t *costTx) Reset() {
	t.logOpen()
	t.Transaction.Reset()
	t.clearCounts()
}

// costSnap is the snapshot view of a costTx.
type costSnap struct {
	kv.ReadTransaction
	t *costTx
}

func (s costSnap) Get(key []byte) kv.FutureValue { return s.t.get(s.ReadTransaction, key, true) }
func (s costSnap) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	return s.t.getRange(s.ReadTransaction, r, o, true)
}
func (s costSnap) Snapshot() kv.ReadTransaction { return s }
func (s costSnap) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(s)
}

type costValue struct {
	kv.FutureValue
	t *costTx
	b int
}

func (f costValue) Get() ([]byte, error) {
	f.t.wait(f.b)
	v, err := f.FutureValue.Get()
	f.t.failedOn(err)
	return v, err
}

type costRange struct {
	kv.RangeResult
	t *costTx
	b int
}

func (r *costRange) GetSlice() ([]kv.KeyValue, error) {
	r.t.wait(r.b)
	kvs, err := r.RangeResult.GetSlice()
	r.t.failedOn(err)
	return kvs, err
}

func (r *costRange) Iterator() kv.RangeIterator {
	return &costIter{RangeIterator: r.RangeResult.Iterator(), r: r}
}

type costIter struct {
	kv.RangeIterator
	r       *costRange
	started bool
}

func (it *costIter) Next() bool {
	if !it.started {
		it.started = true
		it.r.t.wait(it.r.b)
	}
	if it.RangeIterator.Next() {
		return true
	}
	it.r.t.failedOn(it.RangeIterator.Err())
	return false
}
