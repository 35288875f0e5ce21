package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// A JobQueue's batch transactions must keep to the batch budget as
// FoundationDB counts a transaction's size (fdbclient/NativeAPI.actor.cpp,
// Transaction::getSize: each mutation with its 56-byte struct plus the read
// and write conflict ranges; budget.go). fdbDB (fdbwrap_test.go) counts
// every commit that way and fails it with transaction_too_large (2101) over
// 10,000,000 bytes, as memdb does underneath.

// jobSlack is what a batch may use beyond its budget: the one job it
// always handles (a job record with a unique key and a reason of 1,000
// 0x00 bytes each, escaped, is under 25 KB with its keys and clears).
const jobSlack = 25_000

// uniqueKey is a unique key of MaxUniqueKeySize bytes, all 0x00 but for i
// in its last bytes: the tuple encoding doubles each 0x00.
func uniqueKey(i int) string {
	k := make([]byte, fdbqueue.MaxUniqueKeySize)
	k[len(k)-3], k[len(k)-2], k[len(k)-1] = byte(i>>16), byte(i>>8), byte(i)
	return string(k)
}

// The largest batch AddBatch accepts at the largest budget commits, and
// within the budget, for jobs of every shape at the limits: empty values
// (where the fixed cost per job dominates), unique keys of all-0x00 bytes,
// and limit-sized all-0xff values.
func TestJobQueueAddBatchLargestBudget(t *testing.T) {
	// Every job of a shape shares its value: AddBatch copies what it
	// writes (kv.Transaction.Set) and keeps nothing.
	limit := bytes.Repeat([]byte{0xff}, kv.MaxValueSize)
	shapes := map[string]func(i int) fdbqueue.Job{
		"empty":        func(int) fdbqueue.Job { return fdbqueue.Job{} },
		"unique-zeros": func(i int) fdbqueue.Job { return fdbqueue.Job{Value: []byte{0}, UniqueKey: uniqueKey(i)} },
		"limit-0xff":   func(i int) fdbqueue.Job { return fdbqueue.Job{Value: limit, UniqueKey: uniqueKey(i)} },
	}
	for name, shape := range shapes {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			db := newFDBDB(newDB(t))
			q := mustJobQueue(t, "add-"+name, fdbqueue.JobQueueConfig{}, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget))
			next := 0
			// accepted adds a batch of n jobs and reports whether the
			// budget accepted it: a refused batch writes nothing, an
			// accepted one must commit.
			accepted := func(n int) bool {
				jobs := make([]fdbqueue.Job, n)
				for i := range jobs {
					jobs[i] = shape(next + i)
				}
				_, err := q.AddBatch(ctx, db, jobs)
				if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
					return false
				}
				require.NoError(t, err, "a batch of %d jobs that the budget accepted", n)
				next += n
				return true
			}
			// The largest accepted batch: doubling until one is refused
			// (no batch tried is more than twice the answer), then a
			// binary search between the last two.
			lo, hi := 0, 1
			for accepted(hi) {
				lo, hi = hi, 2*hi
			}
			for hi-lo > 1 {
				if mid := (lo + hi) / 2; accepted(mid) {
					lo = mid
				} else {
					hi = mid
				}
			}
			require.Positive(t, lo)
			st := db.st.snapshot()
			t.Logf("largest accepted batch: %d jobs, %d bytes as FDB counts them", lo, st.maxSize)
			require.Empty(t, st.violations)
			require.Zero(t, st.tooLarge)
			require.LessOrEqual(t, st.maxSize, fdbqueue.MaxBatchBudget, "an accepted batch is within the budget")
			// The count is an upper bound, not a wild one.
			require.Greater(t, st.maxSize, fdbqueue.MaxBatchBudget*3/4, "the largest accepted batch (%d jobs) uses most of the budget", lo)
			s := mustStats(t, db, q)
			require.EqualValues(t, next, s.Queued, "every accepted job is in the queue")
		})
	}
}

// addAll adds jobs in batches that fit the largest budget.
func addAll(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, jobs []fdbqueue.Job) {
	t.Helper()
	for len(jobs) > 0 {
		n := min(len(jobs), 100)
		_, err := q.AddBatch(context.Background(), db, jobs[:n])
		require.NoError(t, err)
		jobs = jobs[n:]
	}
}

// Lease of MaxLeaseBatch jobs whose records are at their largest (a unique
// key and a reason of 1,000 0x00 bytes each) keeps to the budget, the
// default one and the largest, and leases every job in the end.
func TestJobQueueLeaseBudget(t *testing.T) {
	for _, budget := range []int{fdbqueue.DefaultBatchBudget, fdbqueue.MaxBatchBudget} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			ctx := context.Background()
			raw := newDB(t)
			clock := newFakeClock()
			cfg := fdbqueue.JobQueueConfig{Clock: clock, Choice: 1}
			big := mustJobQueue(t, "lease", cfg, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget))
			const n = fdbqueue.MaxLeaseBatch
			jobs := make([]fdbqueue.Job, n)
			for i := range jobs {
				jobs[i] = fdbqueue.Job{Value: []byte{byte(i)}, UniqueKey: uniqueKey(i)}
			}
			addAll(t, raw, big, jobs)
			// Give every job a limit-sized reason: lease and nack them.
			reason := string(make([]byte, fdbqueue.MaxReasonSize))
			for left := n; left > 0; {
				ls, err := big.Lease(ctx, raw, n, time.Minute)
				require.NoError(t, err)
				for _, l := range ls {
					_, err := big.Nack(ctx, raw, l, fdbqueue.NackOptions{Delay: -1, Reason: reason})
					require.NoError(t, err)
				}
				left -= len(ls)
			}

			db := newFDBDB(raw)
			q := mustJobQueue(t, "lease", cfg, fdbqueue.WithBatchBudget(budget))
			leased, calls := 0, 0
			for {
				ls, err := q.Lease(ctx, db, n, time.Hour)
				if errors.Is(err, fdbqueue.ErrEmpty) {
					break
				}
				require.NoError(t, err, "after %d jobs", leased)
				for _, l := range ls {
					require.Equal(t, reason, l.Reason)
				}
				leased += len(ls)
				calls++
			}
			require.Equal(t, n, leased)
			st := db.st.snapshot()
			require.Empty(t, st.violations)
			require.Zero(t, st.tooLarge)
			require.LessOrEqual(t, st.maxSize, budget+jobSlack)
			if budget == fdbqueue.DefaultBatchBudget {
				require.Greater(t, calls, 1, "1,000 records of 4 KB exceed 1 MB")
			}
		})
	}
}

// Lease dead-letters candidates whose last lease expired and takes others;
// those clears and dead records count too. With K+n−1 = 1,999 candidates,
// each holding a 2,000-byte unique key to clear (four times its length as
// FDB counts a clear), one Lease would write about 20 MB.
func TestJobQueueLeaseBuryBudget(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	clock := newFakeClock()
	cfg := fdbqueue.JobQueueConfig{Clock: clock, Choice: fdbqueue.MaxLeaseBatch, MaxAttempts: 1}
	q := mustJobQueue(t, "bury", cfg, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget))
	const total = 2 * fdbqueue.MaxLeaseBatch
	jobs := make([]fdbqueue.Job, total)
	for i := range jobs {
		jobs[i] = fdbqueue.Job{UniqueKey: uniqueKey(i)}
	}
	addAll(t, raw, q, jobs)
	for left := total; left > 0; {
		ls, err := q.Lease(ctx, raw, fdbqueue.MaxLeaseBatch, time.Second)
		require.NoError(t, err)
		left -= len(ls)
	}
	clock.Advance(time.Minute) // every lease expires: each was the job's last attempt

	db := newFDBDB(raw)
	for {
		_, err := q.Lease(ctx, db, fdbqueue.MaxLeaseBatch, time.Second)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			if mustStats(t, raw, q).Dead == total {
				break
			}
			continue // a call that only buried leases nothing
		}
		require.NoError(t, err)
		t.Fatal("a job with no attempts left was leased")
	}
	st := db.st.snapshot()
	require.Empty(t, st.violations)
	require.Zero(t, st.tooLarge)
	require.LessOrEqual(t, st.maxSize, fdbqueue.MaxBatchBudget+jobSlack)
	require.EqualValues(t, total, mustStats(t, raw, q).Dead)
}

// A single job is always accepted, whatever the budget, as a single
// Enqueue is, and a Lease always takes one job: with a budget of one byte
// a job at the limits (largest value and unique key) is added, leased and
// acknowledged, each within FoundationDB's transaction limit, while a
// batch of two small jobs fails with ErrBatchTooLarge and adds nothing.
func TestJobQueueOneJobWhateverTheBudget(t *testing.T) {
	ctx := context.Background()
	db := newFDBDB(newDB(t))
	q := mustJobQueue(t, "one-job", fdbqueue.JobQueueConfig{}, fdbqueue.WithBatchBudget(1))
	_, err := q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("a")}, {Value: []byte("b")}})
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	job := fdbqueue.Job{Value: bytes.Repeat([]byte{0xff}, kv.MaxValueSize), UniqueKey: uniqueKey(1)}
	r, err := q.Add(ctx, db, job)
	require.NoError(t, err, "a single job")
	require.False(t, r.Duplicate)
	require.EqualValues(t, 1, mustStats(t, db, q).Queued, "the refused batch added nothing")
	ls, err := q.Lease(ctx, db, 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 1)
	require.Equal(t, r.ID, ls[0].JobID)
	require.Equal(t, job.Value, ls[0].Value)
	require.NoError(t, q.Ack(ctx, db, ls[0]))
	st := mustStats(t, db, q)
	require.Zero(t, st.Queued+st.Leased+st.Dead)
}

// Small jobs (an empty value, no unique key) are where the fixed cost per
// job dominates, so a cost term left out of the count shows most there: a
// Lease that takes them, and one that only buries them (their last lease
// expired), each fill at least three quarters of the budget and never
// exceed it, as FoundationDB counts them. The budget is well above one
// job's cost, so the one job a batch always handles does not matter. The
// keys are as long as a job's record key gets, so that the count's bounds
// (jobqueue_budget.go) have the least slack: the clock is in the year
// 5000, where a vesting time packs to 9 bytes as the bound's MinInt64
// does, and the priority is at its extreme. (A Lease's read conflict key
// per candidate, left out, takes either call over the budget here.)
func TestJobQueueLeaseSmallJobsBudget(t *testing.T) {
	for _, bury := range []bool{false, true} {
		t.Run(fmt.Sprintf("bury=%v", bury), func(t *testing.T) {
			ctx := context.Background()
			raw := newDB(t)
			clock := queuetest.NewClock(time.Date(5000, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := fdbqueue.JobQueueConfig{Clock: clock, Choice: 1}
			if bury {
				cfg.MaxAttempts = 1
			}
			const budget = fdbqueue.DefaultBatchBudget
			q := mustJobQueue(t, "lease-small", cfg, fdbqueue.WithBatchBudget(budget))
			const total = 2 * fdbqueue.MaxLeaseBatch // more than one budget's worth either way
			jobs := make([]fdbqueue.Job, total)
			for i := range jobs {
				jobs[i].Priority = math.MinInt32
			}
			addAll(t, raw, q, jobs)
			if bury {
				for left := total; left > 0; {
					ls, err := q.Lease(ctx, raw, fdbqueue.MaxLeaseBatch, time.Second)
					require.NoError(t, err)
					left -= len(ls)
				}
				clock.Advance(time.Minute) // every lease expires: each was the job's last attempt
			}
			db := newFDBDB(raw)
			ls, err := q.Lease(ctx, db, fdbqueue.MaxLeaseBatch, time.Minute)
			if bury {
				require.ErrorIs(t, err, fdbqueue.ErrEmpty, "a call that only buried leases nothing")
				require.Positive(t, mustStats(t, raw, q).Dead)
			} else {
				require.NoError(t, err)
				require.Less(t, len(ls), fdbqueue.MaxLeaseBatch, "the budget, not n, stopped the batch")
				// Lease's doc: about 2,000 bytes per job with small
				// records on a short prefix (some 1,900 at an early
				// vesting time, 2,200 at the longest keys, as here).
				require.InDelta(t, 2_000, budget/len(ls), 300, "%d jobs leased within %d bytes", len(ls), budget)
			}
			st := db.st.snapshot()
			t.Logf("%d bytes as FDB counts them", st.maxSize)
			require.Empty(t, st.violations)
			require.Zero(t, st.tooLarge)
			require.LessOrEqual(t, st.maxSize, budget, "within the budget")
			require.Greater(t, st.maxSize, budget*3/4, "the count is an upper bound, not a wild one")
		})
	}
}
