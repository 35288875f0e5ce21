package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fdbqueue/fdbqueue"
)

func setupDrain(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	batch := fs.Int("batch", 100, "items removed per transaction")
	limit := fs.Int64("limit", 0, "stop after this many items (0: until the queue is empty)")
	out := fs.String("out", "", "append each removed item to this file as a JSON line, synced after each batch (default: discard them); "+
		"if a write fails, drain stops and prints the batch's items not written to stderr as JSON lines")
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *batch < 1 {
			return usagef(ErrBadArgument, "--batch %d: want at least 1", *batch)
		}
		if *limit < 0 {
			return usagef(ErrBadArgument, "--limit %d: want 0 (no limit) or more", *limit)
		}
		t, err := s.open(ctx)
		if err != nil {
			return err
		}
		var sink *drainOut
		if *out != "" {
			open := s.env.openOut
			if open == nil {
				open = openAppend
			}
			f, err := open(*out)
			if err != nil {
				return err
			}
			sink = &drainOut{w: f, name: *out}
			if sf, ok := f.(interface{ Sync() error }); ok {
				sink.sync = sf.Sync
			}
			err = t.drain(ctx, s, *batch, *limit, sink)
			// A file system may report a failed write only when the file
			// is closed (NFS): the items may then not all be in it.
			if cerr := f.Close(); cerr != nil && err == nil {
				err = fmt.Errorf("closing %s: %w (the removed items written to it may not all be there)", *out, cerr)
			}
			return err
		}
		return t.drain(ctx, s, *batch, *limit, sink)
	}
}

// openAppend opens name for drain --out: created if need be, appended to.
func openAppend(name string) (io.WriteCloser, error) {
	return os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
}

// drainOut is where drain writes the items it removes (--out).
type drainOut struct {
	w    io.Writer
	name string       // the file's name, for messages
	sync func() error // flushes w to stable storage (a file's Sync); nil if it cannot
}

// drain removes items in batches of batch (one transaction each, exactly
// once) until the queue is empty or limit items are gone, writes them to out
// (if any) as JSON lines after each commit, and reports progress: on a
// terminal a progress bar redrawn after each batch (its total is the depth
// at the start, from the depth counters: one small read), otherwise
// nothing until the final summary line.
// Producers may add items meanwhile; drain takes those too.
//
// After each batch, out is synced to stable storage (when it is a file)
// before the next batch is removed; a failed sync stops drain.
//
// The items of a committed batch are gone from the queue: if writing one of
// them to out fails (a full disk), drain stops, and writes that item and the
// rest of its batch to stderr as the same JSON lines, after a line that says
// what follows (out may end with part of the first of them), so that none is
// lost; the error counts them. If stderr fails too, the error says how many
// items were removed and written nowhere.
func (t *target) drain(ctx context.Context, s *session, batch int, limit int64, out *drainOut) error {
	w := s.env.Stdout
	start := s.env.Now()
	var total int64
	if s.env.Terminal {
		d, err := t.depth.Depth(ctx, s.db)
		if err != nil {
			return fmt.Errorf("depth: %w", err)
		}
		total = d
		if limit > 0 && limit < total {
			total = limit
		}
	}
	var done int64
	var runErr error
	var unwritten []popped // removed, and not written to out
	for limit == 0 || done < limit {
		n := batch
		if limit > 0 && int64(n) > limit-done {
			n = int(limit - done)
		}
		items, err := t.pop(ctx, s, n, false)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			break
		}
		if err != nil {
			runErr = err
			break
		}
		if out != nil {
			enc := json.NewEncoder(out.w)
			for i, it := range items {
				if err := enc.Encode(jsonItem(entry{Value: it.Value, Priority: it.priority})); err != nil {
					runErr = fmt.Errorf("writing removed items to %s: %w", out.name, err)
					unwritten = items[i:]
					break
				}
			}
			// The batch is durable in the file before the next one is
			// removed: a machine that crashes then loses at most the
			// batch being written, not everything the OS had yet to flush.
			if runErr == nil && out.sync != nil {
				if err := out.sync(); err != nil {
					runErr = fmt.Errorf("syncing %s: %w (its last %s may not be on disk)", out.name, err, plural(len(items), "item"))
				}
			}
		}
		done += int64(len(items))
		if s.env.Terminal {
			fmt.Fprintf(w, "\r%s", progressLine(done, total, rate(done, s.env.Now().Sub(start))))
		}
		if runErr != nil {
			break
		}
	}
	if s.env.Terminal && done > 0 {
		fmt.Fprintln(w)
	}
	if len(unwritten) > 0 {
		runErr = rescue(s.env.Stderr, out.name, unwritten, runErr)
	}
	elapsed := s.env.Now().Sub(start)
	fmt.Fprintf(w, "drained %s from %s in %s (%s)\n", plural(done, "item"), pathString(t.spec.Path),
		elapsed.Round(time.Millisecond), rateString(rate(done, elapsed)))
	if runErr != nil {
		return fmt.Errorf("after %s: %w", plural(done, "item"), runErr)
	}
	return nil
}

// rescue writes items, removed from the queue but not written to the --out
// file name, to stderr as JSON lines after a line that says what they are,
// and returns err completed with where they are: on stderr, or (if stderr
// fails too) nowhere.
func rescue(stderr io.Writer, name string, items []popped, err error) error {
	n := len(items)
	follow := "they follow as JSON lines"
	if n == 1 {
		follow = "it follows as a JSON line"
	}
	_, werr := fmt.Fprintf(stderr, "fdbqueue drain: %s could not be written to %s; %s:\n", plural(n, "removed item"), name, follow)
	written := 0
	if werr == nil {
		enc := json.NewEncoder(stderr)
		for _, it := range items {
			if werr = enc.Encode(jsonItem(entry{Value: it.Value, Priority: it.priority})); werr != nil {
				break
			}
			written++
		}
	}
	if werr == nil {
		return fmt.Errorf("%w; the %s not written to it %s on stderr above", err, plural(n, "item"), isAre(n))
	}
	lost := n - written
	return fmt.Errorf("%w; %s removed and could not be written (writing %s to stderr failed too, after %d: %w)",
		err, plural(lost, "item")+" "+wasWere(lost), plural(n, "item"), written, werr)
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func wasWere(n int) string {
	if n == 1 {
		return "was"
	}
	return "were"
}

// rate is items per second, or -1 when no time has passed.
func rate(n int64, d time.Duration) float64 {
	if d <= 0 {
		return -1
	}
	return float64(n) / d.Seconds()
}

func rateString(r float64) string {
	if r < 0 {
		return "rate unknown"
	}
	return fmt.Sprintf("%.0f items/s", r)
}

const barWidth = 30

// progressLine draws "[#####.....]  50/100  50%  20 items/s". Past the
// total (items added while draining) the bar stays full.
func progressLine(done, total int64, r float64) string {
	filled, pct := barWidth, 100
	if total > 0 && done < total {
		filled = int(done * barWidth / total)
		pct = int(done * 100 / total)
	}
	return fmt.Sprintf("[%s%s] %d/%d %3d%% %s", strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		done, total, pct, rateString(r))
}
