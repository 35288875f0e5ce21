package queuetest

import (
	"context"
	"errors"
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
