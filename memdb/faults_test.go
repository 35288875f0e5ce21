package memdb_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// commitOnce commits a write of key and returns Commit's error.
func commitOnce(t *testing.T, db *memdb.DB, key string) error {
	t.Helper()
	tr := newTx(t, db)
	tr.Set([]byte(key), []byte("v"))
	return tr.Commit()
}

func TestInjectedFaults(t *testing.T) {
	for _, c := range []struct {
		name    string
		faults  memdb.Faults
		want    error
		applied bool
		stat    func(memdb.Stats) int64
	}{
		{"not committed", memdb.Faults{NotCommitted: 1}, kv.ErrNotCommitted, false, func(s memdb.Stats) int64 { return s.InjectedNotCommitted }},
		{"unknown applied", memdb.Faults{UnknownApplied: 1}, kv.ErrCommitUnknownResult, true, func(s memdb.Stats) int64 { return s.InjectedUnknownApplied }},
		{"unknown not applied", memdb.Faults{UnknownNotApplied: 1}, kv.ErrCommitUnknownResult, false, func(s memdb.Stats) int64 { return s.InjectedUnknownNotApplied }},
		{"cluster version changed applied", memdb.Faults{VersionChangedApplied: 1}, kv.ErrClusterVersionChanged, true, func(s memdb.Stats) int64 { return s.InjectedUnknownApplied }},
		{"cluster version changed not applied", memdb.Faults{VersionChangedNotApplied: 1}, kv.ErrClusterVersionChanged, false, func(s memdb.Stats) int64 { return s.InjectedUnknownNotApplied }},
		{"too old", memdb.Faults{TooOld: 1}, kv.ErrTransactionTooOld, false, func(s memdb.Stats) int64 { return s.InjectedTooOld }},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t, memdb.WithFaults(c.faults))
			err := commitOnce(t, db, "k")
			require.ErrorIs(t, err, c.want)
			require.True(t, kv.IsRetryable(err))
			_, ok := mustGet(t, db, "k")
			require.Equal(t, c.applied, ok, "applied?")
			require.Equal(t, int64(1), c.stat(db.Stats()))
			require.Equal(t, int64(0), db.Stats().Conflicts, "injected failures are not counted as conflicts")

			tr := newTx(t, db)
			get(t, tr, "k")
			require.NoError(t, tr.Commit(), "read-only commits never fail")

			db.SetFaults(memdb.Faults{})
			require.NoError(t, commitOnce(t, db, "k2"), "SetFaults turns injection off at run time")
		})
	}
}

func TestFaultsAreDeterministicFromTheSeed(t *testing.T) {
	run := func(seed int64) []string {
		db, _ := newDB(t, memdb.WithSeed(seed), memdb.WithFaults(memdb.Faults{
			NotCommitted: 0.2, UnknownApplied: 0.2, UnknownNotApplied: 0.1, TooOld: 0.1,
		}))
		var out []string
		for range 100 {
			err := commitOnce(t, db, "k")
			out = append(out, func() string {
				if err == nil {
					return "ok"
				}
				return err.Error()
			}())
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	require.Equal(t, a, b, "the same seed injects the same faults")
	require.NotEqual(t, a, c, "another seed injects others")
	require.Contains(t, a, "ok")
	require.Contains(t, a, kv.ErrCommitUnknownResult.Error())
}

func TestFailNextCommit(t *testing.T) {
	db, _ := newDB(t)
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err := commitOnce(t, db, "applied")
	require.ErrorIs(t, err, kv.ErrCommitUnknownResult)
	require.True(t, kv.MaybeCommitted(err))
	_, ok := mustGet(t, db, "applied")
	require.True(t, ok, "applied=true applies the writes")

	db.FailNextCommit(kv.ErrCommitUnknownResult, false)
	require.ErrorIs(t, commitOnce(t, db, "lost"), kv.ErrCommitUnknownResult)
	_, ok = mustGet(t, db, "lost")
	require.False(t, ok, "applied=false applies nothing")

	require.NoError(t, commitOnce(t, db, "next"), "the failure is one-shot")
	require.Equal(t, int64(2), db.Stats().InjectedForced)
}

func TestUnknownResultRetriedByTransactMayApplyTwice(t *testing.T) {
	// The hazard the layers must handle: Transact retries
	// commit_unknown_result, so a non-idempotent function can apply twice.
	db, _ := newDB(t)
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	runs := 0
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		runs++
		tr.Add([]byte("n"), le64(1))
		return nil
	}))
	require.Equal(t, 2, runs)
	v, _ := mustGet(t, db, "n")
	require.Equal(t, le64(2), []byte(v), "the increment applied twice")
}

func TestExtraLatencyWidensTheConflictWindow(t *testing.T) {
	db, _ := newDB(t, memdb.WithFaults(memdb.Faults{ExtraLatency: time.Hour, ExtraLatencyProb: 1}))
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	require.Eventually(t, func() bool { return db.Stats().CommitsInFlight == 1 }, time.Minute, 100*time.Microsecond)
	tr.Cancel()
	err := <-done
	require.True(t, errors.Is(err, kv.ErrTransactionCancelled) && kv.MaybeCommitted(err))
}
