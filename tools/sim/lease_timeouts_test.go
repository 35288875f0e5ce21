package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLeaseSimulationTxTimeouts runs the lease simulation with a tenth of
// the operations on a database whose transactions time out after about a
// commit's latency (FoundationDB's transaction_timeout; see timeoutDB):
// commits fail with transaction_timed_out in flight, unfenced, and may land
// after the call failed, while the client recovers the call at once or at
// the round's end. Same checks as TestLeaseSimulation's (linearizable
// against LeaseModel, every job acked or dead exactly once), and some
// commits must have timed out in flight.
func TestLeaseSimulationTxTimeouts(t *testing.T) {
	cfg := DefaultLeaseConfig()
	// DefaultLeaseConfig's commits take 50 to 500 µs.
	cfg.TxTimeoutProb, cfg.TxTimeout = 0.1, 800*time.Microsecond
	inFlight := 0
	for seed := int64(1); seed <= 4; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		require.NoError(t, err, "seed %d", seed)
		if r.Failure != nil {
			var b strings.Builder
			_ = r.Failure.WriteHistory(&b)
			t.Logf("seed %d: %s", seed, b.String())
		}
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		require.Nil(t, r.Failure, "a linearizable history is not kept")
		inFlight += r.TimedOutInFlight
	}
	t.Logf("%d commits timed out in flight", inFlight)
	require.Positive(t, inFlight, "no commit timed out in flight")
}
