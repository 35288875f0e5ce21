package sim

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

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
// Some operations are cancelled as their commit starts, run under a
// deadline, or run on a database whose transactions time out after about
// a commit's latency (LeaseConfig.InterruptProb, DeadlineProb,
// TxTimeoutProb): a commit interrupted in flight may be applied or not,
// and may land after the call returned, as FoundationDB's may (memdb's
// Faults.LateLanding). Every operation whose call failed is recovered:
// called again with its OpID (Extend with its lease), either at once by
// its client, while its first commit may still land
// (RecoverAtOnceProb), or at the end of the round, after every
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
// So are those that ran under an ID the layer made (LayerIDProb: under the
// same faults, without WithOpID), which nothing can recover by ID; their
// client keeps the lease it used and may use it again.
// Each Add's job carries a payload of its own (its value ID: the Add's
// call, and for an AddBatch's jobs their index in the batch; see
// leaseShape for the payloads' sizes and bytes, up to the limit Add
// accepts), so the job of an abandoned Add is known if it was ever seen: every job that ever
// existed is at a round's Observe or in a known Lease's output (a job
// only a known Ack removes, from a known lease), or was read with its
// value or added by a known Add before a Cancel removed it (Cancels and
// Job lookups target only such jobs and IDs never added, never the
// holder an Add of a held key names, which may be an abandoned Add's
// job nobody saw). A job with no Add's
// value, or two jobs with one Add's, fail the run; so does a payload read
// back (by a Lease, a Job lookup or an Observe) that is not exactly its
// job's (LeaseResult.ValueMismatches). Leases of abandoned
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
	// An abandoned Add may have added the job that carries its value, an
	// abandoned AddBatch those that carry its values.
	for i, op := range history {
		in, out := op.Input.(LeaseInput), op.Output.(LeaseOutput)
		if in.Kind != LAdd && in.Kind != LAddBatch || !out.Unknown {
			continue
		}
		res.AbandonedAdds++
		if in.Kind == LAdd {
			if jobs := h.adds[jobValueID(op.Call, 0)]; len(jobs) > 0 {
				out.Job = jobs[0]
				res.AbandonedAddsSeen++
			}
		} else {
			out.Added = make([]BatchAdded, len(in.Batch))
			seen := false
			for j := range out.Added {
				if jobs := h.adds[jobValueID(op.Call, j)]; len(jobs) > 0 {
					out.Added[j].Job, seen = jobs[0], true
				}
			}
			if seen {
				res.AbandonedAddsSeen++
			}
		}
		history[i].Output = out
	}
	for _, jobs := range h.adds {
		if len(jobs) > 1 {
			res.Duplicated++
		}
	}
	res.Operations = len(history)
	res.Unknown, res.RecoveredAtOnce = h.unknown, h.atOnce
	res.Trusted, res.TrustedTimedOut = h.trusted, h.trustedTimedOut
	res.LayerIDs, res.LayerIDUnknown, res.LayerIDTrusted, res.LayerIDKept = h.layerIDs, h.layerIDUnknown, h.layerIDTrusted, h.layerIDKept
	for _, id := range h.trustedAdds {
		if len(h.adds[id]) > 0 {
			res.TrustedAdded++
		}
	}
	res.TimedOutInFlight = int(h.timedOutInFlight.Load())
	model := LeaseModel(cfg.Choice)
	res.Check = porcupine.CheckOperationsTimeout(model, history, cfg.CheckTimeout)
	if res.Check != porcupine.Ok {
		// Only a seed that failed the check keeps its history: one not
		// linearizable with its longest linearizable prefixes, checked
		// again, verbose; one whose check timed out without them
		// (Failure.linearize).
		f := &Failure{Seed: seed, Round: -1, Structure: "job queue",
			Reason: fmt.Sprintf("check of a history of %d operations over %d rounds timed out after %v", len(history), cfg.Rounds, cfg.CheckTimeout),
			model:  model, history: history}
		if res.Check == porcupine.Illegal {
			f.Reason = fmt.Sprintf("history of %d operations over %d rounds is not linearizable", len(history), cfg.Rounds)
			f.linearize(cfg.CheckTimeout)
		}
		res.Failure = f
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
	// addedJob accounts for one job of an Add or AddBatch: its unique key
	// ("": none), its payload's value ID, whether the call's outcome is
	// unknown, and the job it added (for an abandoned call, the one seen
	// with its payload, if any) or, duplicate, the key's holder.
	addedJob := func(unique string, vid int64, unknown bool, job string, duplicate bool) {
		if unique != "" && !unknown {
			res.UniqueAdds++
		}
		if duplicate {
			res.UniqueDuplicates++
			return // added nothing: the model checked the holder's ID
		}
		if job == "" {
			return // an abandoned Add that added nothing
		}
		for _, other := range h.adds[vid] {
			if other != job {
				// Another job carries this one's payload (this one may
				// never have been seen with it).
				h.mismatch(fmt.Sprintf("job %x carries the payload of value ID %d, which job %x was added with", other, vid, job))
			}
		}
		if unique != "" {
			if keyJobs[unique] == nil {
				keyJobs[unique] = map[string]bool{}
			}
			keyJobs[unique][job] = true
			keyOrder[unique] = append(keyOrder[unique], job)
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
		if in.Kind == LAddBatch {
			for i, j := range in.Batch {
				var a BatchAdded
				if i < len(out.Added) {
					a = out.Added[i]
				}
				addedJob(j.Unique, jobValueID(op.Call, i), out.Unknown, a.Job, a.Duplicate)
			}
		}
		if in.Kind == LAdd {
			addedJob(in.Unique, jobValueID(op.Call, 0), out.Unknown, out.Job, out.Duplicate)
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
	res.Budget, res.Batches, res.BatchTooLarge, res.BudgetErrors, res.LeasesShort = h.budget, h.batches, h.batchTooLarge, h.budgetErrors, h.leasesShort
	res.LimitAdded, res.LimitLeased, res.LimitLeasedTogether = h.limitAdded, h.limitLeased, h.limitLeasedTogether
	res.ValueMismatches, res.ValueMismatch = h.valueMismatches, h.firstMismatch
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
	// adds is the IDs of the jobs seen, by the value ID (jobValueID) of
	// the payload each carries.
	adds    map[int64][]string
	unknown int
	atOnce  int
	// trusted counts the operations taken at their word
	// (LeaseConfig.TrustErrors), and trustedAdds holds the value IDs of
	// the jobs of the Adds and AddBatches among them: no job may carry
	// one's payload.
	// trustedTimedOut, those among them that failed with
	// transaction_timed_out (before their commit).
	trusted, trustedTimedOut int
	trustedAdds              []int64
	// layerIDs counts the operations run under a fault without WithOpID
	// (LeaseConfig.LayerIDProb); layerIDUnknown, those among them that
	// failed, their outcome unknown (abandoned), and layerIDTrusted,
	// those taken at their word (LeaseConfig.TrustErrors); layerIDKept,
	// the abandoned ones whose client kept the lease they used.
	layerIDs, layerIDUnknown, layerIDTrusted, layerIDKept int
	// timedOutInFlight counts the commits that timed out in flight
	// (timeoutDB).
	timedOutInFlight atomic.Int64
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
	// budget is the queue's batch budget (LeaseConfig.BatchBudgets).
	budget int
	// valueOf is the value ID of the payload each job was seen with;
	// valueMismatches counts the payloads that were not their job's
	// (firstMismatch describes the first). The other counts are
	// LeaseResult's of the same names.
	valueOf                                           map[string]int64
	valueMismatches                                   int
	firstMismatch                                     string
	batches, batchTooLarge, budgetErrors, leasesShort int
	limitAdded, limitLeased, limitLeasedTogether      int
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
	budget := fdbqueue.DefaultBatchBudget
	if n := len(cfg.BatchBudgets); n > 0 && cfg.BatchBudgets[uint64(seed)%uint64(n)] > 0 {
		budget = cfg.BatchBudgets[uint64(seed)%uint64(n)]
	}
	opts = append(opts, fdbqueue.WithBatchBudget(budget))
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
		requeues: map[string]int{}, deletes: map[string]int{}, abandonedDeletes: map[string]bool{}, budget: budget, valueOf: map[string]int64{}}, nil
}

// leaseSubspace is the job queue's subspace in RunLeases.
var leaseSubspace = tuple.Tuple{"sim", "jobs"}

// leaseStatsResolution is the queue's StatsResolution, for the check of
// its bucket counters (checkAccounts).
const leaseStatsResolution = time.Second

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
