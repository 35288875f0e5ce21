package fdbqueue_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// encodePanicCodec's Encode panics on a negative value, as a buggy codec
// may on a value it does not expect; it encodes the others.
type encodePanicCodec struct{}

func (encodePanicCodec) Encode(v int) ([]byte, error) {
	if v < 0 {
		panic("encode bug " + strconv.Itoa(v))
	}
	return []byte(strconv.Itoa(v)), nil
}

func (encodePanicCodec) Decode(b []byte) (int, error) { return strconv.Atoi(string(b)) }

// An Encode that panics fails the typed writes as an encoding error does,
// as a panicking Decode fails the takes: a *CodecError (errors.Is
// ErrCodec) naming the item or job, whose error says Encode panicked and
// with what, and nothing of the call written, in its own transaction or the
// caller's, which stays usable. The panic propagated out of Enqueue, Push
// and Add.
func TestTypedEncodePanics(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q, pq := mustQueue(t, "enc-panic"), mustPQ(t, "enc-panic-pq")
	jq := mustJobQueue(t, "enc-panic-jobs", fdbqueue.JobQueueConfig{})
	tq := fdbqueue.NewTypedQueue[int](q, encodePanicCodec{})
	tp := fdbqueue.NewTypedPriorityQueue[int](pq, encodePanicCodec{})
	tj := fdbqueue.NewTypedJobQueue[int](jq, encodePanicCodec{})

	// codecErr checks err is a *CodecError whose message names what, and
	// the panic, and returns it.
	codecErr := func(t *testing.T, err error, what string, v int) *fdbqueue.CodecError {
		t.Helper()
		require.ErrorIs(t, err, fdbqueue.ErrCodec)
		var ce *fdbqueue.CodecError
		require.ErrorAs(t, err, &ce)
		require.Nil(t, ce.Raw)
		require.Nil(t, ce.Lease)
		require.Contains(t, ce.Error(), what)
		require.Contains(t, ce.Error(), "Encode panicked: encode bug "+strconv.Itoa(v))
		return ce
	}
	writes := []struct {
		name, what string
		v          int // the value whose Encode panics
		priority   int64
		run        func(kv.Transactor) error
	}{
		{"TypedQueue.Enqueue", "item 0:", -1, 0, func(tr kv.Transactor) error { return tq.Enqueue(ctx, tr, -1) }},
		{"TypedQueue.EnqueueBatch", "item 2:", -3, 0, func(tr kv.Transactor) error { return tq.EnqueueBatch(ctx, tr, []int{1, 2, -3}) }},
		{"TypedPriorityQueue.Push", "", -1, 7, func(tr kv.Transactor) error { return tp.Push(ctx, tr, -1, 7) }},
		{"TypedPriorityQueue.PushBatch", "item 1:", -2, 8, func(tr kv.Transactor) error {
			return tp.PushBatch(ctx, tr, []fdbqueue.TypedPushItem[int]{{Value: 1, Priority: 1}, {Value: -2, Priority: 8}, {Value: 3, Priority: 3}})
		}},
		{"TypedJobQueue.Add", "job 0:", -1, 4, func(tr kv.Transactor) error {
			_, err := tj.Add(ctx, tr, fdbqueue.TypedJob[int]{Value: -1, Priority: 4})
			return err
		}},
		{"TypedJobQueue.AddBatch", "job 2:", -3, 5, func(tr kv.Transactor) error {
			_, err := tj.AddBatch(ctx, tr, []fdbqueue.TypedJob[int]{{Value: 1}, {Value: 2}, {Value: -3, Priority: 5}})
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = w.run(db) })
			ce := codecErr(t, err, w.what, w.v)
			require.Equal(t, w.priority, ce.Priority)

			// In the caller's transaction: the error comes back, nothing of
			// the call is written, and what the transaction does next commits.
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				require.NotPanics(t, func() { err = w.run(tr) })
				codecErr(t, err, w.what, w.v)
				return tq.Enqueue(ctx, tr, 42)
			}))
			got, err := tq.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, 42, got)
		})
	}
	require.Zero(t, queueLen(t, db, q), "nothing enqueued")
	require.Zero(t, queueLen(t, db, pq), "nothing pushed")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, jq), "no job added")
}
