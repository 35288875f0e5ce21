package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// Every command but push, pointed at a subspace where nothing is stored (a
// mistyped --queue), says so and exits 4 (ExitNoQueue), prints nothing on
// stdout and writes nothing. They used to report an empty queue: stats
// depth 0 and dead "(no dead jobs)" with exit 0, pop and peek "is empty"
// (exit 3), drain "drained 0 items", requeue-dead --all "requeued 0 of 0".
func TestNoQueueAtSubspace(t *testing.T) {
	db := demoDB(t)
	before := allPairs(t, db)
	var cmds [][]string // each with its own flags after the command's name
	for _, c := range queueCommands {
		if c[0] != "push" {
			cmds = append(cmds, c, append([]string{c[0], "--kind", "priority"}, c[1:]...))
		}
	}
	cmds = append(cmds,
		[]string{"stats", "--kind", "jobs"},
		[]string{"dead"},
		[]string{"dead", "--reason", "x"},
		[]string{"requeue-dead", "--all"},
		[]string{"requeue-dead", deadDemoID},
		[]string{"delete-dead", "--all"},
		[]string{"delete-dead", "--all", "--dry-run"},
		[]string{"delete-dead", deadDemoID},
		[]string{"job", deadDemoID},
		[]string{"job", "--json", deadDemoID},
		[]string{"cancel", dueDemoID},
		[]string{"cancel", "--dry-run", dueDemoID},
		[]string{"schedules"},
		[]string{"schedules", "--json"},
		[]string{"unschedule", "report"},
		[]string{"unschedule", "--dry-run", "report"},
	)
	for _, c := range cmds {
		name := c[0]
		a := append([]string{name, "--queue", "demo/typo"}, c[1:]...)
		t.Run(strings.Join(a, " "), func(t *testing.T) {
			err := commandErr(db, a...)
			require.ErrorIs(t, err, ErrNoQueue)
			var ne *NoQueueError
			require.ErrorAs(t, err, &ne)
			assert.Equal(t, `("demo", "typo")`, ne.Queue)
			r := runCLI(t, db, nil, a...)
			assert.Equal(t, ExitNoQueue, r.code)
			assert.Empty(t, r.stdout)
			assert.True(t, strings.HasPrefix(r.stderr, "fdbqueue "+name+`: no queue is stored at ("demo", "typo"): nothing is stored in that subspace`), r.stderr)
		})
	}
	require.Equal(t, before, allPairs(t, db), "nothing written")

	// push creates a queue; the other commands then find it.
	r := runCLI(t, db, nil, "push", "--queue", "demo/typo", "x")
	require.Equal(t, ExitOK, r.code, r.stderr)
	r = runCLI(t, db, nil, "pop", "--queue", "demo/typo")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.Equal(t, "x\n", r.stdout)
	r = runCLI(t, db, nil, "pop", "--queue", "demo/typo")
	assert.Equal(t, ExitEmpty, r.code, "emptied, the queue keeps its record: %s", r.stderr)
}

// What is not "no queue": a recipe queue's items without a stored
// configuration, and a subspace that holds other queues' subspaces (the
// check reads every key under the prefix, not only the record).
func TestNoQueueCheckSeesAnyKey(t *testing.T) {
	db := demoDB(t)
	sub := mustSub(t, "t", "recipe")
	key, err := sub.Pack(tuple.Tuple{int64(7), []byte("r")})
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(key, []byte("from python"))
		return nil
	}))
	r := runCLI(t, db, nil, "list", "--queue", "t/recipe", "--json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	assert.JSONEq(t, `[{"index":7,"value":"from python"}]`, r.stdout)

	r = runCLI(t, db, nil, "stats", "--queue", "demo")
	assert.NotEqual(t, ExitNoQueue, r.code, r.stderr)
	r = runCLI(t, db, nil, "dead", "--queue", "demo")
	assert.NotEqual(t, ExitNoQueue, r.code, r.stderr)
}

func TestUsageListsExitCodes(t *testing.T) {
	var b strings.Builder
	Usage(&b)
	assert.Contains(t, b.String(), "4 nothing is stored at --queue")
	assert.Contains(t, b.String(), "  delete-dead  ID...     job queue: delete dead jobs for good")
}
