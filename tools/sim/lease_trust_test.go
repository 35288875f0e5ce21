package sim

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// runTrusting runs seeds 1 to n of cfg with LeaseConfig.TrustErrors,
// requires each to pass every check, and returns their totals of the
// counts the tests below require. FDBQUEUE_LEASE_SEEDS=n runs n seeds
// instead (a longer soak).
func runTrusting(t *testing.T, cfg LeaseConfig, n int64) (total LeaseResult) {
	t.Helper()
	cfg.TrustErrors = true
	if m, err := strconv.ParseInt(os.Getenv("FDBQUEUE_LEASE_SEEDS"), 10, 64); err == nil && m > 0 {
		n = m
	}
	for seed := int64(1); seed <= n; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		require.NoError(t, err, "seed %d", seed)
		if r.Failure != nil {
			var b strings.Builder
			_ = r.Failure.WriteHistory(&b)
			t.Logf("seed %d: %s", seed, b.String())
		}
		require.True(t, r.OK(), "seed %d: %s: %+v", seed, caught(r, nil), r)
		require.Nil(t, r.Failure, "a linearizable history is not kept")
		total.Operations += r.Operations
		total.Trusted += r.Trusted
		total.TrustedTimedOut += r.TrustedTimedOut
		total.Unknown += r.Unknown
		total.TimedOutInFlight += r.TimedOutInFlight
	}
	t.Logf("%d seeds: %d operations; %d failed calls taken at their word (%d timed out before the commit), %d of unknown outcome recovered or abandoned; %d commits timed out in flight",
		n, total.Operations, total.Trusted, total.TrustedTimedOut, total.Unknown, total.TimedOutInFlight)
	return total
}

// TestLeaseSimulationTrustErrors takes errors at their word, as the
// package documentation tells callers to (LeaseConfig.TrustErrors): an
// operation that failed with an error for which kv.MaybeCommitted is
// false (its deadline passed before its commit) took no effect, and is
// left out of the history; the client keeps the lease it used. Same checks
// as TestLeaseSimulation's, and some calls must have failed so.
func TestLeaseSimulationTrustErrors(t *testing.T) {
	cfg := DefaultLeaseConfig()
	// More calls under a deadline, which mostly passes before the commit.
	cfg.DeadlineProb = 0.2
	total := runTrusting(t, cfg, 10)
	require.Positive(t, total.Trusted, "some calls must fail with an error MaybeCommitted rejects")
	require.Positive(t, total.Unknown, "some calls must fail maybe committed")
}

// TestLeaseSimulationTrustErrorsTxTimeouts is TestLeaseSimulationTrustErrors
// with TestLeaseSimulationTxTimeouts' transaction timeouts: a call whose
// transaction timed out before its commit (transaction_timed_out, not
// maybe committed) took no effect, and one whose commit timed out in
// flight (kv.CommitInterrupted) is of unknown outcome and recovered.
func TestLeaseSimulationTrustErrorsTxTimeouts(t *testing.T) {
	cfg := DefaultLeaseConfig()
	cfg.TxTimeoutProb, cfg.TxTimeout = 0.1, 800*time.Microsecond
	total := runTrusting(t, cfg, 4)
	require.Positive(t, total.TrustedTimedOut, "some calls must time out before their commit")
	require.Positive(t, total.TimedOutInFlight, "some commits must time out in flight")
}
