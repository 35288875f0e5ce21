package sim_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tools/sim"
)

// txTimeoutSeeds run both plain and staged (asserted below).
var txTimeoutSeeds = []int64{1, 2, 3, 4}

// TestSimulationTxTimeouts gives a third of the clients' operations a
// database whose transactions time out (FoundationDB's database option
// transaction_timeout) after 1.5 to 3 ms, about an operation's reads and
// commit, so that commits fail with transaction_timed_out while in
// flight, are not fenced, and may land after the call went on (retried,
// took again) or returned. Errors are taken at their word (TrustErrors):
// a timeout before the commit took no effect. Same requirements as TestSimulation, on plain and
// staged seeds, and some commits must have timed out in flight.
func TestSimulationTxTimeouts(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Rounds = 3
	cfg.Clients, cfg.OpsPerClient, cfg.MaxOpen = 4, 25, 1
	cfg.CheckTimeout = ciCheckTimeout
	cfg.TrustErrors = true
	// The default latency model's commits take 0.1 to 1 ms (2 ms more at
	// times), after a read version and reads of up to 0.2 ms each.
	cfg.TxTimeoutProb, cfg.TxTimeout = 0.3, 3*time.Millisecond
	if testing.Verbose() {
		cfg.Log = t.Logf
	}
	total := runSeeds(t, cfg, txTimeoutSeeds)
	requireSound(t, total)
	requireMostlyConclusive(t, total)
	require.Positive(t, total.StagedSeeds, "some seeds run staged")
	require.Less(t, total.StagedSeeds, total.Seeds, "some seeds run plain")
	require.Positive(t, total.TxTimeoutOps)
	require.Positive(t, total.TimedOut, "some operations must fail with transaction_timed_out")
	require.Positive(t, total.TimedOutInFlight, "some commits must time out in flight")
}
