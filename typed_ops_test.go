package fdbqueue_test

import (
	"context"
	"errors"
	"math"
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

// An item of a TypedPriorityQueue is its value and its priority. One its
// codec fails on has been popped all the same, so its *CodecError must
// give both: with only its bytes, the caller of a batch pop (which drops
// it from the result) could not put it back, or aside, at its priority.
func TestTypedPriorityQueueCodecErrorKeepsThePriority(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	raw := mustPQ(t, "typed-codec-priority")
	pq := fdbqueue.NewTypedPriorityQueue(raw, intCodec{})
	bad := map[string]int64{"bad-min": math.MinInt64, "bad-7": 7, "bad-max": math.MaxInt64, "bad-0": 0}
	for v, p := range bad {
		require.NoError(t, raw.Push(ctx, db, []byte(v), p))
	}
	require.NoError(t, pq.Push(ctx, db, 3, 3))
	got := map[string]int64{}
	note := func(err error) {
		t.Helper()
		var walk func(error)
		walk = func(e error) {
			if ce, ok := e.(*fdbqueue.CodecError); ok {
				got[string(ce.Raw)] = ce.Priority
				return
			}
			if u, ok := e.(interface{ Unwrap() []error }); ok {
				for _, x := range u.Unwrap() {
					walk(x)
				}
			}
		}
		require.ErrorIs(t, err, fdbqueue.ErrCodec)
		walk(err)
	}
	items, err := pq.PopMinBatch(ctx, db, 3) // bad-min, bad-0, 3
	note(err)
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 3, Priority: 3}}, items)
	it, err := pq.PopMax(ctx, db) // bad-max
	note(err)
	require.Equal(t, int64(math.MaxInt64), it.Priority)
	items, err = pq.PopMaxBatch(ctx, db, 3) // bad-7
	note(err)
	require.Empty(t, items)
	require.Equal(t, bad, got, "each undecodable item's bytes with its priority")

	var ce *fdbqueue.CodecError
	err = fdbqueue.NewTypedPriorityQueue(raw, failingEncode{}).Push(ctx, db, 1, 42)
	require.ErrorAs(t, err, &ce)
	require.Nil(t, ce.Raw, "nothing encoded")
	require.Equal(t, int64(42), ce.Priority)
}

// failingEncode is an int codec that encodes nothing.
type failingEncode struct{ intCodec }

func (failingEncode) Encode(int) ([]byte, error) { return nil, errors.New("no encoding") }
