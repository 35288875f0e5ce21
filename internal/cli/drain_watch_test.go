package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Not on a terminal, drain prints only its summary: no progress bar, no
// carriage returns. Env.Now steps one second per call (start, end).
func TestDrainPlainWhenNotTerminal(t *testing.T) {
	db := demoDB(t)
	out := filepath.Join(t.TempDir(), "removed.jsonl")
	r := runCLI(t, db, nil, args("drain", "tasks", "--batch", "3", "--out", out)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "drained 4 items from (\"demo\", \"tasks\") in 1s (4 items/s)\n", r.stdout)
	assert.NotContains(t, r.stdout, "\r")
	assert.NotContains(t, r.stdout, "[")

	// Every removed item is in the file, in order, once.
	f, err := os.Open(out)
	require.NoError(t, err)
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var it Item
		require.NoError(t, json.Unmarshal(sc.Bytes(), &it))
		got = append(got, *it.Value)
	}
	assert.Equal(t, []string{"report", "email", "backup", "cleanup"}, got)

	r = runCLI(t, db, nil, args("stats", "tasks")...)
	assert.Contains(t, r.stdout, "depth    0 (counters)\n")
	// Draining an empty queue is not an error.
	r = runCLI(t, db, nil, args("drain", "tasks")...)
	assert.Equal(t, ExitOK, r.code)
	assert.Equal(t, "drained 0 items from (\"demo\", \"tasks\") in 1s (0 items/s)\n", r.stdout)
}

// On a terminal, drain redraws a progress bar after each batch, with the
// depth at the start as its total and the rate so far.
func TestDrainProgressOnTerminal(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, func(e *Env) { e.Terminal = true }, args("drain", "jobs", "--batch", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	want := "\r[####################..........] 2/3  66% 2 items/s" +
		"\r[##############################] 3/3 100% 2 items/s\n" +
		"drained 3 items from (\"demo\", \"jobs\") in 3s (1 items/s)\n"
	assert.Equal(t, want, r.stdout)
}

func TestDrainLimit(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, nil, args("drain", "events", "--limit", "3", "--batch", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.True(t, strings.HasPrefix(r.stdout, "drained 3 items"), r.stdout)
	r = runCLI(t, db, nil, args("pop", "events")...)
	assert.Equal(t, "user 17 logged in\n", r.stdout)
}

func TestProgressLine(t *testing.T) {
	assert.Equal(t, "[##############################] 0/0 100% rate unknown", progressLine(0, 0, -1))
	assert.Equal(t, "[###############...............] 5/10  50% 3 items/s", progressLine(5, 10, 2.6))
	// Items added while draining: past the total, the bar stays full.
	assert.Equal(t, "[##############################] 12/10 100% 6 items/s", progressLine(12, 10, 6))
}

// chanTicker is a Ticker the test feeds.
type chanTicker struct {
	c       chan time.Time
	stopped bool
}

func (c *chanTicker) C() <-chan time.Time { return c.c }
func (c *chanTicker) Stop()               { c.stopped = true }

// watch samples at once and at each tick; between samples the test changes
// the depth, so each line's change and net rate are known (Now steps one
// second per sample).
func TestWatch(t *testing.T) {
	db := demoDB(t)
	tk := &chanTicker{c: make(chan time.Time)}
	sampled := make(chan int)
	done := make(chan result)
	go func() {
		done <- runCLI(t, db, func(e *Env) {
			e.NewTicker = func(d time.Duration) Ticker {
				assert.Equal(t, 5*time.Second, d)
				return tk
			}
			e.onSample = func(n int) { sampled <- n }
		}, args("watch", "jobs", "--interval", "5s", "--count", "3")...)
	}()
	require.Equal(t, 1, <-sampled)
	q, err := fdbqueue.NewQueue(mustSub(t, "demo", "jobs"))
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	tk.c <- time.Time{}
	require.Equal(t, 2, <-sampled)
	for range 4 {
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
	tk.c <- time.Time{}
	require.Equal(t, 3, <-sampled)
	var r result
	select {
	case r = <-done:
	case <-time.After(time.Minute): // a guard against hanging, not a synchronisation
		t.Fatal("watch --count 3 did not stop after its third sample")
	}
	require.Equal(t, ExitOK, r.code, r.stderr)
	want := "watching (\"demo\", \"jobs\") every 5s\n" +
		"time          depth     change        net/s\n" +
		"09:00:00          3          -            -\n" +
		"09:00:01          5         +2         +2.0\n" +
		"09:00:02          1         -4         -4.0\n"
	assert.Equal(t, want, r.stdout)
	assert.True(t, tk.stopped)
}

// Two samples at the same instant (a clock that did not move) have a
// change but no rate: "-", not a division by zero.
func TestWatchSamplesAtOneInstant(t *testing.T) {
	db := demoDB(t)
	tk := &chanTicker{c: make(chan time.Time, 1)}
	tk.c <- time.Time{}
	r := runCLI(t, db, func(e *Env) {
		e.NewTicker = func(time.Duration) Ticker { return tk }
		e.Now = func() time.Time { return t0 }
	}, args("watch", "jobs", "--count", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	require.Len(t, lines, 4, r.stdout)
	assert.Equal(t, "09:00:00          3         +0            -", lines[3])
}

// Cancelling the context (Ctrl-C in the binary) ends watch normally.
func TestWatchStopsWhenInterrupted(t *testing.T) {
	db := demoDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	var out strings.Builder
	code := make(chan int)
	go func() {
		code <- Run(ctx, args("watch", "jobs"), Env{
			Stdout:    &out,
			Backend:   testBackend{db},
			NewTicker: func(time.Duration) Ticker { return &chanTicker{c: make(chan time.Time)} },
			onSample: func(n int) {
				if n == 1 {
					cancel()
				}
			},
		})
	}()
	select {
	case c := <-code:
		assert.Equal(t, ExitOK, c)
	case <-time.After(time.Minute): // a guard against hanging, not a synchronisation
		t.Fatal("watch did not stop when its context was cancelled")
	}
	assert.Equal(t, 3, strings.Count(out.String(), "\n"), out.String())
}

func mustSub(t *testing.T, elems ...any) fdbqueue.Subspace {
	t.Helper()
	s, err := fdbqueue.NewSubspace(tuple.Tuple(elems))
	require.NoError(t, err)
	return s
}

// cancelWriter cancels a context on its first write: drain's first progress
// line, right after the first batch committed.
type cancelWriter struct {
	strings.Builder
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	w.cancel()
	return w.Builder.Write(p)
}

// Interrupted after its first batch, drain reports what it removed and fails
// with the context's error; the rest stays in the queue.
func TestDrainInterrupted(t *testing.T) {
	db := demoDB(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelWriter{cancel: cancel}
	var errb strings.Builder
	code := Run(ctx, args("drain", "jobs", "--batch", "2"), Env{
		Stdout: w, Stderr: &errb, Terminal: true, Backend: testBackend{db},
		Now: (&stepClock{t: t0, step: time.Second}).Now,
	})
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, w.String(), "\ndrained 2 items from")
	assert.True(t, strings.HasPrefix(errb.String(), "fdbqueue drain: after 2 items: context canceled"), errb.String())
	r := runCLI(t, db, nil, args("list", "jobs")...)
	assert.Equal(t, "   1  index 3                                  \"send welcome email\"\n", r.stdout)
}

// An --out file that cannot be opened fails before anything is removed.
func TestDrainBadOutFile(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, nil, args("drain", "jobs", "--out", filepath.Join(t.TempDir(), "no", "such", "dir", "f"))...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "no such file or directory")
	r = runCLI(t, db, nil, args("stats", "jobs")...)
	assert.Contains(t, r.stdout, "depth    3 (counters)\n")
}
