package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tools/sim"
)

// forSeeds calls fn for seeds first, first+1, ... from workers goroutines
// until seeds have been started, the duration has passed or ctx ends
// (seeds already started finish). fn's calls may run at once.
func forSeeds(ctx context.Context, first int64, seeds int, duration time.Duration, workers int, fn func(seed int64)) {
	deadline := time.Now().Add(duration)
	var (
		mu   sync.Mutex
		next = first
		left = seeds
		wg   sync.WaitGroup
	)
	take := func() (int64, bool) {
		mu.Lock()
		defer mu.Unlock()
		if left <= 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return 0, false
		}
		left--
		next++
		return next - 1, true
	}
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seed, ok := take()
				if !ok {
					return
				}
				fn(seed)
			}
		}()
	}
	wg.Wait()
}

// leaseTotals adds up the lease simulation's seeds: their results summed
// by sim.LeaseResult.Add, and what only the soak keeps (how many seeds and
// histories, how each check ended, which seed failed first).
type leaseTotals struct {
	Seeds, Histories         int
	Violations, Inconclusive int // histories porcupine rejected / could not decide in time
	Sum                      sim.LeaseResult
	FirstFailing             int64 // 0: none
	// Failure is the history of the lowest-numbered seed whose history
	// was not linearizable, or if none was, whose check timed out (nil:
	// none), for -history and -html; Illegal says which.
	Failure *sim.Failure
	Illegal bool
}

func (t *leaseTotals) add(seed int64, r sim.LeaseResult) {
	t.Seeds++
	t.Histories++
	switch r.Check {
	case porcupine.Illegal:
		t.Violations++
	case porcupine.Unknown:
		t.Inconclusive++
	}
	t.Sum.Add(r)
	decided := r
	if decided.Check == porcupine.Unknown {
		decided.Check = porcupine.Ok // counted above; see undecidedAllowed
	}
	if !decided.OK() && (t.FirstFailing == 0 || seed < t.FirstFailing) {
		t.FirstFailing = seed
	}
	if illegal := r.Check == porcupine.Illegal; r.Failure != nil &&
		(t.Failure == nil || illegal && !t.Illegal || illegal == t.Illegal && seed < t.Failure.Seed) {
		t.Failure, t.Illegal = r.Failure, illegal
	}
}

// runLeases is the -leases mode: sim.RunLeases over the seeds (each seed a
// JobQueue under injected faults, its history checked against the lease
// model with porcupine, then drained and every job accounted for). It
// prints the totals and returns 1 if any seed failed: a history not
// linearizable, a job lost, acked twice, or acked and dead, a job
// cancelled and also acked, dead or cancelled again, a job deleted twice
// or deleted and also acked, cancelled or dead, a dead job whose
// record does not hold MaxAttempts counted attempts, a unique key still
// held after the drain, a Job lookup that contradicts itself, an Add
// taken at its word (-trust-errors) whose job was seen, a payload read
// back that is not its job's, an AddBatch refused or accepted against its
// budget, anything left of a removed job or a wrong counter, or an error
// (checks that timed out, inconclusive, fail the run beyond one in
// four: see tooUndecided). The history of the
// lowest-numbered seed not linearizable (if none, of the lowest whose
// check timed out) is written as text to historyPath and, if it was not
// linearizable, as porcupine's visualization to htmlPath: a seed's run
// depends on goroutine timing, so rerunning it need not fail again.
func runLeases(ctx context.Context, w io.Writer, cfg sim.LeaseConfig, first int64, seeds int, duration time.Duration, workers int, htmlPath, historyPath string, verbose bool) int {
	start := time.Now()
	fmt.Fprintf(w, "soak -leases: up to %d seeds from %d, for up to %v, %d at once\n", seeds, first, duration, workers)
	fmt.Fprintf(w, "per seed: %d rounds of %d clients × %d operations, K=%d, max attempts %d; faults per commit: not_committed %.2f, commit_unknown_result applied %.2f / not applied %.2f, transaction_too_old %.2f\n",
		cfg.Rounds, cfg.Clients, cfg.OpsPerClient, cfg.Choice, cfg.MaxAttempts,
		cfg.Faults.NotCommitted, cfg.Faults.UnknownApplied, cfg.Faults.UnknownNotApplied, cfg.Faults.TooOld)
	fmt.Fprintf(w, "faults per read: %.2f; per read version request: %.2f\n", cfg.Faults.ReadErrors, cfg.Faults.ReadVersionErrors)
	fmt.Fprintf(w, "per operation: cancelled as its commit starts %.2f, random deadline %.2f (up to %v); an interrupted commit lands late %.2f; a failed call never recovered %.2f, else recovered at once %.2f (else at the round's end); interrupted or under a deadline without WithOpID %.2f\n",
		cfg.InterruptProb, cfg.DeadlineProb, cfg.MaxDeadline, cfg.Faults.LateLanding, cfg.AbandonProb, cfg.RecoverAtOnceProb, cfg.LayerIDProb)
	fmt.Fprintf(w, "per Add: a unique key from %d keys %.2f\n", cfg.UniqueKeys, cfg.UniqueProb)
	fmt.Fprintf(w, "per operation: a Cancel %.2f, a Job lookup %.2f; per Ack, Nack, Extend or Release: a racing Cancel of its job %.2f\n",
		cfg.CancelProb, cfg.JobProb, cfg.RaceProb)
	fmt.Fprintf(w, "per operation: a Requeue %.2f, a DeleteDead %.2f; per Requeue or DeleteDead: a racing Requeue, DeleteDead, Cancel or Job of its job %.2f; per Add: one attempt only %.2f\n",
		cfg.RequeueProb, cfg.DeleteDeadProb, cfg.DeadRaceProb, cfg.OneAttemptProb)
	fmt.Fprintf(w, "per Add: an AddBatch of 2 to %d jobs %.2f; batch budgets by seed: %v (0: the default); payloads up to %d bytes\n",
		cfg.MaxBatch, cfg.AddBatchProb, cfg.BatchBudgets, kv.MaxValueSize)
	if cfg.TrustErrors {
		fmt.Fprintln(w, "errors taken at their word: a call that failed with one kv.MaybeCommitted rejects had no effect")
	}
	var (
		mu    sync.Mutex
		total leaseTotals
		errs  []error
	)
	forSeeds(ctx, first, seeds, duration, workers, func(seed int64) {
		r, err := sim.RunLeases(ctx, seed, cfg)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("seed %d: %w", seed, err))
			}
			return
		}
		total.add(seed, r)
		if verbose {
			fmt.Fprintf(w, "seed %d: %d operations, added %d = acked %d + dead %d + cancelled %d + deleted %d, ok=%v\n", seed, r.Operations, r.Added, r.Acked, r.Dead, r.Cancelled, r.Deleted, r.OK())
		}
	})
	return total.report(w, time.Since(start), errs, htmlPath, historyPath)
}

// report prints the totals after elapsed, with errs (the seeds that failed
// with an error), writes the failure kept (see runLeases) and returns 1 if
// any seed failed or errs is not empty, else 0.
func (t *leaseTotals) report(w io.Writer, elapsed time.Duration, errs []error, htmlPath, historyPath string) int {
	s := &t.Sum
	deadRaces := 0
	for _, n := range s.DeadRaces {
		deadRaces += n
	}
	fmt.Fprintf(w, "\nelapsed:                    %v\n", elapsed.Round(time.Second))
	fmt.Fprintf(w, "seeds:                      %d\n", t.Seeds)
	fmt.Fprintf(w, "histories checked:          %d\n", t.Histories)
	fmt.Fprintf(w, "operations:                 %d\n", s.Operations)
	fmt.Fprintf(w, "transactions:               %d (commits %d, real conflicts %d, retries %d)\n", s.Stats.Transactions, s.Stats.Commits, s.Stats.Conflicts, s.Stats.Retries)
	fmt.Fprintf(w, "faults injected:\n")
	fmt.Fprintf(w, "  not_committed:                      %d\n", s.Stats.InjectedNotCommitted)
	fmt.Fprintf(w, "  commit_unknown_result (applied):    %d\n", s.Stats.InjectedUnknownApplied)
	fmt.Fprintf(w, "  commit_unknown_result (not applied): %d\n", s.Stats.InjectedUnknownNotApplied)
	fmt.Fprintf(w, "  transaction_too_old:                %d\n", s.Stats.InjectedTooOld)
	fmt.Fprintf(w, "  commits interrupted by cancellation: %d\n", s.Stats.Interrupted)
	fmt.Fprintf(w, "  failed reads:                       %d\n", s.Stats.InjectedReadErrors)
	fmt.Fprintf(w, "  failed read version requests:       %d\n", s.Stats.InjectedReadVersionErrors)
	fmt.Fprintf(w, "  commits timed out in flight:        %d\n", s.TimedOutInFlight)
	fmt.Fprintf(w, "failed calls:               %d\n", s.Unknown)
	fmt.Fprintf(w, "  recovered at once by OpID:  %d\n", s.RecoveredAtOnce)
	fmt.Fprintf(w, "  never recovered:            %d (Adds %d, their job seen %d; Releases %d)\n", s.Abandoned, s.AbandonedAdds, s.AbandonedAddsSeen, s.AbandonedReleases)
	fmt.Fprintf(w, "calls under a fault without WithOpID: %d (failed, outcome unknown, never recovered %d, their client keeping its lease %d; taken at their word %d)\n", s.LayerIDs, s.LayerIDUnknown, s.LayerIDKept, s.LayerIDTrusted)
	fmt.Fprintf(w, "failed calls taken at their word: %d (timed out before the commit %d; -trust-errors)\n", s.Trusted, s.TrustedTimedOut)
	fmt.Fprintf(w, "releases:                   %d (on the last attempt %d; lease lost %d)\n", s.Released, s.ReleasedLast, s.ReleaseLost)
	fmt.Fprintf(w, "unique-key adds:            %d (found the key held %d; added under a key an earlier job held %d)\n", s.UniqueAdds, s.UniqueDuplicates, s.UniqueReused)
	fmt.Fprintf(w, "cancels that found no job:  %d (Cancels raced the holder %d; recovered by OpID %d; leases lost to a Cancel %d)\n",
		s.CancelNotFound, s.CancelRaces, s.CancelsRecovered, s.LostToCancel)
	fmt.Fprintf(w, "job lookups:                %d (not found %d)\n", s.JobLookups, s.JobNotFound)
	fmt.Fprintf(w, "requeues:                   %d (then acked %d, dead again %d; refused for a held key %d; found no dead job %d)\n",
		s.Requeued, s.RequeuedAcked, s.RequeuedDead, s.RequeueKeyHeld, s.RequeueNotFound)
	fmt.Fprintf(w, "deletes that found nothing: %d (Requeues and DeleteDeads recovered by OpID %d; raced another client's operation on their job %d)\n",
		s.DeleteNotFound, s.DeadOpsRecovered, deadRaces)
	fmt.Fprintf(w, "payloads:                   limit-sized added %d, leased %d (in Leases with other jobs %d)\n", s.LimitAdded, s.LimitLeased, s.LimitLeasedTogether)
	fmt.Fprintf(w, "add batches:                %d accepted, %d refused as too large; Leases of several jobs that took fewer %d\n", s.Batches, s.BatchTooLarge, s.LeasesShort)
	fmt.Fprintf(w, "jobs added:                 %d\n", s.Added)
	fmt.Fprintf(w, "jobs acked once:            %d\n", s.Acked)
	fmt.Fprintf(w, "jobs dead once:             %d\n", s.Dead)
	fmt.Fprintf(w, "jobs cancelled once:        %d\n", s.Cancelled)
	fmt.Fprintf(w, "jobs deleted once:          %d\n", s.Deleted)
	fmt.Fprintf(w, "jobs gone by an abandoned Ack: %d\n", s.AckedAbandoned)
	fmt.Fprintf(w, "jobs gone by an abandoned Cancel: %d\n", s.CancelledAbandoned)
	fmt.Fprintf(w, "jobs gone by an abandoned DeleteDead: %d\n", s.DeletedAbandoned)
	fmt.Fprintf(w, "dead jobs once released:    %d\n", s.ReleasedDead)
	fmt.Fprintf(w, "lost:                       %d\n", s.Lost)
	fmt.Fprintf(w, "acked twice:                %d\n", s.AckedTwice)
	fmt.Fprintf(w, "acked and dead:             %d\n", s.AckedAndDead)
	fmt.Fprintf(w, "cancelled and removed again: %d\n", s.CancelledAndAcked+s.CancelledAndDead+s.CancelledTwice)
	fmt.Fprintf(w, "deleted and removed again:  %d\n", s.DeletedTwice+s.DeletedAndRemoved)
	fmt.Fprintf(w, "bad job lookups:            %d\n", s.JobInvalid)
	fmt.Fprintf(w, "leftovers of removed jobs:  %d\n", s.Leftovers)
	fmt.Fprintf(w, "wrong counts:               %d\n", s.CountErrors)
	fmt.Fprintf(w, "added twice by one Add:     %d\n", s.Duplicated)
	fmt.Fprintf(w, "dead without max attempts:  %d\n", s.DeadAttempts)
	fmt.Fprintf(w, "unique keys held at the end: %d\n", s.KeysHeld)
	fmt.Fprintf(w, "trusted Adds whose job was seen: %d\n", s.TrustedAdded)
	fmt.Fprintf(w, "payloads not their job's:   %d\n", s.ValueMismatches)
	if s.ValueMismatch != "" {
		fmt.Fprintf(w, "  the first: %s\n", s.ValueMismatch)
	}
	fmt.Fprintf(w, "batches against the budget: %d\n", s.BudgetErrors)
	fmt.Fprintf(w, "inconclusive checks (timed out): %d\n", t.Inconclusive)
	fmt.Fprintf(w, "linearizability violations: %d\n", t.Violations)
	for _, err := range errs {
		fmt.Fprintf(w, "error: %v\n", err)
	}
	if t.FirstFailing != 0 {
		fmt.Fprintf(w, "first failing seed: %d (rerun: go run ./cmd/soak -leases -first %d -seeds 1 -v)\n", t.FirstFailing, t.FirstFailing)
	}
	if f := t.Failure; f != nil && t.Illegal {
		fmt.Fprintf(w, "first history not linearizable: %v\n", f)
		writeFailure(w, f, htmlPath, historyPath)
	} else if f != nil {
		fmt.Fprintf(w, "first history whose check timed out: %v\n", f)
		writeFailure(w, f, htmlPath, historyPath)
	}
	undecided := tooUndecided(w, t.Inconclusive, t.Histories)
	if t.FirstFailing != 0 || len(errs) > 0 || undecided {
		fmt.Fprintln(w, "FAIL")
		return 1
	}
	fmt.Fprintln(w, "PASS")
	return 0
}
