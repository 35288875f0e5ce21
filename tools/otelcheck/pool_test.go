package otelcheck

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// find returns the collected metric named name.
func find(t *testing.T, r *sdkmetric.ManualReader, name string) metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, r.Collect(context.Background(), &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s collected", name)
	return metricdata.Metrics{}
}

// only returns the entries of got whose key starts with prefix.
func only(got collected, prefix string) collected {
	out := collected{}
	for k, v := range got {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out[k] = v
		}
	}
	return out
}

// meteredJobQueue returns an embedded database, a manual reader and a
// JobQueue made with cfg, named name (its subspace's prefix too), that
// reports to a MeterProvider the reader reads. The test's end shuts the
// provider down and closes the database.
func meteredJobQueue(t *testing.T, name string, cfg fdbqueue.JobQueueConfig) (*memdb.DB, *sdkmetric.ManualReader, *fdbqueue.JobQueue) {
	t.Helper()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	jq, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes([]byte(name)), cfg,
		fdbqueue.WithMeterProvider(mp), fdbqueue.WithQueueName(name))
	require.NoError(t, err)
	return db, reader, jq
}

// A pool's handlers, each running a known time on the queue's fake clock
// (the handler advances it) and ending in a known way, are recorded in
// fdbqueue.handler.duration: one data point per outcome, in seconds, with
// the pool's outcome vocabulary (fdbqueue.lease.outcomes') as attribute,
// in a bucket of the advised boundaries that holds the duration.
func TestHandlerDuration(t *testing.T) {
	// Above "slow"'s run, below ExtendEvery: no heartbeat fires.
	const handlerTimeout = 7*time.Minute + 500*time.Millisecond
	ctx := context.Background()
	clock := queuetest.NewClock(time.Unix(1_700_000_000, 0))
	// RetryBase: a nacked job is not due again while the test runs.
	db, reader, jq := meteredJobQueue(t, "hd",
		fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Hour, RetryMax: time.Hour, MaxAttempts: 3})

	// Job value: how long its handler runs (it advances the clock by that,
	// less than ExtendEvery: no heartbeat fires), what becomes of the job
	// and the outcome's attribute value.
	runs := map[string]struct {
		took    time.Duration
		result  fdbqueue.Result
		outcome string
	}{
		"ack":    {1500 * time.Millisecond, fdbqueue.Acked, "acked"},
		"fail":   {250 * time.Millisecond, fdbqueue.Retried, "retried"},
		"panic":  {40 * time.Millisecond, fdbqueue.DeadLettered, "dead_lettered"}, // its only attempt
		"snooze": {3 * time.Millisecond, fdbqueue.Snoozed, "snoozed"},
		"slow":   {7 * time.Minute, fdbqueue.Acked, "acked"},
		// NoRetry and RetryAfter: the pool's outcomes, by what became of
		// the job; a handler past HandlerTimeout failed its attempt.
		"noretry":    {2 * time.Millisecond, fdbqueue.DeadLettered, "dead_lettered"}, // with attempts left
		"retryafter": {20 * time.Millisecond, fdbqueue.Retried, "retried"},
		"timeout":    {handlerTimeout, fdbqueue.Retried, "retried"},
	}
	for v := range runs {
		j := fdbqueue.Job{Value: []byte(v)}
		if v == "panic" {
			j.MaxAttempts = 1
		}
		_, err := jq.Add(ctx, db, j)
		require.NoError(t, err)
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	outcomes := map[string]fdbqueue.Result{}
	err := jq.Run(pctx, db, func(ctx context.Context, task *fdbqueue.Task) error {
		v := string(task.Value())
		clock.Advance(runs[v].took)
		switch v {
		case "fail":
			return errors.New("boom")
		case "panic":
			panic("boom")
		case "snooze":
			return fdbqueue.Snooze(time.Hour)
		case "noretry":
			return fdbqueue.NoRetry(errors.New("malformed"))
		case "retryafter":
			return fdbqueue.RetryAfter(time.Hour, errors.New("busy"))
		case "timeout":
			<-ctx.Done() // the clock reached the limit, which ends it
			return ctx.Err()
		}
		return nil
	}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 8 * time.Minute, ExtendEvery: 7*time.Minute + time.Second,
		HandlerTimeout: handlerTimeout, Logger: slog.New(slog.DiscardHandler),
		OnOutcome: func(o fdbqueue.Outcome) {
			outcomes[string(o.Lease.Value)] = o.Result
			if len(outcomes) == len(runs) {
				cancel()
			}
		}})
	require.NoError(t, err)
	for v, r := range runs {
		require.Equal(t, r.result, outcomes[v], v)
	}

	m := find(t, reader, "fdbqueue.handler.duration")
	require.Equal(t, "s", m.Unit)
	require.NotEmpty(t, m.Description)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%T", m.Data)
	require.Equal(t, metricdata.CumulativeTemporality, h.Temporality)
	want := map[string][]float64{} // outcome: durations in seconds
	for _, r := range runs {
		want[r.outcome] = append(want[r.outcome], r.took.Seconds())
	}
	require.Len(t, h.DataPoints, len(want), "one data point per outcome")
	for _, p := range h.DataPoints {
		q, _ := p.Attributes.Value("fdbqueue.queue")
		require.Equal(t, "hd", q.AsString())
		require.Equal(t, 2, p.Attributes.Len(), "fdbqueue.queue and fdbqueue.outcome: %v", p.Attributes.ToSlice())
		out, ok := p.Attributes.Value("fdbqueue.outcome")
		require.True(t, ok)
		took := want[out.AsString()]
		require.NotNil(t, took, "outcome %q", out.AsString())
		require.Equal(t, uint64(len(took)), p.Count, out.AsString())
		var sum float64
		for _, s := range took {
			sum += s
		}
		require.InDelta(t, sum, p.Sum, 1e-9, out.AsString())
		// The advised boundaries, milliseconds to minutes.
		require.Equal(t, []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, p.Bounds)
		require.Len(t, p.BucketCounts, len(p.Bounds)+1)
		// Each duration is counted in the bucket (Bounds[i-1], Bounds[i]]
		// that holds it, and no other bucket counts anything.
		counts := make([]uint64, len(p.BucketCounts))
		for _, s := range took {
			i := 0
			for i < len(p.Bounds) && s > p.Bounds[i] {
				i++
			}
			counts[i]++
		}
		require.Equal(t, counts, p.BucketCounts, out.AsString())
	}

	got := collect(t, reader, "hd")
	require.Equal(t, collected{
		"fdbqueue.lease.outcomes fdbqueue.outcome=acked":         2,
		"fdbqueue.lease.outcomes fdbqueue.outcome=retried":       3,
		"fdbqueue.lease.outcomes fdbqueue.outcome=dead_lettered": 2,
		"fdbqueue.lease.outcomes fdbqueue.outcome=snoozed":       1,
	}, only(got, "fdbqueue.lease.outcomes"), "the histogram's outcomes are the pool's")
}

// JobQueue.Extend counts each call by outcome in fdbqueue.lease.extensions:
// extended (through a Database or inside a caller's transaction),
// lease_lost, maybe_committed, canceled and error; an Extend that fails
// its argument checks is not counted.
func TestExtendOutcomes(t *testing.T) {
	ctx := context.Background()
	db, reader, jq := meteredJobQueue(t, "ext", fdbqueue.JobQueueConfig{})
	_, err := jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")})
	require.NoError(t, err)
	ls, err := jq.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	l := ls[0]

	l, err = jq.Extend(ctx, db, l, time.Minute)
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		var err error
		l, err = jq.Extend(ctx, tr, l, time.Minute)
		return err
	}))
	_, err = jq.Extend(ctx, db, l, time.Microsecond)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = jq.Extend(ctx, nil, l, 0)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)

	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	_, err = jq.Extend(ctx, retryOnce{db}, l, time.Minute)
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	_, err = jq.Extend(ctx, failingDB{db}, l, time.Minute)
	require.ErrorIs(t, err, errDown)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = jq.Extend(cctx, db, l, time.Minute)
	require.ErrorIs(t, err, context.Canceled)

	require.NoError(t, jq.Ack(ctx, db, l))
	_, err = jq.Extend(ctx, db, l, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)

	got := collect(t, reader, "ext")
	require.Equal(t, collected{
		"fdbqueue.lease.extensions fdbqueue.outcome=extended":        2,
		"fdbqueue.lease.extensions fdbqueue.outcome=maybe_committed": 1,
		"fdbqueue.lease.extensions fdbqueue.outcome=error":           1,
		"fdbqueue.lease.extensions fdbqueue.outcome=canceled":        1,
		"fdbqueue.lease.extensions fdbqueue.outcome=lease_lost":      1,
	}, only(got, "fdbqueue.lease.extensions"))
	// Its transactions are counted as every operation's.
	require.Equal(t, 1.0, got["fdbqueue.commit_unknown_result fdbqueue.op=extend"])
	m := find(t, reader, "fdbqueue.lease.extensions")
	require.Equal(t, "{extension}", m.Unit)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%T", m.Data)
	require.True(t, sum.IsMonotonic)
}

var errDown = errors.New("database down")

// failingDB's transactions fail with errDown, an error no retry cures.
type failingDB struct{ *memdb.DB }

func (failingDB) Transact(context.Context, func(kv.Transaction) error) error { return errDown }

// CreateTransaction fails too: with a MeterProvider, operations run their
// own retry loop over it.
func (failingDB) CreateTransaction(context.Context) (kv.Transaction, error) { return nil, errDown }

// A pool's heartbeat extends a running job's lease through Extend, so its
// extensions are counted: one extended, then, once the job was acked
// behind the pool's back, one lease_lost, which ends the handler's
// context. The handler's run, 20 s on the fake clock, is recorded with
// the job's outcome, lease_lost. A handler abandoned at shutdown that had
// not returned has no duration, only its outcome counted.
func TestPoolHeartbeatMetrics(t *testing.T) {
	ctx := context.Background()
	clock := queuetest.NewClock(time.Unix(1_700_000_000, 0))
	clock.Armed = make(chan time.Duration, 64)
	db, reader, jq := meteredJobQueue(t, "hb", fdbqueue.JobQueueConfig{Clock: clock})
	_, err := jq.Add(ctx, db, fdbqueue.Job{Value: []byte("long")})
	require.NoError(t, err)

	started := make(chan *fdbqueue.Task, 1)
	outcomes := make(chan fdbqueue.Outcome, 2)
	release := make(chan struct{})
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() {
		ran <- jq.Run(pctx, db, func(hctx context.Context, task *fdbqueue.Task) error {
			started <- task
			if string(task.Value()) == "stuck" {
				<-release // ignores its context: abandoned at shutdown
				return nil
			}
			<-hctx.Done() // the lease is lost
			return hctx.Err()
		}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
			ShutdownTimeout: -1, Logger: slog.New(slog.DiscardHandler),
			OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	}()
	task := <-started
	require.Equal(t, 10*time.Second, <-clock.Armed) // the heartbeat sleeps
	clock.Advance(10 * time.Second)
	require.Equal(t, 10*time.Second, <-clock.Armed) // the extension is done
	require.NoError(t, jq.Ack(ctx, db, task.Lease()))
	clock.Advance(10 * time.Second) // the next extension finds the lease lost
	o := <-outcomes
	require.Equal(t, fdbqueue.LeaseLost, o.Result)

	got := collect(t, reader, "hb")
	require.Equal(t, collected{
		"fdbqueue.lease.extensions fdbqueue.outcome=extended":   1,
		"fdbqueue.lease.extensions fdbqueue.outcome=lease_lost": 1,
	}, only(got, "fdbqueue.lease.extensions"))
	require.Equal(t, collected{
		"fdbqueue.handler.duration:count fdbqueue.outcome=lease_lost": 1,
		"fdbqueue.handler.duration:sum fdbqueue.outcome=lease_lost":   20,
	}, only(got, "fdbqueue.handler.duration"))

	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("stuck")})
	require.NoError(t, err)
	<-started
	stop() // ShutdownTimeout < 0: abandoned at once
	require.NoError(t, <-ran)
	o = <-outcomes
	require.Equal(t, fdbqueue.Abandoned, o.Result)
	close(release)
	got = collect(t, reader, "hb")
	require.Equal(t, 1.0, got["fdbqueue.lease.outcomes fdbqueue.outcome=abandoned"])
	require.Equal(t, collected{
		"fdbqueue.handler.duration:count fdbqueue.outcome=lease_lost": 1,
		"fdbqueue.handler.duration:sum fdbqueue.outcome=lease_lost":   20,
	}, only(got, "fdbqueue.handler.duration"), "no sample for the abandoned handler")
}

// onMessage is a slog handler that closes seen the first time a record
// with message msg is logged, at any level.
type onMessage struct {
	msg  string
	once sync.Once
	seen chan struct{}
}

func (h *onMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *onMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *onMessage) WithGroup(string) slog.Handler            { return h }

func (h *onMessage) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	return nil
}

// A handler that acks its job with Task.Ack and goes on: the heartbeat's
// next extension finds the job gone, most likely removed by that ack,
// which is no lost lease. It is not counted in fdbqueue.lease.extensions
// as lease_lost (nor at all: the heartbeat cannot tell the handler's ack
// from another consumer's lease, and the pool's ack, under the same
// operation ID, tells in fdbqueue.lease.outcomes: acked). Before, Extend
// counted it lease_lost, as a lease another consumer took.
func TestPoolHeartbeatAfterTheHandlersOwnAckIsNoLostLease(t *testing.T) {
	ctx := context.Background()
	clock := queuetest.NewClock(time.Unix(1_700_000_000, 0))
	clock.Armed = make(chan time.Duration, 64)
	db, reader, jq := meteredJobQueue(t, "own-ack", fdbqueue.JobQueueConfig{Clock: clock})
	_, err := jq.Add(ctx, db, fdbqueue.Job{Value: []byte("acked by its handler")})
	require.NoError(t, err)

	gone := &onMessage{msg: "fdbqueue: job gone after the handler's Task.Ack; no more extensions", seen: make(chan struct{})}
	acked, proceed := make(chan error, 1), make(chan struct{})
	outcomes := make(chan fdbqueue.Outcome, 1)
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() {
		ran <- jq.Run(pctx, db, func(hctx context.Context, task *fdbqueue.Task) error {
			acked <- db.Transact(hctx, func(tr kv.Transaction) error { return task.Ack(hctx, tr) })
			<-proceed
			return nil
		}, fdbqueue.PoolOptions{Workers: 1, LeaseDuration: 30 * time.Second, ExtendEvery: 10 * time.Second,
			Logger: slog.New(gone), OnOutcome: func(o fdbqueue.Outcome) { outcomes <- o }})
	}()
	require.NoError(t, <-acked)
	require.Equal(t, 10*time.Second, <-clock.Armed) // the heartbeat sleeps
	clock.Advance(10 * time.Second)                 // its extension finds the job gone
	select {
	case <-gone.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the heartbeat did not find the job gone")
	}
	close(proceed)
	o := <-outcomes
	require.Equal(t, fdbqueue.Acked, o.Result, "err: %v", o.Err)
	stop()
	require.NoError(t, <-ran)

	got := collect(t, reader, "own-ack")
	require.Equal(t, collected{}, only(got, "fdbqueue.lease.extensions"), "no extension succeeded, none lost a lease")
	require.Equal(t, collected{"fdbqueue.lease.outcomes fdbqueue.outcome=acked": 1}, only(got, "fdbqueue.lease.outcomes"))
}
