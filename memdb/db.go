package memdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// ErrClosed is returned by every operation on a closed DB, and watches fail
// with it when the DB closes. It wraps kv.ErrClientInvalidOp, so it is not
// retryable.
var ErrClosed = fmt.Errorf("memdb: database closed: %w", kv.ErrClientInvalidOp)

// errNoCommitVersion is FDB's no_commit_version (2021): the versionstamp of
// a transaction that committed nothing.
var errNoCommitVersion = kv.Error{Code: 2021}

// errInvalidVersion is FDB's transaction_invalid_version (2020): the
// versionstamp of a transaction whose commit failed, whatever the commit's
// error (Transaction::commitAndWatch sends it to the versionstamp promise,
// fdbclient/NativeAPI.actor.cpp).
var errInvalidVersion = kv.Error{Code: 2020}

const (
	maxKeySize   = kv.MaxKeySize
	maxValueSize = kv.MaxValueSize
	maxTxSize    = kv.MaxTransactionSize
)

// DB is an embedded key-value engine with FoundationDB's transaction
// semantics. It is safe for concurrent use by many goroutines. See the
// package documentation.
type DB struct {
	// lateLandings counts the interrupted commits still to land
	// (Faults.LateLanding, HoldNextCommitLate): see AwaitLateLandings.
	lateLandings sync.WaitGroup

	cfg     config
	clock   dbClock // time since the DB was made
	rng     *lockedRand
	latency bool
	windowV int64 // the MVCC window in versions

	// mu protects the store, the resolver, the watch registry and the GC
	// state. Reads hold it shared; the commit step holds it exclusively.
	mu      sync.RWMutex
	st      *store
	res     *resolver
	watches watchRegistry
	vals    valArena  // the commit step's small computed values (foldCommit)
	horizon int64     // versions at or below it are garbage collected
	mv      mvHistory // the metadata version's recent bumps
	samples []timeSample
	readers readers // read versions in use, for the horizon
	commits int64   // Stats.Commits: a plain count, since commits hold mu
	closed  bool

	version    atomic.Int64 // latest committed version
	closedFlag atomic.Bool
	closeCh    chan struct{}

	faultMu  sync.Mutex
	faults   Faults
	failNext *forcedFailure
	holdNext *commitHold
	faultsOn atomic.Bool // faults.any() || failNext != nil
	// grvHold is HoldNextReadVersion's pending hold, taken by the next
	// read version request sent (startGRVLocked).
	grvHold *commitHold
	// failRead and failGRV are the one-shot failures of FailReadAfter and
	// FailReadVersionAfter; readFaultsOn is faults.reads() || either is
	// armed.
	failRead, failGRV oneShot
	readFaultsOn      atomic.Bool

	watchMu    sync.Mutex
	allWatches map[*watch]struct{}
	liveW      atomic.Int64

	stats counters

	// awaitingReads, when set (only by tests, through export_test.go,
	// before the transactions it concerns start), is called by a Commit
	// that is about to wait for reads in flight, without tx.mu.
	awaitingReads func()
	// sleeping, likewise, is called by work in flight about to wait out
	// a delay (sleepIn: a read, a read version request, a commit,
	// OnError's backoff), without tx.mu.
	sleeping func()
	// backingOff, likewise, is called by an OnError about to wait out its
	// backoff, without tx.mu.
	backingOff func()
}

var _ kv.Database = (*DB)(nil)

// timeSample records that version v was committed before time t (on
// db.clock).
type timeSample struct {
	t time.Duration
	v int64
}

// forcedFailure is FailNextCommit's one-shot failure.
type forcedFailure struct {
	err     error
	applied bool
}

// New returns an empty database.
func New(opts ...Option) *DB {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	db := &DB{
		cfg:        cfg,
		clock:      newDBClock(cfg.clock),
		rng:        newLockedRand(cfg.seed),
		latency:    cfg.latency.enabled(),
		windowV:    cfg.window.Microseconds(),
		st:         newStore(),
		res:        newResolver(),
		closeCh:    make(chan struct{}),
		allWatches: make(map[*watch]struct{}),
		faults:     cfg.faults,
	}
	db.faultsOn.Store(cfg.faults.any())
	db.readFaultsOn.Store(cfg.faults.reads())
	return db
}

// versionAt is the version the clock reads at now (db.clock.Now()): one
// per microsecond since the DB was made, plus one.
func (db *DB) versionAt(now time.Duration) int64 {
	return now.Microseconds() + 1
}

// idleVersions is how far the clock's version may run ahead of the last
// commit's before a read version moves the database's version up to it:
// FoundationDB's commit proxies commit an empty batch at least every
// MAX_COMMIT_BATCH_INTERVAL (2 s, fdbserver's ServerKnobs: "so that
// versions always advance smoothly"), so an idle cluster's read versions
// still advance with time, by about a million a second.
const idleVersions = 2_000_000

// advanceIdle moves the version up to the clock's at now, as an empty
// commit would, if no commit did for idleVersions.
func (db *DB) advanceIdle(now time.Duration) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if v := db.versionAt(now); v-db.version.Load() > idleVersions && !db.closed {
		db.version.Store(v)
	}
}

// SetFaults replaces the fault injection probabilities; it takes effect for
// the next commit attempt, read and read version request.
func (db *DB) SetFaults(f Faults) {
	db.faultMu.Lock()
	db.faults = f
	db.faultsOn.Store(f.any() || db.failNext != nil || db.holdNext != nil)
	db.storeReadFaultsOnLocked()
	db.faultMu.Unlock()
}

// storeReadFaultsOnLocked updates readFaultsOn. The caller holds faultMu.
func (db *DB) storeReadFaultsOnLocked() {
	db.readFaultsOn.Store(db.faults.reads() || db.failRead.err != nil || db.failGRV.err != nil)
}

// oneShot is a failure armed to happen once, after skip more draws.
type oneShot struct {
	err  error
	skip int
}

// take reports the armed error if this draw is the one, disarming it.
func (o *oneShot) take() error {
	if o.err == nil {
		return nil
	}
	if o.skip > 0 {
		o.skip--
		return nil
	}
	err := o.err
	o.err = nil
	return err
}

// FailNextRead makes the next read the database serves fail with err;
// see FailReadAfter.
func (db *DB) FailNextRead(err error) { db.FailReadAfter(0, err) }

// FailReadAfter makes a read the database serves fail with err (default:
// kv.ErrFutureVersion), as a storage server's error would: the one after
// the next n (of any transaction: point reads, range reads' batches and
// watches' reads; not reads a transaction answers from its own writes). As
// in FDB, where the commit waits for every read issued and fails with a
// failed read's error (RYWImpl::commit waits on ryw->reading, an
// AndFuture, fdbclient/ReadYourWrites.actor.cpp), the transaction's
// Commit then fails with err too, having sent nothing; a snapshot read
// alike. A failed watch's read fails only the watch (RYWImpl::watch gives
// the commit a promise of its own, set even when the read fails). It
// replaces a failure armed earlier that has not happened yet; a negative n
// disarms it. Tests that sweep n over an operation's reads make each of
// them fail in turn (Stats.InjectedReadErrors tells whether it happened).
func (db *DB) FailReadAfter(n int, err error) {
	if err == nil {
		err = kv.ErrFutureVersion
	}
	db.faultMu.Lock()
	db.failRead = oneShot{err: err, skip: n}
	if n < 0 {
		db.failRead = oneShot{}
	}
	db.storeReadFaultsOnLocked()
	db.faultMu.Unlock()
}

// FailNextReadVersion makes the next read version request fail with err;
// see FailReadVersionAfter.
func (db *DB) FailNextReadVersion(err error) { db.FailReadVersionAfter(0, err) }

// FailReadVersionAfter makes a read version request (GRV) on the database
// fail with err (default: kv.ErrGRVProxyMemoryLimit): the one after the
// next n. The transaction keeps the failure until OnError or Reset, as
// FDB's keeps its failed read version future
// (TransactionState::startTransaction, fdbclient/NativeAPI.actor.cpp): its
// reads, GetReadVersion and the Commit of its writes fail with err. A
// transaction that writes without having read requests its read version
// when it commits. It replaces a failure armed earlier that has not
// happened yet; a negative n disarms it (Stats.InjectedReadVersionErrors
// tells whether it happened).
func (db *DB) FailReadVersionAfter(n int, err error) {
	if err == nil {
		err = kv.ErrGRVProxyMemoryLimit
	}
	db.faultMu.Lock()
	db.failGRV = oneShot{err: err, skip: n}
	if n < 0 {
		db.failGRV = oneShot{}
	}
	db.storeReadFaultsOnLocked()
	db.faultMu.Unlock()
}

// readFault draws whether a read the store serves fails, and returns its
// error (nil: it does not).
func (db *DB) readFault() error {
	if !db.readFaultsOn.Load() {
		return nil
	}
	return db.drawFault(&db.failRead, func(f Faults) float64 { return f.ReadErrors }, readFaultErrors[:], &db.stats.injectedRead)
}

// grvFault draws whether a read version request fails, and returns its
// error (nil: it does not).
func (db *DB) grvFault() error {
	if !db.readFaultsOn.Load() {
		return nil
	}
	return db.drawFault(&db.failGRV, func(f Faults) float64 { return f.ReadVersionErrors }, grvFaultErrors[:], &db.stats.injectedGRV)
}

// drawFault returns once's error if this is its draw, else draws one of
// errs with the probability p gives; it counts an error in n.
func (db *DB) drawFault(once *oneShot, p func(Faults) float64, errs []kv.Error, n *atomic.Int64) error {
	db.faultMu.Lock()
	err := once.take()
	prob := p(db.faults)
	db.storeReadFaultsOnLocked()
	db.faultMu.Unlock()
	if err == nil {
		err = db.rng.drawError(prob, errs)
	}
	if err != nil {
		n.Add(1)
	}
	return err
}

// FailNextCommit makes the next Commit on the DB (of any transaction,
// read-only or not, that gets as far as committing) return err. If applied
// is true, the commit's writes are applied first when the commit passes
// conflict checking, as for a kv.ErrCommitUnknownResult whose commit went
// through; otherwise nothing is applied. It replaces an earlier
// FailNextCommit that has not happened yet.
func (db *DB) FailNextCommit(err error, applied bool) {
	if err == nil {
		err = kv.ErrCommitUnknownResult
	}
	db.faultMu.Lock()
	db.failNext = &forcedFailure{err: err, applied: applied}
	db.faultsOn.Store(true)
	db.faultMu.Unlock()
}

// commitHold is the one-shot hold of HoldNextCommit, HoldNextCommitLate
// and HoldNextReadVersion.
type commitHold struct {
	held    chan struct{} // closed when the commit is held
	release chan struct{} // closed to let it go on
	once    sync.Once
	late    bool          // HoldNextCommitLate: an interrupted commit lands at release
	done    chan struct{} // late: closed once the commit step ran (or the DB closed)
}

// HoldNextCommit makes the next commit that sends writes (of any
// transaction) stop once it is in flight, as if the cluster took that long
// to answer: held is closed when it stops, and it goes on when release is
// called (or its transaction is cancelled or reset, which makes it an
// interrupted commit). Tests use it to act on a transaction while its commit is in
// flight, without sleeping. It replaces an earlier hold not yet taken.
func (db *DB) HoldNextCommit() (held <-chan struct{}, release func()) {
	return db.newHold(false)
}

// HoldNextCommitLate is HoldNextCommit for a commit that outlives its
// transaction: if the transaction is cancelled, reset (or times out)
// while the commit is held, Commit returns at once with the interruption (maybe
// committed), and the commit itself goes on: it is resolved, and applied
// unless it conflicts, when release is called. So does FoundationDB's,
// whose commit request a cancellation does not stop (RYWImpl::commit
// returns as soon as resetPromise is set, fdbclient/ReadYourWrites.actor.cpp):
// it can land after transactions that began once the client gave up on
// it. Its release returns once the commit step ran.
func (db *DB) HoldNextCommitLate() (held <-chan struct{}, release func()) {
	return db.newHold(true)
}

func (db *DB) newHold(late bool) (held <-chan struct{}, release func()) {
	h := &commitHold{held: make(chan struct{}), release: make(chan struct{}), late: late}
	if late {
		h.done = make(chan struct{})
	}
	db.faultMu.Lock()
	db.holdNext = h
	db.faultsOn.Store(true)
	db.faultMu.Unlock()
	return h.held, func() {
		h.once.Do(func() { close(h.release) })
		if late {
			select {
			case <-h.done:
			case <-db.closeCh:
			}
		}
	}
}

// takeHold returns the pending HoldNextCommit, if any, and clears it.
func (db *DB) takeHold() *commitHold {
	if !db.faultsOn.Load() {
		return nil
	}
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	h := db.holdNext
	db.holdNext = nil
	db.faultsOn.Store(db.faults.any() || db.failNext != nil)
	return h
}

// takeFaults draws the faults of one commit attempt.
func (db *DB) takeFaults(mutating bool) (forced *forcedFailure, kind faultKind, extra time.Duration) {
	if !db.faultsOn.Load() {
		return nil, faultNone, 0
	}
	db.faultMu.Lock()
	forced, db.failNext = db.failNext, nil
	f := db.faults
	db.faultsOn.Store(f.any() || db.holdNext != nil)
	db.faultMu.Unlock()
	if mutating && forced == nil && f.any() {
		kind, extra = db.rng.pick(f)
	}
	return forced, kind, extra
}

// HoldNextReadVersion makes the next read version request that is sent
// (of any transaction) stop before the cluster answers it: held is closed
// when it stops, and the version is chosen when release is called, so it
// includes every commit made meanwhile. The request's transaction goes on
// in the meantime, and its reads wait for the version, as a FoundationDB
// client's do while a GRV proxy batches its request (the read version is
// a future: fdb_transaction_get_read_version, and every read waits for
// it). Tests use it to commit between a transaction's first read and the
// moment its read version is fixed. It needs a latency model
// (WithLatency), under which read versions are requested in the
// background; without one a read obtains its version in the call, and no
// request is held. It replaces an earlier hold not yet taken; a
// cancellation or reset of the transaction also lets the request go.
func (db *DB) HoldNextReadVersion() (held <-chan struct{}, release func()) {
	h := &commitHold{held: make(chan struct{}), release: make(chan struct{})}
	db.faultMu.Lock()
	db.grvHold = h
	db.faultMu.Unlock()
	return h.held, func() { h.once.Do(func() { close(h.release) }) }
}

// takeGRVHold returns the pending HoldNextReadVersion, if any, and clears
// it.
func (db *DB) takeGRVHold() *commitHold {
	db.faultMu.Lock()
	defer db.faultMu.Unlock()
	h := db.grvHold
	db.grvHold = nil
	return h
}

// AwaitLateLandings waits until every commit that was interrupted in flight
// and is to land later (Faults.LateLanding, HoldNextCommitLate) has been
// resolved: a test that checks what happened sees their effects, as a
// client of FDB would once their requests are done. A late landing held by
// HoldNextCommitLate waits for its release.
func (db *DB) AwaitLateLandings() { db.lateLandings.Wait() }

// drawLateLanding draws whether an interrupted commit lands late
// (Faults.LateLanding).
func (db *DB) drawLateLanding() bool {
	db.faultMu.Lock()
	p := db.faults.LateLanding
	db.faultMu.Unlock()
	return p > 0 && db.rng.float64() < p
}

// Close closes the database: every later operation fails with ErrClosed,
// as do outstanding watches. Transactions in progress fail at their next
// operation. Close is idempotent and always returns nil.
func (db *DB) Close() error {
	db.mu.Lock()
	if db.closed {
		db.mu.Unlock()
		return nil
	}
	db.closed = true
	db.closedFlag.Store(true)
	close(db.closeCh)
	db.watches.failAll(ErrClosed)
	db.mu.Unlock()

	db.watchMu.Lock()
	pending := make([]*watch, 0, len(db.allWatches))
	for w := range db.allWatches {
		pending = append(pending, w)
	}
	db.watchMu.Unlock()
	for _, w := range pending {
		w.finish(ErrClosed)
	}
	return nil
}

// CreateTransaction starts a transaction bound to ctx: when ctx ends, the
// transaction is cancelled (kv.ErrTransactionCancelled). The binding lasts
// until ctx ends; Transact releases it as soon as it returns.
func (db *DB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	return db.newTransaction(ctx)
}

// Transact runs fn in a transaction bound to ctx and commits it, retrying
// through kv.RetryLoop as described in package kv.
func (db *DB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	tx, err := db.newTransaction(ctx)
	if err != nil {
		return err
	}
	defer tx.release()
	return kv.RetryLoop(ctx, tx, fn)
}

// ReadTransact runs fn in a transaction bound to ctx without committing,
// retrying through kv.ReadRetryLoop.
func (db *DB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	if ctx == nil {
		ctx = context.Background()
	}
	tx, err := db.newTransaction(ctx)
	if err != nil {
		return err
	}
	defer tx.release()
	return kv.ReadRetryLoop(ctx, tx, fn)
}

// reserveWatch counts a new outstanding watch, unless the limit is reached.
func (db *DB) reserveWatch() bool {
	for {
		n := db.liveW.Load()
		if n >= int64(db.cfg.maxWatches) {
			return false
		}
		if db.liveW.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (db *DB) trackWatch(w *watch) {
	db.watchMu.Lock()
	db.allWatches[w] = struct{}{}
	db.watchMu.Unlock()
}

func (db *DB) untrackWatch(w *watch) {
	db.watchMu.Lock()
	delete(db.allWatches, w)
	db.watchMu.Unlock()
	db.liveW.Add(-1)
}

// tooOldLocked reports whether a transaction with read version rv obtained
// at grvTime may no longer read or commit. The caller holds db.mu (shared
// or exclusive), which keeps the check consistent with garbage collection.
func (db *DB) tooOldLocked(rv int64, grvTime, now time.Duration) bool {
	return now-grvTime > db.cfg.window ||
		rv < db.version.Load()-db.windowV ||
		rv < db.horizon
}

// readPoint reads key as of rv for a transaction whose read version was
// obtained at grvTime. fresh says the read version was obtained just now,
// so it cannot be too old (this spares a clock read). It also returns the
// key's chain (nil if the key is not stored), which the caller may keep as
// a hint for a later write of the key (store.chainFor).
func (db *DB) readPoint(key []byte, rv int64, grvTime time.Duration, fresh bool) ([]byte, bool, *chain, error) {
	if (len(key) == 0 || key[0] != 0xff) && db.readFaultsOn.Load() {
		if err := db.readFault(); err != nil {
			return nil, false, nil, err
		}
	}
	db.mu.RLock()
	if err := db.servesLocked(rv, grvTime, fresh); err != nil {
		db.mu.RUnlock()
		return nil, false, nil, err
	}
	if len(key) > 0 && key[0] == 0xff {
		// The metadata version key (metaversion.go): no store lookup.
		stamp := db.mv.at(rv)
		db.mu.RUnlock()
		return stamp, stamp != nil, nil, nil
	}
	var v []byte
	var ok bool
	c := db.st.lookup(key)
	if c != nil {
		v, ok = c.at(rv)
	}
	db.mu.RUnlock()
	db.stats.reads.Add(1)
	return v, ok, c, nil
}

// errorCode returns err's FDB code, or 0.
func errorCode(err error) int {
	var e kv.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}
