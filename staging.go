package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Staged dequeue: the high-contention mode of Queue.Dequeue and
// PriorityQueue.PopMin/PopMax, and the blocking forms DequeueWait,
// PopMinWait and PopMaxWait.
//
// A plain dequeue reads the head and clears it, so consumers that dequeue at
// once all read the same key and only one commit per round succeeds. A
// staged consumer that cannot take the head at once files a request
// instead: requests form a line, served oldest first, each with the next
// item in queue order. Served by place (a versionstamp-ordered Queue only:
// stageSide.stable) the request at place i in the line takes the item at
// place i in the queue itself; served in batches the waiters of the two
// oldest requests hand items to the line. Histories are linearizable
// either way. The keys, in the queue's meta subspace (prefix + 0xff):
//
//	("s", side, "r", vstamp, rid) = deadline               request: waiting
//	("s", side, "f", rid)         = ("w",)                 marker: rid's request is waiting
//	("s", side, "f", rid)         = (deadline, key, value) result: the item handed to rid
//	("s", "sig")                  = counter                bumped by every staged enqueue
//
// side is "q" for a Queue, "min" or "max" for a PriorityQueue; vstamp is
// the versionstamp of the registration's commit (so the line is in commit
// order and a request filed later always stands behind) and rid is 8 bytes
// of registration time and 12 random bytes. A request is waiting (request
// key and marker present), fulfilled (result present) or finished
// (neither). Every transition is one transaction:
//
//   - register (waiter): write the request key (a versionstamped key)
//     and the marker; the waiter learns its key from the commit's
//     versionstamp. Its only reads are snapshot reads of the line's first
//     two and last requests (and, unless the line is known to be long, of
//     the head; by place, while the line is long, none at all): in batch
//     mode a waiter that is not among the two oldest arms its watches in
//     this transaction and sleeps from its commit on. After a
//     commit with an unknown outcome it reads the marker (resolve):
//     normal read, so a commit still in flight makes it conflict.
//   - take (waiter): in batch mode only the oldest waiter, which takes the
//     head with a plain dequeue's conflict range. By place (see
//     stageSide.stable) any waiter: read the requests ahead and the items
//     up to its place (snapshot), and if the items reach it, clear the
//     item at its place, its request and marker, and record the item in
//     the journal. The waiters ahead take the items ahead of it, or are
//     served.
//   - fulfil (a waiter of one of the two oldest requests, a "helper", that
//     just woke from a sleep, or the second oldest in batch mode): read
//     the first BatchSize requests and as many items, match them oldest
//     first, and for each pair clear both and write the item, with its
//     key, to the request's result key. A helper takes its own item
//     directly. Waiters the items do not reach sleep on watches: helpers
//     on their request and the signal key, the others on their request
//     and the request ahead of theirs.
//   - collect (waiter that was served): clear the result key and record
//     the item in the operation journal.
//   - withdraw (waiter whose context ended, or a Dequeue that found no item
//     for it): clear the request key and marker, or return a fulfilled
//     result's item (putBack: at its original key in batch mode, at the
//     tail by place). By place, an item that reaches the request's place
//     moves to the tail with it (leavePlace, requeueAt).
//   - expire (any step that reads requests, and Recover): clear requests
//     past their deadline with their markers (by place, with the item at
//     their place, see liveRequests), and return expired results' items.
//
// Each transaction reads, with normal reads or explicit read conflict keys,
// exactly the keys it changes, so two transactions that would both change
// one request, result or item conflict and one of them re-reads the new
// state: every transition is idempotent by reading state, and the ones that
// hand an item to the caller (fast take, take, self-service, collect) are
// recorded in the journal, so commit_unknown_result never loses or
// duplicates an item.

// StagingConfig configures the staged dequeue; see WithStaging. Zero fields
// take the defaults.
//
// Ordering: staged histories are linearizable, mixed with any other
// consumer made with the same staging configuration, in both serving
// modes (see StagingServing). What differs is where the item due to a
// call that fails (its context ends, or its waiter stops renewing its
// request and the claim timeout passes) goes back: to its original key in
// batch mode, to the tail in place mode. One exception in batch mode: in a
// Queue with the recipe's indexed keys an item enqueued while the queue
// looked empty can get a smaller key than one written back and overtake
// it; WithVersionstampOrder avoids that, see docs/reliability.md.
//
// Cost per item, busy: by place, two transactions (the registration: two
// writes, one versionstamped, snapshot reads of the first two and the last
// request; the take: snapshot reads of the line up to the request and of
// the items up to its place, then three clears and the journal record). In
// batches, about three: the registration, a share of a batch (per
// request: one request and one item read, two clears and a result write)
// and the collect (a point read; one clear and the journal record).
type StagingConfig struct {
	// BatchSize is the most requests one fulfilment transaction serves
	// (default DefaultStagingBatchSize, at most 10,000). Larger batches
	// serve more consumers per commit; each request costs the fulfiller
	// about three writes and one item read.
	BatchSize int
	// ClaimTimeout bounds how long a request or a fulfilled result may stay
	// unclaimed (default DefaultClaimTimeout). A live waiter renews its
	// request every ClaimTimeout/3; a request past its deadline is dropped,
	// and a result past its deadline has its item written back to the
	// queue, so a crashed waiter strands nothing for longer than this.
	// Clients' clocks must agree to well within it.
	ClaimTimeout time.Duration
	// CleanupTimeout bounds the transaction that withdraws a request after
	// the caller's context ended (default DefaultStagingCleanupTimeout). If
	// it fails, the claim timeout still returns everything to the queue.
	CleanupTimeout time.Duration
	// Serving chooses how waiting requests get their items (default
	// ServeAuto).
	Serving StagingServing
}

// StagingServing is how a staged queue hands items to the requests waiting
// in its line. Either way, requests are served in line order (the order
// of their registrations' commits), each with the next item in queue
// order, and histories are linearizable.
type StagingServing int

// Serving modes; see StagingServing.
const (
	// ServeAuto is ServeByPlace for a Queue made WithVersionstampOrder,
	// ServeInBatches otherwise (and always for a PriorityQueue).
	ServeAuto StagingServing = iota
	// ServeByPlace: the request at place i in the line is due the item at
	// place i in the queue, and its waiter takes that item itself, in its
	// own transaction, as soon as the items reach its place: two
	// transactions per busy call, no waiting for a batch, and waiters at
	// different places do not conflict. Consumers outside the line
	// (DequeueBatch, a Dequeue inside a transaction) take the items after
	// those due to the line, and Peek and Empty look there too. A request
	// that leaves the line without its item (its context ended, or it
	// expired) sends that item to the tail, since the requests behind may
	// already have taken the items after it: the history reads as if the
	// call had taken the item and enqueued it again.
	//
	// It needs a Queue made WithVersionstampOrder (ErrInvalidArgument
	// otherwise, and for a PriorityQueue): with the recipe's keys, two
	// producers can write the same index and the second commit can land
	// ahead of an item already due to a request. The queue's stored
	// configuration keeps its clients in step: a handle staged in batches
	// fails with ErrConfigMismatch, and one made without WithStaging takes
	// the items after those due to the line. A client that does not check
	// the configuration (another library) must not take from the queue.
	ServeByPlace
	// ServeInBatches: the waiters of the two oldest requests serve the
	// line in batches, each in one transaction that reads the head as a
	// plain dequeue does; the others sleep until served and then collect
	// their item, about three transactions per busy call. It works with
	// any key layout and with clients that do not stage.
	ServeInBatches
)

// String returns the mode's name.
func (m StagingServing) String() string {
	switch m {
	case ServeAuto:
		return "auto"
	case ServeByPlace:
		return "by place"
	case ServeInBatches:
		return "in batches"
	}
	return fmt.Sprintf("StagingServing(%d)", int(m))
}

// Defaults of StagingConfig.
const (
	DefaultStagingBatchSize      = 64
	DefaultClaimTimeout          = 30 * time.Second
	DefaultStagingCleanupTimeout = 5 * time.Second
)

const (
	maxStagingBatch = 10_000
	// resultScan is how many results a fulfilment checks for expiry.
	resultScan = 8
	// helpers is how many waiters, those of the oldest requests, run
	// fulfilments; the others wait to be served.
	helpers = 2
	// maxStepBackoff caps the backoff between failed steps.
	maxStepBackoff = 20 * time.Millisecond
	// recheckNoWait bounds how long a plain (non-Wait) staged Dequeue
	// sleeps before it checks again whether the items reach its request.
	recheckNoWait = 100 * time.Millisecond
	// recoverBatch is how many staging keys Recover examines per
	// transaction.
	recoverBatch = 256
)

// errStagingNeedsOption is returned by the Wait forms on a queue made
// without WithStaging.
var errStagingNeedsOption = fmt.Errorf("%w: the Wait forms need a queue made WithStaging", ErrInvalidArgument)

// fill applies the defaults and validates c.
func (c *StagingConfig) fill() error {
	if c.BatchSize == 0 {
		c.BatchSize = DefaultStagingBatchSize
	}
	if c.ClaimTimeout == 0 {
		c.ClaimTimeout = DefaultClaimTimeout
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultStagingCleanupTimeout
	}
	if c.BatchSize < 1 || c.BatchSize > maxStagingBatch {
		return fmt.Errorf("%w: staging batch size %d must be in [1, %d]", ErrInvalidArgument, c.BatchSize, maxStagingBatch)
	}
	if c.ClaimTimeout < time.Millisecond {
		return fmt.Errorf("%w: claim timeout %v must be at least 1ms", ErrInvalidArgument, c.ClaimTimeout)
	}
	if c.CleanupTimeout < 0 {
		return fmt.Errorf("%w: cleanup timeout %v must not be negative", ErrInvalidArgument, c.CleanupTimeout)
	}
	if c.Serving < ServeAuto || c.Serving > ServeInBatches {
		return fmt.Errorf("%w: unknown staging serving mode %d", ErrInvalidArgument, int(c.Serving))
	}
	return nil
}

// byPlace resolves c.Serving for a structure: versionstamps says its keys
// are in commit order (a Queue made WithVersionstampOrder).
func (c StagingConfig) byPlace(versionstamps bool) (bool, error) {
	switch c.Serving {
	case ServeByPlace:
		if !versionstamps {
			return false, fmt.Errorf("%w: serving by place needs a Queue made WithVersionstampOrder", ErrInvalidArgument)
		}
		return true, nil
	case ServeAuto:
		return versionstamps, nil
	}
	return false, nil
}

// RecoverStats reports what Recover did.
type RecoverStats struct {
	// DroppedRequests is the number of expired requests cleared (their
	// waiters had stopped renewing them).
	DroppedRequests int
	// ReturnedItems is the number of items returned to the queue: those of
	// expired results (at their original keys in batch mode, at the tail
	// by place) and, by place, those due to expired requests (to the
	// tail).
	ReturnedItems int
}

// Phases of a staged operation's steps (transactions), for StagingStats.
const (
	phaseRead     = iota // failed before it chose a transition
	phaseFast            // the one plain attempt: serve the few waiting, take the head
	phaseRegister        // file a request
	phaseTake            // take the item at the request's place (self-service)
	phaseFulfil          // serve other requests, and the own one if items reach it
	phaseCollect         // collect the item a fulfilment handed to the request
	phaseWait            // read the state, then sleep, renew or re-register
	phaseWithdraw        // withdraw the request: no item for it
	numPhases
)

var phaseNames = [numPhases]string{"read", "fast", "register", "take", "fulfil", "collect", "wait", "withdraw"}

// numBatchBuckets is the size of StagingStats.BatchSizes.
const numBatchBuckets = 8

// StagingStats counts what the staged operations of one Queue or
// PriorityQueue value did, since it was made: a diagnostic, to see where a
// staged dequeue spends its time. Each step of an operation is one
// transaction; its phase is the transition it chose.
type StagingStats struct {
	Calls    int64         // staged calls that returned
	Items    int64         // items they returned
	CallTime time.Duration // total time of those calls
	Phases   []StagingPhaseStats
	// Sleeps is how often a waiter slept on its watches, for SleepTime
	// in total.
	Sleeps    int64
	SleepTime time.Duration
	// Served is the number of other waiters' requests served by
	// fulfilments; BatchSizes[i] counts the fulfilments that served
	// between 2^i and 2^(i+1)-1 of them (the last bucket: more).
	Served     int64
	BatchSizes [numBatchBuckets]int64
}

// StagingPhaseStats counts the steps of one phase.
type StagingPhaseStats struct {
	Phase     string
	Commits   int64         // steps that committed (or needed no commit)
	Conflicts int64         // steps that failed with not_committed
	Failures  int64         // steps that failed otherwise
	Time      time.Duration // total time of the committed steps, reads and commit
}

type stagingCounters struct {
	calls, items, callNanos          atomic.Int64
	commits, conflicts, fails, nanos [numPhases]atomic.Int64
	sleeps, sleepNanos, served       atomic.Int64
	batches                          [numBatchBuckets]atomic.Int64
}

func (c *stagingCounters) batch(n int) {
	if n > 0 {
		c.served.Add(int64(n))
		c.batches[min(bits.Len(uint(n))-1, numBatchBuckets-1)].Add(1)
	}
}

func (c *stagingCounters) snapshot() StagingStats {
	st := StagingStats{
		Calls: c.calls.Load(), Items: c.items.Load(), CallTime: time.Duration(c.callNanos.Load()),
		Sleeps: c.sleeps.Load(), SleepTime: time.Duration(c.sleepNanos.Load()), Served: c.served.Load(),
	}
	for i := range numPhases {
		st.Phases = append(st.Phases, StagingPhaseStats{Phase: phaseNames[i], Commits: c.commits[i].Load(),
			Conflicts: c.conflicts[i].Load(), Failures: c.fails[i].Load(), Time: time.Duration(c.nanos[i].Load())})
	}
	for i := range st.BatchSizes {
		st.BatchSizes[i] = c.batches[i].Load()
	}
	return st
}

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

// newRID returns a request ID: registration time (so that old results
// sort first) and random bytes.
func (s *stager) newRID(now time.Time) ([]byte, error) {
	r, err := s.rand.suffix()
	if err != nil {
		return nil, err
	}
	rid := make([]byte, 20)
	binary.BigEndian.PutUint64(rid, uint64(now.UnixMicro()))
	copy(rid[8:], r[:12])
	return rid, nil
}

// stageSide is one set of requests: a Queue's dequeues, or a
// PriorityQueue's PopMins or PopMaxes.
type stageSide[T any] struct {
	st       *stager
	journal  *journal
	items    kv.KeyRange
	reverse  bool
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
	floor  atomic.Pointer[[]byte]
	accept func(kv.KeyValue) (T, []byte, error)
	replay func([]byte) (T, error)
	// requeue writes a stored item at the tail, as an enqueue would, and
	// checkKey tells an item key from a foreign one (place mode only).
	requeue  func(tr kv.Transaction, stored []byte) error
	checkKey func(key []byte) error
}

func newStageSide[T any](st *stager, queuePrefix []byte, name string, j *journal, items kv.KeyRange, reverse bool,
	accept func(kv.KeyValue) (T, []byte, error), replay func([]byte) (T, error)) *stageSide[T] {
	meta := metaSubspace(queuePrefix)
	reqs, _ := meta.Sub("s", name, "r")
	ress, _ := meta.Sub("s", name, "f")
	reqRange, _ := reqs.Range()
	resRange, _ := ress.Range()
	return &stageSide[T]{st: st, journal: j, items: items, reverse: reverse, reqs: reqs, ress: ress,
		reqRange: reqRange, resRange: resRange, accept: accept, replay: replay}
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

// giveBack writes an item back at its original key; keys outside the
// items' range (a corrupt result) are not written.
func (s *stageSide[T]) giveBack(tr kv.Transaction, key, stored []byte) bool {
	if !inRange(s.items, key) {
		return false
	}
	tr.Set(key, stored)
	return true
}

// putBack returns an item taken from the queue (handed to a request, or
// taken by a call that then failed) to it: in batch mode at its original
// key, where it was the head or close to it; in place mode at the tail,
// since the requests behind its own may already have taken the items after
// it (see stageSide.stable). Keys outside the items' range (a corrupt
// result) are not returned. It reports whether it wrote the item.
func (s *stageSide[T]) putBack(tr kv.Transaction, key, stored []byte) (bool, error) {
	if !s.stable {
		return s.giveBack(tr, key, stored), nil
	}
	if !inRange(s.items, key) {
		return false, nil
	}
	return true, s.requeue(tr, stored)
}

// requeueAt moves item it, the item at the place of a request that leaves
// the line without it (withdrawn or expired), from its key to the tail, in
// place mode: the requests behind keep their items, and the history reads
// as if the failed call had taken it and it had been enqueued again. The
// read conflict on its key makes anyone else taking it conflict.
//
// A key without the queue's layout (a foreign key) is left where it is:
// moving its value would make an item of it. It reports whether it moved
// the item.
func (s *stageSide[T]) requeueAt(tr kv.Transaction, it kv.KeyValue) (bool, error) {
	if s.checkKey != nil && s.checkKey(it.Key) != nil {
		return false, nil
	}
	if err := tr.AddReadConflictKey(it.Key); err != nil {
		return false, err
	}
	tr.Clear(it.Key)
	if err := s.requeue(tr, it.Value); err != nil {
		return false, err
	}
	s.st.bump(tr)
	return true, nil
}

// expireResults writes back the items of expired results among rs (a
// range read of results, chunks and all) except the one at skip, as many as fit sp,
// and reports how many. A result cut short by the read's limit is left alone.
func (s *stageSide[T]) expireResults(tr kv.Transaction, now time.Time, rs []kv.KeyValue, skip []byte, sp *spend) (int, error) {
	n := 0
	for _, r := range joinChunks(rs) {
		if bytes.Equal(r.Key, skip) {
			continue
		}
		d, key, stored, err := decodeResult(r.Value)
		if err != nil || now.Before(d) {
			continue // not ours to judge, or not expired
		}
		if cost := resultCost(r, s.items); n > 0 && !sp.fits(cost) {
			break // left for a later transaction
		} else {
			sp.used += cost
		}
		if err := tr.AddReadConflictRange(chunkRange(r.Key)); err != nil {
			return n, err
		}
		clearChunked(tr, r.Key)
		back, err := s.putBack(tr, key, stored)
		if err != nil {
			return n, err
		}
		if back {
			n++
		}
	}
	if n > 0 {
		s.st.bump(tr)
	}
	return n, nil
}

// waiter is one staged operation in flight.
type waiter[T any] struct {
	s      *stageSide[T]
	db     kv.Database
	o      *op
	userID bool
	wait   bool // block while the queue is empty (the Wait forms)

	// reqKey and resKey are the current request's keys; nil when none.
	// Between a registration's commit and its versionstamp, and after a
	// registration commit with an unknown outcome, only resKey is set.
	reqKey, resKey []byte
	rid            []byte
	stamp          kv.FutureVersionstamp // of the registration in flight
	fastDone       bool                  // the one plain attempt was made
	renewAt        time.Time
	// deadline is the deadline the registration wrote: renewals only
	// push it later, so until then nobody can have expired the request.
	deadline time.Time
	// withdrawing is set when a withdrawal was attempted: if its commit's
	// outcome was unknown, the request may be gone because of it.
	withdrawing bool

	// taken is the item a take attempt (fast take, self-service or
	// collect) removed, with the journal record it wrote: if the caller's
	// context ends while that commit's outcome is unknown, the cleanup
	// puts the item back.
	taken    *kv.KeyValue
	takenRec []byte

	// ahead is how many requests were ahead of this one at the last look
	// (an upper bound of its place now); woke is set after a sleep, until
	// a step commits.
	ahead int
	woke  bool
	// ownFired is set when the watch of the waiter's own request woke it:
	// the request was most likely served, and the next step reads only
	// the request and its result before it reads the line.
	ownFired bool

	watches   []kv.Watch
	watchFail time.Duration
	reads     stepReads // the current step's range reads
}

// outcome is what one step decided; it holds once the step's commit
// succeeded.
type outcome[T any] struct {
	done       bool
	val        T
	err        error // with done: the result to return (ErrEmpty)
	noCommit   bool  // done without writing: skip the commit
	phase      int   // the transition chosen, for the statistics
	served     int   // other requests served
	armed      bool  // sleep on the watches
	registered bool
	forget     bool // the in-doubt registration did not happen
}

// run performs one staged take: Dequeue (wait false) or DequeueWait.
func (s *stageSide[T]) run(ctx context.Context, db kv.Database, wait bool, opts []OpOption) (T, error) {
	var zero T
	if err := checkTransactor(db); err != nil {
		return zero, err
	}
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	var c opConfig
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	db = s.journal.track.observeDB(s.opKind(), db)
	w := &waiter[T]{s: s, db: db, o: s.journal.begin(db, opts), userID: c.hasID, wait: wait}
	// The transaction is bound to a context that ends with the operation,
	// so the backend can release it.
	opCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	val, err := w.loop(opCtx, ctx)
	w.cancelWatches()
	w.o.end(err)
	st := &s.st.stats
	st.calls.Add(1)
	st.callNanos.Add(int64(time.Since(start)))
	if err == nil {
		st.items.Add(1)
	}
	return val, err
}

// loop runs steps until the operation finishes. Each step is one
// transaction; a failed step is followed by a fresh one that re-reads the
// state (after a backoff when steps keep failing).
func (w *waiter[T]) loop(ctx, callerCtx context.Context) (T, error) {
	var zero T
	tr, err := w.db.CreateTransaction(ctx)
	if err != nil {
		return zero, err
	}
	stepOptions(tr)
	fails := 0
	stop := func(err error) error { return w.abandon(callerCtx, err) }
	for {
		if err := callerCtx.Err(); err != nil {
			return zero, w.abandon(callerCtx, err)
		}
		t0 := time.Now()
		out, err := w.attempt(tr)
		st := &w.s.st.stats
		w.s.journal.track.obs.stagedStep(out.phase, err)
		if err == nil {
			st.commits[out.phase].Add(1)
			st.nanos[out.phase].Add(int64(time.Since(t0)))
			st.batch(out.served)
			fails = 0
			w.woke = false
			if out.done {
				return out.val, out.err
			}
			if out.forget {
				w.resKey, w.rid = nil, nil
			}
			if out.registered {
				stamp, err := w.stamp.Get()
				if err == nil {
					w.reqKey, err = w.s.reqKeyOf(stamp, w.rid)
				}
				if err != nil {
					return zero, stop(err)
				}
				w.s.st.point("registered")
			}
			tr.Reset()
			stepOptions(tr)
			if out.armed {
				w.s.st.point("armed")
				if err := w.sleep(callerCtx); err != nil {
					return zero, stop(err)
				}
				w.woke = true
			}
			w.refreshOp()
			continue
		}
		if errors.Is(err, kv.ErrNotCommitted) {
			st.conflicts[out.phase].Add(1)
		} else {
			st.fails[out.phase].Add(1)
		}
		w.cancelWatches()
		w.s.st.point("failed")
		if callerCtx.Err() != nil || (!kv.IsRetryable(err) && !kv.MaybeCommitted(err)) {
			return zero, stop(err)
		}
		// The first failure after progress is retried at once: it was most
		// likely a fulfiller's conflict that served this request.
		if fails++; fails == 1 || !kv.IsRetryable(err) {
			tr.Reset()
			stepOptions(tr)
		} else if oerr := tr.OnError(err); oerr != nil {
			return zero, stop(oerr)
		}
	}
}

// stepOptions sets the options of a step's transaction. It runs when the
// transaction is created and after every Reset: FoundationDB's Reset clears
// a transaction's options (ReadYourWritesTransaction::reset in
// fdbclient/ReadYourWrites.actor.cpp keeps only the database's defaults),
// while OnError keeps them.
func stepOptions(tr kv.Transaction) {
	// A failed step usually means another waiter made progress: back off
	// briefly, not for up to a second.
	_ = tr.Options().SetMaxRetryDelay(maxStepBackoff)
}

func (w *waiter[T]) attempt(tr kv.Transaction) (outcome[T], error) {
	w.reads.held = w.reads.held[:0]
	gate := w.s.journal.gate.issueStep(tr, w.reqKey == nil && w.s.stable && w.s.busy.Load()) // config.go
	out, err := w.step(tr)
	if err == nil {
		err = gate.settle() // config.go: before the commit
	}
	if err != nil {
		return out, err
	}
	if out.noCommit {
		return out, nil
	}
	if err := w.reads.wait(); err != nil {
		return out, err
	}
	if out.done && out.err == nil {
		w.s.st.point("taking")
	}
	if out.registered {
		w.s.st.point("registering")
	}
	return out, tr.Commit()
}

func (w *waiter[T]) cancelWatches() {
	for _, wt := range w.watches {
		wt.Cancel()
	}
	w.watches = w.watches[:0]
}

// refreshOp replaces a random operation ID before it nears the journal
// retention, so that a long wait does not fail with ErrOperationExpired.
// Only while nothing was ever taken under it: then no record of it exists.
func (w *waiter[T]) refreshOp() {
	if w.userID || w.taken != nil || w.s.journal.disabled {
		return
	}
	if w.s.journal.now().Sub(w.o.id.Time()) < w.s.journal.retention/2 {
		return
	}
	w.o.end(errOpReplaced)
	w.o = w.s.journal.begin(w.db, nil)
}

var errOpReplaced = errors.New("fdbqueue: operation ID replaced")

// step reads the request's state and buffers the one transition it allows.
func (w *waiter[T]) step(tr kv.Transaction) (out outcome[T], err error) {
	w.cancelWatches() // of an earlier attempt that did not commit
	s := w.s
	// The journal can hold a record of this operation only if a take of
	// it was attempted, or if the caller chose its ID (an earlier call with
	// that ID may have taken): otherwise the read is skipped.
	var rec kv.RangeResult
	if w.userID || w.taken != nil {
		if rec, err = w.o.check(tr); err != nil {
			return out, err
		}
		rec = w.reads.hold(rec)
	}
	now := s.st.now()
	if w.reqKey == nil && w.resKey != nil {
		// The registration's commit had an unknown outcome.
		if prev, done, err := w.o.applied(rec); err != nil || done {
			return w.replayed(prev, err)
		}
		return w.resolve(tr)
	}
	if w.reqKey == nil && s.stable && s.busy.Load() && !w.fastDone && rec == nil {
		// By place, while the line is long: the registration has nothing
		// to decide (no plain attempt, no watch to arm), so it reads
		// nothing and is a blind write; the next step reads the line.
		return w.join(tr, now, nil, nil)
	}
	if w.reqKey == nil {
		// The last request in the line: a new request stands behind it,
		// and in batch mode its waiter sleeps from the registration on,
		// until that request leaves the line or its own is served.
		last := w.reads.hold(tr.Snapshot().GetRange(s.liveRange(), kv.RangeOptions{Limit: 1, Reverse: true, Mode: kv.StreamingModeExact}))
		// The first requests: fewer than two live ones means this caller
		// would be one of the two oldest waiters (a helper).
		first := w.reads.hold(tr.Snapshot().GetRange(s.liveRange(), kv.RangeOptions{Limit: helpers, Mode: kv.StreamingModeExact}))
		var head kv.RangeResult
		if !s.busy.Load() || w.fastDone {
			// The read that decides on the one plain attempt; skipped
			// while the line is long (the takes see it), where it would
			// only find items reserved for requests ahead.
			head = w.reads.hold(tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: helpers + 1, Reverse: s.reverse, Mode: kv.StreamingModeExact}))
		}
		if prev, done, err := w.o.applied(rec); err != nil || done {
			return w.replayed(prev, err)
		}
		firsts, err := first.GetSlice()
		if err != nil {
			return out, err
		}
		s.raiseFloor(firsts)
		ahead := s.liveAmong(firsts, now)
		if head == nil {
			return w.join(tr, now, last, ahead)
		}
		return w.fresh(tr, now, head, firsts, ahead, last)
	}
	reqF := tr.Get(w.reqKey)
	resF := getChunked(tr, w.resKey)
	// The requests ahead and the items that reach this request's place
	// are read now too, so that a step takes one round trip; a waiter
	// that only collects wastes them. The place only moves forward, so
	// the last one seen bounds how far to read.
	limit := min(max(s.st.cfg.BatchSize, w.ahead+1), maxStagingBatch)
	// A helper woken from its sleep may serve the requests behind its
	// own; any other waiter reads only up to its own.
	reqs := s.liveRange()
	if !w.woke && s.stable {
		reqs.End = append(bytes.Clone(w.reqKey), 0x00)
	}
	var pending kv.RangeResult
	var pre prefetched
	readLine := func() {
		pending = w.reads.hold(tr.Snapshot().GetRange(reqs, kv.RangeOptions{Limit: limit, Mode: kv.StreamingModeExact}))
		pre = s.prefetch(tr, limit, w.woke)
		pre.items, pre.results = w.reads.hold(pre.items), w.reads.hold(pre.results)
	}
	light := w.ownFired
	w.ownFired = false
	if !light {
		readLine()
	}
	if prev, done, err := w.o.applied(rec); err != nil || done {
		return w.replayed(prev, err)
	}
	reqV, err := reqF.Get()
	if err != nil {
		return out, err
	}
	resV, err := resF.Get()
	if err != nil {
		return out, err
	}
	marker := false
	if marker = isMarker(resV); marker {
		resV = nil // waiting
	}
	switch {
	case resV != nil:
		return w.collect(tr, resV)
	case reqV == nil:
		if w.withdrawing && now.Before(w.deadline.Add(-s.st.cfg.ClaimTimeout/3)) {
			// A withdrawal's commit had an unknown outcome, and it
			// applied: well before the request's deadline (clocks agree
			// to well within the claim timeout) nobody else can have
			// dropped it.
			out.phase = phaseWithdraw
			out.done, out.err, out.noCommit = true, ErrEmpty, true
			return out, nil
		}
		// Dropped, or its result reclaimed, after its deadline: this
		// waiter stalled for the claim timeout, and its item went back to
		// the queue (by place to the tail) while the call was running. The
		// call fails: going on with a new request and returning another
		// item would not be linearizable. (After a withdrawal whose commit
		// had an unknown outcome, this late, the call cannot tell its
		// withdrawal from an expiry, and fails the same way: it took
		// nothing either way.)
		out.phase = phaseWait
		if marker {
			tr.Clear(w.resKey)
		}
		s.st.point("lost")
		out.done, out.err = true, ErrClaimExpired
		return out, nil
	default:
		if light {
			readLine() // woken by its request, yet not served: a second round trip
		}
		return w.fulfil(tr, now, pending, pre)
	}
}

func (w *waiter[T]) replayed(prev [][]byte, err error) (out outcome[T], _ error) {
	if err != nil {
		return out, err
	}
	out.phase = phaseWait
	if out.val, err = w.s.replay(prev[0]); err != nil {
		return out, err
	}
	out.done, out.noCommit = true, true
	return out, nil
}

// fresh is the step of a waiter without a request: the one plain attempt,
// or registration. ahead are the live requests among the first few.
func (w *waiter[T]) fresh(tr kv.Transaction, now time.Time, head kv.RangeResult, firsts, ahead []kv.KeyValue, last kv.RangeResult) (out outcome[T], err error) {
	heads, err := head.GetSlice()
	if err != nil {
		return out, err
	}
	if len(heads) == 0 && !w.wait {
		out.phase = phaseWithdraw
		out.done, out.err, out.noCommit = true, ErrEmpty, true
		return out, nil
	}
	if !w.fastDone && len(ahead) < helpers && len(heads) > len(ahead) && !w.s.stable {
		// The one plain attempt of a PriorityQueue: serve the few waiting
		// requests and take the next item, in one transaction.
		w.fastDone = true
		out, err = w.serveAndTake(tr, now, ahead, heads[:len(ahead)+1])
		out.phase = phaseFast
		return out, err
	}
	// In place mode every request in the line holds a place, expired or
	// not, until a transaction drops it: the read must have seen the
	// whole line (fewer than its limit).
	if n := w.s.places(firsts); w.s.stable && !w.fastDone && len(firsts) < helpers && len(heads) > n {
		// The one plain attempt: take the item after those of the few
		// waiting requests (with nobody waiting, the head), which is
		// where a request filed now would stand.
		w.fastDone = true
		out, err = w.takeItem(tr, heads[n], n == 0)
		out.phase = phaseFast
		return out, err
	}
	// File a request; the next steps take the head (the oldest waiter),
	// serve the line (the two oldest), take the item at its place
	// (by place, if the items reach it), or sleep until served.
	return w.join(tr, now, last, ahead)
}

// liveAmong returns the requests among reqs whose deadline has not passed.
func (s *stageSide[T]) liveAmong(reqs []kv.KeyValue, now time.Time) []kv.KeyValue {
	var live []kv.KeyValue
	for _, r := range reqs {
		if d, ok := decodeDeadline(r.Value); ok && now.Before(d) {
			live = append(live, r)
		}
	}
	return live
}

// join files a request. ahead are the live requests among the first few,
// and last the read of the last request in the line (nil: not read). In
// batch mode a waiter that is not among the two oldest cannot do anything
// for its request but wait: the registration arms its watches, on its result key (a
// fulfilment writes it, an expiry clears it) and on the last request ahead
// (when that one leaves the line, this one may have become one of the two
// oldest), so that it sleeps from the commit on, one transaction sooner
// than a separate read-and-arm step. Any other waiter runs its next step
// at once.
func (w *waiter[T]) join(tr kv.Transaction, now time.Time, last kv.RangeResult, ahead []kv.KeyValue) (out outcome[T], err error) {
	out.phase = phaseRegister
	w.fastDone = true
	var lasts []kv.KeyValue
	if last != nil {
		if lasts, err = last.GetSlice(); err != nil {
			return out, err
		}
	}
	// The writes come after the reads have returned: on FoundationDB a
	// range read over the line after the versionstamped write into it
	// would be unreadable.
	if err := w.register(tr, now); err != nil {
		return out, err
	}
	out.registered = true
	w.ahead = len(ahead)
	if w.s.stable || len(lasts) == 0 || len(ahead) < helpers {
		return out, nil
	}
	// The request ahead is watched at its result key, which changes when
	// it leaves the line in any way (served, taken, withdrawn, dropped)
	// and not when it is renewed. Its request key would not do on
	// FoundationDB: it lies in the range this transaction's versionstamped
	// key makes unreadable.
	_, lastRID, err := w.s.parseReq(lasts[0].Key)
	if err != nil {
		return out, nil // not a request: the next step drops it
	}
	w.watches = append(w.watches, tr.Watch(w.resKey), tr.Watch(w.s.resKey(lastRID)))
	out.armed = true
	return out, nil
}

// resolve is the step after a registration whose commit had an unknown
// outcome: the registration's marker, at its result key, tells whether it
// was applied (then findRequest finds its request), or the result is
// already there. The
// read is a normal read and, when nothing is there, the step clears the
// key so that it commits: a registration still in flight that lands later
// makes it conflict, and the next attempt finds it.
func (w *waiter[T]) resolve(tr kv.Transaction) (out outcome[T], err error) {
	out.phase = phaseWait
	v, err := getChunked(tr, w.resKey).Get()
	if err != nil {
		return out, err
	}
	if v == nil {
		tr.Clear(w.resKey)
		out.forget = true
		return out, nil
	}
	if isMarker(v) {
		if w.reqKey, err = w.s.findRequest(tr, v, w.rid); err != nil || w.reqKey != nil {
			out.noCommit = true
			return out, err
		}
		// A marker without its request (not made by this package): clear
		// it and file a new request.
		tr.Clear(w.resKey)
		out.forget = true
		return out, nil
	}
	return w.collect(tr, v)
}

// serveAndTake hands items[i] to reqs[i] and takes the last item for the
// caller. The read conflict covers the items' range up to the one taken,
// as a plain dequeue's does, and each request served.
func (w *waiter[T]) serveAndTake(tr kv.Transaction, now time.Time, reqs, items []kv.KeyValue) (out outcome[T], err error) {
	s := w.s
	p := items[len(items)-1]
	v, rec, err := s.accept(p)
	if err != nil {
		return out, err
	}
	for _, it := range items[:len(reqs)] {
		if _, _, err := s.accept(it); err != nil {
			return out, err
		}
	}
	// Read conflicts go before the clears: keys the transaction already
	// wrote would be left out of them.
	conflict := kv.KeyRange{Begin: s.items.Begin, End: append(bytes.Clone(p.Key), 0x00)}
	if s.reverse {
		conflict = kv.KeyRange{Begin: p.Key, End: s.items.End}
	}
	if err := tr.AddReadConflictRange(conflict); err != nil {
		return out, err
	}
	for _, r := range reqs {
		if err := tr.AddReadConflictKey(r.Key); err != nil {
			return out, err
		}
	}
	for i, r := range reqs {
		_, rid, err := s.parseReq(r.Key)
		if err != nil {
			return out, err
		}
		tr.Clear(r.Key)
		tr.Clear(items[i].Key) // the result key's marker is overwritten below
		setChunked(tr, s.resKey(rid), encodeResult(now.Add(s.st.cfg.ClaimTimeout), items[i].Key, items[i].Value))
	}
	tr.Clear(p.Key)
	w.took(tr, p, rec)
	out.done, out.val, out.served = true, v, len(reqs)
	return out, nil
}

// took records, in tr, that the operation takes item p.
func (w *waiter[T]) took(tr kv.Transaction, p kv.KeyValue, rec []byte) {
	w.o.record(tr, rec)
	w.taken = &kv.KeyValue{Key: bytes.Clone(p.Key), Value: bytes.Clone(p.Value)}
	w.takenRec = rec
}

// register files a request: its key is ordered by the versionstamp of the
// commit, so a request filed later stands behind, and the waiter learns
// the key from the versionstamp once the commit succeeded. A marker at the
// result key holds the versionstamp too, for a waiter whose commit had an
// unknown outcome (see resolve).
func (w *waiter[T]) register(tr kv.Transaction, now time.Time) error {
	s := w.s
	rid, err := s.st.newRID(now)
	if err != nil {
		return err
	}
	key, err := tuple.Tuple{tuple.IncompleteVersionstamp(0), rid}.PackWithVersionstamp(s.reqs.prefix)
	if err != nil {
		return err
	}
	timeout := s.st.cfg.ClaimTimeout
	tr.SetVersionstampedKey(key, encodeDeadline(now.Add(timeout)))
	w.rid, w.resKey = rid, s.resKey(rid)
	tr.Set(w.resKey, markerValue)
	w.stamp = tr.GetVersionstamp()
	w.renewAt = now.Add(timeout / 3)
	w.deadline = now.Add(timeout)
	w.withdrawing = false
	// If this commit fails, the next step looks for the marker (resolve).
	w.reqKey = nil
	return nil
}

// renew writes the request with a new deadline.
func (w *waiter[T]) renew(tr kv.Transaction, now time.Time) {
	timeout := w.s.st.cfg.ClaimTimeout
	tr.Set(w.reqKey, encodeDeadline(now.Add(timeout)))
	w.renewAt = now.Add(timeout / 3)
}

// arm watches the request key (fulfilment, expiry and withdrawal all clear
// it) and the signal key (a staged enqueue bumps it). A watch compares with
// the value this transaction saw, so a change after its read version is
// never missed.
func (w *waiter[T]) arm(tr kv.Transaction) {
	w.watches = append(w.watches, tr.Watch(w.reqKey), tr.Watch(w.s.st.sig))
}

func (w *waiter[T]) collect(tr kv.Transaction, resV []byte) (out outcome[T], err error) {
	s := w.s
	out.phase = phaseCollect
	_, key, stored, err := decodeResult(resV)
	if err != nil {
		return out, err
	}
	p := kv.KeyValue{Key: key, Value: stored}
	clearChunked(tr, w.resKey)
	v, rec, aerr := s.accept(p)
	if aerr != nil {
		// Return the item to the queue (in batch mode where a plain
		// dequeue would have left it), and report why it cannot be taken.
		if _, err := s.putBack(tr, key, stored); err != nil {
			return out, err
		}
		s.st.bump(tr)
		w.reqKey, w.resKey = nil, nil
		out.done, out.err = true, aerr
		return out, nil
	}
	w.took(tr, p, rec)
	out.done, out.val = true, v
	return out, nil
}

// fulfil is the step of a waiter whose request is waiting. If the items
// reach its place it takes its item (takeAt). Otherwise, and when a helper
// (a waiter of the two oldest requests) just woke from a sleep, helpers
// serve the first requests with the first items in one transaction, so
// that waiters asleep when items arrive are served in a batch, not woken
// one by one. The other waiters sleep until their request changes (a
// helper served it) or the request ahead of theirs leaves. pending is the
// snapshot read of the requests up to this one (all of the first ones for
// a woken waiter).
func (w *waiter[T]) fulfil(tr kv.Transaction, now time.Time, pending kv.RangeResult, pre prefetched) (out outcome[T], err error) {
	s := w.s
	reqs, err := pending.GetSlice()
	if err != nil {
		return out, err
	}
	s.raiseFloor(reqs)
	items, complete, err := s.readItems(pre.items, pre.limit)
	if err != nil {
		return out, err
	}
	read := len(items)
	sp := w.stepSpend()
	live, pos, items, err := s.liveRequests(tr, now, reqs, w.reqKey, items, complete, sp)
	if err != nil {
		return out, err
	}
	if len(items) < read {
		// Expired requests ahead gave their items to the tail, where this
		// transaction cannot take them (their keys are known only at
		// commit): commit that, and look again.
		out.phase = phaseWait
		return out, nil
	}
	w.ahead = pos
	if pos == len(live) {
		w.ahead = 2 * pre.limit // not among those read: further back
	}
	s.busy.Store(pos >= helpers)
	if pos < len(live) && pos < len(items) && (!w.woke || pos >= helpers) && (s.stable || pos == 0) {
		// Self-service: the items reach this request's place, so it takes
		// the item a fulfilment would hand it, without waiting for one.
		// The waiters ahead take theirs the same way, or are served.
		return w.takeAt(tr, items[pos])
	}
	if pos >= helpers {
		if !w.wait {
			// A plain Dequeue waits only if the items reach its request.
			// In batch mode it returns ErrEmpty only when the queue is
			// empty: items the requests ahead have not yet been handed
			// may still come to it (a request ahead withdrawn, a
			// consumer outside the line), and an ErrEmpty while they are
			// there would not be linearizable. It waits to be served, or
			// for the items to run out.
			short := len(items) <= pos && complete
			if !s.stable {
				short = len(items) == 0
			}
			if short {
				return w.withdraw(tr)
			}
		}
		if !now.Before(w.renewAt) {
			w.renew(tr, now)
		}
		w.watches = append(w.watches, tr.Watch(w.reqKey), tr.Watch(live[min(pos, len(live))-1].Key))
		out.armed, out.phase = true, phaseWait
		return out, nil
	}
	out.phase = phaseFulfil
	res, err := s.serve(tr, now, live, w, items, complete, pre.results, sp)
	if err != nil {
		return out, err
	}
	out.served = res.n
	if res.mine {
		out.served--
	}
	if res.mine {
		out.done, out.val = true, res.val
		return out, nil
	}
	if !now.Before(w.renewAt) {
		w.renew(tr, now)
	}
	if !res.emptyForMe {
		return out, nil // served others; the next step serves this one
	}
	if !w.wait {
		return w.withdraw(tr)
	}
	w.arm(tr)
	out.armed = true
	return out, nil
}

// takeAt takes item it for the waiter's request, whose place in the line
// is the item's place in the queue: it clears both and records the item in
// the journal. The request was read with a normal read and the item gets a
// read conflict key, so a fulfilment or another waiter that hands out
// either one at the same time conflicts with this step.
func (w *waiter[T]) takeAt(tr kv.Transaction, it kv.KeyValue) (out outcome[T], err error) {
	out, err = w.takeItem(tr, it, !w.s.stable)
	out.phase = phaseTake
	if err == nil {
		tr.Clear(w.reqKey)
		tr.Clear(w.resKey) // the registration's marker
	}
	return out, err
}

// takeItem takes item it for the caller: a read conflict on its key (so
// that anyone else handing it out conflicts), its clear and the journal
// record.
//
// fromHead makes the read conflict cover the items' range from its start
// to it, as a plain dequeue's does: the take then also conflicts with an
// item put ahead of it.
func (w *waiter[T]) takeItem(tr kv.Transaction, it kv.KeyValue, fromHead bool) (out outcome[T], err error) {
	v, rec, err := w.s.accept(it)
	if err != nil {
		return out, err
	}
	conflict := kv.KeyRange{Begin: it.Key, End: append(bytes.Clone(it.Key), 0x00)}
	if fromHead {
		if w.s.reverse {
			conflict.End = w.s.items.End
		} else {
			conflict.Begin = w.s.items.Begin
		}
	}
	if err := tr.AddReadConflictRange(conflict); err != nil {
		return out, err
	}
	tr.Clear(it.Key)
	w.took(tr, it, rec)
	out.done, out.val = true, v
	return out, nil
}

// withdraw clears the waiter's request: a plain Dequeue found no item for
// it. In place mode the items ended before its place, and it reads the whole
// item range (a read conflict): an item arriving before the commit would
// reach the place, and requests behind might take the items after it.
func (w *waiter[T]) withdraw(tr kv.Transaction) (out outcome[T], err error) {
	if w.s.stable {
		if err := tr.AddReadConflictRange(w.s.items); err != nil {
			return out, err
		}
	}
	tr.Clear(w.reqKey)
	tr.Clear(w.resKey) // the registration's marker
	w.withdrawing = true
	out.phase = phaseWithdraw
	out.done, out.err = true, ErrEmpty
	return out, nil
}

// liveRequests drops, in tr, the expired requests among reqs (their waiters
// stopped renewing them) and returns the others with the place of the
// request mine among them (len(live) when it is not there). items are the
// first items, read in the same transaction, and complete says the read
// reached the end of the queue.
//
// In place mode the i-th request of the line is due the i-th item, so an
// expired request cannot simply leave: if an item reaches its place, that
// item is moved to the tail with it (requeueAt); if the items end before
// its place (complete), it leaves with a read conflict on the whole item
// range, so that an item arriving meanwhile makes the drop conflict; if the
// read does not tell, it keeps its place for now. rest is items without
// those moved, so that live[i] is due rest[i]. In batch mode rest is items.
func (s *stageSide[T]) liveRequests(tr kv.Transaction, now time.Time, reqs []kv.KeyValue, mine []byte, items []kv.KeyValue, complete bool, sp *spend) (live []kv.KeyValue, pos int, rest []kv.KeyValue, err error) {
	pos = -1
	rest = items
	for _, r := range reqs {
		if mine != nil && bytes.Equal(r.Key, mine) {
			pos = len(live)
			live = append(live, r)
			continue
		}
		d, ok := decodeDeadline(r.Value)
		_, _, perr := s.parseReq(r.Key)
		if ok && perr == nil && now.Before(d) {
			live = append(live, r)
			continue
		}
		// Over the budget, an expired request stays for a later
		// transaction to drop: by place it keeps its place (as if live);
		// in batches it is passed over.
		cost := dropCost(len(r.Key), 0) + len(s.items.Begin) + len(s.items.End)
		if _, rid, err := s.parseReq(r.Key); err == nil {
			cost += clearCost(len(s.resKey(rid)))
		}
		if s.stable && perr == nil && len(live) < len(rest) {
			cost += moveCost(rest[len(live)], s.items)
		}
		if !sp.fits(cost) {
			if s.stable && perr == nil {
				live = append(live, r)
			}
			continue
		}
		sp.used += cost
		if s.stable && perr == nil {
			switch i := len(live); {
			case i < len(rest):
				moved, err := s.requeueAt(tr, rest[i])
				if err != nil {
					return nil, 0, nil, err
				}
				if moved {
					rest = append(rest[:i:i], rest[i+1:]...)
				}
			case !complete:
				live = append(live, r) // not known whether an item reaches it
				continue
			default:
				if err := tr.AddReadConflictRange(s.items); err != nil {
					return nil, 0, nil, err
				}
			}
		}
		// Expired, or not a request: drop it.
		if err := s.drop(tr, r.Key); err != nil {
			return nil, 0, nil, err
		}
	}
	if pos < 0 {
		pos = len(live)
	}
	return live, pos, rest, nil
}

// placesBefore counts, with a snapshot read of the line, the requests
// before the key end (nil: the whole line).
func (s *stageSide[T]) placesBefore(tr kv.ReadTransaction, end []byte) (int, error) {
	r := s.liveRange()
	if end != nil {
		r.End = end
	}
	reqs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	return s.places(reqs), err
}

// places counts the requests among reqs, a read of the line: in place mode
// each holds a place, expired or not, until a transaction drops it.
func (s *stageSide[T]) places(reqs []kv.KeyValue) int {
	n := 0
	for _, r := range reqs {
		if _, _, err := s.parseReq(r.Key); err == nil {
			n++
		}
	}
	return n
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

// drop clears a request that expired (or is not one), and its
// registration's marker: a request that is still there was not served, so
// its result key holds nothing else.
func (s *stageSide[T]) drop(tr kv.Transaction, key []byte) error {
	if err := tr.AddReadConflictKey(key); err != nil {
		return err
	}
	tr.Clear(key)
	if _, rid, err := s.parseReq(key); err == nil {
		clearChunked(tr, s.resKey(rid))
	}
	return nil
}

// served is what one fulfilment pass did.
type served[T any] struct {
	n          int  // requests served
	mine       bool // the caller's own request was served: val is its item
	val        T
	emptyForMe bool // the queue ran out before the caller's request
}

// serve matches the live requests, oldest first, with the first items and
// buffers the transitions in tr; it also returns the items of a few expired
// results. w is the waiter running it (its own request is served by taking
// the item directly), or nil; items are the first items as liveRequests
// left them, and complete says their read reached the end of the queue.
func (s *stageSide[T]) serve(tr kv.Transaction, now time.Time, live []kv.KeyValue, w *waiter[T], items []kv.KeyValue, complete bool, results kv.RangeResult, sp *spend) (res served[T], err error) {
	var mine, myRes []byte
	if w != nil {
		mine, myRes = w.reqKey, w.resKey
	}
	if results == nil {
		results = s.scanResults(tr)
	}
	// The results share the step's read budget with the items: their
	// values hold items too.
	left := s.st.budget
	for _, it := range items {
		left -= len(it.Key) + len(it.Value)
	}
	rs, _, err := readUpTo(results, resultScan, left)
	if err != nil {
		return res, err
	}
	if _, err := s.expireResults(tr, now, rs, myRes, sp); err != nil {
		return res, err
	}
	timeout := s.st.cfg.ClaimTimeout
	for _, r := range live {
		if res.n >= len(items) {
			break
		}
		it := items[res.n]
		v, rec, aerr := s.accept(it)
		if aerr != nil {
			if res.n == 0 {
				return res, aerr
			}
			break // serve the good items before the bad one
		}
		// Both keys are read conflicts and cleared; the request gets its
		// result, or the caller's own request its journal record.
		cost := conflictKeyCost(len(it.Key)) + conflictKeyCost(len(r.Key)) + clearCost(len(it.Key)) + clearCost(len(r.Key))
		_, rid, _ := s.parseReq(r.Key)
		var result []byte
		if mine != nil && bytes.Equal(r.Key, mine) {
			cost += clearCost(len(myRes)) + w.o.recordCost(0, rec)
		} else {
			result = encodeResult(now.Add(timeout), it.Key, it.Value)
			cost += chunkedSetCost(len(s.resKey(rid)), len(result))
		}
		if res.n > 0 && !sp.fits(cost) {
			break
		}
		sp.used += cost
		// Conflict keys go before the clears, which would hide them.
		if err := tr.AddReadConflictKey(it.Key); err != nil {
			return res, err
		}
		if err := tr.AddReadConflictKey(r.Key); err != nil {
			return res, err
		}
		tr.Clear(it.Key)
		tr.Clear(r.Key)
		res.n++
		if mine != nil && bytes.Equal(r.Key, mine) {
			tr.Clear(myRes) // the registration's marker
			w.took(tr, it, rec)
			res.mine, res.val = true, v
			continue
		}
		setChunked(tr, s.resKey(rid), result)
	}
	// The items ran out before the caller's request (every item read was
	// used, and the read reached the end of the queue).
	res.emptyForMe = !res.mine && res.n == len(items) && complete
	return res, nil
}

// prefetched holds a fulfilment's reads of the first items (up to limit)
// and of a few results (to expire), started together.
type prefetched struct {
	items, results kv.RangeResult
	limit          int
}

func (s *stageSide[T]) prefetch(tr kv.Transaction, limit int, results bool) prefetched {
	pre := prefetched{
		items: tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: limit, Reverse: s.reverse, Mode: kv.StreamingModeWantAll}),
		limit: limit,
	}
	if results {
		pre.results = s.scanResults(tr)
	}
	return pre
}

// readItems reads the first items from rr (a read of the items' range with
// limit), as a step uses them: at most limit, and no more once their bytes
// reach the batch budget, since a step hands out, or reaches its place
// through, no more than that. The read is an iterator over a read in
// StreamingModeWantAll, whose batches FDB limits to 120,000 bytes
// (bindings/c/fdb_c.cpp), so it fetches at most one batch beyond. Values are read although only keys are needed before
// a step's place: the kv interface, as FDB's API, has no key-only range
// read. complete reports that the read reached the end of the queue.
func (s *stageSide[T]) readItems(rr kv.RangeResult, limit int) (items []kv.KeyValue, complete bool, err error) {
	return readUpTo(rr, limit, s.st.budget)
}

// readUpTo reads rr with an iterator: at most limit pairs, and none after
// their bytes reached maxBytes (but at least one). complete reports that
// the range ended first.
func readUpTo(rr kv.RangeResult, limit, maxBytes int) (kvs []kv.KeyValue, complete bool, err error) {
	it := rr.Iterator()
	n := 0
	for len(kvs) < limit && (n < maxBytes || len(kvs) == 0) {
		if !it.Next() {
			return kvs, it.Err() == nil, it.Err()
		}
		p := it.KeyValue()
		kvs = append(kvs, p)
		n += len(p.Key) + len(p.Value)
	}
	return kvs, false, nil
}

// stepSpend starts the size count of a waiter's step (see budget.go): its
// journal's overhead, the normal reads of its two keys, a renewal, the
// clears of its keys and two watches.
func (w *waiter[T]) stepSpend() *spend {
	k := max(len(w.reqKey), len(w.resKey))
	return &spend{budget: w.s.st.budget,
		used: w.o.overheadCost(w.s.items) + 4*conflictKeyCost(k) + setCost(k, 16) + 2*clearCost(k)}
}

// scanResults reads the first few results, for a fulfilment to expire.
func (s *stageSide[T]) scanResults(tr kv.Transaction) kv.RangeResult {
	return tr.Snapshot().GetRange(s.resRange, kv.RangeOptions{Limit: resultScan})
}

// stepReads are the range reads one step issued. On FoundationDB a range
// read is in flight from the GetRange call, as every read here overlaps
// the others of its step; a step waits for each one, itself, before it
// commits: an operation on a transaction whose commit has started fails
// with used_during_commit (2017, checkUsedDuringCommit in
// fdbclient/ReadYourWrites.actor.cpp), and the commit may still apply.
type stepReads struct{ held []*heldRange }

// hold records rr (nil stays nil) and returns it with its result cached,
// so that waiting for it before the commit does not read it twice.
func (r *stepReads) hold(rr kv.RangeResult) kv.RangeResult {
	if rr == nil {
		return nil
	}
	h := &heldRange{rr: rr}
	r.held = append(r.held, h)
	return h
}

// wait waits for every read held that the step did not look at (for its
// first batch: later ones are fetched only when asked for) and returns the
// first error: the transaction would fail with it anyway.
func (r *stepReads) wait() error {
	var first error
	for _, h := range r.held {
		h.mu.Lock()
		used := h.used
		h.mu.Unlock()
		if !used {
			if err := waitRead(h.rr, nil); err != nil && first == nil {
				first = err
			}
		}
	}
	r.held = r.held[:0]
	return first
}

// heldRange is a range read whose GetSlice result is kept, so that
// several looks at it read it once.
type heldRange struct {
	rr   kv.RangeResult
	mu   sync.Mutex
	used bool // GetSlice or Iterator was called
	done bool
	kvs  []kv.KeyValue
	err  error
}

// GetSlice waits for the read.
func (h *heldRange) GetSlice() ([]kv.KeyValue, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.done {
		h.used = true
		h.kvs, h.err = h.rr.GetSlice()
		h.done = true
	}
	return h.kvs, h.err
}

// Iterator streams the read; the caller stops when it has enough.
func (h *heldRange) Iterator() kv.RangeIterator {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.used = true
	if h.done {
		return &sliceIter{h: h, i: -1}
	}
	return h.rr.Iterator()
}

type sliceIter struct {
	h *heldRange
	i int
}

func (it *sliceIter) Next() bool {
	if kvs, err := it.h.GetSlice(); err != nil || it.i+1 >= len(kvs) {
		return false
	}
	it.i++
	return true
}

func (it *sliceIter) KeyValue() kv.KeyValue { return it.h.kvs[it.i] }

func (it *sliceIter) Err() error { return it.h.err }

// sleep blocks until a watch fires, the request is due for renewal, or ctx
// ends (then it returns ctx's error).
func (w *waiter[T]) sleep(ctx context.Context) error {
	d := w.renewAt.Sub(w.s.st.now())
	if !w.wait {
		// A plain Dequeue must not block: if the items ran out for the
		// requests ahead while it slept, nothing would wake it.
		d = min(d, recheckNoWait)
	}
	if d <= 0 {
		w.cancelWatches()
		return nil
	}
	slept := time.Now()
	defer func() {
		w.s.st.stats.sleeps.Add(1)
		w.s.st.stats.sleepNanos.Add(int64(time.Since(slept)))
	}()
	wctx, cancel := context.WithTimeout(ctx, d)
	type firing struct {
		i   int
		err error
	}
	fired := make(chan firing, len(w.watches))
	for i, wt := range w.watches {
		go func() { fired <- firing{i, wt.Wait(wctx)} }()
	}
	var werr error
	select {
	case f := <-fired:
		werr = f.err
		// The waiter's own request key is always the first watch.
		w.ownFired = f.i == 0 && f.err == nil
	case <-wctx.Done():
	}
	cancel()
	w.cancelWatches()
	w.s.st.point("woke")
	if err := ctx.Err(); err != nil {
		return err
	}
	if werr == nil || errors.Is(werr, context.DeadlineExceeded) || errors.Is(werr, context.Canceled) {
		w.watchFail = 0
		return nil
	}
	// A watch that fails at once (too many watches, ...) must not make the
	// waiter spin: back off, up to a second.
	w.watchFail = min(max(2*w.watchFail, time.Millisecond), time.Second)
	t := time.NewTimer(w.watchFail)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// abandon undoes what the operation left in the database after it stopped
// with cause (its context ended, or an error that is not retryable): it
// withdraws the request (by place, moving the item due to it to the tail),
// returns a fulfilled item (putBack), and, when a take's commit had an
// unknown outcome and did apply, returns that item too and erases its
// journal record. It runs in a fresh
// context bounded by the CleanupTimeout, since ctx is done.
//
// When ctx ended, the error returned is ctx's (the cleanup settled the
// outcome of any commit in flight); otherwise it is cause.
func (w *waiter[T]) abandon(ctx context.Context, cause error) error {
	w.cancelWatches()
	final := cause
	if cerr := ctx.Err(); cerr != nil {
		final = cerr
	}
	if w.resKey == nil && w.taken == nil {
		if kv.MaybeCommitted(cause) {
			return cause // nothing to settle it with: the caller must know
		}
		return final // nothing was written
	}
	s := w.s
	timeout := s.st.cfg.CleanupTimeout
	if timeout == 0 {
		timeout = DefaultStagingCleanupTimeout
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	err := w.db.Transact(cctx, func(tr kv.Transaction) error {
		rec, err := w.o.check(tr)
		if err != nil && !errors.Is(err, ErrOperationExpired) {
			return err
		}
		var resF *chunkedValue
		if w.resKey != nil {
			f := getChunked(tr, w.resKey)
			resF = &f
		}
		prev, done, err := w.o.applied(rec)
		if err != nil {
			return err
		}
		back := false
		if done && w.taken != nil && len(prev) == 1 && bytes.Equal(prev[0], w.takenRec) {
			if back, err = s.putBack(tr, w.taken.Key, w.taken.Value); err != nil {
				return err
			}
			tr.ClearRange(w.o.recordRange())
		}
		if resF != nil {
			// The result key holds the registration's marker while the
			// request waits, the item once it is served, or nothing.
			// Clearing it even when empty makes this transaction conflict
			// with a registration still in flight.
			resV, err := resF.Get()
			if err != nil {
				return err
			}
			reqKey := w.reqKey
			if isMarker(resV) {
				if reqKey == nil {
					if reqKey, err = s.findRequest(tr, resV, w.rid); err != nil {
						return err
					}
				}
				if reqKey != nil && s.stable {
					moved, err := s.leavePlace(tr, reqKey)
					if err != nil {
						return err
					}
					back = moved || back
				}
			} else if resV != nil {
				if _, key, stored, err := decodeResult(resV); err == nil {
					moved, err := s.putBack(tr, key, stored)
					if err != nil {
						return err
					}
					back = moved || back
				}
			}
			clearChunked(tr, w.resKey)
			if reqKey != nil {
				tr.Clear(reqKey)
			}
		}
		if back {
			s.st.bump(tr)
		}
		return nil
	})
	if err != nil {
		e := fmt.Errorf("%w (withdrawing the staged request failed, the claim timeout will return its item: %w; last error: %v)", final, err, cause)
		if w.taken != nil || w.resKey != nil {
			// The item may sit in the journal (recoverable with WithOpID),
			// or the request may still be in the line, with an item due or
			// handed to it that goes back to the queue only when it
			// expires, after this call returned: either way the call may
			// have had an effect.
			return kv.CommitInterrupted(e)
		}
		return e
	}
	return final
}

// leavePlace prepares, in place mode, the withdrawal of the waiting request
// at reqKey: if an item reaches its place, the requests behind may already
// have taken the items after it, so that item moves to the tail (the
// history reads as if the call had taken it and it had been enqueued
// again); if none does, the transaction reads the whole item range, so
// that an item arriving before its commit makes it conflict. It reports
// whether it moved an item.
//
// It reads the items up to the place, values included (the kv interface
// has no key-only read and no key selector with an offset), whatever their
// bytes: the decision needs the item at the place itself. It runs only
// when a call gives up.
func (s *stageSide[T]) leavePlace(tr kv.Transaction, reqKey []byte) (bool, error) {
	p, err := s.placesBefore(tr, reqKey)
	if err != nil {
		return false, err
	}
	items, err := tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: p + 1, Mode: kv.StreamingModeExact}).GetSlice()
	if err != nil {
		return false, err
	}
	if p < len(items) {
		return s.requeueAt(tr, items[p])
	}
	return false, tr.AddReadConflictRange(s.items)
}

// recover drops the side's expired requests and returns the items of its
// expired results.
func (s *stageSide[T]) recover(ctx context.Context, db kv.Database, stats *RecoverStats) error {
	db = s.journal.track.observeDB("recover", db)
	defer s.journal.track.obs.recovered(s.side(), stats)()
	ranges := []kv.KeyRange{s.reqRange, s.resRange}
	if s.stable {
		if err := s.recoverPlaces(ctx, db, stats); err != nil {
			return err
		}
		ranges = ranges[1:]
	}
	for _, r := range ranges {
		isReq := bytes.Equal(r.Begin, s.reqRange.Begin)
		begin := r.Begin
		for begin != nil {
			var dropped, returned int
			var next []byte
			err := db.Transact(ctx, func(tr kv.Transaction) error {
				dropped, returned, next = 0, 0, nil
				now := s.st.now()
				// Up to recoverBatch keys, and results only while writing
				// their items back fits the batch budget.
				it := tr.Snapshot().GetRange(kv.KeyRange{Begin: begin, End: r.End},
					kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeWantAll}).Iterator()
				// A page ends between values, never inside a chunked one.
				var kvs []kv.KeyValue
				var cur, stop []byte // the value being read; where the next page starts
				sp := &spend{budget: s.st.budget}
				for len(kvs) < recoverBatch && it.Next() {
					p := it.KeyValue()
					chunk := cur != nil && len(p.Key) > len(cur) && bytes.HasPrefix(p.Key, cur)
					if !isReq && !chunk && sp.used >= sp.budget {
						stop = bytes.Clone(p.Key)
						break
					}
					if !chunk {
						cur = p.Key
					}
					kvs = append(kvs, p)
					sp.used += resultCost(p, s.items)
				}
				if err := it.Err(); err != nil {
					return err
				}
				if stop != nil {
					next = stop
				} else if len(kvs) == recoverBatch {
					next = append(bytes.Clone(kvs[len(kvs)-1].Key), 0x00)
					if !isReq {
						// The last result may continue past the page:
						// the next page starts at its first chunk.
						if whole := joinChunks(kvs); len(whole) > 1 {
							next = whole[len(whole)-1].Key
							kvs = kvs[:len(kvs)-countChunks(kvs, next)]
						}
					}
				}
				if !isReq {
					var err error
					returned, err = s.expireResults(tr, now, kvs, nil, &spend{budget: sp.used})
					return err
				}
				for _, p := range kvs {
					d, ok := decodeDeadline(p.Value)
					if _, _, perr := s.parseReq(p.Key); ok && perr == nil && now.Before(d) {
						continue
					}
					if err := s.drop(tr, p.Key); err != nil {
						return err
					}
					dropped++
				}
				return nil
			})
			if err != nil {
				return err
			}
			stats.DroppedRequests += dropped
			stats.ReturnedItems += returned
			begin = next
		}
	}
	return nil
}

// recoverPlaces drops the expired requests in place mode: the places of
// the line's requests depend on all the requests ahead, so it examines the
// first recoverBatch requests with as many items in one transaction (see
// liveRequests).
func (s *stageSide[T]) recoverPlaces(ctx context.Context, db kv.Database, stats *RecoverStats) error {
	var dropped, returned int
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		dropped, returned = 0, 0
		now := s.st.now()
		itemsF := tr.Snapshot().GetRange(s.items, kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeWantAll})
		reqs, err := tr.Snapshot().GetRange(s.reqRange, kv.RangeOptions{Limit: recoverBatch, Mode: kv.StreamingModeExact}).GetSlice()
		if err != nil {
			return waitRead(itemsF, err)
		}
		items, complete, err := s.readItems(itemsF, recoverBatch)
		if err != nil {
			return err
		}
		sp := &spend{budget: s.st.budget, used: setCost(len(s.items.Begin)+16, 8)}
		live, _, rest, err := s.liveRequests(tr, now, reqs, nil, items, complete, sp)
		if err != nil {
			return err
		}
		dropped, returned = len(reqs)-len(live), len(items)-len(rest)
		return nil
	})
	if err != nil {
		return err
	}
	stats.DroppedRequests += dropped
	stats.ReturnedItems += returned
	return nil
}

// fulfilOnce runs one fulfilment pass as a helper with no request of its
// own, and reports how many requests it served (used by tests).
func (s *stageSide[T]) fulfilOnce(ctx context.Context, db kv.Database) (int, error) {
	db = s.journal.track.observeDB(s.opKind(), db)
	return kv.Transact(ctx, db, func(tr kv.Transaction) (int, error) {
		limit := s.st.cfg.BatchSize
		pre := s.prefetch(tr, limit, true)
		reqs, err := tr.Snapshot().GetRange(s.reqRange, kv.RangeOptions{Limit: limit}).GetSlice()
		if err != nil {
			return 0, err
		}
		items, complete, err := s.readItems(pre.items, limit)
		if err != nil {
			return 0, err
		}
		now := s.st.now()
		sp := &spend{budget: s.st.budget, used: setCost(len(s.items.Begin)+16, 8)}
		live, _, items, err := s.liveRequests(tr, now, reqs, nil, items, complete, sp)
		if err != nil {
			return 0, err
		}
		res, err := s.serve(tr, now, live, nil, items, complete, pre.results, sp)
		return res.n, err
	})
}

// ---- Queue ----

func (q *Queue) initStaging() error {
	q.stager = newStager(q.sub.prefix, q.cfg, q.rand)
	q.stage = newStageSide(q.stager, q.sub.prefix, "q", q.journal, q.items, false, q.accept, q.cfg.encoding.decode)
	q.stage.requeue, q.stage.checkKey = q.requeue, q.checkItemKey
	var err error
	q.stage.stable, err = q.stager.cfg.byPlace(q.cfg.versionstamps)
	return err
}

// reserved counts, on a queue staged by place, the requests in the line: the
// items at their places, at the head, are theirs, and a take outside the
// line (DequeueBatch, a Dequeue inside a transaction) starts after them.
// It is a snapshot read of the whole line. Elsewhere it is 0.
func (q *Queue) reserved(tr kv.ReadTransaction) (int, error) {
	if !q.journal.gate.servedByPlace(q.stager.enabled && q.stage.stable) { // config.go
		return 0, nil
	}
	return q.stage.placesBefore(tr, nil)
}

// requeue writes a stored item at the tail, as EnqueueBatch does (without
// a journal record: it is not an operation of its own). Only a Queue
// served by place requeues, and it is versionstamp-ordered.
func (q *Queue) requeue(tr kv.Transaction, stored []byte) error {
	return q.writeVersionstamped(tr, [][]byte{stored})
}

// staged reports whether an operation given t runs staged.
func (q *Queue) staged(t kv.Transactor) (kv.Database, bool) {
	db, ok := t.(kv.Database)
	return db, ok && q.stager.enabled
}

// StagingStats returns the counters of the queue's staged dequeues: how
// many steps of each phase committed or conflicted, the time they took,
// and the fulfilments' batch sizes. A diagnostic; see StagingStats.
func (q *Queue) StagingStats() StagingStats { return q.stager.stats.snapshot() }

// DequeueWait removes and returns the item at the head of the queue,
// waiting for one while the queue is empty, until ctx ends. It needs a
// queue made WithStaging (ErrInvalidArgument otherwise) and a Database,
// since it runs several transactions.
//
// It is the staged dequeue (see Queue.Dequeue) that, instead of returning
// ErrEmpty, keeps its request and blocks on two watches, on its request
// key and on the queue's signal key, which every Enqueue of this library
// bumps on a staged queue (the stored configuration tells producers made
// without WithStaging): it wakes when an item arrives or its request is
// served, and never polls. Producers that do not bump (the Python and
// Java recipes) leave waiters to notice their items when they renew their
// requests, every ClaimTimeout/3.
//
// When ctx ends, the request is withdrawn and an item already due or
// handed to it goes back to the queue (by place to the tail, in batches to
// its original key), so nothing is lost, and the error matches ctx.Err(). An operation ID given WithOpID must finish within the
// journal retention (ErrOperationExpired otherwise); without one, the
// operation renews its own ID while it waits.
func (q *Queue) DequeueWait(ctx context.Context, db kv.Database, opts ...OpOption) ([]byte, error) {
	if !q.stager.enabled {
		return nil, errStagingNeedsOption
	}
	return q.stage.run(ctx, db, true, opts)
}

// Recover drops the queue's expired staging requests and returns the items
// of expired results (handed to waiters that never collected them) to the
// queue; served by place, it also sends the items due to expired requests
// to the tail, for the first 256 requests of the line. Steps of staged
// calls do the same for what they come across; run Recover now and then
// (say every claim timeout) from any client to bound how long a crashed
// consumer can strand an item. Its Queue value must have the staging
// configuration of the queue's consumers: otherwise it fails with
// ErrConfigMismatch (checked in a read-only transaction first).
func (q *Queue) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	var st RecoverStats
	if err := checkTransactor(db); err != nil {
		return st, err
	}
	if err := q.journal.gate.checkRecover(ctx, db); err != nil { // config.go
		return st, err
	}
	err := q.stage.recover(ctx, db, &st)
	return st, err
}

// ---- PriorityQueue ----

func (pq *PriorityQueue) initStaging() error {
	pq.stager = newStager(pq.sub.prefix, pq.cfg, pq.rand)
	pq.stageMin = newStageSide(pq.stager, pq.sub.prefix, "min", pq.journal, pq.items, false, pq.accept, pq.replay)
	pq.stageMax = newStageSide(pq.stager, pq.sub.prefix, "max", pq.journal, pq.items, true, pq.accept, pq.replay)
	// A push can land ahead of items already due to requests: a priority
	// queue always serves in batches.
	_, err := pq.stager.cfg.byPlace(false)
	return err
}

func (pq *PriorityQueue) staged(t kv.Transactor) (kv.Database, bool) {
	db, ok := t.(kv.Database)
	return db, ok && pq.stager.enabled
}

func (pq *PriorityQueue) side(max bool) *stageSide[Item] {
	if max {
		return pq.stageMax
	}
	return pq.stageMin
}

// StagingStats returns the counters of the staged pops, PopMin and PopMax
// together; see Queue.StagingStats.
func (pq *PriorityQueue) StagingStats() StagingStats { return pq.stager.stats.snapshot() }

// PopMinWait removes and returns the smallest item, waiting for one while
// the priority queue is empty, until ctx ends. Requirements and guarantees
// are those of Queue.DequeueWait; PopMin and PopMax requests are served
// separately, each oldest first.
func (pq *PriorityQueue) PopMinWait(ctx context.Context, db kv.Database, opts ...OpOption) (Item, error) {
	if !pq.stager.enabled {
		return Item{}, errStagingNeedsOption
	}
	return pq.stageMin.run(ctx, db, true, opts)
}

// PopMaxWait removes and returns the largest item, waiting for one while
// the priority queue is empty; see PopMinWait.
func (pq *PriorityQueue) PopMaxWait(ctx context.Context, db kv.Database, opts ...OpOption) (Item, error) {
	if !pq.stager.enabled {
		return Item{}, errStagingNeedsOption
	}
	return pq.stageMax.run(ctx, db, true, opts)
}

// Recover drops expired PopMin and PopMax requests and writes the items of
// expired results back; see Queue.Recover.
func (pq *PriorityQueue) Recover(ctx context.Context, db kv.Database) (RecoverStats, error) {
	var st RecoverStats
	if err := checkTransactor(db); err != nil {
		return st, err
	}
	if err := pq.journal.gate.checkRecover(ctx, db); err != nil { // config.go
		return st, err
	}
	if err := pq.stageMin.recover(ctx, db, &st); err != nil {
		return st, err
	}
	err := pq.stageMax.recover(ctx, db, &st)
	return st, err
}
