package fdbqueue

import (
	"context"
	"errors"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TypedQueue is a Queue of values of type T, converted by a Codec. It adds
// nothing to the stored layout: a TypedQueue and a Queue on the same
// subspace see the same items.
type TypedQueue[T any] struct {
	q     *Queue
	codec Codec[T]
}

// NewTypedQueue wraps q with codec. Given a nil q or codec (a nil pointer
// of a codec type included), every operation of the result fails with
// ErrInvalidArgument, reading and writing nothing.
func NewTypedQueue[T any](q *Queue, codec Codec[T]) *TypedQueue[T] {
	return &TypedQueue[T]{q: q, codec: codec}
}

// check refuses a wrapper made with a nil queue or codec before anything is
// read or written: a nil codec met only once a dequeue had committed would
// lose the item.
func (tq *TypedQueue[T]) check() error {
	if tq == nil || tq.q == nil {
		return fmt.Errorf("%w: TypedQueue without a Queue", ErrInvalidArgument)
	}
	if nilCodec(tq.codec) {
		return fmt.Errorf("%w: TypedQueue without a codec", ErrInvalidArgument)
	}
	return nil
}

// nilCodec reports whether c is nil or a nil pointer (a `var c
// *JSONCodec[T]` passed as the Codec), whose Encode and Decode would
// dereference it: the typed wrappers refuse both alike, as
// checkTransactor refuses a nil *memdb.DB.
func nilCodec[T any](c Codec[T]) bool {
	return nilValue(c)
}

// Queue returns the underlying byte queue.
func (tq *TypedQueue[T]) Queue() *Queue {
	if tq == nil {
		return nil
	}
	return tq.q
}

// Enqueue encodes v and enqueues it; see Queue.Enqueue.
func (tq *TypedQueue[T]) Enqueue(ctx context.Context, t kv.Transactor, v T, opts ...OpOption) error {
	return tq.EnqueueBatch(ctx, t, []T{v}, opts...)
}

// EnqueueBatch encodes vs and enqueues them in one transaction; see
// Queue.EnqueueBatch. A value the codec fails to encode (or whose Encode
// panics) fails the call, before anything is written, with a *CodecError
// whose message gives its index in vs.
func (tq *TypedQueue[T]) EnqueueBatch(ctx context.Context, t kv.Transactor, vs []T, opts ...OpOption) error {
	if err := tq.check(); err != nil {
		return err
	}
	raw, err := encodeTyped(tq.codec, vs)
	if err != nil {
		return err
	}
	return tq.q.EnqueueBatch(ctx, t, raw, opts...)
}

// Dequeue dequeues and decodes the head item; see Queue.Dequeue. When the
// codec fails, the item has been dequeued all the same: its bytes are in the
// returned *CodecError.
func (tq *TypedQueue[T]) Dequeue(ctx context.Context, t kv.Transactor, opts ...OpOption) (T, error) {
	if err := tq.check(); err != nil {
		var zero T
		return zero, err
	}
	raw, err := tq.q.Dequeue(ctx, t, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeTyped(tq.codec, raw)
}

// DequeueWait dequeues and decodes the head item, waiting for one while
// the queue is empty, until ctx ends; see Queue.DequeueWait (it needs a
// queue made WithStaging). As with Dequeue, an item the codec fails on has
// been dequeued all the same: its bytes are in the returned *CodecError.
func (tq *TypedQueue[T]) DequeueWait(ctx context.Context, db kv.Database, opts ...OpOption) (T, error) {
	if err := tq.check(); err != nil {
		var zero T
		return zero, err
	}
	raw, err := tq.q.DequeueWait(ctx, db, opts...)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeTyped(tq.codec, raw)
}

// DequeueBatch dequeues up to max items and decodes them; see
// Queue.DequeueBatch. Items the codec fails on are dropped from the result
// and reported, with their bytes, in a *CodecError each after the others
// (joined with errors.Join when there are several; errors.As finds the
// first).
func (tq *TypedQueue[T]) DequeueBatch(ctx context.Context, t kv.Transactor, max int, opts ...OpOption) ([]T, error) {
	if err := tq.check(); err != nil {
		return nil, err
	}
	raws, err := tq.q.DequeueBatch(ctx, t, max, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(raws))
	var errs []error
	for _, r := range raws {
		v, err := decodeTyped(tq.codec, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, joinCodecErrors(errs)
}

// joinCodecErrors returns the *CodecError of each item of a batch its
// codec failed on: the one, or all of them joined (errors.Join), the
// first first, so that errors.As finds it and none of the dequeued
// items' bytes is lost.
func joinCodecErrors(errs []error) error {
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...)
}

// Peek returns the decoded head item without removing it.
func (tq *TypedQueue[T]) Peek(ctx context.Context, t kv.ReadTransactor) (T, error) {
	if err := tq.check(); err != nil {
		var zero T
		return zero, err
	}
	raw, err := tq.q.Peek(ctx, t)
	if err != nil {
		var zero T
		return zero, err
	}
	return decodeTyped(tq.codec, raw)
}

// TypedPriorityQueue is a PriorityQueue of values of type T.
type TypedPriorityQueue[T any] struct {
	pq    *PriorityQueue
	codec Codec[T]
}

// TypedItem is a decoded value with its priority.
type TypedItem[T any] struct {
	Value    T
	Priority int64
}

// NewTypedPriorityQueue wraps pq with codec. Given a nil pq or codec (a
// nil pointer of a codec type included), every operation of the result
// fails with ErrInvalidArgument, reading and writing nothing.
func NewTypedPriorityQueue[T any](pq *PriorityQueue, codec Codec[T]) *TypedPriorityQueue[T] {
	return &TypedPriorityQueue[T]{pq: pq, codec: codec}
}

// check is TypedQueue.check's.
func (tp *TypedPriorityQueue[T]) check() error {
	if tp == nil || tp.pq == nil {
		return fmt.Errorf("%w: TypedPriorityQueue without a PriorityQueue", ErrInvalidArgument)
	}
	if nilCodec(tp.codec) {
		return fmt.Errorf("%w: TypedPriorityQueue without a codec", ErrInvalidArgument)
	}
	return nil
}

// PriorityQueue returns the underlying byte priority queue.
func (tp *TypedPriorityQueue[T]) PriorityQueue() *PriorityQueue {
	if tp == nil {
		return nil
	}
	return tp.pq
}

// Push encodes v and pushes it with priority; see PriorityQueue.Push.
func (tp *TypedPriorityQueue[T]) Push(ctx context.Context, t kv.Transactor, v T, priority int64, opts ...OpOption) error {
	if err := tp.check(); err != nil {
		return err
	}
	raw, err := encodeValue(tp.codec, v)
	if err != nil {
		return &CodecError{Err: err, Priority: priority}
	}
	return tp.pq.Push(ctx, t, raw, priority, opts...)
}

// TypedPushItem is a value of type T to push with its priority: an
// element of a TypedPriorityQueue's PushBatch, with TypedItem's fields.
type TypedPushItem[T any] struct {
	Value    T
	Priority int64
}

// PushBatch encodes the items' values and pushes them in one transaction;
// see PriorityQueue.PushBatch. A value the codec fails to encode (or whose
// Encode panics) fails the call, before anything is written, with a
// *CodecError carrying the item's priority, its index in the message.
func (tp *TypedPriorityQueue[T]) PushBatch(ctx context.Context, t kv.Transactor, items []TypedPushItem[T], opts ...OpOption) error {
	if err := tp.check(); err != nil {
		return err
	}
	raw := make([]PushItem, len(items))
	for i, it := range items {
		b, err := encodeValue(tp.codec, it.Value)
		if err != nil {
			return &CodecError{Err: fmt.Errorf("item %d: %w", i, err), Priority: it.Priority}
		}
		raw[i] = PushItem{Value: b, Priority: it.Priority}
	}
	return tp.pq.PushBatch(ctx, t, raw, opts...)
}

// PopMin pops and decodes the smallest item; see PriorityQueue.PopMin.
// When the codec fails, the item has been popped all the same: its bytes
// and priority are in the returned *CodecError.
func (tp *TypedPriorityQueue[T]) PopMin(ctx context.Context, t kv.Transactor, opts ...OpOption) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PopMin(ctx, t, opts...))
}

// PopMax pops and decodes the largest item; see PriorityQueue.PopMax.
func (tp *TypedPriorityQueue[T]) PopMax(ctx context.Context, t kv.Transactor, opts ...OpOption) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PopMax(ctx, t, opts...))
}

// PopMinWait pops and decodes the smallest item, waiting for one while the
// priority queue is empty; see PriorityQueue.PopMinWait (it needs a
// priority queue made WithStaging).
func (tp *TypedPriorityQueue[T]) PopMinWait(ctx context.Context, db kv.Database, opts ...OpOption) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PopMinWait(ctx, db, opts...))
}

// PopMaxWait pops and decodes the largest item, waiting for one while the
// priority queue is empty; see PriorityQueue.PopMaxWait.
func (tp *TypedPriorityQueue[T]) PopMaxWait(ctx context.Context, db kv.Database, opts ...OpOption) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PopMaxWait(ctx, db, opts...))
}

// PeekMin decodes the smallest item without removing it.
func (tp *TypedPriorityQueue[T]) PeekMin(ctx context.Context, t kv.ReadTransactor) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PeekMin(ctx, t))
}

// PeekMax decodes the largest item without removing it.
func (tp *TypedPriorityQueue[T]) PeekMax(ctx context.Context, t kv.ReadTransactor) (TypedItem[T], error) {
	if err := tp.check(); err != nil {
		return TypedItem[T]{}, err
	}
	return tp.decodeItem(tp.pq.PeekMax(ctx, t))
}

func (tp *TypedPriorityQueue[T]) decodeItem(it Item, err error) (TypedItem[T], error) {
	if err != nil {
		return TypedItem[T]{}, err
	}
	v, err := decodeTyped(tp.codec, it.Value)
	if ce, ok := err.(*CodecError); ok {
		ce.Priority = it.Priority // a batch drops the item: its error keeps it whole
	}
	return TypedItem[T]{Value: v, Priority: it.Priority}, err
}

func encodeTyped[T any](c Codec[T], vs []T) ([][]byte, error) {
	raw := make([][]byte, len(vs))
	for i, v := range vs {
		b, err := encodeValue(c, v)
		if err != nil {
			return nil, &CodecError{Err: fmt.Errorf("item %d: %w", i, err)}
		}
		raw[i] = b
	}
	return raw, nil
}

// encodeValue is c.Encode(v), but for a panic, which fails like an error
// (codecPanicked): the write it was for writes nothing.
func encodeValue[T any](c Codec[T], v T) (b []byte, err error) {
	defer codecPanicked("Encode", &err)
	return c.Encode(v)
}

// decodeTyped decodes raw, which a take has removed: a Decode that panics
// fails like one that returns an error, so that the caller still gets the
// item's bytes in the *CodecError.
func decodeTyped[T any](c Codec[T], raw []byte) (T, error) {
	v, err := decodeValue(c, raw)
	if err != nil {
		var zero T
		return zero, &CodecError{Raw: raw, Err: err}
	}
	return v, nil
}

// decodeValue is c.Decode(raw), but for a panic, which fails like an error
// (codecPanicked).
func decodeValue[T any](c Codec[T], raw []byte) (v T, err error) {
	defer codecPanicked("Decode", &err)
	return c.Decode(raw)
}

// codecPanicked, deferred by a call of a codec's method (op), turns its
// panic into *err, an error that says so with the panic's value. The
// typed wrappers' encodes and decodes both go through it.
func codecPanicked(op string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s panicked: %v", op, r)
	}
}
