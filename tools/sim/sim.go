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
// Every value the harness makes starts with its item's unique ID
// (values.go), unless Config.TwinProb makes some items twins of earlier
// ones, with their exact value (and often priority), as callers enqueue
// equal values: then takes of equal items write equal journal records.
// The models keep sequences of items, which may repeat; the accounts
// count items by ID as a multiset (an ID enqueued k times must come out
// k times); and an enqueue of unknown outcome is not taken as done because
// an item of its ID appeared, which may be a twin's.
//
// About half of the operations that will not be recovered, when they run
// on the database itself, are called without WithOpID (Config.LayerIDProb):
// the layer makes their ID and records them in a journal slot of the Queue
// or PriorityQueue value (a staged take under its ID), so that the slots'
// reuse meets every fault the others do.
//
// With Config.TxTimeoutProb, some operations run on a database with a
// default transaction timeout, as FoundationDB's database option
// transaction_timeout gives every transaction (kept through Reset, whose
// clock it restarts; see timeoutDB), of about a commit's latency: their
// transactions fail with transaction_timed_out (1031), some with their
// commit in flight. Such a commit is not fenced and may land after the
// layer went on (retried, took again) or the call returned; its error
// satisfies kv.MaybeCommitted (the backend marks it kv.CommitInterrupted:
// FDB's own predicate, fdb_error_predicate, counts 1031 as neither
// retryable nor maybe committed), and a 1031 before the commit says the
// operation took no effect.
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
// take of it that failed is a Hide and an Unhide, unless it failed maybe
// committed (its cleanup left its item in its record): then it stays open
// too. So does an operation that failed with ErrOperationExpired (it
// outlived its journal retention: a call under its ID fails so too, and an
// expiry may have cleared its record), except a staged take that did not
// fail maybe committed, whose cleanup put back any item it took: a Hide
// and an Unhide.
//
// # Determinism
//
// The seed fixes the database's random choices (faults, latencies, jitter),
// each client's choice of operations, values and deadlines, and the random
// key suffixes. Goroutine scheduling and real time are not controlled, so a
// seed reproduces a run's shape, not its exact interleaving.
package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
)

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
	res.TimedOutInFlight = int(h.timedOutInFlight.Load())
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
	// timedOutInFlight counts the clients' commits that timed out in
	// flight (timeoutDB).
	timedOutInFlight atomic.Int64
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
// Items are counted by ID as a multiset: twins (Config.TwinProb) share an
// ID, and each item enqueued must come out once, so an ID enqueued k
// times must come out k times.
type target struct {
	s      structure
	staged bool   // made WithStaging
	state  []Item // as observed at the end of the previous round
	// enqueued counts, per ID, the items enqueued for sure (known) and
	// those of enqueues left open (maybe); returned, those that known
	// takes returned.
	enqueued map[uint64]enqCount
	returned map[uint64]int
	// attempted counts, per ID, the items of every enqueue the clients
	// called, whatever its outcome, up to the round being settled: an ID
	// counted more than once has twins, and the item of an enqueue of
	// unknown outcome that appeared may be one of its twins'.
	attempted map[uint64]int
	// twinPool is what the clients of a round draw twins from, besides
	// their own items of the round: the items of the previous round's
	// enqueues (in ID order, so that a seed draws the same ones).
	twinPool []twinSource
	capacity int // items that unrecovered unknown dequeues may have taken
	nextID   uint64
	// rounds keeps each checked round's history, so that a conservation
	// failure, found only after the last round, can show the round where
	// its item was last seen (finish).
	rounds []checkedRound
}

// checkedRound is one round's history as checked, with the state it
// started from, its model and its failed calls.
type checkedRound struct {
	round       int
	start       []Item
	model       porcupine.Model
	history     []porcupine.Operation
	failedCalls []string
	// undecided: its check timed out (see lastRoundWith).
	undecided bool
}

// enqCount is how many items of one ID were enqueued for sure (known) and
// by enqueues left open, which may or may not have taken effect (maybe).
type enqCount struct{ known, maybe int }

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

func newTarget(s structure, tag uint64, staged bool) *target {
	return &target{
		s:         s,
		staged:    staged,
		enqueued:  map[uint64]enqCount{},
		returned:  map[uint64]int{},
		attempted: map[uint64]int{},
		nextID:    tag << 56,
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

// byPlace reports whether the target is a Queue staged by place, whose
// failed takes put their items back at the tail.
func (t *target) byPlace() bool {
	f, ok := t.s.(*fifo)
	return ok && f.byPlace
}
