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
	"strings"
	"time"

	"github.com/fdbqueue/fdbqueue"
)

// The job-queue commands on its periodic jobs' schedules: schedules
// (JobQueue.Schedules) lists their markers, unschedule
// (JobQueue.Unschedule) removes one.

// ScheduleJSON is one schedule in schedules --json: fdbqueue.ScheduleInfo.
// Name is the schedule's name when it is valid UTF-8; otherwise
// NameBase64 holds its bytes. A marker the library cannot read has Error
// and MarkerBase64 instead of Slot and JobID; a key of the markers' range
// that is not a marker's (another program's) has no name, but KeyBase64,
// Error and MarkerBase64.
type ScheduleJSON struct {
	Name       *string `json:"name,omitempty"`
	NameBase64 string  `json:"name_base64,omitempty"`
	Slot       string  `json:"slot,omitempty"`   // the last slot scheduled, RFC 3339 (UTC)
	JobID      string  `json:"job_id,omitempty"` // hex: the slot's job, or the one holding its unique key
	// Duplicate: the slot was skipped, its job's unique key held by job_id.
	Duplicate bool `json:"duplicate,omitempty"`
	// KeyBase64: the key, in full, of an entry that is not a marker's
	// (ScheduleInfo.Key); unschedule cannot remove it: clear the key.
	KeyBase64 string `json:"key_base64,omitempty"`
	// Error: the marker cannot be read, or the key is not a marker's
	// (ScheduleInfo.Err); MarkerBase64 holds the stored value. Schedule
	// fails on such a marker; unschedule removes it.
	Error        string `json:"error,omitempty"`
	MarkerBase64 string `json:"marker_base64,omitempty"`
}

func scheduleJSON(si fdbqueue.ScheduleInfo) ScheduleJSON {
	var j ScheduleJSON
	if si.Err != nil {
		j.Error, j.MarkerBase64 = si.Err.Error(), base64.StdEncoding.EncodeToString(si.Raw)
	} else {
		j.Slot, j.JobID, j.Duplicate = rfc3339(si.Slot), si.ID.String(), si.Duplicate
	}
	if foreign(si) {
		j.KeyBase64 = base64.StdEncoding.EncodeToString(si.Key)
		return j
	}
	j.Name, j.NameBase64 = jsonValue([]byte(si.Name))
	return j
}

// foreign reports whether si is a key of the markers' range that is not a
// marker's: it has no name (a schedule's is never empty).
func foreign(si fdbqueue.ScheduleInfo) bool { return si.Name == "" }

// fdbcliKey is key as fdbcli takes it: letters, digits and "-._/:" as they
// are, every other byte as \xNN (its parser's escape), so that the text
// can be pasted into fdbcli's clear.
func fdbcliKey(key []byte) string {
	var b strings.Builder
	for _, c := range key {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("-._/:", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "\\x%02x", c)
		}
	}
	return b.String()
}

// markerShown is how many bytes of an unreadable marker the text form of
// schedules shows, in hex (--json gives them all).
const markerShown = 32

// schedulePage is the most markers one Schedules transaction reads: a
// marker's key is at most the prefix and about 2,000 bytes, so a page
// stays near 2 MB at worst, well within FDB's five-second window.
var schedulePage = 1000

// listSchedules reads every schedule of q, and every other key of the
// markers' range, in pages of schedulePage, each its own read-only
// transaction (a long list is not one snapshot), each page after the
// last key of the one before.
func listSchedules(ctx context.Context, s *session, q *fdbqueue.JobQueue) ([]fdbqueue.ScheduleInfo, error) {
	var out []fdbqueue.ScheduleInfo
	var cursor []byte
	for {
		page, err := q.Schedules(ctx, s.db, cursor, schedulePage)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < schedulePage {
			return out, nil
		}
		cursor = page[len(page)-1].Key
	}
}

// when is t relative to now: "5m0s ago", or "in 5m0s" for a time ahead.
func when(now, t time.Time) string {
	if t.After(now) {
		return "in " + t.Sub(now).Round(time.Second).String()
	}
	return ago(now, t)
}

// quoteName quotes a schedule's name as the text forms show it (bytes
// that are not UTF-8 as \x escapes).
func quoteName(name string) string { return strconv.Quote(name) }

// writeScheduleLine writes schedule si as the text form of schedules
// shows it, as its nth line.
func writeScheduleLine(w io.Writer, n int, si fdbqueue.ScheduleInfo, now time.Time) {
	if si.Err != nil {
		shown := hex.EncodeToString(si.Raw[:min(len(si.Raw), markerShown)])
		if len(si.Raw) > markerShown {
			shown += "..."
		}
		if foreign(si) {
			fmt.Fprintf(w, "%4d  not a schedule's marker: key %s, value of %d bytes %s  (another program's? unschedule cannot remove it: fdbcli's clear can)\n",
				n, fdbcliKey(si.Key), len(si.Raw), shown)
			return
		}
		fmt.Fprintf(w, "%4d  %s  unreadable marker of %d bytes %s  (Schedule fails on it; unschedule removes it)\n",
			n, quoteName(si.Name), len(si.Raw), shown)
		return
	}
	job := "job " + si.ID.String()
	if si.Duplicate {
		job = "skipped: job " + si.ID.String() + " held its unique key"
	}
	fmt.Fprintf(w, "%4d  %s  last slot %s (%s)  %s\n", n, quoteName(si.Name), rfc3339(si.Slot), when(now, si.Slot), job)
}

func setupSchedules(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	jobsByDefault(fs)
	jf := addJobFlags(fs)
	asJSON := fs.Bool("json", false, "print a JSON array")
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		q, err := s.openJobs(ctx, jf)
		if err != nil {
			return err
		}
		all, err := listSchedules(ctx, s, q)
		if err != nil {
			return err
		}
		return writeList(s, all, *asJSON, scheduleJSON, "(no schedules)", func(w io.Writer) {
			now := s.env.Now()
			for i, si := range all {
				writeScheduleLine(w, i+1, si, now)
			}
		})
	}
}

// oneScheduleName parses the single schedule name unschedule takes: not
// empty. A name over fdbqueue.MaxScheduleNameSize bytes is taken, as
// Unschedule takes it, so that every marker schedules lists can be
// removed; one whose key passes the key limit fails in Unschedule.
func oneScheduleName(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef(ErrBadArgument, "give one schedule name (got %d arguments)", len(args))
	}
	switch name := args[0]; {
	case name == "":
		return "", usagef(ErrBadArgument, "an empty schedule name")
	default:
		return name, nil
	}
}

// scheduleNotFound is unschedule's fdbqueue.ErrScheduleNotFound in the
// command line's terms.
func scheduleNotFound(s *session, name string) error {
	return fmt.Errorf("%w: %s: no schedule of this name in %s (never scheduled, or unscheduled already)",
		fdbqueue.ErrScheduleNotFound, quoteName(name), pathString(s.spec.Path))
}

func setupUnschedule(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	jobsByDefault(fs)
	jf := addJobFlags(fs)
	dry := fs.Bool("dry-run", false, "show the schedule, as schedules does, and change nothing (a missing one fails as the unschedule would)")
	return func(ctx context.Context, s *session, args []string) error {
		name, err := oneScheduleName(args)
		if err != nil {
			return err
		}
		q, err := s.openJobs(ctx, jf)
		if err != nil {
			return err
		}
		w := &errWriter{w: s.env.Stdout}
		if *dry {
			// The page that starts at name holds its marker first, if any.
			page, err := q.Schedules(ctx, s.db, q.ScheduleCursorAt(name), 1)
			if err != nil {
				return err
			}
			if len(page) == 0 || page[0].Name != name {
				return scheduleNotFound(s, name)
			}
			writeScheduleLine(w, 1, page[0], s.env.Now())
			fmt.Fprintf(w, "would unschedule %s in %s (dry run: nothing changed)\n", quoteName(name), pathString(s.spec.Path))
			return w.err
		}
		si, err := settle(ctx, func(ctx context.Context, opID fdbqueue.OpOption) (fdbqueue.ScheduleInfo, error) {
			return q.Unschedule(ctx, s.db, name, opID)
		})
		if errors.Is(err, fdbqueue.ErrScheduleNotFound) {
			return scheduleNotFound(s, name)
		}
		if err != nil {
			return err
		}
		writeScheduleLine(w, 1, si, s.env.Now())
		fmt.Fprintf(w, "unscheduled %s in %s (its jobs stay; a scheduler still running it schedules it again)\n",
			quoteName(name), pathString(s.spec.Path))
		return w.err
	}
}
