package fdbkv_test

import (
	"context"
	"testing"

	"github.com/fdbqueue/fdbqueue/queuetest"
)

// TestLayerConformance runs queuetest, the layers' conformance suite that
// memdb runs in make test, against a real FoundationDB cluster: each check
// gets the shared test database and a fresh random prefix (kvtest's
// harness, newHarness in conformance_test.go, serves both suites). Commit
// faults cannot be injected into a real cluster, so the exactly-once checks
// skip; everything else runs. It skips, with one line, when
// FDB_CLUSTER_FILE names no cluster.
func TestLayerConformance(t *testing.T) {
	clusterFile(t) // skip before any call into libfdb_c
	queuetest.RunLayerTests(t, func(ctx context.Context, t *testing.T) (queuetest.Harness, error) {
		return newHarness(ctx, t)
	})
}
