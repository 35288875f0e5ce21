package fdbqueue

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Within one transaction the tracker counts a key once however often it is
// set or cleared: clearing twice removes one item, setting a key cleared
// in the same transaction puts it back, clearing a key set in it removes
// it.
func TestTrackedTransactionCountsEachKeyOnce(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("trk")))
	require.NoError(t, err)
	k := q.journal.track
	key := func(i int64) []byte { b, _ := q.sub.Pack([]any{i, []byte{1}}); return b }
	run := func(fn func(tr kv.Transaction)) int64 {
		t.Helper()
		tdb := k.observeDB("test", db)
		require.NoError(t, tdb.Transact(ctx, func(tr kv.Transaction) error { fn(tr); return nil }))
		d, err := q.Depth(ctx, db)
		require.NoError(t, err)
		return d
	}
	require.Equal(t, int64(2), run(func(tr kv.Transaction) { tr.Set(key(1), nil); tr.Set(key(2), nil); tr.Set(key(2), nil) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Clear(key(1)); tr.Clear(key(1)) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Clear(key(2)); tr.Set(key(2), []byte("again")) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Set(key(3), nil); tr.Clear(key(3)) }))
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.Set([]byte("trk\xff"), nil); tr.Clear([]byte("trj")) }), "outside the items' range")
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.ClearRange(kv.KeyRange{Begin: key(2), End: key(3)}) }), "a partial range clear is not the operations'")
	require.Equal(t, int64(1), run(func(tr kv.Transaction) { tr.ClearRange(q.items); tr.Set(key(5), nil) }), "Clear, then one item")
}

// TestTrackerIn compares the prefix test of a subspace's items with the
// range comparison it replaces, on keys around prefixes with 0x00 and 0xff
// bytes (and the empty prefix), and checks that a range not of that shape
// is compared as a range.
func TestTrackerIn(t *testing.T) {
	alphabet := []byte{0x00, 0x01, 'q', 0xfe, 0xff}
	for _, p := range [][]byte{{}, {0x00}, {0xff}, {'q', 0x00}, {'q', 0xff}, {0x02, 'q', 0x00, 0xff}} {
		r := kv.KeyRange{Begin: append(bytes.Clone(p), 0x00), End: append(bytes.Clone(p), 0xff)}
		k := &tracker{}
		k.countDepth(r)
		require.NotNil(t, k.under, "prefix %x", p)
		// Every key of up to len(p)+2 bytes over the alphabet.
		var keys [][]byte
		var gen func(k []byte)
		gen = func(key []byte) {
			keys = append(keys, bytes.Clone(key))
			if len(key) < len(p)+2 {
				for _, c := range alphabet {
					gen(append(key, c))
				}
			}
		}
		gen(nil)
		for _, key := range append(keys, p, append(bytes.Clone(p), 0xff, 0x00)) {
			want := bytes.Compare(r.Begin, key) <= 0 && bytes.Compare(key, r.End) < 0
			require.Equal(t, want, k.in(key), "prefix %x, key %x", p, key)
		}
	}
	k := &tracker{}
	r := kv.KeyRange{Begin: []byte("a\x00"), End: []byte("b\xff")}
	k.countDepth(r)
	require.Nil(t, k.under)
	require.True(t, k.in([]byte("az")))
	require.False(t, k.in([]byte("b\xff")))
}

// TestDepthShardsSpread checks that operations on a Database spread their
// depth changes over the counters, with the journal (the counter picked by
// the op ID's last random byte) and without (no ID is made: a draw), so
// that no counter is one hot key.
func TestDepthShardsSpread(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	for _, opts := range [][]Option{nil, {WithoutIdempotency()}} {
		q, err := NewQueue(SubspaceFromBytes([]byte("spread")), opts...)
		require.NoError(t, err)
		require.NoError(t, q.Clear(ctx, db))
		for range 200 {
			require.NoError(t, q.Enqueue(ctx, db, []byte("v")))
		}
		kvs, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]kv.KeyValue, error) {
			return tr.GetRange(q.journal.track.depth.all, kv.RangeOptions{}).GetSlice()
		})
		require.NoError(t, err)
		require.Greater(t, len(kvs), depthShards/2, "the adds of 200 enqueues landed on %d counters", len(kvs))
		d, err := q.Depth(ctx, db)
		require.NoError(t, err)
		require.Equal(t, int64(200), d)
	}
}

// callbackMeter keeps the callbacks registered with it.
type callbackMeter struct {
	noop.Meter
	callbacks []metric.Callback
}

func (m *callbackMeter) RegisterCallback(f metric.Callback, insts ...metric.Observable) (metric.Registration, error) {
	m.callbacks = append(m.callbacks, f)
	return m.Meter.RegisterCallback(f, insts...)
}

type callbackProvider struct {
	noop.MeterProvider
	m *callbackMeter
}

func (p callbackProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// unreachableDB is a database whose reads wait until their context ends,
// as FDB's do while the cluster cannot be reached (without the
// transaction_timeout option); a read whose context can never end fails at
// once with errNeverEnds, instead of blocking the test.
type unreachableDB struct{ kv.Database }

var errNeverEnds = errors.New("a read with a context that never ends: it would block forever")

func (unreachableDB) ReadTransact(ctx context.Context, _ func(kv.ReadTransaction) error) error {
	if ctx.Done() == nil {
		return errNeverEnds
	}
	<-ctx.Done()
	return ctx.Err()
}

// The gauges' callbacks bound their read of the database: the SDK runs
// callbacks under its reader's lock, and a pull exporter (Prometheus)
// collects with context.TODO(), so a read waiting on an unreachable
// cluster would block that collection and every later one, and with them
// all of the application's metrics on that reader.
func TestObserveGaugesBoundTheirRead(t *testing.T) {
	defer func(d time.Duration) { gaugeTimeout = d }(gaugeTimeout)
	gaugeTimeout = time.Millisecond
	m := &callbackMeter{}
	mp := WithMeterProvider(callbackProvider{m: m})
	db := unreachableDB{}
	q, err := NewQueue(SubspaceFromBytes([]byte("gq")), mp, WithVersionstampOrder())
	require.NoError(t, err)
	pq, err := NewPriorityQueue(SubspaceFromBytes([]byte("gpq")), mp)
	require.NoError(t, err)
	jq, err := NewJobQueue(SubspaceFromBytes([]byte("gjq")), JobQueueConfig{}, mp)
	require.NoError(t, err)
	_, err = q.RegisterGauges(db)
	require.NoError(t, err)
	_, err = pq.RegisterGauges(db)
	require.NoError(t, err)
	_, err = jq.RegisterGauges(db)
	require.NoError(t, err)
	require.Len(t, m.callbacks, 3)
	for _, f := range m.callbacks {
		// Run in its own goroutine: an unbounded read fails the test
		// instead of hanging it.
		done := make(chan error, 1)
		go func() { done <- f(context.TODO(), nil) }()
		select {
		case err := <-done:
			require.ErrorIs(t, err, context.DeadlineExceeded)
		case <-time.After(10 * time.Second):
			t.Fatal("the gauge callback's read is unbounded: it has not returned after 10 s (its bound is 1 ms)")
		}
	}
}

// depthObserver records the fdbqueue.depth values a gauge callback
// observes (the other gauges are dropped).
type depthObserver struct {
	metric.Observer // nil: only the methods below are called
	depths          []int64
}

func (o *depthObserver) ObserveInt64(_ metric.Int64Observable, v int64, _ ...metric.ObserveOption) {
	o.depths = append(o.depths, v)
}

func (o *depthObserver) ObserveFloat64(metric.Float64Observable, float64, ...metric.ObserveOption) {}

// The depth gauge of a Queue or PriorityQueue handle whose options
// disagree with the stored record (here on a job queue's subspace, which
// keeps no such counters) reports nothing and returns ErrConfigMismatch,
// as Depth does: it used to report a depth of 0 for a queue holding jobs.
func TestGaugesCheckTheRecord(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	jobs := SubspaceFromBytes([]byte("gauge-jobs"))
	jq, err := NewJobQueue(jobs, JobQueueConfig{})
	require.NoError(t, err)
	_, err = jq.Add(ctx, db, Job{Value: []byte("job")})
	require.NoError(t, err)
	fifo := SubspaceFromBytes([]byte("gauge-fifo"))
	own, err := NewQueue(fifo)
	require.NoError(t, err)
	require.NoError(t, own.Enqueue(ctx, db, []byte("item")))

	m := &callbackMeter{}
	mp := WithMeterProvider(callbackProvider{m: m})
	q, err := NewQueue(jobs, mp, WithVersionstampOrder())
	require.NoError(t, err)
	pq, err := NewPriorityQueue(jobs, mp)
	require.NoError(t, err)
	good, err := NewQueue(fifo, mp)
	require.NoError(t, err)
	for _, register := range []func(kv.ReadTransactor) (metric.Registration, error){q.RegisterGauges, pq.RegisterGauges, good.RegisterGauges} {
		_, err := register(db)
		require.NoError(t, err)
	}
	require.Len(t, m.callbacks, 3)
	for i, f := range m.callbacks[:2] {
		ob := &depthObserver{}
		err := f(ctx, ob)
		require.ErrorIs(t, err, ErrConfigMismatch, "handle %d", i)
		var me *ConfigMismatchError
		require.ErrorAs(t, err, &me)
		require.Equal(t, "kind", me.Field)
		require.Equal(t, kindJobs, me.Stored)
		require.Empty(t, ob.depths, "handle %d observed a depth", i)
	}
	ob := &depthObserver{}
	require.NoError(t, m.callbacks[2](ctx, ob), "a handle that agrees")
	require.Equal(t, []int64{1}, ob.depths)
}
