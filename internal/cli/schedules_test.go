package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// demoScheduleQueue opens demo/work with the library on the demo's clock,
// with a fixed entropy source, so that the jobs its schedules add have
// the same IDs on every run.
func demoScheduleQueue(t *testing.T, clock *memdb.ManualClock) *fdbqueue.JobQueue {
	t.Helper()
	q, err := fdbqueue.NewJobQueue(mustSub(t, "demo", "work"), fdbqueue.JobQueueConfig{Choice: 1, Clock: envClock(clock.Now)},
		fdbqueue.WithEntropy(rand.NewChaCha8([32]byte{'s', 'c', 'h', 'e', 'd'})))
	require.NoError(t, err)
	return q
}

// demoSchedules schedules four periodic jobs on the demo's job queue (at
// 09:45), besides the demo's own "hourly-cleanup" (09:00): "hourly-report"
// (its 09:00 slot), a daily one whose name is not UTF-8 (00:00), "sync",
// whose slot is skipped for its unique key, which a job holds, and "ahead",
// scheduled by a clock two hours ahead (11:00).
func demoSchedules(t *testing.T, db kv.Database, clock *memdb.ManualClock) *fdbqueue.JobQueue {
	t.Helper()
	ctx := context.Background()
	q := demoScheduleQueue(t, clock)
	_, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte("sync running"), UniqueKey: "sync-1"})
	require.NoError(t, err)
	pj := func(name string, every time.Duration, uk string) fdbqueue.PeriodicJob {
		return fdbqueue.PeriodicJob{Name: name, Every: every, Job: func(slot time.Time) fdbqueue.Job {
			return fdbqueue.Job{Value: []byte(name + " " + slot.UTC().Format(time.RFC3339)), UniqueKey: uk}
		}}
	}
	for _, c := range []struct {
		pj  fdbqueue.PeriodicJob
		now time.Time
	}{
		{pj("hourly-report", time.Hour, ""), clock.Now()},
		{pj("digest\xff", 24*time.Hour, ""), clock.Now()},
		{pj("sync", time.Minute, "sync-1"), clock.Now()},
		{pj("ahead", time.Hour, ""), clock.Now().Add(2 * time.Hour)},
	} {
		_, err := q.Schedule(ctx, db, c.pj, c.now)
		require.NoError(t, err)
	}
	return q
}

// libSchedules is every schedule of q, as the library lists them.
func libSchedules(t *testing.T, db kv.Database, q *fdbqueue.JobQueue) []fdbqueue.ScheduleInfo {
	t.Helper()
	all, err := q.Schedules(context.Background(), db, nil, 100)
	require.NoError(t, err)
	return all
}

// schedules on the demo's job queue with its schedule and four more, text
// and JSON; once every one is unscheduled, "(no schedules)" and [].
func TestSchedulesGolden(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	for _, form := range []string{"txt", "json"} {
		t.Run(form, func(t *testing.T) {
			a := work("schedules")
			if form == "json" {
				a = append(a, "--json")
			}
			r := runCLI(t, db, onClock, a...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			assert.Empty(t, r.stderr)
			golden(t, "schedules_work."+form, r.stdout)
		})
	}
	for _, si := range libSchedules(t, db, q) {
		_, err := q.Unschedule(context.Background(), db, si.Name)
		require.NoError(t, err)
	}
	for _, form := range []string{"txt", "json"} {
		a := work("schedules")
		if form == "json" {
			a = append(a, "--json")
		}
		r := runCLI(t, db, onClock, a...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		assert.Equal(t, map[string]string{"txt": "(no schedules)\n", "json": "[]\n"}[form], r.stdout)
	}
}

// schedules --json gives every field of the library's ScheduleInfo, in
// the library's order, parsed back: the slot to the microsecond, a name
// that is not UTF-8 in base64, a skipped slot's holder.
func TestSchedulesJSONMatchesLibrary(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	r := runCLI(t, db, onClock, work("schedules", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var got []ScheduleJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	lib := libSchedules(t, db, q)
	require.Len(t, got, len(lib))
	for i, si := range lib {
		j := got[i]
		name := ""
		if j.Name != nil {
			name = *j.Name
			assert.Empty(t, j.NameBase64)
		} else {
			b, err := base64.StdEncoding.DecodeString(j.NameBase64)
			require.NoError(t, err)
			name = string(b)
		}
		assert.Equal(t, si.Name, name)
		slot, err := time.Parse(time.RFC3339Nano, j.Slot)
		require.NoError(t, err)
		assert.True(t, si.Slot.Equal(slot), "%q: slot %v, JSON %q", si.Name, si.Slot, j.Slot)
		assert.Equal(t, si.ID.String(), j.JobID)
		assert.Equal(t, si.Duplicate, j.Duplicate)
	}
	assert.Nil(t, got[1].Name, "digest\\xff is not UTF-8")
	assert.True(t, got[4].Duplicate, "sync was skipped")
}

// schedules reads the markers in pages, each its own transaction: a list
// longer than a page comes out whole, once each, in name order.
func TestSchedulesPages(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoScheduleQueue(t, clock)
	defer func(n int) { schedulePage = n }(schedulePage)
	schedulePage = 2
	want := []string{`"hourly-cleanup"`} // the demo's
	for i := range 5 {
		name := fmt.Sprintf("s%d", i)
		want = append(want, `"`+name+`"`)
		_, err := q.Schedule(context.Background(), db, fdbqueue.PeriodicJob{Name: name, Every: time.Hour,
			Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{} }}, time.Time{})
		require.NoError(t, err)
	}
	r := runCLI(t, db, onClock, work("schedules")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		names = append(names, strings.Fields(line)[1])
	}
	assert.Equal(t, want, names)
}

// unschedule removes the marker and prints what it held; the schedule is
// no longer listed, by the command or the library, and its jobs stay. A
// second unschedule of it fails with fdbqueue.ErrScheduleNotFound, exit 1.
func TestUnscheduleCommand(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	before := jobStatsOf(t, db, onClock)
	r := runCLI(t, db, onClock, work("unschedule", "hourly-report")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Empty(t, r.stderr)
	golden(t, "unschedule_work.txt", r.stdout)
	assert.Equal(t, before, jobStatsOf(t, db, onClock), "the jobs stay")
	for _, si := range libSchedules(t, db, q) {
		assert.NotEqual(t, "hourly-report", si.Name)
	}
	r = runCLI(t, db, onClock, work("schedules")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.NotContains(t, r.stdout, "hourly-report")
	assert.Equal(t, 4, strings.Count(r.stdout, "\n"))

	// A name that is not UTF-8 is given as its bytes.
	r = runCLI(t, db, onClock, work("unschedule", "digest\xff")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `unscheduled "digest\xff" in ("demo", "work")`)

	for _, a := range [][]string{work("unschedule", "hourly-report"), work("unschedule", "--dry-run", "hourly-report"), work("unschedule", "never")} {
		r = runCLI(t, db, onClock, a...)
		assert.Equal(t, ExitFailure, r.code)
		assert.Empty(t, r.stdout)
		name := a[len(a)-1]
		assert.Equal(t, `fdbqueue unschedule: fdbqueue: schedule not found: "`+name+
			`": no schedule of this name in ("demo", "work") (never scheduled, or unscheduled already)`+"\n", r.stderr)
		assert.ErrorIs(t, runErr(db, a...), fdbqueue.ErrScheduleNotFound)
	}
}

// unschedule --dry-run shows the schedule as schedules does, says what it
// would do and writes nothing; a name listed after the one asked for (the
// page the lookup reads starts at the name) is not taken for it.
func TestUnscheduleDryRun(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	demoSchedules(t, db, clock)
	before := allPairs(t, db)
	r := runCLI(t, db, onClock, work("schedules")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var line string
	for _, l := range strings.SplitAfter(r.stdout, "\n") {
		if strings.Contains(l, `"hourly-report"`) {
			line = "   1" + l[4:]
		}
	}
	require.NotEmpty(t, line)
	r = runCLI(t, db, onClock, work("unschedule", "--dry-run", "hourly-report")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, line+`would unschedule "hourly-report" in ("demo", "work") (dry run: nothing changed)`+"\n", r.stdout)

	r = runCLI(t, db, onClock, work("unschedule", "--dry-run", "hourly")...) // "hourly-report" comes first after it
	assert.Equal(t, ExitFailure, r.code)
	assert.ErrorIs(t, runErr(db, work("unschedule", "--dry-run", "hourly")...), fdbqueue.ErrScheduleNotFound)
	require.Equal(t, before, allPairs(t, db), "nothing written")
}

// Under commit_unknown_result, applied or not, and when the command is
// interrupted with its commit in flight (settled with its operation ID),
// unschedule removes the marker once and reports it: not
// ErrScheduleNotFound for a marker its own first commit removed.
func TestUnscheduleCommitUnknown(t *testing.T) {
	for _, fault := range []error{kv.ErrCommitUnknownResult, kv.CommitInterrupted(context.Canceled)} {
		for _, applied := range []bool{true, false} {
			t.Run(fmt.Sprintf("%v/applied=%v", fault, applied), func(t *testing.T) {
				db, clock, onClock := demoJobs(t)
				q := demoSchedules(t, db, clock)
				db.FailNextCommit(fault, applied)
				r := runCLI(t, db, onClock, work("unschedule", "sync")...)
				require.Equal(t, ExitOK, r.code, r.stderr)
				assert.Contains(t, r.stdout, `unscheduled "sync" in ("demo", "work")`)
				assert.Equal(t, int64(1), db.Stats().InjectedForced, "the fault was injected")
				assert.Len(t, libSchedules(t, db, q), 4)
			})
		}
	}
}

// schedules and unschedule with a tenth of the reads and a twentieth of
// the read version requests failing (memdb.Faults, the retryable errors
// FoundationDB's storage servers and GRV proxies answer): the listing is
// the golden one, and unschedule removes the marker once.
func TestSchedulesUnderReadFaults(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	db.SetFaults(memdb.Faults{ReadErrors: 0.1, ReadVersionErrors: 0.05})
	for _, form := range []string{"txt", "json"} {
		a := work("schedules")
		if form == "json" {
			a = append(a, "--json")
		}
		r := runCLI(t, db, onClock, a...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		golden(t, "schedules_work."+form, r.stdout)
	}
	r := runCLI(t, db, onClock, work("unschedule", "--dry-run", "ahead")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, onClock, work("unschedule", "ahead")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, onClock, work("unschedule", "ahead")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "schedule not found")
	db.SetFaults(memdb.Faults{})
	assert.Len(t, libSchedules(t, db, q), 4)
}

// A listing or an unschedule whose output cannot be written fails (exit
// 1), in text as in JSON.
func TestSchedulesOutputErrorFails(t *testing.T) {
	db, clock, _ := demoJobs(t)
	demoSchedules(t, db, clock)
	for _, a := range [][]string{
		work("schedules"),
		work("schedules", "--json"),
		work("unschedule", "--dry-run", "sync"),
		work("unschedule", "sync"), // last: it removes what it fails to print
	} {
		r := runCLI(t, db, func(e *Env) { e.Stdout = &failAfter{n: 10} }, a...)
		assert.Equal(t, ExitFailure, r.code, "%q", a)
		assert.Contains(t, r.stderr, errFull.Error(), "%q", a)
	}
}

// A marker the library cannot read (here: another program's) is listed by
// schedules, text and JSON, in its place and the others as usual, with
// its size and bytes (the text shows the first 32 in hex, --json all of
// them, with the library's error); unschedule --dry-run shows it and
// changes nothing, and unschedule removes it. schedules used to fail
// (exit 1) on it, listing nothing, and unschedule could not remove it.
func TestSchedulesUnreadableMarker(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	ctx := context.Background()
	legacy, wide := []byte("cron=0 * * * *"), []byte(strings.Repeat("w", 40))
	for name, v := range map[string][]byte{"legacy": legacy, "wide": wide} {
		key, err := q.Subspace().Pack(tuple.Tuple{"p", name})
		require.NoError(t, err)
		_, err = kv.Transact(ctx, db, func(tr kv.Transaction) (struct{}, error) { tr.Set(key, v); return struct{}{}, nil })
		require.NoError(t, err)
	}
	r := runCLI(t, db, onClock, work("schedules")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 7, r.stdout)
	assert.Equal(t, `   5  "legacy"  unreadable marker of 14 bytes 63726f6e3d30202a202a202a202a  (Schedule fails on it; unschedule removes it)`, lines[4])
	assert.Equal(t, `   7  "wide"  unreadable marker of 40 bytes `+strings.Repeat("77", 32)+`...  (Schedule fails on it; unschedule removes it)`, lines[6])
	assert.Contains(t, lines[5], `"sync"  last slot`, "the schedules after it are listed")

	r = runCLI(t, db, onClock, work("schedules", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var got []ScheduleJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, 7)
	for i, raw := range map[int][]byte{4: legacy, 6: wide} {
		j := got[i]
		b, err := base64.StdEncoding.DecodeString(j.MarkerBase64)
		require.NoError(t, err)
		assert.Equal(t, raw, b)
		assert.Contains(t, j.Error, "periodic job marker")
		assert.Empty(t, j.Slot+j.JobID, "no slot or job to give")
		assert.NotContains(t, r.stdout, `"slot": ""`)
	}
	assert.Empty(t, got[5].Error)
	assert.NotEmpty(t, got[5].Slot)

	before := allPairs(t, db)
	r = runCLI(t, db, onClock, work("unschedule", "--dry-run", "legacy")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "   1"+lines[4][4:]+"\n"+`would unschedule "legacy" in ("demo", "work") (dry run: nothing changed)`+"\n", r.stdout)
	require.Equal(t, before, allPairs(t, db))

	r = runCLI(t, db, onClock, work("unschedule", "legacy")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "   1"+lines[4][4:]+"\n"+`unscheduled "legacy" in ("demo", "work") (its jobs stay; a scheduler still running it schedules it again)`+"\n", r.stdout)
	for _, si := range libSchedules(t, db, q) {
		assert.NotEqual(t, "legacy", si.Name)
	}
	assert.Len(t, libSchedules(t, db, q), 6)
}

// Keys of the markers' range that are not a marker's (another program's:
// ("p", 7) after every name, ("p", "hourly-report", "v2") right after
// that marker) are listed by schedules in their key order, read in pages
// of two so that one falls on a page boundary: the text form gives the
// key as fdbcli takes it and the value's size and first bytes, --json
// key_base64, error and marker_base64, and every marker is listed once.
// unschedule --dry-run of the name before one does not take it for the
// name's marker. schedules used to fail (exit 1) on such a key, listing
// nothing.
func TestSchedulesForeignKeys(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q := demoSchedules(t, db, clock)
	defer func(n int) { schedulePage = n }(schedulePage)
	schedulePage = 2
	ctx := context.Background()
	put := func(key tuple.Tuple, v []byte) []byte {
		k, err := q.Subspace().Pack(key)
		require.NoError(t, err)
		_, err = kv.Transact(ctx, db, func(tr kv.Transaction) (struct{}, error) { tr.Set(k, v); return struct{}{}, nil })
		require.NoError(t, err)
		return k
	}
	seven := put(tuple.Tuple{"p", int64(7)}, []byte("x"))
	v2 := put(tuple.Tuple{"p", "hourly-report", "v2"}, []byte("cron"))
	lib := libSchedules(t, db, q)
	before := allPairs(t, db)

	r := runCLI(t, db, onClock, work("schedules")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, len(lib), r.stdout)
	foreignAt := map[int][]byte{}
	for i, si := range lib {
		switch {
		case bytes.Equal(si.Key, v2):
			foreignAt[i] = v2
			require.Equal(t, "hourly-report", lib[i-1].Name, "right after the marker it extends")
			assert.Equal(t, fmt.Sprintf(`%4d  not a schedule's marker: key \x02demo\x00\x02work\x00\x02p\x00\x02hourly-report\x00\x02v2\x00, value of 4 bytes 63726f6e  (another program's? unschedule cannot remove it: fdbcli's clear can)`, i+1), lines[i])
		case bytes.Equal(si.Key, seven):
			foreignAt[i] = seven
			require.Equal(t, len(lib)-1, i, "last: an integer sorts after every string")
			assert.Equal(t, fmt.Sprintf(`%4d  not a schedule's marker: key \x02demo\x00\x02work\x00\x02p\x00\x15\x07, value of 1 bytes 78  (another program's? unschedule cannot remove it: fdbcli's clear can)`, i+1), lines[i])
		default:
			assert.Equal(t, quoteName(si.Name), strings.Fields(lines[i])[1], "line %d", i+1)
		}
	}
	require.Len(t, foreignAt, 2, "each listed once")

	r = runCLI(t, db, onClock, work("schedules", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var got []ScheduleJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got, len(lib))
	for i, key := range foreignAt {
		j := got[i]
		assert.Nil(t, j.Name)
		assert.Empty(t, j.NameBase64+j.Slot+j.JobID)
		b, err := base64.StdEncoding.DecodeString(j.KeyBase64)
		require.NoError(t, err)
		assert.Equal(t, key, b)
		assert.Contains(t, j.Error, "not a periodic job marker")
		b, err = base64.StdEncoding.DecodeString(j.MarkerBase64)
		require.NoError(t, err)
		assert.Equal(t, lib[i].Raw, b)
	}
	assert.Empty(t, got[0].KeyBase64, "a marker has a name, no key")

	r = runCLI(t, db, onClock, work("unschedule", "--dry-run", "hourly-report")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `would unschedule "hourly-report"`)
	r = runCLI(t, db, onClock, work("unschedule", "--dry-run", "hourly-report\x00")...) // the foreign key comes first after it
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "schedule not found")
	require.Equal(t, before, allPairs(t, db), "nothing written")
}

// docs/cli.md's console block of schedules and unschedule on the demo's
// job queue, which holds the schedule "hourly-cleanup", is what the
// commands print.
func TestSchedulesDocBlock(t *testing.T) {
	checkCLIDocBlock(t, "unschedule --demo")
}

// The text form shows an unreadable marker's first markerShown bytes,
// with "..." only when there are more; a key is printed as fdbcli takes it.
func TestScheduleLineShowsMarkerPrefix(t *testing.T) {
	line := func(n int) string {
		var b bytes.Buffer
		writeScheduleLine(&b, 1, fdbqueue.ScheduleInfo{Name: "s", Raw: bytes.Repeat([]byte{0xab}, n), Err: fmt.Errorf("bad")}, t0)
		return b.String()
	}
	assert.Contains(t, line(markerShown), strings.Repeat("ab", markerShown)+"  (")
	assert.Contains(t, line(markerShown+1), strings.Repeat("ab", markerShown)+"...  (")
	assert.Equal(t, `az-AZ09._/:\x00\x20\x5c\xff`, fdbcliKey([]byte("az-AZ09._/:\x00 \\\xff")))
}
