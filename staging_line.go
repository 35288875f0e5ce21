package fdbqueue

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Staged dequeue: the high-contention mode of Queue.Dequeue and
// PriorityQueue.PopMin/PopMax, and the blocking forms DequeueWait,
// PopMinWait and PopMaxWait. This comment is the one place that says what
// each transaction of it keeps true; docs/design.md has the design and
// the costs.
//
// A plain dequeue reads the head and clears it, so consumers that dequeue at
// once all read the same key and only one commit per round succeeds. A
// staged consumer that cannot take the head at once files a request
// instead: requests form a line, served oldest first, each with the next
// item in queue order. Served by place (a versionstamp-ordered Queue only:
// stageSide.stable, staging_place.go) the request at place i in the line
// takes the item at place i in the queue itself; served in batches
// (staging_batch.go) the waiters of the two oldest requests hand items to
// the line. Histories are linearizable either way. The keys, in the
// queue's meta subspace (prefix + 0xff):
//
//	("s", side, "r", vstamp, rid) = deadline               request: waiting
//	("s", side, "f", rid)         = ("w",)                 marker: rid's request is waiting
//	("s", side, "f", rid)         = (deadline, key, value) result: the item handed to rid
//	("s", "sig")                  = counter                bumped by every staged enqueue
//
// side is "q" for a Queue, "min" or "max" for a PriorityQueue; vstamp is
// the versionstamp of the registration's commit and rid is 8 bytes of
// registration time and 12 random bytes.
//
// # Invariants
//
//   - State: a request is waiting (request key and marker present),
//     fulfilled (result present, request key gone) or finished (neither).
//   - Order: the line is in commit order: a request filed later stands
//     behind every request already there (its key is its commit's
//     versionstamp), and none is ever filed before the floor.
//   - Place (by place only): the i-th request of the line is due the i-th
//     item of the queue; consumers outside the line take after the items
//     due to it (Queue.reserved).
//   - Once: every item is in exactly one place: the queue, one result, or
//     the journal record of the call that took it.
//   - Conflicts: every transaction reads (normal read or explicit read
//     conflict key) each request, result and item it changes, so two
//     transactions that would change the same key conflict, and the loser
//     re-reads the new state.
//
// # Transactions, and the invariants each one keeps
//
// Every transition is one transaction:
//
//   - register (waiter, staging_register.go): writes the request key (a
//     versionstamped key) and the marker; its only reads are snapshot
//     reads of the line's first two and last requests, and of the head
//     unless the line is known to be long (by place it then reads
//     nothing: a blind write). Keeps Order (the versionstamp)
//     and State (key and marker together). In batch mode a waiter not
//     among the two oldest watches its own result key here (its own write:
//     no read conflict), then the request ahead in a read-only transaction
//     right after the commit (armLater), and sleeps. After a commit with
//     an unknown outcome, resolve reads the marker with a normal read, so
//     a commit still in flight conflicts.
//   - take (waiter, takeAt and takeItem): in batch mode only the oldest
//     waiter, which takes the head with a plain dequeue's conflict range.
//     By place any waiter whose place the items reach: it clears the item
//     at its place, its request and marker, and records the item in the
//     journal. Keeps Place (a request leaves with its own item) and Once
//     (clear and journal record in one commit).
//   - fulfil (a helper, one of the two oldest waiters, staging_batch.go):
//     reads the first BatchSize requests and as many items, matches them
//     oldest first, and for each pair clears both and writes the item,
//     with its key, to the request's result key; its own item it takes
//     directly. Keeps State (request key out, result in) and Once (the
//     item moves from the queue to one result). Waiters the items do not
//     reach sleep on watches.
//   - Watches: a watch reads its key with a normal read (FoundationDB's
//     RYWImpl::watch), so a step that writes arms none on a key it did not
//     write itself; it leaves it to a read-only transaction after its
//     commit (armLater), or to its next step.
//   - collect (a served waiter): clears the result key and records the
//     item in the journal. Keeps Once.
//   - withdraw (staging_withdraw.go: a waiter whose context ended, or a
//     Dequeue that found no item for it): clears the request key and
//     marker, or returns a fulfilled result's item (putBack: at its
//     original key in batch mode, at the tail by place). Keeps Place by
//     moving an item that reaches the request's place to the tail
//     (leavePlace, requeueAt), or, when none does, by a read conflict on
//     the whole item range; keeps Once (the item goes back in the same
//     commit that clears the result).
//   - expire (any step that reads requests, and Recover): clears requests
//     past their deadline with their markers and returns expired results'
//     items; by place it keeps Place as withdraw does (liveRequests).
//
// Every transition is idempotent by reading state, and the ones that hand
// an item to the caller (fast take, take, self-service, collect) are
// recorded in the journal, so commit_unknown_result never loses or
// duplicates an item.

// stager is what the staged sides of one queue share.
type stager struct {
	enabled bool
	cfg     StagingConfig
	now     func() time.Time
	rand    *entropy
	budget  int
	sig     []byte // the signal key
	stats   stagingCounters
	// hook, when set (only by tests, through export_test.go), is called at
	// named points of a staged operation.
	hook func(point string)
}

func newStager(queuePrefix []byte, cfg config, rand *entropy) *stager {
	sig, _ := metaSubspace(queuePrefix).Pack(tuple.Tuple{"s", "sig"})
	s := &stager{now: cfg.now, rand: rand, budget: cfg.batchBudget, sig: sig}
	if cfg.staging != nil {
		s.enabled, s.cfg = true, *cfg.staging
	}
	return s
}

var one64 = []byte{1, 0, 0, 0, 0, 0, 0, 0}

// bump wakes waiters blocked on an empty queue: an atomic add, which
// conflicts with nothing. It does nothing in plain mode.
func (s *stager) bump(tr kv.Transaction) {
	if s.enabled {
		tr.Add(s.sig, one64)
	}
}

func (s *stager) point(name string) {
	if s.hook != nil {
		s.hook(name)
	}
}

// The parts of a request ID (newRID).
const (
	ridTimeBytes = 8
	ridRandBytes = 12
)

// newRID returns a request ID: registration time (so that old results
// sort first) and random bytes.
func (s *stager) newRID(now time.Time) ([]byte, error) {
	r, err := s.rand.suffix()
	if err != nil {
		return nil, err
	}
	rid := make([]byte, ridTimeBytes+ridRandBytes)
	binary.BigEndian.PutUint64(rid, uint64(now.UnixMicro()))
	copy(rid[ridTimeBytes:], r[:ridRandBytes])
	return rid, nil
}

// longestRID is a request ID of the longest packed form newRID makes:
// every time byte 0x00 (a clock at the Unix epoch), each escaped to two
// bytes by the tuple encoding. The random bytes are never 0x00
// (entropy.fill), so never escaped.
func longestRID() []byte {
	rid := make([]byte, ridTimeBytes+ridRandBytes)
	for i := ridTimeBytes; i < len(rid); i++ {
		rid[i] = 1
	}
	return rid
}

// stageSide is one set of requests: a Queue's dequeues, or a
// PriorityQueue's PopMins or PopMaxes.
type stageSide[T any] struct {
	st      *stager
	journal *journal
	// queueEnd is the end of the items the requests are served from
	// (without reserved: the line is what reserves).
	queueEnd[T]
	reqs     Subspace
	ress     Subspace
	reqRange kv.KeyRange
	resRange kv.KeyRange
	// stable is set for a Queue served by place (its keys are in commit
	// order, so items are only ever added behind those present). The
	// i-th request of the line is due the i-th item, and every transition
	// keeps it so: a take removes a request with its item; a request that
	// leaves without its item moves that item to the tail (requeueAt), or,
	// if no item reaches it, conflicts with any item arriving; consumers
	// outside the line skip the items due to it (Queue.reserved). So every
	// waiter the items reach takes its own. Otherwise (serving in batches,
	// and always in a PriorityQueue) the oldest waiter takes the head and
	// the helpers serve the others in batches. In a PriorityQueue an
	// item pushed ahead would move the places, and a pop could return an
	// item while a more extreme one stays: only the oldest waiter takes
	// its own item (from the head, as a plain pop), and the helpers serve
	// the others in batches.
	stable bool
	// busy is set while takes find the line long: new calls then register
	// without looking at the head first.
	busy atomic.Bool
	// floor is the first request key some read found (nil: none yet).
	// Requests are keyed by their commit's versionstamp, so none can ever
	// appear before it again: reads of the line start there, not at the
	// start of the range, past the keys of requests already finished.
	floor atomic.Pointer[[]byte]
	// requeue writes a stored item at the tail, as an enqueue would, and
	// checkKey tells an item key from a foreign one (place mode only).
	requeue  func(tr kv.Transaction, stored []byte) error
	checkKey func(key []byte) error
	// mark is the journal kind of the side's takes (op.mark): a
	// PriorityQueue's sides tell PopMin from PopMax.
	mark string
}

func newStageSide[T any](st *stager, queuePrefix []byte, name string, j *journal, end queueEnd[T]) *stageSide[T] {
	meta := metaSubspace(queuePrefix)
	reqs, _ := meta.Sub("s", name, "r")
	ress, _ := meta.Sub("s", name, "f")
	reqRange, _ := reqs.Range()
	resRange, _ := ress.Range()
	return &stageSide[T]{st: st, journal: j, queueEnd: end, reqs: reqs, ress: ress,
		reqRange: reqRange, resRange: resRange}
}

func encodeDeadline(t time.Time) []byte {
	b, _ := tuple.Tuple{t.UnixMicro()}.Pack()
	return b
}

func decodeDeadline(v []byte) (time.Time, bool) {
	t, err := tuple.Unpack(v)
	if err != nil || len(t) < 1 {
		return time.Time{}, false
	}
	us, ok := t[0].(int64)
	return time.UnixMicro(us), ok
}

// resultTag starts a staged result: the tag, the claim deadline (Unix
// microseconds, 8 bytes big-endian), the item's key and stored value, each
// after its length (uvarint). The stored value is kept as it is, never
// escaped: a result is at most a key and a few bytes longer than the
// value, and is written in chunks (setChunked) when that passes the value
// limit. The lengths tell a whole result from a part of one. No packed
// tuple starts with the tag, which tells results of earlier versions of
// this package, tuple(deadline, key, stored value), apart.
const resultTag = 'R'

func encodeResult(deadline time.Time, key, stored []byte) []byte {
	b := make([]byte, 9, 9+2*binary.MaxVarintLen32+len(key)+len(stored))
	b[0] = resultTag
	binary.BigEndian.PutUint64(b[1:], uint64(deadline.UnixMicro()))
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.AppendUvarint(b, uint64(len(stored)))
	return append(b, stored...)
}

func decodeResult(v []byte) (deadline time.Time, key, stored []byte, err error) {
	if len(v) > 0 && v[0] == resultTag {
		return decodeTaggedResult(v)
	}
	t, err := tuple.Unpack(v) // a result of an earlier version
	if err == nil && len(t) != 3 {
		err = fmt.Errorf("%d elements, want 3", len(t))
	}
	if err != nil {
		return time.Time{}, nil, nil, fmt.Errorf("fdbqueue: corrupt staging result: %w", err)
	}
	us, ok1 := t[0].(int64)
	key, ok2 := t[1].([]byte)
	stored, ok3 := t[2].([]byte)
	if !ok1 || !ok2 || !ok3 {
		return time.Time{}, nil, nil, fmt.Errorf("fdbqueue: corrupt staging result: (%T, %T, %T)", t[0], t[1], t[2])
	}
	return time.UnixMicro(us), key, stored, nil
}

func decodeTaggedResult(v []byte) (deadline time.Time, key, stored []byte, err error) {
	bad := func(what string) (time.Time, []byte, []byte, error) {
		return time.Time{}, nil, nil, fmt.Errorf("fdbqueue: corrupt staging result: %s", what)
	}
	if len(v) < 9 {
		return bad("short header")
	}
	deadline = time.UnixMicro(int64(binary.BigEndian.Uint64(v[1:9])))
	rest := v[9:]
	field := func() ([]byte, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(len(rest)-w) {
			return nil, false
		}
		f := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		return f, true
	}
	var ok bool
	if key, ok = field(); !ok {
		return bad("key length")
	}
	if stored, ok = field(); !ok || len(rest) != 0 {
		return bad("value length") // also a part of a result (a read cut short)
	}
	return deadline, key, stored, nil
}

// parseReq returns a request key's request ID (and the index of a request
// filed by an earlier version of this package, which ordered requests by an
// index read at registration; 0 for a versionstamped one).
func (s *stageSide[T]) parseReq(key []byte) (int64, []byte, error) {
	t, err := s.reqs.Unpack(key)
	if err != nil {
		return 0, nil, err
	}
	if len(t) == 2 {
		rid, ok := t[1].([]byte)
		switch first := t[0].(type) {
		case tuple.Versionstamp:
			if ok && first.IsComplete() {
				return 0, rid, nil
			}
		case int64: // a request filed by an earlier version of this package
			if ok {
				return first, rid, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("%w: staging request %q", ErrMalformedKey, key)
}

// stampedReqKey returns the argument of the SetVersionstampedKey that
// files the request rid: the request key with an incomplete versionstamp,
// then the stamp's 4-byte offset.
func (s *stageSide[T]) stampedReqKey(rid []byte) ([]byte, error) {
	return tuple.Tuple{tuple.IncompleteVersionstamp(0), rid}.PackWithVersionstamp(s.reqs.prefix)
}

// longestKeys returns, for any request ID, the length of the longest
// argument of the registration's SetVersionstampedKey (FoundationDB checks
// it against the key limit with its 4-byte offset: key.size() >
// getMaxWriteKeySize in ReadYourWritesTransaction::atomicOp,
// fdbclient/ReadYourWrites.actor.cpp) and that of the longest result key
// with its chunk key (setChunked): a result, an item's key and stored
// value after a short header, takes at most two chunks. The other keys
// the staged dequeue writes or watches are no longer: the request key
// itself (renewed, watched), the result key (the marker, watched) and the
// signal key.
func (s *stageSide[T]) longestKeys() (req, res int) {
	rid := longestRID()
	k, _ := s.stampedReqKey(rid)
	result := 1 + 8 + uvarintLen(kv.MaxKeySize) + kv.MaxKeySize + uvarintLen(kv.MaxValueSize) + kv.MaxValueSize // encodeResult
	return len(k), len(s.resKey(rid)) + packedIntLen(int64((result-1)/kv.MaxValueSize))
}

// uvarintLen is the length of n encoded as a uvarint.
func uvarintLen(n uint64) int { return len(binary.AppendUvarint(nil, n)) }

// keysFit fails, with ErrInvalidArgument and kv.ErrKeyTooLarge, for a
// queue prefix so long that one of s's keys would exceed the key limit
// for some request ID: counted for the longest ID (every time byte
// escaped), so that whether a staged call works does not depend on the
// clock. (Without it, near the limit, a staged dequeue failed with
// key_too_large at one registration time and worked at the next.)
func (s *stageSide[T]) keysFit() error {
	req, res := s.longestKeys()
	if max(req, res) > kv.MaxKeySize {
		return fmt.Errorf("%w: the subspace prefix is too long for the staged dequeue: its request keys take up to %d bytes (a versionstamped key's 4-byte offset included) and its result keys up to %d, over the %d-byte key limit (%w); use a shorter prefix, or no WithStaging",
			ErrInvalidArgument, req, res, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	return nil
}

func (s *stageSide[T]) resKey(rid []byte) []byte {
	k, _ := s.ress.Pack(tuple.Tuple{rid})
	return k
}

// reqKeyOf returns the key of the request rid filed by the commit whose
// versionstamp is stamp.
func (s *stageSide[T]) reqKeyOf(stamp []byte, rid []byte) ([]byte, error) {
	if len(stamp) != 10 {
		return nil, fmt.Errorf("fdbqueue: staging: versionstamp of %d bytes", len(stamp))
	}
	return s.reqs.Pack(tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte(stamp)}, rid})
}

// markerValue is what a registration writes at its result key while its
// request waits: a plain value, so that the registration can watch the key
// in the same transaction (a watch compares with the transaction's own
// write; a versionstamped value would be unreadable to it). A waiter whose
// registration commit had an unknown outcome finds its request by its rid
// (findRequest).
var markerValue, _ = tuple.Tuple{"w"}.Pack()

// isMarker reports whether v is a registration marker (the request waits)
// rather than a result.
func isMarker(v []byte) bool {
	if bytes.Equal(v, markerValue) {
		return true
	}
	_, ok := decodeMarker(v)
	return ok
}

// decodeMarker returns the versionstamp held by a marker of an earlier
// version of this package, which wrote the registration's versionstamp at
// the result key; ok is false for anything else.
func decodeMarker(v []byte) (stamp []byte, ok bool) {
	t, err := tuple.Unpack(v)
	if err != nil || len(t) != 1 {
		return nil, false
	}
	vs, ok := t[0].(tuple.Versionstamp)
	if !ok || !vs.IsComplete() {
		return nil, false
	}
	return vs.TransactionVersion[:], true
}

// findRequest returns the key of the waiting request rid, whose marker v
// was read in tr (nil if it is not in the line). For a marker of an
// earlier version the key follows from the versionstamp in it; otherwise
// the line is scanned from its end (snapshot reads: the marker's read is
// the one that conflicts), where a request filed moments ago stands. It is
// only needed after a registration or cleanup whose outcome is unknown.
func (s *stageSide[T]) findRequest(tr kv.Transaction, v, rid []byte) ([]byte, error) {
	if stamp, ok := decodeMarker(v); ok {
		return s.reqKeyOf(stamp, rid)
	}
	r := s.reqRange
	for {
		kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: recoverBatch, Reverse: true, Mode: kv.StreamingModeWantAll}).GetSlice()
		if err != nil {
			return nil, err
		}
		for _, p := range kvs {
			if _, id, err := s.parseReq(p.Key); err == nil && bytes.Equal(id, rid) {
				return p.Key, nil
			}
		}
		if len(kvs) < recoverBatch {
			return nil, nil
		}
		r.End = kvs[len(kvs)-1].Key
	}
}

func inRange(r kv.KeyRange, key []byte) bool {
	return bytes.Compare(r.Begin, key) <= 0 && bytes.Compare(key, r.End) < 0
}

// liveRange is the part of the requests' range that can hold requests.
func (s *stageSide[T]) liveRange() kv.KeyRange {
	r := s.reqRange
	if f := s.floor.Load(); f != nil {
		r.Begin = *f
	}
	return r
}

// raiseFloor records the first key of a snapshot read of the line that
// started at the floor: no request before it existed then, and none can be
// filed there later.
func (s *stageSide[T]) raiseFloor(read []kv.KeyValue) {
	if len(read) == 0 {
		return
	}
	k := read[0].Key
	t, err := s.reqs.Unpack(k)
	if err != nil || len(t) == 0 {
		return
	}
	if _, ok := t[0].(tuple.Versionstamp); !ok {
		return // an earlier version's request: not in commit order
	}
	for {
		cur := s.floor.Load()
		if cur != nil && bytes.Compare(*cur, k) >= 0 {
			return
		}
		nk := bytes.Clone(k)
		if s.floor.CompareAndSwap(cur, &nk) {
			return
		}
	}
}
