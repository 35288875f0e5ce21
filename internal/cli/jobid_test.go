package cli

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// The demo's live jobs (fixed entropy: the same on every run, as
// deadDemoID). The lease of the leased one has a random ID.
const (
	leasedDemoID  = "b8f812645dff9d06c9d4893719cf24d9" // "render invoice 4411", leased for 10 minutes
	dueDemoID     = "b29039d16dfca375f20a13b6454bc197" // "reindex search", due for 25 minutes
	delayedDemoID = "e2ff4f8357134f2516feb6bc59062741" // "send weekly digest", due in an hour
	missingID     = "00112233445566778899aabbccddeeff" // no job
)

// libJob is the library's JobQueue.Job of id in demo/work.
func libJob(t *testing.T, db kv.Database, clock *memdb.ManualClock, id string) (fdbqueue.JobInfo, error) {
	t.Helper()
	jid, err := ParseJobID(id)
	require.NoError(t, err)
	return demoWorkQueue(t, clock).Job(context.Background(), db, jid)
}

// jobOf runs job --json on id and parses its output back.
func jobOf(t *testing.T, db kv.Database, onClock func(*Env), id string) JobJSON {
	t.Helper()
	r := runCLI(t, db, onClock, work("job", id, "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var j JobJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &j))
	return j
}

// job on the demo's dead, due and delayed jobs, text and JSON (the leased
// one's lease ID is random: TestJobLeased).
func TestJobGolden(t *testing.T) {
	db, _, onClock := demoJobs(t)
	for _, c := range []struct{ name, id string }{
		{"job_dead", deadDemoID}, {"job_due", dueDemoID}, {"job_delayed", delayedDemoID},
	} {
		for _, form := range []string{"txt", "json"} {
			t.Run(c.name+"."+form, func(t *testing.T) {
				a := work("job", c.id)
				if form == "json" {
					a = append(a, "--json")
				}
				r := runCLI(t, db, onClock, a...)
				require.Equal(t, ExitOK, r.code, r.stderr)
				assert.Empty(t, r.stderr)
				golden(t, c.name+"."+form, r.stdout)
			})
		}
	}
}

// A leased job shows its lease's deadline and ID (the library's), live
// and, once the deadline has passed, expired and due again.
func TestJobLeased(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	info, err := libJob(t, db, clock, leasedDemoID)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobLeased, info.State)
	lease := hex.EncodeToString(info.LeaseID[:])
	require.NotEqual(t, strings.Repeat("0", 32), lease)
	text := func(state string) string {
		return `job       ` + leasedDemoID + ` in ("demo", "work")
state     ` + state + `
due       2026-11-23T09:55:00Z (the lease's deadline)
lease     ` + lease + `
attempts  1/10
priority  5
unique    (none)
added     2026-11-23T09:45:00Z (` + clock.Now().Sub(t0.Add(45*time.Minute)).String() + ` ago)
reason    (none)
value     "render invoice 4411"
`
	}
	r := runCLI(t, db, onClock, work("job", leasedDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, text("leased, lease ends in 10m0s"), r.stdout)
	assert.Equal(t, JobJSON{ID: leasedDemoID, State: "leased", DueAt: "2026-11-23T09:55:00Z", LeaseID: lease,
		Attempts: 1, MaxAttempts: 10, Priority: 5, Added: "2026-11-23T09:45:00Z", Value: ptr("render invoice 4411")},
		jobOf(t, db, onClock, leasedDemoID))

	clock.Advance(11 * time.Minute)
	r = runCLI(t, db, onClock, work("job", leasedDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, text("leased, lease expired 1m0s ago: due again"), r.stdout)
}

func ptr[T any](v T) *T { return &v }

// job --json gives every field of the library's JobInfo, in each state,
// parsed back: the times to the microsecond, a value that is not UTF-8 in
// base64 (the text form quotes its bytes), a nack's reason.
func TestJobJSONMatchesLibrary(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	ctx := context.Background()
	bin := []byte{0xff, 0x00, 'a', 0xfe}
	res, err := q.Add(ctx, db, fdbqueue.Job{Value: bin, Priority: -3, MaxAttempts: 4, UniqueKey: "bin-1",
		RunAt: clock.Now().Add(-time.Hour - 1500*time.Nanosecond)})
	require.NoError(t, err)
	ls, err := q.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, res.ID, ls[0].JobID)
	clock.Advance(1234567 * time.Nanosecond)
	_, err = q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: "flaky \"upstream\"", Delay: 90 * time.Second})
	require.NoError(t, err)

	parse := func(s string) time.Time {
		if s == "" {
			return time.Time{}
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return tm
	}
	for _, id := range []string{res.ID.String(), deadDemoID, leasedDemoID, dueDemoID, delayedDemoID} {
		info, err := libJob(t, db, clock, id)
		require.NoError(t, err)
		j := jobOf(t, db, onClock, id)
		assert.Equal(t, info.ID.String(), j.ID)
		assert.Equal(t, info.State.String(), j.State)
		assert.True(t, info.DueAt.Equal(parse(j.DueAt)), "%s: due %v, JSON %q", id, info.DueAt, j.DueAt)
		assert.True(t, info.Added.Equal(parse(j.Added)), "%s: added %v, JSON %q", id, info.Added, j.Added)
		assert.True(t, info.Died.Equal(parse(j.Died)), "%s: died %v, JSON %q", id, info.Died, j.Died)
		if info.State == fdbqueue.JobLeased {
			assert.Equal(t, hex.EncodeToString(info.LeaseID[:]), j.LeaseID)
		} else {
			assert.Empty(t, j.LeaseID)
		}
		assert.Equal(t, []any{info.Attempts, info.MaxAttempts, info.Priority, info.UniqueKey, info.Reason},
			[]any{j.Attempts, j.MaxAttempts, j.Priority, j.UniqueKey, j.Reason})
		v := []byte(nil)
		if j.Value != nil {
			v = []byte(*j.Value)
			assert.Empty(t, j.ValueBase64)
		} else {
			v, err = base64.StdEncoding.DecodeString(j.ValueBase64)
			require.NoError(t, err)
		}
		assert.Equal(t, info.Value, v, id)
	}

	j := jobOf(t, db, onClock, res.ID.String())
	assert.Nil(t, j.Value)
	assert.Equal(t, base64.StdEncoding.EncodeToString(bin), j.ValueBase64)
	assert.Equal(t, "queued", j.State)
	assert.Equal(t, 1, j.Attempts)
	r := runCLI(t, db, onClock, work("job", res.ID.String())...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "state     queued, delayed: due in 1m30s\n")
	assert.Contains(t, r.stdout, "priority  -3\n")
	assert.Contains(t, r.stdout, "unique    \"bin-1\"\n")
	assert.Contains(t, r.stdout, `reason    "flaky \"upstream\""`+"\n")
	assert.Contains(t, r.stdout, `value     "\xff\x00a\xfe"`+"\n")
}

// job and cancel on an ID that no job has: exit 1, fdbqueue.ErrJobNotFound,
// a message that says where the command looked, nothing on stdout.
func TestJobNotFound(t *testing.T) {
	db, _, onClock := demoJobs(t)
	before := allPairs(t, db)
	for _, a := range [][]string{
		work("job", missingID), work("job", missingID, "--json"),
		work("cancel", missingID), work("cancel", "--dry-run", missingID),
	} {
		t.Run(strings.Join(a, " "), func(t *testing.T) {
			r := runCLI(t, db, onClock, a...)
			assert.Equal(t, ExitFailure, r.code)
			assert.Empty(t, r.stdout)
			assert.Equal(t, "fdbqueue "+a[0]+": fdbqueue: job not found: "+missingID+
				`: no job with this ID in ("demo", "work") (never added, or acked, cancelled or deleted since)`+"\n", r.stderr)
			assert.ErrorIs(t, runErr(db, a...), fdbqueue.ErrJobNotFound)
		})
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")
}

// cancel removes a leased job for good: job then finds nothing, the
// counts drop by one leased job, its value and index entry are gone, and
// the holder of its lease can no longer ack it (fdbqueue.ErrLeaseLost).
// A second cancel of it fails with fdbqueue.ErrJobNotFound.
func TestCancelLeased(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoWorkQueue(t, clock)
	ctx := context.Background()
	res, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("mine"), UniqueKey: "mine-1", RunAt: clock.Now().Add(-2 * time.Hour)})
	require.NoError(t, err)
	ls, err := q.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, res.ID, ls[0].JobID)
	id := res.ID.String()
	assert.Equal(t, "leased", jobOf(t, db, onClock, id).State)
	before := jobStatsOf(t, db, onClock)

	r := runCLI(t, db, onClock, work("cancel", id)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, `cancelled job `+id+` in ("demo", "work")`+"\n", r.stdout)
	assert.Empty(t, r.stderr)

	r = runCLI(t, db, onClock, work("job", id)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "fdbqueue job: fdbqueue: job not found: "+id)
	assert.ErrorIs(t, runErr(db, work("job", id)...), fdbqueue.ErrJobNotFound)
	assert.Nil(t, jobKey(t, db, "v", id), "its value is gone")
	assert.Nil(t, jobKey(t, db, "x", id), "its index entry is gone")
	after := jobStatsOf(t, db, onClock)
	before.Leased--
	assert.Equal(t, before, after)
	assert.ErrorIs(t, q.Ack(ctx, db, ls[0]), fdbqueue.ErrLeaseLost)
	_, err = q.Add(ctx, db, fdbqueue.Job{Value: []byte("mine again"), UniqueKey: "mine-1"})
	assert.NoError(t, err, "its unique key is free")

	r = runCLI(t, db, onClock, work("cancel", id)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, "fdbqueue cancel: fdbqueue: job not found: "+id+
		`: no job with this ID in ("demo", "work") (never added, or acked, cancelled or deleted since)`+"\n", r.stderr)
}

// cancel removes a due and a delayed job as well; the demo's other jobs
// stay.
func TestCancelQueued(t *testing.T) {
	db, _, onClock := demoJobs(t)
	for _, id := range []string{dueDemoID, delayedDemoID} {
		r := runCLI(t, db, onClock, work("cancel", id)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		assert.ErrorIs(t, runErr(db, work("job", id)...), fdbqueue.ErrJobNotFound)
	}
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 1, Due: 1, Delayed: 0, Leased: 1, Dead: 1, OldestDueSecs: 1200}, st)
	assert.Equal(t, "queued", jobOf(t, db, onClock, "e469c51dd55f6ddc2ee1615137f8b2eb").State)
	assert.Equal(t, "leased", jobOf(t, db, onClock, leasedDemoID).State)
	assert.Equal(t, "dead", jobOf(t, db, onClock, deadDemoID).State)
}

// cancel refuses a dead job (fdbqueue.ErrJobNotFound, exit 1), with and
// without --dry-run, naming the commands that do take it, and changes
// nothing: the job stays dead.
func TestCancelDeadRefused(t *testing.T) {
	db, _, onClock := demoJobs(t)
	before := allPairs(t, db)
	for _, extra := range [][]string{nil, {"--dry-run"}} {
		a := work("cancel", append([]string{deadDemoID}, extra...)...)
		r := runCLI(t, db, onClock, a...)
		assert.Equal(t, ExitFailure, r.code)
		assert.Empty(t, r.stdout)
		assert.Equal(t, "fdbqueue cancel: fdbqueue: job not found: "+deadDemoID+" is dead: cancel removes a queued or leased job "+
			"(delete-dead removes a dead one, requeue-dead puts it back)\n", r.stderr)
		assert.ErrorIs(t, runErr(db, a...), fdbqueue.ErrJobNotFound)
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")
	assert.Equal(t, "dead", jobOf(t, db, onClock, deadDemoID).State)
}

// cancel --dry-run shows the job as job does, says what it would do and
// writes nothing.
func TestCancelDryRun(t *testing.T) {
	db, _, onClock := demoJobs(t)
	before := allPairs(t, db)
	r := runCLI(t, db, onClock, work("job", dueDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	shown := r.stdout
	r = runCLI(t, db, onClock, work("cancel", "--dry-run", dueDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, shown+`would cancel job `+dueDemoID+` in ("demo", "work") (dry run: nothing changed)`+"\n", r.stdout)
	require.Equal(t, before, allPairs(t, db), "nothing written")
}

// Under commit_unknown_result, applied or not, and when the command is
// interrupted with its commit in flight (settled with its operation ID),
// cancel removes the job once and reports success: not ErrJobNotFound for
// a job its own first commit removed.
func TestCancelCommitUnknown(t *testing.T) {
	for _, fault := range []error{kv.ErrCommitUnknownResult, kv.CommitInterrupted(context.Canceled)} {
		for _, applied := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/applied=%v", fault, applied), func(t *testing.T) {
				db, _, onClock := demoJobs(t)
				db.FailNextCommit(fault, applied)
				r := runCLI(t, db, onClock, work("cancel", leasedDemoID)...)
				require.Equal(t, ExitOK, r.code, r.stderr)
				assert.Equal(t, `cancelled job `+leasedDemoID+` in ("demo", "work")`+"\n", r.stdout)
				assert.Equal(t, int64(1), db.Stats().InjectedForced, "the fault was injected")
				st := jobStatsOf(t, db, onClock)
				assert.Equal(t, JobStatsJSON{Queue: `("demo", "work")`, Kind: "jobs", Queued: 3, Due: 2, Delayed: 1, Dead: 1, OldestDueSecs: 1500}, st)
				assert.ErrorIs(t, runErr(db, work("job", leasedDemoID)...), fdbqueue.ErrJobNotFound)
			})
		}
	}
}

// At its due time a queued job is due, and at its deadline a lease has
// ended (JobJSON.DueAt: at or after it the job is due again), as the
// library's Lease takes it.
func TestJobStateAtItsDueInstant(t *testing.T) {
	at := t0.Add(time.Hour)
	assert.Equal(t, "queued, due for 0s", jobState(fdbqueue.JobInfo{State: fdbqueue.JobQueued, DueAt: at}, at))
	assert.Equal(t, "queued, delayed: due in 0s", jobState(fdbqueue.JobInfo{State: fdbqueue.JobQueued, DueAt: at}, at.Add(-time.Nanosecond)))
	assert.Equal(t, "leased, lease expired 0s ago: due again", jobState(fdbqueue.JobInfo{State: fdbqueue.JobLeased, DueAt: at}, at))
	assert.Equal(t, "leased, lease ends in 0s", jobState(fdbqueue.JobInfo{State: fdbqueue.JobLeased, DueAt: at}, at.Add(-time.Nanosecond)))
}
