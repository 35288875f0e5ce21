// Package kv is the small, FoundationDB-shaped transaction interface that
// fdbqueue's layers are written against. Backends implement it: memdb (an
// embedded engine, pure Go) and fdbkv (the official FoundationDB binding, in
// its own module). Applications use a backend's Database and this package's
// Transact helpers; they rarely implement anything here.
//
// Every method maps onto one call of FoundationDB's Go binding
// (github.com/apple/foundationdb/bindings/go/src/fdb), so that the adapter
// stays thin and FDB users find what they know.
//
// # Transactors and composition
//
// A Database and a Transaction are both Transactors. A transactional function
// takes a Transactor and calls its Transact method: on a Database this creates
// a transaction, runs the function, commits and retries; on a Transaction it
// just runs the function inside it and leaves committing to whoever created
// the transaction. This is how a queue operation joins the caller's own
// transaction together with the caller's other writes.
//
// # Retries
//
// Backends never retry on their own. The one retry loop is RetryLoop: it runs
// the function, commits, and passes any error to Transaction.OnError, which
// decides from the error's code (IsRetryable) whether to back off and run the
// function again. The classification is FoundationDB's own
// (fdb_error_predicate in bindings/c/fdb_c.cpp): retried are the errors
// whose commit may have applied, commit_unknown_result (1021) and
// cluster_version_changed (1039), and those that certainly did not commit:
// not_committed (1020), transaction_too_old (1007), future_version (1009),
// database_locked (1038), the GRV and commit proxy memory limits (1078,
// 1042), batch_transaction_throttled (1051), process_behind (1037),
// tag_throttled (1213), proxy_tag_throttled (1223, FDB 7.3), and on FDB
// 7.4 and later transaction_throttled_hot_shard (1235) and
// transaction_rejected_range_locked (1242).
//
// # Transaction lifetime
//
// A transaction reads at one read version, obtained at its first read, and
// must commit within five seconds of it (transaction_too_old otherwise). Its
// writes are buffered and visible to its own reads (read-your-writes) until
// Commit sends them. Commit is optimistic: it fails with not_committed when
// another transaction, committed after this one's read version, wrote a key
// in one of this one's read conflict ranges. Snapshot reads add no read
// conflict ranges; atomic operations add none either.
//
// # Commit unknown result
//
// commit_unknown_result (ErrCommitUnknownResult) and cluster_version_changed
// (ErrClusterVersionChanged) mean the commit may or may not have been
// applied. The standard loop retries them, so a function run
// through Database.Transact may take effect twice unless it detects its own
// earlier success. A commit interrupted by context cancellation or a timeout
// is equally uncertain; MaybeCommitted reports both cases. fdbqueue's layers
// handle this with operation IDs; see the root package's documentation.
//
// # Errors
//
// Errors carry FDB's numeric codes as Error values. Test them with errors.Is
// against the sentinels (ErrNotCommitted, ...) or errors.As into an Error.
package kv
