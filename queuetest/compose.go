package queuetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// composeChecks: an operation given a Transaction runs inside it and commits
// with the caller's own writes, or not at all.
func composeChecks() []check {
	var cs []check
	for _, m := range queueModes {
		cs = append(cs,
			check{"EnqueueCommitsWithCallerWrite/" + m.name, func(t *testing.T, f *fixture) { testComposeEnqueue(t, f, m, true) }},
			check{"EnqueueRollsBackWithCaller/" + m.name, func(t *testing.T, f *fixture) { testComposeEnqueue(t, f, m, false) }},
			check{"DequeueCommitsWithCallerWrite/" + m.name, func(t *testing.T, f *fixture) { testComposeDequeue(t, f, m, true) }},
			check{"DequeueRollsBackWithCaller/" + m.name, func(t *testing.T, f *fixture) { testComposeDequeue(t, f, m, false) }},
			check{"MoveBetweenQueues/" + m.name, func(t *testing.T, f *fixture) { testComposeMove(t, f, m) }},
		)
	}
	cs = append(cs,
		check{"PushPopWithCallerWrite", testComposePriority},
		check{"ExplicitCommit", testComposeExplicitCommit},
	)
	return cs
}

func testComposeEnqueue(t *testing.T, f *fixture, m queueMode, commit bool) {
	q := f.queue(t, "compose", m.opts...)
	mark := f.key("mark")
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := q.Enqueue(f.ctx, tr, []byte("one")); err != nil {
			return err
		}
		if err := q.EnqueueBatch(f.ctx, tr, strs("two", "three")); err != nil {
			return err
		}
		tr.Set(mark, []byte("caller"))
		if !commit {
			return errAbort
		}
		return nil
	})
	if !commit {
		require.ErrorIs(t, err, errAbort)
		require.Nil(t, f.get(t, mark), "the caller's write must roll back")
		require.Empty(t, f.drain(t, q), "an Enqueue in a transaction that rolled back must leave nothing")
		return
	}
	require.NoError(t, err)
	require.Equal(t, []byte("caller"), f.get(t, mark), "the caller's write commits")
	requireValues(t, strs("one", "two", "three"), f.drain(t, q), "the enqueues commit with the caller's write")
}

func testComposeDequeue(t *testing.T, f *fixture, m queueMode, commit bool) {
	q := f.queue(t, "compose", m.opts...)
	f.enqueueAll(t, q, strs("a", "b", "c"))
	mark := f.key("mark")
	var got [][]byte
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		got = nil
		v, err := q.Dequeue(f.ctx, tr)
		if err != nil {
			return err
		}
		vs, err := q.DequeueBatch(f.ctx, tr, 1)
		if err != nil {
			return err
		}
		got = append([][]byte{v}, vs...)
		tr.Set(mark, v)
		if !commit {
			return errAbort
		}
		return nil
	})
	requireValues(t, strs("a", "b"), got, "inside one transaction the dequeues see each other's clears")
	if !commit {
		require.ErrorIs(t, err, errAbort)
		require.Nil(t, f.get(t, mark))
		requireValues(t, strs("a", "b", "c"), f.drain(t, q), "a Dequeue in a transaction that rolled back removes nothing")
		return
	}
	require.NoError(t, err)
	require.Equal(t, []byte("a"), f.get(t, mark))
	requireValues(t, strs("c"), f.drain(t, q), "the dequeues commit with the caller's write")
}

// testComposeMove moves items from one queue to another atomically.
func testComposeMove(t *testing.T, f *fixture, m queueMode) {
	src := f.queue(t, "src", m.opts...)
	dst := f.queue(t, "dst", m.opts...)
	f.enqueueAll(t, src, strs("m1", "m2", "m3"))
	for range 3 {
		require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
			v, err := src.Dequeue(f.ctx, tr)
			if err != nil {
				return err
			}
			return dst.Enqueue(f.ctx, tr, v)
		}))
	}
	require.Empty(t, f.drain(t, src))
	requireValues(t, strs("m1", "m2", "m3"), f.drain(t, dst), "moved items keep their order")
}

func testComposePriority(t *testing.T, f *fixture) {
	pq := f.pqueue(t, "compose")
	mark := f.key("mark")
	require.NoError(t, pq.Push(f.ctx, f.db, []byte("five"), 5))
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := pq.Push(f.ctx, tr, []byte("one"), 1); err != nil {
			return err
		}
		it, err := pq.PopMax(f.ctx, tr)
		if err != nil {
			return err
		}
		tr.Set(mark, it.Value)
		return errAbort
	})
	require.ErrorIs(t, err, errAbort)
	require.Nil(t, f.get(t, mark))
	n, err := pq.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "a rolled-back Push and PopMax change nothing")

	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := pq.Push(f.ctx, tr, []byte("one"), 1); err != nil {
			return err
		}
		it, err := pq.PopMin(f.ctx, tr)
		if err != nil {
			return err
		}
		tr.Set(mark, it.Value)
		return nil
	}))
	require.Equal(t, []byte("one"), f.get(t, mark), "PopMin in the transaction sees its own Push")
	items := f.drainPQ(t, pq)
	require.Len(t, items, 1)
	requireValue(t, []byte("five"), items[0].Value)
}

// testComposeExplicitCommit: a transaction the caller creates and commits
// itself, with a staged queue (which runs its plain path inside it).
func testComposeExplicitCommit(t *testing.T, f *fixture) {
	q := f.queue(t, "explicit", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
	f.enqueueAll(t, q, strs("x", "y"))
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	v, err := q.Dequeue(f.ctx, tr)
	require.NoError(t, err)
	requireValue(t, []byte("x"), v)
	require.NoError(t, q.Enqueue(f.ctx, tr, []byte("z")))
	tr.Set(f.key("mark"), v)
	require.NoError(t, tr.Commit(), "the caller's commit")
	require.Equal(t, []byte("x"), f.get(t, f.key("mark")))
	requireValues(t, strs("y", "z"), f.drain(t, q))
}
