package fdbqueue_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/internal/cli"
	"github.com/fdbqueue/fdbqueue/kv"
)

// The cost claims of the fdbqueue command (internal/cli: its doc comments
// and help text, and docs/cli.md), checked as TestCostClaims
// checks the layers': each command runs against the counted database, and
// every transaction it runs is listed. A command opens new handles, so
// its first read of a queue also reads the stored configuration.

// cliBackend hands the commands the counted database.
type cliBackend struct{ db kv.Database }

func (cliBackend) AddFlags(*flag.FlagSet) {}
func (b cliBackend) Open(context.Context) (kv.Database, func(), error) {
	return b.db, func() {}, nil
}

// readyTicker ticks whenever asked: watch samples at once.
type readyTicker struct{}

func (readyTicker) C() <-chan time.Time {
	c := make(chan time.Time, 1)
	c <- time.Time{}
	return c
}
func (readyTicker) Stop() {}

// cli runs the command args on the counted database and fails unless it
// succeeds.
func (e *costEnv) cli(terminal bool, args ...string) error {
	var out bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &out, Terminal: terminal, Backend: cliBackend{e.db},
		NewTicker: func(time.Duration) cli.Ticker { return readyTicker{} }}
	if code := cli.Run(e.ctx, args, env); code != cli.ExitOK {
		return fmt.Errorf("fdbqueue %s: exit %d: %s", strings.Join(args, " "), code, out.String())
	}
	return nil
}

// The queue paths of the env's handles, as --queue takes them.
var (
	cliQueue = []string{"--queue", "cost/q"}
	cliPQ    = []string{"--queue", "test/cost-pq", "--kind", "priority"}
	cliJobs  = []string{"--queue", "test/cost-jobs", "--kind", "jobs"}
)

func cliArgs(base []string, args ...string) []string { return append(args, base...) }

// The transactions every command but push starts with.
var (
	// requireQueue: one snapshot range read of one key, in its own
	// read-only transaction (no check of the configuration).
	queueExists = cost{SnapRange: 1, RoundTrips: 1}
	// check: the layer's Depth on a new handle: the counters and the
	// stored record, snapshot reads in one round trip, and the read
	// conflict on the record's epoch key of a handle with no record cached.
	configCheck = cost{MetadataVersion: mvRead, SnapGet: 1, SnapRange: 1, RoundTrips: 1, ReadConflict: 1}
	// The depth counters (Depth, the record cached).
	depthRead = cost{MetadataVersion: mvRead, SnapRange: 1, RoundTrips: 1}
	// One page of a paged scan (pageRange): a read-only transaction of
	// one snapshot range read.
	scanPage = cost{SnapRange: 1, RoundTrips: 1}
	// The job commands' check: JobQueue.Stats on a new handle, which
	// checks the stored configuration too (the record, and the epoch's
	// read conflict).
	cliJobsCheck = cost{MetadataVersion: mvRead, SnapGet: 3 + 1, SnapRange: 3, RoundTrips: 1, ReadConflict: 1}
	// A Dequeue or DequeueBatch of n items under an ID of the command's
	// (settle: WithOpID), as the handle's first operation: its record and
	// marker read, the head's snapshot read and conflict range, the
	// declared retention's read (first operation), the clears, a record
	// per item, the marker's write and the depth's add.
	cliPop = func(n int) cost {
		return cost{MetadataVersion: mvRead, Get: 1, SnapGet: 2, SnapRange: 1, RoundTrips: 1, Clear: n, Set: n,
			VersionstampedValue: 1, Add: 1, ReadConflict: 1}
	}
)

func cliCostClaims() []costClaim {
	return []costClaim{
		{
			name:  "cli stats",
			claim: "stats gathers the numbers: the depth (DepthSource), the head's age (one small read), and paged scans of the meta subspace (the staged line, one per line; the journal). Each is its own read-only transaction with snapshot reads",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "stats")...) },
			// No age on the recipe's keys: no read for it.
			want: []cost{queueExists, configCheck, depthRead, scanPage, scanPage},
		},
		{
			name:  "cli stats/versionstamp",
			claim: "(oldestAge) Cost: one read version and one range read of one key, snapshot",
			opts:  []fdbqueue.Option{fdbqueue.WithVersionstampOrder()},
			setup: func(e *costEnv) { e.fill(3) },
			op: func(e *costEnv) error {
				return e.cli(false, cliArgs(cliQueue, "stats", "--layout", "versionstamp")...)
			},
			want: []cost{queueExists, configCheck, depthRead, scanPage, scanPage, scanPage},
		},
		{
			name:  "cli stats/priority",
			claim: "paged scans of the meta subspace (the staged line, one per line: two for a priority queue; the journal)",
			setup: func(e *costEnv) { e.pfill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliPQ, "stats")...) },
			want:  []cost{queueExists, configCheck, depthRead, scanPage, scanPage, scanPage},
		},
		{
			name:  "cli stats --scan",
			claim: "scanDepth (the layers' Len: a snapshot scan of every item, in transactions of up to 100,000 keys)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "stats", "--scan")...) },
			want:  []cost{queueExists, configCheck, depthRead, scanPage, scanPage},
		},
		{
			name:  "cli peek",
			claim: "readEntries ... Cost: one range read per pageSize items, each in its own transaction",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "peek")...) },
			want:  []cost{queueExists, configCheck, scanPage},
		},
		{
			name:  "cli list --limit 0",
			claim: "readEntries ... Cost: one range read per pageSize items (10,000), each in its own transaction",
			setup: func(e *costEnv) {
				const n = 10_001
				for i := 0; i < n; i += 1000 {
					batch := make([][]byte, min(1000, n-i))
					for j := range batch {
						batch[j] = []byte{byte(j)}
					}
					require.NoError(e.t, e.q.EnqueueBatch(e.ctx, e.raw, batch))
				}
			},
			op:   func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "list", "--limit", "0")...) },
			want: []cost{queueExists, configCheck, scanPage, scanPage},
		},
		{
			name:  "cli pop",
			claim: "pop removes up to n items in one transaction (Dequeue/DequeueBatch ...), exactly once (see settle)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "pop")...) },
			want:  []cost{queueExists, configCheck, cliPop(1)},
		},
		{
			name:  "cli pop -n 2",
			claim: "-n: most items to remove, in one transaction",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "pop", "-n", "2")...) },
			want:  []cost{queueExists, configCheck, cliPop(2)},
		},
		{
			name:  "cli push",
			claim: "every command but push checks (that something is stored); push adds values in order: a FIFO queue in EnqueueBatch transactions",
			setup: func(e *costEnv) {},
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "push", "a", "b", "c")...) },
			// EnqueueBatch under the command's ID, as the handle's first
			// operation: the tail's snapshot read, the record and the
			// marker, the declared retention; the items, the record, the
			// marker and the depth's add.
			want: []cost{configCheck, {MetadataVersion: mvRead, Get: 1, SnapGet: 2, SnapRange: 1, RoundTrips: 1, Set: 3 + 1,
				VersionstampedValue: 1, Add: 1}},
		},
		{
			name:  "cli watch --count 2",
			claim: "watch prints a sample at once and then at every tick: ... the depth (DepthSource: the depth counters, one small read per sample)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliQueue, "watch", "--count", "2")...) },
			want:  []cost{queueExists, configCheck, depthRead, depthRead},
		},
		{
			name:  "cli drain --batch 2, on a terminal",
			claim: "drain removes items in batches of batch (one transaction each, exactly once) ...: on a terminal a progress bar ... (its total is the depth at the start, from the depth counters)",
			setup: func(e *costEnv) { e.fill(3) },
			op:    func(e *costEnv) error { return e.cli(true, cliArgs(cliQueue, "drain", "--batch", "2")...) },
			// The second batch also clears the first's records (kept
			// under its ID: a range clear), and reads the declared
			// retention no more; the last finds the queue empty and,
			// under its ID, commits a write conflict on the ID's record
			// key (WithOpID: an earlier call's take may still land).
			want: []cost{queueExists, configCheck, depthRead, cliPop(2),
				{MetadataVersion: mvRead, Get: 1, SnapGet: 1, SnapRange: 1, RoundTrips: 1, Clear: 1, ClearRange: 1, Set: 1,
					VersionstampedValue: 1, Add: 1, ReadConflict: 1},
				{MetadataVersion: mvRead, Get: 1, SnapGet: 1, SnapRange: 1, RoundTrips: 1, ReadConflict: 1, WriteConflict: 1}},
		},
		{
			name:  "cli stats --kind jobs",
			claim: "(docs/cli.md) stats --kind jobs is JobQueue.Stats: ... from counters in one snapshot read transaction, without scanning the jobs",
			setup: func(e *costEnv) { e.kill(""); e.jfill(2) },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "stats")...) },
			// The one Stats checks the stored configuration too (a new
			// handle: the record, and the epoch's read conflict).
			want: []cost{queueExists, {MetadataVersion: mvRead, SnapGet: 3 + 1, SnapRange: 3, RoundTrips: 1, ReadConflict: 1}},
		},
		{
			name:  "cli dead --limit 0",
			claim: "--limit: most dead jobs to show; 0: every one, read in pages of 100 (one transaction each)",
			setup: func(e *costEnv) {
				for range 101 {
					e.kill("")
				}
			},
			op: func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "dead", "--limit", "0")...) },
			// ListDead: the list, then the values, in two round trips.
			want: []cost{queueExists, {MetadataVersion: mvRead, SnapGet: 3 + 1, SnapRange: 3, RoundTrips: 1, ReadConflict: 1},
				{MetadataVersion: mvRead, Range: 1, Get: 100, RoundTrips: 2},
				{MetadataVersion: mvRead, Range: 1, Get: 1, RoundTrips: 2}},
		},
		{
			name:  "cli job",
			claim: "(docs/cli.md) job ID is JobQueue.Job: ... One read-only transaction of two round trips, no write",
			setup: func(e *costEnv) { e.setLease("u") },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "job", e.job.String())...) },
			want:  []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Get: 3, RoundTrips: 2}},
		},
		{
			name:  "cli cancel",
			claim: "(docs/cli.md) cancel ID is JobQueue.Cancel: removes a queued or leased job for good ... in one transaction, exactly once under commit_unknown_result",
			setup: func(e *costEnv) { e.setLease("u") },
			op:    func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "cancel", e.job.String())...) },
			// Cancel of a leased job with a unique key under an ID of the
			// command's (settle: WithOpID), as the handle's first
			// operation: the journal's reads under that ID, the index
			// entry, then the job's record (two round trips); the three
			// clears, three counter adds, two compare-and-clears, the
			// journal record and its marker.
			want: []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Get: 3, SnapGet: 2, RoundTrips: 2,
				Clear: 3, Add: 3, CompareAndClear: 2, Set: 1, VersionstampedValue: 1}},
		},
		{
			name:  "cli cancel --dry-run",
			claim: "(docs/cli.md) cancel --dry-run shows the job as job does and changes nothing",
			setup: func(e *costEnv) { e.queueJob("") },
			op: func(e *costEnv) error {
				return e.cli(false, cliArgs(cliJobs, "cancel", "--dry-run", e.job.String())...)
			},
			want: []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Get: 3, RoundTrips: 2}},
		},
		{
			name:  "cli schedules",
			claim: "(docs/cli.md) schedules is JobQueue.Schedules: ... read in pages of 1,000, each one read-only transaction of one range read",
			setup: func(e *costEnv) {
				_, err := e.jq.Schedule(e.ctx, e.raw, costSchedule(""), time.Time{})
				require.NoError(e.t, err)
			},
			op:   func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "schedules")...) },
			want: []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
		{
			name:  "cli unschedule",
			claim: "(docs/cli.md) unschedule NAME is JobQueue.Unschedule: removes the schedule's marker ... in one transaction, exactly once under commit_unknown_result",
			setup: func(e *costEnv) {
				_, err := e.jq.Schedule(e.ctx, e.raw, costSchedule(""), time.Time{})
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error { return e.cli(false, cliArgs(cliJobs, "unschedule", "cost")...) },
			// Unschedule under an ID of the command's (settle: WithOpID),
			// as the handle's first operation: the journal's reads under
			// that ID and the marker, in one round trip; the clear, the
			// journal record and its marker.
			want: []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Get: 2, SnapGet: 2, RoundTrips: 1,
				Clear: 1, Set: 1, VersionstampedValue: 1}},
		},
		{
			name:  "cli unschedule --dry-run",
			claim: "(docs/cli.md) unschedule --dry-run shows the schedule as schedules does and changes nothing",
			setup: func(e *costEnv) {
				_, err := e.jq.Schedule(e.ctx, e.raw, costSchedule(""), time.Time{})
				require.NoError(e.t, err)
			},
			op: func(e *costEnv) error {
				return e.cli(false, cliArgs(cliJobs, "unschedule", "--dry-run", "cost")...)
			},
			want: []cost{queueExists, cliJobsCheck, {MetadataVersion: mvRead, Range: 1, RoundTrips: 1}},
		},
	}
}

// TestCLICostClaims checks the fdbqueue command's cost claims.
func TestCLICostClaims(t *testing.T) { runCostClaims(t, cliCostClaims()) }
