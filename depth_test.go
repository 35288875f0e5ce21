package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// depthOf is what Depth and Len say; they must agree while only this
// package writes the queue.
type depthLen interface {
	Depth(context.Context, kv.ReadTransactor) (int64, error)
	Len(context.Context, kv.ReadTransactor) (int, error)
}

func requireDepth(t testing.TB, db kv.Database, q depthLen, want int) {
	t.Helper()
	ctx := context.Background()
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, want, n, "Len")
	d, err := q.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(want), d, "Depth")
}

// depthKeys lists the depth counter keys of the queue in sub.
func depthKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) []kv.KeyValue {
	t.Helper()
	begin, err := tuple.Tuple{"d"}.AppendPack(append(sub.Bytes(), 0xff))
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: begin, End: append(bytes.Clone(begin), 0xff)}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	return kvs
}

func TestDepthFollowsOperations(t *testing.T) {
	for _, vs := range []bool{false, true} {
		t.Run(fmt.Sprintf("versionstamps=%v", vs), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			var opts []fdbqueue.Option
			if vs {
				opts = append(opts, fdbqueue.WithVersionstampOrder())
			}
			q := mustQueue(t, "depth", opts...)
			requireDepth(t, db, q, 0)
			for i := range 40 {
				require.NoError(t, q.Enqueue(ctx, db, fmt.Appendf(nil, "v%d", i)))
			}
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{{}, bytes.Repeat([]byte{0xff}, kv.MaxValueSize), make([]byte, 10)}))
			requireDepth(t, db, q, 43)
			_, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			_, err = q.DequeueBatch(ctx, db, 10)
			require.NoError(t, err)
			requireDepth(t, db, q, 32)
			require.Greater(t, len(depthKeys(t, db, q.Subspace())), 1, "the count is spread over several keys")
			require.NoError(t, q.Clear(ctx, db))
			requireDepth(t, db, q, 0)
			require.Empty(t, depthKeys(t, db, q.Subspace()), "Clear clears the counters")
			require.NoError(t, q.Enqueue(ctx, db, []byte("after clear")))
			requireDepth(t, db, q, 1)
			drain(t, db, q)
			requireDepth(t, db, q, 0)
			_, err = q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			requireDepth(t, db, q, 0)
		})
	}
}

func TestDepthPriorityQueue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "depth")
	for i := range 20 {
		require.NoError(t, pq.Push(ctx, db, []byte("x"), int64(i%3)))
	}
	requireDepth(t, db, pq, 20)
	_, err := pq.PopMinBatch(ctx, db, 5)
	require.NoError(t, err)
	_, err = pq.PopMax(ctx, db)
	require.NoError(t, err)
	requireDepth(t, db, pq, 14)
	require.NoError(t, pq.Clear(ctx, db))
	requireDepth(t, db, pq, 0)
}

// Inside a caller's transaction the change commits with the items, or not
// at all; an item enqueued and dequeued in one transaction counts zero.
func TestDepthInCallersTransaction(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "depth-tx")
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, q.EnqueueBatch(ctx, tr, [][]byte{[]byte("a"), []byte("b")}))
	d, err := q.Depth(ctx, tr)
	require.NoError(t, err)
	require.Equal(t, int64(2), d, "the transaction reads its own change")
	tr.Cancel()
	requireDepth(t, db, q, 0)

	vq := mustQueue(t, "depth-tx-vs", fdbqueue.WithVersionstampOrder())
	tr, err = db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, vq.Enqueue(ctx, tr, []byte("a")))
	d, err = vq.Depth(ctx, tr)
	require.NoError(t, err)
	require.Equal(t, int64(1), d, "versionstamp order: the counter is readable, the item is not")
	_, err = vq.Len(ctx, tr)
	require.ErrorIs(t, err, fdbqueue.ErrUnreadableAfterEnqueue)
	tr.Cancel()

	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		if err := q.EnqueueBatch(ctx, tr, [][]byte{[]byte("a"), []byte("b")}); err != nil {
			return err
		}
		_, err := q.Dequeue(ctx, tr)
		return err
	}))
	requireDepth(t, db, q, 1)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		_, err := q.Dequeue(ctx, tr)
		return err
	}))
	requireDepth(t, db, q, 0)
}

// Under commit_unknown_result whose commit applied, the retry finds the
// journal record and changes neither the items nor the count; without the
// journal it applies twice, items and count alike. (FDB's rule: a
// commit_unknown_result (1021) commit may have applied, and the binding's
// retry loop runs the function again: fdbclient/NativeAPI.actor.cpp,
// Transaction::onError.)
func TestDepthUnderCommitUnknownResult(t *testing.T) {
	ctx := context.Background()
	for _, journal := range []bool{true, false} {
		t.Run(fmt.Sprintf("journal=%v", journal), func(t *testing.T) {
			db := newDB(t)
			var opts []fdbqueue.Option
			if !journal {
				opts = append(opts, fdbqueue.WithoutIdempotency())
			}
			q := mustQueue(t, "depth-cur", opts...)
			db.FailNextCommit(kv.ErrCommitUnknownResult, true)
			require.NoError(t, q.Enqueue(ctx, db, []byte("once")))
			want := 1
			if !journal {
				want = 2
			}
			requireDepth(t, db, q, want)
			db.FailNextCommit(kv.ErrCommitUnknownResult, true)
			_, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			want--
			if !journal {
				want = 0 // the retry took the second copy
			}
			requireDepth(t, db, q, want)
			db.FailNextCommit(kv.ErrCommitUnknownResult, false)
			require.NoError(t, q.Enqueue(ctx, db, []byte("not applied, then retried")))
			requireDepth(t, db, q, want+1)
		})
	}
}

// Concurrent consumers conflict; only the committed takes count.
func TestDepthUnderConflictsAndFaults(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, memdb.WithSeed(5), memdb.WithFaults(withReadFaults(memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05})))
	q := mustQueue(t, "depth-faults")
	pq := mustPQ(t, "depth-faults-pq")
	gt := forGoroutines(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				if err := q.Enqueue(ctx, db, []byte("x")); err != nil {
					gt.Error(err)
				}
				if err := pq.Push(ctx, db, []byte("y"), int64(i)); err != nil {
					gt.Error(err)
				}
				if i%2 == w%2 {
					if _, err := q.Dequeue(ctx, db); err != nil && !errors.Is(err, fdbqueue.ErrEmpty) {
						gt.Error(err)
					}
					if _, err := pq.PopMin(ctx, db); err != nil && !errors.Is(err, fdbqueue.ErrEmpty) {
						gt.Error(err)
					}
				}
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the workers")
	require.Positive(t, db.Stats().Conflicts+db.Stats().InjectedNotCommitted, "the test made conflicts")
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	requireDepth(t, db, q, n)
	m, err := pq.Len(ctx, db)
	require.NoError(t, err)
	requireDepth(t, db, pq, m)
}

// Staged dequeues move items to waiters' results and back (cancellations,
// crashes and Recover); the count follows the items' range throughout.
func TestDepthStaged(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db := stgDB(t, memdb.WithSeed(3), memdb.WithFaults(stagingFaults))
		sub := stgSubspace(t, "depth")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{BatchSize: 8})...)
		items := make([][]byte, 200)
		for i := range items {
			items[i] = fmt.Appendf(nil, "i%d", i)
		}
		require.NoError(t, q.EnqueueBatch(ctx, db, items))
		requireDepth(t, db, q, 200)
		gt := forGoroutines(t)
		var wg sync.WaitGroup
		var mu sync.Mutex
		taken := 0
		for c := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					cctx, cancel := context.WithCancel(ctx)
					if (c+i)%7 == 0 {
						cancel() // some calls end at once: their items go back
					}
					_, err := q.Dequeue(cctx, db)
					cancel()
					if errors.Is(err, fdbqueue.ErrEmpty) {
						return
					}
					if err == nil {
						mu.Lock()
						taken++
						mu.Unlock()
					} else if !errors.Is(err, context.Canceled) {
						gt.Error(err)
						return
					}
				}
			}()
		}
		waitWithin(t, &wg, workTimeout, "the consumers")
		_, err := q.Recover(ctx, db)
		require.NoError(t, err)
		n, err := q.Len(ctx, db)
		require.NoError(t, err)
		require.Equal(t, 200-taken, n)
		requireDepth(t, db, q, n)
	})
}

// An item handed to a crashed waiter leaves the count; Recover returns it.
// The recovery and the expired claim each get a log line.
func TestDepthStagedCrashRecovery(t *testing.T) {
	ctx := context.Background()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "depth-crash")
	const timeout = 30 * time.Second
	var logs syncBuffer
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: timeout, Serving: fdbqueue.ServeInBatches}), fdbqueue.WithClock(clock.Now),
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	release, result := waiterHeldAtArmed(ctx, t, db, q)
	require.NoError(t, q.Enqueue(ctx, db, []byte("stranded")))
	requireDepth(t, db, q, 1)
	n, err := fdbqueue.FulfilStaged(ctx, db, q)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	requireDepth(t, db, q, 0) // in the waiter's result, outside the range
	clock.Advance(timeout + time.Second)
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, st.ReturnedItems)
	requireDepth(t, db, q, 1)
	close(release)
	require.ErrorIs(t, recvWithin(t, result, "the slow waiter's return"), fdbqueue.ErrClaimExpired)
	requireDepth(t, db, q, 1)
	require.Contains(t, logs.String(), "recovered a staged line")
	require.Contains(t, logs.String(), "returned_items=1")
	require.Contains(t, logs.String(), "staged claim expired")
}

// waiterHeldAtArmed starts a DequeueWait on q whose waiter, once its
// request is filed ("armed"), stops until release is closed, and returns
// when it has stopped there; the wait's error arrives on result.
func waiterHeldAtArmed(ctx context.Context, t *testing.T, db kv.Database, q *fdbqueue.Queue) (release chan struct{}, result chan error) {
	t.Helper()
	hung := make(chan struct{})
	release = make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "armed" {
			once.Do(func() { close(hung); <-release })
		}
	})
	result = make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(ctx, db)
		result <- err
	}()
	recvWithin(t, hung, "the waiter's request filed")
	return release, result
}

// syncBuffer is a bytes.Buffer safe for a logger used by several
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Recipe clients do not maintain the counters: Depth drifts (here below
// zero), and RepairDepth recounts across several pages.
func TestRepairDepth(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "depth-repair")
	pq := mustPQ(t, "depth-repair-pq")
	defer fdbqueue.SetRepairPage(7)()
	// A recipe client enqueues 20 items, this package dequeues 25 of 30.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range 20 {
			k, err := q.Subspace().Pack(tuple.Tuple{int64(i), []byte{byte(i)}})
			if err != nil {
				return err
			}
			tr.Set(k, []byte("recipe"))
		}
		return nil
	}))
	for range 10 {
		require.NoError(t, q.Enqueue(ctx, db, []byte("lib")))
	}
	_, err := q.DequeueBatch(ctx, db, 25)
	require.NoError(t, err)
	d, err := q.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(-15), d, "10 counted in, 25 out")
	got, err := q.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(5), got)
	requireDepth(t, db, q, 5)
	require.NoError(t, q.Enqueue(ctx, db, []byte("lib")))
	requireDepth(t, db, q, 6)

	// Exactly a page, and an empty queue.
	for range 7 {
		require.NoError(t, pq.Push(ctx, db, []byte("p"), 1))
	}
	got, err = pq.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(7), got)
	requireDepth(t, db, pq, 7)
	// Counters off by 3, over two pages and a part: the last page's
	// correction counts the pages before it.
	require.NoError(t, pq.Push(ctx, db, []byte("p"), 2))
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range 10 {
			k, err := pq.Subspace().Pack(tuple.Tuple{int64(3), int64(i), []byte{1}})
			if err != nil {
				return err
			}
			tr.Set(k, []byte("recipe"))
		}
		return nil
	}))
	d, err = pq.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(8), d, "the recipe's items are not counted")
	got, err = pq.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(18), got)
	requireDepth(t, db, pq, 18)
	require.NoError(t, pq.Clear(ctx, db))
	got, err = pq.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Zero(t, got)
	requireDepth(t, db, pq, 0)

	_, err = q.RepairDepth(ctx, nil)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = q.Depth(ctx, nil)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
}

// On a queue without a record (a recipe queue), RepairDepth checks the
// record as the read-only operations do: an indexed handle recounts and
// writes the counters but no record (the recipes' clients may still
// choose its value encoding), and a versionstamp handle, whose layout the
// recipe's items do not have, fails with ErrConfigMismatch and writes
// nothing.
func TestRepairDepthRecipeQueue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "depth", "recipe")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range 3 {
			k, err := sub.Pack(tuple.Tuple{int64(i), []byte{byte(i)}})
			if err != nil {
				return err
			}
			tr.Set(k, []byte("recipe"))
		}
		return nil
	}))
	before := allPairs(t, db)
	vq, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder())
	require.NoError(t, err)
	_, err = vq.RepairDepth(ctx, db)
	requireMismatch(t, err, "layout")
	_, err = vq.Depth(ctx, db)
	requireMismatch(t, err, "layout")
	require.Equal(t, before, allPairs(t, db), "nothing written")

	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	got, err := q.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(3), got)
	requireDepth(t, db, q, 3)
	rec, err := getKey(ctx, db, configKey(t, sub))
	require.NoError(t, err)
	require.Nil(t, rec, "RepairDepth stores no record")
}

// The typed wrappers read and repair the same counters.
func TestDepthTyped(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tq := fdbqueue.NewTypedQueue[[]byte](mustQueue(t, "depth-typed"), fdbqueue.BytesCodec{})
	require.NoError(t, tq.Enqueue(ctx, db, []byte("a")))
	require.NoError(t, tq.Enqueue(ctx, db, []byte("b")))
	d, err := tq.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(2), d)
	n, err := tq.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(2), n)
	tp := fdbqueue.NewTypedPriorityQueue[[]byte](mustPQ(t, "depth-typed-pq"), fdbqueue.BytesCodec{})
	require.NoError(t, tp.Push(ctx, db, []byte("x"), 3))
	d, err = tp.Depth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), d)
	n, err = tp.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	for _, r := range []func() error{
		func() error { reg, err := tq.RegisterGauges(db); _ = reg.Unregister(); return err },
		func() error { reg, err := tp.RegisterGauges(db); _ = reg.Unregister(); return err },
	} {
		require.NoError(t, r())
	}
}

// interleaveDB runs between, once, inside the first transaction attempt
// whose body succeeds, after the body and before its commit: another
// client's commit that lands between that attempt's reads and its commit.
type interleaveDB struct {
	kv.Database
	between func()
}

func (d *interleaveDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return d.Database.Transact(ctx, func(tr kv.Transaction) error {
		err := fn(tr)
		if f := d.between; err == nil && f != nil {
			d.between = nil
			f()
		}
		return err
	})
}

// A producer whose enqueue commits between the read and the commit of
// RepairDepth's last page is counted: its item is not in what the page
// read, and the repair must not overwrite its counter change either.
// Producers may keep enqueueing during a repair (RepairDepth's doc).
func TestRepairDepthRacingProducer(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "depth-repair-race")
	for range 3 {
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	}
	wrapped := &interleaveDB{Database: db, between: func() {
		require.NoError(t, q.Enqueue(ctx, db, []byte("late")))
	}}
	got, err := q.RepairDepth(ctx, wrapped)
	require.NoError(t, err)
	require.Equal(t, int64(3), got, "the page read before the producer's commit")
	requireDepth(t, db, q, 4)

	// A consumer's take in the same window is counted too.
	wrapped.between = func() {
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
	got, err = q.RepairDepth(ctx, wrapped)
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
	requireDepth(t, db, q, 3)

	// A retry after an applied commit_unknown_result adds nothing more.
	// A recipe client's item, which the counters miss.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		k, err := q.Subspace().Pack(tuple.Tuple{int64(1) << 40, []byte("recipe")})
		tr.Set(k, []byte("r"))
		return err
	}))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	got, err = q.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(4), got)
	requireDepth(t, db, q, 4)
}

// A Recover that only drops an expired request, with no item to return,
// still gets its log line (WithLogger: recoveries of staged lines), with
// what it did: one request dropped, no item returned.
func TestRecoverDroppingOnlyARequestIsLogged(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "recover-log-dropped")
	const timeout = 30 * time.Second
	var logs syncBuffer
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now),
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	release, result := waiterHeldAtArmed(ctx, t, db, q)
	clock.Advance(timeout + time.Second)
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1}, st)
	cancel()
	close(release)
	require.Error(t, recvWithin(t, result, "the waiter's return"))
	require.Contains(t, logs.String(), "recovered a staged line")
	require.Contains(t, logs.String(), "dropped_requests=1 returned_items=0")
}
