package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./internal/cli -update to create it")
	assert.Equal(t, string(want), got, "output differs from %s (go test ./internal/cli -update rewrites it)", path)
}

// testBackend hands the commands a database the test made. It registers
// --demo as the binary does, so the command lines of docs/cli.md parse.
type testBackend struct{ db kv.Database }

func (b testBackend) AddFlags(fs *flag.FlagSet) { fs.Bool("demo", false, "ignored in tests") }
func (b testBackend) Open(context.Context) (kv.Database, func(), error) {
	return b.db, func() {}, nil
}

// stepClock is Env.Now for tests: each call returns a time one step later.
type stepClock struct {
	mu   sync.Mutex
	t    time.Time
	step time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.t
	c.t = c.t.Add(c.step)
	return now
}

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

// demoDB is the demo database on a manual clock, so versions (and the
// ages derived from them) are the same on every run.
func demoDB(t *testing.T) *memdb.DB {
	t.Helper()
	db, err := OpenDemo(context.Background(), memdb.NewManualClock(t0))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	return db
}

type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the tool on db; mod adjusts the Env first.
func runCLI(t *testing.T, db kv.Database, mod func(*Env), args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{
		Stdout:  &out,
		Stderr:  &errb,
		Now:     (&stepClock{t: t0, step: time.Second}).Now,
		Backend: testBackend{db},
	}
	if mod != nil {
		mod(&env)
	}
	code := Run(context.Background(), args, env)
	return result{out.String(), errb.String(), code}
}

// runErr runs the command as Run does and returns its error, for errors.Is.
func runErr(db kv.Database, args ...string) error {
	var out bytes.Buffer
	return run(context.Background(), args[0], args[1:], Env{
		Stdout: &out, Stderr: &out, Stdin: strings.NewReader(""), Now: time.Now, Backend: testBackend{db},
	})
}

var demoFlags = map[string][]string{
	"jobs":   {"--queue", "demo/jobs"},
	"events": {"--queue", "demo/events", "--layout", "versionstamp", "--encoding", "tuple"},
	"tasks":  {"--queue", "demo/tasks", "--kind", "priority"},
}

func args(cmd, queue string, extra ...string) []string {
	return append(append([]string{cmd}, demoFlags[queue]...), extra...)
}

// The stats of each demo queue, text and JSON. The events queue is keyed by
// versionstamps, so its head's age is known: seeded 40 minutes before the
// last commit, on the manual clock.
func TestStatsGolden(t *testing.T) {
	db := demoDB(t)
	for _, q := range []string{"jobs", "events", "tasks"} {
		for _, form := range []string{"txt", "json"} {
			t.Run(q+"."+form, func(t *testing.T) {
				a := args("stats", q)
				if form == "json" {
					a = append(a, "--json")
				}
				r := runCLI(t, db, nil, a...)
				require.Equal(t, ExitOK, r.code, r.stderr)
				golden(t, "stats_"+q+"."+form, r.stdout)
			})
		}
	}
}

func TestListGolden(t *testing.T) {
	db := demoDB(t)
	cases := []struct {
		name string
		args []string
	}{
		{"list_jobs.txt", args("list", "jobs")},
		{"list_jobs.json", args("list", "jobs", "--json")},
		{"list_events.txt", args("list", "events")},
		{"list_events.json", args("list", "events", "--json")},
		{"list_tasks.txt", args("list", "tasks")},
		{"list_tasks.json", args("list", "tasks", "--json")},
		{"list_tasks_max_limit2.txt", args("list", "tasks", "--max", "--limit", "2")},
		{"peek_events.txt", args("peek", "events")},
		{"peek_tasks_max.json", args("peek", "tasks", "--max", "--json")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := runCLI(t, db, nil, c.args...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			golden(t, c.name, r.stdout)
		})
	}
}

// The age is the distance from the read version to the head's commit
// version: it grows as versions advance (here, with a later commit).
func TestStatsOldestAgeGrows(t *testing.T) {
	clock := memdb.NewManualClock(t0)
	db, err := OpenDemo(context.Background(), clock)
	require.NoError(t, err)
	defer db.Close()
	clock.Advance(time.Hour)
	r := runCLI(t, db, nil, args("push", "jobs", "x")...) // a commit, one hour later
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, nil, args("stats", "events")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "oldest   1h40m0s (from its versionstamp)\n")

	// An empty versionstamp queue has no oldest item.
	r = runCLI(t, db, nil, args("drain", "events")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, nil, args("stats", "events")...)
	assert.Contains(t, r.stdout, "oldest   unknown: queue is empty\n")

	// A head whose versionstamp is past the read version (written by
	// another program as a plain key: a commit's own is never past a
	// later read version) is 0 old, not a negative age.
	future, err := mustSub(t, "demo", "events").Pack(tuple.Tuple{
		tuple.Versionstamp{TransactionVersion: [10]byte{0, 0x10, 0, 0, 0, 0, 0, 0, 0, 1}}, []byte("r")}) // 2^52: far past any read version here
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(future, mustPack(t, tuple.Tuple{"from the future"}))
		return nil
	}))
	r = runCLI(t, db, nil, args("stats", "events")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "oldest   0s (from its versionstamp)\n")
}

func TestPushPopFIFO(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, nil, args("push", "jobs", "a", "b")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "pushed 2 items to (\"demo\", \"jobs\")\n", r.stdout)
	r = runCLI(t, db, func(e *Env) { e.Stdin = strings.NewReader("c\nd\n") }, args("push", "jobs", "--stdin")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "pushed 2 items to (\"demo\", \"jobs\")\n", r.stdout)

	r = runCLI(t, db, nil, args("push", "jobs", "e")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "pushed 1 item to (\"demo\", \"jobs\")\n", r.stdout)

	r = runCLI(t, db, nil, args("pop", "jobs")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "resize img-1\n", r.stdout)
	r = runCLI(t, db, nil, args("pop", "jobs", "-n", "3", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.JSONEq(t, `[{"value":"resize img-2"},{"value":"send welcome email"},{"value":"a"}]`, r.stdout)
	r = runCLI(t, db, nil, args("pop", "jobs", "-n", "10")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "b\nc\nd\ne\n", r.stdout)

	r = runCLI(t, db, nil, args("pop", "jobs")...)
	assert.Equal(t, ExitEmpty, r.code)
	assert.Equal(t, "fdbqueue pop: queue (\"demo\", \"jobs\") is empty\n", r.stderr)
	assert.Empty(t, r.stdout)
	assert.ErrorIs(t, runErr(db, args("pop", "jobs")...), fdbqueue.ErrEmpty)

	r = runCLI(t, db, nil, args("peek", "jobs")...)
	assert.Equal(t, ExitEmpty, r.code)
	r = runCLI(t, db, nil, args("list", "jobs")...)
	assert.Equal(t, ExitOK, r.code)
	assert.Equal(t, "(empty)\n", r.stdout)
}

// Each push or pop leaves its journal record and, since the command
// chooses the operation's ID (to settle it when interrupted), the ID's
// marker: two keys, which the layers clear with the next operation of the
// same Queue value, which a one-shot command never makes (they expire
// after the retention). stats counts them.
func TestStatsJournal(t *testing.T) {
	db := demoDB(t)
	var st Stats
	r := runCLI(t, db, nil, args("stats", "jobs", "--json")...)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, int64(0), st.JournalKeys)
	runCLI(t, db, nil, args("push", "jobs", "x")...)
	runCLI(t, db, nil, args("pop", "jobs")...)
	r = runCLI(t, db, nil, args("stats", "jobs", "--json")...)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, int64(4), st.JournalKeys)
	assert.Greater(t, st.JournalBytes, int64(2*16), "two records, each with a 16-byte operation ID in its key")
	assert.Equal(t, int64(3), st.Depth)
}

// Flags may follow values, and "--" ends the flags (a value that starts
// with "-").
func TestFlagsAnywhere(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, nil, "push", "x", "--queue", "t/any", "y", "--", "-z", "--queue")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "pushed 4 items to (\"t\", \"any\")\n", r.stdout)
	r = runCLI(t, db, nil, "pop", "-n", "10", "--queue", "t/any")
	assert.Equal(t, "x\ny\n-z\n--queue\n", r.stdout)
}

func TestPushPopPriority(t *testing.T) {
	db := demoDB(t)
	r := runCLI(t, db, nil, args("push", "tasks", "--priority", "-3", "urgent")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, nil, args("pop", "tasks")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "urgent\n", r.stdout)
	r = runCLI(t, db, nil, args("pop", "tasks", "--max", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.JSONEq(t, `[{"priority":9,"value":"cleanup"}]`, r.stdout)
	r = runCLI(t, db, nil, args("pop", "tasks", "-n", "5", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.JSONEq(t, `[{"priority":1,"value":"report"},{"priority":1,"value":"email"},{"priority":5,"value":"backup"}]`, r.stdout)
	r = runCLI(t, db, nil, args("pop", "tasks", "--max")...)
	assert.Equal(t, ExitEmpty, r.code)
}

// Values at the limits go through push, list and pop unchanged: all-0xff
// and all-zero bytes (not UTF-8: --json gives them in base64), the empty
// value, and a value of FDB's 100,000-byte limit (raw encoding; with the
// tuple encoding it no longer fits and push fails with the layer's error).
func TestValuesAtLimits(t *testing.T) {
	db := demoDB(t)
	ff := string(bytes.Repeat([]byte{0xff}, 64))
	zero := string(make([]byte, 64))
	big := strings.Repeat("v", 100_000)
	r := runCLI(t, db, nil, "push", "--queue", "t/limits", ff, zero, "", big)
	require.Equal(t, ExitOK, r.code, r.stderr)

	r = runCLI(t, db, nil, "list", "--queue", "t/limits", "--json", "--limit", "3")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"value_base64": "`+"//////////")
	assert.Contains(t, r.stdout, `"value": "\u0000\u0000`) // zero bytes are UTF-8
	assert.Contains(t, r.stdout, `"value": ""`)

	r = runCLI(t, db, nil, "pop", "--queue", "t/limits", "-n", "4")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, ff+"\n"+zero+"\n\n"+big+"\n", r.stdout)

	r = runCLI(t, db, nil, "push", "--queue", "t/limits2", "--encoding", "tuple", big)
	assert.Equal(t, ExitFailure, r.code)
	assert.Contains(t, r.stderr, "pushed 0 of 1 items")
	assert.ErrorIs(t, runErr(db, "push", "--queue", "t/limits2", "--encoding", "tuple", big), fdbqueue.ErrValueTooLarge)
}

// A key in the queue's range that is not an item of the layout is listed as
// foreign, with why, not skipped and not a failure.
func TestListForeignKey(t *testing.T) {
	db := demoDB(t)
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"demo", "jobs"})
	require.NoError(t, err)
	key, err := sub.Pack(tuple.Tuple{"not-an-index"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(key, []byte("stray"))
		return nil
	}))
	r := runCLI(t, db, nil, args("list", "jobs")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "not an item (key tuple")
	assert.Contains(t, r.stdout, "is not (index, random)")
	r = runCLI(t, db, nil, args("list", "jobs", "--json")...)
	assert.Contains(t, r.stdout, `"foreign": "key tuple`)
	assert.Contains(t, r.stdout, `"key_hex": "`)

	// A value that is not a packed tuple in a tuple-encoded queue: listed as
	// foreign, with its raw bytes.
	events := mustSub(t, "demo", "events")
	vkey, err := events.Pack(tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 0, 0, 0, 0, 0, 0, 0, 0, 1}}, []byte("r")})
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(vkey, []byte("raw, not a tuple"))
		return nil
	}))
	r = runCLI(t, db, nil, args("list", "events", "--json")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, `"foreign": "value is not a packed tuple`)
	assert.Contains(t, r.stdout, `"value": "raw, not a tuple"`)

	// Packed tuples that are not one element of bytes or a string, and a
	// key and value both malformed (the key's reason is the one given).
	for _, c := range []struct {
		key     tuple.Tuple
		value   tuple.Tuple
		foreign string
	}{
		{tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 1}}, []byte("r")}, tuple.Tuple{"a", "b"}, "value tuple has 2 elements, want 1"},
		{tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 2}}, []byte("r")}, tuple.Tuple{}, "value tuple has 0 elements, want 1"},
		{tuple.Tuple{tuple.Versionstamp{TransactionVersion: [10]byte{0xff, 3}}, []byte("r")}, tuple.Tuple{int64(5)}, "value tuple element is int64, want bytes or string"},
		{tuple.Tuple{"no versionstamp", []byte("r")}, tuple.Tuple{"a", "b"}, "key tuple"},
	} {
		db := demoDB(t)
		k, err := events.Pack(c.key)
		require.NoError(t, err)
		require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
			tr.Set(k, mustPack(t, c.value))
			return nil
		}))
		r = runCLI(t, db, nil, args("list", "events", "--json", "--limit", "0")...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		var items []Item
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
		var flagged []Item
		for _, it := range items {
			if it.Foreign != "" {
				flagged = append(flagged, it)
			}
		}
		require.Len(t, flagged, 1, "%v = %v", c.key, c.value)
		assert.True(t, strings.HasPrefix(flagged[0].Foreign, c.foreign), "%v = %v: %s", c.key, c.value, flagged[0].Foreign)
		assert.Equal(t, fmt.Sprintf("%x", k), flagged[0].KeyHex)
	}
}

func TestBadInput(t *testing.T) {
	db := demoDB(t)
	cases := []struct {
		name string
		args []string
		want error
	}{
		{"unknown command", []string{"frobnicate"}, ErrUnknownCommand},
		{"unknown kind", []string{"stats", "--queue", "a/b", "--kind", "lifo"}, ErrUnknownKind},
		{"unknown layout", []string{"stats", "--queue", "a/b", "--layout", "random"}, ErrUnknownLayout},
		{"unknown encoding", []string{"stats", "--queue", "a/b", "--encoding", "json"}, ErrUnknownEncoding},
		{"unknown staging", []string{"pop", "--queue", "a/b", "--staging", "sometimes"}, ErrUnknownStaging},
		{"priority has no versionstamp layout", []string{"stats", "--queue", "a/b", "--kind", "priority", "--layout", "versionstamp"}, ErrUnknownLayout},
		{"by place needs versionstamps", []string{"pop", "--queue", "a/b", "--staging", "place"}, ErrUnknownStaging},
		{"no queue", []string{"stats"}, ErrBadQueuePath},
		{"empty element", []string{"stats", "--queue", "a//b"}, ErrBadQueuePath},
		{"leading slash", []string{"stats", "--queue", "/a"}, ErrBadQueuePath},
		{"trailing slash", []string{"stats", "--queue", "a/"}, ErrBadQueuePath},
		{"not UTF-8", []string{"stats", "--queue", "a/\xff"}, ErrBadQueuePath},
		{"extra args", []string{"stats", "--queue", "a/b", "extra"}, ErrBadArgument},
		{"pop -n 0", []string{"pop", "--queue", "a/b", "-n", "0"}, ErrBadArgument},
		{"pop --max on fifo", []string{"pop", "--queue", "a/b", "--max"}, ErrBadArgument},
		{"list --max on fifo", []string{"list", "--queue", "a/b", "--max"}, ErrBadArgument},
		{"peek --max on fifo", []string{"peek", "--queue", "a/b", "--max"}, ErrBadArgument},
		{"list negative limit", []string{"list", "--queue", "a/b", "--limit", "-1"}, ErrBadArgument},
		{"push nothing", []string{"push", "--queue", "a/b"}, ErrBadArgument},
		{"push priority on fifo", []string{"push", "--queue", "demo/jobs", "--priority", "3", "x"}, ErrBadArgument},
		{"drain batch 0", []string{"drain", "--queue", "demo/jobs", "--batch", "0"}, ErrBadArgument},
		{"drain negative limit", []string{"drain", "--queue", "demo/jobs", "--limit", "-1"}, ErrBadArgument},
		{"watch interval 0", []string{"watch", "--queue", "a/b", "--interval", "0s"}, ErrBadArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := runErr(db, c.args...)
			require.ErrorIs(t, err, c.want)
			var ue *UsageError
			require.ErrorAs(t, err, &ue)
			r := runCLI(t, db, nil, c.args...)
			assert.Equal(t, ExitUsage, r.code)
			assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue "+c.args[0]+": "), r.stderr)
			assert.Empty(t, r.stdout)
		})
	}
	t.Run("unknown flag", func(t *testing.T) {
		r := runCLI(t, db, nil, "stats", "--queue", "a/b", "--bogus")
		assert.Equal(t, ExitUsage, r.code)
		assert.Contains(t, r.stderr, "flag provided but not defined: -bogus")
	})
	t.Run("no command", func(t *testing.T) {
		r := runCLI(t, db, nil)
		assert.Equal(t, ExitUsage, r.code)
		assert.Contains(t, r.stderr, "usage: fdbqueue <command>")
	})
	// Bad input changed nothing: the demo jobs are all there.
	r := runCLI(t, db, nil, args("stats", "jobs")...)
	assert.Contains(t, r.stdout, "depth    3 (counters)\n")
}

func TestHelp(t *testing.T) {
	r := runCLI(t, demoDB(t), nil, "help")
	assert.Equal(t, ExitOK, r.code)
	for _, c := range commands {
		assert.Contains(t, r.stdout, "  "+c.name+" ")
	}
	r = runCLI(t, demoDB(t), nil, "stats", "-h")
	assert.Equal(t, ExitOK, r.code)
	assert.Contains(t, r.stderr, "-queue")
	assert.Contains(t, r.stderr, "-demo")
}

// A failing database: the error is printed and the exit code is 1.
func TestOpenFailure(t *testing.T) {
	r := runCLI(t, nil, func(e *Env) { e.Backend = failingBackend{} }, args("stats", "jobs")...)
	assert.Equal(t, ExitFailure, r.code)
	assert.Equal(t, "fdbqueue stats: opening the database: no cluster here\n", r.stderr)
}

type failingBackend struct{}

func (failingBackend) AddFlags(*flag.FlagSet) {}
func (failingBackend) Open(context.Context) (kv.Database, func(), error) {
	return nil, nil, errors.New("no cluster here")
}

func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "out")
	require.NoError(t, err)
	defer f.Close()
	assert.False(t, IsTerminal(f), "a regular file is not a terminal")
}

// Listings and counts cross page boundaries (here pages of 3 keys) without
// losing or repeating a key, forwards and in reverse, with and without a
// limit.
func TestPaging(t *testing.T) {
	defer func(n int) { pageSize = n }(pageSize)
	pageSize = 3
	db := demoDB(t)
	for _, v := range []string{"a", "b", "c", "d", "e"} { // one command each: 5 journal records
		r := runCLI(t, db, nil, args("push", "tasks", "--priority", "7", v)...)
		require.Equal(t, ExitOK, r.code, r.stderr)
	}
	values := func(args ...string) []string {
		r := runCLI(t, db, nil, args...)
		require.Equal(t, ExitOK, r.code, r.stderr)
		var items []Item
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &items))
		var vs []string
		for _, it := range items {
			vs = append(vs, *it.Value)
		}
		return vs
	}
	all := []string{"report", "email", "backup", "a", "b", "c", "d", "e", "cleanup"}
	assert.Equal(t, all, values(args("list", "tasks", "--json", "--limit", "0")...))
	assert.Equal(t, all[:7], values(args("list", "tasks", "--json", "--limit", "7")...))
	assert.Equal(t, []string{"cleanup", "e", "d", "c", "b", "a", "backup", "email"},
		values(args("list", "tasks", "--json", "--max", "--limit", "8")...))
	r := runCLI(t, db, nil, args("stats", "tasks")...)
	assert.Contains(t, r.stdout, "depth    9 (counters)\n")
	// The journal's count pages too.
	assert.Contains(t, r.stdout, "journal  10 keys") // 5 operations: a record and a marker each
}

// stats reads the depth counters in O(1); --scan counts the items. They
// differ when a client that does not maintain the counters (here a raw
// write, as a recipe client in another language would make) shares the
// queue, and agree again after RepairDepth.
func TestStatsCountersAndScan(t *testing.T) {
	ctx := context.Background()
	db := demoDB(t)
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"demo", "jobs"})
	require.NoError(t, err)
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		k, err := sub.Pack(tuple.Tuple{int64(1 << 40), []byte("recipe-client-item-0")})
		tr.Set(k, []byte("from a recipe client"))
		return err
	}))
	r := runCLI(t, db, nil, args("stats", "jobs")...)
	assert.Contains(t, r.stdout, "depth    3 (counters)\n")
	r = runCLI(t, db, nil, args("stats", "jobs", "--scan")...)
	assert.Contains(t, r.stdout, "depth    4 (scan)\n")
	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	n, err := q.RepairDepth(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(4), n)
	r = runCLI(t, db, nil, args("stats", "jobs", "--json")...)
	var st Stats
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &st))
	assert.Equal(t, int64(4), st.Depth)
	assert.Equal(t, "counters", st.DepthMethod)
}

// mustPack packs tup.
func mustPack(t *testing.T, tup tuple.Tuple) []byte {
	t.Helper()
	b, err := tup.Pack()
	require.NoError(t, err)
	return b
}
