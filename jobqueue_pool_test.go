package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// A pool under injected faults: handlers that fail or panic are retried
// and dead-lettered after their last attempt; the others write their
// effect in the transaction that acks; every job ends acked once or dead
// once.
func TestJobPoolProcessesEveryJobOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := newDB(t, memdb.WithSeed(7), memdb.WithFaults(withReadFaults(memdb.Faults{
		NotCommitted: 0.03, UnknownApplied: 0.03, UnknownNotApplied: 0.03, TooOld: 0.01,
	})))
	q := mustJobQueue(t, "pool", fdbqueue.JobQueueConfig{MaxAttempts: 3, RetryBase: time.Millisecond, RetryMax: 4 * time.Millisecond})
	effects := mustSubspace(t, "test", "pool-effects")
	const n = 120
	jobs := make([]fdbqueue.Job, n)
	for i := range jobs {
		jobs[i] = fdbqueue.Job{Value: []byte(fmt.Sprint(i))}
	}
	_, err := q.AddBatch(ctx, db, jobs)
	require.NoError(t, err)

	// Job i: i%10 == 0 always fails (dead after 3 attempts), i%10 == 1
	// panics on its first attempt, i%10 == 2 fails on its first attempt.
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		var i int
		_, _ = fmt.Sscan(string(task.Value()), &i)
		l := task.Lease()
		switch {
		case i%10 == 0:
			return errors.New("always fails")
		case i%10 == 1 && l.Attempt == 1:
			panic("first attempt panics")
		case i%10 == 2 && l.Attempt == 1:
			return errors.New("first attempt fails")
		}
		key, _ := effects.Pack(tuple.Tuple{l.JobID[:], l.ID[:]})
		return db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(key, task.Value())
			return task.Ack(ctx, tr)
		})
	}
	var mu sync.Mutex
	counts := map[fdbqueue.Result]int{}
	var panics int
	runCtx, stop := context.WithCancel(ctx)
	opts := fdbqueue.PoolOptions{Workers: 6, LeaseDuration: 5 * time.Second, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		counts[o.Result]++
		var pe *fdbqueue.PanicError
		if errors.As(o.Err, &pe) {
			panics++
		}
		if counts[fdbqueue.Acked]+counts[fdbqueue.DeadLettered] == n {
			stop()
		}
	}}
	ran := make(chan error, 1)
	go func() { ran <- q.Run(runCtx, db, handler, opts) }()
	require.NoError(t, recvBounded(t, ran, workTimeout, "Run's return once every job was acked or dead"))

	require.Equal(t, n*9/10, counts[fdbqueue.Acked])
	require.Equal(t, n/10, counts[fdbqueue.DeadLettered])
	require.Equal(t, n/10*2+n/10*2, counts[fdbqueue.Retried]) // two retries of the always-failing, one each of the others
	require.Equal(t, n/10, panics)
	require.Zero(t, counts[fdbqueue.Failed]+counts[fdbqueue.LeaseLost]+counts[fdbqueue.Abandoned])
	require.Equal(t, fdbqueue.JobStats{Dead: n / 10}, mustStats(t, db, q))
	r, _ := effects.Range()
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, kvs, n*9/10, "one effect per acked job")
}

// A running handler's lease is extended, so nobody else leases the job
// however long it runs; at shutdown the pool lets it finish and acks it.
func TestJobPoolExtendsAndShutsDownGracefully(t *testing.T) {
	ctx := context.Background()
	j := startLongJob(t, "heartbeat", fdbqueue.PoolOptions{LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second})
	db, clock, q, h, outcomes, pool, task := j.db, j.clock, j.q, j.h, j.outcomes, j.pool, j.task
	first := task.Lease().Deadline
	for range 5 { // 50 s: past the first deadline
		require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
		clock.Advance(10 * time.Second)
	}
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the fifth extension is done
	require.True(t, task.Lease().Deadline.After(first.Add(39*time.Second)), "extended")
	_, err := q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "nobody else gets the job")

	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock)) // the shutdown deadline
	close(h.finish)
	require.NoError(t, pool.wait("Run did not return once its handler finished"))
	o := recvWithin(t, outcomes, "the job's outcome")
	require.Equal(t, fdbqueue.Acked, o.Result)
	require.NoError(t, o.Err)
	require.Equal(t, task.Lease().Deadline, o.Lease.Deadline, "the outcome's lease is the last extension, not the first lease")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// A handler still running at the shutdown deadline is abandoned: its
// context ends, nothing is acked, and the pool releases its job, which is
// due again at once with its attempt not counted. (Before Release, the
// job stayed leased until its lease expired, and that attempt counted.)
func TestJobPoolAbandonsAtTheDeadline(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "abandon", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("stuck")})

	started := make(chan struct{})
	handlerDone := make(chan error, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		close(started)
		<-ctx.Done()
		handlerDone <- ctx.Err()
		return ctx.Err()
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: 7 * time.Second, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, started, "the handler's start")
	pool.cancel()
	for nextArmed(t, clock) != 7*time.Second {
		// the heartbeat's timer, until the shutdown deadline's
	}
	clock.Advance(7 * time.Second)
	require.NoError(t, pool.wait("Run did not return at the shutdown deadline"))
	require.ErrorIs(t, recvWithin(t, handlerDone, "the handler's return"), context.Canceled)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.Equal(t, fdbqueue.Abandoned, o.Result)
	require.NoError(t, o.Err, "released")
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q), "due again at once, not leased")
	l := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 1, l.Attempt, "the abandoned attempt is not counted")
}

// With a negative ShutdownTimeout, Run returns as soon as its context
// ends: it abandons in-flight handlers at once (their contexts end) and
// does not wait for them. The handler here returns only once the test has
// seen Run return.
func TestJobPoolNegativeShutdownTimeoutReturnsAtOnce(t *testing.T) {
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "no-grace", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("stuck")})

	started, release := make(chan context.Context), make(chan struct{})
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		started <- ctx
		<-release
		return nil // would be acked, were the job not abandoned
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		ShutdownTimeout: -1, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	hctx := recvWithin(t, started, "the handler's start")
	pool.cancel()
	select { // the clock never moves: only an immediate return passes
	case err := <-pool.ran:
		require.NoError(t, err)
	case <-time.After(wakeTimeout):
		close(release)
		t.Fatal("Run waited for the in-flight handler despite a negative ShutdownTimeout")
	}
	require.ErrorIs(t, hctx.Err(), context.Canceled, "the abandoned handler's context ended")
	close(release)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.Equal(t, fdbqueue.Abandoned, o.Result)
	require.NoError(t, o.Err)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q), "nothing acked; the job released")
	require.Equal(t, 1, mustLease(t, db, q, 1, time.Minute)[0].Attempt, "the abandoned attempt is not counted")
}

func TestJobPoolBadOptions(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "pool-bad", fdbqueue.JobQueueConfig{})
	h := func(context.Context, *fdbqueue.Task) error { return nil }
	ctx := context.Background()
	require.ErrorIs(t, q.Run(ctx, db, nil, fdbqueue.PoolOptions{}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, nil, h, fdbqueue.PoolOptions{}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{Workers: -1}), fdbqueue.ErrInvalidArgument)
	// ABSOLUTE_MAX_WATCHES, fdbclient/ClientKnobs.cpp: more workers could
	// not all wait on a watch, and math.MaxInt of them exhausted memory.
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{Workers: fdbqueue.MaxPoolWorkers + 1}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{Workers: math.MaxInt}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{LeaseDuration: time.Second, ExtendEvery: time.Second}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{LeaseDuration: time.Microsecond}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{ExtendEvery: -time.Second}), fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{ReleaseTimeout: -time.Second}), fdbqueue.ErrInvalidArgument)
}

// A lease lost while its handler runs (here the job's record is removed
// behind the pool's back) ends the handler's context at the next
// heartbeat, and the job's outcome is LeaseLost: nothing is acked.
func TestJobPoolLostLeaseCancelsHandler(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "lost", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("doomed"), Priority: 3})

	started := make(chan *fdbqueue.Task)
	handlerErr := make(chan error, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		started <- task
		<-ctx.Done()
		handlerErr <- ctx.Err()
		return ctx.Err()
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
		Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	task := recvWithin(t, started, "the handler's start")
	require.Equal(t, 10*time.Second, nextArmed(t, clock)) // the heartbeat sleeps
	l := task.Lease()
	key, err := q.Subspace().Pack(tuple.Tuple{"q", l.Deadline.UnixMicro(), -int64(l.Priority), l.JobID[:]})
	require.NoError(t, err)
	v, err := getKey(ctx, db, key)
	require.NoError(t, err)
	require.NotNil(t, v, "the record is where the documented layout puts it")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(key); return nil }))
	clock.Advance(10 * time.Second)
	require.ErrorIs(t, recvWithin(t, handlerErr, "the handler's return once its lease was lost"), context.Canceled)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.Equal(t, fdbqueue.LeaseLost, o.Result)
	require.ErrorIs(t, o.Err, fdbqueue.ErrLeaseLost)
	require.NoError(t, pool.stop())
}

// A handler that ends its goroutine with runtime.Goexit (t.FailNow in a
// test's handler, say) fails its job like a panic: the job is nacked, the
// worker goes on, and Run keeps running until its context ends. (Before,
// the worker's goroutine died with it: Run returned nil with its context
// still live when that was the last worker, and the job's heartbeat went
// on extending its lease for as long as Run ran.)
func TestJobPoolHandlerGoexitFailsTheJob(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "goexit", fdbqueue.JobQueueConfig{RetryBase: time.Millisecond, RetryMax: time.Millisecond})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("exits")})
	outcomes := make(chan fdbqueue.Outcome, 2)
	pool := startPool(t, q, db, func(ctx context.Context, task *fdbqueue.Task) error {
		if task.Lease().Attempt == 1 {
			runtime.Goexit()
		}
		return nil
	}, fdbqueue.PoolOptions{Workers: 1, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	for _, want := range []fdbqueue.Result{fdbqueue.Retried, fdbqueue.Acked} {
		select {
		case o := <-outcomes:
			require.Equal(t, want, o.Result)
			if want == fdbqueue.Retried {
				require.ErrorContains(t, o.Err, "Goexit")
			}
		case err := <-pool.ran:
			require.FailNow(t, "Run returned before its context ended", "err: %v", err)
		case <-time.After(wakeTimeout):
			require.FailNow(t, "no outcome", "want %v", want)
		}
	}
	require.NoError(t, pool.stop())
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// An OnOutcome that ends its goroutine with runtime.Goexit (t.FailNow in
// a test's callback, say) ends that call only: the pool logs it and the
// worker goes on to the next job, as after a handler's Goexit
// (TestJobPoolHandlerGoexitFailsTheJob). The job was settled before the
// call (acked here), so no lease is left behind. Before, OnOutcome ran
// on the worker's goroutine, which died with it: the pool ran with one
// worker fewer, and told nobody; with one worker, Run returned nil with
// its context still live, the second job never processed.
func TestJobPoolOnOutcomeGoexitKeepsTheWorker(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "outcome-goexit", fdbqueue.JobQueueConfig{Choice: 1})
	first := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("first")})
	second := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("second")})
	var logs syncBuffer
	reported := make(chan fdbqueue.Outcome, 2)
	var calls atomic.Int64
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return nil },
		fdbqueue.PoolOptions{Workers: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) {
			reported <- o
			if calls.Add(1) == 1 {
				runtime.Goexit()
			}
		}})
	for _, want := range []fdbqueue.JobID{first.ID, second.ID} {
		select {
		case o := <-reported:
			require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
			require.Equal(t, want, o.Lease.JobID)
		case err := <-pool.ran:
			require.FailNow(t, "Run returned before its context ended: its one worker ended with the callback", "err: %v", err)
		case <-time.After(wakeTimeout):
			require.FailNow(t, "the second job was not processed")
		}
	}
	require.NoError(t, pool.stop())
	require.Equal(t, int64(2), calls.Load())
	require.Contains(t, logs.String(), "OnOutcome called runtime.Goexit")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q), "both acked, nothing left leased")
}

// A panic in OnOutcome is not recovered, on its goroutine of its own as
// on the worker's before: the program crashes, and the trace names the
// callback's frame, where the panic was raised (the re-raise in report
// runs on top of it). Run in a child process, which the panic ends.
func TestJobPoolOnOutcomePanicIsNotRecovered(t *testing.T) {
	if os.Getenv("FDBQUEUE_ONOUTCOME_PANIC") == "1" {
		db := newDB(t)
		q := mustJobQueue(t, "outcome-panic", fdbqueue.JobQueueConfig{})
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return nil },
			fdbqueue.PoolOptions{Workers: 1, Logger: quietLog, OnOutcome: func(fdbqueue.Outcome) { panicInOnOutcome() }})
		_ = pool.wait("the panic did not end the process")
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJobPoolOnOutcomePanicIsNotRecovered$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FDBQUEUE_ONOUTCOME_PANIC=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child exited: %s", out)
	require.Contains(t, string(out), "panic: outcome callback panicked")
	require.Contains(t, string(out), "panicInOnOutcome", "the trace names the callback's frame")
	require.NotContains(t, string(out), "Goexit")
}

// panicInOnOutcome is a frame for TestJobPoolOnOutcomePanicIsNotRecovered
// to find in the trace.
//
//go:noinline
func panicInOnOutcome() { panic("outcome callback panicked") }

// The pool logs where the queue does (WithLogger) unless PoolOptions.Logger
// says otherwise: a library writes to no log of the application's unasked.
// A dead letter is logged once: by the queue, or by the pool too when it
// has a logger of its own.
func TestPoolLogsWhereTheQueueDoes(t *testing.T) {
	for _, own := range []bool{false, true} {
		db := newDB(t)
		var queueLog, poolLog syncBuffer
		q := mustJobQueue(t, "pool-log", fdbqueue.JobQueueConfig{MaxAttempts: 1},
			fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&queueLog, nil))), fdbqueue.WithQueueName("emails"))
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("fails")})
		opts := fdbqueue.PoolOptions{Workers: 1}
		if own {
			opts.Logger = slog.New(slog.NewTextHandler(&poolLog, nil))
		}
		outcomes := make(chan fdbqueue.Outcome, 1)
		opts.OnOutcome = func(o fdbqueue.Outcome) { outcomes <- o }
		run := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return errors.New("boom") }, opts)
		require.Equal(t, fdbqueue.DeadLettered, recvWithin(t, outcomes, "the job's outcome").Result)
		require.NoError(t, run.stop())
		pool := &queueLog
		if own {
			pool = &poolLog
			require.NotContains(t, queueLog.String(), "job pool started", "the pool's own logger")
		}
		require.Contains(t, pool.String(), "job pool started")
		require.Contains(t, pool.String(), "job pool stopped")
		require.Equal(t, 1, strings.Count(queueLog.String(), "job dead-lettered"), queueLog.String())
		if own {
			require.Equal(t, 1, strings.Count(poolLog.String(), "job dead-lettered"), poolLog.String())
		}
		// Every line of the pool names the queue and starts as the
		// queue's own do, whichever logger it went to; a dead letter
		// names its reason under one key in both.
		for _, line := range strings.Split(strings.TrimSpace(pool.String()), "\n") {
			require.Contains(t, line, "fdbqueue.queue=emails", line)
			require.Contains(t, line, `msg="fdbqueue: `, line)
		}
		for _, l := range []*syncBuffer{&queueLog, &poolLog} {
			for _, line := range strings.Split(l.String(), "\n") {
				if strings.Contains(line, "job dead-lettered") {
					require.Contains(t, line, "reason=boom", line)
				}
			}
		}
	}
}

// The Logger given WithLogger and as PoolOptions.Logger, as an application
// passes its one logger everywhere, is one log: a dead letter is one line in
// it, not the queue's and the pool's.
func TestPoolSharingTheQueuesLoggerLogsADeadLetterOnce(t *testing.T) {
	db := newDB(t)
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	q := mustJobQueue(t, "pool-same-log", fdbqueue.JobQueueConfig{MaxAttempts: 1}, fdbqueue.WithLogger(logger))
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("fails")})
	outcomes := make(chan fdbqueue.Outcome, 1)
	run := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return errors.New("boom") },
		fdbqueue.PoolOptions{Workers: 1, Logger: logger, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	require.Equal(t, fdbqueue.DeadLettered, (<-outcomes).Result)
	require.NoError(t, run.stop())
	require.Equal(t, 1, strings.Count(logs.String(), "job dead-lettered"), logs.String())
	require.Equal(t, 1, strings.Count(logs.String(), "job pool started"), logs.String())
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		require.Equal(t, 1, strings.Count(line, "fdbqueue.queue="), "the queue's attribute once: %s", line)
	}
}

// A handler's panic is logged with its stack, as its PanicError holds it,
// before its outcome is reported: the pool logged it after handing the end
// to the worker, so a test that stopped the pool at the outcome missed the
// line about one run in a hundred.
func TestPoolLogsAPanicsStack(t *testing.T) {
	db := newDB(t)
	var logs syncBuffer
	q := mustJobQueue(t, "pool-panic-log", fdbqueue.JobQueueConfig{MaxAttempts: 1})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("panics")})
	outcomes := make(chan fdbqueue.Outcome, 1)
	var loggedFirst atomic.Bool // the line was logged before the outcome was reported
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { panic("kaboom") },
		fdbqueue.PoolOptions{Workers: 1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			OnOutcome: func(o fdbqueue.Outcome) {
				loggedFirst.Store(strings.Contains(logs.String(), "handler panicked"))
				outcomes <- o
			}})
	out := recvWithin(t, outcomes, "the job's outcome")
	require.NoError(t, pool.stop())
	var pe *fdbqueue.PanicError
	require.ErrorAs(t, out.Err, &pe)
	require.True(t, loggedFirst.Load(), "the panic is logged before its outcome is reported")
	require.Contains(t, logs.String(), "stack=", "the stack is logged")
	require.Contains(t, logs.String(), "TestPoolLogsAPanicsStack", "the stack names the handler's caller chain")
}

// A lease error no retry can cure stops the pool, and Run returns it: here
// a key in the jobs' range that is no job, first in line with Choice 1
// (ErrForeignKey). Before, each worker logged it and tried again every
// second, forever.
func TestPoolStopsOnAForeignKey(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "pool-foreign", fdbqueue.JobQueueConfig{Choice: 1})
	plantForeign(t, db, q.Subspace(), tuple.Tuple{"q", int64(0), "not a job"}, []byte("x"))
	var handled atomic.Int64
	var logs syncBuffer
	pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { handled.Add(1); return nil },
		fdbqueue.PoolOptions{Workers: 3, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := pool.wait("Run did not stop on a lease error no retry can cure")
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.Zero(t, handled.Load())
	require.Equal(t, 1, strings.Count(logs.String(), "lease failed for good"), "logged once, not once per worker:\n%s", logs.String())
}
