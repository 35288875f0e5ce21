// Package queuetest is the conformance suite of the queue layers (package
// fdbqueue) over any kv.Database: FIFO order on both key layouts, priority
// order, composition with the caller's own writes, batch operations at their
// limits, values at every accepted limit, exactly-once under injected commit
// faults and with each read of an operation failing in turn (area
// ReadFaults: a storage server's or a read version request's retryable
// error, alone or after commit_unknown_result), the staged dequeue in both serving modes (waiters woken by
// watches), Recover after expired claims, depth counters that stay exact
// (every drain checks that Depth reads zero), every typed error the
// public API documents, and the JobQueue (area Jobs): leases, delays and
// run-at times to the microsecond, order, unique keys, attempts and dead
// letters, expired and extended leases, Nack's backoff, Ack in the
// caller's transaction, Job and Cancel by ID (nothing of a cancelled job
// left), the conflicts each operation promises, LeaseWait,
// Stats after every step, the worker pool, commit faults, and values,
// unique keys and batches at their limits.
//
// It is written only against kv.Database and the public API of fdbqueue, so
// the checks that pass on memdb can be run unchanged against FoundationDB
// through fdbkv. A backend runs it from a test:
//
//	func TestLayers(t *testing.T) {
//		queuetest.RunLayerTests(t, func(ctx context.Context, t *testing.T) (queuetest.Harness, error) {
//			return newHarness(ctx, t)
//		})
//	}
//
// Every check is a named subtest (Area/Check, e.g. "Values/PriorityQueue/raw/
// zeros-max") with a fresh harness. What a backend cannot do is reported
// by the harness (Faults returns nil on a real cluster; a FaultInjector that
// is not a ReadFaultSweeper cannot fail chosen reads), and the checks that
// need it skip with a one-line reason; nothing else is skipped.
//
// Time: the suite never moves the backend's clock. Claim deadlines and
// journal expiry are computed with the queues' own clocks (fdbqueue.WithClock),
// and a JobQueue's vesting times, deadlines, backoffs and LeaseWait timers
// with its JobQueueConfig.Clock; the suite controls both, so the checks of
// expiry run the same on an embedded engine and on a real cluster,
// without sleeping.
//
// Synchronisation: a check that needs a staged waiter to be asleep before it
// enqueues wraps the harness's database and learns, from the waiter's own
// transactions, when a transaction that armed watches has committed (see
// watchObserver); a JobQueue's LeaseWait is known asleep when it arms its
// timer on the suite's clock. No check sleeps to wait for another
// goroutine.
//
// Cost: the suite writes values of up to 100,000 bytes and batches of up to
// a few MB. On memdb it runs in seconds; big values use few items.
//
// A shared cluster: every key the suite writes is under the harness's
// prefix, but some checks commit transactions of their own and expect them
// to commit, and a layer's operation on a queue it knows reads
// FoundationDB's metadata version key with a conflict (see
// kv.MetadataVersionKey): a bump of it by any client of the cluster
// meanwhile (fdbqueue's first staged consumer of a queue, another
// layer's configuration change) makes such a transaction fail with
// not_committed, and the check with it. Run the suite where nothing else
// bumps the metadata version, as a throwaway cluster does (make
// integration).
package queuetest
