package fdbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// betweenDB runs between once after the first failed attempt of its next
// transaction, before the retry (in OnError), as another client would act
// while a commit's outcome is being settled.
type betweenDB struct {
	*memdb.DB
	between func()
}

func (d *betweenDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.DB.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, &betweenTx{Transaction: tr, d: d}, fn)
}

type betweenTx struct {
	kv.Transaction
	d *betweenDB
}

func (t *betweenTx) OnError(err error) error {
	if f := t.d.between; f != nil {
		t.d.between = nil
		f()
	}
	return t.Transaction.OnError(err)
}

// A take whose commit reported commit_unknown_result without applying,
// and whose retry found the queue empty (another consumer took the item
// meanwhile), took nothing, and its retry knows it: it read the key of its
// journal record with a normal read and found none, and FoundationDB
// reports commit_unknown_result only once that commit can no longer land
// (tryCommit waits for commitDummyTransaction, fdbclient/
// NativeAPI.actor.cpp); nothing clears a record while its operation runs.
// Its error is ErrEmpty, not also maybe-committed (kv.RetryLoop marks
// every error after an unknown outcome so): the docs tell a caller to
// settle a maybe-committed take under its ID, and the queue logged none
// (its outcome is empty) and freed its journal slot. Without the journal
// the retry cannot tell, and an applied first attempt lost the item (as
// WithoutIdempotency says): the error stays maybe-committed.
func TestTakeEmptyAfterUnknownResult(t *testing.T) {
	type take struct {
		name string
		pq   func(ctx context.Context, pq *fdbqueue.PriorityQueue, db kv.Database) error
		q    func(ctx context.Context, q *fdbqueue.Queue, db kv.Database) error
	}
	takes := []take{
		{name: "PopMin", pq: func(ctx context.Context, pq *fdbqueue.PriorityQueue, db kv.Database) error {
			_, err := pq.PopMin(ctx, db)
			return err
		}},
		{name: "PopMax", pq: func(ctx context.Context, pq *fdbqueue.PriorityQueue, db kv.Database) error {
			_, err := pq.PopMax(ctx, db)
			return err
		}},
		{name: "PopMaxBatch", pq: func(ctx context.Context, pq *fdbqueue.PriorityQueue, db kv.Database) error {
			_, err := pq.PopMaxBatch(ctx, db, 3)
			return err
		}},
		{name: "Dequeue", q: func(ctx context.Context, q *fdbqueue.Queue, db kv.Database) error {
			_, err := q.Dequeue(ctx, db)
			return err
		}},
		{name: "DequeueBatch", q: func(ctx context.Context, q *fdbqueue.Queue, db kv.Database) error {
			_, err := q.DequeueBatch(ctx, db, 3)
			return err
		}},
	}
	for _, tk := range takes {
		for _, journal := range []bool{true, false} {
			for _, applied := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/journal=%v/applied=%v", tk.name, journal, applied), func(t *testing.T) {
					ctx := context.Background()
					raw := newDB(t)
					db := &betweenDB{DB: raw}
					var opts []fdbqueue.Option
					if !journal {
						opts = append(opts, fdbqueue.WithoutIdempotency())
					}
					name := fmt.Sprintf("empty-after-unknown-%s-%v-%v", tk.name, journal, applied)
					var run, other func() error
					if tk.pq != nil {
						pq, pq2 := mustPQ(t, name, opts...), mustPQ(t, name, opts...)
						require.NoError(t, pq.Push(ctx, raw, []byte("x"), 1))
						run = func() error { return tk.pq(ctx, pq, db) }
						other = func() error { _, err := pq2.PopMin(ctx, raw); return err }
					} else {
						q, q2 := mustQueue(t, name, opts...), mustQueue(t, name, opts...)
						require.NoError(t, q.Enqueue(ctx, raw, []byte("x")))
						run = func() error { return tk.q(ctx, q, db) }
						other = func() error { _, err := q2.Dequeue(ctx, raw); return err }
					}
					otherTook := false
					db.between = func() {
						err := other()
						if !errors.Is(err, fdbqueue.ErrEmpty) {
							require.NoError(t, err)
							otherTook = true
						}
					}
					raw.FailNextCommit(kv.ErrCommitUnknownResult, applied)
					err := run()
					require.Equal(t, !applied, otherTook, "the item was still there for the other consumer")
					if journal && applied {
						require.NoError(t, err, "the retry found the record: the item, once")
						return
					}
					require.ErrorIs(t, err, fdbqueue.ErrEmpty)
					if journal {
						require.False(t, kv.MaybeCommitted(err), "the retry found no record: nothing was taken, nothing to settle: %v", err)
					} else if applied {
						require.True(t, kv.MaybeCommitted(err), "without the journal the first attempt's item is lost: %v", err)
					}
				})
			}
		}
	}
}
