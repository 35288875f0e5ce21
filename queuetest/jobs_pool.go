package queuetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// testJobPool: JobQueue.Run acks a job whose handler returns nil (once,
// also when the handler acked it itself with Task.Ack in the transaction
// of its effect), nacks one whose handler fails or panics (retried after
// the backoff, dead-lettered after its last attempt, with the error as
// reason), and returns nil once its context ends. The check learns each
// outcome from OnOutcome and moves the queue's clock past the backoff;
// it never sleeps.
func testJobPool(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "pool", fdbqueue.JobQueueConfig{RetryBase: time.Second, RetryMax: time.Second})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		switch v := string(task.Value()); v {
		case "fail":
			return errors.New("failed on purpose")
		case "panic":
			panic("panicked on purpose")
		case "flaky":
			if task.Lease().Attempt == 1 {
				return errors.New("first attempt fails")
			}
		case "effect":
			return f.db.Transact(ctx, func(tr kv.Transaction) error {
				id := task.Lease().JobID
				tr.Set(f.key("effect"), id[:])
				return task.Ack(ctx, tr)
			})
		}
		return nil
	}
	require.ErrorIs(t, q.Run(f.ctx, f.db, nil, fdbqueue.PoolOptions{Logger: quiet}), fdbqueue.ErrInvalidArgument, "a nil handler")
	require.ErrorIs(t, q.Run(f.ctx, f.db, handler, fdbqueue.PoolOptions{Logger: quiet, LeaseDuration: time.Minute, ExtendEvery: time.Minute}),
		fdbqueue.ErrInvalidArgument, "extensions no more often than the lease lasts")
	require.ErrorIs(t, q.Run(f.ctx, f.db, handler, fdbqueue.PoolOptions{Logger: quiet, Workers: -1}), fdbqueue.ErrInvalidArgument)

	ids := map[string]fdbqueue.JobID{}
	for _, j := range []fdbqueue.Job{
		{Value: []byte("ok")}, {Value: []byte("effect")}, {Value: []byte("flaky"), MaxAttempts: 2},
		{Value: []byte("fail"), MaxAttempts: 1}, {Value: []byte("panic"), MaxAttempts: 1},
	} {
		ids[string(j.Value)] = f.add(t, q, j).ID
	}
	outcomes := make(chan fdbqueue.Outcome, 16)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- q.Run(ctx, f.db, handler, fdbqueue.PoolOptions{Workers: 3, Logger: quiet, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	}()
	got := map[string][]fdbqueue.Result{}
	for n := 0; n < 6; n++ {
		select {
		case o := <-outcomes:
			v := string(o.Lease.Value)
			got[v] = append(got[v], o.Result)
			if o.Result == fdbqueue.Retried {
				// Past the backoff (at most RetryMax): a sleeping
				// LeaseWait wakes 1 µs after the job's vesting time.
				c.Advance(time.Second + time.Microsecond)
			}
			if v == "panic" {
				var pe *fdbqueue.PanicError
				require.ErrorAs(t, o.Err, &pe, "a panic is a *PanicError")
				require.Equal(t, "panicked on purpose", pe.Value)
			}
		case <-f.ctx.Done():
			require.FailNow(t, "the pool stopped settling jobs", "outcomes so far: %v", got)
		}
	}
	cancel()
	select {
	case err := <-ran:
		require.NoError(t, err, "Run returns nil after a shutdown")
	case <-f.ctx.Done():
		require.FailNow(t, "Run did not return after its context ended")
	}
	require.Equal(t, map[string][]fdbqueue.Result{
		"ok":     {fdbqueue.Acked},
		"effect": {fdbqueue.Acked},
		"flaky":  {fdbqueue.Retried, fdbqueue.Acked},
		"fail":   {fdbqueue.DeadLettered},
		"panic":  {fdbqueue.DeadLettered},
	}, got)
	effectID := ids["effect"]
	require.Equal(t, effectID[:], f.get(t, f.key("effect")), "the handler's effect committed with its ack")
	f.requireStats(t, q, fdbqueue.JobStats{Dead: 2})
	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	reasons := map[fdbqueue.JobID]string{}
	for _, d := range ds {
		reasons[d.ID] = d.Reason
	}
	require.Equal(t, "failed on purpose", reasons[ids["fail"]])
	require.True(t, strings.Contains(reasons[ids["panic"]], "panicked on purpose"), "reason %q", reasons[ids["panic"]])
}

// testJobPoolFailures: a pool handler that returns NoRetry (wrapped here)
// has its job dead-lettered on its first attempt of five, with the
// error's text as reason; one that returns RetryAfter has its job due
// again after the handler's delay, not the queue's backoff (an hour), its
// attempt counted; and a handler still running at
// PoolOptions.HandlerTimeout sees its context end with
// context.DeadlineExceeded (its Deadline is the call's time plus the
// timeout, on the queue's clock), and returning then is a failed attempt,
// nacked with the backoff. A negative HandlerTimeout is refused. The
// check moves the queue's clock; it never sleeps.
func testJobPoolFailures(t *testing.T, f *fixture) {
	q, c := f.jobQueue(t, "pool-failures", fdbqueue.JobQueueConfig{RetryBase: time.Hour, RetryMax: time.Hour, MaxAttempts: 5})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	deadlines := make(chan time.Time, 1)
	handler := func(ctx context.Context, task *fdbqueue.Task) error {
		switch string(task.Value()) {
		case "noretry":
			return fmt.Errorf("job: %w", fdbqueue.NoRetry(errors.New("malformed")))
		case "retryafter":
			if task.Lease().Attempt == 1 {
				return fdbqueue.RetryAfter(2*time.Minute, errors.New("busy"))
			}
		case "timeout":
			d, _ := ctx.Deadline()
			deadlines <- d
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}
	ended, cancelEnded := context.WithCancel(f.ctx)
	cancelEnded()
	require.ErrorIs(t, q.Run(ended, f.db, handler, fdbqueue.PoolOptions{Logger: quiet, HandlerTimeout: -time.Second}),
		fdbqueue.ErrInvalidArgument, "a negative HandlerTimeout")

	ids := map[string]fdbqueue.JobID{}
	for _, v := range []string{"noretry", "retryafter", "timeout"} {
		ids[v] = f.add(t, q, fdbqueue.Job{Value: []byte(v)}).ID
	}
	start := c.Now()
	outcomes := make(chan fdbqueue.Outcome, 8)
	ctx, cancel := context.WithCancel(f.ctx)
	defer cancel()
	ran := make(chan error, 1)
	go func() {
		ran <- q.Run(ctx, f.db, handler, fdbqueue.PoolOptions{Workers: 3, Logger: quiet, LeaseDuration: time.Hour,
			HandlerTimeout: time.Minute, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	}()
	next := func(why string) fdbqueue.Outcome {
		t.Helper()
		select {
		case o := <-outcomes:
			return o
		case <-f.ctx.Done():
			require.FailNow(t, why)
			return fdbqueue.Outcome{}
		}
	}
	got := map[string]fdbqueue.Outcome{}
	for range 2 { // noretry and retryafter settle at once; timeout runs on
		o := next("the pool did not settle the NoRetry and RetryAfter jobs")
		got[string(o.Lease.Value)] = o
	}
	select {
	case d := <-deadlines:
		require.Equal(t, start.Add(time.Minute).UnixMicro(), d.UnixMicro(), "the handler's deadline, on the queue's clock")
	case <-f.ctx.Done():
		require.FailNow(t, "the timeout job's handler did not start")
	}
	require.Equal(t, fdbqueue.DeadLettered, got["noretry"].Result, "outcome error: %v", got["noretry"].Err)
	require.ErrorAs(t, got["noretry"].Err, new(*fdbqueue.NoRetryError))
	require.Equal(t, fdbqueue.Retried, got["retryafter"].Result, "outcome error: %v", got["retryafter"].Err)
	require.ErrorAs(t, got["retryafter"].Err, new(*fdbqueue.RetryAfterError))

	c.Advance(time.Minute + time.Microsecond) // the handler's limit
	o := next("the handler's context did not end at HandlerTimeout")
	require.Equal(t, "timeout", string(o.Lease.Value))
	require.Equal(t, fdbqueue.Retried, o.Result, "outcome error: %v", o.Err)
	require.ErrorIs(t, o.Err, context.DeadlineExceeded)
	// retryafter due at 2 minutes, timeout after the backoff (30 to 60 minutes).
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 2, Delayed: 2, Dead: 1})

	c.Advance(time.Minute + time.Microsecond) // past retryafter's 2 minutes
	o = next("the RetryAfter job was not due after the handler's delay")
	require.Equal(t, "retryafter", string(o.Lease.Value))
	require.Equal(t, fdbqueue.Acked, o.Result, "outcome error: %v", o.Err)
	require.Equal(t, 2, o.Lease.Attempt, "the failed attempt was counted")
	require.Equal(t, "retry after 2m0s: busy", o.Lease.Reason)
	cancel()
	select {
	case err := <-ran:
		require.NoError(t, err, "Run returns nil after a shutdown")
	case <-f.ctx.Done():
		require.FailNow(t, "Run did not return after its context ended")
	}
	f.requireStats(t, q, fdbqueue.JobStats{Queued: 1, Delayed: 1, Dead: 1})
	ds, err := q.ListDead(f.ctx, f.db, nil, 10)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, ids["noretry"], ds[0].ID)
	require.Equal(t, "job: no retry: malformed", ds[0].Reason)
	require.Equal(t, 1, ds[0].Attempts, "dead after one attempt of five")
}
