package sim

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Concurrent clients on a JobQueue under not_committed,
// commit_unknown_result (both ways), transaction_too_old and commits
// interrupted in flight by a cancelled context, some landing after their
// call returned: every history is linearizable against LeaseModel, and
// every job added is acked exactly once or dead exactly once (or gone
// with only an abandoned Ack that may have removed it), and every dead
// job used exactly MaxAttempts counted attempts (a Release gives its
// lease's attempt back). The run must have interrupted commits, recovered
// some failed calls at once, while their commit could still land, and
// abandoned some (never recovered); and released leases, some on their
// last attempt (the job then lives on), some of jobs that died later.
// Half the Adds carry a unique key from a set of three: no two jobs in the
// queue ever share one, an Add of a held key returns the holder's ID
// (the model checks both, and each round's Observe checks the unique-key
// index), and a key is free again once its holder is acked or dead (the
// run must have Adds that found their key held and jobs added under a key
// an earlier job had held; after the drain no key is held).
// Clients cancel jobs and look them up (Job): the model checks that a
// cancelled job is never leased, acked or dead again, that its holder's
// lease is lost and its unique key free, that a Cancel of a dead, gone or
// never-added job finds nothing, and that each lookup returns the job as
// it was at some point of the call; at each round's end and after the
// drain nothing of a removed job is left and Stats and the bucket
// counters are exact; no job is both cancelled and acked or dead. The run
// must have cancelled jobs (queued or leased), Cancels that found nothing
// of each kind (never added, dead, gone), Cancels recovered by OpID,
// Cancels run alongside their job's holder's Ack, Nack, Extend or Release
// (one must lose), holders that found their lease lost to a Cancel, keys
// freed by a Cancel taken by a later Add, and lookups of every state.
// Clients requeue and delete dead jobs: the model checks that a Requeue
// puts its job back due at once with its attempts at 0 and its unique key
// held again, or is refused while another job holds the key, that a
// DeleteDead removes its job for good, and that both find nothing for a
// job not dead, each taking effect once under commit_unknown_result and
// recovery by OpID; no job is deleted twice, or deleted and also acked,
// cancelled or dead. The run must have requeued jobs (some then acked,
// some dead again), deleted jobs, Requeues refused for a held key, both
// finding nothing (some of IDs never added), both recovered by OpID, and
// both raced against another client's Requeue, DeleteDead, Cancel and
// lookup of the same job.
//
// FDBQUEUE_LEASE_SEEDS=n runs n seeds instead of 10 (a longer soak).
func TestLeaseSimulation(t *testing.T) {
	ctx := context.Background()
	seeds := int64(10)
	if n, err := strconv.ParseInt(os.Getenv("FDBQUEUE_LEASE_SEEDS"), 10, 64); err == nil && n > 0 {
		seeds = n
	}
	var total LeaseResult
	ran := int64(0) // seeds run
	defer func() {
		t.Logf("%d seeds: %d operations, %d jobs: %d acked once, %d dead once, %d gone by an abandoned Ack, %d lost, %d acked twice; %d calls abandoned (Adds %d, their job seen %d; Releases %d); %d releases (%d on the last attempt, %d lost), %d released jobs died later",
			ran, total.Operations, total.Added, total.Acked, total.Dead, total.AckedAbandoned, total.Lost, total.AckedTwice,
			total.Abandoned, total.AbandonedAdds, total.AbandonedAddsSeen, total.AbandonedReleases,
			total.Released, total.ReleasedLast, total.ReleaseLost, total.ReleasedDead)
		t.Logf("under IDs the layer made: %d calls under a fault, %d failed (outcome unknown, abandoned; %d kept their lease)", total.LayerIDs, total.LayerIDUnknown, total.LayerIDKept)
		t.Logf("unique keys: %d Adds, %d found the key held, %d jobs added under a key an earlier job had held",
			total.UniqueAdds, total.UniqueDuplicates, total.UniqueReused)
		t.Logf("cancels: %d jobs cancelled (%d gone by an abandoned Cancel), %d not found (never added %d, dead %d, gone %d), %d recovered by OpID, %d raced the job's holder; %d leases found lost to a Cancel, %d jobs added under a key a cancelled job had held; Job: %d lookups (queued %d, leased %d, dead %d, not found %d)",
			total.Cancelled, total.CancelledAbandoned, total.CancelNotFound, total.CancelNever, total.CancelDead, total.CancelGone,
			total.CancelsRecovered, total.CancelRaces, total.LostToCancel, total.KeysFreedByCancel,
			total.JobLookups, total.JobQueued, total.JobLeased, total.JobDead, total.JobNotFound)
		t.Logf("dead jobs: %d requeued (%d then acked, %d dead again), %d refused for a held key, %d not found; %d deleted (%d gone by an abandoned DeleteDead), %d not found; %d of IDs never added; %d recovered by OpID; raced against a Requeue %d, DeleteDead %d, Cancel %d, Job %d",
			total.Requeued, total.RequeuedAcked, total.RequeuedDead, total.RequeueKeyHeld, total.RequeueNotFound,
			total.Deleted, total.DeletedAbandoned, total.DeleteNotFound, total.DeadOpsNever, total.DeadOpsRecovered,
			total.DeadRaces[0], total.DeadRaces[1], total.DeadRaces[2], total.DeadRaces[3])
		t.Logf("payloads: %d jobs added with a limit-sized one, %d leased (%d Leases with others), %d mismatches; AddBatch: %d accepted, %d refused as too large, %d budget errors; %d Leases of several jobs took fewer",
			total.LimitAdded, total.LimitLeased, total.LimitLeasedTogether, total.ValueMismatches,
			total.Batches, total.BatchTooLarge, total.BudgetErrors, total.LeasesShort)
	}()
	// The coverage checks (leaseCoverageGaps) count events that the
	// seeds' timing decides (a Requeue that finds its key held: a handful
	// per ten seeds): while one is still missing after the seeds, up to
	// as many more run, so that a slow machine does not fail the test for
	// a path the next seed would take.
	for seed := int64(1); seed <= seeds || (seed <= 2*seeds && len(leaseCoverageGaps(total)) > 0); seed++ {
		ran = seed
		r, err := RunLeases(ctx, seed, DefaultLeaseConfig())
		require.NoError(t, err, "seed %d", seed)
		if seeds <= 10 {
			t.Logf("seed %d: %d ops, %s, added %d = acked %d + dead %d + gone by an abandoned Ack %d; faults: unknown %d/%d, not committed %d, too old %d, interrupted %d; failed calls %d (recovered at once %d, abandoned %d)",
				seed, r.Operations, checkName(r.Check), r.Added, r.Acked, r.Dead, r.AckedAbandoned,
				r.Stats.InjectedUnknownApplied, r.Stats.InjectedUnknownNotApplied, r.Stats.InjectedNotCommitted, r.Stats.InjectedTooOld,
				r.Stats.Interrupted, r.Unknown, r.RecoveredAtOnce, r.Abandoned)
		}
		if r.Failure != nil {
			var b strings.Builder
			_ = r.Failure.WriteHistory(&b)
			t.Logf("seed %d: %s", seed, b.String())
		}
		require.True(t, r.OK(), "seed %d: %+v", seed, r)
		require.Nil(t, r.Failure, "a linearizable history is not kept")
		total.Add(r)
	}
	require.Empty(t, leaseCoverageGaps(total), "after %d seeds", ran)
}

// leaseCoverageGaps returns what TestLeaseSimulation's seeds have not yet
// exercised: the paths whose count in total is still zero.
func leaseCoverageGaps(total LeaseResult) []string {
	var gaps []string
	need(&gaps, total.Stats.Interrupted, "no commit was interrupted in flight")
	need(&gaps, total.Stats.InjectedReadErrors, "no read failed")
	need(&gaps, total.Stats.InjectedReadVersionErrors, "no read version request failed")
	need(&gaps, total.RecoveredAtOnce, "no failed call was recovered at once")
	need(&gaps, total.Abandoned, "no failed call was abandoned")
	need(&gaps, total.LayerIDUnknown, "no call under an ID the layer made failed, its outcome unknown")
	need(&gaps, total.LayerIDKept, "no client kept the lease of a call of unknown outcome under an ID the layer made")
	need(&gaps, total.Released, "no lease was released")
	need(&gaps, total.ReleasedLast, "no lease was released on its last attempt")
	need(&gaps, total.ReleasedDead, "no released job died")
	need(&gaps, total.UniqueDuplicates, "no Add found its unique key held")
	need(&gaps, total.UniqueReused, "no unique key was reused after its holder left")
	need(&gaps, total.Cancelled, "no job was cancelled")
	need(&gaps, total.CancelNever, "no Cancel of an ID never added")
	need(&gaps, total.CancelDead, "no Cancel of a dead job")
	need(&gaps, total.CancelGone, "no Cancel of a job acked or cancelled")
	need(&gaps, total.CancelsRecovered, "no Cancel of unknown outcome was recovered")
	need(&gaps, total.LostToCancel, "no holder found its lease lost to a Cancel")
	need(&gaps, total.CancelRaces, "no Cancel raced its job's holder")
	need(&gaps, total.KeysFreedByCancel, "no unique key freed by a Cancel was taken again")
	need(&gaps, total.Requeued, "no dead job was requeued")
	need(&gaps, total.RequeuedAcked, "no requeued job was acked")
	need(&gaps, total.RequeuedDead, "no requeued job died again")
	need(&gaps, total.RequeueKeyHeld, "no Requeue found its unique key held")
	need(&gaps, total.RequeueNotFound, "no Requeue found nothing")
	need(&gaps, total.Deleted, "no dead job was deleted")
	need(&gaps, total.DeleteNotFound, "no DeleteDead found nothing")
	need(&gaps, total.DeadOpsNever, "no Requeue or DeleteDead of an ID never added")
	need(&gaps, total.DeadOpsRecovered, "no Requeue or DeleteDead of unknown outcome was recovered")
	for i, n := range total.DeadRaces {
		need(&gaps, n, "no Requeue or DeleteDead raced a "+raceKinds[i].String())
	}
	need(&gaps, total.JobQueued, "no Job lookup returned a job queued")
	need(&gaps, total.JobLeased, "no Job lookup returned a job leased")
	need(&gaps, total.JobDead, "no Job lookup returned a job dead")
	need(&gaps, total.JobNotFound, "no Job lookup returned a job not found")
	need(&gaps, total.LimitAdded, "no job was added with a limit-sized payload")
	need(&gaps, total.LimitLeasedTogether, "no Lease returned a limit-sized payload with other jobs")
	need(&gaps, total.Batches, "no AddBatch was accepted")
	need(&gaps, total.BatchTooLarge, "no AddBatch was refused as too large")
	need(&gaps, total.LeasesShort, "no Lease of several jobs took fewer")
	return gaps
}

// need adds what to *gaps when n is not positive.
func need[N int | int64](gaps *[]string, n N, what string) {
	if n <= 0 {
		*gaps = append(*gaps, what)
	}
}

// Without the journal, commit_unknown_result makes an Add apply twice, an
// Ack fail after it applied, a Lease burn an attempt: the checks must
// notice.
//
// A history rejected is kept (LeaseResult.Failure), with what the soak
// writes: the history as text, the longest prefix the checker could
// linearize and the model's state after it, and porcupine's
// visualization.
func TestLeaseSimulationRejectsNoJournal(t *testing.T) {
	cfg := rejectionConfig(DefaultLeaseConfig())
	cfg.WithoutIdempotency = true
	rejected, illegal := 0, 0
	for seed := int64(1); seed <= 4; seed++ {
		r, err := RunLeases(context.Background(), seed, cfg)
		if err != nil || !r.OK() {
			rejected++
		}
		if err != nil || r.Check == porcupine.Ok {
			require.Nil(t, r.Failure, "seed %d: %v", seed, r.Check)
		}
		if err != nil || r.Check != porcupine.Illegal {
			continue
		}
		illegal++
		f := r.Failure
		require.NotNil(t, f, "seed %d: an illegal history is kept", seed)
		require.True(t, f.HasVisualization())
		require.Equal(t, seed, f.Seed)
		var b strings.Builder
		require.NoError(t, f.WriteHistory(&b))
		text := b.String()
		require.Contains(t, text, "seed "+strconv.FormatInt(seed, 10)+", job queue: history of ")
		require.Contains(t, text, "longest linearizable prefix (")
		require.Contains(t, text, "state after it: {[")
		require.Equal(t, r.Operations, strings.Count(text, "] client "), "every operation written")
		require.Contains(t, text, "Add now=")
		require.Contains(t, text, "Observe now=")
		html := filepath.Join(t.TempDir(), "h.html")
		require.NoError(t, f.Visualize(html))
		st, err := os.Stat(html)
		require.NoError(t, err)
		require.Positive(t, st.Size())
	}
	require.Positive(t, rejected)
	require.Positive(t, illegal, "no seed's history was rejected: nothing kept to check")
}

// A journal that checked an operation's record with a snapshot read would
// not conflict with the operation's earlier attempt whose commit lands
// after the retry read: both would take effect (an Add adds two jobs, a
// Lease leases another job too). The recoveries at once meet such late
// landings: the checks must notice.
func TestLeaseSimulationCatchesSnapshotJournalReads(t *testing.T) {
	cfg := rejectionConfig(DefaultLeaseConfig())
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

// rejectionConfig is cfg for a test that needs the checker to reject a
// history (a planted bug, the journal off): without AddBatches, and with
// the default batch budget. Porcupine searches every linearization of a
// history it rejects, and a batch's extra jobs (and, under a small
// budget, the Leases that may find nothing: LeaseInput.Tight) multiply
// that search: with them, such a seed's check took up to a minute where
// it takes seconds without. The payloads (which cost the checker nothing)
// stay; TestLeaseSimulation and the trust-errors runs cover batches and
// budgets.
func rejectionConfig(cfg LeaseConfig) LeaseConfig {
	cfg.AddBatchProb, cfg.BatchBudgets = 0, nil
	return cfg
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
	release := func(c int, call, ret, now int64, job string, tag uint64, vest int64, lost bool) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LRelease, Now: now, Job: job, Tag: tag, Vest: vest},
			Call: call, Output: LeaseOutput{Lost: lost}, Return: ret}
	}
	observe := func(call, now int64, jobs ...JobRecord) porcupine.Operation {
		return porcupine.Operation{ClientId: 9, Input: LeaseInput{Kind: LObserve, Now: now}, Call: call, Output: LeaseOutput{Jobs: jobs}, Return: call + 1}
	}
	// a's two attempts (max 2) leased, the second's lease given back.
	lastReleased := []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)), lease(1, 5, 6, 20, got("a", 8, 2)),
		release(1, 7, 8, 20, "a", 8, 20, false)}
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
		{"dead at its last attempt", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), observe(7, 40, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})}, true},
		{"dead with another count", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), observe(7, 40, JobRecord{Job: "a", Attempts: 1, Max: 2, Dead: true})}, false},
		{"dead with another priority", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), observe(7, 40, JobRecord{Job: "a", Attempts: 2, Max: 2, Prio: 1, Dead: true})}, false},
		{"dead before its last lease expired", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), observe(7, 25, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})}, false},
		{"more leases than asked for", []porcupine.Operation{add(0, 1, 2, "a", 0), add(0, 3, 4, "b", 0),
			lease(0, 5, 6, 0, LeaseOutput{Leases: []LeasedJob{{Job: "a", Tag: 7, Attempt: 1}, {Job: "b", Tag: 8, Attempt: 1}}})}, false},
		{"leased under no tag", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 0, 1))}, false},
		{"one ID added twice", []porcupine.Operation{add(0, 1, 2, "a", 0), add(0, 3, 4, "a", 0)}, false},

		{"released, leased again with its attempt back", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			release(0, 5, 6, 0, "a", 7, 0, false), lease(1, 7, 8, 0, got("a", 8, 1))}, true},
		{"release counted as an attempt", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			release(0, 5, 6, 0, "a", 7, 0, false), lease(1, 7, 8, 0, got("a", 8, 2))}, false},
		{"leased before the release's delay", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			release(0, 5, 6, 0, "a", 7, 15, false), lease(1, 7, 8, 10, got("a", 8, 1))}, false},
		{"released twice", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			release(0, 5, 6, 0, "a", 7, 0, false), release(0, 7, 8, 0, "a", 7, 0, false)}, false},
		{"released, then its lease lost", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			release(0, 5, 6, 0, "a", 7, 0, false), ack(0, 7, 8, 0, "a", 7, true)}, true},
		{"released after another lease took it", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), release(0, 7, 8, 20, "a", 7, 20, false)}, false},
		{"release lost after another lease took it", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), release(0, 7, 8, 20, "a", 7, 20, true)}, true},
		{"released on its last attempt, leased once more", append(slices.Clone(lastReleased), lease(0, 9, 10, 20, got("a", 9, 2))), true},
		{"released on its last attempt, queued", append(slices.Clone(lastReleased),
			observe(9, 40, JobRecord{Job: "a", Vest: 20, Attempts: 1, Max: 2})), true},
		{"released on its last attempt, buried", append(slices.Clone(lastReleased),
			observe(9, 40, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})), false},
		{"released on its last attempt, nacked dead", append(slices.Clone(lastReleased), lease(0, 9, 10, 20, got("a", 9, 2)),
			porcupine.Operation{ClientId: 0, Input: LeaseInput{Kind: LNack, Now: 20, Job: "a", Tag: 9}, Call: 11, Output: LeaseOutput{Dead: true}, Return: 12}), true},
		{"released on its last attempt, leased twice more", append(slices.Clone(lastReleased), lease(0, 9, 10, 20, got("a", 9, 2)),
			lease(0, 11, 12, 40, got("a", 10, 3))), false},
		{"release of an expired last lease lost: buried", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), release(1, 7, 8, 40, "a", 8, 40, true),
			observe(9, 40, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})}, true},
		{"release of an expired last lease", []porcupine.Operation{add(0, 1, 2, "a", 0), lease(0, 3, 4, 0, got("a", 7, 1)),
			lease(1, 5, 6, 20, got("a", 8, 2)), release(1, 7, 8, 40, "a", 8, 40, false),
			observe(9, 40, JobRecord{Job: "a", Vest: 40, Attempts: 1, Max: 2})}, true},
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

		{"release: gave it back", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown),
			observe(9, JobRecord{Job: "a", Vest: 5, Max: 2})}, true},
		{"release: did nothing", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown), observe(9, leased("a", 7, 1, 10))}, true},
		{"release: kept the attempt", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown),
			observe(9, JobRecord{Job: "a", Vest: 5, Attempts: 1, Max: 2})}, false},
		{"release: another vesting time", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown),
			observe(9, JobRecord{Job: "a", Vest: 6, Max: 2})}, false},
		{"release: leased again meanwhile, its attempt back", []porcupine.Operation{addA, leaseA,
			op(0, 7, 10, LeaseInput{Kind: LRelease, Job: "a", Tag: 7}, unknown), lease(1, 8, 9, 1, got("a", 8, 1))}, true},
		{"release: leased again meanwhile, attempt counted", []porcupine.Operation{addA, leaseA,
			op(0, 7, 10, LeaseInput{Kind: LRelease, Job: "a", Tag: 7}, unknown), lease(1, 8, 9, 1, got("a", 8, 2))}, false},
		{"release: did nothing, released again", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown),
			onLease(LRelease, 1, 9, 10, "a", 7, LeaseOutput{}), observe(11, JobRecord{Job: "a", Vest: 5, Max: 2})}, true},
		{"release: gave it back twice", []porcupine.Operation{addA, leaseA, onLease(LRelease, 0, 7, 8, "a", 7, unknown),
			onLease(LRelease, 1, 9, 10, "a", 7, LeaseOutput{}), observe(11, JobRecord{Job: "a", Vest: 5, Attempts: -1, Max: 2})}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// The model's unique-key rules: an Add of a held key (its holder queued,
// delayed or leased) adds nothing and returns the holder's ID; an Add of
// a free key adds its job; a key is free again once its holder is acked
// or dead (nacked on its last attempt, or buried by a Lease once its last
// lease expired); Observe's unique-key index holds exactly the keys of the
// jobs in the queue.
func TestLeaseModelUniqueKeys(t *testing.T) {
	m := LeaseModel(2)
	add := func(c int, call, ret int64, key, job string, dup bool) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LAdd, Max: 2, Unique: key}, Call: call,
			Output: LeaseOutput{Job: job, Duplicate: dup}, Return: ret}
	}
	lease := func(c int, call, ret, now int64, job string, tag uint64, attempt int) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: LLease, Now: now, N: 1, D: 10}, Call: call,
			Output: LeaseOutput{Leases: []LeasedJob{{Job: job, Tag: tag, Attempt: attempt}}}, Return: ret}
	}
	onLease := func(kind LeaseKind, c int, call, ret, now int64, job string, tag uint64, out LeaseOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: LeaseInput{Kind: kind, Now: now, Job: job, Tag: tag}, Call: call, Output: out, Return: ret}
	}
	observe := func(call, now int64, held []KeyHold, jobs ...JobRecord) porcupine.Operation {
		return porcupine.Operation{ClientId: 9, Input: LeaseInput{Kind: LObserve, Now: now}, Call: call,
			Output: LeaseOutput{Jobs: jobs, Held: held}, Return: call + 1}
	}
	addA := add(0, 1, 2, "k", "a", false)
	// a leased on both its attempts (max 2), the last lease expired at 30.
	exhausted := []porcupine.Operation{addA, lease(0, 3, 4, 0, "a", 7, 1), lease(0, 5, 6, 20, "a", 8, 2)}
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"held: the holder's ID", []porcupine.Operation{addA, add(1, 3, 4, "k", "a", true)}, true},
		{"held: another job added", []porcupine.Operation{addA, add(1, 3, 4, "k", "b", false)}, false},
		{"held: another job's ID", []porcupine.Operation{addA, add(0, 3, 4, "", "b", false), add(1, 5, 6, "k", "b", true)}, false},
		{"free: called a duplicate", []porcupine.Operation{add(1, 1, 2, "k", "a", true)}, false},
		{"no key: called a duplicate", []porcupine.Operation{addA, add(1, 3, 4, "", "a", true)}, false},
		{"other key: added", []porcupine.Operation{addA, add(1, 3, 4, "j", "b", false)}, true},
		{"concurrent adds: one adds, the other finds it", []porcupine.Operation{add(0, 1, 4, "k", "a", false), add(1, 2, 3, "k", "a", true)}, true},
		{"concurrent adds: both add", []porcupine.Operation{add(0, 1, 4, "k", "a", false), add(1, 2, 3, "k", "b", false)}, false},
		{"leased: still held", []porcupine.Operation{addA, lease(0, 3, 4, 0, "a", 7, 1), add(1, 5, 6, "k", "b", false)}, false},
		{"acked: free", []porcupine.Operation{addA, lease(0, 3, 4, 0, "a", 7, 1), onLease(LAck, 0, 5, 6, 0, "a", 7, LeaseOutput{}),
			add(1, 7, 8, "k", "b", false)}, true},
		{"acked: still called held", []porcupine.Operation{addA, lease(0, 3, 4, 0, "a", 7, 1), onLease(LAck, 0, 5, 6, 0, "a", 7, LeaseOutput{}),
			add(1, 7, 8, "k", "a", true)}, false},
		{"nacked, attempts left: held", []porcupine.Operation{addA, lease(0, 3, 4, 0, "a", 7, 1), onLease(LNack, 0, 5, 6, 0, "a", 7, LeaseOutput{}),
			add(1, 7, 8, "k", "a", true)}, true},
		{"nacked dead: free", append(slices.Clone(exhausted), onLease(LNack, 0, 7, 8, 20, "a", 8, LeaseOutput{Dead: true}),
			add(1, 9, 10, "k", "b", false)), true},
		{"nacked dead: still called held", append(slices.Clone(exhausted), onLease(LNack, 0, 7, 8, 20, "a", 8, LeaseOutput{Dead: true}),
			add(1, 9, 10, "k", "a", true)), false},
		{"last lease expired: buried, free", append(slices.Clone(exhausted), porcupine.Operation{ClientId: 1,
			Input: LeaseInput{Kind: LAdd, Now: 40, Max: 2, Unique: "k"}, Call: 7, Output: LeaseOutput{Job: "b"}, Return: 8},
			observe(9, 40, []KeyHold{{"k", "b"}}, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true, Unique: "k"}, JobRecord{Job: "b", Max: 2, Unique: "k"})), true},
		{"last lease running: not free", append(slices.Clone(exhausted), porcupine.Operation{ClientId: 1,
			Input: LeaseInput{Kind: LAdd, Now: 25, Max: 2, Unique: "k"}, Call: 7, Output: LeaseOutput{Job: "b"}, Return: 8}), false},
		{"index: the holder", []porcupine.Operation{addA, observe(3, 0, []KeyHold{{"k", "a"}}, JobRecord{Job: "a", Max: 2, Unique: "k"})}, true},
		{"index: missing", []porcupine.Operation{addA, observe(3, 0, nil, JobRecord{Job: "a", Max: 2, Unique: "k"})}, false},
		{"index: another job", []porcupine.Operation{addA, add(0, 3, 4, "", "b", false), observe(5, 0, []KeyHold{{"k", "b"}},
			JobRecord{Job: "a", Max: 2, Unique: "k"}, JobRecord{Job: "b", Max: 2})}, false},
		{"index: a dead job's key", append(slices.Clone(exhausted), onLease(LNack, 0, 7, 8, 20, "a", 8, LeaseOutput{Dead: true}),
			observe(9, 20, []KeyHold{{"k", "a"}}, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true, Unique: "k"})), false},
		{"record: key lost", []porcupine.Operation{addA, observe(3, 0, []KeyHold{{"k", "a"}}, JobRecord{Job: "a", Max: 2})}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// The model's Cancel and Job: a cancelled job is gone for good (never
// leased, acked, nacked, extended, released or dead again, its unique key
// free, absent from Observe), a Cancel of a dead, acked, cancelled or
// never-added job finds nothing (nor does one of a job a Lease buried),
// and a Job lookup returns the job as the state holds it.
func TestLeaseModelCancelAndJob(t *testing.T) {
	m := LeaseModel(2)
	op, add, lease, got := modelOp, modelAdd, modelLease, modelGot
	onLease := func(kind LeaseKind, c int, call, ret, now int64, job string, tag uint64, out LeaseOutput) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: kind, Now: now, Job: job, Tag: tag, D: 10}, out)
	}
	cancel := func(c int, call, ret, now int64, job string, notFound bool) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LCancel, Now: now, Job: job}, LeaseOutput{NotFound: notFound})
	}
	cancelUnknown := func(c int, call, ret int64, job string) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LCancel, Job: job}, LeaseOutput{Unknown: true})
	}
	job := func(c int, call, ret, now int64, id string, rec *JobRecord) porcupine.Operation {
		if rec == nil {
			return op(c, call, ret, LeaseInput{Kind: LJob, Now: now, Job: id}, LeaseOutput{NotFound: true})
		}
		return op(c, call, ret, LeaseInput{Kind: LJob, Now: now, Job: id}, LeaseOutput{Record: *rec})
	}
	observe := func(call, now int64, held []KeyHold, jobs ...JobRecord) porcupine.Operation {
		return op(9, call, call+1, LeaseInput{Kind: LObserve, Now: now}, LeaseOutput{Jobs: jobs, Held: held})
	}
	addA := add(0, 1, 2, "", "a", false)
	leaseA := lease(0, 3, 4, 0, got("a", 7, 1))
	// a leased on both its attempts (max 2), the last lease expired at 30.
	exhausted := []porcupine.Operation{addA, leaseA, lease(0, 5, 6, 20, got("a", 8, 2))}
	deadA := append(slices.Clone(exhausted), onLease(LNack, 0, 7, 8, 20, "a", 8, LeaseOutput{Dead: true}))
	h := func(ops ...porcupine.Operation) []porcupine.Operation { return ops }
	then := func(prefix []porcupine.Operation, ops ...porcupine.Operation) []porcupine.Operation {
		return append(slices.Clone(prefix), ops...)
	}
	rec := func(r JobRecord) *JobRecord { return &r }
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"queued: cancelled, then nothing to lease", h(addA, cancel(0, 3, 4, 0, "a", false), lease(0, 5, 6, 0, LeaseOutput{Empty: true})), true},
		{"queued: cancelled, then leased", h(addA, cancel(0, 3, 4, 0, "a", false), lease(0, 5, 6, 0, got("a", 7, 1))), false},
		{"queued: cancelled, then observed", h(addA, cancel(0, 3, 4, 0, "a", false), observe(5, 0, nil)), true},
		{"queued: cancelled, still there", h(addA, cancel(0, 3, 4, 0, "a", false), observe(5, 0, nil, JobRecord{Job: "a", Max: 2})), false},
		{"queued: not found", h(addA, cancel(0, 3, 4, 0, "a", true)), false},
		{"delayed: cancelled", h(op(0, 1, 2, LeaseInput{Kind: LAdd, Vest: 50, Max: 2}, LeaseOutput{Job: "a"}),
			cancel(0, 3, 4, 0, "a", false), lease(0, 5, 6, 60, LeaseOutput{Empty: true})), true},
		{"leased: cancelled, the holder's ack lost", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LAck, 0, 7, 8, 0, "a", 7, LeaseOutput{Lost: true})), true},
		{"leased: cancelled, the holder acks", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LAck, 0, 7, 8, 0, "a", 7, LeaseOutput{})), false},
		{"leased: cancelled, the holder nacks", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LNack, 0, 7, 8, 0, "a", 7, LeaseOutput{})), false},
		{"leased: cancelled, the holder extends", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LExtend, 0, 7, 8, 0, "a", 7, LeaseOutput{})), false},
		{"leased: cancelled, the holder releases", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LRelease, 0, 7, 8, 0, "a", 7, LeaseOutput{})), false},
		{"leased: cancelled, the holder's release lost", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), onLease(LRelease, 0, 7, 8, 0, "a", 7, LeaseOutput{Lost: true})), true},
		{"leased: cancel and ack race, one wins", h(addA, leaseA, cancel(1, 5, 8, 0, "a", true), onLease(LAck, 0, 6, 7, 0, "a", 7, LeaseOutput{})), true},
		{"leased: cancel and ack race, both win", h(addA, leaseA, cancel(1, 5, 8, 0, "a", false), onLease(LAck, 0, 6, 7, 0, "a", 7, LeaseOutput{})), false},
		{"leased: cancelled twice", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), cancel(2, 7, 8, 0, "a", false)), false},
		{"leased: cancelled, then not found", h(addA, leaseA, cancel(1, 5, 6, 0, "a", false), cancel(2, 7, 8, 0, "a", true)), true},
		{"acked: not found", h(addA, leaseA, onLease(LAck, 0, 5, 6, 0, "a", 7, LeaseOutput{}), cancel(1, 7, 8, 0, "a", true)), true},
		{"acked: cancelled", h(addA, leaseA, onLease(LAck, 0, 5, 6, 0, "a", 7, LeaseOutput{}), cancel(1, 7, 8, 0, "a", false)), false},
		{"never added: not found", h(addA, cancel(1, 3, 4, 0, "z", true)), true},
		{"never added: cancelled", h(addA, cancel(1, 3, 4, 0, "z", false)), false},
		{"dead: not found", then(deadA, cancel(1, 9, 10, 20, "a", true)), true},
		{"dead: cancelled", then(deadA, cancel(1, 9, 10, 20, "a", false)), false},
		{"last lease running: not found", then(exhausted, cancel(1, 7, 8, 25, "a", true)), false},
		{"last lease expired: buried, not found", then(exhausted, cancel(1, 7, 8, 40, "a", true),
			observe(9, 40, nil, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})), true},
		{"last lease expired: cancelled, not dead", then(exhausted, cancel(1, 7, 8, 40, "a", false), observe(9, 40, nil)), true},
		{"last lease expired: cancelled, then dead", then(exhausted, cancel(1, 7, 8, 40, "a", false),
			observe(9, 40, nil, JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true})), false},

		{"unique: cancelled, key free", h(add(0, 1, 2, "k", "a", false), cancel(0, 3, 4, 0, "a", false), add(1, 5, 6, "k", "b", false)), true},
		{"unique: cancelled, still called held", h(add(0, 1, 2, "k", "a", false), cancel(0, 3, 4, 0, "a", false), add(1, 5, 6, "k", "a", true)), false},
		{"unique: cancelled, key left in the index", h(add(0, 1, 2, "k", "a", false), cancel(0, 3, 4, 0, "a", false),
			observe(5, 0, []KeyHold{{"k", "a"}})), false},
		{"unique: cancelled leased, key free", h(add(0, 1, 2, "k", "a", false), leaseA, cancel(1, 5, 6, 0, "a", false),
			add(1, 7, 8, "k", "b", false), observe(9, 0, []KeyHold{{"k", "b"}}, JobRecord{Job: "b", Max: 2, Unique: "k"})), true},

		{"unknown: removed", h(addA, cancelUnknown(0, 3, 4, "a"), observe(5, 0, nil)), true},
		{"unknown: did nothing", h(addA, cancelUnknown(0, 3, 4, "a"), observe(5, 0, nil, JobRecord{Job: "a", Max: 2})), true},
		{"unknown: removed, then leased", h(addA, cancelUnknown(0, 3, 4, "a"), observe(5, 0, nil), lease(0, 7, 8, 0, got("a", 7, 1))), false},
		{"unknown: cancelled another job", h(addA, add(0, 3, 4, "", "b", false), cancelUnknown(0, 5, 6, "a"),
			observe(7, 0, nil, JobRecord{Job: "a", Max: 2})), false},

		{"job: queued", h(addA, job(1, 3, 4, 0, "a", rec(JobRecord{Job: "a", Max: 2}))), true},
		{"job: queued, wrong attempts", h(addA, job(1, 3, 4, 0, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 1}))), false},
		{"job: leased", h(addA, leaseA, job(1, 5, 6, 0, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 1, Tag: 7, Vest: 10}))), true},
		{"job: leased, another tag", h(addA, leaseA, job(1, 5, 6, 0, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 1, Tag: 8, Vest: 10}))), false},
		{"job: leased, shown queued", h(addA, leaseA, job(1, 5, 6, 0, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 1, Vest: 10}))), false},
		{"job: dead", then(deadA, job(1, 9, 10, 20, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 2, Dead: true}))), true},
		{"job: dead, not found", then(deadA, job(1, 9, 10, 20, "a", nil)), false},
		{"job: buried by a Lease", then(exhausted, job(1, 7, 8, 40, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 2, Dead: true})),
			lease(0, 9, 10, 40, LeaseOutput{Empty: true}), cancel(1, 11, 12, 40, "a", true)), true},
		{"job: cancelled, not found", h(addA, cancel(0, 3, 4, 0, "a", false), job(1, 5, 6, 0, "a", nil)), true},
		{"job: cancelled, found", h(addA, cancel(0, 3, 4, 0, "a", false), job(1, 5, 6, 0, "a", rec(JobRecord{Job: "a", Max: 2}))), false},
		{"job: concurrent with its cancel, found", h(addA, cancel(0, 3, 6, 0, "a", false), job(1, 4, 5, 0, "a", rec(JobRecord{Job: "a", Max: 2}))), true},
		{"job: never added, found", h(addA, job(1, 3, 4, 0, "z", rec(JobRecord{Job: "z", Max: 2}))), false},
		{"job: never added, not found", h(addA, job(1, 3, 4, 0, "z", nil)), true},
		{"job: queued, not found", h(addA, job(1, 3, 4, 0, "a", nil)), false},
		{"job: a lease of unknown outcome's tag", h(addA, lease(0, 3, 4, 0, LeaseOutput{Unknown: true}),
			job(1, 5, 6, 0, "a", rec(JobRecord{Job: "a", Max: 2, Attempts: 1, Tag: 99, Vest: 10})),
			onLease(LAck, 1, 7, 8, 0, "a", 99, LeaseOutput{})), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// The model's Requeue and DeleteDead: a Requeue puts a dead job back,
// due at its call's now, its attempts at 0 and its unique key held again
// (refused while another job in the queue holds the key), a DeleteDead
// removes a dead job for good; both find nothing for a job in the queue,
// gone or never added, and each takes effect once: the histories of a
// Requeue that kept the attempt count or left the job dead, of one applied
// twice (its retry finding the job no longer dead), and of a DeleteDead
// that left the job are rejected.
func TestLeaseModelRequeueAndDeleteDead(t *testing.T) {
	m := LeaseModel(2)
	op, add, lease, got := modelOp, modelAdd, modelLease, modelGot
	on := func(kind LeaseKind, c int, call, ret, now int64, job string, out LeaseOutput) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: kind, Now: now, Job: job}, out)
	}
	ok, notFound, keyHeld, unknown := LeaseOutput{}, LeaseOutput{NotFound: true}, LeaseOutput{KeyHeld: true}, LeaseOutput{Unknown: true}
	observe := func(call, now int64, held []KeyHold, jobs ...JobRecord) porcupine.Operation {
		return op(9, call, call+1, LeaseInput{Kind: LObserve, Now: now}, LeaseOutput{Jobs: jobs, Held: held})
	}
	// a (max 2, unique key k) leased on both its attempts at 0 and 20,
	// its last lease expired at 30.
	exhausted := []porcupine.Operation{add(0, 1, 2, "k", "a", false), lease(0, 3, 4, 0, got("a", 7, 1)), lease(0, 5, 6, 20, got("a", 8, 2))}
	// a dead-lettered by the Nack of its last lease, at 20.
	deadA := append(slices.Clone(exhausted), op(0, 7, 8, LeaseInput{Kind: LNack, Now: 20, Job: "a", Tag: 8}, LeaseOutput{Dead: true}))
	then := func(ops ...porcupine.Operation) []porcupine.Operation { return append(slices.Clone(deadA), ops...) }
	deadRec := JobRecord{Job: "a", Attempts: 2, Max: 2, Dead: true, Unique: "k"}
	requeued := JobRecord{Job: "a", Vest: 50, Max: 2, Unique: "k"} // requeued at 50
	heldA := []KeyHold{{"k", "a"}}
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"requeued: due at once, attempts 0, key held", then(on(LRequeue, 1, 9, 10, 50, "a", ok), observe(11, 50, heldA, requeued)), true},
		{"requeued: leased on its first attempt", then(on(LRequeue, 1, 9, 10, 50, "a", ok), lease(0, 11, 12, 50, got("a", 9, 1))), true},
		{"requeued: attempts kept", then(on(LRequeue, 1, 9, 10, 50, "a", ok),
			observe(11, 50, heldA, JobRecord{Job: "a", Vest: 50, Attempts: 2, Max: 2, Unique: "k"})), false},
		{"requeued: attempts kept, leased past its last", then(on(LRequeue, 1, 9, 10, 50, "a", ok), lease(0, 11, 12, 50, got("a", 9, 3))), false},
		{"requeued: attempts kept, buried at once", then(on(LRequeue, 1, 9, 10, 50, "a", ok), lease(0, 11, 12, 50, LeaseOutput{Empty: true}),
			observe(13, 50, nil, deadRec)), false},
		{"requeued: still dead", then(on(LRequeue, 1, 9, 10, 50, "a", ok), observe(11, 50, nil, deadRec)), false},
		{"requeued: key not taken again", then(on(LRequeue, 1, 9, 10, 50, "a", ok), observe(11, 50, nil, requeued)), false},
		{"requeued: its key held by it", then(on(LRequeue, 1, 9, 10, 50, "a", ok), add(1, 11, 12, "k", "a", true)), true},
		{"requeued: its key taken by another", then(on(LRequeue, 1, 9, 10, 50, "a", ok), add(1, 11, 12, "k", "b", false)), false},
		{"requeued: another vesting time", then(on(LRequeue, 1, 9, 10, 50, "a", ok),
			observe(11, 50, heldA, JobRecord{Job: "a", Vest: 60, Max: 2, Unique: "k"})), false},
		{"requeued twice", then(on(LRequeue, 1, 9, 10, 50, "a", ok), on(LRequeue, 1, 11, 12, 50, "a", ok)), false},
		{"requeued, then not found", then(on(LRequeue, 1, 9, 10, 50, "a", ok), on(LRequeue, 1, 11, 12, 50, "a", notFound)), true},
		{"requeued, then cancelled", then(on(LRequeue, 1, 9, 10, 50, "a", ok), on(LCancel, 1, 11, 12, 50, "a", ok), observe(13, 50, nil)), true},
		{"dead: not found, then requeued (applied twice)", then(on(LRequeue, 1, 9, 10, 50, "a", notFound), observe(11, 50, heldA, requeued)), false},
		{"dead: not found", then(on(LRequeue, 1, 9, 10, 50, "a", notFound)), false},
		{"key held: refused", then(add(1, 9, 10, "k", "b", false), on(LRequeue, 1, 11, 12, 50, "a", keyHeld),
			observe(13, 50, []KeyHold{{"k", "b"}}, deadRec, JobRecord{Job: "b", Max: 2, Unique: "k"})), true},
		{"key held: requeued", then(add(1, 9, 10, "k", "b", false), on(LRequeue, 1, 11, 12, 50, "a", ok)), false},
		{"key free: refused", then(on(LRequeue, 1, 9, 10, 50, "a", keyHeld)), false},
		{"queued: not found", []porcupine.Operation{add(0, 1, 2, "", "a", false), on(LRequeue, 1, 3, 4, 0, "a", notFound),
			on(LDeleteDead, 1, 5, 6, 0, "a", notFound)}, true},
		{"queued: requeued", []porcupine.Operation{add(0, 1, 2, "", "a", false), on(LRequeue, 1, 3, 4, 0, "a", ok)}, false},
		{"queued: deleted", []porcupine.Operation{add(0, 1, 2, "", "a", false), on(LDeleteDead, 1, 3, 4, 0, "a", ok)}, false},
		{"never added: requeued", []porcupine.Operation{on(LRequeue, 1, 1, 2, 0, "z", ok)}, false},
		{"never added: deleted", []porcupine.Operation{on(LDeleteDead, 1, 1, 2, 0, "z", ok)}, false},
		{"last lease running: requeued", append(slices.Clone(exhausted), on(LRequeue, 1, 7, 8, 25, "a", ok)), false},
		{"last lease expired: buried, requeued", append(slices.Clone(exhausted), on(LRequeue, 1, 7, 8, 40, "a", ok),
			observe(9, 40, heldA, JobRecord{Job: "a", Vest: 40, Max: 2, Unique: "k"})), true},
		{"last lease expired: buried, deleted", append(slices.Clone(exhausted), on(LDeleteDead, 1, 7, 8, 40, "a", ok), observe(9, 40, nil)), true},

		{"deleted: gone", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), observe(11, 50, nil)), true},
		{"deleted: still dead", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), observe(11, 50, nil, deadRec)), false},
		{"deleted: then requeued", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), on(LRequeue, 1, 11, 12, 50, "a", ok)), false},
		{"deleted: then found by Job", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), on(LJob, 1, 11, 12, 50, "a", LeaseOutput{Record: deadRec})), false},
		{"deleted twice", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), on(LDeleteDead, 1, 11, 12, 50, "a", ok)), false},
		{"deleted, then not found", then(on(LDeleteDead, 1, 9, 10, 50, "a", ok), on(LDeleteDead, 1, 11, 12, 50, "a", notFound)), true},
		{"dead: delete not found, then gone (applied twice)", then(on(LDeleteDead, 1, 9, 10, 50, "a", notFound), observe(11, 50, nil)), false},
		{"requeue and delete race: one finds it dead", then(on(LRequeue, 1, 9, 12, 50, "a", ok), on(LDeleteDead, 2, 10, 11, 50, "a", notFound),
			observe(13, 50, heldA, requeued)), true},
		{"requeue and delete race: both find it dead", then(on(LRequeue, 1, 9, 12, 50, "a", ok), on(LDeleteDead, 2, 10, 11, 50, "a", ok)), false},
		{"requeue and cancel race: cancel after", then(on(LRequeue, 1, 9, 12, 50, "a", ok), on(LCancel, 2, 10, 11, 50, "a", ok), observe(13, 50, nil)), true},

		{"unknown requeue: requeued", then(on(LRequeue, 1, 9, 10, 50, "a", unknown), observe(11, 50, heldA, requeued)), true},
		{"unknown requeue: did nothing", then(on(LRequeue, 1, 9, 10, 50, "a", unknown), observe(11, 50, nil, deadRec)), true},
		{"unknown requeue: removed it", then(on(LRequeue, 1, 9, 10, 50, "a", unknown), observe(11, 50, nil)), false},
		{"unknown delete: deleted", then(on(LDeleteDead, 1, 9, 10, 50, "a", unknown), observe(11, 50, nil)), true},
		{"unknown delete: did nothing", then(on(LDeleteDead, 1, 9, 10, 50, "a", unknown), observe(11, 50, nil, deadRec)), true},
		{"unknown delete: requeued it", then(on(LDeleteDead, 1, 9, 10, 50, "a", unknown), observe(11, 50, heldA, requeued)), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// A retried Lease returns, from its journal record, the leases of its
// attempt that committed whose jobs still carry them: one a Cancel
// removed before the retry is left out (ErrEmpty if none is left). The
// model lets a retried Lease have taken such jobs unseen, only if a Cancel
// removes them before the Lease returns, and only up to N in all.
func TestLeaseModelRetriedLease(t *testing.T) {
	m := LeaseModel(2)
	op := func(c int, call, ret int64, in LeaseInput, out LeaseOutput) porcupine.Operation {
		in.Call, in.Ret = call, ret
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	add := func(call, ret int64, job string) porcupine.Operation {
		return op(0, call, ret, LeaseInput{Kind: LAdd, Max: 2}, LeaseOutput{Job: job})
	}
	lease := func(c int, call, ret int64, n int, retried bool, out LeaseOutput) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LLease, N: n, D: 10, Retried: retried}, out)
	}
	got := func(job string, tag uint64) LeaseOutput {
		return LeaseOutput{Leases: []LeasedJob{{Job: job, Tag: tag, Attempt: 1}}}
	}
	empty := LeaseOutput{Empty: true}
	cancel := func(c int, call, ret int64, job string) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LCancel, Job: job}, LeaseOutput{})
	}
	job := func(c int, call, ret int64, id string, tag uint64) porcupine.Operation {
		return op(c, call, ret, LeaseInput{Kind: LJob, Job: id}, LeaseOutput{Record: JobRecord{Job: id, Tag: tag, Attempts: 1, Vest: 10, Max: 2}})
	}
	observe := func(call int64, jobs ...JobRecord) porcupine.Operation {
		return op(9, call, call+1, LeaseInput{Kind: LObserve}, LeaseOutput{Jobs: jobs})
	}
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"empty: its job cancelled before it returned", []porcupine.Operation{add(1, 2, "a"), lease(0, 3, 10, 1, true, empty),
			job(1, 4, 5, "a", 99), cancel(1, 6, 7, "a"), lease(1, 11, 12, 1, false, empty)}, true},
		{"empty: not retried", []porcupine.Operation{add(1, 2, "a"), lease(0, 3, 10, 1, false, empty),
			job(1, 4, 5, "a", 99), cancel(1, 6, 7, "a")}, false},
		{"empty: its job not cancelled", []porcupine.Operation{add(1, 2, "a"), lease(0, 3, 6, 1, true, empty), lease(1, 7, 8, 1, false, empty)}, false},
		{"empty: its job cancelled after it returned", []porcupine.Operation{add(1, 2, "a"), lease(0, 3, 6, 1, true, empty),
			job(1, 4, 5, "a", 99), cancel(1, 7, 8, "a")}, false},
		{"empty: its job still leased at Observe", []porcupine.Operation{add(1, 2, "a"), lease(0, 3, 6, 1, true, empty),
			observe(7, JobRecord{Job: "a", Tag: 99, Attempts: 1, Vest: 10, Max: 2})}, false},
		{"empty: nothing was due", []porcupine.Operation{lease(0, 1, 2, 1, true, empty), add(3, 4, "a"), observe(5, JobRecord{Job: "a", Max: 2})}, true},
		{"one of two: the other cancelled", []porcupine.Operation{add(1, 2, "a"), add(3, 4, "b"), lease(0, 5, 10, 2, true, got("a", 7)),
			job(1, 6, 7, "b", 99), cancel(1, 8, 9, "b"), observe(11, JobRecord{Job: "a", Tag: 7, Attempts: 1, Vest: 10, Max: 2})}, true},
		{"one of one: another taken unseen too", []porcupine.Operation{add(1, 2, "a"), add(3, 4, "b"), lease(0, 5, 10, 1, true, got("a", 7)),
			job(1, 6, 7, "b", 99), cancel(1, 8, 9, "b")}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// Extend has no journal: called again after its first call failed, its
// outcome unknown, it is a call of its own, which finds the lease lost if
// a Cancel removed the job after the first call had extended it. The
// minimal history the soak met (seed 609): a job leased at 0 (deadline
// 10), the Extend of its lease at 5 (deadline 15) failing after its
// commit applied, a Job lookup that sees the deadline 15, a Cancel, and
// the Extend's recovery, lease lost. Recorded as one Extend with the
// recovery's result (as the harness did), the lookup cannot be
// explained: rejected. Recorded as the harness now does (recover), the
// first call of unknown outcome and the recovery apart, it is
// linearizable; and the first call is no licence for a deadline no
// extension gives, or for a recovery that finds a lease lost that nobody
// took.
func TestLeaseModelExtendRecoveredAfterCancel(t *testing.T) {
	m := LeaseModel(2)
	op := func(c int, call, ret int64, in LeaseInput, out LeaseOutput) porcupine.Operation {
		in.Call, in.Ret = call, ret
		return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
	}
	start := []porcupine.Operation{
		op(0, 1, 2, LeaseInput{Kind: LAdd, Max: 2}, LeaseOutput{Job: "a"}),
		op(0, 3, 4, LeaseInput{Kind: LLease, N: 1, D: 10}, LeaseOutput{Leases: []LeasedJob{{Job: "a", Tag: 7, Attempt: 1}}}),
	}
	extend := LeaseInput{Kind: LExtend, Now: 5, Job: "a", Tag: 7, D: 10}
	lookup := func(vest int64) porcupine.Operation {
		return op(1, 6, 7, LeaseInput{Kind: LJob, Now: 5, Job: "a"}, LeaseOutput{Record: JobRecord{Job: "a", Tag: 7, Attempts: 1, Vest: vest, Max: 2}})
	}
	cancel := op(1, 8, 9, LeaseInput{Kind: LCancel, Now: 5, Job: "a"}, LeaseOutput{})
	lost := LeaseOutput{Lost: true}
	gone := op(9, 14, 15, LeaseInput{Kind: LObserve, Now: 5}, LeaseOutput{})
	then := func(ops ...porcupine.Operation) []porcupine.Operation { return append(slices.Clone(start), ops...) }
	cases := []struct {
		name    string
		history []porcupine.Operation
		want    bool
	}{
		{"one Extend with the recovery's result", then(op(0, 5, 11, extend, lost), lookup(15), cancel, gone), false},
		{"first call unknown, recovery apart", then(op(200, 5, 12, extend, LeaseOutput{Unknown: true}), lookup(15), cancel,
			op(0, 10, 11, extend, lost), gone), true},
		{"first call unknown, not applied", then(op(200, 5, 12, extend, LeaseOutput{Unknown: true}), lookup(10), cancel,
			op(0, 10, 11, extend, lost), gone), true},
		{"first call unknown, a deadline it cannot give", then(op(200, 5, 12, extend, LeaseOutput{Unknown: true}), lookup(20), cancel,
			op(0, 10, 11, extend, lost), gone), false},
		{"first call unknown, recovery lost with no Cancel", then(op(200, 5, 12, extend, LeaseOutput{Unknown: true}), lookup(15),
			op(0, 10, 11, extend, lost), op(9, 14, 15, LeaseInput{Kind: LObserve, Now: 5}, LeaseOutput{Jobs: []JobRecord{{Job: "a", Tag: 7, Attempts: 1, Vest: 15, Max: 2}}})), false},
		{"first call unknown, recovery extended with no Cancel", then(op(200, 5, 12, extend, LeaseOutput{Unknown: true}), lookup(15),
			op(0, 10, 11, extend, LeaseOutput{}), op(9, 14, 15, LeaseInput{Kind: LObserve, Now: 5}, LeaseOutput{Jobs: []JobRecord{{Job: "a", Tag: 7, Attempts: 1, Vest: 15, Max: 2}}})), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, porcupine.CheckOperations(m, tc.history))
		})
	}
}

// The harness records an Extend recovered after its first call failed as
// two calls (recover): scripted here, the first call's commit applied but
// reported undeterminable (commit_unknown_result_fatal, not retried), a
// Job lookup that sees the extended deadline, a Cancel of the job, and
// the recovery, which finds the lease lost. The history recorded must be
// linearizable; recorded as one Extend with the recovery's result, it
// was not (the soak's violations, seed 609 among them).
func TestLeaseHarnessRecordsExtendRecoveryApart(t *testing.T) {
	ctx := context.Background()
	h, run, got := scriptedLease(t)
	job := string(got[0].JobID[:])
	var err error
	var now int64

	// Half a lease later (a round later), so that the extension shows.
	now = h.clock.now.Add(h.d / 2)
	ext := &leaseOp{in: LeaseInput{Kind: LExtend, Now: now, Job: job, Tag: tag(got[0]), D: h.d}, lease: got[0], call: h.seq.Add(1)}
	_, _, err = h.do(ctx, appliedUndeterminable{h.t}, ext)
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	ext.failed = true

	look := &leaseOp{in: LeaseInput{Kind: LJob, Now: now, Job: job}, client: 1, call: h.seq.Add(1)}
	require.NoError(t, h.lookup(ctx, look))
	info, err := h.q.Job(ctx, h.db, got[0].JobID)
	require.NoError(t, err)
	require.Equal(t, now+h.d, info.DueAt.UnixMicro(), "the first call extended the lease")
	out, _ := run(&leaseOp{in: LeaseInput{Kind: LCancel, Now: now, Job: job}, client: 1, call: h.seq.Add(1)})
	require.False(t, out.NotFound)

	out, _, err = h.recover(ctx, ext)
	require.NoError(t, err)
	require.True(t, out.Lost, "the recovery finds the job cancelled")
	h.settled(ext, out)
	h.recordFirstCalls(h.seq.Add(1))
	jobs, keys, err := observeJobs(ctx, h.db, h.sub, nil)
	require.NoError(t, err)
	h.record(9, LeaseInput{Kind: LObserve, Now: now}, h.seq.Add(1), LeaseOutput{Jobs: jobs, Held: keys})

	res, info2 := porcupine.CheckOperationsVerbose(LeaseModel(h.cfg.Choice), h.history, time.Minute)
	if res != porcupine.Ok {
		f := &Failure{Seed: 1, Round: -1, Structure: "job queue", Reason: "not linearizable", model: LeaseModel(h.cfg.Choice), info: info2, history: h.history, hasInfo: true}
		var b strings.Builder
		_ = f.WriteHistory(&b)
		t.Fatalf("%s", b.String())
	}
}

// The same within one Extend call: its first commit applied, reported
// commit_unknown_result, and before its transaction runs again a Job
// lookup sees the extension and a Cancel removes the job; the retry finds
// the lease lost, which the call returns. The harness records the call's
// earlier attempt as an Extend of unknown outcome within the call
// (settled): the history must be linearizable; recorded as the one Extend
// with its result, it was not.
func TestLeaseHarnessRecordsExtendRetriedWithin(t *testing.T) {
	ctx := context.Background()
	h, run, got := scriptedLease(t)
	job := string(got[0].JobID[:])
	var err error
	var now int64

	now = h.clock.now.Add(h.d / 2)
	ext := &leaseOp{in: LeaseInput{Kind: LExtend, Now: now, Job: job, Tag: tag(got[0]), D: h.d}, lease: got[0], call: h.seq.Add(1)}
	extended := false
	between := func() {
		info, err := h.q.Job(ctx, h.db, got[0].JobID)
		require.NoError(t, err)
		extended = info.DueAt.UnixMicro() == now+h.d
		require.NoError(t, h.lookup(ctx, &leaseOp{in: LeaseInput{Kind: LJob, Now: now, Job: job}, client: 1, call: h.seq.Add(1)}))
		out, _ := run(&leaseOp{in: LeaseInput{Kind: LCancel, Now: now, Job: job}, client: 1, call: h.seq.Add(1)})
		require.False(t, out.NotFound)
	}
	h.db.FailNextCommit(kv.ErrCommitUnknownResult, true) // applied, reported unknown: retried
	out, _, err := h.do(ctx, &beforeRetry{Database: h.t, hook: between}, ext)
	require.NoError(t, err)
	require.True(t, extended, "the first attempt extended the lease")
	require.True(t, out.Lost, "the retry finds the job cancelled")
	h.settled(ext, out)
	jobs, keys, err := observeJobs(ctx, h.db, h.sub, nil)
	require.NoError(t, err)
	h.record(9, LeaseInput{Kind: LObserve, Now: now}, h.seq.Add(1), LeaseOutput{Jobs: jobs, Held: keys})

	res, info := porcupine.CheckOperationsVerbose(LeaseModel(h.cfg.Choice), h.history, time.Minute)
	if res != porcupine.Ok {
		f := &Failure{Seed: 1, Round: -1, Structure: "job queue", Reason: "not linearizable", model: LeaseModel(h.cfg.Choice), info: info, history: h.history, hasInfo: true}
		var b strings.Builder
		_ = f.WriteHistory(&b)
		t.Fatalf("%s", b.String())
	}
}

// beforeRetry is a database that calls hook before the second run of a
// transaction's function (its first retry).
type beforeRetry struct {
	kv.Database
	runs int
	hook func()
}

func (b *beforeRetry) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return b.Database.Transact(ctx, func(tr kv.Transaction) error {
		if b.runs++; b.runs == 2 {
			b.hook()
		}
		return fn(tr)
	})
}

// appliedUndeterminable is a database whose transactions commit and then
// fail with commit_unknown_result_fatal, as a commit whose status could
// not be determined: the call fails though its commit applied.
type appliedUndeterminable struct{ kv.Database }

func (a appliedUndeterminable) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	if err := a.Database.Transact(ctx, fn); err != nil {
		return err
	}
	return kv.ErrCommitUnknownResultFatal
}

// checkAccounts finds what a removal left behind (an index entry or a
// value without its record, a requeued job's dead record beside its new
// one) and counters that disagree with the records, and nothing on a
// queue the layer alone wrote.
func TestCheckAccounts(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "accounts"})
	require.NoError(t, err)
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{StatsResolution: leaseStatsResolution})
	require.NoError(t, err)
	var ids []fdbqueue.JobID
	for i := range 4 {
		r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte{byte(i)}, Delay: time.Duration(i) * time.Minute, UniqueKey: "k" + strconv.Itoa(i)})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	ls, err := q.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	_, err = q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{NoRetry: true})
	require.NoError(t, err)
	_, err = q.Lease(ctx, db, 1, time.Minute) // nothing else due: ErrEmpty
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.NoError(t, q.Cancel(ctx, db, ids[1]))
	// Two more jobs dead-lettered: one requeued, one deleted.
	for i := 4; i < 6; i++ {
		r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte{byte(i)}})
		require.NoError(t, err)
		ids = append(ids, r.ID)
	}
	ls, err = q.Lease(ctx, db, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	for _, l := range ls {
		_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{NoRetry: true})
		require.NoError(t, err)
	}
	var deadKey, deadRec []byte // ids[4]'s dead record, as it was before the Requeue
	require.NoError(t, eachUnder(ctx, db, sub, "d", func(k, id, v []byte) error {
		if string(id) == string(ids[4][:]) {
			deadKey, deadRec = k, v
		}
		return nil
	}))
	require.NotNil(t, deadRec)
	require.NoError(t, q.Requeue(ctx, db, ids[4]))
	require.NoError(t, q.DeleteDead(ctx, db, ids[5]))

	check := func() accounts {
		var res accounts
		require.NoError(t, checkAccounts(ctx, db, q, sub, &res))
		return res
	}
	require.Equal(t, accounts{}, check(), "a queue the layer alone wrote")

	set := func(k []byte, v []byte) {
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(k, v); return nil }))
	}
	del := func(k []byte) {
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(k); return nil }))
	}
	key := func(elems ...any) []byte {
		k, err := sub.Pack(tuple.Tuple(elems))
		require.NoError(t, err)
		return k
	}
	// A cancelled job's value left behind.
	set(key("v", ids[1][:]), []byte{1})
	require.Equal(t, 1, check().Leftovers)
	del(key("v", ids[1][:]))
	// A cancelled job's index entry left behind, pointing at no record.
	set(key("x", ids[1][:]), key("q", int64(1), int64(0), ids[1][:]))
	require.Equal(t, 1, check().Leftovers)
	del(key("x", ids[1][:]))
	// A job in the queue without its value.
	del(key("v", ids[2][:]))
	require.Equal(t, 1, check().Leftovers)
	set(key("v", ids[2][:]), []byte{2})
	require.Equal(t, accounts{}, check())
	// A job in the queue without its index entry.
	var entry []byte
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		var err error
		entry, err = tr.Get(key("x", ids[2][:])).Get()
		return err
	}))
	require.NotNil(t, entry)
	del(key("x", ids[2][:]))
	require.Equal(t, 1, check().Leftovers)
	leftovers, countErrors := 5, 7 // checkAccountsInto adds to them
	require.NoError(t, checkAccountsInto(ctx, db, q, sub, &leftovers, &countErrors))
	require.Equal(t, 6, leftovers)
	require.Equal(t, 7, countErrors)
	set(key("x", ids[2][:]), entry)
	require.Equal(t, accounts{}, check())
	// The queued counter one too high, as an Add that counted its job
	// twice leaves it.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "n"), []byte{1, 0, 0, 0, 0, 0, 0, 0})
		return nil
	}))
	require.Equal(t, 1, check().CountErrors)
	leftovers, countErrors = 5, 7
	require.NoError(t, checkAccountsInto(ctx, db, q, sub, &leftovers, &countErrors))
	require.Equal(t, 5, leftovers)
	require.Equal(t, 8, countErrors)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "n"), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		return nil
	}))
	require.Equal(t, accounts{}, check())
	// The leased counter one too high, as a Cancel that forgot it leaves it.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "l"), []byte{1, 0, 0, 0, 0, 0, 0, 0})
		return nil
	}))
	require.Equal(t, 1, check().CountErrors)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "l"), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		return nil
	}))
	require.Equal(t, accounts{}, check())
	// A bucket counter left by a removal that did not unbucket its job.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "p", int64(12345)), []byte{1, 0, 0, 0, 0, 0, 0, 0})
		return nil
	}))
	require.Equal(t, 1, check().CountErrors)
	del(key("c", "p", int64(12345)))
	require.Equal(t, accounts{}, check())
	// A bucket counter that is not an 8-byte count, at a bucket no job
	// is in.
	set(key("c", "e", int64(12345)), []byte{1, 0, 0, 0})
	require.Equal(t, 1, check().CountErrors)
	del(key("c", "e", int64(12345)))
	require.Equal(t, accounts{}, check())
	// A requeued job's dead record left behind, as a Requeue that did not
	// clear it leaves it: two records of one ID, the index naming one of
	// them, and one dead job more than the dead counter says.
	set(deadKey, deadRec)
	res := check()
	require.Equal(t, 2, res.Leftovers)
	require.Equal(t, 1, res.CountErrors)
	del(deadKey)
	// A deleted job's value, or its index entry, left behind.
	set(key("v", ids[5][:]), []byte{5})
	require.Equal(t, 1, check().Leftovers)
	del(key("v", ids[5][:]))
	set(key("x", ids[5][:]), key("d", int64(1), ids[5][:]))
	require.Equal(t, 1, check().Leftovers)
	del(key("x", ids[5][:]))
	// The dead counter not brought down by a DeleteDead.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Add(key("c", "d"), []byte{1, 0, 0, 0, 0, 0, 0, 0})
		return nil
	}))
	require.Equal(t, 1, check().CountErrors)
}

// The operation builders that the model's tests of Cancel, Job, Requeue
// and DeleteDead share: modelOp any call; modelAdd an Add of job (of at
// most 2 attempts, under unique key key; dup: it found the key held);
// modelLease a Lease of one job for 10 at now; modelGot a Lease's output
// holding job's lease tag on attempt attempt.
func modelOp(c int, call, ret int64, in LeaseInput, out LeaseOutput) porcupine.Operation {
	return porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret}
}

func modelAdd(c int, call, ret int64, key, job string, dup bool) porcupine.Operation {
	return modelOp(c, call, ret, LeaseInput{Kind: LAdd, Max: 2, Unique: key}, LeaseOutput{Job: job, Duplicate: dup})
}

func modelLease(c int, call, ret, now int64, out LeaseOutput) porcupine.Operation {
	return modelOp(c, call, ret, LeaseInput{Kind: LLease, Now: now, N: 1, D: 10}, out)
}

func modelGot(job string, tag uint64, attempt int) LeaseOutput {
	return LeaseOutput{Leases: []LeasedJob{{Job: job, Tag: tag, Attempt: attempt}}}
}

// scriptedLease is a lease harness without faults or latency for a
// scripted history, with one job added and leased (got); run runs an
// operation that must succeed and records it settled.
func scriptedLease(t *testing.T) (h *leaseHarness, run func(*leaseOp) (LeaseOutput, []fdbqueue.Lease), got []fdbqueue.Lease) {
	t.Helper()
	ctx := context.Background()
	cfg := DefaultLeaseConfig()
	cfg.Faults, cfg.Latency = memdb.Faults{}, memdb.Latency{}
	h, err := newLeaseHarness(1, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { h.db.Close() })
	run = func(op *leaseOp) (LeaseOutput, []fdbqueue.Lease) {
		out, got, err := h.do(ctx, h.t, op)
		require.NoError(t, err, "%v", op.in.Kind)
		h.settled(op, out)
		return out, got
	}
	now := h.clock.now.Load()
	run(&leaseOp{in: LeaseInput{Kind: LAdd, Now: now, Vest: now, Max: 3}, call: h.seq.Add(1)})
	_, got = run(&leaseOp{in: LeaseInput{Kind: LLease, Now: now, N: 1, D: h.d}, call: h.seq.Add(1)})
	require.Len(t, got, 1)
	return h, run, got
}
