package queuetest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
)

// depther is a layer with depth counters.
type depther interface {
	Depth(context.Context, kv.ReadTransactor) (int64, error)
}

// requireDepthZero checks, once a drain found the queue empty, that its
// depth counters say so too: every operation of the check (faults,
// conflicts and replays included) kept them exact.
func (f *fixture) requireDepthZero(t *testing.T, q depther) {
	t.Helper()
	d, err := q.Depth(f.ctx, f.db)
	require.NoError(t, err, "Depth")
	require.Zero(t, d, "Depth of a drained queue: the depth counters must follow every operation exactly")
}
