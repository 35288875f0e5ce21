package fdbqueue_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func TestQueueFIFO(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "fifo")
	var want []string
	for i := range 100 {
		v := fmt.Sprintf("item-%03d", i)
		want = append(want, v)
		require.NoError(t, q.Enqueue(ctx, db, []byte(v)))
	}
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 100, n)
	head, err := q.Peek(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "item-000", string(head))
	require.Equal(t, want, drain(t, db, q), "items must come out in the order they went in")
	empty, err := q.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
	_, err = q.Peek(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
}

// The key and value layout is the recipes': (index, 20 random bytes) in the
// subspace with the raw value (Python) or a packed 1-tuple (Java), and a
// queue filled by a recipe client is read by ours and vice versa.
func TestQueueRecipeLayout(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		enc       fdbqueue.ValueEncoding
		wantValue string // hex of the stored value of "hi"
	}{
		{"python raw values", fdbqueue.RawValues, "6869"},
		{"java tuple values", fdbqueue.TupleValues, "01686900"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			sub := mustSubspace(t, "Q")
			q, err := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(tc.enc))
			require.NoError(t, err)

			// A recipe client enqueued one item at index 5.
			foreignRand := bytes.Repeat([]byte{0xab}, 20)
			recipeKey, err := sub.Pack(tuple.Tuple{int64(5), foreignRand})
			require.NoError(t, err)
			recipeVal, _ := hex.DecodeString(tc.wantValue) // "hi" as that client stores it
			require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
				tr.Set(recipeKey, recipeVal)
				return nil
			}))

			require.NoError(t, q.Enqueue(ctx, db, []byte("hi")))
			var ours []kv.KeyValue
			r, _ := sub.Range()
			ours, err = kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]kv.KeyValue, error) {
				return tr.GetRange(r, kv.RangeOptions{}).GetSlice()
			})
			require.NoError(t, err)
			require.Len(t, ours, 2, "only item keys are in the subspace's range; the journal lies outside it")
			tup, err := sub.Unpack(ours[1].Key)
			require.NoError(t, err)
			require.Len(t, tup, 2)
			require.Equal(t, int64(6), tup[0], "the next index after the recipe's 5")
			require.Len(t, tup[1], 20, "20 random bytes")
			require.Equal(t, tc.wantValue, hex.EncodeToString(ours[1].Value))

			got, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "hi", string(got), "the recipe client's item comes first")
			got, err = q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, "hi", string(got))
		})
	}
}

func TestQueueComposition(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "compose")
	record := []byte("app/record/1")

	// Together: the item and the application's record commit at once.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		if err := q.Enqueue(ctx, tr, []byte("job-1")); err != nil {
			return err
		}
		tr.Set(record, []byte("queued"))
		return nil
	}))
	v, err := getKey(ctx, db, record)
	require.NoError(t, err)
	require.Equal(t, "queued", string(v))
	n, err := q.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	// Or not at all: the caller's function fails after both writes.
	boom := errors.New("application failure")
	err = db.Transact(ctx, func(tr kv.Transaction) error {
		if err := q.Enqueue(ctx, tr, []byte("job-2")); err != nil {
			return err
		}
		tr.Set([]byte("app/record/2"), []byte("queued"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	v, err = getKey(ctx, db, []byte("app/record/2"))
	require.NoError(t, err)
	require.Nil(t, v, "the record of the failed transaction must not exist")
	require.Equal(t, []string{"job-1"}, drain(t, db, q), "the failed transaction's item must not exist")

	// A dequeue and a write in one transaction that conflicts and retries
	// still move exactly one item.
	require.NoError(t, q.Enqueue(ctx, db, []byte("job-3")))
	var got []byte
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		v, err := q.Dequeue(ctx, tr)
		if err != nil {
			return err
		}
		got = v
		tr.Set([]byte("app/done"), v)
		return nil
	}))
	require.Equal(t, "job-3", string(got))
}

// Sixteen producers with a real cluster's latencies never conflict: the tail
// is found with a snapshot read.
func TestQueueConcurrentProducersDoNotConflict(t *testing.T) {
	ctx := context.Background()
	db := newDB(t, memdb.WithLatency(memdb.RealCluster), memdb.WithSeed(1))
	q := mustQueue(t, "producers")
	const producers, each = 16, 25
	var wg sync.WaitGroup
	errs := make(chan error, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if err := q.Enqueue(ctx, db, []byte(fmt.Sprintf("%02d-%03d", p, i))); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	waitWithin(t, &wg, workTimeout, "the producers")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := db.Stats()
	require.Zero(t, st.Conflicts, "concurrent enqueues must not conflict (stats: %+v)", st)
	require.GreaterOrEqual(t, st.Commits, int64(producers*each))

	items := drain(t, db, q)
	require.Len(t, items, producers*each)
	last := map[string]string{}
	for _, it := range items {
		p := it[:2]
		require.Less(t, last[p], it, "each producer's items keep their order")
		last[p] = it
	}
}

// runExactlyOnce runs producers and consumers over q while db injects
// faults, and returns how often each item was dequeued.
func runExactlyOnce(t *testing.T, db *memdb.DB, q *fdbqueue.Queue, producers, consumers, items int) map[string]int {
	t.Helper()
	ctx := context.Background()
	produced := make(chan struct{}, items)
	producersDone := make(chan struct{})
	var pwg, cwg sync.WaitGroup
	errs := make(chan error, producers+consumers)
	for p := range producers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			for i := p; i < items; i += producers {
				if err := q.Enqueue(ctx, db, []byte(fmt.Sprintf("item-%05d", i))); err != nil {
					errs <- fmt.Errorf("enqueue %d: %w", i, err)
					return
				}
				produced <- struct{}{}
			}
		}()
	}
	go func() { pwg.Wait(); close(producersDone) }()

	var mu sync.Mutex
	seen := map[string]int{}
	for range consumers {
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for {
				v, err := q.Dequeue(ctx, db)
				switch {
				case err == nil:
					mu.Lock()
					seen[string(v)]++
					mu.Unlock()
				case errors.Is(err, fdbqueue.ErrEmpty):
					select {
					case <-produced: // something was enqueued since: look again
					case <-producersDone:
						if _, err := q.Peek(ctx, db); errors.Is(err, fdbqueue.ErrEmpty) {
							return
						}
					}
				default:
					errs <- fmt.Errorf("dequeue: %w", err)
					return
				}
			}
		}()
	}
	waitWithin(t, &cwg, workTimeout, "the consumers")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	return seen
}

// With 10% of commits answered commit_unknown_result (half of them applied),
// every item is dequeued exactly once.
func TestQueueExactlyOnceUnderCommitUnknownResult(t *testing.T) {
	db := newDB(t, memdb.WithSeed(7), memdb.WithFaults(withReadFaults(memdb.Faults{UnknownApplied: 0.05, UnknownNotApplied: 0.05})))
	q := mustQueue(t, "exactly-once")
	const items = 10_000
	seen := runExactlyOnce(t, db, q, 8, 8, items)

	st := db.Stats()
	require.Positive(t, st.InjectedUnknownApplied, "the test must inject applied unknown results")
	require.Positive(t, st.InjectedUnknownNotApplied, "the test must inject unapplied unknown results")
	var lost, dup []string
	for i := range items {
		k := fmt.Sprintf("item-%05d", i)
		switch c := seen[k]; {
		case c == 0:
			lost = append(lost, k)
		case c > 1:
			dup = append(dup, k)
		}
	}
	require.Empty(t, lost, "items never dequeued")
	require.Empty(t, dup, "items dequeued more than once")
	require.Len(t, seen, items, "no item that was never enqueued")
	t.Logf("stats: %+v", st)
}

// The recipe without the journal loses or duplicates items under the same
// faults: the mechanism, not luck, makes the test above pass.
func TestQueueWithoutIdempotencyIsNotExactlyOnce(t *testing.T) {
	db := newDB(t, memdb.WithSeed(7), memdb.WithFaults(withReadFaults(memdb.Faults{UnknownApplied: 0.05, UnknownNotApplied: 0.05})))
	q := mustQueue(t, "recipe", fdbqueue.WithoutIdempotency())
	const items = 2_000
	seen := runExactlyOnce(t, db, q, 4, 4, items)
	anomalies := 0
	for i := range items {
		if c := seen[fmt.Sprintf("item-%05d", i)]; c != 1 {
			anomalies++
		}
	}
	require.Positive(t, anomalies, "the plain recipe should lose or duplicate items under commit_unknown_result")
}

// A caller that runs Enqueue inside its own transaction and retries it after
// commit_unknown_result passes the same OpID and gets one item.
func TestQueueOpIDAcrossCallerRetries(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "opid")
	id := fdbqueue.NewOpID()

	attempt := func() error {
		tr, err := db.CreateTransaction(ctx)
		require.NoError(t, err)
		if err := q.Enqueue(ctx, tr, []byte("once"), fdbqueue.WithOpID(id)); err != nil {
			return err
		}
		return tr.Commit()
	}
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	require.ErrorIs(t, attempt(), kv.ErrCommitUnknownResult)
	require.NoError(t, attempt())
	require.Equal(t, []string{"once"}, drain(t, db, q))

	// A dequeue whose commit applied but was reported unknown is recovered
	// with the same OpID: the item is neither lost nor dequeued twice.
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	did := fdbqueue.NewOpID()
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	v, err := q.Dequeue(ctx, tr, fdbqueue.WithOpID(did))
	require.NoError(t, err)
	require.Equal(t, "a", string(v))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	require.ErrorIs(t, tr.Commit(), kv.ErrCommitUnknownResult)
	v, err = q.Dequeue(ctx, db, fdbqueue.WithOpID(did))
	require.NoError(t, err)
	require.Equal(t, "a", string(v), "the retry returns the item the applied attempt removed")
	require.Equal(t, []string{"b"}, drain(t, db, q))
}

func TestQueueBatches(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "batch")
	var vals [][]byte
	for i := range 300 {
		vals = append(vals, []byte(fmt.Sprintf("b-%03d", i)))
	}
	require.NoError(t, q.EnqueueBatch(ctx, db, vals))
	got, err := q.DequeueBatch(ctx, db, 100)
	require.NoError(t, err)
	require.Len(t, got, 100)
	for i, v := range got {
		require.Equal(t, fmt.Sprintf("b-%03d", i), string(v))
	}
	rest, err := q.DequeueBatch(ctx, db, 1000)
	require.NoError(t, err)
	require.Len(t, rest, 200, "a batch larger than the queue takes what there is")
	require.Equal(t, "b-100", string(rest[0]))
	_, err = q.DequeueBatch(ctx, db, 10)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	require.NoError(t, q.EnqueueBatch(ctx, db, nil), "an empty batch is a no-op")

	// The budget bounds what one transaction writes.
	small := mustQueue(t, "small-budget", fdbqueue.WithBatchBudget(10_000))
	big := make([][]byte, 20)
	for i := range big {
		big[i] = bytes.Repeat([]byte{byte('a' + i)}, 1000)
	}
	err = small.EnqueueBatch(ctx, db, big)
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	n, err := small.Len(ctx, db)
	require.NoError(t, err)
	require.Zero(t, n, "a rejected batch writes nothing")
	for _, v := range big {
		require.NoError(t, small.Enqueue(ctx, db, v))
	}
	part, err := small.DequeueBatch(ctx, db, 20)
	require.NoError(t, err)
	require.Less(t, len(part), 20, "a dequeue batch stops at the budget")
	require.GreaterOrEqual(t, len(part), 1)
	for i, v := range part {
		require.Equal(t, big[i], v)
	}
}

func TestQueueVersionstampOrder(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "vs", fdbqueue.WithVersionstampOrder())
	for i := range 20 {
		require.NoError(t, q.Enqueue(ctx, db, []byte(fmt.Sprintf("v-%02d", i))))
	}
	// Two enqueues in one transaction get distinct keys.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		if err := q.Enqueue(ctx, tr, []byte("v-20")); err != nil {
			return err
		}
		return q.Enqueue(ctx, tr, []byte("v-21"))
	}))
	keys := rawKeys(t, db, q.Subspace().Bytes())
	tup, err := q.Subspace().Unpack(keys[0])
	require.NoError(t, err)
	require.IsType(t, tuple.Versionstamp{}, tup[0], "items are keyed by versionstamp")
	got := drain(t, db, q)
	require.Len(t, got, 22)
	for i := range 20 {
		require.Equal(t, fmt.Sprintf("v-%02d", i), got[i], "commit order")
	}
	require.ElementsMatch(t, []string{"v-20", "v-21"}, got[20:])
}

func TestQueueErrors(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)

	t.Run("empty", func(t *testing.T) {
		q := mustQueue(t, "e-empty")
		_, err := q.Dequeue(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		_, err = q.DequeueBatch(ctx, db, 3)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty)
	})
	t.Run("value too large", func(t *testing.T) {
		q := mustQueue(t, "e-large")
		require.NoError(t, q.Enqueue(ctx, db, make([]byte, kv.MaxValueSize)), "exactly the limit fits")
		err := q.Enqueue(ctx, db, make([]byte, kv.MaxValueSize+1))
		require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
		require.ErrorIs(t, err, kv.ErrValueTooLarge)
		jq := mustQueue(t, "e-large-tuple", fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
		err = jq.Enqueue(ctx, db, make([]byte, kv.MaxValueSize-1))
		require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge, "the tuple wrapping counts toward the limit")
		n, err := jq.Len(ctx, db)
		require.NoError(t, err)
		require.Zero(t, n)
	})
	t.Run("foreign key", func(t *testing.T) {
		q := mustQueue(t, "e-foreign")
		foreign, err := q.Subspace().Pack(tuple.Tuple{"not", "ours"})
		require.NoError(t, err)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(foreign, []byte("x")); return nil }))
		_, err = q.Dequeue(ctx, db)
		var fk *fdbqueue.ForeignKeyError
		require.ErrorAs(t, err, &fk)
		require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
		require.Equal(t, foreign, fk.Key)
		_, err = q.Peek(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
		n, err := q.Len(ctx, db)
		require.NoError(t, err)
		require.Equal(t, 1, n, "nothing removed")

		tail := mustQueue(t, "e-foreign-tail")
		high, err := tail.Subspace().Pack(tuple.Tuple{true})
		require.NoError(t, err)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(high, nil); return nil }))
		require.ErrorIs(t, tail.Enqueue(ctx, db, []byte("x")), fdbqueue.ErrForeignKey)
	})
	t.Run("invalid arguments", func(t *testing.T) {
		q := mustQueue(t, "e-args")
		require.ErrorIs(t, q.Enqueue(ctx, nil, []byte("x")), fdbqueue.ErrInvalidArgument)
		var nilDB *memdb.DB
		require.ErrorIs(t, q.Enqueue(ctx, nilDB, []byte("x")), fdbqueue.ErrInvalidArgument)
		_, err := q.Dequeue(ctx, nil)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = q.Peek(ctx, nil)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = q.DequeueBatch(ctx, db, 0)
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes(nil))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = fdbqueue.NewQueue(mustSubspace(t, "x"), fdbqueue.WithJournalRetention(0))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = fdbqueue.NewQueue(mustSubspace(t, "x"), fdbqueue.WithBatchBudget(0))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		_, err = fdbqueue.NewPriorityQueue(mustSubspace(t, "x"), fdbqueue.WithVersionstampOrder())
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	})
	t.Run("codec", func(t *testing.T) {
		jq := mustQueue(t, "e-codec", fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
		key, err := jq.Subspace().Pack(tuple.Tuple{int64(1), make([]byte, 20)})
		require.NoError(t, err)
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { tr.Set(key, []byte{0xff}); return nil }))
		_, err = jq.Dequeue(ctx, db)
		require.ErrorIs(t, err, fdbqueue.ErrCodec)
		n, err := jq.Len(ctx, db)
		require.NoError(t, err)
		require.Equal(t, 1, n, "an undecodable stored value is not removed")

		type job struct{ ID int }
		tq := fdbqueue.NewTypedQueue(mustQueue(t, "e-json"), fdbqueue.JSONCodec[job]{})
		require.NoError(t, tq.Queue().Enqueue(ctx, db, []byte("{not json")))
		_, err = tq.Dequeue(ctx, db)
		var ce *fdbqueue.CodecError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, "{not json", string(ce.Raw), "the raw item is handed back, not lost")
	})
	t.Run("operation expired", func(t *testing.T) {
		clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
		q := mustQueue(t, "e-expired", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Minute))
		old := fdbqueue.OpIDAt(clock.Now())
		clock.Advance(2 * time.Minute)
		err := q.Enqueue(ctx, db, []byte("late"), fdbqueue.WithOpID(old))
		require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
		n, err := q.Len(ctx, db)
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// Journal records do not accumulate: completed operations' records are
// cleared by later ones, and expired ones by time.
func TestQueueJournalStaysBounded(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	q := mustQueue(t, "journal", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Minute))
	meta := append(q.Subspace().Bytes(), 0xff)
	for i := range 500 {
		require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
		_, err := q.Dequeue(ctx, db)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, len(rawKeys(t, db, meta)), 80, "records of completed operations are cleared")

	// Records of operations inside callers' transactions (with the
	// caller's IDs) expire, after twice the retention (see journal.expire);
	// one expiry in 64 operations sweeps 16 of the 256 shards.
	other := mustQueue(t, "journal", fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Minute))
	for i := range 100 {
		id := fdbqueue.OpIDAt(clock.Now())
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			return other.Enqueue(ctx, tr, []byte{byte(i)}, fdbqueue.WithOpID(id))
		}))
	}
	require.GreaterOrEqual(t, len(rawKeys(t, db, meta)), 100)
	clock.Advance(2*time.Minute + time.Second)
	for i := range 64 * 256 / 16 {
		require.NoError(t, other.Enqueue(ctx, db, []byte{byte(i)}))
	}
	require.Less(t, len(rawKeys(t, db, meta)), 100, "expired records are cleared")
}

func TestQueueClearKeepsJournal(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "clear")
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("1"), []byte("2")}))
	require.NoError(t, q.Clear(ctx, db))
	empty, err := q.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty)
	require.NoError(t, q.Enqueue(ctx, db, []byte("3")))
	require.Equal(t, []string{"3"}, drain(t, db, q))
}

func TestTypedQueue(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	type job struct {
		ID   int
		Name string
	}
	tq := fdbqueue.NewTypedQueue(mustQueue(t, "typed"), fdbqueue.JSONCodec[job]{})
	require.NoError(t, tq.EnqueueBatch(ctx, db, []job{{1, "a"}, {2, "b"}, {3, "c"}}))
	j, err := tq.Peek(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, job{1, "a"}, j)
	j, err = tq.Dequeue(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, job{1, "a"}, j)
	rest, err := tq.DequeueBatch(ctx, db, 5)
	require.NoError(t, err)
	assert.Equal(t, []job{{2, "b"}, {3, "c"}}, rest)

	sq := fdbqueue.NewTypedQueue(mustQueue(t, "typed-s"), fdbqueue.StringCodec{})
	require.NoError(t, sq.Enqueue(ctx, db, "hello"))
	s, err := sq.Dequeue(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, "hello", s)

	tt := fdbqueue.NewTypedQueue(mustQueue(t, "typed-t"), fdbqueue.TupleCodec{})
	require.NoError(t, tt.Enqueue(ctx, db, tuple.Tuple{"user", int64(42)}))
	tv, err := tt.Dequeue(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, tuple.Tuple{"user", int64(42)}, tv)
}
