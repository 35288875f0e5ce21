package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Queue is a FIFO queue stored in a subspace, with the key layout of the
// FoundationDB recipes: each item at (index, 20 random bytes), where index
// is the last index in use plus one, found by a snapshot read so that
// concurrent producers never conflict. Items enqueued concurrently may share
// an index; their random parts order them among themselves.
//
// A Queue holds no connection: its methods take the database or transaction
// to run in. It is safe for concurrent use. A Queue is made by NewQueue: a
// nil or zero Queue fails every operation with ErrInvalidArgument, touching
// no database.
type Queue struct {
	layer
	// userVer is, in versionstamp mode, the user version (the 2 bytes after
	// the commit's 10-byte versionstamp) of the next item: in [0, 65536].
	userVer atomic.Uint32
	stager  *stager
	stage   *stageSide[[]byte] // staged dequeue (staging.go)
	head    queueEnd[[]byte]   // end() with reserved, made once
}

// NewQueue returns a queue stored in sub. The subspace must have a non-empty
// prefix: the queue also keeps its operation journal just after the
// subspace's range (prefix + 0xff), outside what recipe clients read.
// A prefix too long for its journal keys (over 9,958 bytes), or, made
// WithoutIdempotency, for its item keys (over 9,969 bytes; 9,961 in
// versionstamp order), or, WithStaging, for its staged request keys (over
// 9,943 bytes) fails with ErrInvalidArgument and kv.ErrKeyTooLarge.
// Use a Queue with one database: it caches the queue's stored
// configuration by the database's metadata version, which two databases
// may share (say, when neither was ever bumped).
func NewQueue(sub Subspace, opts ...Option) (*Queue, error) {
	l, err := newLayer("queue", sub, opts)
	if err != nil {
		return nil, err
	}
	q := &Queue{layer: l}
	if err := q.initStaging(); err != nil {
		return nil, err
	}
	q.initConfig() // config.go
	q.head = q.end()
	q.head.reserved = q.reserved
	return q, nil
}

// Subspace returns the queue's subspace.
func (q *Queue) Subspace() Subspace {
	if q == nil {
		return Subspace{}
	}
	return q.sub
}

// Enqueue adds value at the tail of the queue.
//
// Conflicts: none with other producers (the tail is found with a snapshot
// read) nor with consumers. Cost: one snapshot range read (limit 1) and, on
// a retry, one journal point read, issued together (one round trip), then
// three writes (the item, its journal record and an atomic add to a depth
// counter, see Depth). In versionstamp mode the range read is skipped.
//
// Under commit_unknown_result the retry finds the journal record of the
// attempt that committed and does nothing, so the item is enqueued exactly
// once. An error for which kv.MaybeCommitted is true (the context ended
// during commit) leaves it unknown whether the item was enqueued: call
// Enqueue again under the same ID, which the error holds (an
// *UnknownResultError), to settle it (see WithOpID).
func (q *Queue) Enqueue(ctx context.Context, t kv.Transactor, value []byte, opts ...OpOption) error {
	return q.enqueue(ctx, t, value, nil, opts)
}

// EnqueueBatch adds values at the tail, in order, in one transaction: all or
// none are enqueued. A batch of several items whose transaction size,
// counted as FoundationDB counts it (see WithBatchBudget), exceeds the batch
// budget fails with ErrBatchTooLarge before anything is written (a single
// item is always accepted), and so does, in versionstamp mode, a batch of
// more than 65,536 items (the items of a commit are ordered by a 16-bit user
// version; split the batch). An item counts 3 × (prefix + 41 bytes) +
// value + 89 bytes, a versionstamped one prefix + 40 + value + 56 (its key
// at its longest, and FoundationDB's per-mutation and per-range structs).
// A value whose stored form (with TupleValues, the packed tuple: 2 bytes
// more, and 1 more per 0x00 byte) exceeds 100,000 bytes fails with
// ErrValueTooLarge. An empty batch does nothing. Conflicts, cost and
// guarantees are those of Enqueue, with one write per item.
//
// In versionstamp mode the items of one call keep their order; those of
// several calls in one transaction keep theirs too, except (rarely) across
// the point where the Queue value's user versions start again at 0, every
// 65,536 items: enqueue what must stay in order in one call. The counter
// is the Queue value's: calls through two Queue values of one subspace in
// one transaction interleave by their keys' random suffixes, not in call
// order (nothing is lost).
func (q *Queue) EnqueueBatch(ctx context.Context, t kv.Transactor, values [][]byte, opts ...OpOption) error {
	if len(values) == 0 {
		if err := q.usable(); err != nil {
			return err
		}
		return checkTransactor(t)
	}
	return q.enqueue(ctx, t, nil, values, opts)
}

// enqueue is EnqueueBatch of values, or of the one value when values is
// nil (Enqueue, without a slice to hold it).
func (q *Queue) enqueue(ctx context.Context, t kv.Transactor, value []byte, values [][]byte, opts []OpOption) error {
	if err := q.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	n := max(len(values), 1)
	var err error
	if values == nil {
		value, err = encodeOne(q.cfg.encoding, 0, value)
	} else {
		values, _, err = encodeAll(q.cfg.encoding, values)
	}
	if err != nil {
		return err
	}
	c := newCall(callEnqueue, &q.layer, "enqueue", "", t, opts)
	defer c.release()
	c.stored = values
	if values == nil {
		c.store1[0] = value
		c.stored = c.store1[:]
	}
	o := &c.op
	// The count first: a batch over it is refused whatever its size.
	if q.cfg.versionstamps && n > maxUserVersions {
		err := fmt.Errorf("%w: %d items, versionstamp mode allows %d per call", ErrBatchTooLarge, n, maxUserVersions)
		o.end(err) // hand back the clears newCall took over
		return err
	}
	// One item is always accepted, as a DequeueBatch always takes one: it
	// fits the room MaxBatchBudget leaves under the transaction limit.
	if n > 1 {
		if size := writeCost(o, q.items, c.stored, q.cfg.versionstamps); size > q.cfg.batchBudget {
			err := fmt.Errorf("%w: %d items, about %d bytes, budget %d", ErrBatchTooLarge, n, size, q.cfg.batchBudget)
			o.end(err) // hand back the clears newCall took over
			return err
		}
	}
	c.q = q
	err = c.run(ctx)
	o.end(err)
	return err
}

// enqueueAttempt is one attempt of an enqueue in tr.
func (q *Queue) enqueueAttempt(tr kv.Transaction, c *call) error {
	o := &c.op
	o.gate = q.journal.gate.issueInto(&c.gate, tr, true, o.owned) // config.go
	rec, err := o.check(tr)
	if err != nil {
		return err
	}
	var tail kv.RangeResult
	if !q.cfg.versionstamps {
		tail = tr.Snapshot().GetRange(q.items, kv.RangeOptions{Limit: 1, Reverse: true})
	}
	if _, done, err := o.applied(rec); err != nil || done {
		return waitRead(tail, err) // no read in flight at commit
	}
	if q.cfg.versionstamps {
		err = q.writeVersionstamped(tr, c.stored, c.itemKeys(true))
	} else {
		err = q.writeIndexed(tr, tail, c.stored, c.itemKeys(false))
	}
	if err != nil {
		return err
	}
	o.record(tr)
	q.stager.bump(tr)
	return nil
}

func encodeAll(enc ValueEncoding, values [][]byte) (stored [][]byte, size int, err error) {
	stored = make([][]byte, len(values))
	for i, v := range values {
		s, err := encodeOne(enc, i, v)
		if err != nil {
			return nil, 0, err
		}
		stored[i] = s
		size += len(s)
	}
	return stored, size, nil
}

// encodeOne encodes the i-th value of a batch and checks its stored size.
func encodeOne(enc ValueEncoding, i int, v []byte) ([]byte, error) {
	s, err := enc.encode(v)
	if err != nil {
		return nil, &CodecError{Err: err}
	}
	if len(s) > kv.MaxValueSize {
		if enc == TupleValues {
			return nil, fmt.Errorf("%w: item %d is %d bytes, %d stored as a packed tuple (TupleValues: 2 bytes more, and 1 more per 0x00 byte), limit %d (%w)",
				ErrValueTooLarge, i, len(v), len(s), kv.MaxValueSize, kv.ErrValueTooLarge)
		}
		return nil, valueTooLarge(i, len(s))
	}
	return s, nil
}

// writeIndexed writes stored at the tail: (last index + 1 + i, random).
// keys, if not nil, is memory to build each key in (see call.itemKeys),
// else each key gets an allocation of its own.
func (q *Queue) writeIndexed(tr kv.Transaction, tail kv.RangeResult, stored [][]byte, keys *[]byte) error {
	last, err := firstKey(tail)
	if err != nil {
		return err
	}
	var index int64
	if last != nil {
		if index, err = q.parseIndexed(last); err != nil {
			return err
		}
		// The next indices must fit an int64: past MaxInt64 they would
		// wrap to negative ones, keys before the head (only a key written
		// by another client can be that high).
		if index > math.MaxInt64-int64(len(stored)) {
			return &ForeignKeyError{Key: bytes.Clone(last), Reason: fmt.Sprintf("index %d leaves no room for %d more items in an int64", index, len(stored))}
		}
	}
	prefix := q.sub.prefix
	for i, s := range stored {
		// The key (index, suffix), packed in one allocation at most.
		var key []byte
		if keys != nil {
			key = (*keys)[:0]
		}
		key = slices.Grow(key, len(prefix)+9+suffixKeySize)
		key = appendPackedInt(append(key, prefix...), index+1+int64(i))
		if key, err = q.rand.appendSuffix(key); err != nil {
			return err
		}
		if keys != nil {
			*keys = key
		}
		tr.Set(key, s)
	}
	return nil
}

// writeVersionstamped writes stored (at most 65,536 values) at the tail in
// versionstamp mode. Items of one commit share its versionstamp and are
// ordered by their user versions: the values get a block of consecutive
// ones that does not wrap (reserveUserVersions), so they stay in order.
// Each key is built in the memory of the one before (no one keeps a key
// given to SetVersionstampedKey, see call.itemKeys): in keys, if not nil.
func (q *Queue) writeVersionstamped(tr kv.Transaction, stored [][]byte, keys *[]byte) error {
	first := q.reserveUserVersions(len(stored))
	var key []byte
	if keys != nil {
		key = *keys
	}
	for i, s := range stored {
		var err error
		key, err = appendVersionstampedKey(key[:0], q.sub.prefix, uint16(first+i), q.rand)
		if err != nil {
			return err
		}
		tr.SetVersionstampedKey(key, s)
	}
	if keys != nil {
		*keys = key
	}
	return nil
}

// appendVersionstampedKey appends to dst the key of a versionstamp-mode
// item, in one allocation at most: what
// tuple.Tuple{tuple.IncompleteVersionstamp(uv), suffix}.PackWithVersionstamp(prefix)
// returns for a random suffix: prefix, the incomplete versionstamp
// (code 0x33, ten 0xff bytes, uv big-endian), the suffix and the 4-byte
// little-endian offset of the ten bytes.
func appendVersionstampedKey(dst, prefix []byte, uv uint16, e *entropy) ([]byte, error) {
	dst = slices.Grow(dst, len(prefix)+13+suffixKeySize+4)
	dst = append(dst, prefix...)
	pos := len(dst) + 1
	dst = append(dst, 0x33, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	dst = binary.BigEndian.AppendUint16(dst, uv)
	dst, err := e.appendSuffix(dst)
	if err != nil {
		return nil, err
	}
	return binary.LittleEndian.AppendUint32(dst, uint32(pos)), nil
}

// waitRead waits for a range read (nil: none) the caller will not use, and
// returns err or else the read's error. On FoundationDB a range read is in
// flight from the GetRange call; Commit waits for it, and fails with its
// error if it failed (RYWImpl::commit awaits reading,
// fdbclient/ReadYourWrites.actor.cpp): waiting here reports that error at the
// operation, before anything else is written.
//
// It waits for the first batch only (Iterator, one Next): later batches are
// fetched only when asked for.
func waitRead(rr kv.RangeResult, err error) error {
	if rr == nil || err != nil {
		return err
	}
	it := rr.Iterator()
	it.Next()
	return it.Err()
}

// maxUserVersions is how many items one call can key in one commit in
// versionstamp mode: the user version has 16 bits.
const maxUserVersions = 1 << 16

// reserveUserVersions returns the first of n (at most maxUserVersions)
// consecutive user versions, starting again at 0 rather than wrapping past
// 65535 within the block. Blocks of different calls may restart at 0: two
// calls in one transaction keep their order only if no restart falls
// between them (one EnqueueBatch keeps it always).
func (q *Queue) reserveUserVersions(n int) int {
	for {
		cur := q.userVer.Load()
		first := cur
		if int(first)+n > maxUserVersions {
			first = 0
		}
		if q.userVer.CompareAndSwap(cur, first+uint32(n)) {
			return int(first)
		}
	}
}

// errAccessedUnreadable is FoundationDB's accessed_unreadable (1036).
var errAccessedUnreadable = kv.Error{Code: 1036}

// unreadable types the error of a read of a versionstamp-ordered queue in a
// transaction that enqueued to it (see ErrUnreadableAfterEnqueue).
func (q *Queue) unreadable(err error) error {
	if err != nil && q.cfg.versionstamps && errors.Is(err, errAccessedUnreadable) {
		return fmt.Errorf("%w: %w", ErrUnreadableAfterEnqueue, err)
	}
	return err
}

// firstKey returns the key of the first pair of a limit-1 range read, or nil.
func firstKey(rr kv.RangeResult) ([]byte, error) {
	kvs, err := rr.GetSlice()
	if err != nil || len(kvs) == 0 {
		return nil, err
	}
	return kvs[0].Key, nil
}

// parseIndexed checks that key is an item key of index mode and returns its
// index.
func (q *Queue) parseIndexed(key []byte) (int64, error) {
	if index, ok := parseIndexedFast(key, q.sub.prefix); ok {
		return index, nil
	}
	t, err := q.sub.Unpack(key)
	if err != nil {
		return 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: err.Error()}
	}
	if len(t) != 2 {
		return 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("tuple has %d elements, want (index, random)", len(t))}
	}
	index, ok := t[0].(int64)
	if !ok {
		return 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("first element is %T, want an integer index", t[0])}
	}
	if _, ok := t[1].([]byte); !ok {
		return 0, &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("second element is %T, want random bytes", t[1])}
	}
	return index, nil
}

// parseIndexedFast parses, without allocating, the common shape of an item
// key of index mode: prefix, an integer that unpacks to an int64 (minimally
// encoded, at most 8 bytes) and a byte string ending the key. It returns
// ok false for every other key, valid or not: parseIndexed then unpacks it
// in full, and reports why a key is foreign.
func parseIndexedFast(key, prefix []byte) (index int64, ok bool) {
	if !bytes.HasPrefix(key, prefix) {
		return 0, false
	}
	if index, ok := ownIndexed(key[len(prefix):]); ok {
		return index, true
	}
	index, rest, ok := fastInt(key[len(prefix):])
	return index, ok && fastBytesEnd(rest)
}

// ownIndexed parses the shape writeIndexed gives an item key after the
// prefix: a non-negative integer (minimally encoded, at most 8 bytes),
// then a suffix of suffixSize bytes none of them 0x00 (entropy.fill),
// packed as a byte string that ends the key. Its result is what fastInt
// and fastBytesEnd would give; ok false for every other key, which they
// then parse.
func ownIndexed(b []byte) (int64, bool) {
	if len(b) < 1+suffixKeySize || b[0] < 0x14 || b[0] > 0x1c {
		return 0, false
	}
	n := int(b[0]) - 0x14
	if len(b) != 1+n+suffixKeySize || b[1+n] != 0x01 || b[len(b)-1] != 0x00 || n > 0 && b[1] == 0x00 {
		return 0, false
	}
	s := b[2+n : 2+n+suffixSize]
	if hasZeroByte(binary.LittleEndian.Uint64(s)) || hasZeroByte(binary.LittleEndian.Uint64(s[8:])) ||
		hasZeroByte(uint64(binary.LittleEndian.Uint32(s[16:]))|0xffffffff_00000000) {
		return 0, false
	}
	var u uint64
	for _, c := range b[1 : 1+n] {
		u = u<<8 | uint64(c)
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// appendPackedInt appends v packed as a tuple's integer element, as
// tuple.Tuple{v}.AppendPack does (code 0x14 plus or minus the length, then
// the minimal big-endian bytes of v, or of its magnitude's ones'
// complement when negative), without the tuple package's type switch.
func appendPackedInt(dst []byte, v int64) []byte {
	u, code := uint64(v), 0x14
	if v < 0 {
		u = -u // the magnitude (1<<63 for MinInt64)
	}
	n := (bits.Len64(u) + 7) / 8
	if v < 0 {
		code -= n
		u = ^u
	} else {
		code += n
	}
	dst = append(dst, byte(code))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(u>>(8*i)))
	}
	return dst
}

// fastInt parses a packed tuple integer at the start of b that unpacks to
// an int64 (minimally encoded, at most 8 bytes) and returns it and what
// follows it; ok false for anything else (tuple.Unpack decides those).
func fastInt(b []byte) (v int64, rest []byte, ok bool) {
	if len(b) == 0 || b[0] < 0x0c || b[0] > 0x1c {
		return 0, nil, false
	}
	neg := b[0] < 0x14
	n := int(b[0]) - 0x14 // the integer's bytes
	if neg {
		n = -n
	}
	if len(b) < 1+n {
		return 0, nil, false
	}
	var u uint64
	for _, c := range b[1 : 1+n] {
		u = u<<8 | uint64(c)
	}
	if !neg {
		if (n > 0 && b[1] == 0x00) || u > math.MaxInt64 {
			return 0, nil, false
		}
		return int64(u), b[1+n:], true
	}
	// A negative integer's bytes are its magnitude's ones' complement.
	mag := ^u
	if n < 8 {
		mag &= 1<<(8*n) - 1
	}
	if (bits.Len64(mag)+7)/8 != n || mag > 1<<63 {
		return 0, nil, false
	}
	return -int64(mag), b[1+n:], true
}

// fastBytesEnd reports whether s is exactly one packed byte string.
func fastBytesEnd(s []byte) bool {
	if len(s) < 2 || s[0] != 0x01 {
		return false
	}
	// The byte string: 0x00 0xff is an escaped zero byte, a lone 0x00 its
	// end, which must be the key's last byte.
	for i := 1; i < len(s); i++ {
		z := bytes.IndexByte(s[i:], 0x00)
		if z < 0 {
			return false
		}
		i += z
		if i+1 < len(s) && s[i+1] == 0xff {
			i++
			continue
		}
		return i == len(s)-1
	}
	return false
}

// versionstampKeyFast reports, without allocating, whether key has the
// common shape of a versionstamp-mode item key: prefix, a versionstamp
// (code 0x33 and 12 bytes) and a byte string ending the key. False for
// every other key, valid or not: checkItemKey then unpacks it in full.
func versionstampKeyFast(key, prefix []byte) bool {
	if !bytes.HasPrefix(key, prefix) {
		return false
	}
	b := key[len(prefix):]
	return len(b) > 13 && b[0] == 0x33 && fastBytesEnd(b[13:])
}

// checkItemKey verifies that key has the layout this queue writes.
func (q *Queue) checkItemKey(key []byte) error {
	if !q.cfg.versionstamps {
		_, err := q.parseIndexed(key)
		return err
	}
	if versionstampKeyFast(key, q.sub.prefix) {
		return nil
	}
	t, err := q.sub.Unpack(key)
	if err != nil {
		return &ForeignKeyError{Key: bytes.Clone(key), Reason: err.Error()}
	}
	if len(t) != 2 {
		return &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("tuple has %d elements, want (versionstamp, random)", len(t))}
	}
	if _, ok := t[0].(tuple.Versionstamp); !ok {
		return &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("first element is %T, want a versionstamp", t[0])}
	}
	if _, ok := t[1].([]byte); !ok {
		return &ForeignKeyError{Key: bytes.Clone(key), Reason: fmt.Sprintf("second element is %T, want random bytes", t[1])}
	}
	return nil
}

// Dequeue removes the item at the head of the queue and returns it, or
// ErrEmpty.
//
// Conflicts: it reads the head with a normal read, so two consumers that
// dequeue at once conflict and one retries (see the staged dequeue for many
// consumers); it never conflicts with producers unless the queue holds a
// single index. Cost: one range read (limit 1) and, on a retry, one journal
// point read, issued together, then a clear, a journal record holding the
// item's value and an atomic add to a depth counter.
//
// Under commit_unknown_result the retry finds the journal record of the
// attempt that committed and returns the same item: nothing is lost or
// returned twice; a retry that finds no record and no item returns
// ErrEmpty, not maybe-committed (no attempt took one). If Dequeue fails with an error for which kv.MaybeCommitted
// is true, the item may have been removed; call Dequeue again with the same
// WithOpID within the journal retention to get it: your own ID, or the one
// in the *UnknownResultError, on the same Queue value (see WithOpID).
//
// A head key without this queue's layout fails with ErrForeignKey, and with
// TupleValues a stored value that is not a packed tuple fails with ErrCodec;
// in both cases nothing is removed.
//
// On a queue made WithStaging and given a Database, Dequeue is staged (see
// "Staged dequeue" in docs/design.md in the repository): one plain attempt, then a
// request in a line ordered by commit version, served oldest first, each
// with the next item (see StagingConfig.Serving): the waiter takes the item
// at its place itself, or the waiters of the two oldest requests hand items
// out in batches. On an empty queue it returns ErrEmpty, filing no request
// when its first look finds no item and else withdrawing the request it
// filed (served by place, also when every item is due to a request ahead
// of its own); it never waits (DequeueWait does).
//
// Given a Transaction, on a staged queue too, Dequeue is the plain dequeue
// inside it (staging needs transactions of its own), and it keeps the
// queue's order: in batches it takes the head, as any consumer that does
// not stage; served by place it takes only the first item after those due
// to the requests waiting in the line (a snapshot read of the line, a
// round trip before the head's), and ErrEmpty when there is none. A handle made without WithStaging does the
// same on a queue whose stored configuration says it is served by place.
// To wait for an item from inside a transaction, see WatchForItems.
//
// Under conflicts a staged Dequeue retries its steps itself; under
// commit_unknown_result its journal record settles whether a take applied,
// so it returns each item once. If ctx ends, it withdraws its request and
// returns an item already due or handed to it to the queue (by place to
// the tail, in batches to its original key), and returns ctx's error. It
// does the same, and fails with kv.ErrTransactionTimedOut, after 16 steps
// in a row whose commits timed out (a database's default transaction
// timeout shorter than a step). Its cleanup also returns the item of a
// take whose journal record it finds, even past the journal retention
// (the call then fails with ErrOperationExpired or ctx's error); past the
// retention with no record found while a take was in doubt (an expiry may
// have cleared it), the error also wraps ErrOperationExpired and
// kv.MaybeCommitted is true. In batches, a record equal to those of
// several takes in doubt (items with equal values) whose keys the cleanup
// cannot tell apart stays in the journal, and kv.MaybeCommitted is true:
// the error is an *UnknownResultError, and a call under its ID (the
// layer's own if the call had none) returns the item.
func (q *Queue) Dequeue(ctx context.Context, t kv.Transactor, opts ...OpOption) ([]byte, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	if db, ok := q.staged(t); ok && !q.journal.logged(opts) {
		return q.stage.run(ctx, db, false, opts)
	}
	vals, c, err := q.dequeue(ctx, t, 1, true, opts)
	if err != nil {
		return nil, err
	}
	v := vals[0]
	c.release()
	return v, nil
}

// DequeueBatch removes up to max items from the head, in order, in one
// transaction, and returns them; ErrEmpty when there are none. It takes
// fewer than max when their values would exceed the batch budget (it always
// takes at least one). max must be at least 1.
//
// Conflicts: the read conflict covers the head up to the last item taken,
// even when the queue held fewer than max items, so a batch dequeue does not
// conflict with producers appending after it. Cost: one range read and,
// on a retry, one journal point read, issued together (one round trip),
// then a clear per item taken, the journal record (for several items, one
// per item beside the journal slot's write; a later operation of the
// handle clears them) and an atomic add to a depth counter. Guarantees are
// Dequeue's.
//
// On a queue served by place (see StagingConfig.Serving), the items due to
// the requests waiting in the line are theirs: DequeueBatch first reads
// the line (a snapshot read of all of it, one round trip more), takes the
// items after those, with a read conflict on each item taken, and returns
// ErrEmpty when there are none (under an ID that an earlier call used, it
// writes a conflict over the line's items and commits it even then: see
// WithOpID).
func (q *Queue) DequeueBatch(ctx context.Context, t kv.Transactor, max int, opts ...OpOption) ([][]byte, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	vals, c, err := q.dequeue(ctx, t, max, false, opts)
	if err != nil {
		return nil, err
	}
	c.release()
	return vals, nil
}

// dequeue is DequeueBatch. On success the caller releases the call once it
// has the results: with keepOne, vals is the call's own array.
func (q *Queue) dequeue(ctx context.Context, t kv.Transactor, max int, keepOne bool, opts []OpOption) ([][]byte, *call, error) {
	if err := checkTransactor(t); err != nil {
		return nil, nil, err
	}
	if max < 1 {
		return nil, nil, fmt.Errorf("%w: batch size %d, want at least 1", ErrInvalidArgument, max)
	}
	c := newCall(callDequeue, &q.layer, "dequeue", "", t, opts)
	c.q, c.lim, c.keepOne = q, batchLimit{max: max, budget: q.cfg.batchBudget}, keepOne
	err := c.takeResult(c.run(ctx))
	c.op.end(err)
	if err != nil {
		c.release()
		return nil, nil, q.unreadable(err)
	}
	return c.vals, c, nil
}

// end is the queue's head, for takes (without the line's reservation:
// set reserved to skip the items due to it).
func (q *Queue) end() queueEnd[[]byte] {
	return queueEnd[[]byte]{items: q.items, accept: q.accept, replay: q.cfg.encoding.decode}
}

// accept turns a head pair into its item; the journal records the stored
// value.
func (q *Queue) accept(p kv.KeyValue) ([]byte, []byte, error) {
	if err := q.checkItemKey(p.Key); err != nil {
		return nil, nil, err
	}
	v, err := q.cfg.encoding.decode(p.Value)
	return v, p.Value, err
}

// Peek returns the item at the head without removing it, or ErrEmpty.
// It is a normal read (limit 1): inside a read-write transaction it
// conflicts with a concurrent Dequeue, as a reader of the head should.
//
// On a queue staged by place (see StagingConfig), the items due to the
// requests waiting in the line are not available: Peek returns the first
// item after them, the one a Dequeue inside a transaction would take,
// after a snapshot read of the line (one round trip more).
func (q *Queue) Peek(ctx context.Context, t kv.ReadTransactor) ([]byte, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	e := q.end()
	e.reserved = q.reserved
	v, err := peekEnd(ctx, q.journal.gate.reads(t), e) // config.go
	return v, q.unreadable(err)
}

// Empty reports whether the queue holds no item (a normal read, limit 1).
// On a queue staged by place it reports whether it holds no item beyond
// those due to the waiting requests, as Peek.
func (q *Queue) Empty(ctx context.Context, t kv.ReadTransactor) (bool, error) {
	if err := q.usable(); err != nil {
		return false, err
	}
	empty, err := emptyRange(ctx, q.journal.gate.reads(t), q.items, q.reserved)
	return empty, q.unreadable(err)
}

// Len counts the items: every key in the queue's range, foreign or not,
// including the items due to requests waiting in a staged queue's line.
// Its only read conflict, in a caller's transaction, is the stored
// configuration check's on the metadata version (see Depth).
//
// Given a Database, it counts in successive transactions, each a snapshot
// range read of at most LenChunk keys that stops early after about a
// second, each starting after the last key the one before counted; a
// chunk that is retried (after transaction_too_old, say) reads half as
// many keys, down to 1,000. The result is therefore not a point-in-time count: items enqueued
// or dequeued while Len runs may or may not be counted (with no concurrent
// change it is exact). Cost: every byte of the queue is read, values
// included (the kv interface, as FoundationDB's API, has no key-only range
// read), in about n/LenChunk transactions; on memdb, a 1,000,000-item
// queue took 1.9 s in 10 transactions (TestLenMillion,
// FDBQUEUE_LEN_MILLION=1).
//
// Given a Transaction (or a snapshot), it counts in that transaction, as of
// its read version, with one snapshot read of at most LenChunk keys; a
// queue holding more fails with ErrTooManyToCount, since one transaction
// cannot read a large queue within FoundationDB's 5 s.
func (q *Queue) Len(ctx context.Context, t kv.ReadTransactor) (int, error) {
	if err := q.usable(); err != nil {
		return 0, err
	}
	n, err := countRange(ctx, q.journal.gate.reads(t), q.items, q.cfg.now)
	return n, q.unreadable(err)
}

// LenChunk is the most keys Len reads in one transaction.
const LenChunk = 100_000

// lenChunkTime is how long Len reads in one transaction before it goes on
// in the next: well within FoundationDB's 5 s MVCC window.
const lenChunkTime = time.Second

func countRange(ctx context.Context, t kv.ReadTransactor, r kv.KeyRange, now func() time.Time) (int, error) {
	if err := checkTransactor(t); err != nil {
		return 0, err
	}
	db, ok := t.(kv.Database)
	if !ok {
		return kv.ReadTransact(ctx, t, func(tr kv.ReadTransaction) (int, error) {
			n, next, err := countChunk(tr, r, LenChunk+1, nil)
			if err == nil && next != nil {
				err = fmt.Errorf("%w: the queue holds more than %d keys", ErrTooManyToCount, LenChunk)
			}
			return n, err
		})
	}
	total, begin := 0, r.Begin
	for begin != nil {
		limit, tries := LenChunk, 0
		var n int
		var next []byte
		err := db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
			if tries++; tries > 1 {
				limit = max(limit/2, 1_000) // the last try ran out of time
			}
			var err error
			n, next, err = countChunk(tr, kv.KeyRange{Begin: begin, End: r.End}, limit, now)
			return err
		})
		if err != nil {
			return 0, err
		}
		total += n
		begin = next
	}
	return total, nil
}

// countChunk counts the keys of r, up to limit, with one snapshot read; it
// stops early once lenChunkTime has passed (now nil: never). next is where
// the count goes on, nil at the end of r.
func countChunk(tr kv.ReadTransaction, r kv.KeyRange, limit int, now func() time.Time) (n int, next []byte, err error) {
	var start time.Time
	if now != nil {
		start = now()
	}
	// WantAll: FDB fetches batches of 80 KB in 7.3 and 7.4, 120 KB later (the
	// SERIAL mode's byte limit, bindings/c/fdb_c.cpp), so a stop costs at
	// most one batch more.
	it := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: limit, Mode: kv.StreamingModeWantAll}).Iterator()
	var last []byte
	for it.Next() {
		n++
		last = it.KeyValue().Key
		if n == limit || (now != nil && n%1024 == 0 && now().Sub(start) >= lenChunkTime) {
			return n, append(bytes.Clone(last), 0x00), it.Err()
		}
	}
	return n, nil, it.Err()
}

// Clear removes every item (a range clear, a blind write: it conflicts
// with consumers that read the head, not with producers) and resets the
// depth counters (a second range clear). The operation journal is kept,
// so operations in flight stay exactly-once, and so is the stored
// configuration (see Reconfigure). It first checks the stored
// configuration, as every operation does, and fails with
// ErrConfigMismatch, clearing nothing, when the handle's options disagree
// (a Queue handle on a job queue's subspace would otherwise delete every
// job); it writes no record. Cost: the two range clears and one commit;
// no read but the stored configuration's (the metadata version, which
// comes with the read version, and after a change of the record one
// snapshot point read).
// Under commit_unknown_result it is retried and clears again: idempotent,
// except that items enqueued between the two attempts are removed too.
func (q *Queue) Clear(ctx context.Context, t kv.Transactor) error {
	if err := q.usable(); err != nil {
		return err
	}
	if err := checkTransactor(t); err != nil {
		return err
	}
	t = q.journal.track.observe("clear", t)
	return clearItems(ctx, t, q.journal.gate, q.items)
}

// clearItems clears items in t once the record agrees with the handle
// (a read-only check: it writes no record).
func clearItems(ctx context.Context, t kv.Transactor, g *confGate, items kv.KeyRange) error {
	_, own := t.(kv.Database)
	var gate gateRead
	return t.Transact(ctx, func(tr kv.Transaction) error {
		if err := g.issueInto(&gate, tr, false, own).settleRead(); err != nil { // config.go
			return err
		}
		tr.ClearRange(items)
		return nil
	})
}

// itemKeysFit fails, with ErrInvalidArgument and kv.ErrKeyTooLarge, for
// a prefix on which the longest item key of a queue of kind could exceed
// the key limit: a Queue's (index, suffix), the index packed in up to 9
// bytes; in versionstamp order (versionstamp, suffix), the versionstamp
// 13 bytes, counted with the 4-byte offset FoundationDB counts in a
// SetVersionstampedKey's key (ReadYourWritesTransaction::atomicOp,
// fdbclient/ReadYourWrites.actor.cpp); a PriorityQueue's (priority,
// count, suffix). The journal's keys are longer (journal.keysFit), so
// this refuses a prefix only made WithoutIdempotency, on which every
// Enqueue or Push failed with key_too_large.
func itemKeysFit(kind string, prefix []byte, cfg config) error {
	n := len(prefix) + 9 + suffixKeySize
	switch {
	case kind == "priority queue":
		n = len(prefix) + 9 + 9 + suffixKeySize
	case cfg.versionstamps:
		n = len(prefix) + 13 + suffixKeySize + 4
	}
	if n > kv.MaxKeySize {
		return fmt.Errorf("%w: the subspace prefix is too long: the %s's item keys take up to %d bytes, over the %d-byte key limit (%w)",
			ErrInvalidArgument, kind, n, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	return nil
}

// layer is what a Queue and a PriorityQueue share: where they live, their
// options, their operation journal and their source of random suffixes.
type layer struct {
	sub     Subspace
	items   kv.KeyRange
	cfg     config
	journal *journal
	rand    *entropy
}

func newLayer(kind string, sub Subspace, opts []Option) (layer, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return layer{}, err
	}
	if len(sub.prefix) == 0 {
		return layer{}, fmt.Errorf("%w: a %s needs a subspace with a non-empty prefix", ErrInvalidArgument, kind)
	}
	items, _ := sub.Range()
	j := newJournal(sub.prefix, cfg)
	if err := j.keysFit(); err != nil {
		return layer{}, err
	}
	if err := itemKeysFit(kind, sub.prefix, cfg); err != nil {
		return layer{}, err
	}
	j.track.countDepth(items)
	return layer{
		sub:     sub,
		items:   items,
		cfg:     cfg,
		journal: j,
		rand:    newEntropy(cfg.entropy),
	}, nil
}
