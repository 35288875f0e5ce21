// Command workqueue runs producers and consumers over one fdbqueue.Queue on
// the embedded engine (memdb) with a real cluster's latencies, shows a live
// progress line on standard error when it is a terminal, and prints a
// summary: items/s, conflicts, retries, and a check that every item came out
// exactly once. The consumers share nothing with the producers but the
// database: on an empty queue they sleep on a watch (Queue.WatchForItems),
// so the same loop works with producers in other processes.
//
//	go run ./examples/workqueue [-producers 4] [-consumers 4] [-items 3000] [-batch 8] [-latency real|none] [-unknown 0.02]
//
// To run the same program against FoundationDB, use the fdbkv module:
//
//	cd fdbkv && go run ./cmd/examples workqueue -cluster-file /etc/foundationdb/fdb.cluster
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
	cfg := exampleapp.WorkQueueConfig{Progress: exampleapp.TerminalProgress(os.Stderr)}
	flag.IntVar(&cfg.Producers, "producers", 4, "producer goroutines")
	flag.IntVar(&cfg.Consumers, "consumers", 4, "consumer goroutines")
	flag.IntVar(&cfg.Items, "items", 3000, "items to move")
	flag.IntVar(&cfg.Batch, "batch", 8, "items per dequeue transaction")
	seed := flag.Int64("seed", 1, "seed for latency and fault injection")
	var eng exampleapp.MemdbFlags
	eng.AddFlags(flag.CommandLine)
	flag.Parse()
	if err := eng.Check("workqueue"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	db := memdb.New(exampleapp.MemdbOptions(*seed, eng.Unknown, eng.Latency == "real")...)
	defer db.Close()

	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
	if err == nil {
		var q *fdbqueue.Queue
		if q, err = fdbqueue.NewQueue(sub); err == nil {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
			defer stop()
			fmt.Printf("workqueue on memdb: %d producers, %d consumers, %d items, batch %d, latency %s, %.0f%% unknown results\n",
				cfg.Producers, cfg.Consumers, cfg.Items, cfg.Batch, eng.Latency, eng.Unknown*100)
			var s exampleapp.WorkQueueSummary
			if s, err = exampleapp.RunWorkQueue(ctx, db, q, cfg); err == nil {
				fmt.Print(s)
				if s.Lost != 0 || s.Duplicates != 0 {
					fmt.Println("FAILED: items were lost or duplicated")
					os.Exit(1)
				}
				fmt.Println("ok: every item came out exactly once")
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "workqueue:", err)
	os.Exit(1)
}
