package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Every JobQueue operation, with a nil or typed-nil transactor, a closed
// database, a cancelled context and an expired deadline, returns its typed
// error and never panics.
func TestJobQueueBadTransactorsAndContexts(t *testing.T) {
	q := mustJobQueue(t, "bad-matrix", fdbqueue.JobQueueConfig{})
	setup := newDB(t)
	ctx := context.Background()
	mustAdd(t, setup, q, fdbqueue.Job{Value: []byte("x")})
	l := mustLease(t, setup, q, 1, time.Minute)[0]

	ops := map[string]func(context.Context, kv.Database) error{
		"Add":   func(ctx context.Context, db kv.Database) error { _, err := q.Add(ctx, db, fdbqueue.Job{}); return err },
		"Lease": func(ctx context.Context, db kv.Database) error { _, err := q.Lease(ctx, db, 1, 0); return err },
		"LeaseWait": func(ctx context.Context, db kv.Database) error {
			_, err := q.LeaseWait(ctx, db, 1, 0)
			return err
		},
		"Ack": func(ctx context.Context, db kv.Database) error { return q.Ack(ctx, db, l) },
		"Nack": func(ctx context.Context, db kv.Database) error {
			_, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{})
			return err
		},
		"Extend":     func(ctx context.Context, db kv.Database) error { _, err := q.Extend(ctx, db, l, 0); return err },
		"Release":    func(ctx context.Context, db kv.Database) error { return q.Release(ctx, db, l, 0) },
		"Stats":      func(ctx context.Context, db kv.Database) error { _, err := q.Stats(ctx, db); return err },
		"ListDead":   func(ctx context.Context, db kv.Database) error { _, err := q.ListDead(ctx, db, nil, 1); return err },
		"Requeue":    func(ctx context.Context, db kv.Database) error { return q.Requeue(ctx, db, l.JobID) },
		"DeleteDead": func(ctx context.Context, db kv.Database) error { return q.DeleteDead(ctx, db, l.JobID) },
		"Job":        func(ctx context.Context, db kv.Database) error { _, err := q.Job(ctx, db, l.JobID); return err },
		"Cancel":     func(ctx context.Context, db kv.Database) error { return q.Cancel(ctx, db, l.JobID) },
		"Run": func(ctx context.Context, db kv.Database) error {
			return q.Run(ctx, db, func(context.Context, *fdbqueue.Task) error { return nil }, fdbqueue.PoolOptions{Logger: quietLog})
		},
	}
	closed := memdb.New()
	require.NoError(t, closed.Close())
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Unix(0, 0))
	defer cancel2()
	var typedNil *memdb.DB
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			require.ErrorIs(t, op(ctx, nil), fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, op(ctx, typedNil), fdbqueue.ErrInvalidArgument)
			if name != "Run" { // Run stops at once on a dead context and returns nil
				err := op(ctx, closed)
				require.True(t, errors.Is(err, memdb.ErrClosed), "%v", err)
				require.ErrorIs(t, op(cancelled, setup), context.Canceled)
				require.ErrorIs(t, op(expired, setup), context.DeadlineExceeded)
			} else {
				require.NoError(t, op(cancelled, setup))
			}
		})
	}
	// Nothing changed: the job is still leased under l.
	require.Equal(t, fdbqueue.JobStats{Leased: 1}, mustStats(t, setup, q))
}
