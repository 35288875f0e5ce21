package fdbqueue

import (
	"context"

	"go.opentelemetry.io/otel/metric"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Depth returns how many items the queue holds, from its depth counters;
// see Queue.Depth.
func (tq *TypedQueue[T]) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	if err := tq.check(); err != nil {
		return 0, err
	}
	return tq.q.Depth(ctx, t)
}

// RepairDepth recounts the items and sets the depth counters; see
// Queue.RepairDepth.
func (tq *TypedQueue[T]) RepairDepth(ctx context.Context, db kv.Database) (int64, error) {
	if err := tq.check(); err != nil {
		return 0, err
	}
	return tq.q.RepairDepth(ctx, db)
}

// RegisterGauges registers the queue's gauges; see Queue.RegisterGauges.
func (tq *TypedQueue[T]) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := tq.check(); err != nil {
		return nil, err
	}
	return tq.q.RegisterGauges(db)
}

// Depth returns how many items the priority queue holds, from its depth
// counters; see Queue.Depth.
func (tp *TypedPriorityQueue[T]) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	if err := tp.check(); err != nil {
		return 0, err
	}
	return tp.pq.Depth(ctx, t)
}

// RepairDepth recounts the items and sets the depth counters; see
// Queue.RepairDepth.
func (tp *TypedPriorityQueue[T]) RepairDepth(ctx context.Context, db kv.Database) (int64, error) {
	if err := tp.check(); err != nil {
		return 0, err
	}
	return tp.pq.RepairDepth(ctx, db)
}

// RegisterGauges registers the priority queue's gauge; see
// PriorityQueue.RegisterGauges.
func (tp *TypedPriorityQueue[T]) RegisterGauges(db kv.ReadTransactor) (metric.Registration, error) {
	if err := tp.check(); err != nil {
		return nil, err
	}
	return tp.pq.RegisterGauges(db)
}
