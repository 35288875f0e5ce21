package fdbqueue_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// countingDB is a Database wrapper whose Transact does something of its
// own (here: counts): without a MeterProvider, operations go through it.
type countingDB struct {
	*memdb.DB
	transacts int
}

func (d *countingDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	d.transacts++
	return d.DB.Transact(ctx, fn)
}

func TestWithoutMeterProviderOperationsUseTheDatabasesTransact(t *testing.T) {
	ctx := context.Background()
	db := &countingDB{DB: newDB(t)}
	q := mustQueue(t, "delegate")
	require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
	_, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 2, db.transacts)
	requireDepth(t, db, q, 0)
}

// Log lines go to WithLogger's logger (none by default), once per event
// that committed: a job dead-lettered after its lease expired on its last
// attempt, and an operation that may have committed, with its ID.
func TestLogLines(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clock := newFakeClock()
	jq := mustJobQueue(t, "logs", fdbqueue.JobQueueConfig{MaxAttempts: 1, Clock: clock}, fdbqueue.WithLogger(logger))
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("j")})
	mustLease(t, db, jq, 1, time.Second)
	clock.Advance(2 * time.Second)
	db.FailNextCommit(kv.ErrNotCommitted, false) // the first attempt's events are not reported
	_, err := jq.Lease(ctx, db, 1, time.Second)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "the expired job had no attempt left: dead-lettered")
	require.Equal(t, 1, strings.Count(buf.String(), "job dead-lettered"), buf.String())
	require.Contains(t, buf.String(), "reason=\"lease expired on the last attempt\"")
	require.Contains(t, buf.String(), "fdbqueue.queue=")

	q := mustQueue(t, "logs-q", fdbqueue.WithLogger(logger))
	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, q.Enqueue(ctx, tr, []byte("x")))
	require.NoError(t, tr.Commit())
	buf.Reset()
	once := &onceDB{DB: db}
	id := fdbqueue.NewOpID()
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	_, err = q.Dequeue(ctx, once, fdbqueue.WithOpID(id))
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	require.Contains(t, buf.String(), "may have committed")
	require.Contains(t, buf.String(), id.String())

	// The default logger discards: nothing is written anywhere we could
	// see, and operations work.
	q2 := mustQueue(t, "logs-default")
	require.NoError(t, q2.Enqueue(ctx, db, []byte("x")))
}

// Without the journal (WithoutIdempotency) an operation that may have
// committed cannot be settled: the queue made no ID, and a call under
// WithOpID applies the operation anew (journal.go: check reads nothing
// when the journal is off). The log line of such an operation must not
// tell the reader to call it again under its ID (it named the zero ID,
// and following it pushed the item a second time), but that it cannot be
// settled.
func TestLogLineMaybeCommittedWithoutJournal(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var buf bytes.Buffer
	pq := mustPQ(t, "logs-nojournal", fdbqueue.WithoutIdempotency(), fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err := pq.Push(ctx, &onceDB{DB: db}, []byte("x"), 1)
	require.True(t, kv.MaybeCommitted(err), "%v", err)
	line := buf.String()
	require.Contains(t, line, "may have committed")
	require.Contains(t, line, "cannot be settled", line)
	require.NotContains(t, line, "WithOpID", line)
	require.NotContains(t, line, "op_id=", "no ID names the operation: %s", line)

	// What the advice did: the call under the ID it named pushed again.
	require.NoError(t, pq.Push(ctx, db, []byte("x"), 1, fdbqueue.WithOpID(fdbqueue.OpID{})))
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 2, n, "a journal-less queue applies a call under an ID anew")
}

// With the journal, the line names the ID to settle the call under, once:
// the error it logs is the operation's own, not the *UnknownResultError
// that the call returns (which names the ID itself), and the ID is the
// one that error carries.
func TestLogLineMaybeCommittedWithJournal(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var buf bytes.Buffer
	pq := mustPQ(t, "logs-journal", fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	db.FailNextCommit(kv.ErrCommitUnknownResult, true)
	err := pq.Push(ctx, &onceDB{DB: db}, []byte("x"), 1)
	var ur *fdbqueue.UnknownResultError
	require.ErrorAs(t, err, &ur)
	line := buf.String()
	require.Contains(t, line, "op_id="+ur.ID.String(), line)
	require.Equal(t, 1, strings.Count(line, ur.ID.String()), "the ID appears once: %s", line)

	require.NoError(t, pq.Push(ctx, db, []byte("x"), 1, fdbqueue.WithOpID(ur.ID)), "settled")
	n, err := pq.Len(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, n, "pushed once")
}

// onceDB's transactions are not retried: an unknown commit result reaches
// the caller.
type onceDB struct{ *memdb.DB }

func (d *onceDB) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	tr, err := d.DB.CreateTransaction(ctx)
	if err != nil {
		return err
	}
	if err := tr.Options().SetRetryLimit(0); err != nil {
		return err
	}
	return kv.RetryLoop(ctx, tr, fn)
}

// An event is logged only if the transaction that carried it committed:
// a dead letter whose only attempt failed (the loop may not retry) is not
// logged, and the job is not dead. Inside a caller's transaction the event
// is logged when the operation returns (its commit is the caller's).
func TestLogLinesOnlyForCommittedEvents(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clock := newFakeClock()
	jq := mustJobQueue(t, "logs-committed", fdbqueue.JobQueueConfig{MaxAttempts: 1, Clock: clock}, fdbqueue.WithLogger(logger))
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("j")})
	mustLease(t, db, jq, 1, time.Second)
	clock.Advance(2 * time.Second) // the lease expires on the job's last attempt
	db.FailNextCommit(kv.ErrNotCommitted, false)
	_, err := jq.Lease(ctx, &onceDB{DB: db}, 1, time.Second)
	require.ErrorIs(t, err, kv.ErrNotCommitted)
	require.NotContains(t, buf.String(), "dead-lettered")
	st, err := jq.Stats(ctx, db)
	require.NoError(t, err)
	require.Zero(t, st.Dead)

	tr, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = jq.Lease(ctx, tr, 1, time.Second)
	require.ErrorIs(t, err, fdbqueue.ErrEmpty, "dead-lettered")
	require.Equal(t, 1, strings.Count(buf.String(), "job dead-lettered"), buf.String())
	require.NoError(t, tr.Commit())
	st, err = jq.Stats(ctx, db)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Dead)
}

// The queue's log lines name a job's attempt with the key the pool's
// lines use for it (attempt, the number of the lease: 1 for the first),
// so that one query finds every line about a job's attempt: the line of
// an expired lease taken over says which attempt expired.
func TestLogLineExpiredLeaseAttemptKey(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	clock := newFakeClock()
	jq := mustJobQueue(t, "logs-attempt", fdbqueue.JobQueueConfig{MaxAttempts: 3, Clock: clock}, fdbqueue.WithLogger(logger))
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("j")})
	first := mustLease(t, db, jq, 1, time.Second)
	require.Equal(t, 1, first[0].Attempt)
	clock.Advance(2 * time.Second)
	ls, err := jq.Lease(ctx, db, 1, time.Second)
	require.NoError(t, err)
	require.Equal(t, 2, ls[0].Attempt)
	line := buf.String()
	require.Equal(t, 1, strings.Count(line, "expired lease taken over"), line)
	require.Contains(t, line, " job="+first[0].JobID.String())
	require.Contains(t, line, " attempt=1", "the expired lease's attempt, under the pool's key")
	require.NotContains(t, line, "attempts=")
}

// What a queue logs does not depend on whether it has a MeterProvider:
// with one, its operations run their own retry loop (to see each
// commit's error), and that loop logged a line of its own at each
// commit_unknown_result ("commit outcome unknown; the retry consults the
// journal", without the operation's ID), which a queue without metrics
// never wrote. The retry's "found its journal record" line, with the ID,
// is the line for the event, either way.
func TestLogLinesSameWithAndWithoutMetrics(t *testing.T) {
	ctx := context.Background()
	lines := func(opts ...fdbqueue.Option) []string {
		t.Helper()
		db := newDB(t)
		var buf bytes.Buffer
		// No time, and the operation's ID (random) replaced: lines compare.
		h := slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "op_id" {
				return slog.Attr{}
			}
			return a
		}})
		q := mustQueue(t, "logs-metered", append(opts, fdbqueue.WithLogger(slog.New(h)))...)
		db.FailNextCommit(kv.ErrCommitUnknownResult, true) // applied: the retry finds its record
		require.NoError(t, q.Enqueue(ctx, db, []byte("x")))
		db.FailNextCommit(kv.ErrCommitUnknownResult, false) // not applied: the retry enqueues
		require.NoError(t, q.Enqueue(ctx, db, []byte("y")))
		n, err := q.Depth(ctx, db)
		require.NoError(t, err)
		require.Equal(t, int64(2), n)
		return strings.Split(strings.TrimSpace(buf.String()), "\n")
	}
	plain := lines()
	require.Len(t, plain, 1, "the replay of the applied commit: %q", plain)
	require.Contains(t, plain[0], "found its journal record")
	require.Equal(t, plain, lines(fdbqueue.WithMeterProvider(noop.NewMeterProvider())))
}

// An expired lease taken over is reported once the Lease that took it
// over commits: an attempt that conflicted took nothing over, so only its
// retry's takeover is logged (and counted in fdbqueue.lease.expired, in
// the same event).
func TestLogLineExpiredLeaseOnceAcrossARetry(t *testing.T) {
	db := newDB(t)
	var buf bytes.Buffer
	clock := newFakeClock()
	jq := mustJobQueue(t, "logs-expired-retry", fdbqueue.JobQueueConfig{MaxAttempts: 3, Clock: clock},
		fdbqueue.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	mustAdd(t, db, jq, fdbqueue.Job{Value: []byte("j")})
	mustLease(t, db, jq, 1, time.Second)
	clock.Advance(2 * time.Second) // the lease expires
	db.FailNextCommit(kv.ErrNotCommitted, false)
	ls := mustLease(t, db, jq, 1, time.Second)
	require.Len(t, ls, 1)
	require.Equal(t, 2, ls[0].Attempt, "the expired lease was taken over")
	require.Equal(t, 1, strings.Count(buf.String(), "expired lease taken over"), buf.String())
}
