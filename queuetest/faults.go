package queuetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/kvtest"
)

// fault is a commit failure to inject.
type fault struct {
	name    string
	err     kv.Error
	applied bool
}

// faultKinds: a conflict, and commit_unknown_result whose commit did and
// did not apply. The journal must make each operation take effect once.
var faultKinds = []fault{
	{"not_committed", kv.ErrNotCommitted, false},
	{"commit_unknown_result/applied", kv.ErrCommitUnknownResult, true},
	{"commit_unknown_result/not_applied", kv.ErrCommitUnknownResult, false},
}

// faults returns the harness's fault injector, or skips the check.
func (f *fixture) faults(t *testing.T) kvtest.FaultInjector {
	t.Helper()
	fi := f.h.Faults()
	if fi == nil {
		t.Skip("capability missing: the backend cannot inject commit faults (Harness.Faults returned nil)")
	}
	return fi
}

// layerOp is an operation under a fault: setup fills the structure, op is
// the operation the fault hits (its first commit), want is what must come
// out when the structure is drained afterwards (op's own result first).
type layerOp struct {
	name string
	run  func(t *testing.T, f *fixture, inject func())
}

func faultChecks() []check {
	var cs []check
	for _, fk := range faultKinds {
		for _, op := range faultOps() {
			cs = append(cs, check{op.name + "/" + fk.name, func(t *testing.T, f *fixture) {
				fi := f.faults(t)
				op.run(t, f, func() { fi.FailNextCommit(fk.err, fk.applied) })
			}})
		}
		cs = append(cs, check{"CallerRetryLoopWithOpID/" + fk.name, func(t *testing.T, f *fixture) { testCallerRetryWithOpID(t, f, fk) }})
	}
	cs = append(cs, check{"RecoverDequeueByOpID", testRecoverDequeueByOpID})
	return cs
}

func faultOps() []layerOp {
	var ops []layerOp
	for _, m := range queueModes[:3] { // both layouts; one tuple mode is enough here
		ops = append(ops,
			layerOp{"Enqueue/" + m.name, func(t *testing.T, f *fixture, inject func()) {
				q := f.queue(t, "fault", m.opts...)
				f.enqueueAll(t, q, strs("a"))
				inject()
				require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("b")), "Enqueue retries the injected failure")
				requireValues(t, strs("a", "b"), f.drain(t, q), "the item is enqueued exactly once")
			}},
			layerOp{"EnqueueBatch/" + m.name, func(t *testing.T, f *fixture, inject func()) {
				q := f.queue(t, "fault", m.opts...)
				f.enqueueAll(t, q, strs("a"))
				inject()
				require.NoError(t, q.EnqueueBatch(f.ctx, f.db, strs("b", "c", "d")))
				requireValues(t, strs("a", "b", "c", "d"), f.drain(t, q), "the batch is enqueued exactly once")
			}},
			layerOp{"Dequeue/" + m.name, func(t *testing.T, f *fixture, inject func()) {
				q := f.queue(t, "fault", m.opts...)
				f.enqueueAll(t, q, strs("a", "b", "c"))
				inject()
				v, err := q.Dequeue(f.ctx, f.db)
				require.NoError(t, err, "Dequeue retries the injected failure")
				requireValue(t, []byte("a"), v, "the retry returns the item the applied attempt removed")
				requireValues(t, strs("b", "c"), f.drain(t, q), "nothing lost, nothing returned twice")
			}},
			layerOp{"DequeueBatch/" + m.name, func(t *testing.T, f *fixture, inject func()) {
				q := f.queue(t, "fault", m.opts...)
				f.enqueueAll(t, q, strs("a", "b", "c"))
				inject()
				vs, err := q.DequeueBatch(f.ctx, f.db, 2)
				require.NoError(t, err)
				requireValues(t, strs("a", "b"), vs)
				requireValues(t, strs("c"), f.drain(t, q), "nothing lost, nothing returned twice")
			}},
		)
	}
	ops = append(ops,
		layerOp{"Push", func(t *testing.T, f *fixture, inject func()) {
			pq := f.pqueue(t, "fault")
			inject()
			require.NoError(t, pq.Push(f.ctx, f.db, []byte("x"), 1))
			items := f.drainPQ(t, pq)
			require.Len(t, items, 1, "the item is pushed exactly once")
		}},
		layerOp{"PushBatch", func(t *testing.T, f *fixture, inject func()) {
			pq := f.pqueue(t, "fault")
			pushAll(t, f, pq, []int64{2})
			inject()
			require.NoError(t, pq.PushBatch(f.ctx, f.db, []fdbqueue.PushItem{{Value: []byte("b"), Priority: 2}, {Value: []byte("a"), Priority: 1}, {Value: []byte("c"), Priority: 2}}))
			items := f.drainPQ(t, pq)
			requirePriorities(t, []int64{1, 2, 2, 2}, items)
			requireValues(t, strs("a", "p2", "b", "c"), [][]byte{items[0].Value, items[1].Value, items[2].Value, items[3].Value}, "the batch is pushed exactly once, in order")
		}},
		layerOp{"PopMin", func(t *testing.T, f *fixture, inject func()) {
			pq := f.pqueue(t, "fault")
			pushAll(t, f, pq, []int64{1, 2, 3})
			inject()
			it, err := pq.PopMin(f.ctx, f.db)
			require.NoError(t, err)
			require.Equal(t, int64(1), it.Priority)
			requirePriorities(t, []int64{2, 3}, f.drainPQ(t, pq))
		}},
		layerOp{"PopMax", func(t *testing.T, f *fixture, inject func()) {
			pq := f.pqueue(t, "fault")
			pushAll(t, f, pq, []int64{1, 2, 3})
			inject()
			it, err := pq.PopMax(f.ctx, f.db)
			require.NoError(t, err)
			require.Equal(t, int64(3), it.Priority)
			requirePriorities(t, []int64{1, 2}, f.drainPQ(t, pq))
		}},
		layerOp{"PopMinBatch", func(t *testing.T, f *fixture, inject func()) {
			pq := f.pqueue(t, "fault")
			pushAll(t, f, pq, []int64{1, 2, 3})
			inject()
			its, err := pq.PopMinBatch(f.ctx, f.db, 2)
			require.NoError(t, err)
			requirePriorities(t, []int64{1, 2}, its)
			requirePriorities(t, []int64{3}, f.drainPQ(t, pq))
		}},
	)
	for _, m := range stagedModes {
		ops = append(ops, layerOp{"StagedTake/" + m.name, func(t *testing.T, f *fixture, inject func()) {
			sops := m.make(t, f)
			require.NoError(t, sops.produce(f.ctx, f.db, strs("a", "b")))
			inject()
			v, err := sops.take(f.ctx, f.db)
			require.NoError(t, err)
			requireValue(t, []byte("a"), v, "the staged take returns the item once")
			v, err = sops.take(f.ctx, f.db)
			require.NoError(t, err)
			requireValue(t, []byte("b"), v)
			_, err = sops.take(f.ctx, f.db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty, "nothing returned twice")
		}})
	}
	return ops
}

func requirePriorities(t *testing.T, want []int64, items []fdbqueue.Item) {
	t.Helper()
	got := make([]int64, len(items))
	for i, it := range items {
		got[i] = it.Priority
	}
	require.Equal(t, want, got, "priorities popped")
}

// inCallerLoop runs op in the caller's own retry loop (f.db.Transact),
// after the caller's write of value at key, once inject has armed a
// failure of the first commit: it requires the loop to have retried that
// failure (two runs; under a read fault sweep, which may fail a later read
// or one of the loop's several reads, at least one) and the caller's write
// to be there.
func (f *fixture) inCallerLoop(t *testing.T, inject func(), key, value []byte, op func(tr kv.Transaction) error) {
	t.Helper()
	runs := 0
	inject()
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		runs++
		tr.Set(key, value)
		return op(tr)
	}))
	if !f.sweeping {
		require.Equal(t, 2, runs, "the caller's loop retried the injected failure")
	}
	require.Equal(t, value, f.get(t, key))
}

// testCallerRetryWithOpID: an Enqueue composed into the caller's own retry
// loop (db.Transact) with an ID made once outside it takes effect once
// with the caller's write, whatever the first commit did.
func testCallerRetryWithOpID(t *testing.T, f *fixture, fk fault) {
	fi := f.faults(t)
	q := f.queue(t, "caller")
	mark := f.key("mark")
	id := fdbqueue.NewOpID()
	f.inCallerLoop(t, func() { fi.FailNextCommit(fk.err, fk.applied) }, mark, []byte("done"), func(tr kv.Transaction) error {
		return q.Enqueue(f.ctx, tr, []byte("once"), fdbqueue.WithOpID(id))
	})
	requireValues(t, strs("once"), f.drain(t, q), "an Enqueue with WithOpID in the caller's retry loop is applied once")
}

// testRecoverDequeueByOpID: a Dequeue in the caller's transaction whose
// commit fails with commit_unknown_result (applied) is recovered by calling
// Dequeue again with the same ID: the same item, not the next one.
func testRecoverDequeueByOpID(t *testing.T, f *fixture) {
	fi := f.faults(t)
	q := f.queue(t, "recover")
	f.enqueueAll(t, q, strs("a", "b"))
	id := fdbqueue.NewOpID()
	tr, err := f.db.CreateTransaction(f.ctx)
	require.NoError(t, err)
	v, err := q.Dequeue(f.ctx, tr, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	requireValue(t, []byte("a"), v)
	fi.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err = tr.Commit()
	require.ErrorIs(t, err, kv.ErrCommitUnknownResult)
	require.True(t, kv.MaybeCommitted(err))
	v, err = q.Dequeue(f.ctx, f.db, fdbqueue.WithOpID(id))
	require.NoError(t, err, "Dequeue again with the same ID")
	requireValue(t, []byte("a"), v, "the same ID returns the item the maybe-committed Dequeue removed")
	requireValues(t, strs("b"), f.drain(t, q))
}
