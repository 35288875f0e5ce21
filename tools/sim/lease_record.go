package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// know notes job as seen; h.mu must be held.
func (h *leaseHarness) know(job string) {
	if !h.known[job] {
		h.known[job] = true
		h.knownOrder = append(h.knownOrder, job)
	}
}

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
	// layerID: it runs without WithOpID, under an ID the layer makes
	// (LeaseConfig.LayerIDProb); if it fails, its outcome unknown, it is
	// abandoned, never recovered.
	layerID bool
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

func tag(l fdbqueue.Lease) uint64 { return binary.BigEndian.Uint64(l.ID[:8]) }
