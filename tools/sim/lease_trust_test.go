package sim

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// runTrusting runs seeds 1 to n of cfg with LeaseConfig.TrustErrors,
// requires each to pass every check, its history linearizable or, for at
// most one seed in eight, undecided (a check that timed out: under -race
// on a loaded machine, about one history in 150 took over 30 s), and
// returns their totals of the counts the tests below require.
// FDBQUEUE_LEASE_SEEDS=n runs n seeds instead (a longer soak).
func runTrusting(t *testing.T, cfg LeaseConfig, n int64) (total LeaseResult) {
	t.Helper()
	cfg.TrustErrors = true
	if m, err := strconv.ParseInt(os.Getenv("FDBQUEUE_LEASE_SEEDS"), 10, 64); err == nil && m > 0 {
		n = m
	}
	inconclusive := 0
	for seed := int64(1); seed <= n; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		require.NoError(t, err, "seed %d", seed)
		if r.Check == porcupine.Unknown {
			t.Logf("seed %d: %v", seed, r.Failure)
			inconclusive++
			r.Check, r.Failure = porcupine.Ok, nil // the other checks must pass
		}
		if r.Failure != nil {
			var b strings.Builder
			_ = r.Failure.WriteHistory(&b)
			t.Logf("seed %d: %s", seed, b.String())
		}
		require.True(t, r.OK(), "seed %d: %s: %+v", seed, caught(r, nil), r)
		require.Nil(t, r.Failure, "a linearizable history is not kept")
		total.Add(r)
	}
	t.Logf("%d seeds: %d operations; %d failed calls taken at their word (%d timed out before the commit), %d of unknown outcome recovered or abandoned; %d commits timed out in flight; %d checks undecided",
		n, total.Operations, total.Trusted, total.TrustedTimedOut, total.Unknown, total.TimedOutInFlight, inconclusive)
	t.Logf("under IDs the layer made: %d calls under a fault, %d taken at their word, %d of unknown outcome abandoned",
		total.LayerIDs, total.LayerIDTrusted, total.LayerIDUnknown)
	allowed := max(1, int(n)/8)
	require.LessOrEqual(t, inconclusive, allowed, "checks that timed out prove nothing: %d of %d undecided", inconclusive, n)
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
	require.Positive(t, total.LayerIDTrusted, "some calls under an ID the layer made must fail with an error MaybeCommitted rejects")
	require.Positive(t, total.LayerIDUnknown, "some calls under an ID the layer made must fail maybe committed")
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

// A JobQueue call that returns a plain error although its commit applied
// is what TrustErrors is for: with it the simulation must fail a queue
// whose calls of one kind, run under a deadline, fail with
// context.DeadlineExceeded after their transaction committed (planted
// through LeaseConfig.plant; the operations run under a deadline are the
// only ones with one, their recoveries and races run without). Without
// TrustErrors the same bug passes: the failed call is of unknown outcome,
// and its recovery by OpID finds what it did.
func TestLeaseSimulationTrustErrorsCatchesAppliedCallsThatFail(t *testing.T) {
	cfg := rejectionConfig(DefaultLeaseConfig())
	cfg.Rounds, cfg.DeadlineProb, cfg.MaxDeadline = 6, 0.6, 2*time.Millisecond
	// More dead jobs, Requeues and DeleteDeads (as
	// TestLeaseSimulationCatchesPlantedDeadJobBugs).
	cfg.OneAttemptProb, cfg.RequeueProb, cfg.DeleteDeadProb = 0.6, 0.15, 0.1
	ctx := context.Background()
	var fired atomic.Int64 // planted failures
	plant := func(kind LeaseKind) func(LeaseKind, kv.Database) kv.Database {
		return func(k LeaseKind, db kv.Database) kv.Database {
			if k != kind {
				return db
			}
			return failAfterCommit{Database: db, fired: &fired}
		}
	}
	kinds := []LeaseKind{LAdd, LLease, LAck, LNack, LExtend, LRelease, LCancel, LRequeue, LDeleteDead}
	for _, kind := range kinds {
		t.Run(kind.String(), func(t *testing.T) {
			c := cfg
			c.TrustErrors, c.plant = true, plant(kind)
			// A caught seed's history is checked again, verbose, for
			// its report: bounded, as the seeds go on to the next when a
			// check times out.
			c.CheckTimeout = 5 * time.Second
			for seed := int64(1); seed <= plantSeeds; seed++ {
				r, err := RunLeases(ctx, seed, c)
				if err != nil || !r.OK() && r.Check != porcupine.Unknown {
					t.Logf("seed %d caught it: %s", seed, caught(r, err))
					return
				}
			}
			t.Fatal("no seed caught the planted bug")
		})
	}
	t.Run("recovered without TrustErrors", func(t *testing.T) {
		// Fewer calls under a deadline: with as many as above, every
		// failed one of unknown outcome, a history's check took over
		// 30 s under -race.
		c := cfg
		c.DeadlineProb = 0.2
		fired.Store(0)
		for _, kind := range kinds {
			c.plant = plant(kind)
			r, err := RunLeases(ctx, 1, c)
			require.NoError(t, err, "%v", kind)
			require.True(t, r.OK(), "%v: %s: %+v", kind, caught(r, nil), r)
		}
		require.Positive(t, fired.Load(), "no planted failure")
	})
}

// The same plant, with every call under a deadline run without WithOpID
// (LeaseConfig.LayerIDProb 1), under an ID the layer makes: such a call
// taken at its word must be checked as the others are. Two kinds, to keep
// it short (each of Add, Lease, Ack, Nack, Release and Cancel was caught
// within a few seeds in a trial run).
func TestLeaseSimulationTrustErrorsCatchesLayerIDCallsThatFail(t *testing.T) {
	cfg := rejectionConfig(DefaultLeaseConfig())
	cfg.Rounds, cfg.DeadlineProb, cfg.MaxDeadline = 6, 0.6, 2*time.Millisecond
	cfg.LayerIDProb, cfg.TrustErrors, cfg.CheckTimeout = 1, true, 5*time.Second
	var fired atomic.Int64
	for _, kind := range []LeaseKind{LAdd, LLease} {
		t.Run(kind.String(), func(t *testing.T) {
			c := cfg
			c.plant = func(k LeaseKind, db kv.Database) kv.Database {
				if k != kind {
					return db
				}
				return failAfterCommit{Database: db, fired: &fired}
			}
			for seed := int64(1); seed <= plantSeeds; seed++ {
				r, err := RunLeases(context.Background(), seed, c)
				if err != nil || !r.OK() && r.Check != porcupine.Unknown {
					require.Positive(t, r.LayerIDTrusted, "seed %d caught it, but no call under a layer-made ID was taken at its word", seed)
					t.Logf("seed %d caught it: %s", seed, caught(r, err))
					return
				}
			}
			t.Fatal("no seed caught the planted bug")
		})
	}
}

// failAfterCommit fails an operation run under a deadline with
// context.DeadlineExceeded, not maybe committed, after its transaction
// committed, and counts it in fired.
type failAfterCommit struct {
	kv.Database
	fired *atomic.Int64
}

func (f failAfterCommit) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	err := f.Database.Transact(ctx, fn)
	if _, ok := ctx.Deadline(); ok && err == nil {
		f.fired.Add(1)
		return context.DeadlineExceeded
	}
	return err
}
