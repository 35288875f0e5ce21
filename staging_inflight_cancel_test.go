package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// The caller's context ends exactly while one step of a staged call has
// its commit in flight, for every kind of step, in both serving modes of
// a Queue and on both sides of a PriorityQueue. The commit then either
// lands late, after the call's cleanup committed (FoundationDB's commit
// request goes on after a cancellation: RYWImpl::commit returns as soon
// as resetPromise is set, fdbclient/ReadYourWrites.actor.cpp; only
// commit_unknown_result is preceded by a fencing commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp), applies before the cleanup reads, or
// never applies. In every case the call returns ctx's error having taken
// nothing (its cleanup settled the commit's outcome), a call under the
// same OpID is then a new operation, every item enqueued is received
// exactly once across all consumers, and no request or result is left in
// the line.

// stagedTarget is a staged Queue or PriorityQueue side, seen through
// string items: handles 0 (the call under test), 1 (another consumer)
// and 2 (producer and drainer) share one subspace.
type stagedTarget struct {
	name    string
	db      *memdb.DB
	sub     fdbqueue.Subspace
	enqueue func(t *testing.T, vals ...string)
	// pop runs a staged Dequeue (wait false) or DequeueWait on handle h
	// (for a Queue, the item's Priority is 0).
	pop     func(ctx context.Context, h int, wait bool, opts ...fdbqueue.OpOption) (fdbqueue.Item, error)
	setHook func(h int, fn func(string))
	fulfil  func(t *testing.T) int
	// recover runs Recover on the draining handle.
	recover func(t *testing.T) fdbqueue.RecoverStats
	sent    []string // the items enqueued so far, in order
	// h0, when set, is the database handle 0 runs on (a timeoutDB, a
	// killDB).
	h0 kv.Database
	// clock is the handles' clock (stagedClockedTargets; nil: time.Now).
	clock *memdb.ManualClock
	// recordRange is the range of the journal record of operation id.
	recordRange func(id fdbqueue.OpID) kv.KeyRange
	// byPlace: a Queue served by place, whose cleanup puts an item back
	// at the tail. reverse: a PriorityQueue's PopMax side, which takes
	// the last item first.
	byPlace, reverse bool
	// prio is the priority each value was pushed with (a PriorityQueue;
	// nil for a Queue).
	prio map[string]int64
}

// take is pop seen through the item's value.
func (x *stagedTarget) take(ctx context.Context, h int, wait bool, opts ...fdbqueue.OpOption) (string, error) {
	it, err := x.pop(ctx, h, wait, opts...)
	return string(it.Value), err
}

// on returns the database handle h runs on.
func (x *stagedTarget) on(h int, db kv.Database) kv.Database {
	if h == 0 && x.h0 != nil {
		return x.h0
	}
	return db
}

func stagedTargets(t *testing.T, name string) []func(t *testing.T) *stagedTarget {
	return stagedTargetsWith(t, name, fdbqueue.StagingConfig{}, false)
}

// stagedClockedTargets is stagedTargets with the claim timeout given and a
// manual clock (stagedTarget.clock) that starts at the time of day, so
// that IDs made with NewOpID stay within the journal retention.
func stagedClockedTargets(t *testing.T, name string, claim time.Duration) []func(t *testing.T) *stagedTarget {
	return stagedTargetsWith(t, name, fdbqueue.StagingConfig{ClaimTimeout: claim}, true)
}

// stagedTargetsWith returns makers of the four targets (a Queue staged
// in batches and by place, both PriorityQueue sides) staged with cfg and
// made with the options more; with clocked, on a manual clock of their
// own.
func stagedTargetsWith(t *testing.T, name string, cfg fdbqueue.StagingConfig, clocked bool, more ...fdbqueue.Option) []func(t *testing.T) *stagedTarget {
	var out []func(t *testing.T) *stagedTarget
	// clockOpts returns the options of a target's handles, and its clock.
	clockOpts := func() ([]fdbqueue.Option, *memdb.ManualClock) {
		if !clocked {
			return more, nil
		}
		c := memdb.NewManualClock(time.Now())
		return append([]fdbqueue.Option{fdbqueue.WithClock(c.Now)}, more...), c
	}
	for _, m := range stagingModes {
		out = append(out, func(t *testing.T) *stagedTarget {
			var x *stagedTarget
			db := stgDB(t)
			sub := stgSubspace(t, name)
			extra, clock := clockOpts()
			qs := make([]*fdbqueue.Queue, 3)
			for i := range qs {
				qs[i] = stgQueue(t, sub, append(m.opts(cfg), extra...)...)
			}
			x = &stagedTarget{
				name: "queue " + m.name, db: db, sub: sub, clock: clock, byPlace: m.byPlace,
				recordRange: func(id fdbqueue.OpID) kv.KeyRange { return fdbqueue.JournalRecordRange(qs[0], id) },
				enqueue: func(t *testing.T, vals ...string) {
					x.sent = append(x.sent, vals...)
					var b [][]byte
					for _, v := range vals {
						b = append(b, []byte(v))
					}
					require.NoError(t, qs[2].EnqueueBatch(context.Background(), db, b))
				},
				pop: func(ctx context.Context, h int, wait bool, opts ...fdbqueue.OpOption) (fdbqueue.Item, error) {
					var v []byte
					var err error
					if wait {
						v, err = qs[h].DequeueWait(ctx, x.on(h, db), opts...)
					} else {
						v, err = qs[h].Dequeue(ctx, x.on(h, db), opts...)
					}
					return fdbqueue.Item{Value: v}, err
				},
				setHook: func(h int, fn func(string)) { fdbqueue.SetStagingHook(qs[h], fn) },
				fulfil: func(t *testing.T) int {
					n, err := fdbqueue.FulfilStaged(context.Background(), db, qs[2])
					require.NoError(t, err)
					return n
				},
				recover: func(t *testing.T) fdbqueue.RecoverStats {
					st, err := qs[2].Recover(context.Background(), db)
					require.NoError(t, err)
					return st
				},
			}
			return x
		})
	}
	for _, max := range []bool{false, true} {
		out = append(out, func(t *testing.T) *stagedTarget {
			var x *stagedTarget
			db := stgDB(t)
			sub := stgSubspace(t, name)
			extra, clock := clockOpts()
			pqs := make([]*fdbqueue.PriorityQueue, 3)
			for i := range pqs {
				pq, err := fdbqueue.NewPriorityQueue(sub, append([]fdbqueue.Option{fdbqueue.WithStaging(cfg)}, extra...)...)
				require.NoError(t, err)
				pqs[i] = pq
			}
			prio := int64(0)
			x = &stagedTarget{
				name: map[bool]string{false: "pq min", true: "pq max"}[max], db: db, sub: sub, clock: clock,
				reverse: max, prio: map[string]int64{},
				recordRange: func(id fdbqueue.OpID) kv.KeyRange { return fdbqueue.JournalRecordRange(pqs[0], id) },
				enqueue: func(t *testing.T, vals ...string) {
					x.sent = append(x.sent, vals...)
					for _, v := range vals {
						prio++
						x.prio[v] = prio
						require.NoError(t, pqs[2].Push(context.Background(), db, []byte(v), prio))
					}
				},
				pop: func(ctx context.Context, h int, wait bool, opts ...fdbqueue.OpOption) (fdbqueue.Item, error) {
					var it fdbqueue.Item
					var err error
					switch {
					case wait && max:
						it, err = pqs[h].PopMaxWait(ctx, x.on(h, db), opts...)
					case wait:
						it, err = pqs[h].PopMinWait(ctx, x.on(h, db), opts...)
					case max:
						it, err = pqs[h].PopMax(ctx, x.on(h, db), opts...)
					default:
						it, err = pqs[h].PopMin(ctx, x.on(h, db), opts...)
					}
					return it, err
				},
				setHook: func(h int, fn func(string)) { fdbqueue.SetPQStagingHook(pqs[h], fn) },
				fulfil: func(t *testing.T) int {
					n, err := fdbqueue.FulfilStagedPQ(context.Background(), db, pqs[2], max)
					require.NoError(t, err)
					return n
				},
				recover: func(t *testing.T) fdbqueue.RecoverStats {
					st, err := pqs[2].Recover(context.Background(), db)
					require.NoError(t, err)
					return st
				},
			}
			return x
		})
	}
	return out
}

// inflightStep is how a test brings the call under test to one step.
type inflightStep struct {
	name  string // the row's name ("": its phase)
	phase string // the step's phase: its hook point is "commit " + phase
	after string // the step is the first of its phase after this point ("": the first)
	wait  bool   // the Wait form
	// setup runs before the call; before runs in the call's hook at every
	// point other than the step's commit (once per point is up to it)
	// until the step's commit is reached.
	setup  func(t *testing.T, x *stagedTarget)
	before func(t *testing.T, x *stagedTarget, p string)
	// others, if set, starts consumers of handle 1 before the call and
	// returns finish, which, once every item is enqueued, lets them end
	// and adds what they received to got.
	others func(t *testing.T, x *stagedTarget) (finish func(t *testing.T, got map[string]int))
	// check, if set, runs once the call returned and the step's commit
	// landed, or not, as landing says, before the rest of the items is
	// enqueued: what the step did, or did not, leave.
	check func(t *testing.T, x *stagedTarget, landing string)
	// untimed leaves the step out of the timeout matrix.
	untimed bool
}

// otherAtRegistration starts a DequeueWait of handle 1 that files its
// request and stops there, then enqueues a.
func otherAtRegistration(t *testing.T, x *stagedTarget) func(t *testing.T, got map[string]int) {
	hook, registered, resume := stallOnceAt("registered")
	t.Cleanup(resume)
	x.setHook(1, hook)
	finish := startOthers(t, x, 1, registered)
	x.enqueue(t, "a")
	return func(t *testing.T, got map[string]int) {
		resume()
		finish(t, got)
	}
}

// startOthers starts n DequeueWaits of handle 1, one after the other: the
// next starts once the one before signalled on ready (its request is
// filed). finish waits for their items and adds them to got.
func startOthers(t *testing.T, x *stagedTarget, n int, ready <-chan struct{}) (finish func(t *testing.T, got map[string]int)) {
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout) // a failure bound only
	t.Cleanup(cancel)
	type result struct {
		v   string
		err error
	}
	results := make(chan result, n)
	for i := range n {
		go func() {
			v, err := x.take(ctx, 1, true)
			results <- result{v, err}
		}()
		recvWithin(t, ready, fmt.Sprintf("the request of consumer %d of handle 1", i))
	}
	return func(t *testing.T, got map[string]int) {
		t.Helper()
		for range n {
			r := recvWithin(t, results, "a consumer of handle 1")
			require.NoError(t, r.err, "a consumer of handle 1")
			got[r.v]++
		}
	}
}

var inflightSteps = []inflightStep{
	{phase: "fast", setup: func(t *testing.T, x *stagedTarget) { x.enqueue(t, "a", "b", "c") }},
	{phase: "register", wait: true},
	{phase: "take", wait: true, before: func(t *testing.T, x *stagedTarget, p string) {
		if p == "registered" {
			x.enqueue(t, "a", "b") // reaches the request before its next step
		}
	}},
	// The first fulfil step finds the queue empty and only arms watches
	// (a read-only commit); the one after the waiter woke serves.
	{phase: "fulfil", after: "woke", wait: true, before: func(t *testing.T, x *stagedTarget, p string) {
		if p == "armed" {
			x.enqueue(t, "a", "b") // wakes the waiter, the oldest: it serves
		}
	}},
	{phase: "collect", wait: true, before: func(t *testing.T, x *stagedTarget, p string) {
		if p == "armed" {
			x.enqueue(t, "a", "b")
			require.Equal(t, 1, x.fulfil(t), "the waiter's request is served")
		}
	}},
	// Handle 1's DequeueWait files a request and stops; a arrives; the
	// plain Dequeue under test files a request behind it, hands a to it
	// and, finding nothing for itself, withdraws, in one commit.
	{phase: "withdraw", others: otherAtRegistration, untimed: true},
}

func TestStagedContextEndsWhileAStepCommits(t *testing.T) {
	runContextEndsMatrix(t, stagedTargets(t, "inflight"), inflightSteps)
}

// runContextEndsMatrix runs contextEndsWhileAStepCommits for every target,
// step, landing and choice of ID.
func runContextEndsMatrix(t *testing.T, targets []func(t *testing.T) *stagedTarget, steps []inflightStep) {
	for _, mk := range targets {
		for _, step := range steps {
			for _, landing := range []string{"late", "applied", "never"} {
				for _, userID := range []bool{false, true} {
					x := mk(t)
					name := fmt.Sprintf("%s/%s/%s/opid=%v", x.name, step.rowName(), landing, userID)
					t.Run(name, func(t *testing.T) { contextEndsWhileAStepCommits(t, x, step, landing, userID) })
				}
			}
		}
	}
}

func (s inflightStep) rowName() string {
	if s.name != "" {
		return s.name
	}
	return s.phase
}

func contextEndsWhileAStepCommits(t *testing.T, x *stagedTarget, step inflightStep, landing string, userID bool) {
	bg := context.Background()
	want := []string{"a", "b", "c"}
	got := map[string]int{}
	if step.setup != nil {
		step.setup(t, x)
	}
	var finish func(t *testing.T, got map[string]int)
	if step.others != nil {
		finish = step.others(t, x)
	}

	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	var once sync.Once
	held := make(chan struct{})
	var release func()
	injected := false
	reached := step.after == ""
	x.setHook(0, func(p string) {
		if p == step.after {
			reached = true
		}
		if p == "commit "+step.phase && reached {
			once.Do(func() {
				switch landing {
				case "late":
					var h <-chan struct{}
					h, release = x.db.HoldNextCommitLate()
					go func() { <-h; close(held) }()
				default:
					x.db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionCancelled), landing == "applied")
					injected = true
				}
			})
			return
		}
		if p == "failed" && injected {
			cancel()
			return
		}
		if step.before != nil && !injected && release == nil {
			step.before(t, x, p)
		}
	})
	var opts []fdbqueue.OpOption
	id := fdbqueue.NewOpID()
	if userID {
		opts = append(opts, fdbqueue.WithOpID(id))
	}
	type result struct {
		v   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := x.take(ctx, 0, step.wait, opts...)
		done <- result{v, err}
	}()
	if landing == "late" {
		recvWithin(t, held, "the step's commit in flight")
		cancel()
	}
	r := recvWithin(t, done, "the call's end")
	require.ErrorIs(t, r.err, context.Canceled, "the step's commit was cut short by ctx (%v)", r.err)
	require.False(t, kv.MaybeCommitted(r.err), "the cleanup settled the step's outcome: %v", r.err)
	x.setHook(0, nil)
	if release != nil {
		release() // the step's commit lands now, after the cleanup
	}
	x.db.AwaitLateLandings()
	if step.check != nil {
		step.check(t, x, landing)
	}

	// The other consumers end, then a call under the same ID is a new
	// operation: the first one took nothing.
	x.enqueue(t, want[len(x.sent):]...)
	if finish != nil {
		finish(t, got)
	}
	if userID {
		v, err := x.take(bg, 0, false, fdbqueue.WithOpID(id))
		require.NoError(t, err)
		got[v]++
	}
	dctx, dcancel := context.WithTimeout(bg, wakeTimeout)
	defer dcancel()
	x.drainAndCheck(t, dctx, got, want)
}

// TestStagedStepTimesOutWhileItsCommitIsInFlight: as above, but the
// step's transaction times out (FoundationDB's transaction_timeout,
// timeoutDB) with the caller's context alive: the call goes on, and the
// timed-out commit lands late, either just before the next step's commit
// (after its read version) or after the call returned. The call returns
// one item, and every item is received exactly once.
func TestStagedStepTimesOutWhileItsCommitIsInFlight(t *testing.T) {
	runTimeoutMatrix(t, stagedTargets(t, "timedout"), inflightSteps)
}

// runTimeoutMatrix runs stepTimesOut for every target, timed step and
// landing.
func runTimeoutMatrix(t *testing.T, targets []func(t *testing.T) *stagedTarget, steps []inflightStep) {
	for _, mk := range targets {
		for _, step := range steps {
			if step.untimed {
				continue // a plain Dequeue: its retry returns ErrEmpty or an item, tested above
			}
			for _, when := range []string{"next commit", "after the call"} {
				x := mk(t)
				t.Run(fmt.Sprintf("%s/%s/%s", x.name, step.rowName(), when), func(t *testing.T) { stepTimesOut(t, x, step, when) })
			}
		}
	}
}

func stepTimesOut(t *testing.T, x *stagedTarget, step inflightStep, when string) {
	bg := context.Background()
	want := []string{"a", "b", "c"}
	tdb := &timeoutDB{Database: x.db}
	x.h0 = tdb
	if step.setup != nil {
		step.setup(t, x)
	}
	var finish func(t *testing.T, got map[string]int)
	if step.others != nil {
		finish = step.others(t, x)
	}
	var once sync.Once
	held := make(chan struct{})
	var release func()
	reached, failed := step.after == "", false
	x.setHook(0, func(p string) {
		if p == step.after {
			reached = true
		}
		switch {
		case p == "commit "+step.phase && reached && release == nil:
			once.Do(func() {
				var h <-chan struct{}
				h, release = x.db.HoldNextCommitLate()
				go func() { <-h; close(held) }()
			})
		case p == "failed" && release != nil:
			failed = true
		case len(p) > 7 && p[:7] == "commit " && failed && when == "next commit":
			failed = false
			release() // lands after this step's read version, before its commit
		case release == nil && step.before != nil:
			step.before(t, x, p)
		}
	})
	ctx, cancel := context.WithTimeout(bg, wakeTimeout) // a failure bound only
	defer cancel()
	type result struct {
		v   string
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := x.take(ctx, 0, true)
		done <- result{v, err}
	}()
	recvWithin(t, held, "the step's commit in flight")
	tdb.expire(t)
	x.enqueue(t, want[len(x.sent):]...)
	r := recvWithin(t, done, "the call's end")
	require.NoError(t, r.err)
	got := map[string]int{r.v: 1}
	x.setHook(0, nil)
	release()
	x.db.AwaitLateLandings()
	if finish != nil {
		finish(t, got)
	}
	x.drainAndCheck(t, bg, got, want)
}

// drainAndCheck takes what is left with the draining handle (2) into got,
// then checks that every item of want came out exactly once and that the
// line is empty, with no watch left.
func (x *stagedTarget) drainAndCheck(t *testing.T, ctx context.Context, got map[string]int, want []string) {
	t.Helper()
	for {
		v, err := x.take(ctx, 2, false)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got[v]++
	}
	requireExactlyOnce(t, got, want)
	require.Empty(t, stagingKeys(t, x.db, x.sub), "nothing left in the line")
	requireNoWatches(t, x.db)
}

// queued returns the items sent, all still in x, in the order x's side
// pops them: as sent (a PriorityQueue pushed them with rising
// priorities), or the other way round for PopMax.
func (x *stagedTarget) queued() []string {
	out := slices.Clone(x.sent)
	if x.reverse {
		slices.Reverse(out)
	}
	return out
}

// requireBack checks where x's items are once a call on x that gave up
// had its cleanup settle what it did (before: the item keys before the
// call): each at its key (a PriorityQueue's holds its priority), the
// first x pops included if the call took it (the cleanup put it back
// there), except by place with moved, when the cleanup moved the first to
// the tail under a new key (as it puts back an item taken, or leaves a
// request's place, by place). It then checks that nothing is left staged
// and that x pops every item once, in order (requireDrained).
func (x *stagedTarget) requireBack(t *testing.T, before [][]byte, moved bool) {
	t.Helper()
	keys := itemKeys(t, x.db, x.sub)
	want := x.queued()
	if x.byPlace && moved {
		require.Len(t, keys, len(before), "the item is back in the queue")
		require.Equal(t, before[1:], keys[:len(keys)-1], "the other items did not move")
		require.NotEqual(t, before[0], keys[len(keys)-1], "place mode: the item went to the tail, under a new key")
		want = append(want[1:], want[0])
	} else {
		require.Equal(t, before, keys, "every item is at its original key")
	}
	require.Empty(t, stagingKeys(t, x.db, x.sub), "nothing left staged")
	x.requireDrained(t, want)
}

// requireDrained pops x empty with handle 2 and checks that the items
// come out in the order want, once each, a PriorityQueue's with the
// priority they were pushed with, and that nothing is left behind
// (requireClean).
func (x *stagedTarget) requireDrained(t *testing.T, want []string) {
	t.Helper()
	var got []string
	for {
		it, err := x.pop(context.Background(), 2, false)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(it.Value))
		if x.prio != nil {
			require.Equal(t, x.prio[string(it.Value)], it.Priority, "%q pops with the priority it was pushed with", it.Value)
		}
	}
	require.Equal(t, want, got, "the items popped, in order")
	requireClean(t, x.db, x.sub)
}
