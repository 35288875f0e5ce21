package sim

import (
	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue/memdb"
)

// LeaseResult is what one simulated seed found.
type LeaseResult struct {
	Operations int
	Check      porcupine.CheckResult
	// Conservation: jobs added, acked (by a successful Ack), dead at the
	// end, gone with no successful Ack but an abandoned one (which may
	// have removed it), and the jobs acked twice, acked and dead, or
	// none of these (lost), and the Adds that added more than one job.
	Added, Acked, Dead, AckedAbandoned, AckedTwice, AckedAndDead, Lost, Duplicated int
	// Unknown counts the operations whose call failed, their outcome
	// unknown (see RunLeases); RecoveredAtOnce, those among them that
	// their client recovered at once; Abandoned, those never recovered,
	// and AbandonedAdds, AbandonedAddsSeen the Adds among them and those
	// whose job was seen (which may have added it; the others did not).
	Unknown, RecoveredAtOnce                    int
	Abandoned, AbandonedAdds, AbandonedAddsSeen int
	// Trusted counts the operations whose call failed with an error for
	// which kv.MaybeCommitted is false, left out of the history as having
	// taken no effect (LeaseConfig.TrustErrors; they are not in Unknown).
	// TrustedTimedOut counts those among them that failed with
	// transaction_timed_out (before their commit: in flight it is
	// kv.CommitInterrupted, maybe committed), and TrustedAdded the Adds
	// among them whose job was seen nonetheless (it must be 0).
	Trusted, TrustedTimedOut, TrustedAdded int
	// LayerIDs counts the operations run under an interruption, deadline
	// or transaction timeout without WithOpID, under an ID the layer made
	// (LeaseConfig.LayerIDProb); LayerIDUnknown, those among them that
	// failed, their outcome unknown, abandoned (among Unknown and
	// Abandoned); LayerIDTrusted, those taken at their word (among
	// Trusted); LayerIDKept, those of unknown outcome whose client kept
	// the lease they used (an Ack, Nack or Release), to use it again.
	LayerIDs, LayerIDUnknown, LayerIDTrusted, LayerIDKept int
	// Released counts the Releases that gave their lease back (known
	// outcome), ReleasedLast those among them of a lease on its last
	// attempt (the job lives on for one more), ReleaseLost those that
	// found their lease lost, and AbandonedReleases those never recovered
	// (among Abandoned). ReleasedDead is the jobs seen dead (at an Observe
	// or in the end) after a Release had given them back, and DeadAttempts
	// the dead jobs whose record does not hold MaxAttempts counted
	// attempts (it must be 0).
	Released, ReleasedLast, ReleaseLost, AbandonedReleases int
	// TimedOutInFlight counts the commits that timed out in flight
	// (LeaseConfig.TxTimeoutProb).
	TimedOutInFlight           int
	ReleasedDead, DeadAttempts int
	// UniqueAdds counts the Adds of a unique key (known outcome),
	// UniqueDuplicates those that found it held (they added nothing and
	// are not among Added), and UniqueReused the jobs added with a key
	// that an earlier job had held (freed by its ack or death). KeysHeld
	// is the unique-key index's entries left after the drain (it must be
	// 0: every job is acked or dead).
	UniqueAdds, UniqueDuplicates, UniqueReused, KeysHeld int
	// Cancelled counts the jobs a Cancel removed (known outcome), and
	// CancelledAbandoned the jobs gone with no Ack, Cancel or death known
	// but an abandoned Cancel (which may have removed them). A job a
	// Cancel removed that was also acked, dead or cancelled again counts
	// in CancelledAndAcked, CancelledAndDead or CancelledTwice (all must
	// be 0). CancelNotFound counts the Cancels (known outcome) that found
	// no job: CancelNever of IDs never added, CancelDead of jobs dead in
	// the end, CancelGone of jobs acked or cancelled before.
	// CancelsRecovered counts the Cancels whose call failed, their
	// outcome unknown, recovered with their OpID; LostToCancel the Acks,
	// Nacks, Extends and Releases that found their lease lost, of a job a
	// Cancel removed; KeysFreedByCancel the jobs added under a unique key
	// whose previous holder a Cancel removed; CancelRaces the Cancels run
	// alongside their job's holder's operation (LeaseConfig.RaceProb).
	Cancelled, CancelledAbandoned, CancelledAndAcked, CancelledAndDead, CancelledTwice int
	CancelNotFound, CancelNever, CancelDead, CancelGone                                int
	CancelsRecovered, LostToCancel, KeysFreedByCancel, CancelRaces                     int
	// JobLookups counts the Job calls, and JobQueued, JobLeased, JobDead
	// and JobNotFound their results; JobInvalid those that returned an ID
	// other than the one asked for or a state its other fields contradict
	// (a lease ID on a queued job, none on a leased one): it must be 0.
	JobLookups, JobQueued, JobLeased, JobDead, JobNotFound, JobInvalid int
	// Requeued counts the Requeues (known outcome) that put a dead job
	// back, RequeueKeyHeld those refused with ErrUniqueKeyHeld and
	// RequeueNotFound those that found no dead job; Deleted the jobs a
	// DeleteDead removed (known outcome), DeletedAbandoned the jobs gone
	// with no Ack, Cancel, DeleteDead or death known but an abandoned
	// DeleteDead, and DeleteNotFound the DeleteDeads that found no dead
	// job; DeadOpsNever the Requeues and DeleteDeads (among those that
	// found nothing) of IDs never added. A job a DeleteDead removed twice,
	// or removed and also acked, cancelled or dead in the end, counts in
	// DeletedTwice or DeletedAndRemoved (both must be 0). RequeuedAcked
	// counts the requeued jobs acked later, RequeuedDead those dead again
	// in the end (at MaxAttempts again: see DeadAttempts);
	// DeadOpsRecovered the Requeues and DeleteDeads whose call failed,
	// their outcome unknown, recovered with their OpID; DeadRaces the
	// Requeues and DeleteDeads run alongside another client's Requeue,
	// DeleteDead, Cancel or Job lookup of the same job, by that kind (in
	// this order; LeaseConfig.DeadRaceProb).
	Requeued, RequeueKeyHeld, RequeueNotFound, Deleted, DeletedAbandoned, DeleteNotFound, DeadOpsNever int
	DeletedTwice, DeletedAndRemoved, RequeuedAcked, RequeuedDead, DeadOpsRecovered                     int
	DeadRaces                                                                                          [4]int
	// Leftovers counts, at each Observe and after the drain, the entries
	// of the job index ("x") or of the values ("v") that do not belong to
	// a job record (a removed job's), the records missing either, and IDs
	// with two records; CountErrors the reads at which Stats' exact
	// counts (queued, leased, dead) or the vesting-time bucket counters
	// disagreed with the records. Both must be 0.
	Leftovers, CountErrors int
	// Payloads (see leaseShape). ValueMismatches counts the payloads read
	// back (from a Lease, an Extend, a Job lookup or an Observe) that are
	// not exactly one value ID's payload, or not the one their job was
	// seen or added with, and the jobs that carry the payload another job
	// was added with (a payload swapped): it must be 0. ValueMismatch
	// describes the first. LimitAdded counts the jobs added (known
	// outcome) with a limit-sized payload (kv.MaxValueSize bytes);
	// LimitLeased the limit-sized payloads Leases returned, and
	// LimitLeasedTogether the Leases that returned one with other jobs.
	ValueMismatches                              int
	ValueMismatch                                string
	LimitAdded, LimitLeased, LimitLeasedTogether int
	// Budget is the seed's batch budget (LeaseConfig.BatchBudgets; not
	// summed by Add). Batches counts the AddBatches (known outcome) that
	// were accepted, BatchTooLarge those refused with ErrBatchTooLarge,
	// and BudgetErrors the refusals of batches whose payloads with
	// generous overheads fit the budget, or acceptances of batches whose
	// payloads alone do not (it must be 0). LeasesShort counts the Leases
	// (known outcome) of n > 1 jobs that returned fewer, but some: fewer
	// were due, or the budget cut them short.
	Budget, Batches, BatchTooLarge, BudgetErrors, LeasesShort int
	Stats                                                     memdb.Stats
	// Failure holds the history and porcupine's linearization info when
	// Check is Illegal or Unknown (timed out) (for Failure.WriteHistory
	// and Visualize); nil when it is Ok, so that a passing seed keeps no
	// history.
	Failure *Failure
}

// Add adds o's counts to r (not Check: a total has none), and keeps r's
// first failure.
func (r *LeaseResult) Add(o LeaseResult) {
	r.Operations += o.Operations
	r.Added += o.Added
	r.Acked += o.Acked
	r.Dead += o.Dead
	r.AckedAbandoned += o.AckedAbandoned
	r.AckedTwice += o.AckedTwice
	r.AckedAndDead += o.AckedAndDead
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Unknown += o.Unknown
	r.RecoveredAtOnce += o.RecoveredAtOnce
	r.Abandoned += o.Abandoned
	r.AbandonedAdds += o.AbandonedAdds
	r.AbandonedAddsSeen += o.AbandonedAddsSeen
	r.Trusted += o.Trusted
	r.TrustedTimedOut += o.TrustedTimedOut
	r.TrustedAdded += o.TrustedAdded
	r.LayerIDs += o.LayerIDs
	r.LayerIDUnknown += o.LayerIDUnknown
	r.LayerIDTrusted += o.LayerIDTrusted
	r.LayerIDKept += o.LayerIDKept
	r.Released += o.Released
	r.ReleasedLast += o.ReleasedLast
	r.ReleaseLost += o.ReleaseLost
	r.AbandonedReleases += o.AbandonedReleases
	r.TimedOutInFlight += o.TimedOutInFlight
	r.ReleasedDead += o.ReleasedDead
	r.DeadAttempts += o.DeadAttempts
	r.UniqueAdds += o.UniqueAdds
	r.UniqueDuplicates += o.UniqueDuplicates
	r.UniqueReused += o.UniqueReused
	r.KeysHeld += o.KeysHeld
	r.Cancelled += o.Cancelled
	r.CancelledAbandoned += o.CancelledAbandoned
	r.CancelledAndAcked += o.CancelledAndAcked
	r.CancelledAndDead += o.CancelledAndDead
	r.CancelledTwice += o.CancelledTwice
	r.CancelNotFound += o.CancelNotFound
	r.CancelNever += o.CancelNever
	r.CancelDead += o.CancelDead
	r.CancelGone += o.CancelGone
	r.CancelsRecovered += o.CancelsRecovered
	r.LostToCancel += o.LostToCancel
	r.KeysFreedByCancel += o.KeysFreedByCancel
	r.CancelRaces += o.CancelRaces
	r.JobLookups += o.JobLookups
	r.JobQueued += o.JobQueued
	r.JobLeased += o.JobLeased
	r.JobDead += o.JobDead
	r.JobNotFound += o.JobNotFound
	r.JobInvalid += o.JobInvalid
	r.Requeued += o.Requeued
	r.RequeueKeyHeld += o.RequeueKeyHeld
	r.RequeueNotFound += o.RequeueNotFound
	r.Deleted += o.Deleted
	r.DeletedAbandoned += o.DeletedAbandoned
	r.DeleteNotFound += o.DeleteNotFound
	r.DeadOpsNever += o.DeadOpsNever
	r.DeletedTwice += o.DeletedTwice
	r.DeletedAndRemoved += o.DeletedAndRemoved
	r.RequeuedAcked += o.RequeuedAcked
	r.RequeuedDead += o.RequeuedDead
	r.DeadOpsRecovered += o.DeadOpsRecovered
	r.Leftovers += o.Leftovers
	r.CountErrors += o.CountErrors
	r.ValueMismatches += o.ValueMismatches
	if r.ValueMismatch == "" {
		r.ValueMismatch = o.ValueMismatch
	}
	r.LimitAdded += o.LimitAdded
	r.LimitLeased += o.LimitLeased
	r.LimitLeasedTogether += o.LimitLeasedTogether
	r.Batches += o.Batches
	r.BatchTooLarge += o.BatchTooLarge
	r.BudgetErrors += o.BudgetErrors
	r.LeasesShort += o.LeasesShort
	for i := range r.DeadRaces {
		r.DeadRaces[i] += o.DeadRaces[i]
	}
	addStats(&r.Stats, o.Stats)
	if r.Failure == nil {
		r.Failure = o.Failure
	}
}

// OK reports whether the history was linearizable, every job was
// accounted for exactly once, every payload read back was its job's, and
// every AddBatch was refused or accepted as its budget allows.
func (r LeaseResult) OK() bool {
	return r.Check == porcupine.Ok && r.AckedTwice == 0 && r.AckedAndDead == 0 && r.Lost == 0 && r.Duplicated == 0 &&
		r.DeadAttempts == 0 && r.KeysHeld == 0 && r.CancelledAndAcked == 0 && r.CancelledAndDead == 0 && r.CancelledTwice == 0 &&
		r.JobInvalid == 0 && r.Leftovers == 0 && r.CountErrors == 0 && r.DeletedTwice == 0 && r.DeletedAndRemoved == 0 && r.TrustedAdded == 0 &&
		r.ValueMismatches == 0 && r.BudgetErrors == 0 &&
		r.Added == r.Acked+r.Dead+r.Cancelled+r.Deleted+r.AckedAbandoned+r.CancelledAbandoned+r.DeletedAbandoned
}
