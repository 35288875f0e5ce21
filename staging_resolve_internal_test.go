package fdbqueue

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// resolveSetup makes a staged queue (served in batches) and a waiter whose
// registration committed, left as after a commit with an unknown outcome
// (its request key not known, its result key set: waiter.step then
// resolves). It returns the waiter and its request's key, as stored.
func resolveSetup(t *testing.T, name string) (*memdb.DB, *waiter[[]byte], []byte) {
	t.Helper()
	ctx := context.Background()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	q, err := NewQueue(SubspaceFromBytes([]byte(name)), WithStaging(StagingConfig{Serving: ServeInBatches}))
	require.NoError(t, err)
	s := q.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return w.register(tr, time.Now()) }))
	stamp, err := w.stamp.Get()
	require.NoError(t, err)
	key, err := s.reqKeyOf(stamp, w.rid)
	require.NoError(t, err)
	return db, w, key
}

// registerMore files n requests of other waiters behind those in the line,
// in one commit.
func registerMore(t *testing.T, db kv.Database, s *stageSide[[]byte], n int) {
	t.Helper()
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		for range n {
			o := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
			if err := o.register(tr, time.Now()); err != nil {
				return err
			}
		}
		return nil
	}))
}

// TestResolveFindsItsRequestBehindALongLine: the step after a
// registration with an unknown outcome finds its request by scanning the
// line from its end (findRequest), a page of recoverBatch requests at a
// time; with more than a page filed behind it, it still finds its own
// and keeps waiting on it, rather than taking its marker for an orphan,
// clearing it and filing a second request.
func TestResolveFindsItsRequestBehindALongLine(t *testing.T) {
	ctx := context.Background()
	db, w, key := resolveSetup(t, "resolve-long")
	registerMore(t, db, w.s, recoverBatch+10)
	out, err := kv.Transact(ctx, db, func(tr kv.Transaction) (outcome[[]byte], error) { return w.resolve(tr) })
	require.NoError(t, err)
	require.False(t, out.forget, "the registration applied")
	require.Equal(t, key, w.reqKey, "its request found behind %d others", recoverBatch+10)
	v, err := kvGet(ctx, db, w.resKey)
	require.NoError(t, err)
	require.True(t, isMarker(v), "its marker is left in place")
}

// TestResolveFindsTheRequestOfAnEarlierVersionsMarker: a marker written
// by an earlier version of this package holds the registration's
// versionstamp (decodeMarker); resolve takes it for a marker, not a result,
// and finds the request at the key it names.
func TestResolveFindsTheRequestOfAnEarlierVersionsMarker(t *testing.T) {
	ctx := context.Background()
	db, w, key := resolveSetup(t, "resolve-old-marker")
	stamp, err := w.stamp.Get()
	require.NoError(t, err)
	old, err := tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte(stamp)}}.Pack()
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(w.resKey, old); return nil }))
	out, err := kv.Transact(ctx, db, func(tr kv.Transaction) (outcome[[]byte], error) { return w.resolve(tr) })
	require.NoError(t, err)
	require.False(t, out.done, "a marker is no result to collect")
	require.Equal(t, key, w.reqKey)
}

// TestResolveOfAnOrphanMarkerIgnoresNewRequests: a marker without its
// request (not made by this package) is cleared so that the waiter files
// a new request. The scan of the line that found no request is a snapshot
// read: only the marker's normal read conflicts, so a registration of
// another waiter landing meanwhile does not make the resolve fail.
func TestResolveOfAnOrphanMarkerIgnoresNewRequests(t *testing.T) {
	ctx := context.Background()
	db, w, key := resolveSetup(t, "resolve-orphan")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Clear(key); return nil }))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	out, err := w.resolve(tr)
	require.NoError(t, err)
	require.True(t, out.forget, "an orphan marker: file a new request")
	registerMore(t, db, w.s, 1)
	require.NoError(t, tr.Commit(), "a registration behind does not conflict with the resolve")
	v, err := kvGet(ctx, db, w.resKey)
	require.NoError(t, err)
	require.Nil(t, v, "the orphan marker is cleared")
}

func kvGet(ctx context.Context, db kv.Database, key []byte) ([]byte, error) {
	var v []byte
	err := db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		var err error
		v, err = tr.Get(key).Get()
		return err
	})
	return bytes.Clone(v), err
}
