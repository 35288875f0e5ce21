package fdbqueue

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"
	mrand "math/rand/v2"
	"slices"
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
	// math/rand/v2's generator: ChaCha8, seeded from the system's
	// entropy, unpredictable and about ten times cheaper than a
	// crypto/rand.Read (a system call on some kernels).
	binary.BigEndian.PutUint64(id[8:], mrand.Uint64())
	return id
}

// Time returns when the ID was made.
func (id OpID) Time() time.Time {
	return time.UnixMicro(int64(binary.BigEndian.Uint64(id[:8])))
}

// String returns the ID in hex.
func (id OpID) String() string { return hex.EncodeToString(id[:]) }

// Bytes returns a copy of the ID's 16 bytes, for an OpID that is not
// addressable (a field of a returned value), on which id[:] does not
// compile.
func (id OpID) Bytes() []byte { return append([]byte(nil), id[:]...) }

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
// however often the attempt is retried after commit_unknown_result.
//
// Also use it to settle an operation that failed with an error for which
// kv.MaybeCommitted is true: called again with the same ID within the
// journal retention, it returns the first call's result if that call
// committed (the item a Dequeue removed) and applies the operation now if
// it did not. Under an ID of yours, the second call may be made through
// any handle of the queue, in any process. An Enqueue, Dequeue, Push or
// pop (not staged) given a Database without WithOpID makes an ID of its
// own, which its error holds (an *UnknownResultError; the queue also logs
// it, WithLogger), and records in a journal slot that only its Queue or
// PriorityQueue value knows (it remembers those of its last 1,024 such
// failures): settle it given a Database, on that same value, with
// WithOpID and that ID (a staged Dequeue or pop under it runs as the
// plain one, which reads the slot; a Wait form, which cannot, fails with
// ErrInvalidArgument). On another value, or in another process, the call
// may not find the record and then applies the operation again: if you
// may need to settle there, pass an ID of yours to the first call. A take
// under an ID that finds nothing commits a write conflict on the ID's
// record key before it returns ErrEmpty (one commit, where a take without
// an ID commits nothing): the first call's take, with its commit cut short
// in flight, may have taken its item from where this call does not look
// (a staged take collects it from its request's result), and that commit
// then fails instead of landing after the answer. On a Queue served by
// place, a settling take that skips items due to the line's requests also
// writes a conflict over them (the first call may have taken one of them
// before its request came), and a staged Dequeue that withdraws its
// request writes one on the record key. In your own transaction, such an
// ErrEmpty settles the operation once your transaction commits.
//
// An ID names one operation call: give it to no other call. A second call
// under it in the same transaction as a first that took effect fails with
// ErrInvalidArgument (and that transaction's commit fails, with
// kv.ErrAccessedUnreadable: the second call's read of the ID's marker
// failed); so does, later, a call of another kind under it while the
// first call's records are kept
// (the ID's marker says which kind it was given to: see "Exactly once" in
// docs/design.md; PopMin and PopMax are two kinds, and a batch, Wait or
// staged form is of its operation's kind), and, on the value that logged it,
// a call of another kind under an ID the queue logged. A second call of the
// same kind in a later transaction cannot be told from a retry: while the
// first call's records are kept, it returns the first call's result and does
// nothing. They are not kept for long after a call given a Database returned
// without error: nothing will retry it, and a later operation of the
// handle (usually the next) clears them; a call under the ID after that
// applies the operation anew, and so may one that was running when that
// call returned. Settle an operation with one call at a time (calls that
// settle, on a Queue or PriorityQueue value, an ID it logged may overlap:
// the records stay until none of them runs).
// (Those of a call in your transaction, or of one that failed, are kept
// until they expire, after twice the journal retention, or until a call
// under the ID given a Database returns without error.) Make each ID with
// NewOpID: the operation fails with ErrInvalidArgument given the zero ID or
// one dated further ahead of the client's clock than the journal retention,
// and with ErrOperationExpired given one older than the retention. Cost: a
// call under an ID of yours reads its record and the ID's marker on every
// attempt (two point reads, issued with its other reads), where one under an
// ID of its own reads nothing on its first attempt and its record on a
// retry, and it writes the marker beside its record.
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
	// swept is, for each group of expireShards shards, the cutoff
	// (Unix µs) its last sweep cleared up to (see expire).
	swept [journalShards / expireShards]atomic.Int64

	mu      sync.Mutex
	pending []kv.KeyRange // records of operations that completed, to clear

	gate  *confGate // the stored configuration's check (config.go)
	track *tracker  // depth counters, metrics and logs (observe.go)

	// Slots (see slot), under mu: the current epoch's ID, its generation
	// (counted up at each new epoch), the slots free for reuse, the next
	// new slot and the keys of the epoch's slots so far.
	epoch      OpID
	epochNanos int64 // epoch.Time().UnixNano()
	epochGen   uint64
	freeSlots  []int64
	slotKeys   [][]byte
	// unsettled remembers, by ID, the slots of operations that ended
	// with an error after recording (see remember), under mu.
	unsettled map[OpID]*unsettledSlot
	// loggedKinds remembers, by ID, the kinds of operations under an ID
	// of their own making that recorded under it (not in a slot) and
	// failed, whose IDs the queue logged (see rememberKind), under mu;
	// nLogged is its size, read without mu.
	loggedKinds map[OpID]string
	nLogged     atomic.Int32

	// The declared retention (see declare): its key, this handle's
	// retention as Max's operand, whether the key is known to hold at
	// least that, and whether an expiry is owed (an operation whose turn
	// it was had no read of the key to expire with).
	declKey   []byte
	declParam []byte
	known     atomic.Bool
	expireDue atomic.Bool
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
		track:     newTracker(queuePrefix, cfg),
	}
	j.declKey, _ = meta.Pack(tuple.Tuple{"r"})
	j.declParam = binary.LittleEndian.AppendUint64(nil, uint64(cfg.retention))
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
	kind     string        // the operation's kind, for the metrics ("": not reported)
	// mark, when set, is the kind the journal names instead of kind (see
	// journalKind). Set before beginInto.
	mark string
	// wide is set once an attempt recorded more than one key (several
	// results, or a result in chunks): its records are then cleared by
	// their whole range, else by their one key.
	wide bool
	// rng is the record range and key0 the first record's key, built
	// once (see keys).
	rng  kv.KeyRange
	key0 []byte
	// fresh: begin made the ID; recorded: an attempt has called record.
	// A fresh operation's records can exist only once recorded is set.
	fresh    bool
	recorded atomic.Bool
	// slotted: the operation's record is at slotKey, its journal's slot
	// slot of epoch generation slotGen (see takeSlot).
	slotted bool
	slot    int64
	slotGen uint64
	slotKey []byte
	// resumed: the slot is the one remembered under the operation's ID,
	// given by its caller (see unsettledSlot).
	resumed bool
	// loggedFor is the kind of the operation whose slot is remembered
	// under the ID, when it is not this operation's (see resume), or when
	// this operation is a staged take, which cannot read the slot
	// (refuseLogged): check then fails.
	loggedFor string
	// slotVal backs the slot's value that record writes: the backend
	// copies what Set is given (kv.Transaction.Set), so the op (pooled
	// with its call) reuses it from one operation to the next.
	slotVal []byte
	// recBuf backs the record of a take of one item whose queue builds
	// it (queueEnd.acceptInto), reused as slotVal is.
	recBuf []byte
	// decl is the attempt's read of the declared retention (see
	// readDeclared), if it made one.
	decl declRead
	// headTake: the operation takes items from an end of a queue, whose
	// read conflict covers the end up to the items it takes (takeEnd),
	// so check leaves the record key's conflict to it (recordConflict).
	headTake bool
}

// maxKeptSlotVal is the largest slotVal an op keeps for the next
// operation: a record of a large dequeued value is not kept in the pool.
const maxKeptSlotVal = 1 << 10

// off reports whether the operation does without the journal.
func (o *op) off() bool { return o.j.disabled || o.skip }

// applyOpOptions returns the configuration opts make (a separate function:
// the config it passes to opts escapes to the heap).
func applyOpOptions(opts []OpOption) opConfig {
	var c opConfig
	for _, o := range opts {
		if o != nil { // a nil OpOption is ignored, not a panic
			o(&c)
		}
	}
	return c
}

// begin starts an operation: it picks its ID and, when the operation runs
// its own transactions, takes over clearing a few completed records.
func (j *journal) begin(t kv.Transactor, opts []OpOption) *op {
	return j.beginMarked(t, "", opts)
}

// beginMarked is begin for an operation that the journal names mark (see
// op.mark; "": its kind). The mark is set before beginInto, whose check
// of the kind an ID was logged for (checkLoggedKind) compares the kinds
// the journal names: a staged PopMax's, not the metrics' "pop".
func (j *journal) beginMarked(t kv.Transactor, mark string, opts []OpOption) *op {
	var kind string
	if ob, ok := t.(observed); ok {
		kind = ob.opKind()
	}
	_, owned := t.(kv.Database)
	o := &op{mark: mark}
	j.beginInto(o, kind, owned, false, opts)
	return o
}

// beginInto is begin on an op the caller provides (zero, or reset by
// op.reset, with its mark set if it has one): kind names it for the
// metrics, and for the journal unless marked, owned says it runs its own
// transactions (a Database). slots lets an owned operation with an ID of
// its own making record in a slot (see takeSlot): the operations of a
// Queue or PriorityQueue, whose results are values or nothing.
func (j *journal) beginInto(o *op, kind string, owned, slots bool, opts []OpOption) {
	var c opConfig
	if len(opts) > 0 {
		c = applyOpOptions(opts)
	}
	o.j, o.id, o.fresh, o.kind, o.owned = j, c.id, !c.hasID, kind, owned
	var now time.Time
	if !c.hasID && !j.disabled {
		// Made even when the operation will not record (skip): the budget
		// counts its record key's length (overheadCost), whatever the
		// transactor. Without a journal the ID is never used.
		now = j.now()
		o.id = newOpIDAt(now)
	}
	// Inside a caller's transaction, without an ID the caller keeps across
	// its retries, every retry is a new operation to the journal: a record
	// could never be found again, so none is read or written.
	o.skip = !o.owned && !c.hasID
	if c.hasID && j.nLogged.Load() > 0 {
		j.checkLoggedKind(o)
	}
	if o.owned && !j.disabled {
		j.mu.Lock()
		if n := min(len(j.pending), maxCarriedCleanups); n > 0 {
			o.cleanups = append(o.cleanups, j.pending[len(j.pending)-n:]...)
			j.pending = j.pending[:len(j.pending)-n]
		}
		if slots && !c.hasID {
			j.takeSlot(o, now)
		} else if slots && len(j.unsettled) > 0 {
			j.resume(o)
		}
		j.mu.Unlock()
	}
}

// end finishes an operation. When it ran its own transactions and committed,
// its records will never be consulted again and are queued for clearing by a
// later operation; otherwise the cleanups it took are handed back.
func (o *op) end(err error) { o.endAs(err, err) }

// endAs is end, with the operation counted and logged with the outcome
// of reported instead of err's: a settling Lease that committed its
// record of leasing nothing ends with nil, its outcome empty.
func (o *op) endAs(err, reported error) {
	// Counted and logged last: a maybe-committed error's log line names
	// the ID to settle the operation with, so its slot must be
	// remembered (below) before anyone can read the line.
	defer o.j.track.obs.ended(o.kind, o.id, !o.off(), reported)
	if o.j.disabled || !o.owned {
		return
	}
	if err == nil && o.slotted && !o.wide {
		// The common end: the slot is free again, its record stays for
		// the next operation to overwrite, nothing to clear.
		o.j.mu.Lock()
		o.j.releaseSlot(o)
		o.j.mu.Unlock()
		return
	}
	o.j.mu.Lock()
	defer o.j.mu.Unlock()
	// After an error the slot may hold this operation's record from a
	// commit whose outcome was unknown, which a later call under its ID
	// must find: it is not reused, unless no attempt committed (ErrEmpty:
	// a retry would have found the record) or none wrote it (record never
	// called), so that it still holds the previous operation's record,
	// which no one will look for.
	//
	// Such a slot is remembered under the operation's ID, for a call
	// under it to settle the operation (see unsettledSlot).
	keep := false // the records under the ID stay (see settled)
	switch {
	case o.resumed:
		keep = !o.j.settled(o, err)
	case o.slotted && (err == nil || errors.Is(err, ErrEmpty) || !o.recorded.Load()):
		o.j.releaseSlot(o)
	case o.slotted:
		o.j.remember(o)
	case o.fresh && err != nil && !errors.Is(err, ErrEmpty) && o.recorded.Load():
		o.j.rememberKind(o)
	case !o.fresh && err == nil && o.j.nLogged.Load() > 0:
		o.j.forgetKind(o.id)
	}
	if err != nil {
		// Not applied: hand the cleanups it took back.
		for _, r := range o.cleanups {
			o.j.addPending(r)
		}
		return
	}
	// The commit that wrote this operation's records also applied the
	// cleanups it carried; what remains is to clear its own records
	// (those under a remembered slot's ID once no call settling it runs:
	// one that began before this one returned reads them).
	if keep {
		return
	}
	if o.wide {
		o.j.addPending(o.recordRange())
	} else if !o.slotted { // a slot's record stays, for the next operation to overwrite
		// Its one record key, as a point range (see keys).
		o.j.addPending(kv.KeyRange{Begin: o.key0, End: o.key0[:len(o.key0)+1]})
	}
}

// errEmptyFenced is takeEnd's ErrEmpty when its attempt must commit a
// fence first (see takeEnd): the call commits it, then returns ErrEmpty
// (call.emptied).
var errEmptyFenced = fmt.Errorf("%w (after a fence for earlier calls under the ID)", ErrEmpty)

// mayLandLate reports whether an earlier commit of the operation may still
// land: one of an earlier call under its ID (WithOpID), or of an attempt
// that recorded. A fresh ID's first attempts have none.
func (o *op) mayLandLate() bool { return !o.off() && (!o.fresh || o.recorded.Load()) }

// emptyTaken returns ErrEmpty alone for err, the error of a take that
// found nothing to take, when the retry loop marked it maybe-committed
// (kv.RetryLoop marks every error after an attempt whose commit outcome
// was unknown) but the journal settles it: the attempt that found nothing
// read the operation's record key with a normal read and found no record,
// and FoundationDB reports commit_unknown_result only once that commit
// can no longer land (tryCommit waits for commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp), while nothing clears a record before
// its operation ends: no attempt took anything. Without the journal an
// earlier attempt may have taken an item, lost since: err stays as it is.
func (o *op) emptyTaken(err error) error {
	if err == nil || o.off() || !errors.Is(err, ErrEmpty) || !kv.MaybeCommitted(err) {
		return err
	}
	return ErrEmpty
}

// addPending queues r for clearing by a later operation (j.mu held); past
// maxPendingClears it is left to expire.
func (j *journal) addPending(r kv.KeyRange) {
	if len(j.pending) < maxPendingClears {
		j.pending = append(j.pending, r)
	}
}

// shard is the journal shard of the operation's records.
func (o *op) shard() int64 { return int64(o.id[8]) }

// recordRange is the range of the operation's records. The caller must not
// modify its bounds.
func (o *op) recordRange() kv.KeyRange {
	o.keys()
	return o.rng
}

// keys builds, in one allocation, the record range (shard, id) and the
// first record's key (shard, id, 0), with a byte of room after the key for
// the point range that clears it: [key0, key0+\x00).
func (o *op) keys() {
	if o.key0 != nil {
		return
	}
	n := len(o.j.prefix) + 2 + 2*len(o.id) + 2 // prefix, shard, escaped id, terminator
	buf := make([]byte, 0, 3*n+3)
	p, _ := tuple.Tuple{o.shard(), o.id[:]}.AppendPack(append(buf, o.j.prefix...))
	m := len(p)
	buf = append(p, 0xff)         // [0, m+1): the range's end
	buf = append(buf, p...)       // [m+1, 2m+1): its begin
	buf = append(buf, 0x14, 0x00) // the begin, then 0 (0x14 packs int 0): key0; and \x00
	o.rng = kv.KeyRange{Begin: buf[m+1 : 2*m+1 : 2*m+1], End: buf[: m+1 : m+1]}
	o.key0 = buf[m+1 : 2*m+2 : 2*m+3]
}

// recordPrefixLen is the length of the packed (shard, id) under the
// journal's prefix, the record range's begin (see keys), computed without
// building it.
func (o *op) recordPrefixLen() int {
	return len(o.j.prefix) + packedIntLen(o.shard()) + 2 + len(o.id) + bytes.Count(o.id[:], []byte{0})
}

// recordKeyLen is len(o.recordKey(n)), without building the key.
func (o *op) recordKeyLen(n int) int { return o.recordPrefixLen() + packedIntLen(int64(n)) }

// recordPrefixMax bounds recordPrefixLen for any operation of the
// journal: the shard packed in two bytes and every byte of the ID escaped.
// Budgets count with it, so that whether a batch fits does not depend on
// the bytes of a random ID, and so that the clean-ups an operation
// carries, other operations' record ranges, are not under-counted.
func (o *op) recordPrefixMax() int { return len(o.j.prefix) + 2 + 2 + 2*len(o.id) }

// keysFit fails, with ErrInvalidArgument and kv.ErrKeyTooLarge, for a
// queue prefix so long that an operation's first journal keys (its first
// record, (shard, id, 0), and its marker, (shard, id, -1), or its slot,
// (shard, epoch, slot)) would exceed the key limit for some ID: counted
// for the longest, every ID byte escaped (recordPrefixMax), so that
// whether an operation fits does not depend on the random bytes of its
// ID or of its journal's epoch. (Without it, near the limit, an operation
// failed with key_too_large under one ID and worked under the next.)
func (j *journal) keysFit() error {
	if j.disabled {
		return nil
	}
	n := (&op{j: j}).recordPrefixMax() + 2 // -1 packs to 2 bytes, 0 to 1, a slot below 256 to at most 2
	if n > kv.MaxKeySize {
		return fmt.Errorf("%w: the subspace prefix is too long: its journal keys take up to %d bytes, over the %d-byte key limit (%w); use a shorter prefix, or WithoutIdempotency",
			ErrInvalidArgument, n, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	return nil
}

// packedIntLen is the length of a non-negative int64 packed as a tuple
// element: its code and its minimal big-endian bytes.
func packedIntLen(v int64) int { return 1 + (bits.Len64(uint64(v))+7)/8 }

// recordKey is the key of the operation's n-th record (its first chunk,
// see setChunked). The caller must not modify the key.
func (o *op) recordKey(n int) []byte {
	if n == 0 {
		o.keys()
		return o.key0
	}
	k, _ := tuple.Tuple{o.shard(), o.id[:], n}.AppendPack(bytes.Clone(o.j.prefix))
	return k
}

// check looks up the operation's records in this attempt. It returns the
// pending read (nil when the journal is disabled). The read is a normal
// read: if an earlier attempt's commit lands after this attempt's read
// version, this attempt conflicts instead of applying twice. It reads
// nothing (and returns an empty result) while no attempt of an operation
// with an ID of its own making has recorded: its first attempt, typically,
// costs no journal read.
//
// It fails with ErrOperationExpired, reading nothing, once the operation
// is older than its retention: an expiry may have cleared its record.
func (o *op) check(tr kv.Transaction) (kv.RangeResult, error) { return o.lookup(tr, true) }

// checkAnyAge is check without its age test: it reads the record of an
// operation older than its retention too, which an expiry clears only at
// twice the retention. Only the staged call's cleanup uses it (abandon):
// it puts back the item of a take it finds recorded, whatever its age,
// and does not replay. Its read still fails with ErrOperationExpired when
// it finds no record past the retention (recordRead.GetSlice): then it
// cannot tell a take that never applied from one whose record an expiry
// cleared.
func (o *op) checkAnyAge(tr kv.Transaction) (kv.RangeResult, error) { return o.lookup(tr, false) }

// lookup is check; aged makes it fail, reading nothing, past the
// retention.
func (o *op) lookup(tr kv.Transaction, aged bool) (kv.RangeResult, error) {
	if o.off() {
		return nil, nil
	}
	o.readDeclared(tr)
	if o.fresh && !o.recorded.Load() {
		// No attempt has written a record under this new ID: there is
		// none to find, no earlier commit to conflict with, and none
		// that expiry could clear (so its age does not matter). The key
		// the record will go to is a read conflict all the same: a call
		// that settles the operation under its logged ID (WithOpID)
		// writes it, so this attempt's commit, interrupted by its
		// context and landing after the settling call's, conflicts
		// instead of applying a second time. Nothing else it read need
		// be written by the settling call: a producer's reads conflict
		// with nothing, and a take may take other items than the
		// settling call (a Lease picks among its candidates and adds a
		// conflict on the jobs it takes only; a DequeueBatch after a
		// staged line's items, on the items it takes only). A take
		// from an end of a queue whose read conflict covers the end
		// up to what it takes (headTake) needs none: the settling
		// call clears an item in that range or, where a staged line's
		// requests came for those items since, writes a conflict over
		// them (takeEnd's fence), or someone else cleared one, and any
		// of these writes makes this attempt conflict. (takeEnd adds
		// the record conflict when this attempt skips a staged line's
		// items, since it then conflicts on the items it takes only.)
		if !o.headTake {
			o.recordConflict(tr)
		}
		return noRecords, nil
	}
	if o.id == (OpID{}) {
		return nil, fmt.Errorf("%w: the zero OpID (make one with NewOpID)", ErrInvalidArgument)
	}
	if o.loggedFor != "" && o.loggedFor == o.journalKind() {
		return nil, fmt.Errorf("%w: op %s is the ID this queue logged for a %q operation, whose record is in a journal slot that a staged wait does not read: settle it with a call that does not wait (an OpID names one operation call)",
			ErrInvalidArgument, o.id, o.loggedFor)
	}
	if o.loggedFor != "" {
		return nil, fmt.Errorf("%w: op %s is the ID this queue logged for a %q operation, not %q: call that to settle it (an OpID names one operation call)",
			ErrInvalidArgument, o.id, o.loggedFor, o.journalKind())
	}
	age := o.j.now().Sub(o.id.Time())
	if aged {
		if err := o.expired(age); err != nil {
			return nil, err
		}
	}
	if age < -o.j.retention {
		// Further ahead than clocks may disagree (WithJournalRetention):
		// not an ID NewOpID made, and its record would outlive expiry.
		// Measured against the system clock too, which NewOpID reads,
		// for a journal on a test's clock set in the past.
		if ahead := o.id.Time().Sub(time.Now()); ahead > o.j.retention {
			return nil, fmt.Errorf("%w: op %s is dated %v ahead of the clock, more than the retention %v (make IDs with NewOpID)",
				ErrInvalidArgument, o.id, ahead.Round(time.Second), o.j.retention)
		}
	}
	var marker kv.FutureValue
	if !o.fresh {
		// A snapshot read: the first record's read makes the conflict.
		marker = tr.Snapshot().Get(o.markerKey())
	}
	if o.slotted {
		return &recordRead{tr: tr, o: o, first: tr.Get(o.slotKey), marker: marker, slot: true}, nil
	}
	return &recordRead{tr: tr, o: o, first: tr.Get(o.recordKey(0)), marker: marker}, nil
}

// expired fails with ErrOperationExpired when the operation is age old,
// more than its handle's retention: an expiry may have cleared its
// records (it clears them at twice the retention, by its own clock).
func (o *op) expired(age time.Duration) error {
	if age > o.j.retention {
		return fmt.Errorf("%w: op %s is %v old, retention %v", ErrOperationExpired, o.id, age.Round(time.Second), o.j.retention)
	}
	return nil
}

// noRecords is check's result when there is nothing to read. It is never
// modified: GetSlice on a done recordRead only reads it.
var noRecords = &recordRead{done: true}

// recordRead is check's read: a point read of the operation's first record
// key, which every attempt that records writes (record writes at least one
// record, and a record's first chunk is at its key), so its read conflict
// range covers every earlier attempt's commit. Only when that key exists
// (the operation was applied: rare) does GetSlice read the whole record
// range, a second round trip. A point read costs less than a range read in
// the engine and in the conflict check of every commit.
//
// GetSlice must not be called from two goroutines at once (applied calls
// it once; staging's eager calls it from its one goroutine).
type recordRead struct {
	tr     kv.Transaction
	o      *op
	first  kv.FutureValue
	marker kv.FutureValue // the marker's read (markerKey), for a chosen ID
	slot   bool           // first reads the operation's slot (see takeSlot)
	marked bool           // the marker is there (a committed call under the ID)
	done   bool
	kvs    []kv.KeyValue
	err    error
}

// GetSlice returns the operation's records in key order, none if it was not
// applied.
func (r *recordRead) GetSlice() ([]kv.KeyValue, error) {
	if !r.done {
		r.done = true
		if r.marker != nil {
			mv, err := r.marker.Get()
			if r.err = r.o.checkMarker(mv, err); r.err != nil {
				return nil, r.err
			}
			r.marked = mv != nil
		}
		v, err := r.first.Get()
		if r.slot && err == nil {
			if len(v) < slotHeader || !bytes.Equal(v[:len(OpID{})], r.o.id[:]) {
				v = nil // another operation's record, or none
			} else if v[slotHeader-1] == slotInline {
				r.kvs = []kv.KeyValue{{Key: r.o.slotKey, Value: v[slotHeader:]}}
				v = nil
			}
		}
		switch {
		case err != nil:
			r.err = err
		case v != nil:
			r.kvs, r.err = r.tr.GetRange(r.o.recordRange(), kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
			if r.marked && len(r.kvs) > 0 && bytes.Equal(r.kvs[0].Key, r.o.markerKey()) {
				r.kvs = r.kvs[1:] // the marker sorts first: (shard, id, -1)
			}
		}
		if r.err == nil && len(r.kvs) == 0 {
			// No record: the operation was not applied, unless an expiry
			// cleared its record. check measured the age before the read
			// version was known, and FoundationDB's read version is a
			// future (fdb_transaction_get_read_version, which every read
			// waits for) that can come after an expiry whose clock had
			// passed twice the retention. Measured again now, once the
			// read returned: any expiry it sees read its clock before.
			r.err = r.o.expired(r.o.j.now().Sub(r.o.id.Time()))
		}
	}
	return r.kvs, r.err
}

// Iterator iterates over GetSlice's result.
func (r *recordRead) Iterator() kv.RangeIterator { return &recordIter{r: r, i: -1} }

type recordIter struct {
	r   *recordRead
	i   int
	err error
}

func (it *recordIter) Next() bool {
	kvs, err := it.r.GetSlice()
	if err != nil {
		it.err = err
		return false
	}
	it.i++
	return it.i < len(kvs)
}

func (it *recordIter) KeyValue() kv.KeyValue { return it.r.kvs[it.i] }

func (it *recordIter) Err() error { return it.err }

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
	o.j.track.obs.replayed(o.kind, o.id)
	if r, ok := heldRead(rr).(*recordRead); ok && r.marked {
		o.wide = true // the marker goes with the records (end)
	}
	if r, ok := rr.(*recordRead); ok && !o.fresh && r.tr != nil {
		// Under an ID its caller chose, this call may be settling a
		// staged call whose cleanup put the item back and erased this
		// record, in a commit cut short by the cleanup's timeout that can
		// still land (abandon, staging_withdraw.go; FoundationDB fences an
		// interrupted commit only before it reports
		// commit_unknown_result, commitDummyTransaction in
		// fdbclient/NativeAPI.actor.cpp). The cleanup read the record's
		// key: a write conflict there makes it fail if it lands after
		// this replay's commit, rather than return an item this call
		// returns too. (The staged waiter, whose reads are wrapped, adds
		// it itself: replayed.)
		if err := r.tr.AddWriteConflictKey(o.recordKeyOrSlot()); err != nil {
			return nil, false, err
		}
	}
	if len(kvs) > 1 {
		// Several records, or one in chunks: when an earlier call under
		// this ID (WithOpID) wrote them, this call records nothing, and
		// must still clear them all (end).
		o.wide = true
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
// now and then clears the records old enough for every handle (expire).
//
// A record holds what the operation returns (a dequeued item's stored value,
// as it is): one longer than the value limit is written in chunks.
func (o *op) record(tr kv.Transaction, results ...[]byte) {
	if o.off() {
		return
	}
	o.recorded.Store(true)
	if !o.fresh {
		tr.SetVersionstampedValue(o.markerKey(), o.markerValue())
		o.wide = true // cleared with the records: by their range
	}
	if o.slotted {
		var one []byte
		if len(results) == 1 {
			one = results[0]
		}
		if len(results) <= 1 && slotHeader+len(one) <= kv.MaxValueSize {
			v := append(slices.Grow(o.slotVal[:0], slotHeader+len(one)), o.id[:]...)
			v = append(append(v, slotInline), one...)
			o.slotVal = v
			tr.Set(o.slotKey, v)
			o.carry(tr)
			return
		}
		v := append(slices.Grow(o.slotVal[:0], slotHeader), o.id[:]...)
		v = append(v, slotElsewhere)
		o.slotVal = v
		tr.Set(o.slotKey, v)
		o.wide = true // its records are cleared by their range
	}
	if len(results) == 0 {
		setChunked(tr, o.recordKey(0), []byte{})
	}
	for i, r := range results {
		if r == nil {
			r = []byte{}
		}
		setChunked(tr, o.recordKey(i), r)
		if i > 0 || len(r) > kv.MaxValueSize {
			o.wide = true
		}
	}
	o.carry(tr)
}

// carry clears, in tr, the records of completed operations the operation
// took over, declares the handle's retention while it must (see
// declare), and now and then expires old records.
func (o *op) carry(tr kv.Transaction) {
	for _, r := range o.cleanups {
		if isPointRange(r) {
			tr.Clear(r.Begin) // the same mutation and conflict range
		} else {
			tr.ClearRange(r)
		}
	}
	j := o.j
	due := j.count.Add(1)%j.gcEvery == 0
	if due || !j.known.Load() || j.expireDue.Load() {
		o.declare(tr, due)
	}
	if o.decl.v != nil {
		o.decl = declRead{}
	}
}

// recordConflict makes the attempt conflict on the key the operation's
// record goes to, if it is a first attempt under an ID of the operation's
// own making (see check).
func (o *op) recordConflict(tr kv.Transaction) {
	if o.owned && o.fresh && !o.recorded.Load() && !o.off() {
		_ = tr.AddReadConflictKey(o.recordKeyOrSlot()) // never inverted
	}
}

// recordKeyOrSlot is the key of the operation's (first) record: its slot,
// or its record key 0.
func (o *op) recordKeyOrSlot() []byte {
	if o.slotted {
		return o.slotKey
	}
	return o.recordKey(0)
}

// isPointRange reports whether r holds the one key r.Begin (r.End is
// r.Begin+\x00).
func isPointRange(r kv.KeyRange) bool {
	b, e := r.Begin, r.End
	return len(e) == len(b)+1 && e[len(b)] == 0 && bytes.Equal(b, e[:len(b)])
}
