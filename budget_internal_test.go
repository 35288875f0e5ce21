package fdbqueue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestBatchBudgetIsInclusive: a batch whose counted size is exactly the
// budget fits it (a batch is refused or cut only where it would exceed
// the budget); with one byte less of budget it does not. The sizes are
// the ones the operations count: writeCost for EnqueueBatch; for a take,
// the overhead, each item's clear and journal record, and the read
// conflict up to the last item taken (takeEnd). Each operation has a
// fixed WithOpID, since the length of its journal keys depends on its ID.
func TestBatchBudgetIsInclusive(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	values := [][]byte{[]byte("a"), []byte("bc"), make([]byte, 1000)}
	for _, c := range []struct {
		name  string
		slack int // budget minus the size counted
	}{{"exact", 0}, {"one byte short", -1}} {
		t.Run(c.name, func(t *testing.T) {
			sub := SubspaceFromBytes([]byte("incl-" + c.name))
			probe, err := NewQueue(sub)
			require.NoError(t, err)
			opFor := func(id OpID) *op {
				o := &op{}
				probe.journal.beginInto(o, "", true, true, []OpOption{WithOpID(id)})
				return o
			}
			handle := func(budget int) *Queue {
				q, err := NewQueue(sub, WithBatchBudget(budget))
				require.NoError(t, err)
				return q
			}

			id := NewOpID()
			budget := writeCost(opFor(id), probe.items, values, false) + c.slack
			err = handle(budget).EnqueueBatch(ctx, db, values, WithOpID(id))
			if c.slack < 0 {
				require.ErrorIs(t, err, ErrBatchTooLarge)
				require.NoError(t, probe.EnqueueBatch(ctx, db, values))
			} else {
				require.NoError(t, err)
			}

			// A take of the first two items.
			kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
				return tr.GetRange(probe.items, kv.RangeOptions{}).GetSlice()
			})
			require.NoError(t, err)
			require.Len(t, kvs, 3)
			id = NewOpID()
			o := opFor(id)
			budget = o.overheadCost(probe.items) + headConflictCost(probe.items, kvs[1].Key, false) + c.slack
			for i, p := range kvs[:2] {
				budget += clearCost(len(p.Key)) + o.recordCost(i, p.Value)
			}
			got, err := handle(budget).DequeueBatch(ctx, db, 3, WithOpID(id))
			require.NoError(t, err)
			want := values[:2]
			if c.slack < 0 {
				want = values[:1]
			}
			require.Equal(t, want, got)
		})
	}
}

// TestLeaseBudgetIsInclusive: a Lease of candidates whose counted size is
// exactly the budget leases them all (spend.fits: a candidate is left only
// where it would take the transaction over the budget), as a take from a
// Queue does (TestBatchBudgetIsInclusive); with one byte less of budget it
// leases one fewer. The size is what take counts: the overhead and one
// record, and per candidate leaseCost. Each Lease has a fixed WithOpID.
func TestLeaseBudgetIsInclusive(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	cfg := JobQueueConfig{Choice: 1} // candidates in key order
	for _, c := range []struct {
		name  string
		slack int // budget minus the size counted
		want  int
	}{{"exact", 0, 2}, {"one byte short", -1, 1}} {
		t.Run(c.name, func(t *testing.T) {
			sub := SubspaceFromBytes([]byte("lease-incl-" + c.name))
			probe, err := NewJobQueue(sub, cfg)
			require.NoError(t, err)
			_, err = probe.AddBatch(ctx, db, []Job{{Value: []byte("a")}, {Value: []byte("bc")}, {Value: []byte("def")}})
			require.NoError(t, err)
			kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
				return tr.GetRange(probe.items, kv.RangeOptions{}).GetSlice()
			})
			require.NoError(t, err)
			require.Len(t, kvs, 3)

			id := NewOpID()
			o := probe.journal.begin(db, []OpOption{WithOpID(id)})
			budget := o.overheadCost(probe.items) + o.recordCost(0, nil) + c.slack
			for i, p := range kvs[:2] {
				_, jid, err := probe.parseItemKey(p.Key)
				require.NoError(t, err)
				m, err := decodeMeta(p.Key, p.Value, jid)
				require.NoError(t, err)
				budget += probe.leaseCost(o, m, p.Key, i, false, buryReason)
			}
			q, err := NewJobQueue(sub, cfg, WithBatchBudget(budget))
			require.NoError(t, err)
			ls, err := q.Lease(ctx, db, 3, time.Minute, WithOpID(id))
			require.NoError(t, err)
			require.Len(t, ls, c.want)
		})
	}
}

// PushBatch's budget is inclusive too: a batch whose size, as writeCost
// counts it, equals the budget is pushed; under a budget a byte smaller it
// fails with ErrBatchTooLarge, writing nothing.
func TestPushBatchBudgetIsInclusive(t *testing.T) {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	items := []PushItem{{Value: []byte("a"), Priority: 1}, {Value: []byte("bc"), Priority: -1}, {Value: make([]byte, 1000), Priority: 1}}
	sub := SubspaceFromBytes([]byte("incl-push"))
	probe, err := NewPriorityQueue(sub)
	require.NoError(t, err)
	stored := make([][]byte, len(items))
	for i, it := range items {
		stored[i], err = encodeOne(probe.cfg.encoding, i, it.Value)
		require.NoError(t, err)
	}
	id := NewOpID()
	o := &op{}
	probe.journal.beginInto(o, "", true, true, []OpOption{WithOpID(id)})
	size := writeCost(o, probe.items, stored, false)
	for _, c := range []struct {
		budget int
		pushed int
	}{{size - 1, 0}, {size, len(items)}} {
		pq, err := NewPriorityQueue(sub, WithBatchBudget(c.budget))
		require.NoError(t, err)
		err = pq.PushBatch(ctx, db, items, WithOpID(id))
		if c.pushed == 0 {
			require.ErrorIs(t, err, ErrBatchTooLarge, "budget %d, size %d", c.budget, size)
		} else {
			require.NoError(t, err, "budget %d, size %d", c.budget, size)
		}
		n, err := probe.Len(ctx, db)
		require.NoError(t, err)
		require.Equal(t, c.pushed, n)
	}
}
