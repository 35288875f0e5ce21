package fdbqueue_test

import (
	"fmt"
	"regexp"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
)

// defsMeter records the definition (kind, unit, description) each
// instrument is created with.
type defsMeter struct {
	noop.Meter
	mu   sync.Mutex
	defs map[string]map[string]bool
}

func (m *defsMeter) note(name, kind, unit, desc string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.defs == nil {
		m.defs = map[string]map[string]bool{}
	}
	if m.defs[name] == nil {
		m.defs[name] = map[string]bool{}
	}
	m.defs[name][fmt.Sprintf("%s unit=%q description=%q", kind, unit, desc)] = true
}

func (m *defsMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c := metric.NewInt64CounterConfig(opts...)
	m.note(name, "Int64Counter", c.Unit(), c.Description())
	return m.Meter.Int64Counter(name, opts...)
}

func (m *defsMeter) Int64ObservableGauge(name string, opts ...metric.Int64ObservableGaugeOption) (metric.Int64ObservableGauge, error) {
	c := metric.NewInt64ObservableGaugeConfig(opts...)
	m.note(name, "Int64ObservableGauge", c.Unit(), c.Description())
	return m.Meter.Int64ObservableGauge(name, opts...)
}

func (m *defsMeter) Float64ObservableGauge(name string, opts ...metric.Float64ObservableGaugeOption) (metric.Float64ObservableGauge, error) {
	c := metric.NewFloat64ObservableGaugeConfig(opts...)
	m.note(name, "Float64ObservableGauge", c.Unit(), c.Description())
	return m.Meter.Float64ObservableGauge(name, opts...)
}

func (m *defsMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	c := metric.NewFloat64HistogramConfig(opts...)
	m.note(name, "Float64Histogram", c.Unit(), c.Description())
	return m.Meter.Float64Histogram(name, opts...)
}

type defsProvider struct {
	noop.MeterProvider
	m *defsMeter
}

func (p defsProvider) Meter(string, ...metric.MeterOption) metric.Meter { return p.m }

// Every queue reports through one instrumentation scope, so an instrument
// name must always come with the same definition: the OpenTelemetry SDK
// treats one name created with two descriptions as a duplicate
// registration ("duplicate metric stream definitions") and exports two
// conflicting streams of that name. An application that registers the
// gauges of a Queue and of a JobQueue with one MeterProvider hits this.
func TestObserveInstrumentDefinitionsAgree(t *testing.T) {
	db := newDB(t)
	m := &defsMeter{}
	mp := fdbqueue.WithMeterProvider(defsProvider{m: m})
	q := mustQueue(t, "defs-q", mp, fdbqueue.WithVersionstampOrder())
	pq := mustPQ(t, "defs-pq", mp)
	jq := mustJobQueue(t, "defs-jq", fdbqueue.JobQueueConfig{}, mp)
	for _, register := range []func() (metric.Registration, error){
		func() (metric.Registration, error) { return q.RegisterGauges(db) },
		func() (metric.Registration, error) { return pq.RegisterGauges(db) },
		func() (metric.Registration, error) { return jq.RegisterGauges(db) },
	} {
		reg, err := register()
		require.NoError(t, err)
		require.NoError(t, reg.Unregister())
	}
	require.Contains(t, m.defs, "fdbqueue.depth")
	require.Contains(t, m.defs, "fdbqueue.oldest_item.age")
	for name, defs := range m.defs {
		var all []string
		for d := range defs {
			all = append(all, d)
		}
		sort.Strings(all)
		require.Len(t, all, 1, "instrument %s is created with different definitions: %q", name, all)
	}
}

// Every instrument declares its unit, as OpenTelemetry's semantic
// conventions ask: "s" for durations, and for counts the annotation of
// what is counted in braces ("{operation}", "{job}"), which exporters such
// as Prometheus leave out of the metric's name. Without one a backend
// cannot tell a count from a duration or label its axis.
func TestObserveInstrumentsHaveUnits(t *testing.T) {
	db := newDB(t)
	m := &defsMeter{}
	mp := fdbqueue.WithMeterProvider(defsProvider{m: m})
	q := mustQueue(t, "units-q", mp, fdbqueue.WithVersionstampOrder())
	jq := mustJobQueue(t, "units-jq", fdbqueue.JobQueueConfig{}, mp)
	for _, register := range []func() (metric.Registration, error){
		func() (metric.Registration, error) { return q.RegisterGauges(db) },
		func() (metric.Registration, error) { return jq.RegisterGauges(db) },
	} {
		reg, err := register()
		require.NoError(t, err)
		require.NoError(t, reg.Unregister())
	}
	// The units WithMeterProvider's doc lists: a dashboard built from
	// that table labels its axes with them.
	want := map[string]string{
		"fdbqueue.operations": "{operation}", "fdbqueue.conflicts": "{conflict}", "fdbqueue.retries": "{retry}",
		"fdbqueue.commit_unknown_result": "{commit}", "fdbqueue.journal.replays": "{replay}", "fdbqueue.staged.steps": "{step}",
		"fdbqueue.lease.outcomes": "{job}", "fdbqueue.lease.expired": "{lease}", "fdbqueue.dead_letters": "{job}",
		"fdbqueue.lease.extensions": "{extension}", "fdbqueue.handler.duration": "s", "fdbqueue.schedule.ahead": "{call}",
		"fdbqueue.depth": "{item}", "fdbqueue.oldest_item.age": "s", "fdbqueue.jobs": "{job}",
	}
	require.Len(t, m.defs, len(want), "instruments: %v", m.defs)
	unit := regexp.MustCompile(`unit="(s|\{[a-z_]+\})"`)
	for name, u := range want {
		require.Contains(t, m.defs, name)
		for d := range m.defs[name] {
			require.Regexp(t, unit, d, "instrument %s", name)
			require.Contains(t, d, fmt.Sprintf("unit=%q", u), "instrument %s: the unit its doc lists", name)
		}
	}
}
