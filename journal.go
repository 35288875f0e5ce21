package fdbqueue

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// OpID identifies one logical queue operation across every retry of the
// transaction that carries it. Its first 8 bytes are its creation time
// (big-endian Unix microseconds), the rest random: journal records are
// spread by the first random byte and, within each of those 256 shards,
// sort by age and expire by range. See "Exactly once under
// commit_unknown_result" in docs/design.md in the repository.
type OpID [16]byte

// NewOpID returns a new operation ID stamped with the current time.
func NewOpID() OpID { return newOpIDAt(time.Now()) }

func newOpIDAt(t time.Time) OpID {
	var id OpID
	binary.BigEndian.PutUint64(id[:8], uint64(t.UnixMicro()))
	_, _ = rand.Read(id[8:]) // crypto/rand.Read never fails (Go 1.24+)
	return id
}

// Time returns when the ID was made.
func (id OpID) Time() time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(id[:8])))
}

// String returns the ID in hex.
func (id OpID) String() string { return hex.EncodeToString(id[:]) }

// OpOption configures one call of a queue operation.
type OpOption func(*opConfig)

type opConfig struct {
	id    OpID
	hasID bool
}

// WithOpID makes the operation use id instead of a fresh one. Use it when
// you run a queue operation inside your own transaction and retry that
// transaction yourself: make the ID once with NewOpID, outside your retry
// loop, and pass it on every attempt; the operation then takes effect once
// however often the attempt is retried after commit_unknown_result. Also use
// it to recover the item of a Dequeue that failed with a maybe-committed
// error: calling Dequeue again with the same ID returns the item the first
// call removed, if it removed one. An ID names one operation: never reuse it
// for another.
//
// Given a Transaction and no WithOpID, an operation does without the
// journal (it neither reads nor writes a record): each of your retries
// would be a new operation to it, so it could not help.
func WithOpID(id OpID) OpOption {
	return func(c *opConfig) { c.id, c.hasID = id, true }
}

// journal records which operations have been applied, in the queue's meta
// subspace, outside the range that recipe clients read. A record is keyed
// (shard, op ID, n), where shard is a byte of the ID's random part: records
// of operations made at the same time spread over 256 ranges instead of all
// landing at the end of one (IDs start with their creation time). Within a
// shard, records sort by age, so the records older than a time form one
// range per shard.
type journal struct {
	prefix    []byte // metaSubspace + ("j",)
	disabled  bool
	retention time.Duration
	now       func() time.Time
	gcEvery   uint64
	count     atomic.Uint64
	gcShard   atomic.Uint32 // the next shard expire clears

	mu      sync.Mutex
	pending []kv.KeyRange // records of operations that completed, to clear

	gate *confGate // the stored configuration's check (config.go)
}

const (
	// journalShards is how many ranges the journal's records spread over.
	journalShards = 256
	// expireShards is how many shards one expiry clears: every shard is
	// swept once per journalShards/expireShards expiries.
	expireShards = 16
)

const maxPendingClears = 64

// metaSubspace is where a queue keeps what is not an item: just past the
// items' range (prefix + 0xff), so recipe clients reading the subspace's
// range never see it. Its parts: ("j",) the journal, ("s", ...) staging.
func metaSubspace(queuePrefix []byte) Subspace {
	return Subspace{prefix: append(bytes.Clone(queuePrefix), 0xff)}
}

func newJournal(queuePrefix []byte, cfg config) *journal {
	meta := metaSubspace(queuePrefix)
	prefix, _ := meta.Pack(tuple.Tuple{"j"})
	j := &journal{
		prefix:    prefix,
		disabled:  cfg.noJournal,
		retention: cfg.retention,
		now:       cfg.now,
		gcEvery:   64,
	}
	var r [1]byte
	_, _ = rand.Read(r[:])
	j.gcShard.Store(uint32(r[0])) // clients sweep different shards first
	return j
}

// op is one logical operation in flight.
type op struct {
	j        *journal
	id       OpID
	cleanups []kv.KeyRange // earlier completed operations' records to clear
	owned    bool          // the operation runs its own transactions (a Database)
	skip     bool          // no journal: neither owned nor given an ID
	gate     *gateRead     // this attempt's read of the stored configuration (config.go)
}

// off reports whether the operation does without the journal.
func (o *op) off() bool { return o.j.disabled || o.skip }

// begin starts an operation: it picks its ID and, when the operation runs
// its own transactions, takes over clearing a few completed records.
func (j *journal) begin(t kv.Transactor, opts []OpOption) *op {
	var c opConfig
	for _, o := range opts {
		if o != nil { // a nil OpOption is ignored, not a panic
			o(&c)
		}
	}
	if !c.hasID {
		c.id = newOpIDAt(j.now())
	}
	o := &op{j: j, id: c.id}
	_, o.owned = t.(kv.Database)
	// Inside a caller's transaction, without an ID the caller keeps across
	// its retries, every retry is a new operation to the journal: a record
	// could never be found again, so none is read or written.
	o.skip = !o.owned && !c.hasID
	if o.owned && !j.disabled {
		j.mu.Lock()
		n := min(len(j.pending), 8)
		o.cleanups = append(o.cleanups, j.pending[len(j.pending)-n:]...)
		j.pending = j.pending[:len(j.pending)-n]
		j.mu.Unlock()
	}
	return o
}

// end finishes an operation. When it ran its own transactions and committed,
// its records will never be consulted again and are queued for clearing by a
// later operation; otherwise the cleanups it took are handed back.
func (o *op) end(err error) {
	if o.j.disabled || !o.owned {
		return
	}
	o.j.mu.Lock()
	defer o.j.mu.Unlock()
	back := o.cleanups // not applied: hand them back
	if err == nil {
		// The commit that wrote this operation's records also applied the
		// cleanups it carried; what remains is to clear its own records.
		back = []kv.KeyRange{o.recordRange()}
	}
	for _, r := range back {
		if len(o.j.pending) < maxPendingClears {
			o.j.pending = append(o.j.pending, r)
		}
	}
}

// shard is the journal shard of the operation's records.
func (o *op) shard() int64 { return int64(o.id[8]) }

func (o *op) recordRange() kv.KeyRange {
	p, _ := tuple.Tuple{o.shard(), o.id[:]}.AppendPack(bytes.Clone(o.j.prefix))
	return kv.KeyRange{Begin: p, End: append(bytes.Clone(p), 0xff)}
}

// recordKey is the key of the operation's n-th record (its first chunk,
// see setChunked).
func (o *op) recordKey(n int) []byte {
	k, _ := tuple.Tuple{o.shard(), o.id[:], n}.AppendPack(bytes.Clone(o.j.prefix))
	return k
}

// check looks up the operation's records in this attempt. It returns the
// pending read (nil when the journal is disabled). The read is a normal
// read: if an earlier attempt's commit lands after this attempt's read
// version, this attempt conflicts instead of applying twice.
func (o *op) check(tr kv.Transaction) (kv.RangeResult, error) {
	if o.off() {
		return nil, nil
	}
	if age := o.j.now().Sub(o.id.Time()); age > o.j.retention {
		return nil, fmt.Errorf("%w: op %s is %v old, retention %v", ErrOperationExpired, o.id, age.Round(time.Second), o.j.retention)
	}
	return tr.GetRange(o.recordRange(), kv.RangeOptions{Mode: kv.StreamingModeWantAll}), nil
}

// applied waits for check's read and returns the recorded results when an
// earlier attempt committed (ok true), in record order.
func (o *op) applied(rr kv.RangeResult) (results [][]byte, ok bool, err error) {
	if err := o.gate.settle(); err != nil { // config.go: before any write
		return nil, false, err
	}
	if rr == nil {
		return nil, false, nil
	}
	kvs, err := rr.GetSlice()
	if err != nil || len(kvs) == 0 {
		return nil, false, err
	}
	kvs = joinChunks(kvs)
	results = make([][]byte, len(kvs))
	for i, kv := range kvs {
		results[i] = kv.Value
	}
	return results, true, nil
}

// record writes the operation's records (one per result; at least one) in
// the attempt's transaction, clears the records of completed operations, and
// now and then clears every record older than the retention.
//
// A record holds what the operation returns (a dequeued item's stored value,
// as it is): one longer than the value limit is written in chunks.
func (o *op) record(tr kv.Transaction, results ...[]byte) {
	if o.off() {
		return
	}
	if len(results) == 0 {
		results = [][]byte{nil}
	}
	for i, r := range results {
		if r == nil {
			r = []byte{}
		}
		setChunked(tr, o.recordKey(i), r)
	}
	for _, r := range o.cleanups {
		tr.ClearRange(r)
	}
	if o.j.count.Add(1)%o.j.gcEvery == 0 {
		o.j.expire(tr)
	}
}

// expire clears, in tr, the records older than twice the retention in the
// next expireShards shards: blind range clears that
// conflict only with those operations' own (expired) retries.
//
// Ages are measured with client clocks: an ID carries its maker's time,
// and this client compares it with its own. An operation runs until its
// own clock says it is retention old (then it fails with
// ErrOperationExpired); this client clears its records only once its clock
// says twice the retention. So a client whose clock is ahead of the
// operation's maker's by less than the retention cannot clear the record
// of an operation still running: clocks may disagree by up to the
// retention.
func (j *journal) expire(tr kv.Transaction) {
	var cutoff [8]byte
	binary.BigEndian.PutUint64(cutoff[:], uint64(j.now().Add(-2*j.retention).UnixMicro()))
	first := j.gcShard.Add(expireShards) - expireShards
	for i := range uint32(expireShards) {
		shard := int64((first + i) % journalShards)
		begin, _ := tuple.Tuple{shard}.AppendPack(bytes.Clone(j.prefix))
		end, _ := tuple.Tuple{shard, cutoff[:]}.AppendPack(bytes.Clone(j.prefix))
		tr.ClearRange(kv.KeyRange{Begin: begin, End: end})
	}
	if first%journalShards < expireShards {
		// Once per sweep: records of the layout before shards, keyed
		// (op ID, n) (a byte string sorts before every shard number).
		begin, _ := tuple.Tuple{[]byte{}}.AppendPack(bytes.Clone(j.prefix))
		end, _ := tuple.Tuple{cutoff[:]}.AppendPack(bytes.Clone(j.prefix))
		tr.ClearRange(kv.KeyRange{Begin: begin, End: end})
	}
}

// recordSize is an upper bound of the bytes record adds for results.
func (o *op) recordSize(results int, valueBytes int) int {
	if o.off() {
		return 0
	}
	return valueBytes + results*(len(o.j.prefix)+40)
}
