package otelcheck

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
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

// JobQueue.Extend counts each call by outcome in fdbqueue.lease.extensions:
// extended (through a Database or inside a caller's transaction),
// lease_lost, maybe_committed, canceled and error; an Extend that fails
// its argument checks is not counted.
func TestExtendOutcomes(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)
	jq, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes([]byte("ext")), fdbqueue.JobQueueConfig{},
		fdbqueue.WithMeterProvider(mp), fdbqueue.WithQueueName("ext"))
	require.NoError(t, err)
	_, err = jq.Add(ctx, db, fdbqueue.Job{Value: []byte("j")})
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
