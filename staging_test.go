package fdbqueue_test

import (
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
)

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
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout) // a failure bound only
	defer cancel()
	db := stgDB(t)
	q := stgQueue(t, stgSubspace(t, "plain"))
	_, err := q.DequeueWait(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "plainpq"))
	require.NoError(t, err)
	_, err = pq.PopMinWait(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
}

func TestStagedDequeueSingleConsumer(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, sub, q := stagedQueue(t, "single", m.opts(fdbqueue.StagingConfig{})...)

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
	db, sub, q := stagedQueue(t, "intx", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	id := fdbqueue.NewOpID()
	got, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) {
		return q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
	})
	require.NoError(t, err)
	require.Equal(t, "x", string(got))
	require.Empty(t, stagingKeys(t, db, sub))
}

func TestStagedDequeueWaitManyConsumers(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, faults := range []bool{false, true} {
			t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
				db := faultyDB(t, 7, faults)
				sub := stgSubspace(t, "many")
				q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{BatchSize: 16})...)
				want, wait := produce(t, 4, 60, func(_, _ int, v []byte) error {
					return q.Enqueue(context.Background(), db, v)
				})
				got := consumeAll(t, 32, len(want), func(ctx context.Context) (string, error) {
					v, err := q.DequeueWait(ctx, db)
					return string(v), err
				})
				wait()
				requireExactlyOnce(t, got, want)
				_, err := q.Dequeue(context.Background(), db)
				require.ErrorIs(t, err, fdbqueue.ErrEmpty, "nothing left in the queue")
				requireClean(t, db, sub)
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
				db := faultyDB(t, 11, faults)
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
				gt := forGoroutines(t)
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
								gt.Errorf("dequeue: %v", err)
								return
							}
							mu.Lock()
							got[string(v)]++
							mu.Unlock()
						}
					}()
				}
				waitWithin(t, &wg, workTimeout, "the consumers")
				requireExactlyOnce(t, got, wantS)
				requireClean(t, db, sub)
			})
		}
	})
}

func TestStagedPopManyConsumers(t *testing.T) {
	for _, faults := range []bool{false, true} {
		t.Run(fmt.Sprintf("faults=%v", faults), func(t *testing.T) {
			db := faultyDB(t, 3, faults)
			sub := stgSubspace(t, "pq")
			pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{BatchSize: 16}))
			require.NoError(t, err)
			want, wait := produce(t, 4, 60, func(p, i int, v []byte) error {
				return pq.Push(context.Background(), db, v, int64((i*7+p)%10))
			})
			var n atomic.Int64
			got := consumeAll(t, 32, len(want), func(ctx context.Context) (string, error) {
				pop := pq.PopMinWait
				if n.Add(1)%2 == 0 {
					pop = pq.PopMaxWait
				}
				it, err := pop(ctx, db)
				return string(it.Value), err
			})
			wait()
			requireExactlyOnce(t, got, want)
			_, err = pq.PopMin(context.Background(), db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			requireClean(t, db, sub)
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
		db, sub, q := stagedQueue(t, "wake", m.opts(fdbqueue.StagingConfig{})...)
		gt := forGoroutines(t)
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
				gt.Errorf("DequeueWait: %v", err)
			}
			done <- v
		}()
		recvWithin(t, armed, "the waiter asleep")
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("late")))
		require.Equal(t, "late", string(recvWithin(t, done, "the waiter woken by the enqueue")))
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// The typed wrappers of the Wait forms decode what the staged calls
// return, and wait for an item while the queue is empty.
func TestTypedWaitForms(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	gt := forGoroutines(t)
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
			gt.Errorf("DequeueWait: %v", err)
		}
		got <- v
	}()
	require.NoError(t, tq.Enqueue(ctx, db, "later"))
	require.Equal(t, "later", recvWithin(t, got, "the waiter woken by the enqueue"))

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
	bctx, bcancel := context.WithTimeout(ctx, wakeTimeout) // a failure bound only
	defer bcancel()
	_, err = plain.DequeueWait(bctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = tp.PopMinWait(cctx, db) // "2" is left: it returns at once
	require.NoError(t, err)
	_, err = tp.PopMaxWait(cctx, db)
	require.ErrorIs(t, err, context.DeadlineExceeded, "empty: waits until ctx ends")
}
