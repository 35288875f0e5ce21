package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// advanceUserVersions runs n enqueues through q in transactions that roll
// back: nothing is written, but q's versionstamp user versions move on as
// if q had enqueued n items before. Faults are off meanwhile, so that no
// retry moves them further; faults are the database's, restored after.
func advanceUserVersions(db backend, faults memdb.Faults, q *fdbqueue.Queue, n int) error {
	errRollback := errors.New("sim: roll back")
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	for n > 0 {
		vs := make([][]byte, min(n, 5_000)) // within the default batch budget
		for i := range vs {
			vs[i] = []byte{byte(i)}
		}
		err := db.Transact(context.Background(), func(tr kv.Transaction) error {
			if err := q.EnqueueBatch(context.Background(), tr, vs); err != nil {
				return err
			}
			return errRollback
		})
		if !errors.Is(err, errRollback) {
			return fmt.Errorf("sim: advancing the user versions: %w", err)
		}
		n -= len(vs)
	}
	return nil
}

// checkUserVersionWrap moves q's user versions to 2 before their wrap, then
// enqueues a batch of 5 and dequeues it (with faults off), and describes
// what went wrong if it did not come out in order.
func checkUserVersionWrap(db backend, faults memdb.Faults, q *fdbqueue.Queue) (string, error) {
	if err := advanceUserVersions(db, faults, q, 1<<16-2); err != nil {
		return "", err
	}
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	ctx := context.Background()
	want := [][]byte{[]byte("wrap-a"), []byte("wrap-b"), []byte("wrap-c"), []byte("wrap-d"), []byte("wrap-e")}
	if err := q.EnqueueBatch(ctx, db, want); err != nil {
		return "", fmt.Errorf("sim: the user version wrap check: %w", err)
	}
	got, err := q.DequeueBatch(ctx, db, len(want))
	if err != nil {
		return "", fmt.Errorf("sim: the user version wrap check: %w", err)
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		return fmt.Sprintf("a batch of %d enqueued after 65,534 items came out as %q: versionstamp user versions wrapped inside one transaction", len(want), got), nil
	}
	return "", nil
}

// checkBatchBudget makes a Queue with opts and the largest batch budget
// WithBatchBudget accepts, in a subspace of its own; enqueues the largest
// batch of 8-byte items that budget accepts (found by probing in a
// cancelled transaction, where an accepted batch stops at its first read);
// and dequeues it with DequeueBatch. Faults are off. It describes what went
// wrong: an accepted batch must never fail with transaction_too_large.
func checkBatchBudget(db backend, faults memdb.Faults, budgetSub tuple.Tuple, opts []fdbqueue.Option) (string, error) {
	db.setFaults(memdb.Faults{})
	defer db.setFaults(faults)
	ctx := context.Background()
	sub, _ := fdbqueue.NewSubspace(budgetSub)
	largest := func(accepts func(int) bool, lo, hi int) int {
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if accepts(mid) {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		return lo
	}
	budget := largest(func(b int) bool {
		_, err := fdbqueue.NewQueue(sub, fdbqueue.WithBatchBudget(b))
		return err == nil
	}, 1, kv.MaxTransactionSize)
	q, err := fdbqueue.NewQueue(sub, append(slices.Clip(opts), fdbqueue.WithBatchBudget(budget))...)
	if err != nil {
		return "", err
	}
	values := func(n int) [][]byte {
		vs := make([][]byte, n)
		for i := range vs {
			vs[i] = binary.BigEndian.AppendUint64(nil, uint64(i))
		}
		return vs
	}
	probe, err := db.CreateTransaction(ctx)
	if err != nil {
		return "", err
	}
	probe.Cancel()
	var probeErr error
	n := largest(func(n int) bool {
		err := q.EnqueueBatch(ctx, probe, values(n))
		if errors.Is(err, fdbqueue.ErrBatchTooLarge) {
			return false
		}
		if !errors.Is(err, kv.ErrTransactionCancelled) && probeErr == nil {
			probeErr = err
		}
		return true
	}, 1, budget/8)
	if probeErr != nil {
		return "", fmt.Errorf("sim: probing the batch budget: %w", probeErr)
	}
	defer func() { _ = q.Clear(ctx, db) }()
	if err := q.EnqueueBatch(ctx, db, values(n)); err != nil {
		return fmt.Sprintf("EnqueueBatch of %d items, the most the budget %d accepts, failed: %v", n, budget, err), nil
	}
	for got := 0; got < n; {
		vs, err := q.DequeueBatch(ctx, db, n)
		if err != nil {
			return fmt.Sprintf("DequeueBatch(%d) with budget %d after %d of %d items failed: %v", n, budget, got, n, err), nil
		}
		for i, v := range vs {
			if binary.BigEndian.Uint64(v) != uint64(got+i) {
				return fmt.Sprintf("DequeueBatch with budget %d returned item %d at place %d", budget, binary.BigEndian.Uint64(v), got+i), nil
			}
		}
		got += len(vs)
	}
	return "", nil
}
