package memdb_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestConcurrentReadsOverlapTheirLatency(t *testing.T) {
	const n, each = 10, 40 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: each, Max: each}}))
	for i := range n {
		mustSet(t, db, fmt.Sprint("k", i), "v")
	}
	tr := newTx(t, db)
	start := time.Now()
	futures := make([]kv.FutureValue, n)
	for i := range futures {
		futures[i] = tr.Get([]byte(fmt.Sprint("k", i)))
	}
	for _, f := range futures {
		v, err := f.Get()
		require.NoError(t, err)
		require.Equal(t, "v", string(v))
	}
	elapsed := time.Since(start)
	require.GreaterOrEqual(t, elapsed, each, "each read waits its latency")
	require.Less(t, elapsed, n*each/2, "reads issued together wait together, not one after another")
}

func TestCancelAbortsLatencyWaits(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Hour, Max: time.Hour}}))
	tr := newTx(t, db)
	f := tr.Get([]byte("k"))
	rv := tr.GetReadVersion()
	tr.Cancel()
	_, err := f.Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled)
	_, err = rv.Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled)
}

func TestRealClusterLatencyMakesAHotKeyContend(t *testing.T) {
	if testing.Short() {
		t.Skip("takes a few hundred milliseconds of real time")
	}
	db := memdb.New(memdb.WithLatency(memdb.RealCluster), memdb.WithBackoff(time.Millisecond, 5*time.Millisecond))
	defer db.Close()
	const workers, each = 8, 5
	errs := make(chan error, workers)
	for range workers {
		go func() {
			var err error
			for range each {
				if err = db.Transact(t.Context(), func(tr kv.Transaction) error {
					v, err := tr.Get([]byte("hot")).Get()
					if err != nil {
						return err
					}
					tr.Set([]byte("hot"), append(v, 'x'))
					return nil
				}); err != nil {
					break
				}
			}
			errs <- err
		}()
	}
	for range workers {
		require.NoError(t, <-errs)
	}
	tr, _ := db.CreateTransaction(t.Context())
	v, err := tr.Get([]byte("hot")).Get()
	require.NoError(t, err)
	require.Len(t, v, workers*each)
	require.Greater(t, db.Stats().Conflicts, int64(0), "with real latencies, concurrent read-modify-writes conflict")
}

// A transaction that writes without having read obtains a read version at
// commit, as FDB's client does: with a GRV delay of an hour, its commit
// waits until the transaction times out, and fails with the timeout, not
// as an interrupted commit, with nothing applied: it was never sent.
// A read-only commit waits nothing.
func TestBlindWriteWaitsForAReadVersionAtCommit(t *testing.T) {
	db, err := commitTimingOut(t, memdb.Latency{GRV: memdb.Span{Min: time.Hour, Max: time.Hour}}, 50*time.Millisecond)
	require.ErrorIs(t, err, kv.ErrTransactionTimedOut)
	require.False(t, kv.MaybeCommitted(err), "the commit waited for its read version: it was never sent")
	require.Equal(t, int64(0), db.Stats().Commits)
	require.Equal(t, int64(0), db.Stats().Interrupted)

	ro := newTx(t, db)
	require.NoError(t, ro.Commit(), "a read-only commit needs no read version")
	_, err = ro.GetCommittedVersion()
	require.NoError(t, err)
}

// A blind write's commit waits a GRV delay and then the commit delay.
// Only a lower bound is checked: a loaded machine only makes it slower.
func TestBlindWritePaysGRVAndCommitDelays(t *testing.T) {
	const grv, commit = 40 * time.Millisecond, 20 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{
		GRV:    memdb.Span{Min: grv, Max: grv},
		Commit: memdb.Span{Min: commit, Max: commit},
	}))
	start := time.Now()
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Set([]byte("k"), []byte("v"))
		return nil
	}))
	require.GreaterOrEqual(t, time.Since(start), grv+commit)
	v, ok := mustGet(t, db, "k")
	require.True(t, ok)
	require.Equal(t, "v", v)
}

// After a blind write commits, GetReadVersion answers with the read version
// the commit obtained (tryCommit's startTransaction, fdbclient/
// NativeAPI.actor.cpp), before the commit's version, on each of memdb's
// commit paths: at once, after a latency model's delays, and through the
// fault injector (kvtest's ReadVersionOfBlindCommit covers the first).
func TestBlindCommitKeepsItsReadVersion(t *testing.T) {
	for name, opt := range map[string]memdb.Option{
		"latency": memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Millisecond, Max: time.Millisecond}}),
		"faults":  memdb.WithFaults(memdb.Faults{ExtraLatency: time.Millisecond, ExtraLatencyProb: 1}),
	} {
		t.Run(name, func(t *testing.T) {
			db, _ := newDB(t, opt)
			mustSet(t, db, "a", "1")
			tr := newTx(t, db)
			tr.Set([]byte("b"), []byte("2"))
			require.NoError(t, tr.Commit())
			cv, err := tr.GetCommittedVersion()
			require.NoError(t, err)
			rv, err := tr.GetReadVersion().Get()
			require.NoError(t, err)
			require.Less(t, rv, cv, "the commit's read version, before its commit version")
		})
	}
}

// HoldNextReadVersion holds a transaction's read version request: its
// first read returns a future at once, and a commit made while the request
// is held is visible to it, since the version is chosen at release.
func TestHoldNextReadVersionChoosesTheVersionAtRelease(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	mustSet(t, db, "k", "before")
	held, release := db.HoldNextReadVersion()
	tr := newTx(t, db)
	f := tr.Get([]byte("k")) // sends the request, which the hold stops
	<-held
	mustSet(t, db, "k", "during") // its own request is not held: the hold was taken
	release()
	v, err := f.Get()
	require.NoError(t, err)
	require.Equal(t, "during", string(v), "the read version was chosen after the commit made while it was held")
	// The hold is one-shot.
	tr2 := newTx(t, db)
	v, err = tr2.Get([]byte("k")).Get()
	require.NoError(t, err)
	require.Equal(t, "during", string(v))
}

// A cancelled transaction's held read version request lets go: its reads
// fail with transaction_cancelled.
func TestHoldNextReadVersionEndsWithCancel(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	held, release := db.HoldNextReadVersion()
	defer release()
	tr := newTx(t, db)
	f := tr.Get([]byte("k"))
	<-held
	tr.Cancel()
	_, err := f.Get()
	require.ErrorIs(t, err, kv.ErrTransactionCancelled)
}
