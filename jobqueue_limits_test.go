package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// longestJobPrefix returns the longest prefix (tag, then 'p's) that
// NewJobQueue accepts with opts, and the error it gives one byte longer.
func longestJobPrefix(t *testing.T, tag byte, opts ...fdbqueue.Option) (fdbqueue.Subspace, error) {
	t.Helper()
	var last fdbqueue.Subspace
	for p := kv.MaxKeySize - 100; p <= kv.MaxKeySize+100; p++ {
		sub := fdbqueue.SubspaceFromBytes(append([]byte{tag}, bytes.Repeat([]byte{'p'}, p-1)...))
		if _, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{}, opts...); err != nil {
			require.NotEmpty(t, last.Bytes(), "no prefix accepted")
			return last, err
		}
		last = sub
	}
	t.Fatalf("NewJobQueue accepts a %d-byte prefix", kv.MaxKeySize+100)
	return last, nil
}

// limitJobLife drives a job at every limit of its fields through every
// later step on q: Add, Lease, Extend, a Nack with an over-long reason on
// its last attempt (dead-lettered), ListDead, Requeue, Lease, Release,
// Lease, Ack; then a second such job through DeleteDead. Each step must
// work, and Stats must count it once.
func limitJobLife(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, unique string) {
	t.Helper()
	ctx := context.Background()
	value := bytes.Repeat([]byte{0x00}, kv.MaxValueSize)
	job := fdbqueue.Job{Value: value, UniqueKey: unique, Priority: math.MinInt32, MaxAttempts: 1,
		RunAt: time.UnixMicro(math.MinInt64)} // the earliest vesting time, the longest record key
	r, err := q.Add(ctx, db, job)
	require.NoError(t, err)
	require.False(t, r.Duplicate)
	st := mustStats(t, db, q)
	require.Positive(t, st.OldestDue, "due since the earliest time")
	st.OldestDue = 0
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Due: 1}, st)

	ls := mustLease(t, db, q, fdbqueue.MaxLeaseBatch, math.MaxInt64)
	require.Len(t, ls, 1)
	require.Equal(t, r.ID, ls[0].JobID)
	require.Equal(t, value, ls[0].Value)
	require.Equal(t, unique, ls[0].UniqueKey)
	l, err := q.Extend(ctx, db, ls[0], math.MaxInt64)
	require.NoError(t, err)
	reason := strings.Repeat("\x00", 3*fdbqueue.MaxReasonSize)
	dead, err := q.Nack(ctx, db, l, fdbqueue.NackOptions{Reason: reason})
	require.NoError(t, err)
	require.True(t, dead, "its only attempt")
	require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, q))

	ds, err := q.ListDead(ctx, db, nil, 1)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, r.ID, ds[0].ID)
	require.Equal(t, value, ds[0].Value)
	require.Equal(t, unique, ds[0].UniqueKey)
	require.Equal(t, reason[:fdbqueue.MaxReasonSize], ds[0].Reason)
	next, err := q.ListDead(ctx, db, ds[0].Cursor, 1)
	require.NoError(t, err)
	require.Empty(t, next, "the cursor pages past the one dead job")

	require.NoError(t, q.Requeue(ctx, db, r.ID))
	if unique != "" {
		dup, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("dup"), UniqueKey: unique})
		require.NoError(t, err)
		require.Equal(t, fdbqueue.AddResult{ID: r.ID, Duplicate: true}, dup, "Requeue took the unique key again")
	}
	ls = mustLease(t, db, q, 1, 0)
	require.Equal(t, value, ls[0].Value)
	require.NoError(t, q.Release(ctx, db, ls[0], -1))
	ls = mustLease(t, db, q, 1, 0)
	require.Equal(t, value, ls[0].Value)
	require.Equal(t, reason[:fdbqueue.MaxReasonSize], ls[0].Reason)
	require.NoError(t, q.Ack(ctx, db, ls[0]))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))

	r, err = q.Add(ctx, db, job)
	require.NoError(t, err)
	require.False(t, r.Duplicate, "the ack freed the unique key")
	ls = mustLease(t, db, q, 1, 0)
	_, err = q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: reason})
	require.NoError(t, err)
	require.NoError(t, q.DeleteDead(ctx, db, r.ID))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
}

// A job queue made WithoutIdempotency writes no journal keys, so the
// journal's check (journal.keysFit) did not bound its prefix: NewJobQueue
// accepted any prefix, and on one over about 9,965 bytes every Add failed
// with key_too_large (FDB's 10,000-byte key limit, CLIENT_KNOBS->
// KEY_SIZE_LIMIT in fdbclient/ClientKnobs.cpp). The constructor now
// refuses a prefix on which the queue's own longest key, a job's record,
// would not fit; on the longest it accepts, a job at every limit goes
// through every step.
func TestLimitJobQueuePrefixWithoutJournal(t *testing.T) {
	db := newDB(t)
	sub, err := longestJobPrefix(t, 1, fdbqueue.WithoutIdempotency())
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "one byte longer")
	require.ErrorIs(t, err, kv.ErrKeyTooLarge)
	t.Logf("longest prefix WithoutIdempotency: %d bytes", len(sub.Bytes()))
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{}, fdbqueue.WithoutIdempotency())
	require.NoError(t, err)
	limitJobLife(t, db, q, "")
}

// A unique key is packed into the job queue's key ("u", unique key),
// each 0x00 byte escaped as two: on a long prefix a unique key within
// MaxUniqueKeySize could make a key over the 10,000-byte limit, and Add
// then set it, failing the transaction, the caller's own included, with
// key_too_large (FDB's ReadYourWritesTransaction::set throws it for a key
// over CLIENT_KNOBS->KEY_SIZE_LIMIT). Add now refuses such a job up front
// with ErrInvalidArgument (and kv.ErrKeyTooLarge), writing nothing and
// leaving the caller's transaction usable; the longest unique key that fits
// goes through every step.
func TestLimitJobUniqueKeyOnLongPrefix(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub, _ := longestJobPrefix(t, 2)
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	require.NoError(t, err)

	zeros := strings.Repeat("\x00", fdbqueue.MaxUniqueKeySize)
	_, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("x"), UniqueKey: zeros})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.ErrorIs(t, err, kv.ErrKeyTooLarge)
	_, err = q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("ok")}, {Value: []byte("x"), UniqueKey: zeros}})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "the whole batch")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q), "nothing written")

	// In the caller's transaction: the error comes back and the
	// transaction's other writes still commit if the caller goes on.
	mine := append(bytes.Clone(sub.Bytes()[:1]), "mine"...)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set(mine, []byte("v"))
		_, err := q.Add(ctx, tr, fdbqueue.Job{Value: []byte("x"), UniqueKey: zeros})
		if !errors.Is(err, kv.ErrKeyTooLarge) || !errors.Is(err, fdbqueue.ErrInvalidArgument) {
			return errors.New("want ErrInvalidArgument and kv.ErrKeyTooLarge, got " + err.Error())
		}
		return nil
	}))
	require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		v, err := tr.Get(mine).Get()
		require.Equal(t, []byte("v"), v)
		return err
	}))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))

	// The longest unique key that fits: n bytes of 0x00 pack to 2n+2.
	n := (kv.MaxKeySize - len(sub.Bytes()) - 3 /* "u" */ - 2) / 2
	_, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("x"), UniqueKey: zeros[:n+1]})
	require.ErrorIs(t, err, kv.ErrKeyTooLarge, "one byte more")
	limitJobLife(t, db, q, zeros[:n])
}
