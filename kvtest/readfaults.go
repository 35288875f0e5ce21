package kvtest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// readFaultTests cover reads and read version requests that fail, injected
// through a ReadFaultInjector: what the failure does to the transaction's
// other operations and its commit, and how the retry loop treats it. A
// client of FoundationDB sees these errors from reads: transaction_too_old,
// future_version and process_behind from storage servers (getValue and
// getRange, fdbclient/NativeAPI.actor.cpp, retry only wrong_shard_server
// and all_alternatives_failed internally), grv_proxy_memory_limit_exceeded
// and database_locked from the read version request (GrvProxyServer.actor.cpp,
// extractReadVersion); all are retryable (fdb_error_predicate,
// bindings/c/fdb_c.cpp). They are skipped on backends without the
// capability.
func readFaultTests() []conformanceTest {
	return []conformanceTest{
		{"ReadErrorFailsTheCommit", testReadErrorFailsTheCommit},
		{"SnapshotReadErrorFailsTheCommit", testSnapshotReadErrorFailsTheCommit},
		{"RangeReadErrorFailsTheCommit", testRangeReadErrorFailsTheCommit},
		{"ReadVersionErrorIsKept", testReadVersionErrorIsKept},
		{"BlindWriteCommitReadVersionError", testBlindWriteCommitReadVersionError},
		{"WatchReadErrorFailsOnlyTheWatch", testWatchReadErrorFailsOnlyTheWatch},
		{"ReadOnlyCommitFailsWithAFailedRead", testReadOnlyCommitFailsWithAFailedRead},
		{"WatchReadVersionErrorFailsOnlyTheWatch", testWatchReadVersionErrorFailsOnlyTheWatch},
		{"TransactRetriesReadErrors", testTransactRetriesReadErrors},
		{"CommitFailsWithTheFirstFailedRead", testCommitFailsWithTheFirstFailedRead},
	}
}

// readFaults returns the harness's ReadFaultInjector, or skips the test.
func (f *fixture) readFaults(t *testing.T) ReadFaultInjector {
	t.Helper()
	rf, ok := f.faults(t).(ReadFaultInjector)
	if !ok {
		t.Skip("capability missing: the backend cannot fail reads (FaultInjector is not a kvtest.ReadFaultInjector)")
	}
	return rf
}

// requireReadErrorFailsCommit requires the commit of tr, which writes
// "w" after read failed with want, to fail with want and apply nothing,
// and OnError to retry it. FDB's commit waits for every read the
// transaction issued, snapshot reads included, and fails with a failed
// read's error (RYWImpl::commit waits on ryw->reading, an AndFuture;
// ReadYourWritesTransaction::get and getRange add each read to it:
// fdbclient/ReadYourWrites.actor.cpp).
func (f *fixture) requireReadErrorFailsCommit(t *testing.T, tr kv.Transaction, read error, want kv.Error, what string) {
	t.Helper()
	requireCode(t, read, want, what)
	tr.Set(f.key("w"), []byte("x"))
	requireCode(t, tr.Commit(), want, "the commit of a transaction whose "+what+" failed")
	f.requireAbsent(t, f.key("w"), "the commit after a failed read must apply nothing")
	require.NoError(t, tr.OnError(want), "OnError must retry a failed read's (retryable) error")
	tr.Set(f.key("w"), []byte("x"))
	commit(t, tr, "the retry commits")
}

func testReadErrorFailsTheCommit(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	tr := f.newTx(t)
	rf.FailNextRead(kv.ErrFutureVersion)
	_, err := tr.Get(f.key("k")).Get()
	f.requireReadErrorFailsCommit(t, tr, err, kv.ErrFutureVersion, "point read")
}

func testSnapshotReadErrorFailsTheCommit(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	tr := f.newTx(t)
	rf.FailNextRead(kv.ErrProcessBehind)
	_, err := tr.Snapshot().Get(f.key("k")).Get()
	f.requireReadErrorFailsCommit(t, tr, err, kv.ErrProcessBehind, "snapshot read")
}

func testRangeReadErrorFailsTheCommit(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	rf.FailNextRead(kv.ErrTransactionTooOld)
	_, err := tr.GetRange(f.all(), kv.RangeOptions{}).GetSlice()
	f.requireReadErrorFailsCommit(t, tr, err, kv.ErrTransactionTooOld, "range read")
}

// A failed read version request fails every later read of the transaction
// and its GetReadVersion with the same error, until OnError resets it: FDB's
// transaction keeps its failed read version future
// (TransactionState::startTransaction, fdbclient/NativeAPI.actor.cpp).
func testReadVersionErrorIsKept(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	tr := f.newTx(t)
	rf.FailNextReadVersion(kv.ErrGRVProxyMemoryLimit)
	_, err := tr.GetReadVersion().Get()
	requireCode(t, err, kv.ErrGRVProxyMemoryLimit, "GetReadVersion after a failed read version request")
	_, err = tr.GetReadVersion().Get()
	requireCode(t, err, kv.ErrGRVProxyMemoryLimit, "GetReadVersion again: the failure is kept")
	_, err = tr.Get(f.key("k")).Get()
	f.requireReadErrorFailsCommit(t, tr, err, kv.ErrGRVProxyMemoryLimit, "read after a failed read version request")
}

// A transaction that writes without having read obtains a read version
// when it commits (tryCommit waits for startTransaction,
// fdbclient/NativeAPI.actor.cpp); if that request fails, so does the
// commit, having sent nothing.
func testBlindWriteCommitReadVersionError(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	tr := f.newTx(t)
	tr.Set(f.key("w"), []byte("x"))
	rf.FailNextReadVersion(kv.ErrDatabaseLocked)
	requireCode(t, tr.Commit(), kv.ErrDatabaseLocked, "the commit of a blind write whose read version request failed")
	f.requireAbsent(t, f.key("w"), "the commit must apply nothing")
}

// A watch whose read fails fails with the read's error; the commit does
// not (RYWImpl::watch gives the commit a promise of its own, which it sets
// even when the read fails: fdbclient/ReadYourWrites.actor.cpp).
func testWatchReadErrorFailsOnlyTheWatch(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	tr := f.newTx(t)
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err, "GetReadVersion")
	rf.FailNextRead(kv.ErrFutureVersion)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	requireCode(t, w.Wait(ctx), kv.ErrFutureVersion, "the watch whose read failed")
	tr.Set(f.key("w"), []byte("x"))
	commit(t, tr, "the watch's failed read must not fail the commit")
	f.requireValue(t, f.key("w"), []byte("x"), "the commit applied")
}

// Transact retries a failed read like any retryable error, and the
// function's effect is applied once (process_behind and
// grv_proxy_memory_limit_exceeded: Transaction::onError,
// fdbclient/NativeAPI.actor.cpp).
func testTransactRetriesReadErrors(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	key := f.key("counter")
	for _, fail := range []func(){
		func() { rf.FailNextRead(kv.ErrProcessBehind) },
		func() { rf.FailNextReadVersion(kv.ErrGRVProxyMemoryLimit) },
	} {
		fail()
		runs, err := f.transact(func(tr kv.Transaction, _ int) error {
			v, err := tr.Get(key).Get()
			if err != nil {
				return err
			}
			tr.Set(key, append(v, 'x'))
			return nil
		})
		require.NoError(t, err, "Transact must retry a failed read")
		require.Equal(t, 2, runs, "one failed run and one committed run")
	}
	require.Equal(t, []byte("xx"), f.get(t, key), "each function took effect once")
}

// A read-only transaction's commit fails too with the error of a read that
// failed, whether the read itself or its read version request failed:
// RYWImpl::commit waits on reading, to which ReadYourWritesTransaction::get
// adds every read, before anything else (fdbclient/ReadYourWrites.actor.cpp),
// and only then does NativeAPI's commitMutations return at once for a
// transaction with no mutations and no write conflict ranges
// (fdbclient/NativeAPI.actor.cpp).
func testReadOnlyCommitFailsWithAFailedRead(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	for _, c := range []struct {
		what string
		fail func()
		want kv.Error
	}{
		{"point read", func() { rf.FailNextRead(kv.ErrFutureVersion) }, kv.ErrFutureVersion},
		{"read's read version request", func() { rf.FailNextReadVersion(kv.ErrGRVProxyMemoryLimit) }, kv.ErrGRVProxyMemoryLimit},
	} {
		tr := f.newTx(t)
		c.fail()
		_, err := tr.Get(f.key("k")).Get()
		requireCode(t, err, c.want, c.what)
		requireCode(t, tr.Commit(), c.want, "the read-only commit of a transaction whose "+c.what+" failed")
	}
}

// A watch whose read version request fails fails with its error; the
// commit of a transaction that wrote nothing still succeeds: RYWImpl::watch
// gives the commit a promise of its own, which it sets when the read fails
// (fdbclient/ReadYourWrites.actor.cpp), and commitMutations returns at once
// for a transaction with nothing to send, without waiting for its read
// version (fdbclient/NativeAPI.actor.cpp).
func testWatchReadVersionErrorFailsOnlyTheWatch(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "k")
	tr := f.newTx(t)
	rf.FailNextReadVersion(kv.ErrDatabaseLocked)
	w := tr.Watch(f.key("k"))
	t.Cleanup(w.Cancel)
	ctx, cancel := context.WithTimeout(f.ctx, firedWait)
	defer cancel()
	requireCode(t, w.Wait(ctx), kv.ErrDatabaseLocked, "the watch whose read version request failed")
	commit(t, tr, "the watch's failed read version request must not fail a read-only commit")
}

// testCommitFailsWithTheFirstFailedRead: of two failed reads, the commit
// fails with the first one's error. RYWImpl::commit waits on ryw->reading
// (fdbclient/ReadYourWrites.actor.cpp), an AndFuture that keeps failed
// futures in the order the reads were issued and whose getFuture is a
// waitForAll of them (flow/include/flow/genericactors.actor.h), which
// throws the first one's error.
func testCommitFailsWithTheFirstFailedRead(t *testing.T, f *fixture) {
	rf := f.readFaults(t)
	f.seed(t, "a", "b")
	tr := f.newTx(t)
	rf.FailNextRead(kv.ErrFutureVersion)
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrFutureVersion, "the first read")
	rf.FailNextRead(kv.ErrProcessBehind)
	_, err = tr.Get(f.key("b")).Get()
	requireCode(t, err, kv.ErrProcessBehind, "the second read")
	tr.Set(f.key("w"), []byte("x"))
	requireCode(t, tr.Commit(), kv.ErrFutureVersion, "the commit of a transaction whose two reads failed")
	f.requireAbsent(t, f.key("w"), "the failed commit applies nothing")
}
