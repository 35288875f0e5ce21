package cli

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/fdbqueue/fdbqueue"
)

// The job-queue commands: stats (with --kind jobs), dead, requeue-dead and
// delete-dead here, job and cancel in jobid.go, schedules and unschedule in
// schedules.go. A job queue's jobs are
// leased, not popped, so the item commands (peek, list, push, pop, drain,
// watch) refuse --kind jobs; the others take --kind jobs by default.

// jobFlags are the JobQueueConfig fields a command must share with the
// queue's clients.
type jobFlags struct {
	resolution *time.Duration
}

// addJobFlags registers the job-queue flags on fs.
func addJobFlags(fs *flag.FlagSet) jobFlags {
	return jobFlags{resolution: fs.Duration("stats-resolution", time.Second,
		"job queue: JobQueueConfig.StatsResolution, as the queue's clients set it (its time buckets)")}
}

// jobsByDefault makes --kind default to jobs on fs (every job command but stats).
func jobsByDefault(fs *flag.FlagSet) {
	if f := fs.Lookup("kind"); f != nil {
		_ = f.Value.Set("jobs")
		f.DefValue = "jobs"
	}
}

// envClock is a fdbqueue.Clock on Env.Now.
type envClock func() time.Time

func (c envClock) Now() time.Time                         { return c() }
func (c envClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// openJobs opens the session's queue as a JobQueue on Env.Now's clock,
// after checking that something is stored at its subspace (requireQueue)
// and, with the library's Stats (snapshot reads, no write), that its
// stored configuration agrees with the flags, before any command reads or
// changes its jobs.
func (s *session) openJobs(ctx context.Context, jf jobFlags) (*fdbqueue.JobQueue, error) {
	q, _, err := s.openJobsStats(ctx, jf)
	return q, err
}

// openJobsStats is openJobs, and returns the Stats its check read (stats
// --kind jobs prints them instead of reading them again).
func (s *session) openJobsStats(ctx context.Context, jf jobFlags) (*fdbqueue.JobQueue, fdbqueue.JobStats, error) {
	var st fdbqueue.JobStats
	if s.spec.Kind != Jobs {
		return nil, st, usagef(ErrUnknownKind, "--kind %s: this command needs a job queue (--kind jobs)", s.spec.Kind)
	}
	if *jf.resolution < time.Millisecond {
		return nil, st, usagef(ErrBadArgument, "--stats-resolution %s: want at least 1ms", *jf.resolution)
	}
	sub, err := fdbqueue.NewSubspace(s.spec.Path)
	if err != nil {
		return nil, st, usagef(ErrBadQueuePath, "%v", err)
	}
	cfg := fdbqueue.JobQueueConfig{StatsResolution: *jf.resolution, Clock: envClock(s.env.Now)}
	q, err := fdbqueue.NewJobQueue(sub, cfg, s.env.QueueOptions...)
	if err != nil {
		return nil, st, err
	}
	if err := s.requireQueue(ctx, sub); err != nil {
		return nil, st, err
	}
	if st, err = q.Stats(ctx, s.db); err != nil {
		return nil, st, err
	}
	return q, st, nil
}

// JobStatsJSON is what stats --kind jobs --json prints: fdbqueue.JobStats
// with the ages in seconds.
type JobStatsJSON struct {
	Queue         string  `json:"queue"`
	Kind          string  `json:"kind"` // "jobs"
	Queued        int64   `json:"queued"`
	Due           int64   `json:"due"`
	Delayed       int64   `json:"delayed"`
	Leased        int64   `json:"leased"`
	ExpiredLeases int64   `json:"expired_leases"`
	Dead          int64   `json:"dead"`
	OldestDueSecs float64 `json:"oldest_due_seconds"` // 0 when nothing is due
}

// jobStats prints JobQueue.Stats: one read-only transaction of snapshot
// reads (counters and time buckets), no scan of the jobs; the one
// openJobs ran to check the stored configuration.
func jobStats(ctx context.Context, s *session, jf jobFlags, asJSON bool) error {
	_, st, err := s.openJobsStats(ctx, jf)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(s, JobStatsJSON{
			Queue: pathString(s.spec.Path), Kind: "jobs",
			Queued: st.Queued, Due: st.Due, Delayed: st.Delayed, Leased: st.Leased,
			ExpiredLeases: st.ExpiredLeases, Dead: st.Dead,
			OldestDueSecs: st.OldestDue.Round(time.Millisecond).Seconds(),
		})
	}
	w := s.env.Stdout
	fmt.Fprintf(w, "queue    %s\n", s.spec.describe())
	fmt.Fprintf(w, "queued   %d (due %d, delayed %d)\n", st.Queued, st.Due-st.ExpiredLeases, st.Delayed)
	fmt.Fprintf(w, "leased   %d live, %d expired (due again)\n", st.Leased, st.ExpiredLeases)
	fmt.Fprintf(w, "dead     %d\n", st.Dead)
	if st.Due == 0 {
		_, err = fmt.Fprintf(w, "oldest   nothing due\n")
	} else {
		_, err = fmt.Fprintf(w, "oldest   due for %s\n", st.OldestDue.Round(time.Millisecond))
	}
	return err
}

// DeadJobJSON is one dead job in dead --json. Value is the job's value as
// text when it is valid UTF-8; otherwise ValueBase64 holds its bytes.
type DeadJobJSON struct {
	ID          string  `json:"id"` // hex, as requeue-dead takes it
	Attempts    int     `json:"attempts"`
	MaxAttempts int     `json:"max_attempts"`
	Priority    int32   `json:"priority"`
	UniqueKey   string  `json:"unique_key,omitempty"`
	Reason      string  `json:"reason"`
	Added       string  `json:"added"` // RFC 3339, UTC
	Died        string  `json:"died"`  // RFC 3339, UTC
	Value       *string `json:"value,omitempty"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

func deadJSON(d fdbqueue.DeadJob) DeadJobJSON {
	j := DeadJobJSON{ID: d.ID.String(), Attempts: d.Attempts, MaxAttempts: d.MaxAttempts, Priority: d.Priority,
		UniqueKey: d.UniqueKey, Reason: d.Reason,
		Added: rfc3339(d.Added), Died: rfc3339(d.Died)}
	j.Value, j.ValueBase64 = jsonValue(d.Value)
	return j
}

// jsonValue is a job's value as the --json forms give it: as text when it
// is valid UTF-8, else in base64 (the second result).
func jsonValue(v []byte) (*string, string) {
	if utf8.Valid(v) {
		s := string(v)
		return &s, ""
	}
	return nil, base64.StdEncoding.EncodeToString(v)
}

// deadPage is the most dead jobs one ListDead transaction reads. ListDead
// reads their values too (up to kv.MaxValueSize each): 100 keeps a page of
// the largest jobs at about 10 MB, well within FDB's five-second window,
// where 1,000 would be 100 MB and could be retried forever at that size.
var deadPage = 100

// listDead reads up to limit (0: no limit) dead jobs that f selects,
// oldest death first (see eachDead).
func listDead(ctx context.Context, s *session, q *fdbqueue.JobQueue, limit int, f deadFilter) ([]fdbqueue.DeadJob, error) {
	var out []fdbqueue.DeadJob
	err := eachDead(ctx, s, q, limit, f, func(d fdbqueue.DeadJob) error {
		out = append(out, d)
		return nil
	})
	return out, err
}

// errStopScan, returned by eachDead's fn, ends the scan without an error.
var errStopScan = errors.New("stop the scan")

// eachDead calls fn for up to limit dead jobs that f selects, oldest death
// first, read with ListDead in pages of deadPage, each its own read-only
// transaction (a long list is not one snapshot, but each page stays within
// FDB's five-second limit). ListDead takes a limit of at least 1
// (fdbqueue.ErrInvalidArgument otherwise); limit 0 here means no limit:
// eachDead pages until the list ends. The list is in order of death: with
// f's --died-after the scan starts at the first job that died at or after
// it (DeadCursorAt), and with --died-before it ends at the first that died
// at or after that. fn keeps what it needs (requeue-dead --all keeps the IDs only,
// not every dead job's value); an error from fn ends the scan with it,
// errStopScan without an error.
func eachDead(ctx context.Context, s *session, q *fdbqueue.JobQueue, limit int, f deadFilter, fn func(fdbqueue.DeadJob) error) error {
	var cursor []byte
	if !f.after.IsZero() {
		cursor = q.DeadCursorAt(f.after)
	}
	seen := 0
	for {
		n := deadPage
		if limit > 0 && !f.any() {
			// Unfiltered, every job read counts toward limit. A filter's
			// page stays whole: it may select few of the jobs it reads.
			n = min(n, limit-seen)
		}
		page, err := q.ListDead(ctx, s.db, cursor, n)
		if err != nil {
			return err
		}
		for _, d := range page {
			if f.ended(d) {
				return nil
			}
			if !f.match(d) {
				continue
			}
			if err := fn(d); err != nil {
				if errors.Is(err, errStopScan) {
					return nil
				}
				return err
			}
			if seen++; limit > 0 && seen >= limit {
				return nil
			}
		}
		if len(page) < n {
			return nil
		}
		cursor = page[len(page)-1].Cursor
	}
}

func setupDead(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	jobsByDefault(fs)
	jf := addJobFlags(fs)
	limit := fs.Int("limit", 100, fmt.Sprintf("most dead jobs to show; 0: every one, read in pages of %d (one transaction each)", deadPage))
	asJSON := fs.Bool("json", false, "print a JSON array")
	ff := addDeadFilterFlags(fs)
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *limit < 0 {
			return usagef(ErrBadArgument, "--limit %d: want 0 (all) or more", *limit)
		}
		f, err := ff.parse(fs, s.env.Now())
		if err != nil {
			return err
		}
		q, err := s.openJobs(ctx, jf)
		if err != nil {
			return err
		}
		dead, err := listDead(ctx, s, q, *limit, f)
		if err != nil {
			return err
		}
		return writeList(s, dead, *asJSON, deadJSON, "(no dead jobs)", func(w io.Writer) {
			now := s.env.Now()
			for i, d := range dead {
				writeDeadLine(w, i+1, d, now)
			}
		})
	}
}

// writeDeadLine writes dead job d as the text form of dead shows it, as
// its nth line.
func writeDeadLine(w io.Writer, n int, d fdbqueue.DeadJob, now time.Time) {
	fmt.Fprintf(w, "%4d  %s  attempts %d/%d  died %s ago  %s  reason %s\n", n, d.ID,
		d.Attempts, d.MaxAttempts, now.Sub(d.Died).Round(time.Second), strconv.Quote(string(d.Value)), strconv.Quote(d.Reason))
}

// ParseJobID parses a job ID as dead and the library print it: 32 hex
// digits. Anything else fails with ErrBadArgument.
func ParseJobID(s string) (fdbqueue.JobID, error) {
	var id fdbqueue.JobID
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(id) {
		return id, usagef(ErrBadArgument, "job ID %q: want %d hex digits", s, 2*len(id))
	}
	copy(id[:], b)
	return id, nil
}

func setupRequeueDead(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	return setupDeadAction(fs, deadAction{verb: "requeue", done: "requeued",
		op: func(ctx context.Context, q *fdbqueue.JobQueue, s *session, id fdbqueue.JobID, opID fdbqueue.OpOption) error {
			return q.Requeue(ctx, s.db, id, opID)
		}})
}

func setupDeleteDead(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	return setupDeadAction(fs, deadAction{verb: "delete", done: "deleted",
		op: func(ctx context.Context, q *fdbqueue.JobQueue, s *session, id fdbqueue.JobID, opID fdbqueue.OpOption) error {
			return q.DeleteDead(ctx, s.db, id, opID)
		}})
}
