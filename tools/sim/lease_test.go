package sim

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
)

// Concurrent clients on a JobQueue under not_committed,
// commit_unknown_result (both ways), transaction_too_old and commits
// interrupted in flight by a cancelled context, some landing after their
// call returned: every history is linearizable against LeaseModel, and
// every job added is acked exactly once or dead exactly once. The run
// must have interrupted commits and recovered some failed calls at once,
// while their commit could still land.
//
// FDBQUEUE_LEASE_SEEDS=n runs n seeds instead of 8 (a longer soak).
func TestLeaseSimulation(t *testing.T) {
	ctx := context.Background()
	seeds := int64(8)
	if n, err := strconv.ParseInt(os.Getenv("FDBQUEUE_LEASE_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	var total LeaseResult
	defer func() {
		t.Logf("%d seeds: %d operations, %d jobs: %d acked once, %d dead once, %d lost, %d acked twice",
			seeds, total.Operations, total.Added, total.Acked, total.Dead, total.Lost, total.AckedTwice)
	}()
	for seed := int64(1); seed <= seeds; seed++ {
		r, err := RunLeases(ctx, seed, DefaultLeaseConfig())
		require.NoError(t, err, "seed %d", seed)
		if seeds <= 8 {
			t.Logf("seed %d: %d ops, %s, added %d = acked %d + dead %d; faults: unknown %d/%d, not committed %d, too old %d, interrupted %d; failed calls recovered %d (at once %d)",
				seed, r.Operations, checkName(r.Check), r.Added, r.Acked, r.Dead,
				r.Stats.InjectedUnknownApplied, r.Stats.InjectedUnknownNotApplied, r.Stats.InjectedNotCommitted, r.Stats.InjectedTooOld,
				r.Stats.Interrupted, r.Unknown, r.RecoveredAtOnce)
		}
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		total.Operations += r.Operations
		total.Added += r.Added
		total.Acked += r.Acked
		total.Dead += r.Dead
		total.Lost += r.Lost
		total.AckedTwice += r.AckedTwice
		total.Stats.Interrupted += r.Stats.Interrupted
		total.RecoveredAtOnce += r.RecoveredAtOnce
	}
	require.Positive(t, total.Stats.Interrupted, "no commit was interrupted in flight")
	require.Positive(t, total.RecoveredAtOnce, "no failed call was recovered at once")
}

// Without the journal, commit_unknown_result makes an Add apply twice, an
// Ack fail after it applied, a Lease burn an attempt: the checks must
// notice.
func TestLeaseSimulationRejectsNoJournal(t *testing.T) {
	cfg := DefaultLeaseConfig()
	cfg.WithoutIdempotency = true
	rejected := 0
	for seed := int64(1); seed <= 4; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		if err != nil || !r.OK() {
			rejected++
		}
	}
	require.Positive(t, rejected)
}

// A journal that checked an operation's record with a snapshot read would
// not conflict with the operation's earlier attempt whose commit lands
// after the retry read: both would take effect (an Add adds two jobs, a
// Lease leases another job too). The recoveries at once meet such late
// landings: the checks must notice.
func TestLeaseSimulationCatchesSnapshotJournalReads(t *testing.T) {
	cfg := DefaultLeaseConfig()
	cfg.SnapshotJournalReads = true
	rejected := 0
	for seed := int64(1); seed <= 4; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		if err != nil || !r.OK() {
			rejected++
		}
	}
	require.Positive(t, rejected)
}

func checkName(c porcupine.CheckResult) string {
	switch c {
	case porcupine.Ok:
		return "linearizable"
	case porcupine.Illegal:
		return "NOT linearizable"
	}
	return "unknown"
}

// The model rejects what the layer must never do.
func TestLeaseModelRejects(t *testing.T) {
	m := LeaseModel(2)
	add := func(c int, call, ret int64, job string, vest int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LAdd, Vest: vest, Max: 2}, Call: call, Output: LeaseOutput{Job: job}, Return: ret}
	}
	lease := func(c int, call, ret, now int64, out LeaseOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LLease, Now: now, N: 1, D: 10}, Call: call, Output: out, Return: ret}
	}
	ack := func(c int, call, ret, now int64, job string, tag uint64, lost bool) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LAck, Now: now, Job: job, Tag: tag}, Call: call, Output: LeaseOutput{Lost: lost}, Return: ret}
	}
	got := func(job string, tag uint64, attempt int) LeaseOutput {
		return LeaseOutput{Leases: []LeasedJob{{Job: job, Tag: tag, Attempt: attempt}}}
	}
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"lease, ack", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)), ack(0, 5, 6, 0, "a", 7, false)}, true},
		{"leased before its vesting time", []porcupine.Operation{add(0, 1, 2, "a", 5), lease(0, 3, 4, 0, got("a", 7, 1))}, false},
		{"leased twice at once", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 6, 0, got("a", 7, 1)), lease(1, 4, 5, 0, got("a", 8, 1))}, false},
		{"empty while due", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, LeaseOutput{Empty: true})}, false},
		{"acked after another lease", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), ack(0, 7, 8, 20, "a", 7, false)}, false},
		{"lost after another lease", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), ack(0, 7, 8, 20, "a", 7, true)}, true},
		{"acked twice", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			ack(0, 5, 6, 0, "a", 7, false), ack(0, 7, 8, 0, "a", 7, false)}, false},
		{"attempt not counted", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 1))}, false},
		{"leased after its last attempt", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), lease(1, 7, 8, 40, got("a", 9, 3))}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}
