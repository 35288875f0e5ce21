// Package fdbqueue provides queue layers for FoundationDB, written against
// the small transaction interface in package kv, so that they run on
// FoundationDB (module fdbkv) or on the embedded engine memdb.
//
// # Getting started
//
// Import this package, package tuple (to name a queue's Subspace) and
// package kv (the transaction interface). The kv.Database comes from
// module github.com/fdbqueue/fdbqueue/fdbkv on FoundationDB
// (fdbkv.OpenWithAPIVersion, or fdbkv.Wrap of an fdb.Database you
// already have; cgo and libfdb_c 7.3 or later), or from memdb.New in
// tests, which needs neither:
//
//	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"myapp", "jobs"})
//	q, err := fdbqueue.NewQueue(sub)
//	err = q.Enqueue(ctx, db, []byte("job 1")) // its own transaction, retried
//	v, err := q.Dequeue(ctx, db)              // ErrEmpty when there is none
//
// The examples show each type in full.
//
// # Which type to use
//
//   - Queue (NewQueue, in a Subspace from NewSubspace): a FIFO queue in
//     the FoundationDB recipes' key layout, so Python and Java recipe
//     clients can share it; WithVersionstampOrder keys items in commit
//     order instead.
//   - PriorityQueue (NewPriorityQueue): items with an int64 priority;
//     PopMin and PopMax, and their batch forms.
//   - TypedQueue and TypedPriorityQueue: the same with a Codec[T]
//     (BytesCodec, StringCodec, JSONCodec, TupleCodec) instead of bytes.
//   - JobQueue (NewJobQueue): a work queue with leases, retries and a
//     dead-letter list, at-least-once processing; JobQueue.Run is a
//     worker pool, and RunScheduler adds periodic jobs (PeriodicJob;
//     Schedules lists them, Unschedule removes one). TypedJobQueue: the
//     same with typed job arguments through a Codec[T].
//   - WatchForItems (Queue, PriorityQueue): a watch, made in your own
//     transaction, that fires when an item may have arrived: dequeue
//     inside your transaction and, on ErrEmpty, commit and wait on it.
//   - Options: WithStaging (StagingConfig) for many concurrent consumers
//     and the blocking DequeueWait, PopMinWait and PopMaxWait;
//     WithValueEncoding, WithBatchBudget, WithJournalRetention,
//     WithoutIdempotency (the recipes' exact behaviour), WithClock,
//     WithEntropy. Per call: WithOpID (with NewOpID) for exactly once
//     inside your own retry loop.
//   - Operating: Depth, RegisterGauges and WithMeterProvider
//     (OpenTelemetry), WithLogger (log/slog), Recover, StagingStats.
//
// A Dequeue or pop removes its item in its own commit: exactly once, but
// an item whose consumer fails after that commit is gone, unless the
// work was written in the same transaction (within FoundationDB's
// 5-second limit). Work that takes longer, or must survive a crashed
// consumer, belongs in a JobQueue: delivered at least once, its effects
// exactly once when Ack commits in the transaction that writes them.
//
// # Transactions
//
// Every operation takes a kv.Transactor. Given a Database it runs in its
// own transaction, commits and retries retryable errors. Given a
// Transaction it runs inside it and commits nothing: your commit applies
// it together with your other writes, or not at all, and your retry loop
// runs it again (see WithOpID below). Read-only operations (Peek, Empty,
// Len, Depth, Stats, Job, ...) take a kv.ReadTransactor.
//
// A queue stores its configuration (kind, layout, value encoding,
// staging mode) with its keys, and a job queue its kind; a handle whose
// options or kind disagree fails with ErrConfigMismatch before writing
// anything, and Reconfigure changes the configuration of an empty queue.
//
// Producers never conflict (snapshot reads find the tail); consumers of
// one queue conflict on its head: with many, use WithStaging or batches.
//
// # Exactly once
//
// Each operation writes a journal record in the same transaction as its
// effect and looks for it first on every retry, so under
// commit_unknown_result (1021) a retry returns the first attempt's result
// instead of enqueuing twice or losing a dequeued item. Inside your own
// transaction, create an OpID once outside your retry loop and pass it
// with WithOpID on every attempt; without it the operation skips the
// journal and is as safe as the recipe's.
//
// An error for which kv.MaybeCommitted is true (the commit's outcome was
// unknown and the retries stopped, say because the context ended) leaves the
// operation applied or not. With the journal it is an *UnknownResultError
// holding the operation's ID: calling the operation again with WithOpID(ID)
// within the journal retention settles it, returning the first call's result
// if that committed and applying the operation if it did not. Settle under
// an ID the operation made itself on the same Queue, PriorityQueue or
// JobQueue value (another may not find its record, and apply it again); pass
// your own WithOpID to settle from anywhere. After any other error the
// operation had no effect (but that a failed staged take by place sends the
// item due to it to the tail; see StagingConfig).
//
// # Costs and limits
//
// Each exported function's doc comment gives its reads, writes, round trips
// and conflicts, for a handle in use: its first operations also read the
// stored configuration (the first on a new queue writes it, see Reconfigure)
// and declare the handle's journal retention (see WithJournalRetention).
// Besides them, every operation reads the metadata version, which comes with
// the read version (no round trip); one in 64 also reads the declared
// retention, with its other reads, and may clear expired journal records;
// and an operation given a Database clears the records that its handle's
// earlier operations on a Database left under their own IDs (a JobQueue's, a
// batch's, a staged take's, one under WithOpID; a Queue's or PriorityQueue's
// other single-result operations reuse a journal slot instead): usually one
// clear per operation. Batches stay within a byte budget (WithBatchBudget)
// and never fail with transaction_too_large.
//
// # Errors
//
// Layer errors are sentinels, tested with errors.Is: ErrEmpty,
// ErrValueTooLarge, ErrForeignKey (a *ForeignKeyError naming the key),
// ErrInvalidArgument, ErrBatchTooLarge, ErrTooManyToCount,
// ErrOperationExpired, ErrClaimExpired, ErrUnreadableAfterEnqueue,
// ErrLeaseLost, ErrJobNotFound, ErrScheduleNotFound, ErrUniqueKeyHeld,
// ErrCodec (a *CodecError), ErrConfigMismatch (a *ConfigMismatchError naming
// what differs), ErrQueueNotEmpty, ErrKeyOutsideSubspace and
// ErrMalformedKey. Database errors are kv errors (kv.ErrNotCommitted, ...);
// an operation with the journal whose outcome is unknown wraps its error in
// an *UnknownResultError (above). No input makes an operation panic, and no
// failure loses or duplicates an item.
//
// # Design
//
// docs/design.md in the repository has the design: key layouts, the cost
// and conflict table of every operation, the journal, transaction sizes,
// the staged dequeue's serving modes and failure handling, the stored
// configuration and what recipe clients can do, and the job queue.
package fdbqueue
