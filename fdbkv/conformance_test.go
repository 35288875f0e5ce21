package fdbkv_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/kvtest"
)

// TestConformance runs kvtest's conformance suite, the rules memdb is held
// to, against a real FoundationDB cluster. It skips, with one line, when
// FDB_CLUSTER_FILE names no cluster.
func TestConformance(t *testing.T) {
	clusterFile(t) // skip before any call into libfdb_c
	kvtest.RunConformanceTests(t, newHarness)
}

// newHarness gives each subtest of the suite the shared test database and a
// fresh random prefix (newTestPrefix), empty when handed over.
func newHarness(ctx context.Context, t *testing.T) (kvtest.Harness, error) {
	db := testDatabase(t)
	prefix := newTestPrefix()
	if err := clearPrefix(db, prefix); err != nil {
		return nil, fmt.Errorf("clearing the harness prefix %q: %w", prefix, err)
	}
	return &harness{t: t, db: db, prefix: prefix}, nil
}

// harness is a kvtest.Harness over a real cluster.
type harness struct {
	t      *testing.T
	db     *fdbkv.Database
	prefix []byte
}

var _ kvtest.Harness = (*harness)(nil)

// Database returns the shared test database.
func (h *harness) Database() kv.Database { return h.db }

// Prefix returns the harness's random prefix.
func (h *harness) Prefix() []byte { return bytes.Clone(h.prefix) }

// AdvanceTime waits: a real cluster's clock cannot be moved.
func (h *harness) AdvanceTime(d time.Duration) { time.Sleep(d) }

// Faults returns nil: commit failures cannot be injected into a real
// cluster, so the suite skips the checks that need them.
func (h *harness) Faults() kvtest.FaultInjector { return nil }

// Close clears the harness's prefix. The database is shared by the tests
// and closed when they end.
func (h *harness) Close() {
	if err := clearPrefix(h.db, h.prefix); err != nil {
		h.t.Errorf("clearing the harness prefix %q: %v", h.prefix, err)
	}
}
