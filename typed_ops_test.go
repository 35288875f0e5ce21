package fdbqueue_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Every exported method of the untyped queues has a typed counterpart.
func TestTypedWrappersComplete(t *testing.T) {
	for _, c := range []struct {
		untyped, typed reflect.Type
		own            string // the accessor of the untyped queue
	}{
		{reflect.TypeOf(&fdbqueue.Queue{}), reflect.TypeOf(&fdbqueue.TypedQueue[string]{}), "Queue"},
		{reflect.TypeOf(&fdbqueue.PriorityQueue{}), reflect.TypeOf(&fdbqueue.TypedPriorityQueue[string]{}), "PriorityQueue"},
	} {
		for i := range c.untyped.NumMethod() {
			name := c.untyped.Method(i).Name
			_, ok := c.typed.MethodByName(name)
			require.True(t, ok, "%v has %s, %v does not", c.untyped, name, c.typed)
		}
		_, ok := c.typed.MethodByName(c.own)
		require.True(t, ok)
	}
}

// intCodec fails to decode anything that is not a decimal integer.
type intCodec struct{}

func (intCodec) Encode(v int) ([]byte, error) { return []byte(strconv.Itoa(v)), nil }
func (intCodec) Decode(b []byte) (int, error) { return strconv.Atoi(string(b)) }

func TestTypedWrappersOperations(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := fdbqueue.NewTypedQueue(mustQueue(t, "typed-ops"), intCodec{})
	require.Equal(t, q.Queue().Subspace(), q.Subspace())
	empty, err := q.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
	require.NoError(t, q.EnqueueBatch(ctx, db, []int{1, 2, 3}))
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	require.NoError(t, q.Clear(ctx, db))
	n, err = q.Len(ctx, db)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		w, err := q.WatchForItems(tr)
		if err == nil {
			w.Cancel()
		}
		return err
	}))
	_, err = q.Recover(ctx, db)
	require.NoError(t, err)
	require.Zero(t, q.StagingStats().Calls)
	require.NoError(t, q.Reconfigure(ctx, db))

	pqRaw := mustPQ(t, "typed-ops-pq")
	pq := fdbqueue.NewTypedPriorityQueue(pqRaw, intCodec{})
	for _, p := range []int64{5, 1, 9, 3} {
		require.NoError(t, pq.Push(ctx, db, int(p)*10, p))
	}
	require.NoError(t, pqRaw.Push(ctx, db, []byte("not a number"), 4))
	// The item the codec fails on (priority 4) is popped all the same and
	// reported with its bytes, after the good ones.
	items, err := pq.PopMinBatch(ctx, db, 3)
	var ce *fdbqueue.CodecError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "not a number", string(ce.Raw))
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 10, Priority: 1}, {Value: 30, Priority: 3}}, items)
	items, err = pq.PopMinBatch(ctx, db, 1)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 50, Priority: 5}}, items)
	items, err = pq.PopMaxBatch(ctx, db, 5)
	require.NoError(t, err)
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 90, Priority: 9}}, items)
	empty, err = pq.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
	n, err = pq.Len(ctx, db)
	require.NoError(t, err)
	require.Zero(t, n)
	require.NoError(t, pq.Clear(ctx, db))
	require.Equal(t, pqRaw.Subspace(), pq.Subspace())
	_, err = pq.Recover(ctx, db)
	require.NoError(t, err)
	require.Zero(t, pq.StagingStats().Calls)
	require.NoError(t, pq.Reconfigure(ctx, db))
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		w, err := pq.WatchForItems(tr)
		if err == nil {
			w.Cancel()
		}
		return err
	}))
}
