package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Workers that crash mid-job (never ack nor nack) lose nothing, under
// not_committed, commit_unknown_result (applied and not) and
// transaction_too_old: every job ends acked exactly once or dead-lettered
// exactly once, and the effect written in the same transaction as each
// ack exists once per acked job and never for a dead one.
//
// The faults are memdb's (memdb/faults.go), which reproduces FDB's retry
// semantics: 1020, 1021 and 1007 are retryable (fdbclient's
// Transaction::onError, and bindings/go/src/fdb/database.go's retry loop),
// and a 1021 commit may or may not have applied.
func TestJobQueueCrashingWorkersUnderFaults(t *testing.T) {
	for _, seed := range []int64{1, 2, 3} {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { crashingWorkers(t, seed) })
	}
}

func crashingWorkers(t *testing.T, seed int64) {
	ctx := context.Background()
	db := newDB(t, memdb.WithSeed(seed), memdb.WithFaults(withReadFaults(memdb.Faults{
		NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05, TooOld: 0.02,
	})))
	clock := newFakeClock()
	q := mustJobQueue(t, "crash", fdbqueue.JobQueueConfig{Clock: clock, Choice: 4, MaxAttempts: 4,
		RetryBase: time.Second, RetryMax: 4 * time.Second})
	effects := mustSubspace(t, "test", "crash-effects")

	const jobs = 240
	added := map[fdbqueue.JobID]bool{}
	for b := 0; b < jobs/20; b++ {
		batch := make([]fdbqueue.Job, 20)
		for i := range batch {
			batch[i] = fdbqueue.Job{Value: []byte(fmt.Sprint("job-", b*20+i)), Priority: int32(i % 3), Delay: time.Duration(i%4) * time.Second}
		}
		rs, err := q.AddBatch(ctx, db, batch)
		require.NoError(t, err)
		for _, r := range rs {
			require.False(t, r.Duplicate)
			added[r.ID] = true
		}
	}
	require.Len(t, added, jobs)
	require.Equal(t, int64(jobs), mustStats(t, db, q).Queued, "each add applied exactly once")

	var crashes, nacks, acks, lost int64
	var mu sync.Mutex
	gt := forGoroutines(t)
	rounds := 0
	for ; rounds < 200; rounds++ {
		s := mustStats(t, db, q)
		if s.Queued+s.Leased+s.ExpiredLeases == 0 {
			break
		}
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(seed), uint64(rounds*100+w)))
				for {
					ls, err := q.Lease(ctx, db, 1+rng.IntN(3), time.Minute)
					if errors.Is(err, fdbqueue.ErrEmpty) {
						return
					}
					if err != nil {
						gt.Error(err)
						return
					}
					for _, l := range ls {
						switch x := rng.Float64(); {
						case x < 0.25: // crash: this worker drops the rest of its leases
							mu.Lock()
							crashes++
							mu.Unlock()
							return
						case x < 0.45:
							_, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{Reason: "simulated failure"})
							mu.Lock()
							nacks++
							mu.Unlock()
						default:
							id := fdbqueue.NewOpID() // once per job, outside the retry loop
							effect, _ := effects.Pack(tuple.Tuple{l.JobID[:], l.ID[:]})
							err = db.Transact(ctx, func(tr kv.Transaction) error {
								tr.Set(effect, l.Value)
								return q.Ack(ctx, tr, l, fdbqueue.WithOpID(id))
							})
							mu.Lock()
							acks++
							mu.Unlock()
						}
						if errors.Is(err, fdbqueue.ErrLeaseLost) {
							mu.Lock()
							lost++
							mu.Unlock()
						} else if err != nil {
							gt.Error(err)
							return
						}
					}
				}
			}()
		}
		waitWithin(t, &wg, workTimeout, "the round's workers")
		if t.Failed() {
			return
		}
		clock.Advance(2 * time.Minute) // every lease expires, every backoff ends
	}
	require.Less(t, rounds, 200, "the queue drained")
	require.Zero(t, lost, "no lease expires within a round")
	require.Positive(t, crashes)
	require.Positive(t, nacks)

	// Account for every job.
	r, _ := effects.Range()
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	effectsOf := map[fdbqueue.JobID]int{}
	for _, p := range kvs {
		tu, err := effects.Unpack(p.Key)
		require.NoError(t, err)
		var id fdbqueue.JobID
		copy(id[:], tu[0].([]byte))
		effectsOf[id]++
	}
	var dead []fdbqueue.DeadJob
	var cursor []byte
	for {
		page, err := q.ListDead(ctx, db, cursor, 50)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		dead = append(dead, page...)
		cursor = page[len(page)-1].Cursor
	}
	isDead := map[fdbqueue.JobID]bool{}
	for _, d := range dead {
		require.False(t, isDead[d.ID], "dead once")
		isDead[d.ID] = true
		require.True(t, d.Attempts >= d.MaxAttempts)
	}
	for id := range added {
		n := effectsOf[id]
		require.LessOrEqual(t, n, 1, "job %s: effects of %d leases committed", id, n)
		require.True(t, (n == 1) != isDead[id], "job %s: acked %d, dead %v", id, n, isDead[id])
	}
	require.Len(t, effectsOf, len(added)-len(dead))
	s := mustStats(t, db, q)
	require.Equal(t, fdbqueue.JobStats{Dead: int64(len(dead))}, s)
	t.Logf("seed %d: %d rounds, %d acked, %d dead, %d crashes, %d nacks, %d ack calls", seed, rounds, len(effectsOf), len(dead), crashes, nacks, acks)
}

// Concurrent consumers picking at random among the first K due jobs lease
// each job once.
func TestJobQueueConcurrentLeasesTakeEachJobOnce(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustJobQueue(t, "spread", fdbqueue.JobQueueConfig{Choice: 32})
	gt := forGoroutines(t)
	const n = 600
	batch := make([]fdbqueue.Job, 100)
	for b := 0; b < n/100; b++ {
		for i := range batch {
			batch[i] = fdbqueue.Job{Value: []byte{byte(i)}}
		}
		_, err := q.AddBatch(ctx, db, batch)
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	seen := make(chan fdbqueue.JobID, n)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				ls, err := q.Lease(ctx, db, 1, time.Minute)
				if errors.Is(err, fdbqueue.ErrEmpty) {
					return
				}
				if err != nil {
					gt.Error(err)
					return
				}
				seen <- ls[0].JobID
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the consumers")
	close(seen)
	ids := map[fdbqueue.JobID]bool{}
	for id := range seen {
		require.False(t, ids[id], "leased twice")
		ids[id] = true
	}
	require.Len(t, ids, n)
}

// A lease conflicts only with another lease (or ack, nack, extend) of the
// same job: an add, an ack and a nack of other jobs committed while it was
// in flight leave it alone; a second lease of the same job fails with
// not_committed. (FDB's resolver checks read conflict ranges against the
// writes committed after the read version, fdbserver/SkipList.cpp;
// snapshot reads add none, and the lease adds the one key explicitly, as
// Transaction::addReadConflictRange in fdbclient/NativeAPI.actor.cpp.)
func TestJobQueueLeaseConflictsOnlyOnItsJob(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	q := mustJobQueue(t, "conflicts", fdbqueue.JobQueueConfig{Clock: clock, Choice: 1})
	now := clock.Now()
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), RunAt: now.Add(-3 * time.Hour)})
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("y"), RunAt: now.Add(-2 * time.Hour)})
	held := mustLease(t, db, q, 2, time.Minute)
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("a"), RunAt: now.Add(-time.Hour)})
	lease := func() (kv.Transaction, fdbqueue.Lease) {
		tr, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		ls, err := q.Lease(ctx, tr, 1, time.Minute)
		require.NoError(t, err)
		return tr, ls[0]
	}

	tr, la := lease()
	require.Equal(t, "a", string(la.Value))
	// Committed meanwhile: an add ahead of a, an ack and a nack.
	mustAdd(t, db, q, fdbqueue.Job{Value: []byte("d"), RunAt: now.Add(-4 * time.Hour)})
	require.NoError(t, q.Ack(ctx, db, held[0]))
	_, err := q.Nack(ctx, db, held[1], fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	require.NoError(t, tr.Commit(), "no conflict with other jobs")

	// Two leases of the same job (d, first in order): the second to commit fails.
	tr1, l1 := lease()
	tr2, l2 := lease()
	require.Equal(t, "d", string(l1.Value))
	require.Equal(t, l1.JobID, l2.JobID)
	require.NoError(t, tr1.Commit())
	require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1, Leased: 2}, mustStats(t, db, q))
}
