package fdbqueue

import (
	"context"

	"github.com/fdbqueue/fdbqueue/kv"
)

// The typed wrappers' operations that need no codec: they are the
// untyped queue's, with the same costs, conflicts and errors.

// Subspace returns the queue's subspace (the zero Subspace for a
// TypedQueue made with a nil Queue).
func (tq *TypedQueue[T]) Subspace() Subspace {
	if tq == nil || tq.q == nil {
		return Subspace{}
	}
	return tq.q.Subspace()
}

// Empty reports whether the queue holds no item; see Queue.Empty.
func (tq *TypedQueue[T]) Empty(ctx context.Context, t kv.ReadTransactor) (bool, error) {
	if err := tq.check(); err != nil {
		return false, err
	}
	return tq.q.Empty(ctx, t)
}

// Len counts the items; see Queue.Len.
func (tq *TypedQueue[T]) Len(ctx context.Context, t kv.ReadTransactor) (int, error) {
	if err := tq.check(); err != nil {
		return 0, err
	}
	return tq.q.Len(ctx, t)
}

// Clear removes every item; see Queue.Clear.
func (tq *TypedQueue[T]) Clear(ctx context.Context, t kv.Transactor) error {
	if err := tq.check(); err != nil {
		return err
	}
	return tq.q.Clear(ctx, t)
}

// WatchForItems returns a watch that fires when an item may have arrived;
// see Queue.WatchForItems.
func (tq *TypedQueue[T]) WatchForItems(tr kv.Transaction) (kv.Watch, error) {
	if err := tq.check(); err != nil {
		return nil, err
	}
	return tq.q.WatchForItems(tr)
}

// Recover drops expired staging requests and returns stranded items; see
// Queue.Recover.
func (tq *TypedQueue[T]) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	if err := tq.check(); err != nil {
		return RecoverStats{}, err
	}
	return tq.q.Recover(ctx, db)
}

// StagingStats returns the counters of the staged dequeues; see
// Queue.StagingStats.
func (tq *TypedQueue[T]) StagingStats() StagingStats {
	if tq == nil || tq.q == nil {
		return StagingStats{}
	}
	return tq.q.StagingStats()
}

// Reconfigure stores the handle's options as the queue's configuration;
// see Queue.Reconfigure.
func (tq *TypedQueue[T]) Reconfigure(ctx context.Context, t kv.Transactor) error {
	if err := tq.check(); err != nil {
		return err
	}
	return tq.q.Reconfigure(ctx, t)
}

// Subspace returns the priority queue's subspace (the zero Subspace for a
// TypedPriorityQueue made with a nil PriorityQueue).
func (tp *TypedPriorityQueue[T]) Subspace() Subspace {
	if tp == nil || tp.pq == nil {
		return Subspace{}
	}
	return tp.pq.Subspace()
}

// PopMinBatch pops up to n of the smallest items, smallest first, and
// decodes them; see PriorityQueue.PopMinBatch. Items the codec fails on
// are dropped from the result and reported, with their bytes and
// priorities, in a *CodecError each after the others (see
// TypedQueue.DequeueBatch): they have been popped all the same.
func (tp *TypedPriorityQueue[T]) PopMinBatch(ctx context.Context, t kv.Transactor, n int, opts ...OpOption) ([]TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return nil, err
	}
	return tp.decodeItems(tp.pq.PopMinBatch(ctx, t, n, opts...))
}

// PopMaxBatch pops up to n of the largest items, largest first, and
// decodes them; see PopMinBatch.
func (tp *TypedPriorityQueue[T]) PopMaxBatch(ctx context.Context, t kv.Transactor, n int, opts ...OpOption) ([]TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return nil, err
	}
	return tp.decodeItems(tp.pq.PopMaxBatch(ctx, t, n, opts...))
}

func (tp *TypedPriorityQueue[T]) decodeItems(items []Item, err error) ([]TypedItem[T], error) {
	if err != nil {
		return nil, err
	}
	out := make([]TypedItem[T], 0, len(items))
	var errs []error
	for _, it := range items {
		ti, err := tp.decodeItem(it, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, ti)
	}
	return out, joinCodecErrors(errs)
}

// Empty reports whether the priority queue holds no item; see
// PriorityQueue.Empty.
func (tp *TypedPriorityQueue[T]) Empty(ctx context.Context, t kv.ReadTransactor) (bool, error) {
	if err := tp.check(); err != nil {
		return false, err
	}
	return tp.pq.Empty(ctx, t)
}

// Len counts the items; see PriorityQueue.Len.
func (tp *TypedPriorityQueue[T]) Len(ctx context.Context, t kv.ReadTransactor) (int, error) {
	if err := tp.check(); err != nil {
		return 0, err
	}
	return tp.pq.Len(ctx, t)
}

// Clear removes every item; see PriorityQueue.Clear.
func (tp *TypedPriorityQueue[T]) Clear(ctx context.Context, t kv.Transactor) error {
	if err := tp.check(); err != nil {
		return err
	}
	return tp.pq.Clear(ctx, t)
}

// WatchForItems returns a watch that fires when an item may have arrived;
// see Queue.WatchForItems.
func (tp *TypedPriorityQueue[T]) WatchForItems(tr kv.Transaction) (kv.Watch, error) {
	if err := tp.check(); err != nil {
		return nil, err
	}
	return tp.pq.WatchForItems(tr)
}

// Recover drops expired staging requests and returns stranded items; see
// PriorityQueue.Recover.
func (tp *TypedPriorityQueue[T]) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	if err := tp.check(); err != nil {
		return RecoverStats{}, err
	}
	return tp.pq.Recover(ctx, db)
}

// StagingStats returns the counters of the staged pops; see
// PriorityQueue.StagingStats.
func (tp *TypedPriorityQueue[T]) StagingStats() StagingStats {
	if tp == nil || tp.pq == nil {
		return StagingStats{}
	}
	return tp.pq.StagingStats()
}

// Reconfigure stores the handle's options as the priority queue's
// configuration; see Queue.Reconfigure.
func (tp *TypedPriorityQueue[T]) Reconfigure(ctx context.Context, t kv.Transactor) error {
	if err := tp.check(); err != nil {
		return err
	}
	return tp.pq.Reconfigure(ctx, t)
}
