package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// readJSONLines returns the values of the items in a drain --out file.
func readJSONLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var got []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var it Item
		require.NoError(t, json.Unmarshal(sc.Bytes(), &it))
		got = append(got, *it.Value)
	}
	require.NoError(t, sc.Err())
	return got
}

// drain --out appends: a second drain into the same file keeps what the
// first one removed (the file may be the only copy of those items).
func TestDrainOutAppends(t *testing.T) {
	db := demoDB(t)
	out := filepath.Join(t.TempDir(), "removed.jsonl")
	r := runCLI(t, db, nil, args("drain", "jobs", "--limit", "1", "--out", out)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, nil, args("drain", "jobs", "--out", out)...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, []string{"resize img-1", "resize img-2", "send welcome email"}, readJSONLines(t, out))
}

// When drain cannot write a removed item to --out (here a full disk:
// /dev/full fails every write with ENOSPC), it stops after that batch and
// fails: it must not go on removing items it cannot keep. The batch's items
// are already gone from the queue: they go to stderr, after a line that says
// so, in the file's JSON lines, and the error counts them. The items not yet
// removed stay in the queue.
func TestDrainStopsWhenOutFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	all := []string{"resize img-1", "resize img-2", "send welcome email"}
	for _, c := range []struct {
		batch  int
		header string
		tail   string
	}{
		{1, "1 removed item could not be written to /dev/full; it follows as a JSON line:", "the 1 item not written to it is on stderr above"},
		{2, "2 removed items could not be written to /dev/full; they follow as JSON lines:", "the 2 items not written to it are on stderr above"},
	} {
		t.Run(fmt.Sprintf("batch=%d", c.batch), func(t *testing.T) {
			db := demoDB(t)
			r := runCLI(t, db, nil, args("drain", "jobs", "--batch", fmt.Sprint(c.batch), "--out", "/dev/full")...)
			assert.Equal(t, ExitFailure, r.code)
			assert.Equal(t, fmt.Sprintf("drained %s from (\"demo\", \"jobs\") in 1s (%d items/s)\n", plural(c.batch, "item"), c.batch), r.stdout)
			header, rescued, last := splitRescue(t, r.stderr)
			assert.Equal(t, "fdbqueue drain: "+c.header, header)
			assert.Equal(t, all[:c.batch], rescued, "the removed batch, on stderr")
			assert.True(t, strings.HasPrefix(last, fmt.Sprintf("fdbqueue drain: after %s: writing removed items to /dev/full: ", plural(c.batch, "item"))), last)
			assert.True(t, strings.HasSuffix(last, "; "+c.tail), last)
			assert.Equal(t, all[c.batch:], listValues(t, db, args("list", "jobs", "--json")...))
		})
	}
}

// splitRescue splits drain's stderr after a failed --out write into the
// line that announces the rescued items, their values (JSON lines) and the
// final error line.
func splitRescue(t *testing.T, stderr string) (header string, values []string, last string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2, stderr)
	for _, l := range lines[1 : len(lines)-1] {
		var it Item
		require.NoError(t, json.Unmarshal([]byte(l), &it), "line %q", l)
		values = append(values, *it.Value)
	}
	return lines[0], values, lines[len(lines)-1]
}

// listValues runs list --json and returns the items' values.
func listValues(t *testing.T, db kv.Database, a ...string) []string {
	t.Helper()
	r := runCLI(t, db, nil, a...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var items []Item
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
	vs := []string{}
	for _, it := range items {
		vs = append(vs, *it.Value)
	}
	return vs
}

// fullFile is a --out file on a disk that fills up: it keeps the first n
// bytes written to it (a write that crosses the limit keeps its part
// before it, as write(2) does) and fails every write from there on.
type fullFile struct {
	bytes.Buffer
	n        int
	closed   bool
	closeErr error // what Close returns
}

func (f *fullFile) Write(p []byte) (int, error) {
	k := min(len(p), f.n)
	f.n -= k
	f.Buffer.Write(p[:k])
	if k < len(p) {
		return k, errFull
	}
	return k, nil
}

func (f *fullFile) Close() error { f.closed = true; return f.closeErr }

// The --out file fills up in the middle of a batch (of 3): at the start of
// an item's line or inside it. Every removed item is then either a
// complete line of the file or a JSON line on stderr, in order, none twice
// (the file may end with part of the first item on stderr); the items
// after that batch are still in the queue. Before the fix, the batch's
// items from the one that failed on were in neither.
func TestDrainOutFullMidBatch(t *testing.T) {
	const n, batch = 8, 3
	var all []string
	for i := range n {
		all = append(all, fmt.Sprintf("item-%d", i))
	}
	line := func(v string) string {
		b, err := json.Marshal(Item{Value: &v})
		require.NoError(t, err)
		return string(b) + "\n"
	}
	var lines []string
	for _, v := range all {
		lines = append(lines, line(v))
	}
	size := func(k int) int { return len(strings.Join(lines[:k], "")) }
	for _, c := range []struct {
		name    string
		limit   int // bytes the file takes
		written int // complete lines in the file
	}{
		{"at the second batch's first item", size(3), 3},
		{"at its second item", size(4), 4},
		{"inside its second item", size(4) + 5, 4},
		{"inside its last item", size(6) - 1, 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := demoDB(t)
			r := runCLI(t, db, nil, append([]string{"push", "--queue", "t/out"}, all...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			f := &fullFile{n: c.limit}
			var opened string
			r = runCLI(t, db, func(e *Env) {
				e.openOut = func(name string) (io.WriteCloser, error) { opened = name; return f, nil }
			}, "drain", "--queue", "t/out", "--batch", fmt.Sprint(batch), "--out", "out.jsonl")
			assert.Equal(t, ExitFailure, r.code)
			assert.Equal(t, "out.jsonl", opened)
			assert.True(t, f.closed, "the file is closed")
			removed := (c.written/batch + 1) * batch // through the batch that failed
			assert.True(t, strings.HasPrefix(r.stdout, fmt.Sprintf("drained %d items from", removed)), r.stdout)

			content := f.String()
			cut := strings.LastIndex(content, "\n") + 1
			var inFile []string
			for _, l := range strings.SplitAfter(content[:cut], "\n") {
				if l == "" {
					continue
				}
				var it Item
				require.NoError(t, json.Unmarshal([]byte(l), &it), "line %q", l)
				inFile = append(inFile, *it.Value)
			}
			header, onStderr, last := splitRescue(t, r.stderr)
			require.NotEmpty(t, onStderr)
			assert.True(t, strings.HasPrefix(lines[c.written], content[cut:]),
				"the file ends with part of the first item on stderr, or a whole line: %q", content[cut:])
			assert.Equal(t, all[:removed], append(inFile, onStderr...), "each removed item once, in the file or on stderr")
			k := removed - c.written
			follows, are := "they follow as JSON lines", "are"
			if k == 1 {
				follows, are = "it follows as a JSON line", "is"
			}
			assert.Equal(t, fmt.Sprintf("fdbqueue drain: %s could not be written to out.jsonl; %s:", plural(k, "removed item"), follows), header)
			assert.Equal(t, fmt.Sprintf("fdbqueue drain: after %d items: writing removed items to out.jsonl: %v; the %s not written to it %s on stderr above",
				removed, errFull, plural(k, "item"), are), last)
			assert.Equal(t, all[removed:], listValues(t, db, "list", "--queue", "t/out", "--json"), "the rest stay queued")
		})
	}
}

// A file system may report a failed write only when the file is closed
// (NFS reports write-back errors at close(2)): drain then fails (exit 1),
// since the file, now the only copy of the items it removed, may not hold
// them all.
func TestDrainOutCloseFails(t *testing.T) {
	db := demoDB(t)
	f := &fullFile{n: 1 << 20, closeErr: errors.New("input/output error")}
	r := runCLI(t, db, func(e *Env) {
		e.openOut = func(string) (io.WriteCloser, error) { return f, nil }
	}, args("drain", "jobs", "--out", "out.jsonl")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.True(t, f.closed)
	assert.Equal(t, "drained 3 items from (\"demo\", \"jobs\") in 1s (3 items/s)\n", r.stdout)
	assert.Equal(t, "fdbqueue drain: closing out.jsonl: input/output error (the removed items written to it may not all be there)\n", r.stderr)
	assert.Equal(t, 3, strings.Count(f.String(), "\n"), "the items were written")
}

// When stderr fails too, the rescued items are written nowhere: the error
// (Run cannot print it either; the exit code is 1) says how many were
// removed and lost.
func TestDrainOutAndStderrFail(t *testing.T) {
	for _, c := range []struct {
		stderrBytes int
		want        string
	}{
		{0, "2 items were removed and could not be written (writing 2 items to stderr failed too, after 0: " + errFull.Error() + ")"},
		{len("fdbqueue drain: 2 removed items could not be written to out.jsonl; they follow as JSON lines:\n" + `{"value":"b"}` + "\n"),
			"1 item was removed and could not be written (writing 2 items to stderr failed too, after 1: " + errFull.Error() + ")"},
	} {
		db := demoDB(t)
		r := runCLI(t, db, nil, "push", "--queue", "t/out", "a", "b", "c", "d")
		require.Equal(t, ExitOK, r.code, r.stderr)
		var out strings.Builder
		stderr := &failAfter{n: c.stderrBytes}
		err := run(context.Background(), "drain", []string{"--queue", "t/out", "--batch", "3", "--out", "out.jsonl"}, Env{
			Stdout: &out, Stderr: stderr, Stdin: strings.NewReader(""), Now: time.Now, Backend: testBackend{db},
			openOut: func(string) (io.WriteCloser, error) { return &fullFile{n: len(`{"value":"a"}` + "\n")}, nil },
		})
		require.Error(t, err)
		assert.ErrorIs(t, err, errFull)
		assert.Equal(t, ExitFailure, ExitCode(err))
		assert.Equal(t, "after 3 items: writing removed items to out.jsonl: "+errFull.Error()+"; "+c.want, err.Error())
		assert.Equal(t, []string{"d"}, listValues(t, db, "list", "--queue", "t/out", "--json"))
	}
}

// With --limit, the progress bar's total is the limit, not the depth.
func TestDrainProgressTotalIsTheLimit(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, func(e *Env) { e.Terminal = true }, args("drain", "jobs", "--batch", "1", "--limit", "2")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	want := "\r[###############...............] 1/2  50% 1 items/s" +
		"\r[##############################] 2/2 100% 1 items/s\n" +
		"drained 2 items from (\"demo\", \"jobs\") in 3s (1 items/s)\n"
	assert.Equal(t, want, r.stdout)
}

// tooOldDB fails its first fail read-only transactions with
// transaction_too_old (1007), which the retry loop retries, after their
// reads (as a read that took too long fails).
type tooOldDB struct {
	kv.Database
	fail atomic.Int64
}

func (d *tooOldDB) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	return d.Database.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		err := fn(tr)
		if d.fail.Add(-1) >= 0 {
			return kv.ErrTransactionTooOld
		}
		return err
	})
}

// A page retried more often than halving takes it down to one key is still
// read one key at a time: its size never reaches 0, which a range read
// takes for "no limit" (and an empty page then has no last key to go on
// from).
func TestListPageRetriedPastOneKey(t *testing.T) {
	defer func(n int) { pageSize = n }(pageSize)
	pageSize = 4
	db := &tooOldDB{Database: demoDB(t)}
	db.fail.Store(3) // sizes 4, 2, 1, then 1 again
	r := runCLI(t, db, nil, args("list", "jobs", "--json", "--limit", "0")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.JSONEq(t, `[{"index":1,"value":"resize img-1"},{"index":2,"value":"resize img-2"},{"index":3,"value":"send welcome email"}]`, r.stdout)
}

// A push whose chunk exceeds the batch budget (fdbqueue.ErrBatchTooLarge)
// is split, and every value is pushed once, in order.
func TestPushSplitsABatchTooLarge(t *testing.T) {
	db := demoDB(t)
	const n = 300 // more than one chunk of pushChunk
	var in strings.Builder
	for i := range n {
		fmt.Fprintf(&in, "v%03d\n", i)
	}
	small := func(e *Env) {
		e.Stdin = strings.NewReader(in.String())
		e.QueueOptions = []fdbqueue.Option{fdbqueue.WithBatchBudget(2_000)}
	}
	r := runCLI(t, db, small, "push", "--queue", "t/split", "--stdin")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "pushed 300 items to (\"t\", \"split\")\n", r.stdout)
	r = runCLI(t, db, nil, "list", "--queue", "t/split", "--json", "--limit", "0")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var items []Item
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
	require.Len(t, items, n)
	for i, it := range items {
		require.Equal(t, fmt.Sprintf("v%03d", i), *it.Value, "item %d", i)
	}
}

// A push that fails part of the way says how many items went in before
// the failure: here a value over the layers' limit (fdbqueue.ErrValueTooLarge)
// after a full chunk (FIFO) or after two pushes (priority, one per item).
func TestPushReportsItemsPushedBeforeAFailure(t *testing.T) {
	db := demoDB(t)
	big := strings.Repeat("x", 200_000)
	var in strings.Builder
	for i := range pushChunk {
		fmt.Fprintf(&in, "v%03d\n", i)
	}
	in.WriteString(big + "\n")
	r := runCLI(t, db, func(e *Env) { e.Stdin = strings.NewReader(in.String()) }, "push", "--queue", "t/partial", "--stdin")
	assert.Equal(t, ExitFailure, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, fmt.Sprintf("fdbqueue push: pushed %d of %d items: ", pushChunk, pushChunk+1)), r.stderr)
	assert.ErrorIs(t, runErr(db, "push", "--queue", "t/partial", big), fdbqueue.ErrValueTooLarge)

	r = runCLI(t, db, nil, args("push", "tasks", "a", "b", big)...)
	assert.Equal(t, ExitFailure, r.code)
	assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue push: pushed 2 of 3 items: "), r.stderr)
}

// commitHook runs transactions as every backend's Transact does
// (kv.RetryLoop), each commit going through hook, which is given the
// transaction's own Commit to call or not.
type commitHook struct {
	*memdb.DB
	hook func(commit func() error) error
}

func (d *commitHook) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.DB.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	return kv.RetryLoop(ctx, hookedTx{tr, d.hook}, fn)
}

type hookedTx struct {
	kv.Transaction
	hook func(commit func() error) error
}

func (t hookedTx) Commit() error { return t.hook(t.Transaction.Commit) }

// cancelOnCommit runs transactions on db as every backend's Transact
// does, and calls cancel right after the first commit returns, while that
// commit's outcome is being reported: Ctrl-C with a commit in flight.
func cancelOnCommit(db *memdb.DB, cancel context.CancelFunc) *commitHook {
	var done atomic.Bool
	return &commitHook{DB: db, hook: func(commit func() error) error {
		err := commit()
		if !done.Swap(true) {
			cancel()
		}
		return err
	}}
}

// The run's context is really cancelled while the commit is in flight (the
// commit then ends with kv.CommitInterrupted): settle must run the
// operation again under a context that is not, or the pop that committed
// would be lost unprinted and the push be reported failed.
func TestSettleUnderCancelledContext(t *testing.T) {
	interrupted := kv.CommitInterrupted(context.Canceled)
	for _, applied := range []bool{true, false} {
		t.Run(fmt.Sprintf("applied=%v", applied), func(t *testing.T) {
			raw := demoDB(t)
			for _, c := range []struct {
				args []string
				out  string
			}{
				{args("pop", "jobs"), "resize img-1\n"},
				{args("push", "jobs", "once"), "pushed 1 item to (\"demo\", \"jobs\")\n"},
				{work("requeue-dead", deadDemoID), "requeued 1 of 1 dead job in (\"demo\", \"work\")\n"},
			} {
				ctx, cancel := context.WithCancel(context.Background())
				db := cancelOnCommit(raw, cancel)
				raw.FailNextCommit(interrupted, applied)
				var out, errb strings.Builder
				code := Run(ctx, c.args, Env{Stdout: &out, Stderr: &errb, Backend: testBackend{db}})
				cancel()
				require.Equal(t, ExitOK, code, "%q: %s", c.args, errb.String())
				assert.Equal(t, c.out, out.String(), "%q", c.args)
			}
			r := runCLI(t, raw, nil, args("list", "jobs", "--json")...)
			assert.JSONEq(t, `[{"index":2,"value":"resize img-2"},{"index":3,"value":"send welcome email"},{"index":4,"value":"once"}]`, r.stdout)
			r = runCLI(t, raw, nil, work("dead")...)
			assert.Equal(t, "(no dead jobs)\n", r.stdout)
		})
	}
}

// cancelOnRead cancels a context on its read-only transaction number at
// and fails that read with the context's error, as a read interrupted by
// Ctrl-C does.
type cancelOnRead struct {
	kv.Database
	at, n  int
	cancel context.CancelFunc
}

func (d *cancelOnRead) ReadTransact(ctx context.Context, fn func(kv.ReadTransaction) error) error {
	if d.n++; d.n == d.at {
		d.cancel()
		return ctx.Err()
	}
	return d.Database.ReadTransact(ctx, fn)
}

// Interrupted during a sample's read, watch ends normally (exit 0), as it
// does between samples.
func TestWatchInterruptedDuringARead(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Read 1 is open's check that a queue is stored there (requireQueue),
	// read 2 its check of the stored configuration, read 3 the first
	// sample's.
	db := &cancelOnRead{Database: demoDB(t), at: 4, cancel: cancel}
	tk := &chanTicker{c: make(chan time.Time, 1)}
	tk.c <- time.Time{} // the second sample is due at once
	var out, errb strings.Builder
	code := Run(ctx, args("watch", "jobs"), Env{
		Stdout: &out, Stderr: &errb, Backend: testBackend{db},
		NewTicker: func(time.Duration) Ticker { return tk },
	})
	assert.Equal(t, ExitOK, code, errb.String())
	assert.Equal(t, 4, db.n, "the second sample's read was interrupted")
	assert.Equal(t, 3, strings.Count(out.String(), "\n"), out.String())
}

// A job due right now is due: stats says for how long (0s), not that
// nothing is due.
func TestJobStatsDueNow(t *testing.T) {
	db, clock, onClock := demoJobs(t)
	q, err := fdbqueue.NewJobQueue(mustSub(t, "t", "now"), fdbqueue.JobQueueConfig{Clock: envClock(clock.Now)})
	require.NoError(t, err)
	_, err = q.Add(context.Background(), db, fdbqueue.Job{Value: []byte("now")})
	require.NoError(t, err)
	r := runCLI(t, db, onClock, "stats", "--queue", "t/now", "--kind", "jobs")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "queued   1 (due 1, delayed 0)\n")
	assert.Contains(t, r.stdout, "oldest   due for 0s\n")
}

// A line of stdin longer than push --stdin takes (1 MiB) fails the push
// before anything is pushed: not the lines before it alone, silently.
func TestPushStdinLineTooLong(t *testing.T) {
	db := demoDB(t)
	in := "a\n" + strings.Repeat("x", 1<<20+1) + "\nb\n"
	r := runCLI(t, db, func(e *Env) { e.Stdin = strings.NewReader(in) }, "push", "--queue", "t/long", "--stdin")
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "fdbqueue push: reading stdin: ")
	r = runCLI(t, db, nil, "stats", "--queue", "t/long")
	assert.Equal(t, ExitNoQueue, r.code, "nothing at all was stored: %s", r.stderr)
}

// push --stdin reads one item per line: an empty line is an empty item (a
// legal value), a final newline ends the last line (it adds no item, and a
// last line without one is an item), and a \r that ends a line is dropped,
// so a file with CRLF line ends gives the items an LF file gives; a \r
// elsewhere is kept. Values given as arguments come first.
func TestPushStdinLines(t *testing.T) {
	db := demoDB(t)
	for i, c := range []struct {
		in   string
		args []string
		want []string
	}{
		{in: "a\nb\n", want: []string{"a", "b"}},
		{in: "a\nb", want: []string{"a", "b"}},
		{in: "a\n\nb\n", want: []string{"a", "", "b"}},
		{in: "\na\n", want: []string{"", "a"}},
		{in: "a\n\n", want: []string{"a", ""}},
		{in: "\n", want: []string{""}},
		{in: "\n\n", want: []string{"", ""}},
		{in: "a\r\nb\r\n", want: []string{"a", "b"}},
		{in: "a\r\n\r\nb", want: []string{"a", "", "b"}},
		{in: "a\r", want: []string{"a"}},
		{in: "a\rb\n\r\r\n", want: []string{"a\rb", "\r"}},
		{in: " a \t\n", want: []string{" a \t"}}, // no other trimming
		{in: "c\n", args: []string{"a", "b"}, want: []string{"a", "b", "c"}},
		{in: "", args: []string{"a"}, want: []string{"a"}},
	} {
		q := fmt.Sprintf("t/stdin%d", i)
		r := runCLI(t, db, func(e *Env) { e.Stdin = strings.NewReader(c.in) },
			append([]string{"push", "--queue", q, "--stdin", "--"}, c.args...)...)
		require.Equal(t, ExitOK, r.code, "%q: %s", c.in, r.stderr)
		assert.Equal(t, fmt.Sprintf("pushed %s to (\"t\", \"stdin%d\")\n", plural(len(c.want), "item"), i), r.stdout, "%q", c.in)
		assert.Equal(t, c.want, listValues(t, db, "list", "--queue", q, "--json", "--limit", "0"), "%q", c.in)
	}
	// No line at all is nothing to push.
	err := runErr(db, "push", "--queue", "t/none", "--stdin")
	assert.ErrorIs(t, err, ErrBadArgument)
}

// Interrupted (Ctrl-C) after its first requeue, requeue-dead --all stops
// there and says how many it requeued; the other jobs stay dead.
func TestRequeueDeadInterruptedStops(t *testing.T) {
	raw, clock, _ := demoJobs(t)
	killJobs(t, raw, demoWorkQueue(t, clock), clock, fdbqueue.Job{Value: []byte("x")}, fdbqueue.Job{Value: []byte("y")})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := cancelOnCommit(raw, cancel)
	var out, errb strings.Builder
	code := Run(ctx, work("requeue-dead", "--all"), Env{Stdout: &out, Stderr: &errb, Now: clock.Now, Backend: testBackend{db}})
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, out.String())
	assert.True(t, strings.HasPrefix(errb.String(), "fdbqueue requeue-dead: requeued 1 of 3 jobs: context canceled"), errb.String())
	r := runCLI(t, raw, func(e *Env) { e.Now = clock.Now }, work("dead", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	var dead []DeadJobJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &dead))
	assert.Len(t, dead, 2)
}

// syncFile is a --out file that records, at each Sync, how many lines it
// holds and how many items the queue still holds; syncErr is what Sync
// returns.
type syncFile struct {
	fullFile
	db      kv.Database
	queue   string
	t       *testing.T
	syncs   [][2]int // lines written, items queued
	syncErr error
}

func (f *syncFile) Sync() error {
	queued := len(listValues(f.t, f.db, "list", "--queue", f.queue, "--json"))
	f.syncs = append(f.syncs, [2]int{strings.Count(f.String(), "\n"), queued})
	return f.syncErr
}

// drain --out syncs the file after each batch, before it removes the next
// one: when the machine crashes, at most the batch being written is lost,
// not every line the OS had yet to flush. A failed sync stops drain with
// exit 1 and a message that says which items may not be on disk.
func TestDrainOutSyncsEachBatch(t *testing.T) {
	values := []string{"a", "b", "c", "d", "e"}
	t.Run("each batch", func(t *testing.T) {
		db := demoDB(t)
		r := runCLI(t, db, nil, append([]string{"push", "--queue", "t/sync"}, values...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		f := &syncFile{fullFile: fullFile{n: 1 << 20}, db: db, queue: "t/sync", t: t}
		r = runCLI(t, db, func(e *Env) {
			e.openOut = func(string) (io.WriteCloser, error) { return f, nil }
		}, "drain", "--queue", "t/sync", "--batch", "2", "--out", "out.jsonl")
		require.Equal(t, ExitOK, r.code, r.stderr)
		// Batches of 2, 2 and 1: each synced with the next still queued.
		assert.Equal(t, [][2]int{{2, 3}, {4, 1}, {5, 0}}, f.syncs)
	})
	t.Run("failed sync", func(t *testing.T) {
		db := demoDB(t)
		r := runCLI(t, db, nil, append([]string{"push", "--queue", "t/sync"}, values...)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		f := &syncFile{fullFile: fullFile{n: 1 << 20}, db: db, queue: "t/sync", t: t, syncErr: errors.New("input/output error")}
		r = runCLI(t, db, func(e *Env) {
			e.openOut = func(string) (io.WriteCloser, error) { return f, nil }
		}, "drain", "--queue", "t/sync", "--batch", "2", "--out", "out.jsonl")
		assert.Equal(t, ExitFailure, r.code)
		assert.Equal(t, "fdbqueue drain: after 2 items: syncing out.jsonl: input/output error (its last 2 items may not be on disk)\n", r.stderr)
		assert.Equal(t, []string{"c", "d", "e"}, listValues(t, db, "list", "--queue", "t/sync", "--json"), "drain stopped")
		assert.True(t, f.closed)
	})
}
