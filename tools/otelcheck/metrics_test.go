package otelcheck

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// collected is one collection, flattened: metric name and attributes
// (without fdbqueue.queue) to value. A histogram's data point gives two
// entries, its count under the name with ":count" and its sum under the
// name with ":sum".
type collected map[string]float64

func collect(t *testing.T, r *sdkmetric.ManualReader, queue string) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	out := collected{}
	add := func(name string, attrs attribute.Set, v float64) {
		q, _ := attrs.Value("fdbqueue.queue")
		if q.AsString() != queue {
			return
		}
		key := name
		for _, kv := range attrs.ToSlice() {
			if kv.Key != "fdbqueue.queue" {
				key += " " + string(kv.Key) + "=" + kv.Value.Emit()
			}
		}
		out[key] += v
	}
	for _, sm := range rm.ScopeMetrics {
		require.Equal(t, "github.com/fdbqueue/fdbqueue", sm.Scope.Name)
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				require.True(t, d.IsMonotonic, m.Name)
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[int64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, float64(p.Value))
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					add(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					add(m.Name+":count", p.Attributes, float64(p.Count))
					add(m.Name+":sum", p.Attributes, p.Sum)
				}
			default:
				t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return out
}

// A known sequence of operations on a versionstamp-ordered queue: three
// enqueues, one whose commit reports commit_unknown_result after applying
// (memdb's fault injection; FDB's 1021, which the retry loop retries:
// fdbclient/NativeAPI.actor.cpp, Transaction::onError), a dequeue that
// conflicts with another (a real conflict: its commit is held in flight
// while the other takes the same head), and a dequeue of an empty queue.
func TestQueueMetrics(t *testing.T) {
	ctx := context.Background()
	db := memdb.New(memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"otel"})
	require.NoError(t, err)
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder(), fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithLogger(logger), fdbqueue.WithQueueName("jobs"))
	require.NoError(t, err)

	for _, v := range []string{"a", "b", "c"} {
		require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
	}
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	require.NoError(t, q.Enqueue(ctx, db, []byte("d")))

	// The conflict: A's commit is held after its read of the head; B takes
	// the head and commits; A's commit then fails with not_committed and
	// its retry takes the next item.
	held, release := db.HoldNextCommit()
	type res struct {
		v   []byte
		err error
	}
	a := make(chan res, 1)
	go func() {
		v, err := q.Dequeue(ctx, db)
		a <- res{v, err}
	}()
	<-held
	vb, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "a", string(vb))
	release()
	ra := <-a
	require.NoError(t, ra.err)
	require.Equal(t, "b", string(ra.v))

	reg, err := q.RegisterGauges(db)
	require.NoError(t, err)
	got := collect(t, reader, "jobs")
	require.Equal(t, 4.0, got["fdbqueue.operations fdbqueue.op=enqueue fdbqueue.outcome=ok"])
	require.Equal(t, 2.0, got["fdbqueue.operations fdbqueue.op=dequeue fdbqueue.outcome=ok"])
	require.Equal(t, 1.0, got["fdbqueue.commit_unknown_result fdbqueue.op=enqueue"])
	require.Equal(t, 1.0, got["fdbqueue.journal.replays fdbqueue.op=enqueue"], "the retry found the record")
	require.Equal(t, 1.0, got["fdbqueue.retries fdbqueue.op=enqueue"])
	require.Equal(t, 1.0, got["fdbqueue.conflicts fdbqueue.op=dequeue"])
	require.Equal(t, 1.0, got["fdbqueue.retries fdbqueue.op=dequeue"])
	require.Equal(t, 2.0, got["fdbqueue.depth"], "four enqueued once each, two dequeued")
	age, ok := got["fdbqueue.oldest_item.age"]
	require.True(t, ok, "a versionstamp-ordered queue reports the head's age")
	require.GreaterOrEqual(t, age, 0.0)
	require.Less(t, age, 60.0)

	_, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	_, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	_, err = q.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	got = collect(t, reader, "jobs")
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=dequeue fdbqueue.outcome=empty"])
	require.Equal(t, 0.0, got["fdbqueue.depth"])
	_, ok = got["fdbqueue.oldest_item.age"]
	require.False(t, ok, "no age on an empty queue")

	require.NoError(t, reg.Unregister())
	got = collect(t, reader, "jobs")
	_, ok = got["fdbqueue.depth"]
	require.False(t, ok, "unregistered")

	logMu.Lock()
	defer logMu.Unlock()
	require.NotContains(t, logs.String(), "commit outcome unknown", "no line of the metered retry loop's own (the library's TestLogLinesSameWithAndWithoutMetrics)")
	require.Contains(t, logs.String(), "found its journal record")
	require.Contains(t, logs.String(), "fdbqueue.queue=jobs")
}

// An operation that ends maybe-committed is counted so, and logged with
// the ID that settles it.
func TestMaybeCommittedOutcome(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var logs bytes.Buffer
	pq, err := fdbqueue.NewPriorityQueue(fdbqueue.SubspaceFromBytes([]byte("pq")), fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), fdbqueue.WithQueueName("pq"))
	require.NoError(t, err)
	require.NoError(t, pq.Push(ctx, db, []byte("x"), 1))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	id := fdbqueue.NewOpID()
	// The retry limit makes the loop give up at once: the op's error is
	// maybe-committed.
	_, err = pq.PopMin(ctx, retryOnce{db}, fdbqueue.WithOpID(id))
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	got := collect(t, reader, "pq")
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=pop fdbqueue.outcome=maybe_committed"])
	require.Equal(t, 1.0, got["fdbqueue.commit_unknown_result fdbqueue.op=pop"])
	require.Zero(t, got["fdbqueue.retries fdbqueue.op=pop"], "the loop gave up: nothing was run again")
	require.Contains(t, logs.String(), id.String())
	d, err := pq.Depth(ctx, db)
	require.NoError(t, err)
	require.Zero(t, d, "the pop applied")
}

// retryOnce is a Database whose transactions give up after their first
// failure, so that an unknown commit result reaches the caller.
type retryOnce struct{ *memdb.DB }

func (d retryOnce) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.DB.CreateTransaction(ctx)
	if err == nil {
		err = tr.Options().SetRetryLimit(0)
	}
	return tr, err
}

func (d retryOnce) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, tr, fn)
}

// A commit interrupted by the end of its context (kv.CommitInterrupted,
// what fdbkv returns for a commit in flight when the transaction is
// cancelled) may have been applied: the operation's outcome is
// maybe_committed, the one that says to settle it, though its error also
// matches context.Canceled.
func TestInterruptedCommitOutcome(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("intr")), fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithQueueName("intr"))
	require.NoError(t, err)
	db.FailNextCommit(kv.CommitInterrupted(context.Canceled), true)
	err = q.Enqueue(ctx, db, []byte("x"))
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	require.ErrorIs(t, err, context.Canceled)
	got := collect(t, reader, "intr")
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=enqueue fdbqueue.outcome=maybe_committed"])
	require.Zero(t, got["fdbqueue.operations fdbqueue.op=enqueue fdbqueue.outcome=canceled"])
	require.Equal(t, 1.0, got["fdbqueue.commit_unknown_result fdbqueue.op=enqueue"])
}

// An event of a transaction (a dead letter) is counted once when the
// commit that carried it first failed with a conflict and its retry
// committed: the failed attempt's events are dropped by OnError.
func TestDeadLetterRetriedCountsOnce(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	clock := queuetest.NewClock(time.Unix(1_700_000_000, 0))
	jq, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes([]byte("jqr")), fdbqueue.JobQueueConfig{MaxAttempts: 1, Clock: clock},
		fdbqueue.WithMeterProvider(mp), fdbqueue.WithQueueName("jqr"))
	require.NoError(t, err)
	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")})
	require.NoError(t, err)
	_, err = jq.Lease(ctx, db, 1, time.Second)
	require.NoError(t, err)
	clock.Advance(2 * time.Second) // the lease expires on the job's last attempt
	db.FailNextCommit(kv.ErrNotCommitted, false)
	_, err = jq.Lease(ctx, db, 1, time.Second)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the expired job had no attempt left: dead-lettered")
	got := collect(t, reader, "jqr")
	require.Equal(t, 1.0, got["fdbqueue.conflicts fdbqueue.op=lease"])
	require.Equal(t, 1.0, got["fdbqueue.retries fdbqueue.op=lease"])
	require.Equal(t, 1.0, got["fdbqueue.dead_letters"])
	st, err := jq.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Dead)
}

// Staged dequeues count their steps by phase.
func TestStagedStepMetrics(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("stg")), fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithQueueName("stg"))
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	_, err = q.Dequeue(ctx, db)
	require.NoError(t, err)
	_, err = q.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	got := collect(t, reader, "stg")
	var steps float64
	for _, p := range q.StagingStats().Phases {
		steps += float64(p.Commits)
		require.Equal(t, float64(p.Commits), got["fdbqueue.staged.steps fdbqueue.outcome=commit fdbqueue.phase="+p.Phase], p.Phase)
	}
	require.Positive(t, steps)
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=dequeue fdbqueue.outcome=ok"])
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=dequeue fdbqueue.outcome=empty"])
	require.Zero(t, got["fdbqueue.retries fdbqueue.op=dequeue"], "no step failed: the next step's Reset is no retry")
}

// A staged step whose commit conflicts is counted as a conflict of its
// phase, as StagingStats counts it, and the step run again after it is a
// retry of the dequeue. The conflict is real: the step's commit is held
// while a plain Dequeue of another handle takes the item it read.
func TestStagedStepConflictMetrics(t *testing.T) {
	ctx := context.Background()
	db := memdb.New(memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	sub := fdbqueue.SubspaceFromBytes([]byte("stc"))
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithQueueName("stc"))
	require.NoError(t, err)
	plain, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	held, release := db.HoldNextCommit()
	done := make(chan error, 1)
	go func() {
		_, err := q.Dequeue(ctx, db)
		done <- err
	}()
	<-held
	v, err := plain.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "x", string(v))
	release()
	require.ErrorIs(t, <-done, fdbqueue.ErrEmpty)

	got := collect(t, reader, "stc")
	var conflicts float64
	for _, p := range q.StagingStats().Phases {
		conflicts += float64(p.Conflicts)
		require.Equal(t, float64(p.Conflicts), got["fdbqueue.staged.steps fdbqueue.outcome=conflict fdbqueue.phase="+p.Phase], p.Phase)
		require.Equal(t, float64(p.Commits), got["fdbqueue.staged.steps fdbqueue.outcome=commit fdbqueue.phase="+p.Phase], p.Phase)
	}
	require.Equal(t, 1.0, conflicts, "the held step conflicted")
	require.Equal(t, 1.0, got["fdbqueue.conflicts fdbqueue.op=dequeue"])
	require.Equal(t, 1.0, got["fdbqueue.retries fdbqueue.op=dequeue"])
}

// commitSignal signals after each successful commit of a transaction made
// with CreateTransaction, as a staged waiter runs its steps.
type commitSignal struct {
	*memdb.DB
	committed chan struct{}
}

func (d commitSignal) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.DB.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return signalTx{tr, d.committed}, nil
}

type signalTx struct {
	kv.Transaction
	committed chan struct{}
}

func (t signalTx) Commit() error {
	err := t.Transaction.Commit()
	if err == nil {
		select {
		case t.committed <- struct{}{}:
		default:
		}
	}
	return err
}

// A waiter's steps that commit are followed by a fresh transaction
// (Reset): those are no retries. Only a step that failed is retried.
func TestStagedWaitRetriesOnlyFailedSteps(t *testing.T) {
	ctx := context.Background()
	raw := memdb.New()
	defer raw.Close()
	db := commitSignal{raw, make(chan struct{}, 1)}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("stw")), fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithQueueName("stw"))
	require.NoError(t, err)
	got := make(chan []byte, 1)
	go func() {
		v, err := q.DequeueWait(ctx, db)
		assert.NoError(t, err)
		got <- v
	}()
	<-db.committed // on an empty queue, the waiter's first commit registers its request
	require.NoError(t, q.Enqueue(ctx, raw, []byte("x")))
	require.Equal(t, "x", string(<-got))

	var failed int64
	for _, p := range q.StagingStats().Phases {
		failed += p.Conflicts + p.Failures
	}
	m := collect(t, reader, "stw")
	require.LessOrEqual(t, m["fdbqueue.retries fdbqueue.op=dequeue"], float64(failed))
}

// The lease layer: an expired lease taken over, a dead letter, and a
// pool's outcomes.
func TestLeaseMetrics(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var logs bytes.Buffer
	clock := queuetest.NewClock(time.Unix(1_700_000_000, 0))
	jq, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes([]byte("jq")), fdbqueue.JobQueueConfig{MaxAttempts: 2, Clock: clock},
		fdbqueue.WithMeterProvider(mp), fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))), fdbqueue.WithQueueName("jq"))
	require.NoError(t, err)
	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")})
	require.NoError(t, err)
	ls, err := jq.Lease(ctx, db, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	clock.Advance(2 * time.Second) // the lease expires
	reg, err := jq.RegisterGauges(db)
	require.NoError(t, err)
	got := collect(t, reader, "jq")
	require.Equal(t, 1.0, got["fdbqueue.depth"], "an expired lease's job is in the queue")
	require.Equal(t, 1.0, got["fdbqueue.jobs fdbqueue.state=expired"])
	require.Equal(t, 0.0, got["fdbqueue.jobs fdbqueue.state=leased"])
	require.Equal(t, 0.0, got["fdbqueue.jobs fdbqueue.state=due"], "the states partition the jobs: an expired lease is counted once, as expired")
	require.NoError(t, reg.Unregister())
	ls, err = jq.Lease(ctx, db, 1, time.Second)
	require.NoError(t, err)
	require.Len(t, ls, 1, "the expired lease is taken over")
	dead, err := jq.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: "boom"})
	require.NoError(t, err)
	require.True(t, dead, "its last attempt")

	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("ok")})
	require.NoError(t, err)
	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("later"), Delay: time.Hour})
	require.NoError(t, err)
	reg, err = jq.RegisterGauges(db)
	require.NoError(t, err)
	defer reg.Unregister()
	clock.Advance(3 * time.Second)
	got = collect(t, reader, "jq")
	require.Equal(t, 2.0, got["fdbqueue.depth"])
	require.Equal(t, 1.0, got["fdbqueue.jobs fdbqueue.state=due"])
	require.Equal(t, 1.0, got["fdbqueue.jobs fdbqueue.state=delayed"])
	require.Equal(t, 1.0, got["fdbqueue.jobs fdbqueue.state=dead"])
	require.Equal(t, 0.0, got["fdbqueue.jobs fdbqueue.state=leased"])
	require.InDelta(t, 3.0, got["fdbqueue.oldest_item.age"], 0.001, "due for 3 s on the fake clock")
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- jq.Run(pctx, db, func(context.Context, *fdbqueue.Task) error { return nil }, fdbqueue.PoolOptions{
			OnOutcome: func(fdbqueue.Outcome) { cancel() },
			Logger:    slog.New(slog.DiscardHandler),
		})
	}()
	require.NoError(t, <-done)

	got = collect(t, reader, "jq")
	require.Equal(t, 1.0, got["fdbqueue.lease.expired"])
	require.Equal(t, 1.0, got["fdbqueue.dead_letters"])
	require.Equal(t, 1.0, got["fdbqueue.lease.outcomes fdbqueue.outcome=acked"])
	require.Equal(t, 3.0, got["fdbqueue.operations fdbqueue.op=add fdbqueue.outcome=ok"])
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=nack fdbqueue.outcome=ok"])
	require.Equal(t, 1.0, got["fdbqueue.operations fdbqueue.op=ack fdbqueue.outcome=ok"])
	require.Contains(t, logs.String(), "dead-lettered")
	require.Contains(t, logs.String(), "reason=boom")
	require.Contains(t, logs.String(), "expired lease taken over")
}

// Without a MeterProvider nothing is recorded, and operations work.
func TestNoProviderIsNoOp(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes([]byte("noop")))
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	reg, err := q.RegisterGauges(db)
	require.NoError(t, err)
	require.NoError(t, reg.Unregister())
	_, err = q.RegisterGauges(nil)
	require.True(t, errors.Is(err, fdbqueue.ErrInvalidArgument))
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
