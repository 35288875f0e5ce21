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
// every job added is acked exactly once or dead exactly once (or gone
// with only an abandoned Ack that may have removed it). The run must have
// interrupted commits, recovered some failed calls at once, while their
// commit could still land, and abandoned some (never recovered).
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
		t.Logf("%d seeds: %d operations, %d jobs: %d acked once, %d dead once, %d gone by an abandoned Ack, %d lost, %d acked twice; %d calls abandoned (Adds %d, their job seen %d)",
			seeds, total.Operations, total.Added, total.Acked, total.Dead, total.AckedAbandoned, total.Lost, total.AckedTwice,
			total.Abandoned, total.AbandonedAdds, total.AbandonedAddsSeen)
	}()
	for seed := int64(1); seed <= seeds; seed++ {
		r, err := RunLeases(ctx, seed, DefaultLeaseConfig())
		require.NoError(t, err, "seed %d", seed)
		if seeds <= 8 {
			t.Logf("seed %d: %d ops, %s, added %d = acked %d + dead %d + gone by an abandoned Ack %d; faults: unknown %d/%d, not committed %d, too old %d, interrupted %d; failed calls %d (recovered at once %d, abandoned %d)",
				seed, r.Operations, checkName(r.Check), r.Added, r.Acked, r.Dead, r.AckedAbandoned,
				r.Stats.InjectedUnknownApplied, r.Stats.InjectedUnknownNotApplied, r.Stats.InjectedNotCommitted, r.Stats.InjectedTooOld,
				r.Stats.Interrupted, r.Unknown, r.RecoveredAtOnce, r.Abandoned)
		}
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		total.Operations += r.Operations
		total.Added += r.Added
		total.Acked += r.Acked
		total.Dead += r.Dead
		total.Lost += r.Lost
		total.AckedTwice += r.AckedTwice
		total.AckedAbandoned += r.AckedAbandoned
		total.Abandoned += r.Abandoned
		total.AbandonedAdds += r.AbandonedAdds
		total.AbandonedAddsSeen += r.AbandonedAddsSeen
		total.Stats.Interrupted += r.Stats.Interrupted
		total.RecoveredAtOnce += r.RecoveredAtOnce
	}
	require.Positive(t, total.Stats.Interrupted, "no commit was interrupted in flight")
	require.Positive(t, total.RecoveredAtOnce, "no failed call was recovered at once")
	require.Positive(t, total.Abandoned, "no failed call was abandoned")
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

// An operation of unknown outcome (never recovered) may have taken effect,
// with any output its kind has, or not, at any point up to its Return: the
// model accepts both, and still rejects what neither explains.
func TestLeaseModelUnknown(t *testing.T) {
	m := LeaseModel(2)
	op := func(c int, call, ret int64, in LeaseInput, out LeaseOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	unknown := LeaseOutput{Unknown: true}
	add := func(c int, call, ret int64, job string, out LeaseOutput) porcupine.Operation {
		out.Job = job
		return op(c, call, ret, LeaseInput{Kind: LAdd, Max: 2}, out)
	}
	lease := func(c int, call, ret int64, n int, out LeaseOutput) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LLease, N: n, D: 10}, out)
	}
	onLease := func(kind LeaseKind, c int, call, ret int64, job string, tag uint64, out LeaseOutput) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: kind, Job: job, Tag: tag, D: 20, Vest: 5}, out)
	}
	got := func(job string, tag uint64, attempt int) LeaseOutput {
		return LeaseOutput{Leases: []LeasedJob{{Job: job, Tag: tag, Attempt: attempt}}}
	}
	observe := func(call int64, jobs ...JobRecord) porcupine.Operation {
		return op(9, call, call+1, LeaseInput{Kind: LObserve}, LeaseOutput{Jobs: jobs})
	}
	queued := func(job string) JobRecord { return JobRecord{Job: job, Max: 2} }
	leased := func(job string, tag uint64, attempts int, vest int64) JobRecord {
		return JobRecord{Job: job, Tag: tag, Attempts: attempts, Vest: vest, Max: 2}
	}
	addA, addB := add(0, 1, 2, "a", LeaseOutput{}), add(0, 3, 4, "b", LeaseOutput{})
	leaseA := lease(0, 5, 6, 1, got("a", 7, 1))
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"add: its job leased", []porcupine.Operation{add(0, 1, 10, "a", unknown), lease(1, 2, 3, 1, got("a", 7, 1))}, true},
		{"add: its job absent", []porcupine.Operation{add(0, 1, 2, "a", unknown), observe(3)}, true},
		{"add: its job present", []porcupine.Operation{add(0, 1, 2, "a", unknown), observe(3, queued("a"))}, true},
		{"add: its job leased before its call", []porcupine.Operation{lease(1, 1, 2, 1, got("a", 7, 1)), add(0, 3, 4, "a", unknown)}, false},
		{"add seen nowhere: a job present", []porcupine.Operation{add(0, 1, 2, "", unknown), observe(3, queued("a"))}, false},
		{"add: after a lease found nothing", []porcupine.Operation{add(0, 1, 10, "a", unknown), lease(1, 2, 3, 1, LeaseOutput{Empty: true}),
			observe(11, queued("a"))}, true},
		{"add: its job present, then a lease found nothing", []porcupine.Operation{add(0, 1, 2, "a", unknown), observe(3, queued("a")),
			lease(1, 5, 6, 1, LeaseOutput{Empty: true})}, false},

		{"lease: took the job", []porcupine.Operation{addA, lease(0, 3, 4, 1, unknown), observe(5, leased("a", 99, 1, 10))}, true},
		{"lease: took nothing", []porcupine.Operation{addA, lease(0, 3, 4, 1, unknown), observe(5, queued("a"))}, true},
		{"lease: took two of one", []porcupine.Operation{addA, addB, lease(0, 5, 6, 1, unknown),
			observe(7, leased("a", 98, 1, 10), leased("b", 99, 1, 10))}, false},
		{"lease: took two of two", []porcupine.Operation{addA, addB, lease(0, 5, 6, 2, unknown),
			observe(7, leased("a", 98, 1, 10), leased("b", 99, 1, 10))}, true},
		{"lease: took it while leased", []porcupine.Operation{addA, lease(0, 3, 10, 1, unknown), lease(1, 4, 5, 1, got("a", 7, 1)),
			observe(11, leased("a", 99, 2, 10))}, false},
		{"lease: a known lease took it", []porcupine.Operation{addA, lease(0, 3, 10, 1, unknown), lease(1, 4, 5, 1, got("a", 7, 1)),
			observe(11, leased("a", 7, 1, 10))}, true},
		{"lease: its lease not held", []porcupine.Operation{addA, lease(0, 3, 4, 1, unknown),
			onLease(LAck, 1, 5, 6, "a", 99, LeaseOutput{})}, false},

		{"ack: removed the job", []porcupine.Operation{addA, leaseA, onLease(LAck, 0, 7, 8, "a", 7, unknown), observe(9)}, true},
		{"ack: did nothing", []porcupine.Operation{addA, leaseA, onLease(LAck, 0, 7, 8, "a", 7, unknown), observe(9, leased("a", 7, 1, 10))}, true},
		{"ack: did nothing, acked again", []porcupine.Operation{addA, leaseA, onLease(LAck, 0, 7, 8, "a", 7, unknown),
			onLease(LAck, 1, 9, 10, "a", 7, LeaseOutput{}), observe(11)}, true},
		{"ack: removed another job", []porcupine.Operation{addA, addB, leaseA, onLease(LAck, 0, 7, 8, "a", 7, unknown),
			observe(9, leased("a", 7, 1, 10))}, false},

		{"nack: requeued it", []porcupine.Operation{addA, leaseA, onLease(LNack, 0, 7, 8, "a", 7, unknown),
			observe(9, JobRecord{Job: "a", Vest: 5, Attempts: 1, Max: 2})}, true},
		{"nack: buried it with attempts left", []porcupine.Operation{addA, leaseA, onLease(LNack, 0, 7, 8, "a", 7, unknown),
			observe(9, JobRecord{Job: "a", Attempts: 1, Max: 2, Dead: true})}, false},
		{"nack: removed it", []porcupine.Operation{addA, leaseA, onLease(LNack, 0, 7, 8, "a", 7, unknown), observe(9)}, false},

		{"extend: extended it", []porcupine.Operation{addA, leaseA, onLease(LExtend, 0, 7, 8, "a", 7, unknown), observe(9, leased("a", 7, 1, 20))}, true},
		{"extend: did nothing", []porcupine.Operation{addA, leaseA, onLease(LExtend, 0, 7, 8, "a", 7, unknown), observe(9, leased("a", 7, 1, 10))}, true},
		{"extend: another deadline", []porcupine.Operation{addA, leaseA, onLease(LExtend, 0, 7, 8, "a", 7, unknown), observe(9, leased("a", 7, 1, 15))}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}
