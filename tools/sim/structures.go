package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// structure is one queue layer under test: how to run an operation on it,
// how to read its whole content, and its sequential model.
type structure interface {
	name() string
	prefix() []byte
	model(initial []Item) porcupine.Model
	// run performs in through t with the operation ID id, or, when id is
	// the zero OpID, without WithOpID, under an ID the layer makes (see
	// withID).
	run(ctx context.Context, t kv.Transactor, in Input, id fdbqueue.OpID) (Output, error)
	// observe reads the whole content in key order.
	observe(ctx context.Context, db kv.Database) ([]Item, error)
	// drain empties the structure through its API and returns what came out.
	drain(ctx context.Context, db kv.Database) ([]Item, error)
}

// withID is the options of an operation run with id: WithOpID(id), or
// none for the zero OpID, the harness's mark of an operation left to make
// its own ID. On a Database such an operation records in a journal slot of
// its Queue or PriorityQueue value (fdbqueue's journal.go, takeSlot), except
// a staged take, which records under its ID.
func withID(id fdbqueue.OpID) []fdbqueue.OpOption {
	if id == (fdbqueue.OpID{}) {
		return nil
	}
	return []fdbqueue.OpOption{fdbqueue.WithOpID(id)}
}

// decodeStored undoes the queue's value encoding.
func decodeStored(enc fdbqueue.ValueEncoding, stored []byte) ([]byte, error) {
	if enc != fdbqueue.TupleValues {
		return stored, nil
	}
	t, err := tuple.Unpack(stored)
	if err != nil || len(t) != 1 {
		return nil, fmt.Errorf("stored value %x is not a 1-tuple: %v", stored, err)
	}
	b, ok := t[0].([]byte)
	if !ok {
		return nil, fmt.Errorf("stored value %x holds a %T", stored, t[0])
	}
	return b, nil
}

func readAll(ctx context.Context, db kv.Database, sub fdbqueue.Subspace) ([]kv.KeyValue, error) {
	r, err := sub.Range()
	if err != nil {
		return nil, err
	}
	return kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
}

// fifo is a Queue under test.
type fifo struct {
	q   *fdbqueue.Queue
	enc fdbqueue.ValueEncoding
	// byPlace: the Queue is staged by place, whose failed takes may move
	// an item to the tail (FIFOPlaceModel).
	byPlace bool
}

func (f *fifo) prefix() []byte { return f.q.Subspace().Bytes() }
func (f *fifo) name() string   { return "queue" }
func (f *fifo) model(initial []Item) porcupine.Model {
	if f.byPlace {
		return FIFOPlaceModel(initial)
	}
	return FIFOModel(initial)
}

func (f *fifo) run(ctx context.Context, t kv.Transactor, in Input, id fdbqueue.OpID) (Output, error) {
	switch in.Kind {
	case Enqueue:
		return Output{}, f.q.Enqueue(ctx, t, encodeValue(f.enc, in.Item.ID), withID(id)...)
	case EnqueueBatch:
		ids := BatchIDs(in)
		vs := make([][]byte, len(ids))
		for i, x := range ids {
			vs[i] = encodeValue(f.enc, x)
		}
		return Output{}, f.q.EnqueueBatch(ctx, t, vs, withID(id)...)
	case Dequeue:
		var v []byte
		var err error
		if in.Wait {
			v, err = f.q.DequeueWait(ctx, t.(kv.Database), withID(id)...)
		} else {
			v, err = f.q.Dequeue(ctx, t, withID(id)...)
		}
		if err != nil {
			return Output{}, err
		}
		return itemsOut(f.enc, [][]byte{v})
	case DequeueBatch:
		vs, err := f.q.DequeueBatch(ctx, t, in.N, withID(id)...)
		if err != nil {
			return Output{}, err
		}
		return itemsOut(f.enc, vs)
	}
	return Output{}, fmt.Errorf("sim: a queue has no operation %v", in.Kind)
}

func itemsOut(enc fdbqueue.ValueEncoding, vs [][]byte) (Output, error) {
	out := Output{Items: make([]Item, len(vs))}
	for i, v := range vs {
		id, err := decodeValue(enc, v)
		if err != nil {
			return Output{}, err
		}
		out.Items[i] = Item{ID: id}
	}
	return out, nil
}

func (f *fifo) observe(ctx context.Context, db kv.Database) ([]Item, error) {
	kvs, err := readAll(ctx, db, f.q.Subspace())
	if err != nil {
		return nil, err
	}
	items := make([]Item, len(kvs))
	for i, p := range kvs {
		v, err := decodeStored(f.enc, p.Value)
		if err != nil {
			return nil, err
		}
		if items[i].ID, err = decodeValue(f.enc, v); err != nil {
			return nil, err
		}
	}
	return items, nil
}

func (f *fifo) drain(ctx context.Context, db kv.Database) ([]Item, error) {
	var out []Item
	for {
		vs, err := f.q.DequeueBatch(ctx, db, 64)
		if err != nil {
			if errors.Is(err, fdbqueue.ErrEmpty) {
				return out, nil
			}
			return out, err
		}
		o, err := itemsOut(f.enc, vs)
		if err != nil {
			return out, err
		}
		out = append(out, o.Items...)
	}
}

// prio is a PriorityQueue under test.
type prio struct {
	pq  *fdbqueue.PriorityQueue
	enc fdbqueue.ValueEncoding
}

func (p *prio) prefix() []byte                       { return p.pq.Subspace().Bytes() }
func (p *prio) name() string                         { return "priority queue" }
func (p *prio) model(initial []Item) porcupine.Model { return PriorityModel(initial) }

func (p *prio) run(ctx context.Context, t kv.Transactor, in Input, id fdbqueue.OpID) (Output, error) {
	var it fdbqueue.Item
	var err error
	switch in.Kind {
	case Push:
		return Output{}, p.pq.Push(ctx, t, encodeValue(p.enc, in.Item.ID), in.Item.Priority, withID(id)...)
	case PushBatch:
		items := batchItems(in)
		pis := make([]fdbqueue.PushItem, len(items))
		for i, x := range items {
			pis[i] = fdbqueue.PushItem{Value: encodeValue(p.enc, x.ID), Priority: x.Priority}
		}
		return Output{}, p.pq.PushBatch(ctx, t, pis, withID(id)...)
	case PopMin:
		if in.Wait {
			it, err = p.pq.PopMinWait(ctx, t.(kv.Database), withID(id)...)
		} else {
			it, err = p.pq.PopMin(ctx, t, withID(id)...)
		}
	case PopMax:
		if in.Wait {
			it, err = p.pq.PopMaxWait(ctx, t.(kv.Database), withID(id)...)
		} else {
			it, err = p.pq.PopMax(ctx, t, withID(id)...)
		}
	default:
		return Output{}, fmt.Errorf("sim: a priority queue has no operation %v", in.Kind)
	}
	if err != nil {
		return Output{}, err
	}
	x, err := decodeValue(p.enc, it.Value)
	if err != nil {
		return Output{}, err
	}
	return Output{Items: []Item{{ID: x, Priority: it.Priority}}}, nil
}

func (p *prio) observe(ctx context.Context, db kv.Database) ([]Item, error) {
	kvs, err := readAll(ctx, db, p.pq.Subspace())
	if err != nil {
		return nil, err
	}
	items := make([]Item, len(kvs))
	for i, kvp := range kvs {
		t, err := p.pq.Subspace().Unpack(kvp.Key)
		if err != nil {
			return nil, err
		}
		pr, ok := t[0].(int64)
		if len(t) != 3 || !ok {
			return nil, fmt.Errorf("key %x is not a priority queue item", kvp.Key)
		}
		v, err := decodeStored(p.enc, kvp.Value)
		if err != nil {
			return nil, err
		}
		id, err := decodeValue(p.enc, v)
		if err != nil {
			return nil, err
		}
		items[i] = Item{ID: id, Priority: pr}
	}
	return items, nil
}

func (p *prio) drain(ctx context.Context, db kv.Database) ([]Item, error) {
	var out []Item
	for {
		its, err := p.pq.PopMinBatch(ctx, db, 64)
		if err != nil {
			if errors.Is(err, fdbqueue.ErrEmpty) {
				return out, nil
			}
			return out, err
		}
		for _, it := range its {
			id, err := decodeValue(p.enc, it.Value)
			if err != nil {
				return out, err
			}
			out = append(out, Item{ID: id, Priority: it.Priority})
		}
	}
}
