package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Review: served by place, a waiter whose place holds a foreign key fails
// (ErrForeignKey), and its cleanup (abandon -> leavePlace -> requeueAt)
// then moves the foreign pair to the tail under a valid versionstamped
// item key: the foreign key is removed (docs/bad-input.md: "nothing
// removed") and its value comes out of a later Dequeue as an ordinary item.
func TestReviewPlaceLeaveLaundersForeignKey(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "review-foreign")
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
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(wctx, db)
		werr <- err
	}()
	<-armed // W waits at place 0 on an empty queue

	key, err := sub.Pack(tuple.Tuple{"not", "ours"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(key, []byte("foreign-value")); return nil }))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // bumps the signal: W wakes
	err = <-werr
	t.Logf("W: %v", err)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)

	keys := itemKeys(t, db, sub)
	var got []string
	for {
		v, err := q.Dequeue(ctx, db)
		if err != nil {
			t.Logf("Dequeue: %v", err)
			break
		}
		got = append(got, string(v))
	}
	t.Logf("item keys after W failed: %q; dequeued: %q", keys, got)
	require.Contains(t, keys, key, "the foreign key must stay where it was (nothing removed)")
	require.NotContains(t, got, "foreign-value", "a foreign pair's value came out as an item")
}
