package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

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

// drawJob draws a job to add at now: its priority, max attempts
// (LeaseConfig.OneAttemptProb), vesting time (due at once, or after half a
// lease or two) and unique key (LeaseConfig.UniqueProb).
func (h *leaseHarness) drawJob(rng *rand.Rand, now int64) BatchJob {
	cfg, d := h.cfg, h.d
	j := BatchJob{Prio: int32(rng.IntN(3)), Max: cfg.MaxAttempts}
	if rng.Float64() < cfg.OneAttemptProb {
		j.Max = 1
	}
	j.Vest = now + []int64{0, 0, d / 2, 2 * d}[rng.IntN(4)]
	if cfg.UniqueKeys > 0 && rng.Float64() < cfg.UniqueProb {
		j.Unique = "u" + strconv.Itoa(rng.IntN(cfg.UniqueKeys))
	}
	return j
}

// raceKinds are the kinds of the operations raced against a Requeue or
// DeleteDead of the same job (LeaseResult.DeadRaces).
var raceKinds = [4]LeaseKind{LRequeue, LDeleteDead, LCancel, LJob}

// expectedLeaseErr reports whether err is one a cancelled operation may
// return: its context ended, its transaction timed out, or its commit's
// outcome is unknown.
func expectedLeaseErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || kv.MaybeCommitted(err) ||
		errors.Is(err, kv.ErrTransactionTimedOut) // LeaseConfig.TxTimeoutProb
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
		case x < 2 && cfg.MaxBatch > 1 && rng.Float64() < cfg.AddBatchProb: // add a batch
			in.Kind = LAddBatch
			in.Batch = make([]BatchJob, 2+rng.IntN(min(cfg.MaxBatch, leaseBatchMax)-1))
			for i := range in.Batch {
				in.Batch[i] = h.drawJob(rng, now)
			}
		case x < 2: // add
			j := h.drawJob(rng, now)
			in.Kind, in.Prio, in.Max, in.Vest, in.Unique = LAdd, j.Prio, j.Max, j.Vest, j.Unique
			op.delay = time.Duration(j.Vest-now) * time.Microsecond
		case x < 5: // lease
			in.Kind, in.N, in.D = LLease, 1+rng.IntN(2), d
			in.Tight = h.budget < leaseTightBudget
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
				// For as long as a lease, or longer or shorter (due sooner):
				// an extension within the round of its lease, from the same
				// now, is seen then only if its deadline differs.
				in.Kind, in.D = LExtend, []int64{d, d / 2, 2 * d}[rng.IntN(3)]
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
		case y < cfg.InterruptProb+cfg.DeadlineProb+cfg.TxTimeoutProb && cfg.TxTimeout > 0:
			t = &timeoutDB{Database: h.t, timeout: drawTxTimeout(rng, cfg.TxTimeout), inFlight: &h.timedOutInFlight}
			op.opts = []fdbqueue.OpOption{fdbqueue.WithOpID(fdbqueue.NewOpID())}
		}
		if op.opts != nil && in.Kind != LExtend && rng.Float64() < cfg.LayerIDProb {
			// Under the same fault, without WithOpID: under an ID the
			// layer makes, in a journal slot (see LeaseConfig.LayerIDProb).
			op.opts, op.layerID = nil, true
			h.mu.Lock()
			h.layerIDs++
			h.mu.Unlock()
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
			if !expectedLeaseErr(err) || op.opts == nil && !op.layerID {
				return fmt.Errorf("%v: %w", in.Kind, err)
			}
			if cfg.TrustErrors && !kv.MaybeCommitted(err) && !errors.Is(err, fdbqueue.ErrOperationExpired) {
				// Taken at its word: it took no effect (see
				// LeaseConfig.TrustErrors). Left out of the history and
				// not recovered; the client keeps the lease it used,
				// which is as it was, and goes on.
				h.mu.Lock()
				h.trusted++
				if op.layerID {
					h.layerIDTrusted++
				}
				if errors.Is(err, kv.ErrTransactionTimedOut) {
					h.trustedTimedOut++
				}
				if in.Kind == LAdd {
					h.trustedAdds = append(h.trustedAdds, jobValueID(op.call, 0))
				}
				for i := range in.Batch {
					h.trustedAdds = append(h.trustedAdds, jobValueID(op.call, i))
				}
				h.mu.Unlock()
				continue
			}
			op.failed = true
			h.mu.Lock()
			h.unknown++
			if op.layerID {
				h.layerIDUnknown++
			}
			h.mu.Unlock()
			// Under an ID the layer made, it cannot be recovered: nothing
			// can ask the journal for it again. Abandoned, as by a client
			// that crashed: of unknown outcome to the round's end.
			if op.layerID || rng.Float64() < cfg.AbandonProb {
				// Never recovered: its client crashed (or cannot tell
				// what it did), and its next operations are another
				// client's. It forgets the lease it used, except a
				// client whose call ran under an ID the layer made (it
				// did not crash): it keeps the lease and may use it
				// again, in calls of their own, which must find it lost
				// if the failed call took effect.
				keep := op.layerID && i >= 0
				h.mu.Lock()
				h.abandoned = append(h.abandoned, op)
				if keep {
					h.layerIDKept++
				}
				h.mu.Unlock()
				if i >= 0 && !keep {
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
	t := h.t
	if h.cfg.plant != nil {
		t = h.cfg.plant(LJob, t)
	}
	info, err := h.q.Job(ctx, t, id)
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
