package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"time"
)

// Stats is what the stats command reports (its --json form).
type Stats struct {
	Queue string `json:"queue"` // the queue's tuple, e.g. ("myapp", "jobs")
	Kind  string `json:"kind"`  // "fifo" or "priority"
	// Layout is "indexed", "versionstamp" or "priority".
	Layout   string `json:"layout"`
	Encoding string `json:"encoding"` // "raw" or "tuple"
	Depth    int64  `json:"depth"`    // items in the queue
	// DepthMethod is how Depth was found: "counters" (the queue's depth
	// counters, one small read) or "scan" (--scan: a snapshot scan).
	DepthMethod string `json:"depth_method"`
	// OldestAgeSeconds is the age of the head item (to the millisecond),
	// null when unknown.
	OldestAgeSeconds *float64 `json:"oldest_age_seconds"`
	// OldestUnknown says why the age is unknown, empty when it is known.
	OldestUnknown string `json:"oldest_unknown,omitempty"`
	// Staged counts the requests waiting in each staged line ("q" for a
	// queue, "min" and "max" for a priority queue).
	Staged map[string]int64 `json:"staged"`
	// JournalKeys and JournalBytes are the operation journal's keys (the
	// operations' records or slots, their chunks and, for an operation
	// ID the caller chose, its marker) and their size (keys and values).
	JournalKeys  int64 `json:"journal_keys"`
	JournalBytes int64 `json:"journal_bytes"`
}

func setupStats(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	asJSON := fs.Bool("json", false, "print as JSON")
	scan := fs.Bool("scan", false, "count the items with a scan (O(depth)) instead of reading the depth counters")
	jf := addJobFlags(fs)
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if s.spec.Kind == Jobs {
			return jobStats(ctx, s, jf, *asJSON)
		}
		t, err := s.open(ctx)
		if err != nil {
			return err
		}
		if *scan {
			t.depth = t.scanDepth()
		}
		st, err := t.stats(ctx, s)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(s, st)
		}
		return writeStatsText(s, t, st)
	}
}

// stats gathers the numbers: the depth (DepthSource), the head's age (one
// small read, on versionstamp keys only), and paged scans of the meta
// subspace (the staged line, one per line: two for a priority queue; the
// journal). Each is its own read-only transaction with snapshot reads.
func (t *target) stats(ctx context.Context, s *session) (Stats, error) {
	st := Stats{
		Queue:       pathString(t.spec.Path),
		Kind:        t.spec.Kind.String(),
		Layout:      t.spec.Layout.String(),
		Encoding:    encodingName(t.spec.Encoding),
		DepthMethod: t.depth.Method(),
		Staged:      map[string]int64{},
	}
	if t.spec.Kind == Priority {
		st.Layout = "priority"
	}
	var err error
	if st.Depth, err = t.depth.Depth(ctx, s.db); err != nil {
		return st, fmt.Errorf("depth: %w", err)
	}
	age, ok, err := t.oldestAge(ctx, s.db)
	if err != nil {
		return st, fmt.Errorf("oldest item: %w", err)
	}
	switch {
	case ok:
		secs := age.Round(time.Millisecond).Seconds()
		st.OldestAgeSeconds = &secs
	case t.spec.Kind == FIFO && t.spec.Layout == Versionstamp:
		st.OldestUnknown = "queue is empty"
	default:
		st.OldestUnknown = st.Layout + " keys carry no time (only versionstamp keys do)"
	}
	sides := []string{"q"}
	if t.spec.Kind == Priority {
		sides = []string{"min", "max"}
	}
	meta := t.metaSub()
	for _, side := range sides {
		r, err := meta.Range("s", side, "r")
		if err != nil {
			return st, err
		}
		n, _, err := rangeStats(ctx, s.db, r)
		if err != nil {
			return st, fmt.Errorf("staged line: %w", err)
		}
		st.Staged[side] = n
	}
	jr, err := meta.Range("j")
	if err != nil {
		return st, err
	}
	if st.JournalKeys, st.JournalBytes, err = rangeStats(ctx, s.db, jr); err != nil {
		return st, fmt.Errorf("journal: %w", err)
	}
	return st, nil
}

func writeStatsText(s *session, t *target, st Stats) error {
	w := s.env.Stdout
	fmt.Fprintf(w, "queue    %s\n", t.spec.describe())
	fmt.Fprintf(w, "depth    %d (%s)\n", st.Depth, st.DepthMethod)
	if st.OldestAgeSeconds != nil {
		age := time.Duration(*st.OldestAgeSeconds * float64(time.Second)).Round(time.Millisecond)
		fmt.Fprintf(w, "oldest   %s (from its versionstamp)\n", age)
	} else {
		fmt.Fprintf(w, "oldest   unknown: %s\n", st.OldestUnknown)
	}
	if t.spec.Kind == Priority {
		fmt.Fprintf(w, "staged   %d waiting (min %d, max %d)\n", st.Staged["min"]+st.Staged["max"], st.Staged["min"], st.Staged["max"])
	} else {
		fmt.Fprintf(w, "staged   %d waiting\n", st.Staged["q"])
	}
	_, err := fmt.Fprintf(w, "journal  %d keys, %d bytes\n", st.JournalKeys, st.JournalBytes)
	return err
}

func writeJSON(s *session, v any) error {
	enc := json.NewEncoder(s.env.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeList prints a list command's result (peek, dead): with --json an
// array of toJSON of each element; otherwise the empty note when there is
// nothing, else what lines writes.
func writeList[T, J any](s *session, xs []T, asJSON bool, toJSON func(T) J, empty string, lines func(w io.Writer)) error {
	if asJSON {
		out := make([]J, len(xs))
		for i, x := range xs {
			out[i] = toJSON(x)
		}
		return writeJSON(s, out)
	}
	if len(xs) == 0 {
		_, err := fmt.Fprintln(s.env.Stdout, empty)
		return err
	}
	w := &errWriter{w: s.env.Stdout}
	lines(w)
	return w.err
}

// errWriter keeps the first error of its writes (and writes nothing after
// it), so that a listing written line by line fails as its JSON form does.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func noArgs(args []string) error {
	if len(args) > 0 {
		return usagef(ErrBadArgument, "unexpected arguments %q", args)
	}
	return nil
}
