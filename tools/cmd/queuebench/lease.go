package main

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// leaseRow is one cell of the lease table: workers that each lease one
// job (JobQueue.Lease) and ack it (JobQueue.Ack), in a loop, while feeders
// keep a backlog of due jobs.
type leaseRow struct {
	Workers      int
	Choice       int
	Jobs         int64 // jobs leased and acked
	Seconds      float64
	JobsPerSec   float64
	Conflicts    int64
	ConflictsJob float64 // conflicts per job (its lease and its ack)
	P50, P99     time.Duration
	load         float64
}

// leaseChoice is the K of the lease cells: the random choice among the
// first K due jobs. It grows with the workers (2 candidates per worker, at
// least 16): workers sharing a JobQueue value avoid each other's picks;
// with -handle-per-consumer (separate processes) only the random choice
// keeps them apart, and K near 8 per worker keeps conflicts under 0.1.
func leaseChoice(workers int, perProcess bool) int {
	if perProcess {
		return max(16, 8*workers)
	}
	return max(16, 2*workers)
}

// leaseCells runs the lease mode when o.modes names it ("lease"), and
// takes it out of o.modes so that the dequeue cells do not see it.
func leaseCells(o *options, w io.Writer) ([]leaseRow, error) {
	if !slices.Contains(o.modes, "lease") {
		return nil, nil
	}
	o.modes = slices.DeleteFunc(o.modes, func(m string) bool { return m == "lease" })
	var rows []leaseRow
	for i, c := range o.consumers {
		r, err := leaseCell(*o, c, o.seed*1000+500+int64(i))
		if err != nil {
			return nil, fmt.Errorf("lease with %d workers: %w", c, err)
		}
		fmt.Fprintf(w, "  lease+ack K=%-3d %2d workers: %8.0f jobs/s  %.3f conflicts/job  (load %.1f)\n", r.Choice, c, r.JobsPerSec, r.ConflictsJob, r.load)
		rows = append(rows, r)
	}
	if err := writeLeaseCSV(filepath.Join(o.out, "lease.csv"), rows); err != nil {
		return nil, err
	}
	return rows, drawLeaseChart(filepath.Join(o.out, "lease.png"), rows, *o)
}

// drawLeaseChart plots jobs leased and acked per second against workers,
// with the linear scaling of the 1-worker rate for comparison.
func drawLeaseChart(path string, rows []leaseRow, o options) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("JobQueue: lease + ack, backlog kept due (%s)", latencyName(o.latency))
	p.X.Label.Text = "workers"
	p.Y.Label.Text = "jobs / s"
	var pts, ideal plotter.XYs
	for _, r := range rows {
		if r.JobsPerSec > 0 {
			pts = append(pts, plotter.XY{X: float64(r.Workers), Y: r.JobsPerSec})
		}
		if r.Workers == 1 {
			for _, s := range rows {
				ideal = append(ideal, plotter.XY{X: float64(s.Workers), Y: r.JobsPerSec * float64(s.Workers)})
			}
		}
	}
	if err := addLine(p, "lease + ack", pts, palette[2]); err != nil {
		return err
	}
	if len(ideal) > 0 {
		if err := addLine(p, "linear: 1-worker rate × workers", ideal, palette[5]); err != nil {
			return err
		}
	}
	logAxes(p)
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(16*vg.Centimeter, 12*vg.Centimeter, path)
}

func leaseCell(o options, workers int, seed int64) (leaseRow, error) {
	row := leaseRow{Workers: workers, Choice: leaseChoice(workers, o.perConsumer)}
	db := newDB(o, seed)
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"queuebench", "jobs"})
	if err != nil {
		return row, err
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: row.Choice})
	if err != nil {
		return row, err
	}
	// -handle-per-consumer: one JobQueue value per worker, as separate
	// processes would have (they do not see each other's choices).
	handles := []*fdbqueue.JobQueue{q}
	for i := 1; o.perConsumer && i < workers; i++ {
		h, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: row.Choice})
		if err != nil {
			return row, err
		}
		handles = append(handles, h)
	}
	ctx := context.Background()
	f := &feeder{write: func(first int64) error {
		jobs := make([]fdbqueue.Job, feedChunk)
		for i := range jobs {
			jobs[i].Value = fmt.Appendf(nil, "job-%d", first+int64(i))
		}
		_, err := q.AddBatch(ctx, db, jobs)
		return err
	}}
	if err := f.prefill(); err != nil {
		return row, err
	}
	runCtx, stop := context.WithTimeout(ctx, o.duration)
	defer stop()
	errc := make(chan error, workers+o.feeders)
	fwg := f.start(runCtx, o.feeders, errc)
	before := db.Stats()
	start := time.Now()
	lats := make([][]time.Duration, workers)
	var wg sync.WaitGroup
	for i := range workers {
		q := handles[i%len(handles)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			for runCtx.Err() == nil {
				t0 := time.Now()
				ls, err := q.Lease(runCtx, db, 1, time.Minute)
				if err == nil {
					err = q.Ack(runCtx, db, ls[0])
				}
				switch {
				case err == nil:
					lats[i] = append(lats[i], time.Since(t0))
					if d := f.done.Add(1); o.items > 0 && d >= o.items {
						stop()
					}
				case errors.Is(err, fdbqueue.ErrEmpty), runCtx.Err() != nil:
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
	stop()
	fwg.Wait()
	close(errc)
	for err := range errc {
		return row, err
	}
	row.Jobs = f.done.Load()
	row.Seconds = elapsed.Seconds()
	row.JobsPerSec = float64(row.Jobs) / row.Seconds
	row.Conflicts = after.Conflicts - before.Conflicts
	if row.Jobs > 0 {
		row.ConflictsJob = float64(row.Conflicts) / float64(row.Jobs)
	}
	row.P50, row.P99 = percentiles(slices.Concat(lats...))
	row.load = loadAverage()
	return row, nil
}

// printLeaseTable prints the lease cells, with each rate as a multiple of
// the 1-worker rate.
func printLeaseTable(w io.Writer, rows []leaseRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w, "\nlease + ack (JobQueue), one job per call:")
	fmt.Fprintln(w, "| workers | K | jobs/s | × 1 worker | conflicts/job | p50 | p99 |")
	fmt.Fprintln(w, "|--:|--:|--:|--:|--:|--:|--:|")
	var one float64
	for _, r := range rows {
		if r.Workers == 1 {
			one = r.JobsPerSec
		}
	}
	for _, r := range rows {
		x := "-"
		if one > 0 {
			x = fmt.Sprintf("%.1f×", r.JobsPerSec/one)
		}
		fmt.Fprintf(w, "| %d | %d | %.0f | %s | %.3f | %v | %v |\n", r.Workers, r.Choice, r.JobsPerSec, x, r.ConflictsJob,
			r.P50.Round(10*time.Microsecond), r.P99.Round(10*time.Microsecond))
	}
}

func writeLeaseCSV(path string, rows []leaseRow) error {
	if len(rows) == 0 {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"workers", "choice", "jobs", "seconds", "jobs_per_sec", "conflicts", "conflicts_per_job", "p50_us", "p99_us"})
	for _, r := range rows {
		_ = cw.Write([]string{strconv.Itoa(r.Workers), strconv.Itoa(r.Choice), strconv.FormatInt(r.Jobs, 10),
			strconv.FormatFloat(r.Seconds, 'f', 3, 64), strconv.FormatFloat(r.JobsPerSec, 'f', 1, 64),
			strconv.FormatInt(r.Conflicts, 10), strconv.FormatFloat(r.ConflictsJob, 'f', 4, 64),
			strconv.FormatInt(r.P50.Microseconds(), 10), strconv.FormatInt(r.P99.Microseconds(), 10)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
