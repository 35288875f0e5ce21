package kv

import (
	"context"
	"time"
)

// KeyValue is one key and its value, as returned by a range read.
type KeyValue struct {
	Key   []byte
	Value []byte
}

// KeyRange is the half-open interval of keys [Begin, End).
type KeyRange struct {
	Begin []byte
	End   []byte
}

// StreamingMode hints how a range read should trade latency for bandwidth.
// Backends without such a notion ignore it. It maps onto fdb.StreamingMode.
type StreamingMode int

// Streaming modes, with the meaning of FoundationDB's (not its numbering:
// the binding's WantAll, Iterator and Exact are -1, 0 and 1).
const (
	// StreamingModeIterator fetches in growing batches: good when the caller
	// may stop early. It is the default.
	StreamingModeIterator StreamingMode = iota
	// StreamingModeWantAll fetches the whole range as fast as possible.
	StreamingModeWantAll
	// StreamingModeExact fetches exactly Limit rows in one batch.
	StreamingModeExact
)

// RangeOptions says how a range read is carried out. The zero value reads
// the whole range forwards.
type RangeOptions struct {
	// Limit is the most key-value pairs to return; 0 means no limit. A
	// negative Limit fails the read with ErrRangeLimitsInvalid (FDB's
	// range_limits_invalid; FDB's own "unlimited", -1, is refused too).
	Limit int
	// Reverse returns the pairs in descending key order; with a Limit, the
	// last Limit pairs of the range are returned.
	Reverse bool
	// Mode is a streaming hint; see StreamingMode.
	Mode StreamingMode
}

// FutureValue is the pending result of a point read. Reads are issued when
// the method is called and may be waited on together, as FDB futures are.
type FutureValue interface {
	// Get blocks until the read completes. It returns nil, nil when the key
	// does not exist, and a non-nil (possibly empty) slice when it does.
	Get() ([]byte, error)
}

// FutureInt64 is the pending result of a read that yields a number.
type FutureInt64 interface {
	// Get blocks until the value is known.
	Get() (int64, error)
}

// FutureVersionstamp is the pending versionstamp of a transaction's commit.
type FutureVersionstamp interface {
	// Get blocks until the transaction has committed and returns the
	// 10-byte versionstamp its versionstamped operations used. It returns an
	// error if the commit failed (FDB's transaction_invalid_version, 2020,
	// whatever the commit's error; the cancellation's error if the
	// transaction was cancelled or reset first), or if the transaction
	// wrote nothing (no_commit_version, 2021). On FoundationDB, a commit
	// that fails before it is sent (an invalid write's error, a failed
	// read) leaves it pending until the transaction is reset, retried
	// with OnError, cancelled or times out: only the commit's own failure
	// sets 2020 (commitAndWatch, fdbclient/NativeAPI.actor.cpp). memdb
	// fails it then with the commit's error. Call Get after a successful
	// Commit.
	Get() ([]byte, error)
}

// RangeResult is a pending range read. It can be consumed at once with
// GetSlice or streamed with Iterator; a large range should be streamed.
// Consume it once: what a second GetSlice or Iterator returns differs by
// backend. FDB's binding answers a second consumer's first batch from the
// read GetRange issued, without the transaction's writes made since
// (RangeResult.Iterator, bindings/go/src/fdb/range.go); memdb reads the
// range again, and sees them.
type RangeResult interface {
	// GetSlice blocks until the whole (limited) range has been read.
	GetSlice() ([]KeyValue, error)
	// Iterator returns an iterator that fetches the range in batches.
	// Read conflict ranges cover what the iterator actually fetched.
	Iterator() RangeIterator
}

// RangeIterator streams a range read. Use it as:
//
//	for it.Next() { kv := it.KeyValue() ... }
//	if err := it.Err(); err != nil { ... }
type RangeIterator interface {
	// Next advances to the next pair, fetching a batch if needed. It
	// returns false at the end of the range or on error.
	Next() bool
	// KeyValue returns the current pair. Valid only after Next returned
	// true.
	KeyValue() KeyValue
	// Err returns the error that stopped the iteration, if any.
	Err() error
}

// Watch is a pending notification that a key's value changed. A watch
// outlives the transaction that created it; cancel watches you no longer
// need, since a database allows only a limited number at once.
type Watch interface {
	// Wait blocks until the watched key changes (it may also return nil
	// spuriously), the watch fails, or ctx ends (then it returns ctx.Err()
	// and the watch stays registered until Cancel).
	Wait(ctx context.Context) error
	// Cancel releases the watch; a pending Wait returns
	// ErrTransactionCancelled.
	Cancel()
}

// TransactionOptions sets per-transaction options. They survive OnError's
// reset, as in FDB API version 610 and later, but Reset clears them (FDB's
// ReadYourWritesTransaction::reset keeps only the database's defaults): code
// that calls Reset must set its options again.
//
// A value outside the option's range returns ErrInvalidOptionValue at
// once and changes nothing: a negative duration, a timeout or delay over
// math.MaxInt32 milliseconds, a retry limit below -1 or over
// math.MaxInt32 (FDB's ranges: ReadYourWritesTransaction::setOptionImpl
// and Transaction::setOption, fdbclient/). FDB's C API reports the error
// at the transaction's next operation instead; backends check first.
type TransactionOptions interface {
	// SetTimeout cancels the transaction, with ErrTransactionTimedOut, once d
	// has elapsed since it was created; the time spent in retries counts.
	// Zero disables the timeout. Maps onto the FDB option "timeout". (On
	// FDB, a retry after cluster_version_changed, when the multi-version
	// client switches client library, starts a new transaction: its
	// timeout counts from then, and it does not count toward the retry
	// limit; MultiVersionTransaction::onError.)
	SetTimeout(d time.Duration) error
	// SetRetryLimit makes OnError return the error once n retries have been
	// made; -1 means no limit. Maps onto "retry_limit".
	SetRetryLimit(n int) error
	// SetMaxRetryDelay caps OnError's backoff. Maps onto "max_retry_delay".
	// On FDB the cap is not absolute (Transaction::getBackoff,
	// fdbclient/NativeAPI.actor.cpp): a transaction's first backoff is the
	// initial one (up to 10 ms); after tag_throttled a backoff may last
	// as long as the throttle (up to 5 s); and after
	// commit_proxy_memory_limit_exceeded or grv_proxy_memory_limit_exceeded
	// the backoff grows past it, up to 30 s.
	SetMaxRetryDelay(d time.Duration) error
}

// ReadTransaction reads from a consistent view of the database. A
// Transaction and its Snapshot are both ReadTransactions.
type ReadTransaction interface {
	// Get reads one key. A normal read adds the read conflict range
	// [key, key+\x00); a snapshot read adds none.
	Get(key []byte) FutureValue
	// GetRange reads the keys in r. As with FDB's binding, the first batch
	// is issued when GetRange is called, and Commit waits for it: its read
	// conflict range counts even if the result is never consumed. Further
	// batches are read as the result is consumed; consuming it while the
	// transaction commits fails the read and the commit with
	// ErrUsedDuringCommit (the commit may then have applied). A normal read
	// adds a read conflict range covering what it depended on: with a limit
	// that was reached, only up to and including the last key returned.
	GetRange(r KeyRange, opts RangeOptions) RangeResult
	// GetReadVersion returns the version the transaction reads at,
	// obtaining one if it has none yet. After the commit of a transaction
	// that had none (it only wrote), it is the one the commit obtained,
	// before the commit's version.
	GetReadVersion() FutureInt64
	// Snapshot returns a view of the same transaction whose reads add no
	// read conflict ranges. Snapshot reads still see the transaction's own
	// writes.
	Snapshot() ReadTransaction

	ReadTransactor
}

// Transaction is a handle to one FDB-style transaction: reads at one read
// version plus the transaction's own writes, writes buffered until Commit.
//
// Writes never return errors directly: an invalid write (a key or value
// over the limits, a key in the system key space) puts the transaction in an
// error state reported by the next read and by Commit, as FDB does.
//
// A Transaction may be used by several goroutines at once, but a caller must
// not write while a Commit is in progress.
type Transaction interface {
	ReadTransaction
	Transactor

	// Set writes value at key. It keeps neither slice: the caller may
	// modify or reuse key and value once Set returns. FoundationDB's
	// client copies both before Set returns (ThreadSafeTransaction::set,
	// fdbclient/ThreadSafeTransaction.cpp, makes a Key and a Value of
	// them for the network thread; cgo also forbids C code to keep Go
	// memory past the call), and every backend and wrapper must do the
	// same: the layers above reuse their buffers.
	Set(key, value []byte)
	// Clear removes key.
	Clear(key []byte)
	// ClearRange removes every key in r.
	ClearRange(r KeyRange)

	// Add adds param to the value at key, both little-endian two's
	// complement integers; param's length sets the width, a missing key
	// counts as zero. Like every atomic op, it adds no read conflict.
	Add(key, param []byte)
	// Max stores the larger of the value at key and param, as unsigned
	// little-endian integers. As for Add, and for Min, BitAnd, BitOr and
	// BitXor, param's length sets the result's: a longer value is cut to
	// it, a shorter one is extended with zero bytes; an empty param
	// stores an empty value.
	Max(key, param []byte)
	// Min stores the smaller of the value at key and param, as unsigned
	// little-endian integers; a missing key takes param (an empty value
	// counts as zero).
	Min(key, param []byte)
	// BitAnd stores the bitwise AND of the value at key and param; a
	// missing key takes param (an empty value counts as zero).
	BitAnd(key, param []byte)
	// BitOr stores the bitwise OR of the value at key and param.
	BitOr(key, param []byte)
	// BitXor stores the bitwise XOR of the value at key and param.
	BitXor(key, param []byte)
	// ByteMin stores the lexicographically smaller of the value and param.
	ByteMin(key, param []byte)
	// ByteMax stores the lexicographically larger of the value and param.
	ByteMax(key, param []byte)
	// AppendIfFits appends param to the value if the result fits the value
	// size limit.
	AppendIfFits(key, param []byte)
	// CompareAndClear clears key if its value equals param.
	CompareAndClear(key, param []byte)
	// SetVersionstampedKey sets value at key after replacing 10 bytes of key
	// with the commit's versionstamp. The last 4 bytes of key are a
	// little-endian offset of those 10 bytes and are removed. As Set, it
	// keeps neither slice (FDB's client copies both: it is an atomic op,
	// and ThreadSafeTransaction::atomicOp copies its key and parameter).
	SetVersionstampedKey(key, value []byte)
	// SetVersionstampedValue sets value at key after replacing 10 bytes of
	// value, at the little-endian offset in its last 4 bytes, with the
	// versionstamp; the offset bytes are removed.
	SetVersionstampedValue(key, value []byte)

	// AddReadConflictRange adds r to the transaction's read conflict ranges.
	// It returns only ErrInvertedRange; other errors (a range reaching into
	// \xff: ErrKeyOutsideLegalRange) are deferred to the next read and to
	// Commit, as FDB's client defers them.
	AddReadConflictRange(r KeyRange) error
	// AddReadConflictKey adds [key, key+\x00) to the read conflict ranges.
	AddReadConflictKey(key []byte) error
	// AddWriteConflictRange adds r to the write conflict ranges; errors as
	// for AddReadConflictRange.
	AddWriteConflictRange(r KeyRange) error
	// AddWriteConflictKey adds [key, key+\x00) to the write conflict ranges.
	AddWriteConflictKey(key []byte) error

	// Watch returns a watch on key that is registered when the transaction
	// commits; if the commit fails, the watch fails with that error, and if
	// the transaction is cancelled before its commit is sent (Cancel, its
	// context, an OnError that gives up), with transaction_cancelled (or
	// the timeout's error). FDB's own client leaves such a watch pending
	// once it has read its key, until its transaction is reset or
	// destroyed; backends fail it (see fdbkv). As in
	// FDB, Watch reads key with a normal read (a read conflict range, so a
	// writing transaction whose watched key changed after its read version
	// fails with ErrNotCommitted), and the watch fires at once if the
	// transaction itself then changes the key's value. Once registered, it
	// fires when the key's value differs from the one that read saw (the
	// transaction's own write made before Watch, else the value at its
	// read version); a change and back (ABA) may go unreported.
	Watch(key []byte) Watch

	// Commit tries to commit the transaction's writes. On success the
	// writes are durable and visible to every transaction started later. On
	// error, pass the error to OnError. ErrCommitUnknownResult means the
	// writes may or may not have been applied.
	Commit() error
	// OnError decides what to do with an error from the transaction: if it
	// is retryable it resets the transaction, waits a backoff (exponential
	// with jitter, capped) and returns nil so the caller runs its function
	// again; otherwise it returns the error. It honours the retry limit and
	// timeout options. When it returns an FDB error (not retryable, or the
	// retry limit reached) it leaves the transaction cancelled until Reset,
	// as FDB does from API version 610; an error without an FDB code comes
	// back unchanged and leaves the transaction as it was. A Reset while
	// it backs off makes it return ErrTransactionCancelled at once.
	// ErrClusterVersionChanged only FDB's multi-version client reports, and
	// its OnError retries it at once whatever the retry limit, restarting
	// the retry count and the timeout (memdb does the same); a client that
	// bypasses it returns it.
	OnError(err error) error
	// Reset returns the transaction to its initial state: its writes, reads,
	// read version, error state, retry count and options (timeout, retry
	// limit, max retry delay) are all cleared, as by FDB's reset. Set the
	// options again after Reset; OnError, unlike Reset, keeps them.
	Reset()
	// Cancel makes every pending and future operation fail with
	// ErrTransactionCancelled. A Commit already sent may still apply.
	Cancel()

	// GetCommittedVersion returns the version at which the transaction's
	// last successful Commit applied: -1 if that commit was read-only or
	// none succeeded yet. As FoundationDB's, Reset and OnError keep it.
	GetCommittedVersion() (int64, error)
	// GetVersionstamp returns the versionstamp the transaction's commit will
	// use. Call it before Commit; its Get blocks until the commit completes.
	GetVersionstamp() FutureVersionstamp
	// GetApproximateSize returns the approximate size of the commit request
	// so far (mutations and conflict ranges), to stay under the limits.
	GetApproximateSize() FutureInt64
	// Options sets per-transaction options.
	Options() TransactionOptions
}

// ReadTransactor runs read-only transactional functions. A Database, a
// Transaction and a Snapshot are all ReadTransactors.
type ReadTransactor interface {
	// ReadTransact runs fn with a ReadTransaction. On a database it creates
	// a transaction, runs fn and retries retryable errors; on a transaction
	// it runs fn inside that transaction and does not retry.
	ReadTransact(ctx context.Context, fn func(ReadTransaction) error) error
}

// Transactor runs transactional functions. A Database and a Transaction are
// both Transactors, which is what lets layers compose: a layer function takes
// a Transactor and calls Transact; called with a Database, Transact creates a
// transaction, commits it and retries; called with a Transaction, it just
// runs inside it and leaves committing to the caller.
type Transactor interface {
	// Transact runs fn as described above. On a Database, when ctx ends the
	// transaction is cancelled and Transact returns an error that matches
	// ctx.Err() with errors.Is (and also the transaction's error, if any).
	Transact(ctx context.Context, fn func(Transaction) error) error

	ReadTransactor
}

// Database is a handle to a key-value store with FoundationDB's transaction
// semantics. It is safe for concurrent use.
type Database interface {
	Transactor
	// CreateTransaction starts a transaction bound to ctx: when ctx ends,
	// the transaction is cancelled. Most code should use Transact instead.
	CreateTransaction(ctx context.Context) (Transaction, error)
}
