package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func TestJobQueueAddLeaseAck(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "basic", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})

	a := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("a")})
	require.False(t, a.Duplicate)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q))

	ls := mustLease(t, db, q, 1, time.Minute)
	require.Len(t, ls, 1)
	l := ls[0]
	require.Equal(t, a.ID, l.JobID)
	require.Equal(t, "a", string(l.Value))
	require.Equal(t, 1, l.Attempt)
	require.Equal(t, fdbqueue.DefaultMaxAttempts, l.MaxAttempts)
	require.Equal(t, clock.Now().Add(time.Minute).UnixMicro(), l.Deadline.UnixMicro())
	require.Equal(t, fdbqueue.JobStats{Leased: 1}, mustStats(t, db, q))

	_, err := q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "a leased job is invisible until its deadline")

	require.NoError(t, q.Ack(ctx, db, l))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
	require.ErrorIs(t, q.Ack(ctx, db, l), fdbqueue.ErrLeaseLost, "a second ack finds nothing")
	// Nothing is left but the journal (outside the subspace's range).
	require.Empty(t, rawKeysIn(t, db, q.Subspace()))
}

// rawKeysIn lists the keys in the subspace's range, leaving out the
// journal just past it and the keys that stay (three counters and the
// signal): no job and no time-bucket counter is left behind.
func rawKeysIn(t testing.TB, db kv.Database, sub fdbqueue.Subspace) [][]byte {
	t.Helper()
	var out [][]byte
	meta := append(sub.Bytes(), 0xff)
	stay := map[string]bool{}
	for _, e := range []tuple.Tuple{{"c", "n"}, {"c", "l"}, {"c", "d"}, {"s"}} {
		k, err := sub.Pack(e)
		require.NoError(t, err)
		stay[string(k)] = true
	}
	for _, k := range rawKeys(t, db, sub.Bytes()) {
		if !bytes.HasPrefix(k, meta) && !stay[string(k)] {
			out = append(out, k)
		}
	}
	return out
}

// A delayed job is never leased before its vesting time, however the
// clock creeps up to it; at that time it is.
func TestJobQueueDelayedNeverEarly(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "delay", fdbqueue.JobQueueConfig{Clock: clock, StatsResolution: time.Millisecond})
	start := clock.Now()
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("in an hour"), Delay: time.Hour})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("at 30 min"), RunAt: start.Add(30 * time.Minute)})
	require.Equal(t, fdbqueue.JobStats{Queued: 2, Delayed: 2}, mustStats(t, db, q))

	for _, step := range []time.Duration{0, time.Minute, 29*time.Minute - time.Microsecond} {
		clock.Advance(step)
		_, err := q.Lease(ctx, db, 10, time.Minute)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "at %v", clock.Now().Sub(start))
	}
	clock.Advance(time.Microsecond) // exactly 30 minutes
	ls := mustLease(t, db, q, 10, 10*time.Minute)
	require.Len(t, ls, 1)
	require.Equal(t, "at 30 min", string(ls[0].Value))
	require.NoError(t, q.Ack(ctx, db, ls[0]))

	clock.Advance(30*time.Minute - time.Microsecond)
	_, err := q.Lease(ctx, db, 10, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	s := mustStats(t, db, q)
	require.Equal(t, int64(1), s.Delayed)
	clock.Advance(time.Microsecond)
	require.Equal(t, int64(1), mustStats(t, db, q).Due)
	ls = mustLease(t, db, q, 10, time.Minute)
	require.Equal(t, "in an hour", string(ls[0].Value))
}

// With K = 1 the order is strict: vesting time first, then priority.
func TestJobQueueStrictOrder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "order", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	now := clock.Now()
	jobs := []fdbqueue.Job{
		{Value: []byte("late"), RunAt: now.Add(-time.Second), Priority: 100},
		{Value: []byte("low"), RunAt: now.Add(-time.Minute), Priority: -5},
		{Value: []byte("high"), RunAt: now.Add(-time.Minute), Priority: 7},
		{Value: []byte("max"), RunAt: now.Add(-time.Minute), Priority: 1<<31 - 1},
		{Value: []byte("min"), RunAt: now.Add(-time.Minute), Priority: -1 << 31},
		{Value: []byte("oldest"), RunAt: now.Add(-time.Hour)},
		{Value: []byte("future"), RunAt: now.Add(time.Second), Priority: 1000},
	}
	_, err := q.AddBatch(ctx, db, jobs)
	require.NoError(t, err)
	var got []string
	for {
		ls, err := q.Lease(ctx, db, 1, time.Hour)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		got = append(got, string(ls[0].Value))
	}
	require.Equal(t, []string{"oldest", "max", "high", "low", "min", "late"}, got)
	require.Equal(t, int64(oldestDueAge(t, db, q)), int64(0))
}

func oldestDueAge(t *testing.T, db kv.Database, q *fdbqueue.JobQueue) time.Duration {
	return mustStats(t, db, q).OldestDue
}

// An expired lease whose job was leased again can neither be acked,
// nacked nor extended, and the new holder's ack works.
func TestJobQueueExpiredLeaseLost(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "expired", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x")})
	old := mustLease(t, db, q, 1, time.Minute)[0]

	// Past its deadline but not leased again: still the holder's.
	clock.Advance(2 * time.Minute)
	require.Equal(t, int64(1), mustStats(t, db, q).ExpiredLeases)
	old, err := q.Extend(ctx, db, old, time.Minute)
	require.NoError(t, err)
	require.Equal(t, clock.Now().Add(time.Minute).UnixMicro(), old.Deadline.UnixMicro())

	clock.Advance(time.Minute)
	cur := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 2, cur.Attempt)
	require.NotEqual(t, old.ID, cur.ID, "every lease has a new ID")

	got, err := q.Extend(ctx, db, old, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	require.Equal(t, old, got, "on error, Extend returns the lease it was given")
	require.ErrorIs(t, q.Ack(ctx, db, old), fdbqueue.ErrLeaseLost)
	_, err = q.Nack(ctx, db, old, fdbqueue.NackOptions{})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	// An ack in the application's transaction fails, so its effects do
	// not commit.
	effect := []byte("effect-of-old")
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(effect, []byte("done"))
		return q.Ack(ctx, tr, old)
	})
	require.ErrorIs(t, err, fdbqueue.ErrLeaseLost)
	v, err := getKey(ctx, db, effect)
	require.NoError(t, err)
	require.Nil(t, v)

	require.NoError(t, q.Ack(ctx, db, cur))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// A Nack without a reason keeps the one an earlier Nack gave, whether the
// job is retried or dead-lettered: a retried job's reason was wiped while
// a dead one's was kept, so a job's later leases lost its last known
// failure.
func TestJobQueueNackWithoutReasonKeepsTheLastOne(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "reasons", fdbqueue.JobQueueConfig{Clock: clock})
	a := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j"), MaxAttempts: 3})
	l := mustLease(t, db, q, 1, time.Minute)[0]
	_, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1, Reason: "upstream down"})
	require.NoError(t, err)
	l = mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, "upstream down", l.Reason)
	_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	info, err := q.Job(ctx, db, a.ID)
	require.NoError(t, err)
	require.Equal(t, "upstream down", info.Reason, "kept by a retrying Nack without a reason")
	l = mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 3, l.Attempt)
	require.Equal(t, "upstream down", l.Reason)
	dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{})
	require.NoError(t, err)
	require.True(t, dead)
	ds, err := q.ListDead(ctx, db, nil, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, "upstream down", ds[0].Reason, "kept by a dead-lettering Nack without a reason")
}

// Nack retries with backoff; the last failure dead-letters the job, which
// can be listed, requeued and deleted.
func TestJobQueueNackDeadLetterRequeue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "dead", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Second, RetryMax: 4 * time.Second})
	a := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("flaky"), MaxAttempts: 3, UniqueKey: "u1"})
	for attempt := 1; attempt <= 3; attempt++ {
		l := mustLease(t, db, q, 1, time.Minute)[0]
		require.Equal(t, attempt, l.Attempt)
		if attempt > 1 {
			require.Equal(t, fmt.Sprint("failure ", attempt-1), l.Reason)
		}
		dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{Reason: fmt.Sprint("failure ", attempt)})
		require.NoError(t, err)
		require.Equal(t, attempt == 3, dead)
		if !dead {
			_, err := q.Lease(ctx, db, 1, time.Minute)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty, "backoff: not due at once")
			clock.Advance(4 * time.Second) // at most RetryMax
		}
	}
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q))
	// The unique key is free while the job is dead.
	b := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("other"), UniqueKey: "u1"})
	require.False(t, b.Duplicate)

	deadJobs, err := q.ListDead(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Len(t, deadJobs, 1)
	require.Equal(t, a.ID, deadJobs[0].ID)
	require.Equal(t, "flaky", string(deadJobs[0].Value))
	require.Equal(t, 3, deadJobs[0].Attempts)
	require.Equal(t, "failure 3", deadJobs[0].Reason)
	more, err := q.ListDead(ctx, db, deadJobs[0].Cursor, 10)
	require.NoError(t, err)
	require.Empty(t, more)

	require.ErrorIs(t, q.Requeue(ctx, db, a.ID), fdbqueue.ErrUniqueKeyHeld)
	lb := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, b.ID, lb.JobID)
	require.NoError(t, q.Ack(ctx, db, lb))
	require.NoError(t, q.Requeue(ctx, db, a.ID))
	require.ErrorIs(t, q.Requeue(ctx, db, a.ID), fdbqueue.ErrJobNotFound)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, q))
	dup := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("again"), UniqueKey: "u1"})
	require.True(t, dup.Duplicate, "the requeued job holds its unique key again")
	require.Equal(t, a.ID, dup.ID)

	l := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 1, l.Attempt, "requeue resets the attempts")
	_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	// An expired last attempt dead-letters the job at the next lease.
	for i := 2; i <= 3; i++ {
		l = mustLease(t, db, q, 1, time.Minute)[0]
		require.Equal(t, i, l.Attempt)
		clock.Advance(2 * time.Minute)
	}
	_, err = q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q))
	require.ErrorIs(t, q.Ack(ctx, db, l), fdbqueue.ErrLeaseLost)
	require.NoError(t, q.DeleteDead(ctx, db, a.ID))
	require.ErrorIs(t, q.DeleteDead(ctx, db, a.ID), fdbqueue.ErrJobNotFound)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
	require.Empty(t, rawKeysIn(t, db, q.Subspace()))
}

// Values at the limit, all-zero and all-0xff survive lease, nack,
// dead-letter and requeue unchanged; one byte more is refused before
// anything is written.
func TestJobQueueValuesAtTheLimit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "limits", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	values := [][]byte{
		bytes.Repeat([]byte{0}, kv.MaxValueSize),
		bytes.Repeat([]byte{0xff}, kv.MaxValueSize),
		bytes.Repeat([]byte("ab"), kv.MaxValueSize/2),
		{},
		{0},
		{0xff},
	}
	_, err := q.Add(ctx, db, fdbqueue.Job{Value: make([]byte, kv.MaxValueSize+1)})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
	require.ErrorIs(t, err, kv.ErrValueTooLarge)

	for _, v := range values {
		r, err := q.Add(ctx, db, fdbqueue.Job{Value: v, MaxAttempts: 2, UniqueKey: string(bytes.Repeat([]byte{0xff}, fdbqueue.MaxUniqueKeySize))})
		require.NoError(t, err)
		require.False(t, r.Duplicate)
		l := mustLease(t, db, q, 1, time.Minute)[0]
		require.Equal(t, v, l.Value)
		_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1, Reason: string(bytes.Repeat([]byte{0xff}, 5000))})
		require.NoError(t, err)
		l = mustLease(t, db, q, 1, time.Minute)[0]
		require.Equal(t, v, l.Value)
		require.Len(t, l.Reason, fdbqueue.MaxReasonSize)
		dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{})
		require.NoError(t, err)
		require.True(t, dead)
		ds, err := q.ListDead(ctx, db, nil, 1)
		require.NoError(t, err)
		require.Equal(t, v, ds[0].Value)
		require.NoError(t, q.Requeue(ctx, db, r.ID))
		l = mustLease(t, db, q, 1, time.Minute)[0]
		require.Equal(t, v, l.Value)
		require.NoError(t, q.Ack(ctx, db, l))
	}
	_, err = q.Add(ctx, db, fdbqueue.Job{UniqueKey: string(make([]byte, fdbqueue.MaxUniqueKeySize+1))})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)

	// A batch over the budget is refused whole.
	big := make([]fdbqueue.Job, 11)
	for i := range big {
		big[i].Value = values[0]
	}
	_, err = q.AddBatch(ctx, db, big)
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// Concurrent adds of one unique key add exactly one job.
func TestJobQueueUniqueConcurrent(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, memdb.WithSeed(3), memdb.WithFaults(withReadFaults(memdb.Faults{UnknownApplied: 0.1, UnknownNotApplied: 0.1, NotCommitted: 0.05})))
	q := mustJobQueue(t, "unique", fdbqueue.JobQueueConfig{})
	const adders, keys = 8, 5
	gt := forGoroutines(t)
	results := make([][]fdbqueue.AddResult, adders)
	var wg sync.WaitGroup
	for a := range adders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte{byte(a)}, UniqueKey: fmt.Sprint("key-", k)})
				if err != nil {
					gt.Error(err)
					return
				}
				results[a] = append(results[a], r)
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the adders")
	for k := range keys {
		added := 0
		ids := map[fdbqueue.JobID]bool{}
		for a := range adders {
			r := results[a][k]
			ids[r.ID] = true
			if !r.Duplicate {
				added++
			}
		}
		require.Equal(t, 1, added, "key %d", k)
		require.Len(t, ids, 1, "every duplicate names the job that holds the key")
	}
	require.Equal(t, int64(keys), mustStats(t, db, q).Queued)
}

// Under commit_unknown_result, applied or not, each operation takes effect
// once and returns the same result.
func TestJobQueueUnknownResult(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprint("applied=", applied), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			clock := newFakeClock()
			q := mustJobQueue(t, "unknown", fdbqueue.JobQueueConfig{Clock: clock})

			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("v"), UniqueKey: "k"})
			require.NoError(t, err)
			require.False(t, r.Duplicate, "the retry returns the first attempt's result")
			require.Equal(t, int64(1), mustStats(t, db, q).Queued)

			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			l := mustLease(t, db, q, 1, time.Minute)[0]
			require.Equal(t, 1, l.Attempt, "one lease, one attempt")
			require.Equal(t, r.ID, l.JobID)

			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			l, err = q.Extend(ctx, db, l, 2*time.Minute)
			require.NoError(t, err)

			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1})
			require.NoError(t, err)
			require.False(t, dead)

			l = mustLease(t, db, q, 1, time.Minute)[0]
			require.Equal(t, 2, l.Attempt)
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			require.NoError(t, q.Ack(ctx, db, l))
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))

			// Inside the application's transaction, with the OpID made once.
			l2 := func() fdbqueue.Lease {
				mustAdd(t, db, q, fdbqueue.Job{Value: []byte("w")})
				return mustLease(t, db, q, 1, time.Minute)[0]
			}()
			id := fdbqueue.NewOpID()
			effect := []byte("effect")
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			runs := 0
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				runs++
				tr.Set(effect, l2.ID[:]) // idempotent, keyed by the lease
				return q.Ack(ctx, tr, l2, fdbqueue.WithOpID(id))
			}))
			require.Equal(t, 2, runs)
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
		})
	}
}

// LeaseWait sleeps on the signal watch and on a timer for the earliest
// vesting time: it wakes when a job is added, and when a delayed job falls
// due, with no polling and no sleeps in the test.
func TestJobQueueLeaseWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 16)
	q := mustJobQueue(t, "wait", fdbqueue.JobQueueConfig{Clock: clock})

	wait := func() <-chan leaseWaitResult { return leaseWaitAsync(ctx, q, db) }

	// Empty queue: a watch only (no timer). Adding wakes it.
	w := wait()
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("now")})
	r := recvWithin(t, w, "the LeaseWait the add wakes")
	require.NoError(t, r.err)
	require.Equal(t, "now", string(r.ls[0].Value))
	require.NoError(t, q.Ack(ctx, db, r.ls[0]))

	// A job due in 10 minutes: the waiter arms a timer for it.
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("later"), Delay: 10 * time.Minute})
	w = wait()
	d := nextArmed(t, clock)
	require.Equal(t, 10*time.Minute+time.Microsecond, d)
	select {
	case r := <-w:
		t.Fatalf("woke early: %v", r)
	default:
	}
	clock.Advance(d)
	r = recvWithin(t, w, "the LeaseWait its timer wakes")
	require.NoError(t, r.err)
	require.Equal(t, "later", string(r.ls[0].Value))

	// A leased job falls due again at its deadline: the waiter wakes then.
	w = wait()
	d = nextArmed(t, clock)
	require.Equal(t, time.Minute+time.Microsecond, d)
	clock.Advance(d)
	r = recvWithin(t, w, "the LeaseWait the lease's deadline wakes")
	require.NoError(t, r.err)
	require.Equal(t, 2, r.ls[0].Attempt)

	// Context end.
	cctx, ccancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := q.LeaseWait(cctx, db, 1, time.Minute); done <- err }()
	nextArmed(t, clock)
	ccancel()
	require.ErrorIs(t, recvWithin(t, done, "the cancelled LeaseWait's return"), context.Canceled)
}

// A watch that fails (past the database's watch limit: too_many_watches,
// as FDB's max_watches sets) fails LeaseWait with that error, for its
// caller to back off (Run's workers retry a second later), instead of
// looking again at once: retried in a loop, each attempt's watch fails at
// once, so LeaseWait would poll the database until ctx ended.
func TestJobQueueLeaseWaitFailedWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout) // a failure detector only
	defer cancel()
	db := newDB(t, memdb.WithMaxWatches(0))
	q := mustJobQueue(t, "watch-limit", fdbqueue.JobQueueConfig{})
	_, err := q.LeaseWait(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, kv.ErrTooManyWatches)
	require.NoError(t, ctx.Err(), "LeaseWait returned only when its context ended")
}

// A watch that FoundationDB 7.3 fails with broken_promise (a key's only
// watch, when its storage server lags: watchStorageServerResp,
// fdbclient/NativeAPI.actor.cpp, drops the watch's promise instead of
// passing future_version on) wakes LeaseWait, which looks again, as for a
// retryable error: it used to return the error to its caller.
func TestJobQueueLeaseWaitBrokenPromiseWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), wakeTimeout) // a failure detector only
	defer cancel()
	db := &brokenWatchDB{DB: newDB(t), broken: make(chan struct{}, 1)}
	q := mustJobQueue(t, "watch-broken", fdbqueue.JobQueueConfig{})
	done := leaseWaitAsync(ctx, q, db)
	recvWithin(t, db.broken, "the broken watch handed out")
	mustAdd(t, db.DB, q, fdbqueue.Job{Value: []byte("now")})
	r := recvWithin(t, done, "LeaseWait's return")
	require.NoError(t, r.err)
	require.Len(t, r.ls, 1)
	require.Equal(t, "now", string(r.ls[0].Value))
}

// brokenWatchDB is a memdb.DB whose first watch fails with broken_promise
// (signalled on broken, once handed out); later watches are memdb's.
type brokenWatchDB struct {
	*memdb.DB
	broken chan struct{}
	once   sync.Once
}

func (d *brokenWatchDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.DB.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, &brokenWatchTx{Transaction: tr, d: d}, fn)
}

type brokenWatchTx struct {
	kv.Transaction
	d *brokenWatchDB
}

func (t *brokenWatchTx) Watch(key []byte) kv.Watch {
	w := t.Transaction.Watch(key)
	var first bool
	t.d.once.Do(func() { first = true })
	if !first {
		return w
	}
	w.Cancel()
	t.d.broken <- struct{}{}
	return failedWatch{kv.ErrBrokenPromise}
}

// failedWatch is a watch that has failed with err.
type failedWatch struct{ err error }

func (w failedWatch) Wait(context.Context) error { return w.err }
func (failedWatch) Cancel()                      {}

// Stats splits due from delayed and live from expired leases, exactly at
// the resolution, from counters only.
func TestJobQueueStats(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "stats", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	for i := range 10 {
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte{byte(i)}, Delay: time.Duration(i) * time.Minute})
	}
	require.Equal(t, fdbqueue.JobStats{Queued: 10, Due: 1, Delayed: 9}, mustStats(t, db, q))
	clock.Advance(4*time.Minute + 30*time.Second)
	s := mustStats(t, db, q)
	require.Equal(t, fdbqueue.JobStats{Queued: 10, Due: 5, Delayed: 5, OldestDue: 4*time.Minute + 30*time.Second}, s)
	ls := mustLease(t, db, q, 3, time.Minute)
	require.Len(t, ls, 3)
	require.Equal(t, fdbqueue.JobStats{Queued: 7, Due: 2, Delayed: 5, Leased: 3, OldestDue: time.Minute + 30*time.Second}, mustStats(t, db, q))
	clock.Advance(2 * time.Minute)
	s = mustStats(t, db, q)
	require.Equal(t, int64(3), s.ExpiredLeases)
	require.Equal(t, int64(0), s.Leased)
	require.Equal(t, int64(2+2+3), s.Due)
	require.NoError(t, q.Ack(ctx, db, ls[0]))
	s = mustStats(t, db, q)
	require.Equal(t, fdbqueue.JobStats{Queued: 7, Due: 6, Delayed: 3, ExpiredLeases: 2, OldestDue: s.OldestDue}, s)
}

func TestJobQueueBadInput(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "test", "bad")
	for _, cfg := range []fdbqueue.JobQueueConfig{{LeaseDuration: -1}, {MaxAttempts: -1}, {Choice: -1}, {Choice: fdbqueue.MaxLeaseBatch + 1},
		{RetryBase: time.Minute, RetryMax: time.Second}, {StatsResolution: -1}} {
		_, err := fdbqueue.NewJobQueue(sub, cfg)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "%+v", cfg)
	}
	_, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{}, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes(nil), fdbqueue.JobQueueConfig{})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)

	q := mustJobQueue(t, "bad", fdbqueue.JobQueueConfig{})
	_, err = q.Add(ctx, nil, fdbqueue.Job{})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	var nilDB *memdb.DB
	_, err = q.Lease(ctx, nilDB, 1, 0)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	for _, n := range []int{0, -1, fdbqueue.MaxLeaseBatch + 1} {
		_, err = q.Lease(ctx, db, n, 0)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	}
	_, err = q.Lease(ctx, db, 1, -time.Second)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = q.Add(ctx, db, fdbqueue.Job{MaxAttempts: -1})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = q.ListDead(ctx, db, []byte("not a cursor"), 1)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	_, err = q.ListDead(ctx, db, nil, 0)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, q.Ack(ctx, db, fdbqueue.Lease{}), fdbqueue.ErrLeaseLost)
	require.ErrorIs(t, q.Requeue(ctx, db, fdbqueue.JobID{}), fdbqueue.ErrJobNotFound)
}

// LeaseWait whose only candidates are dead-lettered (their last lease
// expired) looks again, then sleeps until the next job is due.
func TestJobQueueLeaseWaitAfterBurying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "wait-bury", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("once"), MaxAttempts: 1})
	mustLease(t, db, q, 1, time.Minute)
	clock.Advance(2 * time.Minute) // the only attempt expired
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("next"), Delay: time.Hour})
	clock.Armed = make(chan time.Duration, 4)
	got := make(chan []fdbqueue.Lease, 1)
	errs := make(chan error, 1)
	go func() {
		ls, err := q.LeaseWait(ctx, db, 1, time.Minute)
		errs <- err
		got <- ls
	}()
	require.Equal(t, time.Hour+time.Microsecond, nextArmed(t, clock))
	require.Equal(t, int64(1), mustStats(t, db, q).Dead)
	clock.Advance(time.Hour + time.Microsecond)
	require.NoError(t, recvWithin(t, errs, "the woken LeaseWait"))
	require.Equal(t, "next", string((<-got)[0].Value))
}

// Batches at the limits: nine values of the maximum size in one add (just
// under the 1 MB budget), and a lease of MaxLeaseBatch jobs at once.
func TestJobQueueBatchesAtTheLimit(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	// The largest budget: 1,000 leases of tiny jobs cost about 1.3 MB as
	// FoundationDB counts them (jobqueue_budget.go), over the default 1 MB.
	q := mustJobQueue(t, "batch-limits", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1}, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget))
	big := make([]fdbqueue.Job, 9)
	for i := range big {
		big[i].Value = bytes.Repeat([]byte{byte(i)}, kv.MaxValueSize)
	}
	_, err := q.AddBatch(ctx, db, big)
	require.NoError(t, err)
	ls := mustLease(t, db, q, 9, time.Minute)
	require.Len(t, ls, 9)
	for _, l := range ls {
		require.Len(t, l.Value, kv.MaxValueSize)
		require.NoError(t, q.Ack(ctx, db, l))
	}

	many := make([]fdbqueue.Job, fdbqueue.MaxLeaseBatch)
	for i := range many {
		many[i].Value = []byte{byte(i)}
	}
	_, err = q.AddBatch(ctx, db, many)
	require.NoError(t, err)
	ls = mustLease(t, db, q, fdbqueue.MaxLeaseBatch, time.Minute)
	require.Len(t, ls, fdbqueue.MaxLeaseBatch)
	require.Equal(t, fdbqueue.JobStats{Leased: fdbqueue.MaxLeaseBatch}, mustStats(t, db, q))
}

// A key the queue did not write, at the front of the queue but not due:
// Lease reads only the due keys and reports the queue empty, LeaseWait must
// read the first key's vesting time and fails with ErrForeignKey naming it
// (as documented) instead of sleeping on a time it cannot know.
func TestJobQueueLeaseWaitForeignFirstKey(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "foreignwait", fdbqueue.JobQueueConfig{Clock: clock})
	later := clock.Now().Add(time.Hour).UnixMicro()
	foreign, err := q.Subspace().Pack(tuple.Tuple{"q", later})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(foreign, []byte("x")); return nil }))
	_, err = q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	_, err = q.LeaseWait(ctx, db, 1, time.Minute)
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.Equal(t, foreign, fk.Key)
}

// A key in the queue's range that the queue did not write fails with
// ErrForeignKey (naming it) when it is the only candidate (with K = 1, when
// it is first, as a Queue's head), and is left alone while there are other
// candidates to take.
func TestJobQueueForeignKeys(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "foreign", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	foreign, err := q.Subspace().Pack(tuple.Tuple{"q", int64(0), "not a job"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(foreign, []byte("x")); return nil }))
	_, err = q.Lease(ctx, db, 1, time.Minute)
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.Equal(t, foreign, fk.Key)
	_, err = q.Stats(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)

	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("real")})
	_, err = q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "K = 1: the foreign key is the only candidate")
	q4 := mustJobQueue(t, "foreign", fdbqueue.JobQueueConfig{Clock: clock, Choice: 4})
	ls := mustLease(t, db, q4, 1, time.Minute)
	require.Equal(t, "real", string(ls[0].Value))
	v, err := getKey(ctx, db, foreign)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), v, "left alone")

	// K = 1, n = 2: the foreign key comes first in key order and is
	// skipped; the job behind it is taken, and Lease succeeds (it fails
	// only when no candidate could be taken).
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("behind")})
	ls, err = q.Lease(ctx, db, 2, time.Minute)
	require.NoError(t, err, "a job was taken past the foreign key")
	require.Len(t, ls, 1)
	require.Equal(t, "behind", string(ls[0].Value))
}

// A RetryMax past half the largest Duration (math.MaxInt64: no cap) must
// not overflow the doubling: the backoff stays within RetryBase/2 and
// RetryMax at every attempt, so a nacked job is never due at once (nor
// does Backoff spin on a delay that wrapped to zero).
func TestJobQueueBackoffHugeRetryMax(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "backoff-max", fdbqueue.JobQueueConfig{Clock: clock, RetryBase: time.Second, RetryMax: math.MaxInt64})
	for _, a := range []int{1, 2, 33, 34, 35, 40, 64, 100, math.MaxInt} {
		d := q.Backoff(a)
		require.GreaterOrEqual(t, d, time.Second/2, "attempt %d", a)
	}

	// Through Nack: the 40th failed attempt of a job keeps it delayed.
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("flaky"), MaxAttempts: 100})
	for attempt := 1; attempt < 40; attempt++ {
		l := mustLease(t, db, q, 1, time.Minute)[0]
		_, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1})
		require.NoError(t, err)
	}
	l := mustLease(t, db, q, 1, time.Minute)[0]
	require.Equal(t, 40, l.Attempt)
	dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{}) // the queue's backoff
	require.NoError(t, err)
	require.False(t, dead)
	_, err = q.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "backed off, not due at once")
	require.Equal(t, int64(1), mustStats(t, db, q).Delayed)
}

// Backoff takes a random part of up to a half off the delay (jitter), so
// that jobs that failed together do not come back together: each delay is
// within [d/2, d], and they differ. (With d an hour, the jitter takes one
// of 1.8e12 values: three equal delays have a chance of 1 in 3e24.)
func TestJobQueueBackoffJitter(t *testing.T) {
	q := mustJobQueue(t, "backoff-jitter", fdbqueue.JobQueueConfig{RetryBase: time.Hour, RetryMax: time.Hour})
	seen := map[time.Duration]bool{}
	for range 3 {
		d := q.Backoff(1)
		require.GreaterOrEqual(t, d, 30*time.Minute)
		require.LessOrEqual(t, d, time.Hour)
		seen[d] = true
	}
	require.Greater(t, len(seen), 1, "three backoffs without jitter: %v", seen)
}

// Extend to a shorter deadline makes the job due sooner, so it bumps the
// signal as every such write does: a LeaseWait asleep until the old
// deadline wakes, and sleeps until the new one instead.
func TestJobQueueExtendShorterWakesLeaseWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db := newDB(t)
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 16)
	q := mustJobQueue(t, "extend-shorter", fdbqueue.JobQueueConfig{Clock: clock})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("j")})
	l := mustLease(t, db, q, 1, time.Hour)[0]

	got := leaseWaitAsync(ctx, q, db)
	require.Equal(t, time.Hour+time.Microsecond, nextArmed(t, clock), "asleep until the lease's deadline")

	_, err := q.Extend(ctx, db, l, time.Millisecond) // give the job back soon
	require.NoError(t, err)
	var d time.Duration
	select {
	case d = <-clock.Armed:
	case <-ctx.Done():
		t.Fatal("LeaseWait slept on through a shortened lease")
	}
	require.Equal(t, time.Millisecond+time.Microsecond, d)
	clock.Advance(d)
	r := recvWithin(t, got, "the woken LeaseWait")
	require.NoError(t, r.err)
	require.Equal(t, 2, r.ls[0].Attempt)
}

// A Lease whose candidates all used their last attempt buries them and
// reads on past them in the same transaction: it leases the due job behind
// them rather than reporting ErrEmpty while a job is due. 1 and 50 buried
// jobs ahead: reads of 1, 2, 4, ... candidates (Choice 1).
func TestJobQueueLeaseReadsPastBuried(t *testing.T) {
	for _, expired := range []int{1, 50} {
		t.Run(fmt.Sprint(expired), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			clock := newFakeClock()
			q := mustJobQueue(t, "past-buried", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
			for i := range expired {
				mustAdd(t, db, q, fdbqueue.Job{Value: fmt.Appendf(nil, "last try %d", i), MaxAttempts: 1})
			}
			ls := mustLease(t, db, q, expired, time.Minute)
			require.Len(t, ls, expired)
			due := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("due"), Delay: 2 * time.Minute})
			clock.Advance(3 * time.Minute) // the leases expired before the job is due: they sort first

			got, err := q.Lease(ctx, db, 1, time.Minute)
			require.NoError(t, err, "a job is due behind the buried ones")
			require.Len(t, got, 1)
			require.Equal(t, due.ID, got[0].JobID)
			st := mustStats(t, db, q)
			require.EqualValues(t, expired, st.Dead)
			require.EqualValues(t, 1, st.Leased)

			_, err = q.Lease(ctx, db, 1, time.Minute)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		})
	}
}

// DeadCursorAt(t) starts ListDead at the first job that died at or after
// t, to the microsecond the list records, whatever died before: here
// jobs that died at 0, 1 ms, 1 ms + 1 µs and 2 ms after a start.
func TestDeadCursorAt(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "dead-cursor", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	start := clock.Now()
	for i, at := range []time.Duration{0, time.Millisecond, time.Millisecond + time.Microsecond, 2 * time.Millisecond} {
		clock.Advance(start.Add(at).Sub(clock.Now()))
		mustAdd(t, db, q, fdbqueue.Job{Value: []byte(fmt.Sprint(i)), MaxAttempts: 1})
		l := mustLease(t, db, q, 1, time.Minute)
		dead, err := q.Nack(ctx, db, l[0], fdbqueue.NackOptions{Reason: "fails"})
		require.NoError(t, err)
		require.True(t, dead)
	}
	from := func(at time.Time) []string {
		ds, err := q.ListDead(ctx, db, q.DeadCursorAt(at), 10)
		require.NoError(t, err)
		var vs []string
		for _, d := range ds {
			require.False(t, d.Died.Before(at), "job %s died at %v, before %v", d.Value, d.Died, at)
			vs = append(vs, string(d.Value))
		}
		return vs
	}
	require.Equal(t, []string{"0", "1", "2", "3"}, from(start.Add(-time.Hour)))
	require.Equal(t, []string{"0", "1", "2", "3"}, from(start))
	require.Equal(t, []string{"1", "2", "3"}, from(start.Add(time.Nanosecond)), "within the first microsecond: the next")
	require.Equal(t, []string{"1", "2", "3"}, from(start.Add(time.Millisecond)))
	require.Equal(t, []string{"2", "3"}, from(start.Add(time.Millisecond+time.Nanosecond)))
	require.Equal(t, []string{"3"}, from(start.Add(2*time.Millisecond)))
	require.Empty(t, from(start.Add(2*time.Millisecond+time.Microsecond)))
	// A page from the cursor goes on with a DeadJob's Cursor.
	ds, err := q.ListDead(ctx, db, q.DeadCursorAt(start.Add(time.Millisecond)), 1)
	require.NoError(t, err)
	more, err := q.ListDead(ctx, db, ds[0].Cursor, 10)
	require.NoError(t, err)
	require.Len(t, more, 2)
	require.Equal(t, "2", string(more[0].Value))
}
