package kvtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// notFiredWait is how long requireNotFired waits for a watch that must not
// fire. It bounds a Wait whose expected outcome is its context's deadline; it
// is not used to order events.
const notFiredWait = 50 * time.Millisecond

// firedWait bounds a Wait on a watch that must fire.
const firedWait = 10 * time.Second

// watchTests cover when watches fire, fail and are cancelled, and the watch
// limit.
func watchTests() []conformanceTest {
	return []conformanceTest{
		{"FiresAfterChangeNotBefore", testWatchFiresAfterChangeNotBefore},
		{"NotFiredByOtherKeys", testWatchNotFiredByOtherKeys},
		{"FiresOnInsertOfMissingKey", testWatchFiresOnInsertOfMissingKey},
		{"FiresOnClear", testWatchFiresOnClear},
		{"FiresOnAtomicChange", testWatchFiresOnAtomicChange},
		{"NotActiveBeforeCommit", testWatchNotActiveBeforeCommit},
		{"FailedCommitFailsWatches", testWatchFailedCommitFailsWatches},
		{"RetryFailsWatchesCancelled", testWatchRetryFailsWatchesCancelled},
		{"CancelFailsWait", testWatchCancelFailsWait},
		{"CancelReleasesPendingWait", testWatchCancelReleasesPendingWait},
		{"TooManyWatches", testTooManyWatches},
		{"ComparesWithOwnWrite", testWatchComparesWithOwnWrite},
		{"ComparesWithOwnWriteAfterARead", testWatchComparesWithOwnWriteAfterARead},
		{"ComparesWithOwnClearRange", testWatchComparesWithOwnClearRange},
		{"NotFiredByOwnClearRangeEndingAtItsKey", testWatchNotFiredByOwnClearRangeEndingAtItsKey},
		{"FiresOnInsertOfEmptyValue", testWatchFiresOnInsertOfEmptyValue},
		{"FiresOnOwnChangeOfMissingKey", testWatchFiresOnOwnChangeOfMissingKey},
		{"BesideVersionstampedKey", testWatchBesideVersionstampedKey},
		{"ReadsItsKey", testWatchReadsItsKey},
		{"ReadOnlyWatcherNeverConflicts", testWatchReadOnlyWatcherNeverConflicts},
		{"FiresOnOwnChange", testWatchFiresOnOwnChange},
		{"NotFiredByOwnWriteOfSameValue", testWatchNotFiredByOwnWriteOfSameValue},
		{"FailsWithItsRead", testWatchFailsWithItsRead},
		{"CancelledTransactionFailsWatch", testWatchOfCancelledTransactionFails},
		{"CommitFailingBeforeSendFailsWatch", testWatchOfCommitFailingBeforeSendFails},
		{"TransactionErrorsBeforeKeyErrors", testWatchTransactionErrorsBeforeKeyErrors},
		{"FiresAtVersionstampedKeyWritePoint", testWatchFiresAtVersionstampedKeyWritePoint},
	}
}

// requireFailsSoon requires w to fail, within firedWait, with want.
func (f *fixture) requireFailsSoon(t *testing.T, w kv.Watch, want kv.Error, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	err := w.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "%s must fail at once, not stay pending", what)
	requireCode(t, err, want, what)
}

// A watch of a transaction cancelled before its commit fails with
// transaction_cancelled (kv.Transaction.Cancel), also a watch that has
// read its key already: the key is read first here, so FDB answers the
// watch's read from the transaction's cache and hands the watch to the
// native transaction at once, where FDB's cancel does not reach it
// (RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp); only a commit,
// reset or destruction of that transaction would (NativeAPI.actor.cpp),
// and the Go binding keeps a transaction alive while a watch's future is.
func testWatchOfCancelledTransactionFails(t *testing.T, f *fixture) {
	f.seed(t, "k")
	for _, how := range []string{"Cancel", "context"} {
		ctx, cancel := context.WithCancel(f.ctx)
		tr, err := f.db.CreateTransaction(ctx)
		require.NoError(t, err, "CreateTransaction")
		mustGet(t, tr, f.key("k"))
		w := tr.Watch(f.key("k"))
		t.Cleanup(w.Cancel)
		if how == "Cancel" {
			tr.Cancel()
		} else {
			cancel()
		}
		f.requireFailsSoon(t, w, kv.ErrTransactionCancelled, "the watch of a transaction cancelled by "+how)
		cancel()
	}
}

// The watches of a commit that fails fail with its error (kv.Transaction.
// Watch), also when FDB fails the commit before its native commit runs,
// which would have failed them: an invalid write's deferred error
// (ThreadSafeTransaction::commit calls checkDeferredError first); and when
// the client refuses the commit before sending it, as too large
// (Transaction::commitMutations returns transaction_too_large, and
// commitAndWatch fails the watches with it: fdbclient/NativeAPI.actor.cpp).
func testWatchOfCommitFailingBeforeSendFails(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("k"))
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	tr.Set(f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize))), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrKeyTooLarge, "the commit after a write of a key over the size limit")
	f.requireFailsSoon(t, w, kv.ErrKeyTooLarge, "the watch of a commit that failed with key_too_large")

	tr = f.newTx(t)
	mustGet(t, tr, f.key("k"))
	w = tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	f.fillTransaction(tr, kv.MaxTransactionSize/kv.MaxValueSize+1)
	requireCode(t, tr.Commit(), kv.ErrTransactionTooLarge, "the commit of a transaction over the size limit")
	f.requireFailsSoon(t, w, kv.ErrTransactionTooLarge, "the watch of a commit that failed with transaction_too_large")
}

// watch commits a transaction that watches key and returns the watch.
func (f *fixture) watch(t *testing.T, key []byte) kv.Watch {
	t.Helper()
	tr := f.newTx(t)
	w := tr.Watch(key)
	require.NotNil(t, w, "Watch returned nil")
	commit(t, tr, "committing the watching transaction")
	t.Cleanup(w.Cancel)
	return w
}

// requireNotFired requires w not to fire within notFiredWait: its Wait must
// end with the context's deadline. why says why it must not have fired.
func (f *fixture) requireNotFired(t *testing.T, w kv.Watch, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, notFiredWait)
	defer cancel()
	err := w.Wait(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the watch must not fire (Wait must run into its deadline): %s", why)
}

// requireFired requires w to fire (Wait returns nil) within firedWait.
func (f *fixture) requireFired(t *testing.T, w kv.Watch, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	require.NoError(t, w.Wait(ctx), why)
}

// testWatchFiresAfterChangeNotBefore: a committed watch fires when its
// key's value differs from the one it read (watchWaitForValueChange,
// fdbserver/storageserver.actor.cpp), not before.
func testWatchFiresAfterChangeNotBefore(t *testing.T, f *fixture) {
	f.seed(t, "k")
	w := f.watch(t, f.key("k"))
	f.requireNotFired(t, w, "nothing changed the key yet")
	f.requireNotFired(t, w, "a Wait that ended with its context leaves the watch registered")
	f.set(t, f.key("k"), []byte("changed"))
	f.requireFired(t, w, "the watch must fire after another transaction changed the key")
}

// testWatchNotFiredByOtherKeys: a watch is on one key
// (watchWaitForValueChange, fdbserver/storageserver.actor.cpp).
func testWatchNotFiredByOtherKeys(t *testing.T, f *fixture) {
	f.seed(t, "k")
	w := f.watch(t, f.key("k"))
	f.set(t, f.key("k\x00"), []byte("x"))
	f.set(t, f.key("j"), []byte("x"))
	f.requireNotFired(t, w, "writes to other keys must not fire the watch")
	f.set(t, f.key("k"), []byte("changed"))
	f.requireFired(t, w, "the watch must fire once its own key changes")
}

// testWatchFiresOnInsertOfMissingKey: present differs from missing
// (watchWaitForValueChange compares Optional<Value>s,
// fdbserver/storageserver.actor.cpp).
func testWatchFiresOnInsertOfMissingKey(t *testing.T, f *fixture) {
	w := f.watch(t, f.key("k"))
	f.requireNotFired(t, w, "the key is still missing")
	f.set(t, f.key("k"), []byte("new"))
	f.requireFired(t, w, "a watch on a missing key must fire when the key is created")
}

// testWatchFiresOnClear: a clear-range that removes the key changes it
// (watchWaitForValueChange, fdbserver/storageserver.actor.cpp).
func testWatchFiresOnClear(t *testing.T, f *fixture) {
	f.seed(t, "k")
	w := f.watch(t, f.key("k"))
	tr := f.newTx(t)
	tr.ClearRange(f.rng("a", "z"))
	commit(t, tr)
	f.requireFired(t, w, "a watch must fire when its key is removed by a clear-range")
}

// testWatchFiresOnAtomicChange: so does an atomic op
// (watchWaitForValueChange, fdbserver/storageserver.actor.cpp).
func testWatchFiresOnAtomicChange(t *testing.T, f *fixture) {
	f.set(t, f.key("k"), le(1, 8))
	w := f.watch(t, f.key("k"))
	tr := f.newTx(t)
	tr.Add(f.key("k"), le(1, 8))
	commit(t, tr)
	f.requireFired(t, w, "a watch must fire when an atomic op changes its key")
}

// testWatchNotActiveBeforeCommit: a watch is set up when its transaction
// commits (the watch actor waits for onSetWatchTrigger, which
// commitAndWatch's setupWatches sets: fdbclient/NativeAPI.actor.cpp).
func testWatchNotActiveBeforeCommit(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	f.set(t, f.key("k"), []byte("changed"))
	f.requireNotFired(t, w, "a watch is registered when its transaction commits, and this one has not committed")
}

// testWatchFailedCommitFailsWatches: a failed commit fails its watches
// with its error (commitAndWatch calls cancelWatches(e),
// fdbclient/NativeAPI.actor.cpp).
func testWatchFailedCommitFailsWatches(t *testing.T, f *fixture) {
	f.seed(t, "b")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("b"))
	w := tr.Watch(f.key("w"))
	t.Cleanup(w.Cancel)
	tr.Set(f.key("c"), []byte("x"))
	f.set(t, f.key("b"), []byte("changed"))
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "commit of the watching transaction")
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	err := w.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "a watch of a transaction that failed to commit must fail at once, not stay pending")
	requireCode(t, err, kv.ErrNotCommitted, "Wait on a watch whose transaction failed to commit")
	f.set(t, f.key("w"), []byte("x"))
	require.Error(t, w.Wait(ctx), "a failed watch must never fire later")
}

// testWatchRetryFailsWatchesCancelled: the watches of an attempt that
// OnError resets for a retry fail with transaction_cancelled, not with the
// error retried (Transaction::onError resets, and resetImpl calls
// cancelWatches, whose default error is transaction_cancelled:
// fdbclient/NativeAPI.actor.cpp and NativeAPI.actor.h).
func testWatchRetryFailsWatchesCancelled(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	w := tr.Watch(f.key("w"))
	t.Cleanup(w.Cancel)
	require.NoError(t, tr.Options().SetMaxRetryDelay(time.Millisecond))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "OnError of a retryable error")
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	err := w.Wait(ctx)
	require.NotErrorIs(t, err, context.DeadlineExceeded, "a watch of an attempt that was reset must fail at once")
	requireCode(t, err, kv.ErrTransactionCancelled, "Wait on a watch of an attempt that OnError reset")
}

// testWatchCancelFailsWait: a kv rule: a cancelled watch's Wait fails with
// transaction_cancelled (FDB's cancelled future fails with
// operation_cancelled: fdb_future_cancel, api-c.rst; fdbkv maps it).
func testWatchCancelFailsWait(t *testing.T, f *fixture) {
	w := f.watch(t, f.key("k"))
	w.Cancel()
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	requireCode(t, w.Wait(ctx), kv.ErrTransactionCancelled, "Wait on a cancelled watch")
	f.set(t, f.key("k"), []byte("x"))
	requireCode(t, w.Wait(ctx), kv.ErrTransactionCancelled, "Wait on a cancelled watch after its key changed")
}

// testWatchCancelReleasesPendingWait: the same for a Wait in progress
// (kv.Watch.Cancel).
func testWatchCancelReleasesPendingWait(t *testing.T, f *fixture) {
	w := f.watch(t, f.key("k"))
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- w.Wait(ctx) }()
	w.Cancel()
	requireCode(t, <-done, kv.ErrTransactionCancelled, "a Wait pending (or started) when the watch is cancelled")
}

// defaultWatchLimit is FDB's default limit on a database handle's
// outstanding watches (DEFAULT_MAX_OUTSTANDING_WATCHES,
// fdbclient/ClientKnobs.cpp).
const defaultWatchLimit = 10_000

// testTooManyWatches: a watch counts against the limit from the moment it
// has read its key, before its transaction commits, until it ends
// (cancelled included): RYWImpl::watch (fdbclient/ReadYourWrites.actor.cpp)
// calls Transaction::watch, which calls increaseWatchCounter and throws
// too_many_watches past the limit, and the watch actor calls
// decreaseWatchCounter however it ends (fdbclient/NativeAPI.actor.cpp). The
// error fails that watch only: RYWImpl::watch sets the promise the commit
// waits for before rethrowing it, so the commit succeeds.
func testTooManyWatches(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	watches := make([]kv.Watch, 0, defaultWatchLimit)
	for i := range defaultWatchLimit {
		watches = append(watches, tr.Watch(f.key(fmt.Sprintf("w%05d", i))))
	}
	t.Cleanup(func() {
		for _, w := range watches {
			w.Cancel()
		}
	})
	commit(t, tr, "a transaction with exactly the default limit of %d watches must commit", defaultWatchLimit)

	over := f.newTx(t)
	extra := over.Watch(f.key("extra"))
	t.Cleanup(extra.Cancel)
	f.requireFailsSoon(t, extra, kv.ErrTooManyWatches, "watch number 10,001, before its transaction commits")
	commit(t, over, "the commit of the transaction whose watch was over the limit")

	watches[0].Cancel()
	again := f.newTx(t)
	w := again.Watch(f.key("again"))
	t.Cleanup(w.Cancel)
	commit(t, again, "after a watch is cancelled, a new one must fit under the limit")
	f.requireNotFired(t, w, "the new watch must be registered and pending")
}

// A watch on a key its transaction wrote compares with that write: the
// transaction's own commit does not fire it (the staged dequeue's
// registration watches the marker it writes). RYWImpl::watch reads
// through the transaction's writes (fdbclient/ReadYourWrites.actor.cpp).
func testWatchComparesWithOwnWrite(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	tr.Set(f.key("k"), []byte("mine"))
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	commit(t, tr, "committing the write and its watch")
	f.requireNotFired(t, w, "the key still holds the watching transaction's own write")
	f.set(t, f.key("k"), []byte("theirs"))
	f.requireFired(t, w, "the watch must fire once another transaction changes the key")
}

// testWatchComparesWithOwnWriteAfterARead is ComparesWithOwnWrite in a
// transaction that has a read version (it read another key first): the
// watch still compares with the transaction's own write, the value its
// read of the key returned (RYWImpl::watch, fdbclient/
// ReadYourWrites.actor.cpp: watch->value is readWithConflictRange's
// result), not with the value at the read version.
func testWatchComparesWithOwnWriteAfterARead(t *testing.T, f *fixture) {
	f.seed(t, "other")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("other"))
	tr.Set(f.key("k"), []byte("mine"))
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	commit(t, tr, "committing the write and its watch")
	f.requireNotFired(t, w, "the key still holds the watching transaction's own write")
	f.set(t, f.key("k"), []byte("theirs"))
	f.requireFired(t, w, "the watch must fire once another transaction changes the key")
}

// testWatchComparesWithOwnClearRange: a watch on a key the transaction
// cleared with ClearRange compares with the key missing (its read of the
// key returned nothing: RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp),
// so the commit of the clear does not fire it.
func testWatchComparesWithOwnClearRange(t *testing.T, f *fixture) {
	f.seed(t, "k", "other")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("other"))
	tr.ClearRange(f.rng("j", "l"))
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	commit(t, tr, "committing the clear and its watch")
	f.requireNotFired(t, w, "the key is still missing, as the watching transaction left it")
	f.set(t, f.key("k"), []byte("back"))
	f.requireFired(t, w, "the watch must fire once another transaction sets the key")
}

// testWatchFiresOnInsertOfEmptyValue: a key that is missing and the same
// key with an empty value differ (the storage server compares
// Optional<Value>s: watchWaitForValueChange,
// fdbserver/storageserver.actor.cpp), so setting a watched missing key to an empty value
// fires the watch.
func testWatchFiresOnInsertOfEmptyValue(t *testing.T, f *fixture) {
	w := f.watch(t, f.key("k"))
	f.requireNotFired(t, w, "the key is still missing")
	f.set(t, f.key("k"), []byte{})
	f.requireFired(t, w, "a watch on a missing key must fire when the key is set to an empty value")
}

// testWatchFiresOnOwnChangeOfMissingKey is FiresOnOwnChange for a key
// that is missing: an atomic operation fires the watch whatever the value
// (triggerWatches with valueKnown false, in ReadYourWritesTransaction::
// atomicOp, fdbclient/ReadYourWrites.actor.cpp), and a Set to an empty
// value is a change (present differs from missing).
func testWatchFiresOnOwnChangeOfMissingKey(t *testing.T, f *fixture) {
	for name, write := range map[string]func(tr kv.Transaction, k []byte){
		"add":   func(tr kv.Transaction, k []byte) { tr.Add(k, le(1, 8)) },
		"max":   func(tr kv.Transaction, k []byte) { tr.Max(k, le(0, 8)) },
		"empty": func(tr kv.Transaction, k []byte) { tr.Set(k, []byte{}) },
	} {
		tr := f.newTx(t)
		w := tr.Watch(f.key(name))
		t.Cleanup(w.Cancel)
		f.requireNotFired(t, w, "the watching transaction has not written "+name+" yet")
		write(tr, f.key(name))
		f.requireFired(t, w, "the transaction's own write of the missing key "+name+" must fire its watch at once, before commit")
		tr.Cancel()
	}
}

// A versionstamped key elsewhere in the watching transaction does not
// change what the watch compares with: the value the watch read
// (RYWImpl::watch, fdbclient/ReadYourWrites.actor.cpp), so a change after
// the commit fires it.
func testWatchBesideVersionstampedKey(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	tr.SetVersionstampedKey(stampedKey(f.key("vs/"), ""), []byte("x"))
	commit(t, tr, "committing the watch beside a versionstamped key")
	f.requireNotFired(t, w, "nothing changed the key since the watch read it")
	tx := f.newTx(t)
	tx.Clear(f.key("k"))
	commit(t, tx, "clearing the watched key")
	f.requireFired(t, w, "the key changed after the watching transaction committed")
}

// A watch reads its key with a normal read: RYWImpl::watch
// (fdbclient/ReadYourWrites.actor.cpp) calls readWithConflictRange(ryw,
// GetValueReq(key), Snapshot::False). So a transaction that watches k and
// commits writes after another transaction changed k fails with
// not_committed, and its watch with it. (Verified on FoundationDB 7.3.79.)
func testWatchReadsItsKey(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	readVersion(t, tr) // the watch's read is then at this version
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	tr.Set(f.key("other"), []byte("x"))
	f.set(t, f.key("k"), []byte("changed"))
	requireCode(t, tr.Commit(), kv.ErrNotCommitted, "commit of a transaction whose watched key changed after its read version")
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	requireCode(t, w.Wait(ctx), kv.ErrNotCommitted, "the watch of the failed commit")
	f.requireAbsent(t, f.key("other"), "the conflicting transaction applied nothing")
}

// A read-only transaction's commit sends nothing (NativeAPI.actor.cpp
// commitMutations returns at once without write conflict ranges or
// mutations), so a watch's read never makes it fail; the watch, comparing
// with the value at the read version, fires at once.
func testWatchReadOnlyWatcherNeverConflicts(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	readVersion(t, tr)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	f.set(t, f.key("k"), []byte("changed"))
	commit(t, tr, "a read-only transaction with a watch always commits")
	f.requireFired(t, w, "the key changed after the value the watch read")
}

// api-common.rst.inc (transaction-watch-committed-blurb): "a watch will
// immediately report changes made by the transaction itself"; RYW's set,
// clear and atomicOp call triggerWatches, which fires a watch whose read
// value differs, or at once for an atomic operation (valueKnown false).
func testWatchFiresOnOwnChange(t *testing.T, f *fixture) {
	f.seed(t, "s", "c", "r", "a")
	for name, write := range map[string]func(tr kv.Transaction){
		"s": func(tr kv.Transaction) { tr.Set(f.key("s"), []byte("different")) },
		"c": func(tr kv.Transaction) { tr.Clear(f.key("c")) },
		"r": func(tr kv.Transaction) { tr.ClearRange(f.rng("q", "rr")) },
		"a": func(tr kv.Transaction) { tr.Add(f.key("a"), le(1, 8)) },
	} {
		tr := f.newTx(t)
		w := tr.Watch(f.key(name))
		t.Cleanup(w.Cancel)
		f.requireNotFired(t, w, "the watching transaction has not changed "+name+" yet")
		write(tr)
		f.requireFired(t, w, "the transaction's own change of "+name+" must fire its watch at once, before commit")
		tr.Cancel()
	}
}

// triggerWatches keeps a watch whose key the transaction sets to the value
// the watch read (fdbclient/ReadYourWrites.actor.cpp); after the commit it
// waits for another change.
func testWatchNotFiredByOwnWriteOfSameValue(t *testing.T, f *fixture) {
	f.seed(t, "k")
	tr := f.newTx(t)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	tr.Set(f.key("k"), []byte("v:k"))
	f.requireNotFired(t, w, "the transaction wrote the value the watch read")
	commit(t, tr)
	f.requireNotFired(t, w, "the committed value is the one the watch read")
	f.set(t, f.key("k"), []byte("changed"))
	f.requireFired(t, w, "another transaction changed the key")
}

// The watch's read can fail: a key whose value is a pending versionstamped
// value is unreadable (RYWIterator::kv throws accessed_unreadable), and the
// watch's future gets that error. The commit does not: unlike a read by
// Get, which the commit waits for and fails with, the watch's read is not
// among the reads the commit waits for; RYWImpl::watch adds a promise of
// its own, which it sets even when its read fails
// (fdbclient/ReadYourWrites.actor.cpp).
func testWatchFailsWithItsRead(t *testing.T, f *fixture) {
	tr := f.newTx(t)
	tr.SetVersionstampedValue(f.key("vv"), stampedValue("", ""))
	w := tr.Watch(f.key("vv"))
	t.Cleanup(w.Cancel)
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	requireCode(t, w.Wait(ctx), kv.ErrAccessedUnreadable, "a watch on a key whose versionstamped value the transaction set")
	commit(t, tr, "the watch's failed read does not fail the commit")
	v := f.get(t, f.key("vv"))
	require.Len(t, v, 10, "the versionstamped value was written")
}

// testWatchTransactionErrorsBeforeKeyErrors: Watch refuses a key in the
// system key space (key_outside_legal_range) and one over the size limit
// (key_too_large), but only after the transaction's own errors, in FDB's
// order: ThreadSafeTransaction::watch (fdbclient/ThreadSafeTransaction.cpp)
// reports a deferred error first, then ReadYourWritesTransaction::watch
// (fdbclient/ReadYourWrites.actor.cpp) used_during_commit, a cancellation
// (resetPromise), the key's range and the key's size.
func testWatchTransactionErrorsBeforeKeyErrors(t *testing.T, f *fixture) {
	system := []byte("\xff\x00watched")
	oversized := f.key(string(bytes.Repeat([]byte{'k'}, kv.MaxKeySize+1-len(f.prefix))))
	watchFails := func(tr kv.Transaction, key []byte, want kv.Error, what string) {
		t.Helper()
		w := tr.Watch(key)
		t.Cleanup(w.Cancel)
		f.requireFailsSoon(t, w, want, what)
	}

	tr := f.newTx(t)
	watchFails(tr, system, kv.ErrKeyOutsideLegalRange, "a watch on a key in the system key space")
	watchFails(tr, []byte("\xff\xff"), kv.ErrKeyOutsideLegalRange, "a watch on a key in the special key space")
	watchFails(tr, oversized, kv.ErrKeyTooLarge, "a watch on a key over the size limit")
	tr.Cancel()

	tr = f.newTx(t)
	tr.Cancel()
	watchFails(tr, system, kv.ErrTransactionCancelled, "a watch on a system key in a cancelled transaction")
	watchFails(tr, oversized, kv.ErrTransactionCancelled, "a watch on an oversized key in a cancelled transaction")

	tr = f.newTx(t)
	tr.Set(f.key("v"), make([]byte, kv.MaxValueSize+1))
	watchFails(tr, system, kv.ErrValueTooLarge, "a watch on a system key after a write's deferred error")
	tr.Cancel()

	tr = f.newTx(t)
	commit(t, tr, "an empty commit")
	watchFails(tr, system, kv.ErrUsedDuringCommit, "a watch on a system key after the commit")
}

// testWatchFiresAtVersionstampedKeyWritePoint: SetVersionstampedKey fires
// the transaction's watch on the key where FDB's write map records the
// write (P: the argument with the read version's stamp placed, see
// vsPoints), as any atomic operation on a watched key does:
// ReadYourWritesTransaction::atomicOp calls triggerWatches on it with
// valueKnown false (fdbclient/ReadYourWrites.actor.cpp).
func testWatchFiresAtVersionstampedKeyWritePoint(t *testing.T, f *fixture) {
	head := f.key("vs/")
	tr := f.newTx(t)
	_, p := vsPoints(head, "/tail", readVersion(t, tr))
	w := tr.Watch(p)
	t.Cleanup(w.Cancel)
	f.requireNotFired(t, w, "the transaction has written nothing yet")
	tr.SetVersionstampedKey(stampedKey(head, "/tail"), []byte("value"))
	f.requireFired(t, w, "the versionstamped key's write at the watched key must fire the watch at once, before commit")
	tr.Cancel()
}

// testWatchNotFiredByOwnClearRangeEndingAtItsKey: a ClearRange fires the
// transaction's watches on the keys in the range, which ends before its
// end key: triggerWatches visits the watched keys from range.begin while
// key < range.end (fdbclient/ReadYourWrites.actor.cpp). A watch on the end
// key is not fired by the clear, nor by its commit.
func testWatchNotFiredByOwnClearRangeEndingAtItsKey(t *testing.T, f *fixture) {
	f.seed(t, "j", "k")
	tr := f.newTx(t)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	tr.ClearRange(f.rng("j", "k"))
	f.requireNotFired(t, w, "a ClearRange ending at the watched key leaves it")
	commit(t, tr, "committing the clear and its watch")
	f.requireNotFired(t, w, "the watched key still holds the value the watch read")
	f.set(t, f.key("k"), []byte("changed"))
	f.requireFired(t, w, "the watch must fire once another transaction changes the key")
}
