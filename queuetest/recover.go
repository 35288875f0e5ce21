package queuetest

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// clock is a queue clock the suite moves (fdbqueue.WithClock).
type clock struct{ ns atomic.Int64 }

func newClock(t time.Time) *clock {
	c := &clock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *clock) now() time.Time { return time.Unix(0, c.ns.Load()) }

func recoverChecks() []check {
	return []check{
		{"ExpiredRequest/ByPlace", func(t *testing.T, f *fixture) {
			testRecoverExpired(t, f, true, false, []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, fdbqueue.ServeByPlace)
		}},
		{"ExpiredRequest/InBatches/indexed", func(t *testing.T, f *fixture) {
			testRecoverExpired(t, f, true, false, nil, fdbqueue.ServeInBatches)
		}},
		{"ExpiredRequest/InBatches/vstamp", func(t *testing.T, f *fixture) {
			testRecoverExpired(t, f, true, false, []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, fdbqueue.ServeInBatches)
		}},
		{"ExpiredRequest/PopMin", func(t *testing.T, f *fixture) { testRecoverExpired(t, f, false, false, nil, fdbqueue.ServeAuto) }},
		{"ExpiredRequest/PopMax", func(t *testing.T, f *fixture) { testRecoverExpired(t, f, false, true, nil, fdbqueue.ServeAuto) }},
		{"NothingExpired", testRecoverNothing},
	}
}

// testRecoverExpired: a waiter whose request outlives the claim timeout (as
// its queue's clock sees it: the suite moves the clock of another client
// past the deadline instead of waiting) has its request dropped by that
// client's Recover, and, woken by the watch on its request, fails with
// ErrClaimExpired having taken nothing. An item added meanwhile by a
// client that does not wake the waiter (writeUnsignalled) is due to the
// request by place and goes back to the queue; it is taken once. For a
// PriorityQueue the waiter pops the minimum, or with popMax the maximum:
// Recover covers both sides.
func testRecoverExpired(t *testing.T, f *fixture, isQueue, popMax bool, layout []fdbqueue.Option, serving fdbqueue.StagingServing) {
	sub := f.sub(t, "recover")
	start := time.Now()
	waiterClock, laterClock := newClock(start), newClock(start.Add(2*time.Hour))
	staging := fdbqueue.WithStaging(stagingConfig(serving))
	mk := func(c *clock, staged bool) (ops stagedOps, recov func() (fdbqueue.RecoverStats, error)) {
		opts := with(layout, fdbqueue.WithClock(c.now))
		if staged {
			opts = append(opts, staging)
		}
		if isQueue {
			q, err := fdbqueue.NewQueue(sub, opts...)
			require.NoError(t, err)
			return queueOps(q), func() (fdbqueue.RecoverStats, error) { return q.Recover(f.ctx, f.db) }
		}
		pq, err := fdbqueue.NewPriorityQueue(sub, opts...)
		require.NoError(t, err)
		return pqOps(pq, popMax), func() (fdbqueue.RecoverStats, error) { return pq.Recover(f.ctx, f.db) }
	}
	waiterOps, _ := mk(waiterClock, true)
	laterOps, recoverLater := mk(laterClock, true)

	w := f.startWaiter(t, "waiter", waiterOps.wait)
	// The layouts here are the recipes' or, given an option, versionstamps.
	writeUnsignalled(t, f, sub, isQueue, len(layout) > 0, []byte("x"))

	st, err := recoverLater()
	require.NoError(t, err, "Recover by a client whose clock is past the claim timeout")
	if st.DroppedRequests == 0 {
		// A watch the waiter armed may fail (a read fault sweep's
		// injected read fault, memdb's DB.FailReadAfter; on a cluster a
		// storage server's error, future_version or broken_promise), so
		// the waiter wakes while the suite goes on, as a waiter does when
		// a watch fails, and may take the item (its request, by its own
		// clock, is not expired) before Recover looks: then there was
		// nothing to drop, and the item is the waiter's, once.
		v, err := w.result(t, f)
		require.NoError(t, err, "a waiter woken before Recover took the item")
		requireValue(t, []byte("x"), v, "the waiter woken before Recover took the item")
		require.Zero(t, st.ReturnedItems, "Recover returned no item")
	} else {
		require.Equal(t, 1, st.DroppedRequests, "Recover drops the expired request")
		if serving == fdbqueue.ServeByPlace {
			require.Equal(t, 1, st.ReturnedItems, "by place, the item due to the expired request goes back to the queue")
		} else {
			require.Zero(t, st.ReturnedItems, "in batches nothing was handed to the expired request")
		}
		_, err = w.result(t, f)
		require.ErrorIs(t, err, fdbqueue.ErrClaimExpired, "the waiter whose request expired took nothing")

		v, err := laterOps.take(f.ctx, f.db)
		require.NoError(t, err)
		requireValue(t, []byte("x"), v, "the item is still in the queue, once")
	}
	_, err = laterOps.take(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	st, err = recoverLater()
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{}, st, "a second Recover finds nothing")
}

// writeUnsignalled writes one item as a client that does not wake waiters
// writes it (a recipe client: its own keys, no signal bump). Every
// producer of this library wakes the waiters of a staged queue (the
// stored configuration tells it), so the suite writes the keys itself.
func writeUnsignalled(t *testing.T, f *fixture, sub fdbqueue.Subspace, isQueue, vstamp bool, value []byte) {
	t.Helper()
	random := bytes.Repeat([]byte{0x5a}, 20)
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		switch {
		case isQueue && vstamp:
			key, err := tuple.Tuple{tuple.IncompleteVersionstamp(0), random}.PackWithVersionstamp(sub.Bytes())
			if err != nil {
				return err
			}
			tr.SetVersionstampedKey(key, value)
			return nil
		case isQueue:
			key, err := tuple.Tuple{int64(1), random}.AppendPack(sub.Bytes())
			if err != nil {
				return err
			}
			tr.Set(key, value)
			return nil
		}
		key, err := tuple.Tuple{int64(0), int64(0), random}.AppendPack(sub.Bytes())
		if err != nil {
			return err
		}
		tr.Set(key, value)
		return nil
	}), "a producer that does not wake waiters")
}

func testRecoverNothing(t *testing.T, f *fixture) {
	q := f.queue(t, "nothing", fdbqueue.WithStaging(stagingConfig(fdbqueue.ServeInBatches)))
	f.enqueueAll(t, q, strs("a"))
	st, err := q.Recover(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{}, st)
	requireValues(t, strs("a"), f.drain(t, q), "Recover leaves items alone")
}
