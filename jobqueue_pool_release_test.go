package fdbqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A handler that ignores its context past ShutdownTimeout: Run abandons
// it, stops its heartbeat, releases its job and returns without waiting
// for it. The job (MaxAttempts 1) is due again at once, its attempt not
// counted: another consumer leases it as attempt 1 (with the attempt
// counted, that Lease would have dead-lettered it) and acks it while the
// abandoned handler still runs, the overlap Run's documentation warns of.
// The release goes through the lease as of its last extension. Nothing
// reports the released lease as lost, and the abandoned run's late
// Task.Ack fails with ErrLeaseLost.
func TestJobPoolReleasesTheJobOfAHandlerIgnoringItsContext(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "release-abandoned", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("stubborn")})

	started, unblock := make(chan *fdbqueue.Task), make(chan struct{})
	lateAck := make(chan error, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	var logs syncBuffer
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		started <- task
		<-unblock // ignores ctx
		lateAck <- db.Transact(context.Background(), func(tr kv.Transaction) error { return task.Ack(ctx, tr) })
		return nil
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	task := recvWithin(t, started, "the handler's start")
	first := task.Lease()
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	clock.Advance(10 * time.Second)
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the first extension is done
	require.NotEqual(t, first.Deadline, task.Lease().Deadline, "extended: the record moved")

	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock)) // the shutdown deadline
	clock.Advance(7 * time.Second)
	require.NoError(t, pool.wait("Run waited for a handler that ignores its context"))
	var o fdbqueue.Outcome
	select { // reported before Run returned
	case o = <-outcomes:
	default:
		t.Fatal("Run returned before the abandoned job's outcome was reported")
	}
	require.Equal(t, fdbqueue.Abandoned, o.Result)
	require.NoError(t, o.Err, "released")
	require.Equal(t, fdbqueue.DefaultReleaseTimeout, nextArmed(t, clock), "Run's bound on the release")
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q), "due again at once")

	other := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, added.ID, other.JobID)
	require.Equal(t, 1, other.Attempt, "the abandoned attempt is not counted")
	clock.Advance(10 * time.Second) // a heartbeat still running would extend now
	require.NoError(t, q.Ack(ctx, db, other), "nothing touched the other consumer's lease")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
	require.Empty(t, clock.Armed, "the heartbeat stopped: it armed no timer after the shutdown")
	require.NotContains(t, logs.String(), "lease lost")
	require.Contains(t, logs.String(), "abandoned job released")
	close(unblock)
	require.ErrorIs(t, recvWithin(t, lateAck, "the abandoned run's ack"), fdbqueue.ErrLeaseLost, "the abandoned run's ack in its own transaction")
}

// A lease whose commit is in flight when the pool stops (its worker was
// in LeaseWait, woken by the job's vesting time) is settled under that
// lease's operation ID, and the job is due, leased to nobody, its
// attempt not counted, whether the interrupted commit landed before the
// settling call (which replays it, and the pool releases the job: due
// again at once) or after it (it then conflicts, having read the journal
// record the settling call wrote; the job was never leased and keeps its
// due time, TestJobPoolSettlingLeavesTheQueueOrderAlone). Before, the
// job stayed leased to nobody until its lease expired, its one attempt
// spent. The commits are held and let go with memdb's
// HoldNextCommitLate, which reproduces FoundationDB's client: a
// cancelled commit request still lands (RYWImpl::commit,
// fdbclient/ReadYourWrites.actor.cpp).
func TestJobPoolSettlesALeaseInFlightAtShutdown(t *testing.T) {
	for _, landsFirst := range []bool{true, false} {
		name := "interrupted lease lands after the settling read"
		if !landsFirst {
			name = "interrupted lease lands after the settling commit"
		}
		t.Run(name, func(t *testing.T) {
			db := newDB(t)
			clock := newArmedClock()
			q := mustJobQueue(t, "settle-lease", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
			added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("late"), Delay: time.Minute})

			handled := make(chan struct{}, 1)
			pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { handled <- struct{}{}; return nil },
				fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, Logger: quietLog})
			require.Greater(t, nextArmed(t, clock), time.Minute-time.Second, "LeaseWait sleeps until the job is due")
			held1, land := db.HoldNextCommitLate()
			clock.Advance(time.Minute + time.Millisecond)
			recvWithin(t, held1, "the worker's lease commit in flight")
			held2, settle := db.HoldNextCommitLate()
			pool.cancel()
			select {
			case <-held2: // the settling Lease's commit is in flight
			case <-time.After(wakeTimeout):
				land()
				t.Fatal("the pool did not settle the interrupted lease")
			}
			if landsFirst {
				land()
				settle()
			} else {
				settle()
			}
			require.NoError(t, pool.wait("Run did not return once the settling commit landed"))
			if !landsFirst {
				land()
			}
			require.Empty(t, handled, "no handler ran")
			want := fdbqueue.JobStats{Queued: 1, Due: 1} // released: due again at once
			if !landsFirst {
				want.OldestDue = time.Millisecond // never leased: due since its own time
			}
			require.Equal(t, want, mustStats(t, db, q), "due, leased to nobody")
			l := mustLease(t, db, q, 1, time.Minute)[0]
			require.Equal(t, added.ID, l.JobID)
			require.Equal(t, 1, l.Attempt, "the interrupted lease's attempt is not counted")
		})
	}
}

// A lease in flight at shutdown whose commit has not landed when the
// pool settles it (it lands later, and conflicts) took nothing: settling
// must touch no job. Two jobs are due, x before y; the worker's lease of
// x (Choice 1: the first due) is in flight when the pool stops. Before,
// the settling call was a Lease under the same ID: finding no record, it
// leased x anew and the pool released it, so x became due at the
// shutdown's time, behind y, which fell due after it. Now it records
// under the ID that nothing was leased: x keeps its due time and its
// place, ahead of y, and neither job's attempt is counted. The late
// commit must conflict for that: a cancelled commit request still lands
// (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp; memdb's
// HoldNextCommitLate), and the resolver fails it because it read the
// record key the settling call wrote after its read version
// (fdbserver/Resolver.actor.cpp).
func TestJobPoolSettlingLeavesTheQueueOrderAlone(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "settle-order", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1, MaxAttempts: 1})
	x := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), Delay: time.Minute})
	y := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y"), Delay: 2 * time.Minute})

	var logs syncBuffer
	handled := make(chan struct{}, 1)
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { handled <- struct{}{}; return nil },
		fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.Greater(t, nextArmed(t, clock), time.Minute-time.Second, "LeaseWait sleeps until x is due")
	held, land := db.HoldNextCommitLate()
	clock.Advance(2*time.Minute + time.Millisecond) // both due, x first
	select {
	case <-held: // the worker's lease of x is in flight
	case <-time.After(wakeTimeout):
		t.Fatal("the worker did not lease")
	}
	require.NoError(t, pool.stop())
	land() // the interrupted lease's commit: it read the record key the settling call wrote, and conflicts
	require.Empty(t, handled, "no handler ran")
	require.Equal(t, fdbqueue.JobStats{Queued: 2, Due: 2, OldestDue: time.Minute + time.Millisecond}, mustStats(t, db, q),
		"both due, leased to nobody; x due since its own time, a minute before now")
	require.NotContains(t, logs.String(), "released a job leased as the pool stopped", "nothing was leased to release")
	ls := mustLease(t, db, q, 2, time.Minute) // in queue order
	require.Len(t, ls, 2)
	require.Equal(t, []fdbqueue.JobID{x.ID, y.ID}, []fdbqueue.JobID{ls[0].JobID, ls[1].JobID}, "x is still due before y")
	require.Equal(t, []int{1, 1}, []int{ls[0].Attempt, ls[1].Attempt}, "no attempt counted")
}

// A handler that returns Snooze (wrapped or not) has its job released:
// due again after the delay, its attempt not counted (a job of
// one attempt snoozed twice is then acked, not dead-lettered), the
// outcome Snoozed with the handler's error, and nothing logged as a
// failure.
func TestJobPoolSnooze(t *testing.T) {
	db := newDB(t)
	clock := newFakeClock()
	var logs syncBuffer
	q := mustJobQueue(t, "pool-snooze", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("later")})
	var runs atomic.Int64
	outcomes := make(chan fdbqueue.Outcome, 4)
	pool := startPool(t, q, db, func(_ context.Context, task *fdbqueue.Task) error {
		switch runs.Add(1) {
		case 1:
			return fdbqueue.Snooze(time.Minute)
		case 2:
			return fmt.Errorf("not yet: %w", fdbqueue.Snooze(time.Minute))
		}
		return nil
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	for i := range 2 {
		o := recvWithin(t, outcomes, fmt.Sprintf("run %d's outcome", i+1))
		require.Equal(t, fdbqueue.Snoozed, o.Result, "run %d", i+1)
		var sz *fdbqueue.SnoozeError
		require.ErrorAs(t, o.Err, &sz)
		require.Equal(t, time.Minute, sz.Delay)
		require.Equal(t, 1, o.Lease.Attempt, "the snoozed attempt was not counted")
		st := mustStats(t, db, q)
		require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, fdbqueue.JobStats{Queued: st.Queued, Delayed: st.Delayed})
		clock.Advance(time.Minute - time.Second)
		require.Equal(t, int64(1), mustStats(t, db, q).Delayed, "not due before the minute (Stats counts in 1 s buckets)")
		clock.Advance(time.Second + time.Microsecond) // the sleeping worker's timer: the vesting time's next µs
	}
	o := recvWithin(t, outcomes, "run 3's outcome")
	require.Equal(t, fdbqueue.Acked, o.Result)
	require.Equal(t, 1, o.Lease.Attempt)
	require.NoError(t, pool.stop())
	require.Equal(t, int64(3), runs.Load())
	require.Zero(t, mustStats(t, db, q).Dead)
	require.NotContains(t, logs.String(), "handler failed")
	require.Equal(t, "snoozed", fdbqueue.Snoozed.String())
}

// A lease whose commit may have committed while the pool runs
// (commit_unknown_result_fatal here, a transaction timeout on FDB) is
// settled at once by its ID: the worker processes the job it took, or one
// it leases now, instead of leaving the job hidden under a lease nobody
// holds until it expires (an attempt used up besides).
func TestJobPoolSettlesAMaybeCommittedLease(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			db := newDB(t)
			clock := newFakeClock()
			var logs syncBuffer
			q := mustJobQueue(t, "pool-settle", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
			mustAdd(t, db, q, fdbqueue.Job{Value: []byte("once")})
			db.FailNextCommit(kv.ErrCommitUnknownResultFatal, applied) // the pool's first lease
			outcomes := make(chan fdbqueue.Outcome, 2)
			pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return nil },
				fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second,
					Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
			var o fdbqueue.Outcome
			select {
			case o = <-outcomes:
			case <-time.After(10 * time.Second): // a guard: the fake clock never moves, so without the settle the job stays hidden
				t.Fatal("the job was not processed: the worker is waiting to retry its lease, the job hidden under it")
			}
			require.NoError(t, pool.stop())
			require.Equal(t, fdbqueue.Acked, o.Result)
			require.Equal(t, "once", string(o.Lease.Value))
			require.Equal(t, 1, o.Lease.Attempt, "one attempt, counted once")
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q), "acked: nothing left leased or dead")
			require.NotContains(t, logs.String(), "lease failed")
		})
	}
}

// An ack under way when ShutdownTimeout passes (its handler finished in
// time, its transaction not yet committed) is finished, not cut short by
// the abandonment: the outcome is Acked and the job is gone. Before, the
// abandonment cancelled the ack's context, the outcome was Failed and the
// job stayed leased to nobody until its lease expired, its attempt spent:
// what the release at shutdown exists to avoid. (Found by tools/sim's
// RunPoolShutdowns.) The pool's transactions are held before their commit
// from the moment the handler is told to finish, and let go once the pool
// has abandoned its in-flight jobs (its log line says so).
func TestJobPoolFinishesAnAckUnderWayAtTheShutdownDeadline(t *testing.T) {
	db := &holdingDB{Database: newDB(t), held: make(chan struct{}), release: make(chan struct{})}
	clock := newArmedClock()
	q := mustJobQueue(t, "ack-at-deadline", fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("done in time")})

	h := newBlockingHandler()
	outcomes := make(chan fdbqueue.Outcome, 1)
	abandoned := make(chan struct{}, 1)
	logs := &lineSignal{match: "abandoned in-flight jobs", seen: abandoned}
	pool := startPool(t, q, db, h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second, Logger: slog.New(slog.NewTextHandler(logs, nil)),
		OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, h.started, "the handler's start")
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock)) // the shutdown deadline
	db.armed.Store(true)
	close(h.finish)
	recvWithin(t, db.held, "the ack's transaction held before its commit")
	clock.Advance(7 * time.Second) // the deadline passes
	select {
	case <-abandoned:
	case <-time.After(wakeTimeout):
		close(db.release)
		t.Fatal("the pool did not abandon its in-flight jobs at the deadline")
	}
	close(db.release)
	require.NoError(t, pool.wait("Run did not return"))
	o := recvWithin(t, outcomes, "the job's outcome")
	require.Equal(t, fdbqueue.Acked, o.Result, "the ack under way was finished: %v", o.Err)
	require.NoError(t, o.Err)
	db.armed.Store(false)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q), "acked: nothing left leased")
}

// holdingDB holds every transaction, once armed, after its function ran
// and before its commit, until release is closed or its context ends
// (then it fails with the context's error, nothing committed); held is
// closed when the first is held.
type holdingDB struct {
	kv.Database
	armed    atomic.Bool
	heldOnce sync.Once
	held     chan struct{}
	release  chan struct{}
}

func (h *holdingDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if !h.armed.Load() {
		return h.Database.Transact(ctx, fn)
	}
	return h.Database.Transact(ctx, func(tr kv.Transaction) error {
		if err := fn(tr); err != nil {
			return err
		}
		h.heldOnce.Do(func() { close(h.held) })
		select {
		case <-h.release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
}

// lineSignal is a log writer that sends on seen when a line contains match.
type lineSignal struct {
	match string
	seen  chan struct{}
}

func (w *lineSignal) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.match) {
		select {
		case w.seen <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

// When the release of an abandoned job outlasts the pool's ReleaseTimeout,
// Run cancels it and waits for its worker before it returns: the job's
// outcome is reported before Run returns, never after (an OnOutcome that
// sends on a channel the caller closes once Run returned would panic).
// The release's commit, cancelled in flight, lands later, as FDB's
// client lets a cancelled commit request land (RYWImpl::commit,
// fdbclient/ReadYourWrites.actor.cpp), and the job is due again.
func TestJobPoolWaitsForItsWorkersPastTheReleaseTimeout(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "release-timeout", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("stubborn")})

	h := newBlockingHandler() // ignores ctx
	defer close(h.finish)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second, Logger: quietLog,
		OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, h.started, "the handler's start")
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock)) // the shutdown deadline
	held, land := db.HoldNextCommitLate()                // the release's commit
	clock.Advance(7 * time.Second)
	recvWithin(t, held, "the release's commit in flight")
	require.Equal(t, fdbqueue.DefaultReleaseTimeout, nextArmed(t, clock), "Run's bound on the release")
	clock.Advance(fdbqueue.DefaultReleaseTimeout)
	require.NoError(t, pool.wait("Run did not return after ReleaseTimeout"))
	select {
	case o := <-outcomes:
		require.Equal(t, fdbqueue.Abandoned, o.Result)
		require.ErrorIs(t, o.Err, context.Canceled, "the release was cancelled")
	default:
		t.Fatal("Run returned before its worker reported the abandoned job's outcome")
	}
	land()
	db.AwaitLateLandings()
	st := mustStats(t, db, q)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1, OldestDue: st.OldestDue}, st, "the cancelled release landed")
}
