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
	out := fs.String("out", "", "append each removed item to this file as a JSON line (default: discard them)")
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
		t, err := s.open()
		if err != nil {
			return err
		}
		var sink io.Writer
		if *out != "" {
			f, err := os.OpenFile(*out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return err
			}
			defer f.Close()
			sink = f
		}
		return t.drain(ctx, s, *batch, *limit, sink)
	}
}

// drain removes items in batches of batch (one transaction each, exactly
// once) until the queue is empty or limit items are gone, writes them to sink
// (if any) as JSON lines after each commit, and reports progress: on a
// terminal a progress bar redrawn after each batch (its total is the depth
// at the start, a scan), otherwise nothing until the final summary line.
// Producers may add items meanwhile; drain takes those too.
func (t *target) drain(ctx context.Context, s *session, batch int, limit int64, sink io.Writer) error {
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
		if sink != nil {
			enc := json.NewEncoder(sink)
			for _, it := range items {
				if err := enc.Encode(jsonItem(entry{Value: it.Value, Priority: it.priority})); err != nil {
					runErr = fmt.Errorf("writing removed items: %w", err)
					break
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
	elapsed := s.env.Now().Sub(start)
	fmt.Fprintf(w, "drained %s from %s in %s (%s)\n", plural(done, "item"), pathString(t.spec.Path),
		elapsed.Round(time.Millisecond), rateString(rate(done, elapsed)))
	if runErr != nil {
		return fmt.Errorf("after %d items: %w", done, runErr)
	}
	return nil
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
