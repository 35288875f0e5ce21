package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// The journal's records of completed operations do not stay behind until
// expiry. docs/design.md, "Exactly once under commit_unknown_result":
// an operation given a Database under an ID of its own making records in
// a slot of its Queue value, which "the next operation overwrites"; a
// result that does not fit the slot's value ("a batch, or a value near
// the 100,000-byte limit") is written as records under the ID; and the
// records under an ID of an operation that ran its own transactions and
// returned are "cleared by the next operation of the same Queue value, as
// one extra clear in that operation's transaction (of the record's one
// key, or of its range if it has several)". Only records of operations
// inside callers' transactions, abandoned ones, and slots dropped after an
// error are left to expire. So once a few ordinary operations (slotted,
// one result that fits the slot) have carried every clear, the journal
// holds at most one key per slot of the current epoch: one for
// sequential calls, one more for a slot dropped after an error. None of
// these tests lets time pass, so expiry (records twice the retention old)
// clears nothing here: what is gone, the clears under test removed.

// requireJournalWithin fails unless every key of the journal of the queue
// in sub is one of slots or lies in one of recs, and lists those that are
// not.
func requireJournalWithin(t *testing.T, db kv.Database, sub fdbqueue.Subspace, slots [][]byte, recs ...kv.KeyRange) {
	t.Helper()
	allowed := make(map[string]bool, len(slots))
	for _, k := range slots {
		allowed[string(k)] = true
	}
	keys := journalKeys(t, db, sub)
	var leaked []string
	for _, k := range keys {
		in := allowed[string(k)]
		for _, r := range recs {
			in = in || bytes.Compare(r.Begin, k) <= 0 && bytes.Compare(k, r.End) < 0
		}
		if !in {
			leaked = append(leaked, fmt.Sprintf("%x", k))
		}
	}
	require.Empty(t, leaked, "journal records left behind (%d of the journal's %d keys)", len(leaked), len(keys))
}

// settleQueue runs ordinary operations of q: they record in their slot
// and carry the clears still pending (at most 8 each, journal.beginInto),
// adding none of their own.
func settleQueue(t *testing.T, db kv.Database, q *fdbqueue.Queue) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		require.NoError(t, q.Enqueue(ctx, db, []byte("settle")))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
}

// settlePQ is settleQueue for a priority queue.
func settlePQ(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue) {
	t.Helper()
	ctx := context.Background()
	for range 3 {
		require.NoError(t, pq.Push(ctx, db, []byte("settle"), 0))
		_, err := pq.PopMin(ctx, db)
		require.NoError(t, err)
	}
}

func withID() fdbqueue.OpOption { return fdbqueue.WithOpID(fdbqueue.NewOpID()) }

// A Queue's operations of every result shape, and operations that fail
// after taking over the clears of earlier ones, leave no record behind
// once ordinary operations have followed them: the journal then holds
// only its slot keys (see the bound above).
func TestJournalQueueLeavesNoRecords(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0xab}, kv.MaxValueSize) // the largest stored value
	cases := []struct {
		name  string
		slots int // the slots the epoch ends up with
		run   func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue)
	}{
		{"one result under an ID", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// Under a caller's ID an operation does not use a slot: its
			// one record key is cleared by the next operation.
			for _, v := range []string{"a", "b"} {
				require.NoError(t, q.Enqueue(ctx, db, []byte(v), withID()))
			}
			for range 2 {
				_, err := q.Dequeue(ctx, db, withID())
				require.NoError(t, err)
			}
		}},
		{"a batch under an ID", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// A batch dequeue records one key per item: the next operation
			// clears their range, not only the first key.
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, withID()))
			vs, err := q.DequeueBatch(ctx, db, 3, withID())
			require.NoError(t, err)
			require.Len(t, vs, 3)
		}},
		{"a batch recovered under its ID", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// A DequeueBatch fails with an error that may hide a commit
			// (commit_unknown_result_fatal, which Transaction::onError
			// does not retry: fdbclient/NativeAPI.actor.cpp), and its
			// commit applied; it is called again with its ID to recover
			// its items (WithOpID). Its records stay for that call, which
			// finds them and returns the items without recording: then
			// nothing will read them again, and the next operations clear
			// their whole range. They used to clear only the first.
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			id := fdbqueue.NewOpID()
			db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
			_, err := q.DequeueBatch(ctx, db, 3, fdbqueue.WithOpID(id))
			require.True(t, kv.MaybeCommitted(err), "the commit may have applied: %v", err)
			vs, err := q.DequeueBatch(ctx, db, 3, fdbqueue.WithOpID(id))
			require.NoError(t, err)
			require.Equal(t, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, vs, "the recovery returns the items the first call took")
		}},
		{"a batch in a slot", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// A slotted batch's results do not fit its slot: they are
			// records under its ID, the slot says so, and those records
			// are cleared by their range.
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			vs, err := q.DequeueBatch(ctx, db, 3)
			require.NoError(t, err)
			require.Len(t, vs, 3)
		}},
		{"values at the limit", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// A value of kv.MaxValueSize bytes does not fit a slot's value
			// with the ID: it is a record under the ID (one key, not
			// chunked: the record is exactly the limit), cleared as a
			// slotted operation's records are. Under a caller's ID it is
			// a record of one key.
			for range 2 {
				require.NoError(t, q.Enqueue(ctx, db, big))
			}
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, big, v)
			v, err = q.Dequeue(ctx, db, withID())
			require.NoError(t, err)
			require.Equal(t, big, v)
		}},
		{"an empty dequeue hands its clears back", 1, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// The Dequeue that finds the queue empty has taken over the
			// clear of the one before it (journal.beginInto) but commits
			// nothing: the clear goes back to the journal for the next
			// operation (op.end).
			require.NoError(t, q.Enqueue(ctx, db, []byte("a"), withID()))
			_, err := q.Dequeue(ctx, db, withID())
			require.NoError(t, err)
			_, err = q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		}},
		{"a failed commit hands its clears back", 2, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// commit_unknown_result_fatal (1022) is not retried: it is not
			// among the errors Transaction::onError retries
			// (fdbclient/NativeAPI.actor.cpp). The Enqueue fails after
			// taking over the clear of the one before it; the commit did
			// not apply, so the clear goes back. The failed operation's
			// slot is dropped (it might have been written): the epoch has
			// two slots.
			require.NoError(t, q.Enqueue(ctx, db, []byte("a"), withID()))
			db.FailNextCommit(kv.ErrCommitUnknownResultFatal, false)
			err := q.Enqueue(ctx, db, []byte("b"))
			require.ErrorIs(t, err, kv.ErrCommitUnknownResultFatal)
		}},
		{"an interrupted commit that never lands hands its clears back", 2, func(t *testing.T, db *memdb.DB, q *fdbqueue.Queue) {
			// A Dequeue takes over the clear of the Enqueue before it, and
			// its context ends while its commit is in flight; that commit
			// goes on (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp) but
			// conflicts, as another Dequeue took its item meanwhile
			// (memdb's HoldNextCommitLate, see interruptCommit). The clear
			// it carried must reach the journal again, through the
			// operations after it.
			require.NoError(t, q.Enqueue(ctx, db, []byte("x1")))
			require.NoError(t, q.Enqueue(ctx, db, []byte("x2"), withID()))
			release, err := interruptCommit(t, db, func(ctx context.Context) error {
				_, err := q.Dequeue(ctx, db)
				return err
			})
			require.True(t, kv.MaybeCommitted(err), "an interrupted commit may have applied: %v", err)
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, []byte("x1"), v)
			release()
			require.Equal(t, []string{"x2"}, drain(t, db, q), "the late Dequeue conflicted: x1 was taken once")
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, q := newDB(t), mustQueue(t, "noleak")
			c.run(t, db, q)
			settleQueue(t, db, q)
			slots := fdbqueue.JournalSlotKeys(q)
			require.Len(t, slots, c.slots, "sequential operations share a slot, one more after a dropped one")
			requireJournalWithin(t, db, q.Subspace(), slots)
		})
	}
}

// An EnqueueBatch that is refused (ErrBatchTooLarge, before any attempt)
// hands back the clears it took over (journal.beginInto) as any failed
// operation does (op.end). It used not to end its operation at all: the
// clears of the records of the operation before it were lost, and those
// records stayed until expiry. No attempt wrote its slot, which is
// therefore free again (op.end): the next operation takes it, and the
// epoch has one slot (it had two while an error dropped the slot). See
// TestJournalQueueLeavesNoRecords for the bound.
func TestJournalRefusedBatchHandsBackClears(t *testing.T) {
	ctx := context.Background()
	big := bytes.Repeat([]byte{0xab}, kv.MaxValueSize)
	cases := []struct {
		name  string
		opts  []fdbqueue.Option
		batch [][]byte
		msg   string
	}{
		{"over the budget", nil, slices.Repeat([][]byte{big}, fdbqueue.DefaultBatchBudget/len(big)+1), "budget"},
		{"over the user versions", []fdbqueue.Option{fdbqueue.WithVersionstampOrder(), fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget)},
			slices.Repeat([][]byte{{1}}, 1<<16+1), "versionstamp mode allows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db, q := newDB(t), mustQueue(t, "refused", c.opts...)
			require.NoError(t, q.Enqueue(ctx, db, []byte("a"), withID()))
			err := q.EnqueueBatch(ctx, db, c.batch)
			require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
			require.ErrorContains(t, err, c.msg)
			settleQueue(t, db, q)
			slots := fdbqueue.JournalSlotKeys(q)
			require.Len(t, slots, 1, "the refused batch's slot, reused")
			requireJournalWithin(t, db, q.Subspace(), slots)
		})
	}
}

// A PriorityQueue's pop record is 9 bytes longer than the stored value
// (appendPopRecord): a pop of a value near the limit writes a record in
// chunks (codec.go, setChunked), which must be cleared with all its
// chunks, and a record of exactly the limit is one key. See
// TestJournalQueueLeavesNoRecords for the bound.
func TestJournalPriorityQueueLeavesNoRecords(t *testing.T) {
	ctx := context.Background()
	db, pq := newDB(t), mustPQ(t, "noleak")
	for _, n := range []int{kv.MaxValueSize - 9, kv.MaxValueSize - 8, kv.MaxValueSize} {
		v := bytes.Repeat([]byte{0xcd}, n)
		for range 2 {
			require.NoError(t, pq.Push(ctx, db, v, int64(n), withID()))
		}
		it, err := pq.PopMin(ctx, db) // in a slot: its record is under its ID
		require.NoError(t, err)
		require.Equal(t, v, it.Value)
		it, err = pq.PopMax(ctx, db, withID())
		require.NoError(t, err)
		require.Equal(t, v, it.Value)
	}
	// A pop of a chunked record that may have committed, recovered by a
	// call under its ID (see TestJournalQueueLeavesNoRecords).
	v := bytes.Repeat([]byte{0xef}, kv.MaxValueSize)
	require.NoError(t, pq.Push(ctx, db, v, 1))
	id := fdbqueue.NewOpID()
	db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
	_, err := pq.PopMin(ctx, db, fdbqueue.WithOpID(id))
	require.True(t, kv.MaybeCommitted(err), "the commit may have applied: %v", err)
	it, err := pq.PopMin(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, fdbqueue.Item{Value: v, Priority: 1}, it, "the recovery returns the item the first call took")

	for i := range 3 {
		require.NoError(t, pq.Push(ctx, db, []byte{byte(i)}, int64(i)))
	}
	its, err := pq.PopMinBatch(ctx, db, 3, withID())
	require.NoError(t, err)
	require.Len(t, its, 3)
	settlePQ(t, db, pq)
	slots := fdbqueue.JournalSlotKeys(pq)
	require.Len(t, slots, 1, "sequential operations share a slot")
	requireJournalWithin(t, db, pq.Subspace(), slots)
}

// A JobQueue has no slots: each operation's records are under its ID,
// cleared by the next operation (docs/design.md, "Exactly once under
// commit_unknown_result"). So after a run of operations only the last
// one's records remain, whatever the earlier ones recorded: one key per
// job of a batch add or lease, or none committed (a Lease that found
// nothing hands back the clears it took over).
func TestJournalJobQueueLeavesOnlyTheLastRecords(t *testing.T) {
	ctx := context.Background()
	db, q := newDB(t), mustJobQueue(t, "noleak", fdbqueue.JobQueueConfig{})
	_, err := q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}})
	require.NoError(t, err)
	ls, err := q.Lease(ctx, db, 3, 0)
	require.NoError(t, err)
	require.Len(t, ls, 3)
	for _, l := range ls {
		require.NoError(t, q.Ack(ctx, db, l))
	}
	// A batch lease that may have committed, recovered by a call under
	// its ID (see TestJournalQueueLeavesNoRecords).
	_, err = q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("d")}, {Value: []byte("e")}})
	require.NoError(t, err)
	id := fdbqueue.NewOpID()
	db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
	_, err = q.Lease(ctx, db, 2, 0, fdbqueue.WithOpID(id))
	require.True(t, kv.MaybeCommitted(err), "the commit may have applied: %v", err)
	ls, err = q.Lease(ctx, db, 2, 0, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Len(t, ls, 2, "the recovery returns the leases the first call took")
	for _, l := range ls {
		require.NoError(t, q.Ack(ctx, db, l))
	}
	_, err = q.Lease(ctx, db, 1, 0)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	_, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("f")})
	require.NoError(t, err)
	last := fdbqueue.NewOpID()
	_, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("g")}, fdbqueue.WithOpID(last))
	require.NoError(t, err)
	require.Empty(t, fdbqueue.JournalSlotKeys(q))
	requireJournalWithin(t, db, q.Subspace(), nil, fdbqueue.JournalRecordRange(q, last))
}
