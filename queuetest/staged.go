package queuetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// stagingConfig is the staging of the checks: a claim timeout long enough
// that no waiter renews (and so wakes) during a check, so that only a
// watch can wake it.
func stagingConfig(serving fdbqueue.StagingServing) fdbqueue.StagingConfig {
	return fdbqueue.StagingConfig{ClaimTimeout: time.Hour, Serving: serving}
}

// stagedMode is a staged structure: how to make it and how its waiters
// take and its producers add.
type stagedMode struct {
	name string
	// make returns a consumer function that blocks for an item (the Wait
	// form), a staged non-blocking take, and a producer of one batch.
	make func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps
}

type stagedOps struct {
	wait    func(ctx context.Context, db kv.Database) ([]byte, error)
	take    func(ctx context.Context, db kv.Database) ([]byte, error)
	produce func(ctx context.Context, db kv.Database, values [][]byte) error
	peek    func(ctx context.Context, db kv.Database) ([]byte, error)
	stats   func() fdbqueue.StagingStats
}

func queueOps(q *fdbqueue.Queue) stagedOps {
	return stagedOps{
		wait: func(ctx context.Context, db kv.Database) ([]byte, error) { return q.DequeueWait(ctx, db) },
		take: func(ctx context.Context, db kv.Database) ([]byte, error) { return q.Dequeue(ctx, db) },
		produce: func(ctx context.Context, db kv.Database, vs [][]byte) error {
			return q.EnqueueBatch(ctx, db, vs)
		},
		peek:  func(ctx context.Context, db kv.Database) ([]byte, error) { return q.Peek(ctx, db) },
		stats: q.StagingStats,
	}
}

func pqOps(pq *fdbqueue.PriorityQueue, max bool) stagedOps {
	unwrap := func(it fdbqueue.Item, err error) ([]byte, error) { return it.Value, err }
	ops := stagedOps{
		wait:  func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PopMinWait(ctx, db)) },
		take:  func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PopMin(ctx, db)) },
		peek:  func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PeekMin(ctx, db)) },
		stats: pq.StagingStats,
	}
	// A batch is pushed in one transaction with priorities that make the
	// side's order the batch's order.
	sign := int64(1)
	if max {
		sign = -1
	}
	ops.produce = func(ctx context.Context, db kv.Database, vs [][]byte) error {
		return db.Transact(ctx, func(tr kv.Transaction) error {
			for i, v := range vs {
				if err := pq.Push(ctx, tr, v, sign*int64(i)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if max {
		ops.wait = func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PopMaxWait(ctx, db)) }
		ops.take = func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PopMax(ctx, db)) }
		ops.peek = func(ctx context.Context, db kv.Database) ([]byte, error) { return unwrap(pq.PeekMax(ctx, db)) }
	}
	return ops
}

// stagedModes: by place (versionstamp order only), in batches on both key
// layouts, and the PriorityQueue's two lines (always in batches).
var stagedModes = []stagedMode{
	{"ByPlace", func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps {
		return queueOps(f.queue(t, "byplace", with(opts, fdbqueue.WithVersionstampOrder(), fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeByPlace)))...))
	}},
	{"InBatches/indexed", func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps {
		return queueOps(f.queue(t, "batches", with(opts, fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeInBatches)))...))
	}},
	{"InBatches/vstamp", func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps {
		return queueOps(f.queue(t, "batchesvs", with(opts, fdbqueue.WithVersionstampOrder(), fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeInBatches)))...))
	}},
	{"PopMin", func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps {
		return pqOps(f.pqueue(t, "popmin", with(opts, fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeAuto)))...), false)
	}},
	{"PopMax", func(t *testing.T, f *fixture, opts ...fdbqueue.Option) stagedOps {
		return pqOps(f.pqueue(t, "popmax", with(opts, fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeAuto)))...), true)
	}},
}

// waiter is a staged call running in its own goroutine.
type waiter struct {
	name   string
	obs    *watchObserver
	cancel context.CancelFunc
	done   chan waitResult
}

type waitResult struct {
	v   []byte
	err error
}

// startWaiter starts call on a database of its own (a watchObserver) and
// returns once the call has committed a transaction that armed watches:
// from then on it sleeps until a watch fires. It fails the check if the
// call returns first.
func (f *fixture) startWaiter(t *testing.T, name string, call func(ctx context.Context, db kv.Database) ([]byte, error)) *waiter {
	t.Helper()
	ctx, cancel := context.WithCancel(f.ctx)
	w := &waiter{name: name, obs: newWatchObserver(f.db), cancel: cancel, done: make(chan waitResult, 1)}
	go func() {
		v, err := call(ctx, w.obs)
		w.done <- waitResult{v, err}
	}()
	t.Cleanup(func() { // the call returns before the harness closes
		cancel()
		select {
		case <-w.done:
		case <-time.After(wakeTimeout):
			t.Errorf("%s did not return within %v once its context ended", name, wakeTimeout)
		}
	})
	select {
	case <-w.obs.armed:
	case r := <-w.done:
		w.done <- r
		require.Failf(t, "the waiter returned instead of sleeping", "%s returned %s, %v before arming a watch on an empty queue", name, describe(r.v), r.err)
	case <-f.ctx.Done():
		require.Failf(t, "the waiter never armed a watch", "%s: %v", name, f.ctx.Err())
	}
	return w
}

// result waits for the waiter's call to return (bounded by the check's
// context: a waiter that no watch wakes fails the check).
func (w *waiter) result(t *testing.T, f *fixture) ([]byte, error) {
	t.Helper()
	select {
	case r := <-w.done:
		w.done <- r // for the cleanup
		return r.v, r.err
	case <-f.ctx.Done():
		require.Failf(t, "the waiter was never woken", "%s is still waiting: %v", w.name, f.ctx.Err())
		return nil, nil
	}
}

func stagedChecks() []check {
	var cs []check
	for _, m := range stagedModes {
		cs = append(cs,
			check{"FastTake/" + m.name, func(t *testing.T, f *fixture) { testStagedFastTake(t, f, m) }},
			check{"WokenByEnqueue/" + m.name, func(t *testing.T, f *fixture) { testStagedWoken(t, f, m) }},
			check{"LineOrder/" + m.name, func(t *testing.T, f *fixture) { testStagedLineOrder(t, f, m) }},
			check{"EmptyWithdraws/" + m.name, func(t *testing.T, f *fixture) { testStagedEmpty(t, f, m) }},
			check{"CancelledWaiterLeavesNothing/" + m.name, func(t *testing.T, f *fixture) { testStagedCancel(t, f, m) }},
		)
	}
	return cs
}

// testStagedFastTake: a staged take on a non-empty queue returns the head.
func testStagedFastTake(t *testing.T, f *fixture, m stagedMode) {
	ops := m.make(t, f)
	require.NoError(t, ops.produce(f.ctx, f.db, strs("h1", "h2")))
	v, err := ops.take(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("h1"), v, "a staged take without contention takes the head")
	v, err = ops.wait(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("h2"), v, "the Wait form takes an item at once when there is one")
	_, err = ops.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testStagedWoken: a waiter asleep on an empty queue is woken by its
// watches when another transaction adds an item, and takes it.
func testStagedWoken(t *testing.T, f *fixture, m stagedMode) {
	ops := m.make(t, f)
	w := f.startWaiter(t, "waiter", ops.wait)
	require.NoError(t, ops.produce(f.ctx, f.db, strs("wake")), "the producer's transaction")
	v, err := w.result(t, f)
	require.NoError(t, err, "the woken waiter")
	requireValue(t, []byte("wake"), v)
	require.Positive(t, ops.stats().Sleeps, "the waiter slept on its watches (StagingStats.Sleeps)")
	_, err = ops.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the item was taken once")
}

// testStagedLineOrder: waiters are served in the order their requests
// committed, each with the next item, whether they take by place or are
// served in batches.
func testStagedLineOrder(t *testing.T, f *fixture, m stagedMode) {
	ops := m.make(t, f)
	var ws []*waiter
	for i := range 3 {
		ws = append(ws, f.startWaiter(t, fmt.Sprintf("waiter %d", i), ops.wait))
	}
	require.NoError(t, ops.produce(f.ctx, f.db, strs("first", "second", "third")))
	for i, w := range ws {
		v, err := w.result(t, f)
		require.NoError(t, err, "waiter %d", i)
		requireValue(t, []byte([]string{"first", "second", "third"}[i]), v, "waiter %d (line order is registration order) gets item %d", i, i)
	}
	_, err := ops.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "every item was taken once")
}

// testStagedEmpty: a non-blocking staged take on an empty queue returns
// ErrEmpty and withdraws its request: an item added afterwards is free for
// anyone (Peek sees it; served by place, an item due to a request left
// behind would be hidden from Peek).
func testStagedEmpty(t *testing.T, f *fixture, m stagedMode) {
	ops := m.make(t, f)
	_, err := ops.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.NoError(t, ops.produce(f.ctx, f.db, strs("later")))
	v, err := ops.peek(f.ctx, f.db)
	require.NoError(t, err, "Peek after the withdrawn request")
	requireValue(t, []byte("later"), v, "no request may be left to claim the item")
	v, err = ops.take(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("later"), v)
}

// testStagedCancel: a waiter whose context ends returns the context's error
// and withdraws its request: the next item goes to the next caller.
func testStagedCancel(t *testing.T, f *fixture, m stagedMode) {
	ops := m.make(t, f)
	w := f.startWaiter(t, "waiter", ops.wait)
	w.cancel()
	_, err := w.result(t, f)
	require.ErrorIs(t, err, context.Canceled, "a cancelled waiter returns ctx's error")
	require.False(t, errors.Is(err, fdbqueue.ErrEmpty))
	require.NoError(t, ops.produce(f.ctx, f.db, strs("after")))
	v, err := ops.peek(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("after"), v, "the cancelled waiter's request must not claim the item")
	v, err = ops.take(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("after"), v)
}
