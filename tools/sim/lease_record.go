package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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

// seen notes job, seen with value (the payload of a value ID, see
// leaseShape), and checks the payload: it must be exactly one value ID's,
// and the one the job was seen with before. A payload that is not counts
// as a mismatch (LeaseResult.ValueMismatches) and ties the job to no Add.
func (h *leaseHarness) seen(job string, value []byte) {
	id, err := decodeLeaseValue(value)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.know(job)
	if err != nil {
		h.mismatch(fmt.Sprintf("job %x: %v", job, err))
		return
	}
	if prev, ok := h.valueOf[job]; ok && prev != id {
		h.mismatch(fmt.Sprintf("job %x carries the payload of value ID %d, seen before with %d's", job, id, prev))
		return
	}
	h.valueOf[job] = id
	if !slices.Contains(h.adds[id], job) {
		h.adds[id] = append(h.adds[id], job)
	}
}

// mismatch counts a payload that is not its job's (LeaseResult.
// ValueMismatches) and keeps the first one's description; h.mu must be
// held.
func (h *leaseHarness) mismatch(what string) {
	h.valueMismatches++
	if h.firstMismatch == "" {
		h.firstMismatch = what
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
		if leaseShapeOf(jobValueID(op.call, 0)).limit() {
			h.limitAdded++
		}
	case op.in.Kind == LAddBatch && out.TooLarge:
		h.batchTooLarge++
	case op.in.Kind == LAddBatch:
		h.batches++
		for i, a := range out.Added {
			if !a.Duplicate {
				h.know(a.Job) // as an Add's
				if leaseShapeOf(jobValueID(op.call, i)).limit() {
					h.limitAdded++
				}
			}
		}
	case op.in.Kind == LLease:
		for _, l := range out.Leases {
			h.leasedLast = append(h.leasedLast, l.Job)
		}
		if op.in.N > 1 && len(out.Leases) > 0 && len(out.Leases) < op.in.N {
			h.leasesShort++
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
		r, err = h.q.Add(ctx, t, fdbqueue.Job{Value: leaseJobValue(jobValueID(op.call, 0)), Delay: op.delay, Priority: in.Prio,
			UniqueKey: in.Unique, MaxAttempts: in.Max}, op.opts...)
		out.Job, out.Duplicate = string(r.ID[:]), r.Duplicate
	case LAddBatch:
		jobs := make([]fdbqueue.Job, len(in.Batch))
		for i, j := range in.Batch {
			jobs[i] = fdbqueue.Job{Value: leaseJobValue(jobValueID(op.call, i)), Delay: time.Duration(j.Vest-in.Now) * time.Microsecond,
				Priority: j.Prio, UniqueKey: j.Unique, MaxAttempts: j.Max}
		}
		var rs []fdbqueue.AddResult
		rs, err = h.q.AddBatch(ctx, t, jobs, op.opts...)
		for _, r := range rs {
			out.Added = append(out.Added, BatchAdded{Job: string(r.ID[:]), Duplicate: r.Duplicate})
		}
		if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
			out.TooLarge, err = true, nil
		}
		if err == nil {
			h.checkBudget(jobs, out.TooLarge)
		}
	case LLease:
		got, err = h.q.Lease(ctx, tries{Database: t, n: &op.tries}, in.N, time.Duration(in.D)*time.Microsecond, op.opts...)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			out.Empty, err = true, nil
		}
		for _, l := range got {
			out.Leases = append(out.Leases, LeasedJob{Job: string(l.JobID[:]), Tag: tag(l), Attempt: l.Attempt})
			h.seen(string(l.JobID[:]), l.Value)
		}
		h.countLimitLeased(got)
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
			h.seen(string(nl.JobID[:]), nl.Value) // the lease's own payload, carried over
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

// leaseTightBudget is the batch budget under which a Lease may stop for
// the budget with the jobs the simulation has due (LeaseInput.Tight): a
// Lease's transaction counts about 10,000 bytes plus about 2,000 per job
// it takes or buries, and the simulation never has anywhere near 45 jobs
// due at once.
const leaseTightBudget = 100_000

// Generous bounds on an AddBatch's transaction size as the queue counts it
// (JobQueue.addBatchCost) on the simulation's short prefix, beyond the
// payloads: about 10,000 bytes for the journal and signal, and 1,250 per
// job (1,450 with a short unique key) are measured; checkBudget allows
// more.
const (
	leaseBatchOverheadMax = 16_000
	leaseBatchJobMax      = 2_500
)

// checkBudget checks an AddBatch of jobs, refused with ErrBatchTooLarge
// (tooLarge) or accepted, against the queue's batch budget: it counts a
// refusal of jobs whose payloads and bounded overheads (see
// leaseBatchOverheadMax) fit, or an acceptance of jobs whose payloads
// alone do not, as a budget error (LeaseResult.BudgetErrors).
func (h *leaseHarness) checkBudget(jobs []fdbqueue.Job, tooLarge bool) {
	sum := 0
	for _, j := range jobs {
		sum += len(j.Value)
	}
	bad := len(jobs) > 1 && (tooLarge && sum+leaseBatchOverheadMax+len(jobs)*leaseBatchJobMax <= h.budget || !tooLarge && sum > h.budget)
	if bad {
		h.mu.Lock()
		h.budgetErrors++
		h.mu.Unlock()
	}
}

// countLimitLeased counts the limit-sized payloads among the leases a
// Lease returned (LeaseResult.LimitLeased).
func (h *leaseHarness) countLimitLeased(ls []fdbqueue.Lease) {
	n := 0
	for _, l := range ls {
		if len(l.Value) == kv.MaxValueSize {
			n++
		}
	}
	h.mu.Lock()
	h.limitLeased += n
	if len(ls) > 1 && n > 0 {
		h.limitLeasedTogether++
	}
	h.mu.Unlock()
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
