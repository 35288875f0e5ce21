package fdbqueue

import (
	"fmt"
	"math"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// A JobQueue's transaction sizes, counted as FoundationDB counts them with
// budget.go's cost functions (setCost, clearCost, conflictKeyCost: mutations
// with their 56-byte structs plus conflict ranges, after
// fdbclient/NativeAPI.actor.cpp's Transaction::getSize). AddBatch and Lease
// write for many jobs in one transaction and keep to the batch budget with
// them; the single-job writes (Ack, Nack, Extend, Release, Requeue,
// DeleteDead) cost at most a few tens of kilobytes whatever the job holds.
//
// Keys are bounded, not measured, where a cost is needed before the key
// exists: a job ID (a random suffix without 0x00 bytes, see
// entropy.suffix) packs to 18 bytes, a lease ID (crypto/rand) to at most
// 34, an integer to at most 9.

// jobKeyBounds holds the longest key of each kind the queue writes.
type jobKeyBounds struct {
	value   int // ("v", job ID)
	record  int // ("q", vest, -priority, job ID) or ("d", deadAt, job ID)
	index   int // ("x", job ID)
	bucket  int // ("c", series, bucket)
	counter int // ("c", "n"), ("c", "l"), ("c", "d"), ("s",)
}

var (
	boundJobID   = []byte("\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01")
	boundLeaseID = make([]byte, 16) // all 0x00: every byte escaped
)

func (q *JobQueue) keyBounds() jobKeyBounds {
	return jobKeyBounds{
		value:   len(q.key("v", boundJobID)),
		record:  len(q.key("q", int64(math.MinInt64), int64(math.MinInt64), boundJobID)),
		index:   len(q.key("x", boundJobID)),
		bucket:  len(q.key("c", "p", int64(math.MinInt64))),
		counter: max(len(q.total), len(q.leased), len(q.deadN), len(q.signal)),
	}
}

// keysFit fails, with ErrInvalidArgument and kv.ErrKeyTooLarge, when the
// queue's longest key, a job's record at its earliest vesting time and
// lowest priority, would exceed the key limit: on such a prefix (accepted
// made WithoutIdempotency, which writes no journal keys to refuse it by)
// every Add failed with key_too_large. (jobKeyBounds counts priorities as
// any int64, a few bytes over: the budgets may, the limit must not.)
func (q *JobQueue) keysFit() error {
	if n := len(q.key("q", int64(math.MinInt64), -int64(math.MinInt32), boundJobID)); n > kv.MaxKeySize {
		return fmt.Errorf("%w: the subspace prefix is too long: the job queue's keys take up to %d bytes, over the %d-byte key limit (%w)",
			ErrInvalidArgument, n, kv.MaxKeySize, kv.ErrKeyTooLarge)
	}
	return nil
}

// metaBound is the longest encoding of a job record holding unique and
// reason, with a lease ID and every integer at its longest.
func metaBound(unique, reason []byte) int {
	m := jobMeta{vest: math.MinInt64, prio: math.MinInt32, lease: boundLeaseID, attempts: math.MinInt64,
		maxAttempts: math.MinInt64, unique: unique, added: math.MinInt64, deadAt: math.MinInt64, reason: reason}
	if reason == nil {
		m.reason = []byte{}
	}
	return len(m.encode())
}

// atomicCost is an atomic add (or compare-and-clear) of an 8-byte operand
// at a key of n bytes: FDB counts it as a Set.
func atomicCost(n int) int { return setCost(n, 8) }

// bucketChangeCost is q.bucket's: an add, and a compare-and-clear when the
// count goes down.
func (b jobKeyBounds) bucketChangeCost(down bool) int {
	if down {
		return 2 * atomicCost(b.bucket)
	}
	return atomicCost(b.bucket)
}

// Journal records of Add (job ID, duplicate) and Lease (job ID, lease ID,
// deadline, priority), at their longest.
var (
	addRecordBound, _   = tuple.Tuple{boundLeaseID, false}.Pack()
	leaseRecordBound, _ = tuple.Tuple{boundLeaseID, boundLeaseID, int64(math.MinInt64), int64(math.MinInt64)}.Pack()
)

// addBatchCost is the size of AddBatch's transaction for jobs: the journal
// and signal (overheadCost), per job its value, record, index, unique key
// (read and written), two counter adds and its journal record.
func (q *JobQueue) addBatchCost(o *op, jobs []Job) int {
	b := q.bounds
	c := o.overheadCost(q.items)
	for i, j := range jobs {
		c += setCost(b.value, len(j.Value))
		if j.UniqueKey != "" {
			uk := len(q.key("u", []byte(j.UniqueKey)))
			c += conflictKeyCost(uk) + setCost(uk, len(JobID{}))
		}
		c += setCost(b.record, metaBound([]byte(j.UniqueKey), nil)) + setCost(b.index, b.record)
		c += atomicCost(b.counter) + b.bucketChangeCost(false)
		c += o.recordCost(i, addRecordBound)
	}
	return c
}

// leaseCost is what Lease's transaction spends on the candidate m at key:
// its read conflict key and clear, the bucket and counter changes, and
// either its new record and index with the lease's journal record (the
// n-th), or, buried, its dead record, index and the clear of its unique
// key. reason is the dead record's reason.
func (q *JobQueue) leaseCost(o *op, m jobMeta, key []byte, n int, buried bool, reason []byte) int {
	b := q.bounds
	c := conflictKeyCost(len(key)) + clearCost(len(key)) + b.bucketChangeCost(true)
	if buried {
		c += 3 * atomicCost(b.counter)
		if len(m.unique) > 0 {
			c += clearCost(len(q.key("u", m.unique)))
		}
		return c + setCost(b.record, metaBound(m.unique, reason)) + setCost(b.index, b.record)
	}
	c += atomicCost(b.counter) + b.bucketChangeCost(false)
	c += setCost(b.record, metaBound(m.unique, m.reason)) + setCost(b.index, b.record)
	return c + o.recordCost(n, leaseRecordBound)
}
