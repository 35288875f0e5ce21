package cli

import (
	"context"
	"flag"
	"fmt"
	"time"
)

func setupWatch(fs *flag.FlagSet) func(context.Context, *session, []string) error {
	interval := fs.Duration("interval", time.Second, "time between samples")
	count := fs.Int("count", 0, "stop after this many samples (0: until interrupted)")
	return func(ctx context.Context, s *session, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *interval <= 0 {
			return usagef(ErrBadArgument, "--interval %s: want more than 0", *interval)
		}
		if *count < 0 {
			return usagef(ErrBadArgument, "--count %d: want 0 (until interrupted) or more", *count)
		}
		t, err := s.open(ctx)
		if err != nil {
			return err
		}
		return t.watch(ctx, s, *interval, *count)
	}
}

// watch prints a sample at once and then at every tick: the time, the depth
// (DepthSource: the depth counters, one small read per sample), its change since the previous
// sample and that change per second (the net rate: enqueues minus
// dequeues). It stops after count samples (0: never) or when ctx ends,
// which is its normal end (Ctrl-C), not an error.
func (t *target) watch(ctx context.Context, s *session, interval time.Duration, count int) error {
	w := s.env.Stdout
	tk := s.env.NewTicker(interval)
	defer tk.Stop()
	fmt.Fprintf(w, "watching %s every %s\n", pathString(t.spec.Path), interval)
	fmt.Fprintf(w, "%-8s %10s %10s %12s\n", "time", "depth", "change", "net/s")
	var prevDepth int64
	var prevAt time.Time
	for n := 1; ; n++ {
		d, err := t.depth.Depth(ctx, s.db)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("depth: %w", err)
		}
		now := s.env.Now()
		if n == 1 {
			fmt.Fprintf(w, "%-8s %10d %10s %12s\n", now.Format("15:04:05"), d, "-", "-")
		} else {
			r := "-"
			if el := now.Sub(prevAt); el > 0 {
				r = fmt.Sprintf("%+.1f", float64(d-prevDepth)/el.Seconds())
			}
			fmt.Fprintf(w, "%-8s %10d %+10d %12s\n", now.Format("15:04:05"), d, d-prevDepth, r)
		}
		prevDepth, prevAt = d, now
		if s.env.onSample != nil {
			s.env.onSample(n)
		}
		if count > 0 && n >= count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tk.C():
		}
	}
}
