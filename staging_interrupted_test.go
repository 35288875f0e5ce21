package fdbqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// timeoutDB stands for a database given FoundationDB's transaction_timeout
// option (a default timeout for every transaction, kept through Reset):
// expire makes the timeouts of the transactions it made fire now, which a
// test does while one of them has its commit held in flight. FDB then
// fails the commit with transaction_timed_out (1031) and does not fence
// it: the request goes on and can land later (RYWImpl::commit returns as
// soon as resetPromise is set, fdbclient/ReadYourWrites.actor.cpp; only
// commit_unknown_result is preceded by commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp). memdb's HoldNextCommitLate models that
// late landing.
type timeoutDB struct {
	kv.Database
	mu  sync.Mutex
	txs []kv.Transaction
}

func (d *timeoutDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err == nil {
		d.mu.Lock()
		d.txs = append(d.txs, tr)
		d.mu.Unlock()
	}
	return tr, err
}

// expire times out the transactions made so far.
func (d *timeoutDB) expire(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, tr := range d.txs {
		require.NoError(t, tr.Options().SetTimeout(time.Nanosecond))
	}
}

// TestStagedTimedOutTakeLandingLate: a staged Dequeue whose one plain
// attempt (the fast take of the head, a) times out while its commit is in
// flight goes on, its context alive: the error is maybe committed, and the
// call retries. Its retry finds no journal record (the take has not landed
// yet) and files a request behind other consumers' requests, filed
// meanwhile, the first of which is due a. The timed-out take then lands.
// It read only a's key and the items before it, which nobody wrote; unless
// it is fenced, it applies, and a is gone:
//
//   - one request ahead, more items: the retry took the item at its place
//     (b), writing the record key the late take then overwrites; the call
//     returned b, and nobody got a;
//   - two requests ahead and two items: the retry found no item at its
//     place and withdrew; the call returned ErrEmpty, and nobody got a.
func TestStagedTimedOutTakeLandingLate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ahead int // requests filed while the take is in flight
		items []string
		first string // what the call returns ("": ErrEmpty)
	}{
		{"retry takes another item", 1, []string{"a", "b", "c"}, "b"},
		{"retry finds its place empty", 2, []string{"a", "b"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := stgDB(t)
			sub := stgSubspace(t, "timed-out-take")
			opts := stagingMode{"place", true}.opts(fdbqueue.StagingConfig{})
			q := stgQueue(t, sub, opts...) // the call's process
			// Other consumers' processes.
			others := make([]*fdbqueue.Queue, tc.ahead)
			for i := range others {
				others[i] = stgQueue(t, sub, opts...)
			}
			// Every handle has run (the stored configuration is settled,
			// as on a queue in use).
			for _, h := range append([]*fdbqueue.Queue{q}, others...) {
				require.NoError(t, h.Enqueue(ctx, db, []byte("warm-up")))
				v, err := h.Dequeue(ctx, db)
				require.NoError(t, err)
				require.Equal(t, "warm-up", string(v))
			}
			var items [][]byte
			for _, it := range tc.items {
				items = append(items, []byte(it))
			}
			require.NoError(t, q.EnqueueBatch(ctx, db, items))

			hook, failed, resume := stallOnceAt("failed")
			fdbqueue.SetStagingHook(q, hook)
			type result struct {
				v   string
				err error
			}
			first := make(chan result, 1)
			tdb := &timeoutDB{Database: db}
			held, release := db.HoldNextCommitLate()
			go func() {
				v, err := q.Dequeue(ctx, tdb)
				first <- result{string(v), err}
			}()
			recvWithin(t, held, "the fast take of a in flight")
			tdb.expire(t)
			recvWithin(t, failed, "the take's failure with transaction_timed_out, still in flight")

			// Each other consumer's one plain attempt conflicts; it files a
			// request (the first is due a) and stalls there.
			resumeOthers := make(chan struct{})
			rest := make(chan result, len(others))
			for _, o := range others {
				registered := make(chan struct{})
				var once sync.Once
				fdbqueue.SetStagingHook(o, func(p string) {
					if p == "registered" {
						once.Do(func() {
							close(registered)
							<-resumeOthers
						})
					}
				})
				db.FailNextCommit(kv.ErrNotCommitted, false)
				go func() {
					v, err := o.Dequeue(ctx, db)
					rest <- result{string(v), err}
				}()
				recvWithin(t, registered, "another consumer's request filed")
			}

			resume()
			r1 := recvWithin(t, first, "the first Dequeue's return")
			if tc.first == "" {
				require.ErrorIs(t, r1.err, fdbqueue.ErrEmpty)
			} else {
				require.NoError(t, r1.err)
				require.Equal(t, tc.first, r1.v)
			}
			release() // the timed-out take lands now
			close(resumeOthers)
			got := map[string]int{}
			if r1.err == nil {
				got[r1.v]++
			}
			for range others {
				r := recvWithin(t, rest, "another consumer's return")
				if !errors.Is(r.err, fdbqueue.ErrEmpty) {
					require.NoError(t, r.err)
					got[r.v]++
				}
			}
			for _, v := range drain(t, db, q) {
				got[v]++
			}
			requireExactlyOnce(t, got, tc.items)
			require.Empty(t, stagingKeys(t, db, sub))
		})
	}
}

// TestStagedSettleWhileTheTakeIsInFlight: a staged Dequeue's fast take of
// a is cut short by its context's end and its cleanup fails, so nothing
// fenced the take: the call fails maybe committed and logs its ID, and the
// take is still in flight. Another consumer files a request (due a), and
// the caller settles under the logged ID: no record yet, so the settling
// call takes the item after the request's, b. The first take then lands,
// and must not take a as well: the other consumer gets it.
func TestStagedSettleWhileTheTakeIsInFlight(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "settle-in-flight")
	logs, logger := loggedIDs()
	opts := stagingMode{"place", true}.opts(fdbqueue.StagingConfig{})
	q := stgQueue(t, sub, append(opts, logger)...)
	other := stgQueue(t, sub, opts...)
	for _, h := range []*fdbqueue.Queue{q, other} {
		require.NoError(t, h.Enqueue(ctx, db, []byte("warm-up")))
		v, err := h.Dequeue(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "warm-up", string(v))
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))

	held, release := db.HoldNextCommitLate()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := q.Dequeue(cctx, db)
		done <- err
	}()
	recvWithin(t, held, "the fast take of a in flight")
	// The cleanup's commit fails, with an error its retry loop does not
	// retry.
	db.FailNextCommit(kv.ErrTransactionTooLarge, false)
	cancel()
	err := recvWithin(t, done, "the cancelled Dequeue's return")
	require.True(t, kv.MaybeCommitted(err), "the cleanup failed: %v", err)
	id := logs.take(t)

	hook, registered, resumeOther := stallOnceAt("registered")
	fdbqueue.SetStagingHook(other, hook)
	type result struct {
		v   string
		err error
	}
	second := make(chan result, 1)
	db.FailNextCommit(kv.ErrNotCommitted, false) // its one plain attempt
	go func() {
		v, err := other.Dequeue(ctx, db)
		second <- result{string(v), err}
	}()
	recvWithin(t, registered, "the other consumer's request filed")

	v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err, "settled: the first take had not landed")
	require.Equal(t, "b", string(v))
	release() // the first take lands now
	resumeOther()
	r := recvWithin(t, second, "the other consumer's return")
	require.NoError(t, r.err)
	require.Equal(t, "a", r.v, "a, due to the other request, is still there")
	_, err = q.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.Empty(t, stagingKeys(t, db, sub))
}

// TestStagedEarlierTimedOutTakeAtCleanup: a staged Dequeue by place, its
// request second in the line, takes the item at its place, a (take 1),
// and that commit times out while in flight: transaction_timed_out, which
// FoundationDB does not fence, so the call goes on with take 1 still in
// flight (RYWImpl::commit waits on resetPromise || tr.commit(), and the
// timeout sets resetPromise, fdbclient/ReadYourWrites.actor.cpp; only
// commit_unknown_result is preceded by commitDummyTransaction,
// fdbclient/NativeAPI.actor.cpp; see timeoutDB). Meanwhile another
// consumer's plain attempt, which read the line before the first request
// was filed, takes the head x: the items at the line's places are now a
// and b, and the call's next step takes b (take 2), whose commit is in
// flight when the caller's context ends. The cleanup (abandon) runs with
// take 2 as the newest take and take 1 still in flight:
//
//   - take 1 lands before the cleanup reads the journal: the cleanup finds
//     its record, a's, which is not take 2's, and must still put a back
//     (it used to know only the newest take, and left a in the record
//     while the call returned the context's error: a was lost);
//   - take 1 lands after the cleanup committed: it must fail (a write
//     inside a read conflict range after the read version fails the
//     commit: ConflictBatch::checkReadConflictRanges,
//     fdbserver/SkipList.cpp). It read the request and result keys, which
//     the cleanup clears, and the record key, on which the cleanup now
//     puts a write conflict too. (A regression guard: the result key's
//     clear fenced it already. A take made before the registration, the
//     one plain attempt, is fenced by the registration's commit, which
//     any later take needs.)
//
// Either way x, a and b each come out once: x to the other consumer, the
// rest to the consumer whose request was ahead and to later Dequeues (or,
// had the call failed maybe committed, to a call settling under its ID).
func TestStagedEarlierTimedOutTakeAtCleanup(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before bool // take 1 lands before the cleanup runs
	}{
		{"take 1 lands before the cleanup", true},
		{"take 1 lands after the cleanup", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := stgDB(t)
			sub := stgSubspace(t, "earlier-take-at-cleanup")
			opts := stagingMode{"place", true}.opts(fdbqueue.StagingConfig{})
			q := stgQueue(t, sub, opts...)     // the call's process
			ahead := stgQueue(t, sub, opts...) // the request ahead
			stale := stgQueue(t, sub, opts...) // the plain attempt that takes x
			for _, h := range []*fdbqueue.Queue{q, ahead, stale} {
				require.NoError(t, h.Enqueue(ctx, db, []byte("warm-up")))
				v, err := h.Dequeue(ctx, db)
				require.NoError(t, err)
				require.Equal(t, "warm-up", string(v))
			}
			want := []string{"x", "a", "b"}
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("a"), []byte("b")}))
			type result struct {
				v   string
				err error
			}

			// The other consumer's plain attempt reads the empty line and
			// takes the head, x; its commit waits.
			heldX, releaseX := db.HoldNextCommit()
			staleDone := make(chan result, 1)
			go func() {
				v, err := stale.Dequeue(ctx, db)
				staleDone <- result{string(v), err}
			}()
			recvWithin(t, heldX, "the plain attempt's take of x in flight")

			// The consumer ahead: its plain attempt conflicts, it files the
			// first request and stalls.
			aheadHook, registered, resumeAhead := stallOnceAt("registered")
			fdbqueue.SetStagingHook(ahead, aheadHook)
			db.FailNextCommit(kv.ErrNotCommitted, false)
			aheadDone := make(chan result, 1)
			go func() {
				v, err := ahead.Dequeue(ctx, db)
				aheadDone <- result{string(v), err}
			}()
			recvWithin(t, registered, "the request ahead filed")

			// The call: its plain attempt conflicts, it files the second
			// request, then takes a at its place (take 1) and b (take 2),
			// each commit held in flight.
			type hold struct {
				held    <-chan struct{}
				release func()
			}
			holds := make(chan hold, 2)
			var takes, fails int
			failed1, resume1 := make(chan struct{}), make(chan struct{})
			failed2 := make(chan struct{})
			var release1 func()
			fdbqueue.SetStagingHook(q, func(p string) {
				switch p {
				case "commit fast":
					db.FailNextCommit(kv.ErrNotCommitted, false)
				case "commit take":
					if takes++; takes <= 2 {
						h, r := db.HoldNextCommitLate()
						if takes == 1 {
							release1 = r
						}
						holds <- hold{h, r}
					}
				case "failed":
					// The failures of take 1 and take 2 (the plain
					// attempt's comes before take 1).
					if fails == takes {
						break
					}
					switch fails = takes; fails {
					case 1:
						close(failed1)
						<-resume1
					case 2:
						if tc.before {
							release1() // take 1 lands now
						}
						close(failed2)
					}
				}
			})
			tdb := &timeoutDB{Database: db}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			first := make(chan result, 1)
			go func() {
				v, err := q.Dequeue(cctx, tdb)
				first <- result{string(v), err}
			}()
			take1 := recvWithin(t, holds, "take 1, of a, in flight")
			recvWithin(t, take1.held, "take 1's commit held")
			tdb.expire(t)
			recvWithin(t, failed1, "take 1's failure with transaction_timed_out, still in flight")

			releaseX() // the plain attempt takes x
			r := recvWithin(t, staleDone, "the plain attempt's return")
			require.NoError(t, r.err)
			require.Equal(t, "x", r.v)
			got := map[string]int{r.v: 1}

			close(resume1)
			take2 := recvWithin(t, holds, "take 2, of b, in flight")
			recvWithin(t, take2.held, "take 2's commit held")
			cancel()
			recvWithin(t, failed2, "take 2 cut short by the context's end")
			r1 := recvWithin(t, first, "the call's return")
			require.Equal(t, 2, takes, "the call took twice")
			take1.release() // take 1 lands now, if it has not
			take2.release() // so does take 2

			if kv.MaybeCommitted(r1.err) {
				var ure *fdbqueue.UnknownResultError
				require.ErrorAs(t, r1.err, &ure)
				v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(ure.ID))
				if !errors.Is(err, fdbqueue.ErrEmpty) {
					require.NoError(t, err)
					got[string(v)]++
				}
			} else {
				require.ErrorIs(t, r1.err, context.Canceled)
			}
			resumeAhead()
			r = recvWithin(t, aheadDone, "the consumer ahead's return")
			if !errors.Is(r.err, fdbqueue.ErrEmpty) {
				require.NoError(t, r.err)
				got[r.v]++
			}
			for _, v := range drain(t, db, q) {
				got[v]++
			}
			requireExactlyOnce(t, got, want)
			require.Empty(t, stagingKeys(t, db, sub))
		})
	}
}
