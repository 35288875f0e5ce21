// Command queuebench measures how the queue layers behave under contention,
// on the embedded engine with a real cluster's latencies (memdb.RealCluster:
// GRV 0.3–1 ms, reads 0.1–1 ms, commits 1.5–2.5 ms).
//
// For each number of consumers it measures, with producers keeping the
// queue non-empty, four ways to dequeue:
//
//   - plain:          Queue.Dequeue on a WithoutIdempotency queue (the FDB recipe)
//   - staged:         Queue.Dequeue on a WithStaging, WithVersionstampOrder
//     queue, whose default is to serve waiters by place; journal on:
//     exactly once, linearizable
//   - staged-batches: Queue.Dequeue on a WithStaging queue with the
//     recipe's keys, served in batches (StagingConfig.Serving =
//     ServeInBatches); exactly once, linearizable
//   - batch:          Queue.DequeueBatch on a WithoutIdempotency queue
//
// (and, when -modes names it, "lease": JobQueue.Lease and Ack of one job
// per call, see lease.go, with its own table, lease.csv and lease.png)
// and reports items dequeued per second, conflicts per successful dequeue
// call, and the p50/p99 latency of a call. It then measures enqueue
// throughput and conflicts for each number of producers, for the recipe's
// enqueue and for the staged queue's (versionstamp order, journal and
// signal bump). It prints a
// table, writes dequeue.csv and enqueue.csv and a chart, queuebench.png, to
// the -out directory (by default a new scratch directory, whose path it
// prints at the end).
//
//	go run ./cmd/queuebench [-out DIR]
//
// Each cell runs for -duration (or until -items items), on a fresh
// database seeded from -seed, so runs are reproducible up to goroutine
// scheduling and machine load (each cell prints the load average). -stats
// prints, for staged cells, Queue.StagingStats: steps (transactions) per
// item, and for each phase its commits, conflicts and mean time, sleeps
// and fulfilment batch sizes. -cpuprofile writes a CPU profile.
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

type options struct {
	duration  time.Duration
	items     int64
	seed      int64
	consumers []int
	producers []int
	modes     []string
	batch     int
	feeders   int
	out       string
	latency   bool
	stats     bool
	cpuprof   string
	// perConsumer gives each consumer its own Queue value, as separate
	// client processes would have, instead of one shared by all.
	perConsumer bool
}

func main() {
	var o options
	var consumers, producers, modes string
	flag.DurationVar(&o.duration, "duration", 2*time.Second, "how long each cell runs")
	flag.Int64Var(&o.items, "items", 0, "stop a dequeue cell after this many items (0: run for -duration)")
	flag.Int64Var(&o.seed, "seed", 1, "seed of the databases' latency, jitter and key suffixes")
	flag.StringVar(&consumers, "consumers", "1,2,4,8,16,32,64", "consumer counts to measure")
	flag.StringVar(&producers, "producers", "1,2,4,8,16,32,64", "producer counts for the enqueue table")
	flag.StringVar(&modes, "modes", "plain,staged,staged-batches,batch", "dequeue modes to measure (plain-vstamp: plain on a versionstamp-ordered queue; lease: JobQueue lease+ack)")
	flag.IntVar(&o.batch, "batch", 16, "items per DequeueBatch call in batch mode")
	flag.IntVar(&o.feeders, "feeders", 4, "producers that keep the queue non-empty during dequeue cells")
	flag.StringVar(&o.out, "out", "", "directory for the CSV files and the chart (default: a new scratch directory under the system's temporary directory)")
	flag.BoolVar(&o.latency, "latency", true, "simulate a real cluster's latency (memdb.RealCluster)")
	flag.StringVar(&o.cpuprof, "cpuprofile", "", "write a CPU profile of the run to this file")
	flag.BoolVar(&o.stats, "stats", false, "print where staged cells spend their time (Queue.StagingStats)")
	flag.BoolVar(&o.perConsumer, "handle-per-consumer", false, "give each consumer its own Queue value (as separate processes), not one shared value")
	flag.Parse()
	var err error
	if o.consumers, err = parseInts(consumers); err == nil {
		o.producers, err = parseInts(producers)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(2)
	}
	o.modes = strings.Split(modes, ",")
	if o.cpuprof != "" {
		f, err := os.Create(o.cpuprof)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "queuebench:", err)
			os.Exit(2)
		}
		defer pprof.StopCPUProfile()
	}
	if err := run(o, os.Stdout); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "queuebench:", err)
		os.Exit(1)
	}
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad count %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// dequeueRow is one cell of the dequeue table.
type dequeueRow struct {
	Mode        string
	Consumers   int
	Items       int64
	Calls       int64
	Seconds     float64
	ItemsPerSec float64
	Conflicts   int64
	ConflictsOp float64 // conflicts per successful call
	P50, P99    time.Duration
	Empty       int64 // calls that found the queue empty

	staging *fdbqueue.StagingStats // staged cells
	load    float64                // 1-minute load average at the end
}

// enqueueRow is one cell of the enqueue table.
type enqueueRow struct {
	Kind        string
	Producers   int
	Items       int64
	Seconds     float64
	ItemsPerSec float64
	Conflicts   int64
	P50, P99    time.Duration
}

func run(o options, w io.Writer) error {
	if o.out == "" {
		dir, err := os.MkdirTemp("", "queuebench-")
		if err != nil {
			return err
		}
		o.out = dir
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(w, "queuebench: %v per cell, seed %d, latency %v\n\n", o.duration, o.seed, latencyName(o.latency))
	leases, err := leaseCells(&o, w) // lease.go: the "lease" mode
	if err != nil {
		return err
	}
	var deq []dequeueRow
	cell := int64(0)
	for _, mode := range o.modes {
		for _, c := range o.consumers {
			cell++
			r, err := dequeueCell(o, mode, c, o.seed*1000+cell)
			if err != nil {
				return fmt.Errorf("%s with %d consumers: %w", mode, c, err)
			}
			fmt.Fprintf(w, "  dequeue %-14s %2d consumers: %8.0f items/s  (load %.1f)\n", mode, c, r.ItemsPerSec, r.load)
			if o.stats && r.staging != nil {
				printStaging(w, r)
			}
			deq = append(deq, r)
		}
	}
	var enq []enqueueRow
	for _, kind := range []string{"recipe", "staged"} {
		for _, p := range o.producers {
			cell++
			r, err := enqueueCell(o, kind, p, o.seed*1000+cell)
			if err != nil {
				return fmt.Errorf("enqueue %s with %d producers: %w", kind, p, err)
			}
			fmt.Fprintf(w, "  enqueue %-6s %2d producers: %8.0f items/s\n", kind, p, r.ItemsPerSec)
			enq = append(enq, r)
		}
	}
	fmt.Fprintln(w)
	printTables(w, deq, enq)
	printLeaseTable(w, leases)
	if err := writeCSV(filepath.Join(o.out, "dequeue.csv"), deq, enq); err != nil {
		return err
	}
	chart := filepath.Join(o.out, "queuebench.png")
	if err := drawChart(chart, deq, enq, o); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nwrote %s, %s and %s\n", filepath.Join(o.out, "dequeue.csv"), filepath.Join(o.out, "enqueue.csv"), chart)
	return nil
}

func latencyName(on bool) string {
	if on {
		return "memdb.RealCluster"
	}
	return "none"
}

func newDB(o options, seed int64) *memdb.DB {
	opts := []memdb.Option{memdb.WithSeed(seed)}
	if o.latency {
		opts = append(opts, memdb.WithLatency(memdb.RealCluster))
	}
	return memdb.New(opts...)
}

func newQueue(name string, seed int64, opts ...fdbqueue.Option) (*fdbqueue.Queue, error) {
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"queuebench", name})
	if err != nil {
		return nil, err
	}
	src := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), byte(seed >> 16), byte(seed >> 24)})
	return fdbqueue.NewQueue(sub, append(opts, fdbqueue.WithEntropy(src))...)
}

// dequeueCell runs consumers of one mode for the cell's duration while
// feeders keep the queue non-empty.
func dequeueCell(o options, mode string, consumers int, seed int64) (dequeueRow, error) {
	row := dequeueRow{Mode: mode, Consumers: consumers}
	db := newDB(o, seed)
	defer db.Close()
	var qopts []fdbqueue.Option
	switch mode {
	case "plain", "batch":
		qopts = append(qopts, fdbqueue.WithoutIdempotency())
	case "plain-vstamp":
		qopts = append(qopts, fdbqueue.WithoutIdempotency(), fdbqueue.WithVersionstampOrder())
	case "staged":
		qopts = append(qopts, fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithVersionstampOrder())
	case "staged-batches":
		qopts = append(qopts, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeInBatches}))
	default:
		return row, fmt.Errorf("unknown mode %q (want plain, plain-vstamp, staged, staged-batches or batch)", mode)
	}
	q, err := newQueue("deq", seed, qopts...)
	if err != nil {
		return row, err
	}
	ctx := context.Background()
	f := &feeder{write: func(first int64) error {
		vals := make([][]byte, feedChunk)
		for i := range vals {
			vals[i] = fmt.Appendf(nil, "item-%d", first+int64(i))
		}
		return q.EnqueueBatch(ctx, db, vals)
	}}
	if err := f.prefill(); err != nil {
		return row, err
	}

	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	errc := make(chan error, consumers+o.feeders)
	wg := f.start(runCtx, o.feeders, errc)
	before := db.Stats()
	start := time.Now()
	lats := make([][]time.Duration, consumers)
	var calls, empty atomic.Int64
	handles := []*fdbqueue.Queue{q}
	for i := 1; o.perConsumer && i < consumers; i++ {
		h, err := newQueue("deq", seed+int64(i)*7919, qopts...)
		if err != nil {
			return row, err
		}
		handles = append(handles, h)
	}
	var cwg sync.WaitGroup
	for i := range consumers {
		q := handles[i%len(handles)]
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for runCtx.Err() == nil {
				t0 := time.Now()
				n := int64(1)
				var err error
				if mode == "batch" {
					var vals [][]byte
					vals, err = q.DequeueBatch(runCtx, db, o.batch)
					n = int64(len(vals))
				} else {
					_, err = q.Dequeue(runCtx, db)
				}
				switch {
				case err == nil:
					lats[i] = append(lats[i], time.Since(t0))
					calls.Add(1)
					if d := f.done.Add(n); o.items > 0 && d >= o.items {
						stop()
					}
				case errors.Is(err, fdbqueue.ErrEmpty):
					empty.Add(1)
				case runCtx.Err() != nil:
				default:
					errc <- err
					stop()
					return
				}
			}
		}()
	}
	cwg.Wait()
	elapsed := time.Since(start)
	after := db.Stats()
	stop()
	wg.Wait()
	close(errc)
	for err := range errc {
		return row, err
	}
	row.Items = f.done.Load()
	row.Calls = calls.Load()
	row.Empty = empty.Load()
	row.Seconds = elapsed.Seconds()
	row.ItemsPerSec = float64(row.Items) / elapsed.Seconds()
	row.Conflicts = after.Conflicts - before.Conflicts
	if row.Calls > 0 {
		row.ConflictsOp = float64(row.Conflicts) / float64(row.Calls)
	}
	row.P50, row.P99 = percentiles(slices.Concat(lats...))
	if isStaged(mode) {
		st := q.StagingStats()
		for _, h := range handles[1:] {
			st = addStagingStats(st, h.StagingStats())
		}
		row.staging = &st
	}
	row.load = loadAverage()
	return row, nil
}

// addStagingStats returns the sum of two handles' staging statistics.
func addStagingStats(a, b fdbqueue.StagingStats) fdbqueue.StagingStats {
	a.Calls += b.Calls
	a.Items += b.Items
	a.CallTime += b.CallTime
	a.Sleeps += b.Sleeps
	a.SleepTime += b.SleepTime
	a.Served += b.Served
	for i := range a.BatchSizes {
		a.BatchSizes[i] += b.BatchSizes[i]
	}
	for i := range a.Phases {
		a.Phases[i].Commits += b.Phases[i].Commits
		a.Phases[i].Conflicts += b.Phases[i].Conflicts
		a.Phases[i].Failures += b.Phases[i].Failures
		a.Phases[i].Time += b.Phases[i].Time
	}
	return a
}

// loadAverage returns the machine's 1-minute load average (Linux), or 0.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	x, _ := strconv.ParseFloat(f[0], 64)
	return x
}

// printStaging prints where a staged cell's calls spent their time.
func printStaging(w io.Writer, r dequeueRow) {
	st := r.staging
	if st.Items == 0 {
		return
	}
	var tx int64
	for _, p := range st.Phases {
		tx += p.Commits + p.Conflicts + p.Failures
	}
	perItem := func(n int64) float64 { return float64(n) / float64(st.Items) }
	fmt.Fprintf(w, "    %d calls, %.2f steps/item, call %.1f ms avg; slept %.2f times/item, %.1f ms avg\n",
		st.Calls, perItem(tx), msAvg(st.CallTime, st.Calls), perItem(st.Sleeps), msAvg(st.SleepTime, st.Sleeps))
	for _, p := range st.Phases {
		if p.Commits+p.Conflicts+p.Failures == 0 {
			continue
		}
		fmt.Fprintf(w, "    %-8s %7d ok (%.2f/item, %5.1f ms avg) %6d conflicts %4d failures\n",
			p.Phase, p.Commits, perItem(p.Commits), msAvg(p.Time, p.Commits), p.Conflicts, p.Failures)
	}
	var b strings.Builder
	for i, n := range st.BatchSizes {
		if n > 0 {
			fmt.Fprintf(&b, " %d+:%d", 1<<i, n)
		}
	}
	fmt.Fprintf(w, "    served for others: %d (%.2f/item); fulfilments by size:%s\n", st.Served, perItem(st.Served), b.String())
}

func msAvg(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / 1e6
}

// enqueueCell runs producers that enqueue one item per call.
func enqueueCell(o options, kind string, producers int, seed int64) (enqueueRow, error) {
	row := enqueueRow{Kind: kind, Producers: producers}
	db := newDB(o, seed)
	defer db.Close()
	opts := []fdbqueue.Option{fdbqueue.WithoutIdempotency()}
	if kind == "staged" {
		opts = []fdbqueue.Option{fdbqueue.WithStaging(fdbqueue.StagingConfig{}), fdbqueue.WithVersionstampOrder()}
	}
	q, err := newQueue("enq", seed, opts...)
	if err != nil {
		return row, err
	}
	runCtx, stop := context.WithTimeout(context.Background(), o.duration)
	defer stop()
	before := db.Stats()
	start := time.Now()
	lats := make([][]time.Duration, producers)
	var items atomic.Int64
	errc := make(chan error, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; runCtx.Err() == nil; n++ {
				t0 := time.Now()
				err := q.Enqueue(runCtx, db, fmt.Appendf(nil, "p%d-%d", i, n))
				switch {
				case err == nil:
					lats[i] = append(lats[i], time.Since(t0))
					items.Add(1)
				case runCtx.Err() != nil:
				default:
					errc <- err
					stop()
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := db.Stats()
	close(errc)
	for err := range errc {
		return row, err
	}
	row.Items = items.Load()
	row.Seconds = elapsed.Seconds()
	row.ItemsPerSec = float64(row.Items) / elapsed.Seconds()
	row.Conflicts = after.Conflicts - before.Conflicts
	row.P50, row.P99 = percentiles(slices.Concat(lats...))
	return row, nil
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q float64) time.Duration {
		return d[min(len(d)-1, int(math.Ceil(q*float64(len(d))))-1)]
	}
	return at(0.50), at(0.99)
}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64) }

func printTables(w io.Writer, deq []dequeueRow, enq []enqueueRow) {
	fmt.Fprintln(w, "Dequeue (feeders keep the queue non-empty):")
	fmt.Fprintln(w)
	rows := [][]string{{"mode", "consumers", "items/s", "conflicts/op", "p50 ms", "p99 ms", "empty"}}
	for _, r := range deq {
		rows = append(rows, []string{r.Mode, strconv.Itoa(r.Consumers), fmt.Sprintf("%.0f", r.ItemsPerSec),
			fmt.Sprintf("%.2f", r.ConflictsOp), ms(r.P50), ms(r.P99), strconv.FormatInt(r.Empty, 10)})
	}
	markdown(w, rows)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Enqueue (one item per call):")
	fmt.Fprintln(w)
	rows = [][]string{{"enqueue", "producers", "items/s", "conflicts", "p50 ms", "p99 ms"}}
	for _, r := range enq {
		rows = append(rows, []string{r.Kind, strconv.Itoa(r.Producers), fmt.Sprintf("%.0f", r.ItemsPerSec),
			strconv.FormatInt(r.Conflicts, 10), ms(r.P50), ms(r.P99)})
	}
	markdown(w, rows)
}

// markdown prints rows as a Markdown table, the first row as its header;
// the first column is left-aligned, the others right-aligned.
func markdown(w io.Writer, rows [][]string) {
	width := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c), 3)
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			if i == 0 {
				fmt.Fprintf(&b, "| %-*s ", width[i], c)
			} else {
				fmt.Fprintf(&b, "| %*s ", width[i], c)
			}
		}
		fmt.Fprintln(w, b.String()+"|")
	}
	line(rows[0])
	sep := make([]string, len(width))
	for i, n := range width {
		if i == 0 {
			sep[i] = strings.Repeat("-", n)
		} else {
			sep[i] = strings.Repeat("-", n-1) + ":"
		}
	}
	line(sep)
	for _, r := range rows[1:] {
		line(r)
	}
}

// isStaged reports whether a dequeue mode runs the staged dequeue.
func isStaged(mode string) bool { return mode == "staged" || mode == "staged-batches" }

func writeCSV(path string, deq []dequeueRow, enq []enqueueRow) error {
	if err := writeRows(path, []string{"mode", "consumers", "items", "calls", "seconds", "items_per_s", "conflicts", "conflicts_per_op", "p50_ms", "p99_ms", "empty"},
		len(deq), func(i int) []string {
			r := deq[i]
			return []string{r.Mode, strconv.Itoa(r.Consumers), strconv.FormatInt(r.Items, 10), strconv.FormatInt(r.Calls, 10),
				f3(r.Seconds), f3(r.ItemsPerSec), strconv.FormatInt(r.Conflicts, 10), f3(r.ConflictsOp), ms(r.P50), ms(r.P99), strconv.FormatInt(r.Empty, 10)}
		}); err != nil {
		return err
	}
	return writeRows(filepath.Join(filepath.Dir(path), "enqueue.csv"), []string{"enqueue", "producers", "items", "seconds", "items_per_s", "conflicts", "p50_ms", "p99_ms"},
		len(enq), func(i int) []string {
			r := enq[i]
			return []string{r.Kind, strconv.Itoa(r.Producers), strconv.FormatInt(r.Items, 10), f3(r.Seconds), f3(r.ItemsPerSec),
				strconv.FormatInt(r.Conflicts, 10), ms(r.P50), ms(r.P99)}
		})
}

func f3(x float64) string { return strconv.FormatFloat(x, 'f', 3, 64) }

func writeRows(path string, header []string, n int, row func(int) []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write(header)
	for i := range n {
		_ = cw.Write(row(i))
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
