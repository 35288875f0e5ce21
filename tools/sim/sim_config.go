package sim

import (
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Config is the shape of a run. Start from DefaultConfig.
type Config struct {
	// Rounds is the number of rounds per seed; each round's history is
	// checked on its own.
	Rounds int
	// Clients is the number of concurrent clients per structure per round.
	Clients int
	// OpsPerClient is how many operations each client runs per round.
	OpsPerClient int

	// Queue and PriorityQueue choose the structures under test.
	Queue, PriorityQueue bool
	// Batches lets Queue clients use DequeueBatch (and, in versionstamp
	// order, EnqueueBatch) and PriorityQueue clients PushBatch, and turns on the batch checks made before the
	// rounds: a batch across the versionstamp user versions' wrap
	// (versionstamp seeds), and the largest batch the largest budget
	// accepts (one seed in four: seed % 4 == 1).
	Batches bool

	// Faults and Latency configure the database.
	Faults  memdb.Faults
	Latency memdb.Latency
	// MVCCWindow, if positive, is the seed's memdb's MVCC window
	// (memdb.WithMVCCWindow; FoundationDB's 5 seconds otherwise). A seed
	// runs for about two seconds, so with the default only a seed slowed
	// down by a loaded machine (or a long check between its rounds)
	// outlives the window and has old versions and conflict history
	// collected; a window of a few hundred milliseconds does that within
	// every seed. One of a few milliseconds also fails the reads and
	// commits of transactions that last longer with transaction_too_old:
	// most attempts then fail (seeds run for minutes), and the batch
	// budget check's largest batch (Batches, seed % 4 == 1) never
	// commits, which fails that seed's setup.
	MVCCWindow time.Duration

	// DB, if set, is the database every seed runs on, instead of a memdb
	// of its own (cmd/soak -cluster-file passes FoundationDB through
	// fdbkv). Faults and Latency are then not injected (deadlines and
	// abandoned commits still are), Result.Stats stays zero, and each
	// seed's structures live under the tuple (Prefix..., seed), so that
	// seeds can share DB; the caller clears Prefix's range afterwards.
	DB     kv.Database
	Prefix tuple.Tuple

	// CancelProb is the probability that an operation runs with a random
	// deadline of up to MaxDeadline (it may expire at any point: before,
	// during or after the commit).
	CancelProb  float64
	MaxDeadline time.Duration
	// AbandonProb is the probability, per client and round, that the
	// client cancels one of its operations as its commit starts and never
	// runs another.
	AbandonProb float64
	// TxTimeoutProb is the probability that an operation runs on a
	// database with a default transaction timeout, as FoundationDB's
	// database option transaction_timeout gives one (see timeoutDB): each
	// of the operation's transactions times out, with
	// transaction_timed_out (1031), once a duration drawn for the
	// operation, between TxTimeout/2 and TxTimeout, has passed since its
	// creation or last Reset, its retries included. With TxTimeout about
	// a commit's latency, commits time out in flight; such a commit is not
	// fenced and may land later (Faults.LateLanding). The harness's own
	// transactions (recovery, observation, drain) and those of an
	// abandoning client have no timeout. Result.TimedOutInFlight counts
	// the commits that timed out in flight.
	TxTimeoutProb float64
	TxTimeout     time.Duration
	// RecoverProb is the probability that an operation of unknown outcome
	// is recovered at the end of the round with its OpID. Batch dequeues
	// are always recovered.
	RecoverProb float64
	// RecoverAtOnceProb is the probability that an operation to be
	// recovered whose commit may still be in flight (kv.MaybeCommitted;
	// with Faults.LateLanding it may land later) is recovered by its
	// client at once, before that commit has landed, instead of after the
	// round's late landings (a staged take excepted). The recovery must
	// then conflict with the late commit instead of applying the
	// operation a second time (docs/design.md, "if the earlier attempt's
	// commit is still in flight and lands later, the two attempts
	// conflict"): a recovery at the end of the round never meets a commit
	// in flight, so without this the journal's read conflict on its
	// record is never needed.
	RecoverAtOnceProb float64
	// MaxOpen is how many operations of unknown outcome that were not
	// recovered a history keeps fully open (the checker's work grows
	// quickly with them); the others are settled from the journal, except
	// those run without an OpID of the harness's (LayerIDProb), which stay
	// open whatever their number.
	MaxOpen int
	// LayerIDProb is the probability that an operation that will not be
	// recovered and runs on the database itself (not given up mid-commit)
	// is called without WithOpID: the layer then makes its ID, and on a
	// Database records it in a journal slot of the Queue value (see
	// "Exactly once under commit_unknown_result" in docs/design.md), except
	// a staged take, which records under its ID. Nothing can recover such
	// an operation or read its record: one of unknown outcome stays open,
	// and a failed staged take is a Hide and an Unhide (see Hide), unless
	// it failed maybe committed, when it stays open too.
	LayerIDProb float64
	// ShortRetention, if positive, is the journal retention of about half
	// of the seeds (WithJournalRetention): a journal starts a new slot
	// epoch once its epoch is an eighth of the retention old, so that with
	// a retention of seconds the slots' epochs turn over within a round,
	// while operations hold slots of the old one, and the journal's expiry
	// clears old epochs' keys. Those seeds' structures run on a clock
	// (WithClock) that stands still while the harness checks histories,
	// so the retention must only exceed a round's operations, recovery and
	// observation (an operation is recovered with its OpID at the end of
	// its round, within the retention).
	ShortRetention time.Duration

	// Staging makes about half of the seeds run their structures
	// WithStaging, with the Wait forms (DequeueWait, PopMinWait,
	// PopMaxWait) among the operations, each with a deadline of up to
	// MaxWait.
	Staging bool
	MaxWait time.Duration
	// StagePriorityQueue includes the PriorityQueue in staged seeds
	// (otherwise only their Queue runs WithStaging).
	StagePriorityQueue bool
	// StagingReorder lets staged seeds use the layouts in which a staged
	// take that is cancelled after being handed an item, and writes it back
	// at its original key, can reorder it: the Queue's (index, random)
	// keys, and equal priorities in a PriorityQueue (see newHarness). The
	// model then reports the reordering as a violation.
	StagingReorder bool
	// StagingServing is the serving mode of staged seeds' Queue
	// (StagingConfig.Serving). With the default, ServeAuto, it serves by
	// place, since staged seeds' Queue is made WithVersionstampOrder
	// (unless StagingReorder gives it the recipe's keys, where it serves
	// in batches). A failed take of a Queue served by place is recorded as
	// a Hide and an Unhide at the tail (FIFOPlaceModel).
	StagingServing fdbqueue.StagingServing
	// ClaimTimeout is staged seeds' StagingConfig.ClaimTimeout (default 2s).
	// A short one (tens of milliseconds) makes waiters that are slow for
	// a moment (latency, faults, scheduling) lose their requests and
	// results to expiry, which exercises the expiry paths: such a call
	// fails with ErrClaimExpired and is recorded as a failed take.
	ClaimTimeout time.Duration
	// CleanupTimeout is staged seeds' StagingConfig.CleanupTimeout
	// (default one minute, not the layer's 5 s). The model records a failed
	// staged take as a Hide and an Unhide within its call, which holds
	// only when the call's withdrawal commits before it returns. When the
	// withdrawal runs out of time (it retries against every enqueue that
	// conflicts with it, which on a loaded machine under -race can take
	// seconds), the layer returns the item only when its claim expires,
	// after the call: a history the model cannot represent. Such a take is
	// reported as an unexpected error whose failure reason says so
	// ("staged withdrawal failed"), which explains any violation the
	// check then finds in its history.
	CleanupTimeout time.Duration

	// WithoutIdempotency runs the layers as the plain recipes
	// (fdbqueue.WithoutIdempotency): no journal, so nothing is recovered.
	// Under commit_unknown_result the checkers must then find violations.
	WithoutIdempotency bool

	// TrustErrors records an operation that failed with an error for which
	// kv.MaybeCommitted is false as not having taken effect, as the
	// package documentation says, instead of as unknown. A staged take that
	// failed so is recorded as a Hide and an Unhide (the one effect a
	// failed staged take may have: by place, the item at its place moves
	// to the tail), and is a violation if its journal record says it took
	// an item.
	TrustErrors bool

	// TwinProb is the probability that an item of an Enqueue,
	// EnqueueBatch, Push or PushBatch is a twin: it carries the exact
	// value (ID and filler, values.go) of an earlier item of the same
	// structure, as callers enqueue equal values (a "refresh the cache"
	// message, say). That earlier item is often the client's last one, or
	// one of the same batch, so that equal items sit side by side, and in
	// a PriorityQueue often the round's hot item, which every client
	// pushes at once at its priority, at an end where pops take it. In a
	// PriorityQueue a twin has its earlier item's priority too when that
	// does not make items of one priority interleave in ways the model
	// rejects (harmless ones excepted: equal items are indistinguishable):
	// a Push's twin of an item a Push pushed; a PushBatch's twin of an
	// item of the same batch, or, in staged seeds without StagingReorder
	// (whose pushes have priorities of their own), of an item a Push
	// pushed. Journal records hold values (and priorities), not keys, so
	// twins write equal records. The checks count items by ID as a
	// multiset: each value enqueued k times must come out k times. Twins
	// are drawn from a source of their own, so that a seed's operations
	// are the same with or without them; 0 makes every value unique.
	TwinProb float64

	// CheckTimeout bounds each linearizability check; a check that times
	// out is counted as inconclusive.
	CheckTimeout time.Duration

	// Log, if set, receives one line per checked history.
	Log func(format string, args ...any)
}

// DefaultConfig has every kind of fault turned up, and histories of about
// 150 operations per structure and round.
func DefaultConfig() Config {
	return Config{
		Rounds:        6,
		Clients:       5,
		OpsPerClient:  30,
		Queue:         true,
		PriorityQueue: true,
		Batches:       true,
		Faults: memdb.Faults{
			NotCommitted:      0.05,
			UnknownApplied:    0.04,
			UnknownNotApplied: 0.04,
			TooOld:            0.02,
			ExtraLatency:      2 * time.Millisecond,
			ExtraLatencyProb:  0.05,
			LateLanding:       0.5,
			ReadErrors:        0.02,
			ReadVersionErrors: 0.01,
		},
		Latency: memdb.Latency{
			GRV:    memdb.Span{Max: 200 * time.Microsecond},
			Read:   memdb.Span{Max: 200 * time.Microsecond},
			Commit: memdb.Span{Min: 100 * time.Microsecond, Max: time.Millisecond},
		},
		CancelProb:         0.08,
		MaxDeadline:        3 * time.Millisecond,
		AbandonProb:        0.15,
		Staging:            true,
		StagePriorityQueue: true,
		MaxWait:            5 * time.Millisecond,
		RecoverProb:        0.5,
		RecoverAtOnceProb:  0.5,
		MaxOpen:            2,
		LayerIDProb:        0.5,
		ShortRetention:     8 * time.Second,
		CheckTimeout:       30 * time.Second,
	}
}

func (c Config) claimTimeout() time.Duration {
	if c.ClaimTimeout > 0 {
		return c.ClaimTimeout
	}
	return 2 * time.Second
}

func (c Config) cleanupTimeout() time.Duration {
	if c.CleanupTimeout > 0 {
		return c.CleanupTimeout
	}
	return time.Minute
}
