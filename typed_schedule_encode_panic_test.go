package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

// An Encode that panics must fail a typed write with a *CodecError
// (codec.go's Codec doc; typed_encode_panic_test.go covers Enqueue, Push,
// Add), and so must TypedJobQueue.Schedule and RunScheduler, which encoded
// with codec.Encode directly, without encodeValue's recover, so that the
// panic escaped (a RunScheduler goroutine crashed its process). Found by
// an audit of the typed layer.
func TestTypedScheduleEncodePanics(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	jq := mustJobQueue(t, "typed-schedule-enc-panic", fdbqueue.JobQueueConfig{Choice: 1, Clock: clock})
	tj := fdbqueue.NewTypedJobQueue[int](jq, encodePanicCodec{})
	pj := fdbqueue.TypedPeriodicJob[int]{Name: "count", Every: time.Minute, Job: func(time.Time) fdbqueue.TypedJob[int] {
		return fdbqueue.TypedJob[int]{Value: -1, Priority: 7}
	}}
	before := allPairs(t, db)

	t.Run("Schedule", func(t *testing.T) {
		var err error
		require.NotPanics(t, func() { _, err = tj.Schedule(ctx, db, pj, time.Time{}) })
		require.ErrorIs(t, err, fdbqueue.ErrCodec)
		var ce *fdbqueue.CodecError
		require.ErrorAs(t, err, &ce)
		require.Contains(t, ce.Error(), "Encode panicked")
		require.Equal(t, before, allPairs(t, db), "nothing written")
	})
	t.Run("RunScheduler", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var err error
		require.NotPanics(t, func() { err = tj.RunScheduler(rctx, db, []fdbqueue.TypedPeriodicJob[int]{pj}) })
		require.ErrorIs(t, err, fdbqueue.ErrCodec)
		require.Equal(t, before, allPairs(t, db), "nothing written")
	})
}
