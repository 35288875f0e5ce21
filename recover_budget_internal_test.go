package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Recover drops a batch-served staged side's expired requests in pages of
// up to recoverBatch, each page in one transaction, and drops only as
// many as fit the batch budget: each costs a read conflict key, a Clear of
// the request key and a ClearRange of its result key, about 10 bytes per
// byte of the queue's prefix, so that 256 of them on a prefix of a few
// thousand bytes would pass FoundationDB's 10,000,000-byte limit
// (transaction_too_large on every call, and the expired results, handled
// after the requests, never returned). Found by an audit of the budgets.
func TestRecoverPagesOfExpiredRequestsFitTheLimit(t *testing.T) {
	for _, p := range []int{10, 5_000, 9_900} {
		t.Run(fmt.Sprintf("prefix %d", p), func(t *testing.T) {
			ctx := context.Background()
			db := memdb.New()
			t.Cleanup(func() { _ = db.Close() })
			clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
			prefix := bytes.Repeat([]byte{'p'}, p)
			q, err := NewQueue(SubspaceFromBytes(prefix),
				WithStaging(StagingConfig{Serving: ServeInBatches, ClaimTimeout: time.Second}),
				WithClock(clock.Now))
			require.NoError(t, err, "a staged queue on a %d-byte prefix is accepted", p)
			s := q.stage

			// recoverBatch registrations, exactly as staged waiters file
			// them (waiter.register); their waiters then crash.
			for range recoverBatch {
				w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
				require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
					return w.register(tr, clock.Now())
				}))
			}
			// And one served result its waiter never collected: an item
			// handed out, which Recover returns.
			item, err := q.sub.Pack(tuple.Tuple{int64(1), bytes.Repeat([]byte{1}, 20)})
			require.NoError(t, err)
			rid := longestRID()
			rid[0] = 1
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				setChunked(tr, s.resKey(rid), encodeResult(clock.Now(), item, []byte("stranded")))
				return nil
			}))
			clock.Advance(time.Minute) // every request and the result expired

			st, err := q.Recover(ctx, db)
			require.NoError(t, err)
			require.Equal(t, RecoverStats{DroppedRequests: recoverBatch, ReturnedItems: 1}, st)
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "stranded", string(v), "the handed-out item is back")
		})
	}
}
