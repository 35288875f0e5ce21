package sim

import "github.com/fdbqueue/fdbqueue/memdb"

// PoolResult is what one seed of RunPoolShutdowns found.
type PoolResult struct {
	Cycles, Handled int // cycles run; handler calls
	// Conservation: jobs added; acked once (by the pools, an abandoned
	// handler's Task.Ack, or the drain); dead once; gone with no Ack that
	// succeeded but one that failed (it may have committed); and the jobs
	// acked twice, acked and dead, or none of these (lost).
	Added, Acked, Dead, AckedUnknown, AckedTwice, AckedAndDead, Lost int
	// Outcomes at shutdown: Abandoned jobs, Released those whose Release
	// succeeded (each checked: queued, due at once, its attempt given
	// back); ReleaseFailed those whose Release failed (they may stay
	// leased until the lease expires: documented, counted, accepted);
	// FailedAtStop the acks and nacks that failed while the pools stopped
	// (Outcome Failed: the lease expires); Settled the leases in flight at
	// shutdown that the pool settled and released, SettleFailed those it
	// could not settle or release. Hidden is the jobs left leased after
	// every Run returned with none of these failures to explain them;
	// HiddenExplained those the failures explain.
	Abandoned, Released, ReleaseFailed, FailedAtStop, Settled, SettleFailed int
	Hidden, HiddenExplained                                                 int
	// NotDueAtCycle counts the live jobs not due as a cycle starts, the
	// clock having moved by twice the lease duration since the last
	// cycle's pools stopped: a lease, retry delay or snooze that outlasted
	// any an ack, nack, snooze or heartbeat sets.
	NotDueAtCycle int
	// FailedCut counts the acks, nacks and releases of a handler's
	// result that failed because the pool's own abandonment cancelled
	// them: a violation (the job is left leased until its lease expires
	// though nothing failed).
	FailedCut int
	// Violations of the release: a released job whose attempt count was
	// not given back (AttemptBurned), not due at once (NotDue), or not
	// queued at all (ReleasedGone); an abandoned run's Task.Ack that
	// acked a job the pool had released (LateAcked); a dead job without
	// MaxAttempts counted attempts (DeadAttempts); a Run that returned an
	// error (RunErrors).
	AttemptBurned, NotDue, ReleasedGone, LateAcked, DeadAttempts, RunErrors int
	// LateAckLost counts the abandoned runs' Task.Acks that failed with
	// ErrLeaseLost (their job was released), LateAckedHeld those that
	// acked a job whose release had failed (it was still theirs).
	LateAckLost, LateAckedHeld int
	// Cancels (PoolConfig.CancelProb): Cancelled counts the jobs a Cancel
	// removed, CancelledLeased and CancelledQueued the Cancels of a job
	// leased or queued as the Cancel committed (the Job lookup in its
	// transaction says which, and under which lease), CancelLeaseUnknown
	// those whose lookup came after their commit (a retry after
	// commit_unknown_result found the job gone and the Cancel's journal
	// record), CancelNotFound the Cancels that found no job in the queue.
	// LostToCancel counts the handler runs of a cancelled job whose ack,
	// nack or release found the lease lost (Outcome LeaseLost, or
	// Abandoned with ErrLeaseLost), HeartbeatLost the blocked handlers
	// whose context the heartbeat ended before the pools stopped, their
	// job cancelled, and LateAckCancelled the abandoned runs' Task.Acks
	// that failed with ErrLeaseLost, their job cancelled.
	Cancelled, CancelledLeased, CancelledQueued, CancelLeaseUnknown, CancelNotFound int
	LostToCancel, HeartbeatLost, LateAckCancelled                                   int
	// What the pool promises of a cancelled job (see RunPoolShutdowns),
	// all must be 0: LeasedAfterCancel counts the handler runs that
	// started after their job's Cancel returned under a lease other than
	// the one the Cancel removed (or the job was queued then: no lease is
	// left to run it); SettledAfterCancel the runs that acked, nacked,
	// snoozed or released a job after its Cancel returned;
	// LostUncancelled the handlers whose context ended before the pools
	// stopped though their job was not cancelled; ExtendedAfterCancel the
	// runs whose lease, taken before the clock moved by ExtendEvery
	// (HeartbeatProb), a heartbeat then extended though their job's Cancel
	// had returned before the clock moved (the extension read the job
	// after the Cancel committed, so it must have found the lease lost);
	// CancelledAndAcked, CancelledAndDead and CancelledTwice the jobs a
	// Cancel removed that were also acked (by the pool or a Task.Ack),
	// dead in the end, or removed by another Cancel. Leftovers and
	// CountErrors are checkAccounts' at each cycle's end and after the
	// drain.
	LeasedAfterCancel, SettledAfterCancel, LostUncancelled, ExtendedAfterCancel int
	CancelledAndAcked, CancelledAndDead, CancelledTwice                         int
	// The long runs (PoolConfig.LongRunProb): LongRuns counts the cycles
	// whose clock moved past the lease while blocked handlers held their
	// jobs, LongRunSteps the clock's steps, HeldExtended the heartbeats'
	// extensions seen. What a heartbeat promises of a blocked handler's
	// job that no Cancel removed, checked once the heartbeats of each
	// step ran (each counted once per run and long run; all must be 0):
	// HeldLeaseLost, its record no longer carries the handler's lease
	// (another worker or pool leased it, or it was released, dead or
	// gone) or another handler run of it started; HeldLeaseExpired, its
	// record carries the lease past its deadline (any worker may lease
	// it); HeldAttemptsGrew, its attempt count grew past the lease's;
	// HeldContextEnded, its handler's context ended (a heartbeat found the
	// lease lost); HeldDeadlineWrong, its deadline (in the record or the
	// Task's lease) is not the clock's time plus LeaseDuration, which the
	// step's extension sets.
	LongRuns, LongRunSteps, HeldExtended                                                   int
	HeldLeaseLost, HeldLeaseExpired, HeldAttemptsGrew, HeldContextEnded, HeldDeadlineWrong int
	Leftovers, CountErrors                                                                 int
	Stats                                                                                  memdb.Stats
}

// OK reports whether every check held.
func (r PoolResult) OK() bool {
	return r.AckedTwice == 0 && r.AckedAndDead == 0 && r.Lost == 0 && r.Hidden == 0 && r.NotDueAtCycle == 0 && r.AttemptBurned == 0 &&
		r.NotDue == 0 && r.ReleasedGone == 0 && r.FailedCut == 0 && r.LateAcked == 0 && r.DeadAttempts == 0 && r.RunErrors == 0 &&
		r.LeasedAfterCancel == 0 && r.SettledAfterCancel == 0 && r.LostUncancelled == 0 && r.ExtendedAfterCancel == 0 && r.CancelledAndAcked == 0 &&
		r.CancelledAndDead == 0 && r.CancelledTwice == 0 && r.Leftovers == 0 && r.CountErrors == 0 &&
		r.HeldLeaseLost == 0 && r.HeldLeaseExpired == 0 && r.HeldAttemptsGrew == 0 && r.HeldContextEnded == 0 && r.HeldDeadlineWrong == 0 &&
		r.Added == r.Acked+r.Dead+r.Cancelled+r.AckedUnknown
}
