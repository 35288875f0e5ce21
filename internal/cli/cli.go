// Package cli is the logic of the fdbqueue command-line tool: stats, peek,
// list, push, pop, drain and watch on one queue; stats, dead, requeue-dead,
// delete-dead, job, cancel, schedules and unschedule on a job queue
// (fdbqueue.JobQueue, --kind jobs). It is written against kv, so
// it runs on memdb in its tests and in --demo mode, and on FoundationDB in the
// binary fdbkv/cmd/fdbqueue, which supplies a Backend that opens the
// database through fdbkv (the only part that needs cgo).
//
// Run parses the arguments, runs one command and returns the process's exit
// code: 0 on success, ExitFailure (1) when an operation failed, ExitUsage (2)
// for bad input (a *UsageError), ExitEmpty (3) when pop or peek found the
// queue empty (fdbqueue.ErrEmpty) and ExitNoQueue (4) when nothing is
// stored at the queue's subspace (a *NoQueueError; every command but push
// checks, with one snapshot read, before anything else). Errors are printed to Env.Stderr as
// "fdbqueue <command>: <message>".
//
// Every command checks the queue's stored configuration against its flags
// (--kind, --layout, --encoding, --staging) before it reads or writes the
// queue, through the layers' own check: flags that disagree fail with
// fdbqueue.ErrConfigMismatch (ExitFailure), whose message names the field
// and both values, followed by the flag as given and the one the stored
// configuration implies. A queue without a record (one only recipe clients
// wrote) is read by the flags as given.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
)

// Exit codes returned by Run.
const (
	ExitOK      = 0 // the command succeeded
	ExitFailure = 1 // an operation failed (database error, I/O error)
	ExitUsage   = 2 // bad command line: see UsageError
	ExitEmpty   = 3 // pop or peek found the queue empty
	ExitNoQueue = 4 // nothing is stored at the queue's subspace: see NoQueueError
)

// Bad input, wrapped in a *UsageError; test with errors.Is.
var (
	ErrUnknownCommand  = errors.New("unknown command")
	ErrBadQueuePath    = errors.New("bad queue path")
	ErrUnknownKind     = errors.New("unknown queue kind")
	ErrUnknownLayout   = errors.New("unknown key layout")
	ErrUnknownEncoding = errors.New("unknown value encoding")
	ErrUnknownStaging  = errors.New("unknown staging mode")
	ErrBadArgument     = errors.New("bad argument")
)

// UsageError is bad command-line input: an unknown command, flag or flag
// value, a bad queue path, or arguments a command does not accept. Run
// returns ExitUsage for it. Nothing has been read or written when it occurs.
type UsageError struct {
	Err error
}

// Error returns the underlying error's message.
func (e *UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the underlying error (one of the Err variables above, or
// the flag package's error).
func (e *UsageError) Unwrap() error { return e.Err }

func usagef(sentinel error, format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

// EmptyError is what pop and peek return for an empty queue. It matches
// fdbqueue.ErrEmpty with errors.Is; Run returns ExitEmpty for it.
type EmptyError struct {
	Queue string // the queue's tuple, as printed
}

// Error says which queue is empty.
func (e *EmptyError) Error() string { return "queue " + e.Queue + " is empty" }

// Is reports whether target is fdbqueue.ErrEmpty.
func (e *EmptyError) Is(target error) bool { return target == fdbqueue.ErrEmpty }

// ErrNoQueue is matched (errors.Is) by a *NoQueueError.
var ErrNoQueue = errors.New("no queue stored at the subspace")

// NoQueueError is what every command but push returns when nothing at all
// is stored under the queue's subspace: no stored configuration, no item,
// no job, no journal record. It is most likely a mistyped --queue; an
// empty queue that only recipe clients used (they store no configuration)
// looks the same. Nothing has been written. Run returns ExitNoQueue for it.
// push creates a queue, so it does not check.
type NoQueueError struct {
	Queue string // the queue's tuple, as printed
}

// Error says that no queue is stored at the subspace, and what to check.
func (e *NoQueueError) Error() string {
	return "no queue is stored at " + e.Queue + ": nothing is stored in that subspace " +
		"(check --queue; push creates a queue; an empty recipe queue, which stores no configuration, looks the same)"
}

// Is reports whether target is ErrNoQueue.
func (e *NoQueueError) Is(target error) bool { return target == ErrNoQueue }

// ExitCode returns the exit code Run uses for err.
func ExitCode(err error) int {
	var ue *UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ue):
		return ExitUsage
	case errors.Is(err, fdbqueue.ErrEmpty):
		return ExitEmpty
	case errors.Is(err, ErrNoQueue):
		return ExitNoQueue
	default:
		return ExitFailure
	}
}

// Backend opens the database the commands work on. The binary's backend
// opens FoundationDB through fdbkv (or the demo database); tests pass memdb.
type Backend interface {
	// AddFlags registers the backend's own flags (such as --cluster-file)
	// on a command's flag set.
	AddFlags(fs *flag.FlagSet)
	// Open opens the database once the flags are parsed; closeFn releases it.
	Open(ctx context.Context) (db kv.Database, closeFn func(), err error)
}

// Ticker delivers the ticks of watch. *time.Ticker's channel is the
// default; tests inject a channel they feed.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop stops the ticks.
	Stop()
}

// Env is everything a command touches outside the database, so that tests
// can supply their own.
type Env struct {
	Stdout io.Writer // command output (default: discarded)
	Stderr io.Writer // errors and flag help (default: discarded)
	Stdin  io.Reader // push --stdin reads it (default: empty)
	// Terminal says Stdout is a terminal: drain then draws a progress bar.
	// See IsTerminal.
	Terminal bool
	// Now tells the time for rates and durations (default time.Now).
	Now func() time.Time
	// NewTicker makes watch's ticker (default a time.Ticker).
	NewTicker func(d time.Duration) Ticker
	// Backend opens the database. Required.
	Backend Backend
	// QueueOptions are added to the options of the queue a command opens
	// (tests use fdbqueue.WithEntropy for reproducible keys).
	QueueOptions []fdbqueue.Option

	// onSample, if set, is called by watch after it printed sample n (tests
	// synchronise on it).
	onSample func(n int)
	// openOut, if set, opens drain's --out file instead of openAppend
	// (tests supply writers that fail).
	openOut func(name string) (io.WriteCloser, error)
}

// IsTerminal reports whether f is a terminal (a character device), from its
// mode, as the binary checks os.Stdout. /dev/null is a character device too:
// progress written there is discarded, which is harmless.
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

type timeTicker struct{ t *time.Ticker }

func (t timeTicker) C() <-chan time.Time { return t.t.C }
func (t timeTicker) Stop()               { t.t.Stop() }

// command is one entry of the command table. setup registers the command's
// own flags and returns the function that runs it with those flags' values.
type command struct {
	name    string
	args    string // synopsis of the positional arguments
	summary string
	setup   func(fs *flag.FlagSet) func(ctx context.Context, s *session, args []string) error
}

// commands is the command table. dead, requeue-dead, delete-dead, job,
// cancel, schedules and unschedule work on a job queue (--kind jobs, their
// default; see jobs.go, jobid.go and schedules.go), as stats does with it.
var commands = []command{
	{"stats", "", "depth, age of the oldest item, staged line, journal size", setupStats},
	{"peek", "", "show the item(s) at the head without removing them (--limit, default 1)", setupPeek},
	{"list", "", "list items in queue order (--limit, default 100; --json)", setupList},
	{"push", "VALUE...", "add items (or one per line of stdin with --stdin)", setupPush},
	{"pop", "", "remove and print the item(s) at the head (-n)", setupPop},
	{"drain", "", "remove every item, in batches, with progress on a terminal", setupDrain},
	{"watch", "", "print depth and rate at an interval until interrupted", setupWatch},
	{"dead", "", "job queue: list dead-lettered jobs (--limit, default 100; --json)", setupDead},
	{"requeue-dead", "ID...", "job queue: put dead jobs back in the queue, due now (or --all, filters; --dry-run)", setupRequeueDead},
	{"delete-dead", "ID...", "job queue: delete dead jobs for good (or --all, filters; --dry-run)", setupDeleteDead},
	{"job", "ID", "job queue: show one job by ID, queued, leased or dead (--json)", setupJob},
	{"cancel", "ID", "job queue: remove a queued or leased job for good (--dry-run)", setupCancel},
	{"schedules", "", "job queue: list the periodic jobs' schedules, each with its last slot (--json)", setupSchedules},
	{"unschedule", "NAME", "job queue: remove a schedule's marker, leaving its jobs (--dry-run)", setupUnschedule},
}

func findCommand(name string) (command, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

// session is what a running command works with.
type session struct {
	env  Env
	db   kv.Database
	spec QueueSpec
}

// Usage writes the tool's usage to w.
func Usage(w io.Writer) {
	fmt.Fprintln(w, "usage: fdbqueue <command> [flags] [args]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-12s %-9s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, `every command takes --queue PATH (a tuple path: "myapp/jobs" is ("myapp", "jobs")),`)
	fmt.Fprintln(w, "--kind fifo|priority|jobs, --layout indexed|versionstamp, --encoding raw|tuple and")
	fmt.Fprintln(w, "--staging off|place|batches, as the queue's clients use them;")
	fmt.Fprintln(w, `run "fdbqueue <command> -h" for all of its flags`)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "exit codes: 0 done, 1 an operation failed, 2 bad command line, 3 pop/peek found the")
	fmt.Fprintln(w, "queue empty, 4 nothing is stored at --queue (every command but push checks)")
}

// Run runs the command named by args[0] with the rest of args and returns
// the exit code; errors are printed to env.Stderr. ctx ending stops watch
// (normally) and any other command (with its error).
func Run(ctx context.Context, args []string, env Env) int {
	if env.Stdout == nil {
		env.Stdout = io.Discard
	}
	if env.Stderr == nil {
		env.Stderr = io.Discard
	}
	if env.Stdin == nil {
		env.Stdin = strings.NewReader("")
	}
	if env.Now == nil {
		env.Now = time.Now
	}
	if env.NewTicker == nil {
		env.NewTicker = func(d time.Duration) Ticker { return timeTicker{time.NewTicker(d)} }
	}
	if len(args) == 0 {
		Usage(env.Stderr)
		return ExitUsage
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		Usage(env.Stdout)
		return ExitOK
	}
	err := run(ctx, args[0], args[1:], env)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		fmt.Fprintf(env.Stderr, "fdbqueue %s: %v\n", args[0], err)
		var ue *UsageError
		if errors.As(err, &ue) && errors.Is(err, ErrUnknownCommand) {
			Usage(env.Stderr)
		}
	}
	return ExitCode(err)
}

func run(ctx context.Context, name string, args []string, env Env) error {
	c, ok := findCommand(name)
	if !ok {
		return usagef(ErrUnknownCommand, "%q", name)
	}
	fs := flag.NewFlagSet("fdbqueue "+name, flag.ContinueOnError)
	fs.SetOutput(env.Stderr)
	var sf specFlags
	sf.add(fs)
	if env.Backend != nil {
		env.Backend.AddFlags(fs)
	}
	runFn := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{Err: err}
	}
	spec, err := sf.spec()
	if err != nil {
		return err
	}
	if env.Backend == nil {
		return errors.New("no database backend")
	}
	db, closeFn, err := env.Backend.Open(ctx)
	if err != nil {
		return fmt.Errorf("opening the database: %w", err)
	}
	defer closeFn()
	return explainMismatch(runFn(ctx, &session{env: env, db: db, spec: spec}, pos), spec)
}

// parseInterspersed parses flags anywhere among the arguments ("push a b
// --queue q" as "push --queue q a b") and returns the positional ones.
// After "--" everything is positional (a value that starts with "-").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
