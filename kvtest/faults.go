package kvtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// faultTests cover commit failures injected through Harness.Faults: what
// commit_unknown_result leaves behind, and how the retry loop treats each
// error code a commit can return. They are skipped on backends without
// fault injection.
func faultTests() []conformanceTest {
	tests := []conformanceTest{
		{"CommitUnknownResultApplied", testCommitUnknownResultApplied},
		{"CommitUnknownResultNotApplied", testCommitUnknownResultNotApplied},
		{"FaultAffectsOnlyNextCommit", testFaultAffectsOnlyNextCommit},
		{"TransactRetriesInjectedConflictAndCommitsOnce", testTransactRetriesInjectedConflictAndCommitsOnce},
		{"TransactUnderCommitUnknownResultMayApplyTwice", testTransactUnderCommitUnknownResultMayApplyTwice},
		{"ClusterVersionChangedApplied", testClusterVersionChangedApplied},
		{"ClusterVersionChangedNotApplied", testClusterVersionChangedNotApplied},
		{"ClusterVersionChangedStartsAfresh", testClusterVersionChangedStartsAfresh},
	}
	tests = append(tests, readFaultTests()...)
	for _, e := range specErrors {
		tests = append(tests, conformanceTest{
			fmt.Sprintf("InjectedCommitError/%s_%d", e.name, e.sentinel.Code),
			func(t *testing.T, f *fixture) { testInjectedCommitError(t, f, e.name, e.sentinel) },
		})
	}
	return tests
}

// faults returns the harness's fault injector, or skips the test when the
// backend has none.
func (f *fixture) faults(t *testing.T) FaultInjector {
	t.Helper()
	fi := f.h.Faults()
	if fi == nil {
		t.Skip("capability missing: the backend cannot inject commit faults (Harness.Faults returned nil)")
	}
	return fi
}

// testCommitUnknownResultApplied: commit_unknown_result may mean the
// commit applied (fdb_error_predicate MAYBE_COMMITTED, bindings/c/fdb_c.cpp).
func testCommitUnknownResultApplied(t *testing.T, f *fixture) {
	fi := f.faults(t)
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	fi.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err := tr.Commit()
	requireCode(t, err, kv.ErrCommitUnknownResult, "the commit with an injected commit_unknown_result")
	require.True(t, kv.MaybeCommitted(err), "kv.MaybeCommitted must be true for commit_unknown_result")
	f.requireValue(t, f.key("a"), []byte("x"), "commit_unknown_result with applied=true: the write must be visible afterwards")
}

// testCommitUnknownResultNotApplied: or that it did not.
func testCommitUnknownResultNotApplied(t *testing.T, f *fixture) {
	fi := f.faults(t)
	tr := f.newTx(t)
	tr.Set(f.key("a"), []byte("x"))
	fi.FailNextCommit(kv.ErrCommitUnknownResult, false)
	requireCode(t, tr.Commit(), kv.ErrCommitUnknownResult, "the commit with an injected commit_unknown_result")
	f.requireAbsent(t, f.key("a"), "commit_unknown_result with applied=false: the write must not be visible")
}

// testFaultAffectsOnlyNextCommit: a harness rule (FaultInjector).
func testFaultAffectsOnlyNextCommit(t *testing.T, f *fixture) {
	fi := f.faults(t)
	fi.FailNextCommit(kv.ErrNotCommitted, false)
	first := f.newTx(t)
	first.Set(f.key("a"), []byte("1"))
	requireCode(t, first.Commit(), kv.ErrNotCommitted, "the first commit after FailNextCommit")
	second := f.newTx(t)
	second.Set(f.key("b"), []byte("2"))
	commit(t, second, "only the next commit may fail")
	f.requireAbsent(t, f.key("a"), "the failed commit must not apply")
	f.requireValue(t, f.key("b"), []byte("2"), "the following commit must apply")
}

// countRuns runs an Add of 1 to key through db.Transact and returns how
// often the function ran and Transact's error.
func (f *fixture) countRuns(key []byte) (int, error) {
	return f.transact(func(tr kv.Transaction, _ int) error {
		tr.Add(key, le(1, 8))
		return nil
	})
}

// testTransactRetriesInjectedConflictAndCommitsOnce: not_committed is
// retried and nothing of the failed run applied (Transaction::onError,
// fdbclient/NativeAPI.actor.cpp).
func testTransactRetriesInjectedConflictAndCommitsOnce(t *testing.T, f *fixture) {
	fi := f.faults(t)
	key := f.key("counter")
	fi.FailNextCommit(kv.ErrNotCommitted, false)
	runs, err := f.countRuns(key)
	require.NoError(t, err, "Transact must retry an injected not_committed")
	require.Equal(t, 2, runs, "the function must run twice")
	require.Equal(t, le(1, 8), f.get(t, key), "the increment must be applied exactly once")
}

// testTransactUnderCommitUnknownResultMayApplyTwice: the loop retries
// commit_unknown_result (Transaction::onError, fdbclient/NativeAPI.actor.cpp)
// even when the commit applied.
func testTransactUnderCommitUnknownResultMayApplyTwice(t *testing.T, f *fixture) {
	fi := f.faults(t)
	key := f.key("counter")
	fi.FailNextCommit(kv.ErrCommitUnknownResult, true)
	runs, err := f.countRuns(key)
	require.NoError(t, err, "Transact must retry commit_unknown_result")
	require.Equal(t, 2, runs, "the function must run twice")
	require.Equal(t, le(2, 8), f.get(t, key), "a non-idempotent function retried after an applied commit_unknown_result takes effect twice (this is the hazard layers must handle)")
}

// testInjectedCommitError: the loop retries a commit's error exactly when
// fdb_error_predicate(RETRYABLE) holds (bindings/c/fdb_c.cpp).
func testInjectedCommitError(t *testing.T, f *fixture, name string, sentinel kv.Error) {
	fi := f.faults(t)
	key := f.key("counter")

	tr := f.newTx(t)
	tr.Set(f.key("direct"), []byte("x"))
	fi.FailNextCommit(sentinel, false)
	requireCode(t, tr.Commit(), sentinel, "a commit with an injected "+name)
	f.requireAbsent(t, f.key("direct"), "a commit failed with "+name+" and applied=false must apply nothing")

	fi.FailNextCommit(sentinel, false)
	runs, err := f.countRuns(key)
	if retryableBySpec[sentinel.Code] {
		require.NoError(t, err, "Transact must retry the retryable %s", name)
		require.Equal(t, 2, runs, "one failed run and one committed run")
		require.Equal(t, le(1, 8), f.get(t, key), "the increment must be applied once")
		return
	}
	requireCode(t, err, sentinel, "Transact after an injected non-retryable "+name)
	require.Equal(t, 1, runs, "Transact must not retry the non-retryable %s", name)
	f.requireAbsent(t, key, "nothing may be applied")
}

// cluster_version_changed (1039) is in fdb_error_predicate's MAYBE_COMMITTED
// set (bindings/c/fdb_c.cpp): the commit may have been applied, and the
// standard loop retries it. A loop that runs a non-idempotent function
// again after an applied 1039 applies it twice, exactly as under 1021.
func testClusterVersionChangedApplied(t *testing.T, f *fixture) {
	fi := f.faults(t)
	key := f.key("counter")
	tr := f.newTx(t)
	tr.Set(f.key("direct"), []byte("x"))
	fi.FailNextCommit(kv.ErrClusterVersionChanged, true)
	err := tr.Commit()
	requireCode(t, err, kv.ErrClusterVersionChanged, "the commit with an injected cluster_version_changed")
	require.True(t, kv.MaybeCommitted(err), "kv.MaybeCommitted must be true for cluster_version_changed")
	f.requireValue(t, f.key("direct"), []byte("x"), "cluster_version_changed with applied=true: the write must be visible")

	fi.FailNextCommit(kv.ErrClusterVersionChanged, true)
	runs, err := f.countRuns(key)
	require.NoError(t, err, "Transact must retry cluster_version_changed")
	require.Equal(t, 2, runs, "the function must run twice")
	require.Equal(t, le(2, 8), f.get(t, key), "the retried non-idempotent function took effect twice")
}

// The other outcome of 1039: nothing was applied, the loop retries once and
// the increment is applied exactly once, also under retry limit 0: only
// FDB's multi-version client reports 1039 (MultiVersionAssignmentVars.h),
// and its onError retries it on a new transaction without consulting the
// retry limit (MultiVersionTransaction::onError,
// fdbclient/MultiVersionTransaction.actor.cpp).
func testClusterVersionChangedNotApplied(t *testing.T, f *fixture) {
	fi := f.faults(t)
	key := f.key("counter")
	fi.FailNextCommit(kv.ErrClusterVersionChanged, false)
	runs, err := f.countRuns(key)
	require.NoError(t, err, "Transact must retry cluster_version_changed")
	require.Equal(t, 2, runs, "one failed run and one committed run")
	require.Equal(t, le(1, 8), f.get(t, key), "the increment must be applied once")

	fi.FailNextCommit(kv.ErrClusterVersionChanged, false)
	runs, err = f.transact(func(tr kv.Transaction, run int) error {
		if err := tr.Options().SetRetryLimit(0); err != nil {
			return err
		}
		tr.Add(key, le(1, 8))
		return nil
	})
	require.NoError(t, err, "Transact with retry limit 0 must retry cluster_version_changed all the same")
	require.Equal(t, 2, runs, "one failed run and one committed run")
	require.Equal(t, le(2, 8), f.get(t, key), "applied=false: the retry's increment is applied once")
}

// testClusterVersionChangedStartsAfresh: FDB's multi-version client
// answers OnError(cluster_version_changed) with a new transaction
// (MultiVersionTransaction::onError calls updateTransaction,
// fdbclient/MultiVersionTransaction.actor.cpp), to which it re-applies
// the persistent options: its retry count starts at 0 (the new
// ReadYourWritesTransaction's retries) and its timeout counts from the
// retry (its creationTime; ReadYourWritesTransaction::resetTimeout,
// fdbclient/ReadYourWrites.actor.cpp). Skipped without fault injection: a
// client that bypasses the multi-version client never reports 1039, and
// its OnError (Transaction::onError, fdbclient/NativeAPI.actor.cpp) returns
// it.
func testClusterVersionChangedStartsAfresh(t *testing.T, f *fixture) {
	f.faults(t)
	f.seed(t, "a")
	tr := f.newTx(t)
	require.NoError(t, tr.Options().SetRetryLimit(1))
	require.NoError(t, tr.Options().SetTimeout(time.Second))
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "the one retry the limit allows")
	f.h.AdvanceTime(600 * time.Millisecond)
	require.NoError(t, tr.OnError(kv.ErrClusterVersionChanged), "cluster_version_changed past the retry limit")
	f.h.AdvanceTime(600 * time.Millisecond)
	require.Equal(t, []byte("v:a"), mustGet(t, tr, f.key("a")), "a read 1.2 s after the creation, 0.6 s after the 1039 retry: the 1 s timeout counts from the retry")
	require.NoError(t, tr.OnError(kv.ErrNotCommitted), "after the 1039 retry, the retry count starts at 0: one retry is left")
	requireCode(t, tr.OnError(kv.ErrNotCommitted), kv.ErrNotCommitted, "the retry limit 1 still holds")
}
