package fdbqueue

import (
	"context"
	"regexp"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// attrsMeter's counters record the attributes of each Add.
type attrsMeter struct {
	noop.Meter
	mu  sync.Mutex
	got map[string][]map[string]string // instrument name: each Add's attributes
}

type attrsCounter struct {
	noop.Int64Counter
	m    *attrsMeter
	name string
}

func (c attrsCounter) Add(_ context.Context, _ int64, opts ...metric.AddOption) {
	attrs := map[string]string{}
	set := metric.NewAddConfig(opts).Attributes()
	for _, kv := range set.ToSlice() {
		attrs[string(kv.Key)] = kv.Value.Emit()
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.got[c.name] = append(c.m.got[c.name], attrs)
}

func (m *attrsMeter) Int64Counter(name string, _ ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return attrsCounter{m: m, name: name}, nil
}

type attrsProvider struct {
	noop.MeterProvider
	m *attrsMeter
}

func (p attrsProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// The values of fdbqueue.outcome are one vocabulary of snake_case words
// (ok, empty, maybe_committed, ... for fdbqueue.operations), so a pool's
// outcomes on fdbqueue.lease.outcomes must be too: "lease lost" and
// "dead-lettered", Result's names for people, are awkward label values
// in a query language and differ in style from the operations' outcomes.
func TestLeaseOutcomeAttributeValues(t *testing.T) {
	m := &attrsMeter{got: map[string][]map[string]string{}}
	q, err := NewJobQueue(SubspaceFromBytes([]byte("lo")), JobQueueConfig{}, WithMeterProvider(attrsProvider{m: m}))
	require.NoError(t, err)
	results := []Result{Acked, Retried, DeadLettered, LeaseLost, Abandoned, Failed}
	for _, r := range results {
		q.journal.track.obs.leaseSettled(r)
	}
	got := m.got["fdbqueue.lease.outcomes"]
	require.Len(t, got, len(results))
	var values []string
	for _, a := range got {
		values = append(values, a["fdbqueue.outcome"])
		require.Regexp(t, regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`), a["fdbqueue.outcome"])
	}
	require.Equal(t, []string{"acked", "retried", "dead_lettered", "lease_lost", "abandoned", "failed"}, values)
}
