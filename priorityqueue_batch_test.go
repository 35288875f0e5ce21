package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func pushItem(v string, p int64) fdbqueue.PushItem {
	return fdbqueue.PushItem{Value: []byte(v), Priority: p}
}

// popAllMin pops the smallest item until ErrEmpty and returns them as
// "value@priority".
func popAllMin(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue) []string {
	t.Helper()
	var out []string
	for {
		it, err := pq.PopMin(context.Background(), db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			return out
		}
		require.NoError(t, err)
		out = append(out, fmt.Sprintf("%s@%d", it.Value, it.Priority))
	}
}

// pqCounts returns the (priority, count) of every item key, in key order.
func pqCounts(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue) []tuple.Tuple {
	t.Helper()
	var out []tuple.Tuple
	for _, p := range subspacePairs(t, db, pq.Subspace()) {
		tup, err := pq.Subspace().Unpack(p.Key)
		require.NoError(t, err)
		require.Len(t, tup, 3)
		out = append(out, tup[:2])
	}
	return out
}

// The items of one priority in a batch get consecutive counts after the
// priority's last, in batch order: across and within priorities, mixed
// with single Pushes before and after, PopMin returns each priority's
// items in push order and PopMax the reverse. A batch of 30 items of one
// priority interleaved with others would come out in a random order
// (1/30! of passing) if its items shared a count.
func TestPushBatchOrder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "batch-order")
	require.NoError(t, pq.Push(ctx, db, []byte("s0"), 1))
	require.NoError(t, pq.Push(ctx, db, []byte("t0"), 2))
	var batch []fdbqueue.PushItem
	var want1, want2 []string
	for i := range 30 {
		batch = append(batch, pushItem(fmt.Sprintf("b%02d", i), 1))
		want1 = append(want1, fmt.Sprintf("b%02d@1", i))
		if i%3 == 0 {
			batch = append(batch, pushItem(fmt.Sprintf("c%02d", i), 2))
			want2 = append(want2, fmt.Sprintf("c%02d@2", i))
		}
	}
	batch = append(batch, pushItem("low", -7))
	require.NoError(t, pq.PushBatch(ctx, db, batch))
	require.NoError(t, pq.Push(ctx, db, []byte("s1"), 1))
	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("d0", 2), pushItem("d1", 1), pushItem("d2", 2)}))

	// The counts: priority 1 holds 0 (s0), 1..30 (the batch), 31 (s1),
	// 32 (d1); priority 2 holds 0 (t0), 1..10, 11 and 12 (d0, d2).
	counts := pqCounts(t, db, pq)
	var c1, c2 []int64
	for _, c := range counts {
		switch c[0].(int64) {
		case 1:
			c1 = append(c1, c[1].(int64))
		case 2:
			c2 = append(c2, c[1].(int64))
		}
	}
	require.Equal(t, seq(0, 33), c1, "priority 1: consecutive counts in push order")
	require.Equal(t, seq(0, 13), c2, "priority 2: consecutive counts in push order")
	depth, err := pq.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(len(counts)), depth, "the depth counters count every item of a batch")

	want := append([]string{"low@-7", "s0@1"}, want1...)
	want = append(want, "s1@1", "d1@1", "t0@2")
	want = append(want, want2...)
	want = append(want, "d0@2", "d2@2")
	// PopMax from the top first: the reverse of the priority-2 items.
	top, err := pq.PopMaxBatch(ctx, db, 3)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.Item{item("d2", 2), item("d0", 2), item("c27", 2)}, top)
	require.Equal(t, want[:len(want)-3], popAllMin(t, db, pq))
}

func seq(lo, hi int64) []int64 {
	var out []int64
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

// Priorities at both ends of int64 in one batch, with others: each at its
// place, MinInt64 first from the smallest end and MaxInt64 first from
// the largest, each priority's items in batch order.
func TestPushBatchPriorityExtremes(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "batch-extremes")
	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{
		pushItem("max0", math.MaxInt64), pushItem("min0", math.MinInt64), pushItem("zero", 0),
		pushItem("max1", math.MaxInt64), pushItem("min1", math.MinInt64),
		pushItem("nearmax", math.MaxInt64-1), pushItem("nearmin", math.MinInt64+1),
	}))
	lo, err := pq.PopMinBatch(ctx, db, 3)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.Item{item("min0", math.MinInt64), item("min1", math.MinInt64), item("nearmin", math.MinInt64+1)}, lo)
	hi, err := pq.PopMaxBatch(ctx, db, 3)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.Item{item("max1", math.MaxInt64), item("max0", math.MaxInt64), item("nearmax", math.MaxInt64-1)}, hi)
	require.Equal(t, []string{"zero@0"}, popAllMin(t, db, pq))
}

// A priority's counts must fit an int64, as Push's (ForeignKeyError at
// MaxInt64): with another client's key at count MaxInt64-1, a batch of
// two items of that priority has no room and writes nothing, not even
// its items of other priorities, whichever comes first in the batch; one
// item takes count MaxInt64, after
// which no room is left. Without the check the second count would wrap
// to MinInt64, a key before the priority's older items.
func TestPushBatchCountNearMaxInt64(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "batch-maxcount")
	pq, err := fdbqueue.NewPriorityQueue(sub)
	require.NoError(t, err)
	key, err := sub.Pack(tuple.Tuple{int64(math.MaxInt64), int64(math.MaxInt64 - 1), bytes.Repeat([]byte{0xab}, 20)})
	require.NoError(t, err)
	setRaw(t, db, key, []byte("old"))

	err = pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("other", 3), pushItem("a", math.MaxInt64), pushItem("b", math.MaxInt64)})
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	require.Equal(t, key, fk.Key)
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "nothing written")
	// The priority without room first, one with room after: its error is
	// the batch's, not lost to the fitting priority's success.
	err = pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("a", math.MaxInt64), pushItem("b", math.MaxInt64), pushItem("other", 3)})
	require.ErrorAs(t, err, &fk)
	require.Equal(t, key, fk.Key)
	n, err = pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "nothing written")

	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("a", math.MaxInt64), pushItem("other", 3)}))
	require.ErrorIs(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("c", math.MaxInt64)}), fdbqueue.ErrForeignKey)
	require.Equal(t, []tuple.Tuple{{int64(3), int64(0)}, {int64(math.MaxInt64), int64(math.MaxInt64 - 1)}, {int64(math.MaxInt64), int64(math.MaxInt64)}},
		pqCounts(t, db, pq))
	require.Equal(t, []string{"other@3", "old@9223372036854775807", "a@9223372036854775807"}, popAllMin(t, db, pq))
}

// Values of exactly 100,000 stored bytes are pushed (RawValues: 100,000
// bytes; TupleValues: 99,998, the packed tuple adding 2); one byte more
// fails the whole batch with ErrValueTooLarge (and kv.ErrValueTooLarge)
// naming the item's index, before anything is written.
func TestPushBatchValueLimits(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		enc   fdbqueue.ValueEncoding
		limit int
	}{{"raw", fdbqueue.RawValues, kv.MaxValueSize}, {"tuple", fdbqueue.TupleValues, kv.MaxValueSize - 2}} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "batch-limits-"+c.name, fdbqueue.WithValueEncoding(c.enc))
			at := bytes.Repeat([]byte{0x00}, c.limit)
			if c.enc == fdbqueue.TupleValues {
				at = bytes.Repeat([]byte{0xff}, c.limit) // 0x00 escapes to two bytes
			}
			over := append(bytes.Clone(at), at[0])
			err := pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: at, Priority: 1}, {Value: []byte("x"), Priority: 2}, {Value: over, Priority: 1}})
			require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
			require.ErrorIs(t, err, kv.ErrValueTooLarge)
			require.Contains(t, err.Error(), "item 2 ")
			empty, err := pq.Empty(ctx, db)
			require.NoError(t, err)
			require.True(t, empty, "nothing written")

			require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: at, Priority: 1}, {Value: []byte("x"), Priority: 2}, {Value: at, Priority: 0}}))
			got, err := pq.PopMinBatch(ctx, db, 10)
			require.NoError(t, err)
			require.Len(t, got, 3)
			require.Equal(t, at, got[0].Value)
			require.Equal(t, at, got[1].Value)
			require.Equal(t, []byte("x"), got[2].Value)
		})
	}
}

// budgetPushValues is a batch at the longest item keys: priorities of 9
// packed bytes (MinInt64 and MaxInt64), whose counts pack in 9 bytes too
// where the queue holds a count past 2^56.
func budgetPushValues(n, size int) []fdbqueue.PushItem {
	items := make([]fdbqueue.PushItem, n)
	for i := range items {
		p := int64(math.MinInt64)
		if i%2 == 1 {
			p = math.MaxInt64
		}
		items[i] = fdbqueue.PushItem{Value: bytes.Repeat([]byte{byte('a' + i%26)}, size), Priority: p}
	}
	return items
}

// smallestBudget is the smallest batch budget under which run passes the
// budget check, found by bisection; run reports whether it did (false:
// ErrBatchTooLarge).
func smallestBudget(t *testing.T, run func(budget int) bool) int {
	t.Helper()
	lo, hi := 1, fdbqueue.MaxBatchBudget
	require.True(t, run(hi))
	for lo < hi {
		mid := lo + (hi-lo)/2
		if run(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// A batch exactly at the budget (the smallest budget that accepts it) is
// pushed, and its commit's size, counted as FoundationDB counts it (fdbDB;
// the queue's first write, with the most journal clean-ups and an expiry:
// PrimeJournal), is within it, some 2,200 bytes under (the bound's journal
// parts this commit does not make); the same batch with one value a byte
// longer, or under a budget a byte smaller, fails with ErrBatchTooLarge
// and writes nothing. The last item adds to the budget a batch needs what
// it adds to an EnqueueBatch's on a prefix as long (the doc says an item
// costs what one of EnqueueBatch does): counting no value bytes, or a
// shorter key, fails that. A single item is accepted whatever the budget.
func TestPushBatchBudgetExact(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	items := budgetPushValues(40, 700)
	name := "pq-budget-exact"
	sub := mustSubspace(t, "test", name)
	// A key of each priority at a count of 2^60: the batch's counts pack
	// in 9 bytes, the longest the budget reckons with.
	for _, p := range []int64{math.MinInt64, math.MaxInt64} {
		far, err := sub.Pack(tuple.Tuple{p, int64(1) << 60, bytes.Repeat([]byte{1}, 20)})
		require.NoError(t, err)
		setRaw(t, raw, far, []byte("far"))
	}

	check := func(pq *fdbqueue.PriorityQueue, items []fdbqueue.PushItem) bool {
		err := pq.PushBatch(ctx, refuseTransact{raw}, items)
		if errors.Is(err, errNotRun) {
			return true
		}
		require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
		return false
	}
	pqBudget := func(items []fdbqueue.PushItem) int {
		return smallestBudget(t, func(b int) bool { return check(mustPQ(t, name, fdbqueue.WithBatchBudget(b)), items) })
	}
	budget := pqBudget(items)
	// The same values through EnqueueBatch, on a subspace whose prefix is
	// as long: the last item adds as much to either.
	qsub := mustSubspace(t, "test", "qq-budget-exact")
	require.Len(t, qsub.Bytes(), len(sub.Bytes()))
	values := make([][]byte, len(items))
	for i, it := range items {
		values[i] = it.Value
	}
	qBudget := func(values [][]byte) int {
		return smallestBudget(t, func(b int) bool {
			q, err := fdbqueue.NewQueue(qsub, fdbqueue.WithBatchBudget(b))
			require.NoError(t, err)
			err = q.EnqueueBatch(ctx, refuseTransact{raw}, values)
			if errors.Is(err, errNotRun) {
				return true
			}
			require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
			return false
		})
	}
	last := len(items) - 1
	require.Equal(t, qBudget(values)-qBudget(values[:last]), budget-pqBudget(items[:last]), "an item costs what one of EnqueueBatch does")

	pq := mustPQ(t, name, fdbqueue.WithBatchBudget(budget))
	longer := append([]fdbqueue.PushItem(nil), items...)
	longer[7].Value = append(bytes.Clone(longer[7].Value), 'z')
	require.ErrorIs(t, pq.PushBatch(ctx, raw, longer), fdbqueue.ErrBatchTooLarge, "one byte over the budget")
	require.ErrorIs(t, mustPQ(t, name, fdbqueue.WithBatchBudget(budget-1)).PushBatch(ctx, raw, items), fdbqueue.ErrBatchTooLarge)
	n, err := pq.Len(ctx, raw)
	require.NoError(t, err)
	require.Equal(t, 2, n, "nothing written")

	// The batch is the queue's first write: its commit also stores the
	// configuration, and it carries the most clean-ups and an expiry,
	// everything the budget reckons with.
	fdbqueue.PrimeJournal(pq)
	db := newFDBDB(raw)
	require.NoError(t, pq.PushBatch(ctx, db, items, fdbqueue.WithOpID(fdbqueue.NewOpID())), "exactly at the budget")
	st := db.st.snapshot()
	require.Empty(t, st.violations)
	require.Zero(t, st.tooLarge)
	require.LessOrEqual(t, st.maxSize, budget, "the commit's size, as FDB counts it, within the budget")
	t.Logf("budget %d, commit %d bytes as FDB counts them", budget, st.maxSize)
	n, err = pq.Len(ctx, raw)
	require.NoError(t, err)
	require.Equal(t, 2+len(items), n)

	tiny := mustPQ(t, name, fdbqueue.WithBatchBudget(1))
	require.NoError(t, tiny.PushBatch(ctx, raw, items[:1]), "a single item is always accepted")
	require.ErrorIs(t, tiny.PushBatch(ctx, raw, []fdbqueue.PushItem{pushItem("a", 1), pushItem("b", 1)}), fdbqueue.ErrBatchTooLarge)
}

// Under commit_unknown_result whose commit applied or not, and a conflict,
// the journal makes the batch land exactly once: the retry finds the
// record the applied attempt wrote (once, for the whole call) and writes
// nothing. Without it (WithoutIdempotency), the retry of an applied commit
// pushes the batch a second time, as documented.
func TestPushBatchUnknownResult(t *testing.T) {
	ctx := context.Background()
	batch := []fdbqueue.PushItem{pushItem("a", 2), pushItem("b", 1), pushItem("c", 2)}
	for _, c := range []struct {
		name    string
		err     error
		applied bool
		opts    []fdbqueue.Option
		want    []string
	}{
		{"unknown applied", kv.ErrCommitUnknownResult, true, nil, []string{"b@1", "a@2", "c@2"}},
		{"unknown not applied", kv.ErrCommitUnknownResult, false, nil, []string{"b@1", "a@2", "c@2"}},
		{"not committed", kv.ErrNotCommitted, false, nil, []string{"b@1", "a@2", "c@2"}},
		{"without idempotency, unknown applied", kv.ErrCommitUnknownResult, true, []fdbqueue.Option{fdbqueue.WithoutIdempotency()},
			[]string{"b@1", "b@1", "a@2", "c@2", "a@2", "c@2"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "batch-unknown", c.opts...)
			require.NoError(t, pq.Push(ctx, db, []byte("warm"), 9))
			db.FailNextCommit(c.err, c.applied)
			require.NoError(t, pq.PushBatch(ctx, db, batch))
			require.Equal(t, append(c.want, "warm@9"), popAllMin(t, db, pq))
		})
	}
	t.Run("caller's retry loop with WithOpID", func(t *testing.T) {
		for _, applied := range []bool{true, false} {
			db := newDB(t)
			pq := mustPQ(t, "batch-unknown-tx")
			id := fdbqueue.NewOpID()
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				return pq.PushBatch(ctx, tr, batch, fdbqueue.WithOpID(id))
			}))
			require.Equal(t, []string{"b@1", "a@2", "c@2"}, popAllMin(t, db, pq), "applied %v", applied)
		}
	})
	t.Run("caller's retry loop without WithOpID", func(t *testing.T) {
		// No journal: the retry of the applied commit pushes the batch
		// again, as the doc says (pass WithOpID in your own loop).
		db := newDB(t)
		pq := mustPQ(t, "batch-unknown-noid")
		db.FailNextCommit(kv.ErrCommitUnknownResult, true)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return pq.PushBatch(ctx, tr, batch) }))
		require.Equal(t, []string{"b@1", "b@1", "a@2", "c@2", "a@2", "c@2"}, popAllMin(t, db, pq))
	})
}

// A PushBatch that failed maybe-committed, given a Database and no
// WithOpID, is settled under the ID the queue logged (its record is in a
// journal slot, as Push's): the settling call finds the record the failed
// commit left, or pushes the batch now if it did not apply; an interrupted
// commit landing while the settling call runs makes it conflict and find
// the record. The batch is pushed once either way.
func TestSettlePushBatchInSlot(t *testing.T) {
	ctx := context.Background()
	batch := []fdbqueue.PushItem{pushItem("x", 1), pushItem("y", 0), pushItem("z", 1)}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			db := newDB(t)
			logs, logger := loggedIDs()
			pq := mustPQ(t, "settle-pushbatch", logger)
			release := f.fail(t, db, func(ctx context.Context) error { return pq.PushBatch(ctx, db, batch) })
			id := logs.take(t)
			settle := func() error { return pq.PushBatch(ctx, db, batch, fdbqueue.WithOpID(id)) }
			if f.interrupted {
				held, go2 := db.HoldNextCommit()
				done := make(chan error, 1)
				go func() { done <- settle() }()
				<-held
				release()
				go2()
				require.NoError(t, <-done)
			} else {
				require.NoError(t, settle())
			}
			require.Equal(t, []string{"y@0", "x@1", "z@1"}, popAllMin(t, db, pq), "pushed once")
		})
	}
}

// Concurrent producers push batches under random commit faults (unknown
// results applied and not, conflicts, failing reads): every item is
// pushed exactly once, each batch's items of a priority in batch order.
func TestPushBatchFaultsExactlyOnce(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, memdb.WithSeed(11), memdb.WithFaults(withReadFaults(memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.1, UnknownNotApplied: 0.1})))
	pq := mustPQ(t, "batch-faults")
	// 240 batches: with 60, the commits reported unknown and not applied
	// averaged 3.7 a run, and 4 runs of 300 had none, which failed the
	// test's check that the faults were met.
	const producers, batches, per = 4, 60, 6
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range batches {
				items := make([]fdbqueue.PushItem, per)
				for i := range items {
					items[i] = pushItem(fmt.Sprintf("%d/%02d/%d", p, b, i), int64(i%2))
				}
				if err := pq.PushBatch(ctx, db, items); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := db.Stats()
	require.Positive(t, st.InjectedUnknownApplied, "some commits applied with an unknown result")
	require.Positive(t, st.InjectedUnknownNotApplied, "some commits did not apply, with an unknown result")
	// The stored items, in key order (PopMin's): read directly, so that
	// what is checked is what the pushes wrote.
	seen := map[string]int{}
	last := map[string]string{} // producer/batch@priority: its last item
	for _, kvp := range subspacePairs(t, db, pq.Subspace()) {
		tup, err := pq.Subspace().Unpack(kvp.Key)
		require.NoError(t, err)
		s := string(kvp.Value)
		seen[s]++
		var p, b, i int
		_, err = fmt.Sscanf(s, "%d/%d/%d", &p, &b, &i)
		require.NoError(t, err, s)
		require.Equal(t, int64(i%2), tup[0], "item %s at its priority", s)
		k := fmt.Sprintf("%d/%d@%d", p, b, i%2)
		require.Less(t, last[k], s, "a batch's items of one priority in batch order")
		last[k] = s
	}
	require.Len(t, seen, producers*batches*per, "every item pushed")
	for s, n := range seen {
		require.Equal(t, 1, n, "item %s pushed %d times", s, n)
	}
}

// Inside a caller's transaction PushBatch composes with the caller's
// other writes, a Push and an Enqueue: all commit together, and the
// transaction's later pushes to a priority see the batch's items (reads
// see the transaction's own writes, snapshot reads included:
// ReadYourWritesTransaction, fdbclient/ReadYourWrites.actor.cpp), so FIFO
// within a priority holds across them. A transaction that rolls back
// writes none of it.
func TestPushBatchInCallerTransaction(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq, q := mustPQ(t, "batch-compose"), mustQueue(t, "batch-compose-q")
	marker := mustSubspace(t, "batch-compose-marker").Bytes()
	errRollBack := errors.New("roll back")
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		if err := pq.PushBatch(ctx, tr, []fdbqueue.PushItem{pushItem("r1", 1), pushItem("r2", 1)}); err != nil {
			return err
		}
		tr.Set(marker, []byte("rolled back"))
		return errRollBack
	})
	require.ErrorIs(t, err, errRollBack)
	empty, err := pq.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty, "a rolled-back transaction pushes nothing")

	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(marker, []byte("committed"))
		if err := pq.PushBatch(ctx, tr, []fdbqueue.PushItem{pushItem("a", 1), pushItem("b", 2)}); err != nil {
			return err
		}
		if err := pq.Push(ctx, tr, []byte("c"), 1); err != nil {
			return err
		}
		if err := q.Enqueue(ctx, tr, []byte("q")); err != nil {
			return err
		}
		return pq.PushBatch(ctx, tr, []fdbqueue.PushItem{pushItem("d", 1), pushItem("e", 2)})
	}))
	v, err := getKey(ctx, db, marker)
	require.NoError(t, err)
	require.Equal(t, []byte("committed"), v)
	depth, err := pq.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(5), depth)
	require.Equal(t, []string{"a@1", "c@1", "d@1", "b@2", "e@2"}, popAllMin(t, db, pq))
	require.Equal(t, []string{"q"}, drain(t, db, q))
}

// An empty batch does nothing, but a bad transactor still fails it, as
// EnqueueBatch's.
func TestPushBatchEmpty(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "batch-empty")
	require.NoError(t, pq.PushBatch(ctx, db, nil))
	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{}))
	require.Empty(t, rawKeys(t, db, pq.Subspace().Bytes()), "nothing written, not even the stored configuration")
	require.ErrorIs(t, pq.PushBatch(ctx, nil, nil), fdbqueue.ErrInvalidArgument)
	var typedNil *memdb.DB
	require.ErrorIs(t, pq.PushBatch(ctx, typedNil, nil), fdbqueue.ErrInvalidArgument)
}

// signCodec encodes ints as decimal text and refuses negative ones.
type signCodec struct{}

var errNegative = errors.New("negative")

func (signCodec) Encode(v int) ([]byte, error) {
	if v < 0 {
		return nil, errNegative
	}
	return fmt.Appendf(nil, "%d", v), nil
}

func (signCodec) Decode(b []byte) (int, error) {
	var v int
	_, err := fmt.Sscanf(string(b), "%d", &v)
	return v, err
}

// TypedPriorityQueue.PushBatch encodes every value before anything is
// written: a value its codec fails on fails the whole batch with a
// *CodecError that carries the item's priority, its index in the
// message, and the codec's error; nothing is pushed. A good batch comes
// back decoded, in order.
func TestTypedPushBatch(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "typed-batch")
	tp := fdbqueue.NewTypedPriorityQueue[int](pq, signCodec{})
	err := tp.PushBatch(ctx, db, []fdbqueue.TypedPushItem[int]{{Value: 1, Priority: 1}, {Value: -5, Priority: 3}, {Value: 2, Priority: 2}})
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.ErrorIs(t, err, errNegative)
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, int64(3), ce.Priority)
	require.Nil(t, ce.Raw)
	require.Contains(t, err.Error(), "item 1")
	require.Empty(t, rawKeys(t, db, pq.Subspace().Bytes()), "nothing written")

	require.NoError(t, tp.PushBatch(ctx, db, nil))
	require.NoError(t, tp.PushBatch(ctx, db, []fdbqueue.TypedPushItem[int]{{Value: 10, Priority: 2}, {Value: 20, Priority: 1}, {Value: 30, Priority: 2}}))
	got, err := tp.PopMinBatch(ctx, db, 5)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 20, Priority: 1}, {Value: 10, Priority: 2}, {Value: 30, Priority: 2}}, got)
}

// A PushBatch reads each priority's tail with a snapshot read, so pushes
// and pops that commit while its commit is held (after its reads) do not
// make it conflict: its only read conflict is its journal record's key
// (journal.go, op.check). A push to one of its priorities then shares its
// first count, the two interleaving at random at that count, but the
// batch's own items stay in batch order (consecutive counts).
func TestPushBatchConflictsWithNothing(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "batch-conflicts")
	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("old5", 5), pushItem("old9", 9)}))
	held, release := db.HoldNextCommit()
	done := make(chan error, 1)
	go func() {
		done <- pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("a1", 5), pushItem("m", 9), pushItem("a2", 5), pushItem("a3", 5)})
	}()
	<-held
	before := db.Stats().Conflicts
	require.NoError(t, pq.Push(ctx, db, []byte("other"), 5))
	require.NoError(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{pushItem("other9", 9)}))
	it, err := pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("old5", 5), it)
	it, err = pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("other9", 9), it, "the held batch's m is not committed yet")
	release()
	require.NoError(t, <-done)
	require.Equal(t, before, db.Stats().Conflicts, "the batch committed without conflicting")

	got := popAllMin(t, db, pq)
	require.ElementsMatch(t, []string{"a1@5", "a2@5", "a3@5", "other@5", "old9@9", "m@9"}, got)
	var batch []string
	for _, s := range got {
		if s[0] == 'a' {
			batch = append(batch, s)
		}
	}
	require.Equal(t, []string{"a1@5", "a2@5", "a3@5"}, batch, "the batch's items in batch order")
}
