package fdbqueue_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Settling a maybe-committed operation. A Queue or PriorityQueue
// operation given a Database without WithOpID records in a journal slot
// of its Queue value, not under its ID (docs/design.md, "Exactly once
// under commit_unknown_result"). When it fails with an error for which
// kv.MaybeCommitted is true, the queue logs its ID ("call it again with
// WithOpID(op_id) on this queue value to settle it"). A call of the same kind
// under that ID on the same value must then find the record in the slot:
// it used to read only the records under the ID, found nothing, and
// applied anew (a Dequeue whose commit had applied lost its item and
// took the next one; an Enqueue enqueued twice).
//
// The failures: commit_unknown_result_fatal (1022), which
// Transaction::onError does not retry (fdbclient/NativeAPI.actor.cpp), so
// it reaches the caller, with the commit applied or not (memdb's
// FailNextCommit); and a commit cut short by the context's end, which
// FoundationDB's client does not stop (RYWImpl::commit,
// fdbclient/ReadYourWrites.actor.cpp): it lands later, when the test releases
// it (memdb's HoldNextCommitLate, see interruptCommit).

// failedIDs is a slog handler that collects the op_id of every "may have
// committed" line.
type failedIDs struct {
	mu   sync.Mutex
	ids  []fdbqueue.OpID
	bad  []string
	msgs []string
}

func (h *failedIDs) Enabled(context.Context, slog.Level) bool { return true }
func (h *failedIDs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *failedIDs) WithGroup(string) slog.Handler            { return h }

func (h *failedIDs) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "may have committed") {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.msgs = append(h.msgs, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key != "op_id" {
			return true
		}
		b, err := hex.DecodeString(a.Value.String())
		var id fdbqueue.OpID
		if err != nil || len(b) != len(id) {
			h.bad = append(h.bad, a.Value.String())
			return false
		}
		copy(id[:], b)
		h.ids = append(h.ids, id)
		return false
	})
	return nil
}

// take returns the one ID logged since the last take.
func (h *failedIDs) take(t *testing.T) fdbqueue.OpID {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Empty(t, h.bad, "op_id values that are not IDs")
	require.Len(t, h.ids, 1, "one operation logged as maybe committed")
	require.Contains(t, h.msgs[0], "WithOpID(op_id) on this queue value", "the advice names where it works")
	id := h.ids[0]
	h.ids, h.msgs = nil, nil
	return id
}

func loggedIDs() (*failedIDs, fdbqueue.Option) {
	h := &failedIDs{}
	return h, fdbqueue.WithLogger(slog.New(h))
}

// failure makes the next commit of a queue operation fail maybe-committed
// (applied or not), or be interrupted by its context's end and land only
// when the returned release is called.
type failure struct {
	name        string
	interrupted bool
	applied     bool // FailNextCommit: the commit applied
}

var failures = []failure{
	{name: "unknown result, applied", applied: true},
	{name: "unknown result, not applied"},
	{name: "interrupted", interrupted: true},
}

// fail runs op under f; release lands an interrupted commit (a no-op
// otherwise).
func (f failure) fail(t *testing.T, db *memdb.DB, op func(ctx context.Context) error) (release func()) {
	t.Helper()
	var err error
	release = func() {}
	if f.interrupted {
		release, err = interruptCommit(t, db, op)
	} else {
		db.FailNextCommit(kv.ErrCommitUnknownResultFatal, f.applied)
		err = op(context.Background())
	}
	require.True(t, kv.MaybeCommitted(err), "the commit may have applied: %v", err)
	return release
}

// The reviewer's scenario: a Dequeue fails maybe-committed and is
// settled with the logged ID. The settling call returns the first item
// whether or not the failed commit applied, and it is taken once. For an
// interrupted commit, the commit lands before the settling call, while
// it runs (after its read: it then conflicts, as a retry would, and
// finds the record), or after it (then it conflicts, having read the item
// the settling call took).
func TestSettleDequeueInSlot(t *testing.T) {
	ctx := context.Background()
	for _, f := range failures {
		lands := []string{""}
		if f.interrupted {
			lands = []string{"before", "during", "after"}
		}
		for _, land := range lands {
			t.Run(strings.TrimSpace(f.name+" "+land), func(t *testing.T) {
				db := newDB(t)
				logs, logger := loggedIDs()
				q := mustQueue(t, "settle", logger)
				require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
				release := f.fail(t, db, func(ctx context.Context) error {
					_, err := q.Dequeue(ctx, db)
					return err
				})
				id := logs.take(t)
				settle := func() ([]byte, error) { return q.Dequeue(ctx, db, fdbqueue.WithOpID(id)) }
				var v []byte
				var err error
				switch land {
				case "before":
					release()
					v, err = settle()
				case "during":
					held, go2 := db.HoldNextCommit()
					type res struct {
						v   []byte
						err error
					}
					got := make(chan res, 1)
					go func() { v, err := settle(); got <- res{v, err} }()
					recvWithin(t, held, "the settling call's commit held")
					release()
					go2()
					r := recvWithin(t, got, "the settling call's return")
					v, err = r.v, r.err
				default:
					v, err = settle()
					release()
				}
				require.NoError(t, err)
				require.Equal(t, "a", string(v), "the settling call returns the first item")
				require.Equal(t, []string{"b"}, drain(t, db, q), "nothing lost, nothing taken twice")
			})
		}
	}
}

// With a MeterProvider, operations run their transactions through the
// observed Database (metrics.go): the failed call and the settling one
// still share the slot.
func TestSettleDequeueInSlotMetered(t *testing.T) {
	ctx := context.Background()
	for _, f := range []failure{failures[0], failures[2]} {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			q := mustQueue(t, "settle-metered", logger, fdbqueue.WithMeterProvider(noop.NewMeterProvider()))
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
			release := f.fail(t, db, func(ctx context.Context) error {
				_, err := q.Dequeue(ctx, db)
				return err
			})
			release()
			v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(logs.take(t)))
			require.NoError(t, err)
			require.Equal(t, "a", string(v))
			require.Equal(t, []string{"b"}, drain(t, db, q))
		})
	}
}

// An Enqueue that failed maybe-committed and is settled under its ID
// enqueues its item once: the settling call finds the record the failed
// commit left in the slot, or, if that commit did not apply, enqueues it
// now. An interrupted commit that lands while the settling call runs
// makes it conflict (it read the slot key) and then find the record;
// nothing else of the two conflicts (an enqueue reads the tail with a
// snapshot read), so this is the read that keeps the item single.
func TestSettleEnqueueInSlot(t *testing.T) {
	ctx := context.Background()
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			q := mustQueue(t, "settle-enq", logger)
			release := f.fail(t, db, func(ctx context.Context) error {
				return q.Enqueue(ctx, db, []byte("x"))
			})
			id := logs.take(t)
			settle := func() error { return q.Enqueue(ctx, db, []byte("x"), fdbqueue.WithOpID(id)) }
			if f.interrupted {
				held, go2 := db.HoldNextCommit()
				done := make(chan error, 1)
				go func() { done <- settle() }()
				recvWithin(t, held, "the settling call's commit held")
				release()
				go2()
				require.NoError(t, recvWithin(t, done, "the settling call's return"))
			} else {
				require.NoError(t, settle())
			}
			require.Equal(t, []string{"x"}, drain(t, db, q), "enqueued once")
		})
	}
}

// A PriorityQueue's PopMin settles as a Queue's Dequeue does.
func TestSettlePopMinInSlot(t *testing.T) {
	ctx := context.Background()
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			pq := mustPQ(t, "settle-pop", logger)
			require.NoError(t, pq.Push(ctx, db, []byte("a"), 1))
			require.NoError(t, pq.Push(ctx, db, []byte("b"), 2))
			release := f.fail(t, db, func(ctx context.Context) error {
				_, err := pq.PopMin(ctx, db)
				return err
			})
			id := logs.take(t)
			release()
			it, err := pq.PopMin(ctx, db, fdbqueue.WithOpID(id))
			require.NoError(t, err)
			require.Equal(t, fdbqueue.Item{Value: []byte("a"), Priority: 1}, it)
			it, err = pq.PopMin(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "b", string(it.Value))
			_, err = pq.PopMin(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		})
	}
}

// A value that does not fit the slot with the ID (kv.MaxValueSize bytes)
// is recorded under the ID, the slot saying so: the settling call finds
// it through the slot, and its records are cleared once it returns (the
// journal then holds only its slot keys: see TestJournalQueueLeavesNoRecords).
// The slot, which the failed call's commit wrote and the settling call
// only read, is free again: the epoch keeps one slot. It used to stay
// dropped until its epoch expired (two slots).
func TestSettleDequeueRecordedElsewhere(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0xab}, kv.MaxValueSize)
	db := newDB(t)
	logs, logger := loggedIDs()
	q := mustQueue(t, "settle-big", logger)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{big, []byte("b")}))
	failures[0].fail(t, db, func(ctx context.Context) error {
		_, err := q.Dequeue(ctx, db)
		return err
	})
	id := logs.take(t)
	v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, big, v)
	require.Equal(t, []string{"b"}, drain(t, db, q))
	settleQueue(t, db, q)
	slots := fdbqueue.JournalSlotKeys(q)
	require.Len(t, slots, 1, "the settled slot is reused")
	requireJournalWithin(t, db, q.Subspace(), slots)
}

// After a settling call that found the failed call's record, the slot is
// free again for the next operations, and the journal keeps nothing of
// the settled operation (the next operations carry its clears). After a
// settling call that applied the operation itself, the slot stays dropped:
// the failed call's commit, if cut short by a cancellation, might still
// land on it.
func TestSettleReleasesTheSlot(t *testing.T) {
	ctx := context.Background()
	for _, f := range failures[:2] {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			q := mustQueue(t, "settle-free", logger)
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
			f.fail(t, db, func(ctx context.Context) error {
				_, err := q.Dequeue(ctx, db)
				return err
			})
			id := logs.take(t)
			require.Empty(t, fdbqueue.JournalFreeSlots(q), "the failed call's slot is not reused")
			require.Equal(t, 1, fdbqueue.JournalUnsettled(q), "it is remembered for a settling call")
			v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
			require.NoError(t, err)
			require.Equal(t, "a", string(v))
			require.Zero(t, fdbqueue.JournalUnsettled(q), "settled: forgotten")
			want := 1 // the slot is reused
			if !f.applied {
				want = 2 // dropped: a new one
				require.Empty(t, fdbqueue.JournalFreeSlots(q))
			} else {
				require.Equal(t, []int64{0}, fdbqueue.JournalFreeSlots(q))
			}
			settleQueue(t, db, q)
			slots := fdbqueue.JournalSlotKeys(q)
			require.Len(t, slots, want)
			requireJournalWithin(t, db, q.Subspace(), slots)
		})
	}
}

// A settling call that fails maybe-committed again leaves the slot
// remembered: a third call under the ID finds what the second one's
// commit wrote there.
func TestSettleTwice(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	logs, logger := loggedIDs()
	q := mustQueue(t, "settle-twice", logger)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	failures[1].fail(t, db, func(ctx context.Context) error { // not applied
		_, err := q.Dequeue(ctx, db)
		return err
	})
	id := logs.take(t)
	failures[0].fail(t, db, func(ctx context.Context) error { // applied
		_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		return err
	})
	require.Equal(t, id, logs.take(t))
	require.Equal(t, 1, fdbqueue.JournalUnsettled(q))
	v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, "a", string(v))
	require.Equal(t, []string{"b"}, drain(t, db, q))
}

// gateDB holds its first Transact until proceed is closed, after closing
// entered: a call given it has begun (it resumed the remembered slot) but
// run no attempt yet.
type gateDB struct {
	kv.Database
	entered, proceed chan struct{}
}

func (d *gateDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	close(d.entered)
	<-d.proceed
	return d.Database.Transact(ctx, fn)
}

// Two overlapping calls settle a logged DequeueBatch whose result did not
// fit its slot (the slot says the records under its ID hold it). The
// first to return must not clear those records while the other runs: it
// would find the slot's ID and no record, take the operation for not
// applied and take again. (Found by an audit of the journal: the first
// call queued the clear, the handle's next operation carried it.)
func TestSettleOverlappingCallsKeepTheRecordsElsewhere(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	logs, logger := loggedIDs()
	q := mustQueue(t, "settle-overlap", logger)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c"), []byte("d")}))
	failures[0].fail(t, db, func(ctx context.Context) error { // applied
		_, err := q.DequeueBatch(ctx, db, 2)
		return err
	})
	id := logs.take(t)
	require.Equal(t, 1, fdbqueue.JournalUnsettled(q))

	gate := &gateDB{Database: db, entered: make(chan struct{}), proceed: make(chan struct{})}
	type result struct {
		v   [][]byte
		err error
	}
	second := make(chan result, 1)
	go func() {
		v, err := q.DequeueBatch(ctx, gate, 2, fdbqueue.WithOpID(id))
		second <- result{v, err}
	}()
	recvWithin(t, gate.entered, "the second settling call's start")

	v, err := q.DequeueBatch(ctx, db, 2, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, toStrings(v), "the first settling call replays the operation")
	require.NoError(t, q.Enqueue(ctx, db, []byte("e"))) // the handle's next operation

	close(gate.proceed)
	r := recvWithin(t, second, "the second settling call's return")
	require.NoError(t, r.err)
	require.Equal(t, []string{"a", "b"}, toStrings(r.v), "the second settling call replays the same operation")
	require.Equal(t, []string{"c", "d", "e"}, drain(t, db, q), "the operation took a and b once")
	require.Zero(t, fdbqueue.JournalUnsettled(q), "settled: forgotten")
	settleQueue(t, db, q)
	requireJournalWithin(t, db, q.Subspace(), fdbqueue.JournalSlotKeys(q))
}

// An ID the journal does not remember (made by the caller) is unchanged:
// the operation records under it, not in a slot, and a remembered slot
// is left alone; a call of another kind under a remembered ID is refused
// (ErrInvalidArgument) and writes nothing, so that its marker cannot keep
// the remembered call from being settled.
func TestSettleOnlyTheRememberedOperation(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	logs, logger := loggedIDs()
	q := mustQueue(t, "settle-other", logger)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	failures[0].fail(t, db, func(ctx context.Context) error {
		_, err := q.Dequeue(ctx, db)
		return err
	})
	id := logs.take(t)

	other := fdbqueue.NewOpID()
	v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(other))
	require.NoError(t, err)
	require.Equal(t, "b", string(v))
	rng := fdbqueue.JournalRecordRange(q, other)
	var recs []kv.KeyValue
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		var err error
		recs, err = tr.GetRange(rng, kv.RangeOptions{}).GetSlice()
		return err
	}))
	require.NotEmpty(t, recs, "recorded under its own ID")
	require.Equal(t, 1, fdbqueue.JournalUnsettled(q), "the remembered slot is still there")

	// An Enqueue under the Dequeue's ID neither takes the Dequeue's
	// record for its own nor enqueues.
	require.ErrorIs(t, q.Enqueue(ctx, db, []byte("d"), fdbqueue.WithOpID(id)), fdbqueue.ErrInvalidArgument)
	require.Equal(t, 1, fdbqueue.JournalUnsettled(q))
	require.Equal(t, []string{"c"}, drain(t, db, q))
}

// A slot of an epoch that has since ended is still read by the settling
// call, within the retention, and is not handed to the new epoch's free
// list (its number there names another key). Past the retention the
// settling call fails with ErrOperationExpired, as any call under an ID
// that old.
func TestSettleAcrossEpochs(t *testing.T) {
	ctx := context.Background()
	const retention = 8 * time.Minute // slot epochs of one minute
	for _, expired := range []bool{false, true} {
		name := map[bool]string{false: "within the retention", true: "expired"}[expired]
		t.Run(name, func(t *testing.T) {
			db := newDB(t)
			clock := newFakeClock()
			logs, logger := loggedIDs()
			q := mustQueue(t, "settle-epoch", logger, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(retention))
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
			failures[0].fail(t, db, func(ctx context.Context) error {
				_, err := q.Dequeue(ctx, db)
				return err
			})
			id := logs.take(t)
			clock.Advance(retention / 8)
			require.NoError(t, q.Enqueue(ctx, db, []byte("c"))) // a new epoch: its slot 0, free again
			require.Equal(t, []int64{0}, fdbqueue.JournalFreeSlots(q))
			if expired {
				clock.Advance(retention)
				_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
				require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
				return
			}
			v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
			require.NoError(t, err)
			require.Equal(t, "a", string(v))
			require.Equal(t, []int64{0}, fdbqueue.JournalFreeSlots(q), "the old epoch's slot 0 is not the new one's")
			require.Equal(t, []string{"b", "c"}, drain(t, db, q))
		})
	}
}

// A producer's first attempt reads nothing a settling call writes, so its
// commit, interrupted by its context and landing only after a settling
// call that found no record and added the item itself, would add it a
// second time. The first attempt therefore declares a read conflict on
// the key its record goes to (op.check): the late commit conflicts. For
// a Queue's Enqueue (recorded in a slot) and a JobQueue's Add (recorded
// under its ID).
func TestSettleProducerLandingLate(t *testing.T) {
	ctx := context.Background()
	t.Run("Enqueue", func(t *testing.T) {
		db := newDB(t)
		logs, logger := loggedIDs()
		q := mustQueue(t, "settle-late", logger)
		release, err := interruptCommit(t, db, func(ctx context.Context) error { return q.Enqueue(ctx, db, []byte("x")) })
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		require.NoError(t, q.Enqueue(ctx, db, []byte("x"), fdbqueue.WithOpID(logs.take(t))), "settled: not applied yet, so applied now")
		release() // the first commit lands, after the settling call's
		require.Equal(t, []string{"x"}, drain(t, db, q), "enqueued once")
	})
	t.Run("JobQueue.Add", func(t *testing.T) {
		db := newDB(t)
		logs, logger := loggedIDs()
		jq := mustJobQueue(t, "settle-late-jobs", fdbqueue.JobQueueConfig{}, logger)
		release, err := interruptCommit(t, db, func(ctx context.Context) error {
			_, err := jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")})
			return err
		})
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")}, fdbqueue.WithOpID(logs.take(t)))
		require.NoError(t, err)
		release()
		st, err := jq.Stats(ctx, db)
		require.NoError(t, err)
		require.Equal(t, int64(1), st.Queued, "added once")
	})
}

// A Lease given a Database, whose commit is cut short by its context and
// lands late (FoundationDB's commit goes on after a cancellation:
// RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp), settled under the
// logged ID by a call that took another job. The first attempt read its
// candidates with a snapshot read and conflicts only on the job it took
// (jobqueue_lease.go), and, under an ID of its own making, read no
// journal record: nothing the settling call wrote was in its read
// conflict set, so its commit applied after the settling call's, and
// the one logical Lease leased two jobs: the settling call's, and one
// that no caller ever saw, which came back only when that lease expired,
// with an attempt counted (dead, on its last attempt). Its late commit
// must conflict (FoundationDB checks a commit's read conflict ranges
// against the writes committed after its read version,
// fdbserver/Resolver.actor.cpp) as a producer's does
// (TestSettleProducerLandingLate).
//
// The settling call takes another job because one that sorts first (due
// earlier) was added meanwhile: with Choice 1 a Lease takes the first
// due job, so the test is deterministic.
func TestSettleLeaseLandingLate(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	logs, logger := loggedIDs()
	jq := mustJobQueue(t, "settle-lease-late", fdbqueue.JobQueueConfig{Choice: 1}, logger)
	_, err := jq.Add(ctx, db, fdbqueue.Job{Value: []byte("a"), MaxAttempts: 1})
	require.NoError(t, err)
	release, err := interruptCommit(t, db, func(ctx context.Context) error {
		_, err := jq.Lease(ctx, db, 1, time.Hour)
		return err
	})
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	id := logs.take(t)

	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("z"), RunAt: time.Now().Add(-time.Hour)})
	require.NoError(t, err)
	leases, err := jq.Lease(ctx, db, 1, time.Hour, fdbqueue.WithOpID(id))
	require.NoError(t, err, "settled: the first call had not committed, so it leases now")
	require.Len(t, leases, 1)
	require.Equal(t, "z", string(leases[0].Value), "the first due job")
	release() // the first call's commit lands, after the settling call's

	st := mustStats(t, db, jq)
	require.Equal(t, int64(1), st.Leased, "one Lease call, one job leased")
	more, err := jq.Lease(ctx, db, 1, time.Hour)
	require.NoError(t, err, "job a is still due")
	require.Equal(t, "a", string(more[0].Value))
	require.Equal(t, 1, more[0].Attempt, "its first attempt")
}

// settleOnLog is a slog handler that settles, as soon as it is logged, an
// operation that may have committed: it calls settle with the logged ID
// and keeps the result.
type settleOnLog struct {
	failedIDs
	settle  func(id fdbqueue.OpID) ([]byte, error)
	settled bool
	got     []byte
	err     error
}

func (h *settleOnLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *settleOnLog) WithGroup(string) slog.Handler      { return h }

func (h *settleOnLog) Handle(ctx context.Context, r slog.Record) error {
	if err := h.failedIDs.Handle(ctx, r); err != nil || len(h.ids) == 0 || h.settled {
		return err
	}
	h.settled = true
	h.got, h.err = h.settle(h.ids[0])
	return nil
}

// The queue logged a maybe-committed operation's ID before it remembered
// the operation's slot, so a call made as soon as the line was logged (a
// handler that hands the ID to a goroutine that settles) did not resume
// the slot: it read the records under the ID only, found nothing, and
// dequeued the next item, while the first call's commit had taken the
// first one (lost, its record in a slot no one reads). The slot is now
// remembered before the line is logged. The handler here settles
// synchronously, which makes the order deterministic.
func TestSettleFromTheLogLine(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	h := &settleOnLog{}
	q := mustQueue(t, "settle-on-log", fdbqueue.WithLogger(slog.New(h)))
	h.settle = func(id fdbqueue.OpID) ([]byte, error) { return q.Dequeue(ctx, db, fdbqueue.WithOpID(id)) }
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
	_, err := q.Dequeue(ctx, db)
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	require.NoError(t, h.err)
	require.Equal(t, "a", string(h.got), "the settling call returns the item the first call took")
	require.Equal(t, []string{"b"}, drain(t, db, q))
}
