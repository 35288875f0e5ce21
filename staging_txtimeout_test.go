package fdbqueue_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// defaultTimeoutDB stands for a database given FoundationDB's
// transaction_timeout option (fdbclient/vexillographer/fdb.options: "sets
// the timeout option of each transaction created by this database"): each
// transaction it makes carries timeout from its creation, and again after
// each Reset, which restarts its clock (ReadYourWritesTransaction::reset
// sets creationTime to now and re-applies the database's defaults;
// fdbclient/ReadYourWrites.actor.cpp). OnError keeps it and its clock
// (resetRyow re-applies the options, creationTime untouched). If
// afterNextCreate gave it a function, the next transaction it creates runs
// it on that transaction once created (a test makes time pass there).
type defaultTimeoutDB struct {
	kv.Database
	timeout time.Duration
	mu      sync.Mutex
	next    func(kv.Transaction)
}

func (d *defaultTimeoutDB) afterNextCreate(f func(kv.Transaction)) {
	d.mu.Lock()
	d.next = f
	d.mu.Unlock()
}

func (d *defaultTimeoutDB) CreateTransaction(ctx context.Context) (kv.Transaction, error) {
	tr, err := d.Database.CreateTransaction(ctx)
	if err != nil {
		return nil, err
	}
	t := &defaultTimeoutTx{Transaction: tr, timeout: d.timeout}
	t.arm()
	d.mu.Lock()
	next := d.next
	d.next = nil
	d.mu.Unlock()
	if next != nil {
		next(t)
	}
	return t, nil
}

// Transact and ReadTransact run the standard retry loops over a
// transaction of CreateTransaction, as every backend's do.
func (d *defaultTimeoutDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return kv.RetryCreated(ctx, d, fn)
}

func (d *defaultTimeoutDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return kv.ReadRetryCreated(ctx, d, fn)
}

type defaultTimeoutTx struct {
	kv.Transaction
	timeout time.Duration
}

func (t *defaultTimeoutTx) arm() { _ = t.Options().SetTimeout(t.timeout) }

func (t *defaultTimeoutTx) Reset() {
	t.Transaction.Reset()
	t.arm()
}

func (t *defaultTimeoutTx) Transact(_ context.Context, fn func(kv.Transaction) error) error {
	return fn(t)
}

// onceAt returns a staging hook that closes reached the first time its
// waiter reaches point, without stalling it.
func onceAt(point string) (hook func(string), reached <-chan struct{}) {
	var once sync.Once
	ch := make(chan struct{})
	return func(p string) {
		if p == point {
			once.Do(func() { close(ch) })
		}
	}, ch
}

// TestStagedCleanupOutlivesATransactionTimeout: a staged DequeueWait whose
// context ends while its request waits in the line withdraws the request
// in a cleanup bounded by CleanupTimeout. On a database with a default
// transaction timeout (FDB's transaction_timeout), the cleanup's
// transaction would time out as any other, here because the default's
// time passes (on the database's clock, on which memdb also counts
// timeouts) as soon as the transaction is created; and
// transaction_timed_out (1031) is retried by no retry loop
// (fdb_error_predicate, bindings/c/fdb_c.cpp). The cleanup's transaction
// sets its own timeout, CleanupTimeout, which replaces the default (a
// transaction option replaces the one the database's defaults gave, and
// counts from the creation too: the TIMEOUT case of
// ReadYourWritesTransaction::setOptionImpl, fdbclient/
// ReadYourWrites.actor.cpp), so the call returns its context's error,
// having taken nothing and left nothing in the line. (It used to give up:
// the request stayed in the line until its claim expired, and the call's
// error said the withdrawal failed.)
//
// The default can also fire first: FDB's timebomb, started at the
// creation, fails the transaction (transaction_timed_out, sticky until a
// reset) when its time is up, and a timeout set later re-arms the bomb
// but does not undo that (timebomb and resetTimeout in
// fdbclient/ReadYourWrites.cpp); a client thread that reaches the option
// later than the default's time, on a loaded machine, loses that race.
// Such a transaction committed nothing, and the cleanup runs again in a
// new one. (It used to give up as above.)
func TestStagedCleanupOutlivesATransactionTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		// fired: the default timeout fails the cleanup's first transaction
		// before the cleanup sets its own.
		fired bool
	}{
		{"the cleanup's timeout replaces the default", false},
		{"the default fired first", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forModes(t, func(t *testing.T, m stagingMode) {
				clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
				db := stgDB(t, memdb.WithClock(clock))
				sub := stgSubspace(t, "cleanup-timeout")
				q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{CleanupTimeout: time.Minute})...)
				const timeout = time.Second
				tdb := &defaultTimeoutDB{Database: db, timeout: timeout}
				hook, armed := onceAt("armed")
				fdbqueue.SetStagingHook(q, hook)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				errs := make(chan error, 1)
				go func() {
					_, err := q.DequeueWait(ctx, tdb)
					errs <- err
				}()
				recvWithin(t, armed, "the waiter's request in the line, asleep on an empty queue")
				created := make(chan error, 1)
				tdb.afterNextCreate(func(tr kv.Transaction) { // the cleanup's transaction
					clock.Advance(2 * timeout)
					var err error
					if tc.fired {
						_, err = tr.GetReadVersion().Get()
					}
					created <- err
				})
				cancel()
				err := recvWithin(t, errs, "the call's return")
				ferr := recvWithin(t, created, "the cleanup's transaction")
				if tc.fired {
					require.ErrorIs(t, ferr, kv.ErrTransactionTimedOut, "the default fired")
				}
				require.ErrorIs(t, err, context.Canceled)
				require.NotContains(t, err.Error(), "withdrawing the staged request failed")
				require.False(t, kv.MaybeCommitted(err), "the call took nothing and withdrew its request")
				require.Empty(t, stagingKeys(t, db, sub), "the request left the line")
				requireNoWatches(t, db)
			})
		})
	}
}

// TestStagedWaitOutlivesATransactionTimeout: a staged DequeueWait sleeps
// between its steps, for as long as its context allows, and wakes when an
// item comes. On a database with a default transaction timeout shorter
// than the sleep, the step after it must not run in a transaction whose
// time ran out while it slept (FDB counts the timeout from the
// transaction's creation or last Reset: ReadYourWritesTransaction::reset
// and resetTimeout, fdbclient/ReadYourWrites.actor.cpp): the call gets
// the item. (It used to fail with transaction_timed_out as it woke.) The
// database's clock, on which memdb also counts timeouts, stands for the
// time slept.
func TestStagedWaitOutlivesATransactionTimeout(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		cdb := stgDB(t, memdb.WithClock(clock))
		q := stgQueue(t, stgSubspace(t, "wait-timeout"), m.opts(fdbqueue.StagingConfig{})...)
		const timeout = 5 * time.Second
		tdb := &defaultTimeoutDB{Database: cdb, timeout: timeout}
		hook, armed := onceAt("armed")
		fdbqueue.SetStagingHook(q, hook)
		ctx := context.Background()
		type result struct {
			v   string
			err error
		}
		got := make(chan result, 1)
		go func() {
			v, err := q.DequeueWait(ctx, tdb)
			got <- result{string(v), err}
		}()
		recvWithin(t, armed, "the waiter's request in the line, asleep on an empty queue")
		clock.Advance(2 * timeout)
		require.NoError(t, q.Enqueue(ctx, cdb, []byte("a")))
		r := recvWithin(t, got, "the waiter's return")
		require.NoError(t, r.err)
		require.Equal(t, "a", r.v)
	})
}

// A staged step whose commit keeps timing out in flight (transaction_timed_out,
// which leaves the commit maybe applied and which OnError does not retry:
// fdb_error_predicate in bindings/c/fdb_c.cpp) is retried after a backoff
// from the second failure in a row on, as OnError backs off the errors it
// retries: commits that keep outlasting a transaction timeout mean a
// loaded cluster, which retries at once would load more. Here the call's
// first four commits (its plain attempt, its registration and the steps
// after it) fail so, and a later one takes x: on a Queue in either
// serving mode and on a PriorityQueue's PopMin and PopMax.
func TestStagedStepBacksOffAfterCommitTimeouts(t *testing.T) {
	for _, mk := range stagedTargetsWith(t, "timeoutbackoff", fdbqueue.StagingConfig{ClaimTimeout: time.Hour}, false) {
		x := mk(t)
		t.Run(x.name, func(t *testing.T) {
			x.enqueue(t, "x")
			var mu sync.Mutex
			var points, commits []string
			failsLeft := 4
			x.setHook(0, func(p string) {
				mu.Lock()
				defer mu.Unlock()
				if strings.HasPrefix(p, "commit ") && failsLeft > 0 {
					failsLeft--
					commits = append(commits, p)
					x.db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionTimedOut), false)
				}
				if p == "failed" || p == "backoff" {
					points = append(points, p)
				}
			})
			v, err := x.take(context.Background(), 0, false)
			require.NoError(t, err)
			require.Equal(t, "x", v)
			mu.Lock()
			defer mu.Unlock()
			t.Logf("failed commits: %q", commits)
			require.Equal(t, []string{"failed", "failed", "backoff", "failed", "backoff", "failed", "backoff"}, points,
				"the first failure is retried at once, the next ones after a backoff")
			x.requireDrained(t, nil)
		})
	}
}

// A staged call whose steps keep timing out in flight (a database's
// default transaction timeout shorter than any step: FoundationDB fails
// them with transaction_timed_out, which no retry loop retries, and may
// still apply them, docs/reliability.md "Transaction timeouts") gives up
// after MaxTimedOutSteps of them in a row, as a plain operation gives up
// at its first, instead of retrying without end. Its cleanup (with its own
// timeout) settles what the timed-out steps did, so the error is
// transaction_timed_out and not maybe committed, and every item is in the
// queue once: whether the timed-out commits did not apply, or all applied
// (the registration, then the take at its place, whose record the cleanup
// finds and whose item it puts back: a PriorityQueue's at its key, so with
// its priority, and PopMin or PopMax pops it first again). So for a Queue
// in either serving mode (by place, the withdrawn request's item goes to
// the tail) and for a PriorityQueue's PopMin and PopMax.
func TestStagedCallGivesUpAfterStepsTimeOut(t *testing.T) {
	for _, tc := range []struct {
		name string
		// applied tells whether a step's commit applies, given its
		// point and the number of takes before it.
		applied func(point string, takes int) bool
		last    string // the last step
		// moved: by place, the cleanup moved the first item to the tail
		// (it left the request's place, and put back the item a take
		// applied took).
		moved bool
	}{
		{"none applied", func(string, int) bool { return false }, "commit wait", false},
		{"the registration applied", func(p string, _ int) bool { return p == "commit register" }, "commit take", true},
		{"the registration and the last take applied", func(p string, takes int) bool {
			// After the registration, the call's steps are takes at its
			// place (the step that resolved the registration commits
			// nothing): the last of MaxTimedOutSteps in a row.
			return p == "commit register" || (p == "commit take" && takes == fdbqueue.MaxTimedOutSteps-1)
		}, "commit take (applied)", true},
	} {
		for _, mk := range stagedTargetsWith(t, "timeoutgiveup", fdbqueue.StagingConfig{ClaimTimeout: time.Hour}, false) {
			x := mk(t)
			t.Run(x.name+"/"+tc.name, func(t *testing.T) {
				x.enqueue(t, "a", "b", "c")
				before := itemKeys(t, x.db, x.sub)

				var mu sync.Mutex
				var points []string
				takes := 0
				x.setHook(0, func(p string) {
					mu.Lock()
					defer mu.Unlock()
					if strings.HasPrefix(p, "commit ") {
						applied := tc.applied(p, takes)
						if p == "commit take" {
							takes++
						}
						if applied {
							p += " (applied)"
						}
						points = append(points, p)
						x.db.FailNextCommit(kv.CommitInterrupted(kv.ErrTransactionTimedOut), applied)
					}
				})
				// The bound fails the test (with the context's error) if
				// the call retries without end.
				callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_, err := x.take(callCtx, 0, false)
				mu.Lock()
				t.Logf("steps: %q", points)
				require.Equal(t, tc.last, points[len(points)-1])
				mu.Unlock()
				require.ErrorIs(t, err, kv.ErrTransactionTimedOut)
				require.False(t, kv.MaybeCommitted(err), "the cleanup settled the steps: %v", err)

				x.requireBack(t, before, tc.moved)
			})
		}
	}
}
