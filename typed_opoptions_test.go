package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// The typed wrappers pass their OpOptions on to the untyped operation:
// given the zero OpID, which WithOpID's doc says every journaled operation
// refuses with ErrInvalidArgument, each typed form fails so and changes
// nothing. A wrapper that dropped its options would run the operation
// under an ID of its own instead, and a caller's WithOpID could not settle
// it.
func TestTypedWrappersPassTheirOpOptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := newDB(t)
	zero := fdbqueue.WithOpID(fdbqueue.OpID{})
	tq := fdbqueue.NewTypedQueue(mustQueue(t, "typed-opts-q", fdbqueue.WithStaging(fdbqueue.StagingConfig{})), fdbqueue.StringCodec{})
	tp := fdbqueue.NewTypedPriorityQueue(mustPQ(t, "typed-opts-pq", fdbqueue.WithStaging(fdbqueue.StagingConfig{})), fdbqueue.StringCodec{})
	tj := fdbqueue.NewTypedJobQueue(mustJobQueue(t, "typed-opts-jq", fdbqueue.JobQueueConfig{}), fdbqueue.StringCodec{})
	require.NoError(t, tq.Enqueue(ctx, db, "kept"))
	require.NoError(t, tp.Push(ctx, db, "kept", 1))
	_, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "kept"})
	require.NoError(t, err)

	calls := map[string]func() error{
		"TypedQueue.Enqueue":      func() error { return tq.Enqueue(ctx, db, "x", zero) },
		"TypedQueue.EnqueueBatch": func() error { return tq.EnqueueBatch(ctx, db, []string{"x"}, zero) },
		"TypedQueue.Dequeue":      func() error { _, err := tq.Dequeue(ctx, db, zero); return err },
		"TypedQueue.DequeueWait":  func() error { _, err := tq.DequeueWait(ctx, db, zero); return err },
		"TypedQueue.DequeueBatch": func() error { _, err := tq.DequeueBatch(ctx, db, 1, zero); return err },
		"TypedPriorityQueue.Push": func() error { return tp.Push(ctx, db, "x", 1, zero) },
		"TypedPriorityQueue.PushBatch": func() error {
			return tp.PushBatch(ctx, db, []fdbqueue.TypedPushItem[string]{{Value: "x", Priority: 1}}, zero)
		},
		"TypedPriorityQueue.PopMin":      func() error { _, err := tp.PopMin(ctx, db, zero); return err },
		"TypedPriorityQueue.PopMax":      func() error { _, err := tp.PopMax(ctx, db, zero); return err },
		"TypedPriorityQueue.PopMinWait":  func() error { _, err := tp.PopMinWait(ctx, db, zero); return err },
		"TypedPriorityQueue.PopMaxWait":  func() error { _, err := tp.PopMaxWait(ctx, db, zero); return err },
		"TypedPriorityQueue.PopMinBatch": func() error { _, err := tp.PopMinBatch(ctx, db, 1, zero); return err },
		"TypedPriorityQueue.PopMaxBatch": func() error { _, err := tp.PopMaxBatch(ctx, db, 1, zero); return err },
		"TypedJobQueue.Add": func() error {
			_, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: "x"}, zero)
			return err
		},
		"TypedJobQueue.AddBatch": func() error {
			_, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "x"}}, zero)
			return err
		},
		"TypedJobQueue.Lease": func() error { _, err := tj.Lease(ctx, db, 1, time.Minute, zero); return err },
	}
	for name, call := range calls {
		require.ErrorIs(t, call(), fdbqueue.ErrInvalidArgument, name)
	}
	n, err := tq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "nothing enqueued or dequeued")
	n, err = tp.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "nothing pushed or popped")
	st, err := tj.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Queued, "nothing added")
	require.Equal(t, int64(1), st.Due, "nothing leased")
}
