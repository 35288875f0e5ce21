package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// First writers of different records conflict on every prefix a queue
// works with, up to the longest. The claim each declares names its record
// under the queue's prefix; FoundationDB cuts a conflict range's keys
// longer than the key limit to 10,001 bytes, so [claim, claim+\x00) of a
// longer claim becomes empty and is dropped, and claims that differ only
// past that byte are the same range
// (ReadYourWritesTransaction::addWriteConflictRange and
// ::addReadConflictRange, fdbclient/ReadYourWrites.actor.cpp at 51e1c42,
// "translate it to an equivalent one with smaller keys"; getMaxKeySize is
// KEY_SIZE_LIMIT for keys outside \xff). Two first writers with
// different encodings would then both commit: items of both encodings
// under one record. First writers of one record still do not conflict.
func TestConfigFirstWritersLongPrefix(t *testing.T) {
	ctx := context.Background()
	type writer func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error
	enqueue := func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error {
		var opts []fdbqueue.Option
		if tupleValues {
			opts = append(opts, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
		}
		q, err := fdbqueue.NewQueue(sub, opts...)
		if err != nil {
			return err
		}
		return q.Enqueue(ctx, tr, []byte("v"))
	}
	push := func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error {
		opts := []fdbqueue.Option{fdbqueue.WithoutIdempotency()}
		if tupleValues {
			opts = append(opts, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
		}
		pq, err := fdbqueue.NewPriorityQueue(sub, opts...)
		if err != nil {
			return err
		}
		return pq.Push(ctx, tr, []byte("v"), 1)
	}
	for name, write := range map[string]writer{"queue": enqueue, "priority queue": push} {
		t.Run(name, func(t *testing.T) {
			tried := 0
			for p := kv.MaxKeySize - 100; p <= kv.MaxKeySize; p++ {
				sub := fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, p))
				if err := write(newDB(t), sub, false); errors.Is(err, kv.ErrKeyTooLarge) {
					continue // no queue with this prefix: its keys do not fit
				} else {
					require.NoError(t, err, "a %d-byte prefix", p)
				}
				tried++
				db := newDB(t)
				tr1, err := db.CreateTransaction(ctx)
				require.NoError(t, err)
				tr2, err := db.CreateTransaction(ctx)
				require.NoError(t, err)
				require.NoError(t, write(tr1, sub, false))
				require.NoError(t, write(tr2, sub, true))
				require.NoError(t, tr1.Commit())
				require.ErrorIs(t, tr2.Commit(), kv.ErrNotCommitted,
					"first writers of different records conflict, with a %d-byte prefix", p)

				// Those that agree still do not.
				db = newDB(t)
				tr1, err = db.CreateTransaction(ctx)
				require.NoError(t, err)
				tr2, err = db.CreateTransaction(ctx)
				require.NoError(t, err)
				require.NoError(t, write(tr1, sub, true))
				require.NoError(t, write(tr2, sub, true))
				require.NoError(t, tr1.Commit())
				require.NoError(t, tr2.Commit(), "first writers of one record do not conflict, with a %d-byte prefix", p)
			}
			require.Greater(t, tried, 20, "prefixes a queue works with")
		})
	}
}
