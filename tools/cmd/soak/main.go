// Command soak runs the deterministic simulation (package sim) over many
// seeds until a seed count or a duration is exhausted, and prints what was
// checked and found:
//
//	go run ./cmd/soak -seeds 100000 -duration 10m
//
// It exits with status 1 when any history is not linearizable, any item
// is lost, duplicated or unexplained, or more than one check in four
// timed out undecided (one is allowed in any run), after writing the
// first failing seed's history as porcupine's HTML visualization (-html)
// and as text (-history). Rerun one seed with -first N -seeds 1. Staged
// seeds' Queue serves its waiters by place (the default for its
// versionstamp-ordered layout); -staging-batches serves them in batches.
// Histories are checked for linearizability either way.
//
// -leases runs the job-queue simulation instead (sim.RunLeases: clients
// add (some under unique keys), lease, ack, nack, extend and release jobs,
// cancel and look up jobs, and requeue and delete dead ones (-lease-cancel,
// -lease-requeue, -lease-delete-dead set their rates) on a JobQueue while
// leases expire and workers crash, under injected
// faults and cancelled commits, some landing late (-late-landing)), over
// the same seeds, duration and workers, and prints the histories
// checked, the jobs acked and dead, the releases, the jobs lost and
// acked twice, the dead jobs without their max attempts and the unique
// keys held after the drain (all must be 0) and the linearizability
// violations, exiting with status 1 on any failure. The lowest-numbered
// seed whose history was not linearizable has it written to -history
// and -html as above (if none, the lowest whose check timed out, to
// -history only): a lease seed's run depends on goroutine timing, so
// rerunning the seed need not fail again.
//
//	go run ./cmd/soak -leases -seeds 100000 -duration 10m
//
// Besides commit faults, reads and read version requests fail at the rates
// -read-errors and -grv-errors set (memdb.Faults.ReadErrors and
// ReadVersionErrors; both modes), as a cluster's storage servers and GRV
// proxies may make them fail.
//
// Built with -tags fdb (cgo, FoundationDB's client library), -cluster-file
// runs the seeds on a FoundationDB cluster through fdbkv instead of memdb,
// under a random prefix that it clears at the end; no faults are injected
// there (random deadlines and abandoned commits still are):
//
//	go run -tags fdb ./cmd/soak -cluster-file /etc/foundationdb/fdb.cluster -duration 1m
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tools/sim"
)

func main() {
	var (
		seeds    = flag.Int("seeds", 20, "how many seeds to run at most")
		first    = flag.Int64("first", 1, "the first seed")
		duration = flag.Duration("duration", 10*time.Minute, "stop starting seeds after this long")
		workers  = flag.Int("workers", runtime.GOMAXPROCS(0), "seeds run at once")
		rounds   = flag.Int("rounds", sim.DefaultConfig().Rounds, "rounds (checked histories per structure) per seed")
		ops      = flag.Int("ops", sim.DefaultConfig().OpsPerClient, "operations per client and round (a history holds clients × ops of them)")
		timeout  = flag.Duration("check-timeout", 10*time.Second, "bound of one linearizability check (a check that times out is counted as inconclusive); with -leases, unless given, the lease simulation's own default (sim.DefaultLeaseConfig: 30s), since about one lease history in 3,000 takes over 10s")
		staging  = flag.Bool("staging", true, "run about half of the seeds WithStaging, with the Wait forms")
		batches  = flag.Bool("staging-batches", false, "staged seeds' Queue serves its waiters in batches (StagingConfig.Serving = ServeInBatches), not by place")
		claim    = flag.Duration("staging-claim", 0, "staged seeds' claim timeout (default 2s); a few milliseconds make waiters lose their claims and exercise the expiry paths")
		stagePQ  = flag.Bool("staging-pq", true, "in staged seeds, stage the PriorityQueue too (not only the Queue)")
		layerIDs = flag.Float64("layer-ids", sim.DefaultConfig().LayerIDProb, "probability that an operation not recovered, on the database itself, runs without WithOpID (under an ID the layer makes, in a journal slot); 0 gives every operation the harness's ID")
		shortRet = flag.Duration("short-retention", 4*time.Second, "journal retention of about half of the seeds, short so that journal slot epochs (an eighth of it) turn over while operations hold slots (the tests use 8s, safe under -race; it must exceed a round without its checks); 0 keeps the default retention")
		window   = flag.Duration("mvcc-window", 0, "each seed's memdb MVCC window (default FoundationDB's 5s, longer than a seed): a few hundred milliseconds collect old versions and conflict history within every seed; a few milliseconds also fail longer transactions with transaction_too_old (slowly: most attempts fail, and the batch budget check of seeds 1, 5, 9... never commits)")
		late     = flag.Float64("late-landing", sim.DefaultConfig().Faults.LateLanding, "probability that a commit interrupted by a cancellation lands after Commit returned, as FoundationDB's may (memdb.Faults.LateLanding)")
		readErrs = flag.Float64("read-errors", sim.DefaultConfig().Faults.ReadErrors, "probability that a read (a point read, a range read's batch) fails with transaction_too_old, future_version or process_behind, as a storage server's reply may (memdb.Faults.ReadErrors); the same with -leases")
		grvErrs  = flag.Float64("grv-errors", sim.DefaultConfig().Faults.ReadVersionErrors, "probability that a read version request fails with grv_proxy_memory_limit_exceeded or database_locked, as a GRV proxy's reply may (memdb.Faults.ReadVersionErrors); the same with -leases")
		txTOProb = flag.Float64("tx-timeout-prob", 0, "probability that an operation runs on a database with a default transaction timeout (FoundationDB's transaction_timeout) of -tx-timeout/2 to -tx-timeout, so that commits time out in flight (sim.Config.TxTimeoutProb); with -leases too")
		txTO     = flag.Duration("tx-timeout", 3*time.Millisecond, "with -tx-timeout-prob: the longest default transaction timeout drawn (about a commit's latency)")
		twins    = flag.Float64("twins", 0, "probability that an enqueued or pushed item is a twin of an earlier one: the same value (and often the same priority), so that takes of equal items write equal journal records (sim.Config.TwinProb); 0 makes every value unique")
		clients  = flag.Int("clients", sim.DefaultConfig().Clients, "concurrent clients per structure and round (a history holds clients × ops operations)")
		trust    = flag.Bool("trust-errors", false, "take errors at their word: one for which kv.MaybeCommitted is false must have had no effect (sim.Config.TrustErrors; with -leases, sim.LeaseConfig.TrustErrors)")
		reorder  = flag.Bool("staging-reorder", false, "let staged seeds use the indexed Queue layout and equal priorities, where a cancelled staged take can reorder items (see sim.Config.StagingReorder)")
		html     = flag.String("html", "soak-failure.html", "where to write the first failing history's visualization")
		history  = flag.String("history", "soak-failure.txt", "where to write the first failing history as text")
		verbose  = flag.Bool("v", false, "print one line per seed")
		cluster  = flag.String("cluster-file", "", "run the seeds on the FoundationDB cluster of this cluster file, without injected faults (needs a soak built with -tags fdb)")
		leases   = flag.Bool("leases", false, "run the job-queue (lease) simulation instead of the queues' (memdb only)")
		lrounds  = flag.Int("lease-rounds", sim.DefaultLeaseConfig().Rounds, "with -leases: rounds per seed (the clock moves between rounds)")
		lclients = flag.Int("lease-clients", sim.DefaultLeaseConfig().Clients, "with -leases: concurrent clients per round")
		lops     = flag.Int("lease-ops", sim.DefaultLeaseConfig().OpsPerClient, "with -leases: operations per client and round")
		labandon = flag.Float64("lease-abandon", sim.DefaultLeaseConfig().AbandonProb, "with -leases: probability that a failed call is never recovered (its client crashed)")
		llayer   = flag.Float64("lease-layer-ids", sim.DefaultLeaseConfig().LayerIDProb, "with -leases: probability that a call under an interruption, deadline or transaction timeout runs without WithOpID (under an ID the layer makes); failed, it is never recovered")
		lcancel  = flag.Float64("lease-cancel", sim.DefaultLeaseConfig().CancelProb, "with -leases: probability that an operation is a Cancel (of a held, leased, queued, dead, gone or never-added job)")
		lrequeue = flag.Float64("lease-requeue", sim.DefaultLeaseConfig().RequeueProb, "with -leases: probability that an operation is a Requeue (of a dead job mostly, else of a job in the queue, gone or never added)")
		ldelete  = flag.Float64("lease-delete-dead", sim.DefaultLeaseConfig().DeleteDeadProb, "with -leases: probability that an operation is a DeleteDead (of a dead job mostly, else of a job in the queue, gone or never added)")
	)
	flag.Parse()
	if *leases {
		if *cluster != "" {
			fmt.Fprintln(os.Stderr, "soak: -leases runs on memdb only; drop -cluster-file")
			os.Exit(2)
		}
		lc := sim.DefaultLeaseConfig()
		lc.Rounds, lc.Clients, lc.OpsPerClient, lc.AbandonProb = *lrounds, *lclients, *lops, *labandon
		lc.LayerIDProb = *llayer
		flag.Visit(func(f *flag.Flag) {
			if f.Name == "check-timeout" {
				lc.CheckTimeout = *timeout
			}
		})
		lc.CancelProb, lc.RequeueProb, lc.DeleteDeadProb = *lcancel, *lrequeue, *ldelete
		lc.Faults.LateLanding = *late
		lc.TxTimeoutProb, lc.TxTimeout = *txTOProb, *txTO
		lc.TrustErrors = *trust
		lc.Faults.ReadErrors, lc.Faults.ReadVersionErrors = *readErrs, *grvErrs
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		code := runLeases(ctx, os.Stdout, lc, *first, *seeds, *duration, *workers, *html, *history, *verbose)
		stop()
		os.Exit(code)
	}
	cfg := sim.DefaultConfig()
	cfg.Rounds = *rounds
	cfg.OpsPerClient = *ops
	cfg.StagingReorder = *reorder
	cfg.Staging = *staging
	if *batches {
		cfg.StagingServing = fdbqueue.ServeInBatches
	}
	cfg.ClaimTimeout = *claim
	cfg.StagePriorityQueue = *stagePQ
	cfg.CheckTimeout = *timeout
	cfg.LayerIDProb = *layerIDs
	cfg.ShortRetention = *shortRet
	cfg.Faults.LateLanding = *late
	cfg.MVCCWindow = *window
	cfg.Faults.ReadErrors, cfg.Faults.ReadVersionErrors = *readErrs, *grvErrs
	cfg.TrustErrors = *trust
	cfg.TxTimeoutProb, cfg.TxTimeout = *txTOProb, *txTO
	cfg.TwinProb = *twins
	cfg.Clients = *clients
	if *cluster == "" {
		os.Exit(run(os.Stdout, cfg, *first, *seeds, *duration, *workers, *html, *history, *verbose))
	}
	db, prefix, closeDB, err := openCluster(*cluster)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		os.Exit(2)
	}
	cfg.DB, cfg.Prefix = db, prefix
	cfg.Faults, cfg.Latency = memdb.Faults{}, memdb.Latency{}
	fmt.Printf("soak: on FoundationDB (cluster file %s), keys under %v; database counters below stay 0\n", *cluster, prefix)
	code := run(os.Stdout, cfg, *first, *seeds, *duration, *workers, *html, *history, *verbose)
	if err := closeDB(); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

func run(w io.Writer, cfg sim.Config, first int64, seeds int, duration time.Duration, workers int, htmlPath, historyPath string, verbose bool) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()

	fmt.Fprintf(w, "soak: up to %d seeds from %d, for up to %v, %d at once\n", seeds, first, duration, workers)
	fmt.Fprintf(w, "faults per commit: not_committed %.2f, commit_unknown_result applied %.2f / not applied %.2f, transaction_too_old %.2f, +%v latency %.2f; an interrupted commit lands late %.2f\n",
		cfg.Faults.NotCommitted, cfg.Faults.UnknownApplied, cfg.Faults.UnknownNotApplied, cfg.Faults.TooOld,
		cfg.Faults.ExtraLatency, cfg.Faults.ExtraLatencyProb, cfg.Faults.LateLanding)
	fmt.Fprintf(w, "faults per read: %.2f; per read version request: %.2f\n", cfg.Faults.ReadErrors, cfg.Faults.ReadVersionErrors)
	if cfg.MVCCWindow > 0 {
		fmt.Fprintf(w, "MVCC window: %v\n", cfg.MVCCWindow)
	}
	claim := "2s (default)"
	if cfg.ClaimTimeout > 0 {
		claim = cfg.ClaimTimeout.String()
	}
	fmt.Fprintf(w, "staging: %v (PriorityQueue too: %v, reorder-prone layouts: %v, Queue serving: %v, claim timeout: %s)\n", cfg.Staging, cfg.StagePriorityQueue, cfg.StagingReorder, cfg.StagingServing, claim)
	fmt.Fprintf(w, "per operation: random deadline %.2f (up to %v), without WithOpID %.2f of those not recovered; per client and round: abandon mid-commit %.2f\n",
		cfg.CancelProb, cfg.MaxDeadline, cfg.LayerIDProb, cfg.AbandonProb)
	if cfg.TxTimeoutProb > 0 {
		fmt.Fprintf(w, "per operation: a database default transaction timeout %.2f (%v to %v)\n", cfg.TxTimeoutProb, cfg.TxTimeout/2, cfg.TxTimeout)
	}
	if cfg.TwinProb > 0 {
		fmt.Fprintf(w, "per enqueued item: a twin of an earlier one (equal value) %.2f\n", cfg.TwinProb)
	}

	var (
		mu    sync.Mutex
		total sim.Result
		errs  []error
	)
	forSeeds(ctx, first, seeds, duration, workers, func(seed int64) {
		res, err := sim.Run(ctx, seed, cfg)
		mu.Lock()
		defer mu.Unlock()
		if err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("seed %d: %w", seed, err))
		}
		if err == nil {
			total.Add(res)
			if verbose {
				fmt.Fprintf(w, "seed %d: %d histories, %d operations, ok=%v\n", seed, res.Histories, res.Operations, res.OK())
			}
		}
	})

	st := total.Stats
	fmt.Fprintf(w, "\nelapsed:                    %v\n", time.Since(start).Round(time.Second))
	fmt.Fprintf(w, "seeds:                      %d (staged %d, versionstamp-ordered queue %d, tuple values %d, journal retention %v %d)\n",
		total.Seeds, total.StagedSeeds, total.VersionstampSeeds, total.TupleSeeds, cfg.ShortRetention, total.ShortRetention)
	fmt.Fprintf(w, "histories checked:          %d\n", total.Histories)
	fmt.Fprintf(w, "operations:                 %d\n", total.Operations)
	fmt.Fprintf(w, "transactions:               %d (commits %d, real conflicts %d, retries %d)\n", st.Transactions, st.Commits, st.Conflicts, st.Retries)
	if st.TooOld > 0 {
		fmt.Fprintf(w, "past the MVCC window:       %d (transaction_too_old, not injected)\n", st.TooOld)
	}
	fmt.Fprintf(w, "faults injected:\n")
	fmt.Fprintf(w, "  not_committed:                      %d\n", st.InjectedNotCommitted)
	fmt.Fprintf(w, "  commit_unknown_result (applied):    %d\n", st.InjectedUnknownApplied)
	fmt.Fprintf(w, "  commit_unknown_result (not applied): %d\n", st.InjectedUnknownNotApplied)
	fmt.Fprintf(w, "  transaction_too_old:                %d\n", st.InjectedTooOld)
	fmt.Fprintf(w, "  commits interrupted by cancellation: %d\n", st.Interrupted)
	fmt.Fprintf(w, "  failed reads:                       %d\n", st.InjectedReadErrors)
	fmt.Fprintf(w, "  failed read version requests:       %d\n", st.InjectedReadVersionErrors)
	fmt.Fprintf(w, "outcomes unknown, left open:  %d\n", total.Unknown)
	fmt.Fprintf(w, "outcomes recovered by OpID:   %d\n", total.Recovered)
	fmt.Fprintf(w, "  of which at once:           %d\n", total.RecoveredAtOnce)
	fmt.Fprintf(w, "failed staged takes (hidden): %d\n", total.Hidden)
	fmt.Fprintf(w, "claims expired:             %d\n", total.ClaimsExpired)
	if cfg.TxTimeoutProb > 0 {
		fmt.Fprintf(w, "default tx timeout:         %d operations (%d failed with transaction_timed_out; commits timed out in flight %d)\n",
			total.TxTimeoutOps, total.TimedOut, total.TimedOutInFlight)
	}
	if cfg.TwinProb > 0 {
		fmt.Fprintf(w, "twins:                      %d enqueued, %d taken, %d observed beside an equal item\n", total.TwinItems, total.TwinsTaken, total.TwinsTogether)
	}
	fmt.Fprintf(w, "without WithOpID:           %d (outcome unknown %d; retries that found their record %d, in a journal slot %d)\n",
		total.LayerIDs, total.LayerIDUnknown, total.LayerIDReplays, total.SlotReplays)
	fmt.Fprintf(w, "inconclusive checks (timed out): %d\n", total.Inconclusive)
	fmt.Fprintf(w, "decided without open operations: %d\n", total.DecidedWithoutOpen)
	fmt.Fprintf(w, "violations:                 %d\n", total.Violations)
	fmt.Fprintf(w, "lost:                       %d\n", total.Lost)
	fmt.Fprintf(w, "duplicated:                 %d\n", total.Duplicated)
	fmt.Fprintf(w, "phantom:                    %d\n", total.Phantom)
	fmt.Fprintf(w, "drain mismatches:           %d\n", total.DrainDiffers)
	fmt.Fprintf(w, "unexpected errors:          %d\n", total.Unexpected)
	for _, err := range errs {
		fmt.Fprintf(w, "error: %v\n", err)
	}

	if total.Failure != nil {
		f := total.Failure
		fmt.Fprintf(w, "first failing seed: %d (%v)\n", f.Seed, f)
		writeFailure(w, f, htmlPath, historyPath)
	}
	undecided := tooUndecided(w, total.Inconclusive, total.Histories)
	if !total.OK() || len(errs) > 0 || undecided {
		fmt.Fprintln(w, "FAIL")
		return 1
	}
	fmt.Fprintln(w, "PASS")
	return 0
}

// writeFailure writes f's history, if it has one, as text to historyPath
// and, if it has porcupine's linearizations of it (not for a check that
// timed out), as porcupine's visualization to htmlPath, and says where on
// w (or why it could not).
func writeFailure(w io.Writer, f *sim.Failure, htmlPath, historyPath string) {
	if !f.HasHistory() {
		return
	}
	if f.HasVisualization() {
		if err := f.Visualize(htmlPath); err != nil {
			fmt.Fprintf(w, "writing the visualization: %v\n", err)
		} else {
			fmt.Fprintf(w, "visualization: %s\n", htmlPath)
		}
	}
	out, err := os.Create(historyPath)
	if err == nil {
		err = f.WriteHistory(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintf(w, "writing the history: %v\n", err)
		return
	}
	fmt.Fprintf(w, "history: %s\n", historyPath)
}

// undecidedAllowed is how many of n linearizability checks may time out
// (be inconclusive) in a run that passes: one in four, and at least one.
// A check that times out proves nothing either way, and how many do
// depends on the machine's load and the histories' shape (staged Queue
// soaks leave about one in eight undecided, plain ones one in thirty,
// lease soaks about one in a thousand; see docs/reliability.md), so a few
// are noise, while more mean the run decided too little to pass (fewer
// clients or a longer -check-timeout decide more). The simulation's CI
// tests, on smaller histories, allow one in eight.
func undecidedAllowed(n int) int { return max(1, n/4) }

// tooUndecided reports whether more than undecidedAllowed(n) of n checks
// timed out, and if so says it on w.
func tooUndecided(w io.Writer, inconclusive, n int) bool {
	if inconclusive <= undecidedAllowed(n) {
		return false
	}
	fmt.Fprintf(w, "too many checks undecided: %d of %d (at most %d)\n", inconclusive, n, undecidedAllowed(n))
	return true
}
