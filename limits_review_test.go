package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// setRaw writes one pair in its own transaction.
func setRaw(t *testing.T, db kv.Database, key, value []byte) {
	t.Helper()
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(key, value)
		return nil
	}))
}

// A recipe client (or any writer) left the tail at an index whose next
// ones do not fit an int64: the next index must not wrap to MinInt64,
// which would put the new items at the head, before the older ones.
// Enqueue fails instead, writing nothing, with a typed error.
func TestQueueIndexNearMaxInt64(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		last  int64
		batch int
	}{
		{"Enqueue after MaxInt64", math.MaxInt64, 1},
		{"EnqueueBatch of 3 after MaxInt64-1", math.MaxInt64 - 1, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			sub := mustSubspace(t, "maxindex")
			q, err := fdbqueue.NewQueue(sub)
			require.NoError(t, err)
			key, err := sub.Pack(tuple.Tuple{tc.last, bytes.Repeat([]byte{0xab}, 20)})
			require.NoError(t, err)
			setRaw(t, db, key, []byte("old"))

			vals := make([][]byte, tc.batch)
			for i := range vals {
				vals[i] = []byte("new")
			}
			err = q.EnqueueBatch(ctx, db, vals)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey, "no index after the tail's fits an int64")
			var fk *fdbqueue.ForeignKeyError
			require.ErrorAs(t, err, &fk)
			require.Equal(t, key, fk.Key)
			require.Equal(t, []string{"old"}, drain(t, db, q), "nothing written, nothing ahead of the old item")

			// The queue drained, indices start again.
			require.NoError(t, q.EnqueueBatch(ctx, db, vals))
		})
	}
}

// Within MaxInt64 the last indices are used, in order.
func TestQueueIndexReachesMaxInt64(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "maxindex-ok")
	q, err := fdbqueue.NewQueue(sub)
	require.NoError(t, err)
	key, err := sub.Pack(tuple.Tuple{int64(math.MaxInt64 - 2), bytes.Repeat([]byte{0xab}, 20)})
	require.NoError(t, err)
	setRaw(t, db, key, []byte("a"))
	require.NoError(t, q.Enqueue(ctx, db, []byte("b")))
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("c")}))
	require.Equal(t, []string{"a", "b", "c"}, drain(t, db, q))
}

// The same for a priority's count: after a count of MaxInt64 the next
// must not wrap to MinInt64, ahead of the priority's older items.
func TestPriorityCountNearMaxInt64(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	sub := mustSubspace(t, "maxcount")
	pq, err := fdbqueue.NewPriorityQueue(sub)
	require.NoError(t, err)
	key, err := sub.Pack(tuple.Tuple{int64(7), int64(math.MaxInt64), bytes.Repeat([]byte{0xab}, 20)})
	require.NoError(t, err)
	setRaw(t, db, key, []byte("old"))

	err = pq.Push(ctx, db, []byte("new"), 7)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.Equal(t, key, fk.Key)
	require.NoError(t, pq.Push(ctx, db, []byte("other"), 8), "other priorities unaffected")
	it, err := pq.PopMin(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.Item{Value: []byte("old"), Priority: 7}, it)
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

// codecRaws returns the raw bytes of every *CodecError in err's tree.
func codecRaws(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if ce, ok := e.(*fdbqueue.CodecError); ok {
			out = append(out, string(ce.Raw))
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// A typed batch take that meets several items its codec fails on has
// dequeued them all: the bytes of each must come back in the error, not
// only the first's, or the others are lost.
func TestTypedBatchKeepsEveryUndecodableItem(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	raw := mustQueue(t, "typed-bad-batch")
	q := fdbqueue.NewTypedQueue(raw, intCodec{})
	require.NoError(t, raw.EnqueueBatch(ctx, db, [][]byte{[]byte("1"), []byte("bad-a"), []byte("2"), []byte("bad-b")}))
	got, err := q.DequeueBatch(ctx, db, 10)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, "bad-a", string(ce.Raw), "the first failure is the one errors.As finds")
	require.Equal(t, []int{1, 2}, got)
	require.Equal(t, []string{"bad-a", "bad-b"}, codecRaws(err), "every dequeued item's bytes are handed back")
	empty, err := q.Empty(ctx, db)
	require.NoError(t, err)
	require.True(t, empty, "all four were dequeued")

	pqRaw := mustPQ(t, "typed-bad-pop")
	pq := fdbqueue.NewTypedPriorityQueue(pqRaw, intCodec{})
	for i, v := range []string{"bad-x", "3", "bad-y"} {
		require.NoError(t, pqRaw.Push(ctx, db, []byte(v), int64(i)))
	}
	items, err := pq.PopMinBatch(ctx, db, 10)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.Equal(t, []fdbqueue.TypedItem[int]{{Value: 3, Priority: 1}}, items)
	require.Equal(t, []string{"bad-x", "bad-y"}, codecRaws(err))
}

// DequeueBatch(math.MaxInt) asks for as many items as the budget allows.
// On a queue served by place its read starts after the items due to the
// waiting requests: the read's limit, those items plus max, must not
// overflow into a negative limit (range_limits_invalid, not retryable).
func TestDequeueBatchMaxIntAfterTheLine(t *testing.T) {
	ctx := context.Background()
	db := stgDB(t)
	sub := stgSubspace(t, "maxint-batch")
	q := stgQueue(t, sub, fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace}), fdbqueue.WithVersionstampOrder())
	plain := stgQueue(t, sub, fdbqueue.WithVersionstampOrder())

	require.NoError(t, plain.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
	vals, err := q.DequeueBatch(ctx, db, math.MaxInt)
	require.NoError(t, err, "no line: the limit is max")
	require.Equal(t, []string{"a", "b"}, toStrings(vals))

	armed := make(chan struct{}, 8)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fdbqueue.SetStagingHook(q, func(p string) {
		switch p {
		case "armed":
			armed <- struct{}{}
		case "woke":
			<-wctx.Done() // keep the waiter asleep: its item stays due to it
		}
	})
	done := make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(wctx, db)
		done <- err
	}()
	recvWithin(t, armed, "one request in the line, its waiter asleep")
	require.NoError(t, plain.EnqueueBatch(ctx, db, [][]byte{[]byte("x"), []byte("y"), []byte("z")}))
	vals, err = q.DequeueBatch(ctx, db, math.MaxInt)
	require.NoError(t, err, "one item due to the line, then max")
	require.Equal(t, []string{"y", "z"}, toStrings(vals))
	cancel()
	require.ErrorIs(t, recvWithin(t, done, "the waiter's return once cancelled"), context.Canceled)
}

// TestLimitKeySizeDoesNotDependOnTheOpID: whether a queue on a long
// subspace prefix works must not depend on the random bytes of an
// operation's ID. A journal record key holds the ID packed as a tuple's
// byte string, each 0x00 byte escaped as 0x00 0xff (and a shard of 0
// packs a byte shorter), so near the 10,000-byte key limit
// (kv.MaxKeySize; FDB's key_too_large, 2102) the record key of an ID
// without zero bytes fitted and that of an ID with some did not: an
// Enqueue on such a prefix failed with ErrKeyTooLarge under one ID and
// succeeded under the next random one. A queue or job queue now works
// under every ID or is refused when it is made.
func TestLimitKeySizeDoesNotDependOnTheOpID(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	ids := func() (noZeros, zeros fdbqueue.OpID) {
		noZeros, zeros = fdbqueue.NewOpID(), fdbqueue.NewOpID()
		for i := 8; i < 16; i++ {
			noZeros[i], zeros[i] = 1, 0 // the random half; zeros' shard (byte 8) is 0
		}
		return noZeros, zeros
	}
	worked := 0
	for p := kv.MaxKeySize - 80; p <= kv.MaxKeySize; p++ {
		sub := func(tag byte) fdbqueue.Subspace {
			return fdbqueue.SubspaceFromBytes(append([]byte{tag}, bytes.Repeat([]byte{'p'}, p-1)...))
		}
		// each runs an operation under id on a queue of its own, and
		// returns whether it worked (a key too large is the one failure
		// expected).
		each := map[string]func(tag byte, id fdbqueue.OpID) bool{
			"queue": func(tag byte, id fdbqueue.OpID) bool {
				q, err := fdbqueue.NewQueue(sub(tag))
				if err == nil {
					err = q.Enqueue(ctx, raw, []byte("v"), fdbqueue.WithOpID(id))
				}
				require.True(t, err == nil || errors.Is(err, kv.ErrKeyTooLarge), "%d-byte prefix: %v", p, err)
				return err == nil
			},
			"job queue": func(tag byte, id fdbqueue.OpID) bool {
				q, err := fdbqueue.NewJobQueue(sub(tag), fdbqueue.JobQueueConfig{})
				if err == nil {
					_, err = q.Add(ctx, raw, fdbqueue.Job{Value: []byte("v")}, fdbqueue.WithOpID(id))
				}
				require.True(t, err == nil || errors.Is(err, kv.ErrKeyTooLarge), "%d-byte prefix: %v", p, err)
				return err == nil
			},
		}
		for tag, name := range []string{"queue", "job queue"} {
			noZeros, zeros := ids()
			a, b := each[name](byte(2*tag+1), noZeros), each[name](byte(2*tag+2), zeros)
			require.Equal(t, a, b, "%s on a %d-byte prefix: worked under an ID without zero bytes %v, with %v", name, p, a, b)
			if a {
				worked++
			}
		}
	}
	require.Greater(t, worked, 20, "prefixes the queues work with")
}

// stagedOnLongPrefix is one kind of staged consumer, for
// TestLimitStagedKeysDoNotDependOnTheClock: make builds it on sub with
// opts; the handle's wait takes one item, put adds one, fulfil (nil by
// place, where no result is written) serves the waiting requests, and
// hook sets the staging hook.
type stagedOnLongPrefix struct {
	name string
	make func(sub fdbqueue.Subspace, opts ...fdbqueue.Option) (stagedHandle, error)
}

type stagedHandle struct {
	wait   func(ctx context.Context, db kv.Database) ([]byte, error)
	put    func(ctx context.Context, db kv.Database, v []byte) error
	fulfil func(ctx context.Context, db kv.Database) (int, error)
	hook   func(fn func(point string))
}

func stagedOnLongPrefixes() []stagedOnLongPrefix {
	queue := func(name string, mode fdbqueue.StagingServing, layout ...fdbqueue.Option) stagedOnLongPrefix {
		return stagedOnLongPrefix{name, func(sub fdbqueue.Subspace, opts ...fdbqueue.Option) (stagedHandle, error) {
			opts = append(append(opts, layout...), fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: mode}))
			q, err := fdbqueue.NewQueue(sub, opts...)
			if err != nil {
				return stagedHandle{}, err
			}
			h := stagedHandle{
				wait: func(ctx context.Context, db kv.Database) ([]byte, error) { return q.DequeueWait(ctx, db) },
				put:  func(ctx context.Context, db kv.Database, v []byte) error { return q.Enqueue(ctx, db, v) },
				hook: func(fn func(string)) { fdbqueue.SetStagingHook(q, fn) },
			}
			if mode == fdbqueue.ServeInBatches {
				h.fulfil = func(ctx context.Context, db kv.Database) (int, error) { return fdbqueue.FulfilStaged(ctx, db, q) }
			}
			return h, nil
		}}
	}
	pq := func(name string, max bool) stagedOnLongPrefix {
		return stagedOnLongPrefix{name, func(sub fdbqueue.Subspace, opts ...fdbqueue.Option) (stagedHandle, error) {
			pq, err := fdbqueue.NewPriorityQueue(sub, append(opts, fdbqueue.WithStaging(fdbqueue.StagingConfig{}))...)
			if err != nil {
				return stagedHandle{}, err
			}
			return stagedHandle{
				wait: func(ctx context.Context, db kv.Database) ([]byte, error) {
					pop := pq.PopMinWait
					if max {
						pop = pq.PopMaxWait
					}
					it, err := pop(ctx, db)
					return it.Value, err
				},
				put: func(ctx context.Context, db kv.Database, v []byte) error { return pq.Push(ctx, db, v, 1) },
				fulfil: func(ctx context.Context, db kv.Database) (int, error) {
					return fdbqueue.FulfilStagedPQ(ctx, db, pq, max)
				},
				hook: func(fn func(string)) { fdbqueue.SetPQStagingHook(pq, fn) },
			}, nil
		}}
	}
	return []stagedOnLongPrefix{
		queue("queue in batches", fdbqueue.ServeInBatches),
		queue("queue by place", fdbqueue.ServeByPlace, fdbqueue.WithVersionstampOrder()),
		pq("PopMinWait", false),
		pq("PopMaxWait", true),
	}
}

// TestLimitStagedKeysDoNotDependOnTheClock: a staged request key holds
// the request ID packed as a tuple's byte string, and the ID starts with
// the 8 bytes of the registration time, each escaped to two bytes when
// 0x00, so near the 10,000-byte key limit (kv.MaxKeySize; FDB's
// key_too_large, 2102) a staged dequeue failed or not by the clock. The
// constructors refused only prefixes too long for the journal (over 9,958
// bytes), so a staged queue on a prefix of 9,950 bytes was made and its
// staged dequeues failed with key_too_large. Now the largest prefix a
// staged handle accepts works under the clock that makes the longest keys
// (the Unix epoch: every time byte 0x00), results written in two chunks
// included, and the next is refused, where a handle without staging is
// still accepted. (That the next prefix would indeed fail is
// TestStagedKeysFitExactly's.)
func TestLimitStagedKeysDoNotDependOnTheClock(t *testing.T) {
	ctx := context.Background()
	epoch := fdbqueue.WithClock(func() time.Time { return time.UnixMicro(0) })
	long := func(p int) fdbqueue.Subspace { return fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, p)) }
	for _, c := range stagedOnLongPrefixes() {
		t.Run(c.name, func(t *testing.T) {
			// The largest prefix accepted: every longer one is refused.
			p := kv.MaxKeySize
			var h stagedHandle
			for ; ; p-- {
				var err error
				if h, err = c.make(long(p), epoch); err == nil {
					break
				}
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument, "%d-byte prefix", p)
				require.ErrorIs(t, err, kv.ErrKeyTooLarge, "%d-byte prefix", p)
			}

			db := stgDB(t)
			armed, release := make(chan struct{}, 1), make(chan struct{})
			h.hook(func(point string) {
				switch point {
				case "armed": // a request filed, its waiter asleep
					select {
					case armed <- struct{}{}:
					default:
					}
				case "woke":
					<-release // until the item is served
				}
			})
			got, errs := make(chan []byte, 1), make(chan error, 1)
			go func() {
				v, err := h.wait(ctx, db)
				got <- v
				errs <- err
			}()
			select {
			case <-armed:
			case err := <-errs:
				require.NoError(t, err, "a staged wait on a %d-byte prefix at the epoch", p)
			case <-time.After(wakeTimeout):
				t.Fatalf("a staged wait on a %d-byte prefix neither slept nor returned", p)
			}
			value := bytes.Repeat([]byte{'v'}, kv.MaxValueSize) // its result takes two chunks
			require.NoError(t, h.put(ctx, db, value))
			if h.fulfil != nil {
				n, err := h.fulfil(ctx, db)
				require.NoError(t, err, "a fulfilment writes the result on a %d-byte prefix", p)
				require.Equal(t, 1, n, "the waiting request is served")
			}
			close(release)
			require.NoError(t, recvWithin(t, errs, "the served wait's return"), "a staged wait on a %d-byte prefix at the epoch", p)
			require.Equal(t, value, <-got)

			_, err := c.make(long(p + 1))
			require.ErrorContains(t, err, "staged dequeue", "a %d-byte prefix is refused for its staged keys", p+1)
			_, err = fdbqueue.NewQueue(long(p + 1))
			require.NoError(t, err, "without staging a %d-byte prefix is accepted", p+1)
		})
	}
}

// Made WithoutIdempotency, a Queue or PriorityQueue has no journal keys
// to bound its prefix: the constructor refuses one on which an item key
// could exceed the 10,000-byte key limit (before, it accepted any, and on
// one too long every Enqueue or Push failed with key_too_large). On the
// longest prefix it accepts, the longest item keys are written and read:
// an index (or a priority and a count) packed in 9 bytes, the suffix,
// and in versionstamp order the versionstamp with the offset FDB counts.
func TestLimitItemKeysWithoutJournal(t *testing.T) {
	ctx := context.Background()
	suffix := bytes.Repeat([]byte{0xab}, 20) // a suffix's length; packs as 22 bytes
	longest := func(t *testing.T, mk func(fdbqueue.Subspace) error) fdbqueue.Subspace {
		t.Helper()
		n := 9_900
		for mk(fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, n+1))) == nil {
			n++
			require.Less(t, n, kv.MaxKeySize, "no prefix refused")
		}
		err := mk(fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, n+1)))
		require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		require.ErrorIs(t, err, kv.ErrKeyTooLarge)
		return fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, n))
	}
	t.Run("Queue", func(t *testing.T) {
		db := newDB(t)
		sub := longest(t, func(s fdbqueue.Subspace) error {
			_, err := fdbqueue.NewQueue(s, fdbqueue.WithoutIdempotency())
			return err
		})
		q, err := fdbqueue.NewQueue(sub, fdbqueue.WithoutIdempotency())
		require.NoError(t, err)
		key, err := sub.Pack(tuple.Tuple{int64(math.MaxInt64 - 2), suffix})
		require.NoError(t, err)
		require.Equal(t, kv.MaxKeySize, len(key), "the longest item key: a 9-byte index")
		setRaw(t, db, key, []byte("a"))
		require.NoError(t, q.Enqueue(ctx, db, []byte("b")), "an item at index MaxInt64-1")
		require.Equal(t, []string{"a", "b"}, drain(t, db, q))
	})
	t.Run("Queue in versionstamp order", func(t *testing.T) {
		db := newDB(t)
		mk := func(s fdbqueue.Subspace) (*fdbqueue.Queue, error) {
			return fdbqueue.NewQueue(s, fdbqueue.WithoutIdempotency(), fdbqueue.WithVersionstampOrder())
		}
		sub := longest(t, func(s fdbqueue.Subspace) error { _, err := mk(s); return err })
		q, err := mk(sub)
		require.NoError(t, err)
		require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
		require.NoError(t, q.Enqueue(ctx, db, []byte("c")))
		require.Equal(t, []string{"a", "b", "c"}, drain(t, db, q))
	})
	t.Run("PriorityQueue", func(t *testing.T) {
		db := newDB(t)
		sub := longest(t, func(s fdbqueue.Subspace) error {
			_, err := fdbqueue.NewPriorityQueue(s, fdbqueue.WithoutIdempotency())
			return err
		})
		pq, err := fdbqueue.NewPriorityQueue(sub, fdbqueue.WithoutIdempotency())
		require.NoError(t, err)
		key, err := sub.Pack(tuple.Tuple{int64(math.MinInt64), int64(math.MaxInt64 - 2), suffix})
		require.NoError(t, err)
		require.Equal(t, kv.MaxKeySize, len(key), "the longest item key: a 9-byte priority and count")
		setRaw(t, db, key, []byte("a"))
		require.NoError(t, pq.Push(ctx, db, []byte("b"), math.MinInt64), "an item at count MaxInt64-1")
		for _, want := range []string{"a", "b"} {
			it, err := pq.PopMin(ctx, db)
			require.NoError(t, err)
			require.Equal(t, want, string(it.Value))
		}
	})
}
