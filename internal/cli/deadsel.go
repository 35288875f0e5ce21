package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/fdbqueue/fdbqueue"
)

// The selection of dead jobs that dead, requeue-dead and delete-dead
// share: job IDs, or the dead-letter list (--all) narrowed by what a
// DeadJob records, its reason and its death time.

// deadFilter selects dead jobs by their record. Its zero value selects
// every one.
type deadFilter struct {
	reason string    // the reason contains it ("": any reason)
	after  time.Time // died at or after it (zero: no bound)
	before time.Time // died before it (zero: no bound)
}

// any reports whether the filter narrows the list at all.
func (f deadFilter) any() bool { return f.reason != "" || !f.after.IsZero() || !f.before.IsZero() }

// match reports whether f selects d.
func (f deadFilter) match(d fdbqueue.DeadJob) bool {
	return strings.Contains(d.Reason, f.reason) &&
		(f.after.IsZero() || !d.Died.Before(f.after)) &&
		(f.before.IsZero() || d.Died.Before(f.before))
}

// ended reports whether d, and so every job after it in the list (in
// order of death), died too late for f.
func (f deadFilter) ended(d fdbqueue.DeadJob) bool {
	return !f.before.IsZero() && !d.Died.Before(f.before)
}

// deadFilterFlags are the filter's flags.
type deadFilterFlags struct {
	reason, after, before *string
}

func addDeadFilterFlags(fs *flag.FlagSet) deadFilterFlags {
	return deadFilterFlags{
		reason: fs.String("reason", "", "only dead jobs whose reason contains this text (case-sensitive)"),
		after: fs.String("died-after", "", "only dead jobs that died at or after WHEN: an RFC 3339 time "+
			"(2026-11-23T09:00:00Z) or a duration before now (90m: in the last 90 minutes)"),
		before: fs.String("died-before", "", "only dead jobs that died before WHEN (as --died-after: 24h is more than a day ago)"),
	}
}

// parse reads the filter flags given on fs; durations count back from now.
// An empty --reason (an unset shell variable) is refused rather than read
// as "any reason", and so is a time range that selects nothing.
func (ff deadFilterFlags) parse(fs *flag.FlagSet, now time.Time) (deadFilter, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var f deadFilter
	if set["reason"] && *ff.reason == "" {
		return f, usagef(ErrBadArgument, "--reason is empty: give the text to look for in the reason (--all selects every dead job)")
	}
	f.reason = *ff.reason
	var err error
	if set["died-after"] {
		if f.after, err = parseWhen("died-after", *ff.after, now); err != nil {
			return f, err
		}
	}
	if set["died-before"] {
		if f.before, err = parseWhen("died-before", *ff.before, now); err != nil {
			return f, err
		}
	}
	if !f.after.IsZero() && !f.before.IsZero() && !f.after.Before(f.before) {
		return f, usagef(ErrBadArgument, "--died-after %s is not before --died-before %s: no job can match",
			f.after.UTC().Format(time.RFC3339Nano), f.before.UTC().Format(time.RFC3339Nano))
	}
	return f, nil
}

// parseWhen parses a time flag: an RFC 3339 time, or a duration (at least
// 0) before now.
func parseWhen(name, v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, usagef(ErrBadArgument, "--%s %s: want a duration before now, not after", name, v)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	return time.Time{}, usagef(ErrBadArgument, "--%s %q: want an RFC 3339 time (2026-11-23T09:00:00Z) or a duration before now (90m)", name, v)
}

// deadAction is requeue-dead or delete-dead: op applies to one dead job by
// ID, as JobQueue.Requeue and DeleteDead do.
type deadAction struct {
	verb string // "requeue"
	done string // "requeued"
	op   func(ctx context.Context, q *fdbqueue.JobQueue, s *session, id fdbqueue.JobID, opID fdbqueue.OpOption) error
}

// setupDeadAction registers the flags of requeue-dead or delete-dead and
// returns the command: job IDs as arguments, or --all and the filters,
// which pick from the dead-letter list as it stands when the command
// starts; --dry-run lists the jobs instead and changes nothing.
func setupDeadAction(fs *flag.FlagSet, a deadAction) func(context.Context, *session, []string) error {
	jobsByDefault(fs)
	jf := addJobFlags(fs)
	all := fs.Bool("all", false, "every job in the dead-letter list, as listed when the command starts (narrowed by the filters, which select without --all too)")
	dry := fs.Bool("dry-run", false, "list the dead jobs the command would "+a.verb+", and change nothing")
	ff := addDeadFilterFlags(fs)
	return func(ctx context.Context, s *session, args []string) error {
		f, err := ff.parse(fs, s.env.Now())
		if err != nil {
			return err
		}
		byList := *all || f.any()
		if byList && len(args) > 0 {
			return usagef(ErrBadArgument, "give job IDs or --all and filters, not both")
		}
		if !byList && len(args) == 0 {
			return usagef(ErrBadArgument, "give job IDs (from dead), --all, or a filter (--reason, --died-after, --died-before)")
		}
		ids := make([]fdbqueue.JobID, 0, len(args))
		given := map[fdbqueue.JobID]bool{}
		for _, arg := range args {
			id, err := ParseJobID(arg)
			if err != nil {
				return err
			}
			if !given[id] {
				given[id] = true
				ids = append(ids, id)
			}
		}
		q, err := s.openJobs(ctx, jf)
		if err != nil {
			return err
		}
		if *dry {
			return dryRunDead(ctx, s, q, a, ids, byList, f)
		}
		if byList {
			if err := eachDead(ctx, s, q, 0, f, func(d fdbqueue.DeadJob) error {
				ids = append(ids, d.ID)
				return nil
			}); err != nil {
				return err
			}
		}
		return applyDead(ctx, s, q, a, ids)
	}
}

// dryRunDead lists, as dead does, the dead jobs that a would act on: the
// list's jobs that f selects, or those of ids that are dead. IDs that are
// not dead fail as the action would, with fdbqueue.ErrJobNotFound. It
// writes nothing to the database. (A requeue it lists may still fail on
// a unique key that a live job holds: ErrUniqueKeyHeld.)
func dryRunDead(ctx context.Context, s *session, q *fdbqueue.JobQueue, a deadAction, ids []fdbqueue.JobID, byList bool, f deadFilter) error {
	w := &errWriter{w: s.env.Stdout}
	now := s.env.Now()
	want := make(map[fdbqueue.JobID]bool, len(ids))
	for _, id := range ids {
		want[id] = true
	}
	n := 0
	err := eachDead(ctx, s, q, 0, f, func(d fdbqueue.DeadJob) error {
		if !byList {
			if !want[d.ID] {
				return nil
			}
			delete(want, d.ID)
		}
		n++
		writeDeadLine(w, n, d, now)
		if !byList && len(want) == 0 {
			return errStopScan
		}
		return w.err
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "would %s %s in %s (dry run: nothing changed)\n", a.verb, plural(n, "dead job"), pathString(s.spec.Path))
	if w.err != nil {
		return w.err
	}
	var errs []error
	for _, id := range ids {
		if want[id] {
			errs = append(errs, fmt.Errorf("%w: %s is not a dead job", fdbqueue.ErrJobNotFound, id))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s would not be %s: %w", plural(len(errs), "job"), a.done, errors.Join(errs...))
	}
	return nil
}

// applyDead applies a to each job of ids, one transaction each with its
// own operation ID (exactly once through the journal under
// commit_unknown_result, and settled as push and pop are when the command
// is interrupted while a commit is in flight: see settle). Each is one of
// the library's single-job operations, a few small keys, far inside FDB's
// transaction limits whatever the number of jobs.
//
// A job that fails on its own (not dead: fdbqueue.ErrJobNotFound; its
// unique key held by a live job: fdbqueue.ErrUniqueKeyHeld, it stays
// dead) does not stop the others: the summary line counts what was done,
// and the error joins the failures, so that errors.Is finds them. Any
// other error (the database's, the context's) would fail the rest alike:
// the command stops there, and its error says how many jobs were done
// before it and which job it stopped at.
func applyDead(ctx context.Context, s *session, q *fdbqueue.JobQueue, a deadAction, ids []fdbqueue.JobID) error {
	var errs []error
	done := 0
	for _, id := range ids {
		_, err := settle(ctx, func(ctx context.Context, opID fdbqueue.OpOption) (struct{}, error) {
			return struct{}{}, a.op(ctx, q, s, id, opID)
		})
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s %d of %d jobs: %w", a.done, done, len(ids), err)
			}
			if !errors.Is(err, fdbqueue.ErrJobNotFound) && !errors.Is(err, fdbqueue.ErrUniqueKeyHeld) {
				err = fmt.Errorf("%s %d of %d jobs, then stopped at job %s: %w", a.done, done, len(ids), id, err)
				if len(errs) > 0 {
					err = errors.Join(err, fmt.Errorf("before that, %s not %s: %w", plural(len(errs), "job"), a.done, errors.Join(errs...)))
				}
				return err
			}
			if !errors.Is(err, fdbqueue.ErrJobNotFound) { // whose message names the job
				err = fmt.Errorf("job %s: %w", id, err)
			}
			errs = append(errs, err)
			continue
		}
		done++
	}
	fmt.Fprintf(s.env.Stdout, "%s %d of %s in %s\n", a.done, done, plural(len(ids), "dead job"), pathString(s.spec.Path))
	if len(errs) > 0 {
		return fmt.Errorf("%s not %s: %w", plural(len(errs), "job"), a.done, errors.Join(errs...))
	}
	return nil
}
