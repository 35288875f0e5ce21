package fdbqueue

import (
	"context"
	"fmt"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// The staged dequeue's options, statistics and entry points on Queue and
// PriorityQueue. The line, its keys and the invariant each transaction
// keeps are described at the top of staging_line.go.

// StagingConfig configures the staged dequeue; see WithStaging. Zero fields
// take the defaults. The constructor refuses with ErrInvalidArgument a
// BatchSize below 0 or over 10,000, a ClaimTimeout under 1ms, a negative
// CleanupTimeout and an unknown Serving mode.
//
// Ordering: staged histories are linearizable, mixed with any other
// consumer made with the same staging configuration, in both serving
// modes (see StagingServing). What differs is where the item due to a
// call that fails (its context ends, or its waiter stops renewing its
// request and the claim timeout passes) goes back: to its original key in
// batch mode, to the tail in place mode. One exception in batch mode: in a
// Queue with the recipe's indexed keys an item enqueued while the queue
// looked empty can get a smaller key than one written back and overtake
// it; WithVersionstampOrder avoids that, see docs/reliability.md.
//
// Cost per item, busy: by place, two transactions (the registration: two
// writes, one versionstamped, and no read while the line is long; the
// take: point reads of its request and marker and snapshot reads of the
// line up to the request and of the items up to its place, one round
// trip, then three clears and the journal record). In batches, about
// three: the registration (snapshot reads of the first two and the last
// request; then, for a waiter behind the two oldest, a read-only
// transaction that arms its watch on the request ahead: a read version
// and a point read), a share of a batch (per request: one request and one
// item read, two clears and a result write) and the collect (point reads
// of its request and result, and when the watch on the request ahead woke
// it rather than its own, the step's reads of the line; a range clear of
// the result and the journal record). Each step that reads is one round
// trip and a commit. While the line is short, a registration also reads the head,
// and a call served at once costs one transaction, with the same reads.
type StagingConfig struct {
	// BatchSize is the most requests one fulfilment transaction serves
	// (default DefaultStagingBatchSize, at most 10,000). Larger batches
	// serve more consumers per commit; each request costs the fulfiller
	// about three writes and one item read.
	BatchSize int
	// ClaimTimeout bounds how long a request or a fulfilled result may stay
	// unclaimed (default DefaultClaimTimeout). A live waiter renews its
	// request every ClaimTimeout/3; a request past its deadline is dropped,
	// and a result past its deadline has its item written back to the
	// queue, so a crashed waiter strands nothing for longer than this.
	// Clients' clocks must agree to well within it.
	ClaimTimeout time.Duration
	// CleanupTimeout bounds the transaction that withdraws a request after
	// the caller's context ended (default DefaultStagingCleanupTimeout),
	// as its context's deadline and as its timeout option, which replaces
	// a database's default one (FoundationDB's transaction_timeout). If
	// it fails, the call's error satisfies kv.MaybeCommitted: the claim
	// timeout returns a request left in the line, with any item due or
	// handed to it, to the queue; an item the call's take did take is in
	// its journal record, and a call under the ID the error holds (an
	// *UnknownResultError; also logged) settles it (WithOpID).
	CleanupTimeout time.Duration
	// Serving chooses how waiting requests get their items (default
	// ServeAuto).
	Serving StagingServing
}

// StagingServing is how a staged queue hands items to the requests waiting
// in its line. Either way, requests are served in line order (the order
// of their registrations' commits), each with the next item in queue
// order, and histories are linearizable.
type StagingServing int

// Serving modes; see StagingServing.
const (
	// ServeAuto is ServeByPlace for a Queue made WithVersionstampOrder,
	// ServeInBatches otherwise (and always for a PriorityQueue).
	ServeAuto StagingServing = iota
	// ServeByPlace: the request at place i in the line is due the item at
	// place i in the queue, and its waiter takes that item itself, in its
	// own transaction, as soon as the items reach its place: two
	// transactions per busy call, no waiting for a batch, and waiters at
	// different places do not conflict. Consumers outside the line
	// (DequeueBatch, a Dequeue inside a transaction) take the items after
	// those due to the line, and Peek and Empty look there too. A request
	// that leaves the line without its item (its context ended, or it
	// expired) sends that item to the tail, since the requests behind may
	// already have taken the items after it: the history reads as if the
	// call had taken the item and enqueued it again.
	//
	// It needs a Queue made WithVersionstampOrder (ErrInvalidArgument
	// otherwise, and for a PriorityQueue): with the recipe's keys, two
	// producers can write the same index and the second commit can land
	// ahead of an item already due to a request. The queue's stored
	// configuration keeps its clients in step: a handle staged in batches
	// fails with ErrConfigMismatch, and one made without WithStaging takes
	// the items after those due to the line. A client that does not check
	// the configuration (another library) must not take from the queue.
	ServeByPlace
	// ServeInBatches: the waiters of the two oldest requests serve the
	// line in batches, each in one transaction that reads the head as a
	// plain dequeue does; the others sleep until served and then collect
	// their item, about three transactions per busy call. It works with
	// any key layout and with clients that do not stage.
	ServeInBatches
)

// String returns the mode's name.
func (m StagingServing) String() string {
	switch m {
	case ServeAuto:
		return "auto"
	case ServeByPlace:
		return "by place"
	case ServeInBatches:
		return "in batches"
	}
	return fmt.Sprintf("StagingServing(%d)", int(m))
}

// Defaults of StagingConfig.
const (
	DefaultStagingBatchSize      = 64
	DefaultClaimTimeout          = 30 * time.Second
	DefaultStagingCleanupTimeout = 5 * time.Second
)

const (
	maxStagingBatch = 10_000
	// resultScan is how many results a fulfilment checks for expiry.
	resultScan = 8
	// helpers is how many waiters, those of the oldest requests, run
	// fulfilments; the others wait to be served.
	helpers = 2
	// maxStepBackoff caps the backoff between failed steps.
	maxStepBackoff = 20 * time.Millisecond
	// maxTimedOutSteps is how many steps in a row may time out in flight
	// (with stepBackoff, about 0.3 s of pauses) before a staged call gives
	// up with transaction_timed_out.
	maxTimedOutSteps = 16
	// recheckNoWait bounds how long a plain (non-Wait) staged Dequeue
	// sleeps before it checks again whether the items reach its request.
	recheckNoWait = 100 * time.Millisecond
	// recoverBatch is how many staging keys Recover examines per
	// transaction.
	recoverBatch = 256
)

// errStagingNeedsOption is returned by the Wait forms on a queue made
// without WithStaging.
var errStagingNeedsOption = fmt.Errorf("%w: the Wait forms need a queue made WithStaging", ErrInvalidArgument)

// fill applies the defaults and validates c.
func (c *StagingConfig) fill() error {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultStagingBatchSize
	}
	if c.ClaimTimeout == 0 {
		c.ClaimTimeout = DefaultClaimTimeout
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultStagingCleanupTimeout
	}
	if c.BatchSize < 1 || c.BatchSize > maxStagingBatch {
		return fmt.Errorf("%w: staging batch size %d must be in [1, %d]", ErrInvalidArgument, c.BatchSize, maxStagingBatch)
	}
	if c.ClaimTimeout < time.Millisecond {
		return fmt.Errorf("%w: claim timeout %v must be at least 1ms", ErrInvalidArgument, c.ClaimTimeout)
	}
	if c.CleanupTimeout < 0 {
		return fmt.Errorf("%w: cleanup timeout %v must not be negative", ErrInvalidArgument, c.CleanupTimeout)
	}
	if c.Serving < ServeAuto || c.Serving > ServeInBatches {
		return fmt.Errorf("%w: unknown staging serving mode %d", ErrInvalidArgument, int(c.Serving))
	}
	return nil
}

// byPlace resolves c.Serving for a structure: versionstamps says its keys
// are in commit order (a Queue made WithVersionstampOrder).
func (c StagingConfig) byPlace(versionstamps bool) (bool, error) {
	switch c.Serving {
	case ServeByPlace:
		if !versionstamps {
			return false, fmt.Errorf("%w: serving by place needs a Queue made WithVersionstampOrder", ErrInvalidArgument)
		}
		return true, nil
	case ServeAuto:
		return versionstamps, nil
	}
	return false, nil
}

// RecoverStats reports what Recover did.
type RecoverStats struct {
	// DroppedRequests is the number of expired requests cleared (their
	// waiters had stopped renewing them).
	DroppedRequests int
	// ReturnedItems is the number of items returned to the queue: those of
	// expired results (at their original keys in batch mode, at the tail
	// by place) and, by place, those due to expired requests (to the
	// tail).
	ReturnedItems int
}

// Phases of a staged operation's steps (transactions), for StagingStats.
const (
	phaseRead     = iota // failed before it chose a transition
	phaseFast            // the one plain attempt: serve the few waiting, take the head
	phaseRegister        // file a request
	phaseTake            // take the item at the request's place (self-service)
	phaseFulfil          // serve other requests, and the own one if items reach it
	phaseCollect         // collect the item a fulfilment handed to the request
	phaseWait            // read the state, then sleep, renew or re-register
	phaseWithdraw        // withdraw the request: no item for it
	phaseArm             // arm, read-only, a watch the step before left (armLater)
	numPhases
)

var phaseNames = [numPhases]string{"read", "fast", "register", "take", "fulfil", "collect", "wait", "withdraw", "arm"}

// numBatchBuckets is the size of StagingStats.BatchSizes.
const numBatchBuckets = 8

// StagingStats counts what the staged operations of one Queue or
// PriorityQueue value did, since it was made: a diagnostic, to see where a
// staged dequeue spends its time. Each step of an operation is one
// transaction; its phase is the transition it chose.
type StagingStats struct {
	Calls    int64               // staged calls that returned
	Items    int64               // items they returned
	CallTime time.Duration       // total time of those calls
	Phases   []StagingPhaseStats // the steps, by phase
	// Sleeps is how often a waiter slept on its watches, for SleepTime
	// in total.
	Sleeps    int64
	SleepTime time.Duration
	// Served is the number of other waiters' requests served by
	// fulfilments; BatchSizes[i] counts the fulfilments that served
	// between 2^i and 2^(i+1)-1 of them (the last bucket: more).
	Served     int64
	BatchSizes [numBatchBuckets]int64
}

// StagingPhaseStats counts the steps of one phase.
type StagingPhaseStats struct {
	Phase     string
	Commits   int64         // steps that committed (or needed no commit)
	Conflicts int64         // steps that failed with not_committed
	Failures  int64         // steps that failed otherwise
	Time      time.Duration // total time of the committed steps, reads and commit
}

type stagingCounters struct {
	calls, items, callNanos          atomic.Int64
	commits, conflicts, fails, nanos [numPhases]atomic.Int64
	sleeps, sleepNanos, served       atomic.Int64
	batches                          [numBatchBuckets]atomic.Int64
}

func (c *stagingCounters) batch(n int) {
	if n > 0 {
		c.served.Add(int64(n))
		c.batches[min(bits.Len(uint(n))-1, numBatchBuckets-1)].Add(1)
	}
}

func (c *stagingCounters) snapshot() StagingStats {
	st := StagingStats{
		Calls: c.calls.Load(), Items: c.items.Load(), CallTime: time.Duration(c.callNanos.Load()),
		Sleeps: c.sleeps.Load(), SleepTime: time.Duration(c.sleepNanos.Load()), Served: c.served.Load(),
	}
	for i := range numPhases {
		st.Phases = append(st.Phases, StagingPhaseStats{Phase: phaseNames[i], Commits: c.commits[i].Load(),
			Conflicts: c.conflicts[i].Load(), Failures: c.fails[i].Load(), Time: time.Duration(c.nanos[i].Load())})
	}
	for i := range st.BatchSizes {
		st.BatchSizes[i] = c.batches[i].Load()
	}
	return st
}

// ---- Queue ----

func (q *Queue) initStaging() error {
	q.stager = newStager(q.sub.prefix, q.cfg, q.rand)
	q.stage = newStageSide(q.stager, q.sub.prefix, "q", q.journal, q.end())
	q.stage.requeue, q.stage.checkKey = q.requeue, q.checkItemKey
	var err error
	if q.stage.stable, err = q.stager.cfg.byPlace(q.cfg.versionstamps); err != nil || !q.stager.enabled {
		return err
	}
	return q.stage.keysFit()
}

// reserved counts, on a queue staged by place, the requests in the line: the
// items at their places, at the head, are theirs, and a take outside the
// line (DequeueBatch, a Dequeue inside a transaction) starts after them.
// It is a snapshot read of the whole line. Elsewhere it is 0.
func (q *Queue) reserved(tr kv.ReadTransaction) (int, error) {
	if !q.journal.gate.servedByPlace(q.stager.enabled && q.stage.stable) { // config.go
		return 0, nil
	}
	return q.stage.placesBefore(tr, nil)
}

// requeue writes a stored item at the tail, as EnqueueBatch does (without
// a journal record: it is not an operation of its own). Only a Queue
// served by place requeues, and it is versionstamp-ordered.
func (q *Queue) requeue(tr kv.Transaction, stored []byte) error {
	return q.writeVersionstamped(tr, [][]byte{stored}, nil)
}

// staged reports whether an operation given t runs staged.
func (q *Queue) staged(t kv.Transactor) (kv.Database, bool) {
	db, ok := t.(kv.Database)
	return db, ok && q.stager.enabled
}

// StagingStats returns the counters of the queue's staged dequeues: how
// many steps of each phase committed or conflicted, the time they took,
// and the fulfilments' batch sizes. A diagnostic; see StagingStats.
func (q *Queue) StagingStats() StagingStats {
	if q.usable() != nil {
		return StagingStats{}
	}
	return q.stager.stats.snapshot()
}

// DequeueWait removes and returns the item at the head of the queue,
// waiting for one while the queue is empty, until ctx ends. It needs a
// queue made WithStaging (ErrInvalidArgument otherwise) and a Database,
// since it runs several transactions.
//
// It is the staged dequeue (see Queue.Dequeue) that, instead of returning
// ErrEmpty, keeps its request and blocks on two watches, on its request
// key and on the queue's signal key, which every Enqueue of this library
// bumps on a staged queue (the stored configuration tells producers made
// without WithStaging): it wakes when an item arrives or its request is
// served, and never polls. Producers that do not bump (the Python and
// Java recipes) leave waiters to notice their items when they renew their
// requests, every ClaimTimeout/3.
//
// When ctx ends, the request is withdrawn and an item already due or handed
// to it goes back to the queue (by place to the tail, in batches to its
// original key), so nothing is lost, and the error matches ctx.Err(). The
// same cleanup follows 16 steps in a row whose commits timed out (see
// Dequeue), and the error matches kv.ErrTransactionTimedOut. An
// operation ID given WithOpID must finish within the journal retention
// (ErrOperationExpired otherwise); without one, the operation renews its own
// ID while it waits. A take whose commit had an unknown outcome ties the
// call to its ID until a step settles it: if the call then gives up past
// the retention, its cleanup still returns the item of a take it finds
// recorded; if it finds no record (an expiry may have cleared it), the
// error wraps ErrOperationExpired and kv.MaybeCommitted is true. So is it
// when, in batches, the cleanup cannot tell which of several takes of
// equal items applied (see Queue.Dequeue): the item stays in the record.
//
// Cost while it waits on an empty queue: after the registration (see
// StagingConfig), a read-only step that arms the two watches (one round
// trip); then, every ClaimTimeout/3, a step that renews the request and
// one that arms the watches again; nothing in between. When ctx ends, a
// cleanup transaction withdraws the request (one round trip; by place two
// more, to find the item at its place).
func (q *Queue) DequeueWait(ctx context.Context, db kv.Database, opts ...OpOption) ([]byte, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if !q.stager.enabled {
		return nil, errStagingNeedsOption
	}
	return q.stage.run(ctx, db, true, opts)
}

// Recover drops the queue's expired staging requests and returns the items
// of expired results (handed to waiters that never collected them) to the
// queue; served by place, it also sends the items due to expired requests
// to the tail, for the first 256 requests of the line. Steps of staged
// calls do the same for what they come across; run Recover now and then
// (say every claim timeout) from any client to bound how long a crashed
// consumer can strand an item. Its Queue value must have the staging
// configuration of the queue's consumers: otherwise it fails with
// ErrConfigMismatch (checked in a read-only transaction first). Cost: that
// check (no round trip for a handle in use), then a snapshot read of up
// to 256 requests (by place together with as many items) and one of the
// results, each in a transaction of its own, which drops and returns what
// expired.
func (q *Queue) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	var st RecoverStats
	if err := q.usable(); err != nil {
		return st, err
	}
	if err := checkTransactor(db); err != nil {
		return st, err
	}
	if err := q.journal.gate.checkRecover(ctx, db); err != nil { // config.go
		return st, err
	}
	err := q.stage.recover(ctx, db, &st)
	return st, err
}

// ---- PriorityQueue ----

func (pq *PriorityQueue) initStaging() error {
	pq.stager = newStager(pq.sub.prefix, pq.cfg, pq.rand)
	pq.stageMin = newStageSide(pq.stager, pq.sub.prefix, "min", pq.journal, pq.end(false))
	pq.stageMax = newStageSide(pq.stager, pq.sub.prefix, "max", pq.journal, pq.end(true))
	pq.stageMin.mark, pq.stageMax.mark = popMark(false), popMark(true)
	// A push can land ahead of items already due to requests: a priority
	// queue always serves in batches.
	if _, err := pq.stager.cfg.byPlace(false); err != nil || !pq.stager.enabled {
		return err
	}
	if err := pq.stageMin.keysFit(); err != nil {
		return err
	}
	return pq.stageMax.keysFit()
}

func (pq *PriorityQueue) staged(t kv.Transactor) (kv.Database, bool) {
	db, ok := t.(kv.Database)
	return db, ok && pq.stager.enabled
}

func (pq *PriorityQueue) side(max bool) *stageSide[Item] {
	if max {
		return pq.stageMax
	}
	return pq.stageMin
}

// StagingStats returns the counters of the staged pops, PopMin and PopMax
// together; see Queue.StagingStats.
func (pq *PriorityQueue) StagingStats() StagingStats {
	if pq.usable() != nil {
		return StagingStats{}
	}
	return pq.stager.stats.snapshot()
}

// PopMinWait removes and returns the smallest item, waiting for one while
// the priority queue is empty, until ctx ends. Requirements and guarantees
// are those of Queue.DequeueWait; PopMin and PopMax requests are served
// separately, each oldest first.
func (pq *PriorityQueue) PopMinWait(ctx context.Context, db kv.Database, opts ...OpOption) (Item, error) {
	if err := pq.usable(); err != nil {
		return Item{}, err
	}
	if !pq.stager.enabled {
		return Item{}, errStagingNeedsOption
	}
	return pq.stageMin.run(ctx, db, true, opts)
}

// PopMaxWait removes and returns the largest item, waiting for one while
// the priority queue is empty; see PopMinWait.
func (pq *PriorityQueue) PopMaxWait(ctx context.Context, db kv.Database, opts ...OpOption) (Item, error) {
	if err := pq.usable(); err != nil {
		return Item{}, err
	}
	if !pq.stager.enabled {
		return Item{}, errStagingNeedsOption
	}
	return pq.stageMax.run(ctx, db, true, opts)
}

// Recover drops expired PopMin and PopMax requests and writes the items of
// expired results back; see Queue.Recover.
func (pq *PriorityQueue) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	var st RecoverStats
	if err := pq.usable(); err != nil {
		return st, err
	}
	if err := checkTransactor(db); err != nil {
		return st, err
	}
	if err := pq.journal.gate.checkRecover(ctx, db); err != nil { // config.go
		return st, err
	}
	if err := pq.stageMin.recover(ctx, db, &st); err != nil {
		return st, err
	}
	err := pq.stageMax.recover(ctx, db, &st)
	return st, err
}
