package fdbqueue_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// handleCalls is every exported method of one handle type, called on one
// handle: those that return an error, and the accessors (no error), each
// reporting whether it returned its zero value.
type handleCalls struct {
	ops       map[string]func() error
	accessors map[string]func() bool
}

// handleEnv is what the calls run against: a database holding a queue of
// each kind with one item, and a transaction on it for WatchForItems.
type handleEnv struct {
	ctx context.Context
	db  *memdb.DB
	tr  kv.Transaction
}

func queueCalls(e handleEnv, q *fdbqueue.Queue) handleCalls {
	ctx, db := e.ctx, e.db
	return handleCalls{
		ops: map[string]func() error{
			"Enqueue":        func() error { return q.Enqueue(ctx, db, []byte("x")) },
			"EnqueueBatch":   func() error { return q.EnqueueBatch(ctx, db, [][]byte{[]byte("x")}) },
			"Dequeue":        func() error { _, err := q.Dequeue(ctx, db); return err },
			"DequeueBatch":   func() error { _, err := q.DequeueBatch(ctx, db, 2); return err },
			"DequeueWait":    func() error { _, err := q.DequeueWait(ctx, db); return err },
			"Peek":           func() error { _, err := q.Peek(ctx, db); return err },
			"Empty":          func() error { _, err := q.Empty(ctx, db); return err },
			"Len":            func() error { _, err := q.Len(ctx, db); return err },
			"Depth":          func() error { _, err := q.Depth(ctx, db); return err },
			"RepairDepth":    func() error { _, err := q.RepairDepth(ctx, db); return err },
			"Clear":          func() error { return q.Clear(ctx, db) },
			"Recover":        func() error { _, err := q.Recover(ctx, db); return err },
			"Reconfigure":    func() error { return q.Reconfigure(ctx, db) },
			"RegisterGauges": func() error { _, err := q.RegisterGauges(db); return err },
			"WatchForItems":  func() error { _, err := q.WatchForItems(e.tr); return err },
		},
		accessors: map[string]func() bool{
			"Subspace":     func() bool { return reflect.ValueOf(q.Subspace()).IsZero() },
			"StagingStats": func() bool { return reflect.ValueOf(q.StagingStats()).IsZero() },
		},
	}
}

func priorityQueueCalls(e handleEnv, pq *fdbqueue.PriorityQueue) handleCalls {
	ctx, db := e.ctx, e.db
	return handleCalls{
		ops: map[string]func() error{
			"Push":           func() error { return pq.Push(ctx, db, []byte("x"), 1) },
			"PushBatch":      func() error { return pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}}) },
			"PopMin":         func() error { _, err := pq.PopMin(ctx, db); return err },
			"PopMax":         func() error { _, err := pq.PopMax(ctx, db); return err },
			"PopMinBatch":    func() error { _, err := pq.PopMinBatch(ctx, db, 2); return err },
			"PopMaxBatch":    func() error { _, err := pq.PopMaxBatch(ctx, db, 2); return err },
			"PopMinWait":     func() error { _, err := pq.PopMinWait(ctx, db); return err },
			"PopMaxWait":     func() error { _, err := pq.PopMaxWait(ctx, db); return err },
			"PeekMin":        func() error { _, err := pq.PeekMin(ctx, db); return err },
			"PeekMax":        func() error { _, err := pq.PeekMax(ctx, db); return err },
			"Empty":          func() error { _, err := pq.Empty(ctx, db); return err },
			"Len":            func() error { _, err := pq.Len(ctx, db); return err },
			"Depth":          func() error { _, err := pq.Depth(ctx, db); return err },
			"RepairDepth":    func() error { _, err := pq.RepairDepth(ctx, db); return err },
			"Clear":          func() error { return pq.Clear(ctx, db) },
			"Recover":        func() error { _, err := pq.Recover(ctx, db); return err },
			"Reconfigure":    func() error { return pq.Reconfigure(ctx, db) },
			"RegisterGauges": func() error { _, err := pq.RegisterGauges(db); return err },
			"WatchForItems":  func() error { _, err := pq.WatchForItems(e.tr); return err },
		},
		accessors: map[string]func() bool{
			"Subspace":     func() bool { return reflect.ValueOf(pq.Subspace()).IsZero() },
			"StagingStats": func() bool { return reflect.ValueOf(pq.StagingStats()).IsZero() },
		},
	}
}

func jobQueueCalls(e handleEnv, q *fdbqueue.JobQueue) handleCalls {
	ctx, db := e.ctx, e.db
	var l fdbqueue.Lease
	pj := fdbqueue.PeriodicJob{Name: "p", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}
	return handleCalls{
		ops: map[string]func() error{
			"Add":         func() error { _, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("x")}); return err },
			"AddBatch":    func() error { _, err := q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("x")}}); return err },
			"Lease":       func() error { _, err := q.Lease(ctx, db, 1, time.Minute); return err },
			"LeaseWait":   func() error { _, err := q.LeaseWait(ctx, db, 1, time.Minute); return err },
			"SettleLease": func() error { _, err := q.SettleLease(ctx, db, fdbqueue.NewOpID()); return err },
			"Ack":         func() error { return q.Ack(ctx, db, l) },
			"Nack":        func() error { _, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{}); return err },
			"Extend":      func() error { _, err := q.Extend(ctx, db, l, time.Minute); return err },
			"Release":     func() error { return q.Release(ctx, db, l, 0) },
			"Stats":       func() error { _, err := q.Stats(ctx, db); return err },
			"ListDead":    func() error { _, err := q.ListDead(ctx, db, nil, 1); return err },
			"Requeue":     func() error { return q.Requeue(ctx, db, fdbqueue.JobID{1}) },
			"DeleteDead":  func() error { return q.DeleteDead(ctx, db, fdbqueue.JobID{1}) },
			"Job":         func() error { _, err := q.Job(ctx, db, fdbqueue.JobID{1}); return err },
			"Cancel":      func() error { return q.Cancel(ctx, db, fdbqueue.JobID{1}) },
			"Run": func() error {
				return q.Run(ctx, db, func(context.Context, *fdbqueue.Task) error { return nil }, fdbqueue.PoolOptions{Logger: quietLog})
			},
			"RegisterGauges": func() error { _, err := q.RegisterGauges(db); return err },
			"Schedule":       func() error { _, err := q.Schedule(ctx, db, pj, time.Now()); return err },
			"RunScheduler":   func() error { return q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{pj}) },
			"Schedules":      func() error { _, err := q.Schedules(ctx, db, nil, 1); return err },
			"Unschedule":     func() error { _, err := q.Unschedule(ctx, db, "p"); return err },
		},
		accessors: map[string]func() bool{
			"Subspace":         func() bool { return reflect.ValueOf(q.Subspace()).IsZero() },
			"Backoff":          func() bool { return q.Backoff(3) == 0 },
			"DeadCursorAt":     func() bool { return q.DeadCursorAt(time.Now()) == nil },
			"ScheduleCursorAt": func() bool { return q.ScheduleCursorAt("p") == nil },
		},
	}
}

func taskCalls(e handleEnv, task *fdbqueue.Task) handleCalls {
	return handleCalls{
		ops: map[string]func() error{
			"Ack": func() error { return task.Ack(e.ctx, e.tr) },
		},
		accessors: map[string]func() bool{
			"Lease": func() bool { return reflect.ValueOf(task.Lease()).IsZero() },
			"Value": func() bool { return task.Value() == nil },
		},
	}
}

// checkHandleCalls runs every exported method of handle's type (calls
// must name them all) and checks that each fails with ErrInvalidArgument,
// or returns its zero value, without a panic and without a transaction.
func checkHandleCalls(t *testing.T, e handleEnv, handle any, calls handleCalls) {
	t.Helper()
	typ := reflect.TypeOf(handle)
	var names []string
	for i := range typ.NumMethod() {
		names = append(names, typ.Method(i).Name)
	}
	var covered []string
	for name := range calls.ops {
		covered = append(covered, name)
	}
	for name := range calls.accessors {
		covered = append(covered, name)
	}
	slices.Sort(covered)
	require.Equal(t, names, covered, "%v: every exported method is called", typ)

	before := e.db.Stats().Transactions
	for name, op := range calls.ops {
		var err error
		require.NotPanics(t, func() { err = op() }, "%v.%s", typ, name)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "%v.%s", typ, name)
	}
	for name, zero := range calls.accessors {
		var ok bool
		require.NotPanics(t, func() { ok = zero() }, "%v.%s", typ, name)
		require.True(t, ok, "%v.%s returns its zero value", typ, name)
	}
	require.Equal(t, before, e.db.Stats().Transactions, "%v: no transaction was made", typ)
}

// newHandleEnv returns a database holding a Queue, a PriorityQueue and a
// JobQueue with one item each, a transaction on it, and a check, for the
// end of the test, that the three items are as they were.
func newHandleEnv(t *testing.T) (handleEnv, func()) {
	ctx := context.Background()
	db := newDB(t)
	q, pq := mustQueue(t, "handles-q"), mustPQ(t, "handles-pq")
	jq := mustJobQueue(t, "handles-jq", fdbqueue.JobQueueConfig{})
	require.NoError(t, q.Enqueue(ctx, db, []byte("kept")))
	require.NoError(t, pq.Push(ctx, db, []byte("kept"), 1))
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("kept")})
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	t.Cleanup(tr.Cancel)
	return handleEnv{ctx: ctx, db: db, tr: tr}, func() {
		v, err := q.Peek(ctx, db)
		require.NoError(t, err, "the item is still queued")
		require.Equal(t, []byte("kept"), v)
		it, err := pq.PeekMin(ctx, db)
		require.NoError(t, err, "the item is still queued")
		require.Equal(t, []byte("kept"), it.Value)
		require.Equal(t, int64(1), mustStats(t, db, jq).Queued, "the job is still queued")
	}
}

// nilAndZeroHandles returns the check of every exported method of one
// handle type, on a nil and on a zero handle.
func nilAndZeroHandles(kind string) func(t *testing.T) {
	return func(t *testing.T) {
		e, unchanged := newHandleEnv(t)
		switch kind {
		case "Queue":
			var h *fdbqueue.Queue
			checkHandleCalls(t, e, h, queueCalls(e, h))
			checkHandleCalls(t, e, h, queueCalls(e, &fdbqueue.Queue{}))
		case "PriorityQueue":
			var h *fdbqueue.PriorityQueue
			checkHandleCalls(t, e, h, priorityQueueCalls(e, h))
			checkHandleCalls(t, e, h, priorityQueueCalls(e, &fdbqueue.PriorityQueue{}))
		case "JobQueue":
			var h *fdbqueue.JobQueue
			checkHandleCalls(t, e, h, jobQueueCalls(e, h))
			checkHandleCalls(t, e, h, jobQueueCalls(e, &fdbqueue.JobQueue{}))
		case "Task":
			var h *fdbqueue.Task
			checkHandleCalls(t, e, h, taskCalls(e, h))
			checkHandleCalls(t, e, h, taskCalls(e, &fdbqueue.Task{}))
		case "TypedJobQueue":
			var h *fdbqueue.TypedJobQueue[string]
			checkHandleCalls(t, e, h, typedJobQueueCalls(e, h))
			checkHandleCalls(t, e, h, typedJobQueueCalls(e, fdbqueue.NewTypedJobQueue[string](nil, fdbqueue.StringCodec{})))
		case "TypedTask":
			var h *fdbqueue.TypedTask[string]
			checkHandleCalls(t, e, h, typedTaskCalls(e, h))
			checkHandleCalls(t, e, h, typedTaskCalls(e, &fdbqueue.TypedTask[string]{}))
		case "Typed":
			// The typed wrappers over a zero queue fail as it does; a nil
			// wrapper's accessors return nil.
			ctx, db := e.ctx, e.db
			tq := fdbqueue.NewTypedQueue(&fdbqueue.Queue{}, fdbqueue.StringCodec{})
			_, err := tq.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, tq.Enqueue(ctx, db, "x"), fdbqueue.ErrInvalidArgument)
			_, err = tq.Len(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.Zero(t, tq.Subspace())
			tp := fdbqueue.NewTypedPriorityQueue(&fdbqueue.PriorityQueue{}, fdbqueue.StringCodec{})
			_, err = tp.PopMin(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, tp.Push(ctx, db, "x", 1), fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, tp.PushBatch(ctx, db, []fdbqueue.TypedPushItem[string]{{Value: "x", Priority: 1}}), fdbqueue.ErrInvalidArgument)
			_, err = tp.PeekMax(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.Zero(t, tp.StagingStats())
			var nilTQ *fdbqueue.TypedQueue[string]
			var nilTP *fdbqueue.TypedPriorityQueue[string]
			require.Nil(t, nilTQ.Queue())
			require.Nil(t, nilTP.PriorityQueue())
		default:
			t.Fatalf("unknown handle kind %q", kind)
		}
		unchanged()
	}
}
