package kvtest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// mvccWindow is how long after its read version a transaction may read and
// commit (MAX_READ_TRANSACTION_LIFE_VERSIONS and
// MAX_WRITE_TRANSACTION_LIFE_VERSIONS, 5 s of versions:
// fdbclient/ServerKnobs.cpp).
const mvccWindow = 5 * time.Second

// pastWindow is how long the tests wait for a read version to be too old.
// A commit is refused exactly at mvccWindow (the commit proxy compares
// versions: fdbserver/CommitProxyServer.actor.cpp), but a storage server
// refuses reads only below its oldest version, which follows its durable
// version (updateStorage, fdbserver/storageserver.actor.cpp), committed
// every STORAGE_COMMIT_INTERVAL (0.5 s, fdbclient/ServerKnobs.cpp) and
// later under load. The margin keeps the checks steady on a real cluster;
// an embedded clock just moves.
const pastWindow = mvccWindow + 3*time.Second

// timeTests cover transaction_too_old: the five-second window after the read
// version.
func timeTests() []conformanceTest {
	return []conformanceTest{
		{"ReadsWithinWindowSucceed", testReadsWithinWindowSucceed},
		{"ReadAfterWindowTooOld", testReadAfterWindowTooOld},
		{"SnapshotReadAfterWindowTooOld", testSnapshotReadAfterWindowTooOld},
		{"CommitAfterWindowTooOld", testCommitAfterWindowTooOld},
		{"CommitWithoutReadConflictsAfterWindowTooOld", testCommitWithoutReadConflictsAfterWindow},
		{"ReadVersionObtainedAtFirstRead", testReadVersionObtainedAtFirstRead},
		{"TooOldIsRetriedByTransact", testTooOldIsRetriedByTransact},
	}
}

// testReadsWithinWindowSucceed: reads and a commit 4 s after the read
// version succeed (the 5 s window: MAX_READ_TRANSACTION_LIFE_VERSIONS and
// MAX_WRITE_TRANSACTION_LIFE_VERSIONS, fdbclient/ServerKnobs.cpp).
func testReadsWithinWindowSucceed(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	readVersion(t, tr)
	f.h.AdvanceTime(mvccWindow - time.Second)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "a read 4 s after the read version must succeed")
	tr.Set(f.key("b"), []byte("x"))
	commit(t, tr, "a commit 4 s after the read version must succeed")
}

// testReadAfterWindowTooOld: past the window, a storage server refuses
// the read with transaction_too_old (fdbserver/storageserver.actor.cpp,
// waitForVersion).
func testReadAfterWindowTooOld(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	readVersion(t, tr)
	f.h.AdvanceTime(pastWindow)
	_, err := tr.Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrTransactionTooOld, "Get 8 s after the read version")
	_, err = tr.GetRange(f.all(), kv.RangeOptions{}).GetSlice()
	requireCode(t, err, kv.ErrTransactionTooOld, "GetRange 8 s after the read version")
}

// testSnapshotReadAfterWindowTooOld: snapshot reads too
// (fdbserver/storageserver.actor.cpp, waitForVersion).
func testSnapshotReadAfterWindowTooOld(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	readVersion(t, tr)
	f.h.AdvanceTime(pastWindow)
	_, err := tr.Snapshot().Get(f.key("a")).Get()
	requireCode(t, err, kv.ErrTransactionTooOld, "snapshot Get 8 s after the read version")
}

// testCommitAfterWindowTooOld: past the window a commit with read
// conflict ranges fails with transaction_too_old (ConflictBatch::
// addTransaction, fdbserver/SkipList.cpp), which OnError retries
// (Transaction::onError, fdbclient/NativeAPI.actor.cpp).
func testCommitAfterWindowTooOld(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	mustGet(t, tr, f.key("a"))
	tr.Set(f.key("b"), []byte("x"))
	f.h.AdvanceTime(pastWindow)
	err := tr.Commit()
	requireCode(t, err, kv.ErrTransactionTooOld, "commit 8 s after the read version")
	f.requireAbsent(t, f.key("b"), "a commit that failed with transaction_too_old must apply nothing")
	require.NoError(t, tr.OnError(err), "OnError must retry transaction_too_old")
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "after OnError the transaction must read at a fresh read version")
	tr.Set(f.key("b"), []byte("x"))
	commit(t, tr, "the retried transaction must commit")
}

// testCommitWithoutReadConflictsAfterWindowTooOld: a commit whose reads
// were all snapshot reads is too old past the window as well. The
// resolver checks the read version only of a commit with read conflict
// ranges (ConflictBatch::addTransaction, fdbserver/SkipList.cpp), but the
// client gives one to every commit whose write conflict ranges meet none
// of its read conflict ranges: a read and a write conflict range on a
// random \xff/SC/ key (Transaction::commitMutations and
// makeSelfConflicting, fdbclient/NativeAPI.actor.cpp). A blind write, which
// gets its read version at commit, commits whenever it is made.
func testCommitWithoutReadConflictsAfterWindow(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	require.Equal(t, []byte("v:a"), mustGet(t, tr.Snapshot(), f.key("a")))
	tr.Set(f.key("b"), []byte("x"))
	f.h.AdvanceTime(pastWindow)
	err := tr.Commit()
	requireCode(t, err, kv.ErrTransactionTooOld, "a commit whose reads were snapshot reads, 8 s after its read version")
	f.requireAbsent(t, f.key("b"), "a commit that failed with transaction_too_old must apply nothing")

	// Only write conflict ranges: the same.
	tr = f.newTx(t)
	readVersion(t, tr)
	require.NoError(t, tr.AddWriteConflictKey(f.key("c")))
	f.h.AdvanceTime(pastWindow)
	requireCode(t, tr.Commit(), kv.ErrTransactionTooOld, "a commit of a write conflict range alone, 8 s after its read version")

	// A blind write made after as long a wait commits.
	tr = f.newTx(t)
	f.h.AdvanceTime(pastWindow)
	tr.Set(f.key("b"), []byte("y"))
	commit(t, tr, "a blind write commits at a read version obtained at commit")
	require.Equal(t, []byte("y"), f.get(t, f.key("b")), "its write applied")
}

// testReadVersionObtainedAtFirstRead: the read version is requested at
// the first read, not at creation (Transaction::getReadVersion starts it
// lazily: fdbclient/include/fdbclient/NativeAPI.actor.h).
func testReadVersionObtainedAtFirstRead(t *testing.T, f *fixture) {
	f.seed(t, "a")
	tr := f.newTx(t)
	f.h.AdvanceTime(pastWindow)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "the window starts at the read version, obtained at the first read, not at CreateTransaction")
	tr.Set(f.key("b"), []byte("x"))
	commit(t, tr)
}

// testTooOldIsRetriedByTransact: the loop retries transaction_too_old
// (Transaction::onError, fdbclient/NativeAPI.actor.cpp).
func testTooOldIsRetriedByTransact(t *testing.T, f *fixture) {
	f.seed(t, "a")
	runs, err := f.transact(func(tr kv.Transaction, run int) error {
		if _, err := tr.Get(f.key("a")).Get(); err != nil {
			return err
		}
		if run == 1 {
			f.h.AdvanceTime(pastWindow)
		}
		tr.Set(f.key("b"), []byte("x"))
		return nil
	})
	require.NoError(t, err, "Transact must retry transaction_too_old")
	require.Equal(t, 2, runs, "the function must have run twice: once too old, once committed")
	f.requireValue(t, f.key("b"), []byte("x"), "the retried run's write must be committed")
}
