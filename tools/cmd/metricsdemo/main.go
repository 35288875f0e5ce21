// Command metricsdemo wires fdbqueue's metrics and logs: a Queue made with
// WithMeterProvider (the OpenTelemetry SDK with its stdout exporter) and
// WithLogger (slog's text handler on standard error), its gauges
// registered, and a few operations on the embedded engine, one of them
// through an injected commit_unknown_result. At the end it prints the
// metrics as JSON:
//
//	cd tools && go run ./cmd/metricsdemo
//
// In an application, pass the MeterProvider you already have (an OTLP or
// Prometheus exporter) and your logger; the library itself depends only on
// the metric API, and records nothing without a provider.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	if err := run(context.Background(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdemo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, stdout, stderr io.Writer) error {
	exp, err := stdoutmetric.New(stdoutmetric.WithWriter(stdout), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	// A periodic reader exports on its interval and at Shutdown.
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	defer mp.Shutdown(ctx)

	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"demo", "jobs"})
	if err != nil {
		return err
	}
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder(),
		fdbqueue.WithMeterProvider(mp),
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))),
		fdbqueue.WithQueueName("demo/jobs"))
	if err != nil {
		return err
	}
	reg, err := q.RegisterGauges(db)
	if err != nil {
		return err
	}
	defer reg.Unregister()

	for _, v := range []string{"a", "b", "c"} {
		if err := q.Enqueue(ctx, db, []byte(v)); err != nil {
			return err
		}
	}
	// The next commit applies but reports commit_unknown_result: the retry
	// finds the operation's journal record (a log line says so).
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	if err := q.Enqueue(ctx, db, []byte("d")); err != nil {
		return err
	}
	if _, err := q.Dequeue(ctx, db); err != nil {
		return err
	}
	depth, err := q.Depth(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "depth %d (from the counters)\n", depth)
	return mp.Shutdown(ctx) // exports the last collection
}
