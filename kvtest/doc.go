// Package kvtest is the conformance suite that every kv backend runs. It
// checks a backend against the FoundationDB transaction semantics that
// fdbqueue's layers rely on, using only the kv interfaces, so that the
// embedded engine (memdb) and the adapter to a real cluster (fdbkv) are held
// to the same rules.
//
// # What it covers
//
// Each rule, and each error code a backend can produce, is a
// named subtest, grouped by area; each rule found in FoundationDB's source
// cites the file it comes from:
//
//   - Reads: point and range reads, limits and direction, read-your-writes
//     through sets, clears and clear-ranges, snapshot reads, one read
//     version per transaction.
//   - Conflicts: which reads add read conflict ranges (point reads, range
//     reads truncated by a limit in either direction, reads that ran to the
//     end, reads answered from the transaction's own writes, explicit
//     conflict ranges), that snapshot reads and blind writes never conflict,
//     and that read-only transactions always commit. Conflicts are driven
//     deterministically with two hand-interleaved transactions.
//   - Atomics: Add (widths, wraparound, missing keys), Max, Min, the bitwise
//     and byte-wise operations, CompareAndClear, AppendIfFits, and that
//     atomic operations add no read conflict.
//   - Versionstamps: versionstamped keys and values, their order, the
//     versionstamp and committed version a transaction reports.
//   - MetadataVersion: the metadata version key (kv.MetadataVersionKey),
//     its bump, its read at the read version and the conflicts of that
//     read, and the unreadable read after the transaction's own bump.
//   - Watches: firing after a change and not before, the watch's own read
//     (its conflict, its errors), firing at once on the transaction's own
//     change, failing with a failed commit, Cancel, the watch limit.
//   - Limits and Time: key, value and transaction size limits (counted as
//     FDB counts them), the system key space and deferred errors, inverted
//     ranges, transaction_too_old.
//   - Errors, Retry and Faults: error classification code by code as
//     FoundationDB's fdb_error_predicate, OnError, Cancel, Reset clearing
//     options (OnError keeping them), operations during a commit, the
//     standard retry loop with its options, context cancellation,
//     injected commit failures (cluster_version_changed included), and
//     injected read and read version failures.
//   - Concurrency: many goroutines updating one counter, and transfers
//     audited by concurrent readers.
//
// Subtests are named Area/Check (for example
// "Conflicts/ForwardLimitNoConflictAfterLastKey"), so one area or check can
// be run with go test -run.
//
// # Plugging in a backend
//
// A backend implements Harness (and, if it can, FaultInjector) in its own
// test file and calls RunConformanceTests:
//
//	package mydb_test
//
//	import (
//		"context"
//		"testing"
//		"time"
//
//		"github.com/fdbqueue/fdbqueue/kv"
//		"github.com/fdbqueue/fdbqueue/kvtest"
//		"example.com/mydb"
//	)
//
//	type harness struct{ db *mydb.DB; clock *mydb.ManualClock }
//
//	func (h *harness) Database() kv.Database           { return h.db }
//	func (h *harness) Prefix() []byte                  { return []byte("kvtest/") }
//	func (h *harness) AdvanceTime(d time.Duration)     { h.clock.Advance(d) }
//	func (h *harness) Faults() kvtest.FaultInjector    { return h.db }
//	func (h *harness) Close()                          { h.db.Close() }
//
//	func TestConformance(t *testing.T) {
//		kvtest.RunConformanceTests(t, func(ctx context.Context, t *testing.T) (kvtest.Harness, error) {
//			clock := mydb.NewManualClock(time.Unix(0, 0))
//			return &harness{db: mydb.New(mydb.WithClock(clock)), clock: clock}, nil
//		})
//	}
//
// Every subtest gets a fresh harness and closes it when it ends. Every key
// the suite writes lies under Harness.Prefix, and the harness must hand that
// range over empty.
//
// # Capabilities
//
// Backends differ in what a test can make them do, not in the rules they
// follow. Those differences are Harness methods rather than skip lists: a
// backend that cannot inject commit failures (a real cluster) returns nil
// from Harness.Faults, and the checks that need injected failures skip
// themselves with a one-line reason; a FaultInjector that is also a
// CommitHolder lets the suite act on a transaction while its commit is in
// flight (used_during_commit), and one that is also a ReadFaultInjector
// lets it fail reads and read version requests (what a failed read does
// to the commit and to the retry loop). Harness.AdvanceTime lets an engine with
// an injectable clock move time instantly, while a real cluster's harness
// simply waits.
//
// # Timing
//
// The suite never sleeps to order events: interleavings are built by hand,
// time moves through Harness.AdvanceTime, and goroutines synchronise with
// channels. Two checks bound real time: a watch that must not fire is
// waited on with a short context deadline (and must report
// context.DeadlineExceeded), and MaxRetryDelayCapsBackoff bounds how long
// twenty capped backoffs may take.
package kvtest
