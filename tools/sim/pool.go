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
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// PoolConfig configures RunPoolShutdowns.
type PoolConfig struct {
	// Cycles is how often the pools are started and stopped per seed;
	// Pools the pools (JobQueue.Run) running at once on one queue, each
	// with Workers workers; JobsPerCycle the jobs added before each cycle.
	Cycles, Pools, Workers, JobsPerCycle int
	MaxAttempts                          int
	Faults                               memdb.Faults
	Latency                              memdb.Latency
	// StopFailProb is the probability that a transaction of a pool fails
	// while the pools stop (from the cancel until Run returns), as a
	// transaction timeout would: half of them before committing (nothing
	// applied), half after their commit landed (kv.MaybeCommitted). So
	// releases, settling leases, acks and nacks at shutdown fail at times.
	StopFailProb float64
}

// DefaultPoolConfig is a short run with every fault.
func DefaultPoolConfig() PoolConfig {
	return PoolConfig{Cycles: 6, Pools: 2, Workers: 3, JobsPerCycle: 8, MaxAttempts: 3,
		Faults: memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05, TooOld: 0.02, LateLanding: 0.5,
			ReadErrors: 0.02, ReadVersionErrors: 0.01},
		Latency:      memdb.Latency{Commit: memdb.Span{Min: 50 * time.Microsecond, Max: 500 * time.Microsecond}},
		StopFailProb: 0.1}
}

// PoolResult is what one seed of RunPoolShutdowns found.
type PoolResult struct {
	Cycles, Handled int // cycles run; handler calls
	// Conservation: jobs added; acked once (by the pools, an abandoned
	// handler's Task.Ack, or the drain); dead once; gone with no Ack that
	// succeeded but one that failed (it may have committed); and the jobs
	// acked twice, acked and dead, or none of these (lost).
	Added, Acked, Dead, AckedUnknown, AckedTwice, AckedAndDead, Lost int
	// Outcomes at shutdown: Abandoned jobs, Released those whose Release
	// succeeded (each checked: queued, due at once, its attempt given
	// back); ReleaseFailed those whose Release failed (they may stay
	// leased until the lease expires: documented, counted, accepted);
	// FailedAtStop the acks and nacks that failed while the pools stopped
	// (Outcome Failed: the lease expires); Settled the leases in flight at
	// shutdown that the pool settled and released, SettleFailed those it
	// could not settle or release. Hidden is the jobs left leased after
	// every Run returned with none of these failures to explain them;
	// HiddenExplained those the failures explain.
	Abandoned, Released, ReleaseFailed, FailedAtStop, Settled, SettleFailed int
	Hidden, HiddenExplained                                                 int
	// FailedCut counts the acks, nacks and releases of a handler's
	// result that failed because the pool's own abandonment cancelled
	// them: a violation (the job is left leased until its lease expires
	// though nothing failed).
	FailedCut int
	// Violations of the release: a released job whose attempt count was
	// not given back (AttemptBurned), not due at once (NotDue), or not
	// queued at all (ReleasedGone); an abandoned run's Task.Ack that
	// acked a job the pool had released (LateAcked); a dead job without
	// MaxAttempts counted attempts (DeadAttempts); a Run that returned an
	// error (RunErrors).
	AttemptBurned, NotDue, ReleasedGone, LateAcked, DeadAttempts, RunErrors int
	// LateAckLost counts the abandoned runs' Task.Acks that failed with
	// ErrLeaseLost (their job was released), LateAckedHeld those that
	// acked a job whose release had failed (it was still theirs).
	LateAckLost, LateAckedHeld int
	Stats                      memdb.Stats
}

// OK reports whether every check held.
func (r PoolResult) OK() bool {
	return r.AckedTwice == 0 && r.AckedAndDead == 0 && r.Lost == 0 && r.Hidden == 0 && r.AttemptBurned == 0 &&
		r.NotDue == 0 && r.ReleasedGone == 0 && r.FailedCut == 0 && r.LateAcked == 0 && r.DeadAttempts == 0 && r.RunErrors == 0 &&
		r.Added == r.Acked+r.Dead+r.AckedUnknown
}

// poolShutdownTimeout is the pools' ShutdownTimeout when not negative: an
// odd duration, so that the harness knows Run's deadline among the
// clock's timers.
const poolShutdownTimeout = 7*time.Second + 3*time.Millisecond

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
// Once every Run has returned, the queue is read straight from the
// database: a job released at shutdown (Outcome Abandoned, Err nil) must
// be queued, due at once, with its attempt count back to what it was
// before that lease; a job still leased must be explained by a database
// failure the pool reported (a Release that failed, an ack or nack that
// failed, a lease in flight it could not settle); anything else is hidden
// until its lease expires, a failure, and so is an ack, nack or release
// of a handler's result that the pool's own abandonment cut short. Then the handlers that ignored their
// context return, and call Task.Ack: it must fail with ErrLeaseLost for a
// job the pool released. At the end, every job is drained and accounted
// for: acked once (an Outcome Acked, a Task.Ack or the drain's Ack) or
// dead once with MaxAttempts counted attempts, never both, never lost.
func RunPoolShutdowns(ctx context.Context, seed int64, cfg PoolConfig) (PoolResult, error) {
	var res PoolResult
	db := memdb.New(memdb.WithSeed(seed), memdb.WithFaults(cfg.Faults), memdb.WithLatency(cfg.Latency),
		memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	defer db.Close()
	clock := queuetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	armed := make(chan time.Duration, 64)
	clock.Armed = armed
	deadlines := make(chan struct{}, 1024) // a Run armed its shutdown deadline
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case d := <-armed:
				if d == poolShutdownTimeout {
					select {
					case deadlines <- struct{}{}:
					default:
					}
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
	const lease = time.Minute
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: cfg.MaxAttempts, Clock: clock,
		LeaseDuration: lease, RetryBase: time.Second, RetryMax: 4 * time.Second})
	if err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0x9001))
	h := &poolHarness{acks: map[string]int{}, failedAcks: map[string]bool{}}
	pdb := &stopFailing{Database: db, prob: cfg.StopFailProb, rng: rand.New(rand.NewPCG(uint64(seed), 0xfa11))}
	var jobs []fdbqueue.JobID
	for cycle := range cfg.Cycles {
		// Every live job due: leases and retry delays have passed.
		clock.Advance(2*lease + time.Second)
		for range cfg.JobsPerCycle {
			r, err := q.Add(ctx, db, fdbqueue.Job{Value: binary.BigEndian.AppendUint64(nil, uint64(len(jobs)))})
			if err != nil {
				return res, err
			}
			jobs = append(jobs, r.ID)
		}
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
	dead, err := deadAfterDrain(final, &res.DeadAttempts)
	if err != nil {
		return res, err
	}
	for _, id := range jobs {
		job := string(id[:])
		res.Added++
		switch n := h.acks[job]; {
		case n > 1:
			res.AckedTwice++
		case n == 1 && dead[job]:
			res.AckedAndDead++
		case n == 1:
			res.Acked++
		case dead[job]:
			res.Dead++
		case h.failedAcks[job]:
			res.AckedUnknown++
		default:
			res.Lost++
		}
	}
	res.Stats = db.Stats()
	return res, nil
}

// poolHarness is one seed's accounts across cycles.
type poolHarness struct {
	acks       map[string]int  // successful acks per job
	failedAcks map[string]bool // jobs with an ack that failed (it may have committed)
}

// poolCycle is one cycle's handlers and outcomes.
type poolCycle struct {
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
}

func (c *poolCycle) poke() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// wait waits until cond holds (checked under c.mu at every change). A
// guard fails the seed if that takes a minute: the harness is stuck.
func (c *poolCycle) wait(ctx context.Context, cond func() bool) error {
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
			return errors.New("sim: stuck waiting for the pools' handlers")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (c *poolCycle) handler(ctx context.Context, task *fdbqueue.Task) error {
	c.mu.Lock()
	c.started++
	c.inFlight++
	n := c.started
	x := c.rng.Float64()
	stubborn := n <= c.blockers && x < 0.4
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
		<-c.unblock // ignores ctx
		return nil
	case n <= c.blockers:
		select {
		case <-c.finish:
			return nil
		case <-ctx.Done():
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
	slots := cfg.Pools * cfg.Workers
	c := &poolCycle{rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())), blockers: 1 + rng.IntN(max(slots-1, 1)),
		finish: make(chan struct{}), unblock: make(chan struct{}), changed: make(chan struct{}, 1),
		tasks: map[string][]*fdbqueue.Task{}, quick: map[[16]byte]bool{}, stubborns: map[[16]byte]bool{}}
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
			ran <- q.Run(runCtx, pdb, c.handler, fdbqueue.PoolOptions{Workers: cfg.Workers, LeaseDuration: time.Minute,
				ExtendEvery: 20 * time.Second, ShutdownTimeout: timeout, ReleaseTimeout: poolReleaseTimeout, Logger: slog.New(&logTap{sink: logs}), OnOutcome: c.outcome})
		}()
	}
	// Mid-flight: the blockers hold their jobs, and a few quick jobs are
	// done (enough jobs are due for both, see RunPoolShutdowns).
	if err := c.wait(ctx, func() bool { return c.started >= c.blockers && c.quickDone >= quick }); err != nil {
		return err
	}
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
				if err := c.wait(ctx, func() bool { return c.inFlight == c.stubborn }); err != nil {
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
			if o.Err == nil {
				res.Released++
				released[job] = o.Lease
			} else {
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
	return nil
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
