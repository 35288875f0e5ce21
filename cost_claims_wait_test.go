package fdbqueue_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// The "Cost:" claims of the gauges and the instruments (metrics.go), of
// LeaseWait, and of what the journal and the stored configuration add
// now and then (doc.go, journal_expiry.go, jobqueue.go), checked as
// TestCostClaims checks the others.

// gaugeMeter keeps the gauges' callback, for a row to run a collection.
type gaugeMeter struct {
	noop.Meter
	collect metric.Callback
}

func (m *gaugeMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	m.collect = f
	return m.Meter.RegisterCallback(f, insts...)
}

type gaugeProvider struct {
	noop.MeterProvider
	m *gaugeMeter
}

func (p gaugeProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

type discardObserver struct{ metric.Observer }

func (discardObserver) ObserveInt64(metric.Int64Observable, int64, ...metric.ObserveOption)       {}
func (discardObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

// metered returns the option of a MeterProvider whose gauges' callback
// e.collect runs.
func (e *costEnv) metered() fdbqueue.Option {
	e.gauges = &gaugeMeter{}
	return fdbqueue.WithMeterProvider(gaugeProvider{m: e.gauges})
}

// collect runs a collection of the gauges registered last.
func (e *costEnv) collect() error { return e.gauges.collect(e.ctx, discardObserver{}) }

// register registers the gauges through the counted database and runs a
// first collection, which reads the stored configuration (a new handle).
func (e *costEnv) register(reg func(kv.ReadTransactor) (metric.Registration, error)) {
	r, err := reg(e.db)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { _ = r.Unregister() })
	require.NoError(e.t, e.collect())
}

// remeter replaces q with a handle on the same queue made with a
// MeterProvider, warmed as warm does.
func (e *costEnv) remeter() {
	e.q = stgQueue(e.t, e.q.Subspace(), append(e.opts, e.metered())...)
	for range 2 {
		require.NoError(e.t, e.q.Enqueue(e.ctx, e.raw, []byte("w")))
		_, err := e.q.Dequeue(e.ctx, e.raw)
		require.NoError(e.t, err)
	}
}

// leaseWait runs the counted handle's LeaseWait while nothing is due: it
// looks once and sleeps on its watch until an Add (through another
// handle) wakes it, then leases the job added.
func (e *costEnv) leaseWait() error {
	looked := make(chan struct{})
	var once sync.Once
	e.db.onLog(func(n int) {
		if n == 1 {
			once.Do(func() { close(looked) })
		}
	})
	got := make(chan error, 1)
	go func() {
		ls, err := e.jq.LeaseWait(e.ctx, e.db, 1, time.Minute)
		if err == nil && len(ls) != 1 {
			err = fmt.Errorf("%d leases, want 1", len(ls))
		}
		got <- err
	}()
	recvWithin(e.t, looked, "LeaseWait's first look")
	other := mustJobQueue(e.t, "cost-jobs", fdbqueue.JobQueueConfig{Clock: e.clock, Choice: 1})
	mustAdd(e.t, e.raw, other, fdbqueue.Job{Value: []byte("x")})
	return recvWithin(e.t, got, "the woken LeaseWait")
}

func waitCostClaims() []costClaim {
	return []costClaim{
		// Gauges: one collection, on a handle that read its configuration.
		{
			name:  "Queue.RegisterGauges",
			claim: "one read-only transaction of snapshot reads issued together (one round trip): the depth counters (see Depth) and, for the age gauge, the head item",
			setup: func(e *costEnv) {
				e.q = stgQueue(e.t, e.q.Subspace(), e.metered())
				e.register(e.q.RegisterGauges)
			},
			op:   func(e *costEnv) error { return e.collect() },
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "Queue.RegisterGauges/versionstamp",
			claim: "... snapshot reads issued together (one round trip): the depth counters and, for the age gauge, the head item (limit 1) and the read version",
			opts:  []fdbqueue.Option{fdbqueue.WithVersionstampOrder()},
			setup: func(e *costEnv) {
				e.q = stgQueue(e.t, e.q.Subspace(), fdbqueue.WithVersionstampOrder(), e.metered())
				e.register(e.q.RegisterGauges)
				e.fill(2)
			},
			op:   func(e *costEnv) error { return e.collect() },
			want: []cost{{MetadataVersion: mvRead, SnapRange: 2, RoundTrips: 1}},
		},
		{
			name:  "PriorityQueue.RegisterGauges",
			claim: "registers the priority queue's fdbqueue.depth gauge (its keys carry no time: no age gauge)",
			setup: func(e *costEnv) {
				e.pq = mustPQ(e.t, "cost-pq", e.metered())
				e.register(e.pq.RegisterGauges)
			},
			op:   func(e *costEnv) error { return e.collect() },
			want: []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}},
		},
		{
			name:  "JobQueue.RegisterGauges",
			claim: "At each collection it runs Stats through db: one read-only transaction of snapshot reads, without reading the jobs",
			setup: func(e *costEnv) {
				e.jq = mustJobQueue(e.t, "cost-jobs", fdbqueue.JobQueueConfig{Clock: e.clock, Choice: 1}, e.metered())
				e.register(e.jq.RegisterGauges)
				e.jfill(2)
			},
			op:   func(e *costEnv) error { return e.collect() },
			want: []cost{{MetadataVersion: mvRead, SnapGet: 3, SnapRange: 2 + 1, RoundTrips: 1}},
		},
		{
			name:  "WithMeterProvider/Enqueue",
			claim: "What the instruments cost: an attribute set per call and atomic adds in the SDK (the transactions are Enqueue's)",
			setup: func(e *costEnv) { e.remeter(); e.fill(3) },
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			want:  []cost{{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1, Set: 2, Add: 1, ReadConflict: recordConflict}},
		},
		{
			name:  "WithMeterProvider/Dequeue",
			claim: "What the instruments cost: an attribute set per call and atomic adds in the SDK (the transactions are Dequeue's)",
			setup: func(e *costEnv) { e.remeter(); e.fill(3) },
			op:    dequeueOp,
			want:  []cost{{MetadataVersion: mvRead, Range: 1, RoundTrips: 1, Clear: 1, Set: 1, Add: 1}},
		},

		// LeaseWait.
		{
			name:  "LeaseWait/idle, then woken",
			claim: "(design.md) LeaseWait idle: 1 + commit; as Lease under an ID of its own (its record and marker), + first record; a watch; writes nothing (read-only)",
			setup: func(e *costEnv) {
				e.jfill(1)
				mustLease(e.t, e.raw, e.jq, 1, time.Minute) // the queue holds a job, not due
			},
			op: func(e *costEnv) error { return e.leaseWait() },
			// Each attempt is a Lease under an ID of its own (WithOpID,
			// for JobQueue.Run to settle it): the record and the marker
			// read on every attempt. The idle one also reads the first
			// job's key (the earliest vesting time) and watches the
			// signal. The second leases the job added: Lease's writes,
			// the marker's, and the clear its handle carries; the value
			// (a snapshot point read) in a second round trip.
			want: []cost{
				{MetadataVersion: mvRead, Get: 1, SnapGet: 1, SnapRange: 2, RoundTrips: 1, Watch: 1},
				{MetadataVersion: mvRead, Get: 1, SnapGet: 2, SnapRange: 2, RoundTrips: 2, Clear: 1 + carriedClear, Set: 2 + 1,
					VersionstampedValue: 1, Add: 3, CompareAndClear: 1, ReadConflict: 1},
			},
		},

		// Now and then.
		{
			name:  "Queue.Enqueue/expiry due",
			claim: "(doc.go) one in 64 also reads the declared retention, with its other reads, and may clear expired journal records (journal_expiry.go: a snapshot read issued with the attempt's first reads ... and adds its read conflict key)",
			setup: func(e *costEnv) { e.fill(3); fdbqueue.PrimeExpiry(e.q) },
			op:    func(e *costEnv) error { return e.q.Enqueue(e.ctx, e.db, []byte("x")) },
			// The expiry sweeps 16 journal shards, a range clear of the
			// expired records in each, and, once per sweep of all of
			// them (this one starts one), a clear of the records of the
			// layout before shards (journal_expiry.go, expire).
			want: []cost{{MetadataVersion: mvRead, SnapGet: 1, SnapRange: 1, RoundTrips: 1, Set: 2, Add: 1, ClearRange: 16 + 1,
				ReadConflict: recordConflict + 1}},
		},
		{
			name:  "JobQueue.Stats/no record stored",
			claim: "(NewJobQueue) a subspace that has no record ...: while no record is stored, every operation spends one more round trip on that check (design.md: two range reads, limit 1)",
			setup: func(e *costEnv) {
				e.jq = mustJobQueue(e.t, "cost-jobs-unwritten", fdbqueue.JobQueueConfig{Clock: e.clock})
				_, err := e.jq.Stats(e.ctx, e.raw)
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error {
				_, err := e.jq.Stats(e.ctx, e.db)
				return err
			},
			// Stats' reads and the record's (none), then the range
			// outside the job queue's keys, in two reads.
			want: []cost{{MetadataVersion: mvRead, SnapGet: 3 + 1, SnapRange: 3 + 2, RoundTrips: 2}},
		},
	}
}

// TestWaitCostClaims checks the cost claims of the gauges, LeaseWait and
// the journal's and configuration's occasional reads, as TestCostClaims
// does the others'.
func TestWaitCostClaims(t *testing.T) { runCostClaims(t, waitCostClaims()) }
