package fdbqueue

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Depth counters. Every operation of this package that adds items to a
// queue's range or removes them from it also adds the net change, in the
// same transaction, to one of depthShards counters in the queue's meta
// subspace (meta + ("d", shard), an 8-byte little-endian integer), picked at
// random: an atomic add, which reads nothing and conflicts with nothing, on
// one of several keys, so that it is never one hot key. Depth sums the
// counters: one range read of depthShards keys, whatever the queue holds.
//
// The counters commit with the items or not at all, so they stay exact
// under conflicts and commit_unknown_result: a retry that finds its journal
// record writes neither items nor a change, and without the journal
// (WithoutIdempotency) a retry that applies twice adds its items and its
// change twice. Items due to a staged line's requests still count (they are
// in the range, as for Len); an item handed to a waiting request leaves the
// count when it leaves the range, and returns to it when it is put back.
//
// Clients that do not maintain the counters (the FoundationDB recipes in
// other languages, earlier versions of this package, anyone writing the
// subspace directly) make Depth wrong by what they add or remove; it may
// even go negative. RepairDepth recounts.
const depthShards = 8

type depthKeys struct {
	prefix []byte      // meta + ("d",)
	all    kv.KeyRange // every counter
	shards [depthShards][]byte
}

func newDepthKeys(queuePrefix []byte) depthKeys {
	meta := metaSubspace(queuePrefix)
	p, _ := meta.Pack(tuple.Tuple{"d"})
	d := depthKeys{prefix: p}
	d.all, _ = meta.Range("d")
	for i := range d.shards {
		d.shards[i], _ = tuple.Tuple{int64(i)}.AppendPack(bytes.Clone(p))
	}
	return d
}

func (d depthKeys) shard(i int) []byte { return d.shards[i] }

// read sums the counters with a snapshot read: no read conflict, so it
// never makes an operation retry nor retries because of one.
func (d depthKeys) read(tr kv.ReadTransaction) (int64, error) { return sumCounters(d.issue(tr)) }

// issue starts read's snapshot read of the counters (see sumCounters).
func (d depthKeys) issue(tr kv.ReadTransaction) kv.RangeResult {
	return tr.Snapshot().GetRange(d.all, kv.RangeOptions{Mode: kv.StreamingModeWantAll})
}

// sumCounters waits for the counters' read and returns their sum.
func sumCounters(rr kv.RangeResult) (int64, error) {
	kvs, err := rr.GetSlice()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, p := range kvs {
		n += decodeCounter(p.Value)
	}
	return n, nil
}

// decodeCounter reads a little-endian two's complement integer of up to 8
// bytes (FDB's add treats missing bytes as zero).
func decodeCounter(v []byte) int64 {
	var b [8]byte
	copy(b[:], v)
	return int64(binary.LittleEndian.Uint64(b[:]))
}

func depth(ctx context.Context, t kv.ReadTransactor, d depthKeys) (int64, error) {
	if err := checkTransactor(t); err != nil {
		return 0, err
	}
	return kv.ReadTransact(ctx, t, func(tr kv.ReadTransaction) (int64, error) { return d.read(tr) })
}

// Depth returns how many items the queue holds, from its depth counters:
// one snapshot range read of 8 small keys (one round trip), whatever the
// queue holds, and no read conflict. It is exact while only this package
// (this version or later) writes the queue: it counts what Len counts,
// items due to a staged line's requests included. Clients that do not
// maintain the counters, such as recipe clients in other languages, make it
// wrong by the items they add or remove; RepairDepth recounts. Inside a
// transaction it counts that transaction's own operations (it reads its
// writes), also in a versionstamp-ordered queue, whose Len cannot read the
// items that transaction enqueued.
//
// It checks the stored configuration, as Peek and Len do (the metadata
// version comes with the read version; the record, when read, is read with
// the counters, in the same round trip), and fails with ErrConfigMismatch
// when the handle's options disagree: a job queue, say, keeps no such
// counters, and its Depth would be 0. In a caller's transaction that
// check's only read conflict is the metadata version's, which only a
// change of a record moves.
func (q *Queue) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	if err := q.usable(); err != nil {
		return 0, err
	}
	return depth(ctx, q.journal.gate.reads(t), q.journal.track.depth) // config.go
}

// Depth returns how many items the priority queue holds, from its depth
// counters; see Queue.Depth.
func (pq *PriorityQueue) Depth(ctx context.Context, t kv.ReadTransactor) (int64, error) {
	if err := pq.usable(); err != nil {
		return 0, err
	}
	return depth(ctx, pq.journal.gate.reads(t), pq.journal.track.depth) // config.go
}

// RepairDepth recounts the queue's items and sets its depth counters to
// the count, for a queue written by clients that do not maintain them (see
// Depth). It returns the count, as of its last page's read.
//
// It reads the items in pages of up to 10,000 keys, each page in its own
// transaction with snapshot reads (so it stays within FDB's five-second
// transaction limit and conflicts with no one), and corrects the counters
// in the transaction of the last page: it reads them at that page's read
// version and adds the difference, so that an operation committing after
// the read keeps its own change. The result is exact when no item is
// added to or removed from the pages already counted while it runs: on a
// FIFO queue, producers may keep enqueueing (their items land after the
// pages counted), but consumers should pause. Otherwise it is off by what
// they removed from (or added to) those pages meanwhile; running it again
// when the queue is quiet corrects it. Cost: per page, a range read of
// the items and one of the counters (issued together: a round trip a
// page) and, in the last page, when the counters are off, one atomic add.
//
// Under commit_unknown_result the last page's transaction is retried: it
// counts its page and reads the counters again, and FoundationDB reports
// the error only once the first commit can no longer land after the
// retry's reads, so the retry adds only what is still missing.
//
// Each page's transaction checks the stored configuration, as Clear does
// (no round trip more: the metadata version comes with the read version),
// and the repair fails with ErrConfigMismatch, writing nothing, when the
// handle's options disagree: on a job queue's subspace, say, it would count
// the jobs' keys into counters no one reads. It writes no record: on a
// queue without one (a recipe queue) only the counters.
func (q *Queue) RepairDepth(ctx context.Context, db kv.Database) (int64, error) {
	if err := q.usable(); err != nil {
		return 0, err
	}
	return repairDepth(ctx, db, q.journal.gate, q.items, q.journal.track.depth)
}

// RepairDepth recounts the priority queue's items and sets its depth
// counters; see Queue.RepairDepth. On a priority queue, pops of either end
// during the repair may touch pages already counted: pause consumers.
func (pq *PriorityQueue) RepairDepth(ctx context.Context, db kv.Database) (int64, error) {
	if err := pq.usable(); err != nil {
		return 0, err
	}
	return repairDepth(ctx, db, pq.journal.gate, pq.items, pq.journal.track.depth)
}

// repairPage is how many keys one transaction of repairDepth reads (a
// variable so that tests cross pages with few items).
var repairPage = 10_000

func repairDepth(ctx context.Context, db kv.Database, g *confGate, items kv.KeyRange, d depthKeys) (int64, error) {
	if err := checkTransactor(db); err != nil {
		return 0, err
	}
	var counted int64 // in the pages before begin
	begin := bytes.Clone(items.Begin)
	var gate gateRead
	for {
		var n int64
		var next []byte
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			n, next = 0, nil
			// The record's read is issued before the page's, and checked
			// after it, before anything is written; the counters' read
			// goes with them, in case this page is the last (one round
			// trip).
			gr := g.issueInto(&gate, tr, false, true) // config.go
			page := tr.Snapshot().GetRange(kv.KeyRange{Begin: begin, End: items.End},
				kv.RangeOptions{Limit: repairPage, Mode: kv.StreamingModeWantAll})
			counters := d.issue(tr)
			kvs, err := page.GetSlice()
			if gerr := gr.settleRead(); gerr != nil {
				return gerr
			}
			if err != nil {
				return err
			}
			n = int64(len(kvs))
			if len(kvs) == repairPage {
				next = append(bytes.Clone(kvs[len(kvs)-1].Key), 0x00)
				return nil
			}
			// Add the difference between the count and the counters read
			// at this page's read version, rather than overwrite them: an
			// operation that commits between this read and this commit
			// (a producer's item the page did not see, a take of one it
			// did) keeps its own change, as atomic adds commute.
			sum, err := sumCounters(counters)
			if err != nil {
				return err
			}
			if diff := counted + n - sum; diff != 0 {
				tr.Add(d.shard(0), counterParam(diff))
			}
			return nil
		})
		if err != nil {
			return 0, fmt.Errorf("fdbqueue: repair depth: %w", err)
		}
		counted += n
		if next == nil {
			return counted, nil
		}
		begin = next
	}
}
