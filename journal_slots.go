package fdbqueue

import (
	"bytes"
	"time"

	"github.com/fdbqueue/fdbqueue/tuple"
)

// Journal slots. An operation of a Queue or PriorityQueue that runs its
// own transactions (given a Database) under an ID of its own making is
// recognised only by its own retries: once it returns, its record is
// never read again. Such an operation writes its record at a slot key of
// its journal value instead of a key of its own: (shard, epoch, slot),
// laid out as a record (shard, ID, n) with the epoch an ID that its
// journal makes (time and random bytes) and the slot a small integer,
// and the value the operation's ID, a tag and the result. A slot is held
// by one operation at a time; when the operation returns without error
// (or with ErrEmpty: then no attempt committed) its slot is free for the
// next one, which overwrites the record: one write per operation, where a
// record of its own costs a write and, in a later operation, a clear.
// After any other error the slot is dropped (an attempt may still be
// recognised by nothing, but a late commit must not land on a record of
// another operation) and expires with its epoch.
//
// A retry reads the slot key (a normal point read) and finds its record
// only if the value starts with its ID. A result that does not fit one
// value with its ID (a batch, or a value near the limit) is written as
// records of the operation's own (shard, ID, n), with a slot value that
// says so (tag slotElsewhere); those records are cleared as any record.
//
// A journal starts a new epoch, with new slot keys, once its epoch is
// slotEpochAge old: the epoch's keys then expire as records made at its
// time do (expire), which bounds the slot keys of abandoned handles. An
// operation holds its slot for at most the retention, so its slot key is
// at most retention + slotEpochAge old by its maker's clock while it
// runs: clocks may disagree by up to retention - slotEpochAge (with the
// default retention, 8 min 45 s) without a client clearing a slot in use.
const (
	slotInline    = 0 // the value holds the result after the tag
	slotElsewhere = 1 // the results are in records (shard, ID, n)
	slotHeader    = len(OpID{}) + 1
)

// slotEpochAge is how old a journal's slot epoch gets before the next
// operation starts a new one: an eighth of the retention.
func (j *journal) slotEpochAge() time.Duration { return j.retention / 8 }

// takeSlot gives o a slot of the current epoch at time now (j.mu held).
func (j *journal) takeSlot(o *op, now time.Time) {
	// now.Sub(epoch) and now.Before(epoch), on the wall clock (the epoch's
	// time has no monotonic reading), in nanoseconds: a Sub of two Times
	// costs more than the rest of this function.
	if d := now.UnixNano() - j.epochNanos; j.epochGen == 0 || d >= int64(j.slotEpochAge()) || d < 0 {
		j.epoch = newOpIDAt(now)
		j.epochNanos = j.epoch.Time().UnixNano()
		j.epochGen++
		j.freeSlots = j.freeSlots[:0]
		clear(j.slotKeys)
		j.slotKeys = j.slotKeys[:0]
	}
	var n int64
	if k := len(j.freeSlots); k > 0 {
		n = j.freeSlots[k-1]
		j.freeSlots = j.freeSlots[:k-1]
	} else {
		n = int64(len(j.slotKeys))
		// The slots of an epoch spread over the shards, as records do.
		key, _ := tuple.Tuple{(int64(j.epoch[8]) + n) % journalShards, j.epoch[:], n}.AppendPack(bytes.Clone(j.prefix))
		j.slotKeys = append(j.slotKeys, key)
	}
	o.slotted, o.slot, o.slotGen, o.slotKey = true, n, j.epochGen, j.slotKeys[n]
}

// releaseSlot frees o's slot for the next operation, unless its epoch
// has ended (j.mu held).
func (j *journal) releaseSlot(o *op) {
	if o.slotGen == j.epochGen {
		j.freeSlots = append(j.freeSlots, o.slot)
	}
}

// Settling a slotted operation. An operation that recorded in a slot and
// then failed (a maybe-committed error, typically: its context ended
// during a commit) leaves its record, if that commit applied, at its slot
// key, not under its ID: a later call under the ID (WithOpID) that read
// only the records under the ID would not find it and would apply anew.
// So the journal remembers the slot of such an operation by its ID
// (remember), and a call of the same kind under that ID on the same
// journal, that is the same Queue or PriorityQueue value, resumes the
// slot (resume): its check reads the slot key as the operation's own
// retries did, with a normal read, so a commit of the first call that
// lands between its read and its commit makes it conflict; it takes the
// record if the slot's value starts with the ID (inline or elsewhere);
// if it applies anew, it records in the slot as the first call would
// have (and writes the marker of an ID its caller gave). Once one such
// call has returned without error and none is still running, the slot
// is forgotten, and free again if no such call wrote it: the record they
// found was the first call's, so no commit of it is still to land. If
// one wrote it, the first call's commit may still land after (a commit
// cut short by a cancellation goes on), so the slot is not reused, as
// after any error. Another journal (another Queue value, another
// process) knows nothing of the slot: a call under the ID there reads
// the records under the ID only, as before.
//
// What is remembered is bounded: at most maxUnsettled entries, and none
// older than the retention (a call under such an ID fails with
// ErrOperationExpired whatever is remembered).
type unsettledSlot struct {
	kind  string // the operation's journal kind: another kind does not resume it
	slot  int64
	gen   uint64 // the slot's epoch generation (see takeSlot)
	key   []byte
	busy  int  // calls resuming it now
	done  bool // one of them returned without error
	wrote bool // one of them recorded (in an attempt)
}

// maxUnsettled bounds the slots a journal remembers for settling.
const maxUnsettled = 1 << 10

// remember keeps o's slot for a later call under o's ID (j.mu held): o
// recorded in it and failed, so the slot is not reused (op.end).
func (j *journal) remember(o *op) {
	if j.unsettled == nil {
		j.unsettled = make(map[OpID]*unsettledSlot)
	}
	j.pruneUnsettled()
	j.unsettled[o.id] = &unsettledSlot{kind: o.journalKind(), slot: o.slot, gen: o.slotGen, key: o.slotKey}
}

// pruneUnsettled drops the remembered slots of operations older than the
// retention and, if as many as maxUnsettled remain, the oldest one that
// no call is resuming, to make room for one more (j.mu held): a call
// resuming a slot keeps it remembered if it fails (settled), and would
// find nothing to keep it under. It runs only after a failure (see
// remember), so it may take a few microseconds.
func (j *journal) pruneUnsettled() {
	pruneLogged(j.unsettled, j.now().Add(-j.retention), func(u *unsettledSlot) bool { return u.busy == 0 })
}

// pruneLogged drops from m the IDs made before cutoff and, if as many as
// maxUnsettled remain, the oldest whose entry may go, to make room for
// one more.
func pruneLogged[V any](m map[OpID]V, cutoff time.Time, mayGo func(V) bool) {
	var oldest OpID
	for id, v := range m {
		if id.Time().Before(cutoff) {
			delete(m, id)
		} else if mayGo(v) && (oldest == (OpID{}) || bytes.Compare(id[:8], oldest[:8]) < 0) {
			oldest = id
		}
	}
	if len(m) >= maxUnsettled && oldest != (OpID{}) {
		delete(m, oldest)
	}
}

// rememberKind keeps the kind of o, which recorded under an ID of its own
// making, not in a slot (a JobQueue's operation, a batch's), and failed,
// for a call under its logged ID (j.mu held): a call of another kind
// under the ID is refused (checkLoggedKind), as under an ID whose marker
// names another kind, since o wrote no marker; run, it would take o's
// records for its own or, finding none, write a marker that keeps o from
// being settled under the ID. Kept for the retention, up to maxUnsettled.
func (j *journal) rememberKind(o *op) {
	if j.loggedKinds == nil {
		j.loggedKinds = make(map[OpID]string)
	}
	pruneLogged(j.loggedKinds, j.now().Add(-j.retention), func(string) bool { return true })
	j.loggedKinds[o.id] = o.journalKind()
	j.nLogged.Store(int32(len(j.loggedKinds)))
}

// forgetKind drops the kind remembered under id once a call under it
// returned without error (j.mu held): it settled the logged operation,
// whose records a later operation of the handle clears.
func (j *journal) forgetKind(id OpID) {
	if _, ok := j.loggedKinds[id]; ok {
		delete(j.loggedKinds, id)
		j.nLogged.Store(int32(len(j.loggedKinds)))
	}
}

// checkLoggedKind makes o, begun under a caller's ID, fail its check
// when the ID is one the journal logged for an operation of another kind
// (see rememberKind).
func (j *journal) checkLoggedKind(o *op) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if k, ok := j.loggedKinds[o.id]; ok && k != o.journalKind() {
		o.loggedFor = k
	}
}

// resume gives o, begun under a caller's ID, the slot remembered under
// that ID, if there is one for its kind (j.mu held).
func (j *journal) resume(o *op) {
	u := j.unsettled[o.id]
	if u == nil {
		return
	}
	if u.kind != o.journalKind() {
		// The ID was logged for another kind of call: refused (check),
		// so that this call's marker cannot keep that call from being
		// settled under its ID.
		o.loggedFor = u.kind
		return
	}
	u.busy++
	o.slotted, o.slot, o.slotGen, o.slotKey, o.resumed = true, u.slot, u.gen, u.key, true
	// Its records under the ID (the first call's, when they did not fit
	// the slot; its marker, if it records) are cleared by their range
	// once it succeeds (end).
	o.wide = true
}

// logged reports whether opts give an ID under which the journal
// remembers a slot (see resume). A staged take, which reads only the
// records under its ID, must not run under such an ID (see refuseLogged):
// a Dequeue or pop under it runs as the plain take, which resumes the
// slot.
func (j *journal) logged(opts []OpOption) bool {
	if len(opts) == 0 || j.disabled {
		return false
	}
	c := applyOpOptions(opts)
	if !c.hasID {
		return false
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.unsettled[c.id] != nil
}

// refuseLogged makes o, a staged take, fail its check (as resume makes a
// call of another kind fail) when the journal remembers a slot under its
// ID: the take would read only the records under the ID, not the slot,
// and so apply anew whether or not the logged call had committed, and its
// marker could then keep that call from being settled under the ID.
func (j *journal) refuseLogged(o *op) {
	if o.fresh || j.disabled {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if u := j.unsettled[o.id]; u != nil {
		o.loggedFor = u.kind
	}
}

// settled ends o's resumption of a remembered slot (j.mu held): once a
// call returned without error and none is running, the slot is
// forgotten, and free again if none of them wrote it and its epoch has
// not ended (see unsettledSlot). After an error (ErrEmpty too: the
// first call's commit may still land) it stays remembered and is not
// reused. It reports whether the records under the ID may be cleared:
// not while another call settling it runs, which may read them (the
// slot then says they hold the result), nor after an error.
func (j *journal) settled(o *op, err error) bool {
	u := j.unsettled[o.id]
	if u == nil || u.gen != o.slotGen || u.slot != o.slot {
		// Dropped meanwhile (pruneUnsettled): the slot is not reused,
		// and no call resumes it any more.
		return true
	}
	u.busy--
	u.done = u.done || err == nil
	u.wrote = u.wrote || o.recorded.Load()
	if u.done && u.busy == 0 {
		delete(j.unsettled, o.id)
		if !u.wrote {
			j.releaseSlot(o)
		}
		return true
	}
	return false
}
