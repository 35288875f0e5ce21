package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// TestStagedMaybeCommittedCleanupThenSettle: a staged Dequeue's take of x
// is cut short by the caller's context while its commit is in flight, and
// lands (x is in the operation's journal record). The cleanup finds the
// record, puts x back and erases the record, and its commit applies but
// reports commit_unknown_result_fatal (1022, which the retry loop does not
// retry: Transaction::onError, fdbclient/NativeAPI.actor.cpp). The call
// fails maybe committed and logs its ID, and the caller settles under it.
// x was put back, so the settling call must not replay the take: it takes
// x from the queue, and x is received once in all.
func TestStagedMaybeCommittedCleanupThenSettle(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		logs, logger := loggedIDs()
		db, sub, q := stagedQueue(t, "cleanup-settle", append(m.opts(fdbqueue.StagingConfig{}), logger)...)
		require.NoError(t, q.Enqueue(ctx, db, []byte("warm-up")))
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "warm-up", string(v))
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))

		hook, failed, resume := stallOnceAt("failed")
		fdbqueue.SetStagingHook(q, hook)
		held, release := db.HoldNextCommitLate()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := q.Dequeue(cctx, db)
			done <- err
		}()
		<-held // the take of x is in flight
		cancel()
		<-failed
		release() // it lands: x is in the journal record
		// The cleanup's commit.
		db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
		resume()
		err = <-done
		require.True(t, kv.MaybeCommitted(err), "the cleanup's outcome is unknown: %v", err)
		id := logs.take(t)
		require.Len(t, itemKeys(t, db, sub), 1, "the cleanup applied: x is back in the queue")

		got := map[string]int{}
		v, err = q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		require.NoError(t, err)
		got[string(v)]++
		for {
			v, err := q.Dequeue(ctx, db)
			if err != nil {
				require.ErrorIs(t, err, fdbqueue.ErrEmpty)
				break
			}
			got[string(v)]++
		}
		requireExactlyOnce(t, got, []string{"x"})
		require.Empty(t, stagingKeys(t, db, sub))
	})
}

// killDB is a database whose Transact calls can be cut short: kill ends
// their contexts, as the CleanupTimeout's end ends a cleanup's, at a
// moment the test chooses (a commit held in flight).
type killDB struct {
	kv.Database
	kill chan struct{}
}

func (d *killDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-d.kill:
			cancel()
		case <-ctx.Done():
		}
	}()
	return d.Database.Transact(ctx, fn)
}

// TestStagedCleanupLandingAfterSettle: as above, but the cleanup's commit
// is cut short by its timeout while in flight (not fenced: it goes on,
// RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp) and lands only
// after the caller settled under the logged ID. The settling call found
// the take's record and returned x without writing anything, so nothing
// in the cleanup's reads changed: unless the settling call fences it, the
// cleanup then puts x back, and x is received twice.
func TestStagedCleanupLandingAfterSettle(t *testing.T) {
	for _, inTx := range []bool{false, true} {
		t.Run(map[bool]string{false: "database", true: "transaction"}[inTx], func(t *testing.T) { cleanupLandingAfterSettle(t, inTx) })
	}
}

func cleanupLandingAfterSettle(t *testing.T, inTx bool) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx := context.Background()
		logs, logger := loggedIDs()
		db, sub, q := stagedQueue(t, "cleanup-late", append(m.opts(fdbqueue.StagingConfig{}), logger)...)
		require.NoError(t, q.Enqueue(ctx, db, []byte("warm-up")))
		v, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "warm-up", string(v))
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))

		hook, failed, resume := stallOnceAt("failed")
		fdbqueue.SetStagingHook(q, hook)
		kdb := &killDB{Database: db, kill: make(chan struct{})}
		held, release := db.HoldNextCommitLate()
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := q.Dequeue(cctx, kdb)
			done <- err
		}()
		<-held // the take of x is in flight
		cancel()
		<-failed
		release() // it lands: x is in the journal record
		held, releaseCleanup := db.HoldNextCommitLate()
		resume()
		<-held          // the cleanup's commit (x back, record erased) is in flight
		close(kdb.kill) // and cut short
		err = <-done
		require.True(t, kv.MaybeCommitted(err), "the cleanup's outcome is unknown: %v", err)
		id := logs.take(t)

		got := map[string]int{}
		if inTx {
			err = db.Transact(ctx, func(tr kv.Transaction) error {
				var err error
				v, err = q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
				return err
			})
		} else {
			v, err = q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		}
		require.NoError(t, err)
		got[string(v)]++
		releaseCleanup() // the cleanup lands now
		for {
			v, err := q.Dequeue(ctx, db)
			if err != nil {
				require.ErrorIs(t, err, fdbqueue.ErrEmpty)
				break
			}
			got[string(v)]++
		}
		requireExactlyOnce(t, got, []string{"x"})
		require.Empty(t, stagingKeys(t, db, sub))
	})
}
