package fdbqueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Lease calls on one JobQueue value steer clear of each other's picks
// (picking): with Choice > 1, a candidate that another call is taking, or
// took a moment ago, is tried last, since taking it too would conflict
// (a call whose snapshot predates that commit still sees the job there).
// Both are invisible to the API's results, which is why this is an
// internal test.

// A committed Lease remembers the keys it took; a failed attempt's picks
// are only released.
func TestPickingRemembersCommittedTakes(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	sub, err := NewSubspace(tuple.Tuple{"test", "picking"})
	require.NoError(t, err)
	q, err := NewJobQueue(sub, JobQueueConfig{Choice: 4})
	require.NoError(t, err)
	_, err = q.Add(ctx, db, Job{Value: []byte("j")})
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(q.items, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	require.Len(t, kvs, 1)
	require.Equal(t, []bool{false}, q.picking.busy(kvs), "nobody took the job yet")

	_, err = q.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, []bool{true}, q.picking.busy(kvs), "the key a committed Lease took is remembered")
	require.Empty(t, q.picking.keys, "and no longer being taken")

	var p picking
	p.add([]byte("k"))
	require.Equal(t, []bool{true}, p.busy([]kv.KeyValue{{Key: []byte("k")}}), "being taken")
	p.release([]string{"k"}, false)
	require.Equal(t, []bool{false}, p.busy([]kv.KeyValue{{Key: []byte("k")}}), "a failed attempt's pick is free again")
}

// takeOrder tries the busy candidates last, whatever the shuffle.
func TestTakeOrderPutsBusyCandidatesLast(t *testing.T) {
	sub, err := NewSubspace(tuple.Tuple{"test", "take-order"})
	require.NoError(t, err)
	q, err := NewJobQueue(sub, JobQueueConfig{Choice: 8})
	require.NoError(t, err)
	kvs := make([]kv.KeyValue, 8)
	for i := range kvs {
		kvs[i].Key = []byte{byte(i)}
	}
	busy := map[int]bool{0: true, 1: true, 5: true}
	for i := range busy {
		q.picking.add(kvs[i].Key)
	}
	for range 20 {
		order := q.takeOrder(kvs)
		require.ElementsMatch(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, order)
		for i, c := range order {
			require.Equal(t, i >= len(kvs)-len(busy), busy[c], "order %v: busy candidates last", order)
		}
	}
}
