package fdbqueue_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// opsMeter records the fdbqueue.op and fdbqueue.outcome of each
// fdbqueue.operations count.
type opsMeter struct {
	noop.Meter
	mu  sync.Mutex
	ops []string // "op outcome"
}

type opsCounter struct {
	noop.Int64Counter
	m *opsMeter
}

func (c opsCounter) Add(_ context.Context, _ int64, opts ...metric.AddOption) {
	attrs := metric.NewAddConfig(opts).Attributes()
	op, _ := attrs.Value("fdbqueue.op")
	out, _ := attrs.Value("fdbqueue.outcome")
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.ops = append(c.m.ops, op.AsString()+" "+out.AsString())
}

func (m *opsMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if name == "fdbqueue.operations" {
		return opsCounter{m: m}, nil
	}
	return m.Meter.Int64Counter(name, opts...)
}

type opsProvider struct {
	noop.MeterProvider
	m *opsMeter
}

func (p opsProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// opLogs collects the op field of each "may have committed" log line.
type opLogs struct {
	mu  sync.Mutex
	ops []string
}

func (h *opLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h *opLogs) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *opLogs) WithGroup(string) slog.Handler            { return h }
func (h *opLogs) Handle(_ context.Context, r slog.Record) error {
	if !strings.Contains(r.Message, "may have committed") {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "op" {
			h.mu.Lock()
			h.ops = append(h.ops, a.Value.String())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// opNameCase is an operation run into an unknown commit outcome, and the
// name it goes by.
type opNameCase struct {
	name, op string
	// setup prepares a queue made with opts on db and returns the
	// operation.
	setup func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error
}

func deadJob(t *testing.T, db *memdb.DB, q *fdbqueue.JobQueue) fdbqueue.JobID {
	added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), MaxAttempts: 1})
	dead, err := q.Nack(context.Background(), db, mustLease(t, db, q, 1, time.Minute)[0], fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, dead)
	return added.ID
}

var opNameCases = []opNameCase{
	{"Queue.Enqueue", "enqueue", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustQueue(t, "names-enq", opts...)
		return func(ctx context.Context, db kv.Database) error { return q.Enqueue(ctx, db, []byte("x")) }
	}},
	{"Queue.EnqueueBatch", "enqueue", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustQueue(t, "names-enqb", opts...)
		return func(ctx context.Context, db kv.Database) error {
			return q.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y")})
		}
	}},
	{"Queue.Dequeue", "dequeue", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustQueue(t, "names-deq", opts...)
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("x")))
		return func(ctx context.Context, db kv.Database) error { _, err := q.Dequeue(ctx, db); return err }
	}},
	{"Queue.DequeueBatch", "dequeue", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustQueue(t, "names-deqb", opts...)
		require.NoError(t, q.Enqueue(context.Background(), db, []byte("x")))
		return func(ctx context.Context, db kv.Database) error { _, err := q.DequeueBatch(ctx, db, 2); return err }
	}},
	{"PriorityQueue.Push", "push", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-push", opts...)
		return func(ctx context.Context, db kv.Database) error { return pq.Push(ctx, db, []byte("x"), 1) }
	}},
	{"PriorityQueue.PushBatch", "push", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-pushb", opts...)
		return func(ctx context.Context, db kv.Database) error {
			return pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}})
		}
	}},
	{"PriorityQueue.PopMin", "pop", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-popmin", opts...)
		require.NoError(t, pq.Push(context.Background(), db, []byte("x"), 1))
		return func(ctx context.Context, db kv.Database) error { _, err := pq.PopMin(ctx, db); return err }
	}},
	{"PriorityQueue.PopMax", "pop", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-popmax", opts...)
		require.NoError(t, pq.Push(context.Background(), db, []byte("x"), 1))
		return func(ctx context.Context, db kv.Database) error { _, err := pq.PopMax(ctx, db); return err }
	}},
	{"PriorityQueue.PopMinBatch", "pop", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-popminb", opts...)
		require.NoError(t, pq.Push(context.Background(), db, []byte("x"), 1))
		return func(ctx context.Context, db kv.Database) error { _, err := pq.PopMinBatch(ctx, db, 2); return err }
	}},
	{"PriorityQueue.PopMaxBatch", "pop", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		pq := mustPQ(t, "names-popmaxb", opts...)
		require.NoError(t, pq.Push(context.Background(), db, []byte("x"), 1))
		return func(ctx context.Context, db kv.Database) error { _, err := pq.PopMaxBatch(ctx, db, 2); return err }
	}},
	{"JobQueue.Add", "add", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-add", fdbqueue.JobQueueConfig{}, opts...)
		return func(ctx context.Context, db kv.Database) error {
			_, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("x")})
			return err
		}
	}},
	{"JobQueue.AddBatch", "add", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-addb", fdbqueue.JobQueueConfig{}, opts...)
		return func(ctx context.Context, db kv.Database) error {
			_, err := q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("x")}})
			return err
		}
	}},
	{"JobQueue.Lease", "lease", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-lease", fdbqueue.JobQueueConfig{}, opts...)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		return func(ctx context.Context, db kv.Database) error {
			_, err := q.Lease(ctx, db, 1, time.Minute)
			return err
		}
	}},
	{"JobQueue.Ack", "ack", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-ack", fdbqueue.JobQueueConfig{}, opts...)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		l := mustLease(t, db, q, 1, time.Minute)[0]
		return func(ctx context.Context, db kv.Database) error { return q.Ack(ctx, db, l) }
	}},
	{"JobQueue.Nack", "nack", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-nack", fdbqueue.JobQueueConfig{}, opts...)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		l := mustLease(t, db, q, 1, time.Minute)[0]
		return func(ctx context.Context, db kv.Database) error {
			_, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{})
			return err
		}
	}},
	{"JobQueue.Release", "release", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-release", fdbqueue.JobQueueConfig{}, opts...)
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		l := mustLease(t, db, q, 1, time.Minute)[0]
		return func(ctx context.Context, db kv.Database) error { return q.Release(ctx, db, l, 0) }
	}},
	{"JobQueue.Requeue", "requeue", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-requeue", fdbqueue.JobQueueConfig{}, opts...)
		id := deadJob(t, db, q)
		return func(ctx context.Context, db kv.Database) error { return q.Requeue(ctx, db, id) }
	}},
	{"JobQueue.DeleteDead", "delete_dead", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-deletedead", fdbqueue.JobQueueConfig{}, opts...)
		id := deadJob(t, db, q)
		return func(ctx context.Context, db kv.Database) error { return q.DeleteDead(ctx, db, id) }
	}},
	{"JobQueue.Cancel", "cancel", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-cancel", fdbqueue.JobQueueConfig{}, opts...)
		added := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
		return func(ctx context.Context, db kv.Database) error { return q.Cancel(ctx, db, added.ID) }
	}},
	{"JobQueue.Unschedule", "unschedule", func(t *testing.T, db *memdb.DB, opts []fdbqueue.Option) func(context.Context, kv.Database) error {
		q := mustJobQueue(t, "names-unschedule", fdbqueue.JobQueueConfig{}, opts...)
		pj := fdbqueue.PeriodicJob{Name: "nightly", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("x")} }}
		_, err := q.Schedule(context.Background(), db, pj, time.Now())
		require.NoError(t, err)
		return func(ctx context.Context, db kv.Database) error {
			_, err := q.Unschedule(ctx, db, "nightly")
			return err
		}
	}},
}

// An operation has one name, in snake_case, wherever it is reported: the
// Op of its *UnknownResultError, the fdbqueue.op attribute of its
// fdbqueue.operations count and the op field of its log line. A
// PriorityQueue's pops are "pop", PopMin and PopMax alike (the journal
// tells them apart internally, but that is no name of the operation's);
// UnknownResultError.Op said "pop min" and "pop max" before. The names are
// pinned here, since dashboards and alerts match on them. With a
// MeterProvider and without one (the operations then run their
// transactions differently).
func TestOperationNamesAgree(t *testing.T) {
	for _, c := range opNameCases {
		for _, metered := range []bool{true, false} {
			name := c.name
			if !metered {
				name += "/no MeterProvider"
			}
			t.Run(name, func(t *testing.T) {
				db := newDB(t)
				m, logs := &opsMeter{}, &opLogs{}
				opts := []fdbqueue.Option{fdbqueue.WithLogger(slog.New(logs))}
				if metered {
					opts = append(opts, fdbqueue.WithMeterProvider(opsProvider{m: m}))
				}
				op := c.setup(t, db, opts)
				m.mu.Lock()
				m.ops = nil // the setup's operations
				m.mu.Unlock()
				db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
				err := op(context.Background(), db)
				var ure *fdbqueue.UnknownResultError
				require.ErrorAs(t, err, &ure)
				require.Equal(t, c.op, ure.Op, "UnknownResultError.Op")
				require.Equal(t, []string{c.op}, logs.ops, "the log line's op")
				if metered {
					require.Equal(t, []string{c.op + " maybe_committed"}, m.ops, "fdbqueue.operations' fdbqueue.op")
				}
			})
		}
	}
}
