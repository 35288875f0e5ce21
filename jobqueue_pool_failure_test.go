package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

var (
	errMalformed = errors.New("malformed payload")
	errBusy      = errors.New("upstream busy")
)

// A handler's NoRetry and RetryAfter, as they are, wrapped, or wrapping
// each other (the outermost decides), and Snooze inside NoRetry. The
// queue's backoff is an hour (30 to 60 minutes with jitter), so a job due
// again after a minute, or at once, was nacked with the handler's delay;
// every job has attempts to spare but the one nacked on its last. Each
// case runs one job in a pool of one worker: the first run returns the
// case's error, a second (if the job is due again) returns nil. Without
// NoRetry the jobs were retried after the backoff; without RetryAfter
// they waited the backoff, not the handler's delay.
func TestJobPoolNoRetryAndRetryAfter(t *testing.T) {
	for _, c := range []struct {
		name        string
		err         error
		maxAttempts int
		result      fdbqueue.Result
		again       time.Duration // Retried: when the job is due again (0: at once)
		reason      string
		log         string // the handler's failure line
	}{
		{"NoRetry", fdbqueue.NoRetry(errMalformed), 5, fdbqueue.DeadLettered, 0,
			"no retry: malformed payload", "handler failed with NoRetry"},
		{"NoRetry wrapped", fmt.Errorf("job 7: %w", fdbqueue.NoRetry(errMalformed)), 5, fdbqueue.DeadLettered, 0,
			"job 7: no retry: malformed payload", "handler failed with NoRetry"},
		{"NoRetry(nil)", fdbqueue.NoRetry(nil), 5, fdbqueue.DeadLettered, 0, "no retry", "handler failed with NoRetry"},
		{"RetryAfter", fdbqueue.RetryAfter(time.Minute, errBusy), 5, fdbqueue.Retried, time.Minute,
			"retry after 1m0s: upstream busy", "handler failed with RetryAfter"},
		{"RetryAfter wrapped", fmt.Errorf("call: %w", fdbqueue.RetryAfter(time.Minute, errBusy)), 5, fdbqueue.Retried, time.Minute,
			"call: retry after 1m0s: upstream busy", "handler failed with RetryAfter"},
		{"RetryAfter 0 is at once", fdbqueue.RetryAfter(0, errBusy), 5, fdbqueue.Retried, 0,
			"retry after 0s: upstream busy", "handler failed with RetryAfter"},
		{"RetryAfter negative is at once", fdbqueue.RetryAfter(-time.Hour, errBusy), 5, fdbqueue.Retried, 0,
			"retry after -1h0m0s: upstream busy", "handler failed with RetryAfter"},
		{"RetryAfter on the last attempt", fdbqueue.RetryAfter(time.Minute, errBusy), 1, fdbqueue.DeadLettered, 0,
			"retry after 1m0s: upstream busy", "handler failed with RetryAfter"},
		{"NoRetry outside RetryAfter", fdbqueue.NoRetry(fdbqueue.RetryAfter(time.Minute, errBusy)), 5, fdbqueue.DeadLettered, 0,
			"no retry: retry after 1m0s: upstream busy", "handler failed with NoRetry"},
		{"RetryAfter outside NoRetry", fdbqueue.RetryAfter(time.Minute, fdbqueue.NoRetry(errMalformed)), 5, fdbqueue.Retried, time.Minute,
			"retry after 1m0s: no retry: malformed payload", "handler failed with RetryAfter"},
		{"NoRetry outside Snooze", fdbqueue.NoRetry(fmt.Errorf("gave up: %w", fdbqueue.Snooze(time.Minute))), 5, fdbqueue.DeadLettered, 0,
			"no retry: gave up: fdbqueue: job snoozed for 1m0s", "handler failed with NoRetry"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			clock := newFakeClock()
			var logs syncBuffer
			q := mustJobQueue(t, "pool-verdicts", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour})
			job := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: c.maxAttempts, UniqueKey: "u"})
			var runs atomic.Int64
			outcomes := make(chan fdbqueue.Outcome, 2)
			pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error {
				if runs.Add(1) == 1 {
					return c.err
				}
				return nil
			}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
			o := recvWithin(t, outcomes, "the job's outcome")
			require.Equal(t, c.result, o.Result, "outcome error: %v", o.Err)
			require.Same(t, c.err, o.Err, "Outcome.Err is the handler's error")
			require.Equal(t, 1, o.Lease.Attempt)
			st := mustStats(t, db, q)
			switch {
			case c.result == fdbqueue.DeadLettered:
				require.Equal(t, fdbqueue.JobStats{Dead: 1}, st)
				ds, err := q.ListDead(context.Background(), db, nil, 10)
				require.NoError(t, err)
				require.Len(t, ds, 1)
				require.Equal(t, job.ID, ds[0].ID)
				require.Equal(t, c.reason, ds[0].Reason)
				require.Equal(t, 1, ds[0].Attempts, "dead after its one attempt")
				// The dead job gave up its unique key, as one dead after its last attempt does.
				require.False(t, mustAdd(t, db, q, fdbqueue.Job{Value: []byte("next"), UniqueKey: "u", Delay: time.Hour}).Duplicate)
			case c.again > 0:
				require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, fdbqueue.JobStats{Queued: st.Queued, Delayed: st.Delayed})
				clock.Advance(c.again - time.Second)
				require.Equal(t, int64(1), mustStats(t, db, q).Delayed, "not due before the handler's delay (Stats counts in 1 s buckets)")
				clock.Advance(time.Second + time.Microsecond) // the sleeping worker's timer: the vesting time's next µs
			}
			if c.result == fdbqueue.Retried {
				// Due now, not after the hour's backoff: the clock does not
				// move again, and the job runs a second time.
				o = recvWithin(t, outcomes, "the job's next run, after the handler's delay")
				require.Equal(t, fdbqueue.Acked, o.Result, "outcome error: %v", o.Err)
				require.Equal(t, 2, o.Lease.Attempt, "the failed attempt was counted")
				require.Equal(t, c.reason, o.Lease.Reason)
			}
			require.NoError(t, pool.stop())
			require.Contains(t, logs.String(), c.log)
			if c.result == fdbqueue.DeadLettered {
				require.Equal(t, int64(1), runs.Load())
			} else {
				require.Equal(t, int64(2), runs.Load())
			}
		})
	}
}

// The errors' text, Unwrap and errors.As.
func TestNoRetryAndRetryAfterErrors(t *testing.T) {
	err := fmt.Errorf("x: %w", fdbqueue.NoRetry(errMalformed))
	var nr *fdbqueue.NoRetryError
	require.ErrorAs(t, err, &nr)
	require.ErrorIs(t, err, errMalformed)
	require.Equal(t, "x: no retry: malformed payload", err.Error())
	err = fmt.Errorf("x: %w", fdbqueue.RetryAfter(2*time.Second, errBusy))
	var ra *fdbqueue.RetryAfterError
	require.ErrorAs(t, err, &ra)
	require.Equal(t, 2*time.Second, ra.Delay)
	require.ErrorIs(t, err, errBusy)
	require.Equal(t, "retry after 2s", fdbqueue.RetryAfter(2*time.Second, nil).Error())
	require.NoError(t, errors.Unwrap(fdbqueue.NoRetry(nil)))
}

// timeoutHandler blocks until its context ends, and returns its error;
// it sends its context's deadline on started as it starts.
func timeoutHandler(started chan<- time.Time) fdbqueue.Handler {
	return func(ctx context.Context, _ *fdbqueue.Task) error {
		d, _ := ctx.Deadline()
		started <- d
		<-ctx.Done()
		return ctx.Err()
	}
}

// A handler that outlives PoolOptions.HandlerTimeout has its context end
// with DeadlineExceeded at the timeout on the queue's clock (ctx.Deadline
// says when); returning then is a failed attempt: the job is nacked with
// the backoff, its attempt counted, Outcome Retried with the handler's
// error, and the log says it timed out. The lease was extended while the
// handler ran (its last extension is the outcome's deadline), and the
// pool abandoned nothing: it goes on and stops as usual.
func TestJobPoolHandlerTimeout(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	var logs syncBuffer
	q := mustJobQueue(t, "pool-timeout", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("slow"), MaxAttempts: 3})
	started := make(chan time.Time, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	start := clock.Now()
	pool := startPool(t, q, db, timeoutHandler(started), fdbqueue.PoolOptions{Workers: 1,
		LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second, HandlerTimeout: 25 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	deadline := recvWithin(t, started, "the handler's start")
	require.Equal(t, start.Add(25*time.Second).UnixMicro(), deadline.UnixMicro(), "the handler's deadline, on the queue's clock")
	require.Equal(t, 25*time.Second, nextArmed(t, clock), "the handler's limit")
	require.Equal(t, 10*time.Second, nextArmed(t, clock), "the heartbeat")
	for range 2 {
		clock.Advance(10 * time.Second)
		require.Equal(t, 10*time.Second, nextArmed(t, clock), "the heartbeat extended the lease and sleeps again")
	}
	select {
	case o := <-outcomes:
		t.Fatalf("settled before the timeout: %v", o)
	default:
	}
	clock.Advance(5 * time.Second) // 25 s: the limit
	o := recvWithin(t, outcomes, "the outcome at HandlerTimeout")
	require.Equal(t, fdbqueue.Retried, o.Result, "outcome error: %v", o.Err)
	require.ErrorIs(t, o.Err, context.DeadlineExceeded)
	require.Equal(t, 1, o.Lease.Attempt)
	require.Equal(t, start.Add(20*time.Second+30*time.Second).UnixMicro(), o.Lease.Deadline.UnixMicro(), "extended at 10 s and 20 s")
	st := mustStats(t, db, q)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, fdbqueue.JobStats{Queued: st.Queued, Delayed: st.Delayed, Leased: st.Leased},
		"nacked after the backoff, not released (due at once)")
	require.NoError(t, pool.stop())
	require.Contains(t, logs.String(), "ran past HandlerTimeout")
	require.NotContains(t, logs.String(), "abandoned")
	// The attempt was counted: the next lease is the job's second.
	clock.Advance(time.Hour + time.Microsecond)
	l := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 2, l.Attempt)
	require.Equal(t, context.DeadlineExceeded.Error(), l.Reason)
}

// A handler whose HandlerTimeout passes while the pool shuts down, before
// ShutdownTimeout, has failed its attempt (Retried, counted), as it would
// have outside a shutdown: the timeout is no abandonment, which releases
// the job with its attempt given back. Without HandlerTimeout the handler
// ran until ShutdownTimeout and was abandoned.
func TestJobPoolHandlerTimeoutDuringShutdownIsNoAbandonment(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	var logs syncBuffer
	q := mustJobQueue(t, "pool-timeout-stop", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("slow"), MaxAttempts: 3})
	started := make(chan time.Time, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, timeoutHandler(started), fdbqueue.PoolOptions{Workers: 1,
		LeaseDuration: 30 * time.Second, ExtendEvery: 20 * time.Second, HandlerTimeout: 15 * time.Second, ShutdownTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, started, "the handler's start")
	require.Equal(t, 15*time.Second, nextArmed(t, clock), "the handler's limit")
	require.Equal(t, 20*time.Second, nextArmed(t, clock), "the heartbeat")
	pool.cancel()
	require.Equal(t, time.Minute, nextArmed(t, clock), "the shutdown's deadline")
	clock.Advance(15 * time.Second)
	o := recvWithin(t, outcomes, "the outcome at HandlerTimeout")
	require.Equal(t, fdbqueue.Retried, o.Result, "outcome error: %v", o.Err)
	require.ErrorIs(t, o.Err, context.DeadlineExceeded)
	require.NoError(t, pool.wait("Run did not return once its one handler was settled"))
	require.NotContains(t, logs.String(), "abandoned")
	st := mustStats(t, db, q)
	require.Equal(t, int64(1), st.Delayed, "nacked with the backoff, not released")
	clock.Advance(time.Hour + time.Microsecond)
	require.Equal(t, 2, mustLease(t, db, q, 1, time.Minute)[0].Attempt, "the attempt was counted")
}

// With a HandlerTimeout longer than ShutdownTimeout, shutdown abandons
// the handler as before: its job is released, its attempt not counted.
func TestJobPoolShutdownBeforeHandlerTimeoutAbandons(t *testing.T) {
	db := newDB(t)
	clock := newArmedClock()
	q := mustJobQueue(t, "pool-timeout-abandon", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("slow"), MaxAttempts: 3})
	started := make(chan time.Time, 1)
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, timeoutHandler(started), fdbqueue.PoolOptions{Workers: 1,
		LeaseDuration: 30 * time.Second, ExtendEvery: 20 * time.Second, HandlerTimeout: time.Hour, ShutdownTimeout: 7 * time.Second,
		Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	recvWithin(t, started, "the handler's start")
	require.Equal(t, time.Hour, nextArmed(t, clock), "the handler's limit")
	require.Equal(t, 20*time.Second, nextArmed(t, clock), "the heartbeat")
	pool.cancel()
	require.Equal(t, 7*time.Second, nextArmed(t, clock), "the shutdown's deadline")
	clock.Advance(7 * time.Second)
	o := recvWithin(t, outcomes, "the abandoned job's outcome")
	require.Equal(t, fdbqueue.Abandoned, o.Result)
	require.NoError(t, o.Err, "released")
	require.NoError(t, pool.wait("Run did not return after abandoning its handler"))
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q), "released: due at once")
	require.Equal(t, 1, mustLease(t, db, q, 1, time.Minute)[0].Attempt, "the attempt was not counted")
}

// A negative HandlerTimeout is refused (ErrInvalidArgument) before any
// worker starts. (Run's context has ended already: without the check,
// Run returned nil.)
func TestJobPoolBadHandlerTimeout(t *testing.T) {
	db := newDB(t)
	q := mustJobQueue(t, "pool-bad-timeout", fdbqueue.JobQueueConfig{})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j")})
	ran := false
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := q.Run(ctx, db, func(context.Context, *fdbqueue.Task) error { ran = true; return nil },
		fdbqueue.PoolOptions{HandlerTimeout: -time.Second, Logger: quietLog})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.False(t, ran)
	require.Equal(t, int64(1), mustStats(t, db, q).Due, "nothing leased")
}

// panickyError's Error method panics, as a buggy error type's may.
type panickyError struct{}

func (*panickyError) Error() string { panic("Error method of a buggy type") }

// A handler's error that is a nil pointer of Snooze's, NoRetry's or
// RetryAfter's type (`var e *fdbqueue.NoRetryError; return e`), or whose
// Error method panics, is a plain failure: the job is retried after the
// backoff with the error's text (fmt's, for one whose Error method panics) as its reason. The pool called
// their Error methods outside any recover, so each crashed the process.
func TestJobPoolHandlerErrorsThatPanic(t *testing.T) {
	for _, c := range []struct {
		name   string
		err    error
		reason string
	}{
		{"nil *SnoozeError", (*fdbqueue.SnoozeError)(nil), "fdbqueue: nil *SnoozeError"},
		{"nil *NoRetryError", (*fdbqueue.NoRetryError)(nil), "fdbqueue: nil *NoRetryError"},
		{"nil *RetryAfterError", (*fdbqueue.RetryAfterError)(nil), "fdbqueue: nil *RetryAfterError"},
		{"wrapped nil *NoRetryError", fmt.Errorf("w: %w", (*fdbqueue.NoRetryError)(nil)), "w: fdbqueue: nil *NoRetryError"},
		{"Error panics", &panickyError{}, "%!v(PANIC=Error method: Error method of a buggy type)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			clock := newFakeClock()
			q := mustJobQueue(t, "pool-panicky", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour})
			mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: 5})
			outcomes := make(chan fdbqueue.Outcome, 1)
			pool := startPool(t, q, db, func(context.Context, *fdbqueue.Task) error { return c.err },
				fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second,
					Logger: slog.New(slog.DiscardHandler), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
			o := recvWithin(t, outcomes, "the job's outcome")
			require.NoError(t, pool.stop())
			require.Equal(t, fdbqueue.Retried, o.Result, "outcome error: %v", o.Err)
			st := mustStats(t, db, q)
			require.Equal(t, int64(1), st.Delayed, "retried after the hour's backoff, not at once or dead")
			clock.Advance(time.Hour)
			ls := mustLease(t, db, q, 1, time.Minute)
			require.Len(t, ls, 1)
			require.Equal(t, c.reason, ls[0].Reason)
			require.Equal(t, 2, ls[0].Attempt, "the failed attempt was counted")
		})
	}
}
