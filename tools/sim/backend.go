package sim

import (
	"slices"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// backend is the database a seed runs on: a memdb of its own, with
// injected faults and counters, or Config.DB.
type backend interface {
	kv.Database
	setFaults(memdb.Faults)
	stats() memdb.Stats
	close()
	// quiesce waits until no interrupted commit is still to land.
	quiesce()
}

func newBackend(seed int64, cfg Config) backend {
	if cfg.DB != nil {
		return given{cfg.DB}
	}
	return own{memdb.New(
		memdb.WithSeed(seed),
		memdb.WithFaults(cfg.Faults),
		memdb.WithLatency(cfg.Latency),
		memdb.WithBackoff(100*time.Microsecond, 5*time.Millisecond),
	)}
}

// own is the seed's own memdb.
type own struct{ *memdb.DB }

func (o own) setFaults(f memdb.Faults) { o.SetFaults(f) }
func (o own) stats() memdb.Stats       { return o.Stats() }
func (o own) close()                   { _ = o.Close() }
func (o own) quiesce()                 { o.AwaitLateLandings() }

// given is Config.DB: nothing to inject, count or close.
type given struct{ kv.Database }

func (given) setFaults(memdb.Faults) {}
func (given) stats() memdb.Stats     { return memdb.Stats{} }
func (given) close()                 {}

// quiesce cannot know when FoundationDB has resolved the commits that were
// interrupted in flight: their effects may still come after it.
func (given) quiesce() {}

// subspace is the tuple of the seed's structure name: ("sim", name) in
// the seed's own memdb, (Prefix..., seed, name) in Config.DB.
func (h *harness) subspace(name string) tuple.Tuple {
	if h.cfg.DB == nil {
		return tuple.Tuple{"sim", name}
	}
	return append(slices.Clip(h.cfg.Prefix), h.seed, name)
}
