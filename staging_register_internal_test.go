package fdbqueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestRegistrationFailsAfterItsCleanup: a registration whose commit lands
// after the cleanup that read and cleared its result key (resolve, abandon)
// conflicts instead of leaving a request no one waits for. On FoundationDB
// a commit interrupted by a cancellation or a timeout goes on and can land
// that late (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp); here the
// registration's transaction simply commits after the cleanup.
func TestRegistrationFailsAfterItsCleanup(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("late-reg")), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	s := q.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	reg, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = reg.GetReadVersion().Get()
	require.NoError(t, err)
	require.NoError(t, w.register(reg, time.Now()))

	// The cleanup reads the result key and clears it, and commits first.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		v, err := tr.Get(w.resKey).Get()
		if err != nil {
			return err
		}
		require.Nil(t, v, "the registration has not landed")
		tr.Clear(w.resKey)
		return nil
	}))
	require.ErrorIs(t, reg.Commit(), kv.ErrNotCommitted, "a registration landing after its cleanup")
	reqs, err := s.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(ctx, db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left behind")
}

func kvGetRange(ctx context.Context, db kv.Database, r kv.KeyRange) ([]kv.KeyValue, error) {
	var kvs []kv.KeyValue
	err := db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		var err error
		kvs, err = tr.GetRange(r, kv.RangeOptions{}).GetSlice()
		return err
	})
	return kvs, err
}

// TestLateRegistrationOfACancelledDequeueWait: end to end, a DequeueWait
// cancelled while its registration's commit is in flight returns, having
// cleaned up; the registration then lands (memdb's HoldNextCommitLate, as
// FoundationDB's commit goes on after a cancellation) and must conflict
// with the cleanup, leaving no request in the line.
func TestLateRegistrationOfACancelledDequeueWait(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("late-wait")), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	held, release := db.HoldNextCommitLate()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(ctx, db)
		done <- err
	}()
	<-held // the registration's commit is in flight
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	release() // the registration lands now, after the cleanup
	reqs, err := q.stage.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(context.Background(), db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left in the line")
}

// TestRegistrationFailsAfterResolve: the step after a registration whose
// commit had an unknown outcome (resolve) finds no marker at the result
// key; it clears the key, so that it commits a write: a registration that
// lands after it conflicts (its read conflict on the key) instead of
// leaving a request no one waits for, while the waiter files a new one.
func TestRegistrationFailsAfterResolve(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	q, err := NewQueue(SubspaceFromBytes([]byte("late-resolve")), WithStaging(StagingConfig{}))
	require.NoError(t, err)
	s := q.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	reg, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = reg.GetReadVersion().Get()
	require.NoError(t, err)
	require.NoError(t, w.register(reg, time.Now()))

	out, err := kv.Transact(ctx, db, func(tr kv.Transaction) (outcome[[]byte], error) {
		return w.resolve(tr)
	})
	require.NoError(t, err)
	require.True(t, out.forget, "no marker: the registration did not happen, as far as resolve can tell")
	require.ErrorIs(t, reg.Commit(), kv.ErrNotCommitted, "a registration landing after resolve")
	reqs, err := s.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(ctx, db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left behind")
}
