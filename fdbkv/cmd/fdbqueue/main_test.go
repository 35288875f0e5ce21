package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fdbqueue/fdbqueue/internal/cli"
)

// --demo opens the seeded in-memory database through the binary's backend,
// with no cluster and without calling into libfdb_c.
func TestDemoBackend(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(),
		[]string{"stats", "--demo", "--queue", "demo/events", "--layout", "versionstamp", "--encoding", "tuple"},
		cli.Env{Stdout: &out, Stderr: &errb, Backend: &backend{}})
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"depth    4 (counters)\n", "oldest   "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stats output lacks %q:\n%s", want, out.String())
		}
	}
	// The seeded events are 40 to 10 minutes old in wall-clock terms.
	if !strings.Contains(out.String(), "oldest   40m0") && !strings.Contains(out.String(), "oldest   39m59") {
		t.Errorf("the oldest demo event should be about 40 minutes old:\n%s", out.String())
	}
}

// The backend's flags are on every command, as the README shows them.
func TestBackendFlags(t *testing.T) {
	var errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"stats", "-h"}, cli.Env{Stderr: &errb, Backend: &backend{}})
	if code != cli.ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, f := range []string{"-cluster-file", "-api-version", "-demo"} {
		if !strings.Contains(errb.String(), f) {
			t.Errorf("stats -h lacks %s:\n%s", f, errb.String())
		}
	}
}

// The demo's job queue holds a dead job that requeue-dead puts back, on
// the binary's wall clock (the seeding placed in the past).
func TestDemoJobQueue(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(context.Background(), []string{"dead", "--demo", "--queue", "demo/work", "--json"},
		cli.Env{Stdout: &out, Stderr: &errb, Backend: &backend{}})
	if code != cli.ExitOK || !strings.Contains(out.String(), `"reason": "card declined"`) {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
	out.Reset()
	code = cli.Run(context.Background(), []string{"requeue-dead", "--demo", "--queue", "demo/work", "--all"},
		cli.Env{Stdout: &out, Stderr: &errb, Backend: &backend{}})
	if code != cli.ExitOK || out.String() != "requeued 1 of 1 dead job in (\"demo\", \"work\")\n" {
		t.Fatalf("exit %d: %s%s", code, out.String(), errb.String())
	}
}
