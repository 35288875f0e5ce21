package memdb

import "sync/atomic"

// Stats is a snapshot of a DB's counters. Counters only grow; the fields
// marked "live" are current sizes.
type Stats struct {
	// Transactions is the number of transactions created (CreateTransaction,
	// and one per Transact or ReadTransact call; retries reuse it).
	Transactions int64
	// Commits is the number of commits applied at a new version, including
	// those reported as commit_unknown_result or interrupted.
	Commits int64
	// ReadOnlyCommits is the number of successful commits of transactions
	// that wrote nothing (they apply nothing and always succeed).
	ReadOnlyCommits int64
	// Conflicts is the number of commits rejected by conflict checking
	// (not_committed), not counting injected ones.
	Conflicts int64
	// Retries is the number of times OnError reset a transaction to retry.
	Retries int64
	// TooOld is the number of transaction_too_old errors from reads and
	// commits, not counting injected ones.
	TooOld int64
	// InjectedNotCommitted, InjectedUnknownApplied, InjectedUnknownNotApplied
	// and InjectedTooOld count commits failed by Faults (the Unknown
	// counters include the VersionChanged faults).
	InjectedNotCommitted      int64
	InjectedUnknownApplied    int64
	InjectedUnknownNotApplied int64
	InjectedTooOld            int64
	// InjectedForced counts commits failed by FailNextCommit.
	InjectedForced int64
	// InjectedReadErrors counts reads failed by Faults.ReadErrors and
	// FailNextRead; InjectedReadVersionErrors read version requests failed
	// by Faults.ReadVersionErrors and FailNextReadVersion.
	InjectedReadErrors        int64
	InjectedReadVersionErrors int64
	// Interrupted counts commits cancelled or timed out while in flight
	// (their outcome was drawn at random).
	Interrupted int64
	// Reads is the number of point reads served by the database (reads
	// answered by the transaction's own writes are not counted).
	Reads int64
	// RangeReads is the number of range read batches.
	RangeReads int64

	// Watches (live) is the number of outstanding watches: created and
	// neither fired, failed nor cancelled.
	Watches int64
	// CommitsInFlight (live) is the number of commits waiting out their
	// latency (Latency.Commit or Faults.ExtraLatency).
	CommitsInFlight int64
	// Keys (live) is the number of keys that currently have a value.
	Keys int64
	// Versions (live) is the number of stored MVCC entries (values and
	// tombstones) over all keys, old versions included.
	Versions int64
	// ConflictHistory (live) is the number of boundary points the resolver
	// keeps to check conflicts against recent commits. Writes of stored
	// keys are not among them: each key's entry keeps its last write
	// version.
	ConflictHistory int64
	// GCQueue (live) is the number of keys waiting for their old versions to
	// be collected.
	GCQueue int64
	// Version is the latest committed version.
	Version int64
	// OldestVersion is the garbage collection horizon: older versions are
	// gone and read versions below it are too old.
	OldestVersion int64
}

// counters are the DB's monotonic counters.
type counters struct {
	transactions, readOnlyCommits, conflicts, retries, tooOld atomic.Int64
	injectedNotCommitted, injectedUnknownApplied              atomic.Int64
	injectedUnknownNotApplied, injectedTooOld, injectedForced atomic.Int64
	interrupted, reads, rangeReads, inFlight                  atomic.Int64
	injectedRead, injectedGRV                                 atomic.Int64
}

// Stats returns a snapshot of the DB's counters.
func (db *DB) Stats() Stats {
	c := &db.stats
	s := Stats{
		Transactions:              c.transactions.Load(),
		ReadOnlyCommits:           c.readOnlyCommits.Load(),
		Conflicts:                 c.conflicts.Load(),
		Retries:                   c.retries.Load(),
		TooOld:                    c.tooOld.Load(),
		InjectedNotCommitted:      c.injectedNotCommitted.Load(),
		InjectedUnknownApplied:    c.injectedUnknownApplied.Load(),
		InjectedUnknownNotApplied: c.injectedUnknownNotApplied.Load(),
		InjectedTooOld:            c.injectedTooOld.Load(),
		InjectedForced:            c.injectedForced.Load(),
		InjectedReadErrors:        c.injectedRead.Load(),
		InjectedReadVersionErrors: c.injectedGRV.Load(),
		Interrupted:               c.interrupted.Load(),
		Reads:                     c.reads.Load(),
		RangeReads:                c.rangeReads.Load(),
		Watches:                   db.liveW.Load(),
		CommitsInFlight:           c.inFlight.Load(),
	}
	db.mu.RLock()
	s.Commits = db.commits
	s.Keys = db.st.live
	s.Versions = db.st.versions
	s.ConflictHistory = int64(db.res.len())
	s.GCQueue = int64(db.st.gcq.len())
	s.Version = db.version.Load()
	s.OldestVersion = db.horizon
	db.mu.RUnlock()
	return s
}
