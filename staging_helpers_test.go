package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// stgDB returns an embedded database with a tiny backoff, so that contended
// tests stay fast.
func stgDB(t testing.TB, opts ...memdb.Option) *memdb.DB {
	t.Helper()
	return backoffDB(t, 50*time.Microsecond, 2*time.Millisecond, opts...)
}

// stagedQueue returns a database, a subspace named name and a queue in it
// made with opts: the setup of most staged tests.
func stagedQueue(t testing.TB, name string, opts ...fdbqueue.Option) (*memdb.DB, fdbqueue.Subspace, *fdbqueue.Queue) {
	t.Helper()
	db := stgDB(t)
	sub := stgSubspace(t, name)
	return db, sub, stgQueue(t, sub, opts...)
}

// clockedQueue is stagedQueue in mode m with a manual clock, returned,
// and the claim timeout given.
func clockedQueue(t testing.TB, name string, m stagingMode, timeout time.Duration) (*memdb.ManualClock, *memdb.DB, fdbqueue.Subspace, *fdbqueue.Queue) {
	t.Helper()
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	db, sub, q := stagedQueue(t, name, append(m.opts(fdbqueue.StagingConfig{ClaimTimeout: timeout}), fdbqueue.WithClock(clock.Now))...)
	return clock, db, sub, q
}

// startWaiters starts n goroutines that each call q.DequeueWait once, and
// returns the channels that receive their items and errors.
func startWaiters(ctx context.Context, q *fdbqueue.Queue, db kv.Database, n int) (<-chan []byte, <-chan error) {
	got := make(chan []byte, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			v, err := q.DequeueWait(ctx, db)
			if err != nil {
				errs <- err
				return
			}
			got <- v
		}()
	}
	return got, errs
}

// faultyDB is stgDB with the seed given and, if faults, the staged tests'
// injected faults.
func faultyDB(t testing.TB, seed int64, faults bool) *memdb.DB {
	t.Helper()
	opts := []memdb.Option{memdb.WithSeed(seed)}
	if faults {
		opts = append(opts, memdb.WithFaults(stagingFaults))
	}
	return stgDB(t, opts...)
}

// produce starts producers goroutines that each put perProducer values,
// "p<producer>-<i>" in order, and returns those values and a function
// that waits for the producers. A failed put fails the test.
func produce(t *testing.T, producers, perProducer int, put func(p, i int, v []byte) error) (want []string, wait func()) {
	for p := range producers {
		for i := range perProducer {
			want = append(want, fmt.Sprintf("p%d-%d", p, i))
		}
	}
	gt := forGoroutines(t)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perProducer {
				if err := put(p, i, fmt.Appendf(nil, "p%d-%d", p, i)); err != nil {
					gt.Errorf("producer %d: %v", p, err)
					return
				}
			}
		}()
	}
	return want, func() { waitWithin(t, &wg, workTimeout, "the producers") }
}

// requireClean checks that a staged test left no items, no staging keys
// (requests, markers, results) and no watches behind.
func requireClean(t testing.TB, db *memdb.DB, sub fdbqueue.Subspace) {
	t.Helper()
	require.Empty(t, itemKeys(t, db, sub), "items left behind")
	require.Empty(t, stagingKeys(t, db, sub), "requests or results left behind")
	requireNoWatches(t, db)
}

func stgSubspace(t testing.TB, name string) fdbqueue.Subspace {
	t.Helper()
	s, err := fdbqueue.NewSubspace(tuple.Tuple{"staging", name})
	require.NoError(t, err)
	return s
}

func stgQueue(t testing.TB, sub fdbqueue.Subspace, opts ...fdbqueue.Option) *fdbqueue.Queue {
	t.Helper()
	q, err := fdbqueue.NewQueue(sub, opts...)
	require.NoError(t, err)
	return q
}

// stagingKeys returns the requests and results left in the staging part of
// the queue's meta subspace (the signal key is not counted).
func stagingKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) []string {
	t.Helper()
	meta := append(sub.Bytes(), 0xff)
	begin, err := tuple.Tuple{"s"}.AppendPack(bytes.Clone(meta))
	require.NoError(t, err)
	sig, err := tuple.Tuple{"s", "sig"}.AppendPack(bytes.Clone(meta))
	require.NoError(t, err)
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: begin, End: append(bytes.Clone(begin), 0xff)}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	var out []string
	for _, p := range kvs {
		if !bytes.Equal(p.Key, sig) {
			out = append(out, fmt.Sprintf("%q", p.Key))
		}
	}
	return out
}

// itemKeys returns the keys of the items in the queue's range.
func itemKeys(t testing.TB, db kv.Database, sub fdbqueue.Subspace) [][]byte {
	t.Helper()
	kvs := subspacePairs(t, db, sub)
	keys := make([][]byte, len(kvs))
	for i, p := range kvs {
		keys[i] = p.Key
	}
	return keys
}

// requireNoWatches checks that no operation left a watch behind.
func requireNoWatches(t testing.TB, db *memdb.DB) {
	t.Helper()
	require.Zero(t, db.Stats().Watches, "outstanding watches after every operation returned")
}

var stagingFaults = withReadFaults(memdb.Faults{NotCommitted: 0.05, UnknownApplied: 0.05, UnknownNotApplied: 0.05})

// stagingMode is one serving mode of a staged Queue: in batches (on the
// recipe's keys) or by place (on versionstamp-ordered keys, which it needs).
type stagingMode struct {
	name    string
	byPlace bool
}

var stagingModes = []stagingMode{{"batches", false}, {"place", true}}

// opts returns the options of a Queue staged with c in mode m.
func (m stagingMode) opts(c fdbqueue.StagingConfig) []fdbqueue.Option {
	if !m.byPlace {
		c.Serving = fdbqueue.ServeInBatches
		return []fdbqueue.Option{fdbqueue.WithStaging(c)}
	}
	c.Serving = fdbqueue.ServeByPlace
	return []fdbqueue.Option{fdbqueue.WithStaging(c), fdbqueue.WithVersionstampOrder()}
}

// layout is the key layout option of mode m (nil: the recipe's), for the
// other Queue values on the same subspace.
func (m stagingMode) layout() fdbqueue.Option {
	if m.byPlace {
		return fdbqueue.WithVersionstampOrder()
	}
	return nil
}

// requireReturned checks where an item taken by a call that then failed
// went back: in batch mode to its original key; in place mode to the
// tail, under a new key (here the queue holds only it).
func (m stagingMode) requireReturned(t *testing.T, db *memdb.DB, sub fdbqueue.Subspace, original []byte) {
	t.Helper()
	keys := itemKeys(t, db, sub)
	require.Len(t, keys, 1, "the item is back in the queue")
	if m.byPlace {
		require.NotEqual(t, original, keys[0], "place mode: the item went to the tail, under a new key")
	} else {
		require.Equal(t, original, keys[0], "batch mode: the item is back at its original key")
	}
}

// forModes runs f as a subtest in each ordering mode.
func forModes(t *testing.T, f func(t *testing.T, m stagingMode)) {
	for _, m := range stagingModes {
		t.Run(m.name, func(t *testing.T) { f(t, m) })
	}
}

// consumeAll runs consumers that call take until every one of n items has
// been received, then stops the ones still waiting, and returns the items
// received in total.
func consumeAll(t *testing.T, consumers, n int, take func(ctx context.Context) (string, error)) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, consumers)
	for range consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				v, err := take(ctx)
				if err != nil {
					if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
						errs <- err
					}
					return
				}
				mu.Lock()
				got[v]++
				mu.Unlock()
				if total.Add(1) == int64(n) {
					cancel() // every item is in: stop the waiting consumers
				}
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the consumers")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(n), total.Load(), "items received before the deadline")
	return got
}

func requireExactlyOnce(t *testing.T, got map[string]int, want []string) {
	t.Helper()
	require.Len(t, got, len(want), "distinct items received")
	for _, w := range want {
		require.Equal(t, 1, got[w], "item %s received %d times", w, got[w])
	}
}

// stallTwoWaiters starts two DequeueWait calls that file their requests one
// after the other (the first is the older request) and then stop until
// release is closed. Their items arrive on results.
func stallTwoWaiters(ctx context.Context, t *testing.T, db kv.Database, q *fdbqueue.Queue) (results <-chan string, release chan struct{}) {
	t.Helper()
	registered := make(chan struct{}, 2)
	release = make(chan struct{})
	gt := forGoroutines(t)
	var hung atomic.Int32
	fdbqueue.SetStagingHook(q, func(p string) {
		if p == "registered" && hung.Add(1) <= 2 {
			registered <- struct{}{}
			<-release
		}
	})
	out := make(chan string, 2)
	for range 2 {
		go func() {
			v, err := q.DequeueWait(ctx, db)
			if err != nil {
				gt.Errorf("DequeueWait: %v", err)
			}
			out <- string(v)
		}()
		recvWithin(t, registered, "a waiter's request filed")
	}
	return out, release
}

func toStrings(vals [][]byte) []string {
	out := make([]string, len(vals))
	for i, v := range vals {
		out[i] = string(v)
	}
	return out
}

// stallAfterWake returns a staging hook for one waiter: armed is closed
// when the waiter first goes to sleep, woke when it first wakes, and there
// it stalls (its request still in the line) until resume is called, which
// may be called more than once.
func stallAfterWake() (hook func(string), armed, woke <-chan struct{}, resume func()) {
	var arm, wake, resumed sync.Once
	a, w, r := make(chan struct{}), make(chan struct{}), make(chan struct{})
	hook = func(p string) {
		switch p {
		case "armed":
			arm.Do(func() { close(a) })
		case "woke":
			wake.Do(func() {
				close(w)
				<-r
			})
		}
	}
	return hook, a, w, func() { resumed.Do(func() { close(r) }) }
}

// stallAtArm returns a staging hook that stalls its waiter each time it is
// about to sleep (its request filed, no longer renewed) until resume is
// called; stalled is closed the first time. resume may be called more
// than once.
func stallAtArm() (hook func(string), stalled <-chan struct{}, resume func()) {
	var first, resumed sync.Once
	s, r := make(chan struct{}), make(chan struct{})
	hook = func(p string) {
		if p == "armed" {
			first.Do(func() { close(s) })
			<-r
		}
	}
	return hook, s, func() { resumed.Do(func() { close(r) }) }
}

// stallOnceAt returns a staging hook that stalls its caller the first time
// it reaches point until resume is called (which may be called more than
// once); reached is closed then.
func stallOnceAt(point string) (hook func(string), reached <-chan struct{}, resume func()) {
	var first, resumed sync.Once
	s, r := make(chan struct{}), make(chan struct{})
	hook = func(p string) {
		if p == point {
			first.Do(func() {
				close(s)
				<-r
			})
		}
	}
	return hook, s, func() { resumed.Do(func() { close(r) }) }
}
