package sim

import (
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// LeaseKind is the kind of a recorded JobQueue operation.
type LeaseKind uint8

// JobQueue operations. LObserve is the harness's read of every job record
// at a quiescent point; LJob is a JobQueue.Job lookup of one job;
// LRequeue and LDeleteDead are JobQueue.Requeue and DeleteDead of a job;
// LAddBatch is a JobQueue.AddBatch of several jobs.
const (
	LAdd LeaseKind = iota
	LLease
	LAck
	LNack
	LExtend
	LObserve
	LRelease
	LCancel
	LJob
	LRequeue
	LDeleteDead
	LAddBatch
)

var leaseKindNames = [...]string{"Add", "Lease", "Ack", "Nack", "Extend", "Observe", "Release", "Cancel", "Job", "Requeue", "DeleteDead", "AddBatch"}

// String returns the kind's name.
func (k LeaseKind) String() string {
	if int(k) < len(leaseKindNames) {
		return leaseKindNames[k]
	}
	return fmt.Sprintf("LeaseKind(%d)", k)
}

// LeaseInput is the input of a recorded JobQueue operation. The clock is
// fixed within a round, so Now is known to the model.
type LeaseInput struct {
	Kind LeaseKind
	Now  int64 // the queue's clock, µs
	// Add: the job's vesting time, priority and max attempts, and its
	// unique key ("": none).
	Vest   int64
	Prio   int32
	Max    int
	Unique string
	// AddBatch: its jobs, in order (their Vest, Prio, Max and Unique as
	// an Add's).
	Batch []BatchJob
	// Lease: how many and for how long (µs); Extend: for how long.
	N int
	D int64
	// Ack, Nack, Extend, Release: the job and the lease's tag (its ID's
	// first 8 bytes). Nack, Release: the new vesting time (Vest). Cancel,
	// Job, Requeue, DeleteDead: the job (an ID that may never have
	// existed).
	Job string
	Tag uint64
	// Call and Ret are the operation's call and return in the history
	// (0: unknown; the model then draws no conclusion from them). Retried:
	// a Lease whose transaction ran more than once, or whose call failed
	// and was recovered, so that it may have returned the leases of an
	// earlier attempt that committed, from its journal record, less those
	// whose job a Cancel removed since (see LeaseModel).
	Call, Ret int64
	Retried   bool
	// Tight: a Lease on a queue whose batch budget may stop it after any
	// candidate past the first (see leaseTightBudget), so that it may
	// report ErrEmpty having spent the budget on burying due jobs whose
	// last lease expired, with jobs it could lease due behind them.
	Tight bool
}

// BatchJob is one job of an AddBatch: its vesting time, priority, max
// attempts and unique key ("": none), as LeaseInput holds an Add's.
type BatchJob struct {
	Vest   int64
	Prio   int32
	Max    int
	Unique string
}

// BatchAdded is what an AddBatch did with one of its jobs, as an Add's
// output says it (LeaseOutput.Job and Duplicate).
type BatchAdded struct {
	Job       string
	Duplicate bool
}

// LeasedJob is one lease a Lease returned.
type LeasedJob struct {
	Job     string
	Tag     uint64
	Attempt int
}

// JobRecord is a job as Observe read it from the database, or as the
// model holds it.
type JobRecord struct {
	Job      string
	Vest     int64 // vesting time, or the lease's deadline
	Prio     int32
	Tag      uint64 // the lease's tag; 0 when not leased
	Attempts int
	Max      int
	Dead     bool
	Unique   string // the job's unique key ("": none)
	// AnyTag: the model's only. The job is leased by a Lease of unknown
	// outcome (LeaseOutput.Unknown), under a tag nobody knows (Tag is 0):
	// nobody holds that lease, and the next Observe reads its tag.
	AnyTag bool
	// Ghost: the model's only. Not 0: the job was taken by a retried
	// Lease (LeaseInput.Retried) whose call returned at Ghost without it,
	// so a Cancel removed it before then; the state is impossible once an
	// operation is called after Ghost with the job still there.
	Ghost int64
}

// KeyHold is one entry of the queue's unique-key index: the key and the
// ID of the job that holds it.
type KeyHold struct{ Key, Job string }

// LeaseOutput is the output of a recorded JobQueue operation.
type LeaseOutput struct {
	// Add: the new job's ID, or with Duplicate (its unique key was held,
	// nothing was added) the ID of the job that holds the key.
	Job       string
	Duplicate bool
	// AddBatch: what it did with each job, in order; TooLarge: it failed
	// with ErrBatchTooLarge, adding nothing (Added is empty).
	Added    []BatchAdded
	TooLarge bool
	Leases   []LeasedJob // Lease
	Empty    bool        // Lease: ErrEmpty
	Lost     bool        // Ack, Nack, Extend, Release: ErrLeaseLost
	Dead     bool        // Nack: the job was dead-lettered
	Jobs     []JobRecord // Observe, sorted by Job
	Held     []KeyHold   // Observe: the unique-key index, sorted by Key
	// Cancel, Job, Requeue, DeleteDead: ErrJobNotFound. Job: otherwise
	// Record is the job as Job returned it (Vest 0 for a dead job).
	NotFound bool
	Record   JobRecord
	// KeyHeld: Requeue's ErrUniqueKeyHeld (another job in the queue holds
	// the dead job's unique key; it stays dead).
	KeyHeld bool
	// Unknown: the call failed and was never recovered (its client
	// crashed), so it may or may not have taken effect, with any result,
	// at any point between its call and its Return (the end of its round,
	// when every commit interrupted in flight has landed). Extend, which
	// has no journal, is also Unknown for the first call of one recovered
	// by a call of its own, and for an earlier attempt within a call that
	// ran its transaction again and found the lease lost (Return: the
	// call's). Add: Job is the
	// ID of the job that carries its value if one was ever seen (it then
	// may have added that job), "" if none was (it did not add one: a job
	// it added is at the round's Observe or in a known Lease's output).
	// AddBatch: Added holds, for each job, the ID of the job that carries
	// its value if one was seen (Duplicate false), else "": if it took
	// effect, the jobs not seen were duplicates.
	Unknown bool
}

// leaseState is the model's state: the jobs in the queue or dead, sorted
// by ID (acked and cancelled jobs are gone).
type leaseState []JobRecord

func (s leaseState) find(job string) int {
	i, ok := slices.BinarySearchFunc(s, job, func(r JobRecord, j string) int {
		switch {
		case r.Job < j:
			return -1
		case r.Job > j:
			return 1
		}
		return 0
	})
	if !ok {
		return -1
	}
	return i
}

// due reports whether a live job can be leased (or, exhausted, buried) at now.
func (r JobRecord) due(now int64) bool { return !r.Dead && r.Vest <= now }

func (r JobRecord) exhausted() bool { return r.Attempts >= r.Max }

// LeaseModel is the sequential specification of a JobQueue, for
// porcupine, with choice K. Lease may take any due jobs that have attempts
// left (which ones among the due is the random choice; its order is
// checked by unit tests, not here, since it holds as of the lease's read
// version); a job whose last lease expired may be dead-lettered by any
// later Lease, which the model learns at the next Observe (or from an Ack
// that finds the lease lost).
//
// Attempts: a job's count is the attempts it used, the leases it had less
// those it was released from (Release gives the lease's attempt back), and
// a Lease's Attempt is that count plus one. A job is leased only while its
// count is below its MaxAttempts, and dead-lettered (by Nack, or buried by
// a Lease once its last lease expired) only when the count has reached it;
// Observe checks the count of every job, dead ones included. So a job
// released on its last attempt is leased once more, and a job is never
// dead-lettered with an attempt left nor leased past its last.
//
// Unique keys: a job with a unique key holds it while it is in the queue
// (queued, delayed or leased) and frees it once acked or dead-lettered.
// An Add of a held key adds nothing and returns the holder's ID
// (LeaseOutput.Duplicate); an Add of a free key adds its job. So two jobs
// in the queue never share a key, and Observe checks the unique-key index
// against the jobs in the queue (LeaseOutput.Held). A key whose holder
// is exhausted and due may have been freed by a Lease that buried it,
// which the model learns from an Add that finds the key free.
//
// AddBatch adds its jobs in order in one step, each as an Add would (a
// key an earlier job of the batch took is held for the later ones, which
// return that job's ID as duplicates), or, refused with ErrBatchTooLarge
// (LeaseOutput.TooLarge), adds none.
//
// Cancel and Job: Cancel removes a job in the queue (queued, delayed or
// leased, under any tag) for good: its record leaves the state, so it is
// never leased, acked, nacked, extended or released again (those find
// their lease lost), never dead, and its unique key is free. A Cancel of
// a dead job, of one acked or cancelled, or of an ID never added finds
// nothing (LeaseOutput.NotFound); so does one of a job whose last lease
// expired, if a Lease buried it since (the model learns that it died). A
// Job lookup returns the job as the state holds it (as Observe reads a
// record: a buried job dead, a lease of unknown tag its tag), or NotFound
// for a job not in the state.
//
// Requeue and DeleteDead act on a dead job only (one a Lease buried
// included, which the model then learns): Requeue puts it back in the
// queue, due at its call's now, its attempts back to 0, its priority, max
// attempts and unique key kept (it holds its key again), unless another
// job in the queue holds that key (LeaseOutput.KeyHeld: it stays dead);
// DeleteDead removes it from the state for good. Either finds nothing
// (NotFound) for a job in the queue, gone or never added. With the
// journal each takes effect once however often its commit is retried: a
// Requeue applied twice would find its job no longer dead and report
// NotFound, which a state holding the job dead before the call cannot
// explain.
//
// A retried Lease (LeaseInput.Retried) returns, from its journal record,
// the leases of the attempt that committed whose job still carries them:
// a job it took and a Cancel removed before the retry is left out (and,
// all of them removed, it reports ErrEmpty). So such a Lease may also
// have taken, up to N in all, due jobs its output does not show (Ghost),
// which a Cancel must remove before its call returns: a state holding
// one at a later operation's call, or at an Observe, is rejected.
//
// An operation of unknown outcome (LeaseOutput.Unknown) may have done
// nothing or anything its known outcomes do (leaseUnknownStep), so the
// model is nondeterministic: its state is the set of the states the
// history so far allows, which each round's Observe narrows down again.
func LeaseModel(k int) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{leaseState(nil)} },
		Step: func(state, input, output any) []any {
			s, in, out := state.(leaseState), input.(LeaseInput), output.(LeaseOutput)
			if s.ghostBefore(in.Call) {
				return nil
			}
			if out.Unknown {
				return leaseUnknownStep(s, in, out, k)
			}
			if in.Kind == LLease && in.Retried {
				return retriedLeaseStep(s, in, out, k)
			}
			if ok, n := leaseStep(s, in, out, k); ok {
				return []any{n}
			}
			return nil
		},
		Equal: func(a, b any) bool { return slices.Equal(a.(leaseState), b.(leaseState)) },
		Hash:  func(s any) uint64 { return s.(leaseState).hash() },
		DescribeOperation: func(input, output any) string {
			return describeLeaseOp(input.(LeaseInput), output.(LeaseOutput))
		},
		DescribeState: func(state any) string { return state.(leaseState).String() },
	}
	return nm.ToModel()
}

// hash is FNV-1a over the state's records (equal states hash equal).
func (s leaseState) hash() uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) {
		for range 8 {
			h = (h ^ (v & 0xff)) * 1099511628211
			v >>= 8
		}
	}
	for _, r := range s {
		for i := 0; i < len(r.Job); i++ {
			h = (h ^ uint64(r.Job[i])) * 1099511628211
		}
		for i := 0; i < len(r.Unique); i++ {
			h = (h ^ uint64(r.Unique[i])) * 1099511628211
		}
		mix(uint64(r.Ghost))
		flags := uint64(0)
		if r.Dead {
			flags |= 1
		}
		if r.AnyTag {
			flags |= 2
		}
		mix(uint64(r.Vest))
		mix(uint64(r.Prio)<<32 | uint64(uint32(r.Attempts)))
		mix(r.Tag)
		mix(uint64(r.Max)<<8 | flags)
	}
	return h
}

// leaseUnknownStep is the step of an operation of unknown outcome: the
// states it may leave s in. It may not have taken effect (s), or have
// taken effect with any output its kind has: an Add added its job (if
// one with its value was seen, see LeaseOutput.Unknown; an Add that found
// its unique key held changed nothing, as one that did not take effect);
// a Lease leased
// any 1 to N of the jobs it could lease, under tags nobody knows (it may
// also have buried exhausted jobs, which the next Observe finds, as for
// any Lease); an Ack, Nack, Extend or Release did what it does when its
// lease is held, or found it lost; a Cancel removed its job or found
// none; a Requeue requeued its job or found it not dead or its key held;
// a DeleteDead removed its job or found it not dead.
func leaseUnknownStep(s leaseState, in LeaseInput, out LeaseOutput, k int) []any {
	next := []any{s}
	var outs []LeaseOutput
	switch in.Kind {
	case LAdd:
		if out.Job != "" {
			outs = []LeaseOutput{{Job: out.Job}}
		}
	case LAddBatch:
		if n, ok := unknownBatchStep(s, in, out, k); ok {
			next = append(next, n)
		}
	case LLease:
		var eligible []int
		for i, r := range s {
			if r.due(in.Now) && !r.exhausted() {
				eligible = append(eligible, i)
			}
		}
		// Every subset of 1 to N of them, in order.
		var pick func(from int, n leaseState, taken int)
		pick = func(from int, n leaseState, taken int) {
			for j := from; j < len(eligible); j++ {
				m := slices.Clone(n)
				i := eligible[j]
				m[i].Attempts++
				m[i].Tag, m[i].AnyTag = 0, true
				m[i].Vest = in.Now + in.D
				next = append(next, m)
				if taken+1 < in.N {
					pick(j+1, m, taken+1)
				}
			}
		}
		pick(0, s, 0)
	case LAck, LExtend, LRelease:
		outs = []LeaseOutput{{}, {Lost: true}}
	case LCancel, LDeleteDead:
		outs = []LeaseOutput{{}, {NotFound: true}}
	case LRequeue:
		outs = []LeaseOutput{{}, {NotFound: true}, {KeyHeld: true}}
	case LNack:
		outs = []LeaseOutput{{}, {Dead: true}, {Lost: true}}
	default: // an Observe or a Job lookup is never unknown
		return nil
	}
	for _, o := range outs {
		if ok, n := leaseStep(s, in, o, k); ok {
			next = append(next, n)
		}
	}
	return next
}

func leaseStep(s leaseState, in LeaseInput, out LeaseOutput, k int) (bool, any) {
	switch in.Kind {
	case LAdd:
		if out.Job == "" {
			return false, s
		}
		// Unique keys: while a job with the key is in the queue (queued,
		// delayed or leased: not acked, not dead), an Add of the key adds
		// nothing and returns that job's ID; otherwise it adds its job.
		h := s.holder(in.Unique)
		if out.Duplicate {
			return h >= 0 && s[h].Job == out.Job, s
		}
		if h >= 0 {
			// Added with the key held: only if a Lease buried the holder
			// (its last attempt expired) since, freeing the key.
			if !(s[h].exhausted() && s[h].due(in.Now)) {
				return false, s
			}
			s = slices.Clone(s)
			s[h].Dead, s[h].Tag, s[h].AnyTag = true, 0, false
		}
		if s.find(out.Job) >= 0 {
			return false, s
		}
		n := append(slices.Clone(s), JobRecord{Job: out.Job, Vest: in.Vest, Prio: in.Prio, Max: in.Max, Unique: in.Unique})
		slices.SortFunc(n, func(a, b JobRecord) int {
			if a.Job < b.Job {
				return -1
			}
			return 1
		})
		return true, n
	case LLease:
		eligible, due := 0, 0
		for _, r := range s {
			if r.due(in.Now) {
				due++
				if !r.exhausted() {
					eligible++
				}
			}
		}
		if out.Empty {
			// Empty: nothing eligible, or the window of K+N−1 due jobs it
			// read may have held only exhausted ones (it buried them), or,
			// Tight, the budget went to burying the first ones it took.
			return eligible == 0 || due >= k+in.N-1 || in.Tight && due > eligible, s
		}
		if len(out.Leases) == 0 || len(out.Leases) > in.N {
			return false, s
		}
		n := slices.Clone(s)
		for _, l := range out.Leases {
			i := n.find(l.Job)
			if i < 0 || !n[i].due(in.Now) || n[i].exhausted() || l.Attempt != n[i].Attempts+1 || l.Tag == 0 {
				return false, s
			}
			n[i].Attempts++
			n[i].Tag, n[i].AnyTag = l.Tag, false
			n[i].Vest = in.Now + in.D
		}
		return true, n
	case LAck, LNack, LExtend, LRelease:
		i := s.find(in.Job)
		held := i >= 0 && !s[i].Dead && !s[i].AnyTag && s[i].Tag == in.Tag
		if !held {
			return out.Lost, s
		}
		if out.Lost {
			// The lease is still the job's: lost only if a Lease buried
			// the job (its last attempt expired) since.
			if !(s[i].exhausted() && s[i].due(in.Now)) {
				return false, s
			}
			n := slices.Clone(s)
			n[i].Dead, n[i].Tag, n[i].AnyTag = true, 0, false
			return true, n
		}
		n := slices.Clone(s)
		switch in.Kind {
		case LAck:
			return true, slices.Delete(n, i, i+1)
		case LNack:
			if out.Dead != n[i].exhausted() {
				return false, s
			}
			n[i].Tag = 0
			if out.Dead {
				n[i].Dead = true
			} else {
				n[i].Vest = in.Vest
			}
			return true, n
		case LRelease:
			// Due at its delay, the lease's attempt given back (a held
			// lease's job has used at least that one).
			if n[i].Attempts < 1 {
				return false, s
			}
			n[i].Tag = 0
			n[i].Attempts--
			n[i].Vest = in.Vest
			return true, n
		default: // LExtend
			n[i].Vest = in.Now + in.D
			return true, n
		}
	case LCancel:
		i := s.find(in.Job)
		if i < 0 || s[i].Dead {
			return out.NotFound, s
		}
		n := slices.Clone(s)
		if out.NotFound {
			// Still in the queue: not found only if a Lease buried it (its
			// last attempt expired) since.
			if !(s[i].exhausted() && s[i].due(in.Now)) {
				return false, s
			}
			n[i].Dead, n[i].Tag, n[i].AnyTag = true, 0, false
			return true, n
		}
		return true, slices.Delete(n, i, i+1)
	case LRequeue, LDeleteDead:
		return deadStep(s, in, out)
	case LAddBatch:
		// ErrBatchTooLarge is refused before anything is written (the
		// harness checks the refusal against the budget).
		if out.TooLarge {
			return len(out.Added) == 0, s
		}
		if len(out.Added) != len(in.Batch) {
			return false, s
		}
		return batchStep(s, in, func(i int) (LeaseOutput, bool) {
			return LeaseOutput{Job: out.Added[i].Job, Duplicate: out.Added[i].Duplicate}, true
		}, k)
	case LJob:
		i := s.find(in.Job)
		if out.NotFound || i < 0 {
			return out.NotFound && i < 0, s
		}
		r, ok := observed(s[i], out.Record, in.Now)
		if !ok {
			return false, s
		}
		n := slices.Clone(s)
		n[i] = r
		return true, n
	case LObserve:
		if len(out.Jobs) != len(s) {
			return false, s
		}
		n := slices.Clone(s)
		for i, got := range out.Jobs {
			if n[i].Ghost != 0 {
				return false, s // a Cancel should have removed it
			}
			r, ok := observed(n[i], got, in.Now)
			if !ok {
				return false, s
			}
			n[i] = r
		}
		// The unique-key index holds the key of every job in the queue,
		// and nothing else: a dead or acked job's key is free.
		if !slices.Equal(out.Held, n.held()) {
			return false, s
		}
		return true, n
	}
	return false, s
}

// batchStep is the step of an AddBatch that took effect: its jobs added
// in order, all in one step, each as an Add whose output is outAt(i)
// (false: no Add's output will do), so that a unique key an earlier job of
// the batch took is held for the later ones.
func batchStep(s leaseState, in LeaseInput, outAt func(i int) (LeaseOutput, bool), k int) (bool, any) {
	n := s
	for i, j := range in.Batch {
		out, ok := outAt(i)
		if !ok {
			return false, s
		}
		ok, m := leaseStep(n, LeaseInput{Kind: LAdd, Now: in.Now, Vest: j.Vest, Prio: j.Prio, Max: j.Max, Unique: j.Unique}, out, k)
		if !ok {
			return false, s
		}
		n = m.(leaseState)
	}
	return true, n
}

// unknownBatchStep is the state an AddBatch of unknown outcome leaves s in
// if it took effect (false: it cannot have): each job whose value was seen
// added under the ID it was seen with, each other one a duplicate of a
// job in the queue (one it added would have been seen; see
// LeaseOutput.Unknown). A batch that failed with ErrBatchTooLarge did
// nothing, as one that did not take effect.
func unknownBatchStep(s leaseState, in LeaseInput, out LeaseOutput, k int) (leaseState, bool) {
	if len(out.Added) != len(in.Batch) {
		return nil, false
	}
	m := s
	for i, j := range in.Batch {
		o := LeaseOutput{Job: out.Added[i].Job}
		if o.Job == "" {
			// A duplicate of the key's holder at its turn.
			h := m.holder(j.Unique)
			if h < 0 {
				return nil, false
			}
			o = LeaseOutput{Job: m[h].Job, Duplicate: true}
		}
		ok, next := leaseStep(m, LeaseInput{Kind: LAdd, Now: in.Now, Vest: j.Vest, Prio: j.Prio, Max: j.Max, Unique: j.Unique}, o, k)
		if !ok {
			return nil, false
		}
		m = next.(leaseState)
	}
	return m, true
}

// deadStep is the step of a Requeue or DeleteDead (see LeaseModel).
func deadStep(s leaseState, in LeaseInput, out LeaseOutput) (bool, any) {
	i := s.find(in.Job)
	dead := i >= 0 && s[i].Dead
	// In the queue, its last lease expired: a Lease may have buried it.
	buried := i >= 0 && !s[i].Dead && s[i].exhausted() && s[i].due(in.Now)
	if out.NotFound {
		return !dead && !out.KeyHeld, s // not dead (then not buried yet either)
	}
	if !dead && !buried || out.KeyHeld && in.Kind != LRequeue {
		return false, s
	}
	n := slices.Clone(s)
	if buried {
		n[i].Dead, n[i].Tag, n[i].AnyTag = true, 0, false
	}
	if in.Kind == LDeleteDead {
		return true, slices.Delete(n, i, i+1)
	}
	h := n.holder(n[i].Unique) // another job: n[i] is dead
	if out.KeyHeld {
		return h >= 0, n
	}
	if h >= 0 {
		// Requeued with its key held: only if a Lease buried the holder
		// (its last attempt expired) since, freeing the key.
		if !(n[h].exhausted() && n[h].due(in.Now)) {
			return false, s
		}
		n[h].Dead, n[h].Tag, n[h].AnyTag = true, 0, false
	}
	r := n[i]
	n[i] = JobRecord{Job: r.Job, Vest: in.Now, Prio: r.Prio, Max: r.Max, Unique: r.Unique}
	return true, n
}

// observed reports whether got, a job's record as read at now, is the
// model's want, and returns want with what the read taught: a job whose
// last lease expired may have been buried by a Lease since, and a lease
// of unknown outcome (AnyTag) has the tag got holds.
func observed(want, got JobRecord, now int64) (JobRecord, bool) {
	if got.Job != want.Job {
		return want, false
	}
	if got.Dead && !want.Dead && want.exhausted() && want.due(now) {
		want.Dead, want.Tag, want.AnyTag = true, 0, false // buried by a Lease
	}
	if want.AnyTag {
		// Leased by a Lease of unknown outcome: any tag.
		if got.Dead || got.Tag == 0 || got.AnyTag {
			return want, false
		}
		want.Tag, want.AnyTag = got.Tag, false
	}
	if got.Dead != want.Dead {
		return want, false
	}
	if want.Dead {
		// Dead at its last counted attempt: its record keeps the count
		// (its vesting time is its death's, which the model does not
		// know).
		ok := got.Attempts == want.Attempts && got.Max == want.Max && got.Prio == want.Prio && got.Unique == want.Unique
		return want, ok
	}
	got.Ghost = want.Ghost // the model's only
	return want, got == want
}

// ghostBefore reports whether s holds a job taken unseen by a retried
// Lease that returned before call (which a Cancel must have removed by
// then); never for call 0.
func (s leaseState) ghostBefore(call int64) bool {
	for _, r := range s {
		if r.Ghost != 0 && r.Ghost < call {
			return true
		}
	}
	return false
}

// retriedLeaseStep is the step of a retried Lease (see LeaseModel): the
// states its known step leaves (none if that is impossible, but an
// ErrEmpty may also be a replay that found its jobs cancelled), each also
// with some of the jobs it could lease, up to in.N in all, taken unseen
// (Ghost).
func retriedLeaseStep(s leaseState, in LeaseInput, out LeaseOutput, k int) []any {
	var next []any
	ok, n := leaseStep(s, in, out, k)
	switch {
	case ok:
		next = append(next, n)
	case !out.Empty:
		return nil
	default:
		n = s
	}
	if len(out.Leases) >= in.N {
		return next
	}
	var eligible []int
	for i, r := range s {
		if r.due(in.Now) && !r.exhausted() && !slices.ContainsFunc(out.Leases, func(l LeasedJob) bool { return l.Job == r.Job }) {
			eligible = append(eligible, i)
		}
	}
	var pick func(from int, m leaseState, taken int)
	pick = func(from int, m leaseState, taken int) {
		for j := from; j < len(eligible); j++ {
			g := slices.Clone(m)
			i := eligible[j]
			g[i].Attempts++
			g[i].Tag, g[i].AnyTag, g[i].Ghost = 0, true, in.Ret
			g[i].Vest = in.Now + in.D
			next = append(next, g)
			if taken+1 < in.N {
				pick(j+1, g, taken+1)
			}
		}
	}
	pick(0, n.(leaseState), len(out.Leases))
	return next
}

// holder returns the index of the job in the queue (not dead) that holds
// unique key k, or -1 (always for k "").
func (s leaseState) holder(k string) int {
	if k == "" {
		return -1
	}
	for i, r := range s {
		if !r.Dead && r.Unique == k {
			return i
		}
	}
	return -1
}

// held returns the unique-key index s implies: the key of every job in
// the queue that has one, sorted by key.
func (s leaseState) held() []KeyHold {
	var out []KeyHold
	for _, r := range s {
		if !r.Dead && r.Unique != "" {
			out = append(out, KeyHold{Key: r.Unique, Job: r.Job})
		}
	}
	slices.SortFunc(out, func(a, b KeyHold) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// shortID names a job in a written history: the hex of its ID's first 4
// bytes (IDs are random: they differ there within one history).
func shortID(job string) string {
	return hex.EncodeToString([]byte(job[:min(len(job), 4)]))
}

// describeLeaseOp writes an operation for a history: its kind, its
// inputs that matter to the model, and its output, with short job IDs
// (shortID) and times in µs.
func describeLeaseOp(in LeaseInput, out LeaseOutput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v now=%d", in.Kind, in.Now)
	switch in.Kind {
	case LAdd:
		fmt.Fprintf(&b, " vest=%d prio=%d max=%d", in.Vest, in.Prio, in.Max)
		if in.Unique != "" {
			fmt.Fprintf(&b, " key=%s", in.Unique)
		}
	case LAddBatch:
		for i, j := range in.Batch {
			fmt.Fprintf(&b, " [%d] vest=%d prio=%d max=%d", i, j.Vest, j.Prio, j.Max)
			if j.Unique != "" {
				fmt.Fprintf(&b, " key=%s", j.Unique)
			}
		}
	case LLease:
		fmt.Fprintf(&b, " n=%d d=%d", in.N, in.D)
		if in.Retried {
			b.WriteString(" retried")
		}
		if in.Tight {
			b.WriteString(" tight")
		}
	case LAck, LNack, LExtend, LRelease:
		fmt.Fprintf(&b, " job=%s tag=%x", shortID(in.Job), in.Tag)
		switch in.Kind {
		case LNack, LRelease:
			fmt.Fprintf(&b, " vest=%d", in.Vest)
		case LExtend:
			fmt.Fprintf(&b, " d=%d", in.D)
		}
	case LCancel, LJob, LRequeue, LDeleteDead:
		fmt.Fprintf(&b, " job=%s", shortID(in.Job))
	}
	b.WriteString(" -> ")
	switch {
	case out.Unknown:
		b.WriteString("unknown")
		if in.Kind == LAdd && out.Job != "" {
			fmt.Fprintf(&b, ", its job %s seen", shortID(out.Job))
		}
		for i, a := range out.Added {
			if a.Job != "" {
				fmt.Fprintf(&b, ", [%d] %s seen", i, shortID(a.Job))
			}
		}
	case in.Kind == LAddBatch && out.TooLarge:
		b.WriteString("batch too large")
	case in.Kind == LAddBatch:
		for i, a := range out.Added {
			if i > 0 {
				b.WriteString(" ")
			}
			switch {
			case a.Duplicate:
				fmt.Fprintf(&b, "[%d] duplicate of %s", i, shortID(a.Job))
			default:
				fmt.Fprintf(&b, "[%d] %s", i, shortID(a.Job))
			}
		}
	case in.Kind == LAdd && out.Duplicate:
		fmt.Fprintf(&b, "duplicate of %s", shortID(out.Job))
	case in.Kind == LAdd:
		b.WriteString(shortID(out.Job))
	case out.Empty:
		b.WriteString("empty")
	case in.Kind == LLease:
		for i, l := range out.Leases {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s tag=%x attempt=%d", shortID(l.Job), l.Tag, l.Attempt)
		}
	case out.Lost:
		b.WriteString("lease lost")
	case out.NotFound:
		b.WriteString("not found")
	case out.KeyHeld:
		b.WriteString("key held")
	case in.Kind == LNack && out.Dead:
		b.WriteString("dead")
	case in.Kind == LJob:
		b.WriteString(out.Record.String())
	case in.Kind == LObserve:
		fmt.Fprintf(&b, "%v held=[", leaseState(out.Jobs))
		for i, h := range out.Held {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(&b, "%s:%s", h.Key, shortID(h.Job))
		}
		b.WriteString("]")
	default:
		b.WriteString("ok")
	}
	return b.String()
}

// String describes the record for a history: its job (shortID), whether
// it is dead or leased (tag, or any tag), its vesting time or deadline,
// attempts of max, priority and unique key.
func (r JobRecord) String() string {
	var b strings.Builder
	b.WriteString(shortID(r.Job))
	switch {
	case r.Dead:
		b.WriteString(" dead")
	case r.AnyTag:
		b.WriteString(" leased tag=?")
	case r.Tag != 0:
		fmt.Fprintf(&b, " leased tag=%x", r.Tag)
	default:
		b.WriteString(" queued")
	}
	fmt.Fprintf(&b, " vest=%d att=%d/%d prio=%d", r.Vest, r.Attempts, r.Max, r.Prio)
	if r.Unique != "" {
		fmt.Fprintf(&b, " key=%s", r.Unique)
	}
	if r.Ghost != 0 {
		fmt.Fprintf(&b, " ghost<%d", r.Ghost)
	}
	return b.String()
}

// String describes the state for a history: its records, by job ID.
func (s leaseState) String() string {
	parts := make([]string, len(s))
	for i, r := range s {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
