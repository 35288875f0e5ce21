package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Items about the size of the batch budget through the staged paths. A
// step reads the items only until their bytes reach the budget
// (stageSide.readItems), so one item of kv.MaxValueSize bytes (FDB's
// value limit, fdbclient/include/fdbclient/FDBTypes.h's VALUE_SIZE_LIMIT)
// under a budget of 100,000 bytes (the least a DequeueBatch halves to)
// cuts the read short: the step does not know whether the items reach the
// places behind it. Anything an Enqueue accepts, each later step must
// handle.

const largeBudget = 100_000

// largeItem is an item of the largest size an Enqueue accepts.
func largeItem(tag byte) []byte { return bytes.Repeat([]byte{tag}, kv.MaxValueSize) }

// shown shows a test item: its tag when it is a large one.
func shown(v []byte) string {
	if len(v) == kv.MaxValueSize {
		return "large " + string(v[:1])
	}
	return string(v)
}

// drainShown drains q (drain) and shows each item (shown).
func drainShown(t *testing.T, db kv.Database, q *fdbqueue.Queue) []string {
	t.Helper()
	vals := drain(t, db, q)
	for i, v := range vals {
		vals[i] = shown([]byte(v))
	}
	return vals
}

// By place, Recover drops an expired request whose item, at its place,
// alone exceeds the budget: the first request a pass drops goes whatever
// its move costs (otherwise it would hold its place, and its item, for
// good). The next one, over the budget, keeps its place for a later pass:
// dropping it without moving its item would shift the places behind while
// a consumer outside the line may already have taken the item after it.
// Here E0 and E1 wait at places 0 and 1 and expire; the queue holds A
// (large), b, c and d. Recover moves A to the tail with E0 and keeps E1;
// while its commit is in flight a consumer outside the line takes c, the
// first item after the two places. Had E1 been dropped as well, b would be
// at the head with no request before it, after c was taken although b was
// enqueued first and handed to no one.
func TestStagedPlaceRecoverMovesALargeItem(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	const timeout = 10 * time.Second
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now), fdbqueue.WithBatchBudget(largeBudget))
	db, sub, qE := stagedQueue(t, "recoverlarge", opts...)
	q := stgQueue(t, sub, opts...)

	// E0 and E1 file requests on the empty queue, one after the other,
	// and stall before they sleep: they no longer renew them.
	stalled, resume := make(chan struct{}, 2), make(chan struct{})
	var resumed sync.Once
	unstall := func() { resumed.Do(func() { close(resume) }) }
	defer unstall()
	fdbqueue.SetStagingHook(qE, func(p string) {
		if p == "armed" {
			stalled <- struct{}{}
			<-resume
		}
	})
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := qE.DequeueWait(ectx, db)
			done <- err
		}()
		recvWithin(t, stalled, "E's request filed, E about to sleep")
	}
	clock.Advance(timeout + time.Second) // both requests expire
	require.NoError(t, q.Enqueue(ctx, db, largeItem('A')))
	for _, v := range []string{"b", "c", "d"} {
		require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
	}

	held, release := db.HoldNextCommit() // Recover's pass over the line
	defer release()
	type res struct {
		st  fdbqueue.RecoverStats
		err error
	}
	recovered := make(chan res, 1)
	go func() {
		st, err := q.Recover(ctx, db)
		recovered <- res{st, err}
	}()
	select {
	case <-held:
	case r := <-recovered:
		t.Fatalf("Recover wrote nothing: %+v, %v", r.st, r.err)
	case <-time.After(wakeTimeout):
		t.Fatal("Recover's commit was not held")
	}
	require.Equal(t, "c", takeOutside(ctx, t, db, q), "A and b are due to E0's and E1's places")
	release()
	r := recvWithin(t, recovered, "Recover's return")
	require.NoError(t, r.err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1, ReturnedItems: 1}, r.st,
		"E0 left with A; E1, over the budget, keeps its place")
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1, ReturnedItems: 1}, st, "the next pass moves b with E1")

	cancel()
	unstall()
	for range 2 {
		require.ErrorIs(t, recvWithin(t, done, "E's return once cancelled"), context.Canceled)
	}
	require.Equal(t, []string{"d", "large A", "b"}, drainShown(t, db, q),
		"A and b went to the tail with E0's and E1's requests, after d")
	requireClean(t, db, sub)
}

// By place, a waiter's step keeps an expired request whose place lies
// beyond the items it read (the read stopped at the budget): it cannot
// tell whether an item reaches that place. Here W and E wait at places 0
// and 1, E expires, and the queue holds A (large), b, c and d. W's step
// reads only A, takes it and keeps E; while its commit is in flight a
// consumer outside the line takes c, the first item after the two places.
// Had the step dropped E, b would be at the head with no request before
// it, after c was taken although b was enqueued first and handed to no
// one. E's cleanup moves b to the tail instead.
func TestStagedPlaceStepKeepsAPlaceBeyondItsRead(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	const timeout = 10 * time.Second
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now), fdbqueue.WithBatchBudget(largeBudget))
	db, sub, qW := stagedQueue(t, "stepbeyondread", opts...)
	qE, q := stgQueue(t, sub, opts...), stgQueue(t, sub, opts...)

	armedW, releaseW := holdWaiters(qW) // W stops once woken
	defer releaseW()
	gotW, errsW := startWaiters(ctx, qW, db, 1)
	recvWithin(t, armedW, "W asleep")
	// E files its request behind W's and stalls before it sleeps: it no
	// longer renews it.
	hook, stalled, unstall := stallAtArm()
	defer unstall()
	fdbqueue.SetStagingHook(qE, hook)
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	doneE := make(chan error, 1)
	go func() {
		_, err := qE.DequeueWait(ectx, db)
		doneE <- err
	}()
	recvWithin(t, stalled, "E's request filed, E about to sleep")
	require.NoError(t, q.Enqueue(ctx, db, largeItem('A')))
	for _, v := range []string{"b", "c", "d"} {
		require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
	}
	clock.Advance(timeout + time.Second) // E's request expires (W's step keeps its own)

	held, release := db.HoldNextCommit() // W's step
	defer release()
	releaseW()
	recvWithin(t, held, "W's step's commit held")
	require.Equal(t, "c", takeOutside(ctx, t, db, q), "A and b are due to W's and E's places")
	release()
	select {
	case v := <-gotW:
		require.Equal(t, "large A", shown(v))
	case err := <-errsW:
		require.NoError(t, err)
	case <-time.After(wakeTimeout):
		t.Fatal("W did not return")
	}

	cancel()
	unstall()
	require.ErrorIs(t, recvWithin(t, doneE, "E's return once cancelled"), context.Canceled)
	require.Equal(t, []string{"d", "b"}, drainShown(t, db, q), "b went to the tail with E's request, after d")
	requireClean(t, db, sub)
}

// A plain Dequeue behind waiters whose items fill the budget (its read
// stops before its place) does not report ErrEmpty: the items may reach
// its place, and here they do. With one waiter ahead, its step hands A to
// that waiter and the next one takes b; with two, it waits until they
// are served and gets c.
func TestStagedPlainDequeueBehindALargeItem(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, ahead := range []int{1, 2} {
			t.Run(fmt.Sprintf("ahead=%d", ahead), func(t *testing.T) {
				ctx := context.Background()
				opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour}), fdbqueue.WithBatchBudget(largeBudget))
				db, sub, qW := stagedQueue(t, "plainlarge", opts...)
				qC := stgQueue(t, sub, opts...)

				armedW, releaseW := holdWaiters(qW) // the waiters stop once woken
				defer releaseW()
				gotW, errsW := startWaiters(ctx, qW, db, ahead)
				for range ahead {
					recvWithin(t, armedW, "a waiter asleep")
				}
				want := []string{"large A", "b", "c"}[:ahead+1]
				require.NoError(t, qC.Enqueue(ctx, db, largeItem('A')))
				for _, v := range want[1:] {
					require.NoError(t, qC.Enqueue(ctx, db, []byte(v)))
				}

				fdbqueue.SetStagingBusy(qC, true) // no plain attempt: C files a request at once
				armedC := make(chan struct{}, 8)
				fdbqueue.SetStagingHook(qC, func(p string) {
					if p == "armed" {
						armedC <- struct{}{}
					}
				})
				type res struct {
					v   []byte
					err error
				}
				doneC := make(chan res, 1)
				go func() {
					v, err := qC.Dequeue(ctx, db)
					doneC <- res{v, err}
				}()
				var c res
				select {
				case c = <-doneC:
				case <-armedC: // C waits for the waiters ahead
					releaseW()
					c = recvWithin(t, doneC, "C's Dequeue once the waiters ahead were served")
				case <-time.After(wakeTimeout):
					t.Fatal("C's Dequeue neither returned nor slept")
				}
				releaseW()
				require.NoError(t, c.err, "an item reaches C's place")
				require.Equal(t, want[ahead], shown(c.v), "C, behind %d waiters, gets item %d", ahead, ahead)
				var got []string
				for range ahead {
					select {
					case v := <-gotW:
						got = append(got, shown(v))
					case err := <-errsW:
						require.NoError(t, err)
					case <-time.After(wakeTimeout):
						t.Fatal("a waiter ahead did not return")
					}
				}
				require.ElementsMatch(t, want[:ahead], got, "the waiters ahead get the items before C's")
				requireClean(t, db, sub)
			})
		}
	})
}
