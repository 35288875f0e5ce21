package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// stgDB returns an embedded database with a tiny backoff, so that contended
// tests stay fast.
func stgDB(t testing.TB, opts ...memdb.Option) *memdb.DB {
	t.Helper()
	opts = append([]memdb.Option{memdb.WithBackoff(50*time.Microsecond, 2*time.Millisecond)}, opts...)
	db := memdb.New(opts...)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func stgSubspace(t testing.TB, name string) fdbqueue.Subspace {
	t.Helper()
	s, err := fdbqueue.NewSubspace(tuple.Tuple{"staging", name})
	require.NoError(t, err)
	return s
}

func stgQueue(t testing.TB, sub fdbqueue.Subspace, opts ...fdbqueue.Option) *fdbqueue.Queue {
	t.Helper()
	q, err := fdbqueue.NewQueue(sub, opts...)
	require.NoError(t, err)
	return q
}

// stagingKeys returns the requests and results left in the staging part of
// the queue's meta subspace (the signal key is not counted).
func stagingKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) []string {
	t.Helper()
	meta := append(sub.Bytes(), 0xff)
	begin, err := tuple.Tuple{"s"}.AppendPack(bytes.Clone(meta))
	require.NoError(t, err)
	sig, err := tuple.Tuple{"s", "sig"}.AppendPack(bytes.Clone(meta))
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: begin, End: append(bytes.Clone(begin), 0xff)}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	var out []string
	for _, p := range kvs {
		if !bytes.Equal(p.Key, sig) {
			out = append(out, fmt.Sprintf("%q", p.Key))
		}
	}
	return out
}

// itemKeys returns the keys of the items in the queue's range.
func itemKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) [][]byte {
	t.Helper()
	r, err := sub.Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	keys := make([][]byte, len(kvs))
	for i, p := range kvs {
		keys[i] = p.Key
	}
	return keys
}

// requireNoWatches checks that no operation left a watch behind.
func requireNoWatches(t testing.TB, db *memdb.DB) {
	t.Helper()
	require.Zero(t, db.Stats().Watches, "outstanding watches after every operation returned")
}

var stagingFaults = memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05}

// stagingMode is one serving mode of a staged Queue: in batches (on the
// recipe's keys) or by place (on versionstamp-ordered keys, which it needs).
type stagingMode struct {
	name    string
	byPlace bool
}

var stagingModes = []stagingMode{{"batches", false}, {"place", true}}

// opts returns the options of a Queue staged with c in mode m.
func (m stagingMode) opts(c fdbqueue.StagingConfig) []fdbqueue.Option {
	if !m.byPlace {
		c.Serving = fdbqueue.ServeInBatches
		return []fdbqueue.Option{fdbqueue.WithStaging(c)}
	}
	c.Serving = fdbqueue.ServeByPlace
	return []fdbqueue.Option{fdbqueue.WithStaging(c), fdbqueue.WithVersionstampOrder()}
}

// layout is the key layout option of mode m (nil: the recipe's), for the
// other Queue values on the same subspace.
func (m stagingMode) layout() fdbqueue.Option {
	if m.byPlace {
		return fdbqueue.WithVersionstampOrder()
	}
	return nil
}

// requireReturned checks where an item taken by a call that then failed
// went back: in batch mode to its original key; in place mode to the
// tail, under a new key (here the queue holds only it).
func (m stagingMode) requireReturned(t *testing.T, db *memdb.DB, sub fdbqueue.Subspace, original []byte) {
	t.Helper()
	keys := itemKeys(t, db, sub)
	require.Len(t, keys, 1, "the item is back in the queue")
	if m.byPlace {
		require.NotEqual(t, original, keys[0], "place mode: the item went to the tail, under a new key")
	} else {
		require.Equal(t, original, keys[0], "batch mode: the item is back at its original key")
	}
}

// forModes runs f as a subtest in each ordering mode.
func forModes(t *testing.T, f func(t *testing.T, m stagingMode)) {
	for _, m := range stagingModes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

func TestStagingConfigValidation(t *testing.T) {
	sub := stgSubspace(t, "config")
	for _, c := range []fdbqueue.StagingConfig{
		{BatchSize: -1}, {BatchSize: 10_001}, {ClaimTimeout: time.Microsecond}, {CleanupTimeout: -time.Second},
		{Serving: -1}, {Serving: fdbqueue.ServeInBatches + 1},
		// Serving by place needs keys in commit order.
		{Serving: fdbqueue.ServeByPlace},
	} {
		_, err := fdbqueue.NewQueue(sub, fdbqueue.WithStaging(c))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "config %+v", c)
	}
	_, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "a priority queue cannot serve by place")
	for _, c := range []fdbqueue.StagingConfig{{}, {Serving: fdbqueue.ServeInBatches}} {
		_, err = fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(c))
		require.NoError(t, err)
	}
	_, err = fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err, "the zero config takes the defaults")
	_, err = fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}), fdbqueue.WithVersionstampOrder())
	require.NoError(t, err)
	require.Equal(t, "by place", fdbqueue.ServeByPlace.String())
}

func TestStagedWaitNeedsStaging(t *testing.T) {
	db := stgDB(t)
	q := stgQueue(t, stgSubspace(t, "plain"))
	_, err := q.DequeueWait(context.Background(), db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "plainpq"))
	require.NoError(t, err)
	_, err = pq.PopMinWait(context.Background(), db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
}

func TestStagedDequeueSingleConsumer(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db := stgDB(t)
		sub := stgSubspace(t, "single")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)

		_, err := q.Dequeue(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		for _, v := range []string{"a", "b", "c"} {
			require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
		}
		for _, want := range []string{"a", "b"} {
			got, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, want, string(got))
		}
		got, err := q.DequeueWait(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "c", string(got))
		_, err = q.Dequeue(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// Given a Transaction, a staged queue dequeues plainly inside it.
func TestStagedDequeueInsideTransaction(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "intx")
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	id := fdbqueue.NewOpID()
	got, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) {
		return q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
	})
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	require.Empty(t, stagingKeys(t, db, sub))
}

// consumeAll runs consumers that call take until every one of n items has
// been received, then stops the ones still waiting, and returns the items
// received in total.
func consumeAll(t *testing.T, consumers, n int, take func(ctx context.Context) (string, error)) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := take(ctx)
				if err != nil {
					if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
						errs <- err
					}
					return
				}
				mu.Lock()
				got[v]++
				mu.Unlock()
				if total.Add(1) == int64(n) {
					cancel() // every item is in: stop the waiting consumers
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(n), total.Load(), "items received before the deadline")
	return got
}

func requireExactlyOnce(t *testing.T, got map[string]int, want []string) {
	t.Helper()
	require.Len(t, got, len(want), "distinct items received")
	for _, w := range want {
		require.Equal(t, 1, got[w], "item %s received %d times", w, got[w])
	}
}

func TestStagedDequeueWaitManyConsumers(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, faults := range []bool{false, true} {
			t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
				opts := []memdb.Option{memdb.WithSeed(7)}
				if faults {
					opts = append(opts, memdb.WithFaults(stagingFaults))
				}
				db := stgDB(t, opts...)
				sub := stgSubspace(t, "many")
				q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{BatchSize: 16})...)
				const producers, perProducer, consumers = 4, 60, 32
				var want []string
				for p := range producers {
					for i := range perProducer {
						want = append(want, fmt.Sprintf("p%d-%d", p, i))
					}
				}
				var pwg sync.WaitGroup
				for p := range producers {
					pwg.Add(1)
					go func() {
						defer pwg.Done()
						for i := range perProducer {
							if err := q.Enqueue(context.Background(), db, fmt.Appendf(nil, "p%d-%d", p, i)); err != nil {
								t.Errorf("enqueue: %v", err)
								return
							}
						}
					}()
				}
				got := consumeAll(t, consumers, len(want), func(ctx context.Context) (string, error) {
					v, err := q.DequeueWait(ctx, db)
					return string(v), err
				})
				pwg.Wait()
				requireExactlyOnce(t, got, want)
				_, err := q.Dequeue(context.Background(), db)
				require.ErrorIs(t, err, fdbqueue.ErrEmpty, "nothing left in the queue")
				require.Empty(t, stagingKeys(t, db, sub), "requests or results left behind")
				requireNoWatches(t, db)
			})
		}
	})
}

// Many consumers calling the non-blocking staged Dequeue on a filled queue
// drain it exactly once and stop with ErrEmpty.
func TestStagedDequeueManyConsumersDrain(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, faults := range []bool{false, true} {
			t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
				ctx := context.Background()
				opts := []memdb.Option{memdb.WithSeed(11)}
				if faults {
					opts = append(opts, memdb.WithFaults(stagingFaults))
				}
				db := stgDB(t, opts...)
				sub := stgSubspace(t, "drain")
				q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{BatchSize: 16})...)
				var want [][]byte
				var wantS []string
				for i := range 320 {
					want = append(want, fmt.Appendf(nil, "i%d", i))
					wantS = append(wantS, fmt.Sprintf("i%d", i))
				}
				for i := 0; i < len(want); i += 80 {
					require.NoError(t, q.EnqueueBatch(ctx, db, want[i:i+80]))
				}
				var mu sync.Mutex
				got := map[string]int{}
				var wg sync.WaitGroup
				for range 32 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for {
							v, err := q.Dequeue(ctx, db)
							if errors.Is(err, fdbqueue.ErrEmpty) {
								return
							}
							if err != nil {
								t.Errorf("dequeue: %v", err)
								return
							}
							mu.Lock()
							got[string(v)]++
							mu.Unlock()
						}
					}()
				}
				wg.Wait()
				requireExactlyOnce(t, got, wantS)
				require.Empty(t, stagingKeys(t, db, sub))
				requireNoWatches(t, db)
			})
		}
	})
}

func TestStagedPopManyConsumers(t *testing.T) {
	for _, faults := range []bool{false, true} {
		t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
			opts := []memdb.Option{memdb.WithSeed(3)}
			if faults {
				opts = append(opts, memdb.WithFaults(stagingFaults))
			}
			db := stgDB(t, opts...)
			sub := stgSubspace(t, "pq")
			pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{BatchSize: 16}))
			require.NoError(t, err)
			const producers, perProducer, consumers = 4, 60, 32
			var want []string
			for p := range producers {
				for i := range perProducer {
					want = append(want, fmt.Sprintf("p%d-%d", p, i))
				}
			}
			var pwg sync.WaitGroup
			for p := range producers {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					for i := range perProducer {
						prio := int64((i*7 + p) % 10)
						if err := pq.Push(context.Background(), db, fmt.Appendf(nil, "p%d-%d", p, i), prio); err != nil {
							t.Errorf("push: %v", err)
							return
						}
					}
				}()
			}
			var n atomic.Int64
			got := consumeAll(t, consumers, len(want), func(ctx context.Context) (string, error) {
				pop := pq.PopMinWait
				if n.Add(1)%2 == 0 {
					pop = pq.PopMaxWait
				}
				it, err := pop(ctx, db)
				return string(it.Value), err
			})
			pwg.Wait()
			requireExactlyOnce(t, got, want)
			_, err = pq.PopMin(context.Background(), db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			require.Empty(t, stagingKeys(t, db, sub))
			requireNoWatches(t, db)
		})
	}
}

// Staged PopMin and PopMax return the extremes, like the plain ones.
func TestStagedPopOrder(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "pqorder"), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err)
	for _, p := range []int64{5, -3, 9, 0} {
		require.NoError(t, pq.Push(ctx, db, fmt.Appendf(nil, "%d", p), p))
	}
	it, err := pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(-3), it.Priority)
	it, err = pq.PopMaxWait(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(9), it.Priority)
	it, err = pq.PopMinWait(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(0), it.Priority)
	it, err = pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "5", string(it.Value))
}

// A waiter blocked on an empty queue wakes when an item is enqueued.
func TestStagedWaitWakesOnEnqueue(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		db := stgDB(t)
		sub := stgSubspace(t, "wake")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		armed := make(chan struct{}, 1)
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "armed" {
				select {
				case armed <- struct{}{}:
				default:
				}
			}
		})
		done := make(chan []byte, 1)
		go func() {
			v, err := q.DequeueWait(context.Background(), db)
			if err != nil {
				t.Errorf("DequeueWait: %v", err)
			}
			done <- v
		}()
		<-armed
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("late")))
		require.Equal(t, "late", string(<-done))
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

func TestStagedCancelBeforeRegistration(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		db := stgDB(t)
		sub := stgSubspace(t, "cancel0")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := q.DequeueWait(ctx, db)
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, stagingKeys(t, db, sub))
	})
}

func TestStagedCancelAfterRegistration(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		db := stgDB(t)
		sub := stgSubspace(t, "cancel1")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		ctx, cancel := context.WithCancel(context.Background())
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "registered" {
				require.NotEmpty(t, stagingKeys(t, db, sub), "the request is filed")
				cancel()
			}
		})
		_, err := q.DequeueWait(ctx, db)
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, stagingKeys(t, db, sub), "the request was withdrawn")
		requireNoWatches(t, db)

		// The withdrawn request takes nothing: the next item goes to the next
		// consumer.
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("kept")))
		v, err := q.Dequeue(context.Background(), db)
		require.NoError(t, err)
		require.Equal(t, "kept", string(v))
	})
}

// A waiter whose request was fulfilled but whose context ends before it
// collects writes the item back at its original key.
func TestStagedCancelAfterFulfilment(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db := stgDB(t)
		sub := stgSubspace(t, "cancel2")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		plain := stgQueue(t, sub, m.layout()) // a producer without staging options (it runs in the hook, before the waiter sleeps)
		wctx, cancel := context.WithCancel(ctx)
		var itemKey []byte
		fdbqueue.SetStagingHook(q, func(p string) {
			if p != "armed" {
				return
			}
			require.NoError(t, plain.Enqueue(ctx, db, []byte("handed")))
			keys := itemKeys(t, db, sub)
			require.Len(t, keys, 1)
			itemKey = keys[0]
			n, err := fdbqueue.FulfilStaged(ctx, db, q)
			require.NoError(t, err)
			require.Equal(t, 1, n, "the waiter's request is served")
			require.Empty(t, itemKeys(t, db, sub), "the item moved to the waiter's result")
			cancel()
		})
		_, err := q.DequeueWait(wctx, db)
		require.ErrorIs(t, err, context.Canceled)
		m.requireReturned(t, db, sub, itemKey)
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// A take whose commit is interrupted (it may or may not apply) while the
// caller's context ends leaves the item in the queue either way.
func TestStagedCancelDuringTake(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, applied := range []bool{false, true} {
			t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
				ctx := context.Background()
				db := stgDB(t)
				sub := stgSubspace(t, "cancel3")
				q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
				require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
				before := itemKeys(t, db, sub)
				wctx, cancel := context.WithCancel(ctx)
				fdbqueue.SetStagingHook(q, func(p string) {
					switch p {
					case "taking":
						db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), applied)
					case "failed":
						cancel()
					}
				})
				_, err := q.Dequeue(wctx, db)
				require.ErrorIs(t, err, context.Canceled)
				require.False(t, kv.MaybeCommitted(err), "the cleanup settled the outcome: %v", err)
				if applied {
					m.requireReturned(t, db, sub, before[0])
				} else {
					require.Equal(t, before, itemKeys(t, db, sub), "the take did not apply: the item is where it was")
				}
				require.Empty(t, stagingKeys(t, db, sub))
			})
		}
	})
}

// An interrupted take with the caller still waiting is resolved through
// the journal: the item is returned once.
func TestStagedInterruptedTakeResolved(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db := stgDB(t)
		sub := stgSubspace(t, "interrupted")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
		db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionTimedOut), true)
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "a", string(v))
		v, err = q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "b", string(v))
	})
}

// A waiter that is fulfilled and never collects (it hung or crashed)
// strands its item only until the claim timeout: Recover puts it back. When
// the waiter comes back it finds its request gone and fails with
// ErrClaimExpired, having taken nothing.
func TestStagedCrashRecovery(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		db := stgDB(t)
		sub := stgSubspace(t, "crash")
		const timeout = 30 * time.Second
		q := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)
		plain := stgQueue(t, sub, fdbqueue.WithClock(clock.Now), m.layout())

		hung := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "armed" {
				once.Do(func() {
					close(hung)
					<-release // hang after registering, before collecting
				})
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		result := make(chan error, 1)
		go func() {
			_, err := q.DequeueWait(wctx, db)
			result <- err
		}()
		<-hung

		// The hung waiter's request is served: its item sits in its result.
		require.NoError(t, plain.Enqueue(ctx, db, []byte("stranded")))
		key := itemKeys(t, db, sub)[0]
		n, err := fdbqueue.FulfilStaged(ctx, db, q)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, itemKeys(t, db, sub))

		st, err := q.Recover(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.RecoverStats{}, st, "nothing expired yet")

		clock.Advance(timeout + time.Second)
		st, err = q.Recover(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.RecoverStats{ReturnedItems: 1}, st)
		m.requireReturned(t, db, sub, key)
		v, err := plain.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "stranded", string(v))

		// The slow waiter resumes and finds its request gone: its item
		// went back to the queue during its call, so the call fails (going
		// on with a new request would not be linearizable) and took
		// nothing.
		close(release)
		werr := <-result
		require.ErrorIs(t, werr, fdbqueue.ErrClaimExpired)
		require.False(t, kv.MaybeCommitted(werr))
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// Requests whose waiters stopped renewing them hold up nobody: a consumer
// that finds only expired requests takes the head, and Recover drops them.
func TestStagedExpiredRequestsDropped(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		db := stgDB(t)
		sub := stgSubspace(t, "expired")
		const timeout = 10 * time.Second
		q := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)

		// Two waiters file requests and hang for good.
		var hangs sync.WaitGroup
		hangs.Add(2)
		release := make(chan struct{})
		var mu sync.Mutex
		seen := 0
		fdbqueue.SetStagingHook(q, func(p string) {
			if p != "armed" {
				return
			}
			mu.Lock()
			seen++
			first := seen <= 2
			mu.Unlock()
			if first {
				hangs.Done()
				<-release
			}
		})
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = q.DequeueWait(wctx, db)
			}()
		}
		hangs.Wait()
		require.Len(t, stagingKeys(t, db, sub), 4, "two requests, each with its marker at its result key")

		clock.Advance(timeout + time.Second)
		// A new consumer is not held up by the stale requests: they are
		// dropped, and it takes the item. In batch mode it takes the head
		// at once and leaves them to Recover; in place mode they hold the
		// first places, so it files a request, and its next step drops
		// them (the first one's item, "fresh", goes to the tail) and takes
		// "fresh".
		require.NoError(t, q.Enqueue(ctx, db, []byte("fresh")))
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "fresh", string(v))

		st, err := q.Recover(ctx, db)
		require.NoError(t, err)
		want := fdbqueue.RecoverStats{DroppedRequests: 2}
		if m.byPlace {
			want = fdbqueue.RecoverStats{}
		}
		require.Equal(t, want, st)
		require.Empty(t, stagingKeys(t, db, sub))
		cancel()
		close(release)
		wg.Wait()
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// The typed wrappers of the Wait forms decode what the staged calls
// return, and wait for an item while the queue is empty.
func TestTypedWaitForms(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	tq := fdbqueue.NewTypedQueue(stgQueue(t, stgSubspace(t, "typedwait"),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{})), fdbqueue.StringCodec{})
	require.NoError(t, tq.Enqueue(ctx, db, "first"))
	v, err := tq.DequeueWait(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "first", v)
	got := make(chan string, 1)
	go func() {
		v, err := tq.DequeueWait(ctx, db)
		if err != nil {
			t.Errorf("DequeueWait: %v", err)
		}
		got <- v
	}()
	require.NoError(t, tq.Enqueue(ctx, db, "later"))
	require.Equal(t, "later", <-got)

	pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "typedwaitpq"), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err)
	tp := fdbqueue.NewTypedPriorityQueue(pq, fdbqueue.StringCodec{})
	for _, p := range []int64{3, 1, 2} {
		require.NoError(t, tp.Push(ctx, db, fmt.Sprint(p), p))
	}
	it, err := tp.PopMinWait(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.TypedItem[string]{Value: "1", Priority: 1}, it)
	it, err = tp.PopMaxWait(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.TypedItem[string]{Value: "3", Priority: 3}, it)

	// Without staging the Wait forms refuse, as the untyped ones do.
	plain := fdbqueue.NewTypedQueue(stgQueue(t, stgSubspace(t, "typedplain")), fdbqueue.StringCodec{})
	_, err = plain.DequeueWait(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = tp.PopMinWait(cctx, db) // "2" is left: it returns at once
	require.NoError(t, err)
	_, err = tp.PopMaxWait(cctx, db)
	require.ErrorIs(t, err, context.DeadlineExceeded, "empty: waits until ctx ends")
}

// Served by place, a waiter whose place in the line is reached by the
// items takes the item at its place itself, without waiting for a
// fulfilment: requests are still served oldest first, each with the next
// item in queue order. While the line is long, new calls file their
// request without a first look at the head.
func TestStagedSelfServiceByPlace(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "self")
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithVersionstampOrder())
	// Two waiters file requests and stop right after, before any item
	// exists.
	results, release := stallTwoWaiters(ctx, t, db, q)
	require.Len(t, stagingKeys(t, db, sub), 4, "two requests, each with its marker at its result key")
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))

	// A third consumer stands behind the two: it takes the third item.
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "c", string(v))
	st := q.StagingStats()
	phase := func(st fdbqueue.StagingStats, name string) fdbqueue.StagingPhaseStats {
		for _, p := range st.Phases {
			if p.Phase == name {
				return p
			}
		}
		t.Fatalf("no phase %q", name)
		return fdbqueue.StagingPhaseStats{}
	}
	require.Equal(t, int64(1), phase(st, "take").Commits, "the item was taken at the request's place")
	require.Zero(t, phase(st, "fulfil").Commits+phase(st, "collect").Commits, "nobody fulfilled")

	// The line is long: the next call registers at once and takes the
	// item after the two reserved ones.
	require.NoError(t, q.Enqueue(ctx, db, []byte("d")))
	v, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "d", string(v))
	st2 := q.StagingStats()
	require.Equal(t, phase(st, "fast").Commits, phase(st2, "fast").Commits, "no plain attempt while the line is long")
	require.Equal(t, int64(2), phase(st2, "take").Commits)

	// The two older requests get the two first items, in order.
	close(release)
	got := []string{<-results, <-results}
	require.ElementsMatch(t, []string{"a", "b"}, got)
	require.Empty(t, itemKeys(t, db, sub))
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// A registration whose commit has an unknown outcome is resolved through
// its marker: applied or not, the waiter gets the item once, and nothing
// is left behind; a cancelled waiter withdraws a request it could not see.
func TestStagedRegistrationUnknownResult(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, applied := range []bool{false, true} {
			for _, cancelAfter := range []bool{false, true} {
				t.Run(fmt.Sprintf("applied=%v/cancel=%v", applied, cancelAfter), func(t *testing.T) {
					ctx := context.Background()
					db := stgDB(t)
					sub := stgSubspace(t, "regunknown")
					q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
					wctx, cancel := context.WithCancel(ctx)
					defer cancel()
					var once, enqueue sync.Once
					fdbqueue.SetStagingHook(q, func(p string) {
						switch p {
						case "registering":
							once.Do(func() { db.FailNextCommit(kv.ErrCommitUnknownResult, applied) })
						case "failed":
							if cancelAfter {
								cancel()
							}
						case "armed":
							// The queue is empty: the waiter sleeps on its
							// request. An item arrives.
							enqueue.Do(func() { go func() { _ = q.Enqueue(ctx, db, []byte("x")) }() })
						}
					})
					v, err := q.DequeueWait(wctx, db)
					if cancelAfter {
						require.ErrorIs(t, err, context.Canceled)
						require.Empty(t, stagingKeys(t, db, sub), "the request was withdrawn")
						requireNoWatches(t, db)
						return
					}
					require.NoError(t, err)
					require.Equal(t, "x", string(v))
					for _, p := range q.StagingStats().Phases {
						if p.Phase == "register" {
							require.Equal(t, int64(1), p.Failures, "the registration's commit failed once")
						}
					}
					require.Empty(t, itemKeys(t, db, sub))
					require.Empty(t, stagingKeys(t, db, sub))
					requireNoWatches(t, db)
				})
			}
		}
	})
}

// Waiters asleep on an empty queue are served in a batch when items
// arrive: a woken helper fulfils the line in one transaction, and the
// others collect; every item is received once.
func TestStagedWokenWaitersServedInBatch(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "batchwake")
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	const waiters = 8
	armed := make(chan struct{}, 4*waiters)
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "armed" {
			armed <- struct{}{}
		}
	})
	results := make(chan string, waiters)
	for range waiters {
		go func() {
			v, err := q.DequeueWait(ctx, db)
			if err != nil {
				t.Errorf("DequeueWait: %v", err)
			}
			results <- string(v)
		}()
	}
	for range waiters {
		<-armed
	}
	var want []string
	var vals [][]byte
	for i := range waiters {
		want = append(want, fmt.Sprintf("v%d", i))
		vals = append(vals, fmt.Appendf(nil, "v%d", i))
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, vals))
	got := map[string]int{}
	for range waiters {
		got[<-results]++
	}
	requireExactlyOnce(t, got, want)
	st := q.StagingStats()
	require.Positive(t, st.Served, "a woken helper served other waiters")
	var batches int64
	for _, n := range st.BatchSizes {
		batches += n
	}
	require.Positive(t, batches)
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// In a PriorityQueue an item pushed ahead moves every place in the line,
// so waiters do not take the item at their place: only the oldest takes
// its own, from the head, and the others are served in batches. A waiter
// behind two stopped ones waits for them even when items reach it.
func TestStagedPopWaitsForOlderRequests(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "pqline"), fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, err)
	registered := make(chan struct{}, 2)
	armed := make(chan struct{}, 16)
	release := make(chan struct{})
	var hung atomic.Int32
	fdbqueue.SetPQStagingHook(pq, func(p string) {
		switch p {
		case "registered":
			if hung.Add(1) <= 2 {
				registered <- struct{}{}
				<-release
			}
		case "armed":
			armed <- struct{}{}
		}
	})
	results, third := make(chan int64, 2), make(chan int64, 1)
	pop := func(to chan int64) {
		it, err := pq.PopMinWait(ctx, db)
		if err != nil {
			t.Errorf("PopMinWait: %v", err)
		}
		to <- it.Priority
	}
	for range 2 {
		go pop(results)
		<-registered
	}
	for _, p := range []int64{7, 5, 6} {
		require.NoError(t, pq.Push(ctx, db, fmt.Appendf(nil, "%d", p), p))
	}
	go pop(third)
	<-armed // the third waiter sleeps: the two ahead are served first
	select {
	case p := <-third:
		t.Fatalf("a waiter behind two stopped ones took %d", p)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.ElementsMatch(t, []int64{5, 6}, []int64{<-results, <-results})
	require.Equal(t, int64(7), <-third, "the newest request gets the last item")
	requireNoWatches(t, db)
}

// Served in batches, a waiter behind the two oldest requests
// does not take the item at its place while they wait, even when the
// items reach it: the two oldest serve the line in order, so the history
// stays linearizable. Here the two oldest are stalled, and the third
// consumer gets nothing until they run; then each gets the item of its
// place.
func TestStagedInBatchesWaitsForOlderRequests(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "strict")
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	older, release := stallTwoWaiters(ctx, t, db, q)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	third := make(chan string, 1)
	go func() {
		v, err := q.Dequeue(ctx, db)
		if err != nil {
			t.Errorf("Dequeue: %v", err)
		}
		third <- string(v)
	}()
	select {
	case v := <-third:
		t.Fatalf("the third consumer took %q ahead of two older requests", v)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.Equal(t, "c", <-third)
	require.ElementsMatch(t, []string{"a", "b"}, []string{<-older, <-older})
	require.Empty(t, itemKeys(t, db, sub))
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// stallTwoWaiters starts two DequeueWait calls that file their requests one
// after the other (the first is the older request) and then stop until
// release is closed. Their items arrive on results.
func stallTwoWaiters(ctx context.Context, t *testing.T, db kv.Database, q *fdbqueue.Queue) (results <-chan string, release chan struct{}) {
	t.Helper()
	registered := make(chan struct{}, 2)
	release = make(chan struct{})
	var hung atomic.Int32
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "registered" && hung.Add(1) <= 2 {
			registered <- struct{}{}
			<-release
		}
	})
	out := make(chan string, 2)
	for range 2 {
		go func() {
			v, err := q.DequeueWait(ctx, db)
			if err != nil {
				t.Errorf("DequeueWait: %v", err)
			}
			out <- string(v)
		}()
		<-registered
	}
	return out, release
}

// A call that files its request while the line is thought to be long, with
// only a dead request (its waiter stopped renewing it) in the line, is one
// of the two oldest live waiters: it serves itself at once instead of
// sleeping on the dead request until its own renewal is due.
func TestStagedRegistrationBehindDeadRequestServesItself(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "dead")
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	q := stgQueue(t, sub, fdbqueue.WithClock(clock), fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Minute}))

	// The first waiter files a request and stops, as if its process hung.
	registered, release := make(chan struct{}), make(chan struct{})
	var hooked atomic.Bool
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "registered" && hooked.CompareAndSwap(false, true) {
			close(registered)
			<-release
		}
	})
	stuckCtx, cancelStuck := context.WithCancel(ctx)
	stuck := make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(stuckCtx, db)
		stuck <- err
	}()
	<-registered
	now.Add(int64(2 * time.Minute)) // its request is past its deadline

	fdbqueue.SetStagingBusy(q, true)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	got := make(chan string, 1)
	go func() {
		v, err := q.DequeueWait(ctx, db)
		if err != nil {
			t.Errorf("DequeueWait: %v", err)
		}
		got <- string(v)
	}()
	select {
	case v := <-got:
		require.Equal(t, "x", v)
	case <-time.After(5 * time.Second): // a failure detector: the renewal sleep it guards against is 20 s
		t.Fatal("the call slept behind a dead request")
	}
	cancelStuck()
	close(release)
	require.ErrorIs(t, <-stuck, context.Canceled)
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// In place mode the item at a waiting request's place is that request's:
// consumers outside the line (DequeueBatch, a Dequeue inside a
// transaction, Peek, Empty) see the queue without it, and when the waiter
// gives up, the item goes to the tail, behind the items enqueued after it
// (the history reads as if the call had taken it and it had been enqueued
// again). In batch mode the same consumers take it from the head.
func TestStagedPlaceReservesItems(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db := stgDB(t)
		sub := stgSubspace(t, "reserve")
		q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
		plain := stgQueue(t, sub, m.layout()) // a producer without staging options
		armed := make(chan struct{}, 8)
		wctx, cancel := context.WithCancel(ctx)
		fdbqueue.SetStagingHook(q, func(p string) {
			switch p {
			case "armed":
				armed <- struct{}{}
			case "woke":
				// The stored configuration makes plain's enqueues wake
				// the waiter: hold it asleep, as if the items came from
				// a client that does not (a recipe's), until cancel.
				<-wctx.Done()
			}
		})
		done := make(chan error, 1)
		go func() {
			_, err := q.DequeueWait(wctx, db)
			done <- err
		}()
		<-armed // the waiter's request is in the line, asleep on an empty queue

		require.NoError(t, plain.Enqueue(ctx, db, []byte("x")))
		if m.byPlace {
			_, err := q.Peek(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty, "x is the waiter's")
			empty, err := q.Empty(ctx, db)
			require.NoError(t, err)
			require.True(t, empty)
			_, err = q.DequeueBatch(ctx, db, 4)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			require.NoError(t, plain.Enqueue(ctx, db, []byte("y")))
			v, err := q.Peek(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "y", string(v))
			// A Dequeue inside the caller's transaction takes after the line too.
			v, err = kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) {
				return q.Dequeue(ctx, tr)
			})
			require.NoError(t, err)
			require.Equal(t, "y", string(v))
			require.NoError(t, plain.Enqueue(ctx, db, []byte("z")))

			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
			// x went behind z.
			vals, err := q.DequeueBatch(ctx, db, 4)
			require.NoError(t, err)
			require.Equal(t, []string{"z", "x"}, toStrings(vals))
		} else {
			vals, err := q.DequeueBatch(ctx, db, 4)
			require.NoError(t, err)
			require.Equal(t, []string{"x"}, toStrings(vals), "batch mode: the head is anyone's")
			cancel()
			require.ErrorIs(t, <-done, context.Canceled)
		}
		require.Empty(t, itemKeys(t, db, sub))
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

func toStrings(vals [][]byte) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

// A waiter that is alive but stalls past its claim timeout (a GC pause, a
// partition, a suspended VM) finds, when it resumes, that another consumer
// returned the item due to it to the queue. Its call must then fail: going
// on with a new request and returning another item would not be
// linearizable. Here, by place: V takes b past W's expired place, X
// (started after V returned) drops W's request, sending a to the tail, and
// takes it; W, had it gone on, would have returned c. (In batches an
// expired request that was not served holds no item, and TestStagedCrashRecovery
// Recovery covers an expired result.)
func TestStagedStalledWaiterFailsWithClaimExpired(t *testing.T) {
	m := stagingModes[1] // by place
	ctx := context.Background()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "stalled")
	const timeout = 10 * time.Second
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))
	qW := stgQueue(t, sub, opts...) // W's client
	q := stgQueue(t, sub, opts...)  // everybody else's
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qW, func(p string) {
		if p == "armed" {
			once.Do(func() {
				close(stalled)
				<-release // W stalls for longer than the claim timeout
			})
		}
	})
	werr := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(ctx, db)
		werr <- err
	}()
	<-stalled // W's request is first in the line, asleep on an empty queue

	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	clock.Advance(timeout + time.Second)
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	first := string(v)
	v, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b"}, []string{first, string(v)})
	require.NoError(t, q.Enqueue(ctx, db, []byte("c")))

	close(release)
	err = <-werr
	require.ErrorIs(t, err, fdbqueue.ErrClaimExpired)
	require.False(t, kv.MaybeCommitted(err), "the call took nothing")
	v, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "c", string(v), "c is still there")
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// By place, a waiter whose place holds a foreign key fails with
// ErrForeignKey, and its cleanup leaves the foreign key where it is: moving
// its value to the tail, as an item due to a leaving request goes, would
// make an item of it.
func TestStagedPlaceLeavesForeignKey(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "foreign-place")
	opts := []fdbqueue.Option{fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}), fdbqueue.WithVersionstampOrder()}
	qW := stgQueue(t, sub, opts...)
	q := stgQueue(t, sub, opts...)
	armed := make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qW, func(p string) {
		if p == "armed" {
			once.Do(func() { close(armed) })
		}
	})
	werr := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(ctx, db)
		werr <- err
	}()
	<-armed // W waits at place 0 on an empty queue

	key, err := sub.Pack(tuple.Tuple{"not", "ours"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(key, []byte("foreign-value")); return nil }))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // bumps the signal: W wakes
	require.ErrorIs(t, <-werr, fdbqueue.ErrForeignKey)

	require.Contains(t, itemKeys(t, db, sub), key, "the foreign key stays where it was")
	_, err = q.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "as a plain dequeue finds it at the head")
	require.Empty(t, stagingKeys(t, db, sub))
}
