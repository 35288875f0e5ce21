package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// A one-item take depends on the queue's head up to and including the
// item it took, as FDB's range read with its limit reached does
// (addConflictRange in fdbclient/ReadYourWrites.actor.cpp): a concurrent take of
// the same item makes its commit fail, an item added behind it does not,
// and a take that found the queue empty conflicts with an item added
// meanwhile. Journal on and off, a Queue and both ends of a PriorityQueue.
func TestOneItemTakeConflictRange(t *testing.T) {
	ctx := context.Background()
	type taker struct {
		put  func(db kv.Transactor, v string) error
		take func(tr kv.Transactor) (string, error)
	}
	makeTakers := func(t *testing.T, opts []fdbqueue.Option) map[string]taker {
		q := mustQueue(t, "q", opts...)
		pq := mustPQ(t, "pq", opts...)
		str := func(v []byte, err error) (string, error) { return string(v), err }
		item := func(it fdbqueue.Item, err error) (string, error) { return string(it.Value), err }
		prio := 0
		return map[string]taker{
			"queue": {
				put:  func(tr kv.Transactor, v string) error { return q.Enqueue(ctx, tr, []byte(v)) },
				take: func(tr kv.Transactor) (string, error) { return str(q.Dequeue(ctx, tr)) },
			},
			"pq-min": {
				put: func(tr kv.Transactor, v string) error {
					prio++ // later items have larger priorities
					return pq.Push(ctx, tr, []byte(v), int64(prio))
				},
				take: func(tr kv.Transactor) (string, error) { return item(pq.PopMin(ctx, tr)) },
			},
			"pq-max": {
				put: func(tr kv.Transactor, v string) error {
					prio-- // later items have smaller priorities
					return pq.Push(ctx, tr, []byte(v), int64(prio))
				},
				take: func(tr kv.Transactor) (string, error) { return item(pq.PopMax(ctx, tr)) },
			},
		}
	}
	for _, j := range []struct {
		name string
		opts []fdbqueue.Option
	}{{"journal", nil}, {"nojournal", []fdbqueue.Option{fdbqueue.WithoutIdempotency()}}} {
		for _, name := range []string{"queue", "pq-min", "pq-max"} {
			t.Run(j.name+"/"+name, func(t *testing.T) {
				db := newDB(t)
				tk := makeTakers(t, j.opts)[name]
				require.NoError(t, tk.put(db, "a"))
				require.NoError(t, tk.put(db, "b"))

				// An item added behind the one taken: no conflict.
				tr, err := db.CreateTransaction(ctx)
				require.NoError(t, err)
				v, err := tk.take(tr)
				require.NoError(t, err)
				require.Equal(t, "a", v)
				require.NoError(t, tk.put(db, "c"))
				require.NoError(t, tr.Commit())

				// The same item taken concurrently: a conflict.
				tr, err = db.CreateTransaction(ctx)
				require.NoError(t, err)
				v, err = tk.take(tr)
				require.NoError(t, err)
				require.Equal(t, "b", v)
				v, err = tk.take(db)
				require.NoError(t, err)
				require.Equal(t, "b", v)
				require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)

				v, err = tk.take(db)
				require.NoError(t, err)
				require.Equal(t, "c", v)

				// Found empty, then an item added: a conflict.
				tr, err = db.CreateTransaction(ctx)
				require.NoError(t, err)
				_, err = tk.take(tr)
				require.ErrorIs(t, err, fdbqueue.ErrEmpty)
				tr.Set([]byte("elsewhere"), []byte("x"))
				require.NoError(t, tk.put(db, "d"))
				require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
			})
		}
	}
}
