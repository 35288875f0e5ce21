package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// LeaseConfig configures a simulation of a JobQueue.
type LeaseConfig struct {
	Rounds, Clients, OpsPerClient int
	Choice                        int // K
	MaxAttempts                   int
	Faults                        memdb.Faults
	// Latency is the database's latency model. Commits wait it out, so
	// that a context that ends can interrupt one in flight (which, with
	// Faults.LateLanding, may then land after its call returned).
	Latency      memdb.Latency
	CheckTimeout time.Duration
	// InterruptProb is the probability that an operation's context is
	// cancelled as its commit starts (an interruption in flight);
	// DeadlineProb, that it runs with a random deadline of up to
	// MaxDeadline, which may end it at any point. Such an operation runs
	// WithOpID, under an ID of the harness's (Extend, which has no
	// journal, is called again as it was, and the two calls are recorded
	// apart: see leaseHarness.recover). The others run without WithOpID,
	// under an ID the layer makes.
	InterruptProb, DeadlineProb float64
	MaxDeadline                 time.Duration
	// RecoverAtOnceProb is the probability that an operation that failed,
	// its outcome unknown, is called again with its OpID by its client at
	// once, while its first commit may still land (Faults.LateLanding):
	// the two attempts must then conflict rather than both take effect,
	// which needs the journal's check of the operation's record to be a
	// normal read. The others are recovered at the end of the round, once
	// every late commit has landed.
	RecoverAtOnceProb float64
	// AbandonProb is the probability that an operation that failed, its
	// outcome unknown, is never recovered: its client crashed mid-commit
	// and never comes back. It is recorded as of unknown outcome
	// (LeaseOutput.Unknown), returning at the end of its round, once its
	// commit has landed or not.
	AbandonProb float64
	// UniqueProb is the probability that an Add carries a unique key,
	// drawn from UniqueKeys keys ("u0", "u1", ...): a small set, so that
	// Adds find their key held, and free again once its holder is acked
	// or dead.
	UniqueProb float64
	UniqueKeys int
	// OneAttemptProb is the probability that an Add's job has one attempt
	// (Job.MaxAttempts 1) rather than MaxAttempts: it dies at its first
	// Nack or expired lease, so that there are dead jobs to requeue and
	// delete.
	OneAttemptProb float64
	// CancelProb is the probability that an operation is a Cancel, of the
	// job of a lease the client holds, of a job the harness has seen
	// (queued, leased by any client, dead, acked or cancelled), or of an
	// ID never added; JobProb, that it is a Job lookup of such an ID.
	// Cancels are interrupted, run under deadlines, recovered and
	// abandoned as the other operations; Job lookups, which write nothing,
	// run on the database as they are.
	CancelProb, JobProb float64
	// RequeueProb is the probability that an operation is a Requeue, and
	// DeleteDeadProb that it is a DeleteDead: of a dead job mostly (one an
	// Observe read or a Nack dead-lettered), else of a job as a Cancel's
	// (held, queued, leased, gone) or an ID never added. They are
	// interrupted, run under deadlines, recovered and abandoned as the
	// other operations.
	RequeueProb, DeleteDeadProb float64
	// RaceProb is the probability that an Ack, Nack, Extend or Release of
	// a held lease runs alongside a Cancel of the same job by another
	// client (ClientId + 500 in the history), so that the two race: one
	// must fail (ErrLeaseLost, ErrJobNotFound) or come second.
	// DeadRaceProb is the probability that a Requeue or DeleteDead runs
	// alongside another client's Requeue, DeleteDead, Cancel or Job lookup
	// of the same job (one of the four at random): of a Requeue and a
	// DeleteDead of one dead job, or of two Requeues, only one finds it
	// dead; a Cancel finds it only once requeued.
	RaceProb, DeadRaceProb float64
	// WithoutIdempotency turns the queue's journal off, for the test that
	// requires the checker to reject the result.
	WithoutIdempotency bool
	// SnapshotJournalReads makes the operations' point reads of their
	// journal records snapshot reads (through a wrapper of the database),
	// as a journal would that did not conflict with an earlier attempt's
	// commit landing late: for the test that requires the recoveries at
	// once (RecoverAtOnceProb) to expose it.
	SnapshotJournalReads bool
	// plant, if not nil, wraps the database each operation of a kind runs
	// on (after the interruption's wrapper): the tests that plant bugs in
	// the layer's writes set it, so that the checks are shown to catch
	// them.
	plant func(kind LeaseKind, t kv.Database) kv.Database
}

// DefaultLeaseConfig is a short run with every fault.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Rounds: 12, Clients: 4, OpsPerClient: 7, Choice: 3, MaxAttempts: 3,
		Faults: memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05, TooOld: 0.02, LateLanding: 0.5,
			ReadErrors: 0.02, ReadVersionErrors: 0.01},
		// Commits only: read latency would make each round several times
		// longer, and the commit is where an interruption matters.
		Latency:       memdb.Latency{Commit: memdb.Span{Min: 50 * time.Microsecond, Max: 500 * time.Microsecond}},
		InterruptProb: 0.12, DeadlineProb: 0.06, MaxDeadline: time.Millisecond, RecoverAtOnceProb: 0.5, AbandonProb: 0.04,
		UniqueProb: 0.3, UniqueKeys: 3, OneAttemptProb: 0.4, CancelProb: 0.1, JobProb: 0.08, RequeueProb: 0.06, DeleteDeadProb: 0.04,
		RaceProb: 0.1, DeadRaceProb: 0.3, CheckTimeout: 30 * time.Second}
}

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
	// Released counts the Releases that gave their lease back (known
	// outcome), ReleasedLast those among them of a lease on its last
	// attempt (the job lives on for one more), ReleaseLost those that
	// found their lease lost, and AbandonedReleases those never recovered
	// (among Abandoned). ReleasedDead is the jobs seen dead (at an Observe
	// or in the end) after a Release had given them back, and DeadAttempts
	// the dead jobs whose record does not hold MaxAttempts counted
	// attempts (it must be 0).
	Released, ReleasedLast, ReleaseLost, AbandonedReleases int
	ReleasedDead, DeadAttempts                             int
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
	Stats                  memdb.Stats
	// Failure holds the history and porcupine's linearization info when
	// Check is Illegal or Unknown (timed out) (for Failure.WriteHistory
	// and Visualize); nil when it is Ok, so that a passing seed keeps no
	// history.
	Failure *Failure
}

// OK reports whether the history was linearizable and every job was
// accounted for exactly once.
func (r LeaseResult) OK() bool {
	return r.Check == porcupine.Ok && r.AckedTwice == 0 && r.AckedAndDead == 0 && r.Lost == 0 && r.Duplicated == 0 &&
		r.DeadAttempts == 0 && r.KeysHeld == 0 && r.CancelledAndAcked == 0 && r.CancelledAndDead == 0 && r.CancelledTwice == 0 &&
		r.JobInvalid == 0 && r.Leftovers == 0 && r.CountErrors == 0 && r.DeletedTwice == 0 && r.DeletedAndRemoved == 0 &&
		r.Added == r.Acked+r.Dead+r.Cancelled+r.Deleted+r.AckedAbandoned+r.CancelledAbandoned+r.DeletedAbandoned
}

// simClock is the queue's clock: fixed within a round.
type simClock struct{ now atomic.Int64 }

func (c *simClock) Now() time.Time { return time.UnixMicro(c.now.Load()) }

// After is never reached: the harness uses Lease, not LeaseWait.
func (c *simClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// RunLeases runs concurrent clients on a JobQueue under injected faults:
// they add jobs (some under unique keys from a small set, see
// LeaseConfig.UniqueProb), lease them, ack, nack, extend and release the leases they
// hold (a Release gives the attempt back: the model counts it so, and a
// job must die at exactly MaxAttempts counted attempts), and keep some
// leases across rounds and drop others (a crashed worker),
// while the clock moves between rounds so that leases expire and delayed
// jobs fall due. The history is checked against LeaseModel, and at the
// end every job is drained and accounted for.
//
// Some operations are cancelled as their commit starts or run under a
// deadline (LeaseConfig.InterruptProb, DeadlineProb): a commit interrupted
// in flight may be applied or not, and may land after the call returned,
// as FoundationDB's may (memdb's Faults.LateLanding). Every operation
// whose call failed is recovered: called again with its OpID (Extend with
// its lease), either at once by its client, while its first commit may
// still land (RecoverAtOnceProb), or at the end of the round, after every
// late commit has landed (memdb's AwaitLateLandings). The journal
// promises that the recovery returns the first call's result if that
// took effect and performs the operation otherwise, so the two calls are
// one operation with the recovery's result, taking effect once, somewhere
// between the first call and the recovery's return: that is how the
// history records it, and an operation that took effect twice, or whose
// recovery lied, shows up as a violation or in the accounts. Extend has no
// journal: its recovery is recorded as a call of its own, its first call
// as of unknown outcome until the round's end (an extension that a Cancel
// then made the recovery find lost), and so is an earlier attempt within
// an Extend call that ran its transaction again and found the lease lost.
//
// Except for a few (AbandonProb), never recovered, as by a client that
// crashed: recorded as of unknown outcome, returning at the end of the
// round, which the model lets take effect or not (LeaseOutput.Unknown).
// Each Add's job carries a value of its own (the Add's call), so the job
// of an abandoned Add is known if it was ever seen: every job that ever
// existed is at a round's Observe or in a known Lease's output (a job
// only a known Ack removes, from a known lease), or was read with its
// value or added by a known Add before a Cancel removed it (Cancels and
// Job lookups target only such jobs and IDs never added, never the
// holder an Add of a held key names, which may be an abandoned Add's
// job nobody saw). A job with no Add's
// value, or two jobs with one Add's, fail the run. Leases of abandoned
// Leases are held by nobody and expire; a job that nobody acked is
// accounted for by an abandoned Ack (or Cancel) of it.
//
// Clients also cancel jobs (LeaseConfig.CancelProb): their own leased
// jobs, jobs seen anywhere (queued, leased by another client, dead, gone)
// and IDs never added, and look jobs up with Job (JobProb). The model
// checks what Cancel promises (a cancelled job is never leased, acked or
// dead again, its holder's lease is lost, its unique key is free; a dead
// or gone job is not found) and that each Job returns the job as it was
// at some point of its call. At each Observe and after the drain, the
// queue's own accounts are checked against its records: no index entry
// or value of a removed job is left, and Stats' counts and the
// vesting-time bucket counters are exact (LeaseResult.Leftovers,
// CountErrors); at the end a job a Cancel removed was neither acked nor
// dead, nor cancelled twice.
//
// Clients also requeue dead jobs and delete them (LeaseConfig.RequeueProb,
// DeleteDeadProb), mostly dead ones, some racing another client's
// Requeue, DeleteDead, Cancel or lookup of the same job (DeadRaceProb). The
// model checks that a Requeue puts its job back due at once with its
// attempts at 0 and its unique key held again (or is refused while
// another job holds the key), that a DeleteDead removes its job for good,
// and that either finds nothing for a job not dead, exactly once under
// commit_unknown_result and recovery by OpID; the accounts count deleted
// jobs (added = acked + dead + cancelled + deleted, or gone by an
// abandoned Ack, Cancel or DeleteDead) and fail a job deleted twice or
// deleted and also acked, cancelled or dead; checkAccounts finds what a
// Requeue or DeleteDead left behind (a dead record beside the requeued
// one, a deleted job's value or index entry) and counters they got wrong.
func RunLeases(ctx context.Context, seed int64, cfg LeaseConfig) (LeaseResult, error) {
	var res LeaseResult
	h, err := newLeaseHarness(seed, cfg)
	if err != nil {
		return res, err
	}
	defer h.db.Close()
	db, q, clock, sub := h.db, h.q, h.clock, h.sub
	held := make([][]fdbqueue.Lease, cfg.Clients)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1ea5e))
	for round := range cfg.Rounds {
		var wg sync.WaitGroup
		errs := make(chan error, cfg.Clients)
		now := clock.now.Load()
		for c := range cfg.Clients {
			crng := rand.New(rand.NewPCG(uint64(seed), uint64(round*1000+c)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.client(ctx, c, crng, now, &held[c]); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return res, err
		}
		// Recover the operations of unknown outcome that their clients
		// left, once every commit interrupted in flight has landed (or
		// conflicted), in call order.
		db.AwaitLateLandings()
		// The abandoned operations have taken effect or not by now.
		ret := h.seq.Add(1)
		for _, op := range h.abandoned {
			in := op.in
			in.Call, in.Ret = op.call, ret
			h.history = append(h.history, porcupine.Operation{ClientId: op.client, Input: in, Call: op.call,
				Output: LeaseOutput{Unknown: true}, Return: ret})
			switch op.in.Kind {
			case LAck:
				h.abandonedAcks[op.in.Job] = true
			case LRelease:
				res.AbandonedReleases++
			case LCancel:
				h.abandonedCancels[op.in.Job] = true
			case LDeleteDead:
				h.abandonedDeletes[op.in.Job] = true
			}
		}
		res.Abandoned += len(h.abandoned)
		h.abandoned = nil
		pending := h.pending
		h.pending = nil
		sort.Slice(pending, func(i, j int) bool { return pending[i].call < pending[j].call })
		for _, p := range pending {
			out, got, err := h.recover(ctx, p)
			if err != nil {
				return res, fmt.Errorf("recovering %v: %w", p.in.Kind, err)
			}
			if p.in.Kind == LLease {
				held[p.client/1000] = append(held[p.client/1000], got...)
			}
			h.settled(p, out)
		}
		// The first calls of the Extends recovered, at once or just now,
		// have taken effect or not by ret too.
		h.recordFirstCalls(ret)
		// Observe, then crash some holders and move the clock.
		call := h.seq.Add(1)
		jobs, keys, err := observeJobs(ctx, db, sub, h.seen)
		if err != nil {
			return res, err
		}
		h.record(cfg.Clients*1000, LeaseInput{Kind: LObserve, Now: now}, call, LeaseOutput{Jobs: jobs, Held: keys})
		h.deadSeen = h.deadSeen[:0]
		for _, j := range jobs {
			if j.Dead {
				h.deadSeen = append(h.deadSeen, j.Job)
				if h.released[j.Job] {
					h.releasedDead[j.Job] = true
				}
			}
		}
		if err := checkAccountsInto(ctx, db, q, sub, &res.Leftovers, &res.CountErrors); err != nil {
			return res, err
		}
		for c := range held {
			if rng.IntN(3) == 0 {
				held[c] = nil
			}
		}
		clock.now.Add([]int64{0, h.d / 2, h.d, 2 * h.d}[rng.IntN(4)] + 1)
	}
	history := h.history
	acks := h.acks
	// An abandoned Add may have added the job that carries its value.
	for i, op := range history {
		in, out := op.Input.(LeaseInput), op.Output.(LeaseOutput)
		if in.Kind != LAdd || !out.Unknown {
			continue
		}
		res.AbandonedAdds++
		if jobs := h.adds[op.Call]; len(jobs) > 0 {
			out.Job = jobs[0]
			history[i].Output = out
			res.AbandonedAddsSeen++
		}
	}
	for _, jobs := range h.adds {
		if len(jobs) > 1 {
			res.Duplicated++
		}
	}
	res.Operations = len(history)
	res.Unknown, res.RecoveredAtOnce = h.unknown, h.atOnce
	model := LeaseModel(cfg.Choice)
	res.Check = porcupine.CheckOperationsTimeout(model, history, cfg.CheckTimeout)
	if res.Check != porcupine.Ok {
		// Checked again, verbose, for the longest linearizable prefixes
		// (so far, if it times out again): only a seed that failed the
		// check keeps its history.
		_, info := porcupine.CheckOperationsVerbose(model, history, cfg.CheckTimeout)
		reason := fmt.Sprintf("history of %d operations over %d rounds is not linearizable", len(history), cfg.Rounds)
		if res.Check == porcupine.Unknown {
			reason = fmt.Sprintf("check of a history of %d operations over %d rounds timed out after %v", len(history), cfg.Rounds, cfg.CheckTimeout)
		}
		res.Failure = &Failure{Seed: seed, Round: -1, Structure: "job queue", Reason: reason,
			model: model, info: info, history: history, hasInfo: true}
	}

	if err := drainJobs(ctx, db, q, func() { clock.now.Add(3*h.d + 1) }, acks); err != nil {
		return res, err
	}
	final, keys, err := observeJobs(ctx, db, sub, nil)
	if err != nil {
		return res, err
	}
	if err := checkAccountsInto(ctx, db, q, sub, &res.Leftovers, &res.CountErrors); err != nil {
		return res, err
	}
	res.KeysHeld = len(keys)
	dead, err := deadAfterDrain(final, &res.DeadAttempts)
	if err != nil {
		return res, err
	}
	for _, j := range final { // all dead
		if h.released[j.Job] {
			h.releasedDead[j.Job] = true
		}
	}
	res.ReleasedDead = len(h.releasedDead)
	res.Released, res.ReleasedLast, res.ReleaseLost = h.releases, h.releasesLast, h.releasesLost
	keyJobs := map[string]map[string]bool{} // the jobs added with each unique key
	keyOrder := map[string][]string{}       // the same, in the order of their Adds' calls
	cancels := h.cancels
	for _, op := range history {
		in, out := op.Input.(LeaseInput), op.Output.(LeaseOutput)
		switch {
		case out.Unknown:
		case in.Kind == LCancel && out.NotFound:
			res.CancelNotFound++
			switch {
			case h.never[in.Job]:
				res.CancelNever++
			case dead[in.Job]:
				res.CancelDead++
			default:
				res.CancelGone++
			}
		case (in.Kind == LAck || in.Kind == LNack || in.Kind == LExtend || in.Kind == LRelease) && out.Lost && cancels[in.Job] > 0:
			res.LostToCancel++
		case in.Kind == LRequeue && out.KeyHeld:
			res.RequeueKeyHeld++
		case (in.Kind == LRequeue || in.Kind == LDeleteDead) && out.NotFound:
			if in.Kind == LRequeue {
				res.RequeueNotFound++
			} else {
				res.DeleteNotFound++
			}
			if h.never[in.Job] {
				res.DeadOpsNever++
			}
		case in.Kind == LRequeue:
			res.Requeued++
		}
		if in.Kind != LAdd {
			continue
		}
		if in.Unique != "" && !out.Unknown {
			res.UniqueAdds++
		}
		if out.Duplicate {
			res.UniqueDuplicates++
			continue // added nothing: the model checked the holder's ID
		}
		job := out.Job
		if job == "" {
			continue // an abandoned Add that added nothing
		}
		if in.Unique != "" {
			if keyJobs[in.Unique] == nil {
				keyJobs[in.Unique] = map[string]bool{}
			}
			keyJobs[in.Unique][job] = true
			keyOrder[in.Unique] = append(keyOrder[in.Unique], job)
		}
		res.Added++
		if h.requeues[job] > 0 {
			switch {
			case acks[job] > 0:
				res.RequeuedAcked++ // a requeued job runs again
			case dead[job]:
				res.RequeuedDead++
			}
		}
		switch n, c, e := acks[job], cancels[job], h.deletes[job]; {
		case n > 1:
			res.AckedTwice++
		case c > 1:
			res.CancelledTwice++
		case e > 1:
			res.DeletedTwice++
		case c == 1 && n == 1:
			res.CancelledAndAcked++
		case c == 1 && dead[job]:
			res.CancelledAndDead++
		case e == 1 && (n == 1 || c == 1 || dead[job]):
			res.DeletedAndRemoved++
		case n == 1 && dead[job]:
			res.AckedAndDead++
		case n == 1:
			res.Acked++
		case c == 1:
			res.Cancelled++
		case e == 1:
			res.Deleted++
		case dead[job]:
			res.Dead++
		case h.abandonedAcks[job]:
			res.AckedAbandoned++
		case h.abandonedCancels[job]:
			res.CancelledAbandoned++
		case h.abandonedDeletes[job]:
			res.DeletedAbandoned++
		default:
			res.Lost++
		}
	}
	for _, jobs := range keyJobs {
		res.UniqueReused += len(jobs) - 1
	}
	for _, jobs := range keyOrder { // history is in the order of the calls
		for i := 1; i < len(jobs); i++ {
			if cancels[jobs[i-1]] > 0 {
				res.KeysFreedByCancel++
			}
		}
	}
	res.CancelsRecovered, res.CancelRaces = h.cancelsRecovered, int(h.races.Load())
	res.DeadOpsRecovered = h.deadOpsRecovered
	for i := range res.DeadRaces {
		res.DeadRaces[i] = int(h.deadRaces[i].Load())
	}
	res.JobLookups, res.JobQueued, res.JobLeased, res.JobDead = h.jobLookups, h.jobQueued, h.jobLeased, h.jobDead
	res.JobNotFound, res.JobInvalid = h.jobNotFound, h.jobInvalid
	res.Stats = db.Stats()
	return res, nil
}

// leaseHarness is one seed's JobQueue, database and history.
type leaseHarness struct {
	q     *fdbqueue.JobQueue
	db    *memdb.DB
	t     kv.Database // db, or the wrapper of SnapshotJournalReads
	clock *simClock
	sub   fdbqueue.Subspace // the queue's
	cfg   LeaseConfig
	d     int64 // lease duration, µs
	seq   atomic.Int64

	mu      sync.Mutex
	history []porcupine.Operation
	acks    map[string]int // successful Acks per job
	pending []*leaseOp     // operations of unknown outcome to recover at the round's end
	// abandoned are the round's operations of unknown outcome that are
	// never recovered; abandonedAcks, the jobs of every abandoned Ack.
	abandoned     []*leaseOp
	abandonedAcks map[string]bool
	// firstCalls are the first calls of the round's Extends recovered so
	// far, to record as of unknown outcome at the round's end (see
	// recover).
	firstCalls []*leaseOp
	// adds is the IDs of the jobs seen, by the call of the Add whose
	// value each carries.
	adds    map[int64][]string
	unknown int
	atOnce  int
	// released is the jobs that a Release gave back (known outcome);
	// releases, releasesLast and releasesLost count those Releases, those
	// on their lease's last attempt, and the Releases that found their
	// lease lost.
	released                             map[string]bool
	releases, releasesLast, releasesLost int
	// releasedDead is the jobs of released seen dead since (ReleasedDead).
	releasedDead map[string]bool
	// cancels is the successful Cancels per job (known outcome);
	// abandonedCancels, the jobs of every abandoned Cancel;
	// cancelsRecovered, the Cancels of unknown outcome recovered.
	cancels          map[string]int
	abandonedCancels map[string]bool
	cancelsRecovered int
	races            atomic.Int64 // Cancels run alongside their job's holder's operation
	// requeues and deletes are the successful Requeues and DeleteDeads
	// per job (known outcome); abandonedDeletes, the jobs of every
	// abandoned DeleteDead; deadOpsRecovered, the Requeues and
	// DeleteDeads of unknown outcome recovered; deadRaces, the Requeues
	// and DeleteDeads run alongside another client's operation on their
	// job, by its kind (raceKinds).
	requeues, deletes map[string]int
	abandonedDeletes  map[string]bool
	deadOpsRecovered  int
	deadRaces         [4]atomic.Int64
	// known is every job ID seen (added, leased, observed), in the order
	// first seen (knownOrder); never, the IDs made up for Cancels and Job
	// lookups of jobs that never existed.
	known      map[string]bool
	knownOrder []string
	never      map[string]bool
	// deadSeen is the dead jobs the last Observe read and those a Nack
	// dead-lettered since; leasedLast, the jobs of the last few leases
	// returned (to any client).
	deadSeen, leasedLast []string
	// Job lookups and their results (see LeaseResult).
	jobLookups, jobQueued, jobLeased, jobDead, jobNotFound, jobInvalid int
}

// newLeaseHarness makes seed's database (which the caller closes),
// clock, job queue and harness, as RunLeases runs them.
func newLeaseHarness(seed int64, cfg LeaseConfig) (*leaseHarness, error) {
	clock := &simClock{}
	clock.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	sub, err := fdbqueue.NewSubspace(leaseSubspace)
	if err != nil {
		return nil, err
	}
	var opts []fdbqueue.Option
	if cfg.WithoutIdempotency {
		opts = append(opts, fdbqueue.WithoutIdempotency())
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: cfg.Choice, MaxAttempts: cfg.MaxAttempts, Clock: clock,
		StatsResolution: leaseStatsResolution}, opts...)
	if err != nil {
		return nil, err
	}
	var t kv.Database
	db := memdb.New(memdb.WithSeed(seed), memdb.WithFaults(cfg.Faults), memdb.WithLatency(cfg.Latency),
		memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	if cfg.SnapshotJournalReads {
		// The journal's records are under the queue's meta subspace, the
		// subspace's prefix + 0xff, at ("j", ...): see journaled.
		prefix, err := tuple.Tuple{"j"}.AppendPack(append(sub.Bytes(), 0xff))
		if err != nil {
			db.Close()
			return nil, err
		}
		t = snapshotJournal{Database: db, prefix: prefix}
	} else {
		t = db
	}
	return &leaseHarness{q: q, db: db, t: t, clock: clock, sub: sub, cfg: cfg, d: int64(10 * time.Second / time.Microsecond), acks: map[string]int{},
		abandonedAcks: map[string]bool{}, adds: map[int64][]string{}, released: map[string]bool{}, releasedDead: map[string]bool{},
		cancels: map[string]int{}, abandonedCancels: map[string]bool{}, known: map[string]bool{}, never: map[string]bool{},
		requeues: map[string]int{}, deletes: map[string]int{}, abandonedDeletes: map[string]bool{}}, nil
}

// leaseSubspace is the job queue's subspace in RunLeases.
var leaseSubspace = tuple.Tuple{"sim", "jobs"}

// leaseStatsResolution is the queue's StatsResolution, for the check of
// its bucket counters (checkAccounts).
const leaseStatsResolution = time.Second

// know notes job as seen; h.mu must be held.
func (h *leaseHarness) know(job string) {
	if !h.known[job] {
		h.known[job] = true
		h.knownOrder = append(h.knownOrder, job)
	}
}

// target returns the ID of a job to cancel or look up: the job of one of
// held, a dead job, a job just leased by any client (whose holder may be
// acking it), a job seen (one of the last few, or any), or an ID never
// added.
func (h *leaseHarness) target(rng *rand.Rand, held []fdbqueue.Lease) string {
	x := rng.IntN(8)
	if x >= 1 && x <= 2 && len(held) > 0 {
		id := held[rng.IntN(len(held))].JobID
		return string(id[:])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case (x == 3 || x == 4) && len(h.deadSeen) > 0:
		return h.deadSeen[rng.IntN(len(h.deadSeen))]
	case x == 5 && len(h.leasedLast) > 0:
		return h.leasedLast[rng.IntN(len(h.leasedLast))]
	}
	if x == 0 || len(h.knownOrder) == 0 {
		var id fdbqueue.JobID
		for i := range id {
			id[i] = byte(rng.IntN(256))
		}
		h.never[string(id[:])] = true
		return string(id[:])
	}
	n := len(h.knownOrder)
	if rng.IntN(2) == 0 {
		return h.knownOrder[n-1-rng.IntN(min(n, 8))]
	}
	return h.knownOrder[rng.IntN(n)]
}

// deadTarget returns the ID of a job to requeue or delete: mostly a dead
// one (see deadSeen), else one of target's.
func (h *leaseHarness) deadTarget(rng *rand.Rand, held []fdbqueue.Lease) string {
	if rng.IntN(8) < 7 {
		h.mu.Lock()
		dead := h.deadSeen
		job := ""
		if len(dead) > 0 {
			job = dead[rng.IntN(len(dead))]
		}
		h.mu.Unlock()
		if job != "" {
			return job
		}
	}
	return h.target(rng, held)
}

// raceKinds are the kinds of the operations raced against a Requeue or
// DeleteDead of the same job (LeaseResult.DeadRaces).
var raceKinds = [4]LeaseKind{LRequeue, LDeleteDead, LCancel, LJob}

// seen notes job, seen with value (an Add's call, see RunLeases).
func (h *leaseHarness) seen(job string, value []byte) {
	call := int64(-1)
	if len(value) == 8 {
		call = int64(binary.BigEndian.Uint64(value))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.know(job)
	if !slices.Contains(h.adds[call], job) {
		h.adds[call] = append(h.adds[call], job)
	}
}

// leaseOp is one call of a JobQueue operation.
type leaseOp struct {
	in     LeaseInput
	client int   // its ClientId in the history
	call   int64 // when it was called
	lease  fdbqueue.Lease
	delay  time.Duration // Add, Nack, Release
	opts   []fdbqueue.OpOption
	// failed: its first call failed, its outcome unknown (then recovered).
	failed bool
	// tries counts the runs of its transaction function (see tries).
	tries atomic.Int32
	// extendRetried: an Extend whose last call ran its transaction
	// function more than once (see settled).
	extendRetried bool
}

// record records an operation returning now, and returns its Return.
func (h *leaseHarness) record(client int, in LeaseInput, call int64, out LeaseOutput) int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ret := h.seq.Add(1)
	in.Call, in.Ret = call, ret
	h.history = append(h.history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	return ret
}

// recordUnknown records op as of unknown outcome (LeaseOutput.Unknown),
// from its call to ret, as ClientId client.
func (h *leaseHarness) recordUnknown(op *leaseOp, client int, ret int64) {
	in := op.in
	in.Call, in.Ret = op.call, ret
	h.history = append(h.history, porcupine.Operation{ClientId: client, Input: in, Call: op.call,
		Output: LeaseOutput{Unknown: true}, Return: ret})
}

// settled records op, whose outcome is known: out.
func (h *leaseHarness) settled(op *leaseOp, out LeaseOutput) {
	if op.in.Kind == LLease {
		// It may have replayed an earlier attempt's leases (see
		// LeaseModel).
		op.in.Retried = op.failed || op.tries.Load() > 1
	}
	h.mu.Lock()
	switch {
	case op.in.Kind == LAdd && out.Job != "" && !out.Duplicate:
		// Not a duplicate's holder: it may be the job of an abandoned Add
		// that nobody has seen (its value unread), which a Cancel would
		// remove unseen (see RunLeases).
		h.know(out.Job)
	case op.in.Kind == LLease:
		for _, l := range out.Leases {
			h.leasedLast = append(h.leasedLast, l.Job)
		}
		if n := len(h.leasedLast); n > 8 {
			h.leasedLast = append(h.leasedLast[:0], h.leasedLast[n-8:]...)
		}
	case op.in.Kind == LCancel:
		if !out.NotFound {
			h.cancels[op.in.Job]++
		}
		if op.failed {
			h.cancelsRecovered++
		}
	case op.in.Kind == LAck && !out.Lost:
		h.acks[op.in.Job]++
	case op.in.Kind == LNack && out.Dead:
		h.deadSeen = append(h.deadSeen, op.in.Job)
	case op.in.Kind == LRequeue || op.in.Kind == LDeleteDead:
		if !out.NotFound && !out.KeyHeld {
			if op.in.Kind == LRequeue {
				h.requeues[op.in.Job]++
			} else {
				h.deletes[op.in.Job]++
			}
			// No longer dead: target the dead ones left.
			h.deadSeen = slices.DeleteFunc(h.deadSeen, func(j string) bool { return j == op.in.Job })
		}
		if op.failed {
			h.deadOpsRecovered++
		}
	case op.in.Kind == LRelease && out.Lost:
		h.releasesLost++
	case op.in.Kind == LRelease:
		h.releases++
		h.released[op.in.Job] = true
		if op.lease.Attempt >= op.lease.MaxAttempts {
			h.releasesLast++
		}
	}
	h.mu.Unlock()
	ret := h.record(op.client, op.in, op.call, out)
	if op.in.Kind == LExtend && out.Lost && op.extendRetried {
		// Its transaction ran again (after commit_unknown_result, say):
		// an earlier attempt may have committed, extending the lease,
		// before a Cancel removed the job and the last found the lease
		// lost. Extend has no journal to tell, so that attempt is an
		// Extend of unknown outcome within the call (see recover).
		h.mu.Lock()
		h.recordUnknown(op, op.client+firstCallClient, ret)
		h.mu.Unlock()
	}
}

// do runs op on t and returns its output and the leases it returned (a
// Lease's, or an Extend's new lease). An error other than ErrEmpty and
// ErrLeaseLost (which are outputs) leaves its outcome unknown.
func (h *leaseHarness) do(ctx context.Context, t kv.Database, op *leaseOp) (LeaseOutput, []fdbqueue.Lease, error) {
	var out LeaseOutput
	var got []fdbqueue.Lease
	var err error
	in := op.in
	if h.cfg.plant != nil {
		t = h.cfg.plant(in.Kind, t)
	}
	var id fdbqueue.JobID // Cancel, Requeue, DeleteDead
	copy(id[:], in.Job)
	switch in.Kind {
	case LAdd:
		var r fdbqueue.AddResult
		r, err = h.q.Add(ctx, t, fdbqueue.Job{Value: binary.BigEndian.AppendUint64(nil, uint64(op.call)), Delay: op.delay, Priority: in.Prio,
			UniqueKey: in.Unique, MaxAttempts: in.Max}, op.opts...)
		out.Job, out.Duplicate = string(r.ID[:]), r.Duplicate
	case LLease:
		got, err = h.q.Lease(ctx, tries{Database: t, n: &op.tries}, in.N, time.Duration(in.D)*time.Microsecond, op.opts...)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			out.Empty, err = true, nil
		}
		for _, l := range got {
			out.Leases = append(out.Leases, LeasedJob{Job: string(l.JobID[:]), Tag: tag(l), Attempt: l.Attempt})
			h.seen(string(l.JobID[:]), l.Value)
		}
	case LAck:
		err = h.q.Ack(ctx, t, op.lease, op.opts...)
	case LNack:
		out.Dead, err = h.q.Nack(ctx, t, op.lease, fdbqueue.NackOptions{Delay: op.delay}, op.opts...)
	case LRelease:
		err = h.q.Release(ctx, t, op.lease, op.delay, op.opts...)
	case LExtend:
		var nl fdbqueue.Lease
		var runs atomic.Int32
		if nl, err = h.q.Extend(ctx, tries{Database: t, n: &runs}, op.lease, time.Duration(in.D)*time.Microsecond); err == nil {
			got = []fdbqueue.Lease{nl}
		}
		op.extendRetried = runs.Load() > 1
	case LCancel:
		err = h.q.Cancel(ctx, t, id, op.opts...)
	case LRequeue:
		err = h.q.Requeue(ctx, t, id, op.opts...)
		if errors.Is(err, fdbqueue.ErrUniqueKeyHeld) {
			out.KeyHeld, err = true, nil
		}
	case LDeleteDead:
		err = h.q.DeleteDead(ctx, t, id, op.opts...)
	}
	if (in.Kind == LCancel || in.Kind == LRequeue || in.Kind == LDeleteDead) && errors.Is(err, fdbqueue.ErrJobNotFound) {
		out.NotFound, err = true, nil
	}
	if errors.Is(err, fdbqueue.ErrLeaseLost) {
		out.Lost, err = true, nil
	}
	if err != nil {
		return LeaseOutput{}, nil, err
	}
	return out, got, nil
}

// firstCallClient is added to the ClientId of an Extend's first call,
// recorded apart from its recovery (see recover), or of an earlier
// attempt of an Extend's call (see settled).
const firstCallClient = 200

// recover calls op, whose first call failed, its outcome unknown, again
// on the database as it is, for settled to record with the result. The
// other kinds run WithOpID, so the journal makes the two calls one
// operation with the recovery's result (see RunLeases). Extend has none:
// its recovery is a call of its own, which finds the lease lost if a
// Cancel removed the job after the first call extended it. So the
// recovery gets a call (op.call) of its own, and the first call is left
// in firstCalls for recordFirstCalls, as of unknown outcome: recorded as
// one Extend with the recovery's result, the first call's extension,
// seen by a Job lookup before the Cancel, cannot be explained.
func (h *leaseHarness) recover(ctx context.Context, op *leaseOp) (LeaseOutput, []fdbqueue.Lease, error) {
	if op.in.Kind == LExtend {
		h.mu.Lock()
		h.firstCalls = append(h.firstCalls, &leaseOp{in: op.in, client: op.client + firstCallClient, call: op.call})
		h.mu.Unlock()
		op.call = h.seq.Add(1)
	}
	return h.do(ctx, h.t, op)
}

// recordFirstCalls records the first calls recover left, as of unknown
// outcome (see LeaseOutput.Unknown) returning at ret: a time by which
// every commit interrupted in flight has landed, or conflicted.
func (h *leaseHarness) recordFirstCalls(ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, op := range h.firstCalls {
		h.recordUnknown(op, op.client, ret)
	}
	h.firstCalls = nil
}

// expectedLeaseErr reports whether err is one a cancelled operation may
// return: its context ended, or its commit's outcome is unknown.
func expectedLeaseErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || kv.MaybeCommitted(err)
}

// client runs client c's operations in a round. Its ClientId in the
// history is c*1000, bumped when an operation is left to recover at the
// round's end (it overlaps the client's next operations).
func (h *leaseHarness) client(ctx context.Context, c int, rng *rand.Rand, now int64, held *[]fdbqueue.Lease) error {
	cfg, d := h.cfg, h.d
	cid := c * 1000
	for range cfg.OpsPerClient {
		op := &leaseOp{in: LeaseInput{Now: now}, client: cid, call: h.seq.Add(1)}
		in := &op.in
		x := rng.IntN(11)
		if len(*held) == 0 && x >= 5 {
			x = rng.IntN(5)
		}
		// y picks a Cancel, a Job lookup, a Requeue, a DeleteDead, or
		// (x) one of the others.
		y := rng.Float64()
		jobAt := cfg.CancelProb + cfg.JobProb
		requeueAt := jobAt + cfg.RequeueProb
		if y >= cfg.CancelProb && y < jobAt {
			in.Kind, in.Job = LJob, h.target(rng, *held)
			if err := h.lookup(ctx, op); err != nil {
				return err
			}
			continue
		}
		i := -1 // the held lease it uses
		switch {
		case y < cfg.CancelProb:
			// The lease of a job it cancels stays held: its Ack, Nack,
			// Extend and Release must find it lost.
			in.Kind, in.Job = LCancel, h.target(rng, *held)
		case y >= jobAt && y < requeueAt:
			in.Kind, in.Job = LRequeue, h.deadTarget(rng, *held)
		case y >= requeueAt && y < requeueAt+cfg.DeleteDeadProb:
			in.Kind, in.Job = LDeleteDead, h.deadTarget(rng, *held)
		case x < 2: // add
			in.Kind, in.Prio, in.Max = LAdd, int32(rng.IntN(3)), cfg.MaxAttempts
			if rng.Float64() < cfg.OneAttemptProb {
				in.Max = 1
			}
			delay := []int64{0, 0, d / 2, 2 * d}[rng.IntN(4)]
			in.Vest = now + delay
			op.delay = time.Duration(delay) * time.Microsecond
			if cfg.UniqueKeys > 0 && rng.Float64() < cfg.UniqueProb {
				in.Unique = "u" + strconv.Itoa(rng.IntN(cfg.UniqueKeys))
			}
		case x < 5: // lease
			in.Kind, in.N, in.D = LLease, 1+rng.IntN(2), d
		default: // ack, nack, extend or release a held lease
			i = rng.IntN(len(*held))
			op.lease = (*held)[i]
			in.Job, in.Tag = string(op.lease.JobID[:]), tag(op.lease)
			switch x {
			case 5, 6, 7:
				in.Kind = LAck
			case 8:
				in.Kind = LNack
				delay := []int64{-1, d / 2}[rng.IntN(2)]
				in.Vest = now + max(delay, 0)
				op.delay = time.Duration(delay) * time.Microsecond
			case 9:
				in.Kind, in.D = LExtend, d
			default:
				// Due again at once (0, or a negative delay, as Nack's) or
				// after a short delay: leased again within the round, or
				// after the clock moves.
				in.Kind = LRelease
				delay := []int64{0, 0, -1, d / 4}[rng.IntN(4)]
				in.Vest = now + max(delay, 0)
				op.delay = time.Duration(delay) * time.Microsecond
			}
		}
		// Interrupted as its commit starts, under a deadline, or neither.
		opCtx, cancel := context.WithCancel(ctx)
		t := h.t
		switch y := rng.Float64(); {
		case y < cfg.InterruptProb:
			t = &interrupting{Database: h.t, cancel: cancel}
			op.opts = []fdbqueue.OpOption{fdbqueue.WithOpID(fdbqueue.NewOpID())}
		case y < cfg.InterruptProb+cfg.DeadlineProb:
			cancel()
			opCtx, cancel = context.WithTimeout(ctx, time.Duration(rng.Int64N(int64(cfg.MaxDeadline)+1)))
			op.opts = []fdbqueue.OpOption{fdbqueue.WithOpID(fdbqueue.NewOpID())}
		}
		var race chan error
		racing, kind, r := false, LCancel, -1 // what races it, if anything
		switch {
		case i >= 0:
			racing = rng.Float64() < cfg.RaceProb
		case in.Kind == LRequeue || in.Kind == LDeleteDead:
			if racing = rng.Float64() < cfg.DeadRaceProb; racing {
				r = rng.IntN(len(raceKinds))
				kind = raceKinds[r]
			}
		}
		if racing {
			race = make(chan error, 1)
			go func() { race <- h.race(ctx, cid+500, now, kind, r, in.Job) }()
		}
		out, got, err := h.do(opCtx, t, op)
		cancel()
		if race != nil {
			if err := <-race; err != nil {
				return err
			}
		}
		if err != nil {
			if !expectedLeaseErr(err) || op.opts == nil {
				return fmt.Errorf("%v: %w", in.Kind, err)
			}
			op.failed = true
			h.mu.Lock()
			h.unknown++
			h.mu.Unlock()
			if rng.Float64() < cfg.AbandonProb {
				// Never recovered: its client crashed, and its next
				// operations are another client's.
				h.mu.Lock()
				h.abandoned = append(h.abandoned, op)
				h.mu.Unlock()
				if i >= 0 {
					*held = append((*held)[:i], (*held)[i+1:]...)
				}
				cid++
				continue
			}
			if rng.Float64() < cfg.RecoverAtOnceProb {
				// Its first commit may still be in flight.
				if out, got, err = h.recover(ctx, op); err != nil {
					return fmt.Errorf("recovering %v at once: %w", in.Kind, err)
				}
				h.mu.Lock()
				h.atOnce++
				h.mu.Unlock()
			}
		}
		if err != nil {
			// Left to recover at the round's end: the client forgets the
			// lease it used, and its next operations overlap this one.
			h.mu.Lock()
			h.pending = append(h.pending, op)
			h.mu.Unlock()
			if i >= 0 {
				*held = append((*held)[:i], (*held)[i+1:]...)
			}
			cid++
			continue
		}
		switch {
		case in.Kind == LLease:
			*held = append(*held, got...)
		case i < 0:
		case in.Kind == LExtend && !out.Lost:
			(*held)[i] = got[0]
		default:
			*held = append((*held)[:i], (*held)[i+1:]...)
		}
		h.settled(op, out)
	}
	return nil
}

// race runs an operation of kind on job as client (in the history) at
// once, on the database as it is, and records it: a Cancel raced against
// the job's holder (r -1), or raceKinds[r] raced against a Requeue or
// DeleteDead.
func (h *leaseHarness) race(ctx context.Context, client int, now int64, kind LeaseKind, r int, job string) error {
	if r < 0 {
		h.races.Add(1)
	} else {
		h.deadRaces[r].Add(1)
	}
	op := &leaseOp{in: LeaseInput{Kind: kind, Now: now, Job: job}, client: client, call: h.seq.Add(1)}
	if kind == LJob {
		return h.lookup(ctx, op)
	}
	out, _, err := h.do(ctx, h.t, op)
	if err != nil {
		return fmt.Errorf("racing %v: %w", kind, err)
	}
	h.settled(op, out)
	return nil
}

// lookup runs op, a Job lookup, on the database and records it. Job only
// reads: it is neither interrupted nor recovered, and an error other than
// ErrJobNotFound fails the run.
func (h *leaseHarness) lookup(ctx context.Context, op *leaseOp) error {
	var id fdbqueue.JobID
	copy(id[:], op.in.Job)
	info, err := h.q.Job(ctx, h.t, id)
	var out LeaseOutput
	switch {
	case errors.Is(err, fdbqueue.ErrJobNotFound):
		out.NotFound = true
	case err != nil:
		return fmt.Errorf("Job: %w", err)
	default:
		r := JobRecord{Job: string(info.ID[:]), Prio: info.Priority, Attempts: info.Attempts, Max: info.MaxAttempts,
			Unique: info.UniqueKey, Dead: info.State == fdbqueue.JobDead, Tag: binary.BigEndian.Uint64(info.LeaseID[:8])}
		if !r.Dead {
			r.Vest = info.DueAt.UnixMicro()
		}
		out.Record = r
		h.seen(r.Job, info.Value)
	}
	h.mu.Lock()
	h.jobLookups++
	switch {
	case out.NotFound:
		h.jobNotFound++
	case out.Record.Job != op.in.Job, info.State == fdbqueue.JobLeased && info.LeaseID == [16]byte{},
		info.State != fdbqueue.JobLeased && info.LeaseID != [16]byte{}, info.State == fdbqueue.JobDead && !info.DueAt.IsZero():
		h.jobInvalid++
	case info.State == fdbqueue.JobQueued:
		h.jobQueued++
	case info.State == fdbqueue.JobLeased:
		h.jobLeased++
	case info.State == fdbqueue.JobDead:
		h.jobDead++
	default:
		h.jobInvalid++
	}
	h.mu.Unlock()
	h.record(op.client, op.in, op.call, out)
	return nil
}

// interrupting is the database as seen by an operation whose context is
// cancelled the moment its transaction's function has run, as the commit
// starts: the commit is interrupted in flight (applied or not, at random,
// or, with Faults.LateLanding, landing later), and the operation fails.
type interrupting struct {
	kv.Database
	cancel context.CancelFunc
}

func (a *interrupting) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return a.Database.Transact(ctx, func(tr kv.Transaction) error {
		err := fn(tr)
		if err == nil {
			a.cancel()
		}
		return err
	})
}

// tries is the database as seen by one operation: it counts the runs of
// the operation's transaction function in n (a retry runs it again).
type tries struct {
	kv.Database
	n *atomic.Int32
}

func (c tries) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return c.Database.Transact(ctx, func(tr kv.Transaction) error {
		c.n.Add(1)
		return fn(tr)
	})
}

// snapshotJournal is the database of LeaseConfig.SnapshotJournalReads:
// a point read under the journal's prefix is a snapshot read.
type snapshotJournal struct {
	kv.Database
	prefix []byte
}

func (s snapshotJournal) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return s.Database.Transact(ctx, func(tr kv.Transaction) error {
		return fn(snapshotJournalTx{Transaction: tr, prefix: s.prefix})
	})
}

type snapshotJournalTx struct {
	kv.Transaction
	prefix []byte
}

func (t snapshotJournalTx) Get(key []byte) kv.FutureValue {
	if bytes.HasPrefix(key, t.prefix) {
		return t.Snapshot().Get(key)
	}
	return t.Transaction.Get(key)
}

func tag(l fdbqueue.Lease) uint64 { return binary.BigEndian.Uint64(l.ID[:8]) }

// drainJobs leases everything due and acks it, until the queue is empty:
// before each Lease it calls advance, which moves the clock past every
// lease and retry delay. It counts each successful Ack in acks, by job ID.
// An Ack that fails with ErrLeaseLost counts nothing: nobody else holds a
// lease now, so an Ack that says so and removed the job anyway (as one
// retried without the journal does) loses it from the caller's accounts.
func drainJobs(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, advance func(), acks map[string]int) error {
	for i := 0; ; i++ {
		if i > 1000 {
			return errors.New("sim: the job queue did not drain")
		}
		advance()
		ls, err := q.Lease(ctx, db, 10, 0)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			st, err := q.Stats(ctx, db)
			if err != nil {
				return err
			}
			if st.Queued+st.Leased+st.ExpiredLeases == 0 {
				return nil
			}
			continue
		}
		if err != nil {
			return err
		}
		for _, l := range ls {
			switch err := q.Ack(ctx, db, l); {
			case errors.Is(err, fdbqueue.ErrLeaseLost):
			case err != nil:
				return err
			default:
				acks[string(l.JobID[:])]++
			}
		}
	}
}

// deadAfterDrain returns the job records left after drainJobs, which must
// all be dead, as a set of job IDs, and adds to *deadAttempts the number
// of them whose attempts are not their MaxAttempts.
func deadAfterDrain(final []JobRecord, deadAttempts *int) (map[string]bool, error) {
	dead := map[string]bool{}
	for _, j := range final {
		if !j.Dead {
			return nil, fmt.Errorf("sim: job %x still queued after the drain", j.Job)
		}
		dead[j.Job] = true
		if j.Attempts != j.Max {
			*deadAttempts++
		}
	}
	return dead, nil
}

// observeJobs reads every job record, queued, leased or dead, and the
// unique-key index (sorted by key) straight from the database (the layout
// in docs/design.md), and, if seen is not nil, calls it with every job's
// ID and value.
func observeJobs(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, seen func(job string, value []byte)) ([]JobRecord, []KeyHold, error) {
	var out []JobRecord
	var held []KeyHold
	err := eachUnder(ctx, db, sub, "u", func(_, key, job []byte) error {
		held = append(held, KeyHold{Key: string(key), Job: string(job)})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if seen != nil {
		err := eachUnder(ctx, db, sub, "v", func(_, id, value []byte) error {
			seen(string(id), value)
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	err = eachRecord(ctx, db, sub, func(_ []byte, rec JobRecord) error {
		out = append(out, rec)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out, held, nil
}

// eachRecord reads every job record, queued or leased ("q"), then dead
// ("d"), and calls fn with its key and the record (layout in
// docs/design.md); it stops at fn's first error and returns it.
func eachRecord(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, fn func(key []byte, rec JobRecord) error) error {
	for _, tag := range []string{"q", "d"} {
		err := eachUnder(ctx, db, sub, tag, func(k, id, value []byte) error {
			v, err := tuple.Unpack(value)
			if err != nil || len(v) != 9 {
				return fmt.Errorf("sim: bad job record at %x", k)
			}
			rec := JobRecord{Job: string(id), Dead: tag == "d"}
			vest, _ := v[0].(int64)
			prio, _ := v[1].(int64)
			att, _ := v[3].(int64)
			mx, _ := v[4].(int64)
			rec.Vest, rec.Prio, rec.Attempts, rec.Max = vest, int32(prio), int(att), int(mx)
			if u, ok := v[5].([]byte); ok {
				rec.Unique = string(u)
			}
			if lid, ok := v[2].([]byte); ok && len(lid) == 16 {
				rec.Tag = binary.BigEndian.Uint64(lid[:8])
			}
			return fn(k, rec)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// checkAccounts reads the job queue's records, its ID index ("x"), its
// values ("v"), its vesting-time bucket counters ("c", "p" | "e") and its
// Stats, at a quiescent point (no operation under way, every late commit
// landed), and adds to res.Leftovers each index entry or value that
// belongs to no record (a removed job's left behind), each record
// missing either or pointed at by no index entry, and each ID with two
// records; and to res.CountErrors 1 if Stats' exact counts (queued,
// leased, dead) or any bucket counter disagree with the records. The
// queue's StatsResolution must be leaseStatsResolution.
func checkAccounts(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, sub fdbqueue.Subspace, res *accounts) error {
	keys := map[string][]byte{} // record key by job ID
	var queued, leased, dead int64
	buckets := map[string]map[int64]int64{"p": {}, "e": {}} // the counts the records imply
	res0 := int64(leaseStatsResolution / time.Microsecond)
	err := eachRecord(ctx, db, sub, func(k []byte, r JobRecord) error {
		if _, ok := keys[r.Job]; ok {
			res.Leftovers++
		}
		keys[r.Job] = bytes.Clone(k)
		series := "p"
		switch {
		case r.Dead:
			dead++
			return nil
		case r.Tag != 0:
			leased++
			series = "e"
		default:
			queued++
		}
		b := r.Vest / res0
		if r.Vest < 0 && r.Vest%res0 != 0 {
			b--
		}
		buckets[series][b]++
		return nil
	})
	if err != nil {
		return err
	}
	indexed := map[string]bool{}
	err = eachUnder(ctx, db, sub, "x", func(_, id, key []byte) error {
		indexed[string(id)] = true
		if k, ok := keys[string(id)]; !ok || !bytes.Equal(k, key) {
			res.Leftovers++
		}
		return nil
	})
	if err != nil {
		return err
	}
	valued := map[string]bool{}
	err = eachUnder(ctx, db, sub, "v", func(_, id, _ []byte) error {
		valued[string(id)] = true
		if _, ok := keys[string(id)]; !ok {
			res.Leftovers++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for job := range keys {
		if !indexed[job] {
			res.Leftovers++
		}
		if !valued[job] {
			res.Leftovers++
		}
	}
	bad := false
	for series, want := range buckets {
		got := map[int64]int64{}
		r, err := sub.Range("c", series)
		if err != nil {
			return err
		}
		kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
		})
		if err != nil {
			return err
		}
		for _, p := range kvs {
			t, err := sub.Unpack(p.Key)
			if err != nil {
				return err
			}
			b, ok := t[len(t)-1].(int64)
			if !ok || len(p.Value) != 8 {
				bad = true
				continue
			}
			got[b] = int64(binary.LittleEndian.Uint64(p.Value))
		}
		// A counter that reaches zero is cleared: none is left at 0.
		bad = bad || !maps.Equal(got, want)
	}
	st, err := q.Stats(ctx, db)
	if err != nil {
		return err
	}
	if bad || st.Queued != queued || st.Leased+st.ExpiredLeases != leased || st.Dead != dead {
		res.CountErrors++
	}
	return nil
}

// accounts is what checkAccounts found: LeaseResult's and PoolResult's
// Leftovers and CountErrors.
type accounts struct{ Leftovers, CountErrors int }

// checkAccountsInto runs checkAccounts and adds what it found to
// leftovers and countErrors.
func checkAccountsInto(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, sub fdbqueue.Subspace, leftovers, countErrors *int) error {
	var a accounts
	if err := checkAccounts(ctx, db, q, sub, &a); err != nil {
		return err
	}
	*leftovers += a.Leftovers
	*countErrors += a.CountErrors
	return nil
}

// eachUnder reads, in one transaction, every pair under sub's tag and
// calls fn, in key order, with its key, the key's last tuple element (nil
// if that is not a byte string) and its value; it stops at fn's first
// error and returns it.
func eachUnder(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, tag string, fn func(key, last, value []byte) error) error {
	r, err := sub.Range(tag)
	if err != nil {
		return err
	}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	if err != nil {
		return err
	}
	for _, p := range kvs {
		k, err := sub.Unpack(p.Key)
		if err != nil {
			return err
		}
		last, _ := k[len(k)-1].([]byte)
		if err := fn(p.Key, last, p.Value); err != nil {
			return err
		}
	}
	return nil
}
