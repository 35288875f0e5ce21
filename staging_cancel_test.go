package fdbqueue_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

func TestStagedCancelBeforeRegistration(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		db, sub, q := stagedQueue(t, "cancel0", m.opts(fdbqueue.StagingConfig{})...)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := q.DequeueWait(ctx, db)
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, stagingKeys(t, db, sub))
	})
}

func TestStagedCancelAfterRegistration(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		db, sub, q := stagedQueue(t, "cancel1", m.opts(fdbqueue.StagingConfig{})...)
		ctx, cancel := context.WithCancel(context.Background())
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "registered" {
				require.NotEmpty(t, stagingKeys(t, db, sub), "the request is filed")
				cancel()
			}
		})
		_, err := q.DequeueWait(ctx, db)
		require.ErrorIs(t, err, context.Canceled)
		require.Empty(t, stagingKeys(t, db, sub), "the request was withdrawn")
		requireNoWatches(t, db)

		// The withdrawn request takes nothing: the next item goes to the next
		// consumer.
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("kept")))
		v, err := q.Dequeue(context.Background(), db)
		require.NoError(t, err)
		require.Equal(t, "kept", string(v))
	})
}

// A waiter whose request was fulfilled but whose context ends before it
// collects writes the item back at its original key.
func TestStagedCancelAfterFulfilment(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, sub, q := stagedQueue(t, "cancel2", m.opts(fdbqueue.StagingConfig{})...)
		plain := stgQueue(t, sub, m.layout()) // a producer without staging options (it runs in the hook, before the waiter sleeps)
		wctx, cancel := context.WithCancel(ctx)
		var itemKey []byte
		fdbqueue.SetStagingHook(q, func(p string) {
			if p != "armed" {
				return
			}
			require.NoError(t, plain.Enqueue(ctx, db, []byte("handed")))
			keys := itemKeys(t, db, sub)
			require.Len(t, keys, 1)
			itemKey = keys[0]
			n, err := fdbqueue.FulfilStaged(ctx, db, q)
			require.NoError(t, err)
			require.Equal(t, 1, n, "the waiter's request is served")
			require.Empty(t, itemKeys(t, db, sub), "the item moved to the waiter's result")
			cancel()
		})
		_, err := q.DequeueWait(wctx, db)
		require.ErrorIs(t, err, context.Canceled)
		m.requireReturned(t, db, sub, itemKey)
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// A take whose commit is interrupted (it may or may not apply) while the
// caller's context ends leaves the item in the queue either way.
func TestStagedCancelDuringTake(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, applied := range []bool{false, true} {
			t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
				ctx := context.Background()
				db, sub, q := stagedQueue(t, "cancel3", m.opts(fdbqueue.StagingConfig{})...)
				require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
				before := itemKeys(t, db, sub)
				wctx, cancel := context.WithCancel(ctx)
				fdbqueue.SetStagingHook(q, func(p string) {
					switch p {
					case "taking":
						db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), applied)
					case "failed":
						cancel()
					}
				})
				_, err := q.Dequeue(wctx, db)
				require.ErrorIs(t, err, context.Canceled)
				require.False(t, kv.MaybeCommitted(err), "the cleanup settled the outcome: %v", err)
				if applied {
					m.requireReturned(t, db, sub, before[0])
				} else {
					require.Equal(t, before, itemKeys(t, db, sub), "the take did not apply: the item is where it was")
				}
				require.Empty(t, stagingKeys(t, db, sub))
			})
		}
	})
}

// When the cleanup of a cancelled call returns the item of a take whose
// interrupted commit applied, it also erases the take's journal record: a
// retry with the same operation ID is then a new Dequeue, which takes the
// item from the queue. Replaying the record instead would return x while x
// is also back in the queue, twice in all.
func TestStagedCancelDuringTakeErasesItsRecord(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, sub, q := stagedQueue(t, "cancelrecord", m.opts(fdbqueue.StagingConfig{})...)
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		id := fdbqueue.NewOpID()
		wctx, cancel := context.WithCancel(ctx)
		var once sync.Once
		fdbqueue.SetStagingHook(q, func(p string) {
			switch p {
			case "taking":
				once.Do(func() { db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), true) })
			case "failed":
				cancel()
			}
		})
		_, err := q.Dequeue(wctx, db, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, context.Canceled)
		require.False(t, kv.MaybeCommitted(err), "the cleanup settled the outcome: %v", err)
		require.Len(t, itemKeys(t, db, sub), 1, "the cleanup returned x")

		v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		require.NoError(t, err)
		require.Equal(t, "x", string(v))
		require.Empty(t, itemKeys(t, db, sub), "x was taken once in all")
		require.Empty(t, stagingKeys(t, db, sub))
	})
}

// An interrupted take with the caller still waiting is resolved through
// the journal: the item is returned once.
func TestStagedInterruptedTakeResolved(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, _, q := stagedQueue(t, "interrupted", m.opts(fdbqueue.StagingConfig{})...)
		require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
		db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionTimedOut), true)
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "a", string(v))
		v, err = q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "b", string(v))
	})
}

// A waiter that is fulfilled and never collects (it hung or crashed)
// strands its item only until the claim timeout: Recover puts it back. When
// the waiter comes back it finds its request gone and fails with
// ErrClaimExpired, having taken nothing.
func TestStagedCrashRecovery(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		const timeout = 30 * time.Second
		clock, db, sub, q := clockedQueue(t, "crash", m, timeout)
		plain := stgQueue(t, sub, fdbqueue.WithClock(clock.Now), m.layout())

		hung := make(chan struct{})
		release := make(chan struct{})
		var once sync.Once
		fdbqueue.SetStagingHook(q, func(p string) {
			if p == "armed" {
				once.Do(func() {
					close(hung)
					<-release // hang after registering, before collecting
				})
			}
		})
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		result := make(chan error, 1)
		go func() {
			_, err := q.DequeueWait(wctx, db)
			result <- err
		}()
		recvWithin(t, hung, "the waiter's request filed")

		// The hung waiter's request is served: its item sits in its result.
		require.NoError(t, plain.Enqueue(ctx, db, []byte("stranded")))
		key := itemKeys(t, db, sub)[0]
		n, err := fdbqueue.FulfilStaged(ctx, db, q)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.Empty(t, itemKeys(t, db, sub))

		st, err := q.Recover(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.RecoverStats{}, st, "nothing expired yet")

		clock.Advance(timeout + time.Second)
		st, err = q.Recover(ctx, db)
		require.NoError(t, err)
		require.Equal(t, fdbqueue.RecoverStats{ReturnedItems: 1}, st)
		m.requireReturned(t, db, sub, key)
		v, err := plain.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "stranded", string(v))

		// The slow waiter resumes and finds its request gone: its item
		// went back to the queue during its call, so the call fails (going
		// on with a new request would not be linearizable) and took
		// nothing.
		close(release)
		werr := recvWithin(t, result, "the slow waiter's return")
		require.ErrorIs(t, werr, fdbqueue.ErrClaimExpired)
		require.False(t, kv.MaybeCommitted(werr))
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// Requests whose waiters stopped renewing them hold up nobody: a consumer
// that finds only expired requests takes the head, and Recover drops them.
func TestStagedExpiredRequestsDropped(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		const timeout = 10 * time.Second
		clock, db, sub, q := clockedQueue(t, "expired", m, timeout)

		// Two waiters file requests and hang for good.
		var hangs sync.WaitGroup
		hangs.Add(2)
		release := make(chan struct{})
		var mu sync.Mutex
		seen := 0
		fdbqueue.SetStagingHook(q, func(p string) {
			if p != "armed" {
				return
			}
			mu.Lock()
			seen++
			first := seen <= 2
			mu.Unlock()
			if first {
				hangs.Done()
				<-release
			}
		})
		wctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = q.DequeueWait(wctx, db)
			}()
		}
		waitWithin(t, &hangs, wakeTimeout, "both waiters' requests filed")
		require.Len(t, stagingKeys(t, db, sub), 4, "two requests, each with its marker at its result key")

		clock.Advance(timeout + time.Second)
		// A new consumer is not held up by the stale requests: they are
		// dropped, and it takes the item. In batch mode it takes the head
		// at once and leaves them to Recover; in place mode they hold the
		// first places, so it files a request, and its next step drops
		// them (the first one's item, "fresh", goes to the tail) and takes
		// "fresh".
		require.NoError(t, q.Enqueue(ctx, db, []byte("fresh")))
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "fresh", string(v))

		st, err := q.Recover(ctx, db)
		require.NoError(t, err)
		want := fdbqueue.RecoverStats{DroppedRequests: 2}
		if m.byPlace {
			want = fdbqueue.RecoverStats{}
		}
		require.Equal(t, want, st)
		require.Empty(t, stagingKeys(t, db, sub))
		cancel()
		close(release)
		waitWithin(t, &wg, wakeTimeout, "the cancelled waiters' return")
		require.Empty(t, stagingKeys(t, db, sub))
		requireNoWatches(t, db)
	})
}

// A registration whose commit has an unknown outcome is resolved through
// its marker: applied or not, the waiter gets the item once, and nothing
// is left behind; a cancelled waiter withdraws a request it could not see.
func TestStagedRegistrationUnknownResult(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		for _, applied := range []bool{false, true} {
			for _, cancelAfter := range []bool{false, true} {
				t.Run(fmt.Sprintf("applied=%v/cancel=%v", applied, cancelAfter), func(t *testing.T) {
					ctx := context.Background()
					db, sub, q := stagedQueue(t, "regunknown", m.opts(fdbqueue.StagingConfig{})...)
					wctx, cancel := context.WithCancel(ctx)
					defer cancel()
					var once, enqueue sync.Once
					fdbqueue.SetStagingHook(q, func(p string) {
						switch p {
						case "registering":
							once.Do(func() { db.FailNextCommit(kv.ErrCommitUnknownResult, applied) })
						case "failed":
							if cancelAfter {
								cancel()
							}
						case "armed":
							// The queue is empty: the waiter sleeps on its
							// request. An item arrives.
							enqueue.Do(func() { go func() { _ = q.Enqueue(ctx, db, []byte("x")) }() })
						}
					})
					v, err := q.DequeueWait(wctx, db)
					if cancelAfter {
						require.ErrorIs(t, err, context.Canceled)
						require.Empty(t, stagingKeys(t, db, sub), "the request was withdrawn")
						requireNoWatches(t, db)
						return
					}
					require.NoError(t, err)
					require.Equal(t, "x", string(v))
					for _, p := range q.StagingStats().Phases {
						if p.Phase == "register" {
							require.Equal(t, int64(1), p.Failures, "the registration's commit failed once")
						}
					}
					requireClean(t, db, sub)
				})
			}
		}
	})
}

// A waiter that is alive but stalls past its claim timeout (a GC pause, a
// partition, a suspended VM) finds, when it resumes, that another consumer
// returned the item due to it to the queue. Its call must then fail: going
// on with a new request and returning another item would not be
// linearizable. Here, by place: V takes b past W's expired place, X
// (started after V returned) drops W's request, sending a to the tail, and
// takes it; W, had it gone on, would have returned c. (In batches an
// expired request that was not served holds no item, and TestStagedCrashRecovery
// Recovery covers an expired result.)
func TestStagedStalledWaiterFailsWithClaimExpired(t *testing.T) {
	m := stagingModes[1] // by place
	ctx := context.Background()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := stgDB(t)
	sub := stgSubspace(t, "stalled")
	const timeout = 10 * time.Second
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))
	qW := stgQueue(t, sub, opts...) // W's client
	q := stgQueue(t, sub, opts...)  // everybody else's
	// W stalls for longer than the claim timeout.
	hook, stalled, release := stallOnceAt("armed")
	fdbqueue.SetStagingHook(qW, hook)
	werr := make(chan error, 1)
	go func() {
		_, err := qW.DequeueWait(ctx, db)
		werr <- err
	}()
	recvWithin(t, stalled, "W's request first in the line, asleep on an empty queue")

	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	clock.Advance(timeout + time.Second)
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	first := string(v)
	v, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"a", "b"}, []string{first, string(v)})
	require.NoError(t, q.Enqueue(ctx, db, []byte("c")))

	release()
	err = recvWithin(t, werr, "W's return")
	require.ErrorIs(t, err, fdbqueue.ErrClaimExpired)
	require.False(t, kv.MaybeCommitted(err), "the call took nothing")
	v, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "c", string(v), "c is still there")
	require.Empty(t, stagingKeys(t, db, sub))
	requireNoWatches(t, db)
}

// TestLateTakeOfACancelledDequeue: a staged Dequeue (its one plain
// attempt takes the head) whose take's commit is in flight when its
// context is cancelled returns the context's error, which says that it
// took nothing: its cleanup must fence the take, which lands later (as
// FoundationDB's commit goes on after a cancellation; only before
// commit_unknown_result does the client commit a conflicting dummy
// transaction, commitDummyTransaction in fdbclient/NativeAPI.actor.cpp).
// The take must then conflict, and the item stay in the queue.
func TestLateTakeOfACancelledDequeue(t *testing.T) {
	bg := context.Background()
	type take func(context.Context) ([]byte, error)
	queue := func(opts ...fdbqueue.Option) func(t *testing.T, db kv.Database) (take, error) {
		return func(t *testing.T, db kv.Database) (take, error) {
			q := mustQueue(t, "late-take", append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))...)
			return func(ctx context.Context) ([]byte, error) { return q.Dequeue(ctx, db) }, q.Enqueue(bg, db, []byte("only"))
		}
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T, db kv.Database) (take, error)
	}{
		{"queue, recipe keys", queue()},
		{"queue, versionstamp order", queue(fdbqueue.WithVersionstampOrder())},
		{"priority queue", func(t *testing.T, db kv.Database) (take, error) {
			pq := mustPQ(t, "late-take", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
			return func(ctx context.Context) ([]byte, error) {
				it, err := pq.PopMin(ctx, db)
				return it.Value, err
			}, pq.Push(bg, db, []byte("only"), 7)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			take, err := tc.make(t, db)
			require.NoError(t, err)
			release, err := interruptCommit(t, db, func(ctx context.Context) error {
				_, err := take(ctx) // its commit is held in flight, then cancelled
				return err
			})
			require.ErrorIs(t, err, context.Canceled)
			release() // the take lands now, after the cleanup
			v, err := take(bg)
			require.NoError(t, err, "the item must still be in the queue")
			require.Equal(t, []byte("only"), v)
		})
	}
}

// A take whose commit had an unknown outcome, then a registration whose
// commit had one too: the step after them (resolve) finds the request by
// its marker and commits nothing, with the take still in doubt. It must
// not count as the step that fenced the take (staging_waiter.go, loop:
// only a step that commits clears w.taken); here the registration had
// fenced it already, having read the record key and committed a write
// conflict there, as every step does while a take is in doubt (step), and
// resolve finds a marker only when that registration applied. The call
// returns the item once and leaves nothing behind.
func TestStagedTakeThenRegistrationUnknownResult(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		db, sub, q := stagedQueue(t, "take-reg-unknown", m.opts(fdbqueue.StagingConfig{})...)
		require.NoError(t, q.Enqueue(ctx, db, []byte("a")))
		var take, reg sync.Once
		var points []string
		fdbqueue.SetStagingHook(q, func(p string) {
			switch p {
			case "taking":
				take.Do(func() { db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionTimedOut), false) })
			case "registering":
				reg.Do(func() { db.FailNextCommit(kv.ErrCommitUnknownResult, true) })
			}
			if !strings.HasPrefix(p, "commit ") {
				points = append(points, p)
			}
		})
		wctx, cancel := context.WithTimeout(ctx, wakeTimeout) // a failure detector only
		defer cancel()
		v, err := q.DequeueWait(wctx, db)
		require.NoError(t, err)
		require.Equal(t, "a", string(v))
		require.Equal(t, []string{"taking", "failed", "registering", "failed"}, points[:4],
			"the first take and the registration failed, one after the other")
		require.NotContains(t, points[4:], "registering", "the registration applied: resolve found its request")
		requireClean(t, db, sub)
	})
}
