package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// The long run (PoolConfig.LongRunProb): while the blocked handlers of a
// cycle hold their jobs, the clock moves well past the lease duration, so
// that only the pools' heartbeats keep the leases, and after each step
// the harness checks that they did (PoolResult's Held counters).
//
// Each step is at least ExtendEvery, so that every heartbeat's timer
// (armed at the clock's time of its last extension, or of its lease)
// fires at every step, and under LeaseDuration − ExtendEvery, so that a
// lease extended at one step is still held when the next step's heartbeat
// extends it. Before the first step and after each, the harness waits
// until the pools are quiet (longRun.quiet), so that a step's heartbeats
// are the blocked handlers' only and each can be told to have run:
//   - every handler run but the blocked ones has reported its outcome
//     (its heartbeat has stopped);
//   - no job is due (none is leasable, so no run starts before the step)
//     and every job leased is leased by a run that has started;
//   - each blocked run's heartbeat has done its part of the step: its
//     Task's lease carries a new deadline or its context ended (its job
//     was cancelled as the pools started: its heartbeat found the lease
//     lost);
//   - the heartbeats' timers armed in the cycle (poolHarness.beats) are
//     one per run started plus one per extension seen: each heartbeat arms
//     its first timer as its run starts and one after each extension that
//     succeeded, and nothing else arms a timer of poolExtendEvery (an
//     extension that fails retries after a shorter timer, but none fails
//     before the pools stop: memdb's retry loop retries every fault it
//     injects, and stopFailing fails the pools' transactions only as they
//     stop). So every extension's next timer is armed, and fires at the
//     next step.
//
// A violation seen while waiting (another run of a blocked handler's job,
// its context ended, its record leased otherwise, expired or with more
// attempts) ends the wait at once, so that a lost lease fails the seed by
// its check, not by the harness's stall guard; the long run then stops.
//
// Extend keeps no journal; an attempt reported commit_unknown_result is
// decided before its retry begins (as FDB's, commitDummyTransaction in
// fdbclient/NativeAPI.actor.cpp), and the retry moves the deadline to the
// same time (the clock does not move while the harness waits), so the
// deadline a step's extension leaves is exactly the clock's time plus
// LeaseDuration however many attempts applied (HeldDeadlineWrong).

// heldRun is a blocked handler's run that the long run follows.
type heldRun struct {
	run       *handlerRun
	lease     [16]byte
	tag       uint64 // the lease's tag in the job's record
	attempt   int
	cancelled bool      // a Cancel removed its job as the pools started
	from      time.Time // the Task's lease deadline as the step began
	extended  int       // the extensions seen
	// The violations counted for it.
	lost, expired, grew, ended, wrong bool
}

// longRun is one cycle's long run.
type longRun struct {
	ctx   context.Context
	h     *poolHarness
	c     *poolCycle
	db    kv.Database
	sub   fdbqueue.Subspace
	clock *queuetest.Clock
	held  []*heldRun          // sorted by lease
	jobs  map[string]*heldRun // the held runs whose job no Cancel removed
	step  int                 // the steps taken
	err   error               // quiet's, from reading the queue
	why   string              // why quiet last found the pools busy (c.mu held)
}

// longRun runs cycle c's long run, with probability cfg.LongRunProb,
// and counts what it found in res.
func (h *poolHarness) longRun(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, clock *queuetest.Clock,
	c *poolCycle, rng *rand.Rand, cfg PoolConfig, res *PoolResult) error {
	if rng.Float64() >= cfg.LongRunProb {
		return nil
	}
	p := &longRun{ctx: ctx, h: h, c: c, db: db, sub: sub, clock: clock, jobs: map[string]*heldRun{}}
	c.mu.Lock()
	for id, r := range c.runs {
		if r.blocker && !r.reported && r.task != nil {
			l := r.task.Lease()
			p.held = append(p.held, &heldRun{run: r, lease: id, tag: binary.BigEndian.Uint64(id[:8]), attempt: l.Attempt, from: l.Deadline})
		}
	}
	c.mu.Unlock()
	slices.SortFunc(p.held, func(a, b *heldRun) int { return bytes.Compare(a.lease[:], b.lease[:]) })
	for _, r := range p.held {
		if r.cancelled = h.cancelled(r.run.job); !r.cancelled {
			p.jobs[r.run.job] = r
		}
	}
	res.LongRuns++
	for total := time.Duration(0); ; {
		if err := c.wait(ctx, "for the pools to be quiet in the long run", p.quiet); err != nil {
			if errors.Is(err, errPoolStuck) {
				c.mu.Lock()
				err = fmt.Errorf("%w at step %d: %s", err, p.step, p.why)
				c.mu.Unlock()
			}
			return err
		}
		if p.err != nil {
			return p.err
		}
		broken, err := p.check(res)
		if err != nil {
			return err
		}
		if broken {
			c.mu.Lock()
			c.longRunBroken = true
			c.mu.Unlock()
			return nil
		}
		if total >= 2*poolLeaseDuration {
			return nil
		}
		span := int64((poolLeaseDuration - 2*poolExtendEvery) / time.Microsecond)
		step := poolExtendEvery + time.Duration(rng.Int64N(span))*time.Microsecond
		clock.Advance(step)
		total += step
		p.step++
		res.LongRunSteps++
	}
}

// quiet reports whether the pools are quiet after the step (see the top
// of this file), or a violation was seen; c.mu is held.
func (p *longRun) quiet() bool {
	c := p.c
	if p.err != nil || p.violated() {
		return true
	}
	want := int64(c.started) // the heartbeats' first timers
	for _, r := range c.runs {
		if !r.blocker && !r.reported {
			p.why = fmt.Sprintf("job %x: a run that does not block has not reported", r.job)
			return false
		}
	}
	for _, r := range p.held {
		want += int64(r.extended)
		if r.run.endedEarly || r.run.reported {
			continue // its heartbeat ended its context and stopped
		}
		if p.step > 0 {
			if r.run.task.Lease().Deadline.Equal(r.from) {
				p.why = fmt.Sprintf("job %x: its heartbeat has not extended", r.run.job)
				return false
			}
			want++
		}
	}
	// beats is read before the queue: a timer it counts of a run not
	// started yet was armed after that run's lease committed, which the
	// read below then finds under a lease no run holds.
	if n := p.h.beats.Load(); n < want {
		p.why = fmt.Sprintf("%d heartbeat timers armed of %d", n, want)
		return false
	}
	tags := map[uint64]bool{}
	for id := range c.runs {
		tags[binary.BigEndian.Uint64(id[:8])] = true
	}
	now := p.clock.Now().UnixMicro()
	quiet := true
	p.err = eachRecord(p.ctx, p.db, p.sub, func(_ []byte, rec JobRecord) error {
		switch r := p.jobs[rec.Job]; {
		case r != nil:
			if rec.Dead || rec.Tag != r.tag || rec.Vest <= now || rec.Attempts > r.attempt {
				quiet = true // a violation: check counts it
				return errStopScan
			}
		case rec.Dead:
		case rec.Vest <= now:
			quiet = false // due: a worker is about to lease it
			p.why = fmt.Sprintf("job %x is due (tag %x, attempts %d, %v past)", rec.Job, rec.Tag, rec.Attempts, time.Duration(now-rec.Vest)*time.Microsecond)
		case rec.Tag != 0 && !tags[rec.Tag]:
			quiet = false // leased by a run not started yet
			p.why = fmt.Sprintf("job %x is leased by a run not started (tag %x)", rec.Job, rec.Tag)
		}
		return nil
	})
	if errors.Is(p.err, errStopScan) {
		p.err = nil
	}
	return quiet
}

// errStopScan stops eachRecord once quiet has seen a violation.
var errStopScan = errors.New("sim: scan stopped")

// violated reports whether another run of a held job started, or a held
// run's context ended though its job was not cancelled; c.mu is held.
func (p *longRun) violated() bool {
	for _, r := range p.c.runs {
		if h := p.jobs[r.job]; h != nil && h.run != r {
			return true
		}
	}
	for _, r := range p.jobs {
		if r.run.endedEarly {
			return true
		}
	}
	return false
}

// check counts, once the step's heartbeats ran (or a violation was seen),
// the extensions and the violations of each held run whose job no Cancel
// removed (see PoolResult); broken reports a lost lease, after which the
// long run stops.
func (p *longRun) check(res *PoolResult) (broken bool, err error) {
	recs := map[string]JobRecord{}
	err = eachRecord(p.ctx, p.db, p.sub, func(_ []byte, rec JobRecord) error {
		recs[rec.Job] = rec
		return nil
	})
	if err != nil {
		return false, err
	}
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	now := p.clock.Now()
	deadline := now.Add(poolLeaseDuration)
	others := map[string]bool{} // held jobs another run of which started
	for _, r := range c.runs {
		if h := p.jobs[r.job]; h != nil && h.run != r {
			others[r.job] = true
		}
	}
	for _, r := range p.held {
		d := r.run.task.Lease().Deadline
		extended := p.step > 0 && !d.Equal(r.from)
		if extended {
			r.extended++
			r.from = d
			res.HeldExtended++
		}
		if r.cancelled {
			continue
		}
		rec, ok := recs[r.run.job]
		held := ok && !rec.Dead && rec.Tag == r.tag
		lost := count(!held || others[r.run.job], &r.lost, &res.HeldLeaseLost)
		expired := count(held && rec.Vest <= now.UnixMicro(), &r.expired, &res.HeldLeaseExpired)
		grew := count(ok && rec.Attempts > r.attempt, &r.grew, &res.HeldAttemptsGrew)
		ended := count(r.run.endedEarly, &r.ended, &res.HeldContextEnded)
		// A wrong deadline alone loses nothing yet: the long run goes on,
		// so that a lease it lets expire is seen lost too.
		count(extended && held && (rec.Vest != deadline.UnixMicro() || !d.Equal(deadline)), &r.wrong, &res.HeldDeadlineWrong)
		broken = broken || lost || expired || grew || ended
	}
	return broken, nil
}

// count adds 1 to *n if seen and *once is not yet set, which it then
// sets; it returns seen.
func count(seen bool, once *bool, n *int) bool {
	if seen && !*once {
		*once = true
		*n++
	}
	return seen
}
