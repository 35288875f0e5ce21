package exampleapp

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// JobsConfig sizes the jobs example (a JobQueue with worker pools).
type JobsConfig struct {
	Jobs        int           // jobs to add in all
	Producers   int           // goroutines adding them
	Processes   int           // worker pools (JobQueue.Run), restarted after each crash
	Workers     int           // workers per pool
	MaxAttempts int           // attempts before a job is dead-lettered
	Fail        float64       // probability that a handler fails (the job is retried)
	Crash       float64       // probability, per job, that its pool crashes mid-job
	MaxDelay    time.Duration // longest delay of a delayed job (a quarter of the jobs)
	Lease       time.Duration // lease duration: a crashed pool's jobs whose release failed come back after it
	Seed        int64         // seed of the jobs' priorities and delays and of the simulated failures
	Progress    io.Writer     // where the live progress line goes (nil: none)
	Log         *slog.Logger  // the pools' logs (nil: discarded)

	verbose bool // -v, for Setup
}

// JobsSummary is what the jobs example found. Lost and Duplicates must be 0.
type JobsSummary struct {
	Added, Done, Retried, Dead, Crashes int
	Lost                                int // jobs neither done nor dead
	Duplicates                          int // jobs whose effect was written more than once, or done and dead
	Elapsed                             time.Duration
}

// String renders the summary in one line.
func (s JobsSummary) String() string {
	return fmt.Sprintf("added %d · done %d · retried %d · dead-lettered %d · process crashes %d · lost %d · duplicate effects %d · %.1fs (%.0f jobs/s)\n",
		s.Added, s.Done, s.Retried, s.Dead, s.Crashes, s.Lost, s.Duplicates, s.Elapsed.Seconds(), float64(s.Done+s.Dead)/s.Elapsed.Seconds())
}

// AddFlags registers the example's flags on fs, with their defaults, for
// the example's two programs (examples/jobs on memdb, the fdbkv module's
// cmd/examples jobs on FoundationDB). Call Setup after parsing.
func (c *JobsConfig) AddFlags(fs *flag.FlagSet) {
	fs.IntVar(&c.Jobs, "jobs", 2000, "jobs to add")
	fs.IntVar(&c.Producers, "producers", 2, "producer goroutines")
	fs.IntVar(&c.Processes, "processes", 3, "worker processes (pools), restarted after each crash")
	fs.IntVar(&c.Workers, "workers", 4, "workers per process")
	fs.IntVar(&c.MaxAttempts, "max-attempts", 4, "attempts before a job is dead-lettered")
	fs.Float64Var(&c.Fail, "fail", 0.1, "probability that a handler fails")
	fs.Float64Var(&c.Crash, "crash", 0.01, "probability, per job, that its process crashes mid-job")
	fs.DurationVar(&c.MaxDelay, "max-delay", time.Second, "longest delay of a delayed job")
	fs.DurationVar(&c.Lease, "lease", 500*time.Millisecond, "lease duration (a crashed process's jobs whose release failed come back after it)")
	fs.Int64Var(&c.Seed, "seed", 1, "seed of the simulated failures (and of memdb's faults)")
	fs.BoolVar(&c.verbose, "v", false, "show the pools' logs")
}

// Setup finishes a configuration made by AddFlags: the pools' logs go to
// stderr with -v, and the progress line goes to stderr only when it is a
// terminal.
func (c *JobsConfig) Setup(stderr *os.File) {
	if c.verbose {
		c.Log = slog.New(slog.NewTextHandler(stderr, nil))
	}
	if fi, err := stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		c.Progress = stderr
	}
}

// Check returns an error if a job was lost or an effect duplicated.
func (s JobsSummary) Check() error {
	if s.Lost != 0 || s.Duplicates != 0 {
		return fmt.Errorf("jobs were lost (%d) or effects duplicated (%d)", s.Lost, s.Duplicates)
	}
	return nil
}

// RunJobs adds cfg.Jobs jobs to a JobQueue in sub's ("jobs") subspace,
// processes them with cfg.Processes pools (JobQueue.Run) until every one is
// done or dead, and checks the effects, which the handlers write to sub's
// ("effects") subspace in the transaction that acks the job. A simulated
// crash cancels a whole pool at once: it abandons its in-flight handlers,
// whose jobs are never acked and are released (or come back when their
// leases expire, where a release fails); the pool is then restarted. sub
// should be empty: the run leaves its jobs' effects and dead letters there.
func RunJobs(ctx context.Context, db kv.Database, sub fdbqueue.Subspace, cfg JobsConfig) (JobsSummary, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	jobsSub, err := sub.Sub("jobs")
	if err != nil {
		return JobsSummary{}, err
	}
	effects, err := sub.Sub("effects")
	if err != nil {
		return JobsSummary{}, err
	}
	q, err := fdbqueue.NewJobQueue(jobsSub, fdbqueue.JobQueueConfig{MaxAttempts: cfg.MaxAttempts,
		RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		return JobsSummary{}, err
	}
	start := time.Now()
	var s JobsSummary
	var retried, crashes atomic.Int64

	// Producers.
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var added sync.Map // JobID -> true
	var pwg sync.WaitGroup
	perr := make(chan error, cfg.Producers)
	for p := range cfg.Producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(p)))
			for i := p; i < cfg.Jobs; i += cfg.Producers {
				j := fdbqueue.Job{Value: []byte(fmt.Sprint("job ", i)), Priority: int32(rng.IntN(3))}
				if rng.IntN(4) == 0 {
					j.Delay = time.Duration(rng.Int64N(int64(cfg.MaxDelay) + 1))
				}
				r, err := q.Add(pctx, db, j)
				if err != nil {
					perr <- err
					return
				}
				added.Store(r.ID, true)
			}
		}()
	}

	// Worker processes, restarted after each crash.
	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	var wwg sync.WaitGroup
	for p := range cfg.Processes {
		wwg.Add(1)
		go func() {
			defer wwg.Done()
			rng := rand.New(rand.NewPCG(uint64(cfg.Seed)+1000, uint64(p)))
			var mu sync.Mutex // guards rng
			for runCtx.Err() == nil {
				life, crash := context.WithCancel(runCtx)
				handler := func(hctx context.Context, task *fdbqueue.Task) error {
					mu.Lock()
					x, y := rng.Float64(), rng.Float64()
					mu.Unlock()
					if x < cfg.Crash {
						crashes.Add(1)
						crash()       // the process dies now: nothing in flight is acked
						<-hctx.Done() // and this job never finishes
						return hctx.Err()
					}
					if y < cfg.Fail {
						return errors.New("simulated failure")
					}
					l := task.Lease()
					key, err := effects.Pack(tuple.Tuple{l.JobID.Bytes(), l.ID[:]})
					if err != nil {
						return err
					}
					return db.Transact(hctx, func(tr kv.Transaction) error {
						tr.Set(key, l.Value) // the job's effect, with its ack
						return task.Ack(hctx, tr)
					})
				}
				err := q.Run(life, db, handler, fdbqueue.PoolOptions{
					Workers: cfg.Workers, LeaseDuration: cfg.Lease, ShutdownTimeout: -1, Logger: cfg.Log,
					OnOutcome: func(o fdbqueue.Outcome) {
						if o.Result == fdbqueue.Retried {
							retried.Add(1)
						}
					},
				})
				crash()
				if err != nil {
					cfg.Log.Error("pool", "err", err)
					return
				}
			}
		}()
	}

	// stop ends the producers and the pools and waits for them: every
	// return below leaves no goroutine of the run behind.
	stop := func() {
		stopProducers()
		stopAll()
		pwg.Wait()
		wwg.Wait()
	}

	// Progress, until every job is done or dead.
	producersDone := make(chan struct{})
	go func() { pwg.Wait(); close(producersDone) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	finished := false
	for !finished {
		select {
		case err := <-perr:
			stop()
			return s, err
		case <-ctx.Done():
			stop()
			return s, ctx.Err()
		case <-tick.C:
		}
		st, err := q.Stats(ctx, db)
		if err != nil {
			stop()
			return s, err
		}
		select {
		case <-producersDone:
			finished = st.Queued+st.Leased+st.ExpiredLeases == 0
		default:
		}
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "\r%6.1fs due %5d · delayed %5d · leased %4d · dead %4d · retried %5d · crashes %3d ",
				time.Since(start).Seconds(), st.Due, st.Delayed, st.Leased, st.Dead, retried.Load(), crashes.Load())
		}
	}
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	stop()
	s.Elapsed = time.Since(start)
	s.Retried, s.Crashes = int(retried.Load()), int(crashes.Load())
	return s, account(ctx, db, q, effects, &added, &s)
}

// account checks every job: done (exactly one effect) or dead (none).
func account(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, effects fdbqueue.Subspace, added *sync.Map, s *JobsSummary) error {
	r, err := effects.Range()
	if err != nil {
		return err
	}
	kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
	})
	if err != nil {
		return err
	}
	effectsOf := map[fdbqueue.JobID]int{}
	for _, p := range kvs {
		t, err := effects.Unpack(p.Key)
		if err != nil {
			return err
		}
		var id fdbqueue.JobID
		copy(id[:], t[0].([]byte))
		effectsOf[id]++
	}
	dead := map[fdbqueue.JobID]bool{}
	var cursor []byte
	for {
		page, err := q.ListDead(ctx, db, cursor, 500)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, d := range page {
			dead[d.ID] = true
		}
		cursor = page[len(page)-1].Cursor
	}
	added.Range(func(k, _ any) bool {
		id := k.(fdbqueue.JobID)
		s.Added++
		n := effectsOf[id]
		switch {
		case n > 1 || (n == 1 && dead[id]):
			s.Duplicates++
		case n == 1:
			s.Done++
		case dead[id]:
			s.Dead++
		default:
			s.Lost++
		}
		return true
	})
	return nil
}
