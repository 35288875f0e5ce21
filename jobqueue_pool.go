package fdbqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Handler processes one leased job. Returning nil acks the job; returning
// an error nacks it (it is retried after the queue's backoff, or
// dead-lettered after its last attempt). A panic, or a runtime.Goexit,
// counts as an error. Three errors, returned as they are or wrapped
// (fmt.Errorf with %w), say more: Snooze runs the job later without using
// an attempt, NoRetry dead-letters it now, and RetryAfter retries it after
// the handler's delay instead of the backoff. When an error wraps more
// than one of them, the outermost (the first errors.As finds) decides.
// ctx ends when the lease is lost (another consumer has the job now, or
// JobQueue.Cancel removed it: the pool finds out at its next heartbeat
// extension, within PoolOptions.ExtendEvery) or when the pool gives up on
// in-flight jobs at shutdown; the handler should then stop, since its
// result is no longer used. It ends too at
// PoolOptions.HandlerTimeout, after which the handler's error counts as a
// failed attempt. Once the handler has called Task.Ack, the job gone does
// not end ctx (its own ack most likely removed it; Task.Ack fails with
// ErrLeaseLost if another consumer has it or it was cancelled).
type Handler func(ctx context.Context, task *Task) error

// Task is a job being processed by a pool's worker, made by the pool (a
// nil or zero Task's Ack fails with ErrInvalidArgument).
type Task struct {
	q     *JobQueue
	mu    sync.Mutex
	lease Lease
	// ackID is made by the first Task.Ack, not at lease time: a handler
	// that runs longer than the journal retention would outlive it.
	ackID *OpID
}

// Lease returns the task's lease as of its last extension.
func (t *Task) Lease() Lease {
	if t == nil {
		return Lease{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lease
}

// Value returns the job's payload.
func (t *Task) Value() []byte { return t.Lease().Value }

// Ack acks the job inside tr, the transaction that writes the job's
// effects, so that the effects and the ack commit together, once: the
// pool's own ack after the handler returns nil then finds this one (they
// share an operation ID) and does nothing. Keep the effects idempotent
// across retries of tr (Set keys derived from the job ID, not atomic
// adds): under commit_unknown_result your retry loop runs them again.
// It fails with ErrLeaseLost when the task no longer holds the job:
// another consumer has it, or JobQueue.Cancel removed it. On a
// JobQueue made WithoutIdempotency there is no journal for the pool's ack
// to find: the job is acked once, by this call, but the pool then reports
// the outcome as LeaseLost (with a warning).
func (t *Task) Ack(ctx context.Context, tr kv.Transaction) error {
	if t == nil || t.q == nil {
		return errZeroTask
	}
	return t.q.Ack(ctx, tr, t.Lease(), WithOpID(t.opID()))
}

// opID returns the ID of the task's ack, making it on first use.
func (t *Task) opID() OpID {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ackID == nil {
		id := newOpIDAt(t.q.cfg.Clock.Now())
		t.ackID = &id
	}
	return *t.ackID
}

// acking reports whether the handler has called Task.Ack.
func (t *Task) acking() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ackID != nil
}

func (t *Task) set(l Lease) {
	t.mu.Lock()
	t.lease = l
	t.mu.Unlock()
}

// PoolOptions configures JobQueue.Run. Zero fields take their defaults.
type PoolOptions struct {
	// Workers is the number of jobs processed at once (default 4). Each
	// idle worker sleeps in LeaseWait on one watch, so Workers counts
	// against the database's watch limit (FDB's max_watches, 10,000 by
	// default): past it, LeaseWait fails with too_many_watches and the
	// worker retries a second later. At most MaxPoolWorkers.
	Workers int
	// LeaseDuration is the duration of each lease and of each extension
	// (default the queue's LeaseDuration; at least 1ms).
	LeaseDuration time.Duration
	// ExtendEvery is how often a running job's lease is extended (default
	// a third of LeaseDuration; it must be less than LeaseDuration, else
	// Run fails with ErrInvalidArgument). After a failed extension the
	// next comes at half the time left before the lease's deadline, if
	// that is sooner, and so does the first when the lease (settled after
	// a lease that may have committed) is less than ExtendEvery from its
	// deadline as the handler starts. Extensions that keep failing past the
	// deadline do not end the handler's context: the job is due again,
	// and another consumer may lease it while the handler runs, until an
	// extension finds the lease lost (a Task.Ack then fails with
	// ErrLeaseLost, and the effects committed with it do not commit).
	ExtendEvery time.Duration
	// ShutdownTimeout is how long Run lets in-flight handlers finish once
	// ctx ends (default 10 seconds; negative: not at all). Then their
	// contexts end and the pool gives their jobs back with Release, so
	// that each is due again at once without the attempt counted, and Run
	// returns without waiting for the handlers themselves (see Run).
	ShutdownTimeout time.Duration
	// ReleaseTimeout is how long Run then gives, in all, to the releases
	// of the jobs it abandoned, the acks and nacks under way and the
	// settling of a lease whose commit was in flight (default
	// DefaultReleaseTimeout; negative is refused), counted on the queue's
	// clock from the abandonment. Each release, and each settling (which a
	// worker does as it stops, before any abandonment), is also cut off on
	// its own after ReleaseTimeout of wall time, whatever the queue's
	// clock.
	// What is not done by then is cancelled (a commit in flight may still
	// land) and otherwise keeps its lease until it expires. Give a
	// deploy's stop grace period more than ShutdownTimeout plus
	// ReleaseTimeout.
	ReleaseTimeout time.Duration
	// HandlerTimeout, if positive, limits each handler call (asynq's
	// Timeout, river's JobTimeout): the handler's context ends with
	// context.DeadlineExceeded that long after the call, on the queue's
	// clock (ctx.Deadline reports it). 0: no limit; negative is refused
	// with ErrInvalidArgument. A handler that then returns an error has
	// failed its attempt, as for any other failure: the job is nacked
	// with the backoff (dead-lettered after its last attempt), the error
	// (context.DeadlineExceeded, or whatever it returned) its Outcome.Err
	// and its reason, and the pool logs that it timed out; a Snooze,
	// NoRetry or RetryAfter it returns is honoured, and nil acks the job.
	// A timeout is not an abandonment, which only shutdown makes (after
	// ShutdownTimeout). The pool waits for the handler to return,
	// extending its lease meanwhile, as it does without a limit: a
	// handler that ignores its context still holds its worker and its
	// job.
	HandlerTimeout time.Duration
	// Logger receives the pool's structured logs (default: the queue's
	// logger, WithLogger, which discards them unless set). The lines carry
	// the queue's name (fdbqueue.queue, WithQueueName) either way. A dead
	// letter is logged by the queue, and by the pool too only when Logger
	// is not the one given WithLogger. A Logger without a handler (a zero
	// slog.Logger) is refused with ErrInvalidArgument.
	Logger *slog.Logger
	// OnOutcome, if set, is called after each job with what became of it
	// (the job is settled by then), by the job's worker, which waits for
	// it; Run returns only after the calls under way, so one that blocks
	// delays Run's return. A call that ends with runtime.Goexit is logged
	// and the worker goes on; a panic is not recovered.
	OnOutcome func(Outcome)
}

// Outcome is what became of one leased job in a pool.
type Outcome struct {
	Lease  Lease  // the job's lease, as the worker held it last
	Result Result // what became of the job
	// Err is the handler's error as it returned it (Retried,
	// DeadLettered, Snoozed; a wrapped Snooze, NoRetry or RetryAfter
	// error included), the error that kept the pool from acking, nacking
	// or releasing the job (LeaseLost, Failed), or for Abandoned the error
	// of the Release that was to give the job back (nil when it did).
	Err error
}

// Result is the kind of an Outcome.
type Result int

// Results of a job in a pool.
const (
	// Acked: the handler succeeded and the job is deleted; or the
	// handler acked it itself (Task.Ack), then failed or was abandoned
	// (Err is nil then).
	Acked Result = iota
	// Retried: the handler failed and the job is due again after a delay.
	Retried
	// DeadLettered: the handler failed its last attempt, or returned
	// NoRetry: the job is in the dead-letter list.
	DeadLettered
	// LeaseLost: the lease expired and another consumer leased the job,
	// or the job was cancelled (JobQueue.Cancel) while the handler ran.
	LeaseLost
	// Abandoned: shutdown's deadline passed first. The pool released the
	// job (JobQueue.Release): it is due again at once, its attempt not
	// counted; if that failed (Outcome.Err), its lease will expire.
	Abandoned
	// Failed: the ack or nack failed (e.g. the database); the lease will
	// expire and the job come back.
	Failed
	// Snoozed: the handler returned a Snooze error, and the pool released
	// the job (JobQueue.Release): due again after the snooze's delay, its
	// attempt not counted.
	Snoozed
)

// Snooze returns the error a Handler returns to run its job again later,
// after delay (at once if delay <= 0), without using an attempt: the pool
// gives the job back with JobQueue.Release (river's JobSnooze). The
// Outcome is Snoozed, its Err this error. A snooze does not count toward
// MaxAttempts, so a job snoozed again and again is never dead-lettered:
// bound snoozes in the handler if a job may never make progress. Wrapped
// (fmt.Errorf with %w), it works the same.
func Snooze(delay time.Duration) error { return &SnoozeError{Delay: delay} }

// SnoozeError is the error Snooze returns; get it with errors.As.
type SnoozeError struct {
	Delay time.Duration // how long the job waits before it is due again
}

// Error says that the job was snoozed and for how long.
func (e *SnoozeError) Error() string {
	if e == nil {
		return "fdbqueue: nil *SnoozeError"
	}
	return fmt.Sprintf("fdbqueue: job snoozed for %v", e.Delay)
}

// NoRetry returns the error a Handler returns to fail its job for good
// (asynq's SkipRetry, river's JobCancel): the pool nacks it with
// NackOptions.NoRetry, so that it moves to the dead-letter list now,
// whatever attempts it has left, with the error's text as its reason. The
// Outcome is DeadLettered, its Err this error (or the handler's error
// that wraps it). Use it for a job that can never succeed, such as one
// whose payload is malformed, rather than spend all of MaxAttempts on it.
// NoRetry(nil) dead-letters the job too. Wrapped (fmt.Errorf with %w), it
// works the same; see Handler for an error that wraps more than one of
// Snooze, NoRetry and RetryAfter. Requeue brings a dead job back.
func NoRetry(err error) error { return &NoRetryError{Err: err} }

// NoRetryError is the error NoRetry returns; get it with errors.As.
type NoRetryError struct {
	Err error // why the job cannot succeed (may be nil)
}

// Error is "no retry: " and Err's text.
func (e *NoRetryError) Error() string {
	if e == nil {
		return "fdbqueue: nil *NoRetryError"
	}
	if e.Err == nil {
		return "no retry"
	}
	return "no retry: " + e.Err.Error()
}

// Unwrap returns Err.
func (e *NoRetryError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// RetryAfter returns the error a Handler returns to fail its job and have
// it retried after delay instead of the queue's backoff (at once if delay
// <= 0): river's NextRetry, or an upstream's Retry-After. The attempt is
// counted, as for any failure: after the job's last attempt it moves to
// the dead-letter list as usual. The pool nacks the job with the delay
// (NackOptions.Delay) and the error's text as its reason; the Outcome is
// Retried (or DeadLettered), its Err this error (or the handler's error
// that wraps it). Wrapped (fmt.Errorf with %w), it works the same; see
// Handler for an error that wraps more than one of Snooze, NoRetry and
// RetryAfter.
func RetryAfter(delay time.Duration, err error) error {
	return &RetryAfterError{Delay: delay, Err: err}
}

// RetryAfterError is the error RetryAfter returns; get it with errors.As.
type RetryAfterError struct {
	Delay time.Duration // how long the job waits before it is due again; <= 0: due at once
	Err   error         // why the attempt failed (may be nil)
}

// Error is "retry after", the delay, and Err's text.
func (e *RetryAfterError) Error() string {
	if e == nil {
		return "fdbqueue: nil *RetryAfterError"
	}
	if e.Err == nil {
		return fmt.Sprintf("retry after %v", e.Delay)
	}
	return fmt.Sprintf("retry after %v: %v", e.Delay, e.Err)
}

// Unwrap returns Err.
func (e *RetryAfterError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// verdict is the kind of the errors with which a handler says what becomes
// of its job (Snooze, NoRetry, RetryAfter). The outermost in a handler's
// error decides: verdictOf finds it with errors.As, which walks the chain
// from the outside in.
type verdict interface {
	error
	verdict()
}

func (*SnoozeError) verdict()     {}
func (*NoRetryError) verdict()    {}
func (*RetryAfterError) verdict() {}

// verdictOf returns the outermost Snooze, NoRetry or RetryAfter error in
// err, or nil. A nil pointer of one of those types (a handler's
// `var e *NoRetryError; return e`) says nothing: the error is a plain
// failure.
func verdictOf(err error) verdict {
	var v verdict
	if err == nil || !errors.As(err, &v) {
		return nil
	}
	switch v := v.(type) {
	case *SnoozeError:
		if v == nil {
			return nil
		}
	case *NoRetryError:
		if v == nil {
			return nil
		}
	case *RetryAfterError:
		if v == nil {
			return nil
		}
	}
	return v
}

// errorText is err's text for a reason or a log line. It is fmt's, which
// recovers a panic in an Error method (typically a nil pointer's): a
// handler's error must not crash the pool.
func errorText(err error) string { return fmt.Sprint(err) }

// String returns the result's name, as "acked" or "lease lost".
func (r Result) String() string {
	switch r {
	case Acked:
		return "acked"
	case Retried:
		return "retried"
	case DeadLettered:
		return "dead-lettered"
	case LeaseLost:
		return "lease lost"
	case Abandoned:
		return "abandoned"
	case Failed:
		return "failed"
	case Snoozed:
		return "snoozed"
	}
	return fmt.Sprintf("Result(%d)", int(r))
}

// PanicError is the error a handler's panic becomes.
type PanicError struct {
	Value any    // the value the handler panicked with
	Stack []byte // the handler's stack at the panic
}

// Error describes the panic.
func (e *PanicError) Error() string { return fmt.Sprintf("handler panic: %v", e.Value) }

// Run processes the queue's jobs with o.Workers workers until ctx ends.
// Each worker leases one job at a time with LeaseWait (sleeping on
// watches while nothing is due), runs handler with the job, extends the
// lease every ExtendEvery while the handler runs, and then acks the job
// (handler returned nil) or nacks it with the error as reason (handler
// failed or panicked: with the backoff, with NoRetry when the handler
// returned NoRetry, with the handler's delay when it returned RetryAfter),
// or releases it (the handler returned Snooze). A lease lost to another
// consumer, or to a Cancel of the job, ends the handler's context once a
// heartbeat extension finds it lost, and so does HandlerTimeout.
//
// Shutdown: when ctx ends, workers stop leasing; in-flight handlers get
// ShutdownTimeout to finish and be acked or nacked (an ack or nack under way
// when ShutdownTimeout passes is finished, not cut short). Then their
// contexts end, their heartbeats stop, and the pool releases their jobs
// (Release: due again at once, the attempt not counted, so that a deploy
// that interrupts a job neither uses up its attempts nor hides it until its
// lease expires) and returns. A handler that returns as its context ends is
// settled by what it returned if that was nil (acked) or Snooze; any other
// error (NoRetry and RetryAfter too, and a HandlerTimeout's) then releases
// its job rather than nacks it. The releases, and the
// acks and nacks still under way, get ReleaseTimeout in all; a job whose
// release (or ack or nack) fails, or is cut off then (its commit may still
// land), keeps its lease until it expires. Run returns once its workers are
// done (OnOutcome is never called after Run returned); only abandoned
// handlers outlive it. A handler that ignores its context keeps running
// after Run returns, and its result is dropped: its job, released, may
// meanwhile be leased and run by another consumer, so the two runs overlap
// (delivery is at least once; the abandoned run's Task.Ack fails with
// ErrLeaseLost, so its effects written with it do not commit). A lease whose
// commit was in flight when ctx ended (the worker was in LeaseWait) is
// settled under that lease's operation ID: if it committed, the pool
// releases the job it took; if it did not, the pool records under the ID
// that it leased nothing, so that the commit, landing late, conflicts, and
// touches no job (each keeps its due time). Run returns nil after a
// shutdown, or an error for bad options. Errors while leasing (a database
// outage) do not stop it: they are logged and the worker tries again a
// second later; a lease that may have committed (kv.MaybeCommitted: a
// transaction timeout, say) is first settled under its ID (again every
// second while that fails too, until a call under the ID tells), and the job
// it took is processed. (On a queue made WithoutIdempotency, which keeps no
// journal, neither such lease is settled: the pool logs the one at shutdown,
// and a job such a lease took comes back when its lease expires.) A lease
// error no retry can cure (ErrConfigMismatch: the handle disagrees with the
// queue's stored configuration; ErrForeignKey: a key in the jobs' range is
// not a job) stops the pool as a shutdown does, and Run returns it.
//
// With the queue's MeterProvider, each job's handler run time is recorded
// in fdbqueue.handler.duration and each heartbeat's extension counted in
// fdbqueue.lease.extensions, both by outcome (WithMeterProvider), but for
// an extension that finds the job gone after the handler's Task.Ack (not
// a lost lease: most likely the ack removed it).
//
// Delivery is at least once: a job whose handler finished but whose ack
// did not commit (a crash, a lost lease) is processed again. For effects
// in the same database, make them exactly once by writing them in the
// transaction that acks (Task.Ack).
func (q *JobQueue) Run(ctx context.Context, db kv.Database, handler Handler, o PoolOptions) error {
	if err := q.usable(); err != nil {
		return err
	}
	if err := checkTransactor(db); err != nil {
		return err
	}
	if handler == nil {
		return fmt.Errorf("%w: nil handler", ErrInvalidArgument)
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = q.cfg.LeaseDuration
	}
	if o.ExtendEvery == 0 {
		o.ExtendEvery = o.LeaseDuration / 3
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 10 * time.Second
	}
	if o.ReleaseTimeout == 0 {
		o.ReleaseTimeout = DefaultReleaseTimeout
	}
	if err := checkLogger("PoolOptions.Logger", o.Logger); err != nil {
		return err
	}
	if obs := q.journal.track.obs; o.Logger == nil || o.Logger == obs.logger {
		o.Logger = obs.log
	} else {
		// The queue's attribute, as on the queue's own lines.
		o.Logger = o.Logger.With(string(attrQueue), obs.queue.Value.AsString())
	}
	if o.ReleaseTimeout < 0 {
		return fmt.Errorf("%w: pool release timeout %v", ErrInvalidArgument, o.ReleaseTimeout)
	}
	if o.HandlerTimeout < 0 {
		return fmt.Errorf("%w: pool handler timeout %v", ErrInvalidArgument, o.HandlerTimeout)
	}
	if o.Workers < 0 || o.Workers > MaxPoolWorkers || o.LeaseDuration < time.Millisecond || o.ExtendEvery <= 0 || o.ExtendEvery >= o.LeaseDuration {
		return fmt.Errorf("%w: pool of %d workers, lease %v extended every %v", ErrInvalidArgument, o.Workers, o.LeaseDuration, o.ExtendEvery)
	}
	base, abandon := context.WithCancel(context.WithoutCancel(ctx))
	defer abandon()
	// The releases of abandoned jobs (and of leases settled at shutdown):
	// a context of their own, bounded, that outlives ctx and base.
	rctx, rcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer rcancel()
	// ctx, or a lease error no retry can cure (stop).
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	p := &pool{q: q, db: db, h: handler, o: o, log: o.Logger, stop: stop, rctx: rctx}
	var wg sync.WaitGroup
	for i := range o.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.worker(ctx, base, i)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	p.log.Info("fdbqueue: job pool started", "workers", o.Workers, "lease", o.LeaseDuration)
	select {
	case <-done:
	case <-ctx.Done():
		p.log.Info("fdbqueue: job pool stopping", "in_flight", p.inFlight.Load(), "timeout", o.ShutdownTimeout)
		var deadline <-chan time.Time
		if o.ShutdownTimeout > 0 {
			deadline = q.cfg.Clock.After(o.ShutdownTimeout)
		} else {
			closed := make(chan time.Time)
			close(closed)
			deadline = closed
		}
		select {
		case <-done:
		case <-deadline:
			p.abandoned.Store(true)
			abandon()
			p.log.Warn("fdbqueue: job pool abandoned in-flight jobs; releasing them", "in_flight", p.inFlight.Load())
			// The workers stop waiting for their handlers and release their
			// jobs (process); wait for that, bounded.
			select {
			case <-done:
			case <-q.cfg.Clock.After(o.ReleaseTimeout):
				rcancel()
				p.log.Warn("fdbqueue: job pool stopped before its abandoned jobs were released; their leases will expire",
					"timeout", o.ReleaseTimeout)
				// The releases end with rctx: wait for the workers, so
				// that no OnOutcome comes after Run returned.
				<-done
			}
		}
	}
	p.log.Info("fdbqueue: job pool stopped")
	if err := context.Cause(ctx); errors.Is(err, errPoolFailed) {
		return err
	}
	return nil
}

// MaxPoolWorkers is the most workers one Run starts: FDB's largest
// max_watches (ABSOLUTE_MAX_WATCHES in fdbclient/ClientKnobs.cpp), past
// which idle workers cannot all wait on a watch. More is refused with
// ErrInvalidArgument rather than goroutines started until memory runs out.
const MaxPoolWorkers = 1_000_000

// DefaultReleaseTimeout is PoolOptions.ReleaseTimeout's default.
const DefaultReleaseTimeout = 5 * time.Second

// errPoolFailed marks the lease error that stopped a pool (fatalLeaseError).
var errPoolFailed = errors.New("fdbqueue: job pool stopped")

// fatalLeaseError reports whether a lease error will recur however often
// the pool tries again: the handle disagrees with the queue's stored
// configuration, or a key in the jobs' range is not a job.
func fatalLeaseError(err error) bool {
	return errors.Is(err, ErrConfigMismatch) || errors.Is(err, ErrForeignKey)
}

type pool struct {
	q         *JobQueue
	db        kv.Database
	h         Handler
	o         PoolOptions
	log       *slog.Logger
	inFlight  atomic.Int64
	abandoned atomic.Bool
	stop      context.CancelCauseFunc // stops the pool with an error (Run returns it)
	rctx      context.Context         // for settling jobs: abandon does not end it; Run bounds it at shutdown
	fatalOnce sync.Once               // logs the lease error that stops the pool once, not per worker
}

func (p *pool) worker(ctx, base context.Context, n int) {
	var id OpID
	// uncertain: the lease under id may have committed (kv.MaybeCommitted:
	// a transaction timeout, say) and is not settled yet. Lease again under
	// its ID returns the job it took, or leases one now, rather than leave
	// a job hidden under a lease nobody holds until it expires; until a
	// call under the ID tells, the worker leases under no other.
	uncertain := false
	// A worker that stops (ctx ended, or a lease error no retry cures)
	// with a lease still uncertain settles it without leasing, and
	// releases what it took (settleLease).
	defer func() {
		if uncertain {
			p.settleLease(n, id)
		}
	}()
	for ctx.Err() == nil {
		var ls []Lease
		var err error
		if uncertain {
			ls, err = p.q.Lease(ctx, p.db, 1, p.o.LeaseDuration, WithOpID(id))
		} else {
			ls, err = p.q.leaseWait(ctx, p.db, 1, p.o.LeaseDuration, &id)
		}
		if err == nil {
			uncertain = false
			p.process(base, n, ls[0])
			continue
		}
		if uncertain && (errors.Is(err, ErrEmpty) || errors.Is(err, ErrOperationExpired)) {
			uncertain = false // settled: nothing taken, or past telling
			if errors.Is(err, ErrEmpty) {
				continue
			}
		}
		if !uncertain && kv.MaybeCommitted(err) {
			uncertain = true // settled at once, or on the way out
			continue
		}
		if ctx.Err() != nil {
			return
		}
		if fatalLeaseError(err) {
			p.fatalOnce.Do(func() { p.log.Error("fdbqueue: job pool stopping: lease failed for good", "err", err) })
			p.stop(fmt.Errorf("%w: %w", errPoolFailed, err))
			return
		}
		p.log.Error("fdbqueue: lease failed", "worker", n, "err", err)
		select { // not a poll: a failing database, retried slowly
		case <-p.q.cfg.Clock.After(time.Second):
		case <-ctx.Done():
		}
	}
}

// settleLease settles a lease whose commit was in flight when the pool
// stopped (its outcome unknown), under its ID without leasing
// (SettleLease): if it committed, the job it took is released, so that
// it is due at once without an attempt counted instead of hidden under a
// lease nobody holds; if it did not, the call records that it leased
// nothing, so that its late landing, if any, conflicts (it read the
// record key this call writes), and no job is touched. (Settling with
// Lease under the ID leased a due job then, and the release moved that
// job's due time to now, behind the jobs that fell due after it.)
func (p *pool) settleLease(n int, id OpID) {
	ctx, cancel := context.WithTimeout(p.rctx, p.o.ReleaseTimeout)
	defer cancel()
	log := p.log.With("worker", n, "op_id", id.String())
	if p.q.journal.disabled {
		log.Warn("fdbqueue: a lease interrupted by the shutdown cannot be settled without the journal (WithoutIdempotency); a job it took comes back when the lease expires")
		return
	}
	ls, err := p.q.SettleLease(ctx, p.db, id)
	switch {
	case err == nil && len(ls) == 0:
		return // it leased nothing, and now cannot
	case err != nil:
		log.Error("fdbqueue: could not settle a lease interrupted by the shutdown; a job it took comes back when the lease expires", "err", err)
		return
	}
	for _, l := range ls {
		if err := p.q.Release(ctx, p.db, l, 0); err != nil {
			log.Error("fdbqueue: could not release a job leased as the pool stopped; it comes back when the lease expires", "job", l.JobID.String(), "err", err)
		} else {
			log.Info("fdbqueue: released a job leased as the pool stopped", "job", l.JobID.String())
		}
	}
}

func (p *pool) process(base context.Context, n int, l Lease) {
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	task := &Task{q: p.q, lease: l}
	log := p.log.With("worker", n, "job", l.JobID.String(), "attempt", l.Attempt)
	// The handler's limit (HandlerTimeout) is armed before the heartbeat's
	// first timer, so that the two are armed in that order.
	var limit *clockDeadline
	parent := base
	if p.o.HandlerTimeout > 0 {
		var end func()
		limit, end = newClockDeadline(base, p.q.cfg.Clock, p.o.HandlerTimeout)
		defer end()
		parent = limit
	}
	hctx, cancel := context.WithCancel(parent)
	defer cancel()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		p.heartbeat(base, task, stop, cancel, log)
	}()
	end, returned := p.call(base, hctx, task, limit, log)
	err := end.err
	// The heartbeat stops before the job is settled, so that it cannot
	// extend a released lease or report one as lost.
	close(stop)
	<-stopped
	out := Outcome{Lease: task.Lease(), Err: err}
	var serr error // settling the job
	// The ack, nack or release of a handler's result runs under rctx, not
	// base: one under way when the pool abandons its in-flight jobs is
	// finished (Run waits ReleaseTimeout for it), not cut short,
	// which would leave its job leased to nobody until the lease expires,
	// its attempt spent.
	// A handler that succeeded or snoozed is settled so even when the pool
	// abandoned its jobs as it returned: its work is done (acking it keeps
	// it from running twice). Any other error then is most likely the
	// abandonment's cancellation, not the job's failure: the job is
	// released, its attempt not counted, rather than nacked (NoRetry,
	// RetryAfter and a HandlerTimeout's error too: a dead letter for a
	// cancellation would need an operator's Requeue). The handler's
	// timeout is no abandonment: it leaves base, and p.abandoned, alone.
	v := verdictOf(err)
	sz, _ := v.(*SnoozeError)
	switch {
	case err == nil:
		out.Result = Acked
		serr = p.q.Ack(p.rctx, p.db, out.Lease, WithOpID(task.opID()))
	case sz != nil:
		out.Result = Snoozed
		serr = p.q.Release(p.rctx, p.db, out.Lease, sz.Delay)
	case p.abandoned.Load():
		out.Result = Abandoned
		out.Err = p.release(task, out.Lease, log)
		if errors.Is(out.Err, ErrLeaseLost) && task.acking() {
			if p.ackedByHandler(task, out.Lease) {
				out.Result, out.Err = Acked, nil
			} else {
				log.Warn("fdbqueue: abandoned job not released: another consumer has it", "err", out.Err)
			}
		}
	default:
		out.Result = Retried
		no := NackOptions{Reason: errorText(err)}
		switch v := v.(type) {
		case *NoRetryError:
			no.NoRetry = true
		case *RetryAfterError:
			no.Delay = v.Delay
			if no.Delay <= 0 {
				no.Delay = -1 // at once; Nack's 0 is the backoff
			}
		}
		var dead bool
		if dead, serr = p.q.Nack(p.rctx, p.db, out.Lease, no); dead {
			out.Result = DeadLettered
			if p.log != p.q.journal.track.obs.log { // else the queue logs it
				log.Warn("fdbqueue: job dead-lettered", "reason", errorText(err), "no_retry", no.NoRetry)
			}
		}
	}
	if out.Result != Acked && errors.Is(serr, ErrLeaseLost) && p.ackedByHandler(task, out.Lease) {
		out.Result, serr = Acked, nil // its handler acked it, then failed
	}
	switch {
	case serr == nil:
	case errors.Is(serr, ErrLeaseLost):
		out.Result, out.Err = LeaseLost, serr
		log.Warn("fdbqueue: lease lost: another consumer has the job, or it was cancelled", "err", serr)
	default:
		out.Result, out.Err = Failed, serr
		log.Error("fdbqueue: could not settle the job; its lease will expire", "err", serr)
	}
	obs := p.q.journal.track.obs
	obs.leaseSettled(out.Result)
	if returned {
		obs.handlerReturned(out.Result, end.took)
	}
	if p.o.OnOutcome != nil {
		p.report(out, log)
	}
}

// report calls OnOutcome with out on a goroutine of its own and waits for
// it, so that a call that ends its goroutine with runtime.Goexit (t.FailNow
// in a test's callback) ends only that goroutine: it is logged, and the
// worker goes on, as after a handler's Goexit (call). Before, it ended the
// worker, and the pool ran with one fewer, silently. The job is settled
// by then, so nothing is left leased. A panic is not recovered: it
// crashes the program, as it did on the worker's goroutine (re-raised
// from the deferred call, whose stack still holds the panic's frames).
func (p *pool) report(out Outcome, log *slog.Logger) {
	done := make(chan bool, 1)
	go func() {
		returned := false
		defer func() {
			if !returned {
				if r := recover(); r != nil {
					panic(r)
				}
			}
			done <- returned
		}()
		p.o.OnOutcome(out)
		returned = true
	}()
	if !<-done {
		log.Error("fdbqueue: OnOutcome called runtime.Goexit; the worker goes on", "result", out.Result.String())
	}
}

// errHandlerGoexit is the error of a handler that ended its goroutine
// with runtime.Goexit.
var errHandlerGoexit = errors.New("handler called runtime.Goexit")

// ackedByHandler reports, for a job whose nack or release found its lease
// gone, whether its handler's Task.Ack committed: an Ack under the ID
// Task.Ack used replays it then. (Its handler acked it, then went on and
// failed, or was abandoned.) Were that ack not committed, the Ack finds
// the lease gone too and acks nothing.
func (p *pool) ackedByHandler(task *Task, l Lease) bool {
	if !task.acking() {
		return false
	}
	ctx, cancel := context.WithTimeout(p.rctx, p.o.ReleaseTimeout)
	defer cancel()
	return p.q.Ack(ctx, p.db, l, WithOpID(task.opID())) == nil
}

// release gives back the lease of a job abandoned at shutdown.
func (p *pool) release(task *Task, l Lease, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(p.rctx, p.o.ReleaseTimeout)
	defer cancel()
	err := p.q.Release(ctx, p.db, l, 0)
	switch {
	case err == nil:
		log.Info("fdbqueue: abandoned job released: due again, its attempt not counted")
	case errors.Is(err, ErrLeaseLost) && task.acking():
		// Its handler may have acked it: process asks, and warns if not.
	case errors.Is(err, ErrLeaseLost):
		log.Warn("fdbqueue: abandoned job not released: another consumer has it", "err", err)
	default:
		log.Error("fdbqueue: abandoned job not released; its lease will expire", "err", err)
	}
	return err
}

// errAbandoned is call's result for a handler still running when the pool
// abandoned it.
var errAbandoned = errors.New("handler abandoned at shutdown")

// handlerEnd is how a handler's run ended: its error, and how long it ran
// (measured only with a MeterProvider).
type handlerEnd struct {
	err  error
	took time.Duration
}

// call runs the handler, turning a panic into a *PanicError, and logs a
// failure by its kind (failed, timed out, NoRetry, RetryAfter; a Snooze
// is no failure), limit telling whether HandlerTimeout passed (nil: no
// limit). The handler
// runs on a goroutine of its own, so that one that calls runtime.Goexit
// (t.FailNow in a test's handler) fails its job instead of ending the
// worker, and leaving the job's heartbeat extending its lease. call stops
// waiting for it when base ends (the pool abandoned it at shutdown):
// returned is then false. end.took is the time from the call to the
// handler's end (return, panic or Goexit) on the queue's clock, when the
// queue has a MeterProvider (else 0: the clock is not read).
func (p *pool) call(base, ctx context.Context, task *Task, limit *clockDeadline, log *slog.Logger) (end handlerEnd, returned bool) {
	res := make(chan handlerEnd, 1)
	timed := p.q.journal.track.obs.metered
	go func() {
		var start time.Time
		if timed {
			start = p.q.cfg.Clock.Now()
		}
		returned := false
		defer func() {
			// The line is logged before the end is sent, as a failure's
			// is below: the job's outcome comes after its log line (the
			// send is deferred, so that a Logger that panics still
			// releases the worker).
			if r := recover(); r != nil {
				pe := &PanicError{Value: r, Stack: debug.Stack()}
				end := handlerEnd{err: pe, took: p.since(timed, start)}
				defer func() { res <- end }()
				log.Error("fdbqueue: handler panicked", "panic", r, "stack", string(pe.Stack))
			} else if !returned {
				end := handlerEnd{err: errHandlerGoexit, took: p.since(timed, start)}
				defer func() { res <- end }()
				log.Error("fdbqueue: handler called runtime.Goexit")
			}
		}()
		err := p.h(ctx, task)
		took := p.since(timed, start)
		returned = true
		if err != nil {
			p.logFailure(log, err, limit)
		}
		res <- handlerEnd{err: err, took: took}
	}()
	select {
	case end := <-res:
		return end, true
	case <-base.Done():
		select { // a handler that ended as the pool abandoned it
		case end := <-res:
			return end, true
		default:
		}
		return handlerEnd{err: errAbandoned}, false
	}
}

// logFailure logs a handler's error by what the pool makes of it: a
// Snooze is no failure; NoRetry, RetryAfter and an error returned once
// HandlerTimeout passed each have their line, any other error the plain
// one.
func (p *pool) logFailure(log *slog.Logger, err error, limit *clockDeadline) {
	switch v := verdictOf(err).(type) {
	case *SnoozeError:
	case *NoRetryError:
		log.Info("fdbqueue: handler failed with NoRetry: no more attempts", "err", err)
	case *RetryAfterError:
		log.Info("fdbqueue: handler failed with RetryAfter: retried after its delay, not the backoff", "err", err, "delay", v.Delay)
	default:
		if limit.timedOut() {
			log.Info("fdbqueue: handler failed: it ran past HandlerTimeout", "err", err, "timeout", p.o.HandlerTimeout)
		} else {
			log.Info("fdbqueue: handler failed", "err", err)
		}
	}
}

// clockDeadline is a context that ends as its parent does, or with
// context.DeadlineExceeded at its deadline on the queue's clock: what
// context.WithDeadline does on the system clock, for a JobQueueConfig.Clock
// that may be a test's. (A context.WithCancel under it ends with its
// error.)
type clockDeadline struct {
	parent   context.Context
	deadline time.Time
	done     chan struct{}
	mu       sync.Mutex
	err      error
}

// newClockDeadline returns a clockDeadline d after now on clock, and the
// function that releases its timer's goroutine (and ends it), to be
// called once the handler is done with it.
func newClockDeadline(parent context.Context, clock Clock, d time.Duration) (*clockDeadline, func()) {
	c := &clockDeadline{parent: parent, deadline: clock.Now().Add(d), done: make(chan struct{})}
	fired := clock.After(d)
	stopParent := context.AfterFunc(parent, func() { c.end(parent.Err()) })
	quit := make(chan struct{})
	go func() {
		select {
		case <-fired:
			c.end(context.DeadlineExceeded)
		case <-quit:
		}
	}()
	return c, func() {
		stopParent()
		close(quit)
		c.end(context.Canceled)
	}
}

func (c *clockDeadline) end(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
		close(c.done)
	}
}

// timedOut reports whether c ended at its deadline (false for a nil c).
func (c *clockDeadline) timedOut() bool {
	return c != nil && errors.Is(c.Err(), context.DeadlineExceeded)
}

// Deadline is the earlier of c's deadline and its parent's, as
// context.WithDeadline's is.
func (c *clockDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *clockDeadline) Done() <-chan struct{} { return c.done }
func (c *clockDeadline) Value(key any) any     { return c.parent.Value(key) }

func (c *clockDeadline) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// since is the time on the queue's clock since start, if timed.
func (p *pool) since(timed bool, start time.Time) time.Duration {
	if !timed {
		return 0
	}
	return p.q.cfg.Clock.Now().Sub(start)
}

// heartbeat extends the task's lease every ExtendEvery until stop closes;
// lost is called if the lease is lost. After a failed extension the next
// one comes sooner: at half the time left before the lease's deadline, if
// that is before ExtendEvery (which may be just under the lease), so that
// one failure does not let the deadline pass unextended. The first comes
// so too when the lease's deadline is less than ExtendEvery away: a lease
// that Run settled under its ID some time after it was taken; at once if
// the deadline has passed (the job is due again: another consumer may
// lease it any moment, while this handler runs).
func (p *pool) heartbeat(ctx context.Context, task *Task, stop <-chan struct{}, lost func(), log *slog.Logger) {
	wait := p.o.ExtendEvery
	if left := task.Lease().Deadline.Sub(p.q.cfg.Clock.Now()); left <= 0 {
		wait = 0
	} else if left < wait {
		wait = retryExtension(wait, left)
	}
	for {
		select {
		case <-stop:
			return
		case <-p.q.cfg.Clock.After(wait):
		}
		wait = p.o.ExtendEvery
		l, err := p.q.extend(ctx, p.db, task.Lease(), p.o.LeaseDuration)
		gone := errors.Is(err, ErrLeaseLost) && task.acking()
		if !gone {
			p.q.journal.track.obs.leaseExtended(err)
		}
		switch {
		case gone:
			// Most likely the handler's own Task.Ack removed the job: no
			// lost lease (not counted as one, nor at all), and its
			// context must not end. The pool's ack, under the same
			// operation ID, tells once the handler returns (LeaseLost if
			// another consumer had the job).
			log.Debug("fdbqueue: job gone after the handler's Task.Ack; no more extensions", "err", err)
			return
		case errors.Is(err, ErrLeaseLost):
			log.Warn("fdbqueue: lease lost while the handler ran", "err", err)
			lost()
			return
		case err != nil:
			if ctx.Err() != nil {
				return
			}
			wait = retryExtension(p.o.ExtendEvery, task.Lease().Deadline.Sub(p.q.cfg.Clock.Now()))
			log.Error("fdbqueue: lease extension failed; retrying", "err", err, "in", wait)
		default:
			task.set(l)
		}
	}
}

// retryExtension is the wait before the extension that follows a failed
// one, with left until the lease's deadline: half of left (or all of it
// once that is under two milliseconds), or a second once the deadline
// has passed (an extension of a lease past its deadline still succeeds
// while nobody leased the job again; a failed lease is retried as
// often), and at most every, the pool's ExtendEvery.
func retryExtension(every, left time.Duration) time.Duration {
	w := time.Second
	switch {
	case left/2 >= time.Millisecond:
		w = left / 2
	case left > 0:
		w = left
	}
	return min(w, every)
}
