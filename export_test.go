package fdbqueue

import "github.com/fdbqueue/fdbqueue/kv"

// Test seams, visible only to this package's tests.

// OpIDAt makes an OpID stamped with the given time.
var OpIDAt = newOpIDAt

// RetryExtension is the pool heartbeat's wait after a failed extension.
var RetryExtension = retryExtension

// SetUserVersion sets the user version a versionstamp-ordered q gives its
// next item (at most 65,536).
func SetUserVersion(q *Queue, v uint32) { q.userVer.Store(v) }

// PrimeJournal makes the next operation of pq carry the most clean-ups
// (maxCarriedCleanups records of other operations, each a point) and run
// an expiry whose sweep includes the range of the layout before shards:
// everything overheadCost counts for the journal.
func PrimeJournal(pq *PriorityQueue) {
	j := pq.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	for n := range maxCarriedCleanups {
		o := &op{j: j}
		for i := range o.id {
			o.id[i] = byte(i + 1 + n)
		}
		o.keys()
		j.addPending(kv.KeyRange{Begin: o.key0, End: o.key0[:len(o.key0)+1]})
	}
	j.count.Store(j.gcEvery - 1)
	j.gcShard.Store(0)
}

// journaled is a layer with an operation journal.
type journaled interface {
	*Queue | *PriorityQueue | *JobQueue
}

func journalOf[L journaled](l L) *journal {
	switch l := any(l).(type) {
	case *Queue:
		return l.journal
	case *PriorityQueue:
		return l.journal
	case *JobQueue:
		return l.journal
	}
	panic("unreachable: journaled lists the layers")
}

// JournalSlotKeys returns the keys of the journal slots l made in its
// current epoch (journal.takeSlot), in slot order.
func JournalSlotKeys[L journaled](l L) [][]byte {
	j := journalOf(l)
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([][]byte(nil), j.slotKeys...)
}

// JournalRecordRange returns the range of the records l's journal keeps
// under id (op.recordRange).
func JournalRecordRange[L journaled](l L, id OpID) kv.KeyRange {
	o := &op{j: journalOf(l), id: id}
	return o.recordRange()
}

// JournalFreeSlots returns the slots of l's current epoch that are free
// for the next operations (journal.releaseSlot).
func JournalFreeSlots[L journaled](l L) []int64 {
	j := journalOf(l)
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]int64(nil), j.freeSlots...)
}

// JournalUnsettled returns how many slots l's journal remembers for a
// call under their operation's ID to settle it (journal.remember).
func JournalUnsettled[L journaled](l L) int {
	j := journalOf(l)
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.unsettled)
}

// The batch budget's cost primitives (budget.go) and setChunked, for a
// test that checks them against FoundationDB's count (fdbDB).
var (
	SetCost          = setCost
	ClearCost        = clearCost
	ClearRangeCost   = clearRangeCost
	ConflictKeyCost  = conflictKeyCost
	ChunkedSetCost   = chunkedSetCost
	VstampSetCost    = vstampSetCost
	HeadConflictCost = headConflictCost
	SetChunked       = setChunked
)
