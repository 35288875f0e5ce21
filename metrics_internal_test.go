package fdbqueue

import (
	"bytes"
	"context"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// attrsMeter's counters record the attributes of each Add.
type attrsMeter struct {
	noop.Meter
	mu  sync.Mutex
	got map[string][]map[string]string // instrument name: each Add's attributes
}

type attrsCounter struct {
	noop.Int64Counter
	m    *attrsMeter
	name string
}

func (c attrsCounter) Add(_ context.Context, _ int64, opts ...metric.AddOption) {
	attrs := map[string]string{}
	set := metric.NewAddConfig(opts).Attributes()
	for _, kv := range set.ToSlice() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.got[c.name] = append(c.m.got[c.name], attrs)
}

func (m *attrsMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return attrsCounter{m: m, name: name}, nil
}

type attrsProvider struct {
	noop.MeterProvider
	m *attrsMeter
}

func (p attrsProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// The values of fdbqueue.outcome are one vocabulary of snake_case words
// (ok, empty, maybe_committed, ... for fdbqueue.operations), so a pool's
// outcomes on fdbqueue.lease.outcomes must be too: "lease lost" and
// "dead-lettered", Result's names for people, are awkward label values
// in a query language and differ in style from the operations' outcomes.
func TestLeaseOutcomeAttributeValues(t *testing.T) {
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewJobQueue(SubspaceFromBytes([]byte("lo")), JobQueueConfig{}, WithMeterProvider(attrsProvider{m: m}))
	require.NoError(t, err)
	results := []Result{Acked, Retried, DeadLettered, LeaseLost, Abandoned, Failed}
	for _, r := range results {
		q.journal.track.obs.leaseSettled(r)
	}
	got := m.got["fdbqueue.lease.outcomes"]
	require.Len(t, got, len(results))
	var values []string
	for _, a := range got {
		values = append(values, a["fdbqueue.outcome"])
		require.Regexp(t, regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`), a["fdbqueue.outcome"])
	}
	require.Equal(t, []string{"acked", "retried", "dead_lettered", "lease_lost", "abandoned", "failed"}, values)
}

// The metrics doc says which refused calls fdbqueue.operations counts: none
// refused by its argument checks (ErrInvalidArgument, ErrValueTooLarge), and
// a batch refused with ErrBatchTooLarge, as error.
func TestOperationsCountRefusedCallsAsDocumented(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	mp := WithMeterProvider(attrsProvider{m: m})
	q, err := NewQueue(SubspaceFromBytes([]byte("q")), mp)
	require.NoError(t, err)
	pq, err := NewPriorityQueue(SubspaceFromBytes([]byte("p")), mp)
	require.NoError(t, err)
	jq, err := NewJobQueue(SubspaceFromBytes([]byte("j")), JobQueueConfig{}, mp)
	require.NoError(t, err)
	big := make([]byte, 100_001)
	const n = 120 // 120 values of 90,000 bytes pass the 10,000,000-byte budget
	values := make([][]byte, n)
	items := make([]PushItem, n)
	jobs := make([]Job, n)
	for i := range values {
		values[i] = make([]byte, 90_000)
		items[i] = PushItem{Value: values[i]}
		jobs[i] = Job{Value: values[i]}
	}
	cases := []struct {
		name    string
		call    func() error
		want    error
		counted bool
	}{
		{"Enqueue", func() error { return q.Enqueue(ctx, db, big) }, ErrValueTooLarge, false},
		{"Push", func() error { return pq.Push(ctx, db, big, 1) }, ErrValueTooLarge, false},
		{"Add", func() error { _, err := jq.Add(ctx, db, Job{Value: big}); return err }, ErrValueTooLarge, false},
		{"DequeueBatch", func() error { _, err := q.DequeueBatch(ctx, db, 0); return err }, ErrInvalidArgument, false},
		{"Lease", func() error { _, err := jq.Lease(ctx, db, 0, 0); return err }, ErrInvalidArgument, false},
		{"EnqueueBatch", func() error { return q.EnqueueBatch(ctx, db, values) }, ErrBatchTooLarge, true},
		{"PushBatch", func() error { return pq.PushBatch(ctx, db, items) }, ErrBatchTooLarge, true},
		{"AddBatch", func() error { _, err := jq.AddBatch(ctx, db, jobs); return err }, ErrBatchTooLarge, true},
	}
	for _, c := range cases {
		before := len(m.got["fdbqueue.operations"])
		require.ErrorIs(t, c.call(), c.want, c.name)
		got := m.got["fdbqueue.operations"][before:]
		if !c.counted {
			require.Empty(t, got, c.name)
			continue
		}
		require.Len(t, got, 1, c.name)
		require.Equal(t, "error", got[0]["fdbqueue.outcome"], c.name)
	}
}

// Cancel is counted in fdbqueue.operations as its siblings are (op
// "cancel"): ok when it removed a job, error when it found none.
func TestCancelCountedAsAnOperation(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewJobQueue(SubspaceFromBytes([]byte("cancel-metrics")), JobQueueConfig{}, WithMeterProvider(attrsProvider{m: m}))
	require.NoError(t, err)
	r, err := q.Add(ctx, db, Job{Value: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, q.Cancel(ctx, db, r.ID))
	require.ErrorIs(t, q.Cancel(ctx, db, r.ID), ErrJobNotFound)
	var cancels []string
	for _, a := range m.got["fdbqueue.operations"] {
		if a["fdbqueue.op"] == "cancel" {
			cancels = append(cancels, a["fdbqueue.outcome"])
		}
	}
	require.Equal(t, []string{"ok", "error"}, cancels)
}

// fdbqueue.schedule.ahead counts each Schedule that found its marker at a
// later slot, once per call that committed, with the queue's attribute;
// a Schedule in the marker's own slot, or one that adds, is not counted,
// nor an attempt that conflicted (its retry is the call's count).
func TestScheduleAheadCounted(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewJobQueue(SubspaceFromBytes([]byte("ahead-metrics")), JobQueueConfig{}, WithMeterProvider(attrsProvider{m: m}), WithQueueName("ahead"))
	require.NoError(t, err)
	pj := PeriodicJob{Name: "tick", Every: time.Minute, Job: func(time.Time) Job { return Job{} }}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = q.Schedule(ctx, db, pj, now.Add(10*time.Minute))
	require.NoError(t, err)
	_, err = q.Schedule(ctx, db, pj, now.Add(10*time.Minute))
	require.NoError(t, err)
	require.Empty(t, m.got["fdbqueue.schedule.ahead"], "the marker's own slot is not ahead")
	for range 2 {
		r, err := q.Schedule(ctx, db, pj, now)
		require.NoError(t, err)
		require.False(t, r.Ahead.IsZero())
	}
	db.FailNextCommit(kv.ErrNotCommitted, false)
	_, err = q.Schedule(ctx, db, pj, now)
	require.NoError(t, err)
	require.Equal(t, []map[string]string{{"fdbqueue.queue": "ahead"}, {"fdbqueue.queue": "ahead"}, {"fdbqueue.queue": "ahead"}},
		m.got["fdbqueue.schedule.ahead"])
}

// Without WithQueueName, fdbqueue.queue is the queue's subspace: as a
// tuple when its prefix is one (WithQueueName's doc), and as the quoted
// bytes otherwise.
func TestQueueAttributeDefaultsToTheSubspace(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	mp := WithMeterProvider(attrsProvider{m: m})
	sub, err := NewSubspace(tuple.Tuple{"jobs", 7})
	require.NoError(t, err)
	q, err := NewQueue(sub, mp)
	require.NoError(t, err)
	raw, err := NewQueue(SubspaceFromBytes([]byte("q\x00")), mp)
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	require.NoError(t, raw.Enqueue(ctx, db, []byte("x")))
	var queues []string
	for _, a := range m.got["fdbqueue.operations"] {
		queues = append(queues, a["fdbqueue.queue"])
	}
	require.Equal(t, []string{`("jobs", 7)`, `"q\x00"`}, queues)
}

// An operation whose context's deadline passed ends canceled, as one whose
// context was cancelled: both are the caller's context ending (the doc's
// outcomes), not an error of the queue's or the database's.
func TestOperationOutcomeOfAnExpiredDeadline(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewQueue(SubspaceFromBytes([]byte("deadline")), WithMeterProvider(attrsProvider{m: m}))
	require.NoError(t, err)
	expired, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	require.ErrorIs(t, q.Enqueue(expired, db, []byte("x")), context.DeadlineExceeded)
	cancelled, cancel2 := context.WithCancel(context.Background())
	cancel2()
	require.ErrorIs(t, q.Enqueue(cancelled, db, []byte("x")), context.Canceled)
	var outcomes []string
	for _, a := range m.got["fdbqueue.operations"] {
		outcomes = append(outcomes, a["fdbqueue.outcome"])
	}
	require.Equal(t, []string{"canceled", "canceled"}, outcomes)
}

// A DequeueWait that waits past half the journal retention replaces its
// operation ID (refreshOp), which ends the old ID's operation internally:
// fdbqueue.operations counts calls, so the call is counted once, with its
// outcome, and the replaced ID is not counted as an operation of its own.
func TestReplacedWaitIDNotCounted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const retention = time.Minute
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db := memdb.New()
	defer db.Close()
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewQueue(SubspaceFromBytes([]byte("replaced-id")), WithStaging(StagingConfig{}), WithClock(clock.Now),
		WithJournalRetention(retention), WithMeterProvider(attrsProvider{m: m}))
	require.NoError(t, err)
	armed := make(chan struct{})
	var once sync.Once
	q.stager.hook = func(p string) {
		if p == "armed" {
			once.Do(func() { close(armed) })
		}
	}
	type res struct {
		v   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := q.DequeueWait(ctx, db)
		done <- res{v, err}
	}()
	select {
	case <-armed:
	case r := <-done:
		t.Fatalf("the waiter returned before waiting: %q, %v", r.v, r.err)
	case <-ctx.Done():
		t.Fatal("the waiter neither slept nor returned")
	}
	clock.Advance(retention) // past half the retention: the woken waiter replaces its ID
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, "x", string(r.v))
	m.mu.Lock()
	defer m.mu.Unlock()
	var dequeues []string
	for _, a := range m.got["fdbqueue.operations"] {
		if a["fdbqueue.op"] == "dequeue" {
			dequeues = append(dequeues, a["fdbqueue.outcome"])
		}
	}
	require.Equal(t, []string{"ok"}, dequeues, "one call, counted once")
}

// The age gauge reads the head key's versionstamp only from an item of the
// versionstamp layout, (versionstamp, random bytes): a foreign key at the
// head, here one with a third element, gives no age (as Dequeue refuses it
// with a *ForeignKeyError), not the age its versionstamp would claim.
func TestOldestAgeOfAForeignHead(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("age-foreign")), WithVersionstampOrder())
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("item")))
	age := func() (bool, error) {
		return kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) (bool, error) {
			_, ok, err := q.oldestAge(tr)()
			return ok, err
		})
	}
	ok, err := age()
	require.NoError(t, err)
	require.True(t, ok, "an item's age")
	// Version 0: before every item, at the head.
	foreign, err := tuple.Tuple{tuple.Versionstamp{}, []byte("r"), "extra"}.AppendPack(bytes.Clone(q.sub.prefix))
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(foreign, []byte("x")); return nil }))
	_, err = q.Peek(ctx, db)
	var fk *ForeignKeyError
	require.ErrorAs(t, err, &fk, "the foreign key is the head")
	ok, err = age()
	require.NoError(t, err)
	require.False(t, ok, "no age for a foreign head")
}

// Without a MeterProvider the counters cost nothing measurable
// (WithMeterProvider's doc: no attribute is built), so counting an
// operation, a pool's outcome, an extension or a handler's run allocates
// nothing. A pool's outcome built its attribute value (metricValue, which
// allocates) before add found no provider: three allocations per job.
func TestUnmeteredCountingAllocatesNothing(t *testing.T) {
	o := newObserver([]byte("unmetered"), obsConfig{})
	for name, count := range map[string]func(){
		"operation": func() { o.add(o.ops, 1, attrOp.String("enqueue"), attrOutcome.String("ok")) },
		"outcome":   func() { o.leaseSettled(DeadLettered) },
		"extension": func() { o.leaseExtended(ErrLeaseLost) },
		"handler":   func() { o.handlerReturned(LeaseLost, time.Second) },
	} {
		require.Zero(t, testing.AllocsPerRun(100, count), name)
	}
}
