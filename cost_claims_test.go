package fdbqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// costEnv is one claim's database and handles. Setup runs on raw,
// uncounted; the operation checked runs on db, which counts (costDB).
type costEnv struct {
	t     *testing.T
	ctx   context.Context
	raw   kv.Database
	db    *costDB
	q     *fdbqueue.Queue
	pq    *fdbqueue.PriorityQueue
	jq    *fdbqueue.JobQueue
	clock *queuetest.Clock
	lease fdbqueue.Lease // setLease's
	old   fdbqueue.Lease // the same lease before an Extend through another copy
	dead  fdbqueue.JobID // kill's
	job   fdbqueue.JobID // queueJob's, or setLease's job
	id    fdbqueue.OpID  // an ID a setup leased under
	opts  []fdbqueue.Option
	// The staged rows' (cost_claims_staged_test.go).
	q2       *fdbqueue.Queue // another handle of q, for waiters not counted
	producer *fdbqueue.Queue // another handle of q, for items (produce)
	stalled  [][]byte        // result keys of their requests, oldest first
	gauges   *gaugeMeter     // the MeterProvider's meter, when a row gives one
}

// newCostEnv makes c's database and handles: the Queue with c's options
// (staged in c.stage's mode, on the env's clock, when set).
func newCostEnv(t *testing.T, c costClaim) *costEnv {
	raw := newDB(t)
	clock := newFakeClock()
	e := &costEnv{t: t, ctx: context.Background(), raw: raw, db: newCostDB(raw), clock: clock}
	e.opts = c.opts
	if c.stage != nil {
		e.opts = append(c.stage.opts(fdbqueue.StagingConfig{ClaimTimeout: stagedTimeout}), fdbqueue.WithClock(clock.Now))
		e.opts = append(e.opts, c.opts...)
	}
	var err error
	e.q, err = fdbqueue.NewQueue(mustSubspace(t, "cost", "q"), e.opts...)
	require.NoError(t, err)
	e.pq = mustPQ(t, "cost-pq")
	e.jq = mustJobQueue(t, "cost-jobs", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	if !c.cold {
		e.warm()
	}
	return e
}

// dequeueOp is the op of the many rows that measure one Dequeue on the
// Database.
func dequeueOp(e *costEnv) error {
	_, err := e.q.Dequeue(e.ctx, e.db)
	return err
}

// warm brings each handle to its steady state before anything is
// counted, leaving every queue empty: the stored configuration written
// (first operation) and cached (second), the declared journal retention
// known to stand (journal_expiry.go: the second operation reads it), and
// for the job queue one record of an earlier operation pending, which
// the next operation clears (journal.go, op.carry), as in any sequence of
// operations of a handle.
func (e *costEnv) warm() {
	for range 2 {
		require.NoError(e.t, e.q.Enqueue(e.ctx, e.raw, []byte("w")))
		require.NoError(e.t, e.pq.Push(e.ctx, e.raw, []byte("w"), 0))
		mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("w")})
		l := mustLease(e.t, e.raw, e.jq, 1, time.Minute)
		require.NoError(e.t, e.jq.Ack(e.ctx, e.raw, l[0]))
	}
	require.Len(e.t, drain(e.t, e.raw, e.q), 2)
	for range 2 {
		_, err := e.pq.PopMin(e.ctx, e.raw)
		require.NoError(e.t, err)
	}
}

func (e *costEnv) fill(n int) {
	for i := range n {
		require.NoError(e.t, e.q.Enqueue(e.ctx, e.raw, []byte{byte(i)}))
	}
}

func (e *costEnv) pfill(n int) {
	for i := range n {
		require.NoError(e.t, e.pq.Push(e.ctx, e.raw, []byte{byte(i)}, int64(i%2)))
	}
}

func (e *costEnv) jfill(n int) {
	for i := range n {
		mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte{byte(i)}})
	}
}

// setLease adds a job (with unique key uk, if not empty) and leases it.
func (e *costEnv) setLease(uk string) {
	e.job = mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("v"), UniqueKey: uk}).ID
	e.lease = mustLease(e.t, e.raw, e.jq, 1, time.Minute)[0]
}

// queueJob adds a job (with unique key uk, if not empty) and leaves it
// queued.
func (e *costEnv) queueJob(uk string) {
	e.job = mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("v"), UniqueKey: uk}).ID
}

// kill adds a job of one attempt (with unique key uk, if not empty) and
// nacks it to the dead-letter list.
func (e *costEnv) kill(uk string) {
	r := mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("v"), UniqueKey: uk, MaxAttempts: 1})
	l := mustLease(e.t, e.raw, e.jq, 1, time.Minute)[0]
	dead, err := e.jq.Nack(e.ctx, e.raw, l, fdbqueue.NackOptions{})
	require.NoError(e.t, err)
	require.True(e.t, dead)
	e.dead = r.ID
}

func (e *costEnv) watch(tr kv.Transaction) error {
	w, err := e.q.WatchForItems(tr)
	if w != nil {
		w.Cancel()
	}
	return err
}

// costClaim is one "Cost:" claim of a doc comment: its words, the setup
// that makes its case, the operation, and what each transaction the
// operation commits (or, read-only, runs) must do on its first attempt,
// or on its second when fail makes the first commit fail.
type costClaim struct {
	name  string
	claim string
	opts  []fdbqueue.Option // the Queue's
	stage *stagingMode      // the Queue is staged in this mode
	cold  bool              // a new queue and handle: no warm-up
	setup func(e *costEnv)
	fail  []error
	op    func(e *costEnv) error
	want  []cost
}

// Counts every transaction of a handle has in its steady state, besides
// what a claim states: the metadata version's read (with the read
// version, no round trip: see costDB), and, on the first attempt of an
// operation with a journal and an ID of its own, a read conflict on the
// key its record goes to (journal.go, op.check: a call settling the
// operation under its logged ID writes that key).
const (
	mvRead         = 1
	recordConflict = 1
)

// carriedClear is the clear of the previous operation's journal record that a
// JobQueue operation makes (it keeps its records under its own ID, and
// the handle's next operation clears them: journal.go, op.end and carry).
const carriedClear = 1

// costSchedule is the cost claims' periodic job, with unique key u.
func costSchedule(u string) fdbqueue.PeriodicJob {
	return fdbqueue.PeriodicJob{Name: "cost", Every: time.Hour, Job: func(time.Time) fdbqueue.Job {
		return fdbqueue.Job{Value: []byte("x"), UniqueKey: u}
	}}
}

func costClaims() []costClaim {
	return []costClaim{
		// Queue.
		{
			name:  "Queue.Enqueue",
			claim: "one snapshot range read (limit 1) ... (one round trip), then three writes (the item, its journal record and an atomic add to a depth counter)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 2, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "Queue.Enqueue/retry",
			claim: "on a retry, one journal point read, issued together (one round trip)",
			setup: func(e *costEnv) { e.fill(3) },
			fail:  []error{kv.ErrNotCommitted},
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, Get: 1, RoundTrips: 1, Set: 2, Add: 1}},
		},
		{
			name:  "Queue.Enqueue/versionstamp",
			claim: "In versionstamp mode the range read is skipped",
			opts:  []fdbqueue.Option{fdbqueue.WithVersionstampOrder()},
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, VersionstampedKey: 1, Set: 1, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "WithoutIdempotency/Enqueue",
			claim: "no journal record to write (one write fewer) nor to read on a retry (one point read fewer)",
			opts:  []fdbqueue.Option{fdbqueue.WithoutIdempotency()},
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 1, Add: 1}},
		},
		{
			name:  "WithoutIdempotency/Enqueue/retry",
			claim: "no journal record to write (one write fewer) nor to read on a retry (one point read fewer)",
			opts:  []fdbqueue.Option{fdbqueue.WithoutIdempotency()},
			setup: func(e *costEnv) { e.fill(3) },
			fail:  []error{kv.ErrNotCommitted},
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 1, Add: 1}},
		},
		{
			name:  "WithOpID/Enqueue",
			claim: "reads its record and the ID's marker on every attempt (two point reads, issued with its other reads) ..., and it writes the marker beside its record",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				return e.q.Enqueue(e.ctx, e.db, []byte("x"), fdbqueue.WithOpID(fdbqueue.NewOpID()))
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, Get: 1, SnapGet: 1, RoundTrips: 1, Set: 2, VersionstampedValue: 1, Add: 1}},
		},
		{
			name:  "WithOpID/Dequeue in a caller's transaction",
			claim: "Given a Transaction and no WithOpID, an operation does without the journal (it neither reads nor writes a record)",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				return e.db.Transact(e.ctx, func(tr kv.Transaction) error {
					_, err := e.q.Dequeue(e.ctx, tr)
					return err
				})
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Add: 1}},
		},
		{
			name:  "Queue.Enqueue/first on a new queue",
			claim: "(doc.go) its first operations also read the stored configuration (the first on a new queue writes it ...) and declare the handle's journal retention",
			cold:  true,
			setup: func(e *costEnv) {},
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			// Snapshot reads of the stored configuration (none yet) and
			// of the declared retention, with the tail's: one round trip.
			// The configuration's write: the record, its claim's write
			// conflict key and the read conflict ranges around it
			// (config.go, confGate.write; docs/design.md); the
			// declaration, an atomic max (journal_expiry.go).
			want: []cost{{MetadataVersion: mvRead, SnapGet: 2, SnapRange: 1, RoundTrips: 1, Set: 1 + 2, Add: 1, Max: 1,
				ReadConflict: recordConflict + 2, WriteConflict: 1}},
		},
		{
			name:  "Queue.EnqueueBatch",
			claim: "Conflicts, cost and guarantees are those of Enqueue, with one write per item",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.q.EnqueueBatch(e.ctx, e.db, [][]byte{{1}, {2}, {3}}) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 3 + 1, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "Queue.Dequeue",
			claim: "one range read (limit 1) ..., then a clear, a journal record holding the item's value and an atomic add to a depth counter",
			setup: func(e *costEnv) { e.fill(3) },
			op:    dequeueOp,
			// The read is a normal one: its read conflict range is the
			// head's, and covers the record's key's need (a settling call
			// clears the item).
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1}},
		},
		{
			name:  "Queue.Dequeue/retry",
			claim: "on a retry, one journal point read, issued together",
			setup: func(e *costEnv) { e.fill(3) },
			fail:  []error{kv.ErrNotCommitted},
			op:    dequeueOp,
			// A retry reads the head with a snapshot read and adds the
			// head's read conflict range itself (ends.go, takeEnd).
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, Get: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1, ReadConflict: 1}},
		},
		{
			name:  "Queue.Dequeue/versionstamp",
			claim: "(the doc states no difference for the versionstamp layout)",
			opts:  []fdbqueue.Option{fdbqueue.WithVersionstampOrder()},
			setup: func(e *costEnv) { e.fill(3) },
			op:    dequeueOp,
			want:  []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1}},
		},
		{
			name:  "WithoutIdempotency/Dequeue",
			claim: "it writes no journal record",
			opts:  []fdbqueue.Option{fdbqueue.WithoutIdempotency()},
			setup: func(e *costEnv) { e.fill(3) },
			op:    dequeueOp,
			want:  []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Add: 1}},
		},
		{
			name:  "Queue.DequeueBatch",
			claim: "one range read and, on a retry, one journal point read, issued together (one round trip), then a clear per item taken, the journal record (for several items, one per item beside the journal slot's write ...) and an atomic add to a depth counter",
			setup: func(e *costEnv) { e.fill(5) },
			op: func(e *costEnv) error {
				_, err := e.q.DequeueBatch(e.ctx, e.db, 3)
				return err
			},
			// A snapshot read, and the read conflict range up to the last
			// item taken (ends.go, takeEnd).
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Clear: 3, Set: 3 + 1, Add: 1, ReadConflict: 1}},
		},
		{
			name:  "Queue.DequeueBatch/next operation",
			claim: "(the batch's records:) a later operation of the handle clears them; doc.go: usually one clear per operation",
			setup: func(e *costEnv) {
				e.fill(5)
				_, err := e.q.DequeueBatch(e.ctx, e.raw, 3)
				require.NoError(e.t, err)
			},
			op:   dequeueOp,
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1, ClearRange: 1}},
		},
		{
			name:  "Queue.Peek",
			claim: "It is a normal read (limit 1)",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Peek(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Empty",
			claim: "(a normal read, limit 1)",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Empty(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Len/Database",
			claim: "each a snapshot range read of at most LenChunk keys ... in about n/LenChunk transactions",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Len(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Len/Transaction",
			claim: "with one snapshot read of at most LenChunk keys",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				return e.db.Transact(e.ctx, func(tr kv.Transaction) error {
					_, err := e.q.Len(e.ctx, tr)
					return err
				})
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Depth",
			claim: "one snapshot range read of 8 small keys (one round trip)",
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Depth(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Clear",
			claim: "a range clear ... and resets the depth counters (a second range clear) ... Cost: the two range clears and one commit; no read but the stored configuration's",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.q.Clear(e.ctx, e.db) },
			want:  []cost{{MetadataVersion: mvRead, ClearRange: 2}},
		},
		{
			name:  "Queue.RepairDepth",
			claim: "per page, a range read of the items and one of the counters (issued together: a round trip a page) and, in the last page, when the counters are off, one atomic add",
			setup: func(e *costEnv) {
				e.fill(2)
				// An item of a client that keeps no depth counters.
				require.NoError(e.t, e.raw.Transact(e.ctx, func(tr kv.Transaction) error {
					k, err := e.q.Subspace().Pack([]any{int64(1 << 40), []byte("recipe-item-suffix")})
					tr.Set(k, []byte("r"))
					return err
				}))
				e.t.Cleanup(fdbqueue.SetRepairPage(2))
			},
			op: func(e *costEnv) error {
				n, err := e.q.RepairDepth(e.ctx, e.db)
				require.Equal(e.t, int64(3), n)
				return err
			},
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 1},
				{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 1, Add: 1},
			},
		},
		{
			name:  "Queue.Reconfigure",
			claim: "the record's point read, two range reads (limit 1) and three writes, one round trip",
			setup: func(e *costEnv) { e.fill(3); drain(e.t, e.raw, e.q) },
			op:    func(e *costEnv) error { return e.q.Reconfigure(e.ctx, e.db) },
			// The record, the epoch's add and the metadata version's bump;
			// the claim's write conflict key and the read conflict ranges
			// around it (config.go, confGate.write).
			want: []cost{{Get: 1, Range: 2, RoundTrips: 1, Set: 1, Add: 1, VersionstampedValue: 1, WriteConflict: 1, ReadConflict: 2}},
		},
		{
			name:  "Queue.WatchForItems/first",
			claim: "the first time, three writes (the stored configuration, an add to its epoch key and the metadata version's bump)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.db.Transact(e.ctx, e.watch) },
			want:  []cost{{MetadataVersion: mvRead, Watch: 1, Set: 1, Add: 1, VersionstampedValue: 1, WriteConflict: 1, ReadConflict: 2}},
		},
		{
			name:  "Queue.WatchForItems/after a change",
			claim: "after a change of the stored configuration, a snapshot read of it (one round trip)",
			setup: func(e *costEnv) {
				e.fill(3)
				require.NoError(e.t, e.raw.Transact(e.ctx, e.watch)) // the change
			},
			op:   func(e *costEnv) error { return e.db.Transact(e.ctx, e.watch) },
			want: []cost{{MetadataVersion: mvRead, SnapGet: 1, RoundTrips: 1, Watch: 1}},
		},
		{
			name:  "Queue.WatchForItems",
			claim: "Cost: the read of the metadata version (it comes with the read version) ... one watch",
			setup: func(e *costEnv) {
				e.fill(3)
				require.NoError(e.t, e.raw.Transact(e.ctx, e.watch))
				require.NoError(e.t, e.raw.Transact(e.ctx, e.watch))
			},
			op:   func(e *costEnv) error { return e.db.Transact(e.ctx, e.watch) },
			want: []cost{{MetadataVersion: mvRead, Watch: 1}},
		},

		// PriorityQueue.
		{
			name:  "PriorityQueue.Push",
			claim: "one snapshot range read inside the priority ..., then three writes (the item, its journal record, a depth counter's atomic add)",
			setup: func(e *costEnv) { e.pfill(4) },
			op:    func(e *costEnv) error { return e.pq.Push(e.ctx, e.db, []byte("x"), 1) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 2, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "PriorityQueue.PushBatch",
			claim: "one snapshot range read (limit 1, reverse) per distinct priority ..., all issued together (one round trip), then one write per item, one journal record for the call and a depth counter's atomic add",
			setup: func(e *costEnv) { e.pfill(4) },
			op: func(e *costEnv) error {
				return e.pq.PushBatch(e.ctx, e.db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}, {Value: []byte("y"), Priority: 7}, {Value: []byte("z"), Priority: 1}})
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 1, Set: 3 + 1, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "PriorityQueue.PushBatch/retry",
			claim: "and, on a retry, one journal point read, all issued together (one round trip)",
			setup: func(e *costEnv) { e.pfill(4) },
			fail:  []error{kv.ErrNotCommitted},
			op: func(e *costEnv) error {
				return e.pq.PushBatch(e.ctx, e.db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}, {Value: []byte("y"), Priority: 7}, {Value: []byte("z"), Priority: 1}})
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, Get: 1, RoundTrips: 1, Set: 3 + 1, Add: 1}},
		},
		{
			name:  "PriorityQueue.PopMin",
			claim: "Conflicts, cost and guarantees are those of Queue.Dequeue",
			setup: func(e *costEnv) { e.pfill(4) },
			op: func(e *costEnv) error {
				_, err := e.pq.PopMin(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1}},
		},
		{
			name:  "PriorityQueue.PopMax",
			claim: "(PopMin's: those of Queue.Dequeue)",
			setup: func(e *costEnv) { e.pfill(4) },
			op: func(e *costEnv) error {
				_, err := e.pq.PopMax(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1}},
		},
		{
			name:  "PriorityQueue.PopMinBatch",
			claim: "see Queue.DequeueBatch",
			setup: func(e *costEnv) { e.pfill(5) },
			op: func(e *costEnv) error {
				_, err := e.pq.PopMinBatch(e.ctx, e.db, 3)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Clear: 3, Set: 3 + 1, Add: 1, ReadConflict: 1}},
		},
		{
			name:  "PriorityQueue.PopMaxBatch",
			claim: "see Queue.DequeueBatch",
			setup: func(e *costEnv) { e.pfill(5) },
			op: func(e *costEnv) error {
				_, err := e.pq.PopMaxBatch(e.ctx, e.db, 3)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Clear: 3, Set: 3 + 1, Add: 1, ReadConflict: 1}},
		},
		{
			name:  "PriorityQueue.PeekMin",
			claim: "a normal read (limit 1...), one round trip",
			setup: func(e *costEnv) { e.pfill(3) },
			op: func(e *costEnv) error {
				_, err := e.pq.PeekMin(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "PriorityQueue.PeekMax",
			claim: "a normal read (limit 1...), one round trip",
			setup: func(e *costEnv) { e.pfill(3) },
			op: func(e *costEnv) error {
				_, err := e.pq.PeekMax(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "PriorityQueue.Clear",
			claim: "cost ... are Queue.Clear's",
			setup: func(e *costEnv) { e.pfill(3) },
			op:    func(e *costEnv) error { return e.pq.Clear(e.ctx, e.db) },
			want:  []cost{{MetadataVersion: mvRead, ClearRange: 2}},
		},
		{
			name:  "PriorityQueue.Reconfigure",
			claim: "the record's point read, three range reads (limit 1: the items and both ends' staged requests), three writes, one round trip",
			setup: func(e *costEnv) {},
			op:    func(e *costEnv) error { return e.pq.Reconfigure(e.ctx, e.db) },
			want:  []cost{{Get: 1, Range: 3, RoundTrips: 1, Set: 1, Add: 1, VersionstampedValue: 1, WriteConflict: 1, ReadConflict: 2}},
		},

		// JobQueue.
		{
			name:  "JobQueue.Add",
			claim: "one round trip (... none on a first attempt without unique keys), then per job four writes (value, record, ID index, unique key if any), two atomic adds to counters and a journal record, plus one atomic add to the signal key",
			setup: func(e *costEnv) { e.jfill(2) },
			op: func(e *costEnv) error {
				_, err := e.jq.Add(e.ctx, e.db, fdbqueue.Job{Value: []byte("x")})
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Set: 3 + 1, Add: 2 + 1, Clear: carriedClear, ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Add/unique key",
			claim: "one round trip (the journal, on a retry, and every unique key are read together ...), then per job four writes (value, record, ID index, unique key if any)",
			setup: func(e *costEnv) { e.jfill(2) },
			op: func(e *costEnv) error {
				_, err := e.jq.Add(e.ctx, e.db, fdbqueue.Job{Value: []byte("x"), UniqueKey: "u"})
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Set: 4 + 1, Add: 2 + 1, Clear: carriedClear, ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.AddBatch",
			claim: "per job four writes (..., unique key if any), two atomic adds to counters and a journal record, plus one atomic add to the signal key",
			setup: func(e *costEnv) { e.jfill(2) },
			op: func(e *costEnv) error {
				_, err := e.jq.AddBatch(e.ctx, e.db, []fdbqueue.Job{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Set: 3*3 + 3, Add: 3*2 + 1, Clear: carriedClear, ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Lease",
			claim: "two round trips (the candidates and the journal together, then the values of the jobs taken) ... per job, a clear, two small writes, four atomic counter operations (three adds and a compare-and-clear) and a journal record",
			setup: func(e *costEnv) { e.jfill(3) },
			op: func(e *costEnv) error {
				_, err := e.jq.Lease(e.ctx, e.db, 1, time.Minute)
				return err
			},
			// A read conflict key on each job taken (the candidates are a
			// snapshot read).
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, SnapGet: 1, RoundTrips: 2, Clear: 1 + carriedClear, Set: 2 + 1,
				Add: 3, CompareAndClear: 1, ReadConflict: recordConflict + 1}},
		},
		{
			name:  "JobQueue.Lease/2 jobs",
			claim: "(per job: a clear, two small writes, four atomic counter operations, a journal record)",
			setup: func(e *costEnv) { e.jfill(3) },
			op: func(e *costEnv) error {
				ls, err := e.jq.Lease(e.ctx, e.db, 2, time.Minute)
				require.Len(e.t, ls, 2)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, SnapGet: 2, RoundTrips: 2, Clear: 2 + carriedClear, Set: 2*2 + 2,
				Add: 2 * 3, CompareAndClear: 2, ReadConflict: recordConflict + 2}},
		},
		{
			name:  "JobQueue.Lease/past moved candidates",
			claim: "one more [round trip] for each read past moved candidates (twice as many each time)",
			setup: func(e *costEnv) {
				// Two jobs whose one lease expires: the next Lease moves
				// them to the dead-letter list; then a due job after them.
				for range 2 {
					mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("d"), MaxAttempts: 1})
				}
				mustLease(e.t, e.raw, e.jq, 2, time.Millisecond)
				e.clock.Advance(time.Second)
				e.jfill(1)
			},
			op: func(e *costEnv) error {
				ls, err := e.jq.Lease(e.ctx, e.db, 1, time.Minute)
				require.Len(e.t, ls, 1)
				return err
			},
			// Reads: the first candidate (moved), then two past it (one
			// moved, one taken), then the value taken. Each job moved:
			// a clear, its dead record and index, a bucket's add and
			// compare-and-clear, and adds to the leased, total and dead
			// counters (jobqueue_take.go, bury).
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, SnapGet: 1, RoundTrips: 3,
				Clear: 2*1 + 1 + carriedClear, Set: 2*2 + 2 + 1, Add: 2*4 + 3, CompareAndClear: 2*1 + 1, ReadConflict: recordConflict + 3}},
		},
		{
			name:  "JobQueue.SettleLease/none landed",
			claim: "one round trip (the journal record and the ID's marker) ...; otherwise a commit of the journal record and the marker",
			setup: func(e *costEnv) { e.jfill(2) },
			op: func(e *costEnv) error {
				ls, err := e.jq.SettleLease(e.ctx, e.db, fdbqueue.NewOpID())
				require.Empty(e.t, ls)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, SnapGet: 1, RoundTrips: 1, Set: 1, VersionstampedValue: 1,
				Clear: carriedClear}},
		},
		{
			name:  "JobQueue.SettleLease/landed",
			claim: "when the Lease committed, two more (the rest of its records, then the jobs' keys and values together), and a commit that writes nothing but a write conflict on the record's key",
			setup: func(e *costEnv) {
				e.jfill(2)
				e.id = fdbqueue.NewOpID()
				_, err := e.jq.Lease(e.ctx, e.raw, 1, time.Minute, fdbqueue.WithOpID(e.id))
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error {
				ls, err := e.jq.SettleLease(e.ctx, e.db, e.id)
				require.Len(e.t, ls, 1)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 2, SnapGet: 2, Range: 1, RoundTrips: 3, WriteConflict: 1}},
		},
		{
			name:  "JobQueue.Ack",
			claim: "one round trip ..., then three clears (four with a unique key), three counter adds and a compare-and-clear, and the journal record",
			setup: func(e *costEnv) { e.setLease("") },
			op:    func(e *costEnv) error { return e.jq.Ack(e.ctx, e.db, e.lease) },
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 3 + carriedClear, Add: 3, CompareAndClear: 1, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Ack/unique key",
			claim: "three clears (four with a unique key)",
			setup: func(e *costEnv) { e.setLease("u") },
			op:    func(e *costEnv) error { return e.jq.Ack(e.ctx, e.db, e.lease) },
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 4 + carriedClear, Add: 3, CompareAndClear: 1, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Ack/extended through another copy",
			claim: "(two more [round trips] if the lease was extended through another copy of the Lease)",
			setup: func(e *costEnv) {
				e.setLease("")
				e.old = e.lease
				_, err := e.jq.Extend(e.ctx, e.raw, e.lease, 2*time.Minute)
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error { return e.jq.Ack(e.ctx, e.db, e.old) },
			want: []cost{{MetadataVersion: mvRead, Get: 3, RoundTrips: 3, Clear: 3 + carriedClear, Add: 3, CompareAndClear: 1, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Nack",
			claim: "Ack's, except that instead of Ack's clears and counter changes it writes a clear, two writes, three counter adds, a compare-and-clear and a bump of the signal key",
			setup: func(e *costEnv) { e.setLease("") },
			op: func(e *costEnv) error {
				dead, err := e.jq.Nack(e.ctx, e.db, e.lease, fdbqueue.NackOptions{})
				require.False(e.t, dead)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1 + carriedClear, Set: 2 + 1, Add: 3 + 1, CompareAndClear: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Nack/dead",
			claim: "(when the job goes to the dead-letter list: four counter adds, no bump, and a clear of its unique key if any)",
			setup: func(e *costEnv) {
				mustAdd(e.t, e.raw, e.jq, fdbqueue.Job{Value: []byte("v"), MaxAttempts: 1})
				e.lease = mustLease(e.t, e.raw, e.jq, 1, time.Minute)[0]
			},
			op: func(e *costEnv) error {
				dead, err := e.jq.Nack(e.ctx, e.db, e.lease, fdbqueue.NackOptions{})
				require.True(e.t, dead)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1 + carriedClear, Set: 2 + 1, Add: 4, CompareAndClear: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Nack/NoRetry",
			claim: "(when the job goes to the dead-letter list [NoRetry, with attempts left]: four counter adds, no bump, and a clear of its unique key if any)",
			setup: func(e *costEnv) { e.setLease("u") }, // MaxAttempts: the queue's 10
			op: func(e *costEnv) error {
				dead, err := e.jq.Nack(e.ctx, e.db, e.lease, fdbqueue.NackOptions{NoRetry: true})
				require.True(e.t, dead)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 2 + carriedClear, Set: 2 + 1, Add: 4, CompareAndClear: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Schedule",
			claim: "one round trip (the marker, the slot's ID index entries, one range read that finds none or the slot's one job, and the job's unique key if it has one, read together), then, when it adds, Add's writes for one job (value, record, ID index, unique key if any, two counter adds, the signal bump) and the marker",
			setup: func(e *costEnv) {},
			op: func(e *costEnv) error {
				r, err := e.jq.Schedule(e.ctx, e.db, costSchedule(""), time.Time{})
				require.True(e.t, r.Added)
				return err
			},
			// No journal: no record, nothing carried.
			// The slot's ID index entries: a snapshot range read.
			want: []cost{{MetadataVersion: mvRead, Get: 1, SnapRange: 1, RoundTrips: 1, Set: 3 + 1, Add: 2 + 1}},
		},
		{
			name:  "JobQueue.Schedule/unique key",
			claim: "the marker, the slot's ID index entries ... and the job's unique key if it has one, read together",
			setup: func(e *costEnv) {},
			op: func(e *costEnv) error {
				r, err := e.jq.Schedule(e.ctx, e.db, costSchedule("u"), time.Time{})
				require.True(e.t, r.Added)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 2, SnapRange: 1, RoundTrips: 1, Set: 4 + 1, Add: 2 + 1}},
		},
		{
			name:  "JobQueue.Schedule/scheduled",
			claim: "nothing when the slot is scheduled",
			setup: func(e *costEnv) {
				_, err := e.jq.Schedule(e.ctx, e.raw, costSchedule(""), time.Time{})
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error {
				r, err := e.jq.Schedule(e.ctx, e.db, costSchedule(""), time.Time{})
				require.False(e.t, r.Added)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "JobQueue.Schedules",
			claim: "one round trip, one range read of up to limit markers ..., no write",
			setup: func(e *costEnv) {
				for _, name := range []string{"a", "b", "c"} {
					pj := costSchedule("")
					pj.Name = name
					_, err := e.jq.Schedule(e.ctx, e.raw, pj, time.Time{})
					require.NoError(e.t, err)
				}
			},
			op: func(e *costEnv) error {
				s, err := e.jq.Schedules(e.ctx, e.db, nil, 10)
				require.Len(e.t, s, 3)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "JobQueue.Unschedule",
			claim: "one round trip (the journal and the marker read together), then a clear and the journal record",
			setup: func(e *costEnv) {
				_, err := e.jq.Schedule(e.ctx, e.raw, costSchedule(""), time.Time{})
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error {
				_, err := e.jq.Unschedule(e.ctx, e.db, "cost")
				return err
			},
			// The journal on a first attempt under an ID of its own
			// reads nothing: the marker is the one read.
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1 + carriedClear, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Extend",
			claim: "one round trip and a commit of a clear, two writes, two counter adds and a compare-and-clear",
			setup: func(e *costEnv) { e.setLease("") },
			op: func(e *costEnv) error {
				_, err := e.jq.Extend(e.ctx, e.db, e.lease, 2*time.Minute)
				return err
			},
			// No journal: no record, nothing carried.
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1, Set: 2, Add: 2, CompareAndClear: 1}},
		},
		{
			name:  "JobQueue.Extend/earlier",
			claim: "and a bump of the signal key when the deadline moves earlier",
			setup: func(e *costEnv) { e.setLease("") },
			op: func(e *costEnv) error {
				_, err := e.jq.Extend(e.ctx, e.db, e.lease, time.Second)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1, Set: 2, Add: 2 + 1, CompareAndClear: 1}},
		},
		{
			name:  "JobQueue.Release",
			claim: "one round trip ..., then a clear, two writes, three counter adds, a compare-and-clear, a bump of the signal key and the journal record",
			setup: func(e *costEnv) { e.setLease("") },
			op:    func(e *costEnv) error { return e.jq.Release(e.ctx, e.db, e.lease, 0) },
			want: []cost{{MetadataVersion: mvRead, Get: 1, RoundTrips: 1, Clear: 1 + carriedClear, Set: 2 + 1, Add: 3 + 1, CompareAndClear: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Requeue",
			claim: "two round trips (three with a unique key), then two writes (three with a unique key, which it takes again), a clear and four counter adds, and the journal record",
			setup: func(e *costEnv) { e.kill("") },
			op:    func(e *costEnv) error { return e.jq.Requeue(e.ctx, e.db, e.dead) },
			want: []cost{{MetadataVersion: mvRead, Get: 2, RoundTrips: 2, Set: 2 + 1, Clear: 1 + carriedClear, Add: 4,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Requeue/unique key",
			claim: "two round trips (three with a unique key), then two writes (three with a unique key, which it takes again)",
			setup: func(e *costEnv) { e.kill("u") },
			op:    func(e *costEnv) error { return e.jq.Requeue(e.ctx, e.db, e.dead) },
			want: []cost{{MetadataVersion: mvRead, Get: 3, RoundTrips: 3, Set: 3 + 1, Clear: 1 + carriedClear, Add: 4,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.DeleteDead",
			claim: "Conflicts and cost are Requeue's (three clears, one counter add)",
			setup: func(e *costEnv) { e.kill("") },
			op:    func(e *costEnv) error { return e.jq.DeleteDead(e.ctx, e.db, e.dead) },
			want: []cost{{MetadataVersion: mvRead, Get: 2, RoundTrips: 2, Clear: 3 + carriedClear, Add: 1, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Cancel",
			claim: "two round trips (the journal and the index entry together, then the record), then three clears, two counter adds (three for a leased job), a compare-and-clear (two with a unique key) and the journal record. It does not bump the signal key",
			setup: func(e *costEnv) { e.queueJob("") },
			op:    func(e *costEnv) error { return e.jq.Cancel(e.ctx, e.db, e.job) },
			want: []cost{{MetadataVersion: mvRead, Get: 2, RoundTrips: 2, Clear: 3 + carriedClear, Add: 2, CompareAndClear: 1, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Cancel/leased, unique key",
			claim: "two counter adds (three for a leased job), a compare-and-clear (two with a unique key)",
			setup: func(e *costEnv) { e.setLease("u") },
			op:    func(e *costEnv) error { return e.jq.Cancel(e.ctx, e.db, e.job) },
			want: []cost{{MetadataVersion: mvRead, Get: 2, RoundTrips: 2, Clear: 3 + carriedClear, Add: 3, CompareAndClear: 2, Set: 1,
				ReadConflict: recordConflict}},
		},
		{
			name:  "JobQueue.Job",
			claim: "two round trips (the job's index entry and its value together, then its record), three point reads, no write",
			setup: func(e *costEnv) { e.setLease("u") },
			op: func(e *costEnv) error {
				info, err := e.jq.Job(e.ctx, e.db, e.job)
				require.Equal(e.t, fdbqueue.JobLeased, info.State)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Get: 3, RoundTrips: 2}},
		},
		{
			name:  "JobQueue.ListDead",
			claim: "one range read of the dead list and a point read of each value, in two round trips; normal reads",
			setup: func(e *costEnv) { e.kill(""); e.kill(""); e.kill("") },
			op: func(e *costEnv) error {
				d, err := e.jq.ListDead(e.ctx, e.db, nil, 10)
				require.Len(e.t, d, 3)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, Range: 1, Get: 3, RoundTrips: 2}},
		},
		{
			name:  "JobQueue.Stats",
			claim: "three counter reads, two range reads of the bucket counters ... and a read of the first job's key, all snapshot reads issued together: one round trip",
			setup: func(e *costEnv) { e.jfill(3) },
			op: func(e *costEnv) error {
				_, err := e.jq.Stats(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapGet: 3, SnapRange: 2 + 1, RoundTrips: 1}},
		},
	}
}

// TestCostClaims checks each "Cost:" claim of the doc comments (quoted
// in its row) against what the operation asks of its transactions, on a
// handle in its steady state: reads, writes, conflict ranges added and
// round trips (see costDB for how they are counted). A change of the code
// that changes a cost fails here until the doc comment says so too.
func TestCostClaims(t *testing.T) { runCostClaims(t, costClaims()) }

// runCostClaims checks claims. A staged call's last step may end without
// a commit: flush logs it.
func runCostClaims(t *testing.T, claims []costClaim) {
	for _, c := range claims {
		t.Run(c.name, func(t *testing.T) {
			e := newCostEnv(t, c)
			c.setup(e)
			e.db.take()
			e.db.failCommits(c.fail...)
			require.NoError(t, c.op(e))
			e.db.flush()
			require.Equal(t, c.want, e.db.take(), "claim: %s", c.claim)
		})
	}
}

// The wrapper's round trips: reads issued together and then waited on are
// one round trip, a read issued after a wait is another, and a wait on a
// read an earlier wait covered costs none; the metadata version costs
// none.
func TestCostDBRoundTrips(t *testing.T) {
	ctx := context.Background()
	db := newCostDB(newDB(t))
	k := func(i int) []byte { return []byte(fmt.Sprint("k", i)) }
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		m := tr.Get([]byte(kv.MetadataVersionKey))
		a, b := tr.Get(k(1)), tr.Snapshot().GetRange(kv.KeyRange{Begin: k(2), End: k(3)}, kv.RangeOptions{})
		if _, err := m.Get(); err != nil { // free
			return err
		}
		if _, err := a.Get(); err != nil { // 1
			return err
		}
		if _, err := b.GetSlice(); err != nil { // issued with a: covered
			return err
		}
		it := tr.GetRange(kv.KeyRange{Begin: k(4), End: k(5)}, kv.RangeOptions{}).Iterator()
		for it.Next() { // 2
		}
		tr.Set(k(6), nil)
		return it.Err()
	}))
	require.Equal(t, []cost{{MetadataVersion: 1, Get: 1, SnapRange: 1, Range: 1, RoundTrips: 2, Set: 1}}, db.take())
}

// The wrapper logs a staged step that ends without a commit: when it is
// reset (unless a read or its commit failed) or, the last one, at flush,
// once.
func TestCostDBUncommittedSteps(t *testing.T) {
	ctx := context.Background()
	db := newCostDB(newDB(t))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = tr.Get([]byte("a")).Get()
	require.NoError(t, err)
	tr.Reset() // a read-only step: logged
	tr.Set([]byte("b"), nil)
	db.failCommits(kv.ErrNotCommitted)
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
	tr.Reset() // failed: not logged
	_, err = tr.Snapshot().Get([]byte("c")).Get()
	require.NoError(t, err)
	db.flush()
	db.flush()
	require.Equal(t, []cost{{Get: 1, RoundTrips: 1}, {SnapGet: 1, RoundTrips: 1}}, db.take())
}
