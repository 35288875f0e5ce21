package fdbqueue_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// timeOutAfterUncertain is a memdb database whose next transaction, once
// one has failed with an error for which kv.MaybeCommitted is true, fails
// with transaction_timed_out (1031) before it reads anything: on FDB, a
// read of a cluster in recovery.
type timeOutAfterUncertain struct {
	*memdb.DB
	once    sync.Once
	timeOut atomic.Bool
}

func (d *timeOutAfterUncertain) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if d.timeOut.CompareAndSwap(true, false) {
		return kv.ErrTransactionTimedOut
	}
	err := d.DB.Transact(ctx, fn)
	if kv.MaybeCommitted(err) {
		d.once.Do(func() { d.timeOut.Store(true) })
	}
	return err
}

// A lease that committed though its caller was told it may not have
// (1022), settled only once the database answers again, 25 seconds later
// (the settling Lease timed out, and the worker waited to try again): the
// settling Lease returns the lease as it was taken, 5 seconds before its
// deadline. The heartbeat's first extension comes before that deadline,
// so that no other consumer leases the job while its handler runs.
// Before, it came ExtendEvery (10 s) after the handler started, 5 seconds
// after the deadline.
func TestJobPoolExtendsASettledLeaseBeforeItsDeadline(t *testing.T) {
	const extendEvery, lease, blip = 10 * time.Second, 30 * time.Second, 25 * time.Second
	ctx := context.Background()
	mem := newDB(t)
	db := &timeOutAfterUncertain{DB: mem}
	clock := newArmedClock()
	q := mustJobQueue(t, "settled-lease-extended", fdbqueue.JobQueueConfig{Clock: clock})
	added := mustAdd(t, mem, q, fdbqueue.Job{Value: []byte("long")})
	mem.FailNextCommit(kv.ErrCommitUnknownResultFatal, true) // the pool's lease: applied, outcome unknown

	h := newBlockingHandler()
	outcomes := make(chan fdbqueue.Outcome, 1)
	pool := startPool(t, q, db, h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: lease, ExtendEvery: extendEvery,
		Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	armed := func() time.Duration { return nextArmed(t, clock) }
	leased := clock.Now()
	require.Equal(t, time.Second, armed(), "the settling Lease timed out: the worker waits a second")
	clock.Advance(blip)
	var task *fdbqueue.Task
	select {
	case task = <-h.started:
	case <-time.After(wakeTimeout):
		t.Fatal("the settled lease's job was not processed")
	}
	require.Equal(t, added.ID, task.Lease().JobID)
	deadline := task.Lease().Deadline
	require.Equal(t, leased.Add(lease).UnixMicro(), deadline.UnixMicro(), "the lease as it was taken")

	left := deadline.Sub(clock.Now())
	first := armed()
	require.Less(t, first, left, "the heartbeat's first extension comes before the lease's deadline")
	clock.Advance(first)
	require.Equal(t, extendEvery, armed(), "extended: every ExtendEvery again")
	require.Equal(t, clock.Now().Add(lease).UnixMicro(), task.Lease().Deadline.UnixMicro())
	clock.Advance(deadline.Sub(clock.Now()) + time.Millisecond) // past the first deadline
	_, err := q.Lease(ctx, mem, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the job is still the pool's")
	close(h.finish)
	o := recvWithin(t, outcomes, "the job's outcome")
	require.NoError(t, pool.stop())
	require.NoError(t, <-h.ctxErr, "the handler's context never ended")
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
	require.Equal(t, 1, o.Lease.Attempt)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, mem, q))
}
