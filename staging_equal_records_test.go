package fdbqueue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// TestStagedCleanupEqualRecordsInBatches: the cleanup of a staged call
// (abandon) knows which of its takes applied only by the journal record it
// finds, which holds the item's priority and stored value, not its key. In
// batch mode it puts that item back at its original key, so when two of
// the call's takes wrote equal records it must put back the item of the
// take that applied, and must not write an item at the key of the other
// one.
//
// A PriorityQueue's PopMaxWait, W, whose request is second in the line
// behind R's (both helpers), hands R the highest item (5,c2) and takes the
// next, (5,c1) (take 1), with a read conflict on each of those keys and
// requests only. Its commit times out in flight (transaction_timed_out,
// which FoundationDB does not fence: see timeoutDB) and the call goes on.
// Its next step takes another item of priority 5 and the same value (take
// 2). Take 1 then lands, before take 2's commit, which conflicts (take 1
// wrote the record key take 2 read), and the caller's context ends; the
// cleanup finds take 1's record, equal to take 2's:
//
//   - two more items were pushed, behind c2 in the priority's order, so
//     ahead of it for PopMax: take 2 hands R (5,c4) and takes (5,c3),
//     which is still in the queue. The cleanup must put back c1: writing c3
//     over itself, it lost c1 while the call failed with the context's
//     error, not maybe committed;
//   - R's request expired before take 2 (a manual clock), which dropped it
//     and took the head itself, c2, which take 1 handed to R. Both keys
//     are empty: the cleanup cannot tell which take applied and must leave
//     the item in the record (the call fails maybe committed, and a call
//     under its ID returns it). Writing c2 again, it made two copies of
//     c2's key, in the queue and in R's result, and when that result
//     expired before R collected it, Recover wrote it back over the one in
//     the queue: c1 was lost.
//
// Every item pushed comes out once.
func TestStagedCleanupEqualRecordsInBatches(t *testing.T) {
	for _, tc := range []struct {
		name    string
		expire  bool // R's request expires before take 2
		settled bool // the call fails maybe committed
	}{
		{"the other take's item is in the queue", false, false},
		{"the other take's item was handed out", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := stgDB(t)
			sub := stgSubspace(t, "equal-records")
			const timeout = time.Minute
			clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
			opts := []fdbqueue.Option{fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now)}
			newPQ := func() *fdbqueue.PriorityQueue {
				pq, err := fdbqueue.NewPriorityQueue(sub, opts...)
				require.NoError(t, err)
				return pq
			}
			pq, other := newPQ(), newPQ() // W's process; R's
			for _, h := range []*fdbqueue.PriorityQueue{pq, other} {
				require.NoError(t, h.Push(ctx, db, []byte("warm-up"), 1))
				it, err := h.PopMax(ctx, db)
				require.NoError(t, err)
				require.Equal(t, "warm-up", string(it.Value))
			}
			const v, prio = "v", int64(5)
			pushed := 0
			push := func() {
				t.Helper()
				require.NoError(t, other.Push(ctx, db, []byte(v), prio))
				pushed++
			}
			push() // c1
			push() // c2
			type result struct {
				it  fdbqueue.Item
				err error
			}

			// R: its plain attempt conflicts, it files the first request
			// and stalls.
			rHook, registered, resumeR := stallOnceAt("registered")
			defer resumeR()
			fdbqueue.SetPQStagingHook(other, rHook)
			db.FailNextCommit(kv.ErrNotCommitted, false)
			rDone := make(chan result, 1)
			go func() {
				it, err := other.PopMaxWait(ctx, db)
				rDone <- result{it, err}
			}()
			recvWithin(t, registered, "R's request filed")
			clock.Advance(timeout / 2) // W's request expires later than R's

			// W: its plain attempt conflicts, it files the second request,
			// then serves R and takes c1 (take 1), its commit held in
			// flight, and takes again (take 2).
			var held1 <-chan struct{}
			var release1 func()
			takes, fails := 0, 0
			reached1 := make(chan struct{})
			failed1, resume1 := make(chan struct{}), make(chan struct{})
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			fdbqueue.SetPQStagingHook(pq, func(p string) {
				switch p {
				case "commit fast":
					db.FailNextCommit(kv.ErrNotCommitted, false)
				case "commit fulfil", "commit take":
					switch takes++; takes {
					case 1:
						held1, release1 = db.HoldNextCommitLate()
						close(reached1)
					case 2:
						release1() // take 1 lands now, after take 2's read version
					}
				case "failed":
					if fails == takes { // the plain attempt's
						break
					}
					switch fails = takes; fails {
					case 1:
						close(failed1)
						<-resume1
					case 2:
						cancel() // the caller gives up: the cleanup runs
					}
				}
			})
			tdb := &timeoutDB{Database: db}
			wDone := make(chan result, 1)
			go func() {
				it, err := pq.PopMaxWait(cctx, tdb)
				wDone <- result{it, err}
			}()
			recvWithin(t, reached1, "take 1, of c1, about to commit")
			recvWithin(t, held1, "take 1's commit held")
			tdb.expire(t)
			recvWithin(t, failed1, "take 1's failure with transaction_timed_out, still in flight")

			if tc.expire {
				clock.Advance(timeout/2 + time.Second) // R's request expired, W's not
			} else {
				push() // c3
				push() // c4
			}
			close(resume1)
			r := recvWithin(t, wDone, "W's return")
			require.Equal(t, 2, takes, "W took twice")
			got := 0
			if tc.settled {
				require.True(t, kv.MaybeCommitted(r.err), "W: %v", r.err)
				var ure *fdbqueue.UnknownResultError
				require.ErrorAs(t, r.err, &ure)
				it, err := pq.PopMax(ctx, db, fdbqueue.WithOpID(ure.ID))
				require.NoError(t, err, "the record of take 1 is there")
				require.Equal(t, v, string(it.Value))
				got++
			} else {
				require.ErrorIs(t, r.err, context.Canceled)
				require.False(t, kv.MaybeCommitted(r.err), "W: %v", r.err)
			}

			if tc.expire {
				// The result take 1 wrote for R expires before R collects
				// it, and its item goes back to the queue.
				clock.Advance(timeout)
				st, err := other.Recover(ctx, db)
				require.NoError(t, err)
				require.Equal(t, 1, st.ReturnedItems, "R's result went back")
			}
			resumeR()
			rr := recvWithin(t, rDone, "R's return")
			if tc.expire {
				require.ErrorIs(t, rr.err, fdbqueue.ErrClaimExpired)
			} else {
				require.NoError(t, rr.err)
				require.Equal(t, v, string(rr.it.Value))
				got++
			}
			for {
				it, err := pq.PopMax(ctx, db)
				if errors.Is(err, fdbqueue.ErrEmpty) {
					break
				}
				require.NoError(t, err)
				require.Equal(t, v, string(it.Value))
				got++
			}
			require.Equal(t, pushed, got, "items that came out, of those pushed")
			require.Empty(t, stagingKeys(t, db, sub))
		})
	}
}
