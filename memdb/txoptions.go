package memdb

import (
	"bytes"
	"context"
	"math"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// A transaction's options, the results of its commit, composition and
// futures.

// ---- options ----

// Options returns the transaction's options.
func (tx *transaction) Options() kv.TransactionOptions { return txOptions{tx} }

type txOptions struct{ tx *transaction }

// SetTimeout cancels the transaction with kv.ErrTransactionTimedOut once d
// has passed since it was created (or last Reset, which also clears the
// timeout), in real time or on the DB's clock, whichever comes first.
func (o txOptions) SetTimeout(d time.Duration) error {
	if !validOptionMillis(d) {
		return kv.ErrInvalidOptionValue
	}
	tx := o.tx
	tx.mu.Lock()
	defer tx.mu.Unlock()
	tx.cold().timeout = d
	tx.armTimerLocked()
	return nil
}

// armTimerLocked (re)starts the real-time timeout timer.
func (tx *transaction) armTimerLocked() {
	x := tx.x
	if x == nil {
		return // no timeout was ever set
	}
	if x.timer != nil {
		x.timer.Stop()
		x.timer = nil
	}
	x.timerGen++
	if x.timeout <= 0 {
		return
	}
	createdReal := tx.createdRealLocked()
	left := x.timeout - time.Since(createdReal)
	if left <= 0 {
		tx.cancelLocked(kv.ErrTransactionTimedOut)
		return
	}
	gen := x.timerGen
	tx.timed.Store(true)
	x.timer = time.AfterFunc(left, func() {
		tx.mu.Lock()
		defer tx.mu.Unlock()
		if x.timerGen == gen {
			tx.cancelLocked(kv.ErrTransactionTimedOut)
		}
	})
}

// validOptionMillis reports whether d is in the range of FDB's options
// given in milliseconds (timeout, max_retry_delay): 0 to math.MaxInt32
// (extractIntOption in ReadYourWritesTransaction::setOptionImpl and
// Transaction::setOption, fdbclient/).
func validOptionMillis(d time.Duration) bool {
	return d >= 0 && d.Milliseconds() <= math.MaxInt32
}

// SetRetryLimit limits OnError to n retries; -1 means no limit.
func (o txOptions) SetRetryLimit(n int) error {
	if n < -1 || n > math.MaxInt32 {
		return kv.ErrInvalidOptionValue
	}
	o.tx.mu.Lock()
	o.tx.cold().retryLimit = int32(n)
	o.tx.mu.Unlock()
	return nil
}

// SetMaxRetryDelay caps OnError's backoff, in place of the DB's cap
// (WithBackoff): 0 retries at once.
func (o txOptions) SetMaxRetryDelay(d time.Duration) error {
	if !validOptionMillis(d) {
		return kv.ErrInvalidOptionValue
	}
	o.tx.mu.Lock()
	x := o.tx.cold()
	x.maxRetryDelay, x.delaySet = d, true
	o.tx.mu.Unlock()
	return nil
}

// ---- results of a commit ----

// GetCommittedVersion returns the version of the transaction's last
// successful commit, -1 if it was read-only or there was none. As FDB's
// (Transaction::getCommittedVersion, fdbclient/NativeAPI.actor.cpp; no
// error, fdb_transaction_get_committed_version), it is invalidVersion
// (-1) until a commit succeeds, a read-only commit sets it to -1
// (commitMutations), and Reset and OnError keep it
// (TransactionState::cloneAndReset).
func (tx *transaction) GetCommittedVersion() (int64, error) {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.commitVer, nil
}

// GetVersionstamp returns the versionstamp the commit will use. As FDB's
// (ThreadSafeTransaction::getVersionstamp, then ReadYourWritesTransaction::
// getVersionstamp), it fails with the deferred error of an invalid write,
// and with used_during_commit once a Commit started (failing a commit in
// flight with it): ask for it before Commit.
func (tx *transaction) GetVersionstamp() kv.FutureVersionstamp {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if x := tx.x; x != nil && x.err != nil {
		return &stampFuture{err: x.err}
	}
	if err := tx.checkLocked(); err != nil {
		return &stampFuture{err: err}
	}
	x := tx.cold()
	if x.vsf == nil {
		x.vsf = &stampFuture{done: make(chan struct{})}
	}
	return x.vsf
}

func (tx *transaction) failStampLocked(err error) {
	if x := tx.x; x != nil && x.vsf != nil {
		x.vsf.resolve(nil, err)
	}
}

// GetApproximateSize returns the size of the mutations and conflict ranges
// so far, counted call by call as FDB's approximateSize is (see size.go): an
// upper bound of the size Commit checks against the limit but for point
// clears, which it counts 24 bytes short.
func (tx *transaction) GetApproximateSize() kv.FutureInt64 {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if x := tx.x; x != nil && x.err != nil {
		// ThreadSafeTransaction::getApproximateSize checks the deferred
		// error of an invalid write first.
		return intFuture{err: x.err}
	}
	return intFuture{v: tx.size}
}

// ---- composition ----

// Transact runs fn inside this transaction; it neither commits nor retries.
func (tx *transaction) Transact(_ context.Context, fn func(kv.Transaction) error) error {
	return fn(tx)
}

// ReadTransact runs fn inside this transaction.
func (tx *transaction) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(tx)
}

// Snapshot returns a view of the transaction whose reads add no conflicts.
func (tx *transaction) Snapshot() kv.ReadTransaction { return snapshot{tx} }

// ---- futures ----

type intFuture struct {
	v   int64
	err error
}

func (f intFuture) Get() (int64, error) { return f.v, f.err }

type lazyInt struct {
	once sync.Once
	f    func() (int64, error)
	v    int64
	err  error
}

func (l *lazyInt) Get() (int64, error) {
	l.once.Do(func() { l.v, l.err = l.f() })
	return l.v, l.err
}

// stampFuture is the pending versionstamp of a commit.
type stampFuture struct {
	done  chan struct{}
	once  sync.Once
	stamp []byte
	err   error
}

func (f *stampFuture) resolve(stamp []byte, err error) {
	f.once.Do(func() {
		f.stamp, f.err = bytes.Clone(stamp), err
		close(f.done)
	})
}

func (f *stampFuture) Get() ([]byte, error) {
	if f.done != nil {
		<-f.done
	}
	return f.stamp, f.err
}
