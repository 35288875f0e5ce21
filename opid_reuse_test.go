package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// An OpID names one operation call (WithOpID). A second call under it in
// the same transaction would take the first call's record (read through
// the transaction's own writes) for its own, and do nothing: an Enqueue
// would enqueue nothing, a Dequeue return the first call's item again. It
// fails instead with ErrInvalidArgument, and so does the transaction's
// commit: the call reads the first call's marker, which FoundationDB
// cannot read in the transaction that set it with SetVersionstampedValue
// (accessed_unreadable: RYWIterator::kv, fdbclient/RYWIterator.cpp), and a
// failed read fails the commit (RYWImpl::commit waits on every read,
// fdbclient/ReadYourWrites.actor.cpp). Nothing is lost or returned twice.
func TestOpIDReusedInOneTransaction(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		twice  func(t *testing.T, db kv.Database, id fdbqueue.OpOption) error
		before []string // the queue's items before, and after the failed transaction
	}{
		{"two Enqueues", func(t *testing.T, db kv.Database, id fdbqueue.OpOption) error {
			q := mustQueue(t, "reuse")
			return db.Transact(ctx, func(tr kv.Transaction) error {
				require.NoError(t, q.Enqueue(ctx, tr, []byte("a"), id))
				return q.Enqueue(ctx, tr, []byte("b"), id)
			})
		}, nil},
		{"two Dequeues", func(t *testing.T, db kv.Database, id fdbqueue.OpOption) error {
			q := mustQueue(t, "reuse")
			return db.Transact(ctx, func(tr kv.Transaction) error {
				v, err := q.Dequeue(ctx, tr, id)
				require.NoError(t, err)
				require.Equal(t, "x", string(v))
				_, err = q.Dequeue(ctx, tr, id)
				return err
			})
		}, []string{"x", "y"}},
		{"an Enqueue and a Dequeue", func(t *testing.T, db kv.Database, id fdbqueue.OpOption) error {
			q := mustQueue(t, "reuse")
			return db.Transact(ctx, func(tr kv.Transaction) error {
				require.NoError(t, q.Enqueue(ctx, tr, []byte("a"), id))
				_, err := q.Dequeue(ctx, tr, id)
				return err
			})
		}, []string{"x", "y"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "reuse")
			for _, v := range c.before {
				require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
			}
			err := c.twice(t, db, fdbqueue.WithOpID(fdbqueue.NewOpID()))
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorContains(t, err, "already given to an operation in this transaction")
			got := drain(t, db, q)
			if len(c.before) == 0 {
				require.Empty(t, got, "the transaction did not commit")
			} else {
				require.Equal(t, c.before, got, "the transaction did not commit")
			}
		})
	}
	t.Run("a Push and a PopMax", func(t *testing.T) {
		db := newDB(t)
		pq := mustPQ(t, "reuse")
		id := fdbqueue.WithOpID(fdbqueue.NewOpID())
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			require.NoError(t, pq.Push(ctx, tr, []byte("a"), 1, id))
			_, err := pq.PopMax(ctx, tr, id)
			return err
		})
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = pq.PopMin(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the transaction did not commit")
	})
	// WithOpID's doc: the commit fails with accessed_unreadable, even
	// when the caller ignores the second call's error.
	t.Run("the commit's error", func(t *testing.T) {
		db := newDB(t)
		q := mustQueue(t, "reuse")
		id := fdbqueue.WithOpID(fdbqueue.NewOpID())
		tr, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		require.NoError(t, q.Enqueue(ctx, tr, []byte("a"), id))
		require.ErrorIs(t, q.Enqueue(ctx, tr, []byte("b"), id), fdbqueue.ErrInvalidArgument)
		require.ErrorIs(t, tr.Commit(), kv.ErrAccessedUnreadable)
		require.Empty(t, drain(t, db, q), "the transaction did not commit")
	})
}

// Once committed, an ID's marker names the kind of operation it was given
// to: a call of another kind under it, which would take the first call's
// record for its result (a Dequeue would return an empty item, a PopMax
// fail on a record that is no pop's), fails with ErrInvalidArgument and
// changes nothing. A retry of the same call under it (here after
// commit_unknown_result with the commit applied) still finds its record.
func TestOpIDReusedForAnotherKind(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "reuse-kind")
	id := fdbqueue.NewOpID()
	inTx := func(f func(tr kv.Transaction) error) error { return db.Transact(ctx, f) }
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	require.NoError(t, inTx(func(tr kv.Transaction) error { return q.Enqueue(ctx, tr, []byte("a"), fdbqueue.WithOpID(id)) }),
		"the retry finds its record")
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"), fdbqueue.WithOpID(id)), "and so does a later call of the same operation")
	_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.ErrorContains(t, err, `was given to a "enqueue" operation, not "dequeue"`)
	require.NoError(t, inTx(func(tr kv.Transaction) error {
		_, err := q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		return nil
	}))
	require.Equal(t, []string{"a"}, drain(t, db, q), "one item, still there")

	pq := mustPQ(t, "reuse-kind-pq")
	require.NoError(t, pq.Push(ctx, db, []byte("p"), 1, fdbqueue.WithOpID(id)))
	_, err = pq.PopMax(ctx, db, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	v, err := pq.PopMax(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "p", string(v.Value), "still there")
}

// A call that runs its own transactions under a caller's ID clears its
// marker with its records once it returns (they are cleared by their
// range): the journal keeps only the slots of the ordinary operations.
func TestOpIDMarkerCleared(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "marker-cleared")
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"), withID()))
	_, err := q.Dequeue(ctx, db, withID())
	require.NoError(t, err)
	// A Dequeue in a caller's transaction, recovered by a call on the
	// Database: the recovering call clears the marker too.
	id := fdbqueue.NewOpID()
	require.NoError(t, q.Enqueue(ctx, db, []byte("b")))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		_, err := q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
		return err
	})
	require.NoError(t, err)
	v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, "b", string(v), "the recovering call returns the item")
	settleQueue(t, db, q)
	requireJournalWithin(t, db, q.Subspace(), fdbqueue.JournalSlotKeys(q))
}

// What the WithOpID doc says of a second call of the same kind under an
// ID: it returns the first call's result and does nothing only while the
// first call's records are kept. A call given a Database that returned
// without error has them cleared by the queue's next operation (nothing
// will retry it), and a call under the ID after that is a new operation:
// here it enqueues a second item. The doc used to promise that such a
// call does nothing.
func TestOpIDSecondCallAfterRecordsCleared(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "reuse-after-clear")
	id := fdbqueue.NewOpID()
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"), fdbqueue.WithOpID(id)))
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"), fdbqueue.WithOpID(id)), "records kept: a retry to the journal")
	require.NotEmpty(t, recordKeys(t, db, q, id))
	require.NoError(t, q.Enqueue(ctx, db, []byte("b"))) // carries the clear of the records under id
	require.Empty(t, recordKeys(t, db, q, id), "cleared once a call given a Database returned")
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"), fdbqueue.WithOpID(id)))
	require.Equal(t, []string{"a", "b", "a"}, drain(t, db, q), "a new operation")
}

// PopMin and PopMax are two kinds of operation: the record of one (the
// smallest item) is no result of the other. A PopMax under an ID a PopMin
// committed under used to find the PopMin's record and return its item,
// the smallest, as its own, popping nothing; it fails with
// ErrInvalidArgument, as a call of another kind under an ID must, and
// changes nothing. So does a PopMinWait under a PopMaxWait's ID on a
// staged priority queue. Under the ID a failed PopMin of its own making
// logged, a PopMax no longer resumes the PopMin's slot (and returns its
// item), nor runs as a new operation, whose marker would keep the PopMin
// from being settled under the ID: it fails with ErrInvalidArgument, and
// the PopMin under the ID settles.
func TestOpIDReusedForTheOtherPop(t *testing.T) {
	ctx := context.Background()
	seed := func(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue) {
		for i, v := range []string{"lo", "mid", "hi"} {
			require.NoError(t, pq.Push(ctx, db, []byte(v), int64(i)))
		}
	}
	values := func(t *testing.T, db kv.Database, pq *fdbqueue.PriorityQueue) []string {
		items, err := pq.PopMinBatch(ctx, db, 10)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			return nil
		}
		require.NoError(t, err)
		var vs []string
		for _, it := range items {
			vs = append(vs, string(it.Value))
		}
		return vs
	}
	name := map[bool]string{false: "PopMin", true: "PopMax"}
	pop := func(pq *fdbqueue.PriorityQueue, max bool) func(context.Context, kv.Transactor, ...fdbqueue.OpOption) (fdbqueue.Item, error) {
		if max {
			return pq.PopMax
		}
		return pq.PopMin
	}
	for _, first := range []bool{false, true} { // PopMin first, then PopMax first
		t.Run(name[first]+" in a transaction, then "+name[!first], func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "reuse-pop")
			seed(t, db, pq)
			id := fdbqueue.WithOpID(fdbqueue.NewOpID())
			var took fdbqueue.Item
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				var err error
				took, err = pop(pq, first)(ctx, tr, id)
				return err
			}))
			it, err := pop(pq, !first)(ctx, db, id)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "returned %q", it.Value)
			require.ErrorContains(t, err, "was given to a")
			left := []string{"lo", "mid", "hi"}
			left = slices.DeleteFunc(left, func(v string) bool { return v == string(took.Value) })
			require.Equal(t, left, values(t, db, pq), "the second call popped nothing")
		})
	}
	t.Run("PopMaxWait, then PopMinWait, staged", func(t *testing.T) {
		db := stgDB(t)
		pq := mustPQ(t, "reuse-pop-staged", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
		seed(t, db, pq)
		id := fdbqueue.WithOpID(fdbqueue.NewOpID())
		it, err := pq.PopMaxWait(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, "hi", string(it.Value))
		it, err = pq.PopMinWait(ctx, db, id)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "returned %q", it.Value)
		require.Equal(t, []string{"lo", "mid"}, values(t, db, pq), "the second call popped nothing")
	})
	t.Run("PopMax under the ID a failed PopMin logged", func(t *testing.T) {
		db := newDB(t)
		logs, logger := loggedIDs()
		pq := mustPQ(t, "reuse-pop-slot", logger)
		seed(t, db, pq)
		db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
		_, err := pq.PopMin(ctx, db)
		require.True(t, kv.MaybeCommitted(err), "%v", err)
		id := fdbqueue.WithOpID(logs.take(t))
		it, err := pq.PopMax(ctx, db, id)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "returned %q", it.Value)
		require.ErrorContains(t, err, "logged for a")
		it, err = pq.PopMin(ctx, db, id)
		require.NoError(t, err)
		require.Equal(t, "lo", string(it.Value), "the PopMin settles under its logged ID: its commit applied")
		require.Equal(t, []string{"mid", "hi"}, values(t, db, pq), "the refused PopMax popped nothing")
	})
}

// A staged take reads only the records under its ID, not the journal slot
// a Queue or PriorityQueue remembers under an ID it logged (the ID of a
// failed DequeueBatch, PopMinBatch or PopMaxBatch given a Database: a
// staged handle's Dequeue and pops given a Database are staged, and take
// no slot). Under such an ID a staged call of another kind ran as a new
// operation (a PopMax popped the largest item) and its marker then kept
// the logged call from being settled (ErrInvalidArgument for the right
// kind), and a staged call of the same kind applied anew (a Dequeue took
// the next item), leaving the logged call's item, if its commit applied,
// in a slot nothing read. A Dequeue or pop under a logged ID now runs as
// the plain take, which resumes the slot (or refuses another kind), and a
// Wait form fails with ErrInvalidArgument, as a call of another kind does.
func TestOpIDLoggedThenStagedTake(t *testing.T) {
	ctx := context.Background()
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("priority queue, commit applied %v", applied), func(t *testing.T) {
			db := stgDB(t)
			logs, logger := loggedIDs()
			pq := mustPQ(t, "logged-staged-pq", logger, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
			for i, v := range []string{"lo", "mid", "hi"} {
				require.NoError(t, pq.Push(ctx, db, []byte(v), int64(i)))
			}
			db.FailNextCommit(kv.ErrCommitUnknownResultFatal, applied)
			_, err := pq.PopMinBatch(ctx, db, 1)
			require.True(t, kv.MaybeCommitted(err), "%v", err)
			id := fdbqueue.WithOpID(logs.take(t))

			it, err := pq.PopMax(ctx, db, id)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "PopMax returned %q", it.Value)
			require.ErrorContains(t, err, "logged for a")
			it, err = pq.PopMaxWait(ctx, db, id)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "PopMaxWait returned %q", it.Value)
			it, err = pq.PopMinWait(ctx, db, id)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "PopMinWait returned %q", it.Value)
			require.ErrorContains(t, err, "does not wait")

			it, err = pq.PopMin(ctx, db, id)
			require.NoError(t, err, "the PopMin settles under the logged ID")
			require.Equal(t, "lo", string(it.Value))
			items, err := pq.PopMinBatch(ctx, db, 10)
			require.NoError(t, err)
			require.Len(t, items, 2, "the refused calls popped nothing")
			require.Equal(t, []string{"mid", "hi"}, []string{string(items[0].Value), string(items[1].Value)})
		})
		t.Run(fmt.Sprintf("queue, commit applied %v", applied), func(t *testing.T) {
			db := stgDB(t)
			logs, logger := loggedIDs()
			q := mustQueue(t, "logged-staged-q", logger, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			db.FailNextCommit(kv.ErrCommitUnknownResultFatal, applied)
			_, err := q.DequeueBatch(ctx, db, 1)
			require.True(t, kv.MaybeCommitted(err), "%v", err)
			id := fdbqueue.WithOpID(logs.take(t))

			v, err := q.DequeueWait(ctx, db, id)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "DequeueWait returned %q", v)
			v, err = q.Dequeue(ctx, db, id)
			require.NoError(t, err, "the DequeueBatch settles under the logged ID")
			require.Equal(t, "a", string(v))
			require.Equal(t, []string{"b", "c"}, drain(t, db, q), "the refused call took nothing")
		})
	}
}
