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
	"github.com/fdbqueue/fdbqueue/queuetest"
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
	const extendEvery, lease = 10 * time.Second, 30 * time.Second
	ctx := context.Background()
	r := runSettledLease(t, "settled-lease-extended", lease, extendEvery, 25*time.Second)
	mem, clock, q, h, added, leased, task := r.mem, r.clock, r.q, r.h, r.added, r.leased, r.task
	armed := func() time.Duration { return nextArmed(t, clock) }
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
	o := recvWithin(t, r.outcomes, "the job's outcome")
	require.NoError(t, r.pool.stop())
	require.NoError(t, <-h.ctxErr, "the handler's context never ended")
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
	require.Equal(t, 1, o.Lease.Attempt)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, mem, q))
}

// settledLease is runSettledLease's run: its database, clock, queue, the
// pool's handler (blocked in the job), the job added, when its lease was
// taken, and the task the handler got.
type settledLease struct {
	mem      *memdb.DB
	clock    *queuetest.Clock
	q        *fdbqueue.JobQueue
	h        *blockingHandler
	added    fdbqueue.AddResult
	leased   time.Time
	task     *fdbqueue.Task
	outcomes chan fdbqueue.Outcome
	pool     *poolRun
}

// runSettledLease starts a one-worker pool whose lease of the queue's one
// job commits but is reported commit_unknown_result_fatal, and whose
// settling Lease times out: the worker waits a second, the clock moves by
// blip, and the settling Lease replays the lease, as it was taken, to the
// handler (blocked until h.finish closes).
func runSettledLease(t *testing.T, name string, lease, extendEvery, blip time.Duration) settledLease {
	t.Helper()
	r := settledLease{mem: newDB(t), clock: newArmedClock(), h: newBlockingHandler(), outcomes: make(chan fdbqueue.Outcome, 1)}
	db := &timeOutAfterUncertain{DB: r.mem}
	r.q = mustJobQueue(t, name, fdbqueue.JobQueueConfig{Clock: r.clock})
	r.added = mustAdd(t, r.mem, r.q, fdbqueue.Job{Value: []byte("long")})
	r.mem.FailNextCommit(kv.ErrCommitUnknownResultFatal, true) // the pool's lease: applied, outcome unknown
	r.pool = startPool(t, r.q, db, r.h.handle, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: lease, ExtendEvery: extendEvery,
		Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) { r.outcomes <- o }})
	r.leased = r.clock.Now()
	require.Equal(t, time.Second, nextArmed(t, r.clock), "the settling Lease timed out: the worker waits a second")
	r.clock.Advance(blip)
	r.task = recvWithin(t, r.h.started, "the settled lease's job was processed")
	require.Equal(t, r.added.ID, r.task.Lease().JobID)
	return r
}
