package sim

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// ackLies is a database whose transactions that clear a key under vals
// (an Ack's, which removes the job's value) commit and then report
// ErrLeaseLost, as an Ack retried without its journal does.
type ackLies struct {
	kv.Database
	vals []byte
}

func (a ackLies) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	acked := false
	err := a.Database.Transact(ctx, func(tr kv.Transaction) error {
		return fn(valueClears{Transaction: tr, vals: a.vals, cleared: &acked})
	})
	if err == nil && acked {
		return fdbqueue.ErrLeaseLost
	}
	return err
}

// valueClears notes whether its transaction cleared a key under vals.
type valueClears struct {
	kv.Transaction
	vals    []byte
	cleared *bool
}

func (v valueClears) Clear(key []byte) {
	if bytes.HasPrefix(key, v.vals) {
		*v.cleared = true
	}
	v.Transaction.Clear(key)
}

// drainJobs counts an Ack only when it succeeded: one that reported its
// lease lost though it removed the job counts nothing, so the job is
// missing from the accounts (Lost) instead of passing for acked.
func TestDrainJobsCountsOnlyAcksThatSucceeded(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "drain"})
	require.NoError(t, err)
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	require.NoError(t, err)
	r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("x")})
	require.NoError(t, err)
	vals, err := sub.Pack(tuple.Tuple{"v"})
	require.NoError(t, err)

	acks := map[string]int{}
	require.NoError(t, drainJobs(ctx, ackLies{Database: db, vals: vals}, q, func() {}, acks))
	require.Empty(t, acks, "an Ack that reported its lease lost was counted")
	_, err = q.Job(ctx, db, r.ID)
	require.ErrorIs(t, err, fdbqueue.ErrJobNotFound, "the lying Ack removed the job")

	r, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("y")})
	require.NoError(t, err)
	require.NoError(t, drainJobs(ctx, db, q, func() {}, acks))
	require.Equal(t, map[string]int{string(r.ID[:]): 1}, acks)
}

// deadAfterDrain returns the dead jobs and counts those whose attempts
// are not their MaxAttempts; a job left queued is an error.
func TestDeadAfterDrain(t *testing.T) {
	n := 0
	dead, err := deadAfterDrain([]JobRecord{
		{Job: "a", Dead: true, Attempts: 2, Max: 2},
		{Job: "b", Dead: true, Attempts: 1, Max: 2},
		{Job: "c", Dead: true, Attempts: 3, Max: 2},
	}, &n)
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"a": true, "b": true, "c": true}, dead)
	require.Equal(t, 2, n)
	_, err = deadAfterDrain([]JobRecord{{Job: "a", Max: 2}}, &n)
	require.Error(t, err)
}
