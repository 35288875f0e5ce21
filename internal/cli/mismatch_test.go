package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// allPairs reads every key and value of db, for "nothing was written".
func allPairs(t *testing.T, db kv.Database) []kv.KeyValue {
	t.Helper()
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: []byte{}, End: []byte{0xff}}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	return kvs
}

// commandErr runs the command as Run does and returns its error, as runErr
// does, with a ticker for watch.
func commandErr(db kv.Database, args ...string) error {
	var out bytes.Buffer
	return run(context.Background(), args[0], args[1:], Env{
		Stdout: &out, Stderr: &out, Stdin: strings.NewReader(""), Now: time.Now, Backend: testBackend{db},
		NewTicker: func(time.Duration) Ticker { return &chanTicker{c: make(chan time.Time)} },
	})
}

// queueCommands are the commands that open a fifo or priority queue, each
// with what it needs to run once on a demo queue (watch: one sample).
var queueCommands = [][]string{
	{"stats"},
	{"stats", "--json"},
	{"stats", "--scan"},
	{"peek"},
	{"peek", "--json"},
	{"list"},
	{"list", "--json"},
	{"watch", "--count", "1"},
	{"push", "x"},
	{"pop"},
	{"drain"},
}

// Every command that opens a fifo or priority queue checks the queue's
// stored configuration against its flags first: flags that disagree fail
// with fdbqueue.ErrConfigMismatch (exit 1), naming the field, the stored
// value and the flag that would match, print nothing on stdout and write
// nothing. stats, peek and list read the keys themselves and decode them
// by the flags: they used to print the queue described by the flags (the
// versionstamp-ordered events as "indexed keys, raw values", every item
// "not an item") and exit 0.
func TestCommandsCheckTheStoredConfiguration(t *testing.T) {
	db := demoDB(t)
	before := allPairs(t, db)
	for _, c := range []struct {
		name   string
		flags  []string
		field  string
		stored string // the record's value, as the library names it
		hint   string // the hint in the command line's terms
	}{
		{"events with the default flags", []string{"--queue", "demo/events"}, "layout", "versionstamp",
			"the flags say --layout indexed; the queue's stored configuration says --layout versionstamp"},
		{"events with raw values", []string{"--queue", "demo/events", "--layout", "versionstamp"}, "encoding", "tuple",
			"the flags say --encoding raw; the queue's stored configuration says --encoding tuple"},
		{"jobs as versionstamp", []string{"--queue", "demo/jobs", "--layout", "versionstamp"}, "layout", "index",
			"the flags say --layout versionstamp; the queue's stored configuration says --layout indexed"},
		{"jobs with tuple values", []string{"--queue", "demo/jobs", "--encoding", "tuple"}, "encoding", "raw",
			"the flags say --encoding tuple; the queue's stored configuration says --encoding raw"},
		{"jobs as a priority queue", []string{"--queue", "demo/jobs", "--kind", "priority"}, "kind", "queue",
			"the flags say --kind priority; the queue's stored configuration says --kind fifo"},
		{"tasks as a fifo queue", []string{"--queue", "demo/tasks"}, "kind", "priority queue",
			"the flags say --kind fifo; the queue's stored configuration says --kind priority"},
		{"a job queue as a fifo queue", []string{"--queue", "demo/work"}, "kind", "job queue",
			"the flags say --kind fifo; the queue's stored configuration says --kind jobs"},
		{"a job queue as a priority queue", []string{"--queue", "demo/work", "--kind", "priority"}, "kind", "job queue",
			"the flags say --kind priority; the queue's stored configuration says --kind jobs"},
	} {
		for _, cmd := range queueCommands {
			a := append(append([]string{}, cmd...), c.flags...)
			t.Run(c.name+"/"+strings.Join(cmd, " "), func(t *testing.T) {
				err := commandErr(db, a...)
				var me *fdbqueue.ConfigMismatchError
				require.ErrorAs(t, err, &me)
				assert.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
				assert.Equal(t, c.field, me.Field)
				assert.Equal(t, c.stored, me.Stored)
				r := runCLI(t, db, nil, a...)
				assert.Equal(t, ExitFailure, r.code)
				assert.Empty(t, r.stdout, "nothing printed as if the flags were right")
				assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue "+cmd[0]+": "), r.stderr)
				assert.Contains(t, r.stderr, c.field+` is "`+c.stored+`" in the database`)
				assert.Contains(t, r.stderr, c.hint)
				assert.NotContains(t, r.stderr, "With", "the hint is in flags, not in the library's options")
				assert.NotContains(t, r.stderr, "New", "the hint is in flags, not in the library's constructors")
			})
		}
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")

	// The flags that agree still work.
	r := runCLI(t, db, nil, args("stats", "events")...)
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Contains(t, r.stdout, "versionstamp keys, tuple values")
}

// A queue whose record says it is staged by place: --staging batches
// disagrees (exit 1, nothing printed), --staging off (the default: a
// reader that does not stage) and --staging place agree.
func TestCommandsCheckTheStagingMode(t *testing.T) {
	ctx := context.Background()
	db := demoDB(t)
	q, err := fdbqueue.NewQueue(mustSub(t, "t", "placed"), fdbqueue.WithVersionstampOrder(),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))
	require.NoError(t, err)
	require.NoError(t, q.Reconfigure(ctx, db)) // stores the staging mode
	require.NoError(t, q.Enqueue(ctx, db, []byte("item")))
	before := allPairs(t, db)
	flags := []string{"--queue", "t/placed", "--layout", "versionstamp"}
	for _, cmd := range queueCommands {
		a := append(append([]string{}, cmd...), append(flags, "--staging", "batches")...)
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			err := commandErr(db, a...)
			var me *fdbqueue.ConfigMismatchError
			require.ErrorAs(t, err, &me)
			assert.Equal(t, "staging", me.Field)
			assert.Equal(t, "place", me.Stored)
			r := runCLI(t, db, nil, a...)
			assert.Equal(t, ExitFailure, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "the flags say --staging batches; the queue's stored configuration says --staging place")
		})
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")
	for _, staging := range []string{"off", "place"} {
		r := runCLI(t, db, nil, append([]string{"list", "--json", "--staging", staging}, flags...)...)
		require.Equal(t, ExitOK, r.code, "--staging %s: %s", staging, r.stderr)
		assert.Contains(t, r.stdout, `"value": "item"`)
	}
}

// A queue without a record (written by recipe clients only) keeps working
// with the flags as given, and the commands that read it store no record;
// only a versionstamp layout, which its indexed items do not have, is
// refused, as the layers refuse it.
func TestCommandsOnARecipeQueue(t *testing.T) {
	ctx := context.Background()
	db := demoDB(t)
	sub := mustSub(t, "t", "recipe")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i, v := range []string{"one", "two"} {
			k, err := sub.Pack(tuple.Tuple{int64(i), []byte{byte(i)}})
			if err != nil {
				return err
			}
			tr.Set(k, []byte(v))
		}
		return nil
	}))
	before := allPairs(t, db)
	for _, cmd := range [][]string{{"stats"}, {"stats", "--scan"}, {"peek"}, {"list"}, {"watch", "--count", "1"}} {
		for _, extra := range [][]string{nil, {"--encoding", "tuple"}} {
			a := append(append(append([]string{}, cmd...), "--queue", "t/recipe"), extra...)
			r := runCLI(t, db, nil, a...)
			require.Equal(t, ExitOK, r.code, "%q: %s", a, r.stderr)
			require.NotEmpty(t, r.stdout, "%q", a)
		}
	}
	r := runCLI(t, db, nil, "list", "--queue", "t/recipe")
	assert.Contains(t, r.stdout, `index 0`)
	assert.Contains(t, r.stdout, `"one"`)
	r = runCLI(t, db, nil, "list", "--queue", "t/recipe", "--encoding", "tuple")
	assert.Contains(t, r.stdout, "value is not a packed tuple", "decoded by the flags as given")
	require.Equal(t, before, allPairs(t, db), "reads store no record")

	r = runCLI(t, db, nil, "list", "--queue", "t/recipe", "--layout", "versionstamp")
	assert.Equal(t, ExitFailure, r.code)
	assert.Empty(t, r.stdout)
	assert.Contains(t, r.stderr, "layout is \"index (no record, recipe items)\" in the database")
	assert.Contains(t, r.stderr, "the flags say --layout versionstamp")
	require.Equal(t, before, allPairs(t, db))
}

// The example in docs/cli.md of flags that disagree runs as shown.
func TestCLIDocMismatchExample(t *testing.T) {
	checkCLIDocBlock(t, "stored configuration disagrees")
}

// The job commands on a job queue whose stored stats buckets are wider
// than --stats-resolution fail with ErrConfigMismatch on the layout, and
// the hint names the flag that matches (demo/work was made with the
// default, one second).
func TestJobCommandsCheckTheStatsResolution(t *testing.T) {
	db := demoDB(t)
	before := allPairs(t, db)
	for _, cmd := range [][]string{
		{"stats", "--kind", "jobs"}, {"dead"}, {"requeue-dead", "--all"}, {"job", dueDemoID}, {"cancel", dueDemoID},
		{"schedules"}, {"unschedule", "report"}, {"unschedule", "--dry-run", "report"},
	} {
		a := append(append([]string{}, cmd...), "--queue", "demo/work", "--stats-resolution", "1m")
		t.Run(strings.Join(cmd, " "), func(t *testing.T) {
			var me *fdbqueue.ConfigMismatchError
			require.ErrorAs(t, commandErr(db, a...), &me)
			assert.Equal(t, "layout", me.Field)
			r := runCLI(t, db, nil, a...)
			assert.Equal(t, ExitFailure, r.code)
			assert.Empty(t, r.stdout)
			assert.Contains(t, r.stderr, "the flags say --stats-resolution 1m0s; the queue's stored configuration says --stats-resolution 1s")
		})
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")
	r := runCLI(t, db, nil, "stats", "--kind", "jobs", "--queue", "demo/work", "--stats-resolution", "1000ms")
	require.Equal(t, ExitOK, r.code, r.stderr)
}
