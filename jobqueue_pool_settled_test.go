package fdbqueue_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A lease that committed though its caller was told it may not
// have (1022), settled only once the database answers again 35 seconds
// later, past the 30-second lease's deadline: the settling Lease replays
// the lease (nobody leased the job again, so it is still held) and the
// pool starts the handler on it. The job is due (its deadline passed),
// yet the heartbeat's first extension is armed a second later
// (retryExtension's value for a deadline already passed), so another
// consumer leases the job while the pool's handler runs: two handlers at
// once for one job. PoolOptions.ExtendEvery says the first extension of
// such a lease comes at half the time left before its deadline, which
// here is at once. (Found by an audit of the pool.)
func TestJobPoolExtendsASettledLeasePastItsDeadlineAtOnce(t *testing.T) {
	const lease = 30 * time.Second
	ctx := context.Background()
	r := runSettledLease(t, "settled-lease-past-deadline", lease, 10*time.Second, 35*time.Second)
	mem, clock, q, h, task := r.mem, r.clock, r.q, r.h, r.task
	require.Equal(t, 1, task.Lease().Attempt, "the lease as it was taken")
	// (The heartbeat may have extended it already: read the deadline the
	// lease was taken with from the clock, not from the task.)
	require.True(t, r.leased.Add(lease).Before(clock.Now()), "its deadline passed before the handler started")

	// Let the heartbeat do whatever it does without time passing: timers
	// armed at 0 fire at once; stop at the first one in the future.
	var next time.Duration
	for next = nextArmed(t, clock); next <= 0; next = nextArmed(t, clock) {
	}
	t.Logf("heartbeat's next extension armed in %v; lease deadline %v ago", next, clock.Now().Sub(task.Lease().Deadline))

	// Another consumer, while the pool's handler runs and no time passes.
	ls, err := q.Lease(ctx, mem, 1, time.Minute)
	if err == nil {
		t.Errorf("another consumer leased job %s (attempt %d) while the pool's handler ran it; the pool's next extension was %v away",
			ls[0].JobID, ls[0].Attempt, next)
	} else {
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	}
	close(h.finish)
	o := recvWithin(t, r.outcomes, "the job's outcome")
	require.NoError(t, r.pool.stop())
	t.Logf("pool outcome: %v (err %v); handler ctx err: %v", o.Result, o.Err, <-h.ctxErr)
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
}

// A handler that acked its job in its own transaction (Task.Ack)
// and then went on (say, to notify someone) until its HandlerTimeout, or
// past ShutdownTimeout, where the pool ended its context: the job is
// acked, once, by the handler, yet the pool reports LeaseLost ("another
// consumer has the job, or it was cancelled") after a timeout, and
// Abandoned with ErrLeaseLost ("abandoned job not released: another
// consumer has it"; the doc says its lease will expire) after an
// abandonment. The pool's Nack or Release of a job its handler acked fails
// with ErrLeaseLost, and the pool never asks the ack's ID what happened,
// as its ack path does after a nil return. It now asks. (Found by an
// audit of the pool.)
func TestJobPoolReportsAJobItsHandlerAckedAsAcked(t *testing.T) {
	for _, c := range []struct {
		name string
		opts fdbqueue.PoolOptions
	}{
		{"HandlerTimeout", fdbqueue.PoolOptions{HandlerTimeout: 5 * time.Second}},
		{"abandoned at shutdown", fdbqueue.PoolOptions{ShutdownTimeout: -1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := newDB(t)
			clock := newArmedClock()
			q := mustJobQueue(t, "acked-then-lost", fdbqueue.JobQueueConfig{Clock: clock})
			mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("acked by its handler")})
			acked := make(chan error, 1)
			outcomes := make(chan fdbqueue.Outcome, 1)
			var logs syncBuffer
			opts := c.opts
			opts.Workers, opts.LeaseDuration, opts.ExtendEvery = 1, 30*time.Second, 10*time.Second
			opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			opts.OnOutcome = func(o fdbqueue.Outcome) { outcomes <- o }
			done := make(chan struct{})
			defer close(done)
			pool := startPool(t, q, mem, func(ctx context.Context, task *fdbqueue.Task) error {
				acked <- mem.Transact(ctx, func(tr kv.Transaction) error { return task.Ack(ctx, tr) })
				if opts.ShutdownTimeout < 0 {
					<-done // ignores its context: abandoned
					return nil
				}
				<-ctx.Done() // the rest of its work, cut short by its timeout
				return ctx.Err()
			}, opts)
			require.NoError(t, recvWithin(t, acked, "the handler's own ack"))
			var o fdbqueue.Outcome
			if opts.HandlerTimeout > 0 {
				for d := nextArmed(t, clock); d != opts.HandlerTimeout; d = nextArmed(t, clock) {
				}
				clock.Advance(opts.HandlerTimeout)
				o = recvWithin(t, outcomes, "the job's outcome")
				require.NoError(t, pool.stop())
			} else {
				require.NoError(t, pool.stop())
				o = recvWithin(t, outcomes, "the job's outcome")
			}
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, mem, q), "the job is acked: nothing queued, leased or dead")
			t.Logf("outcome %v, err %v", o.Result, o.Err)
			require.NotContains(t, logs.String(), "another consumer has")
			require.Equal(t, fdbqueue.Acked, o.Result, "the job was acked (by its handler); err: %v", o.Err)
		})
	}
}
