package memdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/kvtest"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// harness runs the kvtest conformance suite on a fresh memdb per test, with
// a manual clock (so time moves without sleeping) and commit fault injection.
type harness struct {
	db    *memdb.DB
	clock *memdb.ManualClock
}

var (
	_ kvtest.Harness           = (*harness)(nil)
	_ kvtest.FaultInjector     = (*memdb.DB)(nil)
	_ kvtest.ReadFaultInjector = (*memdb.DB)(nil)
)

func (h *harness) Database() kv.Database        { return h.db }
func (h *harness) Prefix() []byte               { return []byte("conformance\x00") }
func (h *harness) AdvanceTime(d time.Duration)  { h.clock.Advance(d) }
func (h *harness) Faults() kvtest.FaultInjector { return h.db }
func (h *harness) Close()                       { _ = h.db.Close() }

func TestConformance(t *testing.T) {
	kvtest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (kvtest.Harness, error) {
		clock := memdb.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		db := memdb.New(
			memdb.WithClock(clock),
			// Short real-time backoff: the suite provokes many conflicts.
			memdb.WithBackoff(100*time.Microsecond, 10*time.Millisecond),
		)
		return &harness{db: db, clock: clock}, nil
	})
}

// TestConformanceWithLatency runs the suite again under a read latency
// model, so that reads take memdb's asynchronous paths (a point read's
// goroutine, a range batch issued in flight): FoundationDB's rules do not
// depend on how long a read takes.
func TestConformanceWithLatency(t *testing.T) {
	kvtest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (kvtest.Harness, error) {
		clock := memdb.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		db := memdb.New(
			memdb.WithClock(clock),
			memdb.WithLatency(memdb.Latency{Read: memdb.Span{Max: time.Microsecond}}),
			memdb.WithBackoff(100*time.Microsecond, 10*time.Millisecond),
		)
		return &harness{db: db, clock: clock}, nil
	})
}
