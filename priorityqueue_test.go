package fdbqueue_test

import (
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

func pushAll(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue, items ...fdbqueue.Item) {
	t.Helper()
	for _, it := range items {
		require.NoError(t, pq.Push(context.Background(), db, it.Value, it.Priority))
	}
}

func item(v string, p int64) fdbqueue.Item { return fdbqueue.Item{Value: []byte(v), Priority: p} }

// Smallest priority first; equal priorities in push order.
func TestPriorityQueueOrder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "order")
	pushAll(t, db, pq,
		item("c1", 3), item("a1", 1), item("b1", 2), item("a2", 1),
		item("c2", 3), item("a3", 1), item("z", 0),
	)
	var got []string
	for {
		it, err := pq.PopMin(ctx, db)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got = append(got, fmt.Sprintf("%s@%d", it.Value, it.Priority))
	}
	require.Equal(t, []string{"z@0", "a1@1", "a2@1", "a3@1", "b1@2", "c1@3", "c2@3"}, got)
}

// PopMax and PopMin take from both ends of the same queue; PeekMin and
// PeekMax show them without removing anything.
func TestPriorityQueueBothEnds(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "ends")
	pushAll(t, db, pq, item("mid", 0), item("low", math.MinInt64), item("high", math.MaxInt64),
		item("high2", math.MaxInt64), item("neg", -5))

	lo, err := pq.PeekMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("low", math.MinInt64), lo)
	hi, err := pq.PeekMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("high2", math.MaxInt64), hi, "the last key: latest pushed among the largest")
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 5, n, "peeks remove nothing")

	it, err := pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("high2", math.MaxInt64), it)
	it, err = pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("low", math.MinInt64), it)
	it, err = pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("high", math.MaxInt64), it)
	it, err = pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("neg", -5), it)
	it, err = pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, item("mid", 0), it)
	_, err = pq.PopMax(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	_, err = pq.PeekMin(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	empty, err := pq.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
}

// The recipe layout: (priority, count, 20 random bytes), count from 0.
func TestPriorityQueueLayout(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "layout")
	pushAll(t, db, pq, item("a", 7), item("b", 7), item("c", -1))
	r, err := pq.Subspace().Range()
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, kvs, 3)
	var got []tuple.Tuple
	for _, p := range kvs {
		tup, err := pq.Subspace().Unpack(p.Key)
		require.NoError(t, err)
		require.Len(t, tup, 3)
		require.Len(t, tup[2], 20)
		got = append(got, tup[:2])
	}
	require.Equal(t, []tuple.Tuple{{int64(-1), int64(0)}, {int64(7), int64(0)}, {int64(7), int64(1)}}, got)
}

func TestPriorityQueueBatches(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "batch")
	for i := range 50 {
		require.NoError(t, pq.Push(ctx, db, []byte(fmt.Sprintf("p%02d", i)), int64(i%10)))
	}
	low, err := pq.PopMinBatch(ctx, db, 10)
	require.NoError(t, err)
	require.Len(t, low, 10)
	for i, it := range low {
		require.Equal(t, int64(i/5), it.Priority, "five items of priority 0, then five of 1")
	}
	high, err := pq.PopMaxBatch(ctx, db, 5)
	require.NoError(t, err)
	require.Len(t, high, 5)
	for _, it := range high {
		require.Equal(t, int64(9), it.Priority)
	}
	require.Equal(t, "p49", string(high[0].Value), "largest end first: the last pushed of priority 9")
	rest, err := pq.PopMinBatch(ctx, db, 100)
	require.NoError(t, err)
	require.Len(t, rest, 35)
	_, err = pq.PopMinBatch(ctx, db, 0)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
}

func TestPriorityQueueErrors(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	pq := mustPQ(t, "errors")
	require.ErrorIs(t, pq.Push(ctx, nil, []byte("x"), 1), fdbqueue.ErrInvalidArgument)
	err := pq.Push(ctx, db, make([]byte, kv.MaxValueSize+1), 1)
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
	_, err = pq.PopMin(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)

	foreign, err := pq.Subspace().Pack(tuple.Tuple{int64(1), "not a count"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(foreign, nil); return nil }))
	_, err = pq.PopMin(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	_, err = pq.PeekMax(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	require.ErrorIs(t, pq.Push(ctx, db, []byte("x"), 1), fdbqueue.ErrForeignKey, "the foreign key is the last of priority 1")
	require.NoError(t, pq.Push(ctx, db, []byte("y"), 2), "other priorities are unaffected")
	require.NoError(t, pq.Clear(ctx, db))
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Zero(t, n)
}

// Concurrent pushers and poppers from both ends under injected
// commit_unknown_result: every item comes out exactly once.
func TestPriorityQueueExactlyOnce(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, memdb.WithSeed(11), memdb.WithFaults(withReadFaults(memdb.Faults{UnknownApplied: 0.05, UnknownNotApplied: 0.05})))
	pq := mustPQ(t, "exactly-once")
	const producers, consumers, items = 4, 4, 2_000
	var wg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < items; i += producers {
				if err := pq.Push(ctx, db, []byte(fmt.Sprintf("i%05d", i)), int64(i%17)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the producers")
	var mu sync.Mutex
	seen := map[string]int{}
	for c := range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var it fdbqueue.Item
				var err error
				if c%2 == 0 {
					it, err = pq.PopMin(ctx, db)
				} else {
					it, err = pq.PopMax(ctx, db)
				}
				if errors.Is(err, fdbqueue.ErrEmpty) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen[string(it.Value)]++
				mu.Unlock()
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the consumers")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Positive(t, db.Stats().InjectedUnknownApplied)
	require.Len(t, seen, items, "every item dequeued")
	for k, c := range seen {
		require.Equal(t, 1, c, "item %s dequeued %d times", k, c)
	}
}

func TestTypedPriorityQueue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tp := fdbqueue.NewTypedPriorityQueue(mustPQ(t, "typed"), fdbqueue.StringCodec{})
	require.NoError(t, tp.Push(ctx, db, "later", 10))
	require.NoError(t, tp.Push(ctx, db, "sooner", 1))
	it, err := tp.PeekMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.TypedItem[string]{Value: "sooner", Priority: 1}, it)
	it, err = tp.PeekMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "later", it.Value)
	it, err = tp.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "later", it.Value)
	it, err = tp.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "sooner", it.Value)
}
