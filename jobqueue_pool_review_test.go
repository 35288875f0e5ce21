package fdbqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// holdAfterUncertain is a database that, the first time a transaction
// fails with an error for which kv.MaybeCommitted is true, holds the next
// commit that sends writes (memdb's HoldNextCommitLate) before returning
// that error: the caller's next transaction is then in flight until the
// test lets it land.
type holdAfterUncertain struct {
	*memdb.DB
	once sync.Once
	held chan func() // the hold's release, once armed
}

func (h *holdAfterUncertain) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	err := h.DB.Transact(ctx, fn)
	if kv.MaybeCommitted(err) {
		h.once.Do(func() {
			held, land := h.DB.HoldNextCommitLate()
			go func() { <-held; h.held <- land }()
		})
	}
	return err
}

// A lease that may have committed while the pool runs (1022 here, a
// transaction timeout on FDB) is settled by a Lease under its ID; when
// the pool stops while that settling Lease's own commit is in flight, the
// pool settles again under the ID: a job either took is released as at
// any other shutdown, not left leased to nobody until its lease expires,
// its one attempt spent (here neither commit has landed: nothing is
// leased, and the late one conflicts). Before, the worker saw its context ended and
// returned without settling. The settling commit is held and let go once
// Run has returned, as FoundationDB's client lets a cancelled commit
// request land (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp).
func TestJobPoolSettlesAnUncertainLeaseWhoseSettlingTheShutdownInterrupts(t *testing.T) {
	mem := newDB(t)
	db := &holdAfterUncertain{DB: mem, held: make(chan func(), 1)}
	clock := newArmedClock()
	q := mustJobQueue(t, "settle-uncertain-at-stop", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	added := mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("late"), Delay: time.Minute})

	handled := make(chan struct{}, 1)
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { handled <- struct{}{}; return nil },
		fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, Logger: quietLog})
	require.Greater(t, nextArmed(t, clock), time.Minute-time.Second, "LeaseWait sleeps until the job is due")
	mem.FailNextCommit(kv.ErrCommitUnknownResultFatal, false) // the worker's lease: not applied, outcome unknown
	clock.Advance(time.Minute + time.Millisecond)
	var land func()
	select { // the settling Lease's commit is in flight
	case land = <-db.held:
	case <-time.After(wakeTimeout):
		t.Fatal("the pool did not settle its uncertain lease")
	}
	err := pool.stop()
	land() // the interrupted settling commit lands (or conflicts) now
	require.NoError(t, err)
	require.Empty(t, handled, "no handler ran")
	// Neither lease under the ID landed before the pool settled it, so
	// nothing was leased: the job is due since its own time.
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1, OldestDue: time.Millisecond}, mustStats(t, mem, q), "due, leased to nobody")
	l := mustLease(t, mem, q, 1, time.Minute)[0]
	require.Equal(t, added.ID, l.JobID)
	require.Equal(t, 1, l.Attempt, "the interrupted lease's attempt is not counted")
}

// failAgainAfterUncertain is a memdb database that, the first time a
// transaction fails with an error for which kv.MaybeCommitted is true,
// makes the next commit fail the same way, its writes applied.
type failAgainAfterUncertain struct {
	*memdb.DB
	once sync.Once
}

func (f *failAgainAfterUncertain) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	err := f.DB.Transact(ctx, fn)
	if kv.MaybeCommitted(err) {
		f.once.Do(func() { f.DB.FailNextCommit(kv.ErrCommitUnknownResultFatal, true) })
	}
	return err
}

// When the Lease that settles an uncertain lease (1022, a transaction
// timeout on FDB: say, every transaction times out while the cluster is
// unavailable) is uncertain too, the pool settles again under the same ID
// a second later, and processes the job that Lease took. Before, it
// leased anew under a new ID: the job stayed leased to nobody until its
// lease expired, its one attempt spent, and the next Lease dead-lettered
// it without it ever having run.
func TestJobPoolSettlesAnUncertainLeaseUntilItKnows(t *testing.T) {
	mem := newDB(t)
	db := &failAgainAfterUncertain{DB: mem}
	clock := newArmedClock()
	q := mustJobQueue(t, "settle-uncertain-twice", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	added := mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("once")})
	mem.FailNextCommit(kv.ErrCommitUnknownResultFatal, false) // the pool's first lease; the settling one then fails applied

	const extendEvery = 10 * time.Second
	outcomes := make(chan fdbqueue.Outcome, 2)
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return nil },
		fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 3 * extendEvery, ExtendEvery: extendEvery,
			Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	require.Equal(t, time.Second, nextArmed(t, clock), "the worker waits a second after the failed settling")
	clock.Advance(time.Second)
	var o fdbqueue.Outcome
	for done := false; !done; {
		select {
		case o = <-outcomes:
			done = true
		case d := <-clock.Armed:
			// A heartbeat's timer is extendEvery; a LeaseWait asleep until
			// the hidden job's lease expires is longer.
			require.LessOrEqual(t, d, extendEvery, "the worker sleeps while its job is leased to nobody: %+v", mustStats(t, mem, q))
		case <-time.After(wakeTimeout):
			t.Fatal("the job was not processed")
		}
	}
	require.NoError(t, pool.stop())
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
	require.Equal(t, added.ID, o.Lease.JobID)
	require.Equal(t, 1, o.Lease.Attempt, "one attempt, counted once")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, mem, q), "acked: nothing left leased or dead")
}

// afterArmed reports, once armed, the result of each transaction on done.
type afterArmed struct {
	kv.Database
	armed chan struct{} // closed to arm
	done  chan error
}

func (a *afterArmed) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	err := a.Database.Transact(ctx, fn)
	select {
	case <-a.armed:
		a.done <- err
	default:
	}
	return err
}

// A handler that acks its job in its own transaction (Task.Ack) and then
// goes on (say, to notify someone) keeps its context when the heartbeat
// next finds the job gone: its own ack removed it, which is no lost lease.
// The outcome is Acked and nothing warns of a lost lease. Before, the
// heartbeat ended the handler's context and warned "lease lost while the
// handler ran"; a handler that then failed on its context was nacked, and
// its outcome was LeaseLost, though its job was acked.
func TestJobPoolHeartbeatAfterTheHandlersOwnAck(t *testing.T) {
	mem := newDB(t)
	db := &afterArmed{Database: mem, armed: make(chan struct{}), done: make(chan error, 8)}
	clock := newArmedClock()
	q := mustJobQueue(t, "heartbeat-after-own-ack", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("acked by its handler")})

	acked, proceed := make(chan error, 1), make(chan struct{})
	ctxAfter := make(chan error, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	var logs syncBuffer
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		acked <- mem.Transact(ctx, func(tr kv.Transaction) error { return task.Ack(ctx, tr) })
		<-proceed
		ctxAfter <- ctx.Err()
		return ctx.Err() // the rest of its work, cut short were ctx to end
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	require.NoError(t, recvWithin(t, acked, "the handler's own ack"))
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	close(db.armed)
	clock.Advance(10 * time.Second)
	require.ErrorIs(t, recvWithin(t, db.done, "the heartbeat's extension"), fdbqueue.ErrLeaseLost, "the heartbeat's extension finds the job gone")
	close(proceed)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.NoError(t, pool.stop())
	require.NoError(t, <-ctxAfter, "the handler's context did not end")
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
	require.NotContains(t, logs.String(), "lease lost")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, mem, q))
}

// The heartbeat's extension failing once, with each class of FDB error:
// the retryable ones (not_committed 1020, commit_unknown_result 1021
// applied or not, transaction_too_old 1007, process_behind 1037; FDB's
// onError retries them, Transaction::onError in
// fdbclient/NativeAPI.actor.cpp) are retried within the extension; the
// others (transaction_timed_out 1031, applied or not; commit_unknown_result_fatal
// 1022 applied; client_invalid_operation 2000) fail it, and the next
// tick extends from the lease as it was. Either way the lease is held
// through its first deadline, the handler's context never ends, and the
// job is acked once.
func TestJobPoolHeartbeatSurvivesAFailedExtension(t *testing.T) {
	const extendEvery, lease = 10 * time.Second, 30 * time.Second
	for _, c := range []struct {
		err       error
		applied   bool
		retryable bool
	}{
		{kv.ErrNotCommitted, false, true},
		{kv.ErrCommitUnknownResult, true, true},
		{kv.ErrCommitUnknownResult, false, true},
		{kv.ErrTransactionTooOld, false, true},
		{kv.ErrProcessBehind, false, true},
		{kv.ErrTransactionTimedOut, false, false},
		{kv.ErrTransactionTimedOut, true, false},
		{kv.ErrCommitUnknownResultFatal, true, false},
		{kv.ErrClientInvalidOp, false, false},
	} {
		t.Run(fmt.Sprintf("%v applied=%v", c.err, c.applied), func(t *testing.T) {
			ctx := context.Background()
			j := startLongJob(t, "heartbeat-errors", fdbqueue.PoolOptions{LeaseDuration: lease, ExtendEvery: extendEvery})
			db, clock, q, h, outcomes, pool, task := j.db, j.clock, j.q, j.h, j.outcomes, j.pool, j.task
			first := task.Lease().Deadline
			require.Equal(t, extendEvery, nextArmed(t, clock))
			db.FailNextCommit(c.err, c.applied) // the first extension's commit
			clock.Advance(extendEvery)
			require.Equal(t, extendEvery, nextArmed(t, clock)) // the first extension is done
			if c.retryable {
				require.Equal(t, clock.Now().Add(lease).UnixMicro(), task.Lease().Deadline.UnixMicro(), "retried within the extension")
			} else {
				require.Equal(t, first, task.Lease().Deadline, "failed: the lease as it was")
			}
			clock.Advance(extendEvery)
			require.Equal(t, extendEvery, nextArmed(t, clock)) // the second extension is done
			require.Equal(t, clock.Now().Add(lease).UnixMicro(), task.Lease().Deadline.UnixMicro())
			clock.Advance(lease - 2*extendEvery) // the first deadline
			nextArmed(t, clock)
			_, err := q.Lease(ctx, db, 1, time.Minute)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the job is still the pool's")
			close(h.finish)
			o := recvWithin(t, outcomes, "the job's outcome")
			require.NoError(t, pool.stop())
			require.NoError(t, <-h.ctxErr, "the handler's context never ended")
			require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
		})
	}
}

// After a failed extension the heartbeat tries again at half the time
// left before the lease's deadline, not a whole ExtendEvery later: with
// ExtendEvery at two thirds of the lease, one failure let the deadline
// pass unextended, and another consumer leased the job while the handler
// still ran.
func TestJobPoolRetriesAFailedExtensionBeforeTheDeadline(t *testing.T) {
	const extendEvery, lease = 20 * time.Second, 30 * time.Second
	ctx := context.Background()
	j := startLongJob(t, "heartbeat-retry", fdbqueue.PoolOptions{LeaseDuration: lease, ExtendEvery: extendEvery})
	db, clock, q, h, outcomes, pool, task := j.db, j.clock, j.q, j.h, j.outcomes, j.pool, j.task
	armed := func() time.Duration { return nextArmed(t, clock) }
	first := task.Lease().Deadline
	require.Equal(t, extendEvery, armed())
	db.FailNextCommit(kv.ErrClientInvalidOp, false) // the first extension fails
	clock.Advance(extendEvery)
	require.Equal(t, (lease-extendEvery)/2, armed(), "half the time left")
	require.Equal(t, first, task.Lease().Deadline)
	clock.Advance((lease - extendEvery) / 2)
	require.Equal(t, extendEvery, armed(), "extended: every ExtendEvery again")
	require.Equal(t, clock.Now().Add(lease).UnixMicro(), task.Lease().Deadline.UnixMicro())
	clock.Advance(lease - extendEvery) // past the first deadline, before the next tick
	_, err := q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the job is still the pool's")
	close(h.finish)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.NoError(t, pool.stop())
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
}

func TestRetryExtension(t *testing.T) {
	for _, c := range []struct{ every, left, want time.Duration }{
		{20 * time.Second, 10 * time.Second, 5 * time.Second},
		{time.Second, 10 * time.Second, time.Second}, // at most ExtendEvery
		{time.Second, 3 * time.Millisecond, 1500 * time.Microsecond},
		{time.Second, 1500 * time.Microsecond, 1500 * time.Microsecond}, // the rest, not a spin
		{20 * time.Second, 0, time.Second},                              // past the deadline
		{20 * time.Second, -time.Minute, time.Second},
		{100 * time.Millisecond, -time.Minute, 100 * time.Millisecond},
	} {
		require.Equal(t, c.want, fdbqueue.RetryExtension(c.every, c.left), "every %v, left %v", c.every, c.left)
	}
}
