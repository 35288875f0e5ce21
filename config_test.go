package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// allPairs reads every key and value of the database, for "nothing was
// written" checks.
func allPairs(t testing.TB, db kv.Database) []kv.KeyValue {
	t.Helper()
	kvs, err := kv.ReadTransact(context.Background(), db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
		return tr.GetRange(kv.KeyRange{Begin: []byte{}, End: []byte{0xff}}, kv.RangeOptions{}).GetSlice()
	})
	require.NoError(t, err)
	return kvs
}

func requireMismatch(t *testing.T, err error, field string) {
	t.Helper()
	require.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
	var me *fdbqueue.ConfigMismatchError
	require.True(t, errors.As(err, &me), "%v", err)
	require.Equal(t, field, me.Field, "%v", err)
}

// configKey is the stored configuration's key: prefix + 0xff + ("c",).
func configKey(t testing.TB, sub fdbqueue.Subspace) []byte {
	k, err := tuple.Tuple{"c"}.AppendPack(append(sub.Bytes(), 0xff))
	require.NoError(t, err)
	return k
}

// Two handles with different options on one queue: the second fails with
// ErrConfigMismatch, naming what differs, and writes nothing, through a
// Database and inside the caller's transaction alike.
func TestConfigMismatchWritesNothing(t *testing.T) {
	ctx := context.Background()
	vstampPlace := []fdbqueue.Option{fdbqueue.WithVersionstampOrder(),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace})}
	vstampBatches := []fdbqueue.Option{fdbqueue.WithVersionstampOrder(),
		fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeInBatches})}
	for _, c := range []struct {
		name        string
		first, then []fdbqueue.Option
		field       string
	}{
		{"encoding", nil, []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}, "encoding"},
		{"layout", nil, []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, "layout"},
		{"layout back", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, nil, "layout"},
		{"serving", vstampPlace, vstampBatches, "staging"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			sub := mustSubspace(t, "cfg", c.name)
			q1, err := fdbqueue.NewQueue(sub, c.first...)
			require.NoError(t, err)
			require.NoError(t, q1.Enqueue(ctx, db, []byte("a")))
			before := allPairs(t, db)
			q2, err := fdbqueue.NewQueue(sub, c.then...)
			require.NoError(t, err)

			requireMismatch(t, q2.Enqueue(ctx, db, []byte("b")), c.field)
			_, err = q2.Dequeue(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.DequeueBatch(ctx, db, 3)
			requireMismatch(t, err, c.field)
			_, err = q2.Peek(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.Empty(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.Len(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.Depth(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.RepairDepth(ctx, db)
			requireMismatch(t, err, c.field)
			_, err = q2.WatchForItems(nil)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			// Inside the caller's transaction, which then commits: the
			// operations wrote nothing into it.
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				requireMismatch(t, q2.Enqueue(ctx, tr, []byte("c")), c.field)
				_, err := q2.Dequeue(ctx, tr)
				requireMismatch(t, err, c.field)
				_, err = q2.Depth(ctx, tr)
				requireMismatch(t, err, c.field)
				_, err = q2.WatchForItems(tr)
				requireMismatch(t, err, c.field)
				return nil
			}))
			require.Equal(t, before, allPairs(t, db), "nothing written")
			v, err := q1.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "a", string(v))
		})
	}

	t.Run("kind", func(t *testing.T) {
		db := newDB(t)
		sub := mustSubspace(t, "cfg", "kind")
		pq, err := fdbqueue.NewPriorityQueue(sub)
		require.NoError(t, err)
		require.NoError(t, pq.Push(ctx, db, []byte("a"), 1))
		before := allPairs(t, db)
		q, err := fdbqueue.NewQueue(sub)
		require.NoError(t, err)
		requireMismatch(t, q.Enqueue(ctx, db, []byte("b")), "kind")
		_, err = q.Dequeue(ctx, db)
		requireMismatch(t, err, "kind")
		// Depth and RepairDepth check the record too (they read and
		// recounted the priority queue's items as the queue's).
		_, err = q.Depth(ctx, db)
		requireMismatch(t, err, "kind")
		_, err = q.RepairDepth(ctx, db)
		requireMismatch(t, err, "kind")
		require.Equal(t, before, allPairs(t, db))

		// And the reverse: a PriorityQueue handle on a queue's subspace.
		qsub := mustSubspace(t, "cfg", "kind-q")
		fifo, err := fdbqueue.NewQueue(qsub)
		require.NoError(t, err)
		require.NoError(t, fifo.Enqueue(ctx, db, []byte("a")))
		before = allPairs(t, db)
		onQ, err := fdbqueue.NewPriorityQueue(qsub)
		require.NoError(t, err)
		_, err = onQ.Depth(ctx, db)
		requireMismatch(t, err, "kind")
		_, err = onQ.RepairDepth(ctx, db)
		requireMismatch(t, err, "kind")
		require.Equal(t, before, allPairs(t, db))
	})

	t.Run("staged consumer", func(t *testing.T) {
		// A staged consumer with another serving mode fails before it
		// files a request.
		db := newDB(t)
		sub := mustSubspace(t, "cfg", "staged")
		q1, err := fdbqueue.NewQueue(sub, vstampPlace...)
		require.NoError(t, err)
		require.NoError(t, q1.Enqueue(ctx, db, []byte("a")))
		before := allPairs(t, db)
		q2, err := fdbqueue.NewQueue(sub, vstampBatches...)
		require.NoError(t, err)
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a failure bound, not synchronisation
		defer cancel()
		_, err = q2.DequeueWait(wctx, db)
		requireMismatch(t, err, "staging")
		require.Equal(t, before, allPairs(t, db))
	})
}

// A queue without a record is a recipe queue: items written as the
// recipes write them (tuple-packed (index, random) keys, set directly) are
// served in order; the first operation of this library stores the
// record; a versionstamp handle is refused before it writes.
func TestRecipeLayoutQueueServed(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "cfg", "recipe")
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i, v := range []string{"one", "two", "three"} {
			k, err := tuple.Tuple{int64(i), bytes.Repeat([]byte{byte(9 - i)}, 20)}.AppendPack(sub.Bytes())
			if err != nil {
				return err
			}
			tr.Set(k, []byte(v))
		}
		return nil
	}))
	before := allPairs(t, db)
	vq, err := fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder())
	require.NoError(t, err)
	requireMismatch(t, vq.Enqueue(ctx, db, []byte("x")), "layout")
	require.Equal(t, before, allPairs(t, db), "nothing written")

	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	v, err := getKey(ctx, db, configKey(t, sub))
	require.NoError(t, err)
	require.Nil(t, v, "reads store no record")

	require.NoError(t, q.Enqueue(ctx, db, []byte("four")))
	v, err = getKey(ctx, db, configKey(t, sub))
	require.NoError(t, err)
	require.NotNil(t, v, "the first write stores the record")
	require.Equal(t, []string{"one", "two", "three", "four"}, drain(t, db, q))
}

// Concurrent first writers that agree do not conflict (the record is a
// blind write); first writers that disagree conflict, and the retry fails
// with ErrConfigMismatch.
func TestConfigFirstWriters(t *testing.T) {
	ctx := context.Background()
	run := func(t *testing.T, other []fdbqueue.Option) (error, *memdb.DB, fdbqueue.Subspace) {
		db := newDB(t)
		sub := mustSubspace(t, "cfg", "first")
		a, err := fdbqueue.NewQueue(sub)
		require.NoError(t, err)
		b, err := fdbqueue.NewQueue(sub, other...)
		require.NoError(t, err)
		tr1, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		tr2, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		require.NoError(t, a.Enqueue(ctx, tr1, []byte("a")))
		require.NoError(t, b.Enqueue(ctx, tr2, []byte("b")))
		require.NoError(t, tr1.Commit())
		return tr2.Commit(), db, sub
	}
	t.Run("agree", func(t *testing.T) {
		err, db, sub := run(t, nil)
		require.NoError(t, err, "producers that agree do not conflict on the first write")
		q, _ := fdbqueue.NewQueue(sub)
		require.Len(t, drain(t, db, q), 2)
	})
	t.Run("disagree", func(t *testing.T) {
		other := []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}
		err, db, sub := run(t, other)
		require.ErrorIs(t, err, kv.ErrNotCommitted, "first writers of different records conflict")
		b, _ := fdbqueue.NewQueue(sub, other...)
		requireMismatch(t, b.Enqueue(ctx, db, []byte("b")), "encoding")
	})
}

// Reconfigure changes an empty queue's configuration and refuses a
// non-empty one.
func TestReconfigure(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "cfg", "reconf")
	raw, _ := fdbqueue.NewQueue(sub)
	tup, _ := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	require.NoError(t, raw.Enqueue(ctx, db, []byte("a")))
	require.ErrorIs(t, tup.Reconfigure(ctx, db), fdbqueue.ErrQueueNotEmpty)
	requireMismatch(t, tup.Enqueue(ctx, db, []byte("b")), "encoding")
	require.Equal(t, []string{"a"}, drain(t, db, raw))
	require.NoError(t, tup.Reconfigure(ctx, db))
	require.NoError(t, tup.Enqueue(ctx, db, []byte("b")))
	requireMismatch(t, raw.Enqueue(ctx, db, []byte("c")), "encoding")
	v, err := tup.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "b", string(v))
}

// The measured 10 s stall: a staged waiter on a queue whose producer's
// handle was made without staging options. The stored configuration says
// the queue is staged, so that producer bumps the signal and the waiter
// wakes at once. The claim timeout is an hour: without the bump the waiter
// would sleep 20 minutes before it looked again, past the test's bound.
func TestStagedWaiterWokenByUnstagedProducer(t *testing.T) {
	forModes(t, func(t *testing.T, m stagingMode) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a failure bound
		defer cancel()
		db := stgDB(t)
		sub := stgSubspace(t, "unstaged-producer")
		producer := stgQueue(t, sub, m.layout()) // no WithStaging
		// The producer writes first: the record says "not staged" until
		// the consumer's first step stores its mode.
		require.NoError(t, producer.Enqueue(ctx, db, []byte("a")))
		consumer := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})...)
		armed := make(chan struct{}, 8)
		fdbqueue.SetStagingHook(consumer, func(p string) {
			if p == "armed" {
				armed <- struct{}{}
			}
		})
		v, err := consumer.DequeueWait(ctx, db)
		require.NoError(t, err)
		require.Equal(t, "a", string(v))

		got := make(chan error, 1)
		go func() {
			v, err := consumer.DequeueWait(ctx, db)
			if err == nil && string(v) != "b" {
				err = errors.New("got " + string(v))
			}
			got <- err
		}()
		select {
		case <-armed:
		case <-ctx.Done():
			t.Fatal("the waiter never slept")
		}
		require.NoError(t, producer.Enqueue(ctx, db, []byte("b")))
		require.NoError(t, <-got, "the waiter woke on the unstaged producer's enqueue")
		requireNoWatches(t, db)
	})
}

// A handle made without staging options on a queue served by place takes
// the stored mode: a Dequeue (inside a transaction or not) takes only the
// items after those due to the requests in the line.
func TestUnstagedConsumerRespectsLine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db := stgDB(t)
	sub := stgSubspace(t, "unstaged-consumer")
	m := stagingMode{"place", true}
	staged := stgQueue(t, sub, m.opts(fdbqueue.StagingConfig{ClaimTimeout: time.Hour})...)
	plain := stgQueue(t, sub, fdbqueue.WithVersionstampOrder())
	armed := make(chan struct{}, 8)
	wctx, stop := context.WithCancel(ctx)
	fdbqueue.SetStagingHook(staged, func(p string) {
		switch p {
		case "armed":
			armed <- struct{}{}
		case "woke":
			<-wctx.Done() // hold the waiter asleep until the test ends it
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := staged.DequeueWait(wctx, db)
		done <- err
	}()
	recvWithin(t, armed, "the waiter asleep")
	require.NoError(t, plain.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y")}))
	v, err := kv.Transact(ctx, db, func(tr kv.Transaction) ([]byte, error) {
		return plain.Dequeue(ctx, tr)
	})
	require.NoError(t, err)
	require.Equal(t, "y", string(v), "x is due to the waiting request")
	_, err = plain.Dequeue(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	// A new handle whose first operation is a Dequeue learns the mode in
	// that operation (it retries once) and leaves x alone too.
	require.NoError(t, plain.Enqueue(ctx, db, []byte("z")))
	fresh := stgQueue(t, sub, fdbqueue.WithVersionstampOrder())
	v, err = fresh.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "z", string(v), "x is due to the waiting request")
	// Two consumers taking the same item after the line's conflict: a take
	// after the line adds a read conflict on each item it takes (takeEnd),
	// else both would return w.
	require.NoError(t, plain.Enqueue(ctx, db, []byte("w")))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	v, err = plain.Dequeue(ctx, tr)
	require.NoError(t, err)
	require.Equal(t, "w", string(v))
	v, err = plain.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "w", string(v))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "w was taken by another consumer meanwhile")
	stop()
	require.ErrorIs(t, recvWithin(t, done, "the waiter's return once cancelled"), context.Canceled)
	require.Equal(t, []string{"x"}, drain(t, db, plain))
}

// Recover needs the consumers' staging options: a handle without them, or
// with another serving mode, is refused before it changes anything.
func TestRecoverChecksConfig(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "recover-config")
	staged := stgQueue(t, sub, stagingMode{"place", true}.opts(fdbqueue.StagingConfig{})...)
	require.NoError(t, staged.Enqueue(ctx, db, []byte("a")))
	_, err := staged.Recover(ctx, db)
	require.NoError(t, err)
	plain := stgQueue(t, sub, fdbqueue.WithVersionstampOrder())
	_, err = plain.Recover(ctx, db)
	requireMismatch(t, err, "staging")
	other := stgQueue(t, sub, stagingMode{"batches", false}.opts(fdbqueue.StagingConfig{})[0], fdbqueue.WithVersionstampOrder())
	_, err = other.Recover(ctx, db)
	requireMismatch(t, err, "staging")
}

// Once a handle has found the record, its operations do not read it: the
// metadata version (kv.MetadataVersionKey), which FoundationDB returns with
// the read version, says it is unchanged. memdb counts no point read for it.
func TestConfigRecordReadOncePerChange(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q, err := fdbqueue.NewQueue(mustSubspace(t, "cfg", "once"), fdbqueue.WithoutIdempotency())
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, db, []byte("first")))  // writes the record
	require.NoError(t, q.Enqueue(ctx, db, []byte("second"))) // reads it
	before := db.Stats().Reads
	for range 10 {
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
	require.Zero(t, db.Stats().Reads-before, "point reads by 20 operations of a handle that has the record")

	other, _ := fdbqueue.NewQueue(mustSubspace(t, "cfg", "once"), fdbqueue.WithoutIdempotency(), fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	drain(t, db, q)
	require.NoError(t, other.Reconfigure(ctx, db))
	before = db.Stats().Reads
	requireMismatch(t, q.Enqueue(ctx, db, []byte("y")), "encoding")
	require.Equal(t, int64(1), db.Stats().Reads-before, "after a change, the record is read again")
}

// An operation that used the handle's cached record conflicts with a
// change of the record committed while it ran, and its retry finds the
// change.
func TestConfigChangeDuringOperationConflicts(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "cfg", "during")
	raw, _ := fdbqueue.NewQueue(sub)
	tup, _ := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	require.NoError(t, raw.Enqueue(ctx, db, []byte("a")))
	require.Equal(t, []string{"a"}, drain(t, db, raw)) // raw has the record
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, raw.Enqueue(ctx, tr, []byte("b")))
	require.NoError(t, tup.Reconfigure(ctx, db))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the enqueue ran under the old record")
	requireMismatch(t, raw.Enqueue(ctx, db, []byte("c")), "encoding")
}

// TestConfigChangeDuringFirstOperationConflicts: a handle's first
// operation has no cached record, so it reads the metadata version and the
// record with snapshot reads; once it has found a record it adds the
// metadata version's read conflict itself (conflictOnChange), so a change
// of the record committed meanwhile makes it conflict, as it does an
// operation of a handle that had the record cached
// (TestConfigChangeDuringOperationConflicts).
func TestConfigChangeDuringFirstOperationConflicts(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "cfg", "during-first")
	raw, _ := fdbqueue.NewQueue(sub)
	require.NoError(t, raw.Enqueue(ctx, db, []byte("a")))
	require.Equal(t, []string{"a"}, drain(t, db, raw))
	fresh, _ := fdbqueue.NewQueue(sub) // no record cached
	tup, _ := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, fresh.Enqueue(ctx, tr, []byte("b")))
	require.NoError(t, tup.Reconfigure(ctx, db))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted, "the first enqueue ran under the old record")
	requireMismatch(t, fresh.Enqueue(ctx, db, []byte("c")), "encoding")
}

// A mismatch's error names what makes a handle agree with the stored
// record, and a handle made as the hint says does.
func TestConfigMismatchHints(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	hintOf := func(err error) string {
		t.Helper()
		var me *fdbqueue.ConfigMismatchError
		require.ErrorAs(t, err, &me)
		require.Contains(t, err.Error(), "("+me.Hint()+")")
		return me.Hint()
	}
	enqueue := func(name string, opts ...fdbqueue.Option) error {
		q, err := fdbqueue.NewQueue(mustSubspace(t, "hints", name), opts...)
		require.NoError(t, err)
		return q.Enqueue(ctx, db, []byte("x"))
	}
	for _, c := range []struct {
		name        string
		stored, bad []fdbqueue.Option
		hint        string
	}{
		{"versionstamp", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, nil, "pass WithVersionstampOrder"},
		{"index", nil, []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}, "leave out WithVersionstampOrder"},
		{"tuple", []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}, nil, "pass WithValueEncoding(TupleValues)"},
		{"raw", nil, []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}, "leave out WithValueEncoding(TupleValues)"},
	} {
		require.NoError(t, enqueue(c.name, c.stored...))
		require.Equal(t, c.hint, hintOf(enqueue(c.name, c.bad...)), c.name)
		require.NoError(t, enqueue(c.name, c.stored...), "%s: as the hint says", c.name)
	}

	pq := mustPQ(t, "hints-kind")
	require.NoError(t, pq.Push(ctx, db, []byte("x"), 1))
	q, err := fdbqueue.NewQueue(mustSubspace(t, "test", "hints-kind"))
	require.NoError(t, err)
	require.Equal(t, "open it with NewPriorityQueue", hintOf(q.Enqueue(ctx, db, []byte("x"))))

	sub := mustSubspace(t, "hints", "jobs")
	jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{StatsResolution: time.Minute})
	require.NoError(t, err)
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("x")})
	other, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	require.NoError(t, err)
	_, err = other.Stats(ctx, db)
	require.Equal(t, "set JobQueueConfig.StatsResolution to 1m0s", hintOf(err))
	require.Equal(t, "", (&fdbqueue.ConfigMismatchError{Field: "format", Stored: "2", Handle: "1"}).Hint())
}
