package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Serving by place, a request that leaves the line when the items end
// before its place has a read conflict on the whole item range: an item
// that arrives meanwhile reaches its place, and a consumer behind it may
// already have taken the next one. Each test below stalls the
// transaction in which the request leaves (a plain Dequeue's withdrawal,
// a cancelled DequeueWait's cleanup, Recover's drop of an expired
// request) after its reads, enqueues x then y, lets a consumer outside the
// line take y (x is due to the request: Queue.reserved), and lets the
// transaction commit. It must conflict: committing as read would leave x
// at the head after y was taken, which no FIFO order explains.

// takeOutside dequeues as a consumer outside the line (a Dequeue in the
// caller's own transaction) and returns the item.
func takeOutside(ctx context.Context, t *testing.T, db kv.Database, q *fdbqueue.Queue) string {
	t.Helper()
	var v []byte
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		var err error
		v, err = q.Dequeue(ctx, tr)
		return err
	}))
	return string(v)
}

// A staged Dequeue that found no item at its place withdraws with a read
// conflict on the item range; on the retry the items reach its place and
// it takes x, the head, which y's consumer left to it.
func TestStagedPlaceWithdrawConflictsWithArrival(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qB := stagedQueue(t, "withdrawarrival", m.opts(cfg)...)
	q := stgQueue(t, sub, m.opts(cfg)...)

	fdbqueue.SetStagingBusy(qB, true) // no first look: B files a request at once
	hook, stalled, resume := stallOnceAt("commit withdraw")
	fdbqueue.SetStagingHook(qB, hook)
	type res struct {
		v   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := qB.Dequeue(ctx, db)
		done <- res{v, err}
	}()
	recvWithin(t, stalled, "B's withdrawal about to commit, after it read an empty queue")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	require.Equal(t, "y", takeOutside(ctx, t, db, q), "x is due to B's request")
	resume()
	r := recvWithin(t, done, "B's return")
	require.NoError(t, r.err, "the withdrawal conflicted; the retry takes x")
	require.Equal(t, "x", string(r.v))
	requireClean(t, db, sub)
}

// A DequeueWait that gives up while the items end before its place
// leaves the line in a cleanup with a read conflict on the item range; on
// the retry x reaches its place and goes to the tail (as if the call had
// taken it and enqueued it again).
func TestStagedPlaceCleanupConflictsWithArrival(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qB := stagedQueue(t, "cleanuparrival", m.opts(cfg)...)
	q := stgQueue(t, sub, m.opts(cfg)...)

	armed := make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qB, func(p string) {
		if p == "armed" {
			once.Do(func() { close(armed) })
		}
	})
	bctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := qB.DequeueWait(bctx, db)
		done <- err
	}()
	recvWithin(t, armed, "B's request alone in the line, asleep on an empty queue")
	// The next commit that writes is B's cleanup.
	held, release := db.HoldNextCommit()
	cancel()
	recvWithin(t, held, "B's cleanup's commit held")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	xKey := itemKeys(t, db, sub)[0]
	require.Equal(t, "y", takeOutside(ctx, t, db, q), "x is due to B's request")
	release()
	require.ErrorIs(t, recvWithin(t, done, "B's return once cancelled"), context.Canceled)
	m.requireReturned(t, db, sub, xKey) // moved to the tail by the cleanup's retry
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v))
	requireClean(t, db, sub)
}

// Recover drops an expired request that the items do not reach with a
// read conflict on the item range; on the retry x reaches its place, and
// it moves x to the tail with the request.
func TestStagedPlaceExpiryConflictsWithArrival(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	const timeout = 10 * time.Second
	clock, db, sub, qE := clockedQueue(t, "expiryarrival", m, timeout)
	q := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)

	// E files a request on the empty queue and stalls before it sleeps:
	// it no longer renews its request.
	hook, stalled, unstall := stallAtArm()
	defer unstall()
	fdbqueue.SetStagingHook(qE, hook)
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := qE.DequeueWait(ectx, db)
		done <- err
	}()
	recvWithin(t, stalled, "E's request filed, E about to sleep")
	clock.Advance(timeout + time.Second) // E's request expires

	held, release := db.HoldNextCommit() // Recover's drop of E's request
	type res struct {
		st  fdbqueue.RecoverStats
		err error
	}
	recovered := make(chan res, 1)
	go func() {
		st, err := q.Recover(ctx, db)
		recovered <- res{st, err}
	}()
	recvWithin(t, held, "Recover's drop held")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	require.Equal(t, "y", takeOutside(ctx, t, db, q), "x holds the place of E's request, expired but not dropped")
	release()
	r := recvWithin(t, recovered, "Recover's return")
	require.NoError(t, r.err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1, ReturnedItems: 1}, r.st,
		"the drop conflicted; the retry moved x, due to E, to the tail")

	cancel()
	unstall()
	require.ErrorIs(t, recvWithin(t, done, "E's return once cancelled"), context.Canceled)
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v))
	requireClean(t, db, sub)
}

// By place, a DequeueWait that gives up while items reach its place moves
// the item at its place (not only those ahead of it) to the tail: the
// request behind it may already have taken the next item. Here A and B
// wait at places 0 and 1 and stall when x, y and z arrive; C files a
// request behind them and takes z, the item at its place; B gives up, and
// its cleanup must move y, whose key is then new.
func TestStagedPlaceCleanupMovesTheItemAtItsPlace(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qA := stagedQueue(t, "cleanupmovesown", m.opts(cfg)...)
	qB, qC := stgQueue(t, sub, m.opts(cfg)...), stgQueue(t, sub, m.opts(cfg)...)

	armedA, releaseA := holdWaiters(qA)
	armedB, releaseB := holdWaiters(qB)
	defer releaseA()
	defer releaseB()
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	gotA, errsA := startWaiters(actx, qA, db, 1)
	recvWithin(t, armedA, "A asleep")
	bctx, cancelB := context.WithCancel(ctx)
	defer cancelB()
	_, errsB := startWaiters(bctx, qB, db, 1)
	recvWithin(t, armedB, "B asleep")
	for _, v := range []string{"x", "y", "z"} {
		require.NoError(t, qA.Enqueue(ctx, db, []byte(v)))
	}
	cctx, cancelC := context.WithTimeout(ctx, wakeTimeout) // a failure bound only
	defer cancelC()
	v, err := qC.DequeueWait(cctx, db)
	require.NoError(t, err)
	require.Equal(t, "z", string(v), "C, third in the line, takes the third item")

	before := itemKeys(t, db, sub) // x and y, due to A and B
	require.Len(t, before, 2)
	cancelB()
	releaseB()
	require.ErrorIs(t, recvWithin(t, errsB, "B's return once cancelled"), context.Canceled)
	after := itemKeys(t, db, sub)
	require.Len(t, after, 2)
	require.Equal(t, before[0], after[0], "x, due to A, stays")
	require.NotEqual(t, before[1], after[1], "y, due to B, went to the tail under a new key")

	releaseA()
	select {
	case v := <-gotA:
		require.Equal(t, "x", string(v))
	case err := <-errsA:
		require.NoError(t, err)
	case <-time.After(wakeTimeout):
		t.Fatal("A did not return")
	}
	v, err = qC.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "y", string(v))
	requireClean(t, db, sub)
}

// The one plain attempt of a PriorityQueue pop serves the few waiting
// requests and takes the next item in one transaction, with a read
// conflict on each request it serves (it read them with snapshot reads):
// if, while its commit is in flight, such a request leaves the line (its
// waiter gave up), it conflicts, and its retry takes the head itself.
// Otherwise it would hand the head to a request nobody collects (hidden
// from every consumer until its claim expires) and return the next item.
func TestStagedPQFastAttemptConflictsWithWithdrawal(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "pqfastwithdrawn")
	opt := fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})
	pqW, err := fdbqueue.NewPriorityQueue(sub, opt)
	require.NoError(t, err)
	pq, err := fdbqueue.NewPriorityQueue(sub, opt)
	require.NoError(t, err)

	// W waits on the empty queue; the push of a and b wakes it, and it
	// stalls there.
	hook, armed, woke, unstall := stallAfterWake()
	defer unstall()
	fdbqueue.SetPQStagingHook(pqW, hook)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := pqW.PopMinWait(wctx, db)
		done <- err
	}()
	recvWithin(t, armed, "W asleep")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		if err := pq.Push(ctx, tr, []byte("a"), 1); err != nil {
			return err
		}
		return pq.Push(ctx, tr, []byte("b"), 2)
	}))
	recvWithin(t, woke, "W woken")

	// N's plain attempt hands a to W's request and takes b; its commit
	// waits while W gives up.
	stalled, go2 := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fdbqueue.SetPQStagingHook(pq, func(p string) {
		if p == "commit fast" {
			once.Do(func() {
				close(stalled)
				<-go2
			})
		}
	})
	type res struct {
		it  fdbqueue.Item
		err error
	}
	popped := make(chan res, 1)
	go func() {
		it, err := pq.PopMin(ctx, db)
		popped <- res{it, err}
	}()
	recvWithin(t, stalled, "N's plain attempt about to commit")
	cancel()
	unstall()
	require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled) // W's request left the line
	close(go2)
	r := recvWithin(t, popped, "N's PopMin's return")
	require.NoError(t, r.err)
	require.Equal(t, "a", string(r.it.Value), "the attempt conflicted; its retry takes the head")
	it, err := pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "b", string(it.Value))
	requireClean(t, db, sub)
}

// In batches, an item handed to a request whose waiter never collects it
// goes back to the queue, at its original key, when the waiter gives up
// (its cleanup) or when its claim expires (Recover). That return is an
// arrival for a consumer outside the line, so it bumps the signal key: a
// consumer that found the queue empty and watches for items
// (WatchForItems) wakes, and then takes the item.
func TestStagedReturnedResultWakesWatchers(t *testing.T) {
	for _, expire := range []bool{false, true} {
		name := "cleanup"
		if expire {
			name = "expiry"
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancelAll := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancelAll()
			m := stagingModes[0] // in batches
			const timeout = 10 * time.Second
			clock, db, sub, qW := clockedQueue(t, "returnwakes", m, timeout)
			q := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)

			// W waits on the empty queue; the enqueue of x wakes it, and
			// it stalls there, before it could collect x.
			hook, armed, woke, unstall := stallAfterWake()
			defer unstall()
			fdbqueue.SetStagingHook(qW, hook)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := qW.DequeueWait(wctx, db)
				done <- err
			}()
			recvWithin(t, armed, "W asleep")
			require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
			recvWithin(t, woke, "W woken")
			n, err := fdbqueue.FulfilStaged(ctx, db, q)
			require.NoError(t, err)
			require.Equal(t, 1, n, "x is handed to W's request")

			// A consumer outside the line finds nothing, and watches.
			var w kv.Watch
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				w = nil
				_, err := q.Dequeue(ctx, tr)
				if !errors.Is(err, fdbqueue.ErrEmpty) {
					return fmt.Errorf("want ErrEmpty, got %w", err)
				}
				w, err = q.WatchForItems(tr)
				return err
			}))
			defer w.Cancel()

			if expire {
				clock.Advance(timeout + time.Second)
				st, err := q.Recover(ctx, db)
				require.NoError(t, err)
				require.Equal(t, fdbqueue.RecoverStats{ReturnedItems: 1}, st)
			} else {
				cancel() // W gives up; its cleanup returns x
				unstall()
				require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
			}
			require.NoError(t, w.Wait(ctx), "the return of x wakes the watcher")
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "x", string(v))

			if expire {
				cancel()
				unstall()
				require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
			}
			requireClean(t, db, sub)
		})
	}
}

// In batches, a plain staged Dequeue behind two waiting requests does not
// withdraw with ErrEmpty while an item is in the queue, even when the
// items do not reach its place: an item the requests ahead have not been
// handed may still come to it (a request ahead withdrawn), and ErrEmpty
// while x sits in the queue for the whole call would not be linearizable.
// It sleeps instead, and returns ErrEmpty once the items ran out.
func TestStagedPlainDequeueInBatchesWaitsWhileItemsRemain(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[0] // in batches
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qW := stagedQueue(t, "plainwaits", m.opts(cfg)...)
	q := stgQueue(t, sub, m.opts(cfg)...) // the plain Dequeue's client
	armed, release := holdWaiters(qW)
	defer release()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	got, errs := startWaiters(wctx, qW, db, 1)
	recvWithin(t, armed, "A's request waiting on an empty queue")
	_, errsB := startWaiters(wctx, qW, db, 1)
	recvWithin(t, armed, "B's request waiting on an empty queue")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // A and B are held as they wake

	// The registration sleeps (it stands behind two requests); the
	// Dequeue looks again after at most 100 ms, and decides then.
	first := make(chan string, 1)
	var once sync.Once
	sleeps := 0
	fdbqueue.SetStagingHook(q, func(p string) {
		switch p {
		case "armed":
			if sleeps++; sleeps == 2 {
				once.Do(func() { first <- "sleeps again" })
			}
		case "commit withdraw":
			once.Do(func() { first <- p })
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := q.Dequeue(ctx, db)
		done <- err
	}()
	require.Equal(t, "sleeps again", recvWithin(t, first, "the Dequeue's sleep or withdrawal"), "behind A and B, with x in the queue, the Dequeue sleeps")
	release()
	select {
	case v := <-got:
		require.Equal(t, "x", string(v), "the oldest request gets x")
	case err := <-errs:
		require.NoError(t, err)
	case <-time.After(wakeTimeout):
		t.Fatal("A did not return")
	}
	require.ErrorIs(t, recvWithin(t, done, "the Dequeue's return"), fdbqueue.ErrEmpty, "the items ran out")
	cancel()
	require.ErrorIs(t, recvWithin(t, errsB, "B's return once cancelled"), context.Canceled)
	requireClean(t, db, sub)
}
