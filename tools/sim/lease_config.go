package sim

import (
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
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
	// apart: see leaseHarness.recover), except for LayerIDProb's. The
	// others run without WithOpID, under an ID the layer makes.
	InterruptProb, DeadlineProb float64
	MaxDeadline                 time.Duration
	// LayerIDProb is the probability that an operation run under an
	// interruption, a deadline or a transaction timeout (other than an
	// Extend, which has no journal) runs without WithOpID all the same,
	// under an ID the layer makes (in a journal slot). If it fails, its
	// outcome unknown, nothing can recover it by ID: it is abandoned,
	// recorded as of unknown outcome to the end of its round as
	// AbandonProb's are, but its client keeps the lease it used, to use
	// again in calls of their own, which must find it lost if the failed
	// call took effect. Under TrustErrors, an error not maybe committed is
	// taken at its word as for the others. LeaseResult.LayerIDs,
	// LayerIDUnknown, LayerIDTrusted and LayerIDKept count them.
	LayerIDProb float64
	// TxTimeoutProb is the probability that an operation runs on a
	// database with a default transaction timeout (FoundationDB's
	// transaction_timeout; see Config.TxTimeoutProb), drawn for the
	// operation between TxTimeout/2 and TxTimeout, WithOpID as above: with
	// TxTimeout about a commit's latency, commits time out in flight,
	// unfenced, and may land later. LeaseResult.TimedOutInFlight counts
	// them.
	TxTimeoutProb float64
	TxTimeout     time.Duration
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
	// AddBatchProb is the probability that an Add is an AddBatch of 2 to
	// MaxBatch jobs (at most leaseBatchMax), each drawn as an Add's (its
	// priority, delay, attempts and unique key, which may repeat an
	// earlier job's of the batch). Every job carries a payload of its own
	// (see leaseShape), up to kv.MaxValueSize bytes, so that batches of
	// large ones meet the batch budget (see BatchBudgets) and fail with
	// ErrBatchTooLarge, adding nothing.
	AddBatchProb float64
	MaxBatch     int
	// BatchBudgets are the queue's batch budgets (WithBatchBudget; 0: the
	// default): a seed takes BatchBudgets[seed mod len]. On the
	// simulation's prefix a Lease's transaction counts about 10,000 bytes
	// plus 2,000 per job, whatever the payloads (which it only reads), and
	// an AddBatch's about 10,000 plus 1,200 per job plus the payloads: so
	// 11,800 cuts every Lease of 2 jobs to 1 and refuses AddBatches of
	// more than two small jobs or with any large payload (a Lease asks for
	// at most 2: the model's steps of a Lease of unknown outcome or
	// retried grow with the subsets of up to n due jobs, and histories
	// with Leases of 3 or 4 took seconds to check); 150,000 refuses
	// AddBatches of two limit-sized payloads and takes one with small
	// ones. Empty: the default budget for every seed.
	BatchBudgets []int
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
	// TrustErrors takes errors at their word, as the package
	// documentation tells callers to (see Config.TrustErrors): an
	// operation that failed with an error for which kv.MaybeCommitted is
	// false (a context that ended or a transaction that timed out before
	// its commit, a typed error), other than ErrOperationExpired (which
	// the documentation says to treat as maybe committed), took no effect.
	// It is left out of the history, not recovered: an Add added no job
	// (one carrying its value, seen anywhere, fails the run's accounts,
	// and at an Observe the model), a Lease leased nothing, an Ack, Nack,
	// Extend or Release left its lease as it was (the client keeps it and
	// may use it again), a Cancel, Requeue or DeleteDead left its job as it
	// was. ErrEmpty, ErrLeaseLost, ErrJobNotFound and ErrUniqueKeyHeld are
	// outputs, not failures. An operation that failed maybe committed stays
	// of unknown outcome and is recovered as without TrustErrors.
	// LeaseResult.Trusted counts the operations taken at their word.
	TrustErrors bool
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
		InterruptProb: 0.12, DeadlineProb: 0.06, MaxDeadline: time.Millisecond, RecoverAtOnceProb: 0.5, AbandonProb: 0.04, LayerIDProb: 0.15,
		UniqueProb: 0.3, UniqueKeys: 3, OneAttemptProb: 0.4,
		AddBatchProb: 0.1, MaxBatch: 3, BatchBudgets: []int{11_800, 150_000, 0},
		CancelProb: 0.1, JobProb: 0.08, RequeueProb: 0.06, DeleteDeadProb: 0.04,
		RaceProb: 0.1, DeadRaceProb: 0.3, CheckTimeout: 30 * time.Second}
}
