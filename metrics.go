package fdbqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Metrics and logs. A queue reports through the OpenTelemetry metric API
// and log/slog, both off unless the application passes a MeterProvider
// (WithMeterProvider, whose doc lists the instruments) and a logger
// (WithLogger).

// WithMeterProvider makes the queue report its metrics to mp (default: a
// no-op provider, so nothing is recorded). To see each commit's error, the
// operations then run their transactions as every kv backend's Transact
// does, with the Database's CreateTransaction and kv.RetryLoop, instead of
// calling its Transact: a Database wrapper whose Transact does more than
// that (setting options, say) should set them in CreateTransaction too.
//
// The instruments, all carrying the attribute fdbqueue.queue
// (WithQueueName), with their units:
//
//	fdbqueue.operations            counter {operation}  fdbqueue.op, fdbqueue.outcome
//	fdbqueue.conflicts             counter {conflict}   fdbqueue.op  commits that failed with not_committed (1020)
//	fdbqueue.retries               counter {retry}      fdbqueue.op  transactions run again after an error
//	fdbqueue.commit_unknown_result counter {commit}     fdbqueue.op  commits whose outcome was unknown (1021, 1039)
//	fdbqueue.journal.replays       counter {replay}     fdbqueue.op  attempts that found the operation's journal record
//	fdbqueue.staged.steps          counter {step}       fdbqueue.phase, fdbqueue.outcome (commit, conflict, failure)
//	fdbqueue.lease.outcomes        counter {job}        fdbqueue.outcome (a JobQueue pool's Result)
//	fdbqueue.lease.expired         counter {lease}      expired leases taken over by Lease
//	fdbqueue.lease.extensions      counter {extension}  fdbqueue.outcome (JobQueue.Extend, and a pool's heartbeat)
//	fdbqueue.handler.duration      histogram s          fdbqueue.outcome (a JobQueue pool's Result)
//	fdbqueue.dead_letters          counter {job}        jobs moved to the dead-letter list
//	fdbqueue.schedule.ahead        counter {call}       Schedules that found their schedule's marker at a later slot than theirs
//	fdbqueue.depth                 gauge   {item}       items, or a JobQueue's jobs (RegisterGauges)
//	fdbqueue.oldest_item.age       gauge   s            RegisterGauges: versionstamp-ordered Queue, JobQueue
//	fdbqueue.jobs                  gauge   {job}        fdbqueue.state (JobQueue.RegisterGauges)
//
// Operations (fdbqueue.op, by the same names as the op field of the log
// lines and UnknownResultError.Op): enqueue, dequeue, push, pop (PopMin
// and PopMax, in every form), and the JobQueue's add, lease, ack, nack,
// release, requeue, delete_dead, cancel, unschedule; conflicts and
// retries also count clear, recover, schedule and extend
// (whose outcomes fdbqueue.lease.extensions counts). Outcomes: ok, empty,
// maybe_committed (the error satisfies kv.MaybeCommitted: call it again
// under the same ID to settle it, on the same queue value for an ID the
// queue made and logged; see WithOpID; without the journal it cannot be
// settled), canceled (the context ended),
// error; a pool's (fdbqueue.lease.outcomes): acked, retried,
// dead_lettered, lease_lost, abandoned, failed, snoozed (Result's names in
// snake_case); an extension's (fdbqueue.lease.extensions): extended,
// lease_lost (ErrLeaseLost: another consumer has the job, or it was
// settled or cancelled), maybe_committed, canceled, error (an Extend that fails its
// argument checks, ErrInvalidArgument, is not counted, nor a pool's
// heartbeat extension that finds the job gone once its handler called
// Task.Ack: most likely that ack removed it, and the pool's outcome
// tells). A call its argument checks refuse before it starts
// (ErrInvalidArgument, ErrValueTooLarge) is not counted; a batch refused
// with ErrBatchTooLarge is, as error. Given a caller's
// Transaction, an operation's outcome is its function's: the caller
// commits later, and its conflicts and retries are the caller's. So
// fdbqueue.operations counts calls, not jobs: a pool's job acked with
// Task.Ack counts an ack for each run of the caller's function and one
// more for the pool's own ack, which finds it done (a journal replay);
// fdbqueue.lease.outcomes counts each job once.
//
// fdbqueue.schedule.ahead counts the Schedule calls (RunScheduler's
// included) that added nothing because the schedule's marker held a
// later slot than their now's: a clock ahead of this process's wrote it
// (see JobQueue.Schedule). A few, at slot boundaries, are clocks that
// differ by a moment; a steady count means the schedule adds no jobs
// until this clock reaches the marker's slot.
//
// fdbqueue.handler.duration is the time from a pool's call of the Handler
// to its return (or panic), on the queue's Clock, recorded once the job is
// settled, with the job's Result; a handler abandoned at shutdown before
// it returned has no sample (fdbqueue.lease.outcomes counts it). It
// advises explicit bucket boundaries (an SDK view may replace them), in
// seconds: 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
// 60, 120, 300, 600.
//
// The states of fdbqueue.jobs partition the jobs, so that they add up to
// depth + dead: due (not leased, and due), delayed, leased (live leases),
// expired (leases past their deadline) and dead. JobStats.Due counts the
// expired leases too; the gauge's due does not.
//
// What the instruments cost: an attribute set per call and atomic adds in
// the SDK (and two clock reads per job for the histogram); with the
// default no-op provider, nothing measurable: no attribute is built and
// the clock is not read. A nil pointer of a provider type, or a provider
// whose Meter returns nil, is refused by the constructor with
// ErrInvalidArgument.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.obs.meterProvider = mp }
}

// WithLogger makes the queue log the events worth a line to l: recoveries
// of staged lines, staged calls whose claim expired, operations that ended
// with an unknown commit outcome (with the operation ID that settles them
// on this queue value, see WithOpID; on a queue made WithoutIdempotency,
// with none: they cannot be settled), journal replays, expired leases
// taken over, dead letters and a RunScheduler's schedule whose marker is
// ahead of its clock. The default discards them: a library should
// not write to an application's logs unasked, and every one of these events
// is also counted in the metrics. A Logger without a handler (a zero
// slog.Logger, or one whose handler is a nil pointer) is refused by the
// constructor with ErrInvalidArgument; nil is the default.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) { c.obs.logger = l }
}

// WithQueueName sets the value of the fdbqueue.queue attribute of the
// queue's metrics and of its log lines (default: its subspace, as a tuple
// when it is one).
func WithQueueName(name string) Option {
	return func(c *config) { c.obs.name = name }
}

// obsConfig is what the options above set.
type obsConfig struct {
	meterProvider metric.MeterProvider
	logger        *slog.Logger
	name          string
}

const instrumentationName = "github.com/fdbqueue/fdbqueue"

// Attribute keys.
const (
	attrQueue   = attribute.Key("fdbqueue.queue")
	attrOp      = attribute.Key("fdbqueue.op")
	attrOutcome = attribute.Key("fdbqueue.outcome")
	attrPhase   = attribute.Key("fdbqueue.phase")
)

// observer holds a queue's instruments and logger.
type observer struct {
	metered bool // an application's MeterProvider was given
	queue   attribute.KeyValue
	meter   metric.Meter
	log     *slog.Logger
	// logger is the Logger given WithLogger (nil without one), before the
	// queue's attribute was added: a pool given the same one logs where
	// the queue does.
	logger *slog.Logger

	ops, conflicts, retries, unknown, replays  metric.Int64Counter
	staged, leaseOutcomes, expiredLeases, dead metric.Int64Counter
	extensions, scheduleAhead                  metric.Int64Counter
	handlerDuration                            metric.Float64Histogram
}

// handlerBuckets are the bucket boundaries, in seconds, that
// fdbqueue.handler.duration advises (WithMeterProvider lists them): from
// milliseconds for a handler that writes a key to minutes for a batch job.
var handlerBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}

func newObserver(queuePrefix []byte, c obsConfig) *observer {
	name := c.name
	if name == "" {
		name = fmt.Sprintf("%q", queuePrefix)
		if t, err := tuple.Unpack(queuePrefix); err == nil {
			name = fmt.Sprint(t)
		}
	}
	mp := c.meterProvider
	if mp == nil {
		mp = noop.NewMeterProvider()
	}
	log := c.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &observer{metered: c.meterProvider != nil, queue: attrQueue.String(name), meter: mp.Meter(instrumentationName), log: log.With(string(attrQueue), name), logger: c.logger}
	counter := func(name, unit, desc string) metric.Int64Counter {
		// An SDK reports an invalid instrument through its error handler
		// and returns a working no-op one with the error: keep it.
		ctr, _ := o.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if ctr == nil {
			ctr, _ = noop.NewMeterProvider().Meter("").Int64Counter(name)
		}
		return ctr
	}
	o.ops = counter("fdbqueue.operations", "{operation}", "Queue operations by kind and outcome.")
	o.conflicts = counter("fdbqueue.conflicts", "{conflict}", "Commits that failed with not_committed (1020).")
	o.retries = counter("fdbqueue.retries", "{retry}", "Transactions run again after an error.")
	o.unknown = counter("fdbqueue.commit_unknown_result", "{commit}", "Commits whose outcome was unknown (1021, 1039).")
	o.replays = counter("fdbqueue.journal.replays", "{replay}", "Attempts that found their operation's journal record (an earlier attempt had committed).")
	o.staged = counter("fdbqueue.staged.steps", "{step}", "Steps of staged dequeues by phase and outcome.")
	o.leaseOutcomes = counter("fdbqueue.lease.outcomes", "{job}", "Jobs settled by a JobQueue pool, by outcome.")
	o.expiredLeases = counter("fdbqueue.lease.expired", "{lease}", "Expired leases taken over by Lease.")
	o.dead = counter("fdbqueue.dead_letters", "{job}", "Jobs moved to the dead-letter list.")
	o.extensions = counter("fdbqueue.lease.extensions", "{extension}", "Lease extensions (JobQueue.Extend, a pool's heartbeat), by outcome.")
	o.scheduleAhead = counter("fdbqueue.schedule.ahead", "{call}", "Schedule calls that added nothing because the schedule's marker held a later slot (written by a clock ahead).")
	o.handlerDuration, _ = o.meter.Float64Histogram("fdbqueue.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a JobQueue pool's call of its Handler to the handler's return, by the job's outcome."),
		metric.WithExplicitBucketBoundaries(handlerBuckets...))
	if o.handlerDuration == nil {
		o.handlerDuration, _ = noop.NewMeterProvider().Meter("").Float64Histogram("fdbqueue.handler.duration")
	}
	return o
}

func (o *observer) add(c metric.Int64Counter, n int64, kvs ...attribute.KeyValue) {
	if !o.metered {
		return // the no-op provider's counters: skip building the attributes
	}
	c.Add(context.Background(), n, metric.WithAttributes(append(kvs, o.queue)...))
}

// outcomeOf names how an operation ended.
func outcomeOf(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrEmpty):
		return "empty"
	case kv.MaybeCommitted(err):
		return "maybe_committed"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}

// ended counts an operation (hook: op.end). journaled says whether it
// kept a journal record, so that a call under id can settle it.
func (o *observer) ended(op string, id OpID, journaled bool, err error) {
	if op == "" || err == nil && !o.metered || errors.Is(err, errOpReplaced) {
		return // a success without a MeterProvider: nothing to count or log
	}
	out := outcomeOf(err)
	o.add(o.ops, 1, attrOp.String(op), attrOutcome.String(out))
	if errors.Is(err, ErrClaimExpired) {
		o.log.Warn("fdbqueue: staged claim expired: the request was dropped and its item returned to the queue",
			"op", op, "op_id", id.String())
	}
	if out == "maybe_committed" && !journaled {
		// No record to find (WithoutIdempotency): a call under an ID
		// applies the operation anew.
		o.log.Warn("fdbqueue: operation may have committed; the queue keeps no journal (WithoutIdempotency), so it cannot be settled: calling it again may apply it twice",
			"op", op, "err", err)
	} else if out == "maybe_committed" {
		var ur *UnknownResultError
		if errors.As(err, &ur) {
			err = ur.Err // the line names the ID; the wrapper would name it again
		}
		o.log.Warn("fdbqueue: operation may have committed; call it again with WithOpID(op_id) on this queue value to settle it",
			"op", op, "op_id", id.String(), "err", err)
	}
}

// replayed counts an attempt that found its operation's record (hook:
// op.applied).
func (o *observer) replayed(op string, id OpID) {
	if op == "" {
		return
	}
	o.add(o.replays, 1, attrOp.String(op))
	o.log.Info("fdbqueue: operation found its journal record: an earlier attempt committed", "op", op, "op_id", id.String())
}

// commitFailed counts a failed commit (hook: trackedTx.Commit). It logs
// nothing: it runs only with a MeterProvider (the operations' own retry
// loop), and what a queue logs must not depend on that. A retry that finds
// the committed attempt's record logs that (replayed), with the ID.
func (o *observer) commitFailed(op string, err error) {
	switch {
	case isConflict(err):
		o.add(o.conflicts, 1, attrOp.String(op))
	case kv.MaybeCommitted(err):
		o.add(o.unknown, 1, attrOp.String(op))
	}
}

// retried counts a transaction run again (hook: trackedTx.OnError, Reset).
func (o *observer) retried(op string, _ error) { o.add(o.retries, 1, attrOp.String(op)) }

// stagedStep counts one step of a staged dequeue (hook: waiter.loop).
func (o *observer) stagedStep(phase int, err error) {
	out := "commit"
	switch {
	case err == nil:
	case isConflict(err):
		out = "conflict"
	default:
		out = "failure"
	}
	name := "unknown"
	if phase >= 0 && phase < len(phaseNames) {
		name = phaseNames[phase]
	}
	o.add(o.staged, 1, attrPhase.String(name), attrOutcome.String(out))
}

// recovered returns the function that logs what Recover did on one side
// of a staged queue: what stats gained since (hook: stageSide.recover).
func (o *observer) recovered(side string, stats *RecoverStats) func() {
	before := *stats
	return func() {
		dropped, returned := stats.DroppedRequests-before.DroppedRequests, stats.ReturnedItems-before.ReturnedItems
		if dropped == 0 && returned == 0 {
			return
		}
		o.log.Info("fdbqueue: recovered a staged line", "side", side, "dropped_requests", dropped, "returned_items", returned)
	}
}

// opKind is the kind of a staged take: a Queue's dequeue or a
// PriorityQueue's pop.
func (s *stageSide[T]) opKind() string {
	var zero T
	if _, ok := any(zero).(Item); ok {
		return "pop"
	}
	return "dequeue"
}

// side names the side: q, min or max (as its meta subspace does).
func (s *stageSide[T]) side() string {
	switch {
	case s.opKind() == "dequeue":
		return "q"
	case s.reverse:
		return "max"
	}
	return "min"
}

// leaseSettled counts a pool's outcome (hook: pool.settle).
func (o *observer) leaseSettled(r Result) {
	if !o.metered {
		return // don't build the attribute (metricValue allocates)
	}
	o.add(o.leaseOutcomes, 1, attrOutcome.String(r.metricValue()))
}

// leaseExtended counts an Extend by its outcome (hook: JobQueue.Extend,
// which a pool's heartbeat calls).
func (o *observer) leaseExtended(err error) {
	if !o.metered {
		return // don't build the attribute
	}
	out := "extended"
	switch {
	case err == nil:
	case errors.Is(err, ErrLeaseLost):
		out = "lease_lost"
	default:
		out = outcomeOf(err)
	}
	o.add(o.extensions, 1, attrOutcome.String(out))
}

// handlerReturned records how long a pool's handler ran, with the Result
// of its job (hook: pool.process).
func (o *observer) handlerReturned(r Result, took time.Duration) {
	if !o.metered {
		return
	}
	o.handlerDuration.Record(context.Background(), took.Seconds(),
		metric.WithAttributes(attrOutcome.String(r.metricValue()), o.queue))
}

// snakeCase turns a Result's name into its fdbqueue.outcome value (one
// replacer for every call: building one costs allocations per job).
var snakeCase = strings.NewReplacer(" ", "_", "-", "_")

// metricValue is the result's fdbqueue.outcome value: its name in
// snake_case, as the operations' outcomes are ("lease_lost").
func (r Result) metricValue() string {
	return snakeCase.Replace(r.String())
}

// afterCommit runs f once tr's commit succeeds: events of an attempt that
// does not commit are not reported. Inside a caller's transaction it runs
// when the operation's function returns; outside a tracked transaction, at
// once.
func afterCommit(tr kv.Transaction, f func()) {
	if t, ok := tr.(*trackedTx); ok {
		t.events = append(t.events, f)
		return
	}
	f()
}

// leaseExpired reports an expired lease that Lease took over (hook:
// JobQueue.take), after tr commits. attempt is the expired lease's number
// (Lease.Attempt), logged under the key the pool's lines use.
func (o *observer) leaseExpired(tr kv.Transaction, job JobID, attempt int) {
	afterCommit(tr, func() {
		o.add(o.expiredLeases, 1)
		o.log.Info("fdbqueue: expired lease taken over", "job", job.String(), "attempt", attempt)
	})
}

// deadLettered reports a job moved to the dead-letter list (hook:
// JobQueue.bury), after tr commits.
func (o *observer) deadLettered(tr kv.Transaction, job JobID, reason string) {
	afterCommit(tr, func() {
		o.add(o.dead, 1)
		o.log.Warn("fdbqueue: job dead-lettered", "job", job.String(), "reason", reason)
	})
}

// markerAhead counts a Schedule that found its schedule's marker at a
// later slot (hook: JobQueue.schedule), after tr commits.
func (o *observer) markerAhead(tr kv.Transaction) {
	afterCommit(tr, func() { o.add(o.scheduleAhead, 1) })
}

// markerAheadLogged logs, at Warn, that RunScheduler's schedule name
// adds no job while its marker's slot is ahead of now (hook:
// JobQueue.runScheduler, once each time a schedule falls behind its
// marker).
func (o *observer) markerAheadLogged(name string, marker, now time.Time) {
	o.log.Warn("fdbqueue: periodic job's marker is ahead of this clock: no job is added until the clock reaches its slot; Unschedule removes it",
		"schedule", name, "marker_slot", marker.UTC(), "now", now.UTC(), "ahead_by", marker.Sub(now))
}

// versionsPerSecond is how fast FoundationDB's commit versions advance
// (VERSIONS_PER_SECOND, 1e6, in fdbclient/ServerKnobs.cpp); memdb's do too.
// A versionstamp's age is then the distance of its version from the read
// version, divided by it.
const versionsPerSecond = 1_000_000

// The gauges' descriptions, one per name for every kind of queue: all
// report through one instrumentation scope, and the OpenTelemetry SDK
// takes one name created with two descriptions for a conflicting duplicate
// registration, exported as two streams of that name.
const (
	depthUnit     = "{item}"
	depthDesc     = "Items in the queue (a JobQueue's jobs, leased or not)."
	oldestAgeDesc = "Age of the item at the head (a Queue's, from its versionstamp), or how long a JobQueue's first due job has been due."
)

// gaugeTimeout bounds a collection's read of the gauges: the SDK runs the
// callbacks under its reader's lock, and a pull exporter (Prometheus)
// collects with a context that never ends, so a read waiting on an
// unreachable cluster (FDB's reads wait for it, unless the application
// set transaction_timeout) would hold back that collection and every
// later one, with all of the application's metrics on that reader.
var gaugeTimeout = 5 * time.Second

// registerGauges registers the depth and oldest-age gauges of one queue,
// read through db at each collection. oldest, when not nil, issues its
// reads and returns the function that waits for them: the counters' read
// and its are issued together, one round trip.
func (o *observer) registerGauges(db kv.ReadTransactor, d depthKeys, oldest func(kv.ReadTransaction) func() (time.Duration, bool, error)) (metric.Registration, error) {
	if err := checkTransactor(db); err != nil {
		return nil, err
	}
	depthG, err := o.meter.Int64ObservableGauge("fdbqueue.depth", metric.WithUnit(depthUnit), metric.WithDescription(depthDesc))
	if err != nil {
		return nil, err
	}
	insts := []metric.Observable{depthG}
	var ageG metric.Float64ObservableGauge
	if oldest != nil {
		if ageG, err = o.meter.Float64ObservableGauge("fdbqueue.oldest_item.age", metric.WithUnit("s"),
			metric.WithDescription(oldestAgeDesc)); err != nil {
			return nil, err
		}
		insts = append(insts, ageG)
	}
	attrs := metric.WithAttributes(o.queue)
	return o.meter.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
		defer cancel()
		type reading struct {
			n   int64
			age time.Duration
			ok  bool
		}
		r, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) (reading, error) {
			var r reading
			counters := d.issue(tr)
			var age func() (time.Duration, bool, error)
			if oldest != nil {
				age = oldest(tr)
			}
			var err error
			if r.n, err = sumCounters(counters); err != nil || age == nil {
				return r, err
			}
			r.age, r.ok, err = age()
			return r, err
		})
		if err != nil {
			return fmt.Errorf("fdbqueue: gauges: %w", err)
		}
		ob.ObserveInt64(depthG, r.n, attrs)
		if r.ok {
			ob.ObserveFloat64(ageG, r.age.Seconds(), attrs)
		}
		return nil
	}, insts...)
}

// RegisterGauges registers the queue's observable gauges, fdbqueue.depth
// and, for a versionstamp-ordered queue, fdbqueue.oldest_item.age (the
// item at the head's age, from its versionstamp: other layouts' keys carry
// no time), with the queue's MeterProvider. At each collection it reads
// through db, in one read-only transaction of snapshot reads issued
// together (one round trip): the depth counters (see Depth) and, for the
// age gauge, the head item (limit 1) and the read version, given at most
// 5 seconds (less if the collection's context ends sooner).
// The transaction checks the stored configuration too, as Depth does: when
// the handle's options disagree, the collection reports nothing for the
// queue and its callback returns the *ConfigMismatchError.
// Unregister the returned registration when the queue is no longer used.
func (q *Queue) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	var oldest func(kv.ReadTransaction) func() (time.Duration, bool, error)
	if q.cfg.versionstamps {
		oldest = q.oldestAge
	}
	return q.journal.track.obs.registerGauges(q.journal.gate.reads(db), q.journal.track.depth, oldest) // config.go
}

// RegisterGauges registers the priority queue's fdbqueue.depth gauge (its
// keys carry no time: no age gauge); see Queue.RegisterGauges.
func (pq *PriorityQueue) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := pq.usable(); err != nil {
		return nil, err
	}
	return pq.journal.track.obs.registerGauges(pq.journal.gate.reads(db), pq.journal.track.depth, nil) // config.go
}

// oldestAge issues the read of the head item of a versionstamp-ordered
// queue and returns the function that waits for it and gives the item's
// age: the read version minus the item's commit version, in seconds at
// versionsPerSecond. ok is false when the queue is empty or its head is not
// an item of this layout.
func (q *Queue) oldestAge(tr kv.ReadTransaction) func() (time.Duration, bool, error) {
	s := tr.Snapshot()
	head := s.GetRange(q.items, kv.RangeOptions{Limit: 1})
	return func() (time.Duration, bool, error) { return q.headAge(s, head) }
}

// headAge waits for head, the read of the first item, and returns its age
// (see oldestAge).
func (q *Queue) headAge(s kv.ReadTransaction, head kv.RangeResult) (time.Duration, bool, error) {
	rv, err := s.GetReadVersion().Get()
	if err != nil {
		return 0, false, err
	}
	kvs, err := head.GetSlice()
	if err != nil || len(kvs) == 0 {
		return 0, false, err
	}
	t, err := q.sub.Unpack(kvs[0].Key)
	if err != nil || len(t) != 2 {
		return 0, false, nil
	}
	vs, ok := t[0].(tuple.Versionstamp)
	if !ok {
		return 0, false, nil
	}
	var v int64
	for _, b := range vs.TransactionVersion[:8] {
		v = v<<8 | int64(b)
	}
	d := max(rv-v, 0)
	return time.Duration(d) * (time.Second / versionsPerSecond), true, nil
}

// RegisterGauges registers the job queue's observable gauges with its
// MeterProvider: fdbqueue.depth (jobs in the queue, leased or not),
// fdbqueue.jobs by fdbqueue.state (due, delayed, leased, expired, dead:
// JobStats's, with due not counting the expired leases, so that the states
// add up to depth + dead) and fdbqueue.oldest_item.age (how long the first due job has
// been due, in seconds). At each collection it runs Stats through db: one
// read-only transaction of snapshot reads, without reading the jobs, given
// at most 5 seconds (less if the collection's context ends sooner).
// Unregister the returned registration when the queue is no longer used.
func (q *JobQueue) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if err := checkTransactor(db); err != nil {
		return nil, err
	}
	o := q.journal.track.obs
	depthG, err := o.meter.Int64ObservableGauge("fdbqueue.depth", metric.WithUnit(depthUnit), metric.WithDescription(depthDesc))
	if err != nil {
		return nil, err
	}
	jobsG, err := o.meter.Int64ObservableGauge("fdbqueue.jobs", metric.WithUnit("{job}"), metric.WithDescription("Jobs by state (JobStats)."))
	if err != nil {
		return nil, err
	}
	ageG, err := o.meter.Float64ObservableGauge("fdbqueue.oldest_item.age", metric.WithUnit("s"),
		metric.WithDescription(oldestAgeDesc))
	if err != nil {
		return nil, err
	}
	attrs := metric.WithAttributes(o.queue)
	state := func(s string) metric.MeasurementOption {
		return metric.WithAttributes(o.queue, attribute.String("fdbqueue.state", s))
	}
	return o.meter.RegisterCallback(func(ctx context.Context, ob metric.Observer) error {
		ctx, cancel := context.WithTimeout(ctx, gaugeTimeout)
		defer cancel()
		st, err := q.Stats(ctx, db)
		if err != nil {
			return fmt.Errorf("fdbqueue: gauges: %w", err)
		}
		ob.ObserveInt64(depthG, st.Queued+st.Leased+st.ExpiredLeases, attrs)
		ob.ObserveInt64(jobsG, st.Due-st.ExpiredLeases, state("due"))
		ob.ObserveInt64(jobsG, st.Delayed, state("delayed"))
		ob.ObserveInt64(jobsG, st.Leased, state("leased"))
		ob.ObserveInt64(jobsG, st.ExpiredLeases, state("expired"))
		ob.ObserveInt64(jobsG, st.Dead, state("dead"))
		ob.ObserveFloat64(ageG, st.OldestDue.Seconds(), attrs)
		return nil
	}, depthG, jobsG, ageG)
}
