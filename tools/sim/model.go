package sim

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math"
	"slices"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Kind is the kind of a recorded operation.
type Kind uint8

// Operation kinds. Observe is not a queue method: it is the harness's read
// of the whole structure at a quiescent point, which checks that the
// history ends in the state the database holds.
const (
	Enqueue Kind = iota
	Dequeue
	DequeueBatch
	Push
	PopMin
	PopMax
	Observe
	// Hide and Unhide are the two halves of a staged dequeue or pop that
	// ended with an error and left no journal record: it may have taken the
	// item at the head (a fulfiller handed it to its request) and, when its
	// context ended, written it back at its original key. The history holds
	// both, over the failed call's interval, paired by Input.Tag.
	Hide
	Unhide
	// EnqueueBatch enqueues Input.N items in one transaction: all or none.
	// Their IDs are BatchIDs(Input).
	EnqueueBatch
	// PushBatch pushes Input.N items to a priority queue in one
	// transaction: all or none. Their IDs are BatchIDs(Input), their
	// priorities BatchPriorities(Input).
	PushBatch
)

// isEnqueue reports whether k adds items to a queue.
func isEnqueue(k Kind) bool {
	return k == Enqueue || k == EnqueueBatch || k == Push || k == PushBatch
}

// isTake reports whether k removes items from a queue's end.
func isTake(k Kind) bool {
	return k == Dequeue || k == DequeueBatch || k == PopMin || k == PopMax
}

var kindNames = [...]string{"Enqueue", "Dequeue", "DequeueBatch", "Push", "PopMin", "PopMax", "Observe", "Hide", "Unhide", "EnqueueBatch", "PushBatch"}

// BatchIDs returns the IDs of the items an operation adds: Item.ID for
// Enqueue and Push; for EnqueueBatch and PushBatch, Item.ID with j << 32
// added for its j-th item (the harness's IDs stay below 1 << 32 within a
// structure, apart from their tag in the top byte). When Input.Items is
// set (an operation that adds twins), their IDs.
func BatchIDs(in Input) []uint64 {
	if in.Items != nil && isEnqueue(in.Kind) {
		ids := make([]uint64, len(in.Items))
		for j, it := range in.Items {
			ids[j] = it.ID
		}
		return ids
	}
	switch in.Kind {
	case Enqueue, Push:
		return []uint64{in.Item.ID}
	case EnqueueBatch, PushBatch:
		ids := make([]uint64, in.N)
		for j := range ids {
			ids[j] = in.Item.ID + uint64(j)<<32
		}
		return ids
	}
	return nil
}

// BatchPriorities returns the priorities of the items a PushBatch pushes,
// in batch order: Item.Priority plus an offset of 0, 1 or 2 (minus, where
// adding would overflow) drawn for each item from a hash of Item.ID, so
// that a batch mixes a few priorities and repeats some of them. For a
// Push it is Item.Priority; for other kinds, nil. When Input.Items is
// set (an operation that adds twins), their priorities.
func BatchPriorities(in Input) []int64 {
	if in.Items != nil && (in.Kind == Push || in.Kind == PushBatch) {
		ps := make([]int64, len(in.Items))
		for j, it := range in.Items {
			ps[j] = it.Priority
		}
		return ps
	}
	switch in.Kind {
	case Push:
		return []int64{in.Item.Priority}
	case PushBatch:
		h := in.Item.ID * 0x9e3779b97f4a7c15
		ps := make([]int64, in.N)
		for j := range ps {
			off := int64((h >> (2*j + 11)) % 3)
			if in.Item.Priority > math.MaxInt64-2 {
				off = -off
			}
			ps[j] = in.Item.Priority + off
		}
		return ps
	}
	return nil
}

// batchItems returns the items an operation adds, in batch order: with
// their priorities for a Push or PushBatch, with none for an Enqueue or
// EnqueueBatch.
func batchItems(in Input) []Item {
	ids, ps := BatchIDs(in), BatchPriorities(in)
	items := make([]Item, len(ids))
	for j := range items {
		items[j].ID = ids[j]
		if ps != nil {
			items[j].Priority = ps[j]
		}
	}
	return items
}

// String returns the operation kind's name.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Item is an item in a history: its identifier, which names its value
// (values.go: the value is the ID's 8 bytes and a filler the ID picks),
// and, in a priority queue, its priority. Items of equal IDs have equal
// values: the harness enqueues such twins on purpose (Config.TwinProb),
// so an ID may be in a queue several times, and the checks count items by
// ID as a multiset.
type Item struct {
	ID       uint64
	Priority int64
}

// Input is the input of a recorded operation.
type Input struct {
	Kind Kind
	// Item is the item of an Enqueue or Push; for EnqueueBatch and
	// PushBatch, the source of BatchIDs and BatchPriorities.
	Item Item
	N    int // DequeueBatch, EnqueueBatch, PushBatch: the batch size
	// Items, when set, are the items an Enqueue, EnqueueBatch, Push or
	// PushBatch adds, in batch order, in place of those Item and N make:
	// the harness sets it on an operation of which some items are twins
	// (Config.TwinProb), whose IDs (and priorities) repeat those of
	// earlier items. Item is then the first of them and N their number.
	Items []Item
	// Wait marks a staged dequeue or pop (DequeueWait, PopMinWait,
	// PopMaxWait): it has the same sequential specification as its plain
	// form, except that it never returns empty.
	Wait bool
	// Tag pairs a Hide with its Unhide; Max says a priority queue's Hide
	// takes from the largest end; Tail says a FIFO queue's Unhide puts the
	// item back at the tail (a Queue staged by place), not at the head.
	Tag  uint64
	Max  bool
	Tail bool
}

// Output is the output of a recorded operation.
type Output struct {
	// Unknown means the outcome is not known: the operation failed with an
	// error that leaves open whether it took effect, or its client gave up
	// on it, and nobody recovered it. Such an operation is recorded as
	// returning at the end of time, so it may be linearized anywhere after
	// its call, including after everything that observes its effect (which
	// is how "it did not happen" is expressed).
	Unknown bool
	// Empty is ErrEmpty.
	Empty bool
	// Items are the dequeued or popped items, or, for Observe, the whole
	// content in key order.
	Items []Item
}

// State encodings. A FIFO queue is a fifoQ (fifoq.go), whose steps cost
// O(1). A priority queue is a string, so that porcupine can compare states
// with == and hash them cheaply: a sequence of 16-byte entries (priority
// with its sign bit flipped, so that byte order is numeric order, then
// ID) ordered by priority and, among equal priorities, by the order in
// which the pushes were linearized. Hidden items (see mstate) are 8-byte
// big-endian IDs in a FIFO queue's state and such entries in a priority
// queue's.
const (
	fifoEntry = 8
	pqEntry   = 16
)

func fifoQOf(items []Item) fifoQ {
	ids := make([]uint64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return newFIFOQ(ids)
}

func fifoItems(q fifoQ) []Item {
	ids := q.ids()
	out := make([]Item, len(ids))
	for i, id := range ids {
		out[i].ID = id
	}
	return out
}

func pqEncode(it Item) string {
	var b [pqEntry]byte
	binary.BigEndian.PutUint64(b[:8], uint64(it.Priority)^(1<<63))
	binary.BigEndian.PutUint64(b[8:], it.ID)
	return string(b[:])
}

func pqDecode(s string) Item {
	return Item{
		Priority: int64(binary.BigEndian.Uint64([]byte(s[:8])) ^ (1 << 63)),
		ID:       binary.BigEndian.Uint64([]byte(s[8:pqEntry])),
	}
}

func pqState(items []Item) string {
	var sb strings.Builder
	for _, it := range items {
		sb.WriteString(pqEncode(it))
	}
	return sb.String()
}

func pqItems(s string) []Item {
	out := make([]Item, len(s)/pqEntry)
	for i := range out {
		out[i] = pqDecode(s[i*pqEntry:])
	}
	return out
}

var hashSeed = maphash.MakeSeed()

// mstate is a priority model's state: the items, encoded as above, and
// the items hidden by staged operations between their Hide and Unhide: 8
// bytes of tag then one item entry (all zero when the Hide found nothing),
// in tag order.
type mstate struct {
	q, hidden string
}

func hashState(s any) uint64 {
	st := s.(mstate)
	return maphash.String(hashSeed, st.q) ^ 31*maphash.String(hashSeed, st.hidden)
}

func equalState(a, b any) bool { return a.(mstate) == b.(mstate) }

// fstate is a FIFO model's state: mstate's, with the items in a fifoQ.
type fstate struct {
	q      fifoQ
	hidden string
}

func hashFIFOState(s any) uint64 {
	st := s.(fstate)
	h := st.q.h
	if st.hidden != "" {
		h ^= 31 * maphash.String(hashSeed, st.hidden)
	}
	return h
}

func equalFIFOState(a, b any) bool {
	x, y := a.(fstate), b.(fstate)
	return x.hidden == y.hidden && x.q.equal(y.q)
}

func (st fstate) hide(tag uint64, entry string) fstate {
	st.hidden = hideEntry(st.hidden, tag, entry)
	return st
}

// hide records that tag's Hide took entry (all zero bytes for nothing).
func (st mstate) hide(tag uint64, entry string) mstate {
	st.hidden = hideEntry(st.hidden, tag, entry)
	return st
}

// unhide removes tag's entry; ok is false when tag hid nothing yet.
func (st mstate) unhide(tag uint64, size int) (mstate, string, bool) {
	var entry string
	var ok bool
	st.hidden, entry, ok = unhideEntry(st.hidden, tag, size)
	return st, entry, ok
}

// hideEntry returns hidden with tag's entry added, in tag order.
func hideEntry(hidden string, tag uint64, entry string) string {
	e := string(binary.BigEndian.AppendUint64(nil, tag)) + entry
	n := 8 + len(entry)
	i := 0
	for ; i < len(hidden); i += n {
		if hidden[i:i+8] > e[:8] {
			break
		}
	}
	return hidden[:i] + e + hidden[i:]
}

// unhideEntry returns hidden without tag's entry, and the entry; ok is
// false when tag hid nothing yet.
func unhideEntry(hidden string, tag uint64, size int) (string, string, bool) {
	t := string(binary.BigEndian.AppendUint64(nil, tag))
	n := 8 + size
	for i := 0; i < len(hidden); i += n {
		if hidden[i:i+8] == t {
			return hidden[:i] + hidden[i+n:], hidden[i+8 : i+n], true
		}
	}
	return hidden, "", false
}

func isZero(entry string) bool { return strings.Trim(entry, "\x00") == "" }

// FIFOModel is the sequential specification of a Queue, starting from the
// items in initial (head first):
//
//   - Enqueue(x) appends x; EnqueueBatch(x1..xn) appends x1..xn.
//   - Dequeue returns the head and removes it, or Empty when there is none.
//   - DequeueBatch(n) returns a non-empty prefix of at most n items and
//     removes it, or Empty when there is none. The prefix may be shorter
//     than n even when more items are there: the batch also stops at the
//     batch budget, and it reads the head at its read version, so an item
//     appended concurrently is not necessarily taken.
//   - A staged dequeue (Wait) is a Dequeue that never returns Empty.
//   - An Unknown Dequeue removes the head if there is one.
//   - Hide takes the head aside, if there is one; its Unhide puts it back
//     at the head, or with Tail at the tail.
//   - Observe returns the whole content, which must be the state.
//
// The state is a sequence of IDs, which may repeat (twins: equal values),
// so each item enqueued must come out once, whatever its value.
func FIFOModel(initial []Item) porcupine.Model {
	return porcupine.Model{
		// Each check gets a log of its own (see fifoQ).
		Init: func() any { return fstate{q: fifoQOf(initial)} },
		Step: func(state, input, output any) (bool, any) {
			return fifoStep(state.(fstate), input.(Input), output.(Output))
		},
		Equal:             equalFIFOState,
		Hash:              hashFIFOState,
		DescribeOperation: describeOperation(false),
		DescribeState: func(state any) string {
			return describeItems(fifoItems(state.(fstate).q), false)
		},
	}
}

// FIFOPlaceModel is FIFOModel for a Queue staged by place, whose failed
// staged takes are recorded as a Hide and an Unhide with Tail: such a call
// either left the queue as it was (it never filed a request, or withdrew
// it while no item reached its place) or moved the item at its place to
// the tail. So a Tail Hide may take the head aside or nothing; the checker
// tries both (a nondeterministic model).
func FIFOPlaceModel(initial []Item) porcupine.Model {
	nothing := strings.Repeat("\x00", fifoEntry)
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{fstate{q: fifoQOf(initial)}} },
		Step: func(state, input, output any) []any {
			st, in := state.(fstate), input.(Input)
			var next []any
			if ok, s := fifoStep(st, in, output.(Output)); ok {
				next = append(next, s)
			}
			if in.Kind == Hide && in.Tail && st.q.len() > 0 {
				next = append(next, st.hide(in.Tag, nothing))
			}
			return next
		},
		Equal:             equalFIFOState,
		Hash:              hashFIFOState,
		DescribeOperation: describeOperation(false),
		DescribeState: func(state any) string {
			return describeItems(fifoItems(state.(fstate).q), false)
		},
	}
	return nm.ToModel()
}

func sameID(id uint64, it Item) bool { return id == it.ID }

func fifoStep(st fstate, in Input, out Output) (bool, any) {
	q := st.q
	switch in.Kind {
	case Enqueue:
		st.q = q.push(in.Item.ID)
		return true, st
	case EnqueueBatch:
		for _, id := range BatchIDs(in) {
			q = q.push(id)
		}
		st.q = q
		return true, st
	case Dequeue, DequeueBatch:
		if out.Unknown {
			if in.Kind == DequeueBatch {
				// The harness always recovers batches; were one left
				// unknown, it took what there was, up to n.
				st.q = q.drop(min(q.len(), in.N))
				return true, st
			}
			st.q = q.drop(min(q.len(), 1))
			return true, st
		}
		if out.Empty {
			return q.len() == 0 && !in.Wait, st
		}
		n := len(out.Items)
		limit := 1
		if in.Kind == DequeueBatch {
			limit = in.N
		}
		if n == 0 || n > limit || n > q.len() {
			return false, st
		}
		if !slices.EqualFunc(q.ids()[:n], out.Items, sameID) {
			return false, st
		}
		st.q = q.drop(n)
		return true, st
	case Hide:
		if q.len() == 0 {
			return true, st.hide(in.Tag, strings.Repeat("\x00", fifoEntry))
		}
		st.q = q.drop(1)
		return true, st.hide(in.Tag, string(binary.BigEndian.AppendUint64(nil, q.head())))
	case Unhide:
		hidden, e, ok := unhideEntry(st.hidden, in.Tag, fifoEntry)
		st.hidden = hidden
		if ok && !isZero(e) {
			id := binary.BigEndian.Uint64([]byte(e))
			if in.Tail {
				st.q = q.push(id)
			} else {
				st.q = q.prepend(id)
			}
		}
		return ok, st
	case Observe:
		return slices.EqualFunc(q.ids(), out.Items, sameID), st
	}
	return false, st
}

// PriorityModel is the sequential specification of a PriorityQueue,
// starting from the items in initial (in key order):
//
//   - Push(x, p) inserts x after every item of priority <= p: among equal
//     priorities, items are kept in the order their pushes took effect.
//   - PushBatch(x1@p1..xn@pn) inserts x1..xn in that order, each as Push
//     does, in one step: all or none, and nothing in between.
//   - PopMin returns and removes the first item (the smallest priority, the
//     earliest pushed among equals), or Empty.
//   - PopMax returns and removes the last item (the largest priority, the
//     latest pushed among equals, since it is the last key), or Empty.
//   - Unknown pops remove what they would have returned, if anything.
//   - Hide takes aside what its pop would have returned; Unhide puts it
//     back where it was: first of its priority (from the smallest end) or
//     last (from the largest end).
//   - Observe returns the whole content in key order.
//
// Equal items (twins: same ID and priority) are indistinguishable, so the
// order among them is not checked; each must still come out once.
//
// Pushes of one priority that run concurrently may share a count and are
// then ordered by their random suffix; that is still this specification,
// because concurrent operations may take effect in either order: the
// checker looks for an order that explains what was observed. A
// PushBatch sharing counts with concurrent pushes of a priority is not:
// their items may interleave with its own (PushBatch's doc), which this
// specification does not allow, so the harness gives a batch priorities
// that no concurrent push uses (see harness.choose).
func PriorityModel(initial []Item) porcupine.Model {
	init := mstate{q: pqState(initial)}
	return porcupine.Model{
		Init: func() any { return init },
		Step: func(state, input, output any) (bool, any) {
			return pqStep(state.(mstate), input.(Input), output.(Output))
		},
		Equal:             equalState,
		Hash:              hashState,
		DescribeOperation: describeOperation(true),
		DescribeState: func(state any) string {
			return describeItems(pqItems(state.(mstate).q), true)
		},
	}
}

// pqInsert inserts entry e after every entry whose priority is <= its
// own (first false) or before every entry whose priority is >= its own
// (first true).
func pqInsert(s, e string, first bool) string {
	i := 0
	for ; i < len(s); i += pqEntry {
		if c := s[i : i+8]; c > e[:8] || first && c == e[:8] {
			break
		}
	}
	return s[:i] + e + s[i:]
}

func pqStep(st mstate, in Input, out Output) (bool, any) {
	s := st.q
	switch in.Kind {
	case Push, PushBatch:
		// An Unknown one is open: linearized after the last Observe, it
		// did not happen (see Output.Unknown).
		for _, it := range batchItems(in) {
			s = pqInsert(s, pqEncode(it), false)
		}
		st.q = s
		return true, st
	case PopMin, PopMax:
		if len(s) == 0 {
			return out.Unknown || (out.Empty && !in.Wait), st
		}
		var got, rest string
		if in.Kind == PopMin {
			got, rest = s[:pqEntry], s[pqEntry:]
		} else {
			got, rest = s[len(s)-pqEntry:], s[:len(s)-pqEntry]
		}
		if !out.Unknown && (out.Empty || len(out.Items) != 1 || pqDecode(got) != out.Items[0]) {
			return false, st
		}
		st.q = rest
		return true, st
	case Hide:
		if len(s) == 0 {
			return true, st.hide(in.Tag, strings.Repeat("\x00", pqEntry))
		}
		if in.Max {
			st.q = s[:len(s)-pqEntry]
			return true, st.hide(in.Tag, s[len(s)-pqEntry:])
		}
		st.q = s[pqEntry:]
		return true, st.hide(in.Tag, s[:pqEntry])
	case Unhide:
		st, e, ok := st.unhide(in.Tag, pqEntry)
		if ok && !isZero(e) {
			st.q = pqInsert(st.q, e, !in.Max)
		}
		return ok, st
	case Observe:
		return pqState(out.Items) == s, st
	}
	return false, st
}

func describeOperation(prio bool) func(input, output any) string {
	return func(input, output any) string {
		in, out := input.(Input), output.(Output)
		var arg string
		switch in.Kind {
		case Enqueue:
			arg = fmt.Sprintf("(%d)", in.Item.ID)
		case Push:
			arg = fmt.Sprintf("(%d, p=%d)", in.Item.ID, in.Item.Priority)
		case DequeueBatch:
			arg = fmt.Sprintf("(%d)", in.N)
		case EnqueueBatch:
			arg = fmt.Sprintf("(%d x%d)", in.Item.ID, in.N)
			if in.Items != nil {
				arg = describeItems(in.Items, false)
			}
		case PushBatch:
			arg = describeItems(batchItems(in), true)
		case Hide, Unhide:
			arg = fmt.Sprintf("(#%d)", in.Tag)
		default:
			arg = "()"
		}
		name := in.Kind.String()
		if in.Wait {
			name += "Wait"
		}
		var res string
		switch {
		case out.Unknown:
			res = "unknown"
		case out.Empty:
			res = "empty"
		case isEnqueue(in.Kind) || in.Kind == Hide || in.Kind == Unhide:
			res = "ok"
		default:
			res = describeItems(out.Items, prio)
		}
		return name + arg + " -> " + res
	}
}

func describeItems(items []Item, prio bool) string {
	parts := make([]string, len(items))
	for i, it := range items {
		if prio {
			parts[i] = fmt.Sprintf("%d@%d", it.ID, it.Priority)
		} else {
			parts[i] = fmt.Sprint(it.ID)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
