package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// The "Cost:" claims of the staged dequeue (StagingConfig, DequeueWait,
// Recover, docs/design.md "Staged dequeue", staging_line.go), checked as
// TestCostClaims checks the others. A staged call runs
// one transaction per step; each row lists them in order. Waiters are
// driven through the staging hook and the env's clock, never by sleeping;
// waiters a row needs besides the one counted run on another handle over
// the uncounted database (stall).

// stagedTimeout is the claim timeout of the staged rows: no request
// expires, and a renewal is due only when a row moves the clock.
const stagedTimeout = time.Hour

var (
	byPlace   = &stagingModes[1]
	inBatches = &stagingModes[0]
)

// The counts of a staged step besides what a row states: the read
// conflict key a take puts on its operation's record key (staging_waiter.go,
// took), and the one a registration puts on its result key before it
// writes the marker there (staging_register.go, register).
const (
	takeRecordConflict = 1
	markerConflict     = 1
)

// stagedTake enqueues an item and takes it with a staged Dequeue: its
// journal record stays for the handle's next operation to clear
// (carriedClear), as in any sequence of staged dequeues (a staged take
// keeps its record under its own ID, not in a journal slot).
func (e *costEnv) stagedTake() {
	e.fill(1)
	_, err := e.q.Dequeue(e.ctx, e.raw)
	require.NoError(e.t, err)
}

// produce enqueues n items through another handle of the queue, which
// leaves the counted handle's pending journal clears as they are.
func (e *costEnv) produce(n int) {
	if e.producer == nil {
		e.producer = stgQueue(e.t, e.q.Subspace(), e.opts...)
	}
	for i := range n {
		require.NoError(e.t, e.producer.Enqueue(e.ctx, e.raw, []byte{byte(i)}))
	}
}

// resultKeys returns the result keys (markers and results) of the
// queue's staged line.
func (e *costEnv) resultKeys() [][]byte {
	meta := fdbqueue.SubspaceFromBytes(append(e.q.Subspace().Bytes(), 0xff))
	r, err := meta.Range("s", "q", "f")
	require.NoError(e.t, err)
	kvs, err := kv.ReadTransact(e.ctx, e.raw, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(e.t, err)
	keys := make([][]byte, len(kvs))
	for i, p := range kvs {
		keys[i] = p.Key
	}
	return keys
}

// stall starts n DequeueWait calls on another handle of the queue (q2),
// over the uncounted database, which stop right after their registration:
// n requests wait in the line, oldest first, their result keys in
// e.stalled. They go on, with their context ended, when the test ends.
func (e *costEnv) stall(n int) {
	e.q2 = stgQueue(e.t, e.q.Subspace(), e.opts...)
	ctx, cancel := context.WithCancel(e.ctx)
	registered, release := make(chan struct{}), make(chan struct{})
	var left atomic.Int32
	left.Store(int32(n))
	fdbqueue.SetStagingHook(e.q2, func(p string) {
		if p == "registered" && left.Add(-1) >= 0 {
			registered <- struct{}{}
			<-release
		}
	})
	done := make(chan error, n)
	for range n {
		before := e.resultKeys()
		go func() {
			_, err := e.q2.DequeueWait(ctx, e.raw)
			done <- err
		}()
		recvWithin(e.t, registered, "a stalled waiter's registration")
		keys := newKeys(before, e.resultKeys())
		require.Len(e.t, keys, 1)
		e.stalled = append(e.stalled, keys[0])
	}
	e.t.Cleanup(func() {
		cancel()
		close(release)
		for range n {
			select {
			case <-done:
			case <-time.After(wakeTimeout):
				e.t.Error("a stalled waiter did not return once cancelled")
				return
			}
		}
	})
}

// onPoint calls f, with how many times so far, each time one of the
// counted handle's staged calls reaches point (see SetStagingHook).
func (e *costEnv) onPoint(point string, f func(n int)) {
	var n atomic.Int32
	fdbqueue.SetStagingHook(e.q, func(p string) {
		if p == point {
			f(int(n.Add(1)))
		}
	})
}

// waitInBackground starts DequeueWait on the counted database and returns
// where its error goes.
func (e *costEnv) waitInBackground(ctx context.Context) <-chan error {
	got := make(chan error, 1)
	go func() {
		_, err := e.q.DequeueWait(ctx, e.db)
		got <- err
	}()
	return got
}

// served runs the counted handle's DequeueWait behind the two stalled
// waiters until its request is served in a batch (FulfilStaged, uncounted,
// serves the three requests, with items of size bytes), which it learns
// from the watch on its own result key (own) or from the one on the
// request ahead's (!own): the other watch never reports (costDB.quiet), as
// if it had lost the race that the two, fired by the same commit, run.
func (e *costEnv) served(own bool, size int) error {
	armed := make(chan struct{}, 1)
	e.onPoint("armed", func(int) { armed <- struct{}{} })
	e.produce(0) // makes the producer
	before := e.resultKeys()
	got := e.waitInBackground(e.ctx)
	recvWithin(e.t, armed, "the waiter asleep")
	mine := newKeys(before, e.resultKeys())
	require.Len(e.t, mine, 1)
	quiet := mine[0]
	if own {
		quiet = e.stalled[1]
	}
	e.db.setQuiet(func(k []byte) bool { return bytes.Equal(k, quiet) })
	for range 3 {
		require.NoError(e.t, e.producer.Enqueue(e.ctx, e.raw, bytes.Repeat([]byte("v"), size)))
	}
	n, err := fdbqueue.FulfilStaged(e.ctx, e.raw, e.q2)
	require.NoError(e.t, err)
	require.Equal(e.t, 3, n, "requests served")
	return recvWithin(e.t, got, "the served waiter")
}

// idle runs the counted handle's DequeueWait on an empty queue: it files
// its request and sleeps; its renewal falls due (the clock moves past it),
// and it renews and sleeps again; then an item arrives and it takes it.
func (e *costEnv) idle() error {
	e.produce(0) // makes the producer
	e.onPoint("armed", func(n int) {
		switch n {
		case 1:
			e.clock.Advance(stagedTimeout/3 + time.Microsecond)
		case 2:
			if err := e.producer.Enqueue(e.ctx, e.raw, []byte("x")); err != nil {
				e.t.Errorf("Enqueue: %v", err)
			}
		}
	})
	return recvWithin(e.t, e.waitInBackground(e.ctx), "the woken waiter")
}

// cancelAt runs the counted handle's DequeueWait (or, plain, Dequeue)
// and ends its context when it is about to sleep for the nth time; the
// call withdraws its request and returns the context's error.
func (e *costEnv) cancelAt(n int, plain bool) error {
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	e.onPoint("armed", func(i int) {
		if i == n {
			cancel()
		}
	})
	var err error
	if plain {
		_, err = e.q.Dequeue(ctx, e.db)
	} else {
		err = recvWithin(e.t, e.waitInBackground(ctx), "the cancelled waiter")
	}
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("want the context's error, got %v", err)
	}
	return nil
}

// stagePQ replaces pq with a priority queue staged in batches, warmed as
// warm does, holding n items and one record of a staged pop for its next
// operation to clear.
func (e *costEnv) stagePQ(n int) {
	e.pq = mustPQ(e.t, "cost-spq", fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: stagedTimeout}),
		fdbqueue.WithClock(e.clock.Now))
	for range 2 {
		require.NoError(e.t, e.pq.Push(e.ctx, e.raw, []byte("w"), 0))
		_, err := e.pq.PopMin(e.ctx, e.raw)
		require.NoError(e.t, err)
	}
	e.pfill(n + 1)
	_, err := e.pq.PopMin(e.ctx, e.raw)
	require.NoError(e.t, err)
}

// Steps that recur in the staged rows.
var (
	// A registration after a look at the line: snapshot reads of the last
	// request, the first two and the head (one round trip), then the
	// request (a versionstamped key) and its marker.
	lookAndRegister = cost{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict}
	// A waiter's read-only step that arms its two watches (its request
	// and the signal key): point reads of its request and result, snapshot
	// reads of the line, the items and the results a fulfilment would
	// expire, one round trip.
	armStep = cost{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Watch: 2}
	// The read-only transaction that arms, after a registration, the
	// watch on the request ahead (armLater): one point read, no commit
	// round trip, and no read of the metadata version (it checks nothing).
	armLater = cost{SnapGet: 1, RoundTrips: 1, Watch: 1}
	// A take at the waiter's place: point reads of its request and
	// marker, snapshot reads of the line up to it and of the items up to
	// its place (one round trip), then three clears (the item, the request,
	// the marker), the journal record and the depth counter's add; read
	// conflicts on the item's key and the record's.
	takeAtPlace = cost{MetadataVersion: mvRead, Get: 2, SnapRange: 2, RoundTrips: 1, Clear: 3 + carriedClear, Set: 1, Add: 1,
		ReadConflict: 1 + takeRecordConflict}
	// The cleanup of a call whose context ended while it waited, in
	// batches: the result key's point read, then the request's clear and
	// the result key's range clear (its chunks); a read conflict on the
	// operation's record key (op.check).
	cleanupInBatches = cost{Get: 1, RoundTrips: 1, Clear: 1, ClearRange: 1, ReadConflict: recordConflict}
)

func stagedCostClaims() []costClaim {
	return []costClaim{
		// Served at once: the one plain attempt.
		{
			name:  "staged Dequeue/at once, by place",
			claim: "A call first looks at the head and at the first requests (snapshot reads): if fewer than two waiters are ahead, it takes the item after theirs in one attempt, conflicting as a plain dequeue does",
			stage: byPlace,
			setup: func(e *costEnv) { e.fill(3); e.stagedTake() },
			op:    dequeueOp,
			// The conflict range from the head to the item, as a plain
			// dequeue's; a clear, the journal record, the depth's add.
			want: []cost{{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, Clear: 1 + carriedClear, Set: 1, Add: 1,
				ReadConflict: 1 + takeRecordConflict}},
		},
		{
			name:  "staged Dequeue/at once, in batches",
			claim: "(in batch mode the same transaction serves those waiters first): none waiting, the plain attempt alone",
			stage: inBatches,
			setup: func(e *costEnv) { e.fill(3); e.stagedTake() },
			op:    dequeueOp,
			want: []cost{{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, Clear: 1 + carriedClear, Set: 1, Add: 1,
				ReadConflict: 1 + takeRecordConflict}},
		},
		{
			name:  "staged PopMin/at once",
			claim: "PopMinWait: Requirements and guarantees are those of Queue.DequeueWait (the staged pop's plain attempt as the Queue's)",
			setup: func(e *costEnv) { e.stagePQ(3) },
			op: func(e *costEnv) error {
				_, err := e.pq.PopMin(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, Clear: 1 + carriedClear, Set: 1, Add: 1,
				ReadConflict: 1 + takeRecordConflict}},
		},
		{
			name:  "staged Dequeue/empty queue",
			claim: "On an empty queue it ... returns ErrEmpty: the look finds no item, files no request and commits nothing",
			stage: byPlace,
			setup: func(e *costEnv) {},
			op: func(e *costEnv) error {
				_, err := e.q.Dequeue(e.ctx, e.db)
				return wantErr(err, fdbqueue.ErrEmpty)
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1}},
		},

		// Busy: a request, then the take.
		{
			name:  "staged Dequeue/long line, by place",
			claim: "by place, two transactions (the registration: two writes, one versionstamped, and no read while the line is long; the take: point reads of its request and marker and snapshot reads of the line up to the request and of the items up to its place, one round trip, then three clears and the journal record)",
			stage: byPlace,
			setup: func(e *costEnv) {
				e.fill(3)
				e.stagedTake()
				fdbqueue.SetStagingBusy(e.q, true)
			},
			op: dequeueOp,
			// A blind registration reads not even the metadata version:
			// a read conflict on the configuration's epoch key stands
			// for it (config.go, issueStep).
			want: []cost{{VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict + 1}, takeAtPlace},
		},
		{
			name:  "staged Dequeue/behind two waiters, by place",
			claim: "(design.md) while the line is short it first reads the head and the line's first two and last requests; the take (one round trip: two point reads, two snapshot range reads up to the waiter's place; a commit of three clears and the journal record)",
			stage: byPlace,
			setup: func(e *costEnv) {
				e.stagedTake()
				e.stall(2)
				e.produce(3) // two due to the requests ahead, the third to this one
			},
			op:   dequeueOp,
			want: []cost{lookAndRegister, takeAtPlace},
		},
		{
			name:  "staged Dequeue/long line, in batches",
			claim: "the registration: snapshot reads of the first two and the last request (the head is not read while the line is long); the oldest waiter takes the head itself",
			stage: inBatches,
			setup: func(e *costEnv) {
				e.fill(3)
				e.stagedTake()
				fdbqueue.SetStagingBusy(e.q, true)
			},
			op: dequeueOp,
			// The take of the oldest waiter, which may serve the line:
			// it reads the results to expire too.
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict},
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Clear: 3 + carriedClear, Set: 1, Add: 1,
					ReadConflict: 1 + takeRecordConflict},
			},
		},
		{
			name:  "staged Dequeue/no item for it, by place",
			claim: "(withdraw) In place mode the items ended before its place, and it reads the whole item range (a read conflict); it clears the request and its marker",
			stage: byPlace,
			setup: func(e *costEnv) {
				e.stall(2)
				e.fill(2) // both due to the requests ahead
			},
			op: func(e *costEnv) error {
				_, err := e.q.Dequeue(e.ctx, e.db)
				return wantErr(err, fdbqueue.ErrEmpty)
			},
			want: []cost{lookAndRegister, {MetadataVersion: mvRead, Get: 2, SnapRange: 2, RoundTrips: 1, Clear: 2, ReadConflict: 1}},
		},

		// Served in batches.
		{
			name:  "staged Dequeue/served in a batch",
			claim: "the registration (then, for a waiter behind the two oldest, a read-only transaction that arms its watch on the request ahead: a read version and a point read), ... and the collect (point reads of its request and result ...; a range clear of the result and the journal record)",
			stage: inBatches,
			setup: func(e *costEnv) { e.stagedTake(); e.stall(2) },
			op:    func(e *costEnv) error { return e.served(true, 1) },
			// The registration also watches its own result key (the
			// marker it writes: no read). The collect, woken by that
			// watch, reads only its request and result.
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict, Watch: 1},
				armLater,
				{MetadataVersion: mvRead, Get: 2, RoundTrips: 1, ClearRange: 1, Clear: carriedClear, Set: 1, ReadConflict: takeRecordConflict},
			},
		},
		{
			name:  "staged Dequeue/served in a batch, woken by the request ahead",
			claim: "the collect (... and when the watch on the request ahead woke it rather than its own, the step's reads of the line; ...)",
			stage: inBatches,
			setup: func(e *costEnv) { e.stagedTake(); e.stall(2) },
			op:    func(e *costEnv) error { return e.served(false, 1) },
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict, Watch: 1},
				armLater,
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, ClearRange: 1, Clear: carriedClear, Set: 1, ReadConflict: takeRecordConflict},
			},
		},
		{
			name:  "staged Dequeue/served in a batch, a 100,000-byte value",
			claim: "(design.md) a staged result that long takes its collector a second read (codec.go: a second round trip, for values that large only)",
			stage: inBatches,
			setup: func(e *costEnv) { e.stagedTake(); e.stall(2) },
			op:    func(e *costEnv) error { return e.served(true, kv.MaxValueSize) },
			// The result's chunks (a range read) after its first one. (The
			// record, the value as stored, fits one key.)
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict, Watch: 1},
				armLater,
				{MetadataVersion: mvRead, Get: 2, Range: 1, RoundTrips: 2, ClearRange: 1, Clear: carriedClear, Set: 1,
					ReadConflict: takeRecordConflict},
			},
		},
		{
			name:  "staged fulfilment of three requests",
			claim: "a share of a batch (per request: one request and one item read, two clears and a result write); BatchSize: each request costs the fulfiller about three writes and one item read",
			stage: inBatches,
			setup: func(e *costEnv) { e.stall(3); e.fill(3) },
			op: func(e *costEnv) error {
				n, err := fdbqueue.FulfilStaged(e.ctx, e.db, e.q)
				if err == nil && n != 3 {
					err = fmt.Errorf("served %d requests, want 3", n)
				}
				return err
			},
			// The requests, the items and a few results (to expire) in
			// one round trip; per request a read conflict on the request
			// and the item, their clears and the result. (The test seam
			// runs the pass alone, without the configuration's check.)
			want: []cost{{SnapRange: 3, RoundTrips: 1, ReadConflict: 2 * 3, Clear: 2 * 3, Set: 3, Add: 1}},
		},
		{
			name:  "staged Dequeue/waiting to be served, in batches",
			claim: "Nobody polls, except that a plain Dequeue, which must not block, looks again every 100 ms (one read-only step)",
			stage: inBatches,
			setup: func(e *costEnv) { e.stall(2); e.fill(2) },
			op:    func(e *costEnv) error { return e.cancelAt(2, true) },
			// Behind the two oldest, it waits for them to serve it; each
			// look reads as an arming step and watches its request and
			// the one ahead. Then the cleanup.
			want: []cost{
				{MetadataVersion: mvRead, SnapRange: 3, RoundTrips: 1, VersionstampedKey: 1, Set: 1, ReadConflict: markerConflict, Watch: 1},
				armLater,
				armStep,
				cleanupInBatches,
			},
		},

		// DequeueWait on an empty queue.
		{
			name:  "DequeueWait/idle, in batches",
			claim: "Cost while it waits on an empty queue: after the registration (see StagingConfig), a read-only step that arms the two watches (one round trip); then, every ClaimTimeout/3, a step that renews the request and one that arms the watches again; nothing in between",
			stage: inBatches,
			setup: func(e *costEnv) { e.stagedTake() },
			op:    func(e *costEnv) error { return e.idle() },
			want: []cost{
				lookAndRegister,
				armStep,
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Set: 1}, // the renewal
				armStep,
				// Woken by the signal: it serves its own request from the
				// head, as a helper would (the request, its marker and the
				// item cleared, each read).
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Clear: 3 + carriedClear, Set: 1, Add: 1,
					ReadConflict: 2 + takeRecordConflict},
			},
		},
		{
			name:  "DequeueWait/idle, by place",
			claim: "Cost while it waits on an empty queue: after the registration (see StagingConfig), a read-only step that arms the two watches (one round trip); then, every ClaimTimeout/3, a step that renews the request and one that arms the watches again; nothing in between",
			stage: byPlace,
			setup: func(e *costEnv) { e.stagedTake() },
			op:    func(e *costEnv) error { return e.idle() },
			want: []cost{
				lookAndRegister,
				armStep,
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Set: 1},
				armStep,
				{MetadataVersion: mvRead, Get: 2, SnapRange: 3, RoundTrips: 1, Clear: 3 + carriedClear, Set: 1, Add: 1,
					ReadConflict: 2 + takeRecordConflict},
			},
		},
		{
			name:  "DequeueWait/cancelled, in batches",
			claim: "When ctx ends, a cleanup transaction withdraws the request (one round trip; ...)",
			stage: inBatches,
			setup: func(e *costEnv) {},
			op:    func(e *costEnv) error { return e.cancelAt(1, false) },
			want:  []cost{lookAndRegister, armStep, cleanupInBatches},
		},
		{
			name:  "DequeueWait/cancelled, by place",
			claim: "When ctx ends, a cleanup transaction withdraws the request (one round trip; by place two more, to find the item at its place); leavePlace: if none does, the transaction reads the whole item range",
			stage: byPlace,
			setup: func(e *costEnv) {},
			op:    func(e *costEnv) error { return e.cancelAt(1, false) },
			// The line up to the request, then the items up to its
			// place: two round trips more than in batches.
			want: []cost{lookAndRegister, armStep,
				{Get: 1, SnapRange: 2, RoundTrips: 3, Clear: 1, ClearRange: 1, ReadConflict: recordConflict + 1}},
		},

		// Outside the line, on a queue served by place.
		{
			name:  "Queue.Peek/by place",
			claim: "Peek returns the first item after them ..., after a snapshot read of the line (one round trip more)",
			stage: byPlace,
			setup: func(e *costEnv) { e.stall(1); e.produce(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Peek(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, Range: 1, RoundTrips: 2}},
		},
		{
			name:  "Queue.Empty/by place",
			claim: "On a queue staged by place it reports whether it holds no item beyond those due to the waiting requests, as Peek",
			stage: byPlace,
			setup: func(e *costEnv) { e.stall(1); e.produce(3) },
			op: func(e *costEnv) error {
				_, err := e.q.Empty(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, Range: 1, RoundTrips: 2}},
		},
		{
			name:  "Queue.DequeueBatch/by place",
			claim: "DequeueBatch first reads the line (a snapshot read of all of it, one round trip more), takes the items after those, with a read conflict on each item taken",
			stage: byPlace,
			setup: func(e *costEnv) { e.stall(1); e.produce(4) },
			op: func(e *costEnv) error {
				_, err := e.q.DequeueBatch(e.ctx, e.db, 2)
				return err
			},
			// The records beside the slot's write, as Queue.DequeueBatch's;
			// the read conflicts: each item taken, and the record's key.
			// (The clear carried: the warm-up's last staged take's record.)
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 2, Clear: 2 + carriedClear, Set: 2 + 1, Add: 1,
				ReadConflict: 2 + recordConflict}},
		},
		{
			name:  "Queue.Dequeue/by place, in a caller's transaction",
			claim: "served by place it takes only the first item after those due to the requests waiting in the line (a snapshot read of the line, a round trip before the head's)",
			stage: byPlace,
			setup: func(e *costEnv) { e.stall(1); e.produce(3) },
			op: func(e *costEnv) error {
				return e.db.Transact(e.ctx, func(tr kv.Transaction) error {
					_, err := e.q.Dequeue(e.ctx, tr)
					return err
				})
			},
			// No journal in a caller's transaction without WithOpID.
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 2, Clear: 1, Add: 1, ReadConflict: 1}},
		},

		// Recover.
		{
			name:  "Queue.Recover/in batches",
			claim: "Cost: that check (no round trip for a handle in use), then a snapshot read of up to 256 requests (by place together with as many items) and one of the results, each in a transaction of its own",
			stage: inBatches,
			setup: func(e *costEnv) {},
			op: func(e *costEnv) error {
				_, err := e.q.Recover(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead}, {SnapRange: 1, RoundTrips: 1}, {SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.Recover/by place",
			claim: "a snapshot read of up to 256 requests (by place together with as many items) and one of the results, each in a transaction of its own",
			stage: byPlace,
			setup: func(e *costEnv) {},
			op: func(e *costEnv) error {
				_, err := e.q.Recover(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead}, {SnapRange: 2, RoundTrips: 1}, {SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "PriorityQueue.Recover",
			claim: "drops expired PopMin and PopMax requests ...: Queue.Recover's, for each line",
			setup: func(e *costEnv) { e.stagePQ(0) },
			op: func(e *costEnv) error {
				_, err := e.pq.Recover(e.ctx, e.db)
				return err
			},
			want: []cost{{MetadataVersion: mvRead},
				{SnapRange: 1, RoundTrips: 1}, {SnapRange: 1, RoundTrips: 1}, {SnapRange: 1, RoundTrips: 1}, {SnapRange: 1, RoundTrips: 1}},
		},
	}
}

// wantErr returns nil if err is want, else an error that says what came.
func wantErr(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return fmt.Errorf("want %v, got %v", want, err)
}

// TestStagedCostClaims checks the staged dequeue's cost claims, as
// TestCostClaims does the others'.
func TestStagedCostClaims(t *testing.T) { runCostClaims(t, stagedCostClaims()) }
