package fdbqueue_test

import (
	"context"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/queuetest"
)

// newArmedClock returns newFakeClock's clock with its Armed channel set,
// so that a test can wait for each timer the pool arms.
func newArmedClock() *queuetest.Clock {
	clock := newFakeClock()
	clock.Armed = make(chan time.Duration, 64)
	return clock
}

// nextArmed is the duration of the next timer armed on clock, or fails
// the test if none is armed within wakeTimeout.
func nextArmed(t *testing.T, clock *queuetest.Clock) time.Duration {
	t.Helper()
	select {
	case d := <-clock.Armed:
		return d
	case <-time.After(wakeTimeout):
		t.Fatalf("waited %v for a timer to be armed", wakeTimeout)
		return 0
	}
}

// poolRun is a JobQueue's Run going in a goroutine of its own, under a
// context the test ends with cancel (or stop).
type poolRun struct {
	t      testing.TB
	cancel context.CancelFunc // ends Run's context
	ran    chan error         // Run's error, once it returned
}

// startPool starts q.Run(ctx, db, h, opts) in a goroutine, ctx a context
// of its own that the returned poolRun ends (and the test's cleanup, in
// case the test ends first).
func startPool(t testing.TB, q *fdbqueue.JobQueue, db kv.Database, h fdbqueue.Handler, opts fdbqueue.PoolOptions) *poolRun {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p := &poolRun{t: t, cancel: cancel, ran: make(chan error, 1)}
	go func() { p.ran <- q.Run(ctx, db, h, opts) }()
	return p
}

// wait returns Run's error once Run has returned, and fails the test with
// why if it has not within wakeTimeout.
func (p *poolRun) wait(why string) error {
	p.t.Helper()
	select {
	case err := <-p.ran:
		return err
	case <-time.After(wakeTimeout):
		p.t.Fatal(why)
		return nil
	}
}

// stop ends Run's context and returns Run's error (see wait).
func (p *poolRun) stop() error {
	p.t.Helper()
	p.cancel()
	return p.wait("Run did not return after its context ended")
}

// blockingHandler is a pool handler that holds its job until the test
// closes finish: it sends its task on started (unbuffered, so the
// test's receive says the handler runs) and, once finish is closed, its
// context's error on ctxErr (room for one run), then returns nil.
type blockingHandler struct {
	started chan *fdbqueue.Task
	finish  chan struct{}
	ctxErr  chan error
}

func newBlockingHandler() *blockingHandler {
	return &blockingHandler{started: make(chan *fdbqueue.Task), finish: make(chan struct{}), ctxErr: make(chan error, 1)}
}

func (b *blockingHandler) handle(ctx context.Context, task *fdbqueue.Task) error {
	b.started <- task
	<-b.finish
	b.ctxErr <- ctx.Err()
	return nil
}

// longJob is a pool of one worker on a job queue (on an armed clock)
// holding one job, whose handler blocks until h.finish is closed; task is
// the handler's task once it runs.
type longJob struct {
	db       *memdb.DB
	clock    *queuetest.Clock
	q        *fdbqueue.JobQueue
	h        *blockingHandler
	outcomes chan fdbqueue.Outcome
	pool     *poolRun
	task     *fdbqueue.Task
}

// startLongJob starts a longJob on a queue named name, the pool run with
// opts (Workers, Logger and OnOutcome set here), and waits for its
// handler to start.
func startLongJob(t *testing.T, name string, opts fdbqueue.PoolOptions) *longJob {
	t.Helper()
	j := &longJob{db: newDB(t), clock: newArmedClock(), h: newBlockingHandler(), outcomes: make(chan fdbqueue.Outcome, 1)}
	j.q = mustJobQueue(t, name, fdbqueue.JobQueueConfig{Clock: j.clock})
	mustAdd(t, j.db, j.q, fdbqueue.Job{Value: []byte("long")})
	opts.Workers, opts.Logger, opts.OnOutcome = 1, quietLog, func(o fdbqueue.Outcome) { j.outcomes <- o }
	j.pool = startPool(t, j.q, j.db, j.h.handle, opts)
	j.task = recvWithin(t, j.h.started, "the handler's start")
	return j
}
