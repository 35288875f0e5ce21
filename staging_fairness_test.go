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
	"github.com/fdbqueue/fdbqueue/memdb"
)

// holdWaiters makes the staged calls of q stop when they wake from a sleep
// until release is called, and reports on armed each time one is about to
// sleep.
func holdWaiters(q *fdbqueue.Queue) (armed <-chan struct{}, release func()) {
	a := make(chan struct{}, 64)
	rel := make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(q, func(p string) {
		switch p {
		case "armed":
			a <- struct{}{}
		case "woke":
			<-rel
		}
	})
	return a, func() { once.Do(func() { close(rel) }) }
}

// By place, the one plain attempt of a new call takes the item after those
// due to the requests already in the line, never the item at a waiting
// request's place: a request filed earlier is served first even when its
// waiter is slow to wake. (Taking the head instead would hand the waiter
// the next item, and a later caller the older one.)
func TestStagedPlaceFastTakeLeavesTheWaitersItem(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	db, sub, qW := stagedQueue(t, "fastleaves", m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})...)
	q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})...) // another client
	armed, release := holdWaiters(qW)
	wctx, cancel := context.WithCancel(ctx)
	got, errs := startWaiters(wctx, qW, db, 1)
	returned := false
	t.Cleanup(func() { // W returns before the test ends, whatever happened
		release()
		cancel()
		if !returned {
			select {
			case <-got:
			case <-errs:
			case <-time.After(wakeTimeout):
				t.Error("W did not return once cancelled")
			}
		}
	})
	recvWithin(t, armed, "W's request alone in the line, asleep on an empty queue")
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y")}))
	v, err := q.Dequeue(ctx, db) // W is held as it wakes
	require.NoError(t, err)
	require.Equal(t, "y", string(v), "x is due to W's request, ahead in the line")
	release()
	var v2 []byte
	select {
	case v2 = <-got:
	case err := <-errs:
		returned = true
		t.Fatalf("DequeueWait: %v", err)
	case <-time.After(wakeTimeout):
		t.Fatal("W did not return")
	}
	returned = true
	require.Equal(t, "x", string(v2))
	requireClean(t, db, sub)
}

// A plain staged Dequeue never blocks: served in batches, one that filed
// its request behind two waiting ones, with an item in the queue for them,
// returns ErrEmpty soon after they took it, although nothing it watches
// changes (the request ahead keeps waiting on an empty queue, and nothing
// is enqueued). It looks again every 100 ms instead of sleeping until its
// renewal, an hour away here.
func TestStagedPlainDequeueBehindWaitersDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[0] // in batches
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qW := stagedQueue(t, "noblock", m.opts(cfg)...)
	q := stgQueue(t, sub, m.opts(cfg)...) // the plain Dequeue's client
	armed, release := holdWaiters(qW)
	defer release()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gt := forGoroutines(t)
	got := make(chan string, 2)
	for range 2 {
		go func() {
			v, err := qW.DequeueWait(wctx, db)
			if err != nil && !errors.Is(err, context.Canceled) {
				gt.Errorf("DequeueWait: %v", err)
			}
			got <- string(v)
		}()
		recvWithin(t, armed, "A's, then B's request waiting on an empty queue")
	}
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // A and B are held as they wake
	done := make(chan error, 1)
	registered := make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "registered" {
			once.Do(func() { close(registered) })
		}
	})
	go func() {
		_, err := q.Dequeue(ctx, db)
		done <- err
	}()
	recvWithin(t, registered, "the Dequeue's request, behind A and B, with x for A")
	release()
	require.Equal(t, "x", recvWithin(t, got, "A's item"), "the oldest request gets x")
	select {
	case err := <-done:
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	case <-time.After(wakeTimeout):
		t.Fatal("a plain Dequeue blocked after the items ran out for the requests ahead")
	}
	cancel()
	recvWithin(t, got, "B's return once cancelled")
	requireClean(t, db, sub)
}

// A renewal pushes the request's deadline a whole claim timeout past the
// renewal, not just past the next one (ClaimTimeout/3 later): a waiter
// that renewed and sleeps on an empty queue keeps its request until well
// after its next renewal is due, whoever looks at the line meanwhile.
func TestStagedRenewalKeepsTheRequestLive(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		const timeout = time.Hour
		clock, db, sub, q := clockedQueue(t, "renew", m, timeout)
		other := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)
		second := make(chan struct{})
		var arms int
		fdbqueue.SetStagingHook(q, func(p string) {
			if p != "armed" {
				return
			}
			switch arms++; arms {
			case 1: // the renewal is due: the waiter renews instead of sleeping
				clock.Advance(timeout/3 + time.Microsecond)
			case 2: // asleep after its renewal; its next one is nearly due
				clock.Advance(timeout/3 - timeout/100)
				close(second)
			}
		})
		got, errs := startWaiters(ctx, q, db, 1)
		recvWithin(t, second, "the waiter asleep after its renewal")
		st, err := other.Recover(ctx, db)
		require.NoError(t, err)
		require.Zero(t, st.DroppedRequests, "the renewed request was dropped before its next renewal")
		require.NoError(t, other.Enqueue(ctx, db, []byte("x")))
		select {
		case v := <-got:
			require.Equal(t, "x", string(v))
		case err := <-errs:
			t.Fatalf("DequeueWait: %v", err)
		case <-time.After(wakeTimeout):
			t.Fatal("the enqueue did not wake the renewed waiter")
		}
		requireClean(t, db, sub)
	})
}

// By place, an item due to a request that leaves the line goes to the tail
// in a transaction that reads it (a read conflict on its key): a consumer
// outside the line that read the queue before the request was filed, and
// so takes that item, commits while the cleanup is in flight; the cleanup
// must then conflict and retry, not write the item to the tail too.
func TestStagedPlaceCleanupConflictsWithTakeOfItsItem(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
	db, sub, qW := stagedQueue(t, "leaveconflict", m.opts(cfg)...)
	q := stgQueue(t, sub, m.opts(cfg)...)
	require.NoError(t, q.Enqueue(ctx, db, []byte("a")))

	// A consumer outside the line: a Dequeue inside the caller's
	// transaction, before any request is filed, takes a.
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	v, err := q.Dequeue(ctx, tr)
	require.NoError(t, err)
	require.Equal(t, "a", string(v))

	// W files a request (due a, as the line sees it) and gives up at once;
	// its cleanup's commit is held in flight.
	fdbqueue.SetStagingBusy(qW, true) // no first look: W files at once
	wctx, cancel := context.WithCancel(ctx)
	type hold struct {
		held    <-chan struct{}
		release func()
	}
	holds := make(chan hold, 1)
	fdbqueue.SetStagingHook(qW, func(p string) {
		if p == "registered" {
			held, release := db.HoldNextCommit() // the next commit that writes: the cleanup's
			holds <- hold{held, release}
			cancel()
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(wctx, db)
		done <- err
	}()
	h := recvWithin(t, holds, "W's request filed")
	recvWithin(t, h.held, "W's cleanup in flight")
	require.NoError(t, tr.Commit(), "the take outside the line")
	h.release()
	require.ErrorIs(t, recvWithin(t, done, "W's return"), context.Canceled)
	requireClean(t, db, sub) // a is gone: not written back to the tail
}

// A staged PopMaxWait takes the highest item with a read conflict on the
// items' range from that item to the end (the PopMax side's head), as a
// plain PopMax's does: a Push of a higher priority committed while the
// take is in flight makes the take conflict and retry, and it then takes
// the new item. A take that conflicted only on the range below its item
// would return "low" after a Len that saw both items, which no order of
// the calls explains: PopMaxWait would come after that Len, when "high"
// was the highest. Both takes are checked: the one plain attempt (the
// item is there when the call starts) and the take of the oldest request
// (the item arrives once the request is filed).
func TestStagedPopMaxTakeConflictsWithHigherPush(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout) // a failure bound only
			defer cancel()
			db := stgDB(t)
			pq, err := fdbqueue.NewPriorityQueue(stgSubspace(t, "popmaxahead"), fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Hour}))
			require.NoError(t, err)
			if fast {
				require.NoError(t, pq.Push(ctx, db, []byte("low"), 1))
			}
			var hookErr error
			seen, taking := -1, 0
			fdbqueue.SetPQStagingHook(pq, func(p string) {
				switch {
				case p == "registered" && !fast:
					// The request was filed on the empty queue; an item
					// arrives before the waiter's next step, which takes
					// it (the oldest request takes the head itself).
					hookErr = errors.Join(hookErr, pq.Push(ctx, db, []byte("low"), 1))
				case p == "taking":
					if taking++; taking > 1 {
						return
					}
					// The take of "low" is read and about to commit.
					hookErr = errors.Join(hookErr, pq.Push(ctx, db, []byte("high"), 2))
					n, err := pq.Len(ctx, db)
					hookErr = errors.Join(hookErr, err)
					seen = n
				}
			})
			it, err := pq.PopMaxWait(ctx, db)
			require.NoError(t, err)
			require.NoError(t, hookErr)
			require.Equal(t, 2, seen, "Len, after the Push and before the take committed, saw both items")
			require.Equal(t, "high", string(it.Value))
			require.Equal(t, 2, taking, "the take of low conflicted and was retried")
			it, err = pq.PopMax(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "low", string(it.Value))
		})
	}
}

// By place, an item due to an expired request is unavailable to a
// consumer outside the line until a transaction drops the request and
// moves the item to the tail. That move is an arrival for such a consumer,
// so it bumps the signal key: a consumer that found the queue empty and
// watches for items (WatchForItems) wakes, and then takes the item.
func TestStagedPlaceRequeueWakesWatchers(t *testing.T) {
	ctx, cancelAll := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelAll()
	m := stagingModes[1] // by place
	const timeout = 10 * time.Second
	clock, db, sub, qW := clockedQueue(t, "requeuewakes", m, timeout)
	q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout})...)

	// W files a request on the empty queue and stalls for good before it
	// sleeps: it no longer renews its request.
	stalled, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qW, func(p string) {
		if p == "armed" {
			once.Do(func() { close(stalled) })
			<-release
		}
	})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(wctx, db)
		done <- err
	}()
	recvWithin(t, stalled, "W's request filed, W about to sleep")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // due to W's request
	clock.Advance(timeout + time.Second)                // W's request expires

	// A consumer outside the line finds nothing for it: x holds the
	// place of W's request, expired but not yet dropped. It watches.
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

	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1, ReturnedItems: 1}, st)
	require.NoError(t, w.Wait(ctx), "the move of x to the tail wakes the watcher")
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v))

	cancel()
	close(release)
	require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
	requireClean(t, db, sub)
}

// In batches, a fulfilment hands an item to a waiting request with read
// conflicts on both keys (it read them with snapshot reads): if, while its
// commit is in flight, a consumer outside the line takes that item, or the
// request leaves the line, it conflicts, and its retry finds nothing to
// serve. Otherwise the item would be handed out twice, or handed to a
// request nobody collects (hidden from every consumer until its claim
// expires).
func TestStagedFulfilmentConflictsWithItsItemOrRequest(t *testing.T) {
	for _, outside := range []bool{true, false} {
		name := "request withdrawn"
		if outside {
			name = "item taken outside the line"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			m := stagingModes[0] // in batches
			cfg := fdbqueue.StagingConfig{ClaimTimeout: time.Hour}
			db, sub, qW := stagedQueue(t, "fulfilconflict", m.opts(cfg)...)
			q := stgQueue(t, sub, m.opts(cfg)...)

			// W files a request on the empty queue and sleeps; the
			// enqueue of x wakes it, and it stalls there.
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

			var tr kv.Transaction
			if outside {
				// A consumer outside the line takes x, not yet committed.
				var err error
				tr, err = db.CreateTransaction(ctx)
				require.NoError(t, err)
				v, err := q.Dequeue(ctx, tr)
				require.NoError(t, err)
				require.Equal(t, "x", string(v))
			}
			// A fulfilment hands x to W's request; its commit is held.
			held, release := db.HoldNextCommit()
			type res struct {
				n   int
				err error
			}
			served := make(chan res, 1)
			go func() {
				n, err := fdbqueue.FulfilStaged(ctx, db, q)
				served <- res{n, err}
			}()
			recvWithin(t, held, "the fulfilment's commit held")
			if outside {
				require.NoError(t, tr.Commit())
			} else {
				cancel() // W gives up: its request leaves the line
				unstall()
				require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
			}
			release()
			r := recvWithin(t, served, "the fulfilment's return")
			require.NoError(t, r.err)
			require.Equal(t, 0, r.n, "the fulfilment conflicted, and its retry found nothing to serve")
			if outside {
				cancel()
				unstall()
				require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
			} else {
				v, err := q.Dequeue(ctx, db)
				require.NoError(t, err)
				require.Equal(t, "x", string(v))
			}
			requireClean(t, db, sub)
		})
	}
}

// A transaction that drops an expired request has a read conflict on its
// key: a helper whose clock is behind (it still sees the request live)
// may serve it meanwhile, and the drop, which also clears the request's
// result key, must then conflict rather than erase the item handed to it.
func TestStagedDropConflictsWithServeOfTheRequest(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[0] // in batches
	const timeout = 10 * time.Second
	start := time.Unix(1_700_000_000, 0)
	behind, ahead := memdb.NewManualClock(start), memdb.NewManualClock(start)
	db := stgDB(t)
	sub := stgSubspace(t, "dropconflict")
	opts := func(c *memdb.ManualClock) []fdbqueue.Option {
		return append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(c.Now))
	}
	qW, qBehind, qAhead := stgQueue(t, sub, opts(behind)...), stgQueue(t, sub, opts(behind)...), stgQueue(t, sub, opts(ahead)...)

	// W files a request on the empty queue and stalls before it sleeps.
	hook, stalled, unstall := stallAtArm()
	defer unstall()
	fdbqueue.SetStagingHook(qW, hook)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(wctx, db)
		done <- err
	}()
	recvWithin(t, stalled, "W's request filed, W about to sleep")
	require.NoError(t, qW.Enqueue(ctx, db, []byte("x")))
	ahead.Advance(timeout + time.Second) // by this clock W's request expired

	// The helper whose clock is ahead drops W's request; its commit is
	// held while the other helper hands x to it.
	held, release := db.HoldNextCommit()
	type res struct {
		n   int
		err error
	}
	dropped := make(chan res, 1)
	go func() {
		n, err := fdbqueue.FulfilStaged(ctx, db, qAhead)
		dropped <- res{n, err}
	}()
	recvWithin(t, held, "the drop's commit held")
	n, err := fdbqueue.FulfilStaged(ctx, db, qBehind)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the helper whose clock is behind serves W's request")
	release()
	r := recvWithin(t, dropped, "the drop's return")
	require.NoError(t, r.err)
	require.Equal(t, 0, r.n)

	// W gives up: it returns x to the queue.
	cancel()
	unstall()
	require.ErrorIs(t, recvWithin(t, done, "W's return once cancelled"), context.Canceled)
	v, err := qBehind.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v), "x was neither lost nor handed out")
	requireClean(t, db, sub)
}

// A transaction that returns the item of an expired result to the queue
// has a read conflict on the result: a waiter whose clock is behind (its
// result is not expired for it) may collect the item meanwhile, and the
// return must then conflict rather than put back an item already taken.
func TestStagedResultExpiryConflictsWithCollect(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[0] // in batches
	const timeout = 10 * time.Second
	start := time.Unix(1_700_000_000, 0)
	behind, ahead := memdb.NewManualClock(start), memdb.NewManualClock(start)
	db := stgDB(t)
	sub := stgSubspace(t, "expireconflict")
	opts := func(c *memdb.ManualClock) []fdbqueue.Option {
		return append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(c.Now))
	}
	qW, qBehind, qAhead := stgQueue(t, sub, opts(behind)...), stgQueue(t, sub, opts(behind)...), stgQueue(t, sub, opts(ahead)...)

	// W files a request on the empty queue and sleeps; the enqueue of x
	// wakes it, and it stalls there.
	hook, armed, woke, unstall := stallAfterWake()
	defer unstall()
	fdbqueue.SetStagingHook(qW, hook)
	type res struct {
		v   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := qW.DequeueWait(ctx, db)
		done <- res{v, err}
	}()
	recvWithin(t, armed, "W asleep")
	require.NoError(t, qW.Enqueue(ctx, db, []byte("x")))
	recvWithin(t, woke, "W woken")
	n, err := fdbqueue.FulfilStaged(ctx, db, qBehind)
	require.NoError(t, err)
	require.Equal(t, 1, n, "x is handed to W's request")
	ahead.Advance(timeout + time.Second) // by this clock W's result expired

	// The helper whose clock is ahead returns x to the queue; its commit
	// is held while W collects x.
	held, release := db.HoldNextCommit()
	expired := make(chan error, 1)
	go func() {
		_, err := fdbqueue.FulfilStaged(ctx, db, qAhead)
		expired <- err
	}()
	recvWithin(t, held, "the return's commit held")
	unstall()
	w := recvWithin(t, done, "W's return")
	require.NoError(t, w.err)
	require.Equal(t, "x", string(w.v))
	release()
	require.NoError(t, recvWithin(t, expired, "the return's end"))
	_, err = qBehind.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "x, collected by W, is not back in the queue")
	requireClean(t, db, sub)
}

// A call whose cleanup fails (here its commit fails with an error that
// is not retryable) leaves its request in the line, where an item may be due or
// handed to it until the request expires: its error says the call may have
// had an effect (kv.MaybeCommitted), wrapping the caller's context error.
func TestStagedFailedCleanupMayHaveCommitted(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, _, q := stagedQueue(t, "failedcleanup", m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})...)
		fdbqueue.SetStagingBusy(q, true) // no first look: it files at once
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "registered" {
				// The next commit: the cleanup's, since the call stops
				// before its next step.
				db.FailNextCommit(kv.ErrTransactionTooLarge, false)
				cancel()
			}
		})
		_, err := q.DequeueWait(wctx, db)
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, kv.MaybeCommitted(err), "the request may still be in the line: %v", err)
	})
}
