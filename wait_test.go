package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// watchTarget is a queue seen by a transactional consumer: take one item
// inside tr, and watch for items.
type watchTarget struct {
	name    string
	take    func(ctx context.Context, tr kv.Transaction) ([]byte, error)
	watch   func(tr kv.Transaction) (kv.Watch, error)
	produce func(ctx context.Context, db kv.Database, v []byte) error
}

func watchTargets(t *testing.T) []watchTarget {
	staged := fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})
	var out []watchTarget
	for _, c := range []struct {
		name          string
		consumer, pro []fdbqueue.Option
	}{
		{"queue", nil, nil},
		{"queue staged in batches", []fdbqueue.Option{staged}, nil},
		{"queue staged by place", []fdbqueue.Option{staged, fdbqueue.WithVersionstampOrder()}, []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}},
	} {
		sub := mustSubspace(t, "watch", c.name)
		q, err := fdbqueue.NewQueue(sub, c.consumer...)
		require.NoError(t, err)
		p, err := fdbqueue.NewQueue(sub, c.pro...) // a producer without staging options
		require.NoError(t, err)
		out = append(out, watchTarget{c.name,
			func(ctx context.Context, tr kv.Transaction) ([]byte, error) { return q.Dequeue(ctx, tr) },
			q.WatchForItems,
			func(ctx context.Context, db kv.Database, v []byte) error { return p.Enqueue(ctx, db, v) }})
	}
	for _, c := range []struct {
		name string
		opts []fdbqueue.Option
	}{{"priority queue", nil}, {"priority queue staged", []fdbqueue.Option{staged}}} {
		sub := mustSubspace(t, "watch", c.name)
		pq, err := fdbqueue.NewPriorityQueue(sub, c.opts...)
		require.NoError(t, err)
		p, err := fdbqueue.NewPriorityQueue(sub)
		require.NoError(t, err)
		out = append(out, watchTarget{c.name,
			func(ctx context.Context, tr kv.Transaction) ([]byte, error) {
				it, err := pq.PopMin(ctx, tr)
				return it.Value, err
			},
			pq.WatchForItems,
			func(ctx context.Context, db kv.Database, v []byte) error { return p.Push(ctx, db, v, 7) }})
	}
	return out
}

// A consumer that dequeues inside its own transaction, writing its result
// in the same commit, blocks on WatchForItems while the queue is empty and
// wakes on an enqueue committed by another transaction (made by a handle
// without staging options).
func TestWatchForItemsTransactionalConsumer(t *testing.T) {
	for _, w := range watchTargets(t) {
		t.Run(w.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a failure bound
			defer cancel()
			db := newDB(t)
			armed := make(chan struct{}, 1)
			done := make(chan error, 1)
			go func() {
				for {
					var watch kv.Watch
					err := db.Transact(ctx, func(tr kv.Transaction) error {
						watch = nil
						v, err := w.take(ctx, tr)
						if errors.Is(err, fdbqueue.ErrEmpty) {
							watch, err = w.watch(tr)
							return err
						}
						if err != nil {
							return err
						}
						tr.Set([]byte("result"), append([]byte("done:"), v...))
						return nil
					})
					if err != nil || watch == nil {
						done <- err
						return
					}
					armed <- struct{}{}
					err = watch.Wait(ctx)
					watch.Cancel()
					if err != nil {
						done <- err
						return
					}
				}
			}()
			select {
			case <-armed: // committed, about to block on the watch
			case err := <-done:
				t.Fatalf("consumer ended before waiting: %v", err)
			}
			require.NoError(t, w.produce(ctx, db, []byte("job")))
			require.NoError(t, recvWithin(t, done, "the consumer woken by the produce"))
			v, err := getKey(ctx, db, []byte("result"))
			require.NoError(t, err)
			require.Equal(t, "done:job", string(v))
			require.Zero(t, db.Stats().Watches)
		})
	}
}

// The watch reads its key with a normal read, as FoundationDB's does
// (fdbclient/ReadYourWrites.actor.cpp, RYWImpl::watch: readWithConflictRange
// with Snapshot::False): a consumer transaction that writes and armed the
// watch conflicts with an enqueue committed after its read version, so it
// retries and finds the item instead of sleeping.
func TestWatchForItemsConflictsWithLaterEnqueue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "watch", "conflict")
	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		w, err := q.WatchForItems(tr) // stores that someone waits
		if err == nil {
			w.Cancel()
		}
		return err
	}))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = q.Dequeue(ctx, tr)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	w, err := q.WatchForItems(tr)
	require.NoError(t, err)
	defer w.Cancel()
	tr.Set([]byte("consumer-state"), []byte("idle"))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
}

// A handle without staging options whose first operation on a queue
// served by place is WatchForItems returns the watch: the stored mode,
// which makes a consumer retry (it chose its items by the old one), does
// not matter to a watch, so the call neither fails nor asks its
// transaction to retry.
func TestWatchForItemsLearnsThePlaceMode(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "watch-learns-place")
	staged := stgQueue(t, sub, stagingMode{"place", true}.opts(fdbqueue.StagingConfig{})...)
	require.NoError(t, staged.Enqueue(ctx, db, []byte("a")), "stores the place mode")
	plain := stgQueue(t, sub, fdbqueue.WithVersionstampOrder())
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	w, err := plain.WatchForItems(tr)
	require.NoError(t, err, "the first attempt returns the watch")
	require.NoError(t, tr.Commit())
	w.Cancel()
	v, err := staged.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "a", string(v))
}
