package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A staged call that finds its request (or the marker of its
// registration) gone must tell its own doing from an expiry: a drop of an
// expired request moves the item due to it to the tail (by place), and an
// expired result's item goes back, after which going on as if nothing had
// happened is not linearizable. Each test below stalls a call at the
// point where it must decide, lets its request expire and Recover drop
// it, and checks the call's answer and the order the items then come out
// in. Several hold a read version request (memdb's HoldNextReadVersion):
// FoundationDB's read version is a future (fdb_transaction_get_read_version,
// which every read waits for), so a clock reading taken before it is
// fixed can precede a commit the transaction then sees.

// stagedCall is what a staged call returned.
type stagedCall struct {
	v   []byte
	err error
}

// callAsync runs call in a goroutine and returns where its result goes.
func callAsync(call func() ([]byte, error)) <-chan stagedCall {
	done := make(chan stagedCall, 1)
	go func() {
		v, err := call()
		done <- stagedCall{v, err}
	}()
	return done
}

// signalledClock is a manual clock whose first reading after arm(ch)
// closes ch.
type signalledClock struct {
	*memdb.ManualClock
	mu   sync.Mutex
	read chan struct{}
}

func newSignalledClock() *signalledClock {
	return &signalledClock{ManualClock: memdb.NewManualClock(time.Unix(1_700_000_000, 0))}
}

func (c *signalledClock) now() time.Time {
	c.mu.Lock()
	if c.read != nil {
		close(c.read)
		c.read = nil
	}
	c.mu.Unlock()
	return c.Now()
}

func (c *signalledClock) arm(ch chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read = ch
}

// latentDB is a database whose read versions are requested in the
// background, as FDB's are, so that HoldNextReadVersion can hold one.
func latentDB(t *testing.T) *memdb.DB {
	return stgDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
}

// expireOneRequest moves the clock past the claim timeout and runs
// Recover, which must drop one request and move the item due to it.
func expireOneRequest(ctx context.Context, t *testing.T, clock interface{ Advance(time.Duration) }, timeout time.Duration, q *fdbqueue.Queue, db kv.Database) {
	t.Helper()
	clock.Advance(timeout + time.Second)
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.RecoverStats{DroppedRequests: 1, ReturnedItems: 1}, st, "the expired request dropped, the item due to it moved to the tail")
}

// requireDequeues dequeues want, in that order, then requires nothing
// staged to be left.
func requireDequeues(ctx context.Context, t *testing.T, q *fdbqueue.Queue, db *memdb.DB, sub fdbqueue.Subspace, want ...string) {
	t.Helper()
	for _, w := range want {
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, w, string(v))
	}
	requireClean(t, db, sub)
}

// A plain Dequeue by place whose withdrawal conflicted (an item arrived)
// and whose request then expired and was dropped, with the item at its
// place moved to the tail, fails with ErrClaimExpired: returning ErrEmpty
// would hide the move (x behind y, though x came first and nobody took
// it). The call tells its own withdrawal from an expiry by the time: only
// well before the deadline can nobody have dropped its request. That time
// must be read once the read version is known. Here the retry's read
// version request is held after the step read the clock, while the clock
// passes the deadline and Recover drops the request.
func TestStagedPlaceWithdrawalThenExpiryFails(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[1] // by place
	const timeout = 10 * time.Second
	clock := newSignalledClock()
	db := latentDB(t)
	sub := stgSubspace(t, "withdrawexpiry")
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.now))
	qB, q := stgQueue(t, sub, opts...), stgQueue(t, sub, opts...)

	fdbqueue.SetStagingBusy(qB, true) // no first look: B files a request at once
	stall, stalled, resume := stallOnceAt("commit withdraw")
	var grvHeld <-chan struct{}
	var releaseGRV func()
	read := make(chan struct{})
	var once sync.Once
	fdbqueue.SetStagingHook(qB, hooks(stall, func(p string) {
		if p == "failed" { // the withdrawal conflicted: hold the retry's read version
			once.Do(func() {
				grvHeld, releaseGRV = db.HoldNextReadVersion()
				clock.arm(read)
			})
		}
	}))
	done := callAsync(func() ([]byte, error) { return qB.Dequeue(ctx, db) })
	recvWithin(t, stalled, "B's withdrawal about to commit, after it read an empty queue")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	resume()
	recvWithin(t, read, "B's retry read the clock") // after the hook set grvHeld
	recvWithin(t, grvHeld, "B's retry's read version requested and held")
	expireOneRequest(ctx, t, clock, timeout, q, db)
	releaseGRV()
	r := recvWithin(t, done, "B's return")
	require.ErrorIs(t, r.err, fdbqueue.ErrClaimExpired, "B's request expired and its item went back: B did not find the queue empty")
	requireDequeues(ctx, t, q, db, sub, "y", "x")
}

// A result's deadline is a claim timeout after a clock reading its
// fulfiller took once its read version was known, so after the
// registration of the request it serves. The waiter relies on it: a
// plain Dequeue whose withdrawal failed and whose request is gone took
// that for its own withdrawal while well before its request's deadline
// (TestStagedPlaceWithdrawalThenExpiryFails), since nobody could have
// expired anything of its request by then. A fulfiller that read the
// clock before its read version (a future on FoundationDB:
// fdb_transaction_get_read_version, which every read waits for) wrote a
// result due to expire a claim timeout after a time earlier than the
// registration: here F's step read the clock at T0, its read version
// request was held (HoldNextReadVersion) while B registered at T0 +
// timeout/2 and found the queue empty, and then F served B's request with
// x and took y. B's withdrawal conflicted; before its retry, at T0 +
// timeout, a Recover expired B's result and put x back; B returned
// ErrEmpty, though x, enqueued before y, had been handed to it while F
// took y (not linearizable). B now collects x.
func TestStagedResultDeadlineAfterRegistration(t *testing.T) {
	ctx := context.Background()
	m := stagingModes[0] // in batches: F's one plain attempt serves the request ahead
	const timeout = 10 * time.Second
	clock := newSignalledClock()
	db := latentDB(t)
	sub := stgSubspace(t, "resultdeadline")
	opts := append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.now))
	// F without a journal: its first clock reading is its step's (an
	// operation ID would be read first).
	qF := stgQueue(t, sub, append(opts, fdbqueue.WithoutIdempotency())...)
	qB, q := stgQueue(t, sub, opts...), stgQueue(t, sub, opts...)
	fdbqueue.SetStagingBusy(qB, true) // no first look: B files a request at once
	stall, stalled, resume := stallOnceAt("commit withdraw")
	fdbqueue.SetStagingHook(qB, stall)

	read := make(chan struct{})
	clock.arm(read)
	grvHeld, releaseGRV := db.HoldNextReadVersion()
	defer releaseGRV()
	doneF := callAsync(func() ([]byte, error) { return qF.Dequeue(ctx, db) })
	recvWithin(t, read, "F's step read the clock")
	recvWithin(t, grvHeld, "F's read version requested and held")
	clock.Advance(timeout / 2)
	doneB := callAsync(func() ([]byte, error) { return qB.Dequeue(ctx, db) })
	recvWithin(t, stalled, "B's withdrawal about to commit, after it read an empty queue")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	releaseGRV()
	rF := recvWithin(t, doneF, "F's return")
	require.NoError(t, rF.err)
	require.Equal(t, "y", string(rF.v), "F served B's request with x and took y")

	clock.Advance(timeout/2 + time.Millisecond) // a claim timeout after F's first clock reading
	st, err := q.Recover(ctx, db)
	require.NoError(t, err)
	resume()
	rB := recvWithin(t, doneB, "B's return")
	require.NoError(t, rB.err, "x was handed to B while F took y: B did not find the queue empty")
	require.Equal(t, "x", string(rB.v))
	require.Equal(t, fdbqueue.RecoverStats{}, st, "B's result expires a claim timeout after F's clock reading once its read version was known")
	requireClean(t, db, sub)
}

// registeredWaiter makes, by place, a handle qB whose calls file their
// request at once and whose registration's commit fails with err
// (applied or not), then stall after that failure; q is another handle
// of the queue, whose record is written.
func registeredWaiter(ctx context.Context, t *testing.T, name string, err error, applied bool) (clock *memdb.ManualClock, db *memdb.DB, sub fdbqueue.Subspace, qB, q *fdbqueue.Queue, stalled <-chan struct{}, resume func()) {
	t.Helper()
	m := stagingModes[1] // by place
	clock, db, sub, qB = clockedQueue(t, name, m, claimTimeout)
	q = stgQueue(t, sub, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: claimTimeout}), fdbqueue.WithClock(clock.Now))...)
	require.NoError(t, q.Enqueue(ctx, db, []byte("w"))) // the queue's record is written
	v, derr := q.Dequeue(ctx, db)
	require.NoError(t, derr)
	require.Equal(t, "w", string(v))
	fdbqueue.SetStagingBusy(qB, true) // no first look: a call files a request at once
	stall, stalled, resume := stallOnceAt("failed")
	var once sync.Once
	fdbqueue.SetStagingHook(qB, hooks(func(p string) {
		if p == "commit register" {
			once.Do(func() { db.FailNextCommit(err, applied) })
		}
	}, stall))
	return clock, db, sub, qB, q, stalled, resume
}

// claimTimeout is registeredWaiter's.
const claimTimeout = 10 * time.Second

// A registration whose commit reported commit_unknown_result though it
// applied leaves the waiter unsure whether its request is in the line; the
// next step looks for the registration's marker (resolve). If the waiter
// stalled past the claim timeout meanwhile, the request may have expired
// and been dropped, the item due to it moved to the tail, and the marker
// cleared with it: finding nothing then does not mean the registration
// never happened. The call must fail with ErrClaimExpired, not file a new
// request and take the next item (here y, though x, enqueued first, was
// taken by nobody).
func TestStagedUnknownRegistrationThenExpiryFails(t *testing.T) {
	ctx := context.Background()
	clock, db, sub, qB, q, stalled, resume := registeredWaiter(ctx, t, "unknownregexpiry", kv.ErrCommitUnknownResult, true)
	done := callAsync(func() ([]byte, error) { return qB.DequeueWait(ctx, db) })
	recvWithin(t, stalled, "B's registration failed with an unknown outcome")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
	expireOneRequest(ctx, t, clock, claimTimeout, q, db)
	resume()
	r := recvWithin(t, done, "B's return")
	require.ErrorIs(t, r.err, fdbqueue.ErrClaimExpired, "B's request expired and its item went back: B must not take another (it took %q)", r.v)
	requireDequeues(ctx, t, q, db, sub, "y", "x")
}

// A registration whose commit surely failed (not_committed) left nothing
// in the line, however long the waiter stalled after it: the next step
// files a new request, and the call takes the item, rather than failing
// as if its request had expired.
func TestStagedFailedRegistrationAfterAStallGoesOn(t *testing.T) {
	ctx := context.Background()
	clock, db, sub, qB, q, stalled, resume := registeredWaiter(ctx, t, "failedregstall", kv.ErrNotCommitted, false)
	done := callAsync(func() ([]byte, error) { return qB.DequeueWait(ctx, db) })
	recvWithin(t, stalled, "B's registration conflicted")
	clock.Advance(claimTimeout + time.Second) // past the deadline it would have had
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	resume()
	r := recvWithin(t, done, "B's return")
	require.NoError(t, r.err)
	require.Equal(t, "x", string(r.v))
	requireClean(t, db, sub)
}
