// Package fdbqueue provides queue layers for FoundationDB: a FIFO Queue and
// a PriorityQueue stored with the tuple layer inside a Subspace, as thin
// transactional functions that compose inside the caller's own transactions.
//
// The layers are written against the small interface in package kv. Two
// backends implement it: memdb, an embedded engine with FoundationDB's
// transaction semantics (for tests, examples and development), and fdbkv,
// the adapter to the official FoundationDB Go binding (its own module, so
// that this one never needs cgo).
//
// # Transactions and composition
//
// Every operation takes a kv.Transactor as its second argument. Given a
// Database, the operation runs in its own transaction, commits it and
// retries retryable errors (kv.RetryLoop). Given a Transaction, it runs
// inside that transaction and commits nothing: the caller's commit applies
// the operation together with the caller's other writes, or not at all.
// Reads (Peek, Empty, Len) take a kv.ReadTransactor.
//
// # Key layout
//
// The layouts are the FoundationDB recipes', so a Go program can share a
// queue with the Python or Java recipes:
//
//	Queue:          prefix + pack((index, 20 random bytes))     = value
//	PriorityQueue:  prefix + pack((priority, count, 20 random)) = value
//	journal:        prefix + 0xff + pack(("j", shard, op ID, n)) = result
//
// The value is the item's bytes (RawValues, as Python) or the packed tuple
// (item,) (TupleValues, as Java). The journal lies just past the subspace's
// range, so clients that read the subspace's range never see it; shard is
// a byte of the ID's random part (see "Exactly once"). With
// WithVersionstampOrder a Queue keys items by (versionstamp, random)
// instead: the items of one commit share its versionstamp and are ordered
// by a 16-bit user version, so one call enqueues at most 65,536 items
// (ErrBatchTooLarge beyond). A read of such a queue (Dequeue, Peek, Empty,
// Len) in a transaction that already enqueued to it cannot see the new
// keys, and FoundationDB fails it (accessed_unreadable, 1036): it returns
// ErrUnreadableAfterEnqueue, which also matches the kv error.
//
// A record or a staged result that holds an item's stored value keeps it
// as it is, after a few bytes of metadata, never re-encoded (a tuple would
// escape each 0x00): what Enqueue or Push accepted fits. When that passes
// the 100,000-byte value limit, the rest is written at key + pack((i,)):
// the journal's range read returns it with the record; a staged result
// that long takes its collector a second read.
//
// # Conflicts and cost of each operation
//
//	operation          round trips  reads                                     writes             conflicts with
//	Enqueue            1 + commit   snapshot tail (limit 1), journal          item, journal      nothing
//	Enqueue (vstamp)   1 + commit   journal                                   item, journal      nothing
//	EnqueueBatch(n)    1 + commit   snapshot tail, journal                    n items, journal   nothing
//	Dequeue            1 + commit   head (limit 1), journal                   clear, journal     other consumers
//	DequeueBatch(n)    1+ + commit  head (up to n, stops at the budget),      clears, journal    other consumers
//	                                journal
//	Push               1 + commit   snapshot tail of the priority, journal    item, journal      nothing
//	PopMin / PopMax    1 + commit   first / last key, journal                 clear, journal     other poppers; PopMax also
//	                                                                                             pushes at >= its priority
//	staged Dequeue     1 + 2        register: none;                           register: request, a take at the same
//	(by place: busy    commits      take: own request and marker,             marker (vstamped); place (rare: a request
//	vstamp Queue)                   requests ahead and items up to            take: 3 clears,    ahead left the line)
//	                                its place (snapshot, at most about        journal
//	                                the batch budget's bytes)
//	staged Dequeue     1 + 3        register: none;                           register: request, other servers of the
//	(in batches: busy  commits      serve: BatchSize requests, items up to    marker (vstamped); same requests (the two
//	recipe-key Queue,               the budget's bytes (snapshot; conflict    serve: 3 per item; oldest waiters); the
//	PriorityQueue)                  keys on each used); collect: own          collect: clear,    head's plain consumers
//	                                request and result                        journal
//	Peek*, Empty       1            first / last key (normal read; by         -                  (read-only)
//	                                place, first after the line's items)
//	Len (Database)     n/100,000    whole range (snapshot), in chunks of      -                  (read-only)
//	                   transactions up to 100,000 keys, values included
//	Len (Transaction)  1            up to 100,000 keys (snapshot), else       -                  (read-only)
//	                                ErrTooManyToCount
//	Clear              commit       -                                         range clear        consumers
//
// The two reads of an operation are issued together, so the journal costs
// no extra round trip: it costs one point-sized range read and one small
// write per operation (for a dequeue, a write of the item's value), and one
// range clear, carried by a later operation, to remove the record. An
// operation run inside a caller's transaction without WithOpID has no
// journal (see "Exactly once"): it costs what the recipe's does.
// WithoutIdempotency removes the journal and gives the recipes' exact cost.
//
// Consumers conflict because they all read the head: with many consumers
// use a staged dequeue (see staging.go) or batch dequeues.
//
// # Transaction size and reads of batches
//
// Batch operations (EnqueueBatch, DequeueBatch, PopMinBatch, PopMaxBatch,
// a staged fulfilment, JobQueue's AddBatch and Lease) stay within a batch budget (WithBatchBudget, default
// 1,000,000, at most MaxBatchBudget = 9,000,000 bytes) counted as
// FoundationDB counts a transaction's size against its 10,000,000-byte limit
// (Transaction::getSize, fdbclient/NativeAPI.actor.cpp): mutations plus
// read and write conflict ranges, so that a Set costs about 3 × key + value
// and a Clear of one key 4 × key + 2 (budget.go). The journal's records,
// clean-ups and expiry count too, so an accepted budget never makes a
// commit fail with transaction_too_large (2101). A batch takes at least one
// item, even one that alone exceeds the budget; the 1,000,000 bytes between
// MaxBatchBudget and the limit leave room for it.
//
// Batches read the items they may take with iterators
// (StreamingModeWantAll: FDB fetches 120,000 bytes per batch) and stop
// reading once the budget is reached, so a DequeueBatch(1000) of
// 100 KB items reads about the budget, not 100 MB. A staged step reads the
// items up to its place, or those it may hand out, and the results it may
// expire, together at most about the budget. The kv interface, like
// FoundationDB's API, has no key-only range read, so these reads include
// values even where only keys are needed (the items ahead of a waiter's
// place; the items due to the line that DequeueBatch and Peek skip on a
// queue served by place: those are read in full).
//
// All reads of a step are issued together (FDB sends a range read's first
// batch when GetRange is called) and waited for before its commit: a read
// in flight at Commit would fail the transaction with used_during_commit
// (2017) although the commit may apply.
//
// # Exactly once under commit_unknown_result
//
// FoundationDB may answer a commit with commit_unknown_result (1021): the
// commit may or may not have been applied, and the standard retry loop runs
// the function again. The recipes then enqueue an item twice, or lose an
// item whose dequeue committed but whose result never reached the caller.
//
// Here each call of an operation gets an OpID (random, or yours with
// WithOpID) and writes a journal record under that ID in the same
// transaction as its effect. Each attempt first reads the record's first
// key, with a normal point read (the whole record only if it is there),
// except while no attempt under an ID the operation made itself has
// written a record (its first attempt): none can exist then. If an
// earlier attempt committed, the record is there and
// the attempt returns that attempt's result (the dequeued items are in the
// record) without doing anything again; if the earlier attempt's commit is
// still in flight and lands later, the two attempts conflict and only one
// commits. So every operation takes effect exactly once and returns the
// result of the attempt that did.
//
// Records are cleaned up in two ways. When an operation ran its own
// transactions (it was given a Database) and returned, nothing will retry it
// again, so its record is cleared by the next operation of the same Queue
// value, as one extra clear in that operation's transaction (of the
// record's one key, or of its range if it has several). Every
// other record (operations inside callers' transactions, abandoned ones)
// expires. Records are keyed (shard, ID), the shard a byte of the ID's
// random part, so that operations made at the same moment write 256
// different parts of the journal, not all its end (an ID starts with its
// creation time); within a shard the records older than a time form one
// range, and one operation in 64 clears that range in 16 of the shards.
// An operation still retrying after the journal retention (default ten
// minutes, by its own client's clock) fails with ErrOperationExpired
// rather than risk applying twice; a record is cleared only once it is
// twice the retention old by the clearing client's clock. So clients'
// clocks may disagree by up to the retention without a client clearing
// the record of an operation still running; a larger skew can let an
// operation apply twice under commit_unknown_result.
//
// When an operation runs inside your transaction, your retry loop re-runs
// it: create an OpID with NewOpID once, outside your loop, and pass it with
// WithOpID on every attempt. Your own writes in that transaction should be
// idempotent too (a Set is; an atomic Add is not). Without WithOpID, each
// of your retries would be a new operation to the journal, which could
// never recognise an earlier attempt: the operation then skips the journal
// (no journal read or write) and is exactly as safe as the recipe's.
//
// Errors for which kv.MaybeCommitted is true (the context ended during a
// commit) are returned to the caller: the operation may or may not have
// taken effect. A Dequeue or Pop called again with the same WithOpID within
// the retention returns the item it removed, if it removed one.
//
// # Staged dequeue
//
// With WithStaging, Dequeue, PopMin and PopMax given a Database stop
// competing for the head once consumers contend. A call first looks at the
// head and at the first requests (snapshot reads): if fewer than two
// waiters are ahead, it takes the item after theirs in one attempt,
// conflicting as a plain dequeue does (in batch mode the same transaction
// serves those waiters first). Otherwise, or if that attempt fails, it
// files a request: a key in the queue's meta subspace ordered by the
// versionstamp of its commit, written without conflicting with anyone
// (while the line is long, new calls skip the first look and file at
// once). Requests form a line in commit order, and in both serving modes
// (StagingConfig.Serving) they are served in line order, each with the
// next item in queue order (the smallest for PopMin, the largest for
// PopMax; PopMin and PopMax requests are separate lines). Histories are
// linearizable, and the simulation checks them (see sim/).
//
// By place (ServeByPlace; the default for a Queue made
// WithVersionstampOrder): the request at place i in the line is due the
// item at place i in the queue, and its waiter takes it itself. In the
// transaction after its registration the waiter reads the requests ahead
// of it and the items up to its place (snapshot reads); if the items reach
// it, it takes the item at its place with read conflicts on its request
// and that item only, so waiters at different places do not conflict and
// nobody waits for anyone. Every transition that removes a request or an
// item keeps "the i-th request is due the i-th item" true for the requests
// it read: a take removes a request and its item; consumers outside the
// line (DequeueBatch, a Dequeue inside a transaction) take the items after
// those due to the line as they read it (a request filed meanwhile is then
// due the next item), and Peek and Empty look there; a
// request that leaves the line without its item (its context ended, or it
// expired) moves that item to the tail, because the waiters behind may
// already have taken the items after it (so the history reads as if the
// failed call had taken the item and enqueued it again), and one that no
// item reaches leaves with a read conflict on the whole item range, so
// that an item arriving meanwhile makes it conflict. It needs keys in
// commit order (with the recipe's keys, two producers can write the same
// index, and the later commit lands ahead of an item already due), and
// every consumer of the queue must stage the same way.
//
// In batches (ServeInBatches; the default otherwise, and always for a
// PriorityQueue, where a push can land ahead of the items and move every
// place): the waiters of the two oldest requests serve the line. The
// oldest takes the head itself, with a plain dequeue's conflict range; the
// second oldest, or an oldest one woken by new items, serves the line in
// one transaction: it reads the first BatchSize requests and as many
// items, clears both and writes each item, with its original key, to its
// request's result key (taking its own directly); the waiters served wake
// and collect their result in a transaction that clears it and records
// the item in the journal. Every hand-out happens in a transaction that
// conflicts with any other taker of the same items. An item handed back
// (its waiter stopped) returns to its original key and so to its place;
// so with the recipe's indexed keys an item enqueued while the queue
// looked empty (index restarting at 1) can overtake an item written back:
// the one departure from linearizability, which WithVersionstampOrder
// avoids (and distinct priorities, in a PriorityQueue).
//
// In both modes, waiters the items do not reach sleep on watches: the two
// oldest waiters on their request and on a signal key that every Enqueue
// and Push bumps on a staged queue, staged handle or not (an atomic add:
// no conflicts, one extra write),
// the others on their request and the request ahead (in batch mode, at
// first the last request their registration saw). Nobody polls, except
// that a plain Dequeue, which must not block, looks again every 100 ms.
//
// Empty queue: Dequeue withdraws its request and returns ErrEmpty.
// DequeueWait, PopMinWait and PopMaxWait keep the request and block on the
// watches until an item arrives or the context ends. Given a Transaction,
// Dequeue and the pops run the plain path inside it (staging needs
// transactions of its own), keeping the order: served by place they take
// only items after those due to the line.
//
// Cost per item, on a busy queue. By place: the registration (a blind
// commit of the request, a versionstamped key, and a marker at its result
// key; while the line is short it first reads the head and the line's
// first two and last requests) and the
// take (one round trip: two point reads, two snapshot range reads up to
// the waiter's place; a commit of three clears and the journal record):
// two commits per item and no batch to wait for. In batches: the
// registration (a waiter that is not among the two oldest arms its
// watches in it and sleeps from its commit on), a share of a batch
// transaction (one request and one item read, two clears and a result
// write each) and the collect (a point read and a commit of one clear and
// the journal record): three commits per item, in sequence, which bounds
// a closed-loop consumer's rate; one serving commit hands out up to
// BatchSize items. docs/queuebench.md has the figures.
// Queue.StagingStats counts each phase's steps, conflicts and time. A
// sleeping waiter holds two watches.
//
// Failures: every step reads the keys it changes, so it is idempotent by
// state, and every step that hands an item to the caller is journaled, so
// commit_unknown_result neither loses nor duplicates an item; a
// registration with an unknown outcome is found through its marker. When
// the caller's context ends, a cleanup transaction in a fresh, bounded
// context (CleanupTimeout) withdraws the request, or returns an item
// already due or handed to it (by place to the tail, in batches to its
// original key). Requests carry a deadline that live waiters renew every
// ClaimTimeout/3; results carry one too. Steps that read requests, and
// Recover, drop expired requests (by place, with their items) and return
// the items of expired results, so a crashed consumer strands an item for
// at most the claim timeout (in batch mode a stalled waiter among the two
// oldest holds up the line behind it until its request expires; by place
// only its own item waits). A waiter that stalled that long and finds, when
// it resumes, that its request or result expired and its item went back
// fails with ErrClaimExpired, having taken nothing: going on with a new
// request would not be linearizable. A cleanup transaction that fails
// leaves the request to expire, so its call's error satisfies
// kv.MaybeCommitted.
//
// # Stored configuration
//
// A queue keeps what it is (Queue or PriorityQueue, key layout, value
// encoding, staging mode, a format version) in one record in its meta
// subspace. Every operation reads it as a snapshot read issued with its
// own reads (no extra round trip) and fails with ErrConfigMismatch, before
// writing anything, when its handle's options disagree. A queue without a
// record is a recipe queue; the first write of this library stores the
// record, as a blind write, so producers that agree do not conflict.
// Handles made without WithStaging follow the stored staging mode (they
// bump the signal, and respect the line of a queue served by place).
// Reconfigure changes the record of an empty queue. See config.go. Cost
// per transaction: one snapshot point read and one read conflict key (an
// epoch key that only changes of the record write); the first write adds
// the record and two conflict ranges; on a queue someone waits on, a
// producer made without WithStaging adds the signal's atomic add.
//
// Recipe clients (Python, Java) share a recipe-layout queue: they enqueue
// and dequeue items this library serves, and never see the meta subspace.
// They do not check the record, write no journal (no exactly-once), do
// not bump the signal (waiters, DequeueWait as WatchForItems, notice
// their items late: at the next renewal, or never for a watch), and must
// not share a queue served by place or versionstamp-ordered.
//
// # Waiting inside a transaction
//
// Queue.WatchForItems and PriorityQueue.WatchForItems return a watch, made
// in the caller's transaction, that fires when an item may have arrived:
// dequeue in a transaction, and on ErrEmpty arm the watch, commit and wait
// (ExampleQueue_WatchForItems).
//
// # Job queue with leases
//
// JobQueue (jobqueue*.go) is a work queue with at-least-once processing,
// after Apple's QuiCK: a consumer leases a job for a duration, processes
// it, and acks it; a job whose lease expires (its consumer crashed) is
// due again. Its keys, in its subspace:
//
//	("q", vesting µs, -priority, job ID) = record: lease ID, attempts, max attempts,
//	                                        unique key, added µs, last failure's reason
//	("v", job ID)                        = value, written once, never rewritten
//	("x", job ID)                        = the key of the job's record (for Requeue, and
//	                                        for Ack/Extend through an old copy of a Lease)
//	("u", unique key)                    = job ID, while that job is queued or leased
//	("d", death µs, job ID)              = record of a dead job (the dead-letter list)
//	("c", "n" | "l" | "d")               = counters: jobs in the queue, leased, dead
//	("c", "p" | "e", bucket)             = counters of queued / leased jobs per vesting-time
//	                                        bucket (Stats); cleared when they reach zero
//	("s",)                               = signal: bumped by Add, Nack and Requeue
//
// and its journal just past the subspace, as the other layers'. A job's
// vesting time is when it may be leased: when added, now + Delay (or
// RunAt); when leased, the lease's deadline; when nacked, the retry time.
// A lease thus moves the record forward and hides it until the deadline,
// and Ack deletes it. Values up to 100,000 bytes are stored as given, and
// leases, retries and dead-lettering move only the small record.
//
// Ordering: a job is never leased before its vesting time, by the clock
// of the client that leases (clients' clocks must agree to well within
// the lease duration). Due jobs are in key order: earlier vesting time,
// then higher priority (so priority orders jobs due at the same
// microsecond, such as jobs added with one RunAt), then job ID. Lease(n)
// reads the first K+n−1 due jobs in that order (K is
// JobQueueConfig.Choice) and takes n of them at random: a job is never
// passed over for a job K+n−1 or more places behind it, in the order as
// of the lease's read version (a job added, or made due again, after that
// version may be passed over by that lease). With K = 1 leases are in strict
// key order, and concurrent consumers all want the first job and
// conflict; with K > 1 they rarely pick the same one: calls on one
// JobQueue value (a process's workers, a pool) skip the jobs their
// siblings are taking or took within the last 5 s, and consumers in
// different processes conflict on about (their number)/K of leases.
//
// Delivery: at least once. A job is processed again when its lease
// expires before the ack commits. Ack inside the transaction that writes
// the job's effects makes the effects exactly once: if the lease was lost
// (another consumer leased the job again), the ack fails with
// ErrLeaseLost and the effects do not commit.
//
//	operation        round trips   reads                               writes                        conflicts with
//	Add(n)           1 + commit    journal, unique keys                per job: value, record,       adds of the same
//	                                                                   index, unique key; 2 counter  unique key
//	                                                                   adds; signal; journal
//	Lease(n)         2 + commit    journal + first K+n−1 due records   per job: clear, record,       Lease, Ack, Nack,
//	                               (snapshot); values of those taken   index, 4 counter adds;        Extend of the same
//	                               (snapshot)                          journal                       job only
//	Ack              1 + commit    journal, the job's record           4 clears, 3 counter adds,     the same job only
//	                                                                   journal
//	Nack             1 + commit    journal, the job's record           clear, record, index, 3       the same job only
//	                                                                   counter adds, signal, journal
//	Extend           1 + commit    the job's record                    clear, record, index, 2       the same job only
//	                                                                   counter adds
//	Requeue          2-3 + commit  journal + index, record, unique key record, index, clear, 4 adds  the same job only
//	Stats            1             3 counters, future buckets, first   -                             (read-only)
//	                               record (all snapshot)
//	LeaseWait idle   1 + commit    as Lease, + first record; a watch   -                             (read-only)
//
// (Ack, Nack and Extend given a Lease copy from before an Extend made
// through another copy take two more round trips, through the index.)
// Under commit_unknown_result, Add, Lease, Ack, Nack, Requeue and
// DeleteDead find their journal record on retry and return the first
// attempt's result, so each takes effect once; Extend needs none (a retry
// finds the job under its lease and extends it again). Given your own
// Transaction, pass WithOpID as for the other layers.
//
// Stats: the counts of jobs queued, leased and dead are exact (atomic
// adds, which never conflict). Due versus delayed, and live versus
// expired leases, change with time alone, without a write, so no counter
// can hold them; the queue counts jobs per vesting-time bucket
// (JobQueueConfig.StatsResolution, default one second), and Stats sums
// the buckets after now: exact up to one bucket (the jobs of the current
// bucket count as due). It reads one counter per bucket holding jobs in
// the future, never the jobs.
//
// LeaseWait, when nothing is due, reads the earliest vesting time in the
// same transaction, sets a watch on the signal key, and sleeps until the
// watch fires or the clock reaches that time; it never polls. JobQueue.Run
// is a worker pool over LeaseWait: it extends the leases of running
// handlers, acks or nacks with their result (a panic is a failure), and
// shuts down gracefully (ShutdownTimeout), logging through log/slog.
//
// # Errors
//
// Layer errors are sentinels tested with errors.Is: ErrEmpty,
// ErrValueTooLarge, ErrForeignKey (a *ForeignKeyError naming the key),
// ErrInvalidArgument, ErrBatchTooLarge, ErrTooManyToCount, ErrOperationExpired,
// ErrClaimExpired, ErrUnreadableAfterEnqueue, ErrLeaseLost, ErrJobNotFound,
// ErrUniqueKeyHeld, ErrCodec, ErrConfigMismatch (a *ConfigMismatchError
// naming what differs), ErrQueueNotEmpty,
// ErrKeyOutsideSubspace and ErrMalformedKey. Database errors are kv errors
// (kv.ErrNotCommitted, ...). No input makes an operation panic, and no
// failure loses or duplicates an item.
package fdbqueue
