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
//	journal:        prefix + 0xff + pack(("j", op ID, n))       = result
//
// The value is the item's bytes (RawValues, as Python) or the packed tuple
// (item,) (TupleValues, as Java). The journal lies just past the subspace's
// range, so clients that read the subspace's range never see it. With
// WithVersionstampOrder a Queue keys items by (versionstamp, random) instead.
//
// # Conflicts and cost of each operation
//
//	operation          round trips  reads                                     writes             conflicts with
//	Enqueue            1 + commit   snapshot tail (limit 1), journal          item, journal      nothing
//	Enqueue (vstamp)   1 + commit   journal                                   item, journal      nothing
//	EnqueueBatch(n)    1 + commit   snapshot tail, journal                    n items, journal   nothing
//	Dequeue            1 + commit   head (limit 1), journal                   clear, journal     other consumers
//	DequeueBatch(n)    1 + commit   head (limit n), journal                   n clears, journal  other consumers
//	Push               1 + commit   snapshot tail of the priority, journal    item, journal      nothing
//	PopMin / PopMax    1 + commit   first / last key, journal                 clear, journal     other poppers; PopMax also
//	                                                                                             pushes at >= its priority
//	staged Dequeue     1 + 3        register: none;                           register: request, other servers of the
//	(busy Queue,       commits      serve: BatchSize requests, items          marker (vstamped); same requests (the two
//	strict default)                 (snapshot; conflict keys on each used);   serve: 3 per item; oldest waiters); the
//	                                collect: own request and result           collect: clear,    head's plain consumers
//	                                                                          journal
//	staged Dequeue     1 + 2        register: none;                           register: request, a take at the same
//	(RelaxedOrder)     commits      take: own request and marker,             marker (vstamped); place (rare: a request
//	                                requests ahead and items up to            take: 4 clears,    ahead left unserved)
//	                                its place (snapshot)                      journal
//	Peek*, Empty       1            first / last key (normal read)            -                  (read-only)
//	Len                n/batch      whole range (snapshot)                    -                  (read-only)
//	Clear              commit       -                                         range clear        consumers
//
// The two reads of an operation are issued together, so the journal costs
// no extra round trip: it costs one point-sized range read and one small
// write per operation (for a dequeue, a write of the item's value), and one
// range clear, carried by a later operation, to remove the record.
// WithoutIdempotency removes the journal and gives the recipes' exact cost.
//
// Consumers conflict because they all read the head: with many consumers
// use a staged dequeue (see staging.go) or batch dequeues.
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
// transaction as its effect. Each attempt first reads the record, with a
// normal read: if an earlier attempt committed, the record is there and
// the attempt returns that attempt's result (the dequeued items are in the
// record) without doing anything again; if the earlier attempt's commit is
// still in flight and lands later, the two attempts conflict and only one
// commits. So every operation takes effect exactly once and returns the
// result of the attempt that did.
//
// Records are cleaned up in two ways. When an operation ran its own
// transactions (it was given a Database) and returned, nothing will retry it
// again, so its record is cleared by the next operation of the same Queue
// value, as one extra range clear in that operation's transaction. Every
// other record (operations inside callers' transactions, abandoned ones)
// expires after the journal retention (default ten minutes): an OpID starts
// with its creation time, so expired records form one key range, and one
// operation in 64 clears it. Clients' clocks must agree to well within the
// retention. An operation still retrying after its retention fails with
// ErrOperationExpired rather
// than risk applying twice.
//
// When an operation runs inside your transaction, your retry loop re-runs
// it: create an OpID with NewOpID once, outside your loop, and pass it with
// WithOpID on every attempt. Your own writes in that transaction should be
// idempotent too (a Set is; an atomic Add is not).
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
// conflicting as a plain dequeue does (in strict mode the same transaction
// serves those waiters first). Otherwise, or if that
// attempt fails, it files a request: a key in the queue's meta subspace
// ordered by the versionstamp of its commit, written without conflicting
// with anyone (while the line is long, new calls skip the first look and
// file at once). Requests form a line in commit order.
//
// Default (strict, linearizable): the waiters of the two oldest requests
// serve the line. The oldest takes the head itself, with a plain
// dequeue's conflict range; the second oldest, or an oldest one woken by
// new items, serves the line in one transaction: it reads the first
// BatchSize requests and as many items, clears both and writes each item,
// with its original key, to its request's result key (taking its own
// directly); the waiters served wake and collect their result in a
// transaction that clears it and records the item in the journal. Every
// hand-out happens in a transaction that conflicts with any other taker of
// the same items, so requests are served oldest first, each with the next
// item in queue order (the smallest for PopMin, the largest for PopMax;
// PopMin and PopMax requests are separate lines), and histories are
// linearizable (the simulation checks them, see sim/). A PriorityQueue
// always works this way: a push can land ahead of the items and move every
// place.
//
// StagingConfig.RelaxedOrder (Queue only): the request at place i takes
// the item at place i itself. In the transaction after its registration
// the waiter reads the requests ahead of it and the items up to its place
// (snapshot reads); if the items reach it, it takes the item at its place
// with read conflicts on its request and that item only, so waiters at
// different places do not conflict and nobody waits for anyone. The
// guarantee is weaker: every item is still delivered exactly once, and
// requests are served roughly in line order, but if a request ahead is
// withdrawn (its context ended, or a Dequeue found no item for it) or a
// consumer outside the line (a Dequeue inside a transaction, DequeueBatch,
// a client without staging) takes from the head meanwhile, a waiter
// further back may already have taken a later item: FIFO order is
// violated and the history is not linearizable.
//
// In both modes, waiters the items do not reach sleep on watches: the two
// oldest waiters on their request and on a signal key that every staged
// Enqueue and Push bumps (an atomic add: no conflicts, one extra write),
// the others on their request and the request ahead (at first the last
// request their registration saw). Nobody polls. An item
// handed back (its waiter stopped) returns to its original key and so to
// its place; items enqueued concurrently keep the recipe's order (by
// index, then random). So with the recipe's indexed keys an item enqueued
// while the queue looked empty (index restarting at 1) can overtake an
// item written back: the one departure from linearizability of strict
// mode, which WithVersionstampOrder avoids (and distinct priorities, in a
// PriorityQueue).
//
// Empty queue: Dequeue withdraws its request and returns ErrEmpty.
// DequeueWait, PopMinWait and PopMaxWait keep the request and block on the
// watches until an item arrives or the context ends. Given a Transaction,
// Dequeue and the pops run the plain path inside it: staging needs
// transactions of its own.
//
// Cost per item, on a busy queue, strict: the registration (snapshot
// reads of the line's first two and last requests, then a commit of the
// request, a versionstamped key, and a marker at its result key; a
// waiter that is not among the two oldest arms its watches in it and
// sleeps from its commit on), a share of a batch transaction (one request
// and one item read, two clears and a result write each) and the collect
// (a point read and a commit of one clear and the journal record): three
// commits per item, but consumers no longer serialise on the head, and
// one serving commit hands out up to BatchSize items. The three are
// sequential, which bounds a closed-loop consumer's rate (see
// docs/queuebench.md). RelaxedOrder: the registration and the take (one
// round trip: two point reads, two snapshot range reads up to the
// waiter's place; a commit of four clears and the journal record), two
// commits per item and no batch to wait for, so it scales further (see
// docs/queuebench.md). Queue.StagingStats counts each phase's steps,
// conflicts and time. A sleeping waiter holds two watches.
//
// Failures: every step reads the keys it changes, so it is idempotent by
// state, and every step that hands an item to the caller is journaled, so
// commit_unknown_result neither loses nor duplicates an item; a
// registration with an unknown outcome is found through its marker. When
// the caller's context ends, a cleanup transaction in a fresh, bounded
// context (CleanupTimeout) withdraws the request, or writes an item
// already handed to it back at its original key. Requests carry a deadline
// that live waiters renew every ClaimTimeout/3; results carry one too.
// Steps that read requests, and Recover, drop expired requests and write
// the items of expired results back, so a crashed consumer strands an item
// for at most the claim timeout (a stalled waiter among the two oldest
// holds up the line behind it in strict mode until its request expires;
// in RelaxedOrder mode the waiters behind take the items at their own
// places); a slow waiter that finds its request gone files a new one.
//
// # Errors
//
// Layer errors are sentinels tested with errors.Is: ErrEmpty,
// ErrValueTooLarge, ErrForeignKey (a *ForeignKeyError naming the key),
// ErrInvalidArgument, ErrBatchTooLarge, ErrOperationExpired, ErrCodec,
// ErrKeyOutsideSubspace and ErrMalformedKey. Database errors are kv errors
// (kv.ErrNotCommitted, ...). No input makes an operation panic, and no
// failure loses or duplicates an item.
package fdbqueue
