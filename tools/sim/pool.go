package sim

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// poolShutdownTimeout is the pools' ShutdownTimeout when not negative: an
// odd duration, so that the harness knows Run's deadline among the
// clock's timers.
const poolShutdownTimeout = 7*time.Second + 3*time.Millisecond

// poolExtendEvery is the pools' ExtendEvery: an odd duration too, so
// that the harness knows the heartbeats' timers among the clock's.
const poolExtendEvery = 20*time.Second + 11*time.Millisecond

// poolLeaseDuration is the queue's and the pools' LeaseDuration: the
// clock moves by less than it at once while the pools run, so that no
// lease a heartbeat extends expires under a running handler.
const poolLeaseDuration = time.Minute

// poolArmedFence is the duration of the timer the harness arms before a
// cycle, so that it knows once the reader of the clock's Armed channel
// reaches it that every heartbeat's timer of the cycles before is counted.
const poolArmedFence = time.Nanosecond

// poolReleaseTimeout is the pools' ReleaseTimeout: longer than any run of
// the harness, since the clock, shared by the pools, moves past one
// pool's shutdown deadline for another's and would otherwise pass a
// pool's release timeout while its releases are still under way.
const poolReleaseTimeout = time.Hour

// RunPoolShutdowns runs JobQueue.Run pools on one queue, with handlers,
// and stops them mid-flight again and again, under injected faults. Each
// cycle adds jobs, starts the pools, waits until some handlers are
// blocked in their jobs (some honour their context, some ignore it) and
// a few others have finished, and cancels every pool at once, in one of
// three ways: ShutdownTimeout negative (every in-flight job abandoned at
// once); the blocked handlers that honour their context told to finish
// and acked before the deadline passes, the others abandoned; or the
// deadline passed at once, racing the acks of the handlers told to finish.
// Commits interrupted by the cancel may land late, and StopFailProb fails
// the pools' transactions while they stop.
//
// Once every Run has returned, the queue is read straight from the database:
// a job released at shutdown (Outcome Abandoned, Err nil) must be queued,
// due at once, with its attempt count back to what it was before that lease;
// a job still leased must be explained by a database failure the pool
// reported (a Release that failed, an ack or nack that failed, a lease in
// flight it could not settle); anything else is hidden until its lease
// expires, a failure, and so is an ack, nack or release of a handler's
// result that the pool's own abandonment cut short. Then the handlers that
// ignored their context return, and call Task.Ack: it must fail with
// ErrLeaseLost for a job the pool released. At the end, every job is drained
// and accounted for: acked once (an Outcome Acked, a Task.Ack or the drain's
// Ack) or dead once with MaxAttempts counted attempts, never both, never
// lost.
//
// Cancels remove jobs while the pools run (PoolConfig.CancelProb): as
// they start, racing the handlers' leases and acks, and mid-flight, of
// blocked handlers' jobs, of jobs no handler has started and of IDs never
// added; then the clock moves by ExtendEvery at times, so that the
// heartbeats find the cancelled jobs' leases lost. Cancel removes a job
// for good, and the pool promises no more than this of a run of it
// already under way (its lease taken before the Cancel committed): the
// handler goes on until it returns or a heartbeat finds the lease lost
// and ends its context, and then its ack, nack or release fails (Outcome
// LeaseLost, or Abandoned with ErrLeaseLost), as does its Task.Ack. So
// the harness checks that a handler run that started after the Cancel
// returned holds the very lease the Cancel removed (a Job lookup in the
// Cancel's transaction tells which; none if the job was queued), that no
// run acks, nacks, snoozes or releases a job after its Cancel returned,
// that a handler's context ends before the pools stop only if its job was
// cancelled, that no heartbeat extends a lease after its job's Cancel
// returned (an extension that reads the job after the Cancel committed
// finds the lease lost), and that a cancelled job is neither acked (by
// the pool or a Task.Ack) nor dead: every job is acked, dead or cancelled
// once. At each cycle's end and after the drain, nothing of a removed job
// may be left and Stats and the bucket counters must be exact
// (checkAccounts).
//
// Before the mid-flight Cancels, the clock moves at times well past the
// lease duration while the blocked handlers hold their jobs (the long
// run, PoolConfig.LongRunProb, pool_heartbeat.go), in steps that a
// heartbeat extending every ExtendEvery outpaces, each waited for until
// every blocked handler's heartbeat has extended its lease: a job no
// Cancel removed must stay under its handler's lease, unexpired, its
// deadline the clock's time plus the lease duration, its attempt count
// unchanged, no other run of it started and its handler's context not
// ended.
func RunPoolShutdowns(ctx context.Context, seed int64, cfg PoolConfig) (PoolResult, error) {
	var res PoolResult
	if err := cfg.check(); err != nil {
		return res, err
	}
	db := memdb.New(memdb.WithSeed(seed), memdb.WithFaults(cfg.Faults), memdb.WithLatency(cfg.Latency),
		memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	armed := make(chan time.Duration, 64)
	clock.Armed = armed
	deadlines := make(chan struct{}, 1024) // a Run armed its shutdown deadline
	done := make(chan struct{})
	defer close(done)
	h := &poolHarness{acks: map[string]int{}, failedAcks: map[string]bool{}, cancels: map[string][]poolCancel{},
		fenced: make(chan struct{}, 1)}
	go func() {
		for {
			select {
			case d := <-armed:
				switch d {
				case poolShutdownTimeout:
					select {
					case deadlines <- struct{}{}:
					default:
					}
				case poolExtendEvery: // a heartbeat's timer
					h.beats.Add(1)
				case poolArmedFence:
					select {
					case h.fenced <- struct{}{}:
					default: // the cycle that armed it gave up (ctx ended)
					}
				}
				// Any timer: a heartbeat's, or an idle worker's in
				// LeaseWait, which the long run's waits look at the
				// queue after.
				if c := h.cur.Load(); c != nil {
					c.poke()
				}
			case <-done:
				return
			}
		}
	}()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "pool"})
	if err != nil {
		return res, err
	}
	const lease = poolLeaseDuration
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: cfg.MaxAttempts, Clock: clock,
		LeaseDuration: lease, RetryBase: time.Second, RetryMax: 4 * time.Second, StatsResolution: leaseStatsResolution})
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9001))
	pdb := &stopFailing{Database: db, prob: cfg.StopFailProb, rng: rand.New(rand.NewPCG(uint64(seed), 0xfa11))}
	if cfg.plantPools != nil {
		pdb.Database = cfg.plantPools(db)
	}
	h.plant = cfg.plantCancel
	var jobs []fdbqueue.JobID
	for cycle := range cfg.Cycles {
		// Every live job due: leases and retry delays have passed.
		clock.Advance(2*lease + time.Second)
		if err := dueAtCycleStart(ctx, db, sub, clock, &res); err != nil {
			return res, fmt.Errorf("cycle %d: %w", cycle, err)
		}
		for range cfg.JobsPerCycle {
			r, err := q.Add(ctx, db, fdbqueue.Job{Value: binary.BigEndian.AppendUint64(nil, uint64(len(jobs)))})
			if err != nil {
				return res, err
			}
			jobs = append(jobs, r.ID)
		}
		h.jobs = jobs
		if err := h.cycle(ctx, q, db, pdb, clock, deadlines, sub, rng, cfg, &res); err != nil {
			return res, fmt.Errorf("cycle %d: %w", cycle, err)
		}
		res.Cycles++
	}

	if err := drainJobs(ctx, db, q, func() { clock.Advance(2*lease + time.Second) }, h.acks); err != nil {
		return res, err
	}
	final, _, err := observeJobs(ctx, db, sub, nil)
	if err != nil {
		return res, err
	}
	if err := checkAccountsInto(ctx, db, q, sub, &res.Leftovers, &res.CountErrors); err != nil {
		return res, err
	}
	dead, err := deadAfterDrain(final, &res.DeadAttempts)
	if err != nil {
		return res, err
	}
	for _, id := range jobs {
		job := string(id[:])
		res.Added++
		switch n, c := h.acks[job], len(h.cancels[job]); {
		case n > 1:
			res.AckedTwice++
		case c > 1:
			res.CancelledTwice++
		case c == 1 && n == 1:
			res.CancelledAndAcked++
		case c == 1 && dead[job]:
			res.CancelledAndDead++
		case n == 1 && dead[job]:
			res.AckedAndDead++
		case n == 1:
			res.Acked++
		case c == 1:
			res.Cancelled++
		case dead[job]:
			res.Dead++
		case h.failedAcks[job]:
			res.AckedUnknown++
		default:
			res.Lost++
		}
	}
	for _, cs := range h.cancels {
		for _, k := range cs {
			switch {
			case !k.known:
				res.CancelLeaseUnknown++
			case k.lease == [16]byte{}:
				res.CancelledQueued++
			default:
				res.CancelledLeased++
			}
		}
	}
	res.CancelNotFound = h.cancelNotFound
	res.Stats = db.Stats()
	return res, nil
}

// poolHarness is one seed's accounts across cycles.
type poolHarness struct {
	acks       map[string]int   // successful acks per job
	failedAcks map[string]bool  // jobs with an ack that failed (it may have committed)
	jobs       []fdbqueue.JobID // every job added, in order
	// seq orders the handler runs' starts and returns, the Cancels' calls
	// and returns and the pools' stops.
	seq atomic.Int64
	// cancels is the successful Cancels per job, cancelNotFound the count
	// of those that found no job in the queue.
	mu             sync.Mutex
	cancels        map[string][]poolCancel
	cancelNotFound int
	// beats counts the heartbeats' timers armed (poolExtendEvery) in the
	// cycle under way, cur, poked at every timer armed; fenced receives
	// once the poolArmedFence timer is counted.
	beats  atomic.Int64
	cur    atomic.Pointer[poolCycle]
	fenced chan struct{}
	plant  func(kv.Database) kv.Database // PoolConfig.plantCancel
}

// poolCancel is a successful Cancel: its call and return (poolHarness.seq)
// and, if known, the job's lease as the Cancel committed (zero: queued).
type poolCancel struct {
	call, ret int64
	known     bool
	lease     [16]byte
}

// handlerRun is one handler call (one lease), as the handler and its
// Outcome reported it.
type handlerRun struct {
	job        string
	start, ret int64 // poolHarness.seq as it started and returned (0: not seen)
	blocker    bool  // one of the cycle's first starts, which block
	honours    bool  // a blocker that returns when told to finish or when its context ends
	endedEarly bool  // its context ended before the pools stopped
	reported   bool  // its Outcome came
	result     fdbqueue.Result
	err        error
	task       *fdbqueue.Task // the handler's: its Lease is the latest the heartbeat extended
	deadline   time.Time      // its lease's deadline as the handler started
}

// settled reports whether r's Outcome says the pool acked, nacked,
// snoozed or released its job.
func (r *handlerRun) settled() bool {
	switch r.result {
	case fdbqueue.Acked, fdbqueue.Retried, fdbqueue.DeadLettered, fdbqueue.Snoozed:
		return r.reported
	case fdbqueue.Abandoned:
		return r.reported && r.err == nil
	}
	return false
}

// cancelled reports whether a Cancel removed job.
func (h *poolHarness) cancelled(job string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cancels[job]) > 0
}

// cancel cancels job id in a transaction of its own that first looks it
// up with Job, so that the lease the Cancel removes (if any) is known,
// and records the Cancel.
func (h *poolHarness) cancel(ctx context.Context, q *fdbqueue.JobQueue, db kv.Database, id fdbqueue.JobID) error {
	k := poolCancel{call: h.seq.Add(1)}
	opID := fdbqueue.NewOpID() // one for every attempt: the Cancel is applied once
	if h.plant != nil {
		db = h.plant(db)
	}
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		k.known, k.lease = false, [16]byte{}
		info, err := q.Job(ctx, tr, id)
		switch {
		case errors.Is(err, fdbqueue.ErrJobNotFound):
			// A retry after its commit applied: the Cancel replays.
		case err != nil:
			return err
		default:
			k.known, k.lease = info.State != fdbqueue.JobDead, info.LeaseID
		}
		return q.Cancel(ctx, tr, id, fdbqueue.WithOpID(opID))
	})
	k.ret = h.seq.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err == nil:
		h.cancels[string(id[:])] = append(h.cancels[string(id[:])], k)
	case errors.Is(err, fdbqueue.ErrJobNotFound):
		h.cancelNotFound++
	default:
		return fmt.Errorf("Cancel: %w", err)
	}
	return nil
}

// checkCancels checks c's handler runs against the successful Cancels
// so far, and counts what they did (see PoolResult).
func (h *poolHarness) checkCancels(c *poolCycle, res *PoolResult) {
	h.mu.Lock()
	defer h.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for lease, r := range c.runs {
		cs := h.cancels[r.job]
		if len(cs) == 0 {
			if r.endedEarly {
				res.LostUncancelled++
			}
			continue
		}
		if r.endedEarly {
			res.HeartbeatLost++
		}
		if r.reported && (r.result == fdbqueue.LeaseLost || r.result == fdbqueue.Abandoned && errors.Is(r.err, fdbqueue.ErrLeaseLost)) {
			res.LostToCancel++
		}
		for _, k := range cs {
			if k.ret < c.beatSeq && c.extendedPastBeat(r) {
				res.ExtendedAfterCancel++
				break
			}
		}
		for _, k := range cs {
			if r.start > k.ret && k.known && (k.lease == [16]byte{} || lease != k.lease) {
				res.LeasedAfterCancel++
			}
			// Its ack, nack or release came after the Cancel returned:
			// the run started or its handler returned after it, or the
			// pools stopped after it and abandoned the run.
			after := r.start > k.ret || r.ret > k.ret || r.result == fdbqueue.Abandoned && c.stopAt > k.ret
			if after && r.settled() {
				res.SettledAfterCancel++
			}
		}
	}
}

// poolCycle is one cycle's handlers and outcomes.
type poolCycle struct {
	h         *poolHarness
	rng       *rand.Rand
	blockers  int           // the first starts that block
	finish    chan struct{} // closed: blocked handlers that honour their context return nil
	unblock   chan struct{} // closed: every blocked handler returns
	changed   chan struct{} // a start or an outcome
	mu        sync.Mutex
	started   int
	quickDone int
	inFlight  int // handlers started, outcome not yet reported
	stubborn  int // of which blocked and ignoring their context (their outcome not yet reported)
	outcomes  []fdbqueue.Outcome
	tasks     map[string][]*fdbqueue.Task // the handlers that ignore their context, by job
	quick     map[[16]byte]bool           // the leases of the handlers that do not block
	stubborns map[[16]byte]bool           // the leases of those that ignore their context
	runs      map[[16]byte]*handlerRun    // by lease
	stopping  bool                        // the pools are told to stop
	stopAt    int64                       // poolHarness.seq as they were
	// beatSeq is poolHarness.seq as cancelMidFlight moved the clock by
	// ExtendEvery (0: it did not), beatFrom the clock's time before.
	beatSeq  int64
	beatFrom time.Time
	// longRunBroken: the long run (pool_heartbeat.go) found a lease lost
	// and stopped at once, the heartbeats' timers perhaps not all armed,
	// so cancelMidFlight does not move the clock by ExtendEvery after it.
	longRunBroken bool
}

// extendedPastBeat reports whether r's lease was taken before the clock
// moved by ExtendEvery and a heartbeat extended it after: its deadline is
// now later than any deadline a lease taken or extended before could have
// (the clock's time then plus the lease duration). c.mu must be held.
func (c *poolCycle) extendedPastBeat(r *handlerRun) bool {
	if c.beatSeq == 0 || r.task == nil {
		return false
	}
	limit := c.beatFrom.Add(poolLeaseDuration)
	return !r.deadline.After(limit) && r.task.Lease().Deadline.After(limit)
}

// run returns the run of lease, made on first use; c.mu must be held.
func (c *poolCycle) run(l fdbqueue.Lease) *handlerRun {
	r := c.runs[l.ID]
	if r == nil {
		r = &handlerRun{job: string(l.JobID[:])}
		c.runs[l.ID] = r
	}
	return r
}

func (c *poolCycle) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// dueAtCycleStart counts the live jobs not due as a cycle starts
// (PoolResult.NotDueAtCycle), the clock having moved by twice the lease
// duration since the last cycle's pools stopped, and moves the clock on
// until the last of them is due: the cycle relies on every live job being
// due as it starts (its long run would otherwise wait for the run of a
// lease no pool holds until the stall guard fired), and the seed, failed,
// goes on to check the rest.
func dueAtCycleStart(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, clock *queuetest.Clock, res *PoolResult) error {
	now := clock.Now().UnixMicro()
	last := now
	err := eachRecord(ctx, db, sub, func(_ []byte, rec JobRecord) error {
		if !rec.Dead && rec.Vest > now {
			res.NotDueAtCycle++
			last = max(last, rec.Vest)
		}
		return nil
	})
	clock.Advance(time.Duration(last-now) * time.Microsecond)
	return err
}

// errPoolStuck is poolCycle.wait's error when its guard fires.
var errPoolStuck = errors.New("sim: stuck waiting for the pools' handlers")

// wait waits until cond holds (checked under c.mu at every change). A
// guard fails the seed with errPoolStuck if that takes a minute: the
// harness is stuck (a check that a handler's state breaks should end
// the wait instead, so that the seed fails by that check at once).
func (c *poolCycle) wait(ctx context.Context, what string, cond func() bool) error {
	guard := time.NewTimer(time.Minute)
	defer guard.Stop()
	for {
		c.mu.Lock()
		ok := cond()
		c.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-c.changed:
		case <-guard.C:
			return fmt.Errorf("%w (%s)", errPoolStuck, what)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *poolCycle) handler(ctx context.Context, task *fdbqueue.Task) error {
	c.mu.Lock()
	run := c.run(task.Lease())
	run.start = c.h.seq.Add(1)
	run.task, run.deadline = task, task.Lease().Deadline
	defer func() {
		c.mu.Lock()
		run.ret = c.h.seq.Add(1)
		c.mu.Unlock()
	}()
	c.started++
	c.inFlight++
	n := c.started
	x := c.rng.Float64()
	stubborn := n <= c.blockers && x < 0.4
	run.blocker, run.honours = n <= c.blockers, n <= c.blockers && !stubborn
	if stubborn {
		c.stubborn++
		id := task.Lease().JobID
		job := string(id[:])
		c.tasks[job] = append(c.tasks[job], task)
		c.stubborns[task.Lease().ID] = true
	}
	if n > c.blockers {
		c.quick[task.Lease().ID] = true
	}
	c.mu.Unlock()
	c.poke()
	switch {
	case stubborn:
		// Ignores ctx, but tells when it ended (the long run and
		// checkCancels look at it).
		select {
		case <-c.unblock:
			return nil
		case <-ctx.Done():
			c.mu.Lock()
			run.endedEarly = !c.stopping
			c.mu.Unlock()
			c.poke()
		}
		<-c.unblock
		return nil
	case n <= c.blockers:
		select {
		case <-c.finish:
			return nil
		case <-ctx.Done():
			c.mu.Lock()
			run.endedEarly = !c.stopping // else most likely the shutdown's
			c.mu.Unlock()
			return ctx.Err()
		}
	case x < 0.75:
		return nil
	case x < 0.85:
		return errors.New("sim: handler failed")
	case x < 0.92:
		return fdbqueue.Snooze(0)
	default:
		return fdbqueue.Snooze(time.Second)
	}
}

func (c *poolCycle) outcome(o fdbqueue.Outcome) {
	c.mu.Lock()
	run := c.run(o.Lease)
	run.reported, run.result, run.err = true, o.Result, o.Err
	c.outcomes = append(c.outcomes, o)
	c.inFlight--
	if c.quick[o.Lease.ID] {
		c.quickDone++
	}
	if c.stubborns[o.Lease.ID] {
		c.stubborn--
	}
	c.mu.Unlock()
	c.poke()
}

// cycle starts the pools, stops them mid-flight and checks the queue.
func (h *poolHarness) cycle(ctx context.Context, q *fdbqueue.JobQueue, db *memdb.DB, pdb *stopFailing, clock *queuetest.Clock,
	deadlines chan struct{}, sub fdbqueue.Subspace, rng *rand.Rand, cfg PoolConfig, res *PoolResult) error {
	for len(deadlines) > 0 {
		<-deadlines
	}
	// Every timer the cycles before armed is counted (each Run returned,
	// and with it each heartbeat): beats counts this cycle's only.
	clock.After(poolArmedFence)
	select {
	case <-h.fenced:
	case <-ctx.Done():
		return ctx.Err()
	}
	slots := cfg.Pools * cfg.Workers
	c := &poolCycle{h: h, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), blockers: 1 + rng.IntN(max(slots-1, 1)),
		finish: make(chan struct{}), unblock: make(chan struct{}), changed: make(chan struct{}, 1),
		tasks: map[string][]*fdbqueue.Task{}, quick: map[[16]byte]bool{}, stubborns: map[[16]byte]bool{},
		runs: map[[16]byte]*handlerRun{}}
	h.beats.Store(0)
	h.cur.Store(c)
	cycleJobs := h.jobs[len(h.jobs)-cfg.JobsPerCycle:]
	mode := rng.IntN(3)
	timeout := poolShutdownTimeout
	if mode == 0 {
		timeout = -1
	}
	quick := rng.IntN(3)
	logs := &logSink{}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, cfg.Pools)
	for range cfg.Pools {
		go func() {
			ran <- q.Run(runCtx, pdb, c.handler, fdbqueue.PoolOptions{Workers: cfg.Workers, LeaseDuration: poolLeaseDuration,
				ExtendEvery: poolExtendEvery, ShutdownTimeout: timeout, ReleaseTimeout: poolReleaseTimeout, Logger: slog.New(&logTap{sink: logs}), OnOutcome: c.outcome})
		}()
	}
	// A Cancel of one of the cycle's jobs as the pools start, racing
	// their leases and the quick handlers' acks.
	var raced chan error
	if rng.Float64() < cfg.CancelProb {
		id := cycleJobs[rng.IntN(len(cycleJobs))]
		raced = make(chan error, 1)
		go func() { raced <- h.cancel(ctx, q, db, id) }()
	}
	// Mid-flight: the blockers hold their jobs, and a few quick jobs are
	// done (enough jobs are due for both, see RunPoolShutdowns).
	if err := c.wait(ctx, "for the blockers to start and the quick jobs to be done", func() bool {
		return c.started >= c.blockers && c.quickDone >= quick
	}); err != nil {
		return err
	}
	if raced != nil {
		if err := <-raced; err != nil {
			return err
		}
	}
	if err := h.longRun(ctx, db, sub, clock, c, rng, cfg, res); err != nil {
		return err
	}
	if err := h.cancelMidFlight(ctx, q, db, clock, c, rng, cfg); err != nil {
		return err
	}
	c.mu.Lock()
	c.stopping, c.stopAt = true, h.seq.Add(1)
	c.mu.Unlock()
	pdb.stopping(true)
	stop()
	close(c.finish)
	returned := 0
	for returned < cfg.Pools {
		select {
		case err := <-ran:
			returned++
			if err != nil {
				res.RunErrors++
			}
		case <-deadlines:
			if mode == 1 {
				// Let the handlers told to finish be acked first.
				if err := c.wait(ctx, "for the handlers told to finish to be acked", func() bool { return c.inFlight == c.stubborn }); err != nil {
					return err
				}
			}
			clock.Advance(poolShutdownTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	pdb.stopping(false)

	// Every Run returned: read the queue, once the commits interrupted
	// at shutdown have landed (or conflicted), as FDB's do.
	db.AwaitLateLandings()
	c.mu.Lock()
	outcomes := slices.Clone(c.outcomes)
	res.Handled += c.started
	c.mu.Unlock()
	recs, _, err := observeJobs(ctx, db, sub, nil)
	if err != nil {
		return err
	}
	byJob := map[string]JobRecord{}
	for _, r := range recs {
		byJob[r.Job] = r
	}
	now := clock.Now().UnixMicro()
	explained := map[string]bool{} // jobs a reported failure may leave leased
	released := map[string]fdbqueue.Lease{}
	for _, o := range outcomes {
		job := string(o.Lease.JobID[:])
		switch o.Result {
		case fdbqueue.Acked:
			h.acks[job]++
		case fdbqueue.Abandoned:
			res.Abandoned++
			switch {
			case o.Err == nil:
				res.Released++
				released[job] = o.Lease
			case errors.Is(o.Err, fdbqueue.ErrLeaseLost) && h.cancelled(job):
				// Its job cancelled: counted in LostToCancel.
			default:
				res.ReleaseFailed++
				explained[job] = true
			}
		case fdbqueue.Failed:
			// An ack or a nack that failed: the job may stay leased until
			// the lease expires, or, if an ack committed, be gone.
			// A failure of the database explains a job left leased; the
			// pool's own cancellation (the abandonment cutting an ack short)
			// does not.
			res.FailedAtStop++
			h.failedAcks[job] = true
			if errors.Is(o.Err, context.Canceled) {
				res.FailedCut++
			} else {
				explained[job] = true
			}
		}
	}
	unsettled := 0 // leases in flight the pools could not settle (job unknown)
	for _, l := range logs.lines() {
		switch {
		case strings.Contains(l.msg, "could not settle a lease interrupted by the shutdown"):
			res.SettleFailed++
			unsettled++
		case strings.Contains(l.msg, "could not release a job leased as the pool stopped"):
			res.SettleFailed++
			explained[l.job] = true
		case strings.Contains(l.msg, "released a job leased as the pool stopped"):
			res.Settled++
		}
	}
	for job, l := range released {
		r, ok := byJob[job]
		switch {
		case !ok || r.Dead:
			res.ReleasedGone++
		case r.Tag != 0:
			// Leased again: by a lease in flight at the shutdown, then
			// not released (settling failed), or hidden.
		case r.Attempts != l.Attempt-1:
			res.AttemptBurned++
		case r.Vest > now:
			res.NotDue++
		}
	}
	for _, r := range recs {
		if r.Dead || r.Tag == 0 || r.Vest <= now {
			continue // not leased, or its lease expired (leasable)
		}
		switch {
		case explained[r.Job]:
			res.HiddenExplained++
		case unsettled > 0:
			unsettled--
			res.HiddenExplained++
		default:
			res.Hidden++
		}
	}

	// The abandoned handlers that ignored their context return now, and
	// ack in their own transaction, as an abandoned run would.
	close(c.unblock)
	for job, tasks := range c.tasks {
		for _, task := range tasks {
			err := db.Transact(ctx, func(tr kv.Transaction) error { return task.Ack(ctx, tr) })
			switch {
			case errors.Is(err, fdbqueue.ErrLeaseLost) && h.cancelled(job):
				res.LateAckCancelled++
			case errors.Is(err, fdbqueue.ErrLeaseLost):
				res.LateAckLost++
			case err != nil:
				return err
			default:
				// Acked: its lease was still the job's, which it must not
				// be if the pool released it.
				if l, ok := released[job]; ok && task.Lease().ID == l.ID {
					res.LateAcked++
				}
				res.LateAckedHeld++
				h.acks[job]++
			}
		}
	}
	h.checkCancels(c, res)
	return checkAccountsInto(ctx, db, q, sub, &res.Leftovers, &res.CountErrors)
}

// cancelMidFlight runs the mid-flight Cancels of cycle c (see
// PoolConfig.CancelProb): of the blocked handlers' jobs, of a job no
// handler of the cycle has started, and of an ID never added. Then, if a
// blocked handler that honours its context lost its job, it moves the
// clock by ExtendEvery (HeartbeatProb), once every handler's heartbeat
// has armed its timer, and waits until those handlers have been told by
// their heartbeats and their outcomes are in, or until a heartbeat
// extended a lost job's lease instead (ExtendedAfterCancel).
func (h *poolHarness) cancelMidFlight(ctx context.Context, q *fdbqueue.JobQueue, db kv.Database, clock *queuetest.Clock,
	c *poolCycle, rng *rand.Rand, cfg PoolConfig) error {
	c.mu.Lock()
	var blocked []string
	started := map[string]bool{}
	for _, r := range c.runs {
		started[r.job] = true
		if r.blocker && r.ret == 0 {
			blocked = append(blocked, r.job)
		}
	}
	c.mu.Unlock()
	slices.Sort(blocked) // the map's order is random; the harness's draws are the seed's
	var targets []fdbqueue.JobID
	for _, job := range blocked {
		if rng.Float64() < cfg.CancelProb {
			var id fdbqueue.JobID
			copy(id[:], job)
			targets = append(targets, id)
		}
	}
	if rng.Float64() < cfg.CancelProb {
		var idle []fdbqueue.JobID
		for _, id := range h.jobs {
			if !started[string(id[:])] {
				idle = append(idle, id)
			}
		}
		if len(idle) > 0 {
			targets = append(targets, idle[rng.IntN(len(idle))])
		}
	}
	if rng.Float64() < cfg.CancelProb {
		var id fdbqueue.JobID
		for i := range id {
			id[i] = byte(rng.IntN(256))
		}
		targets = append(targets, id)
	}
	for _, id := range targets {
		if err := h.cancel(ctx, q, db, id); err != nil {
			return err
		}
	}
	lost := map[string]bool{} // the honouring blockers' cancelled jobs
	for _, job := range blocked {
		if h.cancelled(job) {
			lost[job] = true
		}
	}
	if len(lost) == 0 || rng.Float64() >= cfg.HeartbeatProb || c.longRunBroken {
		return nil
	}
	if err := c.wait(ctx, "for every heartbeat's first timer", func() bool { return h.beats.Load() >= int64(c.started) }); err != nil {
		return err
	}
	c.mu.Lock()
	c.beatSeq, c.beatFrom = h.seq.Add(1), clock.Now()
	c.mu.Unlock()
	// Each heartbeat now extends its lease (JobQueue.Extend, in a
	// transaction of the pool's that memdb retries after
	// commit_unknown_result). Extend keeps no journal, so a retry may
	// extend a lease again, but unlike the lease simulation this harness
	// records no Extend as an operation and no check counts attempts: it
	// sees only what the attempts left. So a retry can neither fail a
	// clean run nor hide a failure here:
	//   - An attempt reads the job and moves its deadline to the clock's
	//     now plus the lease duration, with its bucket counts. An attempt
	//     reported commit_unknown_result is decided before the retry
	//     begins (as FDB's, commitDummyTransaction in
	//     fdbclient/NativeAPI.actor.cpp); one interrupted in flight that
	//     lands later conflicts with any write to the job since it read.
	//     After any number of applied attempts the job is leased under
	//     the same lease, and a retry finds it (Extend looks the job up by
	//     its index entry once an applied attempt moved its record), so it
	//     does not fail with ErrLeaseLost (no LostUncancelled), and
	//     checkAccounts' counts stay exact.
	//   - The Task keeps the last successful attempt's lease, or an older
	//     one if the extension's result was lost (stopFailing): the same
	//     lease ID, which the job's ack, nack or release finds whatever
	//     deadline it carries.
	//   - A heartbeat ends its handler's context on ErrLeaseLost only; a
	//     retry that finds the job cancelled since fails so rightly (the
	//     job is cancelled: HeartbeatLost).
	//   - ExtendedAfterCancel needs a lease deadline past beatFrom plus the
	//     lease duration: only an attempt that read the clock after the
	//     Advance below sets one, and it commits after every Cancel of
	//     lost returned. It either read the job after the Cancel committed
	//     (ErrLeaseLost) or read it before and conflicts with the Cancel's
	//     writes, so no attempt, first or retried, extends the lease.
	// The harness's own Cancels are journaled (one OpID for every attempt)
	// and look the job up again in each attempt, so a retry is recorded as
	// the replay it is (poolCancel.known false).
	clock.Advance(poolExtendEvery)
	// Each lost honouring blocker's heartbeat must find its lease gone and
	// end its context, the handler then returning. A heartbeat that
	// extends a lost job's lease instead (ExtendedAfterCancel, counted by
	// checkCancels) would leave its handler blocked: stop waiting at once
	// rather than until the guard fires.
	return c.wait(ctx, "for the cancelled blockers' heartbeats to end their handlers", func() bool {
		done := true
		for _, r := range c.runs {
			switch {
			case lost[r.job] && c.extendedPastBeat(r):
				return true
			case r.honours && lost[r.job] && !r.reported:
				done = false
			}
		}
		return done
	})
}

// stopFailing is the pools' database: while stopping, a transaction fails
// with probability prob, as one that timed out, before its commit or
// after it landed.
type stopFailing struct {
	kv.Database
	prob float64
	mu   sync.Mutex
	rng  *rand.Rand
	on   bool
}

func (s *stopFailing) stopping(on bool) {
	s.mu.Lock()
	s.on = on
	s.mu.Unlock()
}

// draw returns 0 (no failure), 1 (fail before) or 2 (fail after).
func (s *stopFailing) draw() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.on || s.rng.Float64() >= s.prob {
		return 0
	}
	return 1 + s.rng.IntN(2)
}

func (s *stopFailing) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	switch s.draw() {
	case 1:
		return fmt.Errorf("sim: injected at shutdown: %w", kv.ErrTransactionTimedOut)
	case 2:
		if err := s.Database.Transact(ctx, fn); err != nil {
			return err
		}
		return kv.CommitInterrupted(fmt.Errorf("sim: injected at shutdown: %w", kv.ErrTransactionTimedOut))
	}
	return s.Database.Transact(ctx, fn)
}

// logSink keeps the pools' log lines: the message and the job attribute.
type logSink struct {
	mu  sync.Mutex
	all []logLine
}

type logLine struct{ msg, job string }

func (s *logSink) lines() []logLine {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.all)
}

// logTap is a slog.Handler that records into its sink, the job attribute
// taken from its own attributes or the record's (the raw job ID).
type logTap struct {
	sink  *logSink
	attrs []slog.Attr
}

func (h *logTap) Enabled(context.Context, slog.Level) bool { return true }

func (h *logTap) Handle(_ context.Context, r slog.Record) error {
	job := ""
	take := func(a slog.Attr) bool {
		if a.Key == "job" {
			job = a.Value.String()
		}
		return true
	}
	for _, a := range h.attrs {
		take(a)
	}
	r.Attrs(take)
	if job != "" {
		var id fdbqueue.JobID
		if b, err := hex.DecodeString(job); err == nil && len(b) == len(id) {
			job = string(b)
		}
	}
	h.sink.mu.Lock()
	h.sink.all = append(h.sink.all, logLine{msg: r.Message, job: job})
	h.sink.mu.Unlock()
	return nil
}

func (h *logTap) WithAttrs(as []slog.Attr) slog.Handler {
	return &logTap{sink: h.sink, attrs: append(slices.Clone(h.attrs), as...)}
}

func (h *logTap) WithGroup(string) slog.Handler { return h }
