// Package memdb is an embedded, pure-Go key-value engine with
// FoundationDB's transaction semantics. It implements kv.Database, so every
// fdbqueue layer runs on it unchanged; the layers are tested on it, which
// makes its fidelity to FoundationDB their correctness. It is a real
// engine, not a mock: transactions run concurrently, read from
// multi-version storage, and really conflict at commit.
//
//	db := memdb.New()
//	defer db.Close()
//	err := db.Transact(ctx, func(tr kv.Transaction) error {
//		tr.Set([]byte("hello"), []byte("world"))
//		return nil
//	})
//
// A DB is safe for concurrent use by many goroutines; so is a transaction,
// except that nothing may be written to it while its Commit is in flight.
//
// # What is reproduced from FoundationDB
//
// Every rule of FoundationDB's transactions that the layers rely on:
//
//   - Multi-version storage (a github.com/tidwall/btree of keys, each with
//     its versions). A transaction obtains a read version on its first read
//     (or GetReadVersion): the latest committed version. All its reads see
//     the database as of that version.
//   - Versions advance as FDB's: each commit takes
//     max(previous+1, microseconds since New + 1), so versions grow by at
//     least one per commit and by about 1,000,000 per second of the clock,
//     and version distance approximates time. With no commit for 2 s, a
//     read version moves the version up to the clock's, as FDB's empty
//     commit batches (MAX_COMMIT_BATCH_INTERVAL) do: read versions of an
//     idle database advance too.
//   - Read-your-writes: reads see the transaction's own buffered Set, Clear,
//     ClearRange and atomic operations, including range reads that
//     interleave database keys with the transaction's writes, forwards and
//     in reverse, with limits. Snapshot reads see them too.
//   - Optimistic concurrency: at commit, a resolver checks the read conflict
//     ranges against the write conflict ranges of every transaction
//     committed after the read version (it keeps, per key range, the last
//     version that wrote it: for a stored key written by itself, on the
//     key's store entry; for ranges and keys not stored, in a history of
//     ranges) and fails the commit with not_committed (1020) on overlap. Write/write overlap alone never conflicts. Read-only
//     transactions always commit. No lock is held across a transaction:
//     only the commit step itself (resolve, apply, publish) is serialised,
//     so committed transactions are strictly serialisable in version order.
//   - Conflict ranges: a read of k adds [k, k+\x00); a range read adds what
//     it depended on: with a limit that was reached, [begin, last+\x00)
//     forwards or [last, end) in reverse, otherwise the whole range; a range
//     streamed with an iterator covers what the iterator fetched. Snapshot
//     reads add none. Keys the transaction wrote itself (Set, Clear,
//     ClearRange) add no read conflict when read, and AddReadConflictRange
//     skips them; a key with pending atomic operations does conflict when
//     read, since its value depends on the database. Set, Clear, ClearRange
//     and every atomic operation add write conflict ranges; atomic operations
//     add no read conflict, so two transactions adding to one counter never
//     conflict. AddReadConflictRange/Key and AddWriteConflictRange/Key add
//     ranges explicitly (a transaction with only write conflict ranges is
//     not read-only).
//   - Atomic operations with FDB's exact algorithms (fdbclient/include/fdbclient/Atomic.h, as
//     of API version 510): Add (little-endian two's complement, the
//     operand's length sets the width, a missing key counts as zero), Max,
//     Min (a missing key takes the operand), BitAnd (likewise), BitOr,
//     BitXor, ByteMin, ByteMax, AppendIfFits and CompareAndClear. As in
//     FDB's write map (WriteMap::coalesceOver), an operation merges into
//     the key's previous one of the same type (for Add, BitOr, BitXor, Max
//     and Min, of the same operand length; never CompareAndClear), so the
//     commit holds one operation, which counts once toward the size limit.
//   - Versionstamps: 10 bytes, the 8-byte big-endian commit version and a
//     2-byte big-endian batch order (always 0: each commit is its own batch),
//     so they increase strictly from commit to commit.
//     SetVersionstampedKey/Value take the little-endian offset in their last
//     4 bytes (an offset past the end puts the transaction in the
//     client_invalid_operation error state). GetVersionstamp's future is
//     resolved when the commit completes; it fails with
//     transaction_invalid_version (2020) if the commit failed, whatever its
//     error, or no_commit_version (2021) if the transaction wrote nothing.
//     As in FDB, a read of the transaction's own that reaches the range a
//     versionstamped key may land in (getVersionstampKeyRange: the
//     template with the read version, or 0, up to the template with ten
//     0xff bytes) fails with accessed_unreadable (1036), as does reading a
//     key whose value is versionstamped; reads that stop short succeed.
//     A later clear makes the part of that range it covers readable, and
//     drops the versionstamped key if it covers the argument with the
//     read version's stamp placed (where FDB's write map holds the write);
//     otherwise the key is written even if the clear covers it (FDB sends
//     clears before atomic operations).
//   - Watches: Watch(k) fails first with the transaction's error, then
//     with key_outside_legal_range for a key under \xff (the metadata
//     version key excepted) or key_too_large, as FDB's does. It reads k with
//     a normal read (so a watching transaction that writes conflicts when
//     k changed after its read version; the read's error fails the watch;
//     a Commit issued meanwhile waits for the watch), and fires at once
//     when the transaction itself then changes k's value (an atomic
//     operation on k, or a versionstamped key whose write FDB records at
//     k, always fires it). It is registered when its transaction commits
//     (read-only ones included), with the value its read saw as reference
//     (the transaction's own write made before the watch, else the value
//     at its read version). It fires when a later commit makes k's value
//     differ from the reference; if the value already differs when the
//     watch is registered, it fires at once, so no change after the read
//     is missed. Writing the same value does not fire it. A failed commit
//     fails its watches with the commit's error; Reset and Cancel of an
//     uncommitted transaction fail them with transaction_cancelled. At
//     most WithMaxWatches (10,000) watches are outstanding; past that
//     Watch fails with too_many_watches (1032).
//   - Limits: keys over 10,000 bytes (key_too_large), values over 100,000
//     (value_too_large), transactions over 10,000,000 bytes of mutations and
//     conflict ranges counted as FDB counts them (transaction_too_large, at
//     commit: ~3×key + value per Set, a Clear's range twice, a key
//     written inside a cleared range splitting its ClearRange mutation,
//     repeated Sets of a key and repeated reads merged; GetApproximateSize
//     reports FDB's call-by-call approximateSize), writes to keys at
//     or after \xff (key_outside_legal_range, tested before the key size),
//     range reads reaching above \xff (key_outside_legal_range, tested
//     first), conflict ranges reaching above \xff (the error is deferred to
//     the next read and Commit, as FDB's client defers it), cleared or conflict ranges
//     whose begin is after their end (inverted_range; a range read of such a
//     range returns no pairs, as FDB's does). As in FDB, writes return no error: the
//     transaction enters an error state that every later read and Commit
//     report. Reads of keys longer than the limit find nothing (no such key
//     can exist) and range bounds longer than it are shortened.
//   - transaction_too_old (1007): a read or commit more than the MVCC window
//     (WithMVCCWindow, 5 s) after the read version was obtained, measured on
//     the DB's Clock so that tests use a ManualClock instead of sleeping; or
//     whose read version is more than a window's worth of versions (one per
//     microsecond) behind the latest, as FDB's window is really 5,000,000
//     versions. A transaction that never read has no read version and never
//     expires.
//
// # What is not reproduced
//
//   - Durability: everything lives in memory and is gone after Close.
//   - More than one process: the database is private to its DB value; there
//     is no network, no cluster file, no recovery, no data distribution,
//     shards or storage servers, no ratekeeper or throttling (so no
//     process_behind, future_version, grv_proxy_memory_limit_exceeded or
//     tag_throttled unless a test injects them: Faults.ReadErrors,
//     Faults.ReadVersionErrors, FailNextRead, FailNextReadVersion,
//     FailNextCommit).
//   - Key selectors, the system key space (\xff) apart from the metadata
//     version key, special keys, tenants, locality and estimated range
//     sizes. The metadata version key (kv.MetadataVersionKey) is read with
//     Get, written with SetVersionstampedValue and watched, as in FDB, and
//     a range read of it fails with key_outside_legal_range as in FDB
//     without the system-key options.
//   - Transaction options other than timeout, retry_limit and
//     max_retry_delay (no automatic idempotency, no causal_read_risky, no
//     priorities, no read_your_writes_disable, no snapshot_ryw_disable).
//   - Commit batching: every commit is alone in its batch (batch order 0).
//   - A read cache: FDB's read-your-writes layer answers a repeated read,
//     and a read of a range the transaction cleared, without a storage
//     server (RYWIterator, fdbclient/); memdb reads the store again (the
//     same answer), so an injected read fault, or the end of the MVCC
//     window (transaction_too_old), may fail a read FDB would answer, and
//     a read of a range the transaction cleared obtains the read version
//     if it has none, where FDB's obtains none.
//   - Stacked writes: FDB's write map keeps every Set of a key that is
//     unreadable (it has a versionstamped value, or lies in a
//     versionstamped key's range) and sends them all (WriteMap::mutate,
//     fdbclient/WriteMap.cpp); memdb keeps the last, so such a transaction
//     counts fewer bytes toward the size limit than on FDB. The values
//     committed are the same.
//   - causal_write_risky: FDB's client makes a writing commit without it
//     self-conflicting (a read and a write conflict range on a random
//     \xff/SC/ key), which memdb does not add to the commit; it only
//     counts that such a commit has a read conflict range, so that it is
//     too old past the MVCC window.
//   - Watches never fire spuriously on their own (FDB's may).
//
// # Fault injection
//
// Faults (WithFaults, SetFaults) gives per-commit-attempt probabilities of
// not_committed, commit_unknown_result that was applied, one that was not,
// the same two as cluster_version_changed (1039), transaction_too_old, and
// extra commit latency, and the chance that a commit interrupted in flight
// lands after Commit returned (LateLanding; HoldNextCommitLate does it for
// one commit). Only commits of
// transactions that write are affected; read-only commits never fail.
// ReadErrors and ReadVersionErrors are per-read and per-read-version-request
// probabilities of the errors a client's reads surface (transaction_too_old,
// future_version, process_behind) and of those a GRV proxy answers
// (grv_proxy_memory_limit_exceeded, database_locked); FailNextRead and
// FailNextReadVersion inject one, FailReadAfter and FailReadVersionAfter
// one a given number of draws ahead (a test can make each read of an
// operation fail in turn). As in FDB, a failed read fails the
// transaction's Commit too, and a failed read version request every later
// read and the commit of its writes, until OnError or Reset; see Faults.
// FailNextCommit makes the next commit (of any transaction) fail with a
// chosen error, applied or not, once; HoldNextCommit holds the next commit
// in flight until released, for tests, and HoldNextReadVersion (with a
// latency model) the next read version request, so that commits made
// meanwhile are in the version it gets. All randomness comes from one
// generator seeded by WithSeed (default 1), so a single-goroutine run is
// reproducible; with several goroutines, the draws are shared in whatever
// order the goroutines reach them. Injected failures are counted apart from
// real ones in Stats.
//
// # Latency model
//
// By default nothing waits: reads and commits complete inline, and the fast
// path starts no goroutines. WithLatency(RealCluster) (or any Latency) makes
// the first read of a transaction wait a GRV delay, each read (a point read,
// or one batch of a range read) a read delay, and each commit a commit
// delay, drawn uniformly from their Span with the seeded generator and slept
// in real time. A transaction that writes without a read version (it never
// read, nor called GetReadVersion: a blind write) waits a GRV delay at
// commit before the commit delay, as FDB's client then obtains a read
// version (NativeAPI commitMutations, with FLAG_CAUSAL_READ_RISKY) before
// sending the commit; the commit is resolved at that read version. If a read
// version request is already in flight (a read was issued but has not been
// answered), the commit waits for that one instead. Nothing has been sent if
// this wait is cancelled, so the commit then fails with the cancellation's
// error, not kv.CommitInterrupted. Read-only commits wait nothing. A range
// read's first batch is read when GetRange is called (in its own goroutine
// under a latency model), as FDB's binding issues it then; later batches as
// the result is consumed. Commit first waits for the reads in flight (FDB's
// commit waits for them too), already started: a read or write issued
// while it waits fails with used_during_commit, and so do the reads it
// waits for and the commit, having sent nothing; one issued while the
// commit is in flight fails the commit with
// kv.CommitInterrupted(kv.ErrUsedDuringCommit), as FDB's
// checkUsedDuringCommit does. Point reads then resolve in their own
// goroutine, so futures issued together overlap their latency, as with FDB.
// A commit is resolved and applied at the end of its delay, so transactions
// that start meanwhile read the old state and conflict: a hot key then
// sustains about one commit per commit latency, as on a real cluster.
// Cancelling a transaction (Cancel, its context, its timeout, Close)
// interrupts its waits.
//
// # Statistics
//
// Stats returns counters (transactions, commits, read-only commits,
// conflicts, retries, too-old errors, injected faults of each kind,
// interrupted commits, reads) and live sizes (outstanding watches, commits
// in flight, keys, stored versions, conflict history, GC queue, latest and
// oldest versions). See Stats for each field. Tests use them to check, for
// example, that a workload did conflict or that memory stays bounded.
//
// # Transaction lifetime, retries and commit_unknown_result
//
// CreateTransaction(ctx) binds a transaction to ctx with context.AfterFunc:
// when ctx ends the transaction is cancelled (transaction_cancelled, 1025),
// pending waits abort, and Reset cannot revive it. The binding is released
// when ctx ends; Transact and ReadTransact release it as soon as they
// return. Transact creates a transaction bound to ctx and runs kv.RetryLoop
// (ReadTransact runs kv.ReadRetryLoop); backends never retry on their own.
//
// OnError is the backoff: for a retryable error (kv.IsRetryable) it waits
// a random delay (full jitter) up to the current backoff, which starts at
// 10 ms and doubles up to 1 s (WithBackoff changes both; SetMaxRetryDelay
// caps it per transaction), or a fixed 10 ms (under that cap) after
// transaction_too_old and future_version, as FDB's does, honouring
// cancellation, then resets the transaction and returns nil. Any other
// error is returned unchanged, as is a retryable one once SetRetryLimit's
// limit is reached (but cluster_version_changed, which FDB's multi-version
// client retries at once on a new transaction, restarting the retry count
// and the timeout: MultiVersionTransaction::onError); on a transaction already cancelled, an FDB error gets
// the cancellation's instead (RYWImpl::onError, fdbclient/
// ReadYourWrites.actor.cpp), an error without an FDB code still comes
// back unchanged. Backoff sleeps use real time, not the Clock. Options
// survive OnError's reset; Reset clears them, as FDB's does, and restarts
// the retry count. SetTimeout cancels the transaction with
// transaction_timed_out once its time has
// passed since creation (or Reset), in real time or on the Clock,
// whichever comes first (with a Clock other than the default, the real
// time counts from the first SetTimeout).
//
// A commit that is in flight (waiting out its commit latency) when the
// transaction is cancelled or times out returns
// kv.CommitInterrupted(kv.ErrTransactionCancelled or
// kv.ErrTransactionTimedOut): like a real cluster's, it may or may not have
// been applied, decided with the seeded generator (even odds);
// kv.MaybeCommitted reports true for it. commit_unknown_result (1021),
// injected by Faults or FailNextCommit, likewise may or may not have been
// applied, and Transact retries it: a transactional function that is not
// idempotent may take effect twice. Such a commit is decided before Commit
// returns, since FDB's client reports commit_unknown_result only once a
// conflicting dummy transaction has committed (commitDummyTransaction in
// fdbclient/NativeAPI.actor.cpp); only an interrupted commit, which skips
// that, can land later (Faults.LateLanding). After a successful Commit the
// transaction only answers GetCommittedVersion and GetVersionstamp; other
// operations fail with used_during_commit (2017) until Reset.
//
// # Garbage collection
//
// Each commit advances a horizon: the oldest read version of a
// transaction that may still read or commit at it (one that has neither
// committed nor been reset), or the latest version if there is none, but
// never older than the MVCC window allows (by clock and by version
// distance: older transactions fail with transaction_too_old anyway). A
// transaction abandoned without Commit or Reset (ReadTransact's, for
// one) holds the horizon back for at most the window. Versions older than
// a key's newest one at or below the horizon are dropped, keys whose
// newest entry there is a tombstone (and whose last write is at or below
// the horizon) are removed, and the resolver's history at or below the
// horizon is folded away, so memory stays proportional to the live data
// plus the writes since the oldest open read version (at most the
// window's).
//
// # Performance
//
// An uncontended transaction that reads one key and writes it
// (BenchmarkTransactReadWrite) costs about 0.42 µs of CPU and 3 allocations
// on one core of a shared 2-core AMD EPYC VM (Go 1.26), i.e. over 2 million
// transactions per second: one map lookup (the read; the commit reuses the
// chain it found), no resolver update, two monotonic clock reads (each a
// time.Since of the DB's start), six mutex round trips (the transaction's
// for the read, the write and the commit, the read version registry's at the
// read and the commit, the DB's for the commit) and one shared lock (the
// read). Much of the rest is allocation, mostly of the 512-byte transaction.
// Versions that no open transaction can read are collected at the next
// commit (see Garbage collection), so the live heap, which the Go garbage
// collector scans, holds the data plus what open transactions still need,
// not 5 seconds of writes.
//
// Range reads and range conflict checks do not walk the tombstones that
// the window may keep (a queue clears keys at its head all the time): besides
// the B-tree of every key, the store keeps a B-tree of the keys that have a
// value and a treap of the others augmented with each subtree's newest
// write (as FoundationDB's resolver keeps a skip list with per-node
// maximum versions), so a range read costs about the keys it returns plus
// O(log n) per key of its range cleared after its read version, however
// many keys were cleared elsewhere (BenchmarkClearsAfterReadVersion). The
// resolver keeps its boundary points in sorted chunks, each with the
// newest version written in it, so a conflict check skips the chunks
// written at or before its read version and costs the same at 10 or
// 100,000 recorded clears (BenchmarkResolverConflicts). The
// indexes cost a commit one more B-tree insertion when a key gets a value
// and a B-tree deletion and a treap insertion when it is cleared;
// overwriting a value costs nothing more. `make bench` prints the layer's
// operations as multiples of the read-one-write-one transaction.
package memdb
