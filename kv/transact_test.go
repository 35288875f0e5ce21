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
