package fdbqueue_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

var updateDoc = flag.Bool("update-doc", false, "rewrite docs/bad-input.md from TestBadInputMatrix's table")

const badInputDoc = "docs/bad-input.md"

// badEnv is what an operation of the matrix runs against.
type badEnv struct {
	ctx context.Context
	db  kv.Database // may be nil, typed-nil or closed
}

// badOp is one exported operation, run on a queue that holds one item.
type badOp struct {
	name string
	run  func(t *testing.T, e badEnv) error
}

// The inputs every operation is tried with, and the error each must give.
var badColumns = []struct {
	name string
	want error
	text string
	env  func(t *testing.T) badEnv
}{
	{"nil transactor", fdbqueue.ErrInvalidArgument, "ErrInvalidArgument", func(t *testing.T) badEnv {
		return badEnv{ctx: context.Background(), db: nil}
	}},
	{"typed-nil *memdb.DB", fdbqueue.ErrInvalidArgument, "ErrInvalidArgument", func(t *testing.T) badEnv {
		var db *memdb.DB
		return badEnv{ctx: context.Background(), db: db}
	}},
	{"closed database", memdb.ErrClosed, "memdb.ErrClosed (kv.ErrClientInvalidOp)", func(t *testing.T) badEnv {
		db := memdb.New()
		require.NoError(t, db.Close())
		return badEnv{ctx: context.Background(), db: db}
	}},
	{"cancelled context", context.Canceled, "context.Canceled", func(t *testing.T) badEnv {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return badEnv{ctx: ctx, db: newDB(t)}
	}},
	{"expired deadline", context.DeadlineExceeded, "context.DeadlineExceeded", func(t *testing.T) badEnv {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		t.Cleanup(cancel)
		return badEnv{ctx: ctx, db: newDB(t)}
	}},
}

func badQueue(t *testing.T) *fdbqueue.Queue {
	return mustQueue(t, "bad", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
}

func badPQ(t *testing.T) *fdbqueue.PriorityQueue {
	return mustPQ(t, "badpq", fdbqueue.WithStaging(fdbqueue.StagingConfig{}))
}

// db converts the environment's database to what the Wait forms take.
func (e badEnv) database() kv.Database { return e.db }

// transactor returns the database as a kv.Transactor, keeping a nil
// interface nil.
func (e badEnv) transactor() kv.Transactor {
	if e.db == nil {
		return nil
	}
	return e.db
}

func (e badEnv) reader() kv.ReadTransactor {
	if e.db == nil {
		return nil
	}
	return e.db
}

var badOps = []badOp{
	{"Queue.Enqueue", func(t *testing.T, e badEnv) error { return badQueue(t).Enqueue(e.ctx, e.transactor(), []byte("x")) }},
	{"Queue.EnqueueBatch", func(t *testing.T, e badEnv) error {
		return badQueue(t).EnqueueBatch(e.ctx, e.transactor(), [][]byte{[]byte("x")})
	}},
	{"Queue.Dequeue", func(t *testing.T, e badEnv) error { _, err := badQueue(t).Dequeue(e.ctx, e.transactor()); return err }},
	{"Queue.DequeueBatch", func(t *testing.T, e badEnv) error {
		_, err := badQueue(t).DequeueBatch(e.ctx, e.transactor(), 2)
		return err
	}},
	{"Queue.DequeueWait", func(t *testing.T, e badEnv) error { _, err := badQueue(t).DequeueWait(e.ctx, e.database()); return err }},
	{"Queue.Peek", func(t *testing.T, e badEnv) error { _, err := badQueue(t).Peek(e.ctx, e.reader()); return err }},
	{"Queue.Empty", func(t *testing.T, e badEnv) error { _, err := badQueue(t).Empty(e.ctx, e.reader()); return err }},
	{"Queue.Len", func(t *testing.T, e badEnv) error { _, err := badQueue(t).Len(e.ctx, e.reader()); return err }},
	{"Queue.Clear", func(t *testing.T, e badEnv) error { return badQueue(t).Clear(e.ctx, e.transactor()) }},
	{"Queue.Recover", func(t *testing.T, e badEnv) error { _, err := badQueue(t).Recover(e.ctx, e.database()); return err }},
	{"PriorityQueue.Push", func(t *testing.T, e badEnv) error { return badPQ(t).Push(e.ctx, e.transactor(), []byte("x"), 1) }},
	{"PriorityQueue.PushBatch", func(t *testing.T, e badEnv) error {
		return badPQ(t).PushBatch(e.ctx, e.transactor(), []fdbqueue.PushItem{{Value: []byte("x"), Priority: 1}})
	}},
	{"PriorityQueue.PopMin", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PopMin(e.ctx, e.transactor()); return err }},
	{"PriorityQueue.PopMax", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PopMax(e.ctx, e.transactor()); return err }},
	{"PriorityQueue.PopMinBatch", func(t *testing.T, e badEnv) error {
		_, err := badPQ(t).PopMinBatch(e.ctx, e.transactor(), 2)
		return err
	}},
	{"PriorityQueue.PopMaxBatch", func(t *testing.T, e badEnv) error {
		_, err := badPQ(t).PopMaxBatch(e.ctx, e.transactor(), 2)
		return err
	}},
	{"PriorityQueue.PopMinWait", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PopMinWait(e.ctx, e.database()); return err }},
	{"PriorityQueue.PopMaxWait", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PopMaxWait(e.ctx, e.database()); return err }},
	{"PriorityQueue.PeekMin", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PeekMin(e.ctx, e.reader()); return err }},
	{"PriorityQueue.PeekMax", func(t *testing.T, e badEnv) error { _, err := badPQ(t).PeekMax(e.ctx, e.reader()); return err }},
	{"PriorityQueue.Empty", func(t *testing.T, e badEnv) error { _, err := badPQ(t).Empty(e.ctx, e.reader()); return err }},
	{"PriorityQueue.Len", func(t *testing.T, e badEnv) error { _, err := badPQ(t).Len(e.ctx, e.reader()); return err }},
	{"PriorityQueue.Clear", func(t *testing.T, e badEnv) error { return badPQ(t).Clear(e.ctx, e.transactor()) }},
	{"PriorityQueue.Recover", func(t *testing.T, e badEnv) error { _, err := badPQ(t).Recover(e.ctx, e.database()); return err }},
	{"TypedQueue.Enqueue", func(t *testing.T, e badEnv) error {
		return fdbqueue.NewTypedQueue(badQueue(t), fdbqueue.StringCodec{}).Enqueue(e.ctx, e.transactor(), "x")
	}},
	{"TypedQueue.EnqueueBatch", func(t *testing.T, e badEnv) error {
		return fdbqueue.NewTypedQueue(badQueue(t), fdbqueue.StringCodec{}).EnqueueBatch(e.ctx, e.transactor(), []string{"x"})
	}},
	{"TypedQueue.Dequeue", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedQueue(badQueue(t), fdbqueue.StringCodec{}).Dequeue(e.ctx, e.transactor())
		return err
	}},
	{"TypedQueue.DequeueBatch", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedQueue(badQueue(t), fdbqueue.StringCodec{}).DequeueBatch(e.ctx, e.transactor(), 2)
		return err
	}},
	{"TypedQueue.Peek", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedQueue(badQueue(t), fdbqueue.StringCodec{}).Peek(e.ctx, e.reader())
		return err
	}},
	{"TypedPriorityQueue.Push", func(t *testing.T, e badEnv) error {
		return fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).Push(e.ctx, e.transactor(), "x", 1)
	}},
	{"TypedPriorityQueue.PushBatch", func(t *testing.T, e badEnv) error {
		return fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).PushBatch(e.ctx, e.transactor(), []fdbqueue.TypedPushItem[string]{{Value: "x", Priority: 1}})
	}},
	{"TypedPriorityQueue.PopMin", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).PopMin(e.ctx, e.transactor())
		return err
	}},
	{"TypedPriorityQueue.PopMax", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).PopMax(e.ctx, e.transactor())
		return err
	}},
	{"TypedPriorityQueue.PeekMin", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).PeekMin(e.ctx, e.reader())
		return err
	}},
	{"TypedPriorityQueue.PeekMax", func(t *testing.T, e badEnv) error {
		_, err := fdbqueue.NewTypedPriorityQueue(badPQ(t), fdbqueue.StringCodec{}).PeekMax(e.ctx, e.reader())
		return err
	}},
}

// badRow is one specific bad input with its expected outcome.
type badRow struct {
	fn, input, want string
	check           func(t *testing.T)
}

// queueLen reads a queue's length on db.
func queueLen(t *testing.T, db kv.Database, q interface {
	Len(context.Context, kv.ReadTransactor) (int, error)
}) int {
	t.Helper()
	n, err := q.Len(context.Background(), db)
	require.NoError(t, err)
	return n
}

func badRows() []badRow {
	ctx := context.Background()
	sub := func(t *testing.T) fdbqueue.Subspace { return mustSubspace(t, "bad") }
	newQ := func(t *testing.T, opts ...fdbqueue.Option) error {
		_, err := fdbqueue.NewQueue(sub(t), opts...)
		return err
	}
	newPQ := func(t *testing.T, opts ...fdbqueue.Option) error {
		_, err := fdbqueue.NewPriorityQueue(sub(t), opts...)
		return err
	}
	// enqueueSize enqueues n bytes of fill with enc and returns the error
	// and the queue's length afterwards.
	enqueueSize := func(t *testing.T, enc fdbqueue.ValueEncoding, n int, fill byte) (error, int) {
		db := newDB(t)
		q := mustQueue(t, "size", fdbqueue.WithValueEncoding(enc))
		err := q.Enqueue(ctx, db, bytes.Repeat([]byte{fill}, n))
		return err, queueLen(t, db, q)
	}
	sizeRow := func(fn string, enc fdbqueue.ValueEncoding, n int, fill byte, input string, fits bool) badRow {
		want := "OK"
		if !fits {
			want = "ErrValueTooLarge (also kv.ErrValueTooLarge); nothing written"
		}
		return badRow{fn, input, want, func(t *testing.T) {
			err, l := enqueueSize(t, enc, n, fill)
			if fits {
				require.NoError(t, err)
				require.Equal(t, 1, l)
				return
			}
			require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
			require.ErrorIs(t, err, kv.ErrValueTooLarge)
			require.Zero(t, l)
		}}
	}
	foreign := plantForeign
	return []badRow{
		{"NewQueue", "subspace with an empty prefix", "ErrInvalidArgument", func(t *testing.T) {
			_, err := fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes(nil))
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		}},
		{"NewQueue, NewPriorityQueue, NewJobQueue", "a prefix whose journal keys could exceed the 10,000-byte key limit for some operation ID (over 9,958 bytes; not WithoutIdempotency)", "ErrInvalidArgument and kv.ErrKeyTooLarge; made WithoutIdempotency, accepted up to the item keys' limit (next row)", func(t *testing.T) {
			long := fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, 9_990))
			_, err := fdbqueue.NewQueue(long)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewPriorityQueue(long)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewJobQueue(long, fdbqueue.JobQueueConfig{})
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewQueue(fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, 9_969)), fdbqueue.WithoutIdempotency())
			require.NoError(t, err)
		}},
		{"NewQueue, NewPriorityQueue", "WithoutIdempotency, a prefix on which an item key could exceed the 10,000-byte key limit (over 9,969 bytes; 9,961 in versionstamp order; 9,960 for a PriorityQueue)", "ErrInvalidArgument and kv.ErrKeyTooLarge", func(t *testing.T) {
			p := func(n int) fdbqueue.Subspace { return fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, n)) }
			for _, c := range []struct {
				longest int
				mk      func(fdbqueue.Subspace) error
			}{
				{9_969, func(s fdbqueue.Subspace) error {
					_, err := fdbqueue.NewQueue(s, fdbqueue.WithoutIdempotency())
					return err
				}},
				{9_961, func(s fdbqueue.Subspace) error {
					_, err := fdbqueue.NewQueue(s, fdbqueue.WithoutIdempotency(), fdbqueue.WithVersionstampOrder())
					return err
				}},
				{9_960, func(s fdbqueue.Subspace) error {
					_, err := fdbqueue.NewPriorityQueue(s, fdbqueue.WithoutIdempotency())
					return err
				}},
			} {
				require.NoError(t, c.mk(p(c.longest)))
				err := c.mk(p(c.longest + 1))
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
				require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			}
		}},
		{"NewJobQueue", "WithoutIdempotency, a prefix on which a job's record key could exceed the 10,000-byte key limit (over 9,965 bytes)", "ErrInvalidArgument and kv.ErrKeyTooLarge", func(t *testing.T) {
			_, err := fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, 9_966)), fdbqueue.JobQueueConfig{}, fdbqueue.WithoutIdempotency())
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewJobQueue(fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, 9_965)), fdbqueue.JobQueueConfig{}, fdbqueue.WithoutIdempotency())
			require.NoError(t, err)
		}},
		{"JobQueue.Add, AddBatch", "a unique key (within MaxUniqueKeySize) whose key (\"u\", unique key) on the queue's prefix exceeds the 10,000-byte key limit (a long prefix; a 0x00 byte counts twice)", "ErrInvalidArgument and kv.ErrKeyTooLarge; nothing written, the caller's transaction still usable", func(t *testing.T) {
			db := newDB(t)
			sub := fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, 9_000))
			q, err := fdbqueue.NewJobQueue(sub, fdbqueue.JobQueueConfig{})
			require.NoError(t, err)
			_, err = q.AddBatch(ctx, db, []fdbqueue.Job{{Value: []byte("ok")}, {Value: []byte("x"), UniqueKey: strings.Repeat("\x00", 500)}})
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, q))
			r := mustAdd(t, db, q, fdbqueue.Job{Value: []byte("x"), UniqueKey: strings.Repeat("\x00", 400)})
			require.False(t, r.Duplicate)
		}},
		{"NewQueue, NewPriorityQueue", "WithStaging, a prefix whose staged request keys could exceed the 10,000-byte key limit at some registration time (over 9,943 bytes; 9,941 for a PriorityQueue)", "ErrInvalidArgument and kv.ErrKeyTooLarge; without WithStaging, accepted", func(t *testing.T) {
			prefix := func(n int) fdbqueue.Subspace { return fdbqueue.SubspaceFromBytes(bytes.Repeat([]byte{'p'}, n)) }
			staged := fdbqueue.WithStaging(fdbqueue.StagingConfig{})
			_, err := fdbqueue.NewQueue(prefix(9_944), staged)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewQueue(prefix(9_943), staged)
			require.NoError(t, err)
			_, err = fdbqueue.NewQueue(prefix(9_944))
			require.NoError(t, err)
			_, err = fdbqueue.NewPriorityQueue(prefix(9_942), staged)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, err, kv.ErrKeyTooLarge)
			_, err = fdbqueue.NewPriorityQueue(prefix(9_941), staged)
			require.NoError(t, err)
			_, err = fdbqueue.NewPriorityQueue(prefix(9_942))
			require.NoError(t, err)
		}},
		{"NewQueue", "nil Option", "ignored", func(t *testing.T) { require.NoError(t, newQ(t, nil)) }},
		{"NewTypedQueue, NewTypedPriorityQueue: every operation", "a nil queue; a nil codec, or a nil pointer of a codec type", "ErrInvalidArgument; nothing read or written (a dequeue or pop takes no item)", func(t *testing.T) {
			t.Run("nil pointer codec", TestTypedQueueNilPointerCodec)
			db := newDB(t)
			q, pq := mustQueue(t, "typed-nil"), mustPQ(t, "typed-nil-pq")
			require.NoError(t, q.Enqueue(ctx, db, []byte("kept")))
			require.NoError(t, pq.Push(ctx, db, []byte("kept"), 1))
			tqs := []*fdbqueue.TypedQueue[string]{fdbqueue.NewTypedQueue[string](q, nil), fdbqueue.NewTypedQueue[string](nil, fdbqueue.StringCodec{})}
			tps := []*fdbqueue.TypedPriorityQueue[string]{fdbqueue.NewTypedPriorityQueue[string](pq, nil), fdbqueue.NewTypedPriorityQueue[string](nil, fdbqueue.StringCodec{})}
			inTx := func(f func(tr kv.Transaction) error) error {
				var err error
				require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error { err = f(tr); return nil }))
				return err
			}
			for i, tq := range tqs {
				for name, op := range map[string]func() error{
					"Enqueue":      func() error { return tq.Enqueue(ctx, db, "x") },
					"EnqueueBatch": func() error { return tq.EnqueueBatch(ctx, db, []string{"x"}) },
					"Dequeue":      func() error { _, err := tq.Dequeue(ctx, db); return err },
					"DequeueBatch": func() error { _, err := tq.DequeueBatch(ctx, db, 2); return err },
					"DequeueWait":  func() error { _, err := tq.DequeueWait(ctx, db); return err },
					"Peek":         func() error { _, err := tq.Peek(ctx, db); return err },
					"Empty":        func() error { _, err := tq.Empty(ctx, db); return err },
					"Len":          func() error { _, err := tq.Len(ctx, db); return err },
					"Depth":        func() error { _, err := tq.Depth(ctx, db); return err },
					"RepairDepth":  func() error { _, err := tq.RepairDepth(ctx, db); return err },
					"Clear":        func() error { return tq.Clear(ctx, db) },
					"Recover":      func() error { _, err := tq.Recover(ctx, db); return err },
					"Reconfigure":  func() error { return tq.Reconfigure(ctx, db) },
					"RegisterGauges": func() error {
						_, err := tq.RegisterGauges(db)
						return err
					},
					"WatchForItems": func() error {
						return inTx(func(tr kv.Transaction) error { _, err := tq.WatchForItems(tr); return err })
					},
				} {
					require.ErrorIs(t, op(), fdbqueue.ErrInvalidArgument, "TypedQueue %d: %s", i, name)
				}
				_ = tq.StagingStats()
				_ = tq.Subspace()
			}
			for i, tp := range tps {
				for name, op := range map[string]func() error{
					"Push":        func() error { return tp.Push(ctx, db, "x", 1) },
					"PopMin":      func() error { _, err := tp.PopMin(ctx, db); return err },
					"PopMax":      func() error { _, err := tp.PopMax(ctx, db); return err },
					"PopMinBatch": func() error { _, err := tp.PopMinBatch(ctx, db, 2); return err },
					"PopMaxBatch": func() error { _, err := tp.PopMaxBatch(ctx, db, 2); return err },
					"PopMinWait":  func() error { _, err := tp.PopMinWait(ctx, db); return err },
					"PopMaxWait":  func() error { _, err := tp.PopMaxWait(ctx, db); return err },
					"PeekMin":     func() error { _, err := tp.PeekMin(ctx, db); return err },
					"PeekMax":     func() error { _, err := tp.PeekMax(ctx, db); return err },
					"Empty":       func() error { _, err := tp.Empty(ctx, db); return err },
					"Len":         func() error { _, err := tp.Len(ctx, db); return err },
					"Depth":       func() error { _, err := tp.Depth(ctx, db); return err },
					"RepairDepth": func() error { _, err := tp.RepairDepth(ctx, db); return err },
					"Clear":       func() error { return tp.Clear(ctx, db) },
					"Recover":     func() error { _, err := tp.Recover(ctx, db); return err },
					"Reconfigure": func() error { return tp.Reconfigure(ctx, db) },
					"RegisterGauges": func() error {
						_, err := tp.RegisterGauges(db)
						return err
					},
					"WatchForItems": func() error {
						return inTx(func(tr kv.Transaction) error { _, err := tp.WatchForItems(tr); return err })
					},
					"PushBatch": func() error {
						return tp.PushBatch(ctx, db, []fdbqueue.TypedPushItem[string]{{Value: "x", Priority: 1}})
					},
				} {
					require.ErrorIs(t, op(), fdbqueue.ErrInvalidArgument, "TypedPriorityQueue %d: %s", i, name)
				}
				_ = tp.StagingStats()
				_ = tp.Subspace()
			}
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err, "the item is still queued")
			require.Equal(t, []byte("kept"), v)
			it, err := pq.PopMin(ctx, db)
			require.NoError(t, err, "the item is still queued")
			require.Equal(t, []byte("kept"), it.Value)
			require.Zero(t, queueLen(t, db, q))
		}},
		{"Queue: every method", "a nil *Queue; a zero Queue (new(Queue))", "ErrInvalidArgument, before any transaction; Subspace and StagingStats return zero values", nilAndZeroHandles("Queue")},
		{"PriorityQueue: every method", "a nil *PriorityQueue; a zero PriorityQueue", "ErrInvalidArgument, before any transaction; Subspace and StagingStats return zero values", nilAndZeroHandles("PriorityQueue")},
		{"JobQueue: every method", "a nil *JobQueue; a zero JobQueue", "ErrInvalidArgument, before any transaction; Subspace returns the zero Subspace, Backoff 0, DeadCursorAt nil", nilAndZeroHandles("JobQueue")},
		{"Task: every method", "a nil *Task; a zero Task", "Ack: ErrInvalidArgument, before any transaction; Lease and Value return zero values", nilAndZeroHandles("Task")},
		{"TypedJobQueue: every method", "a nil *TypedJobQueue; one made with a nil JobQueue", "ErrInvalidArgument, before any transaction; JobQueue returns nil, Subspace the zero Subspace", nilAndZeroHandles("TypedJobQueue")},
		{"NewTypedJobQueue: every operation", "a nil codec, or a nil pointer of a codec type; a zero JobQueue", "ErrInvalidArgument, before any transaction (no job leased); JobQueue returns the queue given, Subspace its subspace", func(t *testing.T) {
			t.Run("handles", TestTypedJobQueueNilCodecOrZeroQueue)
			t.Run("nil pointer codec", TestTypedJobQueueNilPointerCodec)
		}},
		{"TypedTask: every method", "a nil *TypedTask; a zero TypedTask", "Ack: ErrInvalidArgument, before any transaction; Lease and Value return zero values", nilAndZeroHandles("TypedTask")},
		{"TypedJobQueue: Add, AddBatch, Lease, Stats, ListDead, Run, RegisterGauges, Job, Cancel, Requeue, DeleteDead, Schedule, RunScheduler, Schedules, Unschedule", "a nil or typed-nil transactor; a closed database; a cancelled context, an expired deadline; Run: a nil handler", "JobQueue's: ErrInvalidArgument; memdb.ErrClosed; context.Canceled, context.DeadlineExceeded (Run and RunScheduler return nil at once on a dead context); ErrInvalidArgument; nothing changed", func(t *testing.T) {
			t.Run("matrix", TestTypedJobQueueBadTransactorsAndContexts)
		}},
		{"TypedJobQueue.Job", "a stored value the codec fails to decode, or whose Decode panics", "ErrCodec: a *CodecError with the bytes (Raw), the priority and the JobInfo (Job); the result holds the JobInfo; the job untouched", func(t *testing.T) {
			t.Run("decode", TestTypedJobQueueJobDecodeFails)
		}},
		{"TypedJobQueue.Schedule, RunScheduler", "a TypedPeriodicJob whose value the codec fails to encode; the PeriodicJob's bad fields", "ErrCodec (a *CodecError naming the schedule and the slot; RunScheduler returns it); nothing written, the slot not marked; ErrInvalidArgument", func(t *testing.T) {
			t.Run("schedule", TestTypedScheduleEncodeFails)
			t.Run("run", TestTypedRunScheduler)
		}},
		{"TypedQueue, TypedPriorityQueue", "a zero Queue or PriorityQueue; a nil wrapper's Queue, PriorityQueue", "the operations: ErrInvalidArgument; the accessors: nil", nilAndZeroHandles("Typed")},
		{"NewQueue, NewPriorityQueue", "WithClock(nil), WithEntropy(nil), WithLogger(nil), WithMeterProvider(nil)", "the defaults: operations work", func(t *testing.T) {
			db := newDB(t)
			nils := []fdbqueue.Option{fdbqueue.WithClock(nil), fdbqueue.WithEntropy(nil), fdbqueue.WithLogger(nil), fdbqueue.WithMeterProvider(nil)}
			q := mustQueue(t, "nil-options", nils...)
			require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
			v, err := q.Dequeue(ctx, db)
			require.NoError(t, err)
			require.Equal(t, []byte("x"), v)
			pq := mustPQ(t, "nil-options-pq", nils...)
			require.NoError(t, pq.Push(ctx, db, []byte("y"), 1))
			it, err := pq.PopMin(ctx, db)
			require.NoError(t, err)
			require.Equal(t, []byte("y"), it.Value)
		}},
		{"NewQueue, NewPriorityQueue, NewJobQueue; JobQueue.Run", "a nil pointer of the interface's type as JobQueueConfig.Clock or given to WithEntropy or WithMeterProvider; a Logger without a handler (a zero slog.Logger, or a nil-pointer handler) given to WithLogger or as PoolOptions.Logger", "ErrInvalidArgument from the constructor (from Run: no worker started)", func(t *testing.T) {
			t.Run("matrix", TestTypedNilOptionsRefused)
		}},
		{"NewQueue", "WithJournalRetention(0), (-1s)", "ErrInvalidArgument", func(t *testing.T) {
			require.ErrorIs(t, newQ(t, fdbqueue.WithJournalRetention(0)), fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, newQ(t, fdbqueue.WithJournalRetention(-time.Second)), fdbqueue.ErrInvalidArgument)
		}},
		{"NewQueue", "WithBatchBudget(0), (MaxBatchBudget+1)", "ErrInvalidArgument", func(t *testing.T) {
			require.ErrorIs(t, newQ(t, fdbqueue.WithBatchBudget(0)), fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, newQ(t, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget+1)), fdbqueue.ErrInvalidArgument)
			require.NoError(t, newQ(t, fdbqueue.WithBatchBudget(fdbqueue.MaxBatchBudget)))
		}},
		{"NewQueue", "WithValueEncoding(ValueEncoding(7))", "ErrInvalidArgument", func(t *testing.T) {
			require.ErrorIs(t, newQ(t, fdbqueue.WithValueEncoding(fdbqueue.ValueEncoding(7))), fdbqueue.ErrInvalidArgument)
		}},
		{"NewQueue", "WithStaging: BatchSize -1 or 10,001, ClaimTimeout 1µs, CleanupTimeout -1s", "ErrInvalidArgument", func(t *testing.T) {
			for _, c := range []fdbqueue.StagingConfig{{BatchSize: -1}, {BatchSize: 10_001}, {ClaimTimeout: time.Microsecond}, {CleanupTimeout: -time.Second}} {
				require.ErrorIs(t, newQ(t, fdbqueue.WithStaging(c)), fdbqueue.ErrInvalidArgument, "%+v", c)
			}
		}},
		{"NewPriorityQueue", "subspace with an empty prefix; WithVersionstampOrder", "ErrInvalidArgument", func(t *testing.T) {
			_, err := fdbqueue.NewPriorityQueue(fdbqueue.SubspaceFromBytes(nil))
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			require.ErrorIs(t, newPQ(t, fdbqueue.WithVersionstampOrder()), fdbqueue.ErrInvalidArgument)
		}},
		{"NewSubspace, Subspace.Sub, Pack, Range", "an element the tuple layer cannot pack (a struct)", "tuple.ErrUnsupportedType", func(t *testing.T) {
			_, err := fdbqueue.NewSubspace(tuple.Tuple{struct{}{}})
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			s := sub(t)
			_, err = s.Sub(struct{}{})
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			_, err = s.Pack(tuple.Tuple{struct{}{}})
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
			_, err = s.Range(struct{}{})
			require.ErrorIs(t, err, tuple.ErrUnsupportedType)
		}},
		{"Subspace.Unpack", "key without the prefix; nil key", "ErrKeyOutsideSubspace", func(t *testing.T) {
			_, err := sub(t).Unpack([]byte("elsewhere"))
			require.ErrorIs(t, err, fdbqueue.ErrKeyOutsideSubspace)
			_, err = sub(t).Unpack(nil)
			require.ErrorIs(t, err, fdbqueue.ErrKeyOutsideSubspace)
		}},
		{"Subspace.Unpack", "prefix followed by bytes that are not a tuple", "ErrMalformedKey (wrapping tuple.ErrMalformed)", func(t *testing.T) {
			_, err := sub(t).Unpack(append(sub(t).Bytes(), 0x05, 0x01))
			require.ErrorIs(t, err, fdbqueue.ErrMalformedKey)
			require.ErrorIs(t, err, tuple.ErrMalformed)
		}},
		sizeRow("Queue.Enqueue", fdbqueue.RawValues, 0, 'x', "empty value (RawValues)", true),
		sizeRow("Queue.Enqueue", fdbqueue.RawValues, kv.MaxValueSize, 'x', "100,000-byte value (RawValues)", true),
		sizeRow("Queue.Enqueue", fdbqueue.RawValues, kv.MaxValueSize+1, 'x', "100,001-byte value (RawValues)", false),
		sizeRow("Queue.Enqueue", fdbqueue.TupleValues, kv.MaxValueSize-2, 'x', "99,998-byte value (TupleValues: 2 bytes of overhead)", true),
		sizeRow("Queue.Enqueue", fdbqueue.TupleValues, kv.MaxValueSize-1, 'x', "99,999-byte value (TupleValues)", false),
		sizeRow("Queue.Enqueue", fdbqueue.TupleValues, kv.MaxValueSize/2-1, 0, "49,999 zero bytes (TupleValues: each 0x00 is escaped to 2 bytes)", true),
		sizeRow("Queue.Enqueue", fdbqueue.TupleValues, kv.MaxValueSize/2, 0, "50,000 zero bytes (TupleValues)", false),
		{"Queue.Enqueue, Dequeue", "nil value, empty value", "OK; dequeued as an empty value", func(t *testing.T) {
			db := newDB(t)
			for _, enc := range []fdbqueue.ValueEncoding{fdbqueue.RawValues, fdbqueue.TupleValues} {
				q := mustQueue(t, fmt.Sprint("empty", enc), fdbqueue.WithValueEncoding(enc))
				require.NoError(t, q.Enqueue(ctx, db, nil))
				require.NoError(t, q.Enqueue(ctx, db, []byte{}))
				for range 2 {
					v, err := q.Dequeue(ctx, db)
					require.NoError(t, err)
					require.Empty(t, v)
				}
			}
		}},
		{"Queue.EnqueueBatch", "one 100,001-byte value among small ones", "ErrValueTooLarge; nothing written", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "batch-large")
			err := q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), make([]byte, kv.MaxValueSize+1), []byte("b")})
			require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
			require.Zero(t, queueLen(t, db, q))
		}},
		{"Queue.EnqueueBatch", "nil or empty batch", "OK, does nothing", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "batch-empty")
			require.NoError(t, q.EnqueueBatch(ctx, db, nil))
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{}))
			require.Zero(t, queueLen(t, db, q))
		}},
		{"Queue.EnqueueBatch", "batch over the batch budget (20 × 1,000 bytes, budget 10,000)", "ErrBatchTooLarge; nothing written", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "batch-budget", fdbqueue.WithBatchBudget(10_000))
			big := make([][]byte, 20)
			for i := range big {
				big[i] = make([]byte, 1000)
			}
			require.ErrorIs(t, q.EnqueueBatch(ctx, db, big), fdbqueue.ErrBatchTooLarge)
			require.Zero(t, queueLen(t, db, q))
		}},
		{"Queue.DequeueBatch, PopMinBatch, PopMaxBatch", "batch size 0 or -1", "ErrInvalidArgument", func(t *testing.T) {
			db := newDB(t)
			q, pq := mustQueue(t, "n"), mustPQ(t, "n")
			for _, n := range []int{0, -1} {
				_, err := q.DequeueBatch(ctx, db, n)
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
				_, err = pq.PopMinBatch(ctx, db, n)
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
				_, err = pq.PopMaxBatch(ctx, db, n)
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			}
		}},
		{"Queue.Dequeue, PriorityQueue.PopMin/PopMax, Peek*", "empty queue", "ErrEmpty", func(t *testing.T) {
			db := newDB(t)
			q, pq := mustQueue(t, "e"), mustPQ(t, "e")
			_, err := q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			_, err = q.Peek(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			_, err = pq.PopMin(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			_, err = pq.PopMax(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
			_, err = pq.PeekMax(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrEmpty)
		}},
		{"Queue.DequeueWait, PopMinWait, PopMaxWait", "queue made without WithStaging", "ErrInvalidArgument", func(t *testing.T) {
			db := newDB(t)
			_, err := mustQueue(t, "w").DequeueWait(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			_, err = mustPQ(t, "w").PopMinWait(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			_, err = mustPQ(t, "w").PopMaxWait(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		}},
		{"Queue.DequeueWait, PopMinWait, PopMaxWait", "empty queue, 20 ms deadline", "context.DeadlineExceeded; no request left behind", func(t *testing.T) {
			db := newDB(t)
			q, pq := badQueue(t), badPQ(t)
			for _, wait := range []func(context.Context) error{
				func(c context.Context) error { _, err := q.DequeueWait(c, db); return err },
				func(c context.Context) error { _, err := pq.PopMinWait(c, db); return err },
				func(c context.Context) error { _, err := pq.PopMaxWait(c, db); return err },
			} {
				c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				require.ErrorIs(t, wait(c), context.DeadlineExceeded)
				cancel()
			}
			st, err := q.Recover(ctx, db)
			require.NoError(t, err)
			require.Zero(t, st.ReturnedItems)
		}},
		{"NewQueue, NewPriorityQueue WithStaging", "Serving: ServeByPlace without WithVersionstampOrder, or on a priority queue; an unknown serving mode", "ErrInvalidArgument", func(t *testing.T) {
			sub, err := fdbqueue.NewSubspace(tuple.Tuple{"serving"})
			require.NoError(t, err)
			byPlace := fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: fdbqueue.ServeByPlace})
			_, err = fdbqueue.NewQueue(sub, byPlace)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			_, err = fdbqueue.NewPriorityQueue(sub, byPlace)
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
			_, err = fdbqueue.NewQueue(sub, fdbqueue.WithVersionstampOrder(), fdbqueue.WithStaging(fdbqueue.StagingConfig{Serving: 7}))
			require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
		}},
		{"PriorityQueue.Push, PopMin, PopMax", "priority MinInt64 and MaxInt64", "OK; MinInt64 pops first from the smallest end, MaxInt64 from the largest", func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "extremes")
			require.NoError(t, pq.Push(ctx, db, []byte("zero"), 0))
			require.NoError(t, pq.Push(ctx, db, []byte("max"), math.MaxInt64))
			require.NoError(t, pq.Push(ctx, db, []byte("min"), math.MinInt64))
			it, err := pq.PopMin(ctx, db)
			require.NoError(t, err)
			require.Equal(t, fdbqueue.Item{Value: []byte("min"), Priority: math.MinInt64}, it)
			it, err = pq.PopMax(ctx, db)
			require.NoError(t, err)
			require.Equal(t, fdbqueue.Item{Value: []byte("max"), Priority: math.MaxInt64}, it)
		}},
		{"PriorityQueue.Push", "100,001-byte value", "ErrValueTooLarge; nothing written", func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "large")
			require.NoError(t, pq.Push(ctx, db, make([]byte, kv.MaxValueSize), 1))
			require.ErrorIs(t, pq.Push(ctx, db, make([]byte, kv.MaxValueSize+1), 1), fdbqueue.ErrValueTooLarge)
			require.Equal(t, 1, queueLen(t, db, pq))
		}},
		{"PriorityQueue.PushBatch", "nil or empty batch; with a nil or typed-nil transactor", "OK, does nothing (no stored configuration written); ErrInvalidArgument", func(t *testing.T) {
			t.Run("empty", TestPushBatchEmpty)
		}},
		{"PriorityQueue.PushBatch", "values of exactly 100,000 stored bytes (99,998 with TupleValues) and one a byte longer", "ErrValueTooLarge (also kv.ErrValueTooLarge) naming the item's index; nothing written; without the longer one, OK", func(t *testing.T) {
			t.Run("limits", TestPushBatchValueLimits)
		}},
		{"PriorityQueue.PushBatch", "batch over the batch budget (20 × 1,000 bytes, budget 10,000); a batch exactly at the budget, and with one value a byte longer; one item over any budget", "ErrBatchTooLarge, nothing written; OK at the budget, ErrBatchTooLarge a byte over; a single item OK", func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "batch-budget", fdbqueue.WithBatchBudget(10_000))
			big := make([]fdbqueue.PushItem, 20)
			for i := range big {
				big[i] = fdbqueue.PushItem{Value: make([]byte, 1000), Priority: int64(i % 3)}
			}
			require.ErrorIs(t, pq.PushBatch(ctx, db, big), fdbqueue.ErrBatchTooLarge)
			require.Zero(t, queueLen(t, db, pq))
			t.Run("exact", TestPushBatchBudgetExact)
		}},
		{"PriorityQueue.PushBatch", "priorities MinInt64 and MaxInt64; a priority whose last count (another client's key) leaves no room in an int64 for the batch's items of it", "OK, each at its end; ErrForeignKey (a *ForeignKeyError naming the key), nothing of the batch written", func(t *testing.T) {
			t.Run("extremes", TestPushBatchPriorityExtremes)
			t.Run("count", TestPushBatchCountNearMaxInt64)
		}},
		{"TypedPriorityQueue.PushBatch", "a value the codec cannot encode", "ErrCodec (a *CodecError with the item's priority, wrapping the codec's error); nothing written", func(t *testing.T) {
			t.Run("encode", TestTypedPushBatch)
		}},
		{"PriorityQueue.PopMin, PopMax, PopMinBatch, PopMaxBatch", "100,000 zero bytes, 100,000 0xff bytes (and the TupleValues limits), journal on and off, under commit_unknown_result", "OK: popped intact (the journal record holds the value unescaped, split past the value limit)", func(t *testing.T) {
			t.Run("matrix", TestLimitValuesPriorityQueue)
		}},
		{"Queue.Dequeue, DequeueBatch (both key layouts)", "100,000 zero bytes, 100,000 0xff bytes (and the TupleValues limits), journal on and off, under commit_unknown_result", "OK: dequeued intact", func(t *testing.T) {
			t.Run("matrix", TestLimitValuesQueue)
		}},
		{"Queue.DequeueWait (by place, in batches), PopMinWait, PopMaxWait", "a limit-sized all-zero or all-0xff item handed to a waiting request; the waiter collects it or gives up", "OK: the result holds the value unescaped, in chunks; a given-up item goes back to the queue intact", func(t *testing.T) {
			t.Run("queue", TestLimitValuesStaged)
			t.Run("pq", TestLimitValuesStagedPop)
		}},
		{"Queue.EnqueueBatch (WithVersionstampOrder)", "20,000 items (any user version counter); 65,537 items (over the user versions and FDB's size limit)", "OK, in order; ErrBatchTooLarge, nothing written", func(t *testing.T) {
			t.Run("blocks", TestVersionstampUserVersionBlocks)
		}},
		{"Queue.Dequeue, DequeueBatch, Peek, Empty, Len (WithVersionstampOrder)", "after an Enqueue in the same transaction (on FoundationDB; memdb stands in through a wrapper)", "ErrUnreadableAfterEnqueue (also kv.Error{Code: 1036}, accessed_unreadable); not retryable", func(t *testing.T) {
			t.Run("reads", TestVersionstampReadAfterEnqueueInSameTransaction)
		}},
		{"Queue.Dequeue, Peek, Enqueue", "a foreign key at the head / at the tail of the subspace", "ErrForeignKey (a *ForeignKeyError naming the key); nothing removed", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "foreign")
			key := foreign(t, db, q.Subspace(), tuple.Tuple{"not", "ours"}, []byte("x"))
			_, err := q.Dequeue(ctx, db)
			var fk *fdbqueue.ForeignKeyError
			require.ErrorAs(t, err, &fk)
			require.Equal(t, key, fk.Key)
			_, err = q.DequeueBatch(ctx, db, 3)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
			_, err = q.Peek(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
			require.ErrorIs(t, q.Enqueue(ctx, db, []byte("y")), fdbqueue.ErrForeignKey, "the foreign key is also the tail")
			require.Equal(t, 1, queueLen(t, db, q))
		}},
		{"Queue.Dequeue, Peek (WithVersionstampOrder)", "a key (versionstamp, random bytes, one more element) at the head", "ErrForeignKey; nothing removed", func(t *testing.T) {
			foreignVersionstampHead(t, func(vs tuple.Versionstamp) tuple.Tuple { return tuple.Tuple{vs, bytes.Repeat([]byte{1}, 20), int64(0)} })
		}},
		{"Queue.Dequeue, Peek (WithVersionstampOrder)", "a key (versionstamp, a string) at the head: the layout's suffix is random bytes", "ErrForeignKey; nothing removed", func(t *testing.T) {
			foreignVersionstampHead(t, func(vs tuple.Versionstamp) tuple.Tuple { return tuple.Tuple{vs, "not bytes"} })
		}},
		{"Queue.DequeueBatch", "good items, then a foreign key", "OK: the good items; the foreign key stays", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "foreign-batch")
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b")}))
			foreign(t, db, q.Subspace(), tuple.Tuple{int64(99), "not bytes"}, nil)
			// A well-formed item behind the foreign key stays behind it.
			foreign(t, db, q.Subspace(), tuple.Tuple{int64(100), []byte("behind")}, []byte("c"))
			vs, err := q.DequeueBatch(ctx, db, 5)
			require.NoError(t, err)
			require.Equal(t, [][]byte{[]byte("a"), []byte("b")}, vs)
			_, err = q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
			require.Equal(t, 2, queueLen(t, db, q), "the foreign key and the item behind it")
		}},
		{"PriorityQueue.PopMin, PopMax, Push, PushBatch", "a foreign key at an end / in a pushed priority", "ErrForeignKey; nothing removed, no item of the batch written; other priorities unaffected", func(t *testing.T) {
			db := newDB(t)
			pq := mustPQ(t, "foreign")
			foreign(t, db, pq.Subspace(), tuple.Tuple{int64(5), "not a count"}, nil)
			_, err := pq.PopMin(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
			_, err = pq.PopMax(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
			require.ErrorIs(t, pq.Push(ctx, db, []byte("x"), 5), fdbqueue.ErrForeignKey)
			require.ErrorIs(t, pq.PushBatch(ctx, db, []fdbqueue.PushItem{{Value: []byte("x"), Priority: 6}, {Value: []byte("x"), Priority: 5}}), fdbqueue.ErrForeignKey)
			require.NoError(t, pq.Push(ctx, db, []byte("y"), 6))
			require.Equal(t, 2, queueLen(t, db, pq))
		}},
		{"JobQueue.Run", "a nil handler or database; Workers below 0 or above MaxPoolWorkers (math.MaxInt); LeaseDuration under 1 ms; ExtendEvery at or above the lease; a negative ReleaseTimeout or HandlerTimeout", "ErrInvalidArgument; no worker started", func(t *testing.T) {
			t.Run("options", TestJobPoolBadOptions)
			t.Run("handler timeout", TestJobPoolBadHandlerTimeout)
		}},
		{"JobQueue.Schedule, RunScheduler", "a PeriodicJob with an empty Name or one over MaxScheduleNameSize bytes, Every under MinPeriod or not a whole number of microseconds, a nil Job function, or a job from it that Add refuses; a time outside the queue's microseconds, or in their first period (its slot would start before them); RunScheduler: no jobs, two of one Name", "ErrInvalidArgument (ErrValueTooLarge for a value over 100,000 bytes); nothing written, the slot not marked", func(t *testing.T) {
			t.Run("matrix", TestScheduleBadInput)
			t.Run("value", TestRunSchedulerReturnsScheduleError)
			t.Run("extreme now", TestScheduleExtremeNowNoWrap)
		}},
		{"JobQueue.Schedules, Unschedule", "Schedules: a limit below 1, a cursor outside the queue's markers' range or over the key limit; Unschedule: an empty name or one whose key passes the key limit (a name over MaxScheduleNameSize is taken, to remove another program's marker); a name never scheduled", "ErrInvalidArgument (with kv.ErrKeyTooLarge for a key); ErrScheduleNotFound; nothing removed", func(t *testing.T) {
			t.Run("schedules", TestSchedulesBadInput)
			t.Run("unschedule", TestUnscheduleBadInput)
			t.Run("not found", TestUnschedule)
		}},
		{"JobQueue.Schedule, Schedules, Unschedule", "a key in the schedule markers' range (\"p\", ...) that is not a marker's (\"p\", name); a marker whose first three fields are not (slot, job ID, duplicate)", "the key: Schedules lists it in its key order, with an empty Name, Err (a *ForeignKeyError naming it), Raw and Key, and pages past it (no Schedule or Unschedule reads it; clearing Key removes it); the marker: ErrForeignKey from Schedule, adding nothing, Schedules lists it (ScheduleInfo.Err, the *ForeignKeyError, and Raw) and Unschedule removes it, returning the same (fields after the fourth, a later version's, are ignored)", func(t *testing.T) {
			t.Run("schedules", TestSchedulesListForeignKeys)
			t.Run("schedule", TestScheduleMarkerOfAnotherVersion)
			t.Run("unreadable marker", TestUnreadableMarkerListedAndUnscheduled)
		}},
		{"JobQueue: every operation (Add, AddBatch, Lease, LeaseWait, SettleLease, Ack, Nack, Extend, Release, Requeue, DeleteDead, Job, Cancel, Stats, ListDead, Run, Schedule, RunScheduler, Schedules, Unschedule)", "a Queue's or PriorityQueue's subspace; a subspace without a record holding a recipe queue's items", "ErrConfigMismatch (a *ConfigMismatchError, Field \"kind\"); nothing written", func(t *testing.T) {
			t.Run("queue", TestJobQueueOnQueueSubspace)
			t.Run("pq", TestJobQueueOnPriorityQueueSubspace)
			t.Run("recipe", TestJobQueueOnRecipeQueue)
		}},
		{"Queue.Enqueue, Dequeue, DequeueBatch, Peek, Empty, Len, Depth, RepairDepth, Clear (both layouts); PriorityQueue.Push, PushBatch, PopMin, PeekMax, Depth, RepairDepth, Clear", "a JobQueue's subspace", "ErrConfigMismatch (Field \"kind\"); nothing written, no job touched", func(t *testing.T) {
			t.Run("matrix", TestQueueOnJobQueueSubspace)
		}},
		{"Queue.Enqueue, Dequeue, DequeueBatch, DequeueWait, Peek, Empty, Len, Depth, RepairDepth, WatchForItems; PriorityQueue.Depth, RepairDepth", "a record of another layout, encoding, staging mode or kind (a PriorityQueue's subspace, a Queue's)", "ErrConfigMismatch (a *ConfigMismatchError naming the field); nothing written", func(t *testing.T) {
			t.Run("matrix", TestConfigMismatchWritesNothing)
		}},
		{"Queue.Depth, RepairDepth (WithVersionstampOrder)", "a subspace without a record holding a recipe queue's items", "ErrConfigMismatch (Field \"layout\"); nothing written (an indexed handle repairs and writes no record)", func(t *testing.T) {
			t.Run("recipe", TestRepairDepthRecipeQueue)
		}},
		{"Queue.Dequeue (TupleValues), TypedQueue.Dequeue", "stored value that does not decode", "ErrCodec; the plain queue removes nothing, the typed queue hands back the raw bytes in *CodecError", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "codec", fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
			foreign(t, db, q.Subspace(), tuple.Tuple{int64(1), make([]byte, 20)}, []byte{0xff})
			_, err := q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrCodec)
			require.Equal(t, 1, queueLen(t, db, q))
			tq := fdbqueue.NewTypedQueue(mustQueue(t, "codec-json"), fdbqueue.JSONCodec[int]{})
			require.NoError(t, tq.Queue().Enqueue(ctx, db, []byte("not json")))
			_, err = tq.Dequeue(ctx, db)
			var ce *fdbqueue.CodecError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, []byte("not json"), ce.Raw)
		}},
		{"Queue.Dequeue (TupleValues)", "stored tuple of two byte strings (the Java recipe stores a one-element tuple)", "ErrCodec; nothing removed", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "codec-two", fdbqueue.WithValueEncoding(fdbqueue.TupleValues))
			two, err := tuple.Tuple{[]byte("a"), []byte("b")}.Pack()
			require.NoError(t, err)
			foreign(t, db, q.Subspace(), tuple.Tuple{int64(1), make([]byte, 20)}, two)
			_, err = q.Dequeue(ctx, db)
			require.ErrorIs(t, err, fdbqueue.ErrCodec)
			require.Equal(t, 1, queueLen(t, db, q))
		}},
		{"TypedQueue.Enqueue", "a value the codec cannot encode (JSON of a channel)", "ErrCodec; nothing written", func(t *testing.T) {
			db := newDB(t)
			tq := fdbqueue.NewTypedQueue(mustQueue(t, "codec-enc"), fdbqueue.JSONCodec[chan int]{})
			require.ErrorIs(t, tq.Enqueue(ctx, db, make(chan int)), fdbqueue.ErrCodec)
			require.Zero(t, queueLen(t, db, tq.Queue()))
		}},
		{"TypedQueue.Dequeue, DequeueBatch, TypedPriorityQueue.PopMin, PopMaxBatch", "a codec whose Decode panics", "ErrCodec; the item, removed, comes back in *CodecError.Raw", func(t *testing.T) {
			db := newDB(t)
			q, pq := mustQueue(t, "codec-panic"), mustPQ(t, "codec-panic-pq")
			tq, tp := fdbqueue.NewTypedQueue[int](q, panicCodec{}), fdbqueue.NewTypedPriorityQueue[int](pq, panicCodec{})
			require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("a"), []byte("b"), []byte("c")}))
			require.NoError(t, pq.Push(ctx, db, []byte("d"), 1))
			require.NoError(t, pq.Push(ctx, db, []byte("e"), 2))
			var got []string
			raw := func(err error) {
				t.Helper()
				require.ErrorIs(t, err, fdbqueue.ErrCodec)
				for _, e := range append([]error{err}, unwrapJoined(err)...) {
					var ce *fdbqueue.CodecError
					if e != nil && errors.As(e, &ce) && !slices.Contains(got, string(ce.Raw)) {
						got = append(got, string(ce.Raw))
					}
				}
			}
			_, err := tq.Dequeue(ctx, db)
			raw(err)
			_, err = tq.DequeueBatch(ctx, db, 2)
			raw(err)
			_, err = tp.PopMin(ctx, db)
			raw(err)
			_, err = tp.PopMaxBatch(ctx, db, 1)
			raw(err)
			require.Equal(t, []string{"a", "b", "c", "d", "e"}, got, "every item's bytes came back")
			require.Zero(t, queueLen(t, db, q))
		}},
		{"TypedQueue.Enqueue, EnqueueBatch, TypedPriorityQueue.Push, PushBatch, TypedJobQueue.Add, AddBatch", "a codec whose Encode panics, alone or on one item of a batch", "ErrCodec: a *CodecError naming the item or job (its index; its priority), its error saying Encode panicked and with what; nothing written, a caller's transaction still usable", func(t *testing.T) {
			t.Run("matrix", TestTypedEncodePanics)
		}},
		{"TypedJobQueue.Add, AddBatch", "a value the codec cannot encode (JSON of a channel), last of a batch of three", "ErrCodec (a *CodecError naming the job's index, with its priority, wrapping the codec's error); nothing of the batch written", func(t *testing.T) {
			t.Run("encode", TestTypedJobQueueEncodeError)
		}},
		{"TypedJobQueue.Add, AddBatch", "an encoded value of exactly 100,000 bytes; of 100,001 bytes, alone or in a batch", "OK, leased intact; ErrValueTooLarge (also kv.ErrValueTooLarge) naming the item's index, nothing written", func(t *testing.T) {
			t.Run("limits", TestTypedJobQueueValueLimits)
		}},
		{"TypedJobQueue.Lease", "stored values the codec cannot decode; a Decode that panics", "the leases that decoded, and ErrCodec: a *CodecError per other job (joined with errors.Join) with its bytes, priority and Lease, still held, to Nack or Release", func(t *testing.T) {
			t.Run("decode", TestTypedJobQueueLeaseDecodeError)
			t.Run("panic", TestTypedJobQueueLeaseDecodePanics)
		}},
		{"TypedJobQueue.Run", "a stored value the codec cannot decode; a Decode that panics", "not handed to the handler: dead-lettered after one attempt (Outcome DeadLettered, Err a NoRetry wrapping the *CodecError), its reason naming the codec's error", func(t *testing.T) {
			t.Run("pool", TestTypedJobQueuePoolDecodeError)
		}},
		{"Queue.Enqueue with WithOpID", "an OpID older than the journal retention", "ErrOperationExpired; nothing written", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "expired", fdbqueue.WithJournalRetention(time.Minute))
			err := q.Enqueue(ctx, db, []byte("late"), fdbqueue.WithOpID(fdbqueue.OpIDAt(time.Now().Add(-2*time.Minute))))
			require.ErrorIs(t, err, fdbqueue.ErrOperationExpired)
			require.Zero(t, queueLen(t, db, q))
		}},
		{"Queue.Enqueue, Dequeue with WithOpID", "the zero OpID; an OpID dated more than the retention ahead of the clock", "ErrInvalidArgument; nothing written", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "bad-id", fdbqueue.WithJournalRetention(time.Minute))
			require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
			for _, id := range []fdbqueue.OpID{{}, fdbqueue.OpIDAt(time.Now().Add(2 * time.Minute))} {
				require.ErrorIs(t, q.Enqueue(ctx, db, []byte("y"), fdbqueue.WithOpID(id)), fdbqueue.ErrInvalidArgument)
				_, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
				require.ErrorIs(t, err, fdbqueue.ErrInvalidArgument)
				require.ErrorIs(t, db.Transact(ctx, func(tr kv.Transaction) error {
					return q.Enqueue(ctx, tr, []byte("z"), fdbqueue.WithOpID(id))
				}), fdbqueue.ErrInvalidArgument, "in a caller's transaction too")
			}
			require.Equal(t, 1, queueLen(t, db, q))
		}},
		{"Queue.Enqueue, Dequeue", "nil OpOption", "ignored", func(t *testing.T) {
			db := newDB(t)
			q := mustQueue(t, "nil-opt")
			require.NoError(t, q.Enqueue(ctx, db, []byte("x"), nil))
			v, err := q.Dequeue(ctx, db, nil)
			require.NoError(t, err)
			require.Equal(t, []byte("x"), v)
		}},
		{"Queue.Clear, PriorityQueue.Clear", "concurrent with 4 consumers, under commit_unknown_result", "each item returned at most once, the rest cleared", func(t *testing.T) {
			db := newDB(t, memdb.WithSeed(3), memdb.WithFaults(withReadFaults(memdb.Faults{UnknownApplied: 0.1, UnknownNotApplied: 0.05})))
			q, pq := mustQueue(t, "clear-q"), mustPQ(t, "clear-pq")
			const items = 200
			for i := range items {
				v := []byte(fmt.Sprint(i))
				require.NoError(t, q.Enqueue(ctx, db, v))
				require.NoError(t, pq.Push(ctx, db, v, int64(i%7)))
			}
			var mu sync.Mutex
			seen := map[string]int{}
			var wg sync.WaitGroup
			start := make(chan struct{})
			errs := make(chan error, 10)
			for c := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for {
						var v []byte
						var err error
						if c%2 == 0 {
							v, err = q.Dequeue(ctx, db)
							v = append([]byte("q"), v...)
						} else {
							var it fdbqueue.Item
							it, err = pq.PopMax(ctx, db)
							v = append([]byte("p"), it.Value...)
						}
						if errors.Is(err, fdbqueue.ErrEmpty) {
							return
						}
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						seen[string(v)]++
						mu.Unlock()
					}
				}()
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := q.Clear(ctx, db); err != nil {
					errs <- err
				}
				if err := pq.Clear(ctx, db); err != nil {
					errs <- err
				}
			}()
			close(start)
			waitWithin(t, &wg, workTimeout, "the consumers and the Clear")
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
			for k, n := range seen {
				require.Equal(t, 1, n, "item %s returned %d times", k, n)
			}
			require.Zero(t, queueLen(t, db, q), "the rest was cleared")
			require.Zero(t, queueLen(t, db, pq))
		}},
	}
}

// TestBadInputMatrix runs every exported operation with every bad
// transactor and context, then the specific bad inputs, and checks each
// against its expected typed error. The same table is docs/bad-input.md;
// -update-doc rewrites it, and the test fails when they differ.
func TestBadInputMatrix(t *testing.T) {
	for _, op := range badOps {
		for _, col := range badColumns {
			t.Run(op.name+"/"+col.name, func(t *testing.T) {
				env := col.env(t)
				var err error
				require.NotPanics(t, func() { err = op.run(t, env) })
				require.ErrorIs(t, err, col.want)
			})
		}
	}
	for _, row := range badRows() {
		t.Run(row.fn+"/"+row.input, func(t *testing.T) {
			require.NotPanics(t, func() { row.check(t) })
		})
	}

	doc := renderBadInputDoc()
	if *updateDoc {
		require.NoError(t, os.MkdirAll("docs", 0o755))
		require.NoError(t, os.WriteFile(badInputDoc, []byte(doc), 0o644))
		return
	}
	have, err := os.ReadFile(badInputDoc)
	require.NoError(t, err, "run go test -run TestBadInputMatrix -update-doc to write %s", badInputDoc)
	require.Equal(t, doc, string(have), "%s is out of date: run go test -run TestBadInputMatrix -update-doc", badInputDoc)
}

func renderBadInputDoc() string {
	var b strings.Builder
	b.WriteString(`# Bad inputs and what they return

Generated by ` + "`go test -run TestBadInputMatrix -update-doc`" + ` from the table in
badinput_test.go, which checks every cell; the test fails when this file and
the table differ. Errors are matched with errors.Is. No input makes an
operation panic.

## Transactors and contexts

Every exported operation, run on a queue made WithStaging (so that the
Wait forms are available) holding no item.

`)
	b.WriteString("| Operation |")
	for _, c := range badColumns {
		b.WriteString(" " + c.name + " |")
	}
	b.WriteString("\n|---|")
	for range badColumns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, op := range badOps {
		b.WriteString("| " + op.name + " |")
		for _, c := range badColumns {
			b.WriteString(" " + c.text + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("\n## Values, arguments and contents\n\n| Function | Input | Expected |\n|---|---|---|\n")
	for _, r := range badRows() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", r.fn, r.input, r.want)
	}
	return b.String()
}

// foreignVersionstampHead plants key(vs), vs before any commit's, at the
// head of a versionstamp-ordered queue holding one item: Dequeue and Peek
// fail with a ForeignKeyError naming it, and nothing is removed.
func foreignVersionstampHead(t *testing.T, key func(tuple.Versionstamp) tuple.Tuple) {
	ctx := context.Background()
	db := newDB(t)
	q := mustQueue(t, "foreign-vs", fdbqueue.WithVersionstampOrder())
	require.NoError(t, q.Enqueue(ctx, db, []byte("a"))) // stores the configuration
	k := plantForeign(t, db, q.Subspace(), key(tuple.Versionstamp{TransactionVersion: [10]byte{9: 1}}), []byte("x"))
	_, err := q.Dequeue(ctx, db)
	var fk *fdbqueue.ForeignKeyError
	require.ErrorAs(t, err, &fk)
	require.Equal(t, k, fk.Key)
	_, err = q.Peek(ctx, db)
	require.ErrorIs(t, err, fdbqueue.ErrForeignKey)
	require.Equal(t, 2, queueLen(t, db, q))
}

// plantForeign stores value at s's key for tup, a key the layers did not
// write, and returns the key.
func plantForeign(t *testing.T, db kv.Database, s fdbqueue.Subspace, tup tuple.Tuple, value []byte) []byte {
	key, err := s.Pack(tup)
	require.NoError(t, err)
	require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error { tr.Set(key, value); return nil }))
	return key
}

// panicCodec's Decode panics, as a buggy codec may on bytes it does not
// expect.
type panicCodec struct{}

func (panicCodec) Encode(v int) ([]byte, error) { return []byte(strconv.Itoa(v)), nil }
func (panicCodec) Decode([]byte) (int, error)   { panic("codec bug") }

// unwrapJoined returns the errors joined in err (errors.Join), if any.
func unwrapJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return nil
}
