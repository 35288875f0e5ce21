package sim_test

import (
	"bytes"
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tools/sim"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Seeds run on a given database (as cmd/soak -cluster-file runs them on
// FoundationDB) share it: two at once, each under (Prefix..., seed), with
// sound histories, nothing written outside the prefix, and every item
// drained at the end.
func TestSimulationOnAGivenDatabase(t *testing.T) {
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	cfg := sim.DefaultConfig()
	cfg.Rounds, cfg.Clients, cfg.OpsPerClient, cfg.MaxOpen = 2, 3, 15, 1
	cfg.CheckTimeout = ciCheckTimeout
	cfg.DB = db
	cfg.Prefix = tuple.Tuple{"soak", "run"}
	seeds := []int64{1, 2} // 2 is staged, 1 is not (by the seed's first draws)

	results := make([]sim.Result, len(seeds))
	errs := make([]error, len(seeds))
	var wg sync.WaitGroup
	for i, seed := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = sim.Run(context.Background(), seed, cfg)
		}()
	}
	wg.Wait()
	var total sim.Result
	for i := range seeds {
		require.NoError(t, errs[i])
		total.Add(results[i])
	}
	requireSound(t, total)
	require.Equal(t, 1, total.StagedSeeds, "the seeds cover a staged and a plain run")
	require.Equal(t, len(seeds)*cfg.Rounds*2, total.Histories)
	require.Zero(t, total.Stats.InjectedNotCommitted+total.Stats.InjectedUnknownApplied+total.Stats.Transactions,
		"a given database is not the seed's memdb: no faults, no counters")

	prefix, err := tuple.Tuple{"soak", "run"}.Pack()
	require.NoError(t, err)
	var all []kv.KeyValue
	require.NoError(t, db.ReadTransact(context.Background(), func(tr kv.ReadTransaction) error {
		var err error
		all, err = tr.GetRange(kv.KeyRange{Begin: []byte{}, End: []byte{0xff}}, kv.RangeOptions{}).GetSlice()
		return err
	}))
	require.NotEmpty(t, all, "the seeds wrote (at least journal records)")
	for _, kv := range all {
		require.True(t, bytes.HasPrefix(kv.Key, prefix), "key %q outside the prefix", kv.Key)
	}
	for _, seed := range seeds {
		for _, name := range []string{"queue", "pq"} {
			items, err := tuple.Tuple{"soak", "run", seed, name}.Pack()
			require.NoError(t, err)
			for _, kv := range all {
				// Items lie inside the structure's range; the journal lies
				// just past it (prefix + 0xff).
				if bytes.HasPrefix(kv.Key, items) && len(kv.Key) > len(items) && kv.Key[len(items)] != 0xff {
					t.Errorf("seed %d left an item in its %s: %q", seed, name, kv.Key)
				}
			}
		}
	}
}
