package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// PriorityQueue is a priority queue stored in a subspace, with the key
// layout of the FoundationDB recipe: each item at (priority, count, 20
// random bytes), where count is the last count used for that priority plus
// one (0 for the first), found with a snapshot read. The smallest item is
// the first key and the largest the last, so both ends are one range read
// away. Items of one priority come out in push order (pushes that commit
// concurrently may share a count and are then ordered randomly).
//
// It is safe for concurrent use and holds no connection. A nil or zero
// PriorityQueue (not made by NewPriorityQueue) fails every operation with
// ErrInvalidArgument, touching no database.
type PriorityQueue struct {
	layer
	stager             *stager
	stageMin, stageMax *stageSide[Item]  // staged pops (staging.go)
	ends               [2]queueEnd[Item] // end(false), end(true), made once
}

// Item is a value with its priority, as popped or peeked.
type Item struct {
	Value    []byte
	Priority int64
}

// NewPriorityQueue returns a priority queue stored in sub (which must have a
// non-empty prefix not too long for its journal keys, see NewQueue, nor,
// made WithoutIdempotency, for its item keys: at most 9,960 bytes, nor,
// WithStaging, for its staged request keys: at most 9,941 bytes; use it
// with one database, as a Queue). WithVersionstampOrder is rejected.
func NewPriorityQueue(sub Subspace, opts ...Option) (*PriorityQueue, error) {
	l, err := newLayer("priority queue", sub, opts)
	if err != nil {
		return nil, err
	}
	if l.cfg.versionstamps {
		return nil, fmt.Errorf("%w: a priority queue has no versionstamp order", ErrInvalidArgument)
	}
	pq := &PriorityQueue{layer: l}
	if err := pq.initStaging(); err != nil {
		return nil, err
	}
	pq.initConfig() // config.go
	pq.ends = [2]queueEnd[Item]{pq.end(false), pq.end(true)}
	return pq, nil
}

// Subspace returns the priority queue's subspace.
func (pq *PriorityQueue) Subspace() Subspace {
	if pq == nil {
		return Subspace{}
	}
	return pq.sub
}

// Push adds value with the given priority (any int64, MinInt64 and MaxInt64
// included).
//
// Conflicts: none with other pushers (the count is found with a snapshot
// read) nor with pops. Cost: one snapshot range read inside the priority
// and, on a retry, one journal point read, issued together, then three
// writes (the item, its journal record, a depth counter's atomic add). Under
// commit_unknown_result the item is pushed exactly once (see Enqueue).
func (pq *PriorityQueue) Push(ctx context.Context, t kv.Transactor, value []byte, priority int64, opts ...OpOption) error {
	if err := pq.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	stored, err := encodeOne(pq.cfg.encoding, 0, value)
	if err != nil {
		return err
	}
	c := newCall(callPush, &pq.layer, "push", "", t, opts)
	defer c.release()
	c.pq, c.priority = pq, priority
	pq.prioRange(c)
	c.store1[0] = stored
	c.stored = c.store1[:]
	err = c.run(ctx)
	c.op.end(err)
	return err
}

// pushAttempt is one attempt of a push in tr.
func (pq *PriorityQueue) pushAttempt(tr kv.Transaction, c *call) error {
	o := &c.op
	o.gate = pq.journal.gate.issueInto(&c.gate, tr, true, o.owned) // config.go
	rec, err := o.check(tr)
	if err != nil {
		return err
	}
	tail := tr.Snapshot().GetRange(c.prio, kv.RangeOptions{Limit: 1, Reverse: true})
	if _, done, err := o.applied(rec); err != nil || done {
		return waitRead(tail, err) // no read in flight at commit
	}
	last, err := firstKey(tail)
	if err != nil {
		return err
	}
	var count int64
	if last != nil {
		_, c, err := pq.parse(last)
		if err != nil {
			return err
		}
		// Past MaxInt64 the count would wrap to MinInt64, a key before
		// the priority's older items (only a key written by another
		// client can be that high).
		if c == math.MaxInt64 {
			return &ForeignKeyError{Key: bytes.Clone(last), Reason: "count 9223372036854775807 leaves no room for the next item in an int64"}
		}
		count = c + 1
	}
	// The key (priority, count, suffix), packed in the room prioRange left.
	key := appendPackedInt(appendPackedInt(append(c.room[:0], pq.sub.prefix...), c.priority), count)
	if key, err = pq.rand.appendSuffix(key); err != nil {
		return err
	}
	tr.Set(key, c.stored[0])
	o.record(tr)
	pq.stager.bump(tr)
	return nil
}

// prioRange sets c.prio to the range of the items of c.priority (the
// packed (priority,) under the prefix, then \x00; the same, then \xff,
// as Subspace.Range makes it) and c.room to room after it for the item
// key an attempt packs (prefix, priority, count, suffix). All of it is
// built in c.key when the call's transactions end before it is released
// (c.tracked, see call.itemKeys: a backend may keep a read's range until
// its transaction ends), else in one allocation of its own.
func (pq *PriorityQueue) prioRange(c *call) {
	prefix := pq.sub.prefix
	var b []byte
	if c.tracked {
		b = c.key[:0]
	}
	// Two bounds of prefix + at most 9 bytes + 1, a key of prefix + at
	// most 18 + the suffix.
	b = slices.Grow(b, 3*len(prefix)+2*10+18+suffixKeySize)
	c.prio, b = appendPriorityRange(b, prefix, c.priority)
	c.room = b[len(b):len(b)]
	if c.tracked {
		c.key = b
	}
}

// appendPriorityRange appends to b the bounds of the range of the items of
// priority p under prefix (the packed (p,) under the prefix, then \x00;
// the same, then \xff, as Subspace.Range makes it), and returns the range
// and the extended b. The bounds' capacities end at their lengths, so
// appending to either copies.
func appendPriorityRange(b, prefix []byte, p int64) (kv.KeyRange, []byte) {
	start := len(b)
	b = appendPackedInt(append(b, prefix...), p)
	n := len(b) - start
	b = append(b, 0x00)
	b = append(b, b[start:start+n]...)
	b = append(b, 0xff)
	end := start + 2*n + 2
	return kv.KeyRange{Begin: b[start : start+n+1 : start+n+1], End: b[start+n+1 : end : end]}, b
}

func (pq *PriorityQueue) parse(key []byte) (priority, count int64, err error) {
	if p, c, ok := parsePriorityFast(key, pq.sub.prefix); ok {
		return p, c, nil
	}
	t, err := pq.sub.Unpack(key)
	if err != nil {
		return 0, 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: err.Error()}
	}
	if len(t) != 3 {
		return 0, 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("tuple has %d elements, want (priority, count, random)", len(t))}
	}
	p, ok1 := t[0].(int64)
	c, ok2 := t[1].(int64)
	_, ok3 := t[2].([]byte)
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("elements are (%T, %T, %T), want (int64, int64, bytes)", t[0], t[1], t[2])}
	}
	return p, c, nil
}

// parsePriorityFast parses, without allocating, the common shape of an
// item key: prefix, two integers that unpack to int64s and a byte string
// ending the key. ok false for every other key: parse then unpacks it in
// full, and reports why a key is foreign.
func parsePriorityFast(key, prefix []byte) (priority, count int64, ok bool) {
	if !bytes.HasPrefix(key, prefix) {
		return 0, 0, false
	}
	priority, rest, ok := fastInt(key[len(prefix):])
	if !ok {
		return 0, 0, false
	}
	if count, ok := ownIndexed(rest); ok { // the shape pushAttempt gives
		return priority, count, true
	}
	count, rest, ok = fastInt(rest)
	return priority, count, ok && fastBytesEnd(rest)
}

// PopMin removes and returns the item with the smallest priority (the
// earliest pushed among equals), or ErrEmpty. Cost and guarantees are
// those of Queue.Dequeue, staged mode included. It reads the head with a
// normal read, so it conflicts with another pop of the item and, unlike a
// Dequeue, with a push of a smaller priority (its item lands ahead of the
// one read), but not with one of a priority at least as large.
func (pq *PriorityQueue) PopMin(ctx context.Context, t kv.Transactor, opts ...OpOption) (Item, error) {
	return pq.popOne(ctx, t, false, opts)
}

// PopMax removes and returns the item with the largest priority (the latest
// pushed among equals, as it is the last key), or ErrEmpty. It reads the
// tail with a reverse read, so it conflicts with a push of a priority at
// least as large.
func (pq *PriorityQueue) PopMax(ctx context.Context, t kv.Transactor, opts ...OpOption) (Item, error) {
	return pq.popOne(ctx, t, true, opts)
}

func (pq *PriorityQueue) popOne(ctx context.Context, t kv.Transactor, max bool, opts []OpOption) (Item, error) {
	if err := pq.usable(); err != nil {
		return Item{}, err
	}
	if db, ok := pq.staged(t); ok && !pq.journal.logged(opts) {
		return pq.side(max).run(ctx, db, false, opts)
	}
	items, c, err := pq.pop(ctx, t, 1, max, true, opts)
	if err != nil {
		return Item{}, err
	}
	it := items[0]
	c.release()
	return it, nil
}

// PopMinBatch removes up to n items from the smallest end, in order; see
// Queue.DequeueBatch for limits and conflicts (its read conflict, up to
// the last item taken, makes it conflict with a push of a smaller
// priority than that item's).
func (pq *PriorityQueue) PopMinBatch(ctx context.Context, t kv.Transactor, n int, opts ...OpOption) ([]Item, error) {
	return pq.popBatch(ctx, t, n, false, opts)
}

// PopMaxBatch removes up to n items from the largest end, largest first;
// see PopMinBatch (it conflicts with a push of a priority at least as
// large as the last item's it takes).
func (pq *PriorityQueue) PopMaxBatch(ctx context.Context, t kv.Transactor, n int, opts ...OpOption) ([]Item, error) {
	return pq.popBatch(ctx, t, n, true, opts)
}

func (pq *PriorityQueue) popBatch(ctx context.Context, t kv.Transactor, n int, max bool, opts []OpOption) ([]Item, error) {
	if err := pq.usable(); err != nil {
		return nil, err
	}
	items, c, err := pq.pop(ctx, t, n, max, false, opts)
	if err != nil {
		return nil, err
	}
	c.release()
	return items, nil
}

// pop is popBatch. On success the caller releases the call once it has
// the results: with keepOne, items is the call's own array.
func (pq *PriorityQueue) pop(ctx context.Context, t kv.Transactor, n int, max, keepOne bool, opts []OpOption) ([]Item, *call, error) {
	if err := checkTransactor(t); err != nil {
		return nil, nil, err
	}
	if n < 1 {
		return nil, nil, fmt.Errorf("%w: batch size %d, want at least 1", ErrInvalidArgument, n)
	}
	c := newCall(callPop, &pq.layer, "pop", popMark(max), t, opts)
	c.pq, c.reverse, c.keepOne = pq, max, keepOne
	c.lim = batchLimit{max: n, budget: pq.cfg.batchBudget}
	err := c.takeResult(c.run(ctx))
	c.op.end(err)
	if err != nil {
		c.release()
		return nil, nil, err
	}
	return c.items, c, nil
}

func (pq *PriorityQueue) end(max bool) queueEnd[Item] {
	return queueEnd[Item]{items: pq.items, reverse: max, accept: pq.accept, acceptInto: pq.acceptInto, replay: pq.replay, take: pq.take}
}

// take is accept without the journal record.
func (pq *PriorityQueue) take(p kv.KeyValue) (Item, error) {
	prio, _, err := pq.parse(p.Key)
	if err != nil {
		return Item{}, err
	}
	v, err := pq.cfg.encoding.decode(p.Value)
	return Item{Value: v, Priority: prio}, err
}

// accept turns a popped pair into its item and its journal record.
func (pq *PriorityQueue) accept(p kv.KeyValue) (Item, []byte, error) {
	return pq.acceptInto(p, nil)
}

// acceptInto is accept with the record appended to rec.
func (pq *PriorityQueue) acceptInto(p kv.KeyValue, rec []byte) (Item, []byte, error) {
	it, err := pq.take(p)
	if err != nil {
		return Item{}, nil, err
	}
	return it, appendPopRecord(rec, it.Priority, p.Value), nil
}

// popRecordTag starts a pop's journal record: the tag, the priority (8
// bytes, big-endian), then the stored value as it is, never escaped, so a
// record is only 9 bytes longer than the value (the journal splits it at
// the value limit). No packed tuple starts with it, which tells the
// records of earlier versions of this package, tuple(priority, stored
// value), apart.
const popRecordTag = 'P'

func encodePopRecord(prio int64, stored []byte) []byte { return appendPopRecord(nil, prio, stored) }

// appendPopRecord appends the record of a pop of stored at prio to dst.
func appendPopRecord(dst []byte, prio int64, stored []byte) []byte {
	dst = append(slices.Grow(dst, 9+len(stored)), popRecordTag)
	dst = binary.BigEndian.AppendUint64(dst, uint64(prio))
	return append(dst, stored...)
}

// replay turns a journal record back into the item it recorded.
func (pq *PriorityQueue) replay(rec []byte) (Item, error) {
	prio, stored, err := decodePopRecord(rec)
	if err != nil {
		return Item{}, err
	}
	v, err := pq.cfg.encoding.decode(stored)
	return Item{Value: v, Priority: prio}, err
}

func decodePopRecord(rec []byte) (int64, []byte, error) {
	if len(rec) >= 9 && rec[0] == popRecordTag {
		return int64(binary.BigEndian.Uint64(rec[1:9])), rec[9:], nil
	}
	t, err := tuple.Unpack(rec) // a record of an earlier version
	if err == nil && len(t) != 2 {
		err = fmt.Errorf("%d elements", len(t))
	}
	if err != nil {
		return 0, nil, fmt.Errorf("fdbqueue: corrupt journal record: %w", err)
	}
	prio, ok1 := t[0].(int64)
	stored, ok2 := t[1].([]byte)
	if !ok1 || !ok2 {
		return 0, nil, fmt.Errorf("fdbqueue: corrupt journal record: (%T, %T)", t[0], t[1])
	}
	return prio, stored, nil
}

// PeekMin returns the smallest item without removing it, or ErrEmpty: a
// normal read (limit 1), one round trip, as Queue.Peek.
func (pq *PriorityQueue) PeekMin(ctx context.Context, t kv.ReadTransactor) (Item, error) {
	return pq.peek(ctx, t, false)
}

// PeekMax returns the largest item without removing it, or ErrEmpty: a
// normal read (limit 1, in reverse), one round trip.
func (pq *PriorityQueue) PeekMax(ctx context.Context, t kv.ReadTransactor) (Item, error) {
	return pq.peek(ctx, t, true)
}

func (pq *PriorityQueue) peek(ctx context.Context, t kv.ReadTransactor, max bool) (Item, error) {
	if err := pq.usable(); err != nil {
		return Item{}, err
	}
	return peekEnd(ctx, pq.journal.gate.reads(t), pq.end(max)) // config.go
}

// Empty reports whether the priority queue holds no item.
func (pq *PriorityQueue) Empty(ctx context.Context, t kv.ReadTransactor) (bool, error) {
	if err := pq.usable(); err != nil {
		return false, err
	}
	return emptyRange(ctx, pq.journal.gate.reads(t), pq.items, nil)
}

// Len counts the items as Queue.Len does (see it for what it costs and
// means given a Database or a Transaction).
func (pq *PriorityQueue) Len(ctx context.Context, t kv.ReadTransactor) (int, error) {
	if err := pq.usable(); err != nil {
		return 0, err
	}
	return countRange(ctx, pq.journal.gate.reads(t), pq.items, pq.cfg.now)
}

// Clear removes every item, keeping the operation journal; conflicts,
// cost and behaviour under commit_unknown_result are Queue.Clear's.
func (pq *PriorityQueue) Clear(ctx context.Context, t kv.Transactor) error {
	if err := pq.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	t = pq.journal.track.observe("clear", t)
	return clearItems(ctx, t, pq.journal.gate, pq.items)
}
