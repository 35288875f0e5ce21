// Command examples runs fdbqueue's example programs (examples/workqueue,
// examples/scheduler and examples/jobs in the root module, whose logic is
// in examples/exampleapp) against a FoundationDB cluster instead of the
// embedded engine. It lives in the fdbkv module because it needs libfdb_c.
//
//	go run ./cmd/examples workqueue -cluster-file /etc/foundationdb/fdb.cluster [-producers 4] [-consumers 4] [-items 3000] [-batch 8]
//	go run ./cmd/examples scheduler -cluster-file /etc/foundationdb/fdb.cluster
//	go run ./cmd/examples jobs -cluster-file /etc/foundationdb/fdb.cluster [-jobs 2000] [-processes 3] [-workers 4] [-fail 0.1] [-crash 0.01]
//
// jobs runs examples/jobs' JobQueue worker pools with simulated handler
// failures and pool crashes; on a cluster no commit_unknown_result is
// injected (the cluster may still answer with it).
//
// Each run works in a subspace of its own, ("fdbqueue-examples", <example>,
// <random>), and clears it when it ends.
package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/apple/foundationdb/bindings/go/src/fdb"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/examples/exampleapp"
	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

const usage = `usage: examples <workqueue|scheduler|jobs> [-cluster-file path] [-api-version n] [example flags]
run "examples <name> -h" for an example's flags`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	name := os.Args[1]
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	clusterFile := fs.String("cluster-file", "", "FoundationDB cluster file (empty: the default cluster file)")
	apiVersion := fs.Int("api-version", 730, "FoundationDB API version to select (at least fdbkv.MinAPIVersion)")

	var run func(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace) error
	switch name {
	case "workqueue":
		cfg := exampleapp.WorkQueueConfig{Progress: exampleapp.TerminalProgress(os.Stderr)}
		fs.IntVar(&cfg.Producers, "producers", 4, "producer goroutines")
		fs.IntVar(&cfg.Consumers, "consumers", 4, "consumer goroutines")
		fs.IntVar(&cfg.Items, "items", 3000, "items to move")
		fs.IntVar(&cfg.Batch, "batch", 8, "items per dequeue transaction")
		run = func(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace) error {
			return workQueue(ctx, db, sub, cfg)
		}
	case "scheduler":
		run = scheduler
	case "jobs":
		var cfg exampleapp.JobsConfig
		cfg.AddFlags(fs)
		run = func(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace) error {
			cfg.Setup(os.Stderr)
			return jobs(ctx, db, sub, cfg)
		}
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err := fs.Parse(os.Args[2:]); err != nil {
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runExample(ctx, name, *apiVersion, *clusterFile, run); err != nil {
		fmt.Fprintf(os.Stderr, "examples %s: %v\n", name, err)
		os.Exit(1)
	}
}

// runExample opens the database, makes the run's subspace, runs the example
// and clears the subspace.
func runExample(ctx context.Context, name string, apiVersion int, clusterFile string,
	run func(context.Context, *fdbkv.Database, fdbqueue.Subspace) error) (err error) {
	db, err := fdbkv.OpenWithAPIVersion(apiVersion, clusterFile)
	if err != nil {
		return err
	}
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"fdbqueue-examples", name, rand.Text()})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := clearSubspace(db, sub); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clearing the example's subspace: %w", cerr))
		}
	}()
	return run(ctx, db, sub)
}

// clearSubspace removes every key under sub, including the queue journals
// that lie just past the queues' own ranges.
func clearSubspace(db *fdbkv.Database, sub fdbqueue.Subspace) error {
	begin := sub.Bytes()
	end, err := fdb.Strinc(begin)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return db.Transact(ctx, func(tr kv.Transaction) error {
		tr.ClearRange(kv.KeyRange{Begin: begin, End: end})
		return nil
	})
}

func workQueue(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace, cfg exampleapp.WorkQueueConfig) error {
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		return err
	}
	fmt.Printf("workqueue on FoundationDB: %d producers, %d consumers, %d items, batch %d\n",
		cfg.Producers, cfg.Consumers, cfg.Items, cfg.Batch)
	s, err := exampleapp.RunWorkQueue(ctx, db, q, cfg)
	if err != nil {
		return err
	}
	fmt.Print(s)
	if s.Lost != 0 || s.Duplicates != 0 {
		return fmt.Errorf("items were lost (%d) or duplicated (%d)", s.Lost, s.Duplicates)
	}
	fmt.Println("ok: every item came out exactly once")
	return nil
}

func scheduler(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace) error {
	pq, err := fdbqueue.NewPriorityQueue(sub)
	if err != nil {
		return err
	}
	base := time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC)
	tasks := []exampleapp.Task{
		{Name: "backup", Due: base.Add(90 * time.Minute)},
		{Name: "report", Due: base.Add(15 * time.Minute)},
		{Name: "cleanup", Due: base.Add(4 * time.Hour)},
		{Name: "email", Due: base.Add(15 * time.Minute)},
		{Name: "reindex", Due: base.Add(2 * time.Hour)},
	}
	_, err = exampleapp.RunScheduler(ctx, db, pq, tasks, os.Stdout)
	return err
}

func jobs(ctx context.Context, db *fdbkv.Database, sub fdbqueue.Subspace, cfg exampleapp.JobsConfig) error {
	fmt.Printf("jobs on FoundationDB: %d jobs, %d producers, %d processes × %d workers, %.0f%% failures, %.1f%% crashes\n",
		cfg.Jobs, cfg.Producers, cfg.Processes, cfg.Workers, cfg.Fail*100, cfg.Crash*100)
	s, err := exampleapp.RunJobs(ctx, db, sub, cfg)
	if err != nil {
		return err
	}
	fmt.Print(s)
	if err := s.Check(); err != nil {
		return err
	}
	fmt.Println("ok: every job was done once or dead-lettered")
	return nil
}
