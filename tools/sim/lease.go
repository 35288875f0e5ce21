package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// LeaseConfig configures a simulation of a JobQueue.
type LeaseConfig struct {
	Rounds, Clients, OpsPerClient int
	Choice                        int // K
	MaxAttempts                   int
	Faults                        memdb.Faults
	CheckTimeout                  time.Duration
	// WithoutIdempotency turns the queue's journal off, for the test that
	// requires the checker to reject the result.
	WithoutIdempotency bool
}

// DefaultLeaseConfig is a short run with every fault.
func DefaultLeaseConfig() LeaseConfig {
	return LeaseConfig{Rounds: 12, Clients: 4, OpsPerClient: 5, Choice: 3, MaxAttempts: 3,
		Faults:       memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05, TooOld: 0.02, LateLanding: 0.5},
		CheckTimeout: 30 * time.Second}
}

// LeaseResult is what one simulated seed found.
type LeaseResult struct {
	Operations int
	Check      porcupine.CheckResult
	// Conservation: jobs added, acked (by a successful Ack), dead at the
	// end, and the jobs acked twice, acked and dead, or neither (lost).
	Added, Acked, Dead, AckedTwice, AckedAndDead, Lost int
	Stats                                              memdb.Stats
}

// OK reports whether the history was linearizable and every job was
// accounted for exactly once.
func (r LeaseResult) OK() bool {
	return r.Check == porcupine.Ok && r.AckedTwice == 0 && r.AckedAndDead == 0 && r.Lost == 0 && r.Added == r.Acked+r.Dead
}

// simClock is the queue's clock: fixed within a round.
type simClock struct{ now atomic.Int64 }

func (c *simClock) Now() time.Time { return time.UnixMicro(c.now.Load()) }

// After is never reached: the harness uses Lease, not LeaseWait.
func (c *simClock) After(time.Duration) <-chan time.Time { return make(chan time.Time) }

// RunLeases runs concurrent clients on a JobQueue under injected faults:
// they add jobs, lease them, ack, nack and extend the leases they hold,
// and keep some leases across rounds and drop others (a crashed worker),
// while the clock moves between rounds so that leases expire and delayed
// jobs fall due. The history is checked against LeaseModel, and at the
// end every job is drained and accounted for.
func RunLeases(ctx context.Context, seed int64, cfg LeaseConfig) (LeaseResult, error) {
	var res LeaseResult
	db := memdb.New(memdb.WithSeed(seed), memdb.WithFaults(cfg.Faults), memdb.WithBackoff(50*time.Microsecond, time.Millisecond))
	defer db.Close()
	clock := &simClock{}
	clock.now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro())
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"sim", "jobs"})
	if err != nil {
		return res, err
	}
	var opts []fdbqueue.Option
	if cfg.WithoutIdempotency {
		opts = append(opts, fdbqueue.WithoutIdempotency())
	}
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: cfg.Choice, MaxAttempts: cfg.MaxAttempts, Clock: clock}, opts...)
	if err != nil {
		return res, err
	}
	const d = int64(10 * time.Second / time.Microsecond) // lease duration
	var seq atomic.Int64
	var mu sync.Mutex
	var history []porcupine.Operation
	record := func(client int, in LeaseInput, call int64, out LeaseOutput) {
		mu.Lock()
		history = append(history, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: seq.Add(1)})
		mu.Unlock()
	}
	acks := map[string]int{}
	held := make([][]fdbqueue.Lease, cfg.Clients)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x1ea5e))
	for round := range cfg.Rounds {
		var wg sync.WaitGroup
		errs := make(chan error, cfg.Clients)
		now := clock.now.Load()
		for c := range cfg.Clients {
			crng := rand.New(rand.NewPCG(uint64(seed), uint64(round*1000+c)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := leaseClient(ctx, q, db, c, crng, now, d, &held[c], cfg, record, seq.Add, acks, &mu); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			return res, err
		}
		// Observe, then crash some holders and move the clock.
		call := seq.Add(1)
		jobs, err := observeJobs(ctx, db, sub)
		if err != nil {
			return res, err
		}
		record(cfg.Clients, LeaseInput{Kind: LObserve, Now: now}, call, LeaseOutput{Jobs: jobs})
		for c := range held {
			if rng.IntN(3) == 0 {
				held[c] = nil
			}
		}
		clock.now.Add([]int64{0, d / 2, d, 2 * d}[rng.IntN(4)] + 1)
	}
	res.Operations = len(history)
	res.Check = porcupine.CheckOperationsTimeout(LeaseModel(cfg.Choice), history, cfg.CheckTimeout)

	// Drain: lease everything due and ack it, moving the clock past every
	// lease and delay, until the queue is empty.
	for i := 0; ; i++ {
		if i > 1000 {
			return res, errors.New("sim: the job queue did not drain")
		}
		clock.now.Add(3*d + 1)
		ls, err := q.Lease(ctx, db, 10, 0)
		if errors.Is(err, fdbqueue.ErrEmpty) {
			st, err := q.Stats(ctx, db)
			if err != nil {
				return res, err
			}
			if st.Queued+st.Leased+st.ExpiredLeases == 0 {
				break
			}
			continue
		}
		if err != nil {
			return res, err
		}
		for _, l := range ls {
			if err := q.Ack(ctx, db, l); err != nil {
				return res, err
			}
			acks[string(l.JobID[:])]++
		}
	}
	final, err := observeJobs(ctx, db, sub)
	if err != nil {
		return res, err
	}
	dead := map[string]bool{}
	for _, j := range final {
		if !j.Dead {
			return res, fmt.Errorf("sim: job %x still queued after the drain", j.Job)
		}
		dead[j.Job] = true
	}
	for _, op := range history {
		if op.Input.(LeaseInput).Kind != LAdd {
			continue
		}
		job := op.Output.(LeaseOutput).Job
		res.Added++
		switch n := acks[job]; {
		case n > 1:
			res.AckedTwice++
		case n == 1 && dead[job]:
			res.AckedAndDead++
		case n == 1:
			res.Acked++
		case dead[job]:
			res.Dead++
		default:
			res.Lost++
		}
	}
	res.Stats = db.Stats()
	return res, nil
}

type recorder func(client int, in LeaseInput, call int64, out LeaseOutput)

func leaseClient(ctx context.Context, q *fdbqueue.JobQueue, db kv.Database, c int, rng *rand.Rand, now, d int64,
	held *[]fdbqueue.Lease, cfg LeaseConfig, record recorder, tick func(int64) int64, acks map[string]int, mu *sync.Mutex) error {
	for range cfg.OpsPerClient {
		in := LeaseInput{Now: now}
		var out LeaseOutput
		call := tick(1)
		x := rng.IntN(10)
		if len(*held) == 0 && x >= 5 {
			x = rng.IntN(5)
		}
		switch {
		case x < 2: // add
			in.Kind, in.Prio, in.Max = LAdd, int32(rng.IntN(3)), cfg.MaxAttempts
			delay := []int64{0, 0, d / 2, 2 * d}[rng.IntN(4)]
			in.Vest = now + delay
			r, err := q.Add(ctx, db, fdbqueue.Job{Value: []byte{byte(c)}, Delay: time.Duration(delay) * time.Microsecond, Priority: in.Prio})
			if err != nil {
				return fmt.Errorf("add: %w", err)
			}
			out.Job = string(r.ID[:])
		case x < 5: // lease
			in.Kind, in.N, in.D = LLease, 1+rng.IntN(2), d
			ls, err := q.Lease(ctx, db, in.N, time.Duration(d)*time.Microsecond)
			switch {
			case errors.Is(err, fdbqueue.ErrEmpty):
				out.Empty = true
			case err != nil:
				return fmt.Errorf("lease: %w", err)
			}
			for _, l := range ls {
				out.Leases = append(out.Leases, LeasedJob{Job: string(l.JobID[:]), Tag: tag(l), Attempt: l.Attempt})
				*held = append(*held, l)
			}
		default: // ack, nack or extend a held lease
			i := rng.IntN(len(*held))
			l := (*held)[i]
			in.Job, in.Tag = string(l.JobID[:]), tag(l)
			var err error
			switch x {
			case 5, 6, 7:
				in.Kind = LAck
				if err = q.Ack(ctx, db, l); err == nil {
					mu.Lock()
					acks[in.Job]++
					mu.Unlock()
				}
			case 8:
				in.Kind = LNack
				delay := []int64{-1, d / 2}[rng.IntN(2)]
				in.Vest = now + max(delay, 0)
				out.Dead, err = q.Nack(ctx, db, l, fdbqueue.NackOptions{Delay: time.Duration(delay) * time.Microsecond})
			default:
				in.Kind, in.D = LExtend, d
				var nl fdbqueue.Lease
				if nl, err = q.Extend(ctx, db, l, time.Duration(d)*time.Microsecond); err == nil {
					(*held)[i] = nl
				}
			}
			switch {
			case errors.Is(err, fdbqueue.ErrLeaseLost):
				out.Lost = true
			case err != nil:
				return fmt.Errorf("%v: %w", in.Kind, err)
			}
			if in.Kind != LExtend || out.Lost {
				*held = append((*held)[:i], (*held)[i+1:]...)
			}
		}
		record(c, in, call, out)
	}
	return nil
}

func tag(l fdbqueue.Lease) uint64 { return binary.BigEndian.Uint64(l.ID[:8]) }

// observeJobs reads every job record, queued, leased or dead, straight
// from the database (the layout in docs/design.md).
func observeJobs(ctx context.Context, db kv.Database, sub fdbqueue.Subspace) ([]JobRecord, error) {
	var out []JobRecord
	for _, tag := range []string{"q", "d"} {
		r, err := sub.Range(tag)
		if err != nil {
			return nil, err
		}
		kvs, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
			return tr.GetRange(r, kv.RangeOptions{Mode: kv.StreamingModeWantAll}).GetSlice()
		})
		if err != nil {
			return nil, err
		}
		for _, p := range kvs {
			k, err := sub.Unpack(p.Key)
			if err != nil {
				return nil, err
			}
			v, err := tuple.Unpack(p.Value)
			if err != nil || len(v) != 9 {
				return nil, fmt.Errorf("sim: bad job record at %x", p.Key)
			}
			id, _ := k[len(k)-1].([]byte)
			rec := JobRecord{Job: string(id), Dead: tag == "d"}
			vest, _ := v[0].(int64)
			prio, _ := v[1].(int64)
			att, _ := v[3].(int64)
			mx, _ := v[4].(int64)
			rec.Vest, rec.Prio, rec.Attempts, rec.Max = vest, int32(prio), int(att), int(mx)
			if lid, ok := v[2].([]byte); ok && len(lid) == 16 {
				rec.Tag = binary.BigEndian.Uint64(lid[:8])
			}
			out = append(out, rec)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Job < out[j].Job })
	return out, nil
}
