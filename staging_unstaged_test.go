package fdbqueue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// pausedDB is a kv.Database whose first range read, in any of its
// transactions, waits until release is closed (after closing entered).
type pausedDB struct {
	kv.Database
	once             sync.Once
	entered, release chan struct{}
}

func (d *pausedDB) pause() {
	d.once.Do(func() {
		close(d.entered)
		<-d.release
	})
}

func (d *pausedDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	return &pausedTx{Transaction: tr, d: d}, nil
}

func (d *pausedDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, tr, fn)
}

func (d *pausedDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	tr, err := d.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.ReadRetryLoop(ctx, tr, fn)
}

type pausedTx struct {
	kv.Transaction
	d *pausedDB
}

func (t *pausedTx) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	t.d.pause()
	return t.Transaction.GetRange(r, o)
}

func (t *pausedTx) Snapshot() kv.ReadTransaction {
	return pausedSnap{ReadTransaction: t.Transaction.Snapshot(), d: t.d}
}

type pausedSnap struct {
	kv.ReadTransaction
	d *pausedDB
}

func (s pausedSnap) GetRange(r kv.KeyRange, o kv.RangeOptions) kv.RangeResult {
	s.d.pause()
	return s.ReadTransaction.GetRange(r, o)
}

func (s pausedSnap) Snapshot() kv.ReadTransaction { return s }

// TestUnstagedHandleFirstTakesRacingOnPlaceQueue: a handle made without
// WithStaging learns from the stored configuration that a queue is served
// by place, and then takes only the items after those due to the line. Its
// first operations run before it has seen the record; one that chose its
// items as on an unstaged queue must retry once it finds the record, also
// when another operation of the same handle found the record in between.
// Here the line holds one request, due the only item: a Dequeue of the
// unstaged handle must not take that item.
func TestUnstagedHandleFirstTakesRacingOnPlaceQueue(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := stagingModes[1] // by place
	db := stgDB(t)
	sub := stgSubspace(t, "unstaged-race")
	qs := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{})...)
	qp := stgQueue(t, sub, fdbqueue.WithVersionstampOrder()) // no WithStaging, and no record seen yet

	hook, armed, woke, release := stallAfterWake()
	defer release()
	fdbqueue.SetStagingHook(qs, hook)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	type res struct {
		v   []byte
		err error
	}
	waiter := make(chan res, 1)
	go func() {
		v, err := qs.DequeueWait(wctx, db)
		waiter <- res{v, err}
	}()
	recvWithin(t, armed, "the waiter asleep")
	require.NoError(t, qs.Enqueue(ctx, db, []byte("a"))) // due to the waiter's request
	recvWithin(t, woke, "the waiter woken")

	// The first operation of qp decides which items are due to the line
	// (none: it has not seen the record), then pauses in its read of the
	// items, while a second operation of qp finds the record.
	pdb := &pausedDB{Database: db, entered: make(chan struct{}), release: make(chan struct{})}
	first := make(chan res, 1)
	go func() {
		v, err := qp.Dequeue(ctx, pdb)
		first <- res{v, err}
	}()
	recvWithin(t, pdb.entered, "qp's first Dequeue in its read of the items")
	_, err := qp.Len(ctx, db)
	require.NoError(t, err)
	close(pdb.release)
	r := recvWithin(t, first, "qp's first Dequeue's return")
	require.ErrorIs(t, r.err, fdbqueue.ErrEmpty, "the only item is due to the request in the line; got %q", r.v)

	release()
	w := recvWithin(t, waiter, "the waiter's return")
	require.NoError(t, w.err)
	require.Equal(t, "a", string(w.v))
	requireClean(t, db, sub)
}
