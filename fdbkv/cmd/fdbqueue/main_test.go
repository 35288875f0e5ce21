package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
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

// The backend's flags are on every command, as docs/cli.md shows them.
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

// The dead-letter and single-job commands and the "no queue" exit code
// through the binary's backend: delete-dead's dry run and deletion of the
// demo's dead job, job on it and cancel of the leased job (each --demo run
// starts afresh: the wall clock, its fixed job IDs), and a mistyped
// --queue (exit 4).
func TestDemoDeleteDeadAndNoQueue(t *testing.T) {
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := cli.Run(context.Background(), args, cli.Env{Stdout: &out, Stderr: &errb, Backend: &backend{}})
		return code, out.String(), errb.String()
	}
	code, out, errs := run("delete-dead", "--demo", "--queue", "demo/work", "--reason", "card", "--dry-run")
	if code != cli.ExitOK || !strings.HasSuffix(out, "would delete 1 dead job in (\"demo\", \"work\") (dry run: nothing changed)\n") {
		t.Fatalf("dry run: exit %d: %s%s", code, out, errs)
	}
	code, out, errs = run("delete-dead", "--demo", "--queue", "demo/work", "d599bfd5bef0ee993962e6f28af3f987")
	if code != cli.ExitOK || out != "deleted 1 of 1 dead job in (\"demo\", \"work\")\n" {
		t.Fatalf("delete: exit %d: %s%s", code, out, errs)
	}
	code, out, errs = run("job", "--demo", "--queue", "demo/work", "d599bfd5bef0ee993962e6f28af3f987")
	if code != cli.ExitOK || !strings.HasPrefix(out, "job       d599bfd5bef0ee993962e6f28af3f987 in (\"demo\", \"work\")\nstate     dead, died ") {
		t.Fatalf("job: exit %d: %s%s", code, out, errs)
	}
	code, out, errs = run("cancel", "--demo", "--queue", "demo/work", "b8f812645dff9d06c9d4893719cf24d9")
	if code != cli.ExitOK || out != "cancelled job b8f812645dff9d06c9d4893719cf24d9 in (\"demo\", \"work\")\n" {
		t.Fatalf("cancel: exit %d: %s%s", code, out, errs)
	}
	code, out, errs = run("dead", "--demo", "--queue", "demo/wrok")
	if code != cli.ExitNoQueue || out != "" || !strings.HasPrefix(errs, `fdbqueue dead: no queue is stored at ("demo", "wrok")`) {
		t.Fatalf("mistyped queue: exit %d, want %d: %s%s", code, cli.ExitNoQueue, out, errs)
	}
}

// SIGTERM ends a command as ctrl-C does, through its context, so that a
// command between a commit and its output settles and prints instead of
// dying: watch, signalled after its first sample, exits 0 (its normal end)
// rather than by the signal. The test runs this test binary as the
// program (runMainEnv).
func TestSIGTERMEndsCommandCleanly(t *testing.T) {
	if os.Getenv(runMainEnv) != "" {
		os.Args = append([]string{"fdbqueue"}, strings.Fields(os.Getenv(runMainEnv))...)
		main()
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM to send on Windows")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestSIGTERMEndsCommandCleanly$")
	cmd.Env = append(os.Environ(), runMainEnv+"=watch --demo --queue demo/jobs --interval 1h")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, err := bufio.NewReader(out).ReadString('\n') // the first sample: the command runs
	if err != nil {
		t.Fatalf("no first sample: %v (%s)", err, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGTERM: %v, want exit 0 (first sample %q, stderr %s)", err, first, stderr.String())
	}
}

// runMainEnv holds the arguments with which a test binary runs main.
const runMainEnv = "FDBQUEUE_TEST_RUN_MAIN"
