package fdbqueue

import (
	"errors"
	"fmt"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Waiting for work from inside a transaction.
//
// DequeueWait and the PopWait forms run their own transactions. A consumer
// that must take an item and write its result in one transaction of its
// own calls Dequeue (or PopMin, PopMax, the batch forms) with that
// transaction and, on ErrEmpty, WatchForItems in the same transaction;
// it commits and then blocks on the watch:
//
//	for {
//		var w kv.Watch
//		err := db.Transact(ctx, func(tr kv.Transaction) error {
//			w = nil
//			v, err := q.Dequeue(ctx, tr)
//			if errors.Is(err, fdbqueue.ErrEmpty) {
//				w, err = q.WatchForItems(tr)
//				return err
//			}
//			if err != nil {
//				return err
//			}
//			tr.Set(resultKey(v), result(v)) // the same commit
//			return nil
//		})
//		if err != nil { ... }
//		if w != nil {
//			err = w.Wait(ctx) // an item may have arrived
//			w.Cancel()
//			if err != nil && !kv.IsRetryable(err) { ... }
//		}
//	}
//
// See ExampleQueue_WatchForItems for a complete program. A consumer that
// takes in the queue's own transactions (Dequeue given a Database, whose
// journal record a later operation clears) waits with a small transaction
// of its own that checks Empty and, still empty, calls WatchForItems at the
// same read version, as the main example does
// (examples/exampleapp/workqueue.go).

// WatchForItems returns a watch, created in tr, that fires when an item may
// have arrived: it is armed on the queue's signal key, which every enqueue
// of this library bumps once the queue's stored configuration says someone
// waits (WatchForItems stores that, once, when it is not yet so). Call it
// in the transaction that found the queue empty (a Dequeue that returned
// ErrEmpty), commit, then Wait: since the watch compares the key with the
// value tr read, an enqueue committed after tr's read version is never
// missed. The watch may also fire when no item is left for this consumer
// (another consumer took it, or on a queue served by place the item went
// to a request of the line): dequeue again and, if still empty, watch
// again. Wait may also fail with a retryable error (kv.IsRetryable):
// FoundationDB fails a watch whose read fails (the commit succeeds all the
// same), and a registered one with future_version when a storage server
// lags (FoundationDB 7.3: kv.ErrBrokenPromise, for a key's only watch);
// take either as a wake-up, as JobQueue.LeaseWait does (after a short
// pause, so that a watch that keeps failing does not spin). Cancel the
// watch when you stop waiting; FoundationDB limits
// watches per client (10,000 by default; kv.ErrTooManyWatches).
//
// As in FoundationDB (ReadYourWritesTransaction::watch, and the C API's
// fdb_transaction_watch), the watch reads its key with a normal read: a
// transaction that writes (a result, or the configuration change above)
// and armed the watch conflicts with any enqueue committed after its read
// version, and retries. That is the right outcome: the retry finds the
// item. The watch is registered only when tr commits, and fails with tr's
// error if the commit fails. Enqueues by clients that do not bump the
// signal (the Python and Java recipes) do not fire it: poll now and then
// when such producers share the queue.
//
// Cost: the read of the metadata version (it comes with the read version)
// and, after a change of the stored configuration, a snapshot read of it
// (one round trip); one watch; the first time, three writes (the stored
// configuration, an add to its epoch key and the metadata version's bump,
// see Reconfigure). It fails with
// ErrConfigMismatch (writing nothing) when the handle's options disagree
// with the stored configuration, and with ErrInvalidArgument for a nil tr.
func (q *Queue) WatchForItems(tr kv.Transaction) (kv.Watch, error) {
	if err := q.usable(); err != nil {
		return nil, err
	}
	return q.journal.gate.watchForItems(tr)
}

// WatchForItems returns a watch, created in tr, that fires when an item
// may have arrived; see Queue.WatchForItems.
func (pq *PriorityQueue) WatchForItems(tr kv.Transaction) (kv.Watch, error) {
	if err := pq.usable(); err != nil {
		return nil, err
	}
	return pq.journal.gate.watchForItems(tr)
}

func (g *confGate) watchForItems(tr kv.Transaction) (kv.Watch, error) {
	if err := checkTransactor(tr); err != nil {
		return nil, err
	}
	r := g.issue(tr, false)
	r.watching = true
	if err := r.settle(); err != nil {
		if errors.Is(err, errConfigMoved) {
			// Only a consumer's choice of items depends on it, and this
			// is no consumer: the new record is cached.
			err = nil
		} else {
			return nil, fmt.Errorf("fdbqueue: watch for items: %w", err)
		}
	}
	return tr.Watch(g.sig), nil
}
