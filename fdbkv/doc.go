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
// before any other call. Either select it yourself and call Open:
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
// An application that already has an fdb.Database uses Wrap, and one that
// wants fdbqueue's layers to run inside its own fdb.Transaction (together
// with its own reads and writes, committed or retried by its own loop) uses
// WrapTransaction.
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
// (fdb.Transaction.Cancel) when ctx ends. A commit that was in flight when
// the transaction was cancelled or timed out may still have been applied:
// its error is marked with kv.CommitInterrupted, so kv.MaybeCommitted reports
// it, as it does commit_unknown_result (1021).
//
// # Errors
//
// Every error the binding returns goes through one function, which turns an
// fdb.Error into an error that keeps its numeric code and matches the kv
// sentinels: errors.Is(err, kv.ErrNotCommitted), errors.As(err, &kvErr) with
// a kv.Error, and still errors.As(err, &fdbErr) with an fdb.Error.
//
// # Mapping onto the binding
//
// Every kv method is one call of the binding (t is an fdb.Transaction, s
// its fdb.Snapshot, d the fdb.Database, k the key as fdb.Key, r the range as
// fdb.KeyRange):
//
//	kv method                                 binding call
//	----------------------------------------  ---------------------------------------------------
//	Open / OpenWithAPIVersion                 fdb.GetAPIVersion / fdb.APIVersion, fdb.OpenDatabase
//	Database.Close                            d.Close (when the last Open of that cluster file closes)
//	Database.CreateTransaction(ctx)           d.CreateTransaction; t.Cancel when ctx ends
//	Database.Transact / ReadTransact          kv.RetryLoop / kv.ReadRetryLoop over the above
//	Transaction.Transact / ReadTransact       runs fn inside t (as t.Transact does)
//	Get                                       t.Get(k).Get
//	GetRange(r, opts).GetSlice                t.GetRange(r, o).GetSliceWithError
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
//	Reset / Cancel                            t.Reset / t.Cancel
//	GetCommittedVersion                       t.GetCommittedVersion
//	GetVersionstamp                           t.GetVersionstamp().Get
//	GetApproximateSize                        t.GetApproximateSize().Get
//	Options().SetTimeout(d)                   t.Options().SetTimeout(ms)
//	Options().SetRetryLimit(n)                t.Options().SetRetryLimit(n)
//	Options().SetMaxRetryDelay(d)             t.Options().SetMaxRetryDelay(ms)
//
// kv.StreamingMode maps onto fdb.StreamingModeIterator, WantAll and Exact;
// Exact without a Limit (an error in FDB) is sent as WantAll, since kv's
// mode is only a hint. Durations become whole milliseconds, rounded up below
// 1 ms and capped at FDB's maximum (about 24.8 days).
//
// # Testing
//
// The tests run kvtest's conformance suite against a real cluster named by
// the FDB_CLUSTER_FILE environment variable, under a random key prefix that
// is cleared afterwards; without it they skip. `make integration` starts a
// throwaway local fdbserver and runs them; `make fdbkv-check` only compiles
// and links them against a stub libfdb_c (internal/fdbcstub).
package fdbkv
