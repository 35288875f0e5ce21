package sim

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// JobQueue.Run pools with handlers, stopped mid-flight again and again
// under injected faults (see RunPoolShutdowns): no job lost, none acked
// twice, a job released at shutdown due at once with its attempt not
// counted, no job left leased after Run returned unless a failure the
// pool reported explains it (a Release, ack or nack that failed, a lease
// in flight it could not settle), and an abandoned run's Task.Ack never
// acks a job the pool released. The run must have abandoned and released
// jobs, settled leases in flight, and met failed releases.
//
// Cancels remove jobs while the pools run: a handler run that starts
// after its job's Cancel returned holds the very lease the Cancel removed
// (none if the job was queued), no run acks, nacks, snoozes or releases a
// job after its Cancel returned, a handler's context ends before the
// pools stop only if its job was cancelled, no heartbeat extends a lease
// after its job's Cancel returned, a cancelled job is never acked (by the
// pool or a Task.Ack) nor dead, and nothing of a removed job is left and
// Stats and the bucket counters are exact at every cycle's end and after
// the drain. In the long runs (LongRunProb) the clock moves well past the
// lease while blocked handlers hold their jobs, and the heartbeats must
// keep every job no Cancel removed under its handler's lease, its
// deadline the clock's time plus the lease duration at each step. The run
// must have cancelled jobs
// leased and queued, Cancels that found nothing, runs whose ack, nack or
// release found the lease lost to a Cancel, handlers whose context a
// heartbeat ended for it, and abandoned runs' Task.Acks that failed for
// it, and the long runs must have seen the heartbeats extend leases.
//
// FDBQUEUE_POOL_SEEDS=n runs n seeds instead of 6 (a longer soak).
func TestPoolShutdownSimulation(t *testing.T) {
	ctx := context.Background()
	seeds := int64(6)
	if n, err := strconv.ParseInt(os.Getenv("FDBQUEUE_POOL_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	var total PoolResult
	defer func() {
		t.Logf("%d seeds, %d cycles, %d handler calls: %d jobs: %d acked once, %d dead once, %d gone by a failed ack, %d lost, %d acked twice; "+
			"%d abandoned (%d released, %d release failed), %d acks/nacks failed at stop, %d leases settled at stop (%d failed); "+
			"after Run returned: %d leased jobs explained by a reported failure, %d hidden; late Task.Acks: %d lease lost, %d acked a job still theirs",
			seeds, total.Cycles, total.Handled, total.Added, total.Acked, total.Dead, total.AckedUnknown, total.Lost, total.AckedTwice,
			total.Abandoned, total.Released, total.ReleaseFailed, total.FailedAtStop, total.Settled, total.SettleFailed,
			total.HiddenExplained, total.Hidden, total.LateAckLost, total.LateAckedHeld)
		t.Logf("cancels: %d jobs cancelled (%d leased, %d queued, %d with the lease unknown), %d found nothing; %d runs lost their job to a Cancel, %d contexts ended by the heartbeat for it, %d late Task.Acks failed for it; %d leftovers, %d wrong counts",
			total.Cancelled, total.CancelledLeased, total.CancelledQueued, total.CancelLeaseUnknown, total.CancelNotFound,
			total.LostToCancel, total.HeartbeatLost, total.LateAckCancelled, total.Leftovers, total.CountErrors)
		t.Logf("long runs: %d, %d steps, %d extensions seen; held jobs' leases lost %d, expired %d, attempts grown %d, contexts ended %d, deadlines wrong %d",
			total.LongRuns, total.LongRunSteps, total.HeldExtended, total.HeldLeaseLost, total.HeldLeaseExpired, total.HeldAttemptsGrew,
			total.HeldContextEnded, total.HeldDeadlineWrong)
	}()
	for seed := int64(1); seed <= seeds; seed++ {
		r, err := RunPoolShutdowns(ctx, seed, DefaultPoolConfig())
		require.NoError(t, err, "seed %d", seed)
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		total.Cycles += r.Cycles
		total.Handled += r.Handled
		total.Added += r.Added
		total.Acked += r.Acked
		total.Dead += r.Dead
		total.AckedUnknown += r.AckedUnknown
		total.Lost += r.Lost
		total.AckedTwice += r.AckedTwice
		total.Abandoned += r.Abandoned
		total.Released += r.Released
		total.ReleaseFailed += r.ReleaseFailed
		total.FailedAtStop += r.FailedAtStop
		total.Settled += r.Settled
		total.SettleFailed += r.SettleFailed
		total.HiddenExplained += r.HiddenExplained
		total.Hidden += r.Hidden
		total.FailedCut += r.FailedCut
		total.LateAckLost += r.LateAckLost
		total.LateAckedHeld += r.LateAckedHeld
		total.Stats.InjectedReadErrors += r.Stats.InjectedReadErrors
		total.Stats.InjectedReadVersionErrors += r.Stats.InjectedReadVersionErrors
		total.Cancelled += r.Cancelled
		total.CancelledLeased += r.CancelledLeased
		total.CancelledQueued += r.CancelledQueued
		total.CancelLeaseUnknown += r.CancelLeaseUnknown
		total.CancelNotFound += r.CancelNotFound
		total.LostToCancel += r.LostToCancel
		total.HeartbeatLost += r.HeartbeatLost
		total.LateAckCancelled += r.LateAckCancelled
		total.Leftovers += r.Leftovers
		total.CountErrors += r.CountErrors
		total.LongRuns += r.LongRuns
		total.LongRunSteps += r.LongRunSteps
		total.HeldExtended += r.HeldExtended
		total.HeldLeaseLost += r.HeldLeaseLost
		total.HeldLeaseExpired += r.HeldLeaseExpired
		total.HeldAttemptsGrew += r.HeldAttemptsGrew
		total.HeldContextEnded += r.HeldContextEnded
		total.HeldDeadlineWrong += r.HeldDeadlineWrong
	}
	require.Positive(t, total.Released, "no abandoned job was released")
	require.Positive(t, total.Settled, "no lease in flight at shutdown was settled")
	require.Positive(t, total.ReleaseFailed+total.SettleFailed+total.FailedAtStop, "no failure at shutdown was met")
	require.Positive(t, total.LateAckLost, "no abandoned run's Task.Ack found its job released")
	require.Positive(t, total.Stats.InjectedReadErrors, "no read failed")
	require.Positive(t, total.Stats.InjectedReadVersionErrors, "no read version request failed")
	require.Positive(t, total.CancelledLeased, "no leased job was cancelled")
	require.Positive(t, total.CancelledQueued, "no queued job was cancelled")
	require.Positive(t, total.CancelNotFound, "no Cancel found nothing")
	require.Positive(t, total.LostToCancel, "no handler run lost its job to a Cancel")
	require.Positive(t, total.HeartbeatLost, "no heartbeat ended a handler's context for a Cancel")
	require.Positive(t, total.LateAckCancelled, "no abandoned run's Task.Ack failed for a Cancel")
	require.Positive(t, total.HeldExtended, "no long run saw a heartbeat extend a lease")
}

// Bugs planted in a Cancel (through PoolConfig.plantCancel) or in what
// the pools read (plantPools) must fail the pool simulation: a Cancel
// that writes nothing of its removal but says it removed the job (which
// is then leased and run again after the Cancel returned), and pools that
// read a cancelled job's record as it was before the Cancel (a stale
// read: the run's ack, nack or release then succeeds after the Cancel
// returned). With heartbeats on (HeartbeatProb), the heartbeat of a
// cancelled job's run then extends its lease instead of ending its
// handler, which the harness waited for until its one-minute guard fired:
// each seed must fail by a check (ExtendedAfterCancel among them), never
// by the guard (errPoolStuck).
func TestPoolSimulationCatchesPlantedCancelBugs(t *testing.T) {
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "pool"})
	require.NoError(t, err)
	records, err := sub.Pack(tuple.Tuple{"q"})
	require.NoError(t, err)
	plants := []struct {
		name          string
		cancel, pools func(kv.Database) kv.Database
	}{
		{"Cancel removes nothing", func(db kv.Database) kv.Database {
			return plantedDB{Database: db, tx: func(tr kv.Transaction) kv.Transaction { return dropWrites{Transaction: tr, prefix: sub.Bytes()} }}
		}, nil},
		{"the pools read a cancelled job's record as it was", nil, func(db kv.Database) kv.Database {
			st := &staleRecords{prefix: records, last: map[string][]byte{}}
			return plantedDB{Database: db, tx: func(tr kv.Transaction) kv.Transaction { return &staleTx{Transaction: tr, s: st} }}
		}},
	}
	for _, p := range plants {
		t.Run(p.name, func(t *testing.T) {
			cfg := DefaultPoolConfig()
			cfg.plantCancel, cfg.plantPools = p.cancel, p.pools
			cfg.HeartbeatProb = 1 // whenever a blocked handler's job is cancelled
			caught, extended := 0, 0
			for seed := int64(1); seed <= 6; seed++ {
				r, err := RunPoolShutdowns(context.Background(), seed, cfg)
				require.NotErrorIs(t, err, errPoolStuck, "seed %d: the harness waited for its guard instead of failing a check", seed)
				if err != nil || !r.OK() {
					caught++
					extended += r.ExtendedAfterCancel
					t.Logf("seed %d caught it: err %v, leased after a Cancel %d, settled after a Cancel %d, extended after a Cancel %d, cancelled and acked %d, and dead %d, twice %d, leftovers %d, wrong counts %d, lost %d",
						seed, err, r.LeasedAfterCancel, r.SettledAfterCancel, r.ExtendedAfterCancel, r.CancelledAndAcked, r.CancelledAndDead, r.CancelledTwice,
						r.Leftovers, r.CountErrors, r.Lost)
				}
			}
			require.Positive(t, caught, "no seed caught the planted bug")
			require.Positive(t, extended, "no heartbeat was seen extending a cancelled job's lease")
		})
	}
}

// staleRecords is what a staleTx read under prefix, the last value of
// each key.
type staleRecords struct {
	prefix []byte
	mu     sync.Mutex
	last   map[string][]byte
}

// staleTx reads a job record that someone else cleared (a Cancel) as
// the last value it wrote or read; having served such a stale record, it
// writes no record (a release or nack of it does not bring the job back
// without its value, which would stop the pools rather than fail a check).
type staleTx struct {
	kv.Transaction
	s      *staleRecords
	served atomic.Bool
}

func (t *staleTx) Get(key []byte) kv.FutureValue {
	f := t.Transaction.Get(key)
	if !bytes.HasPrefix(key, t.s.prefix) {
		return f
	}
	return staleRead{f: f, key: string(key), t: t}
}

func (t *staleTx) Set(key, value []byte) {
	if bytes.HasPrefix(key, t.s.prefix) {
		if t.served.Load() {
			return
		}
		t.s.mu.Lock()
		t.s.last[string(key)] = bytes.Clone(value)
		t.s.mu.Unlock()
	}
	t.Transaction.Set(key, value)
}

func (t *staleTx) Clear(key []byte) {
	if bytes.HasPrefix(key, t.s.prefix) {
		t.s.mu.Lock()
		delete(t.s.last, string(key))
		t.s.mu.Unlock()
	}
	t.Transaction.Clear(key)
}

type staleRead struct {
	f   kv.FutureValue
	key string
	t   *staleTx
}

func (r staleRead) Get() ([]byte, error) {
	v, err := r.f.Get()
	if err != nil {
		return v, err
	}
	s := r.t.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if v == nil {
		if v = s.last[r.key]; v != nil {
			r.t.served.Store(true)
		}
		return v, nil
	}
	s.last[r.key] = v
	return v, nil
}

// dropWrites drops every write under prefix (the queue's keys: its
// journal, under prefix + 0xff, is written); its Transact and
// ReadTransact run fn in it as planted (see skipClears).
type dropWrites struct {
	kv.Transaction
	prefix []byte
}

func (d dropWrites) dropped(key []byte) bool {
	return bytes.HasPrefix(key, d.prefix) && !bytes.HasPrefix(key, append(bytes.Clone(d.prefix), 0xff))
}

func (d dropWrites) Set(key, value []byte) {
	if !d.dropped(key) {
		d.Transaction.Set(key, value)
	}
}

func (d dropWrites) Clear(key []byte) {
	if !d.dropped(key) {
		d.Transaction.Clear(key)
	}
}

func (d dropWrites) Add(key, param []byte) {
	if !d.dropped(key) {
		d.Transaction.Add(key, param)
	}
}

func (d dropWrites) CompareAndClear(key, param []byte) {
	if !d.dropped(key) {
		d.Transaction.CompareAndClear(key, param)
	}
}

func (d dropWrites) Transact(_ context.Context, fn func(kv.Transaction) error) error { return fn(d) }

func (d dropWrites) ReadTransact(_ context.Context, fn func(kv.ReadTransaction) error) error {
	return fn(d)
}

// A configuration with too few jobs per cycle for its pools' workers is
// refused at once: a cycle would wait for blockers and quick jobs it does
// not have until the one-minute stall guard (3 pools of 3 workers and 9
// jobs hung so).
func TestPoolConfigRefusesTooFewJobs(t *testing.T) {
	cfg := DefaultPoolConfig()
	cfg.Pools = 3
	_, err := RunPoolShutdowns(t.Context(), 1, cfg)
	require.ErrorContains(t, err, "JobsPerCycle 9 is under Pools×Workers+2 = 11")
	cfg.JobsPerCycle = 11
	require.NoError(t, cfg.check())
	cfg.Workers = 0
	require.ErrorContains(t, cfg.check(), "must be at least 1")
}

// dueAtCycleStart counts a live job not due as a cycle starts (here one
// leased for three lease durations, past any lease the pools take) and
// moves the clock until it is due; a job due already, or dead, is not
// counted and does not move the clock.
func TestPoolCycleStartCountsJobsNotDue(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "pool"})
	require.NoError(t, err)
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock, LeaseDuration: poolLeaseDuration,
		StatsResolution: leaseStatsResolution})
	require.NoError(t, err)
	for range 2 {
		_, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("x")})
		require.NoError(t, err)
	}
	var res PoolResult
	start := clock.Now()
	require.NoError(t, dueAtCycleStart(ctx, db, sub, clock, &res))
	require.Zero(t, res.NotDueAtCycle, "both jobs are due")
	require.Equal(t, start, clock.Now(), "the clock moved with every job due")

	ls, err := q.Lease(ctx, db, 1, 3*poolLeaseDuration)
	require.NoError(t, err)
	require.NoError(t, dueAtCycleStart(ctx, db, sub, clock, &res))
	require.Equal(t, 1, res.NotDueAtCycle)
	require.True(t, ls[0].Deadline.Equal(clock.Now()), "the clock moved to the lease's deadline %v, not %v", ls[0].Deadline, clock.Now())
	again, err := q.Lease(ctx, db, 2, 0)
	require.NoError(t, err)
	require.Len(t, again, 2, "every job is due after it")
}
