package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// demoJobs is the demo database and its manual clock; the job commands
// run on that clock (Env.Now), so ages are the same on every run.
func demoJobs(t *testing.T) (*memdb.DB, *memdb.ManualClock, func(*Env)) {
	t.Helper()
	clock := memdb.NewManualClock(t0)
	db, err := OpenDemo(context.Background(), clock)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db, clock, func(e *Env) { e.Now = clock.Now }
}

func work(cmd string, extra ...string) []string {
	return append([]string{cmd, "--queue", "demo/work"}, extra...)
}

// demoWorkQueue opens demo/work with the library, on the demo's clock.
func demoWorkQueue(t *testing.T, clock *memdb.ManualClock) *fdbqueue.JobQueue {
	t.Helper()
	q, err := fdbqueue.NewJobQueue(mustSub(t, "demo", "work"), fdbqueue.JobQueueConfig{Choice: 1, Clock: envClock(clock.Now)})
	require.NoError(t, err)
	return q
}

// stats, dead and requeue-dead on the demo job queue, text and JSON.
func TestJobsGolden(t *testing.T) {
	db, _, onClock := demoJobs(t)
	cases := []struct {
		name string
		args []string
	}{
		{"stats_work.txt", work("stats", "--kind", "jobs")},
		{"stats_work.json", work("stats", "--kind", "jobs", "--json")},
		{"dead_work.txt", work("dead")},
		{"dead_work.json", work("dead", "--json")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, db, onClock, c.args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			golden(t, c.name, r.stdout)
		})
	}
}

const deadDemoID = "d599bfd5bef0ee993962e6f28af3f987" // the demo's dead job (fixed entropy)

func jobStatsOf(t *testing.T, db kv.Database, onClock func(*Env)) JobStatsJSON {
	t.Helper()
	r := runCLI(t, db, onClock, work("stats", "--kind", "jobs", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var st JobStatsJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	return st
}

// requeue-dead puts the dead job back, due at once with its attempts reset
// (a worker leases it as attempt 1); a second requeue of the same ID finds
// no dead job: exit 1, fdbqueue.ErrJobNotFound.
func TestRequeueDead(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	r := runCLI(t, db, onClock, work("requeue-dead", deadDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "requeued 1 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)

	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 4, Due: 3, Delayed: 1, Leased: 1, OldestDueSecs: 1500}, st)
	r = runCLI(t, db, onClock, work("dead")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "(no dead jobs)\n", r.stdout)

	r = runCLI(t, db, onClock, work("requeue-dead", deadDemoID)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Equal(t, "requeued 0 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)
	assert.Equal(t, "fdbqueue requeue-dead: 1 job not requeued: fdbqueue: job not found: "+deadDemoID+" is not a dead job\n", r.stderr)
	assert.ErrorIs(t, runErr(db, work("requeue-dead", deadDemoID)...), fdbqueue.ErrJobNotFound)

	// Requeued now, it is the newest due job (the others are due since
	// 25 and 20 minutes): the third lease in strict order takes it.
	q, err := fdbqueue.NewJobQueue(mustSub(t, "demo", "work"), fdbqueue.JobQueueConfig{Choice: 1, Clock: envClock(clock.Now)})
	require.NoError(t, err)
	ls, err := q.Lease(context.Background(), db, 3, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 3)
	assert.Equal(t, "charge order 4411", string(ls[2].Value))
	assert.Equal(t, deadDemoID, ls[2].JobID.String())
	assert.Equal(t, 1, ls[2].Attempt)
}

// killJobs adds jobs with one attempt each, leases them and nacks them
// into the dead-letter list, one per second of the clock.
func killJobs(t *testing.T, db kv.Database, q *fdbqueue.JobQueue, clock *memdb.ManualClock, jobs ...fdbqueue.Job) []fdbqueue.JobID {
	t.Helper()
	ctx := context.Background()
	var ids []fdbqueue.JobID
	for _, j := range jobs {
		j.MaxAttempts, j.RunAt = 1, clock.Now().Add(-time.Hour) // before every demo job
		res, err := q.Add(ctx, db, j)
		require.NoError(t, err)
		ls, err := q.Lease(ctx, db, 1, time.Minute)
		require.NoError(t, err)
		require.Equal(t, res.ID, ls[0].JobID)
		dead, err := q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: "failed"})
		require.NoError(t, err)
		require.True(t, dead)
		ids = append(ids, res.ID)
		clock.Advance(time.Second)
	}
	return ids
}

// dead lists oldest death first, pages without losing or repeating a job
// (pages of 2 here), honours --limit, and shows values at the limits:
// 100,000 bytes (FDB's value limit), all-zero and all-0xff (base64 in
// --json). requeue-dead --all then requeues every one, each exactly once.
func TestDeadListingAndRequeueAll(t *testing.T) {
	defer func(n int) { deadPage = n }(deadPage)
	deadPage = 2
	db, clock, onClock := demoJobs(t)
	q, err := fdbqueue.NewJobQueue(mustSub(t, "demo", "work"), fdbqueue.JobQueueConfig{Choice: 1, Clock: envClock(clock.Now)})
	require.NoError(t, err)
	clock.Advance(time.Second)
	big := bytes.Repeat([]byte("v"), 100_000)
	ff := bytes.Repeat([]byte{0xff}, 100_000)
	zero := make([]byte, 64)
	ids := killJobs(t, db, q, clock, fdbqueue.Job{Value: big}, fdbqueue.Job{Value: ff}, fdbqueue.Job{Value: zero}, fdbqueue.Job{Value: []byte("e")})

	list := func(extra ...string) []DeadJobJSON {
		r := runCLI(t, db, onClock, work("dead", append([]string{"--json"}, extra...)...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		var out []DeadJobJSON
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
		return out
	}
	all := list("--limit", "0")
	require.Len(t, all, 5)
	want := append([]string{deadDemoID}, idStrings(ids)...)
	assert.Equal(t, want, deadIDs(all))
	assert.Equal(t, string(big), *all[1].Value)
	assert.Equal(t, base64.StdEncoding.EncodeToString(ff), all[2].ValueBase64)
	assert.Nil(t, all[2].Value)
	assert.Equal(t, string(zero), *all[3].Value)
	assert.Equal(t, want[:3], deadIDs(list("--limit", "3")))
	assert.Equal(t, want, deadIDs(list())) // default limit 100

	r := runCLI(t, db, onClock, work("requeue-dead", "--all")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "requeued 5 of 5 dead jobs in (\"demo\", \"work\")\n", r.stdout)
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, int64(0), st.Dead)
	assert.Equal(t, int64(8), st.Queued, "3 demo jobs and 5 requeued")
	assert.Empty(t, list())

	// Each requeued job comes back once, with its value unchanged.
	got := map[string]string{}
	ctx := context.Background()
	for {
		ls, err := q.Lease(ctx, db, 10, time.Minute)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		require.NoError(t, err)
		for _, l := range ls {
			require.NotContains(t, got, l.JobID.String())
			got[l.JobID.String()] = string(l.Value)
			require.NoError(t, q.Ack(ctx, db, l))
		}
	}
	assert.Len(t, got, 7, "every due job (not the delayed digest), none twice")
	assert.Equal(t, string(big), got[ids[0].String()])
	assert.Equal(t, string(ff), got[ids[1].String()])
	assert.Equal(t, string(zero), got[ids[2].String()])
}

func idStrings(ids []fdbqueue.JobID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

func deadIDs(ds []DeadJobJSON) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// A dead job whose unique key a live job now holds stays dead; the others
// are requeued; the exit code is 1 and the error is
// fdbqueue.ErrUniqueKeyHeld.
func TestRequeueDeadUniqueKeyHeld(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	ids := killJobs(t, db, q, clock, fdbqueue.Job{Value: []byte("other")})
	_, err := q.Add(context.Background(), db, fdbqueue.Job{Value: []byte("charge order 4411, again"), UniqueKey: "charge-4411"})
	require.NoError(t, err)

	r := runCLI(t, db, onClock, work("requeue-dead", "--all")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Equal(t, "requeued 1 of 2 dead jobs in (\"demo\", \"work\")\n", r.stdout)
	assert.Contains(t, r.stderr, "job "+deadDemoID+`: fdbqueue: unique key held by another job: "charge-4411"`)
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, int64(1), st.Dead)
	r = runCLI(t, db, onClock, work("dead", "--json")...)
	assert.Contains(t, r.stdout, deadDemoID)
	assert.NotContains(t, r.stdout, ids[0].String())

	r = runCLI(t, db, onClock, work("requeue-dead", deadDemoID)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.ErrorIs(t, runErr(db, work("requeue-dead", deadDemoID)...), fdbqueue.ErrUniqueKeyHeld)
}

// Under commit_unknown_result, applied or not, requeue-dead requeues the
// job exactly once: the retry finds the journal record (applied) or does
// the work (not applied). Counts would show a double requeue (Queued 5,
// Dead −1).
func TestRequeueDeadCommitUnknown(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			db, _, onClock := demoJobs(t)
			db.FailNextCommit(kv.ErrCommitUnknownResult, applied)
			r := runCLI(t, db, onClock, work("requeue-dead", deadDemoID)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			st := jobStatsOf(t, db, onClock)
			assert.Equal(t, int64(0), st.Dead)
			assert.Equal(t, int64(4), st.Queued)
			assert.Equal(t, int64(1), db.Stats().InjectedForced, "the fault was injected")
		})
	}
}

func TestJobsBadInput(t *testing.T) {
	db, _, onClock := demoJobs(t)
	cases := []struct {
		name string
		args []string
		want error
	}{
		{"dead on a fifo queue", work("dead", "--kind", "fifo"), ErrUnknownKind},
		{"requeue on a priority queue", work("requeue-dead", "--kind", "priority", "--all"), ErrUnknownKind},
		{"jobs with a layout", work("stats", "--kind", "jobs", "--layout", "versionstamp"), ErrUnknownKind},
		{"jobs with tuple values", work("dead", "--encoding", "tuple"), ErrUnknownKind},
		{"jobs with staging", work("dead", "--staging", "batches"), ErrUnknownKind},
		{"list a job queue", work("list", "--kind", "jobs"), ErrUnknownKind},
		{"pop a job queue", work("pop", "--kind", "jobs"), ErrUnknownKind},
		{"push to a job queue", work("push", "--kind", "jobs", "x"), ErrUnknownKind},
		{"drain a job queue", work("drain", "--kind", "jobs"), ErrUnknownKind},
		{"watch a job queue", work("watch", "--kind", "jobs"), ErrUnknownKind},
		{"dead negative limit", work("dead", "--limit", "-1"), ErrBadArgument},
		{"dead extra args", work("dead", "x"), ErrBadArgument},
		{"zero resolution", work("dead", "--stats-resolution", "0s"), ErrBadArgument},
		// The library's own minimum (JobQueueConfig.StatsResolution, 1ms)
		// would refuse it too, but as ErrInvalidArgument, not a usage error.
		{"resolution under 1ms", work("dead", "--stats-resolution", "999us"), ErrBadArgument},
		{"requeue nothing", work("requeue-dead"), ErrBadArgument},
		{"requeue all and an ID", work("requeue-dead", "--all", deadDemoID), ErrBadArgument},
		{"requeue a bad ID", work("requeue-dead", "not-hex"), ErrBadArgument},
		{"requeue a short ID", work("requeue-dead", deadDemoID[:30]), ErrBadArgument},
		{"requeue a long ID", work("requeue-dead", deadDemoID+"00"), ErrBadArgument},
		{"requeue a good and a bad ID", work("requeue-dead", deadDemoID, "zz"), ErrBadArgument},
		{"job without an ID", work("job"), ErrBadArgument},
		{"job with two IDs", work("job", deadDemoID, dueDemoID), ErrBadArgument},
		{"job a bad ID", work("job", "not-hex"), ErrBadArgument},
		{"job a short ID", work("job", deadDemoID[:30]), ErrBadArgument},
		{"job a long ID", work("job", deadDemoID+"00"), ErrBadArgument},
		{"job on a fifo queue", work("job", "--kind", "fifo", deadDemoID), ErrUnknownKind},
		{"job zero resolution", work("job", "--stats-resolution", "0s", deadDemoID), ErrBadArgument},
		{"cancel without an ID", work("cancel"), ErrBadArgument},
		{"cancel with two IDs", work("cancel", dueDemoID, delayedDemoID), ErrBadArgument},
		{"cancel a bad ID", work("cancel", "zz"), ErrBadArgument},
		{"cancel a short ID", work("cancel", dueDemoID[:31]), ErrBadArgument},
		{"dry-run cancel a bad ID", work("cancel", "--dry-run", "g"+dueDemoID[1:]), ErrBadArgument},
		{"cancel on a priority queue", work("cancel", "--kind", "priority", dueDemoID), ErrUnknownKind},
		{"schedules with an argument", work("schedules", "report"), ErrBadArgument},
		{"schedules on a fifo queue", work("schedules", "--kind", "fifo"), ErrUnknownKind},
		{"schedules zero resolution", work("schedules", "--stats-resolution", "0s"), ErrBadArgument},
		{"unschedule without a name", work("unschedule"), ErrBadArgument},
		{"unschedule two names", work("unschedule", "a", "b"), ErrBadArgument},
		{"unschedule an empty name", work("unschedule", ""), ErrBadArgument},
		{"dry-run unschedule an empty name", work("unschedule", "--dry-run", ""), ErrBadArgument},
		{"unschedule on a priority queue", work("unschedule", "--kind", "priority", "report"), ErrUnknownKind},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runErr(db, c.args...)
			require.ErrorIs(t, err, c.want)
			var ue *UsageError
			require.ErrorAs(t, err, &ue)
			r := runCLI(t, db, onClock, c.args...)
			assert.Equal(t, ExitUsage, r.code)
			assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue "+c.args[0]+": "), r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	// Bad input changed nothing: the dead job is still dead.
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 3, Due: 2, Delayed: 1, Leased: 1, Dead: 1, OldestDueSecs: 1500}, st)
}

// The stats' due/delayed split follows the clock: an hour later the
// delayed digest is due and the 10-minute lease has expired (due again).
func TestJobStatsFollowClock(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	clock.Advance(time.Hour + time.Second)
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 3, Due: 4, Delayed: 0, Leased: 0, ExpiredLeases: 1, Dead: 1,
		OldestDueSecs: (time.Hour + 25*time.Minute + time.Second).Seconds()}, st)
	r := runCLI(t, db, onClock, work("stats", "--kind", "jobs")...)
	assert.Contains(t, r.stdout, "leased   0 live, 1 expired (due again)\n")
	assert.Contains(t, r.stdout, "queued   3 (due 3, delayed 0)\n")
}

// docs/cli.md's job-queue console block runs as shown, each command on a
// fresh demo database, as each run of the binary with --demo starts (a
// manual clock stands in for the binary's wall clock).
func TestCLIDocJobQueueExample(t *testing.T) {
	checkCLIDocBlock(t, "requeue-dead")
}

// checkCLIDocBlock runs the console block of docs/cli.md that contains marker as
// TestCLIDocJobQueueExample says.
func checkCLIDocBlock(t *testing.T, marker string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "cli.md"))
	require.NoError(t, err)
	var block string
	for _, b := range strings.Split(string(readme), "```console\n")[1:] {
		b = b[:strings.Index(b, "```")]
		if strings.Contains(b, marker) {
			block = b
		}
	}
	require.NotEmpty(t, block, "docs/cli.md has a console block with %s", marker)
	var cmd []string
	var want, got strings.Builder
	flush := func() {
		if cmd == nil {
			return
		}
		db, _, onClock := demoJobs(t)
		r := runCLI(t, db, onClock, cmd...)
		got.WriteString(r.stdout + r.stderr)
		if strings.Contains(want.String(), "exit ") {
			fmt.Fprintf(&got, "exit %d\n", r.code)
		} else {
			require.Equal(t, ExitOK, r.code, "%v: %s", cmd, r.stderr)
		}
		assert.Equal(t, want.String(), got.String(), "docs/cli.md output of fdbqueue %s", strings.Join(cmd, " "))
		want.Reset()
		got.Reset()
	}
	for _, line := range strings.SplitAfter(block, "\n") {
		if rest, ok := strings.CutPrefix(line, "$ fdbqueue "); ok {
			flush()
			rest, _, _ = strings.Cut(rest, "#")
			rest, _, _ = strings.Cut(rest, ";")
			cmd = strings.Fields(rest)
			continue
		}
		want.WriteString(line)
	}
	flush()
}

// A key in the dead-letter range that is not a dead job's: dead fails
// with the library's typed error (exit 1), and nothing is changed.
func TestDeadForeignKey(t *testing.T) {
	db, _, onClock := demoJobs(t)
	sub := mustSub(t, "demo", "work")
	key, err := sub.Pack(tuple.Tuple{"d", "not-a-time"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(key, []byte("stray"))
		return nil
	}))
	r := runCLI(t, db, onClock, work("dead")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Empty(t, r.stdout)
	var fe *fdbqueue.ForeignKeyError
	assert.ErrorAs(t, runErr(db, work("dead")...), &fe)
	r = runCLI(t, db, onClock, work("requeue-dead", "--all")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Equal(t, int64(1), jobStatsOf(t, db, onClock).Dead)
}

func TestUsageListsJobCommands(t *testing.T) {
	var b strings.Builder
	Usage(&b)
	assert.Contains(t, b.String(), "  requeue-dead ID...     job queue: put dead jobs back")
	assert.Contains(t, b.String(), "  dead                   job queue: list dead-lettered jobs")
	assert.Contains(t, b.String(), "  job          ID        job queue: show one job by ID")
	assert.Contains(t, b.String(), "  cancel       ID        job queue: remove a queued or leased job for good")
	assert.Contains(t, b.String(), "  schedules              job queue: list the periodic jobs' schedules")
	assert.Contains(t, b.String(), "  unschedule   NAME      job queue: remove a schedule's marker, leaving its jobs")
	assert.Contains(t, b.String(), "--kind fifo|priority|jobs")
}

// A requeue whose commit was in flight when the command was interrupted
// (kv.MaybeCommitted: Ctrl-C at the wrong moment) is settled with its
// operation ID, as push and pop are: the command reports what happened,
// the job requeued once, not a failure for a job that went back.
func TestRequeueDeadInterruptedCommitSettles(t *testing.T) {
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			db, _, onClock := demoJobs(t)
			db.FailNextCommit(kv.CommitInterrupted(context.Canceled), applied)
			r := runCLI(t, db, onClock, work("requeue-dead", deadDemoID)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Equal(t, "requeued 1 of 1 dead job in (\"demo\", \"work\")\n", r.stdout)
			st := jobStatsOf(t, db, onClock)
			assert.Equal(t, int64(0), st.Dead)
			assert.Equal(t, int64(4), st.Queued, "requeued once")
			assert.Equal(t, int64(1), db.Stats().InjectedForced, "the fault was injected")
		})
	}
}

// The job commands on a queue of another kind (the demo's fifo and
// priority queues) fail with fdbqueue.ErrConfigMismatch naming the stored
// kind, exit 1, and change nothing: a job queue's kind is stored with it,
// as a queue's is. (They used to report an empty job queue, and
// requeue-dead --all found nothing to requeue.)
func TestJobCommandsOnOtherKinds(t *testing.T) {
	db, _, onClock := demoJobs(t)
	all := func() []kv.KeyValue {
		kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			return tr.GetRange(kv.KeyRange{Begin: []byte{}, End: []byte{0xff}}, kv.RangeOptions{}).GetSlice()
		})
		require.NoError(t, err)
		return kvs
	}
	before := all()
	flag := map[string]string{"queue": "--kind fifo", "priority queue": "--kind priority"}
	for queue, stored := range map[string]string{"demo/jobs": "queue", "demo/tasks": "priority queue"} {
		for _, args := range [][]string{
			{"stats", "--kind", "jobs"},
			{"stats", "--kind", "jobs", "--json"},
			{"dead"},
			{"requeue-dead", "--all"},
			{"requeue-dead", deadDemoID},
			{"job", deadDemoID},
			{"job", deadDemoID, "--json"},
			{"cancel", dueDemoID},
			{"cancel", "--dry-run", dueDemoID},
			{"schedules"},
			{"schedules", "--json"},
			{"unschedule", "report"},
			{"unschedule", "--dry-run", "report"},
		} {
			args := append(args, "--queue", queue)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				err := runErr(db, args...)
				var me *fdbqueue.ConfigMismatchError
				require.ErrorAs(t, err, &me)
				assert.Equal(t, "kind", me.Field)
				assert.Equal(t, stored, me.Stored)
				assert.Equal(t, "job queue", me.Handle)
				r := runCLI(t, db, onClock, args...)
				assert.Equal(t, ExitFailure, r.code)
				if args[0] == "requeue-dead" && r.stdout != "" {
					assert.True(t, strings.HasPrefix(r.stdout, "requeued 0 of"), r.stdout) // its summary
				} else {
					assert.Empty(t, r.stdout)
				}
				assert.Contains(t, r.stderr, "fdbqueue "+args[0]+": ")
				assert.Contains(t, r.stderr, `kind is "`+stored+`" in the database, "job queue" in the handle`)
				assert.Contains(t, r.stderr, "(the flags say --kind jobs; the queue's stored configuration says "+flag[stored]+")")
			})
		}
	}
	require.Equal(t, before, all(), "nothing written")
}
