package fdbqueue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
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
		c := newCutTake(t, m, "cleanup-settle")
		db := c.db
		done, resume := c.cut(t, db)
		// The cleanup's commit.
		db.FailNextCommit(kv.ErrCommitUnknownResultFatal, true)
		resume()
		err := recvWithin(t, done, "the call's end")
		require.True(t, kv.MaybeCommitted(err), "the cleanup's outcome is unknown: %v", err)
		id := c.logs.take(t)
		require.Len(t, itemKeys(t, db, c.sub), 1, "the cleanup applied: x is back in the queue")

		v, err := c.q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		require.NoError(t, err)
		c.requireReceivedOnce(t, v)
	})
}

// cutTake is where the cleanup tests below start: a staged queue (whose
// handle logs the IDs of calls that may have committed) holding x, after
// a warm-up Dequeue.
type cutTake struct {
	db   *memdb.DB
	sub  fdbqueue.Subspace
	q    *fdbqueue.Queue
	logs *failedIDs
}

func newCutTake(t *testing.T, m stagingMode, name string) *cutTake {
	t.Helper()
	ctx := context.Background()
	logs, logger := loggedIDs()
	db, sub, q := stagedQueue(t, name, append(m.opts(fdbqueue.StagingConfig{}), logger)...)
	require.NoError(t, q.Enqueue(ctx, db, []byte("warm-up")))
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "warm-up", string(v))
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	return &cutTake{db: db, sub: sub, q: q, logs: logs}
}

// cut runs a Dequeue on on (c.db, or a wrapper of it) whose take of x is
// cut short by the caller's context while its commit is in flight, and
// lands (x is in the operation's journal record); the call stops before
// its cleanup until resume is called. done receives the call's error.
func (c *cutTake) cut(t *testing.T, on kv.Database) (done <-chan error, resume func()) {
	t.Helper()
	hook, failed, resume := stallOnceAt("failed")
	t.Cleanup(resume)
	fdbqueue.SetStagingHook(c.q, hook)
	held, release := c.db.HoldNextCommitLate()
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := c.q.Dequeue(cctx, on)
		errs <- err
	}()
	recvWithin(t, held, "the take of x in flight")
	cancel()
	recvWithin(t, failed, "the take's failure")
	release() // it lands: x is in the journal record
	return errs, resume
}

// requireReceivedOnce drains the queue and checks that x was received
// once in all, settled (what the settling call returned) included, and
// that no staging key is left.
func (c *cutTake) requireReceivedOnce(t *testing.T, settled []byte) {
	t.Helper()
	got := map[string]int{string(settled): 1}
	for {
		v, err := c.q.Dequeue(context.Background(), c.db)
		if err != nil {
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			break
		}
		got[string(v)]++
	}
	requireExactlyOnce(t, got, []string{"x"})
	require.Empty(t, stagingKeys(t, c.db, c.sub))
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
		c := newCutTake(t, m, "cleanup-late")
		db, q := c.db, c.q
		kdb := &killDB{Database: db, kill: make(chan struct{})}
		done, resume := c.cut(t, kdb)
		held, releaseCleanup := db.HoldNextCommitLate()
		resume()
		recvWithin(t, held, "the cleanup's commit in flight") // x back, record erased
		close(kdb.kill)                                       // and cut short
		err := recvWithin(t, done, "the call's end")
		require.True(t, kv.MaybeCommitted(err), "the cleanup's outcome is unknown: %v", err)
		id := c.logs.take(t)

		var v []byte
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
		releaseCleanup() // the cleanup lands now
		c.requireReceivedOnce(t, v)
	})
}
