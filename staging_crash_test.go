package fdbqueue_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A consumer that crashes between two steps of a staged dequeue, with two
// processes. Each process is a Queue value of its own over one database
// (separate handles: each has its own in-memory state, the line's hints,
// the journal's pending cleanups and remembered slots, the cached
// configuration). A consumer of process A stops at a step boundary (its
// goroutine exits there, runtime.Goexit: no later code of the call runs,
// no cleanup, no withdrawal) and A's Queue value is never used again.
// Process B's consumers must then receive every item exactly once: the one
// A's request or result holds once the claim timeout has passed (the
// requests and results carry deadlines, docs/design.md "Failures"), the
// others at once.

// crashAt returns a hook that ends its caller's goroutine the first time it
// reaches point (crashed is closed then), as if its process died there.
func crashAt(point string) (hook func(string), crashed <-chan struct{}) {
	var once sync.Once
	c := make(chan struct{})
	return func(p string) {
		if p != point {
			return
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(c)
			runtime.Goexit()
		}
	}, c
}

// TestStagedConsumerCrashesBetweenSteps: process A's consumer calls
// DequeueWait and crashes at a step boundary; process B enqueues x0, x1, x2
// (before the call, while A stalls at a point before the crash, or after
// it). Before the claim timeout B's plain Dequeues take every item but the
// one A holds, if A holds one (a request with x0 due to it, by place, or a
// result with x0 in it: then Dequeue returns ErrEmpty while x0 is
// stranded); once the clock passes the claim timeout, B gets x0 too,
// through Recover or through its consumers' own steps while more items
// flow (B's DequeueWait consumers and a producer), and every item is
// received once, nothing left staged.
//
// The boundaries: before the registration commits ("registering", A holds
// nothing), after it ("registered"), before sleeping ("armed"), woken by
// the items ("woke"), before the commit of a take ("commit take", the
// items having arrived right after the registration), of a fulfilment
// (a woken oldest waiter, "commit fulfil"), of a collect (its request
// served by B, "commit collect") and of the one plain attempt ("commit
// fast", A holds nothing), and a registration in flight when A dies,
// which lands after ("failed").
func TestStagedConsumerCrashesBetweenSteps(t *testing.T) {
	cases := []struct {
		point string // where A's consumer crashes
		pre   bool   // the items are there before the call
		after string // the items arrive while A stalls here, before the crash ("": after the crash)
		serve bool   // B serves A's request (FulfilStaged) before A goes on
		holds bool   // A's request or result holds an item when it crashes
		// inflight: A's registration is in flight when A's context ends
		// (the process is going down); A dies as the call learns that
		// its commit was interrupted ("failed"), and the commit lands
		// afterwards (HoldNextCommitLate), filing a request nobody
		// waits on.
		inflight bool
	}{
		{point: "registering"},
		{point: "registered", holds: true},
		{point: "armed", holds: true},
		{point: "woke", after: "armed", holds: true},
		{point: "commit take", after: "registered", holds: true},
		{point: "commit fulfil", after: "armed", holds: true},
		{point: "commit collect", after: "armed", serve: true, holds: true},
		{point: "commit fast", pre: true},
		{point: "failed", inflight: true, holds: true},
	}
	const timeout = 10 * time.Second
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, c := range cases {
			for _, recover := range []bool{true, false} {
				name := c.point + "/consumers"
				if recover {
					name = c.point + "/recover"
				}
				t.Run(name, func(t *testing.T) {
					ctx := context.Background()
					clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
					db := stgDB(t, memdb.WithClock(clock))
					sub := stgSubspace(t, "crash-"+c.point)
					opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))
					qA := stgQueue(t, sub, opts...) // process A
					qB := stgQueue(t, sub, opts...) // process B

					want := []string{"x0", "x1", "x2"}
					enqueued := false
					enqueue := func() {
						require.NoError(t, qB.EnqueueBatch(ctx, db, [][]byte{[]byte("x0"), []byte("x1"), []byte("x2")}))
						enqueued = true
					}
					if c.pre {
						enqueue()
					}
					crash, crashed := crashAt(c.point)
					hook := crash
					var arrived <-chan struct{}
					var arrive func()
					if c.after != "" {
						var h func(string)
						h, arrived, arrive = stallOnceAt(c.after)
						hook = hooks(h, after(c.after, crash))
					}
					fdbqueue.SetStagingHook(qA, hook)
					actx, cancelA := context.WithCancel(ctx)
					defer cancelA()
					gt := forGoroutines(t)
					var held <-chan struct{}
					var land func()
					if c.inflight {
						held, land = db.HoldNextCommitLate()
					}
					exited := make(chan struct{})
					go func() {
						defer close(exited)
						v, err := qA.DequeueWait(actx, db)
						gt.Errorf("A's consumer returned (%q, %v): it should have crashed", v, err)
					}()
					if c.inflight {
						recvWithin(t, held, "A's registration in flight")
						cancelA()
					}
					if c.after != "" {
						recvWithin(t, arrived, "A at "+c.after)
						enqueue()
						if c.serve {
							n, err := fdbqueue.FulfilStaged(ctx, db, qB)
							require.NoError(t, err)
							require.Equal(t, 1, n, "B served A's request")
						}
						arrive()
					}
					recvWithin(t, crashed, "A's crash")
					recvWithin(t, exited, "A's consumer gone") // qA is never used again
					if c.inflight {
						land() // A's registration lands after A died
					}
					if !enqueued {
						enqueue()
					}

					// Before the claim timeout, B takes all but what A holds.
					got := map[string]int{}
					for {
						v, err := qB.Dequeue(ctx, db)
						if errors.Is(err, fdbqueue.ErrEmpty) {
							break
						}
						require.NoError(t, err)
						got[string(v)]++
					}
					stranded := 0
					if c.holds {
						stranded = 1
					}
					require.Len(t, got, len(want)-stranded, "items B received before the claim timeout")
					if c.holds {
						require.NotEmpty(t, stagingKeys(t, db, sub), "A's request or result holds the last item")
					} else {
						require.Empty(t, stagingKeys(t, db, sub), "A left nothing staged")
					}

					clock.Advance(timeout + time.Second)
					if recover {
						st, err := qB.Recover(ctx, db)
						require.NoError(t, err)
						require.Equal(t, stranded, st.ReturnedItems, "items Recover returned (%+v)", st)
						requireDrainedOnce(t, db, sub, qB, got, want)
						return
					}
					// B's consumers wait while a producer of B enqueues more.
					more, wait := produce(t, 1, 4, func(_, _ int, v []byte) error { return qB.Enqueue(ctx, db, v) })
					want = append(want, more...)
					rest := consumeAll(t, 3, stranded+len(more), func(ctx context.Context) (string, error) {
						v, err := qB.DequeueWait(ctx, db)
						return string(v), err
					})
					wait()
					for v, n := range rest {
						got[v] += n
					}
					requireDrainedOnce(t, db, sub, qB, got, want)
				})
			}
		}
	})
}

// TestStagedWaiterBehindACrashedConsumer: process A's consumer files the
// oldest request and crashes before it sleeps; process B's waiter files
// the next one and sleeps. x arrives: it is due to A's request (by place),
// or a fulfilment by B's waiter hands it to A's request (in batches), and
// B's waiter sleeps again without it. Once the clock passes A's claim
// timeout, y arrives and wakes B's waiter, whose step drops A's request or
// returns A's result (by place x goes to the tail); B's waiter receives
// one of x and y, a plain Dequeue of B the other, and nothing is left.
func TestStagedWaiterBehindACrashedConsumer(t *testing.T) {
	const timeout = 10 * time.Second
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		db := stgDB(t, memdb.WithClock(clock))
		sub := stgSubspace(t, "crash-behind")
		opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))
		qA := stgQueue(t, sub, opts...) // process A
		qB := stgQueue(t, sub, opts...) // process B

		crash, crashed := crashAt("armed")
		fdbqueue.SetStagingHook(qA, crash)
		actx, cancelA := context.WithCancel(ctx)
		defer cancelA()
		gt := forGoroutines(t)
		exited := make(chan struct{})
		go func() {
			defer close(exited)
			v, err := qA.DequeueWait(actx, db)
			gt.Errorf("A's consumer returned (%q, %v): it should have crashed", v, err)
		}()
		recvWithin(t, crashed, "A's crash")
		recvWithin(t, exited, "A's consumer gone")

		armed := make(chan struct{}, 16)
		fdbqueue.SetStagingHook(qB, func(p string) {
			if p == "armed" {
				armed <- struct{}{}
			}
		})
		bctx, cancelB := context.WithTimeout(ctx, 30*time.Second)
		defer cancelB()
		type result struct {
			v   []byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			v, err := qB.DequeueWait(bctx, db)
			done <- result{v, err}
		}()
		recvWithin(t, armed, "B's waiter, behind A's request, about to sleep")
		require.NoError(t, qB.Enqueue(ctx, db, []byte("x")))
		recvWithin(t, armed, "B's waiter woken, finding x not for it, about to sleep again")
		select {
		case r := <-done:
			t.Fatalf("B's waiter returned (%q, %v) before A's claim timeout", r.v, r.err)
		default:
		}
		v, err := qB.Dequeue(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "x is held for A until its claim timeout (got %q)", v)

		clock.Advance(timeout + time.Second)
		require.NoError(t, qB.Enqueue(ctx, db, []byte("y")))
		r := recvWithin(t, done, "B's waiter woken by y")
		require.NoError(t, r.err)
		requireDrainedOnce(t, db, sub, qB, map[string]int{string(r.v): 1}, []string{"x", "y"})
	})
}
