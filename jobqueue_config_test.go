package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// jobOps runs every JobQueue operation once on t, with a lease and a job
// ID the queue never issued: on a subspace of another kind each must fail
// with ErrConfigMismatch before it looks for the job.
func jobOps(q *fdbqueue.JobQueue) map[string]func(context.Context, kv.Transactor) error {
	l := fdbqueue.Lease{Deadline: time.Unix(1, 0)}
	return map[string]func(context.Context, kv.Transactor) error{
		"Add": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.Add(ctx, t, fdbqueue.Job{Value: []byte("job")})
			return err
		},
		"AddBatch": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.AddBatch(ctx, t, []fdbqueue.Job{{Value: []byte("j1")}, {Value: []byte("j2"), UniqueKey: "u"}})
			return err
		},
		"Lease": func(ctx context.Context, t kv.Transactor) error { _, err := q.Lease(ctx, t, 2, 0); return err },
		"SettleLease": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.SettleLease(ctx, t, fdbqueue.NewOpID())
			return err
		},
		"Ack": func(ctx context.Context, t kv.Transactor) error { return q.Ack(ctx, t, l) },
		"Nack": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.Nack(ctx, t, l, fdbqueue.NackOptions{})
			return err
		},
		"Extend":     func(ctx context.Context, t kv.Transactor) error { _, err := q.Extend(ctx, t, l, 0); return err },
		"Release":    func(ctx context.Context, t kv.Transactor) error { return q.Release(ctx, t, l, 0) },
		"Requeue":    func(ctx context.Context, t kv.Transactor) error { return q.Requeue(ctx, t, l.JobID) },
		"DeleteDead": func(ctx context.Context, t kv.Transactor) error { return q.DeleteDead(ctx, t, l.JobID) },
		"Job":        func(ctx context.Context, t kv.Transactor) error { _, err := q.Job(ctx, t, l.JobID); return err },
		"Cancel":     func(ctx context.Context, t kv.Transactor) error { return q.Cancel(ctx, t, l.JobID) },
		"Stats":      func(ctx context.Context, t kv.Transactor) error { _, err := q.Stats(ctx, t); return err },
		"ListDead":   func(ctx context.Context, t kv.Transactor) error { _, err := q.ListDead(ctx, t, nil, 5); return err },
		"Schedule": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.Schedule(ctx, t, fdbqueue.PeriodicJob{Name: "p", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}, time.Time{})
			return err
		},
		"Schedules": func(ctx context.Context, t kv.Transactor) error { _, err := q.Schedules(ctx, t, nil, 5); return err },
		"Unschedule": func(ctx context.Context, t kv.Transactor) error {
			_, err := q.Unschedule(ctx, t, "p")
			return err
		},
	}
}

// requireJobOpsMismatch runs every JobQueue operation on db, through the
// Database and inside a caller's transaction (LeaseWait and Run take a
// Database only), and requires each to fail
// with a *ConfigMismatchError on the kind, the stored one being stored,
// and the database to be unchanged.
func requireJobOpsMismatch(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, stored string) {
	t.Helper()
	ctx := context.Background()
	before := allPairs(t, db)
	for name, op := range jobOps(q) {
		err := op(ctx, db)
		requireMismatch(t, err, "kind")
		var me *fdbqueue.ConfigMismatchError
		require.ErrorAs(t, err, &me)
		require.Equal(t, stored, me.Stored, "%s: %v", name, err)
		require.Equal(t, "job queue", me.Handle, "%s: %v", name, err)
		err = db.Transact(ctx, func(tr kv.Transaction) error { return op(ctx, tr) })
		requireMismatch(t, err, "kind")
	}
	_, err := q.LeaseWait(ctx, db, 1, 0)
	requireMismatch(t, err, "kind")
	err = q.Run(ctx, db, func(context.Context, *fdbqueue.Task) error { return nil }, fdbqueue.PoolOptions{Workers: 1, Logger: quietLog})
	requireMismatch(t, err, "kind")
	err = q.RunScheduler(ctx, db, []fdbqueue.PeriodicJob{{Name: "p", Every: time.Hour, Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}})
	requireMismatch(t, err, "kind")
	require.Equal(t, before, allPairs(t, db), "nothing written")
}

// The reviewer's scenario: a JobQueue handle on a FIFO Queue's subspace.
// Before the job queue had a stored kind, Add succeeded, and then every
// Dequeue of the FIFO queue failed with ErrForeignKey on the job's keys,
// its items stranded behind them. Every JobQueue operation now fails
// with ErrConfigMismatch and writes nothing, and the queue still serves
// its items.
func TestJobQueueOnQueueSubspace(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []fdbqueue.Option
	}{
		{"indexed", nil},
		{"versionstamp", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}},
		{"staged", []fdbqueue.Option{fdbqueue.WithVersionstampOrder(),
			fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace})}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			sub := mustSubspace(t, "jobkind", c.name)
			q, err := fdbqueue.NewQueue(sub, c.opts...)
			require.NoError(t, err)
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: newFakeClock()})
			require.NoError(t, err)

			requireJobOpsMismatch(t, db, jq, "queue")

			n, err := q.Len(ctx, db)
			require.NoError(t, err)
			require.Equal(t, 3, n)
			vs, err := q.DequeueBatch(ctx, db, 5)
			require.NoError(t, err)
			require.Equal(t, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, vs)
		})
	}
}

// A JobQueue handle on a PriorityQueue's subspace fails the same way, and
// the priority queue keeps its items.
func TestJobQueueOnPriorityQueueSubspace(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "jobkind", "pq")
	pq, err := fdbqueue.NewPriorityQueue(sub)
	require.NoError(t, err)
	require.NoError(t, pq.Push(ctx, db, []byte("low"), 1))
	require.NoError(t, pq.Push(ctx, db, []byte("high"), 9))
	jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: newFakeClock()})
	require.NoError(t, err)

	requireJobOpsMismatch(t, db, jq, "priority queue")

	it, err := pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.Item{Value: []byte("high"), Priority: 9}, it)
	require.Equal(t, 1, queueLen(t, db, pq))
}

// A queue without a record is a recipe queue: a JobQueue on a subspace
// holding recipe items (indexed FIFO or priority keys written by another
// client, no record) fails with ErrConfigMismatch and writes nothing.
func TestJobQueueOnRecipeQueue(t *testing.T) {
	for _, c := range []struct {
		name string
		key  tuple.Tuple
	}{
		{"fifo", tuple.Tuple{int64(0), make([]byte, 20)}},
		{"priority", tuple.Tuple{int64(-3), int64(0), make([]byte, 20)}},
		{"bytes", tuple.Tuple{[]byte("sorts before the job keys")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			sub := mustSubspace(t, "jobkind", "recipe", c.name)
			plantForeign(t, db, sub, c.key, []byte("item"))
			jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: newFakeClock()})
			require.NoError(t, err)
			requireJobOpsMismatch(t, db, jq, "none, and keys a job queue does not write (a recipe queue's items)")
		})
	}
}

// The reverse: Queue and PriorityQueue handles on a job queue's subspace
// fail with ErrConfigMismatch naming the stored kind (before, the Queue
// failed with ErrForeignKey on a job key, a PriorityQueue's Push wrote
// its item among the jobs, and either's Clear, a blind range clear of
// the subspace, deleted every job), and write nothing; the job queue is
// unaffected.
func TestQueueOnJobQueueSubspace(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "jobkind", "jobs")
	jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Clock: newFakeClock()})
	require.NoError(t, err)
	id := mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("job")}).ID
	before := allPairs(t, db)

	for _, opts := range [][]fdbqueue.Option{nil, {fdbqueue.WithVersionstampOrder()}} {
		q, err := fdbqueue.NewQueue(sub, opts...)
		require.NoError(t, err)
		mismatch := func(err error) {
			t.Helper()
			requireMismatch(t, err, "kind")
			var me *fdbqueue.ConfigMismatchError
			require.ErrorAs(t, err, &me)
			require.Equal(t, "job queue", me.Stored)
			require.Equal(t, "queue", me.Handle)
		}
		mismatch(q.Enqueue(ctx, db, []byte("x")))
		_, err = q.Dequeue(ctx, db)
		mismatch(err)
		_, err = q.DequeueBatch(ctx, db, 2)
		mismatch(err)
		_, err = q.Peek(ctx, db)
		mismatch(err)
		_, err = q.Empty(ctx, db)
		mismatch(err)
		_, err = q.Len(ctx, db)
		mismatch(err)
		// Depth read the queue's depth counters, which a job queue does
		// not keep (it said 0), and RepairDepth counted the jobs' keys
		// into them.
		_, err = q.Depth(ctx, db)
		mismatch(err)
		mismatch(db.Transact(ctx, func(tr kv.Transaction) error { _, err := q.Depth(ctx, tr); return err }))
		_, err = q.RepairDepth(ctx, db)
		mismatch(err)
		mismatch(db.Transact(ctx, func(tr kv.Transaction) error { return q.Enqueue(ctx, tr, []byte("x")) }))
		mismatch(q.Clear(ctx, db))
		mismatch(db.Transact(ctx, func(tr kv.Transaction) error { return q.Clear(ctx, tr) }))
	}
	pq, err := fdbqueue.NewPriorityQueue(sub)
	require.NoError(t, err)
	requireMismatch(t, pq.Push(ctx, db, []byte("x"), 1), "kind")
	requireMismatch(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}, {Value: []byte("y"), Priority: 2}}), "kind")
	_, err = pq.PopMin(ctx, db)
	requireMismatch(t, err, "kind")
	_, err = pq.PeekMax(ctx, db)
	requireMismatch(t, err, "kind")
	_, err = pq.Depth(ctx, db)
	requireMismatch(t, err, "kind")
	_, err = pq.RepairDepth(ctx, db)
	requireMismatch(t, err, "kind")
	requireMismatch(t, pq.Clear(ctx, db), "kind")
	require.Equal(t, before, allPairs(t, db), "nothing written")

	ls := mustLease(t, db, jq, 1, time.Minute)
	require.Equal(t, id, ls[0].JobID)
	require.NoError(t, jq.Ack(ctx, db, ls[0]))
}

// A JobQueue stores its record on its first write, as the queues do (a
// packed (format, kind, layout, encoding, staging) at prefix + 0xff +
// ("c",)), and a second handle on the queue works with it.
func TestJobQueueStoresRecord(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "jobkind", "fresh")
	clock := newFakeClock()
	cfg := fdbqueue.JobQueueConfig{Clock: clock}
	jq1, err := fdbqueue.NewJobQueue(sub, cfg)
	require.NoError(t, err)
	_, err = jq1.Stats(ctx, db)
	require.NoError(t, err)
	require.Empty(t, allPairs(t, db), "a read stores nothing")

	first := mustAdd(t, db, jq1, fdbqueue.Job{Value: []byte("one")})
	raw := readKey(t, db, configKey(t, sub))
	rec, err := tuple.Unpack(raw)
	require.NoError(t, err)
	require.Equal(t, tuple.Tuple{int64(1), "job queue", "vesting, buckets of 1s", "raw", "none"}, rec)

	jq2, err := fdbqueue.NewJobQueue(sub, cfg)
	require.NoError(t, err)
	second := mustAdd(t, db, jq2, fdbqueue.Job{Value: []byte("two"), Delay: time.Second})
	ls := mustLease(t, db, jq2, 2, time.Minute)
	require.Len(t, ls, 1, "the second job is delayed")
	require.Equal(t, first.ID, ls[0].JobID)
	require.NoError(t, jq2.Ack(ctx, db, ls[0]))
	clock.Advance(time.Second)
	ls = mustLease(t, db, jq1, 1, time.Minute)
	require.Equal(t, second.ID, ls[0].JobID)
	dead, err := jq2.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	require.False(t, dead)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, jq2))
	require.Equal(t, raw, readKey(t, db, configKey(t, sub)), "the record is unchanged")
}

// A job queue made before job queues stored a record (none at prefix +
// 0xff + ("c",)) keeps working: its reads store nothing, and its first
// write stores the record.
func TestJobQueueWithoutRecordKeepsWorking(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "jobkind", "old")
	cfg := fdbqueue.JobQueueConfig{Clock: newFakeClock()}
	old, err := fdbqueue.NewJobQueue(sub, cfg)
	require.NoError(t, err)
	a := mustAdd(t, db, old, fdbqueue.Job{Value: []byte("a"), UniqueKey: "ua"})
	mustAdd(t, db, old, fdbqueue.Job{Value: []byte("b")})
	l := mustLease(t, db, old, 1, time.Minute)[0]
	_, err = old.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: -1})
	require.NoError(t, err)
	key := configKey(t, sub)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(key); return nil }))
	require.Nil(t, readKey(t, db, key))

	jq, err := fdbqueue.NewJobQueue(sub, cfg)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobStats{Queued: 2, Due: 2}, mustStats(t, db, jq))
	require.Nil(t, readKey(t, db, key), "a read stores nothing")
	ls := mustLease(t, db, jq, 2, time.Minute)
	require.Len(t, ls, 2)
	require.NotNil(t, readKey(t, db, key), "the first write stores the record")
	for _, l := range ls {
		require.NoError(t, jq.Ack(ctx, db, l))
	}
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, jq))
	require.False(t, mustAdd(t, db, jq, fdbqueue.Job{UniqueKey: "ua"}).Duplicate, "job %s's unique key is free", a.ID)
}

func readKey(t *testing.T, db kv.Database, key []byte) []byte {
	t.Helper()
	v, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]byte, error) {
		return tr.Get(key).Get()
	})
	require.NoError(t, err)
	return v
}

// Concurrent first writers on a fresh subspace: two job queue handles
// agree and do not conflict (the record is a blind write); a JobQueue and
// a Queue disagree on the kind, so their first writes conflict, and the
// loser's retry fails with ErrConfigMismatch, never leaving jobs and
// items mixed. (config.go: each first writer declares a write conflict on
// its record's claim and read conflicts around it; FDB's resolver fails a
// commit whose read conflict ranges meet a write committed after its read
// version, fdbserver/SkipList.cpp's ConflictSet, with not_committed.)
func TestJobQueueFirstWriters(t *testing.T) {
	ctx := context.Background()
	cfg := fdbqueue.JobQueueConfig{Clock: newFakeClock()}
	begin := func(t *testing.T, db kv.Database) (kv.Transaction, kv.Transaction) {
		tr1, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		tr2, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		return tr1, tr2
	}
	t.Run("agree", func(t *testing.T) {
		db := newDB(t)
		sub := mustSubspace(t, "jobkind", "first-agree")
		a, err := fdbqueue.NewJobQueue(sub, cfg)
		require.NoError(t, err)
		b, err := fdbqueue.NewJobQueue(sub, cfg)
		require.NoError(t, err)
		tr1, tr2 := begin(t, db)
		_, err = a.Add(ctx, tr1, fdbqueue.Job{Value: []byte("a")})
		require.NoError(t, err)
		_, err = b.Add(ctx, tr2, fdbqueue.Job{Value: []byte("b")})
		require.NoError(t, err)
		require.NoError(t, tr1.Commit())
		require.NoError(t, tr2.Commit(), "job queue handles do not conflict on the first write")
		require.Len(t, mustLease(t, db, a, 5, time.Minute), 2)
	})
	t.Run("disagree", func(t *testing.T) {
		for _, jobFirst := range []bool{true, false} {
			db := newDB(t)
			sub := mustSubspace(t, "jobkind", "first-disagree", jobFirst)
			jq, err := fdbqueue.NewJobQueue(sub, cfg)
			require.NoError(t, err)
			q, err := fdbqueue.NewQueue(sub)
			require.NoError(t, err)
			tr1, tr2 := begin(t, db)
			addJob := func(tr kv.Transaction) error {
				_, err := jq.Add(ctx, tr, fdbqueue.Job{Value: []byte("job")})
				return err
			}
			enqueue := func(tr kv.Transaction) error { return q.Enqueue(ctx, tr, []byte("item")) }
			first, second := addJob, enqueue
			if !jobFirst {
				first, second = enqueue, addJob
			}
			require.NoError(t, first(tr1))
			require.NoError(t, second(tr2))
			require.NoError(t, tr1.Commit())
			require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted, "first writers of different kinds conflict")
			requireMismatch(t, db.Transact(ctx, func(tr kv.Transaction) error { return second(tr) }), "kind")
			if jobFirst {
				require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, mustStats(t, db, jq))
			} else {
				require.Equal(t, 1, queueLen(t, db, q))
			}
		}
	})
}
