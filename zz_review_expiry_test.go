package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Review: served by place, a waiter that is alive but stalls past its claim
// timeout (GC pause, network partition, suspended VM) has the item at its
// place moved to the tail by another consumer ("as if the call had dequeued
// it and enqueued it again"), yet the call does not fail: it finds its
// request gone ("lost"), files a new one and returns another item. The
// history is then not linearizable under the documented rule (only a call
// that fails may move its item to the tail):
//
//	Enqueue a; Enqueue b            (both done before anything else)
//	W: DequeueWait ...............................................-> c
//	V:            Dequeue -> b
//	X:                          Dequeue -> a        (starts after V returned)
//	                                      Enqueue c
//
// a was enqueued before b, so X's dequeue of a must be linearized before
// V's dequeue of b, but X started after V returned; W returned c, so it
// cannot be the call that moved a.
func TestReviewPlaceExpiredLiveWaiterSucceeds(t *testing.T) {
	ctx := context.Background()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "review-expiry")
	const timeout = 10 * time.Second
	opts := []fdbqueue.Option{
		fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: timeout, Serving: fdbqueue.ServeByPlace}),
		fdbqueue.WithVersionstampOrder(), fdbqueue.WithClock(clock.Now),
	}
	qW := stgQueue(t, sub, opts...) // W's client
	q := stgQueue(t, sub, opts...)  // everybody else's

	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qW, func(p string) {
		if p == "armed" {
			once.Do(func() {
				close(stalled)
				<-release // W's process stalls for longer than the claim timeout
			})
		}
	})
	wres := make(chan string, 1)
	werr := make(chan error, 1)
	go func() {
		v, err := qW.DequeueWait(ctx, db)
		wres <- string(v)
		werr <- err
	}()
	<-stalled // W's request is first in the line, asleep on an empty queue

	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	clock.Advance(timeout + time.Second)

	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	gotV := string(v)
	v, err = q.Dequeue(ctx, db) // starts after V returned
	require.NoError(t, err)
	gotX := string(v)
	require.NoError(t, q.Enqueue(ctx, db, []byte("c")))

	close(release)
	gotW, errW := <-wres, <-werr
	t.Logf("V -> %q, then X -> %q; W -> %q, %v", gotV, gotX, gotW, errW)
	require.False(t, gotV == "b" && gotX == "a" && errW == nil,
		"not linearizable: V took b, then X (started after V returned) took a, enqueued before b; "+
			"W, whose expired place held a, succeeded (with %q) instead of failing", gotW)
}
