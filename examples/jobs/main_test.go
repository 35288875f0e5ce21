package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/examples/exampleapp"
)

// The example, small: every job is done once or dead-lettered, under
// failures, process crashes and unknown commit results.
func TestRunSmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := run(ctx, exampleapp.JobsConfig{Jobs: 300, Producers: 2, Processes: 2, Workers: 3, MaxAttempts: 3,
		Fail: 0.2, Crash: 0.03, MaxDelay: 50 * time.Millisecond, Lease: 100 * time.Millisecond,
		Seed: 3, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, 0.05, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(s)
	if s.Added != 300 || s.Done+s.Dead != 300 || s.Lost != 0 || s.Duplicates != 0 {
		t.Fatalf("want 300 jobs done or dead, none lost or duplicated: %+v", s)
	}
	if s.Crashes == 0 || s.Retried == 0 {
		t.Fatalf("the run should include crashes and retries: %+v", s)
	}
}
