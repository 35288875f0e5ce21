package fdbqueue_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Served in batches, the steps that write never arm a watch on a key they
// did not write: FoundationDB's watch reads its key with a normal read
// (RYWImpl::watch in fdbclient/ReadYourWrites.actor.cpp calls
// readWithConflictRange with Snapshot::False), so such a step would fail
// with not_committed whenever the watched key changed before its commit.
// The watch is armed after the commit in a read-only transaction, which
// never conflicts (Transaction::commitMutations in
// fdbclient/NativeAPI.actor.cpp returns at once without mutations or write
// conflict ranges) and whose watches compare with the value at its read
// version (Transaction::setupWatches). These tests change the watched key
// at each point of that sequence and check that no step conflicts and
// that no waiter sleeps through the change (a lost wake-up would leave it
// asleep until its renewal, an hour away here).

// batchLine sets up a queue served in batches, with a claim timeout of an
// hour, whose two first waiters (A, then B) file their requests and stop
// until release is closed; hook runs at every other point of the queue's
// staged calls. A, B and a third waiter C then get their items on got.
func batchLine(t *testing.T, name string, clock func() time.Time, hook func(p string)) (db *memdb.DB, q *fdbqueue.Queue, got <-chan string, startC func(), release func()) {
	t.Helper()
	ctx := context.Background()
	db = stgDB(t)
	opts := []fdbqueue.Option{fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Hour, Serving: fdbqueue.ServeInBatches})}
	if clock != nil {
		opts = append(opts, fdbqueue.WithClock(clock))
	}
	q = stgQueue(t, stgSubspace(t, name), opts...)
	gt := forGoroutines(t)
	registered := make(chan struct{}, 2)
	rel := make(chan struct{})
	var hung atomic.Int32
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "registered" && hung.Add(1) <= 2 {
			registered <- struct{}{}
			<-rel
			return
		}
		hook(p)
	})
	out := make(chan string, 3)
	call := func() {
		v, err := q.DequeueWait(ctx, db)
		if err != nil {
			gt.Errorf("DequeueWait: %v", err)
		}
		out <- string(v)
	}
	for range 2 {
		go call()
		recvWithin(t, registered, "a waiter's request filed")
	}
	return db, q, out, func() { go call() }, func() { close(rel) }
}

// serveAB makes the two oldest requests (A's and B's) leave the line: it
// enqueues two items and runs a fulfilment, which hands them over. It runs
// in a hook, off the test's goroutine, and closes done.
func serveAB(t *testing.T, db *memdb.DB, q *fdbqueue.Queue, done chan struct{}) {
	defer close(done)
	ctx := context.Background()
	if err := q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}); err != nil {
		t.Error(err)
		return
	}
	if n, err := fdbqueue.FulfilStaged(ctx, db, q); err != nil || n != 2 {
		t.Errorf("fulfilment served %d requests (%v), want A and B", n, err)
	}
}

// finish waits until serveAB ran (a hook of C's), enqueues C's item, lets
// A and B go on, and checks that A, B and C got a, b and c.
func finish(t *testing.T, db *memdb.DB, q *fdbqueue.Queue, changed <-chan struct{}, got <-chan string, release func()) {
	t.Helper()
	select {
	case <-changed:
	case <-time.After(wakeTimeout):
		t.Fatal("C never reached the point where the test changes the line")
	}
	require.NoError(t, q.Enqueue(context.Background(), db, []byte("c")))
	release()
	require.ElementsMatch(t, []string{"a", "b", "c"}, recvN(t, got, 3, "a waiter slept through a change"))
}

func phaseConflicts(t *testing.T, q *fdbqueue.Queue, name string) int64 {
	t.Helper()
	for _, p := range q.StagingStats().Phases {
		if p.Phase == name {
			return p.Conflicts
		}
	}
	t.Fatalf("no phase %q", name)
	return 0
}

// The request ahead leaves between the registration's reads and its
// commit: the registration, which no longer watches it, commits; the arm
// transaction after it sees the request gone and the waiter runs its next
// step at once instead of sleeping. Before, the registration failed.
func TestStagedBatchRegistrationDoesNotConflictOnAhead(t *testing.T) {
	var inC, unarmed atomic.Bool
	changed := make(chan struct{})
	var db *memdb.DB
	var q *fdbqueue.Queue
	db, q, got, startC, release := batchLine(t, "regahead", nil, func(p string) {
		switch {
		case p == "registering" && inC.CompareAndSwap(true, false):
			serveAB(t, db, q, changed)
		case p == "unarmed":
			unarmed.Store(true)
		}
	})
	inC.Store(true)
	startC()
	finish(t, db, q, changed, got, release)
	require.Zero(t, phaseConflicts(t, q, "register"), "a registration conflicted")
	require.True(t, unarmed.Load(), "the arm transaction saw the request ahead gone")
	requireNoWatches(t, db)
}

// The request ahead leaves, and its waiter collects its item, after the
// registration committed and before the arm transaction reads: a watch
// armed now would compare with the key's new value (none) and never fire,
// and C, the only waiter left, would sleep until its renewal. The arm sees
// the change and C does not sleep.
func TestStagedBatchAheadLeavesBeforeArm(t *testing.T) {
	var inC, unarmed atomic.Bool
	changed, collected := make(chan struct{}), make(chan struct{})
	var db *memdb.DB
	var q *fdbqueue.Queue
	db, q, got, startC, release := batchLine(t, "beforearm", nil, func(p string) {
		switch {
		case p == "registered" && inC.CompareAndSwap(true, false):
			serveAB(t, db, q, changed)
			<-collected
		case p == "unarmed":
			unarmed.Store(true)
		}
	})
	inC.Store(true)
	startC()
	recvWithin(t, changed, "C at the point where the test changes the line")
	release()
	require.ElementsMatch(t, []string{"a", "b"}, recvN(t, got, 2, "A and B were not served"), "A and B collected")
	close(collected)
	require.NoError(t, q.Enqueue(context.Background(), db, []byte("c")))
	select {
	case v := <-got:
		require.Equal(t, "c", v)
	case <-time.After(wakeTimeout):
		t.Fatal("C slept through the departure of the request ahead")
	}
	require.True(t, unarmed.Load(), "the arm transaction saw the request ahead gone")
	requireNoWatches(t, db)
}

// The request ahead leaves after the arm transaction read it and before
// that transaction commits: its watch, registered at its read version,
// fires at once.
func TestStagedBatchAheadLeavesWhileArming(t *testing.T) {
	var armed, unarmed, woke atomic.Bool
	changed := make(chan struct{})
	var db *memdb.DB
	var q *fdbqueue.Queue
	db, q, got, startC, release := batchLine(t, "whilearm", nil, func(p string) {
		switch p {
		case "commit arm":
			if armed.CompareAndSwap(false, true) {
				serveAB(t, db, q, changed)
			}
		case "unarmed":
			unarmed.Store(true)
		case "woke":
			woke.Store(true)
		}
	})
	startC()
	finish(t, db, q, changed, got, release)
	require.False(t, unarmed.Load(), "the arm transaction read the request ahead before it left")
	require.True(t, woke.Load(), "C's watch fired")
	requireNoWatches(t, db)
}

// A waiter behind the two oldest renews its request in the step that arms
// its watches (a write), and the request ahead leaves before that step
// commits: the step, which watches only its own request key, commits, and
// the arm after it sees the request gone. Before, the step failed.
func TestStagedBatchRenewingWaitDoesNotConflictOnAhead(t *testing.T) {
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	var stage atomic.Int32 // 1: C registered; 2: C's renewing wait step
	var unarmed atomic.Bool
	changed := make(chan struct{})
	var db *memdb.DB
	var q *fdbqueue.Queue
	db, q, got, startC, release := batchLine(t, "renew", clock.Now, func(p string) {
		switch {
		case p == "registered" && stage.CompareAndSwap(0, 1):
			// Past C's renewal time (a third of the claim timeout): it
			// does not sleep, and its next step renews.
			clock.Advance(21 * time.Minute)
		case p == "commit wait" && stage.CompareAndSwap(1, 2):
			serveAB(t, db, q, changed)
		case p == "unarmed" && stage.Load() == 2:
			unarmed.Store(true)
		}
	})
	startC()
	finish(t, db, q, changed, got, release)
	require.Zero(t, phaseConflicts(t, q, "wait"), "a wait step conflicted")
	require.True(t, unarmed.Load(), "the arm transaction saw the request ahead gone")
	requireNoWatches(t, db)
}

// A helper serves the request ahead and finds the queue empty for its own:
// an item enqueued before its commit neither makes it conflict (it does
// not watch the signal in a step that writes) nor goes unnoticed (its
// next step sees it). Before, the fulfilment failed.
func TestStagedBatchFulfilDoesNotConflictOnSignal(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	q := stgQueue(t, stgSubspace(t, "fulfilsig"), fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: time.Hour, Serving: fdbqueue.ServeInBatches}))
	gt := forGoroutines(t)
	registered, rel := make(chan struct{}), make(chan struct{})
	var hungA, inB atomic.Bool
	fdbqueue.SetStagingHook(q, func(p string) {
		switch {
		case p == "registered" && hungA.CompareAndSwap(false, true):
			close(registered)
			<-rel
		case p == "commit fulfil" && inB.CompareAndSwap(true, false):
			if err := q.Enqueue(ctx, db, []byte("y")); err != nil {
				gt.Error(err)
			}
		}
	})
	got := make(chan string, 2)
	call := func() {
		v, err := q.DequeueWait(ctx, db)
		if err != nil {
			gt.Errorf("DequeueWait: %v", err)
		}
		got <- string(v)
	}
	go call() // A: the oldest request, stopped after filing it
	recvWithin(t, registered, "A's request filed")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	inB.Store(true)
	go call() // B: serves A with x, finds nothing left for itself
	select {
	case v := <-got:
		require.Equal(t, "y", v, "B got the item enqueued during its fulfilment")
	case <-time.After(wakeTimeout):
		t.Fatal("B slept through the item enqueued during its fulfilment")
	}
	close(rel)
	require.Equal(t, "x", recvWithin(t, got, "A's item"))
	require.False(t, inB.Load(), "B ran a fulfilment")
	require.Zero(t, phaseConflicts(t, q, "fulfil"), "a fulfilment conflicted")
	requireNoWatches(t, db)
}
