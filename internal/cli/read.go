package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// DepthSource tells how many items a queue holds: counterDepth (the
// layers' Depth: their depth counters, one small read whatever the depth),
// the default, or scanDepth (the layers' Len: a snapshot scan of every
// item, in transactions of up to 100,000 keys), which stats --scan
// chooses to check the counters of a queue that clients not maintaining
// them share.
type DepthSource interface {
	// Depth returns the number of items.
	Depth(ctx context.Context, t kv.ReadTransactor) (int64, error)
	// Method names how the depth is found, for stats' output.
	Method() string
}

type scanDepth struct {
	lenFn func(context.Context, kv.ReadTransactor) (int, error)
}

func (d scanDepth) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	n, err := d.lenFn(ctx, t)
	return int64(n), err
}

func (scanDepth) Method() string { return "scan" }

type counterDepth struct {
	depthFn func(context.Context, kv.ReadTransactor) (int64, error)
}

func (d counterDepth) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	return d.depthFn(ctx, t)
}

func (counterDepth) Method() string { return "counters" }

// entry is one item as list and peek show it: its place from the key (the
// documented layout, see docs/design.md) and its value.
type entry struct {
	Index        *int64 // indexed fifo: the key's index
	Versionstamp *tuple.Versionstamp
	Priority     *int64 // priority queue
	Count        *int64 // priority queue: order within the priority
	Value        []byte
	Foreign      string // not empty: the key or value is not a queue item's; why
	Key          []byte
}

// readEntries reads up to limit items (0: all) from the head (from the
// largest end with reverse) with snapshot reads, so it never conflicts with
// producers or consumers. Cost: one range read per pageSize items, each in
// its own transaction (a long listing is then not one consistent snapshot,
// but stays within FDB's five-second transaction limit).
//
// It reads the subspace's range through the documented key layout because
// the layers have no listing call. On a queue staged by place the first
// items may be due to waiting requests; they are listed too.
func (t *target) readEntries(ctx context.Context, db kv.ReadTransactor, limit int, reverse bool) ([]entry, error) {
	r, err := t.sub.Range()
	if err != nil {
		return nil, err
	}
	var out []entry
	err = pageRange(ctx, db, r, limit, reverse, func(p kv.KeyValue) {
		out = append(out, t.decode(p))
	})
	return out, err
}

// pageSize is the most keys one read transaction of pageRange reads (a
// variable so that tests can cross page boundaries with few keys). A page
// that is retried is read again smaller (see pageRange).
var pageSize = 10_000

// pageRange calls fn for up to limit (0: all) key-value pairs of r, in order
// (descending with reverse), reading pages of pageSize keys, each in its own
// read transaction with a snapshot read.
//
// A page that is retried is read again with half as many keys, and later
// pages keep that size: FDB fails a read more than 5 s after the
// transaction's read version with transaction_too_old (1007), which the
// retry loop retries, and it fetches a range in replies of at most 80,000
// bytes, so a page of large values can take longer than that every time,
// and would be retried forever at the same size.
func pageRange(ctx context.Context, db kv.ReadTransactor, r kv.KeyRange, limit int, reverse bool, fn func(kv.KeyValue)) error {
	cur := kv.KeyRange{Begin: bytes.Clone(r.Begin), End: bytes.Clone(r.End)}
	seen := 0
	size := pageSize
	for {
		var n int
		tries := 0
		page, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			if tries++; tries > 1 {
				size = max(size/2, 1) // the last try may have run out of time
			}
			n = size
			if limit > 0 {
				n = min(n, limit-seen)
			}
			return tr.Snapshot().GetRange(cur, kv.RangeOptions{Limit: n, Reverse: reverse, Mode: kv.StreamingModeWantAll}).GetSlice()
		})
		if err != nil {
			return err
		}
		for _, p := range page {
			fn(p)
		}
		seen += len(page)
		if len(page) < n || (limit > 0 && seen >= limit) {
			return nil
		}
		last := page[len(page)-1].Key
		if reverse {
			cur.End = bytes.Clone(last)
		} else {
			cur.Begin = append(bytes.Clone(last), 0x00)
		}
	}
}

// decode reads one key-value pair by the spec's layout and encoding.
func (t *target) decode(p kv.KeyValue) entry {
	e := entry{Key: bytes.Clone(p.Key)}
	tup, err := t.sub.Unpack(p.Key)
	if err != nil {
		e.Foreign = err.Error()
		e.Value = bytes.Clone(p.Value)
		return e
	}
	// The keys the layers' own parse takes for items (queue.go parseIndexed
	// and checkItemKey, priorityqueue.go parse): exactly these elements, of
	// these types.
	switch {
	case t.spec.Kind == Priority:
		pr, ok1 := elem[int64](tup, 0)
		c, ok2 := elem[int64](tup, 1)
		_, ok3 := elem[[]byte](tup, 2)
		if len(tup) != 3 || !ok1 || !ok2 || !ok3 {
			e.Foreign = fmt.Sprintf("key tuple %v is not (priority, count, random)", tup)
		} else {
			e.Priority, e.Count = &pr, &c
		}
	case t.spec.Layout == Versionstamp:
		vs, ok1 := elem[tuple.Versionstamp](tup, 0)
		_, ok2 := elem[[]byte](tup, 1)
		if len(tup) != 2 || !ok1 || !ok2 {
			e.Foreign = fmt.Sprintf("key tuple %v is not (versionstamp, random)", tup)
		} else {
			e.Versionstamp = &vs
		}
	default:
		i, ok1 := elem[int64](tup, 0)
		_, ok2 := elem[[]byte](tup, 1)
		if len(tup) != 2 || !ok1 || !ok2 {
			e.Foreign = fmt.Sprintf("key tuple %v is not (index, random)", tup)
		} else {
			e.Index = &i
		}
	}
	v, err := decodeValue(t.spec.Encoding, p.Value)
	if err != nil {
		if e.Foreign == "" {
			e.Foreign = err.Error()
		}
		v = bytes.Clone(p.Value)
	}
	e.Value = v
	return e
}

func elem[T any](t tuple.Tuple, i int) (T, bool) {
	var zero T
	if i >= len(t) {
		return zero, false
	}
	v, ok := t[i].(T)
	return v, ok
}

// decodeValue turns a stored value into the item's bytes as the layers do
// (fdbqueue.ValueEncoding's documentation): raw as is; tuple, a packed
// one-element tuple of bytes or a string.
func decodeValue(enc fdbqueue.ValueEncoding, stored []byte) ([]byte, error) {
	if enc != fdbqueue.TupleValues {
		return bytes.Clone(stored), nil
	}
	t, err := tuple.Unpack(stored)
	if err != nil {
		return nil, fmt.Errorf("value is not a packed tuple: %w", err)
	}
	if len(t) != 1 {
		return nil, fmt.Errorf("value tuple has %d elements, want 1", len(t))
	}
	switch v := t[0].(type) {
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	}
	return nil, fmt.Errorf("value tuple element is %T, want bytes or string", t[0])
}

// versionsPerSecond is how fast FoundationDB's versions advance: the knob
// VERSIONS_PER_SECOND, 1e6 (fdbclient/ClientKnobs.cpp, "Must be the same as
// SERVER_KNOBS->VERSIONS_PER_SECOND"). memdb advances its versions at the
// same rate (one per microsecond of its clock).
const versionsPerSecond = 1_000_000

// oldestAge estimates the age of the item at the head of a versionstamp-keyed
// queue: the distance between the transaction's read version and the
// commit version in the item's versionstamp, at versionsPerSecond. ok is
// false when the layout carries no time (indexed and priority keys) or the
// queue is empty. Cost: one read version and one range read of one key,
// snapshot.
func (t *target) oldestAge(ctx context.Context, db kv.ReadTransactor) (age time.Duration, ok bool, err error) {
	if t.spec.Kind != FIFO || t.spec.Layout != Versionstamp {
		return 0, false, nil
	}
	r, err := t.sub.Range()
	if err != nil {
		return 0, false, err
	}
	type res struct {
		rv   int64
		head []kv.KeyValue
	}
	got, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) (res, error) {
		head, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
		if err != nil {
			return res{}, err
		}
		rv, err := tr.GetReadVersion().Get()
		return res{rv: rv, head: head}, err
	})
	if err != nil || len(got.head) == 0 {
		return 0, false, err
	}
	e := t.decode(got.head[0])
	if e.Versionstamp == nil {
		return 0, false, nil
	}
	v := int64(binary.BigEndian.Uint64(e.Versionstamp.TransactionVersion[:8]))
	d := got.rv - v
	if d < 0 {
		d = 0
	}
	return time.Duration(d) * (time.Second / versionsPerSecond), true, nil
}

// rangeStats counts the keys in r and their bytes (keys and values), with
// pageRange.
func rangeStats(ctx context.Context, db kv.ReadTransactor, r kv.KeyRange) (keys, size int64, err error) {
	err = pageRange(ctx, db, r, 0, false, func(p kv.KeyValue) {
		keys++
		size += int64(len(p.Key) + len(p.Value))
	})
	return keys, size, err
}

// metaSub is the queue's meta subspace, prefix + 0xff, where the journal
// (("j", shard, op ID, n)) and the staged line (("s", side, ...)) live;
// the layout is documented in docs/design.md.
func (t *target) metaSub() fdbqueue.Subspace {
	return fdbqueue.SubspaceFromBytes(append(t.sub.Bytes(), 0xff))
}

// scanDepth returns the scanning depth source of the target's queue.
func (t *target) scanDepth() DepthSource {
	if t.pq != nil {
		return scanDepth{t.pq.Len}
	}
	return scanDepth{t.q.Len}
}
