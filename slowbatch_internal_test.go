package fdbqueue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSlowBatchHalvesTheBudget: a batch take whose last attempt took more
// than slowAttempt (half of FoundationDB's 5-second transaction lifetime)
// retries with half the budget, down to minSlowBudget, so that a take too
// large to read and commit in time does not fail with transaction_too_old
// forever; a fast retry, and a single take, keep theirs. (memdb reads a
// range in one batch, so the test drives the attempt times directly.)
func TestSlowBatchHalvesTheBudget(t *testing.T) {
	c := &call{lim: batchLimit{max: 1000, budget: MaxBatchBudget}}
	c.slowBatch()
	require.Equal(t, MaxBatchBudget, c.lim.budget, "the first attempt")

	c.started = time.Now().Add(-time.Second)
	c.slowBatch()
	require.Equal(t, MaxBatchBudget, c.lim.budget, "a retry after a fast attempt")

	want := MaxBatchBudget
	for want > minSlowBudget {
		c.started = time.Now().Add(-slowAttempt - time.Second)
		c.slowBatch()
		want = max(want/2, minSlowBudget)
		require.Equal(t, want, c.lim.budget, "a retry after a slow attempt")
	}
	c.started = time.Now().Add(-slowAttempt - time.Second)
	c.slowBatch()
	require.Equal(t, minSlowBudget, c.lim.budget, "no lower than minSlowBudget")

	small := &call{lim: batchLimit{max: 1000, budget: 5000}, started: time.Now().Add(-slowAttempt - time.Second)}
	small.slowBatch()
	require.Equal(t, 5000, small.lim.budget, "a budget under minSlowBudget stays")

	one := &call{lim: batchLimit{max: 1, budget: MaxBatchBudget}, started: time.Now().Add(-slowAttempt - time.Second)}
	one.slowBatch()
	require.Equal(t, MaxBatchBudget, one.lim.budget, "a single take always returns its one item")
}
