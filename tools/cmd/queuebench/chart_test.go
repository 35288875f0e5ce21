package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// One consumer count and one producer count leave the chart's axes
// without a range; the chart must still be drawn.
func TestDrawChartSinglePoint(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	deq := []dequeueRow{{Mode: "plain", Consumers: 1, ItemsPerSec: 190}}
	enq := []enqueueRow{{Kind: "recipe", Producers: 1, ItemsPerSec: 180}}
	require.NoError(t, drawChart(path, deq, enq, options{latency: true}))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Positive(t, st.Size())
}
