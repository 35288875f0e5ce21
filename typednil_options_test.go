package fdbqueue_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// nilProvider is a MeterProvider whose Meter, called on a nil pointer,
// dereferences it (the embedded provider is reached through the pointer).
type nilProvider struct{ noop.MeterProvider }

// nilMeterProvider's Meter returns nil, which OpenTelemetry's API forbids.
type nilMeterProvider struct{ noop.MeterProvider }

func (nilMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return nil }

// nilPtrMeterProvider's Meter returns a nil pointer in the interface.
type nilPtrMeterProvider struct{ noop.MeterProvider }

func (nilPtrMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	var m *noop.Meter
	return m
}

// An interface holding a nil pointer is not nil: a JobQueueConfig.Clock,
// WithEntropy source or WithMeterProvider given one, and a Logger
// (WithLogger, PoolOptions.Logger) without a handler, are refused when the
// queue is made (or the pool started) with ErrInvalidArgument. They were
// accepted, and the first Add, Enqueue or log line panicked. So is a
// provider whose Meter returns nil (the constructor panicked).
func TestTypedNilOptionsRefused(t *testing.T) {
	ctx := context.Background()
	sub := mustSubspace(t, "typed-nil-options")
	var clock *queuetest.Clock
	_, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: clock})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)

	var reader *bytes.Reader
	var provider *nilProvider
	bad := map[string]fdbqueue.Option{
		"WithEntropy":            fdbqueue.WithEntropy(reader),
		"WithMeterProvider":      fdbqueue.WithMeterProvider(provider),
		"Meter returns nil":      fdbqueue.WithMeterProvider(nilMeterProvider{}),
		"Meter returns nil ptr":  fdbqueue.WithMeterProvider(nilPtrMeterProvider{}),
		"WithLogger zero Logger": fdbqueue.WithLogger(&slog.Logger{}),
		"WithLogger nil handler": fdbqueue.WithLogger(slog.New((*slog.JSONHandler)(nil))),
	}
	for name, o := range bad {
		_, err := fdbqueue.NewQueue(sub, o)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
		_, err = fdbqueue.NewPriorityQueue(sub, o)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
		_, err = fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{}, o)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}

	db := newDB(t)
	q := mustJobQueue(t, "typed-nil-pool", fdbqueue.JobQueueConfig{})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("kept")})
	h := func(context.Context, *fdbqueue.Task) error {
		t.Error("the handler ran")
		return nil
	}
	for _, l := range []*slog.Logger{{}, slog.New((*slog.JSONHandler)(nil))} {
		require.ErrorIs(t, q.Run(ctx, db, h, fdbqueue.PoolOptions{Logger: l}), fdbqueue.ErrInvalidArgument)
	}
	require.Equal(t, int64(1), mustStats(t, db, q).Due, "the job was not leased")

	// Working values of the same types are accepted.
	_, err = fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: newArmedClock()},
		fdbqueue.WithEntropy(bytes.NewReader(make([]byte, 64))), fdbqueue.WithLogger(quietLog),
		fdbqueue.WithMeterProvider(&nilProvider{}))
	require.NoError(t, err)
}
