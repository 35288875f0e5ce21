package memdb

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// Faults are probabilities of failures a real cluster produces: per commit
// attempt of a transaction that writes (all but ReadErrors and
// ReadVersionErrors), per read (ReadErrors) and per read version request
// (ReadVersionErrors). Each is between 0 and 1; they are drawn from the
// DB's seeded generator, so a run is reproducible (as far as goroutine
// scheduling allows). Read-only commits never fail, but their reads may.
type Faults struct {
	// NotCommitted fails the commit with kv.ErrNotCommitted without
	// applying it, as a spurious conflict.
	NotCommitted float64
	// UnknownApplied applies the commit (if it passes conflict checking) but
	// reports kv.ErrCommitUnknownResult.
	UnknownApplied float64
	// UnknownNotApplied reports kv.ErrCommitUnknownResult without applying
	// the commit.
	UnknownNotApplied float64
	// VersionChangedApplied and VersionChangedNotApplied are the same two
	// faults reported as kv.ErrClusterVersionChanged (1039), which FDB
	// classifies as maybe-committed too (fdb_error_predicate, bindings/c/
	// fdb_c.cpp). Stats counts them with the commit_unknown_result faults.
	VersionChangedApplied    float64
	VersionChangedNotApplied float64
	// TooOld fails the commit with kv.ErrTransactionTooOld, with or
	// without read conflict ranges. A cluster's resolver reports it only
	// for a commit with some (ConflictBatch::addTransaction,
	// fdbserver/SkipList.cpp), but FDB's own simulation injects it, and
	// not_committed, into any commit (CLIENT_BUGGIFY in tryCommit,
	// fdbclient/NativeAPI.actor.cpp), and so does this fault: code that
	// retries correctly handles it either way.
	TooOld float64
	// ExtraLatency is added to a commit with probability ExtraLatencyProb,
	// whether or not a latency model is set. It is slept in real time and
	// widens the window in which the commit may conflict or be interrupted.
	ExtraLatency     time.Duration
	ExtraLatencyProb float64
	// LateLanding is the chance that a commit interrupted in flight (its
	// transaction cancelled or timed out while the commit waits out its
	// latency) goes on, and is resolved and applied (unless it conflicts)
	// up to 10 ms after Commit returned, after transactions that began
	// meanwhile, as FDB's commit request does (RYWImpl::commit returns once
	// resetPromise is set; the request goes on). Otherwise the commit is
	// decided at the interruption, applied or not at even odds.
	LateLanding float64

	// ReadErrors is the chance that a read the database serves fails: a
	// point read, each batch of a range read, a watch's read. Reads the
	// transaction answers from its own writes (a key it set, a range it
	// cleared) and the metadata version key (it comes with the read
	// version) never fail this way. The error is transaction_too_old,
	// future_version or process_behind, at even odds: what FDB's client
	// lets through from a storage server's reply (getValue and getRange,
	// fdbclient/NativeAPI.actor.cpp, retry only wrong_shard_server and
	// all_alternatives_failed; waitForVersion, fdbserver/
	// storageserver.actor.cpp, answers too_old, process_behind and
	// future_version), and what FDB's simulation injects into reads
	// (CLIENT_BUGGIFY in getValue and getRange: transaction_too_old or
	// future_version). All three are retryable and not committed
	// (fdb_error_predicate, bindings/c/fdb_c.cpp). The read's future fails
	// with the error, and so does the transaction's Commit, as FDB's does
	// (see FailReadAfter); a watch's failed read fails only the watch.
	// memdb has no read cache: a repeated read may fail where FDB's
	// read-your-writes cache would answer it, which code that is correct
	// on FDB handles alike.
	ReadErrors float64
	// ReadVersionErrors is the chance that a transaction's read version
	// request (GRV) fails, with grv_proxy_memory_limit_exceeded or
	// database_locked at even odds: the errors a GRV proxy answers a
	// transaction that sets neither tags nor batch priority (which kv
	// cannot set) with (proxyGRVThresholdExceeded, fdbserver/
	// GrvProxyServer.actor.cpp; extractReadVersion, fdbclient/
	// NativeAPI.actor.cpp), both retryable and not committed. As in FDB,
	// whose transaction keeps its failed read version future until it is
	// reset (TransactionState::startTransaction), every read, every
	// GetReadVersion and the Commit of a transaction that writes fail with
	// the same error until OnError or Reset; a transaction that writes
	// without having read draws too when it commits (FDB's commit obtains
	// a read version first: tryCommit waits for startTransaction).
	ReadVersionErrors float64
}

// any reports whether any fault has a chance of happening.
func (f Faults) any() bool {
	return f.NotCommitted > 0 || f.UnknownApplied > 0 || f.UnknownNotApplied > 0 ||
		f.VersionChangedApplied > 0 || f.VersionChangedNotApplied > 0 || f.TooOld > 0 || (f.ExtraLatency > 0 && f.ExtraLatencyProb > 0) ||
		f.LateLanding > 0
}

// reads reports whether a read or read version request may fail.
func (f Faults) reads() bool { return f.ReadErrors > 0 || f.ReadVersionErrors > 0 }

// maxLateLanding bounds how long after Commit returned a late landing
// happens (Faults.LateLanding).
const maxLateLanding = 10 * time.Millisecond

// Span is a delay drawn uniformly from [Min, Max].
type Span struct {
	Min, Max time.Duration
}

// Latency is a latency model: how long a read version request (GRV), a read
// (a point read or one batch of a range read) and a commit take. Delays are
// drawn from the DB's seeded generator and slept in real time; a
// transaction's cancellation interrupts them.
type Latency struct {
	GRV, Read, Commit Span
}

// RealCluster is the latency of a healthy single-datacenter FoundationDB
// cluster: GRV 0.3–1 ms, reads 0.1–1 ms, commits 1.5–2.5 ms. A blind write
// (a transaction that commits without having read) pays a GRV and then a
// commit delay, 1.8–3.5 ms. With it, a single hot key sustains a few
// hundred conflicting transactions a second, as on a real cluster.
var RealCluster = Latency{
	GRV:    Span{Min: 300 * time.Microsecond, Max: time.Millisecond},
	Read:   Span{Min: 100 * time.Microsecond, Max: time.Millisecond},
	Commit: Span{Min: 1500 * time.Microsecond, Max: 2500 * time.Microsecond},
}

func (l Latency) enabled() bool {
	return l.GRV.Max > 0 || l.Read.Max > 0 || l.Commit.Max > 0 ||
		l.GRV.Min > 0 || l.Read.Min > 0 || l.Commit.Min > 0
}

// lockedRand is the DB's one seeded generator.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed int64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15))}
}

func (l *lockedRand) float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

// sample draws a delay from s.
func (l *lockedRand) sample(s Span) time.Duration {
	lo, hi := s.Min, s.Max
	if hi < lo {
		lo, hi = hi, lo
	}
	if lo < 0 {
		lo = 0
	}
	if hi <= lo {
		return lo
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return lo + time.Duration(l.r.Int64N(int64(hi-lo)+1))
}

// faultKind is the fault chosen for one commit attempt.
type faultKind uint8

const (
	faultNone faultKind = iota
	faultNotCommitted
	faultUnknownApplied
	faultUnknownNotApplied
	faultTooOld
	faultVersionChangedApplied
	faultVersionChangedNotApplied
)

// pick draws the fault for one commit attempt and whether extra latency
// applies.
func (l *lockedRand) pick(f Faults) (faultKind, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var extra time.Duration
	if f.ExtraLatency > 0 && f.ExtraLatencyProb > 0 && l.r.Float64() < f.ExtraLatencyProb {
		extra = f.ExtraLatency
	}
	x := l.r.Float64()
	for _, c := range []struct {
		p float64
		k faultKind
	}{
		{f.NotCommitted, faultNotCommitted},
		{f.UnknownApplied, faultUnknownApplied},
		{f.UnknownNotApplied, faultUnknownNotApplied},
		{f.TooOld, faultTooOld},
		{f.VersionChangedApplied, faultVersionChangedApplied},
		{f.VersionChangedNotApplied, faultVersionChangedNotApplied},
	} {
		if c.p > 0 {
			if x < c.p {
				return c.k, extra
			}
			x -= c.p
		}
	}
	return faultNone, extra
}

// Errors injected into reads (Faults.ReadErrors) and read version requests
// (Faults.ReadVersionErrors).
var (
	readFaultErrors = [...]kv.Error{kv.ErrTransactionTooOld, kv.ErrFutureVersion, kv.ErrProcessBehind}
	grvFaultErrors  = [...]kv.Error{kv.ErrGRVProxyMemoryLimit, kv.ErrDatabaseLocked}
)

// drawError returns one of errs if a draw falls under p, else nil.
func (l *lockedRand) drawError(p float64, errs []kv.Error) error {
	if p <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.r.Float64() >= p {
		return nil
	}
	return errs[l.r.IntN(len(errs))]
}
