package fdbqueue

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// TestStagedHelperWakesOnItemsArriving: in batch mode a waiter among the
// two oldest requests (a helper) serves the line, so it sleeps on the
// signal key as well as its request (arm), not only on its own result and
// the request ahead as a waiter further back does (join): when items
// arrive it wakes, hands the first to the request ahead (whose waiter is
// elsewhere) and takes the next. Its claim timeout is an hour, so a
// renewal cannot wake it in time instead.
func TestStagedHelperWakesOnItemsArriving(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, q := stagedOnMemdb(t, "helper-wakes", StagingConfig{Serving: ServeInBatches, ClaimTimeout: time.Hour})
	s := q.stage
	a := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { return a.register(tr, time.Now()) }))

	armed := make(chan struct{}, 1)
	q.stager.hook = func(point string) {
		if point == "armed" {
			select {
			case armed <- struct{}{}:
			default:
			}
		}
	}
	got := make(chan []byte, 1)
	errs := make(chan error, 1)
	go func() {
		v, err := q.DequeueWait(ctx, db)
		if err != nil {
			errs <- err
			return
		}
		got <- v
	}()
	select { // failure bounds only: each step takes milliseconds
	case <-armed:
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not go to sleep")
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("first"), []byte("second")}))
	select {
	case v := <-got:
		require.Equal(t, "second", string(v))
	case err := <-errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("the helper did not wake when the items arrived")
	}
	res, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) { return getChunked(tr, a.resKey).Get() })
	require.NoError(t, err)
	require.False(t, isMarker(res), "the request ahead was served")
	_, _, stored, err := decodeResult(res)
	require.NoError(t, err)
	require.True(t, bytes.Contains(stored, []byte("first")), "with the first item")
}

// stepBackoff doubles from 1 ms and stops at maxStepBackoff.
func TestStepBackoff(t *testing.T) {
	require.Equal(t, time.Millisecond, stepBackoff(2))
	require.Equal(t, 2*time.Millisecond, stepBackoff(3))
	require.Equal(t, 16*time.Millisecond, stepBackoff(6))
	require.Equal(t, maxStepBackoff, stepBackoff(7))
	require.Equal(t, maxStepBackoff, stepBackoff(1000))
}
