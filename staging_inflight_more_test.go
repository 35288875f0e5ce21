package fdbqueue_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// The in-flight matrices of staging_inflight_cancel_test.go, for the
// steps they leave out:
//
//   - a renewal: a waiter past its renewal time pushes its request's
//     deadline (a helper, whose step then serves nothing, in phase
//     fulfil; a waiter behind the two oldest, in phase wait);
//   - a fulfilment that serves another waiter's request and not the
//     caller's own (the one item goes to the older request);
//   - the cleanup itself (abandon, staging_withdraw.go): its commit is
//     interrupted in flight by the CleanupTimeout, and a later step or
//     cleanup of someone else runs before it lands.
//
// The engine rules they rely on: an interrupted commit (the caller's
// context ended, or the transaction timed out) is not fenced and can land
// after transactions that began once its client gave up (RYWImpl::commit
// returns as soon as resetPromise is set, fdbclient/ReadYourWrites.actor.cpp;
// only before reporting commit_unknown_result does the client commit a
// conflicting dummy transaction, commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp); and a commit that lands late is still
// resolved against every write committed after its read version
// (ConflictBatch::addTransaction and checkReadConflictRanges,
// fdbserver/SkipList.cpp), so the state it read protects it only where it
// read with a normal read or a read conflict key.

// inflightClaim is the claim timeout of the targets below, on their manual
// clock.
const inflightClaim = time.Minute

// passRenewal advances the clock past the renewal time (a third of the
// claim timeout) when the waiter is about to sleep: its sleep ends at
// once, and its next step renews its request.
func passRenewal(t *testing.T, x *stagedTarget, p string) {
	if p == "armed" {
		x.clock.Advance(inflightClaim/3 + time.Microsecond)
	}
}

var renewServeSteps = []inflightStep{
	// The only waiter, a helper: the step after its sleep finds nothing to
	// serve and only renews (a write: HoldNextCommitLate, which holds only
	// commits that write, catches it).
	{name: "renew helper", phase: "fulfil", after: "armed", wait: true, before: passRenewal},
	// Behind the two oldest waiters, which sleep on handle 1: it renews in
	// its wait step (and leaves the watch on the request ahead to
	// armLater).
	{name: "renew behind two", phase: "wait", after: "armed", wait: true, before: passRenewal,
		others: waitersAhead(2, false)},
	// The second waiter, a helper, woken by the item a: it hands a to the
	// older request (handle 1's, whose waiter stopped before sleeping) and
	// finds nothing for its own, in one commit. By place too: a woken
	// helper serves the line in a batch.
	{name: "serve other", phase: "fulfil", after: "woke", wait: true, others: waitersAhead(1, true),
		before: func(t *testing.T, x *stagedTarget, p string) {
			if p == "armed" {
				x.enqueue(t, "a")
			}
		},
		check: func(t *testing.T, x *stagedTarget, landing string) {
			switch landing {
			case "applied": // before the cleanup, which left the other request's result alone
				require.Empty(t, itemKeys(t, x.db, x.sub), "a went to the other request")
			case "never":
				require.Len(t, itemKeys(t, x.db, x.sub), 1, "a is still in the queue")
			}
			// Landing late, after the cleanup, either is right: the step
			// read the caller's request, which the cleanup cleared, and
			// fails; had it not, the other request would have a.
		}},
	// As above with a and b: it hands a to the older request and takes b
	// for itself, in one commit. Applied, the cleanup finds the take's
	// journal record and puts b back, and a stays the other request's.
	{name: "serve other and own", phase: "fulfil", after: "woke", wait: true, others: waitersAhead(1, true),
		before: func(t *testing.T, x *stagedTarget, p string) {
			if p == "armed" {
				x.enqueue(t, "a", "b")
			}
		},
		check: func(t *testing.T, x *stagedTarget, landing string) {
			switch landing {
			case "applied":
				require.Len(t, itemKeys(t, x.db, x.sub), 1, "b is back, a went to the other request")
			case "never":
				require.Len(t, itemKeys(t, x.db, x.sub), 2, "a and b are still in the queue")
			}
		}},
}

// waitersAhead returns an inflightStep.others that starts n DequeueWaits of
// handle 1, each filed behind the one before, and returns once each is
// about to sleep; with stall they stop there until they are let finish.
func waitersAhead(n int, stall bool) func(t *testing.T, x *stagedTarget) func(t *testing.T, got map[string]int) {
	return func(t *testing.T, x *stagedTarget) func(t *testing.T, got map[string]int) {
		armed := make(chan struct{}, n)
		resume := make(chan struct{})
		var once sync.Once
		let := func() { once.Do(func() { close(resume) }) }
		t.Cleanup(let)
		var seen atomic.Int32
		x.setHook(1, func(p string) {
			if p == "armed" && seen.Add(1) <= int32(n) {
				armed <- struct{}{}
				if stall {
					<-resume
				}
			}
		})
		finish := startOthers(t, x, n, armed)
		return func(t *testing.T, got map[string]int) {
			let()
			finish(t, got)
		}
	}
}

// TestStagedContextEndsWhileARenewalOrServingCommits: the caller's context
// ends while a renewal, or a fulfilment serving another request, has its
// commit in flight; the commit lands late, applies before the cleanup, or
// never applies. The call returns ctx's error having taken nothing, the
// other waiters get their items, every item is received exactly once and
// the line ends empty (contextEndsWhileAStepCommits).
func TestStagedContextEndsWhileARenewalOrServingCommits(t *testing.T) {
	runContextEndsMatrix(t, stagedClockedTargets(t, "inflight-renew", inflightClaim), renewServeSteps)
}

// TestStagedRenewalOrServingTimesOutInFlight: as above, but the step's
// transaction times out with the caller's context alive, and its commit
// lands just before the next step's commit or after the call: the call
// goes on and returns one item (stepTimesOut).
func TestStagedRenewalOrServingTimesOutInFlight(t *testing.T) {
	runTimeoutMatrix(t, stagedClockedTargets(t, "timedout-renew", inflightClaim), renewServeSteps)
}

// lateCleanup is one row of TestStagedCleanupLandsLate: how the call gets
// to its cleanup, and what runs while the cleanup's commit is in flight.
type lateCleanup struct {
	name  string
	setup func(t *testing.T, x *stagedTarget) // before the call
	// hook is the call's staging hook: it calls c.end to end the call's
	// context, the cleanup's commit to be held in flight.
	hook func(t *testing.T, x *stagedTarget, c *cutCall, p string)
	// meanwhile runs once the call returned, its cleanup's commit still in
	// flight; id is the call's ID. It adds the items it takes to got.
	meanwhile func(t *testing.T, x *stagedTarget, id fdbqueue.OpID, got map[string]int)
}

// cutCall is the call under test of TestStagedCleanupLandsLate.
type cutCall struct {
	db     *memdb.DB
	cancel context.CancelFunc
	once   sync.Once
	holds  chan cleanupHold // the cleanup's commit, held
	take   func()           // lets a held take land (the settled row)
}

type cleanupHold struct {
	held    <-chan struct{}
	release func()
}

// end holds the next commit that writes, the cleanup's, in flight, and
// ends the call's context.
func (c *cutCall) end() {
	c.once.Do(func() {
		held, release := c.db.HoldNextCommitLate()
		c.holds <- cleanupHold{held, release}
	})
	c.cancel()
}

var lateCleanups = []lateCleanup{
	// The cleanup withdraws a waiting request; a fulfilment serves that
	// request (still in the line) before it lands. It read the request's
	// result key (the marker), which the fulfilment wrote: it fails, and
	// the result's item goes back after the claim timeout. Landing, it
	// would clear the result and its item with it.
	{name: "served meanwhile",
		hook: func(t *testing.T, x *stagedTarget, c *cutCall, p string) {
			if p == "armed" {
				c.end()
			}
		},
		meanwhile: func(t *testing.T, x *stagedTarget, _ fdbqueue.OpID, _ map[string]int) {
			x.enqueue(t, "a")
			require.Equal(t, 1, x.fulfil(t), "the request, still in the line, is served")
		}},
	// The call was served a, and its context ends before it collects:
	// the cleanup puts a back. Before it lands, the claim timeout passes,
	// Recover puts a back from the expired result, and a consumer takes
	// it. The cleanup read the result key, which Recover cleared: it
	// fails. Landing, it would put a back a second time.
	{name: "reclaimed meanwhile",
		hook: func(t *testing.T, x *stagedTarget, c *cutCall, p string) {
			switch {
			case p == "armed" && len(x.sent) == 0:
				x.enqueue(t, "a")
				require.Equal(t, 1, x.fulfil(t), "the call's request is served")
			case p == "woke":
				c.end()
			}
		},
		meanwhile: func(t *testing.T, x *stagedTarget, _ fdbqueue.OpID, got map[string]int) {
			x.clock.Advance(inflightClaim + time.Microsecond)
			require.Equal(t, 1, x.recover(t).ReturnedItems, "the expired result's item")
			takeOne(t, x, "a", got)
		}},
	// The call's request is due a (the oldest request: by place its place,
	// in batches the head) when its context ends: the cleanup withdraws it
	// (by place moving a to the tail). Before it lands, the claim timeout
	// passes, Recover drops the request (by place moving a to the tail)
	// and a consumer takes a. The cleanup read the result key (and, by
	// place, a's key), which Recover cleared: it fails. Landing by place,
	// it would write a at the tail a second time.
	{name: "expired meanwhile",
		hook: func(t *testing.T, x *stagedTarget, c *cutCall, p string) {
			if p == "registered" {
				x.enqueue(t, "a")
				c.end()
			}
		},
		meanwhile: func(t *testing.T, x *stagedTarget, _ fdbqueue.OpID, got map[string]int) {
			x.clock.Advance(inflightClaim + time.Microsecond)
			require.Equal(t, 1, x.recover(t).DroppedRequests, "the expired request")
			takeOne(t, x, "a", got)
		}},
	// The call's one plain attempt, the take of a, is cut short by the
	// context in flight and lands: the cleanup finds the journal record,
	// puts a back and erases the record. Before it lands, the caller
	// settles under the ID: the record is still there, and the settling
	// call returns a, with a write conflict on the record key, which the
	// cleanup read: it fails. Landing, it would put a back.
	{name: "settled meanwhile",
		setup: func(t *testing.T, x *stagedTarget) { x.enqueue(t, "a") },
		hook: func(t *testing.T, x *stagedTarget, c *cutCall, p string) {
			switch p {
			case "commit fast":
				held, release := x.db.HoldNextCommitLate()
				c.take = release
				go func() {
					<-held
					c.cancel()
				}()
			case "failed":
				c.take() // it lands: a is in the call's journal record
				c.end()
			}
		},
		meanwhile: func(t *testing.T, x *stagedTarget, id fdbqueue.OpID, got map[string]int) {
			v, err := x.take(context.Background(), 0, false, fdbqueue.WithOpID(id))
			require.NoError(t, err)
			require.Equal(t, "a", v, "the settling call finds the take's record")
			got[v]++
		}},
}

// takeOne takes an item with the draining handle, which must be want,
// into got.
func takeOne(t *testing.T, x *stagedTarget, want string, got map[string]int) {
	t.Helper()
	v, err := x.take(context.Background(), 2, false)
	require.NoError(t, err)
	require.Equal(t, want, v)
	got[v]++
}

// TestStagedCleanupLandsLate: a staged call's context ends, and the
// cleanup that withdraws its request (or returns its item) is cut short by
// its CleanupTimeout while its commit is in flight (killDB). The call
// returns an error that matches ctx's and satisfies kv.MaybeCommitted, as
// StagingConfig.CleanupTimeout says. Someone else's step or cleanup then
// runs, and only after it the cleanup's commit lands. It must not undo
// what ran meanwhile: once the claim timeout passed and Recover ran, every
// item is received exactly once and the line is empty.
func TestStagedCleanupLandsLate(t *testing.T) {
	for _, mk := range stagedClockedTargets(t, "cleanup-late", inflightClaim) {
		for _, row := range lateCleanups {
			x := mk(t)
			t.Run(x.name+"/"+row.name, func(t *testing.T) { cleanupLandsLate(t, x, row) })
		}
	}
}

func cleanupLandsLate(t *testing.T, x *stagedTarget, row lateCleanup) {
	bg := context.Background()
	want := []string{"a", "b", "c"}
	got := map[string]int{}
	if row.setup != nil {
		row.setup(t, x)
	}
	kdb := &killDB{Database: x.db, kill: make(chan struct{})}
	x.h0 = kdb
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	c := &cutCall{db: x.db, cancel: cancel, holds: make(chan cleanupHold, 1)}
	x.setHook(0, func(p string) { row.hook(t, x, c, p) })
	id := fdbqueue.NewOpID()
	done := make(chan error, 1)
	go func() {
		_, err := x.take(ctx, 0, true, fdbqueue.WithOpID(id))
		done <- err
	}()
	h := recvWithin(t, c.holds, "the call's context ended")
	recvWithin(t, h.held, "the cleanup's commit in flight")
	close(kdb.kill) // the cleanup's timeout: its commit goes on
	err := recvWithin(t, done, "the call's end")
	require.ErrorIs(t, err, context.Canceled)
	require.True(t, kv.MaybeCommitted(err), "the cleanup's outcome is unknown: %v", err)
	x.setHook(0, nil)
	x.h0 = nil

	row.meanwhile(t, x, id, got)
	h.release() // the cleanup lands now
	x.db.AwaitLateLandings()

	// What no waiter claims goes back once the claim timeout passed.
	x.clock.Advance(inflightClaim + time.Microsecond)
	x.recover(t)
	x.enqueue(t, want[len(x.sent):]...)
	x.drainAndCheck(t, bg, got, want)
}

// TestStagedFailedRenewalIsRetried: a waiter's renewal step fails, its
// commit timed out in flight and never landing, or conflicting; the step
// after it must renew again. Twice in a row here, a third of the claim
// timeout apart, as a waiter renews: had the waiter counted a renewal
// that did not commit, its request would still carry the registration's
// deadline when the clock passes it, and anyone's Recover (or step) would
// drop it while the caller waits, its context alive, and the call would
// fail with ErrClaimExpired. It keeps the request and returns a.
func TestStagedFailedRenewalIsRetried(t *testing.T) {
	for _, fail := range []struct {
		name string
		err  error
	}{
		{"timed out in flight", kv.CommitInterrupted(kv.ErrTransactionTimedOut)},
		{"conflict", kv.ErrNotCommitted},
	} {
		for _, mk := range stagedClockedTargets(t, "renew-failed", inflightClaim) {
			x := mk(t)
			t.Run(x.name+"/"+fail.name, func(t *testing.T) { failedRenewalIsRetried(t, x, fail.err) })
		}
	}
}

func failedRenewalIsRetried(t *testing.T, x *stagedTarget, fail error) {
	bg := context.Background()
	var arms int
	due := false // a renewal is due: fail the next commit
	var dropped int
	x.setHook(0, func(p string) {
		switch {
		case p == "armed" && arms < 3:
			arms++
			x.clock.Advance(inflightClaim/3 + time.Microsecond) // a renewal is due
			due = arms < 3
			if arms == 3 {
				// Past the registration's deadline (a claim timeout and
				// 3µs later), and not yet past the renewed one.
				dropped = x.recover(t).DroppedRequests
			}
		case p == "armed" && len(x.sent) == 0:
			x.enqueue(t, "a")
		case due && strings.HasPrefix(p, "commit "):
			due = false
			x.db.FailNextCommit(fail, false)
		}
	})
	ctx, cancel := context.WithTimeout(bg, wakeTimeout) // a failure bound only
	defer cancel()
	v, err := x.take(ctx, 0, true)
	require.NoError(t, err, "the waiter renewed its request")
	require.Equal(t, "a", v)
	require.Zero(t, dropped, "Recover dropped the live waiter's request")
	require.Equal(t, 3, arms)
	x.setHook(0, nil)
	x.drainAndCheck(t, bg, map[string]int{v: 1}, []string{"a"})
}
