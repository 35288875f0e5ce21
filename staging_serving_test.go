package fdbqueue_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Served by place, a waiter whose place in the line is reached by the
// items takes the item at its place itself, without waiting for a
// fulfilment: requests are still served oldest first, each with the next
// item in queue order. While the line is long, new calls file their
// request without a first look at the head.
func TestStagedSelfServiceByPlace(t *testing.T) {
	ctx := context.Background()
	db, sub, q := stagedQueue(t, "self", fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithVersionstampOrder())
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
	got := recvN(t, results, 2, "the two older requests were not served")
	require.ElementsMatch(t, []string{"a", "b"}, got)
	requireClean(t, db, sub)
}

// Waiters asleep on an empty queue are served in a batch when items
// arrive: a woken helper fulfils the line in one transaction, and the
// others collect; every item is received once.
func TestStagedWokenWaitersServedInBatch(t *testing.T) {
	ctx := context.Background()
	db, sub, q := stagedQueue(t, "batchwake", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	const waiters = 8
	armed := make(chan struct{}, 4*waiters)
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "armed" {
			armed <- struct{}{}
		}
	})
	results := make(chan string, waiters)
	gt := forGoroutines(t)
	for range waiters {
		go func() {
			v, err := q.DequeueWait(ctx, db)
			if err != nil {
				gt.Errorf("DequeueWait: %v", err)
			}
			results <- string(v)
		}()
	}
	for range waiters {
		recvWithin(t, armed, "a waiter asleep")
	}
	var want []string
	var vals [][]byte
	for i := range waiters {
		want = append(want, fmt.Sprintf("v%d", i))
		vals = append(vals, fmt.Appendf(nil, "v%d", i))
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, vals))
	got := map[string]int{}
	for _, v := range recvN(t, results, waiters, "a waiter was not served") {
		got[v]++
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
	gt := forGoroutines(t)
	pop := func(to chan int64) {
		it, err := pq.PopMinWait(ctx, db)
		if err != nil {
			gt.Errorf("PopMinWait: %v", err)
		}
		to <- it.Priority
	}
	for range 2 {
		go pop(results)
		recvWithin(t, registered, "a waiter's request filed")
	}
	for _, p := range []int64{7, 5, 6} {
		require.NoError(t, pq.Push(ctx, db, fmt.Appendf(nil, "%d", p), p))
	}
	go pop(third)
	recvWithin(t, armed, "the third waiter asleep") // the two ahead are served first
	select {
	case p := <-third:
		t.Fatalf("a waiter behind two stopped ones took %d", p)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	require.ElementsMatch(t, []int64{5, 6}, recvN(t, results, 2, "the two older requests were not served"))
	require.Equal(t, int64(7), recvWithin(t, third, "the third waiter's item"), "the newest request gets the last item")
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
	db, sub, q := stagedQueue(t, "strict", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	older, release := stallTwoWaiters(ctx, t, db, q)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
	gt := forGoroutines(t)
	third := make(chan string, 1)
	go func() {
		v, err := q.Dequeue(ctx, db)
		if err != nil {
			gt.Errorf("Dequeue: %v", err)
		}
		third <- string(v)
	}()
	select {
	case v := <-third:
		t.Fatalf("the third consumer took %q ahead of two older requests", v)
	case <-time.After(300 * time.Millisecond):
	}
	close(release)
	require.Equal(t, "c", recvWithin(t, third, "the third consumer's item"))
	require.ElementsMatch(t, []string{"a", "b"}, recvN(t, older, 2, "the two older requests were not served"))
	requireClean(t, db, sub)
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
	recvWithin(t, registered, "the first waiter's request filed")
	now.Add(int64(2 * time.Minute)) // its request is past its deadline

	fdbqueue.SetStagingBusy(q, true)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	gt := forGoroutines(t)
	got := make(chan string, 1)
	go func() {
		v, err := q.DequeueWait(ctx, db)
		if err != nil {
			gt.Errorf("DequeueWait: %v", err)
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
	require.ErrorIs(t, recvWithin(t, stuck, "the stuck waiter's return once cancelled"), context.Canceled)
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
		db, sub, q := stagedQueue(t, "reserve", m.opts(fdbqueue.StagingConfig{})...)
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
		recvWithin(t, armed, "the waiter's request in the line, asleep on an empty queue")

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
			require.ErrorIs(t, recvWithin(t, done, "the waiter's return once cancelled"), context.Canceled)
			// x went behind z.
			vals, err := q.DequeueBatch(ctx, db, 4)
			require.NoError(t, err)
			require.Equal(t, []string{"z", "x"}, toStrings(vals))
		} else {
			vals, err := q.DequeueBatch(ctx, db, 4)
			require.NoError(t, err)
			require.Equal(t, []string{"x"}, toStrings(vals), "batch mode: the head is anyone's")
			cancel()
			require.ErrorIs(t, recvWithin(t, done, "the waiter's return once cancelled"), context.Canceled)
		}
		requireClean(t, db, sub)
	})
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
	recvWithin(t, armed, "W waiting at place 0 on an empty queue")

	key, err := sub.Pack(tuple.Tuple{"not", "ours"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(key, []byte("foreign-value")); return nil }))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x"))) // bumps the signal: W wakes
	require.ErrorIs(t, recvWithin(t, werr, "W's return"), fdbqueue.ErrForeignKey)

	require.Contains(t, itemKeys(t, db, sub), key, "the foreign key stays where it was")
	_, err = q.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "as a plain dequeue finds it at the head")
	require.Empty(t, stagingKeys(t, db, sub))
}

// A handle made without WithStaging that last saw the queue unstaged
// learns of place mode from the operation that finds it (config.go,
// gateRead.agree): its Dequeue, which chose the head with the record it
// had seen, must retry with the new one (errConfigMoved) instead of
// taking the item at a waiting request's place.
func TestUnstagedConsumerLearnsOfPlaceMode(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "learns-place")
	vs := fdbqueue.WithVersionstampOrder()
	consumer := stgQueue(t, sub, vs) // no staging options
	producer := stgQueue(t, sub, vs)
	_, err := consumer.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the consumer has seen the queue unstaged")

	q := stgQueue(t, sub, vs, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))
	armed := make(chan struct{}, 8)
	wctx, cancel := context.WithCancel(ctx)
	fdbqueue.SetStagingHook(q, func(p string) {
		switch p {
		case "armed":
			armed <- struct{}{}
		case "woke":
			<-wctx.Done() // keep the waiter asleep (see TestStagedPlaceReservesItems)
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(wctx, db)
		done <- err
	}()
	recvWithin(t, armed, "the waiter asleep")
	require.NoError(t, producer.Enqueue(ctx, db, []byte("x")))

	_, err = consumer.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "x is the waiter's")
	cancel()
	require.ErrorIs(t, recvWithin(t, done, "the waiter's return once cancelled"), context.Canceled)
	v, err := consumer.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v))
	requireClean(t, db, sub)
}
