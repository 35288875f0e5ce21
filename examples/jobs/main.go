// Command jobs runs a fdbqueue.JobQueue on the embedded engine (memdb):
// producers add delayed and prioritised jobs, worker processes (each a
// JobQueue.Run pool) process them while handlers fail at random and whole
// processes crash at random (their in-flight jobs are never acked, and
// their leases expire), and the database answers some commits with
// commit_unknown_result. Each job's effect is written in the transaction
// that acks it. A live progress line (on a terminal only) ends in a
// summary: done, retried, dead-lettered, lost and duplicate effects. It
// exits with status 1 if any job was lost or any effect duplicated.
//
//	go run ./examples/jobs [-jobs 2000] [-producers 2] [-processes 3] [-workers 4] [-fail 0.1] [-crash 0.01] [-latency real|none] [-unknown 0.02]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

type config struct {
	Jobs, Producers, Processes, Workers, MaxAttempts int
	Fail, Crash, Unknown                             float64
	Latency                                          bool
	MaxDelay, Lease                                  time.Duration
	Seed                                             int64
	Progress                                         io.Writer // nil: no progress line
	Log                                              *slog.Logger
}

type summary struct {
	Added, Done, Retried, Dead, Crashes, Lost, Duplicates int
	Elapsed                                               time.Duration
}

func (s summary) String() string {
	return fmt.Sprintf("added %d · done %d · retried %d · dead-lettered %d · process crashes %d · lost %d · duplicate effects %d · %.1fs (%.0f jobs/s)\n",
		s.Added, s.Done, s.Retried, s.Dead, s.Crashes, s.Lost, s.Duplicates, s.Elapsed.Seconds(), float64(s.Done+s.Dead)/s.Elapsed.Seconds())
}

func main() {
	cfg := config{Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	flag.IntVar(&cfg.Jobs, "jobs", 2000, "jobs to add")
	flag.IntVar(&cfg.Producers, "producers", 2, "producer goroutines")
	flag.IntVar(&cfg.Processes, "processes", 3, "worker processes (pools), restarted after each crash")
	flag.IntVar(&cfg.Workers, "workers", 4, "workers per process")
	flag.IntVar(&cfg.MaxAttempts, "max-attempts", 4, "attempts before a job is dead-lettered")
	flag.Float64Var(&cfg.Fail, "fail", 0.1, "probability that a handler fails")
	flag.Float64Var(&cfg.Crash, "crash", 0.01, "probability, per job, that its process crashes mid-job")
	flag.Float64Var(&cfg.Unknown, "unknown", 0.02, "fraction of commits answered commit_unknown_result (half applied)")
	flag.DurationVar(&cfg.MaxDelay, "max-delay", time.Second, "longest delay of a delayed job")
	flag.DurationVar(&cfg.Lease, "lease", 500*time.Millisecond, "lease duration (a crashed process's jobs come back after it)")
	latency := flag.String("latency", "real", "latency model: real (a healthy cluster's) or none")
	flag.Int64Var(&cfg.Seed, "seed", 1, "seed of the faults and of the simulated failures")
	verbose := flag.Bool("v", false, "show the pools' logs")
	flag.Parse()
	switch *latency {
	case "real":
		cfg.Latency = true
	case "none":
	default:
		fmt.Fprintf(os.Stderr, "unknown -latency %q (want real or none)\n", *latency)
		os.Exit(2)
	}
	if *verbose {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		cfg.Progress = os.Stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fmt.Printf("jobs on memdb: %d jobs, %d producers, %d processes × %d workers, %.0f%% failures, %.1f%% crashes, %.0f%% unknown results, latency %s\n",
		cfg.Jobs, cfg.Producers, cfg.Processes, cfg.Workers, cfg.Fail*100, cfg.Crash*100, cfg.Unknown*100, *latency)
	s, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "jobs:", err)
		os.Exit(1)
	}
	fmt.Print(s)
	if s.Lost != 0 || s.Duplicates != 0 {
		fmt.Println("FAILED: jobs were lost or effects duplicated")
		os.Exit(1)
	}
	fmt.Println("ok: every job was done once or dead-lettered")
}

// run adds cfg.Jobs jobs, processes them until every one is done or dead,
// and checks the effects.
func run(ctx context.Context, cfg config) (summary, error) {
	opts := []memdb.Option{memdb.WithSeed(cfg.Seed),
		memdb.WithFaults(memdb.Faults{UnknownApplied: cfg.Unknown / 2, UnknownNotApplied: cfg.Unknown / 2})}
	if cfg.Latency {
		opts = append(opts, memdb.WithLatency(memdb.RealCluster))
	}
	db := memdb.New(opts...)
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "jobs"})
	if err != nil {
		return summary{}, err
	}
	effects, _ := fdbqueue.NewSubspace(tuple.Tuple{"examples", "effects"})
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{MaxAttempts: cfg.MaxAttempts,
		RetryBase: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond})
	if err != nil {
		return summary{}, err
	}
	start := time.Now()
	var s summary
	var retried, crashes atomic.Int64

	// Producers.
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
				r, err := q.Add(ctx, db, j)
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
					key, _ := effects.Pack(tuple.Tuple{l.JobID[:], l.ID[:]})
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

	// Progress, until every job is done or dead.
	producersDone := make(chan struct{})
	go func() { pwg.Wait(); close(producersDone) }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	finished := false
	for !finished {
		select {
		case err := <-perr:
			return s, err
		case <-ctx.Done():
			return s, ctx.Err()
		case <-tick.C:
		}
		st, err := q.Stats(ctx, db)
		if err != nil {
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
	stopAll()
	wwg.Wait()
	s.Elapsed = time.Since(start)
	s.Retried, s.Crashes = int(retried.Load()), int(crashes.Load())
	return s, account(ctx, db, q, effects, &added, &s)
}

// account checks every job: done (exactly one effect) or dead (none).
func account(ctx context.Context, db kv.Database, q *fdbqueue.JobQueue, effects fdbqueue.Subspace, added *sync.Map, s *summary) error {
	r, _ := effects.Range()
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
