package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/kvtest"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// memdbHarness runs the layer conformance suite on a fresh memdb per check,
// with commit fault injection.
type memdbHarness struct{ db *memdb.DB }

var _ queuetest.Harness = memdbHarness{}

func (h memdbHarness) Database() kv.Database        { return h.db }
func (h memdbHarness) Prefix() []byte               { return []byte("queuetest\x00") }
func (h memdbHarness) Faults() kvtest.FaultInjector { return memdbFaults{h.db} }

// memdbFaults is the harness's fault injector: memdb's, which can also
// fail chosen reads (queuetest.ReadFaultSweeper).
type memdbFaults struct{ *memdb.DB }

var _ queuetest.ReadFaultSweeper = memdbFaults{}

func (f memdbFaults) ReadFaultsInjected() int64 {
	s := f.Stats()
	return s.InjectedReadErrors + s.InjectedReadVersionErrors
}
func (h memdbHarness) Close() { _ = h.db.Close() }

// TestLayerConformance runs queuetest, the suite fdbkv also runs against
// FoundationDB, on memdb.
func TestLayerConformance(t *testing.T) {
	queuetest.RunLayerTests(t, func(ctx context.Context, t *testing.T) (queuetest.Harness, error) {
		// Short real-time backoff: some checks provoke conflicts.
		return memdbHarness{db: memdb.New(memdb.WithBackoff(100*time.Microsecond, 5*time.Millisecond))}, nil
	})
}
