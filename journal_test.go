package fdbqueue_test

import (
	"bytes"
	"context"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// journalKeys lists the journal's keys of the queue in sub.
func journalKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) [][]byte {
	t.Helper()
	j, err := tuple.Tuple{"j"}.AppendPack(append(bytes.Clone(sub.Bytes()), 0xff))
	require.NoError(t, err)
	return rawKeys(t, db, j)
}

// Defect 12 of issue 12: an operation run in a caller's transaction
// without WithOpID cannot be recognised on the caller's retry (each retry
// is a new operation with a new ID), so the journal would only cost a read
// and a write: it is skipped. With WithOpID, or given a Database, it is
// kept.
func TestJournalSkippedWithoutOwnerOrID(t *testing.T) {
	ctx := context.Background()
	type call func(t kv.Transactor, opts ...fdbqueue.OpOption) error
	cases := []struct {
		name string
		run  func(t *testing.T, db kv.Database) (fdbqueue.Subspace, call)
	}{
		{"Enqueue", func(t *testing.T, db kv.Database) (fdbqueue.Subspace, call) {
			q := mustQueue(t, "skip-enq")
			return q.Subspace(), func(tt kv.Transactor, opts ...fdbqueue.OpOption) error {
				return q.Enqueue(ctx, tt, []byte("x"), opts...)
			}
		}},
		{"Dequeue", func(t *testing.T, db kv.Database) (fdbqueue.Subspace, call) {
			q := mustQueue(t, "skip-deq", fdbqueue.WithJournalRetention(time.Hour))
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			clearJournal(t, db, q.Subspace())
			return q.Subspace(), func(tt kv.Transactor, opts ...fdbqueue.OpOption) error {
				_, err := q.Dequeue(ctx, tt, opts...)
				return err
			}
		}},
		{"Push", func(t *testing.T, db kv.Database) (fdbqueue.Subspace, call) {
			pq := mustPQ(t, "skip-push")
			return pq.Subspace(), func(tt kv.Transactor, opts ...fdbqueue.OpOption) error {
				return pq.Push(ctx, tt, []byte("x"), 1, opts...)
			}
		}},
		{"PopMin", func(t *testing.T, db kv.Database) (fdbqueue.Subspace, call) {
			pq := mustPQ(t, "skip-pop")
			for range 3 {
				require.NoError(t, pq.Push(ctx, db, []byte("x"), 1))
			}
			clearJournal(t, db, pq.Subspace())
			return pq.Subspace(), func(tt kv.Transactor, opts ...fdbqueue.OpOption) error {
				_, err := pq.PopMin(ctx, tt, opts...)
				return err
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			sub, op := c.run(t, db)
			inTx := func(opts ...fdbqueue.OpOption) {
				require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return op(tr, opts...) }))
			}
			inTx()
			require.Empty(t, journalKeys(t, db, sub), "no journal write in a caller's transaction without an ID")
			inTx(fdbqueue.WithOpID(fdbqueue.NewOpID()))
			require.Len(t, journalKeys(t, db, sub), 2, "a caller-given ID is journaled: its record and its marker")
			clearJournal(t, db, sub)
			require.NoError(t, op(db))
			require.Len(t, journalKeys(t, db, sub), 1, "an operation given a Database is journaled")
		})
	}
}

// clearJournal removes the journal of the queue in sub.
func clearJournal(t testing.TB, db kv.Database, sub fdbqueue.Subspace) {
	t.Helper()
	j, err := tuple.Tuple{"j"}.AppendPack(append(bytes.Clone(sub.Bytes()), 0xff))
	require.NoError(t, err)
	r, err := tuple.PrefixRange(j)
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error { tr.ClearRange(r); return nil }))
}

// Defect 10 of issue 12: expiry compares an ID's time with the expiring
// client's clock. A client whose clock runs ahead of the operation's maker
// by less than the retention must not clear the record of an operation
// that is still within its retention (by its maker's clock): a retry after
// that would apply the operation twice.
func TestJournalExpirySkewedClock(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	const retention = time.Minute
	start := time.Unix(1_700_000_000, 0)
	clockA := memdb.NewManualClock(start)
	clockB := memdb.NewManualClock(start.Add(55 * time.Second)) // B runs 55 s ahead
	sub := mustSubspace(t, "test", "skew")
	qA, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clockA.Now), fdbqueue.WithJournalRetention(retention))
	require.NoError(t, err)
	qB, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clockB.Now), fdbqueue.WithJournalRetention(retention))
	require.NoError(t, err)

	// A enqueues in its own transaction under its ID, and will retry it.
	id := fdbqueue.OpIDAt(clockA.Now())
	enqueueA := func() error {
		return db.Transact(ctx, func(tr kv.Transaction) error { return qA.Enqueue(ctx, tr, []byte("once"), fdbqueue.WithOpID(id)) })
	}
	require.NoError(t, enqueueA())
	clockA.Advance(50 * time.Second) // still within A's retention
	clockB.Advance(50 * time.Second)

	// B works long enough for its expiry to sweep every shard.
	for i := range 64*256/16 + 64 {
		require.NoError(t, qB.Enqueue(ctx, db, []byte{byte(i)}))
	}
	require.NoError(t, enqueueA(), "A's retry, within its retention")
	once := 0
	for _, v := range drain(t, db, qA) {
		if v == "once" {
			once++
		}
	}
	require.Equal(t, 1, once, "A's record survived B's expiry: the retry did not enqueue again")

	// Records do expire, once twice the retention has passed on the
	// expiring client's clock.
	id = fdbqueue.OpIDAt(clockA.Now())
	require.NoError(t, enqueueA())
	require.GreaterOrEqual(t, len(journalKeys(t, db, sub)), 2, "A's records, and B's last one")
	clockB.Advance(2*retention + time.Second)
	for i := range 64*256/16 + 64 {
		require.NoError(t, qB.Enqueue(ctx, db, []byte{byte(i)}))
	}
	require.Len(t, journalKeys(t, db, sub), 1, "only B's last record is left")
}

// Defect 10 of issue 12: operation IDs start with their time, so journal
// records keyed by ID all landed at the end of the journal's range (one
// hot shard). Records of operations made at the same moment now spread
// over the whole range.
func TestJournalRecordsSpread(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	q := mustQueue(t, "spread", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Hour))
	enqueue := func(n int) {
		for range n {
			clock.Advance(time.Second)
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				return q.Enqueue(ctx, tr, []byte("x"), fdbqueue.WithOpID(fdbqueue.OpIDAt(clock.Now())))
			}))
		}
	}
	enqueue(400)
	old := journalKeys(t, db, q.Subspace())
	enqueue(200)
	written := newKeys(old, journalKeys(t, db, q.Subspace()))
	require.Len(t, written, 400, "a record and a marker (a caller-given ID) each")
	hot := hottestShare(old, written, 16)
	t.Logf("the busiest of 16 equal shards of the journal gets %.0f%% of the new records", 100*hot)
	require.Less(t, hot, 0.25, "new records spread over the journal's range, not at its end")
}

// hottestShare splits the key space at the quantiles of existing (as
// FoundationDB's data distribution splits shards by size) into n ranges and
// returns the largest fraction of written that falls into one of them.
func hottestShare(existing, written [][]byte, n int) float64 {
	sorted := append([][]byte(nil), existing...)
	sort.Slice(sorted, func(i, j int) bool { return bytes.Compare(sorted[i], sorted[j]) < 0 })
	bounds := make([][]byte, 0, n-1)
	for i := 1; i < n; i++ {
		bounds = append(bounds, sorted[i*len(sorted)/n])
	}
	counts := make([]int, n)
	for _, k := range written {
		counts[sort.Search(len(bounds), func(i int) bool { return bytes.Compare(k, bounds[i]) < 0 })]++
	}
	most := 0
	for _, c := range counts {
		most = max(most, c)
	}
	return float64(most) / float64(len(written))
}

// BenchmarkJournalHotShard measures where new journal records land: the
// journal's existing records (those of earlier operations, made over the
// last minutes) are split into 16 shards of equal size, as FoundationDB's
// data distribution would, and the benchmark reports the share of the next
// operations' records that the busiest shard receives (hottest-%): 100%
// means every journal write goes to one storage team.
func BenchmarkJournalHotShard(b *testing.B) {
	ctx := context.Background()
	db := newDB(b)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	q := mustQueue(b, "hot", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Hour))
	enqueue := func(n int) {
		for range n {
			clock.Advance(10 * time.Millisecond)
			require.NoError(b, db.Transact(ctx, func(tr kv.Transaction) error {
				return q.Enqueue(ctx, tr, []byte("x"), fdbqueue.WithOpID(fdbqueue.OpIDAt(clock.Now())))
			}))
		}
	}
	enqueue(2000)
	existing := journalKeys(b, db, q.Subspace())
	b.ResetTimer()
	var hot float64
	for i := 0; i < b.N; i++ {
		enqueue(500)
		all := journalKeys(b, db, q.Subspace())
		written := newKeys(existing, all)
		hot = hottestShare(existing, written, 16)
		existing = all
	}
	b.ReportMetric(100*hot, "hottest-%")
}

// newKeys returns the keys of all that are not in old.
func newKeys(old, all [][]byte) [][]byte {
	seen := make(map[string]bool, len(old))
	for _, k := range old {
		seen[string(k)] = true
	}
	var out [][]byte
	for _, k := range all {
		if !seen[string(k)] {
			out = append(out, k)
		}
	}
	return out
}

// Operations on a Database under IDs of their own making record in their
// Queue value's journal slots (journal.go, takeSlot): one slot key per
// operation in flight, overwritten by the next, and new keys once the
// slots' epoch is an eighth of the retention old, the old ones expiring
// as records do. The journal therefore holds a bounded number of keys and
// an operation writes one journal key and clears none.
func TestJournalSlots(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	const retention = time.Minute
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	q := mustQueue(t, "slots", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(retention))
	pq := mustPQ(t, "slots-pq", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(retention))
	for i := range 100 {
		require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
		got, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, []byte{byte(i)}, got)
		require.NoError(t, pq.Push(ctx, db, []byte{byte(i)}, int64(i)))
		it, err := pq.PopMin(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.Item{Value: []byte{byte(i)}, Priority: int64(i)}, it)
	}
	slots := journalKeys(t, db, q.Subspace())
	require.Len(t, slots, 1, "sequential operations share one slot")
	require.Len(t, journalKeys(t, db, pq.Subspace()), 1, "sequential operations share one slot")

	// The record holds the operation's ID and result: a retry after an
	// applied commit_unknown_result returns the item it took.
	require.NoError(t, q.Enqueue(ctx, db, []byte("once")))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	got, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, []byte("once"), got)
	empty, err := q.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty, "the item was taken once")
	require.Equal(t, slots, journalKeys(t, db, q.Subspace()), "the same slot")
	// An operation builds its slot's value in a buffer the one before it
	// used (op.slotVal): a retry returns exactly its own result, whatever
	// the operations before it recorded, long or short.
	for _, v := range [][]byte{bytes.Repeat([]byte("L"), 2000), bytes.Repeat([]byte("m"), 500), []byte("s"), {}} {
		require.NoError(t, q.Enqueue(ctx, db, v))
		db.FailNextCommit(kv.ErrCommitUnknownResult, true)
		got, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, v, got)
		require.NoError(t, pq.Push(ctx, db, v, 7))
		db.FailNextCommit(kv.ErrCommitUnknownResult, true)
		it, err := pq.PopMin(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.Item{Value: v, Priority: 7}, it)
	}

	// A new epoch: a new slot key; the old one expires.
	clock.Advance(retention/8 + time.Second)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.Len(t, journalKeys(t, db, q.Subspace()), 2, "the old epoch's slot and the new one's")
	clock.Advance(2*retention + time.Second)
	for i := range 64*256/16 + 64 {
		require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
	}
	require.Len(t, journalKeys(t, db, q.Subspace()), 1, "the old epochs' slots expired")
}

// A commit interrupted by a cancellation may land after the caller gave
// up on it: FoundationDB fences an in-flight commit only before reporting
// commit_unknown_result (commitDummyTransaction in
// fdbclient/NativeAPI.actor.cpp), not when the caller cancels. The
// recovery by WithOpID that follows must still leave one outcome. An
// Enqueue's recovery writes the record that every attempt under a chosen
// ID reads (a normal read), so the late original conflicts. A Dequeue's
// recovery that finds the queue empty writes nothing, yet the original
// read its item, which another commit removed since: it conflicts too.
func TestRecoveryByOpIDOutlivesALateOriginal(t *testing.T) {
	bg := context.Background()

	t.Run("enqueue", func(t *testing.T) {
		db, q := newDB(t), mustQueue(t, "late-orig")
		require.NoError(t, q.Enqueue(bg, db, []byte("warm")))
		_, err := q.Dequeue(bg, db)
		require.NoError(t, err)
		id := fdbqueue.NewOpID()
		release, err := interruptCommit(t, db, func(ctx context.Context) error {
			return q.Enqueue(ctx, db, []byte("once"), fdbqueue.WithOpID(id))
		})
		require.True(t, kv.MaybeCommitted(err), "an interrupted commit may have applied: %v", err)
		require.NoError(t, q.Enqueue(bg, db, []byte("once"), fdbqueue.WithOpID(id)), "the recovery")
		release() // the original lands now, after its recovery
		v, err := q.Dequeue(bg, db)
		require.NoError(t, err)
		require.Equal(t, []byte("once"), v)
		_, err = q.Dequeue(bg, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "enqueued once")
	})
	t.Run("dequeue", func(t *testing.T) {
		db, q := newDB(t), mustQueue(t, "late-orig")
		require.NoError(t, q.Enqueue(bg, db, []byte("only")))
		id := fdbqueue.NewOpID()
		release, err := interruptCommit(t, db, func(ctx context.Context) error {
			_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
			return err
		})
		require.True(t, kv.MaybeCommitted(err), "an interrupted commit may have applied: %v", err)
		v, err := q.Dequeue(bg, db)
		require.NoError(t, err, "another consumer takes the item")
		require.Equal(t, []byte("only"), v)
		_, err = q.Dequeue(bg, db, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the recovery finds nothing")
		release() // the original lands now, after its recovery
		_, err = q.Dequeue(bg, db, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the original must have conflicted: it read the item another consumer took")
	})
}

// retryHookDB runs beforeRetry before the second attempt of each Transact.
type retryHookDB struct {
	kv.Database
	beforeRetry func()
}

func (d *retryHookDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	n := 0
	return d.Database.Transact(ctx, func(tr kv.Transaction) error {
		if n++; n == 2 {
			d.beforeRetry()
		}
		return fn(tr)
	})
}

// A journal slot whose operation failed with an error that may hide a
// commit is not reused (journal.go, op.end): that commit can still land,
// after the caller gave up on it (FoundationDB fences an in-flight commit
// only before reporting commit_unknown_result: commitDummyTransaction in
// fdbclient/NativeAPI.actor.cpp), and overwrite the record of the next
// operation in the slot. Here the late commit lands between an Enqueue's
// applied commit_unknown_result and its retry: had the Enqueue been given
// the dropped slot, the retry would find the late operation's ID there and
// enqueue a second time.
func TestJournalSlotDroppedAfterAMaybeCommittedError(t *testing.T) {
	bg := context.Background()
	db, q := newDB(t), mustQueue(t, "late-slot")
	for _, v := range []string{"x1", "x2"} {
		require.NoError(t, q.Enqueue(bg, db, []byte(v)))
	}
	release, err := interruptCommit(t, db, func(ctx context.Context) error {
		_, err := q.Dequeue(ctx, db)
		return err
	})
	require.True(t, kv.MaybeCommitted(err), "an interrupted commit may have applied: %v", err)

	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	require.NoError(t, q.Enqueue(bg, &retryHookDB{Database: db, beforeRetry: release}, []byte("b")))
	require.Equal(t, []string{"x2", "b"}, drain(t, db, q), "the late Dequeue took x1; b was enqueued once")
}
