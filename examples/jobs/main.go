// Command jobs runs a fdbqueue.JobQueue on the embedded engine (memdb):
// producers add delayed and prioritised jobs, worker processes (each a
// JobQueue.Run pool) process them while handlers fail at random and whole
// processes stop at random (a pool cancelled mid-job, which abandons its
// handlers: their jobs are never acked, and are released, or come back
// when their leases expire where a release fails), and the database
// answers some commits with
// commit_unknown_result. Each job's effect is written in the transaction
// that acks it. A live progress line (on a terminal only) ends in a
// summary: done, retried, dead-lettered, lost and duplicate effects. It
// exits with status 1 if any job was lost or any effect duplicated. Its
// logic is in examples/exampleapp (RunJobs).
//
//	go run ./examples/jobs [-jobs 2000] [-producers 2] [-processes 3] [-workers 4] [-fail 0.1] [-crash 0.01] [-latency real|none] [-unknown 0.02]
//
// To run the same program against FoundationDB, use the fdbkv module:
//
//	cd fdbkv && go run ./cmd/examples jobs -cluster-file /etc/foundationdb/fdb.cluster
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/examples/exampleapp"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	var cfg exampleapp.JobsConfig
	cfg.AddFlags(flag.CommandLine)
	var eng exampleapp.MemdbFlags
	eng.AddFlags(flag.CommandLine)
	flag.Parse()
	if err := eng.Check("jobs"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.Setup(os.Stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("jobs on memdb: %d jobs, %d producers, %d processes × %d workers, %.0f%% failures, %.1f%% crashes, %.0f%% unknown results, latency %s\n",
		cfg.Jobs, cfg.Producers, cfg.Processes, cfg.Workers, cfg.Fail*100, cfg.Crash*100, eng.Unknown*100, eng.Latency)
	s, err := run(ctx, cfg, eng.Unknown, eng.Latency == "real")
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
	fmt.Print(s)
	if err := s.Check(); err != nil {
		fmt.Println("FAILED:", err)
		os.Exit(1)
	}
	fmt.Println("ok: every job was done once or dead-lettered")
}

// run runs the example on a new memdb database that answers a fraction
// unknown of commits with commit_unknown_result (half of them applied),
// with a real cluster's latencies if latency is set.
func run(ctx context.Context, cfg exampleapp.JobsConfig, unknown float64, latency bool) (exampleapp.JobsSummary, error) {
	db := memdb.New(exampleapp.MemdbOptions(cfg.Seed, unknown, latency)...)
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "jobs"})
	if err != nil {
		return exampleapp.JobsSummary{}, err
	}
	return exampleapp.RunJobs(ctx, db, sub, cfg)
}
