package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/tools/sim"
)

// counter reads "name: N" from the soak's summary.
func counter(t *testing.T, out, name string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `:\s+(\d+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "no %q line in:\n%s", name, out)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	return n
}

// A short fixed-seed lease soak (the mode CI can afford): every history
// checked and linearizable, every job acked once or dead once, nothing
// lost or acked twice, every dead job at its max attempts, and the faults
// were really injected: commits were interrupted, and failed calls
// recovered at once (the few never recovered are counted, not required: 4
// seeds may have none); and leases were released, jobs cancelled, and
// dead jobs requeued and deleted.
func TestLeaseSoakPasses(t *testing.T) {
	var out bytes.Buffer
	dir := t.TempDir()
	code := runLeases(context.Background(), &out, sim.DefaultLeaseConfig(), 1, 4, time.Hour, 2, filepath.Join(dir, "h.html"), filepath.Join(dir, "h.txt"), true)
	s := out.String()
	require.Equal(t, 0, code, s)
	assert.Contains(t, s, "\nPASS\n")
	assert.Equal(t, 4, counter(t, s, "seeds"))
	assert.Equal(t, 4, counter(t, s, "histories checked"))
	added := counter(t, s, "jobs added")
	assert.Positive(t, added)
	assert.Equal(t, added, counter(t, s, "jobs acked once")+counter(t, s, "jobs dead once")+counter(t, s, "jobs cancelled once")+
		counter(t, s, "jobs deleted once")+counter(t, s, "jobs gone by an abandoned Ack")+counter(t, s, "jobs gone by an abandoned Cancel")+
		counter(t, s, "jobs gone by an abandoned DeleteDead"))
	assert.Positive(t, counter(t, s, "jobs dead once"), "max attempts 3 under faults: some jobs die")
	assert.Positive(t, counter(t, s, "releases"))
	assert.Positive(t, counter(t, s, "unique-key adds"))
	assert.Positive(t, counter(t, s, "jobs cancelled once"))
	assert.Positive(t, counter(t, s, "cancels that found no job"))
	assert.Positive(t, counter(t, s, "job lookups"))
	assert.Positive(t, counter(t, s, "requeues"))
	assert.Positive(t, counter(t, s, "jobs deleted once"))
	assert.Positive(t, counter(t, s, "deletes that found nothing"))
	for _, zero := range []string{"lost", "acked twice", "acked and dead", "added twice by one Add", "dead without max attempts", "unique keys held at the end",
		"cancelled and removed again", "deleted and removed again", "bad job lookups", "leftovers of removed jobs", "wrong counts", "linearizability violations", "inconclusive checks (timed out)"} {
		assert.Zero(t, counter(t, s, zero), zero)
	}
	assert.Positive(t, counter(t, s, "  commit_unknown_result (applied)"))
	assert.Positive(t, counter(t, s, "  commit_unknown_result (not applied)"))
	assert.Positive(t, counter(t, s, "  commits interrupted by cancellation"))
	assert.Positive(t, counter(t, s, "  recovered at once by OpID"))
	for seed := 1; seed <= 4; seed++ {
		assert.Contains(t, s, "seed "+strconv.Itoa(seed)+": ")
	}
	files, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, files, "nothing written when every history passes")
}

// Without the journal, commit_unknown_result breaks exactly-once (see
// sim's TestLeaseSimulationRejectsNoJournal): the soak must say FAIL,
// name the first failing seed, and exit 1, and write the history of the
// lowest-numbered seed whose history was not linearizable (a seed's run
// depends on goroutine timing: rerunning it need not fail) as text and
// as porcupine's visualization, to the paths given.
func TestLeaseSoakFails(t *testing.T) {
	cfg := sim.DefaultLeaseConfig()
	cfg.WithoutIdempotency = true
	var out bytes.Buffer
	dir := t.TempDir()
	html, history := filepath.Join(dir, "h.html"), filepath.Join(dir, "h.txt")
	code := runLeases(context.Background(), &out, cfg, 1, 4, time.Hour, 2, html, history, false)
	s := out.String()
	assert.Equal(t, 1, code, s)
	assert.Contains(t, s, "\nFAIL\n")
	assert.Regexp(t, `first failing seed: [1-4] \(rerun: go run ./cmd/soak -leases -first [1-4] -seeds 1 -v\)`, s)
	require.Positive(t, counter(t, s, "linearizability violations"), "without the journal, histories are rejected")
	m := regexp.MustCompile(`first history not linearizable: seed ([1-4]), job queue: history of (\d+) operations`).FindStringSubmatch(s)
	require.NotNil(t, m, s)
	assert.Contains(t, s, "visualization: "+html+"\n")
	assert.Contains(t, s, "history: "+history+"\n")
	text, err := os.ReadFile(history)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(text), "seed "+m[1]+", job queue: history of "+m[2]+" operations"), "%.200s", text)
	assert.Contains(t, string(text), "longest linearizable prefix (")
	n, err := strconv.Atoi(m[2])
	require.NoError(t, err)
	assert.Equal(t, n, strings.Count(string(text), "] client "), "every operation written")
	page, err := os.ReadFile(html)
	require.NoError(t, err)
	assert.Contains(t, string(page), "<html")
}

// forSeeds runs each seed once, from first, and none once ctx has ended.
func TestForSeeds(t *testing.T) {
	var mu sync.Mutex
	seen := map[int64]int{}
	forSeeds(context.Background(), 10, 7, time.Hour, 3, func(seed int64) {
		mu.Lock()
		seen[seed]++
		mu.Unlock()
	})
	assert.Equal(t, map[int64]int{10: 1, 11: 1, 12: 1, 13: 1, 14: 1, 15: 1, 16: 1}, seen)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	forSeeds(ctx, 1, 5, time.Hour, 2, func(int64) { t.Error("a seed ran after the context ended") })
	forSeeds(context.Background(), 1, 5, -time.Second, 2, func(int64) { t.Error("a seed ran after the duration") })
}

// The soak keeps the history of the lowest-numbered seed that was not
// linearizable, or, while none was, of the lowest whose check timed out;
// a passing seed's is never kept.
func TestLeaseTotalsKeepTheFirstFailure(t *testing.T) {
	var total leaseTotals
	seed := func(n int64, check porcupine.CheckResult) {
		r := sim.LeaseResult{Check: check}
		if check != porcupine.Ok {
			r.Failure = &sim.Failure{Seed: n}
		}
		total.add(n, r)
	}
	kept := func() (int64, bool) {
		require.NotNil(t, total.Failure)
		return total.Failure.Seed, total.Illegal
	}
	seed(2, porcupine.Ok)
	assert.Nil(t, total.Failure)
	seed(5, porcupine.Unknown)
	seed(3, porcupine.Unknown)
	n, illegal := kept()
	assert.Equal(t, int64(3), n)
	assert.False(t, illegal)
	seed(9, porcupine.Illegal)
	seed(1, porcupine.Unknown)
	seed(1, porcupine.Ok)
	n, illegal = kept()
	assert.Equal(t, int64(9), n, "a violation over a timed-out check")
	assert.True(t, illegal)
	seed(7, porcupine.Illegal)
	n, _ = kept()
	assert.Equal(t, int64(7), n)
	assert.Equal(t, 2, total.Violations)
	assert.Equal(t, 3, total.Inconclusive)
	assert.Equal(t, int64(1), total.FirstFailing)
}
