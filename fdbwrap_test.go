package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// fdbDB wraps a kv.Database so that its transactions behave, in the ways
// the layers depend on, as FoundationDB's do even where the wrapped
// backend does not, and records what the layers did:
//
//   - Commit fails with transaction_too_large (2101) when the transaction's
//     size, counted as FoundationDB counts it, exceeds 10,000,000 bytes:
//     Transaction::getSize in fdbclient/NativeAPI.actor.cpp is the bytes of
//     the mutations plus those of the read and write conflict ranges; a Set
//     is a SetValue mutation (key+value) and the write conflict range
//     [key, key+\x00) (2*key+1); a Clear of one key is a ClearRange
//     mutation [key, key+\x00) and the same range as a write conflict
//     (Transaction::clear); a normal read of one key adds [key, key+\x00)
//     to the read conflict ranges; a watch reads its key
//     (fdbclient/ReadYourWrites.actor.cpp, RYWImpl::watch). Each mutation
//     also counts sizeof(MutationRef) (56 in 7.3) and each range
//     sizeof(KeyRangeRef) (32), as VectorRef::expectedSize adds the size
//     of its elements (flow/include/flow/Arena.h). The count here never
//     merges ranges, so it is an upper bound of FDB's.
//   - Reset clears the transaction's options, as
//     ReadYourWritesTransaction::reset does (options.reset(tr), keeping
//     only the database's defaults); OnError keeps them.
//   - Every range read is checked to have been waited for, by the
//     goroutine that issued it, before Commit: on FDB the first batch of a
//     range read is in flight from the GetRange call, and an operation on
//     the transaction once Commit has started fails with
//     used_during_commit (2017; ReadYourWritesTransaction::checkUsedDuringCommit).
//   - The bytes of every key and value read are counted.
//   - With a clock (withReadTime), each pair read advances it, and a read
//     more than 5 s after the transaction's first read fails with
//     transaction_too_old (1007), as FDB's do, batch by batch, while memdb
//     may fetch a whole range at once.
type fdbDB struct {
	kv.Database
	st *fdbStats
}

type fdbStats struct {
	bytesRead atomic.Int64

	mu         sync.Mutex
	commits    int   // successful commits
	maxSize    int   // the largest size counted for a successful commit
	tooLarge   int   // commits failed with 2101
	maxRead    int64 // the most bytes one attempt read
	violations []string
	clock      *memdb.ManualClock
	perPair    time.Duration
	// stagedDelays are the max retry delays in force at each Commit of a
	// transaction made by CreateTransaction (the staged loop's).
	stagedDelays []time.Duration
}

func newFDBDB(db kv.Database) *fdbDB { return &fdbDB{Database: db, st: &fdbStats{}} }

// withReadTime makes each pair read advance c by perPair.
func (d *fdbDB) withReadTime(c *memdb.ManualClock, perPair time.Duration) *fdbDB {
	d.st.clock, d.st.perPair = c, perPair
	return d
}

// tooOld advances the clock for n pairs and reports whether t's reads now
// fall outside FDB's 5 s MVCC window.
func (t *fdbTx) tooOld(n int) bool {
	c := t.st.clock
	if c == nil {
		return false
	}
	c.Advance(time.Duration(n) * t.st.perPair)
	t.mu.Lock()
	defer t.mu.Unlock()
	return c.Now().Sub(t.began) > 5*time.Second
}

func (s *fdbStats) violate(format string, args ...any) {
	s.mu.Lock()
	s.violations = append(s.violations, fmt.Sprintf(format, args...))
	s.mu.Unlock()
}

func (s *fdbStats) snapshot() fdbStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fdbStats{commits: s.commits, maxSize: s.maxSize, tooLarge: s.tooLarge, maxRead: s.maxRead,
		violations: append([]string(nil), s.violations...), stagedDelays: append([]time.Duration(nil), s.stagedDelays...)}
}

func (d *fdbDB) wrap(tr kv.Transaction, staged bool) *fdbTx {
	return &fdbTx{Transaction: tr, st: d.st, staged: staged}
}

func (d *fdbDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return d.wrap(tr, true), nil
}

func (d *fdbDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, d.wrap(tr, false), fn)
}

func (d *fdbDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.ReadRetryLoop(ctx, d.wrap(tr, false), fn)
}

// fdbTx is a transaction of fdbDB.
type fdbTx struct {
	kv.Transaction
	st     *fdbStats
	staged bool

	mu         sync.Mutex
	size       int
	read       int64         // bytes read by this attempt
	began      time.Time     // the clock at the attempt's first read
	retryDelay time.Duration // as set since creation or the last Reset
	reads      []*countedRange
}

func (t *fdbTx) add(n int) {
	t.mu.Lock()
	t.size += n
	t.mu.Unlock()
}

func (t *fdbTx) clearState() {
	t.mu.Lock()
	read := t.read
	t.size, t.read = 0, 0
	t.began = time.Time{}
	t.reads = nil
	t.mu.Unlock()
	t.st.mu.Lock()
	t.st.maxRead = max(t.st.maxRead, read)
	t.st.mu.Unlock()
}

func (t *fdbTx) addRead(n int) {
	t.st.bytesRead.Add(int64(n))
	t.mu.Lock()
	t.read += int64(n)
	t.mu.Unlock()
}

// Sizes of FDB's structs, counted with each mutation and range.
const mutRef, rangeRef = 56, 32

func setSize(k, v []byte) int { return len(k) + len(v) + mutRef + 2*len(k) + 1 + rangeRef }

func (t *fdbTx) Set(k, v []byte) { t.add(setSize(k, v)); t.Transaction.Set(k, v) }
func (t *fdbTx) Clear(k []byte)  { t.add(2*(2*len(k)+1) + mutRef + rangeRef); t.Transaction.Clear(k) }
func (t *fdbTx) Add(k, p []byte) { t.add(setSize(k, p)); t.Transaction.Add(k, p) }
func (t *fdbTx) Max(k, p []byte) { t.add(setSize(k, p)); t.Transaction.Max(k, p) }
func (t *fdbTx) Min(k, p []byte) { t.add(setSize(k, p)); t.Transaction.Min(k, p) }
func (t *fdbTx) ByteMax(k, p []byte) {
	t.add(setSize(k, p))
	t.Transaction.ByteMax(k, p)
}
func (t *fdbTx) ClearRange(r kv.KeyRange) {
	t.add(2*(len(r.Begin)+len(r.End)) + mutRef + rangeRef)
	t.Transaction.ClearRange(r)
}
func (t *fdbTx) SetVersionstampedKey(k, v []byte) {
	t.add(len(k) + len(v) + mutRef) // no write conflict range (RYW's atomicOp)
	t.Transaction.SetVersionstampedKey(k, v)
}
func (t *fdbTx) SetVersionstampedValue(k, v []byte) {
	t.add(setSize(k, v))
	t.Transaction.SetVersionstampedValue(k, v)
}
func (t *fdbTx) CompareAndClear(k, p []byte) {
	t.add(setSize(k, p))
	t.Transaction.CompareAndClear(k, p)
}
func (t *fdbTx) AddReadConflictRange(r kv.KeyRange) error {
	t.add(len(r.Begin) + len(r.End) + rangeRef)
	return t.Transaction.AddReadConflictRange(r)
}
func (t *fdbTx) AddReadConflictKey(k []byte) error {
	t.add(2*len(k) + 1 + rangeRef)
	return t.Transaction.AddReadConflictKey(k)
}
func (t *fdbTx) AddWriteConflictRange(r kv.KeyRange) error {
	t.add(len(r.Begin) + len(r.End) + rangeRef)
	return t.Transaction.AddWriteConflictRange(r)
}
func (t *fdbTx) AddWriteConflictKey(k []byte) error {
	t.add(2*len(k) + 1 + rangeRef)
	return t.Transaction.AddWriteConflictKey(k)
}
func (t *fdbTx) Watch(k []byte) kv.Watch {
	t.add(2*len(k) + 1 + rangeRef)
	return t.Transaction.Watch(k)
}

func (t *fdbTx) Get(k []byte) kv.FutureValue {
	t.add(2*len(k) + 1 + rangeRef)
	return countedValue{t.Transaction.Get(k), t}
}

func (t *fdbTx) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	return t.track(t.Transaction.GetRange(r, o), r, true)
}

func (t *fdbTx) track(rr kv.RangeResult, r kv.KeyRange, conflict bool) kv.RangeResult {
	c := &countedRange{RangeResult: rr, tx: t, r: r, conflict: conflict, g: goid()}
	t.mu.Lock()
	if t.st.clock != nil && t.began.IsZero() {
		t.began = t.st.clock.Now()
	}
	t.reads = append(t.reads, c)
	t.mu.Unlock()
	return c
}

func (t *fdbTx) Snapshot() kv.ReadTransaction { return fdbSnap{t.Transaction.Snapshot(), t} }

func (t *fdbTx) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(t) }
func (t *fdbTx) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(t)
}

func (t *fdbTx) Options() kv.TransactionOptions { return fdbOpts{t.Transaction.Options(), t} }

func (t *fdbTx) Reset() {
	t.Transaction.Reset()
	t.clearState()
	t.mu.Lock()
	t.retryDelay = 0 // FDB's Reset clears the options
	t.mu.Unlock()
}

func (t *fdbTx) OnError(err error) error {
	if e := t.Transaction.OnError(err); e != nil {
		return e
	}
	t.clearState() // OnError keeps the options
	return nil
}

func (t *fdbTx) Commit() error {
	t.mu.Lock()
	size, delay, reads := t.size, t.retryDelay, t.reads
	t.mu.Unlock()
	for _, c := range reads {
		size += c.conflictSize()
		if !c.waited.Load() {
			t.st.violate("range read %x..%x not waited for before Commit", c.r.Begin, c.r.End)
		}
	}
	if size > kv.MaxTransactionSize {
		t.st.mu.Lock()
		t.st.tooLarge++
		t.st.mu.Unlock()
		return kv.ErrTransactionTooLarge
	}
	err := t.Transaction.Commit()
	t.mu.Lock()
	read := t.read
	t.mu.Unlock()
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	t.st.maxRead = max(t.st.maxRead, read)
	if t.staged {
		t.st.stagedDelays = append(t.st.stagedDelays, delay)
	}
	if err == nil {
		t.st.commits++
		t.st.maxSize = max(t.st.maxSize, size)
	}
	return err
}

type fdbOpts struct {
	kv.TransactionOptions
	t *fdbTx
}

func (o fdbOpts) SetMaxRetryDelay(d time.Duration) error {
	o.t.mu.Lock()
	o.t.retryDelay = d
	o.t.mu.Unlock()
	return o.TransactionOptions.SetMaxRetryDelay(d)
}

type fdbSnap struct {
	kv.ReadTransaction
	t *fdbTx
}

func (s fdbSnap) Get(k []byte) kv.FutureValue { return countedValue{s.ReadTransaction.Get(k), s.t} }
func (s fdbSnap) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	return s.t.track(s.ReadTransaction.GetRange(r, o), r, false)
}
func (s fdbSnap) Snapshot() kv.ReadTransaction { return s }
func (s fdbSnap) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(s)
}

type countedValue struct {
	kv.FutureValue
	t *fdbTx
}

func (f countedValue) Get() ([]byte, error) {
	v, err := f.FutureValue.Get()
	f.t.addRead(len(v))
	return v, err
}

// countedRange is a range read of fdbTx.
type countedRange struct {
	kv.RangeResult
	tx       *fdbTx
	r        kv.KeyRange
	conflict bool  // a normal read
	g        int64 // the goroutine that issued it
	waited   atomic.Bool
	mu       sync.Mutex
	lastKey  []byte
}

func (c *countedRange) saw(p kv.KeyValue) {
	c.tx.addRead(len(p.Key) + len(p.Value))
	c.mu.Lock()
	c.lastKey = p.Key
	c.mu.Unlock()
}

func (c *countedRange) wait() {
	if g := goid(); g != c.g {
		c.tx.st.violate("range read %x..%x issued by goroutine %d, waited for by %d", c.r.Begin, c.r.End, c.g, g)
		return
	}
	c.waited.Store(true)
}

// conflictSize is the read conflict range a normal read adds: from the
// range's begin to its end, or to just after the last key read.
func (c *countedRange) conflictSize() int {
	if !c.conflict {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.r.Begin) + max(len(c.r.End), len(c.lastKey)+1) + rangeRef
}

func (c *countedRange) GetSlice() ([]kv.KeyValue, error) {
	kvs, err := c.RangeResult.GetSlice()
	for _, p := range kvs {
		c.saw(p)
	}
	c.wait()
	if err == nil && c.tx.tooOld(len(kvs)) {
		return nil, kv.ErrTransactionTooOld
	}
	return kvs, err
}

func (c *countedRange) Iterator() kv.RangeIterator {
	return &countedIter{RangeIterator: c.RangeResult.Iterator(), c: c}
}

type countedIter struct {
	kv.RangeIterator
	c   *countedRange
	err error
}

func (it *countedIter) Next() bool {
	if it.err != nil {
		return false
	}
	ok := it.RangeIterator.Next()
	if ok {
		it.c.saw(it.RangeIterator.KeyValue())
		if it.c.tx.tooOld(1) {
			it.err = kv.ErrTransactionTooOld
			ok = false
		}
	}
	it.c.wait()
	return ok
}

func (it *countedIter) Err() error {
	if it.err != nil {
		return it.err
	}
	return it.RangeIterator.Err()
}

// goid is the current goroutine's number, from its stack header.
func goid() int64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int64(c-'0')
	}
	return n
}
