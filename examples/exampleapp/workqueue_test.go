package exampleapp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// RunWorkQueue, the main example's logic, moves every item exactly once
// while the engine answers some commits with commit_unknown_result, with
// one item per transaction (batch 1) and batches alike, and says so in its
// summary. With failing reads and read version requests too (which fail
// the consumers' watches now and then, as FDB does: RYWImpl::watch,
// fdbclient/ReadYourWrites.actor.cpp), it still ends without an error.
func TestRunWorkQueueMovesEveryItemOnce(t *testing.T) {
	for _, readFaults := range []bool{false, true} {
		for _, batch := range []int{1, 8} {
			t.Run(fmt.Sprintf("batch-%d/read-faults-%v", batch, readFaults), func(t *testing.T) {
				testRunWorkQueue(t, batch, readFaults)
			})
		}
	}
}

func testRunWorkQueue(t *testing.T, batch int, readFaults bool) {
	opts := MemdbOptions(3, 0.1, false)
	if readFaults {
		opts = append(opts, memdb.WithFaults(memdb.Faults{UnknownApplied: 0.05, UnknownNotApplied: 0.05,
			ReadErrors: 0.05, ReadVersionErrors: 0.02}))
	}
	db := memdb.New(opts...)
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := fdbqueue.NewQueue(sub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const items = 300
	s, err := RunWorkQueue(ctx, db, q, WorkQueueConfig{Producers: 3, Consumers: 3, Items: items, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	if s.Items != items || s.Dequeued != items || s.Lost != 0 || s.Duplicates != 0 {
		t.Fatalf("want %d items enqueued and dequeued once each: %+v", items, s)
	}
	if s.Stats == nil || s.Stats.InjectedUnknownApplied+s.Stats.InjectedUnknownNotApplied == 0 {
		t.Fatalf("the run must have met commit_unknown_result: %+v", s.Stats)
	}
	if readFaults && s.Stats.InjectedReadErrors+s.Stats.InjectedReadVersionErrors == 0 {
		t.Fatalf("the run must have met failing reads: %+v", s.Stats)
	}
	if empty, err := q.Empty(ctx, db); err != nil || !empty {
		t.Fatalf("the queue must be empty after the run: empty %v, %v", empty, err)
	}
}

func TestRunWorkQueueRefusesAnEmptyConfig(t *testing.T) {
	db := memdb.New()
	defer db.Close()
	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
	q, _ := fdbqueue.NewQueue(sub)
	_, err := RunWorkQueue(context.Background(), db, q, WorkQueueConfig{Producers: 1, Consumers: 1, Items: 1})
	if !errors.Is(err, fdbqueue.ErrInvalidArgument) {
		t.Fatalf("batch 0: want ErrInvalidArgument, got %v", err)
	}
}

// The example's consumer waits as one in another process must: it shares
// nothing with the producer but the database, blocks on a watch when it
// finds the queue empty, and wakes for each item another Queue handle
// enqueues. Once producing ends it returns.
func TestConsumeWakesOnAnotherHandlesEnqueue(t *testing.T) {
	for _, batch := range []int{1, 8} {
		t.Run(fmt.Sprintf("batch-%d", batch), func(t *testing.T) {
			c := startConsumer(t, batch, false)
			for _, v := range []string{"a", "b", "c"} {
				c.await(c.waiting, "the consumer never blocked on a watch")
				c.enqueue(v)
				c.take(v)
			}
			c.await(c.waiting, "the consumer never blocked on a watch")
			c.producersDone()
			c.finish()
		})
	}
}

// The last item, enqueued after a consumer found the queue empty and just
// before the producers are done, is still taken: the consumer looks once
// more after they are done, in a transaction whose read version follows
// every commit reported before it began (FDB:
// documentation/sphinx/source/api-c.rst, fdb_transaction_get_read_version).
// Its transaction that found the queue empty commits only after the
// enqueue; it writes nothing, so it cannot conflict and retry (FDB:
// documentation/sphinx/source/developer-guide.rst, "Read-only transactions
// will never conflict").
func TestConsumeTakesTheItemEnqueuedAfterItsEmptyRead(t *testing.T) {
	for _, batch := range []int{1, 8} {
		t.Run(fmt.Sprintf("batch-%d", batch), func(t *testing.T) {
			c := startConsumer(t, batch, true)
			c.await(c.armed, "the consumer never armed a watch")
			c.enqueue("last")
			c.producersDone()
			close(c.proceed) // the consumer's transaction commits
			c.take("last")
			c.finish()
		})
	}
}

// An item enqueued after the consumer's DequeueBatch found the queue empty,
// but before its watch transaction began, is taken at once: that
// transaction sees the item (Empty) and arms no watch. A watch armed
// there would compare the signal key with the value the enqueue already
// wrote, and not fire until the next enqueue.
func TestConsumeTakesTheItemEnqueuedBeforeItsWatch(t *testing.T) {
	for _, batch := range []int{1, 8} {
		t.Run(fmt.Sprintf("batch-%d", batch), func(t *testing.T) {
			c := startConsumerWith(t, batch, false, func(wdb *watchingDB, c *consumer) {
				var n atomic.Int32
				wdb.begin = func() {
					if n.Add(1) == 2 { // the watch transaction, after the empty take
						c.enqueue("x")
					}
				}
			})
			c.take("x")
			c.await(c.waiting, "the consumer never blocked on a watch")
			c.producersDone()
			c.finish()
		})
	}
}

// consumer is one consume call on a fresh queue, and what a test does to it.
type consumer struct {
	t              *testing.T
	ctx            context.Context
	db             *memdb.DB
	q              *fdbqueue.Queue // another handle than the consumer's
	producersDone  func()
	armed, waiting chan struct{}
	proceed        chan struct{}
	got            chan string
	done           chan error
}

// startConsumer runs consume on an empty queue. With pause, its first
// transaction that arms a watch (having found the queue empty) tells armed
// and waits for proceed before it commits; the queue's stored configuration
// already says someone waits, so that transaction writes nothing and cannot
// conflict. Without, waiting tells when it starts to wait on a watch.
func startConsumer(t *testing.T, batch int, pause bool) *consumer {
	return startConsumerWith(t, batch, pause, nil)
}

// startConsumerWith is startConsumer with setup, when not nil, called on
// the consumer's database wrapper before the consumer starts.
func startConsumerWith(t *testing.T, batch int, pause bool, setup func(*watchingDB, *consumer)) *consumer {
	db := memdb.New(MemdbOptions(5, 0.1, false)...)
	t.Cleanup(func() { db.Close() })
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"examples", "workqueue"})
	if err != nil {
		t.Fatal(err)
	}
	consumerQ, err := fdbqueue.NewQueue(sub)
	if err != nil {
		t.Fatal(err)
	}
	producerQ, err := fdbqueue.NewQueue(sub)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	producing, producersDone := context.WithCancel(ctx)
	c := &consumer{t: t, ctx: ctx, db: db, q: producerQ, producersDone: producersDone,
		armed: make(chan struct{}), waiting: make(chan struct{}, 1), proceed: make(chan struct{}),
		got: make(chan string, 8), done: make(chan error, 1)}
	wdb := watchingDB{Database: db}
	if pause {
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			w, err := producerQ.WatchForItems(tr) // stores that someone waits
			if w != nil {
				w.Cancel()
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		wdb.armed = func() { once.Do(func() { c.armed <- struct{}{}; <-c.proceed }) }
	} else {
		wdb.waiting = func() { tell(c.waiting) }
	}
	if setup != nil {
		setup(&wdb, c)
	}
	go func() {
		c.done <- consume(ctx, producing, wdb, consumerQ, batch, func(vals [][]byte) error {
			for _, v := range vals {
				c.got <- string(v)
			}
			return nil
		})
	}()
	return c
}

func (c *consumer) await(ch <-chan struct{}, what string) {
	c.t.Helper()
	select {
	case <-ch:
	case <-c.ctx.Done():
		c.t.Fatalf("%s: %v", what, c.ctx.Err())
	}
}

func (c *consumer) enqueue(v string) {
	c.t.Helper()
	if err := c.q.Enqueue(c.ctx, c.db, []byte(v)); err != nil {
		c.t.Fatal(err)
	}
}

func (c *consumer) take(want string) {
	c.t.Helper()
	select {
	case v := <-c.got:
		if v != want {
			c.t.Fatalf("took %q, want %q", v, want)
		}
	case <-c.ctx.Done():
		c.t.Fatalf("the consumer did not take %q: %v", want, c.ctx.Err())
	}
}

// finish checks that consume returned without error, having taken nothing
// more, and left the queue empty.
func (c *consumer) finish() {
	c.t.Helper()
	select {
	case err := <-c.done:
		if err != nil {
			c.t.Fatal(err)
		}
	case <-c.ctx.Done():
		c.t.Fatal("the consumer did not end once producing ended and the queue was empty")
	}
	if len(c.got) != 0 {
		c.t.Fatalf("the consumer took %q more", <-c.got)
	}
	if empty, err := c.q.Empty(c.ctx, c.db); err != nil || !empty {
		c.t.Fatalf("the queue must be empty: empty %v, %v", empty, err)
	}
}

// watchingDB calls begin when a Transact call begins (before its first
// attempt), armed when one of its transactions arms a watch, and waiting
// when a Wait on one starts (nil: not called).
type watchingDB struct {
	kv.Database
	begin, armed, waiting func()
}

func (d watchingDB) Transact(ctx context.Context, f func(kv.Transaction) error) error {
	if d.begin != nil {
		d.begin()
	}
	return d.Database.Transact(ctx, func(tr kv.Transaction) error { return f(watchingTx{tr, d}) })
}

type watchingTx struct {
	kv.Transaction
	d watchingDB
}

func (tr watchingTx) Watch(key []byte) kv.Watch {
	if tr.d.armed != nil {
		tr.d.armed()
	}
	return signallingWatch{tr.Transaction.Watch(key), tr.d.waiting}
}

type signallingWatch struct {
	kv.Watch
	waiting func()
}

func (w signallingWatch) Wait(ctx context.Context) error {
	if w.waiting != nil {
		w.waiting()
	}
	return w.Watch.Wait(ctx)
}

// tell sends on ch unless it already holds a message.
func tell(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
