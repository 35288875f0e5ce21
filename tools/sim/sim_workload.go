package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

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
	// expired: the operation failed with ErrOperationExpired. It outlived
	// its journal retention: a call under its ID fails the same way, and
	// its record may have been cleared by an expiry, so neither can
	// settle it (fdbqueue.ErrOperationExpired: "treat it as maybe
	// committed"). A staged take that failed so without kv.MaybeCommitted
	// is the exception: its cleanup put back the item of any take whose
	// record it found, and there was none else.
	expired bool
	// failed is what the call failed with ("" if it did not fail): its
	// kind, its error and how the check takes it, for a written history.
	failed string
}

// failedAs says how the check takes a failed call, as its flags say when
// it failed (settle may add how it settled it).
func (r *record) failedAs() string {
	how := "outcome unknown"
	switch {
	case r.dropped:
		how = "trusted to have had no effect"
	case r.trusted:
		how = "a trusted staged take"
	}
	if r.inFlight {
		how += ", its commit maybe in flight"
	}
	if r.expired {
		how += ", past its journal retention"
	}
	if r.layerID {
		how += ", under an ID the layer made"
	}
	return how
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
			tw := h.newTwinner(t, round, ti, c)
			wg.Add(1)
			go func() {
				defer wg.Done()
				recs := h.client(ctx, round, t, c, rng, tw, firstID, res, &mu)
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

// client runs one client's operations and returns their records; tw, if
// not nil, makes some of its items twins.
func (h *harness) client(ctx context.Context, round int, t *target, c int, rng *rand.Rand, tw *twinner, nextID uint64, res *Result, mu *sync.Mutex) []*record {
	if tw != nil {
		defer func() {
			mu.Lock()
			res.TwinItems += tw.made
			mu.Unlock()
		}()
	}
	cid := c * 1000 // bumped when an operation stays open, see below
	abandonAt := -1
	if rng.Float64() < h.cfg.AbandonProb {
		abandonAt = rng.IntN(h.cfg.OpsPerClient)
	}
	var recs []*record
	for i := range h.cfg.OpsPerClient {
		in := h.choose(t, rng, nextID, cid)
		if tw != nil {
			in = tw.apply(in)
		}
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
		timed := false
		// Drawn only when asked for, so that other configurations' seeds
		// keep their draws.
		if h.cfg.TxTimeoutProb > 0 && h.cfg.TxTimeout > 0 {
			d := drawTxTimeout(rng, h.cfg.TxTimeout)
			if rng.Float64() < h.cfg.TxTimeoutProb && onDB {
				tr = &timeoutDB{Database: h.db, timeout: d, inFlight: &h.timedOutInFlight}
				timed = true
			}
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
		if timed {
			mu.Lock()
			res.TxTimeoutOps++
			if errors.Is(err, kv.ErrTransactionTimedOut) {
				res.TimedOut++
			}
			mu.Unlock()
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
			} else if !expected(err) && !(timed && errors.Is(err, kv.ErrTransactionTimedOut)) {
				mu.Lock()
				res.Unexpected++
				if res.Failure == nil {
					res.Failure = &Failure{Seed: h.seed, Round: round, Structure: t.s.name(), Reason: fmt.Sprintf("%v: unexpected error: %v", in.Kind, err)}
				}
				mu.Unlock()
			}
			h.classify(t, r, in, err)
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

// classify sets how the check takes r, a call of in on t that failed
// with err (not ErrEmpty): its flags and its description (record.failed).
func (h *harness) classify(t *target, r *record, in Input, err error) {
	r.inFlight = kv.MaybeCommitted(err)
	r.expired = errors.Is(err, fdbqueue.ErrOperationExpired)
	switch {
	case !h.cfg.TrustErrors || r.inFlight || r.expired:
		r.unknown = true
	case t.staged && (in.Kind == Dequeue || in.Kind == PopMin || in.Kind == PopMax):
		// A failed staged take may have moved the item at its
		// place to the tail (by place): settle records it as a
		// Hide and an Unhide, and fails if it took an item.
		r.unknown, r.trusted = true, true
	default:
		r.dropped = true
	}
	r.failed = fmt.Sprintf("%v: %v (%s)", in.Kind, err, r.failedAs())
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
