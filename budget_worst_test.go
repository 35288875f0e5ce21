package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// zeroEntropy is a source of random key suffixes that gives only 0x00
// bytes, each of which the tuple layer would escape to two.
type zeroEntropy struct{}

func (zeroEntropy) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// worstIDs returns two operation IDs whose random halves (bytes 8 to 15,
// byte 8 the journal shard) are all 0x01, packing shortest, and all 0x00,
// packing longest (each byte escaped, the shard of 0 a byte shorter).
func worstIDs() (short, long fdbqueue.OpID) {
	short, long = fdbqueue.NewOpID(), fdbqueue.NewOpID()
	for i := 8; i < 16; i++ {
		short[i], long[i] = 1, 0
	}
	return short, long
}

// largestAccepted finds by bisection the largest n for which try(n), run
// on a database that runs nothing, passes its own checks (errNotRun);
// every larger n must fail with ErrBatchTooLarge.
func largestAccepted(t *testing.T, hi int, try func(n int) error) int {
	t.Helper()
	lo := 1
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if err := try(mid); errors.Is(err, errNotRun) {
			lo = mid
		} else {
			require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge, "a batch of %d", mid)
			hi = mid - 1
		}
	}
	return lo
}

// TestBatchBudgetWorstCaseBytes: the batch operations keep to their
// budget, as FoundationDB counts a commit's size (fdbDB), with every
// random or variable input at its longest: item keys' random suffixes
// from a source of zero bytes (WithEntropy), an operation ID whose random
// bytes are all 0x00 (escaped in its journal keys, and with a marker, as
// an ID of the caller's), a queue's indices near MaxInt64 (9 bytes
// packed), job priorities at MinInt32. And the largest batch a budget
// accepts is the same under an ID that packs shortest.
func TestBatchBudgetWorstCaseBytes(t *testing.T) {
	ctx := context.Background()
	const budget = 300_000
	ones := func(n int) [][]byte {
		vs := make([][]byte, n)
		for i := range vs {
			vs[i] = []byte{7}
		}
		return vs
	}
	within := func(t *testing.T, db *fdbDB, what string) {
		t.Helper()
		st := db.st.snapshot()
		require.Empty(t, st.violations)
		require.Zero(t, st.tooLarge)
		require.Positive(t, st.commits)
		require.LessOrEqual(t, st.maxSize, budget, "%s: the commit's size, as FDB counts it, within the budget", what)
	}
	for _, vstamp := range []bool{false, true} {
		name := "index"
		if vstamp {
			name = "versionstamp"
		}
		t.Run("queue/"+name, func(t *testing.T) {
			raw := newDB(t)
			sub := mustSubspace(t, "worst", name)
			opts := []fdbqueue.Option{fdbqueue.WithBatchBudget(budget), fdbqueue.WithEntropy(zeroEntropy{})}
			if vstamp {
				opts = append(opts, fdbqueue.WithVersionstampOrder())
			}
			q, err := fdbqueue.NewQueue(sub, opts...)
			require.NoError(t, err)
			if !vstamp {
				// The tail near MaxInt64: every new index packs to 9 bytes.
				key, err := sub.Pack(tuple.Tuple{int64(math.MaxInt64 - 1_000_000), bytes.Repeat([]byte{0xab}, 20)})
				require.NoError(t, err)
				setRaw(t, raw, key, []byte{7})
			}
			short, long := worstIDs()
			largest := func(id fdbqueue.OpID) int {
				return largestAccepted(t, budget/50, func(n int) error {
					return q.EnqueueBatch(ctx, refuseTransact{raw}, ones(n), fdbqueue.WithOpID(id))
				})
			}
			n := largest(long)
			require.Equal(t, largest(short), n, "the largest batch accepted under either ID")
			require.Greater(t, n, 100)
			db := newFDBDB(raw)
			require.NoError(t, q.EnqueueBatch(ctx, db, ones(n), fdbqueue.WithOpID(long)))
			within(t, db, "EnqueueBatch")
			t.Logf("%s: %d items, %d bytes", name, n, db.st.snapshot().maxSize)

			db = newFDBDB(raw)
			_, long = worstIDs()
			got, err := q.DequeueBatch(ctx, db, 2*n, fdbqueue.WithOpID(long))
			require.NoError(t, err)
			require.Greater(t, len(got), 100)
			within(t, db, "DequeueBatch")
		})
	}
	t.Run("jobs", func(t *testing.T) {
		raw := newDB(t)
		// (Job IDs are random suffixes too, of fixed length whatever their
		// bytes; a source of zeros would give every job the same ID.)
		q, err := fdbqueue.NewJobQueue(mustSubspace(t, "worst", "jobs"), fdbqueue.JobQueueConfig{},
			fdbqueue.WithBatchBudget(budget))
		require.NoError(t, err)
		jobs := func(n int) []fdbqueue.Job {
			js := make([]fdbqueue.Job, n)
			for i := range js {
				js[i] = fdbqueue.Job{Value: []byte{7}, Priority: math.MinInt32, MaxAttempts: math.MaxInt32}
			}
			return js
		}
		short, long := worstIDs()
		largest := func(id fdbqueue.OpID) int {
			return largestAccepted(t, budget/50, func(n int) error {
				_, err := q.AddBatch(ctx, refuseTransact{raw}, jobs(n), fdbqueue.WithOpID(id))
				return err
			})
		}
		n := largest(long)
		require.Equal(t, largest(short), n, "the largest batch accepted under either ID")
		require.Greater(t, n, 50)
		db := newFDBDB(raw)
		_, err = q.AddBatch(ctx, db, jobs(n), fdbqueue.WithOpID(long))
		require.NoError(t, err)
		within(t, db, "AddBatch")

		db = newFDBDB(raw)
		_, long = worstIDs()
		leases, err := q.Lease(ctx, db, fdbqueue.MaxLeaseBatch, time.Hour, fdbqueue.WithOpID(long))
		require.NoError(t, err)
		require.Greater(t, len(leases), 50)
		require.Less(t, len(leases), n, "the budget, not the jobs, ended the batch")
		within(t, db, "Lease")
	})
}
