package fdbqueue_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Defect 8 (issue 12): Len scanned the whole queue in one transaction; on
// FoundationDB a read more than 5 s after the read version fails with
// transaction_too_old (1007), and the read loop retried it forever. fdbDB
// here makes reading take time (1 ms a pair, on a manual clock shared with
// memdb and the queue) and fails reads beyond FDB's 5 s window, as FDB
// fetches a range batch by batch: 20,000 items take 20 s to read, so only
// a count spread over several transactions finishes.
func TestLenOfAQueueTooLongForOneTransaction(t *testing.T) {
	clock := memdb.NewManualClock(time.Unix(1_000_000, 0))
	raw := newDB(t, memdb.WithClock(clock))
	sub := mustSubspace(t, "long-len")
	const n = 20_000
	fill(t, raw, sub, n, []byte("x"))
	db := newFDBDB(raw).withReadTime(clock, time.Millisecond)
	q, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, n, got)

	// Inside a transaction Len is one bounded read: over LenChunk keys it
	// fails with a typed error instead of reading on.
	big := mustSubspace(t, "long-len-tx")
	fill(t, raw, big, fdbqueue.LenChunk+1, []byte("y"))
	bq, err := fdbqueue.NewQueue(big)
	require.NoError(t, err)
	err = raw.Transact(ctx, func(tr kv.Transaction) error {
		_, err := bq.Len(ctx, tr)
		return err
	})
	require.ErrorIs(t, err, fdbqueue.ErrTooManyToCount)
	// Up to LenChunk it counts, at the transaction's read version.
	require.NoError(t, raw.Transact(ctx, func(tr kv.Transaction) error {
		n, err := q.Len(ctx, tr)
		require.Equal(t, 20_000, n)
		return err
	}))
	total, err := bq.Len(ctx, raw)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.LenChunk+1, total)
}

// TestLenMillion measures Len on a 1,000,000-item queue on memdb. It takes
// a while (filling the queue most of it), so it runs only when
// FDBQUEUE_LEN_MILLION is set.
func TestLenMillion(t *testing.T) {
	if os.Getenv("FDBQUEUE_LEN_MILLION") == "" {
		t.Skip("set FDBQUEUE_LEN_MILLION=1 to count a 1,000,000-item queue")
	}
	raw := newDB(t)
	sub := mustSubspace(t, "million")
	const n = 1_000_000
	fill(t, raw, sub, n, []byte("item-value"))
	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	start := time.Now()
	got, err := q.Len(context.Background(), raw)
	took := time.Since(start)
	require.NoError(t, err)
	require.Equal(t, n, got)
	t.Logf("Len of %d items on memdb: %v", n, took)
}
