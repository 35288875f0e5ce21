package cli

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// DemoClock is the clock of the demo database: seeding moves it forward so
// that the seeded items have ages. memdb.ManualClock is one.
type DemoClock interface {
	memdb.Clock
	Advance(d time.Duration)
}

// DemoQueues describes the queues OpenDemo seeds, as the flags that name
// them; docs/cli.md and the usage show these.
var DemoQueues = []string{
	"--queue demo/jobs",
	"--queue demo/events --layout versionstamp --encoding tuple",
	"--queue demo/tasks --kind priority",
	"--queue demo/work --kind jobs",
}

// OpenDemo returns an in-memory memdb database on clock (nil: the wall
// clock, with the seeding placed in the past) holding four seeded queues:
//
//	demo/jobs    fifo, indexed keys, raw values: 3 jobs
//	demo/events  fifo, versionstamp keys, tuple values: 4 events, 40 to 10 minutes old
//	demo/tasks   priority, raw values: 4 tasks at priorities 1, 1, 5, 9
//	demo/work    job queue: 2 jobs due (for 25 and 20 minutes), 1 delayed
//	             by an hour, 1 leased for 10 minutes, 1 dead ("card declined");
//	             the schedule "hourly-cleanup", whose slot under way's job
//	             is done (removed)
//
// Nothing persists: each run of the binary with --demo starts from this.
func OpenDemo(ctx context.Context, clock DemoClock, opts ...fdbqueue.Option) (*memdb.DB, error) {
	if clock == nil {
		clock = newPastClock(45 * time.Minute)
	}
	db := memdb.New(memdb.WithClock(clock))
	if err := seedDemo(ctx, db, clock, opts); err != nil {
		db.Close()
		return nil, fmt.Errorf("seeding the demo database: %w", err)
	}
	return db, nil
}

// seedDemo fills the demo queues, without the operation journal: the
// database is new and private, so nothing can retry, and the journal starts
// empty (its record keys hold random operation IDs, whose packed size
// varies, which would make stats' output differ from run to run).
func seedDemo(ctx context.Context, db *memdb.DB, clock DemoClock, opts []fdbqueue.Option) error {
	opts = append([]fdbqueue.Option{fdbqueue.WithoutIdempotency()}, opts...)
	mk := func(path ...any) fdbqueue.Subspace {
		s, _ := fdbqueue.NewSubspace(tuple.Tuple(path))
		return s
	}
	jobs, err := fdbqueue.NewQueue(mk("demo", "jobs"), opts...)
	if err != nil {
		return err
	}
	events, err := fdbqueue.NewQueue(mk("demo", "events"),
		append([]fdbqueue.Option{fdbqueue.WithVersionstampOrder(), fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}, opts...)...)
	if err != nil {
		return err
	}
	tasks, err := fdbqueue.NewPriorityQueue(mk("demo", "tasks"), opts...)
	if err != nil {
		return err
	}
	clock.Advance(5 * time.Minute)
	for _, e := range []string{"user 17 signed up", "order 4411 paid", "order 4411 shipped", "user 17 logged in"} {
		if err := events.Enqueue(ctx, db, []byte(e)); err != nil {
			return err
		}
		clock.Advance(10 * time.Minute)
	}
	if err := jobs.EnqueueBatch(ctx, db, [][]byte{[]byte("resize img-1"), []byte("resize img-2"), []byte("send welcome email")}); err != nil {
		return err
	}
	for _, t := range []struct {
		v string
		p int64
	}{{"backup", 5}, {"report", 1}, {"cleanup", 9}, {"email", 1}} {
		if err := tasks.Push(ctx, db, []byte(t.v), t.p); err != nil {
			return err
		}
	}
	return seedDemoWork(ctx, db, clock, mk("demo", "work"), opts)
}

// seedDemoWork fills the demo job queue: five jobs, of which the one due
// first (one attempt only) is leased and nacked into the dead-letter list
// and the next is leased for ten minutes; then the periodic job
// "hourly-cleanup", scheduled for the slot under way, whose job is then
// cancelled, as if it had run (the other jobs stay as they are, whatever
// the hour). Strict order (Choice 1) and a fixed entropy source make the
// five jobs' IDs the same on every run, so docs/cli.md's requeue-dead line
// works as shown; the scheduled job's ID starts with a tag of its slot
// (JobQueue.Schedule), which is the run's.
func seedDemoWork(ctx context.Context, db *memdb.DB, clock DemoClock, sub fdbqueue.Subspace, opts []fdbqueue.Option) error {
	opts = append(opts, fdbqueue.WithEntropy(rand.NewChaCha8([32]byte{'d', 'e', 'm', 'o'})))
	q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{Choice: 1, Clock: envClock(clock.Now)}, opts...)
	if err != nil {
		return err
	}
	now := clock.Now()
	jobs := []fdbqueue.Job{
		{Value: []byte("charge order 4411"), RunAt: now.Add(-40 * time.Minute), MaxAttempts: 1, UniqueKey: "charge-4411"},
		{Value: []byte("render invoice 4411"), RunAt: now.Add(-30 * time.Minute), Priority: 5},
		{Value: []byte("reindex search"), RunAt: now.Add(-25 * time.Minute)},
		{Value: []byte("render invoice 4412"), RunAt: now.Add(-20 * time.Minute)},
		{Value: []byte("send weekly digest"), Delay: time.Hour},
	}
	if _, err := q.AddBatch(ctx, db, jobs); err != nil {
		return err
	}
	ls, err := q.Lease(ctx, db, 1, time.Minute)
	if err != nil {
		return err
	}
	if _, err := q.Nack(ctx, db, ls[0], fdbqueue.NackOptions{Reason: "card declined"}); err != nil {
		return err
	}
	if _, err = q.Lease(ctx, db, 1, 10*time.Minute); err != nil {
		return err
	}
	cleanup := fdbqueue.PeriodicJob{Name: "hourly-cleanup", Every: time.Hour,
		Job: func(time.Time) fdbqueue.Job { return fdbqueue.Job{Value: []byte("clean up temp files")} }}
	r, err := q.Schedule(ctx, db, cleanup, now)
	if err != nil {
		return err
	}
	return q.Cancel(ctx, db, r.ID)
}

// pastClock is the wall clock shifted into the past by a shift that Advance
// reduces (never below zero), so it never goes backwards, and after seeding
// it reads the real time.
type pastClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func newPastClock(shift time.Duration) *pastClock { return &pastClock{shift: shift} }

func (c *pastClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(-c.shift)
}

func (c *pastClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.shift = max(0, c.shift-d)
}
