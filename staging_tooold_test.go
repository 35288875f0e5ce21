package fdbqueue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// The staged dequeue across FoundationDB's MVCC window. A transaction may
// read and commit for 5 s after it got its read version
// (MAX_READ_TRANSACTION_LIFE_VERSIONS, 5 * VERSIONS_PER_SECOND, in
// fdbclient/ServerKnobs.cpp); a commit with read conflict ranges whose read
// version is older fails with transaction_too_old, 1007
// (ConflictBatch::addTransaction, fdbserver/SkipList.cpp), which is
// retryable and not maybe committed (fdb_error_predicate's
// RETRYABLE_NOT_COMMITTED, bindings/c/fdb_c.cpp; Transaction::onError,
// fdbclient/NativeAPI.actor.cpp, resets the transaction: the retry gets a
// fresh read version). memdb reproduces the window on its Clock
// (memdb.WithClock, memdb.WithMVCCWindow): here the database and the queue
// share one ManualClock, and a step that stalls between its reads and its
// commit while the clock moves past the window gets 1007 at its commit.
// The step must retry from a fresh read, and the item must be received
// exactly once, with nothing left staged.

// mvccWindow is memdb's default MVCC window, FoundationDB's.
const mvccWindow = 5 * time.Second

// windowClaimTimeout is the claim timeout of the queues below: long enough
// that the clock's moves past the window never expire a request.
const windowClaimTimeout = time.Minute

// windowedQueue is a staged queue in mode m whose database and queue tell
// time with one ManualClock, returned. Its claims and cleanups last a
// minute: a cleanup whose commit is held past the window has taken more
// than the window, and its transaction's timeout (CleanupTimeout, which
// memdb counts on the clock too) must outlast that.
func windowedQueue(t *testing.T, name string, m stagingMode) (*memdb.ManualClock, *memdb.DB, fdbqueue.Subspace, *fdbqueue.Queue) {
	t.Helper()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t, memdb.WithClock(clock))
	sub := stgSubspace(t, name)
	q := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: windowClaimTimeout, CleanupTimeout: windowClaimTimeout}), fdbqueue.WithClock(clock.Now))...)
	return clock, db, sub, q
}

// crossWindow moves clock past the MVCC window: every transaction that got
// its read version before can no longer commit with a read conflict range.
func crossWindow(clock *memdb.ManualClock) { clock.Advance(mvccWindow + time.Second) }

// phaseFailures returns how many of q's staged steps of phase failed with
// an error other than not_committed.
func phaseFailures(q *fdbqueue.Queue, phase string) int64 {
	for _, p := range q.StagingStats().Phases {
		if p.Phase == phase {
			return p.Failures
		}
	}
	return 0
}

// requireDrainedOnce dequeues what is left with plain Dequeues until
// ErrEmpty, adds it to got, and checks that every value of want was
// received exactly once and that nothing is left staged.
func requireDrainedOnce(t *testing.T, db *memdb.DB, sub fdbqueue.Subspace, q *fdbqueue.Queue, got map[string]int, want []string) {
	t.Helper()
	ctx := context.Background()
	for {
		v, err := q.Dequeue(ctx, db)
		if err != nil {
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			break
		}
		got[string(v)]++
	}
	requireExactlyOnce(t, got, want)
	requireClean(t, db, sub)
}

// hooks runs each of hs at every point.
func hooks(hs ...func(string)) func(string) {
	return func(p string) {
		for _, h := range hs {
			h(p)
		}
	}
}

// after returns a hook that passes the points after the first time point
// was reached to h.
func after(point string, h func(string)) func(string) {
	var seen atomic.Bool
	return func(p string) {
		if seen.Load() {
			h(p)
		} else if p == point {
			seen.Store(true)
		}
	}
}

// TestStagedStepPastTheMVCCWindow: a staged DequeueWait stalls in one of
// its steps, after the step's reads and before its commit, while the
// clock moves past the MVCC window. The commit fails with
// transaction_too_old; the call retries the step from a fresh read and
// returns the first item, received once; the rest stays in the queue and
// nothing stays staged.
//
//   - fast: the one plain attempt (items there at the call);
//   - register: the registration, on an empty queue (items after it);
//     its retry first resolves the failed registration through its
//     marker (staging_register.go, resolve);
//   - take: the step right after the registration, the items having
//     arrived in between (takeAt);
//   - fulfil: the step of the oldest waiter woken by the items, which
//     serves the line and takes its own item;
//   - collect: the waiter's request was served (FulfilStaged) while it
//     slept; it collects its result.
//
// Each case checks that the step of that phase failed (StagingStats) and
// that memdb counted a transaction_too_old.
func TestStagedStepPastTheMVCCWindow(t *testing.T) {
	cases := []struct {
		name  string
		pre   bool   // the items are there before the call
		after string // the items arrive while the waiter stalls here ("": after the stall)
		serve bool   // a helper serves the request before the waiter goes on
		point string // where the step stalls across the window
		phase string // the phase of that step
	}{
		{name: "fast", pre: true, point: "commit fast", phase: "fast"},
		{name: "register", point: "commit register", phase: "register"},
		{name: "take", after: "registered", point: "commit take", phase: "take"},
		{name: "fulfil", after: "armed", point: "commit fulfil", phase: "fulfil"},
		{name: "collect", after: "armed", serve: true, point: "commit collect", phase: "collect"},
	}
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				ctx := context.Background()
				clock, db, sub, q := windowedQueue(t, "window-"+c.name, m)
				want := []string{"a", "b"}
				enqueue := func() { require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")})) }
				if c.pre {
					enqueue()
				}
				stallHook, stalled, resume := stallOnceAt(c.point)
				hook := stallHook
				var arrived <-chan struct{}
				var arrive func()
				if c.after != "" {
					var h func(string)
					h, arrived, arrive = stallOnceAt(c.after)
					// The stall is for a step after that point: the step
					// that only arms before the first sleep commits in
					// phase fulfil too.
					hook = hooks(h, after(c.after, stallHook))
				}
				fdbqueue.SetStagingHook(q, hook)
				wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				type result struct {
					v   []byte
					err error
				}
				done := make(chan result, 1)
				go func() {
					v, err := q.DequeueWait(wctx, db)
					done <- result{v, err}
				}()
				if c.after != "" {
					recvWithin(t, arrived, "the waiter at "+c.after)
					enqueue()
					if c.serve {
						n, err := fdbqueue.FulfilStaged(ctx, db, q)
						require.NoError(t, err)
						require.Equal(t, 1, n, "the waiter's request was served")
					}
					arrive()
				}
				recvWithin(t, stalled, "the waiter stalled before its "+c.phase+" step's commit")
				before := db.Stats().TooOld
				crossWindow(clock)
				resume()
				if !c.pre && c.after == "" {
					enqueue()
				}
				r := recvWithin(t, done, "the waiter's return")
				require.NoError(t, r.err)
				require.Equal(t, "a", string(r.v))
				require.Greater(t, db.Stats().TooOld, before, "a commit failed with transaction_too_old")
				require.Positive(t, phaseFailures(q, c.phase), "the %s step failed", c.phase)
				requireDrainedOnce(t, db, sub, q, map[string]int{"a": 1}, want)
			})
		}
	})
}

// TestStagedCleanupPastTheMVCCWindow: the caller's context ends while its
// request has been served (its item sits in its result). The cleanup's
// commit is in flight (HoldNextCommit) while the clock moves past the
// window, so it fails with transaction_too_old; the cleanup's retry loop
// (Transact, which calls OnError) runs it again from a fresh read, and it
// puts the item back and clears the request. The call reports the
// context's error, not maybe committed, and the item is received once.
func TestStagedCleanupPastTheMVCCWindow(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		clock, db, sub, q := windowedQueue(t, "window-cleanup", m)
		hook, stalled, resume := stallOnceAt("armed")
		fdbqueue.SetStagingHook(q, hook)
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := q.DequeueWait(wctx, db)
			done <- err
		}()
		recvWithin(t, stalled, "the waiter asleep")
		require.NoError(t, q.Enqueue(ctx, db, []byte("a")))
		n, err := fdbqueue.FulfilStaged(ctx, db, q)
		require.NoError(t, err)
		require.Equal(t, 1, n, "the waiter's request was served")

		held, release := db.HoldNextCommit() // the cleanup's
		cancel()
		resume()
		recvWithin(t, held, "the cleanup's commit held")
		before := db.Stats().TooOld
		crossWindow(clock)
		release()
		err = recvWithin(t, done, "the waiter's return once cancelled")
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, kv.MaybeCommitted(err), "the cleanup committed on its retry: %v", err)
		require.Greater(t, db.Stats().TooOld, before, "the cleanup's first commit failed with transaction_too_old")
		requireDrainedOnce(t, db, sub, q, map[string]int{}, []string{"a"})
	})
}

// TestStagedWaitsLongerThanTheMVCCWindow: waiters sleep on their watches
// for several MVCC windows (the clock moves 3 windows while they wait, and
// a third waiter, behind the two oldest, renews its request in a step that
// stalls across one more window and fails with transaction_too_old; in
// batches its arm transaction stalls across one more). No
// step holds a read version while its waiter sleeps (the loop resets its
// transaction before it arms and sleeps, staging_waiter.go), so each
// waiter's next step reads afresh; a watch compares with the value at its
// transaction's read version, so the items that arrive then wake them
// (FoundationDB's storage server reads a watched key at its latest version
// however old the watch's version: watchWaitForValueChange,
// fdbserver/storageserver.actor.cpp). Every item is received once.
func TestStagedWaitsLongerThanTheMVCCWindow(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		clock, db, sub, q := windowedQueue(t, "window-wait", m)
		// The two oldest waiters, on another handle of the queue.
		early := stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: windowClaimTimeout}), fdbqueue.WithClock(clock.Now))...)
		var armed sync.WaitGroup
		armed.Add(2)
		var sleeping atomic.Int32
		fdbqueue.SetStagingHook(early, func(p string) {
			if p == "armed" && sleeping.Add(1) <= 2 {
				armed.Done()
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		got := make(chan []byte, 3)
		errs := make(chan error, 3)
		take := func(q *fdbqueue.Queue) {
			v, err := q.DequeueWait(wctx, db)
			if err != nil {
				errs <- err
				return
			}
			got <- v
		}
		go take(early)
		go take(early)
		waitWithin(t, &armed, wakeTimeout, "the two oldest waiters' requests filed, the waiters about to sleep")

		// The third waiter files its request behind them and sleeps; the
		// clock then passes its renewal time (a third of the claim
		// timeout), so its next step renews its request: that step
		// stalls before its commit while the clock crosses the window once
		// more.
		start := clock.Now()
		sleepHook, asleep, wake := stallOnceAt("armed")
		renewHook, renewing, resumeRenew := stallOnceAt("commit wait")
		// In batches, its registration leaves the watch on the request
		// ahead to a read-only transaction right after its commit
		// (armLater); that transaction stalls across the window too. A
		// read-only commit is never too old (FoundationDB's
		// commitMutations returns at once without mutations,
		// fdbclient/NativeAPI.actor.cpp; memdb fires the watches of one
		// past the window, which a watch may do, so the waiter looks
		// again): the waiter must not miss a change either way.
		armHook, arming, resumeArm := stallOnceAt("commit arm")
		// Only a step after that sleep: by place, the step after the
		// registration, which only arms, commits in phase wait too.
		fdbqueue.SetStagingHook(q, hooks(armHook, sleepHook, after("armed", renewHook)))
		go take(q)
		if !m.byPlace {
			recvWithin(t, arming, "the third waiter's arm transaction about to commit")
			crossWindow(clock)
			resumeArm()
		} else {
			// By place the registration arms no watch later, but a step
			// that renews does (staging_batch.go): the retry of the failed
			// renewal below, when it reads before a, b and c arrive. It
			// must not stall there: before, it did so for good.
			resumeArm()
		}
		recvWithin(t, asleep, "the third waiter asleep")
		for range 3 {
			crossWindow(clock)
		}
		// Past its renewal time.
		clock.Advance(start.Add(windowClaimTimeout/3 + time.Second).Sub(clock.Now()))
		wake()
		recvWithin(t, renewing, "the third waiter's renewal about to commit")
		before := db.Stats().TooOld
		crossWindow(clock)
		resumeRenew()
		want := []string{"a", "b", "c"}
		require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
		received := map[string]int{}
		for range 3 {
			select {
			case v := <-got:
				received[string(v)]++
			case err := <-errs:
				require.NoError(t, err)
			case <-time.After(wakeTimeout):
				t.Fatalf("a waiter did not return (received %v)", received)
			}
		}
		require.Greater(t, db.Stats().TooOld, before, "the renewal's commit failed with transaction_too_old")
		require.Positive(t, phaseFailures(q, "wait"), "the renewal step failed")
		requireDrainedOnce(t, db, sub, q, received, want)
	})
}
