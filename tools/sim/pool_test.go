package sim

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
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
	}
	require.Positive(t, total.Released, "no abandoned job was released")
	require.Positive(t, total.Settled, "no lease in flight at shutdown was settled")
	require.Positive(t, total.ReleaseFailed+total.SettleFailed+total.FailedAtStop, "no failure at shutdown was met")
	require.Positive(t, total.LateAckLost, "no abandoned run's Task.Ack found its job released")
	require.Positive(t, total.Stats.InjectedReadErrors, "no read failed")
	require.Positive(t, total.Stats.InjectedReadVersionErrors, "no read version request failed")
}
