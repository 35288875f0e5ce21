package queuetest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// errorChecks: every typed error errors.go documents, from the calls that
// document it, matched with errors.Is (and errors.As for the types), and
// nothing written or removed by the failing call.
func errorChecks() []check {
	return []check{
		{"ErrEmpty", testErrEmpty},
		{"ErrValueTooLarge", testErrValueTooLarge},
		{"ErrForeignKey/Queue", testErrForeignKeyQueue},
		{"ErrForeignKey/PriorityQueue", testErrForeignKeyPQ},
		{"ErrKeyOutsideSubspace", testErrKeyOutsideSubspace},
		{"ErrMalformedKey", testErrMalformedKey},
		{"ErrInvalidArgument", testErrInvalidArgument},
		{"ErrBatchTooLarge", testErrBatchTooLarge},
		{"ErrOperationExpired", testErrOperationExpired},
		{"ErrCodec/Encode", testErrCodecEncode},
		{"ErrCodec/Decode", testErrCodecDecode},
		{"ErrCodec/TupleValues", testErrCodecTupleValues},
		{"ErrConfigMismatch/FirstWritersLongPrefix", testFirstWritersLongPrefix},
		{"ErrConfigMismatch/Kinds", testKindMismatch},
		{"OpIDGivenTwice", testOpIDGivenTwice},
		// ErrClaimExpired: Recover/ExpiredRequest/*.
	}
}

func testErrEmpty(t *testing.T, f *fixture) {
	for _, m := range queueModes[:3] {
		q := f.queue(t, "empty", m.opts...)
		_, err := q.Dequeue(f.ctx, f.db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "%s Dequeue", m.name)
		_, err = q.DequeueBatch(f.ctx, f.db, 3)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "%s DequeueBatch", m.name)
		_, err = q.Peek(f.ctx, f.db)
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "%s Peek", m.name)
		_, err = kv.Transact(f.ctx, f.db, func(tr kv.Transaction) ([]byte, error) { return q.Dequeue(f.ctx, tr) })
		require.ErrorIs(t, err, fdbqueue.ErrEmpty, "%s Dequeue in a transaction", m.name)
	}
	pq := f.pqueue(t, "empty")
	for name, call := range map[string]func() error{
		"PopMin":      func() error { _, err := pq.PopMin(f.ctx, f.db); return err },
		"PopMax":      func() error { _, err := pq.PopMax(f.ctx, f.db); return err },
		"PeekMin":     func() error { _, err := pq.PeekMin(f.ctx, f.db); return err },
		"PeekMax":     func() error { _, err := pq.PeekMax(f.ctx, f.db); return err },
		"PopMinBatch": func() error { _, err := pq.PopMinBatch(f.ctx, f.db, 2); return err },
		"PopMaxBatch": func() error { _, err := pq.PopMaxBatch(f.ctx, f.db, 2); return err },
	} {
		require.ErrorIs(t, call(), fdbqueue.ErrEmpty, "PriorityQueue.%s", name)
	}
}

func testErrValueTooLarge(t *testing.T, f *fixture) {
	over := make([]byte, kv.MaxValueSize+1)
	q := f.queue(t, "large")
	err := q.Enqueue(f.ctx, f.db, over)
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
	require.ErrorIs(t, err, kv.ErrValueTooLarge, "it also matches kv.ErrValueTooLarge")
	tq := fdbqueue.NewTypedQueue(q, fdbqueue.BytesCodec{})
	require.ErrorIs(t, tq.Enqueue(f.ctx, f.db, over), fdbqueue.ErrValueTooLarge, "TypedQueue.Enqueue")
	pq := f.pqueue(t, "large")
	require.ErrorIs(t, pq.Push(f.ctx, f.db, over, 0), fdbqueue.ErrValueTooLarge)
	// Under TupleValues the limit is on the stored (packed) form.
	tq2 := f.queue(t, "large", fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	require.ErrorIs(t, tq2.Enqueue(f.ctx, f.db, make([]byte, kv.MaxValueSize)), fdbqueue.ErrValueTooLarge, "a value of 100,000 bytes packs to more than the limit")
	for _, n := range []func() (int, error){
		func() (int, error) { return q.Len(f.ctx, f.db) },
		func() (int, error) { return tq2.Len(f.ctx, f.db) },
		func() (int, error) { return pq.Len(f.ctx, f.db) },
	} {
		got, err := n()
		require.NoError(t, err)
		require.Zero(t, got, "a refused value writes nothing")
	}
}

// foreignKey writes a key in sub's item range that no queue writes: a
// tuple whose first element is a string.
func (f *fixture) foreignKey(t *testing.T, sub fdbqueue.Subspace) []byte {
	t.Helper()
	k, err := sub.Pack(tuple.Tuple{"not an item"})
	require.NoError(t, err)
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(k, []byte("foreign"))
		return nil
	}))
	return k
}

func testErrForeignKeyQueue(t *testing.T, f *fixture) {
	q := f.queue(t, "foreign")
	k := f.foreignKey(t, q.Subspace())
	_, err := q.Dequeue(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	var fk *fdbqueue.ForeignKeyError
	require.True(t, errors.As(err, &fk), "the error is a *ForeignKeyError: %v", err)
	require.Equal(t, k, fk.Key, "it names the offending key")
	require.NotEmpty(t, fk.Reason)
	_, err = q.DequeueBatch(f.ctx, f.db, 2)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "DequeueBatch")
	_, err = q.Peek(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "Peek")
	require.Equal(t, []byte("foreign"), f.get(t, k), "nothing is removed")
}

func testErrForeignKeyPQ(t *testing.T, f *fixture) {
	pq := f.pqueue(t, "foreign")
	k := f.foreignKey(t, pq.Subspace())
	for name, call := range map[string]func() error{
		"PopMin": func() error { _, err := pq.PopMin(f.ctx, f.db); return err },
		"PopMax": func() error { _, err := pq.PopMax(f.ctx, f.db); return err },
	} {
		err := call()
		require.ErrorIs(t, err, fdbqueue.ErrForeignKey, name)
		var fk *fdbqueue.ForeignKeyError
		require.True(t, errors.As(err, &fk), "%s: the error is a *ForeignKeyError: %v", name, err)
		require.Equal(t, k, fk.Key)
	}
	require.Equal(t, []byte("foreign"), f.get(t, k), "nothing is removed")
}

func testErrKeyOutsideSubspace(t *testing.T, f *fixture) {
	sub := f.sub(t, "unpack")
	_, err := sub.Unpack([]byte("elsewhere"))
	require.ErrorIs(t, err, fdbqueue.ErrKeyOutsideSubspace)
}

func testErrMalformedKey(t *testing.T, f *fixture) {
	sub := f.sub(t, "unpack")
	_, err := sub.Unpack(append(sub.Bytes(), 0x01, 'a')) // a byte string without its terminator
	require.ErrorIs(t, err, fdbqueue.ErrMalformedKey)
}

func testErrInvalidArgument(t *testing.T, f *fixture) {
	sub := f.sub(t, "args")
	for name, err := range map[string]error{
		"NewQueue with an empty prefix":           second(fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes(nil))),
		"NewPriorityQueue with an empty prefix":   second(fdbqueue.NewPriorityQueue(fdbqueue.SubspaceFromBytes(nil))),
		"NewPriorityQueue WithVersionstampOrder":  second(fdbqueue.NewPriorityQueue(sub, fdbqueue.WithVersionstampOrder())),
		"WithJournalRetention(0)":                 second(fdbqueue.NewQueue(sub, fdbqueue.WithJournalRetention(0))),
		"WithBatchBudget(0)":                      second(fdbqueue.NewQueue(sub, fdbqueue.WithBatchBudget(0))),
		"an unknown value encoding":               second(fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(99))),
		"ServeByPlace without versionstamp order": second(fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))),
		"ServeByPlace on a PriorityQueue":         second(fdbqueue.NewPriorityQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}))),
		"StagingConfig.BatchSize over 10,000":     second(fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{BatchSize: 10_001}))),
		"StagingConfig.ClaimTimeout negative":     second(fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{ClaimTimeout: -time.Second}))),
	} {
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
	_, err := fdbqueue.NewQueue(sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{BatchSize: 10_000}))
	require.NoError(t, err, "StagingConfig.BatchSize 10,000 is the documented maximum")

	q := f.queue(t, "args")
	pq := f.pqueue(t, "args")
	var nilDB kv.Database
	var nilTx kv.Transaction
	for name, err := range map[string]error{
		"Enqueue with a nil transactor":   q.Enqueue(f.ctx, nilDB, []byte("x")),
		"Enqueue with a nil Transaction":  q.Enqueue(f.ctx, nilTx, []byte("x")),
		"Dequeue with a nil transactor":   second(q.Dequeue(f.ctx, nilDB)),
		"Push with a nil transactor":      pq.Push(f.ctx, nilDB, []byte("x"), 1),
		"DequeueBatch(0)":                 second(q.DequeueBatch(f.ctx, f.db, 0)),
		"DequeueBatch(-1)":                second(q.DequeueBatch(f.ctx, f.db, -1)),
		"PopMinBatch(0)":                  second(pq.PopMinBatch(f.ctx, f.db, 0)),
		"PopMaxBatch(0)":                  second(pq.PopMaxBatch(f.ctx, f.db, 0)),
		"DequeueWait without WithStaging": second(q.DequeueWait(f.ctx, f.db)),
		"PopMinWait without WithStaging":  second(pq.PopMinWait(f.ctx, f.db)),
		"Peek with a nil transactor":      second(q.Peek(f.ctx, nilDB)),
	} {
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, name)
	}
}

func second[T any](_ T, err error) error { return err }

func testErrBatchTooLarge(t *testing.T, f *fixture) {
	q := f.queue(t, "batch", fdbqueue.WithBatchBudget(1000))
	err := q.EnqueueBatch(f.ctx, f.db, [][]byte{make([]byte, 600), make([]byte, 600)})
	require.ErrorIs(t, err, fdbqueue.ErrBatchTooLarge)
	n, err := q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is written")
}

// testErrOperationExpired: an operation whose ID is older than the journal
// retention, as the queue's clock sees it, fails before writing anything.
func testErrOperationExpired(t *testing.T, f *fixture) {
	later := newClock(time.Now().Add(time.Hour))
	q := f.queue(t, "expired", fdbqueue.WithClock(later.now), fdbqueue.WithJournalRetention(time.Minute))
	id := fdbqueue.NewOpID() // stamped now: an hour old for the queue
	err := q.Enqueue(f.ctx, f.db, []byte("late"), fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
	n, err := q.Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "an expired operation writes nothing")
	_, err = q.Dequeue(f.ctx, f.db, fdbqueue.WithOpID(id))
	require.ErrorIs(t, err, fdbqueue.ErrOperationExpired, "Dequeue too")
}

// failingCodec fails to encode "bad" and to decode anything but "ok".
type failingCodec struct{}

var errBadCodec = errors.New("queuetest: the codec refuses this value")

func (failingCodec) Encode(v string) ([]byte, error) {
	if v == "bad" {
		return nil, errBadCodec
	}
	return []byte(v), nil
}

func (failingCodec) Decode(b []byte) (string, error) {
	if string(b) != "ok" {
		return "", errBadCodec
	}
	return string(b), nil
}

func testErrCodecEncode(t *testing.T, f *fixture) {
	tq := fdbqueue.NewTypedQueue(f.queue(t, "codec"), fdbqueue.Codec[string](failingCodec{}))
	err := tq.Enqueue(f.ctx, f.db, "bad")
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.ErrorIs(t, err, errBadCodec, "the codec's error is wrapped")
	var ce *fdbqueue.CodecError
	require.True(t, errors.As(err, &ce))
	require.Nil(t, ce.Raw, "no raw bytes when encoding failed")
	require.ErrorIs(t, tq.EnqueueBatch(f.ctx, f.db, []string{"ok", "bad"}), fdbqueue.ErrCodec)
	n, err := tq.Queue().Len(f.ctx, f.db)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is written")
}

// testErrCodecDecode: a value the codec cannot decode is dequeued (the
// dequeue committed) and handed back raw in the *CodecError.
func testErrCodecDecode(t *testing.T, f *fixture) {
	q := f.queue(t, "codec")
	tq := fdbqueue.NewTypedQueue(q, fdbqueue.Codec[string](failingCodec{}))
	f.enqueueAll(t, q, strs("garbage", "ok"))
	_, err := tq.Dequeue(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	var ce *fdbqueue.CodecError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, []byte("garbage"), ce.Raw, "the raw bytes of the item are not lost")
	v, err := tq.Dequeue(f.ctx, f.db)
	require.NoError(t, err)
	require.Equal(t, "ok", v, "the undecodable item was dequeued")
}

// testErrCodecTupleValues: under TupleValues a stored value that is not a
// packed tuple fails with ErrCodec, and nothing is removed.
func testErrCodecTupleValues(t *testing.T, f *fixture) {
	sub := f.sub(t, "tuplecodec")
	raw, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	tup, err := fdbqueue.NewQueue(sub, fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
	require.NoError(t, err)
	// Written as a recipe client would (no stored configuration: a handle
	// of this library with the other encoding would be refused with
	// ErrConfigMismatch), with a value that is not a packed tuple.
	key, err := tuple.Tuple{int64(1), []byte("random")}.AppendPack(sub.Bytes())
	require.NoError(t, err)
	require.NoError(t, f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		tr.Set(key, []byte{0x01, 'x'})
		return nil
	}))
	_, err = tup.Dequeue(f.ctx, f.db)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	v, err := raw.Dequeue(f.ctx, f.db)
	require.NoError(t, err, "the item is still there")
	requireValue(t, []byte{0x01, 'x'}, v)
}

// testFirstWritersLongPrefix: first writers of different records conflict
// on every prefix a queue works with, up to the longest, and first writers
// of one record do not. Each declares a conflict on a claim that names its
// record under the queue's prefix; FoundationDB cuts a conflict range's
// keys longer than the key limit to 10,001 bytes, which empties
// [claim, claim+\x00) and merges claims that differ only past that byte
// (ReadYourWritesTransaction::addWriteConflictRange and
// ::addReadConflictRange, fdbclient/ReadYourWrites.actor.cpp), so a claim
// that long would let writers of raw and tuple values both commit.
func testFirstWritersLongPrefix(t *testing.T, f *fixture) {
	type writer func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error
	encoding := func(tupleValues bool) []fdbqueue.Option {
		if tupleValues {
			return []fdbqueue.Option{fdbqueue.WithValueEncoding(fdbqueue.TupleValues)}
		}
		return nil
	}
	enqueue := func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error {
		q, err := fdbqueue.NewQueue(sub, encoding(tupleValues)...)
		if err != nil {
			return err
		}
		return q.Enqueue(f.ctx, tr, []byte("v"))
	}
	push := func(tr kv.Transactor, sub fdbqueue.Subspace, tupleValues bool) error {
		pq, err := fdbqueue.NewPriorityQueue(sub, append(encoding(tupleValues), fdbqueue.WithoutIdempotency())...)
		if err != nil {
			return err
		}
		return pq.Push(f.ctx, tr, []byte("v"), 1)
	}
	// both runs the two writers in concurrent transactions and returns the
	// second's commit error.
	both := func(write writer, sub fdbqueue.Subspace, tupleValues [2]bool) error {
		tr1, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		tr2, err := f.db.CreateTransaction(f.ctx)
		require.NoError(t, err)
		require.NoError(t, write(tr1, sub, tupleValues[0]))
		require.NoError(t, write(tr2, sub, tupleValues[1]))
		require.NoError(t, tr1.Commit())
		return tr2.Commit()
	}
	for name, write := range map[string]writer{"queue": enqueue, "priority queue": push} {
		tried := 0
		for p := kv.MaxKeySize - 100; p <= kv.MaxKeySize; p++ {
			long := func() fdbqueue.Subspace {
				base := f.sub(t, "long").Bytes()
				return fdbqueue.SubspaceFromBytes(append(base, bytes.Repeat([]byte{'p'}, p-len(base))...))
			}
			if err := write(f.db, long(), false); errors.Is(err, kv.ErrKeyTooLarge) {
				continue // no queue on this prefix: its keys do not fit
			} else {
				require.NoError(t, err, "%s, a %d-byte prefix", name, p)
			}
			tried++
			require.ErrorIs(t, both(write, long(), [2]bool{false, true}), kv.ErrNotCommitted,
				"%s: first writers of different records conflict, with a %d-byte prefix", name, p)
			require.NoError(t, both(write, long(), [2]bool{true, true}),
				"%s: first writers of one record do not conflict, with a %d-byte prefix", name, p)
		}
		require.Greater(t, tried, 20, "%s: prefixes a queue works with", name)
	}
}

// testKindMismatch: a queue stores its kind (FIFO, priority, job queue),
// and a handle of another kind on its subspace fails with
// ErrConfigMismatch and writes nothing: the queue's items stay as they
// were.
func testKindMismatch(t *testing.T, f *fixture) {
	sub := f.sub(t, "kinds")
	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	f.enqueueAll(t, q, strs("a", "b"))
	pq, err := fdbqueue.NewPriorityQueue(sub)
	require.NoError(t, err)
	require.ErrorIs(t, pq.Push(f.ctx, f.db, []byte("p"), 1), fdbqueue.ErrConfigMismatch)
	jq, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
	require.NoError(t, err)
	_, err = jq.Add(f.ctx, f.db, fdbqueue.Job{Value: []byte("j")})
	require.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
	_, err = jq.Lease(f.ctx, f.db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrConfigMismatch)
	require.Equal(t, strs("a", "b"), f.drain(t, q), "the queue is untouched")
}

// testOpIDGivenTwice: an OpID names one operation call. A second call
// under it in the same transaction fails with ErrInvalidArgument, and the
// transaction does not commit; so does, later, a call of another kind
// under it. Nothing is enqueued or dequeued twice, or lost.
func testOpIDGivenTwice(t *testing.T, f *fixture) {
	q := f.queue(t, "opid-twice")
	f.enqueueAll(t, q, strs("x"))
	id := fdbqueue.WithOpID(fdbqueue.NewOpID())
	err := f.db.Transact(f.ctx, func(tr kv.Transaction) error {
		if err := q.Enqueue(f.ctx, tr, []byte("a"), id); err != nil {
			return err
		}
		return q.Enqueue(f.ctx, tr, []byte("b"), id)
	})
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.NoError(t, q.Enqueue(f.ctx, f.db, []byte("a"), id))
	_, err = q.Dequeue(f.ctx, f.db, id)
	require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
	require.Equal(t, strs("x", "a"), f.drain(t, q))
}
