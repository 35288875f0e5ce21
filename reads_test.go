package fdbqueue_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// stagedThroughFDB runs a contended staged workload (producers, waiting
// consumers, with injected conflicts and unknown results, so that steps
// commit, fail, reset and retry) through fdbDB and returns what it saw.
func stagedThroughFDB(t *testing.T, m stagingMode) fdbStats {
	db := newFDBDB(stgDB(t, memdb.WithSeed(11), memdb.WithFaults(stagingFaults)))
	sub := stgSubspace(t, "fdbrules")
	q := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{BatchSize: 8})...)
	const producers, perProducer, consumers = 2, 40, 8
	var want []string
	for p := range producers {
		for i := range perProducer {
			want = append(want, fmt.Sprintf("p%d-%d", p, i))
		}
	}
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := range perProducer {
				if err := q.Enqueue(context.Background(), db, fmt.Appendf(nil, "p%d-%d", p, i)); err != nil {
					t.Errorf("enqueue: %v", err)
					return
				}
			}
		}()
	}
	got := consumeAll(t, consumers, len(want), func(ctx context.Context) (string, error) {
		v, err := q.DequeueWait(ctx, db)
		return string(v), err
	})
	pwg.Wait()
	requireExactlyOnce(t, got, want)
	return db.st.snapshot()
}

// Defect 4 (issue 12): FoundationDB's Reset clears a transaction's options
// (ReadYourWritesTransaction::reset, fdbclient/ReadYourWrites.actor.cpp:
// options.reset(tr), only the database's defaults stay). fdbDB's Reset
// drops them as FDB does; every step of the staged loop must still commit
// with its 20 ms max retry delay, so the loop sets it again after each
// Reset.
func TestStagedStepsReapplyOptionsAfterReset(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		st := stagedThroughFDB(t, m)
		require.NotEmpty(t, st.stagedDelays)
		for i, d := range st.stagedDelays {
			require.Equal(t, 20*time.Millisecond, d, "commit %d of a staged step ran without its max retry delay", i)
		}
	})
}

// Defect 9 (issue 12): on FoundationDB a range read is in flight from the
// GetRange call, and a transaction used once its commit has started fails
// with used_during_commit (2017; checkUsedDuringCommit in
// fdbclient/ReadYourWrites.actor.cpp), while the commit itself may apply.
// Every step must therefore wait for each range read it issued, itself,
// before it commits: no read left unconsumed, none handed to a goroutine
// that may still be fetching when Commit runs.
func TestStagedStepsWaitForTheirReadsBeforeCommit(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		st := stagedThroughFDB(t, m)
		require.Empty(t, st.violations, "%d violations; the first: %q", len(st.violations), st.violations[:min(3, len(st.violations))])
	})
}
