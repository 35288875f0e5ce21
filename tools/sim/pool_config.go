package sim

import (
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// PoolConfig configures RunPoolShutdowns.
type PoolConfig struct {
	// Cycles is how often the pools are started and stopped per seed;
	// Pools the pools (JobQueue.Run) running at once on one queue, each
	// with Workers workers; JobsPerCycle the jobs added before each cycle.
	Cycles, Pools, Workers, JobsPerCycle int
	MaxAttempts                          int
	Faults                               memdb.Faults
	Latency                              memdb.Latency
	// StopFailProb is the probability that a transaction of a pool fails
	// while the pools stop (from the cancel until Run returns), as a
	// transaction timeout would: half of them before committing (nothing
	// applied), half after their commit landed (kv.MaybeCommitted). So
	// releases, settling leases, acks and nacks at shutdown fail at times.
	StopFailProb float64
	// CancelProb is, in each cycle, the probability of each of these
	// Cancels (JobQueue.Cancel, in a transaction of the harness's that
	// first looks the job up with Job, so that the lease the Cancel
	// removes is known): one of the cycle's jobs as the pools start
	// (racing the handlers' leases and acks); each blocked handler's job
	// once the pools are mid-flight; a job no handler of the cycle has
	// started (queued, or being leased); and an ID never added.
	// HeartbeatProb is the probability that, once a blocked handler's job
	// is cancelled, the clock then moves by the pools' ExtendEvery, so
	// that the heartbeats find the cancelled jobs' leases lost and end
	// their handlers' contexts before the pools stop.
	CancelProb, HeartbeatProb float64
	// LongRunProb is, in each cycle, the probability that the clock moves
	// well past the lease duration (at least twice LeaseDuration) while
	// the blocked handlers hold their jobs, before the mid-flight Cancels:
	// in steps of at least ExtendEvery (so that every heartbeat extends at
	// each step) and under LeaseDuration − ExtendEvery (so that a lease
	// extended at one step is still held at the next), each waited for
	// until every blocked handler's heartbeat has extended its lease (see
	// pool_heartbeat.go). Only the heartbeats then keep the leases.
	LongRunProb float64
	// plantCancel and plantPools, if not nil, wrap the database the
	// harness's Cancels and the pools run on: the tests that plant bugs
	// set them, so that the checks are shown to catch them.
	plantCancel, plantPools func(kv.Database) kv.Database
}

// DefaultPoolConfig is a short run with every fault. Its 9 jobs per cycle
// are enough for the most blockers and quick jobs a cycle waits for (5
// and 2) with one job cancelled as the pools start.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{Cycles: 6, Pools: 2, Workers: 3, JobsPerCycle: 9, MaxAttempts: 3,
		Faults: memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05, TooOld: 0.02, LateLanding: 0.5,
			ReadErrors: 0.02, ReadVersionErrors: 0.01},
		Latency:      memdb.Latency{Commit: memdb.Span{Min: 50 * time.Microsecond, Max: 500 * time.Microsecond}},
		StopFailProb: 0.1, CancelProb: 0.4, HeartbeatProb: 0.5, LongRunProb: 0.5}
}

// check refuses a configuration whose cycles would wait for jobs they do
// not have: a cycle waits until up to Pools×Workers−1 blockers and 2 quick
// jobs have started, and one more job may be cancelled as the pools
// start, so JobsPerCycle must be at least Pools×Workers+2 (otherwise the
// cycle hangs until the harness's stall guard).
func (c PoolConfig) check() error {
	switch {
	case c.Cycles < 1 || c.Pools < 1 || c.Workers < 1:
		return fmt.Errorf("sim: pool config: Cycles %d, Pools %d and Workers %d must be at least 1", c.Cycles, c.Pools, c.Workers)
	case c.JobsPerCycle < c.Pools*c.Workers+2:
		return fmt.Errorf("sim: pool config: JobsPerCycle %d is under Pools×Workers+2 = %d, the most jobs a cycle waits for",
			c.JobsPerCycle, c.Pools*c.Workers+2)
	}
	return nil
}
