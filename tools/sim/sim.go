// Package sim is a deterministic simulation of fdbqueue's layers on memdb
// with fault injection, checked for linearizability and for conservation
// of items.
//
// # What a run does
//
// Run(seed, cfg) makes a fresh memdb seeded with seed, with faults
// (not_committed, commit_unknown_result applied and not applied,
// transaction_too_old, extra commit latency) and a latency model, and runs
// cfg.Rounds rounds. In each round, cfg.Clients clients per structure run
// random operations concurrently on a Queue (Enqueue, Dequeue, DequeueBatch)
// and on a PriorityQueue (Push, PushBatch, PopMin, PopMax). Some operations get a
// random deadline or are cancelled; some clients give up in the middle of a
// commit and never come back. Every call and return is recorded, with a
// shared monotonic counter as the clock, as a porcupine history.
//
// At the end of a round the clients have all returned (a quiescent point).
// Faults are turned off; some of the operations whose outcome is unknown
// are recovered by calling them again with the same OpID (which the layers
// promise returns the first call's result if it took effect, and otherwise
// performs it now); then the harness reads the whole structure (an Observe
// operation). The round's history is checked against FIFOModel or
// PriorityModel, starting from what the previous round observed, so that
// each checked history stays short while the state carries over. After the
// last round the structures are drained through the API, and every item is
// accounted for: enqueued once, then returned once or still there, or
// absent only where an unrecovered operation of unknown outcome explains it.
//
// About half of the operations that will not be recovered, when they run
// on the database itself, are called without WithOpID (Config.LayerIDProb):
// the layer makes their ID and records them in a journal slot of the Queue
// or PriorityQueue value (a staged take under its ID), so that the slots'
// reuse meets every fault the others do.
//
// # Unknown outcomes
//
// An operation that fails with an error other than ErrEmpty is recorded as
// of unknown outcome (Config.TrustErrors checks instead that only errors
// for which kv.MaybeCommitted is true leave it open). Up to Config.MaxOpen
// such operations per history are recorded with Output.Unknown and a
// return time at the end of time: the checker may then linearize them
// anywhere after their call, including after the final Observe, where
// they have no visible effect. The checker's work grows quickly with them,
// so the others are settled: by recovery (calling the operation again
// with its OpID), by the observation (an enqueued item that came out or is
// still there was enqueued within its call), or by the operation's journal
// record, whose layout is documented: if the record is there the
// operation took effect within its call, if not it did not. "Within its
// call" holds while memdb decides a commit before Commit returns; with
// Faults.LateLanding (on in DefaultConfig), a
// commit interrupted in flight may land later, as FoundationDB's may, so
// the round first waits for every late landing (memdb's
// AwaitLateLandings) and an operation of unknown outcome takes effect
// between its call and that quiescent point. A record that lied would show up as
// a violation. A staged take that failed without a record may have been
// handed an item and written it back: it is recorded as a Hide and an
// Unhide over its call (see Hide). An operation run under an ID the layer
// made has neither recovery nor a record the harness can read: if its
// outcome is unknown it stays open, beyond MaxOpen if need be, and a staged
// take of it that failed is a Hide and an Unhide.
//
// # Determinism
//
// The seed fixes the database's random choices (faults, latencies, jitter),
// each client's choice of operations, values and deadlines, and the random
// key suffixes. Goroutine scheduling and real time are not controlled, so a
// seed reproduces a run's shape, not its exact interleaving.
package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

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
	// and a failed staged take is a Hide and an Unhide (see Hide).
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

// Result is what a run found. Results of several runs add up with Add.
type Result struct {
	Seeds      int
	Histories  int // histories checked for linearizability
	Operations int // operations in them (Observe included)

	Violations   int // histories that are not linearizable
	Inconclusive int // checks that timed out
	Lost         int // items enqueued for sure, then gone unexplained
	Duplicated   int // extra copies of items (returned or left twice)
	Phantom      int // items that came out but were never enqueued
	DrainDiffers int // final drains that disagreed with the final Observe
	Unexpected   int // errors the harness did not expect (see Failure)
	// DecidedWithoutOpen counts the histories found linearizable by a
	// check without their open operations (withoutOpenOps, reduce.go).
	DecidedWithoutOpen int

	Unknown   int // operations left with an unknown outcome
	Recovered int // operations of unknown outcome recovered by OpID
	// RecoveredAtOnce counts those among them that their client
	// recovered at once, while their commit could still land
	// (Config.RecoverAtOnceProb).
	RecoveredAtOnce int
	Hidden          int // failed staged takes modelled as Hide and Unhide
	// Trusted counts the operations that failed with an error for which
	// kv.MaybeCommitted is false and were recorded as without effect
	// (Config.TrustErrors; staged takes as Hide and Unhide).
	Trusted int
	// ClaimsExpired counts staged takes that failed with ErrClaimExpired
	// (their waiter was too slow for the claim timeout).
	ClaimsExpired int

	// LayerIDs counts the operations run without WithOpID, under an ID
	// the layer made (Config.LayerIDProb), and LayerIDUnknown those of
	// them that failed with an outcome left unknown (kept open, or, staged
	// takes, modelled as Hide and Unhide). LayerIDReplays counts their
	// attempts that found their journal record (an earlier attempt had
	// committed: commit_unknown_result applied), as the layers log them
	// (WithLogger); SlotReplays those among them that read a journal slot
	// (every one but a staged take's).
	LayerIDs       int
	LayerIDUnknown int
	LayerIDReplays int
	SlotReplays    int

	// PushBatches counts the PushBatch calls, PushBatchesFailed those
	// that returned an error (their outcome unknown, or, with
	// TrustErrors, trusted to be none).
	PushBatches       int
	PushBatchesFailed int

	StagedSeeds       int // seeds whose structures ran WithStaging
	ShortRetention    int // seeds whose structures had Config.ShortRetention
	VersionstampSeeds int // seeds whose Queue ran WithVersionstampOrder
	TupleSeeds        int // seeds that stored values as packed tuples

	Stats memdb.Stats // summed database counters (live fields: last run's)

	// Failure describes the first problem found, if any.
	Failure *Failure
}

// OK reports whether the run found no problem.
func (r *Result) OK() bool {
	return r.Violations == 0 && r.Lost == 0 && r.Duplicated == 0 && r.Phantom == 0 &&
		r.DrainDiffers == 0 && r.Unexpected == 0
}

// Add adds o's figures to r and keeps r's first failure.
func (r *Result) Add(o Result) {
	r.Seeds += o.Seeds
	r.Histories += o.Histories
	r.Operations += o.Operations
	r.Violations += o.Violations
	r.Inconclusive += o.Inconclusive
	r.DecidedWithoutOpen += o.DecidedWithoutOpen
	r.Lost += o.Lost
	r.Duplicated += o.Duplicated
	r.Phantom += o.Phantom
	r.DrainDiffers += o.DrainDiffers
	r.Unexpected += o.Unexpected
	r.Unknown += o.Unknown
	r.Recovered += o.Recovered
	r.RecoveredAtOnce += o.RecoveredAtOnce
	r.Hidden += o.Hidden
	r.Trusted += o.Trusted
	r.ClaimsExpired += o.ClaimsExpired
	r.LayerIDs += o.LayerIDs
	r.LayerIDUnknown += o.LayerIDUnknown
	r.LayerIDReplays += o.LayerIDReplays
	r.SlotReplays += o.SlotReplays
	r.PushBatches += o.PushBatches
	r.PushBatchesFailed += o.PushBatchesFailed
	r.StagedSeeds += o.StagedSeeds
	r.ShortRetention += o.ShortRetention
	r.VersionstampSeeds += o.VersionstampSeeds
	r.TupleSeeds += o.TupleSeeds
	addStats(&r.Stats, o.Stats)
	if r.Failure == nil {
		r.Failure = o.Failure
	}
}

func addStats(s *memdb.Stats, o memdb.Stats) {
	s.Transactions += o.Transactions
	s.Commits += o.Commits
	s.ReadOnlyCommits += o.ReadOnlyCommits
	s.Conflicts += o.Conflicts
	s.Retries += o.Retries
	s.TooOld += o.TooOld
	s.InjectedNotCommitted += o.InjectedNotCommitted
	s.InjectedUnknownApplied += o.InjectedUnknownApplied
	s.InjectedUnknownNotApplied += o.InjectedUnknownNotApplied
	s.InjectedTooOld += o.InjectedTooOld
	s.InjectedForced += o.InjectedForced
	s.InjectedReadErrors += o.InjectedReadErrors
	s.InjectedReadVersionErrors += o.InjectedReadVersionErrors
	s.Interrupted += o.Interrupted
	s.Reads += o.Reads
	s.RangeReads += o.RangeReads
	s.Watches, s.Keys, s.Versions = o.Watches, o.Keys, o.Versions
	s.ConflictHistory, s.GCQueue, s.Version, s.OldestVersion = o.ConflictHistory, o.GCQueue, o.Version, o.OldestVersion
}

// Failure is the first problem a run found.
type Failure struct {
	Seed      int64
	Round     int
	Structure string
	Reason    string

	model   porcupine.Model
	info    porcupine.LinearizationInfo
	history []porcupine.Operation
	hasInfo bool
}

// WriteHistory writes the failing history as text, in call order, then
// the longest prefix of it that the checker could linearize, with the
// model's state after each operation: the next operation of the history
// is where it got stuck.
func (f *Failure) WriteHistory(w io.Writer) error {
	if !f.HasVisualization() {
		return errors.New("sim: no history to write")
	}
	m := f.model
	h := slices.Clone(f.history)
	sort.SliceStable(h, func(i, j int) bool { return h[i].Call < h[j].Call })
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\ninitial state %s\n", f, m.DescribeState(m.Init()))
	for _, op := range h {
		ret := fmt.Sprint(op.Return)
		if op.Return == math.MaxInt64 {
			ret = "end"
		}
		fmt.Fprintf(bw, "[%6d, %6s] client %-3d %s\n", op.Call, ret, op.ClientId, m.DescribeOperation(op.Input, op.Output))
	}
	var best []porcupine.Operation
	for _, part := range f.info.PartialLinearizationsOperations() {
		for _, l := range part {
			if len(l) > len(best) {
				best = l
			}
		}
	}
	fmt.Fprintf(bw, "longest linearizable prefix (%d operations):\n", len(best))
	st := m.Init()
	for _, op := range best {
		_, st = m.Step(st, op.Input, op.Output)
		fmt.Fprintf(bw, "  [%6d] %s\n", op.Call, m.DescribeOperation(op.Input, op.Output))
	}
	fmt.Fprintf(bw, "state after it: %s\n", m.DescribeState(st))
	return bw.Flush()
}

// String names the seed, round and structure of the failure and its
// reason (no round when Round is negative: a history of all the rounds).
func (f *Failure) String() string {
	if f.Round < 0 {
		return fmt.Sprintf("seed %d, %s: %s", f.Seed, f.Structure, f.Reason)
	}
	return fmt.Sprintf("seed %d, round %d, %s: %s", f.Seed, f.Round, f.Structure, f.Reason)
}

// HasVisualization reports whether the failure is a non-linearizable
// history that Visualize can draw.
func (f *Failure) HasVisualization() bool { return f != nil && f.hasInfo }

// Visualize writes porcupine's HTML visualization of the failing history
// (its longest linearizable prefixes and where they get stuck) to path.
func (f *Failure) Visualize(path string) error {
	if !f.HasVisualization() {
		return errors.New("sim: no history to visualize")
	}
	return porcupine.VisualizePath(f.model, f.info, path)
}

// Run runs one seed. ctx bounds the run (its end cancels the clients'
// operations, and the run returns ctx's error).
func Run(ctx context.Context, seed int64, cfg Config) (Result, error) {
	h, err := newHarness(seed, cfg)
	if err != nil {
		return Result{}, err
	}
	defer h.db.close()
	res := Result{Seeds: 1}
	if h.staged {
		res.StagedSeeds = 1
	}
	if h.vstamp {
		res.VersionstampSeeds = 1
	}
	if h.tuple {
		res.TupleSeeds = 1
	}
	if h.shortRetention {
		res.ShortRetention = 1
	}
	if h.setupFailure != "" {
		res.Violations++
		res.Failure = &Failure{Seed: seed, Structure: "queue", Reason: "setup: " + h.setupFailure}
	}
	for round := range cfg.Rounds {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		h.round(ctx, round, &res)
		if err := ctx.Err(); err != nil {
			return res, err
		}
	}
	h.finish(ctx, &res)
	res.Stats = h.db.stats()
	res.LayerIDReplays = int(h.layerIDReplays.Load())
	res.SlotReplays = int(h.slotReplays.Load())
	return res, ctx.Err()
}

// harness is one seed's run.
type harness struct {
	seed   int64
	cfg    Config
	staged bool // the seed's variants
	vstamp bool
	tuple  bool
	// shortRetention: the structures have Config.ShortRetention.
	shortRetention bool
	db             backend
	targets        []*target
	clock          atomic.Int64
	// setupFailure describes a check made before the rounds that failed.
	setupFailure string
	// ids holds the OpIDs the harness made (keys of type fdbqueue.OpID),
	// so that replays logged under other IDs are known for the layers'.
	ids                         sync.Map
	layerIDReplays, slotReplays atomic.Int64
	// paused is how long the harness spent checking histories (see
	// layerClock), and clockMu guards lastNow, the clock's last reading.
	paused  atomic.Int64
	clockMu sync.Mutex
	lastNow time.Time
}

// layerClock is the layers' clock in seeds with a short retention (WithClock):
// real time without the time spent checking histories, at quiescent
// points (up to CheckTimeout each), so that a round's operations, their
// recovery and their journal records stay within the retention however
// long the checks take. It never goes back. The harness's own OpIDs
// (NewOpID) carry real time, ahead of this clock by the time paused: to the
// layers they look younger than they are, so they expire and are cleared
// later, never sooner.
func (h *harness) layerClock() time.Time {
	t := time.Now().Add(-time.Duration(h.paused.Load()))
	h.clockMu.Lock()
	defer h.clockMu.Unlock()
	if t.Before(h.lastNow) {
		t = h.lastNow
	}
	h.lastNow = t
	return t
}

// pause takes the time since began off the layers' clock.
func (h *harness) pause(began time.Time) { h.paused.Add(int64(time.Since(began))) }

// target is one structure under test and what is known about its items.
type target struct {
	s        structure
	staged   bool   // made WithStaging
	state    []Item // as observed at the end of the previous round
	enqueued map[uint64]enqState
	returned map[uint64]int
	capacity int // items that unrecovered unknown dequeues may have taken
	nextID   uint64
}

type enqState uint8

const (
	enqNone enqState = iota
	enqKnown
	enqMaybe
)

func newHarness(seed int64, cfg Config) (*harness, error) {
	if cfg.Rounds < 1 || cfg.Clients < 1 || cfg.OpsPerClient < 1 {
		return nil, fmt.Errorf("sim: Rounds, Clients and OpsPerClient must be positive")
	}
	rng := rand.New(rand.NewPCG(mix(uint64(seed)), 0x51))
	h := &harness{seed: seed, cfg: cfg, db: newBackend(seed, cfg)}
	// Drawn apart from rng, so that the other variants stay each seed's.
	h.shortRetention = cfg.ShortRetention > 0 && mix(uint64(seed)^0x5107)&1 == 1
	// The seed picks the layers' variants.
	enc := fdbqueue.RawValues
	if rng.IntN(2) == 1 {
		enc = fdbqueue.TupleValues
		h.tuple = true
	}
	// Each structure gets its own seeded source of key suffixes.
	entropy := func() fdbqueue.Option {
		var chacha [32]byte
		for i := range chacha {
			chacha[i] = byte(rng.Uint32())
		}
		return fdbqueue.WithEntropy(rand.NewChaCha8(chacha))
	}
	opts := []fdbqueue.Option{fdbqueue.WithValueEncoding(enc)}
	if cfg.WithoutIdempotency {
		opts = append(opts, fdbqueue.WithoutIdempotency())
	}
	staged := cfg.Staging && !cfg.WithoutIdempotency && rng.IntN(2) == 0
	h.staged = staged
	if staged {
		// The PriorityQueue always serves in batches: its options leave
		// the serving mode to ServeAuto.
		opts = append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: cfg.claimTimeout(), CleanupTimeout: cfg.cleanupTimeout()}))
	}
	if cfg.Queue {
		qopts := append(slices.Clip(opts), entropy())
		// A staged take whose context ends after it was handed an item
		// writes the item back at its original key. Meanwhile the queue
		// may have looked empty, and the recipe's index restarts at 1 on
		// an empty queue: an item enqueued then gets a smaller key and
		// overtakes the one written back, a departure from FIFO order the
		// model reports. (The same goes for the count within one priority
		// of a PriorityQueue.) Unless StagingReorder asks for it, staged
		// seeds avoid it: their Queue uses versionstamp order, and their
		// PriorityQueue pushes distinct priorities.
		if rng.IntN(3) == 0 || staged && (!cfg.StagingReorder || cfg.StagingServing == fdbqueue.ServeByPlace) {
			qopts = append(qopts, fdbqueue.WithVersionstampOrder())
			h.vstamp = true
		}
		byPlace := false
		if staged {
			sc := fdbqueue.StagingConfig{ClaimTimeout: cfg.claimTimeout(), CleanupTimeout: cfg.cleanupTimeout(), Serving: cfg.StagingServing}
			qopts = append(qopts, fdbqueue.WithStaging(sc))
			byPlace = cfg.StagingServing == fdbqueue.ServeByPlace || cfg.StagingServing == fdbqueue.ServeAuto && h.vstamp
		}
		qopts = append(qopts, h.structureOptions(staged)...)
		sub, _ := fdbqueue.NewSubspace(h.subspace("queue"))
		q, err := fdbqueue.NewQueue(sub, qopts...)
		if err != nil {
			return nil, err
		}
		if h.vstamp && cfg.Batches {
			// A batch across the wrap of the versionstamp user versions
			// (issue 12, defect 2): after 65,534 items through this
			// Queue value, a batch of 5 must still come out in order.
			if h.setupFailure, err = checkUserVersionWrap(h.db, cfg.Faults, q); err != nil {
				return nil, err
			}
		}
		if h.setupFailure == "" && cfg.Batches && seed%4 == 1 {
			// The largest batch the largest budget accepts must commit,
			// and come back (issue 12, defect 6). About 100,000 items:
			// one seed in four, on the recipe's layout with raw values
			// (the variant where today's memdb already counts enough
			// to fail the way FoundationDB does).
			if h.setupFailure, err = checkBatchBudget(h.db, cfg.Faults, h.subspace("budget"), nil); err != nil {
				return nil, err
			}
		}
		ft := newTarget(&fifo{q: q, enc: enc, byPlace: byPlace}, 1, staged)
		h.targets = append(h.targets, ft)
	}
	if cfg.PriorityQueue {
		sub, _ := fdbqueue.NewSubspace(h.subspace("pq"))
		popts := append(slices.Clip(opts), entropy())
		if staged && !cfg.StagePriorityQueue {
			popts = popts[:0:0]
			popts = append(popts, fdbqueue.WithValueEncoding(enc), entropy())
		}
		popts = append(popts, h.structureOptions(staged && cfg.StagePriorityQueue)...)
		pq, err := fdbqueue.NewPriorityQueue(sub, popts...)
		if err != nil {
			return nil, err
		}
		h.targets = append(h.targets, newTarget(&prio{pq: pq, enc: enc}, 2, staged && cfg.StagePriorityQueue))
	}
	if len(h.targets) == 0 {
		return nil, fmt.Errorf("sim: no structure to test")
	}
	return h, nil
}

// advanceUserVersions runs n enqueues through q in transactions that roll
// back: nothing is written, but q's versionstamp user versions move on as
// if q had enqueued n items before. Faults are off meanwhile, so that no
// retry moves them further; faults are the database's, restored after.
func advanceUserVersions(db backend, faults memdb.Faults, q *fdbqueue.Queue, n int) error {
	errRollback := errors.New("sim: roll back")
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	for n > 0 {
		vs := make([][]byte, min(n, 5_000)) // within the default batch budget
		for i := range vs {
			vs[i] = []byte{byte(i)}
		}
		err := db.Transact(context.Background(), func(tr kv.Transaction) error {
			if err := q.EnqueueBatch(context.Background(), tr, vs); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			return fmt.Errorf("sim: advancing the user versions: %w", err)
		}
		n -= len(vs)
	}
	return nil
}

// checkUserVersionWrap moves q's user versions to 2 before their wrap, then
// enqueues a batch of 5 and dequeues it (with faults off), and describes
// what went wrong if it did not come out in order.
func checkUserVersionWrap(db backend, faults memdb.Faults, q *fdbqueue.Queue) (string, error) {
	if err := advanceUserVersions(db, faults, q, 1<<16-2); err != nil {
		return "", err
	}
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	ctx := context.Background()
	want := [][]byte{[]byte("wrap-a"), []byte("wrap-b"), []byte("wrap-c"), []byte("wrap-d"), []byte("wrap-e")}
	if err := q.EnqueueBatch(ctx, db, want); err != nil {
		return "", fmt.Errorf("sim: the user version wrap check: %w", err)
	}
	got, err := q.DequeueBatch(ctx, db, len(want))
	if err != nil {
		return "", fmt.Errorf("sim: the user version wrap check: %w", err)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		return fmt.Sprintf("a batch of %d enqueued after 65,534 items came out as %q: versionstamp user versions wrapped inside one transaction", len(want), got), nil
	}
	return "", nil
}

// checkBatchBudget makes a Queue with opts and the largest batch budget
// WithBatchBudget accepts, in a subspace of its own; enqueues the largest
// batch of 8-byte items that budget accepts (found by probing in a
// cancelled transaction, where an accepted batch stops at its first read);
// and dequeues it with DequeueBatch. Faults are off. It describes what went
// wrong: an accepted batch must never fail with transaction_too_large.
func checkBatchBudget(db backend, faults memdb.Faults, budgetSub tuple.Tuple, opts []fdbqueue.Option) (string, error) {
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	ctx := context.Background()
	sub, _ := fdbqueue.NewSubspace(budgetSub)
	largest := func(accepts func(int) bool, lo, hi int) int {
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if accepts(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	budget := largest(func(b int) bool {
		_, err := fdbqueue.NewQueue(sub, fdbqueue.WithBatchBudget(b))
		return err == nil
	}, 1, kv.MaxTransactionSize)
	q, err := fdbqueue.NewQueue(sub, append(slices.Clip(opts), fdbqueue.WithBatchBudget(budget))...)
	if err != nil {
		return "", err
	}
	values := func(n int) [][]byte {
		vs := make([][]byte, n)
		for i := range vs {
			vs[i] = binary.BigEndian.AppendUint64(nil, uint64(i))
		}
		return vs
	}
	probe, err := db.CreateTransaction(ctx)
	if err != nil {
		return "", err
	}
	probe.Cancel()
	var probeErr error
	n := largest(func(n int) bool {
		err := q.EnqueueBatch(ctx, probe, values(n))
		if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
			return false
		}
		if !errors.Is(err, kv.ErrTransactionCancelled) && probeErr == nil {
			probeErr = err
		}
		return true
	}, 1, budget/8)
	if probeErr != nil {
		return "", fmt.Errorf("sim: probing the batch budget: %w", probeErr)
	}
	defer func() { _ = q.Clear(ctx, db) }()
	if err := q.EnqueueBatch(ctx, db, values(n)); err != nil {
		return fmt.Sprintf("EnqueueBatch of %d items, the most the budget %d accepts, failed: %v", n, budget, err), nil
	}
	for got := 0; got < n; {
		vs, err := q.DequeueBatch(ctx, db, n)
		if err != nil {
			return fmt.Sprintf("DequeueBatch(%d) with budget %d after %d of %d items failed: %v", n, budget, got, n, err), nil
		}
		for i, v := range vs {
			if binary.BigEndian.Uint64(v) != uint64(got+i) {
				return fmt.Sprintf("DequeueBatch with budget %d returned item %d at place %d", budget, binary.BigEndian.Uint64(v), got+i), nil
			}
		}
		got += len(vs)
	}
	return "", nil
}

func newTarget(s structure, tag uint64, staged bool) *target {
	return &target{
		s:        s,
		staged:   staged,
		enqueued: map[uint64]enqState{},
		returned: map[uint64]int{},
		nextID:   tag << 56,
	}
}

func (h *harness) now() int64 { return h.clock.Add(1) }

// mix spreads consecutive seeds apart (SplitMix64's finalizer), so that
// the variants a seed picks do not correlate with its neighbours'.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// record is one operation of a round as the client saw it.
type record struct {
	op      porcupine.Operation
	id      fdbqueue.OpID
	unknown bool // outcome not known yet
	dropped bool // did not take effect (TrustErrors)
	trusted bool // a staged take that failed with an error TrustErrors trusts
	recover bool // if unknown, recover it at the end of the round
	// layerID: the operation ran without WithOpID (id is zero), under an
	// ID the layer made: it cannot be recovered nor its record read.
	layerID bool
	// inFlight: the operation failed with an error that says a commit
	// of it may have been in flight (kv.MaybeCommitted): it may land
	// after the call returned. Any other error says that the layer
	// settled the outcome within the call (a staged take's cleanup
	// fences its take).
	inFlight bool
}

// round runs one round on every target concurrently, then recovers,
// observes and checks.
func (h *harness) round(ctx context.Context, round int, res *Result) {
	histories := make([][]*record, len(h.targets))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for ti, t := range h.targets {
		// IDs are handed out before the goroutines start, so that a seed
		// gives every client the same values.
		for c := range h.cfg.Clients {
			rng := rand.New(rand.NewPCG(uint64(h.seed), uint64(round)<<32|uint64(ti)<<16|uint64(c)))
			firstID := t.nextID
			t.nextID += uint64(h.cfg.OpsPerClient)
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs := h.client(ctx, round, t, c, rng, firstID, res, &mu)
				mu.Lock()
				histories[ti] = append(histories[ti], recs...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}

	faults := h.cfg.Faults
	h.db.setFaults(memdb.Faults{})
	defer h.db.setFaults(faults)
	// Commits interrupted in flight may land after their Commit returned
	// (memdb.Faults.LateLanding), as FoundationDB's do: settle once they
	// all have.
	h.db.quiesce()
	for ti, t := range h.targets {
		h.settle(ctx, round, t, histories[ti], res)
	}
}

// client runs one client's operations and returns their records.
func (h *harness) client(ctx context.Context, round int, t *target, c int, rng *rand.Rand, nextID uint64, res *Result, mu *sync.Mutex) []*record {
	cid := c * 1000 // bumped when an operation stays open, see below
	abandonAt := -1
	if rng.Float64() < h.cfg.AbandonProb {
		abandonAt = rng.IntN(h.cfg.OpsPerClient)
	}
	var recs []*record
	for i := range h.cfg.OpsPerClient {
		in := h.choose(t, rng, nextID, cid)
		nextID++
		opCtx, cancel := context.WithCancel(ctx)
		var tr kv.Transactor = h.db
		onDB := true
		switch {
		case i == abandonAt:
			tr = &abandoning{Database: h.db, cancel: cancel}
			onDB = false
		case in.Wait:
			cancel()
			d := time.Duration(rng.Int64N(int64(h.cfg.MaxWait) + 1))
			opCtx, cancel = context.WithTimeout(ctx, d)
		case rng.Float64() < h.cfg.CancelProb:
			cancel()
			d := time.Duration(rng.Int64N(int64(h.cfg.MaxDeadline) + 1))
			opCtx, cancel = context.WithTimeout(ctx, d)
		}
		r := &record{recover: rng.Float64() < h.cfg.RecoverProb || in.Kind == DequeueBatch}
		// Drawn for every operation, so that a seed's later draws do not
		// depend on the others.
		r.layerID = rng.Float64() < h.cfg.LayerIDProb && !r.recover && onDB
		if !r.layerID {
			r.id = fdbqueue.NewOpID()
			h.ids.Store(r.id, struct{}{})
		}
		r.op.Input = in
		r.op.Call = h.now()
		out, err := t.s.run(opCtx, tr, in, r.id)
		r.op.Return = h.now()
		cancel()
		if ctx.Err() != nil {
			return recs
		}
		if in.Kind == PushBatch {
			mu.Lock()
			res.PushBatches++
			if err != nil {
				res.PushBatchesFailed++
			}
			mu.Unlock()
		}
		switch {
		case err == nil:
			r.op.Output = out
		case errors.Is(err, fdbqueue.ErrEmpty):
			r.op.Output = Output{Empty: true}
		default:
			if errors.Is(err, fdbqueue.ErrClaimExpired) {
				mu.Lock()
				res.ClaimsExpired++
				mu.Unlock()
			}
			if withdrawalFailed(err) {
				mu.Lock()
				res.Unexpected++
				if res.Failure == nil {
					res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(),
						Reason: fmt.Sprintf("%v: staged withdrawal failed (its item returns at claim expiry, after the call; the model cannot check this history): %v", in.Kind, err)}
				}
				mu.Unlock()
			} else if !expected(err) {
				mu.Lock()
				res.Unexpected++
				if res.Failure == nil {
					res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(), Reason: fmt.Sprintf("%v: unexpected error: %v", in.Kind, err)}
				}
				mu.Unlock()
			}
			r.inFlight = kv.MaybeCommitted(err)
			switch {
			case !h.cfg.TrustErrors || r.inFlight || errors.Is(err, fdbqueue.ErrOperationExpired):
				r.unknown = true
			case t.staged && (in.Kind == Dequeue || in.Kind == PopMin || in.Kind == PopMax):
				// A failed staged take may have moved the item at its
				// place to the tail (by place): settle records it as a
				// Hide and an Unhide, and fails if it took an item.
				r.unknown, r.trusted = true, true
			default:
				r.dropped = true
			}
			if r.trusted || r.dropped {
				mu.Lock()
				res.Trusted++
				mu.Unlock()
			}
		}
		isStagedTake := t.staged && (in.Kind == Dequeue || in.Kind == PopMin || in.Kind == PopMax)
		if r.unknown && r.inFlight && r.recover && onDB && !isStagedTake && !h.cfg.WithoutIdempotency &&
			rng.Float64() < h.cfg.RecoverAtOnceProb {
			h.recoverAtOnce(ctx, round, t, r, res, mu)
		}
		r.op.ClientId = cid
		if r.layerID {
			mu.Lock()
			res.LayerIDs++
			if r.unknown {
				res.LayerIDUnknown++
			}
			mu.Unlock()
		}
		recs = append(recs, r)
		if i == abandonAt {
			break // never comes back
		}
		if r.unknown {
			// The operation stays open (until recovered, or forever): the
			// client's next operations would overlap it, so they are
			// recorded as another client's.
			cid++
		}
	}
	return recs
}

// recoverAtOnce calls r's operation again with its OpID right after it
// failed with an error that says its commit may be in flight, while that
// commit may still land (Faults.LateLanding). The two calls are one
// operation, which must take effect once, between the first call and the
// recovery's return, with the recovery's result. If the recovery fails
// too, r stays unknown and settle recovers it after the late landings.
func (h *harness) recoverAtOnce(ctx context.Context, round int, t *target, r *record, res *Result, mu *sync.Mutex) {
	in := r.op.Input.(Input)
	out, err := t.s.run(ctx, h.db, in, r.id)
	switch {
	case err == nil:
	case errors.Is(err, fdbqueue.ErrEmpty):
		out = Output{Empty: true}
	default:
		if !expected(err) {
			mu.Lock()
			res.Unexpected++
			if res.Failure == nil {
				res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(), Reason: fmt.Sprintf("recovering %v at once: unexpected error: %v", in.Kind, err)}
			}
			mu.Unlock()
		}
		return
	}
	r.op.Output, r.op.Return = out, h.now()
	r.unknown, r.inFlight = false, false
	mu.Lock()
	res.Recovered++
	res.RecoveredAtOnce++
	mu.Unlock()
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

// withdrawalFailed reports whether err is a staged take's whose withdrawal
// did not commit (fdbqueue's waiter.abandon: its item comes back only when
// its claim expires, after the call returned).
func withdrawalFailed(err error) bool {
	return strings.Contains(err.Error(), "withdrawing the staged request failed")
}

// expected reports whether err is one that an operation may return in a
// simulation: the context ended, or the commit's outcome is unknown.
func expected(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		kv.MaybeCommitted(err) || errors.Is(err, fdbqueue.ErrOperationExpired) ||
		errors.Is(err, fdbqueue.ErrClaimExpired) // a waiter that stalled for the claim timeout
}

// choose picks a client's next operation; cid is the client's number in
// the history, which no operation of another number overlaps.
func (h *harness) choose(t *target, rng *rand.Rand, id uint64, cid int) Input {
	x := rng.Float64()
	switch t.s.(type) {
	case *fifo:
		switch {
		case x < 0.25 || x < 0.5 && !(h.cfg.Batches && h.vstamp):
			return Input{Kind: Enqueue, Item: Item{ID: id}}
		case x < 0.5:
			// Batches only in versionstamp order, where a transaction's
			// items are contiguous: with the recipe's indexed keys, a
			// concurrent enqueue that read the same tail can share an
			// index and land among a batch's items, which FIFOModel's
			// batch (appended as a block) does not allow.
			return Input{Kind: EnqueueBatch, Item: Item{ID: id}, N: 2 + rng.IntN(5)}
		case x < 0.8 || !h.cfg.Batches:
			return Input{Kind: Dequeue, Wait: t.staged && rng.IntN(4) == 0}
		default:
			// Mostly small batches, and now and then one far beyond
			// what the batch budget holds, so that limit-sized values
			// make it stop at the budget.
			n := 1 + rng.IntN(5)
			if rng.IntN(6) == 0 {
				n = 1000
			}
			return Input{Kind: DequeueBatch, N: n}
		}
	default:
		switch {
		case x < 0.25 || x < 0.5 && !h.cfg.Batches:
			var p int64
			switch y := rng.Float64(); {
			case t.staged && !h.cfg.StagingReorder:
				p = int64(rng.Uint64()) // distinct: see newHarness
			case y < 0.05:
				p = math.MinInt64
			case y < 0.1:
				p = math.MaxInt64
			default:
				p = rng.Int64N(4) - 1
			}
			return Input{Kind: Push, Item: Item{ID: id, Priority: p}}
		case x < 0.5:
			// A batch's items may interleave with those of a concurrent
			// push of the same priority that shares their counts (see
			// PushBatch), which PriorityModel's batch (inserted in one
			// step) does not allow. So its priorities (BatchPriorities:
			// base, base+1, base+2) are used by no concurrent push: in
			// staged seeds, distinct as Push's; otherwise the history
			// client's own, above Push's, which its earlier operations
			// (all returned) and earlier rounds' (all settled) share.
			base := int64(16 + 4*cid)
			if t.staged && !h.cfg.StagingReorder {
				base = int64(rng.Uint64())
			}
			return Input{Kind: PushBatch, Item: Item{ID: id, Priority: base}, N: 2 + rng.IntN(5)}
		case x < 0.75:
			return Input{Kind: PopMin, Wait: t.staged && rng.IntN(4) == 0}
		default:
			return Input{Kind: PopMax, Wait: t.staged && rng.IntN(4) == 0}
		}
	}
}

// abandoning is the database as seen by a client that gives up on its
// operation the moment the operation's function has run, that is as the
// commit starts: its context is cancelled, so the commit is interrupted in
// flight (applied or not, at random) and nothing retries it.
type abandoning struct {
	kv.Database
	cancel context.CancelFunc
}

// CreateTransaction is what staged operations use: the client gives up as
// the transaction's commit starts.
func (a *abandoning) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := a.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return &abandoningTx{Transaction: tr, cancel: a.cancel}, nil
}

type abandoningTx struct {
	kv.Transaction
	cancel context.CancelFunc
}

func (a *abandoningTx) Commit() error {
	a.cancel()
	return a.Transaction.Commit()
}

func (a *abandoning) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return a.Database.Transact(ctx, func(tr kv.Transaction) error {
		err := fn(tr)
		if err == nil {
			a.cancel()
		}
		return err
	})
}

// byPlace reports whether the target is a Queue staged by place, whose
// failed takes put their items back at the tail.
func (t *target) byPlace() bool {
	f, ok := t.s.(*fifo)
	return ok && f.byPlace
}

// settle ends a target's round: recover some unknown operations, observe,
// resolve what the observation settles, check the history, and update the
// item accounts.
func (h *harness) settle(ctx context.Context, round int, t *target, recs []*record, res *Result) {
	fail := func(reason string) {
		if res.Failure == nil {
			res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(), Reason: reason}
		}
	}
	// Recover in call order, so that a seed recovers the same operations
	// as far as scheduling allows.
	sort.Slice(recs, func(i, j int) bool { return recs[i].op.Call < recs[j].op.Call })
	// An operation of unknown outcome whose commit may have been in
	// flight when it returned may have taken effect after that: a commit
	// interrupted in flight goes on (on FoundationDB, and in memdb with
	// Faults.LateLanding), up to the quiescent point (round). Whatever
	// settles it below, its effect then lies between its call and now.
	// (Without late landings memdb decides such a commit before Commit
	// returns, and the shorter interval keeps checks fast.) One that
	// failed otherwise had the layer settle its outcome within the call:
	// if it did not, the check fails.
	if h.cfg.Faults.LateLanding > 0 || h.cfg.DB != nil {
		settleStart := h.now()
		for _, r := range recs {
			if r.unknown && r.inFlight {
				r.op.Return = settleStart
			}
		}
	}
	var extra []*record
	for _, r := range recs {
		if !r.unknown || h.cfg.WithoutIdempotency {
			continue
		}
		in := r.op.Input.(Input)
		isStaged := t.staged && (in.Kind == Dequeue || in.Kind == PopMin || in.Kind == PopMax)
		if !r.recover && !isStaged {
			continue
		}
		if isStaged {
			// A staged take that failed either kept its item (then its
			// journal record is there and the recovery below returns it)
			// or wrote it back when its context ended (or took nothing):
			// a Hide and an Unhide within its call.
			//
			// One under an ID the layer made has no record the harness
			// can read: it is a Hide and an Unhide. That is what the
			// layer promises (docs/design.md, "Staged dequeue": when the
			// caller's context ends, the cleanup returns an item already
			// handed to it; a take whose claim expired took nothing; a
			// cleanup that failed is reported above as a failed
			// withdrawal). Had it kept its item, nothing could recover
			// it: the item would be missing and the check would fail.
			applied := false
			if !r.layerID {
				var err error
				if applied, err = journaled(ctx, h.db, t.s.prefix(), r.id); err != nil {
					res.Unexpected++
					fail(fmt.Sprintf("reading the journal: %v", err))
					continue
				}
			}
			if applied && r.trusted {
				res.Violations++
				fail(fmt.Sprintf("%v failed with an error kv.MaybeCommitted rejects, yet its journal record says it took an item", in.Kind))
				continue
			}
			if !applied {
				tag := r.op.Call
				r.op.Input = Input{Kind: Hide, Tag: uint64(tag), Max: in.Kind == PopMax, Tail: t.byPlace()}
				r.op.Output = Output{}
				r.unknown = false
				un := &record{op: r.op}
				un.op.Input = Input{Kind: Unhide, Tag: uint64(tag), Max: in.Kind == PopMax, Tail: t.byPlace()}
				un.op.ClientId = -2 - len(extra) // a client of its own, for the visualization
				extra = append(extra, un)
				res.Hidden++
				continue
			}
			// The first call took effect; the recovery replays it.
			in.Wait = false
			r.op.Input = in
		}
		// The journal's layout is documented (package fdbqueue, "Key
		// layout"): its record tells whether the first call took effect.
		// If it did, the operation took effect within the first call; if
		// not (memdb decides a commit before Commit returns), the recovery
		// performs it now. Either way its interval is short, which keeps
		// the check fast; if the record lied, the check would fail.
		applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("reading the journal: %v", err))
			continue
		}
		call := h.now()
		out, err := t.s.run(ctx, h.db, in, r.id)
		switch {
		case err == nil:
			r.op.Output = out
		case errors.Is(err, fdbqueue.ErrEmpty):
			r.op.Output = Output{Empty: true}
		default:
			res.Unexpected++
			fail(fmt.Sprintf("recovering %v: %v", in.Kind, err))
			continue
		}
		if ret := h.now(); !applied {
			r.op.Call, r.op.Return = call, ret
		}
		r.unknown = false
		res.Recovered++
	}

	recs = append(recs, extra...)

	observed, err := t.s.observe(ctx, h.db)
	if err != nil {
		res.Unexpected++
		fail(fmt.Sprintf("observe: %v", err))
		return
	}
	observe := porcupine.Operation{ClientId: -1, Input: Input{Kind: Observe}, Call: h.now(), Output: Output{Items: observed}}
	observe.Return = h.now()

	// Dequeues of unknown outcome that were not recovered: up to MaxOpen
	// of them stay open (they may have removed an item at any time after
	// their call, or nothing). Beyond that, or to keep the checks short,
	// the journal says whether they took effect: if so, they removed an
	// item nobody saw within their call; if not, they are left out. Those
	// under an ID the layer made stay open whatever their number: the
	// harness cannot read their record (a slot, whose key it does not
	// know).
	open := 0
	for _, r := range recs {
		in := r.op.Input.(Input)
		if !r.unknown || isEnqueue(in.Kind) {
			continue
		}
		if h.cfg.WithoutIdempotency || open < h.cfg.MaxOpen || r.layerID {
			r.op.Output = Output{Unknown: true}
			r.op.Return = math.MaxInt64
			open++
			continue
		}
		applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("reading the journal: %v", err))
		}
		r.op.Output = Output{Unknown: true}
		r.dropped = !applied
	}

	// An item that came out of a known dequeue or is still there was
	// enqueued; memdb decides a commit before Commit returns, so an
	// enqueue of unknown outcome whose item appeared took effect within
	// its call. One whose item appeared nowhere did not take effect,
	// unless an open dequeue may have taken it.
	appeared := map[uint64]bool{}
	for _, it := range observed {
		appeared[it.ID] = true
	}
	for _, r := range recs {
		if !r.dropped && !r.unknown {
			for _, it := range r.op.Output.(Output).Items {
				appeared[it.ID] = true
			}
		}
	}

	history := make([]porcupine.Operation, 0, len(recs)+1)
	for _, r := range recs {
		if r.dropped {
			continue
		}
		in := r.op.Input.(Input)
		switch in.Kind {
		case Enqueue, EnqueueBatch, Push, PushBatch:
			ids := BatchIDs(in)
			mark := func(state enqState) {
				for _, x := range ids {
					t.enqueued[x] = state
				}
			}
			switch {
			case !r.unknown:
				mark(enqKnown)
			case slices.ContainsFunc(ids, func(x uint64) bool { return appeared[x] }):
				// A batch is all or none: one of its items seen is
				// all of them enqueued.
				r.op.Output = Output{}
				mark(enqKnown)
			case open == 0:
				continue // it did not take effect
			case h.cfg.WithoutIdempotency || open < h.cfg.MaxOpen || r.layerID:
				r.op.Output = Output{Unknown: true}
				r.op.Return = math.MaxInt64
				mark(enqMaybe)
				res.Unknown++
				open++
			default:
				// Settled from the journal: if it took effect, an open
				// dequeue took its item.
				applied, err := journaled(ctx, h.db, t.s.prefix(), r.id)
				if err != nil {
					res.Unexpected++
					fail(fmt.Sprintf("reading the journal: %v", err))
				}
				if !applied {
					continue
				}
				r.op.Output = Output{}
				mark(enqKnown)
			}
		default:
			if r.unknown {
				res.Unknown++
				t.capacity += max(in.N, 1)
			} else {
				for _, it := range r.op.Output.(Output).Items {
					t.returned[it.ID]++
				}
			}
		}
		history = append(history, r.op)
	}
	history = append(history, observe)
	clients := map[int]int{}
	for i := range history {
		// porcupine wants small client numbers for its visualization.
		id, ok := clients[history[i].ClientId]
		if !ok {
			id = len(clients)
			clients[history[i].ClientId] = id
		}
		history[i].ClientId = id
	}

	model := t.s.model(t.state)
	res.Histories++
	res.Operations += len(history)
	began := time.Now()
	defer h.pause(began) // the checks take no time on the layers' clock
	// Illegal until a smaller history is found linearizable or undecided.
	cr := porcupine.Illegal
	if reduced := withoutOpenOps(history, t.state); reduced != nil {
		// Without the open operations that observably did nothing and
		// the failed takes' Hides and Unhides: if that history is
		// linearizable, so is this one (reduce.go). If it is not, this
		// one is checked. If its check timed out, this one, which holds
		// more to search, is not checked: the check is inconclusive,
		// and takes no longer than one check (in CI's runs, no history
		// whose smaller check timed out was decided by the whole one).
		cr = porcupine.CheckOperationsTimeout(model, reduced, h.cfg.CheckTimeout)
		if cr == porcupine.Ok {
			res.DecidedWithoutOpen++
		}
	}
	if cr == porcupine.Illegal {
		cr = porcupine.CheckOperationsTimeout(model, history, h.cfg.CheckTimeout)
	}
	if h.cfg.Log != nil {
		h.cfg.Log("seed %d round %d %s: %d operations, %d open: %v in %v", h.seed, round, t.s.name(), len(history), open, cr, time.Since(began).Round(time.Millisecond))
	}
	switch cr {
	case porcupine.Illegal:
		res.Violations++
		if res.Failure == nil {
			_, info := porcupine.CheckOperationsVerbose(model, history, h.cfg.CheckTimeout)
			res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(),
				Reason: fmt.Sprintf("history of %d operations is not linearizable", len(history)),
				model:  model, info: info, history: history, hasInfo: true}
		}
	case porcupine.Unknown:
		res.Inconclusive++
	}
	t.state = observed
}

// journaled reports whether the journal of the queue at prefix holds a
// record of the operation id.
func journaled(ctx context.Context, db kv.Database, prefix []byte, id fdbqueue.OpID) (bool, error) {
	p, err := tuple.Tuple{"j", int64(id[8]), id[:]}.AppendPack(append(bytes.Clone(prefix), 0xff)) // (shard, ID): see fdbqueue's journal.go
	if err != nil {
		return false, err
	}
	r := kv.KeyRange{Begin: append(bytes.Clone(p), 0x00), End: append(p, 0xff)}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
	})
	return len(kvs) > 0, err
}

// finish drains every target and checks the item accounts.
func (h *harness) finish(ctx context.Context, res *Result) {
	h.db.setFaults(memdb.Faults{})
	for _, t := range h.targets {
		fail := func(reason string) {
			if res.Failure == nil {
				res.Failure = &Failure{Seed: h.seed, Round: h.cfg.Rounds, Structure: t.s.name(), Reason: reason}
			}
		}
		drained, err := t.s.drain(ctx, h.db)
		if err != nil {
			res.Unexpected++
			fail(fmt.Sprintf("drain: %v", err))
		}
		if !sameItems(drained, t.state) {
			res.DrainDiffers++
			fail(fmt.Sprintf("the final drain returned %s, the final read %s", describeItems(drained, true), describeItems(t.state, true)))
		}
		c := t.account(drained)
		res.Lost += c.lost
		res.Duplicated += c.duplicated
		res.Phantom += c.phantom
		if c.lost+c.duplicated+c.phantom > 0 {
			fail(fmt.Sprintf("conservation: %d lost, %d duplicated, %d phantom (e.g. item %d)", c.lost, c.duplicated, c.phantom, c.example))
		}
	}
}

type counts struct {
	lost, duplicated, phantom int
	example                   uint64
}

// account checks that every item is accounted for: returned or left once,
// never when it was not enqueued, and missing only as far as unrecovered
// unknown dequeues explain.
func (t *target) account(left []Item) counts {
	seen := map[uint64]int{}
	for id, n := range t.returned {
		seen[id] += n
	}
	for _, it := range left {
		seen[it.ID]++
	}
	var c counts
	missing := 0
	for id, n := range seen {
		if n > 1 {
			c.duplicated += n - 1
			c.example = id
		}
		if n > 0 && t.enqueued[id] == enqNone {
			c.phantom++
			c.example = id
		}
	}
	for id, st := range t.enqueued {
		if st == enqKnown && seen[id] == 0 {
			missing++
			if missing > t.capacity {
				c.example = id
			}
		}
	}
	c.lost = max(0, missing-t.capacity)
	return c
}

func sameItems(a, b []Item) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
