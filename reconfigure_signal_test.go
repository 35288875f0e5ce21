package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// A consumer waits with WatchForItems (the record now says "signal").
// Another process's handle, with the same options but that never saw the
// "signal" record, runs Reconfigure on the (empty) queue: it must keep
// "signal", from the stored record, not from its own cached copy (it
// decided from that, and stored "none": producers then stopped bumping the
// signal key, and the watch armed before never fired although an item was
// enqueued after the watcher's read version; WatchForItems: "never
// missed"). Found by an audit of the stored configuration.
func TestReconfigureKeepsTheSignalModeOfWaiters(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "audit", "reconf-signal")
	sigKey, err := tuple.Tuple{"s", "sig"}.AppendPack(append(sub.Bytes(), 0xff))
	require.NoError(t, err)
	readKey := func(k []byte) []byte {
		v, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) {
			return tr.Get(k).Get()
		})
		require.NoError(t, err)
		return v
	}

	watcher, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	require.NoError(t, watcher.Enqueue(ctx, db, []byte("first"))) // stores the record ("none")
	_, err = watcher.Dequeue(ctx, db)
	require.NoError(t, err)

	var w kv.Watch
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		w = nil
		_, err := watcher.Dequeue(ctx, tr)
		if !errors.Is(err, fdbqueue.ErrEmpty) {
			return err
		}
		w, err = watcher.WatchForItems(tr)
		return err
	}))
	require.NotNil(t, w)
	defer w.Cancel()
	rec, err := tuple.Unpack(readKey(configKey(t, sub)))
	require.NoError(t, err)
	require.Equal(t, "signal", rec[4], "WatchForItems stored the signal mode")

	// Another process: same options, a fresh handle (never saw "signal").
	admin, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	require.NoError(t, admin.Reconfigure(ctx, db))

	rec, err = tuple.Unpack(readKey(configKey(t, sub)))
	require.NoError(t, err)
	before := readKey(sigKey)

	producer, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	require.NoError(t, producer.Enqueue(ctx, db, []byte("item")))

	after := readKey(sigKey)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	werr := w.Wait(wctx)

	require.Equal(t, "signal", rec[4], "Reconfigure keeps the waiters' signal mode")
	require.NotEqual(t, before, after, "the enqueue bumps the signal key")
	require.NoError(t, werr, "the watch armed before the enqueue fires")
}
