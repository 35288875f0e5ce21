package fdbqueue_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// typedTick is a typed schedule for the bad-input checks.
var typedTick = fdbqueue.TypedPeriodicJob[string]{Name: "tick", Every: time.Hour, Job: func(time.Time) fdbqueue.TypedJob[string] {
	return fdbqueue.TypedJob[string]{Value: "tick"}
}}

// typedJobQueueCalls is every exported method of a TypedJobQueue, for
// checkHandleCalls; the accessors report whether they returned zero.
func typedJobQueueCalls(e handleEnv, tj *fdbqueue.TypedJobQueue[string]) handleCalls {
	ctx, db := e.ctx, e.db
	return handleCalls{
		ops: map[string]func() error{
			"Add": func() error { _, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "x"}); return err },
			"AddBatch": func() error {
				_, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "x"}})
				return err
			},
			"Lease":     func() error { _, err := tj.Lease(ctx, db, 1, time.Minute); return err },
			"LeaseWait": func() error { _, err := tj.LeaseWait(ctx, db, 1, time.Minute); return err },
			"Stats":     func() error { _, err := tj.Stats(ctx, db); return err },
			"ListDead":  func() error { _, err := tj.ListDead(ctx, db, nil, 1); return err },
			"Run": func() error {
				return tj.Run(ctx, db, func(context.Context, *fdbqueue.TypedTask[string]) error { return nil }, fdbqueue.PoolOptions{Logger: quietLog})
			},
			"RegisterGauges": func() error { _, err := tj.RegisterGauges(db); return err },
			"Job":            func() error { _, err := tj.Job(ctx, db, fdbqueue.JobID{1}); return err },
			"Cancel":         func() error { return tj.Cancel(ctx, db, fdbqueue.JobID{1}) },
			"Requeue":        func() error { return tj.Requeue(ctx, db, fdbqueue.JobID{1}) },
			"DeleteDead":     func() error { return tj.DeleteDead(ctx, db, fdbqueue.JobID{1}) },
			"Schedule":       func() error { _, err := tj.Schedule(ctx, db, typedTick, time.Time{}); return err },
			"RunScheduler": func() error {
				return tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[string]{typedTick})
			},
			"Schedules":  func() error { _, err := tj.Schedules(ctx, db, nil, 1); return err },
			"Unschedule": func() error { _, err := tj.Unschedule(ctx, db, "tick"); return err },
		},
		accessors: map[string]func() bool{
			"JobQueue": func() bool { return tj.JobQueue() == nil },
			"Subspace": func() bool { return reflect.ValueOf(tj.Subspace()).IsZero() },
		},
	}
}

func typedTaskCalls(e handleEnv, task *fdbqueue.TypedTask[string]) handleCalls {
	return handleCalls{
		ops: map[string]func() error{
			"Ack": func() error { return task.Ack(e.ctx, e.tr) },
		},
		accessors: map[string]func() bool{
			"Lease": func() bool { return reflect.ValueOf(task.Lease()).IsZero() },
			"Value": func() bool { return task.Value() == "" },
		},
	}
}

// A TypedJobQueue made with a nil codec, or over a zero JobQueue, fails
// every operation with ErrInvalidArgument before any transaction, and
// takes no job; its accessors return the queue it was given. (A nil
// wrapper and one made with a nil JobQueue: nilAndZeroHandles.)
func TestTypedJobQueueNilCodecOrZeroQueue(t *testing.T) {
	e, unchanged := newHandleEnv(t)
	jq := mustJobQueue(t, "handles-jq", fdbqueue.JobQueueConfig{}) // newHandleEnv's queue, holding a job
	zero := &fdbqueue.JobQueue{}
	for name, c := range map[string]struct {
		tj  *fdbqueue.TypedJobQueue[string]
		q   *fdbqueue.JobQueue
		sub fdbqueue.Subspace
	}{
		"nil codec":       {fdbqueue.NewTypedJobQueue[string](jq, nil), jq, jq.Subspace()},
		"zero JobQueue":   {fdbqueue.NewTypedJobQueue[string](zero, fdbqueue.StringCodec{}), zero, fdbqueue.Subspace{}},
		"zero, nil codec": {fdbqueue.NewTypedJobQueue[string](zero, nil), zero, fdbqueue.Subspace{}},
	} {
		calls := typedJobQueueCalls(e, c.tj)
		before := e.db.Stats().Transactions
		for op, call := range calls.ops {
			var err error
			require.NotPanics(t, func() { err = call() }, "%s: %s", name, op)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "%s: %s", name, op)
		}
		require.Equal(t, before, e.db.Stats().Transactions, "%s: no transaction was made", name)
		require.Same(t, c.q, c.tj.JobQueue(), name)
		require.Equal(t, c.sub, c.tj.Subspace(), name)
	}
	unchanged()
}

// Every operation of a TypedJobQueue with a nil or typed-nil transactor, a
// closed database, a cancelled context and an expired deadline returns
// JobQueue's typed error and never panics; nothing changes.
func TestTypedJobQueueBadTransactorsAndContexts(t *testing.T) {
	plain := mustJobQueue(t, "typed-bad-matrix", fdbqueue.JobQueueConfig{})
	tj := fdbqueue.NewTypedJobQueue(plain, fdbqueue.StringCodec{})
	setup := newDB(t)
	ctx := context.Background()
	mustAdd(t, setup, plain, fdbqueue.Job{Value: []byte("x")})
	ops := map[string]func(context.Context, kv.Database) error{
		"Add": func(ctx context.Context, db kv.Database) error {
			_, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "y"})
			return err
		},
		"AddBatch": func(ctx context.Context, db kv.Database) error {
			_, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "y"}})
			return err
		},
		"Lease": func(ctx context.Context, db kv.Database) error { _, err := tj.Lease(ctx, db, 1, 0); return err },
		"LeaseWait": func(ctx context.Context, db kv.Database) error {
			_, err := tj.LeaseWait(ctx, db, 1, 0)
			return err
		},
		"Stats":    func(ctx context.Context, db kv.Database) error { _, err := tj.Stats(ctx, db); return err },
		"ListDead": func(ctx context.Context, db kv.Database) error { _, err := tj.ListDead(ctx, db, nil, 1); return err },
		"Run": func(ctx context.Context, db kv.Database) error {
			return tj.Run(ctx, db, func(context.Context, *fdbqueue.TypedTask[string]) error { return nil }, fdbqueue.PoolOptions{Logger: quietLog})
		},
		"Job": func(ctx context.Context, db kv.Database) error {
			_, err := tj.Job(ctx, db, fdbqueue.JobID{1})
			return err
		},
		"Cancel":     func(ctx context.Context, db kv.Database) error { return tj.Cancel(ctx, db, fdbqueue.JobID{1}) },
		"Requeue":    func(ctx context.Context, db kv.Database) error { return tj.Requeue(ctx, db, fdbqueue.JobID{1}) },
		"DeleteDead": func(ctx context.Context, db kv.Database) error { return tj.DeleteDead(ctx, db, fdbqueue.JobID{1}) },
		"Schedule": func(ctx context.Context, db kv.Database) error {
			_, err := tj.Schedule(ctx, db, typedTick, time.Time{})
			return err
		},
		"RunScheduler": func(ctx context.Context, db kv.Database) error {
			return tj.RunScheduler(ctx, db, []fdbqueue.TypedPeriodicJob[string]{typedTick})
		},
		"Schedules": func(ctx context.Context, db kv.Database) error { _, err := tj.Schedules(ctx, db, nil, 1); return err },
		"Unschedule": func(ctx context.Context, db kv.Database) error {
			_, err := tj.Unschedule(ctx, db, "tick")
			return err
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
			require.NotPanics(t, func() {
				require.ErrorIs(t, op(ctx, nil), fdbqueue.ErrInvalidArgument)
				require.ErrorIs(t, op(ctx, typedNil), fdbqueue.ErrInvalidArgument)
				if name != "Run" {
					err := op(ctx, closed)
					require.True(t, errors.Is(err, memdb.ErrClosed), "%v", err)
				}
				if name != "Run" && name != "RunScheduler" {
					require.ErrorIs(t, op(cancelled, setup), context.Canceled)
					require.ErrorIs(t, op(expired, setup), context.DeadlineExceeded)
				} else { // they stop at once on a dead context and return nil
					require.NoError(t, op(cancelled, setup))
				}
			})
		})
	}
	_, err := tj.RegisterGauges(nil)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "RegisterGauges: a nil transactor")
	bounded, cancel3 := context.WithTimeout(ctx, wakeTimeout) // a Run that started despite the nil handler ends
	defer cancel3()
	require.ErrorIs(t, tj.Run(bounded, setup, nil, fdbqueue.PoolOptions{Logger: quietLog}), fdbqueue.ErrInvalidArgument, "Run: a nil handler")
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, withoutAge(mustStats(t, setup, plain)), "nothing changed")
}

// withoutAge is s without OldestDue, which moves with the clock.
func withoutAge(s fdbqueue.JobStats) fdbqueue.JobStats {
	s.OldestDue = 0
	return s
}

// A TypedJobQueue made with a nil pointer of a codec type (`var c
// *fdbqueue.JSONCodec[T]`, passed as the Codec) is made with a nil codec:
// every operation fails with ErrInvalidArgument before any transaction.
// check compared the interface with nil only, so Add and AddBatch panicked
// in Encode (a nil dereference), Lease took the job and handed it back in a
// *CodecError, and Run dead-lettered every job it leased, each Decode
// panicking, until the queue was empty.
func TestTypedJobQueueNilPointerCodec(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	jq := mustJobQueue(t, "typed-nil-pointer-codec", fdbqueue.JobQueueConfig{})
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte(`"kept"`)})
	var codec *fdbqueue.JSONCodec[string]
	tj := fdbqueue.NewTypedJobQueue[string](jq, codec)
	before := db.Stats().Transactions

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var err error
	require.NotPanics(t, func() {
		err = tj.Run(runCtx, db, func(context.Context, *fdbqueue.TypedTask[string]) error { return nil },
			fdbqueue.PoolOptions{Workers: 1, Logger: quietLog, OnOutcome: func(fdbqueue.Outcome) { stop() }})
	})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "Run")
	ops := map[string]func() error{
		"Add": func() error { _, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "x"}); return err },
		"AddBatch": func() error {
			_, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "x"}})
			return err
		},
		"Lease":     func() error { _, err := tj.Lease(ctx, db, 1, time.Minute); return err },
		"LeaseWait": func() error { _, err := tj.LeaseWait(ctx, db, 1, time.Minute); return err },
	}
	for name, op := range ops {
		require.NotPanics(t, func() { err = op() }, name)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
	require.Equal(t, before, db.Stats().Transactions, "no transaction was made")
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, withoutAge(mustStats(t, db, jq)), "the job is still queued, not leased or dead")
}

// The same for a TypedQueue and a TypedPriorityQueue: made with a nil
// pointer of a codec type, their enqueues and pushes panicked in Encode,
// and their dequeues and pops took the item out of the queue only to hand
// it back in a *CodecError, where a nil codec takes none.
func TestTypedQueueNilPointerCodec(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q, pq := mustQueue(t, "typed-nil-pointer-q"), mustPQ(t, "typed-nil-pointer-pq")
	require.NoError(t, q.Enqueue(ctx, db, []byte(`"kept"`)))
	require.NoError(t, pq.Push(ctx, db, []byte(`"kept"`), 1))
	var codec *fdbqueue.JSONCodec[string]
	tq, tp := fdbqueue.NewTypedQueue[string](q, codec), fdbqueue.NewTypedPriorityQueue[string](pq, codec)
	for name, op := range map[string]func() error{
		"Enqueue": func() error { return tq.Enqueue(ctx, db, "x") },
		"Dequeue": func() error { _, err := tq.Dequeue(ctx, db); return err },
		"Push":    func() error { return tp.Push(ctx, db, "x", 1) },
		"PopMin":  func() error { _, err := tp.PopMin(ctx, db); return err },
	} {
		var err error
		require.NotPanics(t, func() { err = op() }, name)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
	v, err := q.Peek(ctx, db)
	require.NoError(t, err, "the item is still queued")
	require.Equal(t, []byte(`"kept"`), v)
	it, err := pq.PeekMin(ctx, db)
	require.NoError(t, err, "the item is still queued")
	require.Equal(t, []byte(`"kept"`), it.Value)
}
