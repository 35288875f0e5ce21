package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/memdb"
)

// The commands with a tenth of the database's reads and a twentieth of its
// read version requests failing, with the retryable errors FoundationDB's
// storage servers and GRV proxies answer (memdb.Faults.ReadErrors and
// ReadVersionErrors): their output is the golden one, and what push puts
// in, pop and drain --out take out once each.
func TestCommandsUnderReadFaults(t *testing.T) {
	db, _, onClock := demoJobs(t)
	db.SetFaults(memdb.Faults{ReadErrors: 0.1, ReadVersionErrors: 0.05})
	for _, c := range []struct {
		name string
		args []string
		mod  func(*Env)
	}{
		{"stats_jobs.txt", args("stats", "jobs"), nil},
		{"stats_events.json", args("stats", "events", "--json"), nil},
		{"stats_tasks.txt", args("stats", "tasks"), nil},
		{"list_jobs.txt", args("list", "jobs"), nil},
		{"list_events.json", args("list", "events", "--json"), nil},
		{"list_tasks_max_limit2.txt", args("list", "tasks", "--max", "--limit", "2"), nil},
		{"peek_events.txt", args("peek", "events"), nil},
		{"stats_work.txt", work("stats", "--kind", "jobs"), onClock},
		{"dead_work.json", work("dead", "--json"), onClock},
		{"job_due.txt", work("job", dueDemoID), onClock},
		{"job_dead.json", work("job", deadDemoID, "--json"), onClock},
		{"job_delayed.txt", work("job", delayedDemoID), onClock},
	} {
		r := runCLI(t, db, c.mod, c.args...)
		require.Equal(t, ExitOK, r.code, "%s: %s", c.name, r.stderr)
		golden(t, c.name, r.stdout)
	}

	// cancel removes the job once; job then finds nothing; a dead job is
	// refused as without faults.
	r := runCLI(t, db, onClock, work("cancel", dueDemoID)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, onClock, work("job", dueDemoID)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "no job with this ID")
	r = runCLI(t, db, onClock, work("cancel", deadDemoID)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, deadDemoID+" is dead: cancel removes a queued or leased job")
	st := jobStatsOf(t, db, onClock)
	assert.Equal(t, [3]int64{2, 1, 1}, [3]int64{st.Queued, st.Leased, st.Dead}, "one due job fewer")

	rf := []string{"--queue", "demo/readfaults"}
	var pushed []string
	for i := range 6 {
		v := strings.Repeat("v", i+1)
		pushed = append(pushed, v)
		r := runCLI(t, db, nil, append(append([]string{"push"}, rf...), v)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
	}
	r = runCLI(t, db, nil, append(append([]string{"pop"}, rf...), "-n", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	got := strings.Split(strings.TrimSpace(r.stdout), "\n")
	r = runCLI(t, db, nil, append(append([]string{"pop"}, rf...), "-n", "10")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	got = append(got, strings.Split(strings.TrimSpace(r.stdout), "\n")...)
	assert.Equal(t, pushed, got, "each item taken once, in order")

	// drain --out writes each item it removes once.
	for _, v := range pushed {
		r := runCLI(t, db, nil, append(append([]string{"push"}, rf...), v)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
	}
	out := filepath.Join(t.TempDir(), "drained.jsonl")
	r = runCLI(t, db, nil, append(append([]string{"drain"}, rf...), "--batch", "2", "--out", out)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, len(pushed), "one line per item: %s", data)
	for i, v := range pushed {
		assert.Contains(t, lines[i], `"`+v+`"`, "line %d", i)
	}
	r = runCLI(t, db, nil, append([]string{"pop"}, rf...)...)
	assert.Equal(t, ExitEmpty, r.code, "nothing left")
	require.Positive(t, db.Stats().InjectedReadErrors)
	require.Positive(t, db.Stats().InjectedReadVersionErrors)
}
