package cli

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/fdbqueue/fdbqueue"
)

// The job-queue commands on one job by its ID: job (JobQueue.Job) shows it
// in any state, cancel (JobQueue.Cancel) removes a queued or leased one.

// JobJSON is what job --json prints: fdbqueue.JobInfo, times in RFC 3339
// (UTC). Value is the job's value as text when it is valid UTF-8;
// otherwise ValueBase64 holds its bytes.
type JobJSON struct {
	ID    string `json:"id"`    // hex, as the job commands take it
	State string `json:"state"` // "queued", "leased" or "dead"
	// DueAt is when a queued job is due, or a leased job's lease
	// deadline (at or after it the job is due again); absent for a dead
	// job.
	DueAt       string  `json:"due_at,omitempty"`
	LeaseID     string  `json:"lease_id,omitempty"` // hex, for a leased job
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	Priority    int32   `json:"priority"`
	UniqueKey   string  `json:"unique_key,omitempty"`
	Reason      string  `json:"reason"` // the last Nack's; for a dead job, why it died
	Added       string  `json:"added"`
	Died        string  `json:"died,omitempty"` // for a dead job
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// rfc3339 is t in UTC as the --json forms give times.
func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func jobJSON(j fdbqueue.JobInfo) JobJSON {
	out := JobJSON{ID: j.ID.String(), State: j.State.String(), Attempts: j.Attempts, MaxAttempts: j.MaxAttempts,
		Priority: j.Priority, UniqueKey: j.UniqueKey, Reason: j.Reason, Added: rfc3339(j.Added)}
	switch j.State {
	case fdbqueue.JobDead:
		out.Died = rfc3339(j.Died)
	case fdbqueue.JobLeased:
		out.LeaseID = hex.EncodeToString(j.LeaseID[:])
		out.DueAt = rfc3339(j.DueAt)
	default:
		out.DueAt = rfc3339(j.DueAt)
	}
	out.Value, out.ValueBase64 = jsonValue(j.Value)
	return out
}

// jobState is the text form's state line: the state and, by now, whether
// a queued job is due and whether a lease has expired.
func jobState(j fdbqueue.JobInfo, now time.Time) string {
	switch j.State {
	case fdbqueue.JobDead:
		return "dead, died " + ago(now, j.Died)
	case fdbqueue.JobLeased:
		if now.Before(j.DueAt) {
			return "leased, lease ends in " + j.DueAt.Sub(now).Round(time.Second).String()
		}
		return "leased, lease expired " + ago(now, j.DueAt) + ": due again"
	}
	if now.Before(j.DueAt) {
		return "queued, delayed: due in " + j.DueAt.Sub(now).Round(time.Second).String()
	}
	return "queued, due for " + now.Sub(j.DueAt).Round(time.Second).String()
}

func ago(now, t time.Time) string { return now.Sub(t).Round(time.Second).String() + " ago" }

// writeJob writes job j in the text form of job, one field per line.
func writeJob(w io.Writer, queue string, j fdbqueue.JobInfo, now time.Time) {
	orNone := func(s string) string {
		if s == "" {
			return "(none)"
		}
		return strconv.Quote(s)
	}
	fmt.Fprintf(w, "job       %s in %s\n", j.ID, queue)
	fmt.Fprintf(w, "state     %s\n", jobState(j, now))
	switch j.State {
	case fdbqueue.JobDead:
		fmt.Fprintf(w, "died      %s\n", rfc3339(j.Died))
	case fdbqueue.JobLeased:
		fmt.Fprintf(w, "due       %s (the lease's deadline)\n", rfc3339(j.DueAt))
		fmt.Fprintf(w, "lease     %x\n", j.LeaseID)
	default:
		fmt.Fprintf(w, "due       %s\n", rfc3339(j.DueAt))
	}
	fmt.Fprintf(w, "attempts  %d/%d\n", j.Attempts, j.MaxAttempts)
	fmt.Fprintf(w, "priority  %d\n", j.Priority)
	fmt.Fprintf(w, "unique    %s\n", orNone(j.UniqueKey))
	fmt.Fprintf(w, "added     %s (%s)\n", rfc3339(j.Added), ago(now, j.Added))
	fmt.Fprintf(w, "reason    %s\n", orNone(j.Reason))
	fmt.Fprintf(w, "value     %s\n", strconv.Quote(string(j.Value)))
}

// oneJobID parses the single job ID a command takes.
func oneJobID(args []string) (fdbqueue.JobID, error) {
	if len(args) != 1 {
		return fdbqueue.JobID{}, usagef(ErrBadArgument, "give one job ID (got %d arguments)", len(args))
	}
	return ParseJobID(args[0])
}

// lookupJob is JobQueue.Job on the session's database (a read-only
// transaction, no write, no conflict), its fdbqueue.ErrJobNotFound said
// in the command line's terms.
func lookupJob(ctx context.Context, s *session, q *fdbqueue.JobQueue, id fdbqueue.JobID) (fdbqueue.JobInfo, error) {
	j, err := q.Job(ctx, s.db, id)
	if errors.Is(err, fdbqueue.ErrJobNotFound) {
		return j, fmt.Errorf("%w: %s: no job with this ID in %s (never added, or acked, cancelled or deleted since)",
			fdbqueue.ErrJobNotFound, id, pathString(s.spec.Path))
	}
	return j, err
}

// oneJobCommand sets up a command on the one job its argument names: the
// job-queue flags, the ID parsed and the queue opened, then run.
func oneJobCommand(fs *flag.FlagSet, run func(ctx context.Context, s *session, q *fdbqueue.JobQueue, id fdbqueue.JobID) error) func(context.Context, *session, []string) error {
	jobsByDefault(fs)
	jf := addJobFlags(fs)
	return func(ctx context.Context, s *session, args []string) error {
		id, err := oneJobID(args)
		if err != nil {
			return err
		}
		q, err := s.openJobs(ctx, jf)
		if err != nil {
			return err
		}
		return run(ctx, s, q, id)
	}
}

func setupJob(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	asJSON := fs.Bool("json", false, "print as JSON")
	return oneJobCommand(fs, func(ctx context.Context, s *session, q *fdbqueue.JobQueue, id fdbqueue.JobID) error {
		j, err := lookupJob(ctx, s, q, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(s, jobJSON(j))
		}
		w := &errWriter{w: s.env.Stdout}
		writeJob(w, pathString(s.spec.Path), j, s.env.Now())
		return w.err
	})
}

func setupCancel(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	dry := fs.Bool("dry-run", false, "show the job, as job does, and change nothing (a dead or missing job fails as the cancel would)")
	return oneJobCommand(fs, func(ctx context.Context, s *session, q *fdbqueue.JobQueue, id fdbqueue.JobID) error {
		if *dry {
			j, err := lookupJob(ctx, s, q, id)
			if err != nil {
				return err
			}
			if j.State == fdbqueue.JobDead {
				return deadNotCancelled(id)
			}
			w := &errWriter{w: s.env.Stdout}
			writeJob(w, pathString(s.spec.Path), j, s.env.Now())
			fmt.Fprintf(w, "would cancel job %s in %s (dry run: nothing changed)\n", id, pathString(s.spec.Path))
			return w.err
		}
		_, err := settle(ctx, func(ctx context.Context, opID fdbqueue.OpOption) (struct{}, error) {
			return struct{}{}, q.Cancel(ctx, s.db, id, opID)
		})
		if errors.Is(err, fdbqueue.ErrJobNotFound) {
			// Say why in the command line's terms: dead (the library's
			// message names DeleteDead) or not there at all.
			// A lookup that fails otherwise leaves Cancel's error.
			switch j, lerr := lookupJob(ctx, s, q, id); {
			case errors.Is(lerr, fdbqueue.ErrJobNotFound):
				err = lerr
			case lerr == nil && j.State == fdbqueue.JobDead:
				err = deadNotCancelled(id)
			}
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(s.env.Stdout, "cancelled job %s in %s\n", id, pathString(s.spec.Path))
		return err
	})
}

// deadNotCancelled is cancel's error for a dead job, which Cancel does not
// take (fdbqueue.ErrJobNotFound).
func deadNotCancelled(id fdbqueue.JobID) error {
	return fmt.Errorf("%w: %s is dead: cancel removes a queued or leased job (delete-dead removes a dead one, requeue-dead puts it back)",
		fdbqueue.ErrJobNotFound, id)
}
