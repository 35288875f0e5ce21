// Package fdbkv implements fdbqueue's kv interfaces over a real FoundationDB
// cluster, through FoundationDB's official Go binding
// (github.com/apple/foundationdb/bindings/go/src/fdb).
//
// It is its own Go module because the binding uses cgo and needs FoundationDB's
// C client library, libfdb_c, and its header fdb_c.h to build and to run.
// The root module (the layers, kv, kvtest and the embedded memdb engine)
// never imports it, so applications that do not use FoundationDB need
// neither cgo nor libfdb_c.
//
// # Opening a database
//
// The binding needs a FoundationDB API version selected once per process
// before any other call; Open returns an *APIVersionError until one is.
// Either select it yourself and call Open:
//
//	if err := fdb.APIVersion(730); err != nil { ... }
//	db, err := fdbkv.Open("") // "" means the default cluster file
//
// or let OpenWithAPIVersion do both:
//
//	db, err := fdbkv.OpenWithAPIVersion(730, "/etc/foundationdb/fdb.cluster")
//
// fdbkv needs API version MinAPIVersion (710) or later; see MinAPIVersion for
// the features that set that floor. An older or missing version is reported
// as an *APIVersionError before any call into libfdb_c. The binding declares
// API version 730, so the installed libfdb_c must be 7.3 or later.
//
// # Who owns the database handle
//
//   - Open and OpenWithAPIVersion make a handle that belongs to the
//     returned Database alone; its Close destroys it. They do not use
//     fdb.OpenDatabase, whose handles are cached and shared per cluster file
//     (so closing one closes them all): they read the cluster file and open
//     the cluster with fdb.OpenWithConnectionString. See Open for what that
//     changes.
//   - Wrap takes a handle the application opened and keeps owning: Close of
//     the Database never closes it; the application closes it after its
//     last use.
//   - After Close, CreateTransaction, Transact and ReadTransact return
//     ErrClosed; transactions created before stay usable. FDB then returns
//     the zero fdb.Database for a handle Open made (never the destroyed
//     one); a handle it returned before Close must not be used after it.
//
// An application that already has an fdb.Database uses Wrap, and one that
// wants fdbqueue's layers to run inside its own fdb.Transaction (together
// with its own reads and writes, committed or retried by its own loop) uses
// WrapTransaction. In the binding's own retry loop (fdb.Database.Transact),
// give every queue operation an ID made once outside the loop, so that a
// retry after commit_unknown_result (1021) does not apply it twice:
//
//	id := fdbqueue.NewOpID() // once per logical operation
//	_, err := fdbDB.Transact(func(tr fdb.Transaction) (any, error) {
//		tr.Set(orderKey, order)
//		return nil, q.Enqueue(ctx, fdbkv.WrapTransaction(tr), item, fdbqueue.WithOpID(id))
//	})
//
// The layers rely on read-your-writes, snapshot reads included: a second
// operation in a transaction finds the first one's items and journal
// records, and a second call under one OpID finds the first one's marker
// and fails. Do not set the READ_YOUR_WRITES_DISABLE or
// SNAPSHOT_RYW_DISABLE transaction options on a transaction the layers
// run in, nor the snapshot_ryw_disable database option on a database
// they use.
//
// # Transactions, retries and cancellation
//
// Database.Transact and ReadTransact run the caller's function through the
// one shared retry loop, kv.RetryLoop (kv.ReadRetryLoop), over a
// transaction made by CreateTransaction. The loop's decisions come from
// fdb.Transaction.OnError, so backoff, retry_limit, max_retry_delay and
// timeout are FoundationDB's own. fdbkv never retries by itself.
//
// A transaction made by CreateTransaction(ctx) is cancelled
// (fdb.Transaction.Cancel) when ctx ends, and stays cancelled through
// Reset. A transaction already cancelled never sends its commit: Commit
// fails with plain transaction_cancelled (1025). A commit that was sent and
// then failed with transaction_cancelled, transaction_timed_out or
// used_during_commit (2017: a read or write issued while it ran) may still
// have been applied: its error is marked with kv.CommitInterrupted, so
// kv.MaybeCommitted reports it, as it does commit_unknown_result (1021).
// FDB's error does not tell whether the commit was sent, so the mark errs
// on the safe side: a timeout that fired before Commit was called, which
// FDB reports from Commit as transaction_timed_out without sending
// anything, is reported as maybe committed too.
//
// Reset is FDB's: it clears the options set on the transaction (timeout,
// retry limit, max retry delay), which OnError keeps; set them again after
// Reset. The database's transaction defaults (the transaction_timeout,
// transaction_retry_limit and transaction_max_retry_delay database
// options) apply again (ReadYourWritesTransaction::reset,
// fdbclient/ReadYourWrites.actor.cpp).
//
// With external client libraries configured (the multi-version client),
// Cancel does nothing to a transaction while no library has connected to
// the cluster (MultiVersionTransaction::cancel,
// fdbclient/MultiVersionTransaction.actor.cpp): a read issued then waits
// past its ctx until a library connects. The transaction_timeout database
// option (or kv's SetTimeout) bounds such reads; the commit is safe either
// way, since a transaction whose ctx ended never sends it.
//
// OnError of a transaction cancelled by Cancel or its ctx fails with
// transaction_cancelled, whatever the error (or with transaction_timed_out
// or used_during_commit if one of those had failed the transaction first:
// RYWImpl::onError throws the first error set), and leaves it cancelled,
// as FDB's own OnError does, but for one case fdbkv closes: under the
// multi-version client, FDB answers cluster_version_changed (1039) by
// replacing the transaction with a new one, not cancelled, and retrying
// (MultiVersionTransaction::onError).
//
// A watch dropped without Cancel is cancelled once the garbage collector
// finds it unreachable; cancel watches you no longer need all the same.
// Once a watch has read its key, FDB fails it, if its transaction does not
// commit, only when the native commit fails or the transaction is reset or
// destroyed (commitAndWatch, Transaction::resetImpl, NativeAPI.actor.cpp),
// and a pending watch keeps its transaction alive. fdbkv keeps kv's
// promise itself: the watches of an attempt fail when the transaction is
// cancelled (Cancel, its ctx, an OnError that gives up) before a commit
// was sent, with transaction_cancelled (or the timeout's error), and when
// its commit fails, with the commit's error, also if FDB failed the commit
// before its native commit ran (an invalid write, a failed read, a
// timeout). Only one made by an attempt that returned an error without an
// FDB code (which the loop neither retries nor resets) waits until Wait's
// ctx ends or Cancel is called. fdbkv sees the commit and the cancellation
// only through its own Commit, Cancel, OnError and Reset: the watches of a
// WrapTransaction committed, retried or cancelled by the application's own
// fdb.Transaction behave as FDB's do. A watch that fails with
// cluster_version_changed (1039: the multi-version client switched client
// library, which cancels its watches) fires instead: Wait returns nil, a
// spurious fire that kv.Watch allows, and the caller re-reads and watches
// again.
//
// # Errors
//
// Every error the binding returns goes through one function, which turns an
// fdb.Error of any code into an error that keeps its numeric code and
// matches the kv sentinels: errors.Is(err, kv.ErrNotCommitted),
// errors.As(err, &kvErr) with a kv.Error, and still errors.As(err, &fdbErr)
// with an fdb.Error. fdbkv keeps no table of codes: kv.IsRetryable and
// kv.MaybeCommitted classify an error from FDB exactly as the kv.Error of
// its code.
//
// The binding's own retry loop (fdb.Database.Transact) retries only errors
// whose chain holds an fdb.Error. So Transact and ReadTransact of an fdbkv
// transaction (and of its Snapshot) return an error that carries a kv.Error
// but no fdb.Error, as the layers make for conflicts they detect themselves,
// with an fdb.Error of the same code added to its chain: the binding's loop
// around WrapTransaction retries it as FDB decides for the code, and the
// error keeps its text, its kv code and its own chain.
//
// # Mapping onto the binding
//
// Every kv method is one call of the binding (t is an fdb.Transaction, s
// its fdb.Snapshot, d the fdb.Database, k the key as fdb.Key, r the range as
// fdb.KeyRange):
//
//	kv method                                 binding call
//	----------------------------------------  ---------------------------------------------------
//	Open / OpenWithAPIVersion                 fdb.GetAPIVersion / fdb.APIVersion, fdb.OpenWithConnectionString
//	Database.Close                            d.Close (only for a database made by Open)
//	Database.CreateTransaction(ctx)           d.CreateTransaction; t.Cancel when ctx ends
//	Database.Transact / ReadTransact          kv.RetryLoop / kv.ReadRetryLoop over the above
//	Transaction.Transact / ReadTransact       runs fn inside t (as t.Transact does)
//	Get                                       t.Get(k).Get
//	GetRange(r, opts).GetSlice                t.GetRange(r, o).Iterator: Advance, Get (keeps the mode)
//	GetRange(r, opts).Iterator                t.GetRange(r, o).Iterator: Advance, Get
//	GetReadVersion                            t.GetReadVersion().Get
//	Snapshot().Get / GetRange / ...           s.Get / s.GetRange / s.GetReadVersion
//	Set / Clear / ClearRange                  t.Set / t.Clear / t.ClearRange
//	Add, Max, Min, BitAnd, BitOr, BitXor      t.Add, t.Max, t.Min, t.BitAnd, t.BitOr, t.BitXor
//	ByteMin, ByteMax                          t.ByteMin, t.ByteMax
//	AppendIfFits, CompareAndClear             t.AppendIfFits, t.CompareAndClear
//	SetVersionstampedKey / Value              t.SetVersionstampedKey / t.SetVersionstampedValue
//	AddReadConflictRange / Key                t.AddReadConflictRange / t.AddReadConflictKey
//	AddWriteConflictRange / Key               t.AddWriteConflictRange / t.AddWriteConflictKey
//	Watch(k).Wait(ctx) / Cancel               t.Watch(k): BlockUntilReady (via Get) / Cancel
//	Commit                                    t.Commit().Get
//	OnError(err)                              t.OnError(fdb.Error{Code: code}).Get
//	Reset / Cancel                            t.Reset (then t.Cancel if ctx ended) / t.Cancel
//	GetCommittedVersion                       t.GetCommittedVersion
//	GetVersionstamp                           t.GetVersionstamp().Get
//	GetApproximateSize                        t.GetApproximateSize().Get
//	Options().SetTimeout(d)                   t.Options().SetTimeout(ms)
//	Options().SetRetryLimit(n)                t.Options().SetRetryLimit(n)
//	Options().SetMaxRetryDelay(d)             t.Options().SetMaxRetryDelay(ms)
//
// kv.StreamingMode maps onto fdb.StreamingModeIterator, WantAll and Exact;
// Exact without a Limit (an error in FDB) is sent as WantAll, since kv's
// mode is only a hint. GetSlice keeps the mode for every batch (the
// binding's GetSliceWithError would switch to Exact or WantAll after the
// first). Durations become whole milliseconds: a timeout rounded up (it
// never fires before its duration), a max retry delay truncated but
// rounded up below 1 ms. Option values outside FDB's ranges (a negative
// duration, a timeout or max retry delay over math.MaxInt32 ms, about
// 24.8 days, a retry limit below -1 or over math.MaxInt32) return
// kv.ErrInvalidOptionValue at once, without calling the binding: libfdb_c
// would accept them and fail the transaction's next operation instead
// (ThreadSafeTransaction::setOption defers the error of
// ReadYourWritesTransaction::setOptionImpl).
//
// # Testing
//
// The tests run kvtest's and queuetest's conformance suites against a real
// cluster named by the FDB_CLUSTER_FILE environment variable, under a random
// key prefix that is cleared afterwards; without it they skip. With
// FDBKV_DISABLE_CLIENT_BYPASS set they run through the multi-version
// client, which libfdb_c otherwise bypasses when no external client
// library is configured. `make integration` starts a throwaway local
// fdbserver and runs them; `make fdbkv-check` compiles and links them
// against a stub libfdb_c (internal/fdbcstub) and runs only those that
// need no cluster.
package fdbkv
