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
