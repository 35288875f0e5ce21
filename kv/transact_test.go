package kv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// A loop that stops for another reason after an attempt whose commit may
// have been applied still reports MaybeCommitted: otherwise a caller that
// recovers only maybe-committed operations would lose one that applied.
func TestRetryLoopRemembersUncertainCommit(t *testing.T) {
	for _, applied := range []bool{true, false} {
		db := memdb.New(memdb.WithBackoff(0, 0))
		ctx, cancel := context.WithCancel(context.Background())
		db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
		runs := 0
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			runs++
			if runs == 2 {
				cancel() // the context ends before the retry commits
				return ctx.Err()
			}
			tr.Set([]byte("k"), []byte("v"))
			return nil
		})
		require.Error(t, err)
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, kv.MaybeCommitted(err), "applied=%v: the first commit's outcome is unknown: %v", applied, err)
		require.NoError(t, db.Close())
	}

	// Without an uncertain attempt, a cancelled loop is not maybe-committed.
	db := memdb.New(memdb.WithBackoff(0, 0))
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	db.FailNextCommit(kv.ErrNotCommitted, false)
	runs := 0
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		runs++
		if runs == 2 {
			cancel()
			return ctx.Err()
		}
		tr.Set([]byte("k"), []byte("v"))
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, kv.MaybeCommitted(err), "a conflict is definite: %v", err)

	// fn's own error after an uncertain attempt is still maybe-committed.
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	boom := errors.New("boom")
	runs = 0
	err = db.Transact(context.Background(), func(tr kv.Transaction) error {
		runs++
		if runs == 2 {
			return boom
		}
		tr.Set([]byte("k2"), []byte("v"))
		return nil
	})
	require.ErrorIs(t, err, boom)
	require.True(t, kv.MaybeCommitted(err))
}

// An uncertain attempt stays uncertain whatever the later attempts do: a
// commit_unknown_result, then a definite failure (a conflict) of the
// retry, then the loop stops. The first commit may have been applied, so
// the error must still satisfy MaybeCommitted; forgetting it at the
// second failure would make a caller treat an applied operation as never
// run.
func TestRetryLoopUncertainSurvivesALaterDefiniteFailure(t *testing.T) {
	for _, applied := range []bool{true, false} {
		db := memdb.New(memdb.WithBackoff(0, 0))
		ctx, cancel := context.WithCancel(context.Background())
		db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
		runs := 0
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			runs++
			switch runs {
			case 2:
				db.FailNextCommit(kv.ErrNotCommitted, false) // this retry conflicts
			case 3:
				cancel() // and the loop stops before the next commit
				return ctx.Err()
			}
			tr.Set([]byte("k"), []byte("v"))
			return nil
		})
		require.Equal(t, 3, runs)
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, kv.MaybeCommitted(err), "applied=%v: the first commit's outcome is still unknown: %v", applied, err)
		require.NoError(t, db.Close())
	}
}

// boundDB is a kv.Database whose CreateTransaction keeps the context it
// was given and can fail.
type boundDB struct {
	*memdb.DB
	ctx  context.Context
	fail error
}

func (d *boundDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	d.ctx = ctx
	if d.fail != nil {
		return nil, d.fail
	}
	return d.DB.CreateTransaction(ctx)
}

// RetryCreated and ReadRetryCreated run fn in a transaction of the
// database's CreateTransaction, retried by the standard loops, and end
// the transaction's context when they return (so the backend releases it),
// not the caller's; a CreateTransaction error is returned as it is.
func TestRetryCreatedBindsTheTransaction(t *testing.T) {
	db := &boundDB{DB: memdb.New(memdb.WithBackoff(0, 0))}
	defer db.Close()
	ctx := context.Background()

	db.FailNextCommit(kv.ErrNotCommitted, false)
	runs := 0
	require.NoError(t, kv.RetryCreated(ctx, db, func(tr kv.Transaction) error {
		runs++
		tr.Set([]byte("k"), []byte("v"))
		return nil
	}))
	require.Equal(t, 2, runs, "a conflict is retried")
	require.ErrorIs(t, db.ctx.Err(), context.Canceled, "the transaction's context ends on return")

	var got []byte
	require.NoError(t, kv.ReadRetryCreated(ctx, db, func(tr kv.ReadTransaction) error {
		v, err := tr.Get([]byte("k")).Get()
		got = v
		return err
	}))
	require.Equal(t, "v", string(got))
	require.ErrorIs(t, db.ctx.Err(), context.Canceled)
	require.NoError(t, ctx.Err(), "the caller's context lives on")

	db.fail = kv.ErrDatabaseLocked
	require.ErrorIs(t, kv.RetryCreated(ctx, db, func(kv.Transaction) error { return nil }), kv.ErrDatabaseLocked)
	require.ErrorIs(t, kv.ReadRetryCreated(ctx, db, func(kv.ReadTransaction) error { return nil }), kv.ErrDatabaseLocked)
}
