package memdb

import "time"

// Option configures a DB made by New.
type Option func(*config)

type config struct {
	clock          Clock
	seed           int64
	faults         Faults
	latency        Latency
	window         time.Duration
	maxWatches     int
	backoffInitial time.Duration
	backoffMax     time.Duration
}

func defaultConfig() config {
	return config{
		clock:          newRealClock(),
		seed:           1,
		window:         5 * time.Second,
		maxWatches:     10_000,
		backoffInitial: 10 * time.Millisecond,
		backoffMax:     time.Second,
	}
}

// WithClock makes the DB tell time with c instead of the system clock. Use a
// ManualClock to make the MVCC window expire in tests without sleeping.
// Backoff and latency sleeps always use real time.
func WithClock(c Clock) Option {
	return func(cfg *config) {
		if c != nil {
			cfg.clock = c
		}
	}
}

// WithSeed seeds the DB's one random number generator, which drives fault
// injection, retry jitter, latency sampling and the outcome of interrupted
// commits. The default seed is 1.
func WithSeed(seed int64) Option {
	return func(cfg *config) { cfg.seed = seed }
}

// WithFaults sets the initial fault injection probabilities; see Faults and
// DB.SetFaults.
func WithFaults(f Faults) Option {
	return func(cfg *config) { cfg.faults = f }
}

// WithLatency makes reads, read version requests and commits wait as on a
// real cluster; see Latency and RealCluster. The default is no latency.
func WithLatency(l Latency) Option {
	return func(cfg *config) { cfg.latency = l }
}

// WithMVCCWindow sets how long after obtaining its read version a
// transaction may still read and commit (FDB's is 5 seconds, the default).
// It is also the span of versions (one per microsecond) kept for readers.
// Values below one millisecond are raised to one millisecond.
func WithMVCCWindow(d time.Duration) Option {
	return func(cfg *config) { cfg.window = max(d, time.Millisecond) }
}

// WithMaxWatches sets how many watches may be outstanding at once on the DB
// (FDB's default, and ours, is 10,000); past it Watch fails with
// kv.ErrTooManyWatches. n < 0 is treated as 0.
func WithMaxWatches(n int) Option {
	return func(cfg *config) { cfg.maxWatches = max(n, 0) }
}

// WithBackoff sets OnError's backoff: the first retry waits up to initial,
// each further retry doubles it, up to maxDelay (and the transaction's
// SetMaxRetryDelay). FDB's defaults, and ours, are 10ms and 1s. Tests that
// provoke many conflicts can use tiny values to run fast. Non-positive
// values keep the defaults.
func WithBackoff(initial, maxDelay time.Duration) Option {
	return func(cfg *config) {
		if initial > 0 {
			cfg.backoffInitial = initial
		}
		if maxDelay > 0 {
			cfg.backoffMax = maxDelay
		}
		if cfg.backoffMax < cfg.backoffInitial {
			cfg.backoffMax = cfg.backoffInitial
		}
	}
}
