package fdbqueue

import (
	"context"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Test seams of the staged dequeue, visible only to this package's tests.

// SetStagingHook makes q's staged operations call fn at named points:
// "registering" (a registration is about to commit), "registered" (a
// request was filed), "armed" (about to sleep on watches),
// "woke", "lost" (the request was found expired), "taking" (a step that
// takes an item is about to commit), "commit <phase>" (a step of that
// phase, or the read-only arm transaction, "commit arm", is about to
// commit), "unarmed" (the arm transaction found the key already changed,
// or failed: no sleep) and "failed" (a step failed, before the context is checked).
// Set it before operations start.
func SetStagingHook(q *Queue, fn func(point string)) { q.stager.hook = fn }

// SetPQStagingHook is SetStagingHook for a PriorityQueue.
func SetPQStagingHook(pq *PriorityQueue, fn func(point string)) { pq.stager.hook = fn }

// FulfilStaged runs one fulfilment pass over q's requests, as a helper with
// no request of its own, and returns how many it served.
func FulfilStaged(ctx context.Context, db kv.Database, q *Queue) (int, error) {
	return q.stage.fulfilOnce(ctx, db)
}

// SetStagingBusy sets q's hint that the line is long, under which new
// staged calls file a request without looking at the head first.
func SetStagingBusy(q *Queue, busy bool) { q.stage.busy.Store(busy) }

// FulfilStagedPQ runs one fulfilment pass over pq's PopMin (max false) or
// PopMax requests, as FulfilStaged does for a Queue.
func FulfilStagedPQ(ctx context.Context, db kv.Database, pq *PriorityQueue, max bool) (int, error) {
	return pq.side(max).fulfilOnce(ctx, db)
}

// MaxTimedOutSteps is how many steps in a row may time out in flight
// before a staged call gives up.
const MaxTimedOutSteps = maxTimedOutSteps
