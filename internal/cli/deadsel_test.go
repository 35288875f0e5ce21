package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// killWithReason adds a job per value with one attempt, leases it and
// nacks it into the dead-letter list with reason, one per second of the
// clock (the first dies at the clock's now).
func killWithReason(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, clock *memdb.ManualClock, reason string, values ...string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for _, v := range values {
		res, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte(v), MaxAttempts: 1, RunAt: clock.Now().Add(-time.Hour)})
		require.NoError(t, err)
		ls, err := q.Lease(ctx, db, 1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, res.ID, ls[0].JobID)
		dead, err := q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: reason})
		require.NoError(t, err)
		require.True(t, dead)
		ids = append(ids, res.ID.String())
		clock.Advance(time.Second)
	}
	return ids
}

// deadList runs dead --json --limit 0 with extra and returns the IDs.
func deadList(t *testing.T, db kv.Database, onClock func(*Env), extra ...string) []string {
	t.Helper()
	r := runCLI(t, db, onClock, work("dead", append([]string{"--json", "--limit", "0"}, extra...)...)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var out []DeadJobJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	return deadIDs(out)
}

// jobKey reads the job queue's key (elem..., id) in demo/work.
func jobKey(t *testing.T, db kv.Database, elem string, id string) []byte {
	t.Helper()
	b, err := ParseJobID(id)
	require.NoError(t, err)
	key, err := mustSub(t, "demo", "work").Pack(tuple.Tuple{elem, b[:]})
	require.NoError(t, err)
	v, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]byte, error) {
		return tr.Get(key).Get()
	})
	require.NoError(t, err)
	return v
}

// dead, requeue-dead and delete-dead select dead jobs by reason substring
// and death time (RFC 3339 or a duration before now), across pages of
// the list (pages of 2 here); --limit counts the jobs selected; --dry-run
// lists what would go and writes nothing; delete-dead removes the selected
// jobs' records, indexes and values and nothing else.
func TestDeadFilters(t *testing.T) {
	defer func(n int) { deadPage = n }(deadPage)
	deadPage = 2
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	clock.Advance(time.Second)
	// The demo's job died before start.
	start := clock.Now()
	a := killWithReason(t, db, q, clock, "timeout talking to payments", "a1", "a2") // die at start, start+1s
	c := killWithReason(t, db, q, clock, "bad input", "c1")                         // at start+2s; now start+3s
	rfc := func(d time.Duration) string { return start.Add(d).Format(time.RFC3339) }

	assert.Equal(t, a, deadList(t, db, onClock, "--reason", "timeout"))
	assert.Equal(t, a[:1], deadList(t, db, onClock, "--reason", "timeout", "--limit", "1"))
	assert.Equal(t, c, deadList(t, db, onClock, "--reason", "input", "--limit", "1"), "the limit counts selected jobs, across pages")
	assert.Empty(t, deadList(t, db, onClock, "--reason", "Timeout"), "case-sensitive")
	assert.Equal(t, []string{a[1], c[0]}, deadList(t, db, onClock, "--died-after", rfc(time.Second)), "at or after")
	assert.Equal(t, []string{deadDemoID, a[0]}, deadList(t, db, onClock, "--died-before", rfc(time.Second)), "strictly before")
	assert.Equal(t, []string{a[1], c[0]}, deadList(t, db, onClock, "--died-after", "2500ms"), "2.5s before now (start+3s)")
	assert.Equal(t, a[:1], deadList(t, db, onClock, "--reason", "timeout", "--died-before", "2500ms"))
	assert.Equal(t, []string{a[0], a[1]}, deadList(t, db, onClock, "--died-after", rfc(0), "--died-before", rfc(2*time.Second)))

	// A dry run lists the jobs as dead does and changes nothing.
	before := allPairs(t, db)
	r := runCLI(t, db, onClock, work("delete-dead", "--reason", "timeout", "--dry-run")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 3, r.stdout)
	assert.True(t, strings.HasPrefix(lines[0], "   1  "+a[0]+"  attempts 1/1  died "), lines[0])
	assert.True(t, strings.HasSuffix(lines[1], `"a2"  reason "timeout talking to payments"`), lines[1])
	assert.Equal(t, `would delete 2 dead jobs in ("demo", "work") (dry run: nothing changed)`, lines[2])
	r = runCLI(t, db, onClock, work("requeue-dead", "--all", "--reason", "card", "--dry-run")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, deadDemoID)
	assert.True(t, strings.HasSuffix(r.stdout, "\nwould requeue 1 dead job in (\"demo\", \"work\") (dry run: nothing changed)\n"), r.stdout)
	require.Equal(t, before, allPairs(t, db), "a dry run writes nothing")

	r = runCLI(t, db, onClock, work("delete-dead", "--reason", "timeout")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "deleted 2 of 2 dead jobs in (\"demo\", \"work\")\n", r.stdout)
	assert.Equal(t, []string{deadDemoID, c[0]}, deadList(t, db, onClock))
	for _, id := range a {
		assert.Nil(t, jobKey(t, db, "v", id), "value of %s", id)
		assert.Nil(t, jobKey(t, db, "x", id), "index of %s", id)
	}
	assert.Equal(t, []byte("c1"), jobKey(t, db, "v", c[0]))
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, int64(2), st.Dead)
	assert.Equal(t, int64(3), st.Queued, "the live jobs untouched")

	r = runCLI(t, db, onClock, work("requeue-dead", "--died-after", rfc(2*time.Second))...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "requeued 1 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)
	assert.Equal(t, []string{deadDemoID}, deadList(t, db, onClock))
	st = jobStatsOf(t, db, onClock)
	assert.Equal(t, int64(1), st.Dead)
	assert.Equal(t, int64(4), st.Queued)
}

// delete-dead ID deletes the demo's dead job for good: not dead, not
// queued, not requeueable; its value is gone. Deleting it again fails
// with fdbqueue.ErrJobNotFound, exit 1, the summary counting 0.
func TestDeleteDeadByID(t *testing.T) {
	db, _, onClock := demoJobs(t)
	r := runCLI(t, db, onClock, work("delete-dead", deadDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "deleted 1 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 3, Due: 2, Delayed: 1, Leased: 1, OldestDueSecs: 1500}, st)
	assert.Nil(t, jobKey(t, db, "v", deadDemoID))

	r = runCLI(t, db, onClock, work("delete-dead", deadDemoID)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Equal(t, "deleted 0 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)
	assert.Equal(t, "fdbqueue delete-dead: 1 job not deleted: fdbqueue: job not found: "+deadDemoID+" is not a dead job\n", r.stderr)
	assert.ErrorIs(t, runErr(db, work("delete-dead", deadDemoID)...), fdbqueue.ErrJobNotFound)
	assert.ErrorIs(t, runErr(db, work("requeue-dead", deadDemoID)...), fdbqueue.ErrJobNotFound)
	assert.Equal(t, int64(3), jobStatsOf(t, db, onClock).Queued, "not requeued")
}

// A dry run given IDs lists those that are dead and fails for the others
// as the command would (ErrJobNotFound, exit 1), writing nothing.
func TestDeadActionDryRunIDs(t *testing.T) {
	db, _, onClock := demoJobs(t)
	before := allPairs(t, db)
	const other = "00112233445566778899aabbccddeeff"
	r := runCLI(t, db, onClock, work("delete-dead", "--dry-run", other, deadDemoID, other)...)
	assert.Equal(t, ExitFailure, r.code)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 2, r.stdout)
	assert.True(t, strings.HasPrefix(lines[0], "   1  "+deadDemoID+"  "), lines[0])
	assert.Equal(t, `would delete 1 dead job in ("demo", "work") (dry run: nothing changed)`, lines[1])
	assert.Equal(t, "fdbqueue delete-dead: 1 job would not be deleted: fdbqueue: job not found: "+other+" is not a dead job\n", r.stderr)
	assert.ErrorIs(t, runErr(db, work("delete-dead", "--dry-run", other)...), fdbqueue.ErrJobNotFound)
	require.Equal(t, before, allPairs(t, db))
}

// delete-dead --all deletes every dead job across pages of the list (2
// here), in one small transaction per job (as requeue-dead does: each
// far inside FDB's limits, whatever the number), leaving the live jobs'
// values.
func TestDeleteDeadAll(t *testing.T) {
	defer func(n int) { deadPage = n }(deadPage)
	deadPage = 2
	db, clock, onClock := demoJobs(t)
	clock.Advance(time.Second) // after the demo's dead job
	ids := append([]string{deadDemoID}, killWithReason(t, db, demoWorkQueue(t, clock), clock, "x", "1", "2", "3", "4")...)
	require.Equal(t, ids, deadList(t, db, onClock))
	commits := db.Stats().Commits
	r := runCLI(t, db, onClock, work("delete-dead", "--all")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "deleted 5 of 5 dead jobs in (\"demo\", \"work\")\n", r.stdout)
	assert.Equal(t, int64(5), db.Stats().Commits-commits, "one transaction per job")
	assert.Empty(t, deadList(t, db, onClock))
	vr, err := mustSub(t, "demo", "work").Range("v")
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(vr, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	assert.Len(t, kvs, 4, "the values of the demo's four live jobs")
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, int64(0), st.Dead)
	assert.Equal(t, int64(3), st.Queued)
}

// failCommitAt runs transactions on db as every backend's Transact does,
// and fails the at-th commit with err, without committing it.
func failCommitAt(db *memdb.DB, at int, err error) *commitHook {
	n := 0
	return &commitHook{DB: db, hook: func(commit func() error) error {
		if n++; n == at {
			return err
		}
		return commit()
	}}
}

// A failure midway says what was done: interrupted after its first
// deletion, delete-dead --all stops and says it deleted 1 of 3; failed by
// the database at its second, it stops there (the third is not
// attempted) and says so. The jobs not deleted stay dead.
func TestDeleteDeadFailsMidway(t *testing.T) {
	t.Run("interrupted", func(t *testing.T) {
		raw, clock, onClock := demoJobs(t)
		killWithReason(t, raw, demoWorkQueue(t, clock), clock, "x", "1", "2")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out, errb strings.Builder
		code := Run(ctx, work("delete-dead", "--all"), Env{Stdout: &out, Stderr: &errb, Now: clock.Now,
			Backend: testBackend{cancelOnCommit(raw, cancel)}})
		assert.Equal(t, ExitFailure, code)
		assert.Empty(t, out.String())
		assert.True(t, strings.HasPrefix(errb.String(), "fdbqueue delete-dead: deleted 1 of 3 jobs: context canceled"), errb.String())
		assert.Len(t, deadList(t, raw, onClock), 2)
	})
	t.Run("database error", func(t *testing.T) {
		raw, clock, onClock := demoJobs(t)
		clock.Advance(time.Second) // after the demo's dead job
		ids := killWithReason(t, raw, demoWorkQueue(t, clock), clock, "x", "1", "2")
		broken := errors.New("disk on fire")
		var out, errb strings.Builder
		code := Run(context.Background(), work("delete-dead", "--all"), Env{Stdout: &out, Stderr: &errb, Now: clock.Now,
			Backend: testBackend{failCommitAt(raw, 2, broken)}})
		assert.Equal(t, ExitFailure, code)
		assert.Empty(t, out.String())
		assert.Equal(t, fmt.Sprintf("fdbqueue delete-dead: deleted 1 of 3 jobs, then stopped at job %s: disk on fire\n", ids[0]), errb.String())
		assert.Equal(t, ids, deadList(t, raw, onClock))
	})
}

// Bad selections are usage errors (exit 2) that write nothing; an empty
// --reason (an unset shell variable) is refused rather than read as "every
// reason".
func TestDeadSelectionBadInput(t *testing.T) {
	db, _, onClock := demoJobs(t)
	before := allPairs(t, db)
	cases := []struct {
		name string
		args []string
		want error
	}{
		{"delete nothing", work("delete-dead"), ErrBadArgument},
		{"delete all and an ID", work("delete-dead", "--all", deadDemoID), ErrBadArgument},
		{"delete a filter and an ID", work("delete-dead", "--reason", "card", deadDemoID), ErrBadArgument},
		{"delete a bad ID", work("delete-dead", "zz"), ErrBadArgument},
		{"delete an empty reason", work("delete-dead", "--reason", ""), ErrBadArgument},
		{"requeue an empty reason", work("requeue-dead", "--reason="), ErrBadArgument},
		{"dead with an empty reason", work("dead", "--reason", ""), ErrBadArgument},
		{"not a time", work("delete-dead", "--died-after", "yesterday"), ErrBadArgument},
		{"a time in the future", work("delete-dead", "--died-before", "-5m"), ErrBadArgument},
		{"a time just in the future", work("delete-dead", "--died-before", "-1ns"), ErrBadArgument},
		{"an empty time", work("dead", "--died-before", ""), ErrBadArgument},
		{"an empty range", work("delete-dead", "--died-after", "1h", "--died-before", "2h"), ErrBadArgument},
		// [after, before) is empty when they are the same time.
		{"a range of one instant", work("delete-dead", "--died-after", "2026-11-23T09:00:00Z", "--died-before", "2026-11-23T09:00:00Z"), ErrBadArgument},
		{"delete on a fifo queue", work("delete-dead", "--kind", "fifo", "--all"), ErrUnknownKind},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runErr(db, c.args...)
			require.ErrorIs(t, err, c.want)
			r := runCLI(t, db, onClock, c.args...)
			assert.Equal(t, ExitUsage, r.code)
			assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue "+c.args[0]+": "), r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	require.Equal(t, before, allPairs(t, db))
}

// --limit 0: the library's ListDead refuses a limit below 1
// (ErrInvalidArgument); dead's --limit 0 means every dead job, which it
// reads in pages of ListDead calls, and its help says so.
func TestDeadLimitZero(t *testing.T) {
	defer func(n int) { deadPage = n }(deadPage)
	deadPage = 2
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	_, err := q.ListDead(context.Background(), db, nil, 0)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	clock.Advance(time.Second) // after the demo's dead job
	ids := append([]string{deadDemoID}, killWithReason(t, db, q, clock, "x", "1", "2", "3", "4")...)
	assert.Equal(t, ids, deadList(t, db, onClock), "five dead jobs in pages of two")
	var errb strings.Builder
	require.Equal(t, ExitOK, Run(context.Background(), []string{"dead", "-h"}, Env{Stderr: &errb, Backend: testBackend{db}}))
	assert.Contains(t, errb.String(), "0: every one, read in pages of 2 (one transaction each)")
}

// countReads counts the read-only transactions run through it (ListDead's
// pages among them).
type countReads struct {
	kv.Database
	n atomic.Int64
}

func (d *countReads) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	d.n.Add(1)
	return d.Database.ReadTransact(ctx, fn)
}

// A filter with a small --limit reads the list in full pages: the limit
// counts the jobs selected, not those read, so a page cut to what is
// left of the limit would read a list of non-matching jobs one by one,
// a transaction each. Here the one match is last of six dead jobs (pages
// of two): --limit 1 reads no more pages than --limit 0, which reads to
// the end.
func TestDeadFilterReadsFullPages(t *testing.T) {
	db, clock, onClock, q := pagedDead(t)
	killWithReason(t, db, q, clock, "other", "1", "2", "3", "4")
	match := killWithReason(t, db, q, clock, "match", "5")
	one := deadReads(t, db, onClock, match, "--reason", "match", "--limit", "1")
	all := deadReads(t, db, onClock, match, "--reason", "match", "--limit", "0")
	require.LessOrEqual(t, one, all, "--limit 1 read %d transactions, --limit 0 %d", one, all)
}

// --died-after starts the scan at the first job that died at or after it
// (DeadCursorAt) instead of reading the jobs that died before: here six
// of them, three pages of two, before the one selected, which a scan of
// the whole list reads.
func TestDeadDiedAfterSkipsTheEarlierDead(t *testing.T) {
	db, clock, onClock, q := pagedDead(t)
	killWithReason(t, db, q, clock, "early", "1", "2", "3", "4", "5", "6")
	after := clock.Now()
	late := killWithReason(t, db, q, clock, "late", "7")
	seek := deadReads(t, db, onClock, late, "--died-after", after.Format(time.RFC3339Nano))
	scan := deadReads(t, db, onClock, late, "--reason", "late")
	require.Less(t, seek+2, scan, "--died-after read %d transactions, a scan of the whole list %d", seek, scan)
}

// --died-before ends the scan at the first job that died at or after it
// (the list is in order of death) instead of reading on through the jobs
// that died later: here six of them, three pages of two, after the ones
// selected, which a scan of the whole list reads.
func TestDeadDiedBeforeStopsAtTheLaterDead(t *testing.T) {
	db, clock, onClock, q := pagedDead(t)
	early := append([]string{deadDemoID}, killWithReason(t, db, q, clock, "early", "1")...)
	before := clock.Now()
	killWithReason(t, db, q, clock, "late", "2", "3", "4", "5", "6", "7")
	stop := deadReads(t, db, onClock, early, "--died-before", before.Format(time.RFC3339Nano))
	scan := deadReads(t, db, onClock, early[1:], "--reason", "early")
	require.Less(t, stop+2, scan, "--died-before read %d transactions, a scan of the whole list %d", stop, scan)
}

// A dry run given job IDs stops reading the list once it has found every
// one of them: here the first dead job, before six more (three pages of
// two), which a dry run of --all reads.
func TestDeadActionDryRunIDsStopsWhenAllFound(t *testing.T) {
	db, clock, onClock, q := pagedDead(t)
	killWithReason(t, db, q, clock, "x", "1", "2", "3", "4", "5", "6")
	reads := func(args ...string) int64 {
		cr := &countReads{Database: db}
		r := runCLI(t, cr, onClock, work("delete-dead", append([]string{"--dry-run"}, args...)...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		return cr.n.Load()
	}
	one, all := reads(deadDemoID), reads("--all")
	require.Less(t, one+2, all, "a dry run of the first dead job read %d transactions, of --all %d", one, all)
}

// pagedDead is the demo's database with the dead list read in pages of
// two for the test, and its job queue, the clock past the demo's dead job.
func pagedDead(t *testing.T) (*memdb.DB, *memdb.ManualClock, func(*Env), *fdbqueue.JobQueue) {
	t.Helper()
	old := deadPage
	t.Cleanup(func() { deadPage = old })
	deadPage = 2
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	clock.Advance(time.Second)
	return db, clock, onClock, q
}

// deadReads runs dead --json --limit 0 with extra, requires the job IDs
// want, and returns how many read transactions it ran.
func deadReads(t *testing.T, db kv.Database, onClock func(*Env), want []string, extra ...string) int64 {
	t.Helper()
	cr := &countReads{Database: db}
	require.Equal(t, want, deadList(t, cr, onClock, extra...))
	return cr.n.Load()
}
