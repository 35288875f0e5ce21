package queuetest

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
)

func priorityChecks() []check {
	var cs []check
	for _, e := range encodings {
		opts := []fdbqueue.Option{fdbqueue.WithValueEncoding(e.enc)}
		cs = append(cs,
			check{"PopMinOrder/" + e.name, func(t *testing.T, f *fixture) { testPopMinOrder(t, f, opts) }},
			check{"PopMaxOrder/" + e.name, func(t *testing.T, f *fixture) { testPopMaxOrder(t, f, opts) }},
			check{"Ties/" + e.name, func(t *testing.T, f *fixture) { testPriorityTies(t, f, opts) }},
			check{"PeekAndBatches/" + e.name, func(t *testing.T, f *fixture) { testPriorityPeekAndBatches(t, f, opts) }},
			check{"PushBatch/" + e.name, func(t *testing.T, f *fixture) { testPushBatch(t, f, opts) }},
		)
	}
	return cs
}

// priorities covers the int64 range's edges and the sign change.
var priorities = []int64{math.MaxInt64, 0, -1, math.MinInt64, 1, 1 << 40, -(1 << 40), math.MaxInt64 - 1, math.MinInt64 + 1, 255, 256, -256}

func pushAll(t *testing.T, f *fixture, pq *fdbqueue.PriorityQueue, ps []int64) {
	t.Helper()
	for _, p := range ps {
		require.NoError(t, pq.Push(f.ctx, f.db, fmt.Appendf(nil, "p%d", p), p), "Push at priority %d", p)
	}
}

func sortedPriorities(desc bool) []int64 {
	ps := append([]int64(nil), priorities...)
	for i := range ps {
		for j := i + 1; j < len(ps); j++ {
			if (ps[j] < ps[i]) != desc && ps[j] != ps[i] {
				ps[i], ps[j] = ps[j], ps[i]
			}
		}
	}
	return ps
}

func testPopMinOrder(t *testing.T, f *fixture, opts []fdbqueue.Option) {
	pq := f.pqueue(t, "min", opts...)
	pushAll(t, f, pq, priorities)
	for _, want := range sortedPriorities(false) {
		it, err := pq.PopMin(f.ctx, f.db)
		require.NoError(t, err)
		require.Equal(t, want, it.Priority, "PopMin returns the smallest priority first")
		requireValue(t, fmt.Appendf(nil, "p%d", want), it.Value)
	}
	_, err := pq.PopMin(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

func testPopMaxOrder(t *testing.T, f *fixture, opts []fdbqueue.Option) {
	pq := f.pqueue(t, "max", opts...)
	pushAll(t, f, pq, priorities)
	for _, want := range sortedPriorities(true) {
		it, err := pq.PopMax(f.ctx, f.db)
		require.NoError(t, err)
		require.Equal(t, want, it.Priority, "PopMax returns the largest priority first")
		requireValue(t, fmt.Appendf(nil, "p%d", want), it.Value)
	}
	_, err := pq.PopMax(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testPriorityTies: among equal priorities PopMin returns the earliest
// pushed and PopMax the latest pushed (the documented order: push order,
// the count breaks ties).
func testPriorityTies(t *testing.T, f *fixture, opts []fdbqueue.Option) {
	pq := f.pqueue(t, "ties", opts...)
	for i := range 6 {
		require.NoError(t, pq.Push(f.ctx, f.db, fmt.Appendf(nil, "t%d", i), 7))
	}
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("low"), 6))
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("high"), 8))
	it, err := pq.PopMax(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("high"), it.Value)
	it, err = pq.PopMin(f.ctx, f.db)
	require.NoError(t, err)
	requireValue(t, []byte("low"), it.Value)
	for _, w := range []struct {
		max  bool
		want string
	}{{false, "t0"}, {true, "t5"}, {false, "t1"}, {true, "t4"}, {false, "t2"}, {false, "t3"}} {
		pop, name := pq.PopMin, "PopMin"
		if w.max {
			pop, name = pq.PopMax, "PopMax"
		}
		it, err := pop(f.ctx, f.db)
		require.NoError(t, err)
		require.Equal(t, int64(7), it.Priority)
		requireValue(t, []byte(w.want), it.Value, "%s among equal priorities: PopMin takes the earliest pushed, PopMax the latest", name)
	}
	empty, err := pq.Empty(f.ctx, f.db)
	require.NoError(t, err)
	require.True(t, empty)
}

func testPriorityPeekAndBatches(t *testing.T, f *fixture, opts []fdbqueue.Option) {
	pq := f.pqueue(t, "peek", opts...)
	_, err := pq.PeekMin(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	_, err = pq.PeekMax(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	pushAll(t, f, pq, priorities)
	lo, err := pq.PeekMin(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, int64(math.MinInt64), lo.Priority)
	hi, err := pq.PeekMax(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, int64(math.MaxInt64), hi.Priority)
	n, err := pq.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, len(priorities), n, "Peek removes nothing")

	asc, desc := sortedPriorities(false), sortedPriorities(true)
	mins, err := pq.PopMinBatch(f.ctx, f.db, 3)
	require.NoError(t, err)
	maxs, err := pq.PopMaxBatch(f.ctx, f.db, 3)
	require.NoError(t, err)
	require.Len(t, mins, 3)
	require.Len(t, maxs, 3)
	for i := range 3 {
		require.Equal(t, asc[i], mins[i].Priority, "PopMinBatch is smallest first")
		require.Equal(t, desc[i], maxs[i].Priority, "PopMaxBatch is largest first")
	}
	rest, err := pq.PopMinBatch(f.ctx, f.db, 1000)
	require.NoError(t, err)
	require.Len(t, rest, len(priorities)-6)
	for i, it := range rest {
		require.Equal(t, asc[3+i], it.Priority)
	}
	_, err = pq.PopMaxBatch(f.ctx, f.db, 1)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// testPushBatch: PushBatch adds items of several priorities, the int64
// ends included, all or none in one transaction. Each priority's items
// come out in push order across batches and single Pushes (the batch's
// items of one priority take consecutive counts); a batch with a value
// over the limit writes nothing; an empty batch does nothing.
func testPushBatch(t *testing.T, f *fixture, opts []fdbqueue.Option) {
	pq := f.pqueue(t, "pushbatch", opts...)
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("s0"), 3))
	var batch []fdbqueue.PushItem
	for i, p := range priorities {
		batch = append(batch, fdbqueue.PushItem{Value: fmt.Appendf(nil, "b%02d", i), Priority: 3})
		batch = append(batch, fdbqueue.PushItem{Value: fmt.Appendf(nil, "p%d", p), Priority: p})
	}
	require.NoError(t, pq.PushBatch(f.ctx, f.db, batch), "PushBatch of %d items", len(batch))
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("s1"), 3))
	require.NoError(t, pq.PushBatch(f.ctx, f.db, nil), "an empty batch does nothing")
	over := make([]byte, 100_001)
	err := pq.PushBatch(f.ctx, f.db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 3}, {Value: over, Priority: 4}})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "a batch with a value over the limit")

	var want []string
	for _, p := range sortedPriorities(false) {
		if p < 3 {
			want = append(want, fmt.Sprintf("p%d@%d", p, p))
		}
	}
	want = append(want, "s0@3")
	for i := range priorities {
		want = append(want, fmt.Sprintf("b%02d@3", i))
	}
	want = append(want, "s1@3")
	for _, p := range sortedPriorities(false) {
		if p > 3 {
			want = append(want, fmt.Sprintf("p%d@%d", p, p))
		}
	}
	var got []string
	for _, it := range f.drainPQ(t, pq) {
		got = append(got, fmt.Sprintf("%s@%d", it.Value, it.Priority))
	}
	require.Equal(t, want, got, "PopMin order: by priority, then push order across batches and Pushes; nothing of the failed batch")
}
