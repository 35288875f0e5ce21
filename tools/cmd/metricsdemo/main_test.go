package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// The demo exports the library's counters and gauges, and logs the
// retry that found its journal record after the commit_unknown_result it
// injects.
func TestRun(t *testing.T) {
	var out, errb bytes.Buffer
	require.NoError(t, run(context.Background(), &out, &errb))
	for _, name := range []string{"fdbqueue.operations", "fdbqueue.commit_unknown_result", "fdbqueue.journal.replays", "fdbqueue.depth", "fdbqueue.oldest_item.age"} {
		require.Contains(t, out.String(), `"Name": "`+name+`"`)
	}
	require.Contains(t, errb.String(), "found its journal record: an earlier attempt committed")
	require.Contains(t, errb.String(), "depth 3 (from the counters)")
}
