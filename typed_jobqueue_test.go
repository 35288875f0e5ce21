package fdbqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// resizeArgs is a job's typed argument in these tests.
type resizeArgs struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

func mustTypedJobs[T any](t *testing.T, name string, codec fdbqueue.Codec[T], cfg fdbqueue.JobQueueConfig) *fdbqueue.TypedJobQueue[T] {
	t.Helper()
	return fdbqueue.NewTypedJobQueue(mustJobQueue(t, name, cfg), codec)
}

// Add, Lease and Ack with a struct argument: the job's fields reach the
// queue, the lease carries the decoded value with the Lease's fields
// promoted, and the stored bytes are the codec's.
func TestTypedJobQueueRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-jobs", fdbqueue.JSONCodec[resizeArgs]{}, fdbqueue.JobQueueConfig{Choice: 1})
	require.Equal(t, tj.JobQueue().Subspace(), tj.Subspace())

	low := resizeArgs{Image: "img-1", Width: 100}
	high := resizeArgs{Image: "img-2", Width: 200}
	rs, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[resizeArgs]{
		{Value: low, UniqueKey: "img-1", MaxAttempts: 3},
		{Value: high, Priority: 5},
		{Value: resizeArgs{Image: "later"}, Delay: time.Hour},
	})
	require.NoError(t, err)
	require.Len(t, rs, 3)
	dup, err := tj.Add(ctx, db, fdbqueue.TypedJob[resizeArgs]{Value: low, UniqueKey: "img-1"})
	require.NoError(t, err)
	require.Equal(t, fdbqueue.AddResult{ID: rs[0].ID, Duplicate: true}, dup)
	st, err := tj.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(2), st.Due)
	require.Equal(t, int64(1), st.Delayed)

	ls, err := tj.Lease(ctx, db, 5, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 2, "the delayed job is not due")
	require.Equal(t, high, ls[0].Value, "higher priority first")
	require.Equal(t, rs[1].ID, ls[0].JobID)
	require.Equal(t, int32(5), ls[0].Priority)
	require.Equal(t, low, ls[1].Value)
	require.Equal(t, "img-1", ls[1].UniqueKey)
	require.Equal(t, 3, ls[1].MaxAttempts)
	require.Equal(t, 1, ls[1].Attempt)
	want, err := json.Marshal(low)
	require.NoError(t, err)
	require.Equal(t, want, ls[1].Lease.Value, "the stored bytes are the codec's")
	for _, l := range ls {
		require.NoError(t, tj.JobQueue().Ack(ctx, db, l.Lease))
	}
	st, err = tj.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, fdbqueue.JobStats{Queued: 1, Delayed: 1}, st)
}

// A typed and an untyped handle on one subspace see the same jobs: what
// one adds the other leases, unique keys included.
func TestTypedJobQueueSharesTheSubspace(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	plain := mustJobQueue(t, "typed-shared", fdbqueue.JobQueueConfig{Choice: 1})
	tj := fdbqueue.NewTypedJobQueue(mustJobQueue(t, "typed-shared", fdbqueue.JobQueueConfig{Choice: 1}), fdbqueue.JSONCodec[resizeArgs]{})
	require.Equal(t, plain.Subspace(), tj.Subspace())

	a := resizeArgs{Image: "typed", Width: 1}
	r, err := tj.Add(ctx, db, fdbqueue.TypedJob[resizeArgs]{Value: a, UniqueKey: "k"})
	require.NoError(t, err)
	require.Equal(t, fdbqueue.AddResult{ID: r.ID, Duplicate: true}, mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("{}"), UniqueKey: "k"}),
		"the untyped handle sees the typed job's unique key")
	ls := mustLease(t, db, plain, 1, time.Minute)
	want, err := json.Marshal(a)
	require.NoError(t, err)
	require.Equal(t, r.ID, ls[0].JobID)
	require.Equal(t, want, ls[0].Value)
	require.NoError(t, plain.Release(ctx, db, ls[0], 0))

	b := resizeArgs{Image: "untyped", Width: 2}
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	rb := mustAdd(t, db, plain, fdbqueue.Job{Value: raw})
	tls, err := tj.Lease(ctx, db, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, tls, 2)
	got := map[fdbqueue.JobID]resizeArgs{tls[0].JobID: tls[0].Value, tls[1].JobID: tls[1].Value}
	require.Equal(t, map[fdbqueue.JobID]resizeArgs{r.ID: a, rb.ID: b}, got)
	for _, l := range tls {
		require.Equal(t, 1, l.Attempt, "%s: a new job, or one whose release gave its attempt back", l.JobID)
	}
	require.Equal(t, fdbqueue.JobStats{Leased: 2}, mustStats(t, db, plain))
}

// An encoded value of exactly 100,000 bytes is added and leased intact;
// one byte more fails with ErrValueTooLarge, alone or in a batch, and
// writes nothing.
func TestTypedJobQueueValueLimits(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-limits", fdbqueue.JSONCodec[string]{}, fdbqueue.JobQueueConfig{})
	fits := strings.Repeat("x", kv.MaxValueSize-2) // JSON adds two quotes
	over := fits + "x"

	_, err := tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: over})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
	require.ErrorIs(t, err, kv.ErrValueTooLarge)
	_, err = tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "small"}, {Value: over}})
	require.ErrorIs(t, err, fdbqueue.ErrValueTooLarge)
	require.Contains(t, err.Error(), "item 1", "the error names the job")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, tj.JobQueue()), "nothing written")

	_, err = tj.Add(ctx, db, fdbqueue.TypedJob[string]{Value: fits})
	require.NoError(t, err)
	ls, err := tj.Lease(ctx, db, 1, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls[0].Lease.Value, kv.MaxValueSize)
	require.Equal(t, fits, ls[0].Value)
}

// unencodable is a job argument that JSON cannot encode when V holds a
// channel.
type unencodable struct {
	V any `json:"v"`
	N int `json:"n"`
}

// A value the codec cannot encode fails Add and AddBatch with a
// *CodecError naming the job, before anything is written: none of the
// batch.
func TestTypedJobQueueEncodeError(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-encode", fdbqueue.JSONCodec[unencodable]{}, fdbqueue.JobQueueConfig{})
	_, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[unencodable]{{Value: unencodable{N: 1}}, {Value: unencodable{N: 2}}, {Value: unencodable{V: make(chan int)}, Priority: 7}})
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.Nil(t, ce.Raw)
	require.Nil(t, ce.Lease)
	require.Equal(t, int64(7), ce.Priority)
	require.Contains(t, err.Error(), "job 2", "the error names the job's index")
	var je *json.UnsupportedTypeError
	require.ErrorAs(t, err, &je, "the codec's error is wrapped")
	_, err = tj.Add(ctx, db, fdbqueue.TypedJob[unencodable]{Value: unencodable{V: make(chan int)}})
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, tj.JobQueue()), "nothing written")
}

// codecErrors returns every *CodecError in err, joined or not.
func codecErrors(t *testing.T, err error) []*fdbqueue.CodecError {
	t.Helper()
	errs := unwrapJoined(err)
	if errs == nil {
		errs = []error{err}
	}
	var out []*fdbqueue.CodecError
	for _, e := range errs {
		var ce *fdbqueue.CodecError
		require.ErrorAs(t, e, &ce)
		out = append(out, ce)
	}
	return out
}

// A leased job whose value does not decode is left out of Lease's result
// and reported in a *CodecError with its bytes and its lease, still held:
// the other leases come back with the error, nothing is lost, and the
// caller can dead-letter it with the lease.
func TestTypedJobQueueLeaseDecodeError(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	plain := mustJobQueue(t, "typed-decode", fdbqueue.JobQueueConfig{Choice: 1})
	tj := fdbqueue.NewTypedJobQueue(plain, intCodec{})
	ids := make([]fdbqueue.JobID, 0, 5)
	for i, v := range []string{"1", "x", "3", "y", "5"} {
		ids = append(ids, mustAdd(t, db, plain, fdbqueue.Job{Value: []byte(v), Priority: int32(10 - i)}).ID)
	}

	ls, err := tj.Lease(ctx, db, 5, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.Len(t, ls, 3)
	require.Equal(t, []int{1, 3, 5}, []int{ls[0].Value, ls[1].Value, ls[2].Value})
	ces := codecErrors(t, err)
	require.Len(t, ces, 2, "one *CodecError per job that did not decode")
	for i, c := range []struct {
		raw string
		id  fdbqueue.JobID
	}{{"x", ids[1]}, {"y", ids[3]}} {
		ce := ces[i]
		require.Equal(t, []byte(c.raw), ce.Raw)
		require.NotNil(t, ce.Lease)
		require.Equal(t, c.id, ce.Lease.JobID)
		require.Equal(t, int64(ce.Lease.Priority), ce.Priority)
		require.Contains(t, ce.Error(), c.id.String(), "the error names the job")
	}
	require.Equal(t, fdbqueue.JobStats{Leased: 5}, mustStats(t, db, plain), "every job leased, none lost")
	_, err = tj.Lease(ctx, db, 1, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the undecodable jobs are still leased")

	dead, err := plain.Nack(ctx, db, *ces[0].Lease, fdbqueue.NackOptions{NoRetry: true, Reason: ces[0].Error()})
	require.NoError(t, err)
	require.True(t, dead)
	require.NoError(t, plain.Release(ctx, db, *ces[1].Lease, 0))
	dj, err := tj.ListDead(ctx, db, nil, 10)
	require.NoError(t, err)
	require.Len(t, dj, 1)
	require.Equal(t, ids[1], dj[0].ID)
	require.Equal(t, []byte("x"), dj[0].Value)
	raw := mustLease(t, db, plain, 1, time.Minute)
	require.Equal(t, []byte("y"), raw[0].Value, "the released job is due again")
}

// A Decode that panics fails Lease as a decoding error does: the job stays
// leased, its bytes and lease in the *CodecError.
func TestTypedJobQueueLeaseDecodePanics(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	plain := mustJobQueue(t, "typed-panic", fdbqueue.JobQueueConfig{})
	tj := fdbqueue.NewTypedJobQueue(plain, panicCodec{})
	id := mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("boom")}).ID
	var ls []fdbqueue.TypedLease[int]
	var err error
	require.NotPanics(t, func() { ls, err = tj.Lease(ctx, db, 1, time.Minute) })
	require.Empty(t, ls)
	var ce *fdbqueue.CodecError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, []byte("boom"), ce.Raw)
	require.Equal(t, id, ce.Lease.JobID)
	require.Contains(t, ce.Error(), "Decode panicked")
	require.NoError(t, plain.Ack(ctx, db, *ce.Lease), "the lease is held and usable")
}

// typedPool runs tj.Run with handler and one worker until it has reported
// n outcomes, then stops it and returns them.
func typedPool[T any](t *testing.T, db kv.Database, tj *fdbqueue.TypedJobQueue[T], n int, handler fdbqueue.TypedHandler[T]) []fdbqueue.Outcome {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	outcomes := make(chan fdbqueue.Outcome, n)
	ran := make(chan error, 1)
	go func() {
		ran <- tj.Run(ctx, db, handler, fdbqueue.PoolOptions{Workers: 1, Logger: quietLog, OnOutcome: func(o fdbqueue.Outcome) {
			outcomes <- o // room for n: the test stops the pool after n
		}})
	}()
	var got []fdbqueue.Outcome
	for range n {
		got = append(got, recvWithin(t, outcomes, "a pool outcome"))
	}
	cancel()
	require.NoError(t, recvWithin(t, ran, "Run's return"))
	return got
}

// In a pool, a job whose value does not decode is never handed to the
// handler nor retried: it is dead-lettered after its one attempt, with a
// NoRetry wrapping the *CodecError as its outcome's error and the codec's
// error in its reason; the other jobs are handled as usual.
func TestTypedJobQueuePoolDecodeError(t *testing.T) {
	for _, c := range []struct {
		name   string
		codec  fdbqueue.Codec[int]
		reason string
	}{
		{"error", intCodec{}, "invalid syntax"},
		{"panic", panicCodec{}, "Decode panicked: codec bug"},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			plain := mustJobQueue(t, "typed-pool-"+c.name, fdbqueue.JobQueueConfig{Choice: 1, MaxAttempts: 5})
			tj := fdbqueue.NewTypedJobQueue(plain, c.codec)
			bad := mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("not a number"), Priority: 1})
			var handled []int
			outs := typedPool(t, db, tj, 1, func(ctx context.Context, task *fdbqueue.TypedTask[int]) error {
				handled = append(handled, task.Value())
				return nil
			})
			require.Empty(t, handled, "the handler never sees the job")
			o := outs[0]
			require.Equal(t, fdbqueue.DeadLettered, o.Result)
			require.Equal(t, bad.ID, o.Lease.JobID)
			var nr *fdbqueue.NoRetryError
			require.ErrorAs(t, o.Err, &nr)
			var ce *fdbqueue.CodecError
			require.ErrorAs(t, o.Err, &ce)
			require.Equal(t, []byte("not a number"), ce.Raw)
			require.Equal(t, bad.ID, ce.Lease.JobID)

			dj, err := tj.ListDead(context.Background(), db, nil, 10)
			require.NoError(t, err)
			require.Len(t, dj, 1)
			require.Equal(t, bad.ID, dj[0].ID)
			require.Equal(t, 1, dj[0].Attempts, "one attempt, not MaxAttempts")
			require.Equal(t, 5, dj[0].MaxAttempts)
			require.Contains(t, dj[0].Reason, "codec")
			require.Contains(t, dj[0].Reason, c.reason)
			require.Equal(t, []byte("not a number"), dj[0].Value, "its bytes are kept")
			require.Equal(t, fdbqueue.JobStats{Dead: 1}, mustStats(t, db, plain))
		})
	}
}

// The pool hands each job's decoded value to the handler, whose
// TypedTask gives the lease and acks in the handler's transaction.
func TestTypedJobQueuePoolHandlesValues(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	tj := mustTypedJobs(t, "typed-pool", fdbqueue.JSONCodec[resizeArgs]{}, fdbqueue.JobQueueConfig{Choice: 1})
	a := resizeArgs{Image: "a", Width: 10}
	ra, err := tj.Add(ctx, db, fdbqueue.TypedJob[resizeArgs]{Value: a})
	require.NoError(t, err)
	done := mustSubspace(t, "typed-pool-done")
	outs := typedPool(t, db, tj, 1, func(ctx context.Context, task *fdbqueue.TypedTask[resizeArgs]) error {
		if task.Lease().JobID != ra.ID || task.Value() != a {
			return fdbqueue.NoRetry(errors.New("wrong job"))
		}
		key, err := done.Pack(tuple.Tuple{task.Value().Image})
		if err != nil {
			return err
		}
		return db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(key, []byte("done"))
			return task.Ack(ctx, tr)
		})
	})
	require.Equal(t, fdbqueue.Acked, outs[0].Result, "%v", outs[0].Err)
	key, err := done.Pack(tuple.Tuple{"a"})
	require.NoError(t, err)
	v, err := kv.ReadTransact(ctx, db, func(tr kv.ReadTransaction) ([]byte, error) { return tr.Get(key).Get() })
	require.NoError(t, err)
	require.Equal(t, []byte("done"), v, "the effect committed with the ack")
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, tj.JobQueue()))
}

// LeaseWait decodes as Lease does: the values that decode come back as
// TypedLeases; one that does not is still leased, its lease in the
// *CodecError. The jobs are due, so the wait ends at once.
func TestTypedJobQueueLeaseWait(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	plain := mustJobQueue(t, "typed-wait", fdbqueue.JobQueueConfig{Choice: 1})
	tj := fdbqueue.NewTypedJobQueue(plain, intCodec{})
	mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("7"), Priority: 2})
	bad := mustAdd(t, db, plain, fdbqueue.Job{Value: []byte("seven"), Priority: 1}).ID
	ls, err := tj.LeaseWait(ctx, db, 2, time.Minute)
	require.ErrorIs(t, err, fdbqueue.ErrCodec)
	require.Len(t, ls, 1)
	require.Equal(t, 7, ls[0].Value)
	ces := codecErrors(t, err)
	require.Len(t, ces, 1)
	require.NotNil(t, ces[0].Lease)
	require.Equal(t, bad, ces[0].Lease.JobID)
	require.Equal(t, fdbqueue.JobStats{Leased: 2}, mustStats(t, db, plain), "both leased, none lost")
	require.NoError(t, plain.Ack(ctx, db, ls[0].Lease))
	require.NoError(t, plain.Ack(ctx, db, *ces[0].Lease))
	require.Equal(t, fdbqueue.JobStats{}, mustStats(t, db, plain))
}

// AddBatch passes each job's RunAt to the queue (the job is due then, not
// at once), and ListDead passes its cursor (the next page starts after
// it): the typed forms carry every argument of the JobQueue's.
func TestTypedJobQueueRunAtAndDeadCursor(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := newFakeClock()
	tj := mustTypedJobs(t, "typed-runat", fdbqueue.StringCodec{}, fdbqueue.JobQueueConfig{Clock: clock, MaxAttempts: 1})
	at := clock.Now().Add(time.Hour)
	rs, err := tj.AddBatch(ctx, db, []fdbqueue.TypedJob[string]{{Value: "at", RunAt: at}, {Value: "a"}, {Value: "b"}})
	require.NoError(t, err)
	info, err := tj.Job(ctx, db, rs[0].ID)
	require.NoError(t, err)
	require.True(t, info.DueAt.Equal(at), "due at RunAt: %v", info.DueAt)
	st, err := tj.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Delayed, "the RunAt job is not due yet")

	ls, err := tj.Lease(ctx, db, 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, ls, 2)
	for _, l := range ls {
		clock.Advance(time.Second) // distinct times of death
		dead, err := tj.JobQueue().Nack(ctx, db, l.Lease, fdbqueue.NackOptions{Reason: l.Value})
		require.NoError(t, err)
		require.True(t, dead)
	}
	first, err := tj.ListDead(ctx, db, nil, 1)
	require.NoError(t, err)
	require.Len(t, first, 1)
	next, err := tj.ListDead(ctx, db, first[0].Cursor, 1)
	require.NoError(t, err)
	require.Len(t, next, 1)
	require.Equal(t, []fdbqueue.JobID{ls[0].JobID, ls[1].JobID}, []fdbqueue.JobID{first[0].ID, next[0].ID}, "the second page starts after the first")
}
