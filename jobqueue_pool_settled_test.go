package fdbqueue_test

import (
	"context"
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
	const extendEvery, lease, blip = 10 * time.Second, 30 * time.Second, 35 * time.Second
	ctx := context.Background()
	mem := newDB(t)
	db := &timeOutAfterUncertain{DB: mem}
	clock := newArmedClock()
	q := mustJobQueue(t, "settled-lease-past-deadline", fdbqueue.JobQueueConfig{Clock: clock})
	added := mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("long")})
	mem.FailNextCommit(kv.ErrCommitUnknownResultFatal, true) // the pool's lease: applied, outcome unknown

	h := newBlockingHandler()
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: lease, ExtendEvery: extendEvery,
		Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	leased := clock.Now()
	require.Equal(t, time.Second, nextArmed(t, clock), "the settling Lease timed out: the worker waits a second")
	clock.Advance(blip)
	task := recvWithin(t, h.started, "the settled lease's job was processed")
	require.Equal(t, added.ID, task.Lease().JobID)
	require.Equal(t, 1, task.Lease().Attempt, "the lease as it was taken")
	// (The heartbeat may have extended it already: read the deadline the
	// lease was taken with from the clock, not from the task.)
	require.True(t, leased.Add(lease).Before(clock.Now()), "its deadline passed before the handler started")

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
	o := recvWithin(t, outcomes, "the job's outcome")
	require.NoError(t, pool.stop())
	t.Logf("pool outcome: %v (err %v); handler ctx err: %v", o.Result, o.Err, <-h.ctxErr)
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
}
