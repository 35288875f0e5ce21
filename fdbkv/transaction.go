package fdbkv

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue/kv"
)

// WrapTransaction returns tr, a transaction the application created with
// the binding, as a kv.Transaction, so that fdbqueue's layers run inside it
// together with the application's own reads and writes. Its Transact and
// ReadTransact just run the function inside tr; committing, retrying and
// cancelling stay with the application (e.g. the fdb.Database.Transact that
// created tr). Every error they return that carries an FDB code has an
// fdb.Error of that code in its chain: the binding's own errors keep theirs,
// and an error the layer made itself around a kv.Error (a conflict it
// detected, wrapping kv.ErrNotCommitted) gets one (see bindingError). So
// the binding's own retry loop (fdb.Database.Transact, which looks for an
// fdb.Error with errors.As) retries them as FDB decides for the code, while
// errors.Is still matches the kv sentinel and the layer's own error. The
// process's API version must be at least MinAPIVersion (see
// CheckAPIVersion). The zero fdb.Transaction, which
// fdb.Database.CreateTransaction returns with an error, has no handle: its
// wrapper fails every read, commit and transactional call with
// kv.ErrClientInvalidOp, where the binding's methods would panic. tr must
// keep read-your-writes on, for snapshot reads too (see "Who owns the
// database handle" in the package documentation). A watch made through
// the wrapper fails, when tr does not commit, only as FDB fails it (its
// native commit fails, tr is reset or destroyed): fdbkv fails the watches
// of an attempt itself only when the attempt ends through the wrapper's
// Commit, Cancel, OnError or Reset.
func WrapTransaction(tr fdb.Transaction) kv.Transaction {
	if tr == (fdb.Transaction{}) {
		return noHandle{}
	}
	return wrapTransaction(tr)
}

// wrapTransaction is WrapTransaction of a transaction with a handle: no
// context of its own cancels it.
func wrapTransaction(tr fdb.Transaction) *transaction {
	return newTransaction(context.Background(), tr)
}

// transaction is a kv.Transaction over an fdb.Transaction.
type transaction struct {
	tr    fdb.Transaction
	state *txState
}

// newTransaction wraps tr, to be cancelled when ctx ends (see
// txState.watchContext).
func newTransaction(ctx context.Context, tr fdb.Transaction) *transaction {
	return &transaction{tr: tr, state: &txState{ctl: tr, ctx: ctx}}
}

// control is the part of fdb.Transaction whose order against a
// cancellation decides what a commit's error means. fdb.Transaction
// implements it; tests substitute fakes to drive each interleaving.
type control interface {
	Commit() fdb.FutureNil
	Cancel()
	Reset()
	OnError(fdb.Error) fdb.FutureNil
}

// txState is what a transaction shares with the watcher of its context.
//
// The rule that keeps a commit's error true: a transaction marked cancelled
// never sends its commit (it fails with plain transaction_cancelled, 1025),
// and once a commit has been sent, a transaction_cancelled,
// transaction_timed_out or used_during_commit error counts as maybe
// committed (kv.CommitInterrupted; see commitError). The mark is set
// before FDB is told to cancel, so if Commit does not see it, the
// cancellation reaches FDB after the commit was handed over, and the
// commit may have been applied. (If FDB
// got the cancellation first, it fails the commit without sending it and
// the error is needlessly, but safely, reported as maybe committed.)
//
// It also keeps kv's promise for the watches of an attempt that does not
// commit, which FDB does not: see watches.
type txState struct {
	ctl       control
	ctx       context.Context // cancels the transaction when it ends
	cancelled atomic.Bool     // by Cancel or ctx, since the last Reset

	mu sync.Mutex
	// watches are the watches made since the last reset whose fate no
	// commit has decided yet. kv fails them when the transaction is
	// cancelled or its commit fails (kv.Transaction.Cancel, Watch). FDB
	// fails a watch so only while its read is pending (RYWImpl::watch waits
	// on resetPromise; fdbclient/ReadYourWrites.actor.cpp): once read, it
	// is handed to the native transaction, which fails it only when its
	// commit fails or when it is reset or destroyed (commitAndWatch,
	// Transaction::resetImpl and ~Transaction, fdbclient/
	// NativeAPI.actor.cpp). A commit that fails before the native commit
	// runs (an invalid write's deferred error, a failed read, a timeout or
	// cancellation that came first), a Cancel, an ended context and an
	// OnError that gives up do none of these, and the binding destroys a
	// transaction only once nothing refers to it, which its watch's future
	// does: such a watch stayed pending until its own Cancel. fdbkv fails
	// them itself (watchState.fail), with the commit's error or the
	// cancellation's.
	watches []*watchState
	// sent says a commit was sent since the last reset: its outcome, not
	// a cancellation, decides the fate of the watches.
	sent bool
	// gen counts attempts (forget, at each reset): a Commit or OnError
	// that wakes after a Reset made meanwhile (FDB fails their futures
	// then, and the Go waiter wakes later) decides nothing about the
	// watches of the attempt that followed.
	gen uint64
}

// watchContext cancels the transaction when its context ends, until the
// returned function is called.
func (s *txState) watchContext() (stop func() bool) {
	return context.AfterFunc(s.ctx, s.cancel)
}

// errCancelled is FDB's transaction_cancelled, as the binding reports it.
var errCancelled = translateError(fdb.Error{Code: kv.ErrTransactionCancelled.Code})

// cancel marks the transaction cancelled, then cancels it in FDB
// (fdb.Transaction.Cancel), and fails its watches unless a commit was
// sent (whose outcome decides them).
func (s *txState) cancel() {
	s.cancelled.Store(true)
	s.ctl.Cancel()
	s.failUnsent(errCancelled)
}

// track records ws, a watch made in the transaction. Made in a
// transaction already cancelled, it fails at once (FDB fails it too,
// except under the multi-version client before a client library has
// connected: MultiVersionTransaction::cancel then does nothing).
func (s *txState) track(ws *watchState) {
	s.mu.Lock()
	if s.cancelled.Load() && !s.sent {
		s.mu.Unlock()
		ws.fail(errCancelled)
		return
	}
	s.watches = append(s.watches, ws)
	s.mu.Unlock()
}

// failUnsent fails the watches with err unless a commit was sent.
func (s *txState) failUnsent(err error) {
	s.failUnsentOf(s.attempt(), err)
}

// failUnsentOf is failUnsent for attempt gen: nothing once a Reset ended
// it.
func (s *txState) failUnsentOf(gen uint64, err error) {
	s.mu.Lock()
	var ws []*watchState
	if !s.sent && s.gen == gen {
		ws, s.watches = s.watches, nil
	}
	s.mu.Unlock()
	failWatches(ws, err)
}

// settle decides the watches' fate by the outcome of a commit of attempt
// gen: on success they are the database's (FDB registered them), on
// failure they fail with its error, as kv.Transaction.Watch promises. FDB
// has failed them already with the same error if its native commit ran
// (commitAndWatch); fail then changes nothing. After a Reset since, the
// attempt's watches were failed by it (forget), and those in the list are
// the next attempt's: settle leaves them.
func (s *txState) settle(gen uint64, err error) {
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return
	}
	ws := s.watches
	s.watches = nil
	s.mu.Unlock()
	if err != nil {
		failWatches(ws, err)
	}
}

// attempt returns the current attempt's generation.
func (s *txState) attempt() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// forget empties the watch list and the sent mark for a new attempt
// (Reset, or OnError's retry). FDB's reset fails the old attempt's
// uncommitted watches with transaction_cancelled (Transaction::resetImpl
// calls cancelWatches; under the multi-version client, the inner
// transaction it drops is destroyed, and ~Transaction does): failing them
// again changes nothing, but no watch is left to chance.
func (s *txState) forget() {
	s.mu.Lock()
	ws := s.watches
	s.watches, s.sent = nil, false
	s.gen++
	s.mu.Unlock()
	failWatches(ws, errCancelled)
}

// forgetOf is forget for attempt gen, which OnError's retry ends: nothing
// if a Reset ended it first (and forgot its watches).
func (s *txState) forgetOf(gen uint64) {
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.forget()
}

// failWatches fails each of ws with err.
func failWatches(ws []*watchState, err error) {
	for _, w := range ws {
		w.fail(err)
	}
}

// commit sends the commit unless the transaction is marked cancelled, and
// waits for its outcome, which decides the fate of the watches.
func (s *txState) commit() error {
	if s.cancelled.Load() {
		s.settle(s.attempt(), errCancelled)
		return errCancelled
	}
	s.mu.Lock()
	s.sent = true
	gen := s.gen
	s.mu.Unlock()
	err := commitError(s.ctl.Commit().Get())
	s.settle(gen, err)
	return err
}

// reset resets the transaction (fdb.Transaction.Reset, which also clears
// its options and undoes a cancellation). A transaction whose context has
// ended is cancelled again: it must not run, and commit, a new attempt.
// The context is checked after the reset, so a watcher that fired before
// it is never undone.
func (s *txState) reset() {
	s.ctl.Reset()
	s.forget()
	s.cancelled.Store(false)
	if s.ctx.Err() != nil {
		s.cancel()
	}
}

// onError asks FDB's OnError about err (of FDB code code); see
// transaction.OnError.
//
// When FDB retries, it has reset the transaction (forget). When it gives
// up, it leaves the transaction cancelled until Reset, and its watches
// fail as a cancellation fails them: with the error FDB cancelled it with
// (RYWImpl::onError throws resetPromise's error when it is set already: a
// cancellation, a timeout, used_during_commit), otherwise with
// transaction_cancelled (which its catch then sends to resetPromise).
//
// A transaction marked cancelled (Cancel, or its context) must stay so
// until Reset, and FDB's own OnError then fails with transaction_cancelled
// (resetPromise's error), except under the multi-version client (used
// with external client libraries, or with the network option
// disable_client_bypass): MultiVersionTransaction::onError (fdbclient/
// MultiVersionTransaction.actor.cpp) answers cluster_version_changed
// (1039), and an inner onError that fails with it, by replacing the
// cancelled inner transaction with a new one (updateTransaction), not
// cancelled, and succeeding. A cancellation that races the inner onError
// can likewise reach the transaction being replaced. So when FDB retries a
// transaction marked cancelled, it is cancelled again, and OnError fails
// with transaction_cancelled as it does in every other case: the next
// attempt's reads would otherwise run, ignoring the ended context.
func (s *txState) onError(err error, code int) error {
	gen := s.attempt()
	if oerr := s.ctl.OnError(fdb.Error{Code: code}).Get(); oerr != nil {
		ocode, ok := errorCode(oerr)
		switch {
		case ok && (ocode == kv.ErrTransactionCancelled.Code || ocode == kv.ErrTransactionTimedOut.Code ||
			ocode == kv.ErrUsedDuringCommit.Code):
			s.failUnsentOf(gen, translateError(oerr))
		default:
			s.failUnsentOf(gen, errCancelled)
		}
		if ok && ocode == code {
			return translateError(err)
		}
		return translateError(oerr)
	}
	s.forgetOf(gen)
	if s.cancelled.Load() {
		s.cancel()
		return errCancelled
	}
	return nil
}

// fdbRange converts a kv.KeyRange to the binding's fdb.KeyRange.
func fdbRange(r kv.KeyRange) fdb.KeyRange {
	return fdb.KeyRange{Begin: fdb.Key(clip(r.Begin)), End: fdb.Key(clip(r.End))}
}

// clipTo is what clip shortens a slice to: longer than any key or value
// FDB accepts (KEY_SIZE_LIMIT 10,000 bytes, SYSTEM_KEY_SIZE_LIMIT 30,000
// and VALUE_SIZE_LIMIT 100,000 in fdbclient/ClientKnobs.cpp).
const clipTo = 1 << 20

// clip returns b, or its first clipTo bytes when its length does not fit
// in a C int. The binding passes every length to libfdb_c as C.int(len)
// (bindings/go/src/fdb/transaction.go): from 2 GiB the length is negative
// and libfdb_c aborts the process while copying it (the size assertion in
// flow/include/flow/Arena.h, under fdb_c.cpp's CATCH_AND_DIE); from 4 GiB
// it wraps, and FDB would store a prefix of a value. The first clipTo
// bytes are over every size limit as the whole is, and they sort against
// every key that can exist as the whole does, so FDB answers them as it
// would the whole: a write fails with key_too_large or value_too_large
// (deferred, as writes' errors are: ThreadSafeTransaction::set keeps it as
// the transaction's deferredError, which fails the next read and the
// commit; ReadYourWritesTransaction::set and atomicOp check sizes before
// anything uses the bytes), a read of such a
// key finds nothing, and a range or conflict range with such a bound
// covers the same keys.
func clip(b []byte) []byte { return clipOver(b, math.MaxInt32) }

// clipOver is clip for lengths over max (a parameter for the tests).
func clipOver(b []byte, max int) []byte {
	if len(b) > max {
		return b[:min(clipTo, len(b))]
	}
	return b
}

// Transact runs fn inside this transaction, without committing or retrying.
// It returns ctx.Err() without running fn if ctx has ended. fn's error is
// returned with an fdb.Error of its kv code in its chain (bindingError), for
// the binding's retry loop around a WrapTransaction.
func (t *transaction) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if err := orBackground(ctx).Err(); err != nil {
		return err
	}
	return bindingError(fn(t))
}

// ReadTransact runs fn inside this transaction, without retrying; errors as
// for Transact.
func (t *transaction) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	if err := orBackground(ctx).Err(); err != nil {
		return err
	}
	return bindingError(fn(t))
}

// Get maps onto fdb.Transaction.Get.
func (t *transaction) Get(key []byte) kv.FutureValue {
	return futureValue{t.tr.Get(fdb.Key(clip(key)))}
}

// GetRange maps onto fdb.Transaction.GetRange.
func (t *transaction) GetRange(r kv.KeyRange, opts kv.RangeOptions) kv.RangeResult {
	if opts.Limit < 0 {
		return invalidLimit
	}
	return rangeResult{t.tr.GetRange(fdbRange(r), rangeOptions(opts))}
}

// GetReadVersion maps onto fdb.Transaction.GetReadVersion.
func (t *transaction) GetReadVersion() kv.FutureInt64 {
	return newFutureInt64(t.tr.GetReadVersion())
}

// Snapshot maps onto fdb.Transaction.Snapshot.
func (t *transaction) Snapshot() kv.ReadTransaction {
	return snapshot{t.tr.Snapshot()}
}

// Set maps onto fdb.Transaction.Set.
func (t *transaction) Set(key, value []byte) { t.tr.Set(fdb.Key(clip(key)), clip(value)) }

// Clear maps onto fdb.Transaction.Clear.
func (t *transaction) Clear(key []byte) { t.tr.Clear(fdb.Key(clip(key))) }

// ClearRange maps onto fdb.Transaction.ClearRange.
func (t *transaction) ClearRange(r kv.KeyRange) { t.tr.ClearRange(fdbRange(r)) }

// Add maps onto fdb.Transaction.Add.
func (t *transaction) Add(key, param []byte) { t.tr.Add(fdb.Key(clip(key)), clip(param)) }

// Max maps onto fdb.Transaction.Max.
func (t *transaction) Max(key, param []byte) { t.tr.Max(fdb.Key(clip(key)), clip(param)) }

// Min maps onto fdb.Transaction.Min.
func (t *transaction) Min(key, param []byte) { t.tr.Min(fdb.Key(clip(key)), clip(param)) }

// BitAnd maps onto fdb.Transaction.BitAnd.
func (t *transaction) BitAnd(key, param []byte) { t.tr.BitAnd(fdb.Key(clip(key)), clip(param)) }

// BitOr maps onto fdb.Transaction.BitOr.
func (t *transaction) BitOr(key, param []byte) { t.tr.BitOr(fdb.Key(clip(key)), clip(param)) }

// BitXor maps onto fdb.Transaction.BitXor.
func (t *transaction) BitXor(key, param []byte) { t.tr.BitXor(fdb.Key(clip(key)), clip(param)) }

// ByteMin maps onto fdb.Transaction.ByteMin.
func (t *transaction) ByteMin(key, param []byte) { t.tr.ByteMin(fdb.Key(clip(key)), clip(param)) }

// ByteMax maps onto fdb.Transaction.ByteMax.
func (t *transaction) ByteMax(key, param []byte) { t.tr.ByteMax(fdb.Key(clip(key)), clip(param)) }

// AppendIfFits maps onto fdb.Transaction.AppendIfFits.
func (t *transaction) AppendIfFits(key, param []byte) {
	t.tr.AppendIfFits(fdb.Key(clip(key)), clip(param))
}

// CompareAndClear maps onto fdb.Transaction.CompareAndClear.
func (t *transaction) CompareAndClear(key, param []byte) {
	t.tr.CompareAndClear(fdb.Key(clip(key)), clip(param))
}

// SetVersionstampedKey maps onto fdb.Transaction.SetVersionstampedKey.
func (t *transaction) SetVersionstampedKey(key, value []byte) {
	t.tr.SetVersionstampedKey(fdb.Key(clip(key)), clip(value))
}

// SetVersionstampedValue maps onto fdb.Transaction.SetVersionstampedValue.
func (t *transaction) SetVersionstampedValue(key, value []byte) {
	t.tr.SetVersionstampedValue(fdb.Key(clip(key)), clip(value))
}

// AddReadConflictRange maps onto fdb.Transaction.AddReadConflictRange.
func (t *transaction) AddReadConflictRange(r kv.KeyRange) error {
	return translateError(t.tr.AddReadConflictRange(fdbRange(r)))
}

// AddReadConflictKey maps onto fdb.Transaction.AddReadConflictKey.
func (t *transaction) AddReadConflictKey(key []byte) error {
	return translateError(t.tr.AddReadConflictKey(fdb.Key(clip(key))))
}

// AddWriteConflictRange maps onto fdb.Transaction.AddWriteConflictRange.
func (t *transaction) AddWriteConflictRange(r kv.KeyRange) error {
	return translateError(t.tr.AddWriteConflictRange(fdbRange(r)))
}

// AddWriteConflictKey maps onto fdb.Transaction.AddWriteConflictKey.
func (t *transaction) AddWriteConflictKey(key []byte) error {
	return translateError(t.tr.AddWriteConflictKey(fdb.Key(clip(key))))
}

// Watch maps onto fdb.Transaction.Watch; see watch for how Wait blocks.
// The watch fails if the transaction is cancelled or its commit fails
// (see txState.watches).
func (t *transaction) Watch(key []byte) kv.Watch {
	w := newWatch(t.tr.Watch(fdb.Key(clip(key))))
	t.state.track(w.s)
	return w
}

// Commit maps onto fdb.Transaction.Commit().Get. A commit that was sent
// and then failed with transaction_cancelled, transaction_timed_out or
// used_during_commit is marked with kv.CommitInterrupted (it may have been
// applied; see commitError); a
// transaction already cancelled (by Cancel or its context) sends nothing
// and fails with plain transaction_cancelled. See txState.
func (t *transaction) Commit() error {
	return t.state.commit()
}

// OnError hands err's FDB code to fdb.Transaction.OnError, which decides
// with FDB's own predicate: for a retryable code it waits FDB's backoff and
// resets the transaction, keeping its options (honouring the retry limit
// and timeout options); otherwise it fails, and FDB then leaves the
// transaction cancelled until Reset (RYWImpl::onError,
// fdbclient/ReadYourWrites.actor.cpp). An error without an FDB code is
// returned as it is, without calling FDB. When FDB refuses to retry with
// the same code, err itself is returned, so a kv.CommitInterrupted mark
// is kept. A transaction cancelled by Cancel or its context stays
// cancelled: OnError then fails with transaction_cancelled, or with
// transaction_timed_out or used_during_commit when that error had failed
// the transaction before the cancellation (RYWImpl::onError throws
// resetPromise's error, and ReadYourWritesTransaction::cancel leaves a set
// resetPromise alone; see txState.onError).
func (t *transaction) OnError(err error) error {
	code, ok := errorCode(err)
	if !ok {
		return err
	}
	return t.state.onError(err, code)
}

// Reset maps onto fdb.Transaction.Reset. As in FDB
// (ReadYourWritesTransaction::reset, fdbclient/ReadYourWrites.actor.cpp),
// it clears the options set on the transaction (timeout, retry limit, max
// retry delay): set them again after Reset. The database's transaction
// defaults (its transaction_timeout, transaction_retry_limit and
// transaction_max_retry_delay options) apply again. It undoes Cancel, but
// a transaction made by CreateTransaction(ctx) whose ctx has ended stays
// cancelled.
func (t *transaction) Reset() {
	t.state.reset()
}

// Cancel maps onto fdb.Transaction.Cancel.
func (t *transaction) Cancel() {
	t.state.cancel()
}

// GetCommittedVersion maps onto fdb.Transaction.GetCommittedVersion.
func (t *transaction) GetCommittedVersion() (int64, error) {
	v, err := t.tr.GetCommittedVersion()
	if err != nil {
		return 0, translateError(err)
	}
	return v, nil
}

// GetVersionstamp maps onto fdb.Transaction.GetVersionstamp.
func (t *transaction) GetVersionstamp() kv.FutureVersionstamp {
	return futureVersionstamp{t.tr.GetVersionstamp()}
}

// GetApproximateSize maps onto fdb.Transaction.GetApproximateSize.
func (t *transaction) GetApproximateSize() kv.FutureInt64 {
	return newFutureInt64(t.tr.GetApproximateSize())
}

// Options maps onto fdb.Transaction.Options.
func (t *transaction) Options() kv.TransactionOptions {
	return options{t.tr.Options()}
}

// snapshot is the snapshot view of a transaction (fdb.Snapshot).
type snapshot struct {
	s fdb.Snapshot
}

var _ kv.ReadTransaction = snapshot{}

// Get maps onto fdb.Snapshot.Get.
func (s snapshot) Get(key []byte) kv.FutureValue {
	return futureValue{s.s.Get(fdb.Key(clip(key)))}
}

// GetRange maps onto fdb.Snapshot.GetRange.
func (s snapshot) GetRange(r kv.KeyRange, opts kv.RangeOptions) kv.RangeResult {
	if opts.Limit < 0 {
		return invalidLimit
	}
	return rangeResult{s.s.GetRange(fdbRange(r), rangeOptions(opts))}
}

// GetReadVersion maps onto fdb.Snapshot.GetReadVersion.
func (s snapshot) GetReadVersion() kv.FutureInt64 {
	return newFutureInt64(s.s.GetReadVersion())
}

// Snapshot returns s: a snapshot of a snapshot is itself.
func (s snapshot) Snapshot() kv.ReadTransaction { return s }

// ReadTransact runs fn inside the snapshot, without retrying; errors as for
// transaction.Transact.
func (s snapshot) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return bindingError(fn(s))
}

// options sets transaction options (fdb.TransactionOptions).
type options struct {
	o fdb.TransactionOptions
}

// The options' values are checked here, before the binding is called,
// because FDB does not reject a value out of range when it is set:
// ReadYourWritesTransaction::setOptionImpl (TIMEOUT, RETRY_LIMIT;
// fdbclient/ReadYourWrites.actor.cpp) and Transaction::setOption
// (MAX_RETRY_DELAY; fdbclient/NativeAPI.actor.cpp) throw
// invalid_option_value from extractIntOption(value, min, max), but they run
// on the network thread: ThreadSafeTransaction::setOption
// (fdbclient/ThreadSafeTransaction.cpp) hands them over with
// onMainThreadVoid(..., &ISingleThreadTransaction::deferredError), so
// fdb_transaction_set_option returns 0 and the error only fails the
// transaction's next operation. (MultiVersionTransaction::setOption also
// records a persistent option before it is checked, to apply it again to
// the transaction of a new client library.) kv.TransactionOptions promises
// kv.ErrInvalidOptionValue at once, with nothing changed.

// optionMillis converts d to the whole milliseconds of FDB's timeout and
// max_retry_delay options: a positive duration under 1 ms becomes 1 ms (a
// timeout of 0 disables it, ReadYourWritesTransaction::resetTimeout; a max
// retry delay of 0 caps every backoff after the first at 0,
// Transaction::getBackoff). A negative duration, or one over FDB's maximum
// of math.MaxInt32 ms (about 24.8 days; extractIntOption(value, 0,
// INT_MAX)), is refused with kv.ErrInvalidOptionValue (see
// invalidOptionValue). It calls no C function.
func optionMillis(option string, d time.Duration) (int64, error) {
	ms := d.Milliseconds()
	if d < 0 || ms > math.MaxInt32 {
		return 0, invalidOptionValue(option, d.String(), "0 to 2147483647 ms")
	}
	if d > 0 && ms == 0 {
		return 1, nil
	}
	return ms, nil
}

// retryLimitValue checks n against FDB's range for retry_limit, -1 (no
// limit) to math.MaxInt32 (extractIntOption(value, -1, INT_MAX) in
// ReadYourWritesTransaction::setOptionImpl). It calls no C function.
func retryLimitValue(n int) (int64, error) {
	if n < -1 || int64(n) > math.MaxInt32 {
		return 0, invalidOptionValue("retry limit", strconv.Itoa(n), "-1 to 2147483647")
	}
	return int64(n), nil
}

// invalidOptionValue is the error for an option value out of FDB's range:
// FDB's invalid_option_value (2006), matching kv.ErrInvalidOptionValue and
// an fdb.Error of that code, as FDB's own would.
func invalidOptionValue(option, value, valid string) error {
	return fmt.Errorf("fdbkv: %s %s is outside FDB's range, %s: %w",
		option, value, valid, translateError(fdb.Error{Code: kv.ErrInvalidOptionValue.Code}))
}

// timeoutMillis is optionMillis for the timeout, rounded up to whole
// milliseconds rather than down: kv.TransactionOptions.SetTimeout cancels
// the transaction once d has elapsed, and FDB's timer fires at the
// milliseconds it is given (timebomb, fdbclient/ReadYourWrites.actor.cpp),
// so 1.5 ms sent as 1 ms would cancel it early. A d that optionMillis
// accepts stays within FDB's range (its last partial millisecond is not
// rounded up past math.MaxInt32). It calls no C function.
func timeoutMillis(d time.Duration) (int64, error) {
	ms, err := optionMillis("timeout", d)
	if err != nil {
		return 0, err
	}
	if d > time.Duration(ms)*time.Millisecond && ms < math.MaxInt32 {
		ms++
	}
	return ms, nil
}

// SetTimeout maps onto fdb.TransactionOptions.SetTimeout (milliseconds),
// after timeoutMillis checked and rounded d.
func (o options) SetTimeout(d time.Duration) error {
	ms, err := timeoutMillis(d)
	if err != nil {
		return err
	}
	return translateError(o.o.SetTimeout(ms))
}

// SetRetryLimit maps onto fdb.TransactionOptions.SetRetryLimit, after
// retryLimitValue checked n.
func (o options) SetRetryLimit(n int) error {
	v, err := retryLimitValue(n)
	if err != nil {
		return err
	}
	return translateError(o.o.SetRetryLimit(v))
}

// SetMaxRetryDelay maps onto fdb.TransactionOptions.SetMaxRetryDelay
// (milliseconds), after optionMillis checked d.
func (o options) SetMaxRetryDelay(d time.Duration) error {
	ms, err := optionMillis("max retry delay", d)
	if err != nil {
		return err
	}
	return translateError(o.o.SetMaxRetryDelay(ms))
}

// rangeOptions maps kv.RangeOptions onto fdb.RangeOptions. kv's streaming
// mode is a hint, so StreamingModeExact without a limit, which FDB rejects
// (exact_mode_without_limits), becomes StreamingModeWantAll. A limit over
// math.MaxInt32 becomes no limit: the binding passes it to libfdb_c as a C
// int (doGetRange, bindings/go/src/fdb/transaction.go), where it would
// wrap (from 2^31 to 2^32-2 to a negative limit, which fails with
// range_limits_invalid; past that to some other), and no range read can
// return that many rows anyway.
func rangeOptions(o kv.RangeOptions) fdb.RangeOptions {
	limit := o.Limit
	if limit > math.MaxInt32 {
		limit = 0
	}
	mode := fdb.StreamingModeIterator
	switch o.Mode {
	case kv.StreamingModeWantAll:
		mode = fdb.StreamingModeWantAll
	case kv.StreamingModeExact:
		mode = fdb.StreamingModeExact
		if limit == 0 {
			mode = fdb.StreamingModeWantAll
		}
	}
	return fdb.RangeOptions{Limit: limit, Reverse: o.Reverse, Mode: mode}
}

// futureValue is a point read (fdb.FutureByteSlice).
type futureValue struct {
	f fdb.FutureByteSlice
}

// Get returns nil, nil for a missing key. For a present key the binding
// returns a non-nil slice, empty for an empty value.
func (f futureValue) Get() ([]byte, error) {
	v, err := f.f.Get()
	if err != nil {
		return nil, translateError(err)
	}
	return v, nil
}

// futureInt64 is an fdb.FutureInt64 whose result is fetched once, so that
// several goroutines may call Get (the binding's FutureInt64 would register
// one callback per concurrent waiter).
type futureInt64 struct {
	f    fdb.FutureInt64
	once sync.Once
	v    int64
	err  error
}

// newFutureInt64 wraps f.
func newFutureInt64(f fdb.FutureInt64) *futureInt64 {
	return &futureInt64{f: f}
}

// Get maps onto fdb.FutureInt64.Get.
func (f *futureInt64) Get() (int64, error) {
	f.once.Do(func() {
		v, err := f.f.Get()
		f.v, f.err = v, translateError(err)
	})
	return f.v, f.err
}

// futureVersionstamp is the versionstamp of a commit (fdb.FutureKey).
type futureVersionstamp struct {
	f fdb.FutureKey
}

// Get maps onto fdb.FutureKey.Get: the 10-byte versionstamp.
func (f futureVersionstamp) Get() ([]byte, error) {
	k, err := f.f.Get()
	if err != nil {
		return nil, translateError(err)
	}
	return []byte(k), nil
}

// rangeResult is a range read (fdb.RangeResult).
type rangeResult struct {
	rr fdb.RangeResult
}

// GetSlice reads the whole (limited) range with fdb.RangeResult.Iterator,
// which keeps the streaming mode the read asked for. (The binding's
// GetSliceWithError would fetch every batch after the first with
// StreamingModeExact when a limit is set, WantAll otherwise, whatever
// mode was asked: a byte-bounded Iterator-mode read of a few rows could
// fetch up to its whole row limit at once.)
func (r rangeResult) GetSlice() ([]kv.KeyValue, error) {
	it := r.rr.Iterator()
	out := []kv.KeyValue{}
	for it.Advance() {
		p, err := it.Get()
		if err != nil {
			return nil, translateError(err)
		}
		out = append(out, kv.KeyValue{Key: p.Key, Value: p.Value})
	}
	return out, nil
}

// Iterator maps onto fdb.RangeResult.Iterator.
func (r rangeResult) Iterator() kv.RangeIterator {
	return &rangeIterator{it: r.rr.Iterator()}
}

// invalidLimit is the result of a range read with a negative limit, which
// kv refuses with range_limits_invalid (kv.RangeOptions.Limit) before the
// binding is called: FDB takes -1 as "unlimited" (GetRangeLimits,
// ROW_LIMIT_UNLIMITED) and refuses only the others
// (ReadYourWritesTransaction::getRange: !limits.isValid()).
var invalidLimit kv.RangeResult = failedRange{err: translateError(fdb.Error{Code: kv.ErrRangeLimitsInvalid.Code})}

// failedRange is a range read that failed before it was issued.
type failedRange struct{ err error }

// GetSlice returns the error.
func (r failedRange) GetSlice() ([]kv.KeyValue, error) { return nil, r.err }

// Iterator returns an iterator that stops at once with the error.
func (r failedRange) Iterator() kv.RangeIterator { return &rangeIterator{err: r.err, done: true} }

// rangeIterator streams a range read (fdb.RangeIterator).
type rangeIterator struct {
	it   *fdb.RangeIterator
	cur  kv.KeyValue
	err  error
	done bool
}

// Next maps onto fdb.RangeIterator.Advance and Get.
func (i *rangeIterator) Next() bool {
	if i.done {
		return false
	}
	if !i.it.Advance() {
		i.done = true
		return false
	}
	p, err := i.it.Get()
	if err != nil {
		i.err, i.done = translateError(err), true
		return false
	}
	i.cur = kv.KeyValue{Key: p.Key, Value: p.Value}
	return true
}

// KeyValue returns the pair Next moved to.
func (i *rangeIterator) KeyValue() kv.KeyValue { return i.cur }

// Err returns the error that stopped the iteration.
func (i *rangeIterator) Err() error { return i.err }
