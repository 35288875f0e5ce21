package fdbqueue_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// recordKeys lists the journal keys l keeps under id.
func recordKeys(t testing.TB, db kv.Database, q *fdbqueue.Queue, id fdbqueue.OpID) [][]byte {
	t.Helper()
	return rangeKeys(t, db, fdbqueue.JournalRecordRange(q, id))
}

// enqueueAs enqueues v with q in a transaction of the caller's under id:
// its record stays until it expires.
func enqueueAs(t testing.TB, db kv.Database, q *fdbqueue.Queue, id fdbqueue.OpID, v string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		return q.Enqueue(ctx, tr, []byte(v), fdbqueue.WithOpID(id))
	}))
}

// Handles of one queue made with different retentions: an expiry cleared
// every record older than twice its own handle's retention, so a handle
// with a short one cleared the records of another's operations that were
// still within theirs. Here A (the default retention, ten minutes) takes
// "first" with a Dequeue whose commit landed although the call failed
// with a maybe-committed error; B (one second) works; three seconds later
// A recovers the item with the same ID. It got "second": B's expiry had
// cleared A's record, and "first" was lost. The queue now keeps records
// for twice the largest retention any handle declared.
func TestJournalShortRetentionKeepsOtherHandlesRecords(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	sub := mustSubspace(t, "test", "ret-mixed")
	qA, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now))
	require.NoError(t, err)
	qB, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Second))
	require.NoError(t, err)
	require.NoError(t, qA.EnqueueBatch(ctx, db, [][]byte{[]byte("first"), []byte("second")}))

	id := fdbqueue.OpIDAt(clock.Now())
	release, err := interruptCommit(t, db, func(ctx context.Context) error {
		_, err := qA.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		return err
	})
	require.True(t, kv.MaybeCommitted(err), "an interrupted commit may have applied: %v", err)
	release() // it did
	require.NotEmpty(t, recordKeys(t, db, qA, id))

	clock.Advance(3 * time.Second)
	for i := range 1100 { // 17 expiries: every shard swept
		require.NoError(t, qB.Enqueue(ctx, db, []byte{byte(i)}))
	}
	got, err := qA.Dequeue(ctx, db, fdbqueue.WithOpID(id))
	require.NoError(t, err)
	require.Equal(t, "first", string(got), "A's record survived B's expiry: the recovery returns the item it took")
}

// Records are kept for twice the largest retention any handle declared,
// and cleared after that, whichever handle expires them: one with a
// short retention keeps the records of one with a long one (and its own)
// that long; one with a long retention clears the records of one with a
// short one once they are old enough for every handle, not later.
func TestJournalRecordsKeptForTheLargestRetention(t *testing.T) {
	const short, long = time.Minute, time.Hour
	for _, sweeper := range []time.Duration{short, long} {
		t.Run(sweeper.String(), func(t *testing.T) {
			ctx := context.Background()
			db := newDB(t)
			clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
			sub := mustSubspace(t, "test", "ret-largest")
			handle := func(d time.Duration) *fdbqueue.Queue {
				q, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(d))
				require.NoError(t, err)
				return q
			}
			qS, qL, qX := handle(short), handle(long), handle(sweeper)
			fdbqueue.SetJournalExpiryEvery(qX, 1)
			sweep := func() {
				for i := range 17 { // every shard, and the layout before shards
					require.NoError(t, qX.Enqueue(ctx, db, []byte{byte(i)}))
				}
			}
			idS, idL := fdbqueue.OpIDAt(clock.Now()), fdbqueue.OpIDAt(clock.Now())
			enqueueAs(t, db, qS, idS, "s")
			enqueueAs(t, db, qL, idL, "l")

			clock.Advance(2*long - time.Minute)
			sweep()
			require.NotEmpty(t, recordKeys(t, db, qS, idS), "the short handle's record, younger than twice the long retention")
			require.NotEmpty(t, recordKeys(t, db, qL, idL), "the long handle's record, within twice its retention")

			clock.Advance(time.Minute + long/64 + time.Second) // past the cutoff by more than a sweep step
			sweep()
			require.Empty(t, recordKeys(t, db, qS, idS), "older than twice every retention: expired")
			require.Empty(t, recordKeys(t, db, qL, idL), "older than twice every retention: expired")
		})
	}
}

// An expiry's cutoff is now less twice the retention kept: with a
// retention of decades the cutoff fell before 1970, a negative number
// that, written as an unsigned one, made the expiry clear every record.
// A handle's declaration now spreads its retention to every handle.
func TestJournalRetentionOfDecadesClearsNothing(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	sub := mustSubspace(t, "test", "ret-decades")
	qH, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(100*365*24*time.Hour))
	require.NoError(t, err)
	qS, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Minute))
	require.NoError(t, err)
	idH, idS := fdbqueue.OpIDAt(clock.Now()), fdbqueue.OpIDAt(clock.Now())
	enqueueAs(t, db, qH, idH, "h")
	enqueueAs(t, db, qS, idS, "s")
	clock.Advance(time.Hour)
	for _, q := range []*fdbqueue.Queue{qH, qS} {
		fdbqueue.SetJournalExpiryEvery(q, 1)
		for i := range 17 {
			require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
		}
	}
	require.NotEmpty(t, recordKeys(t, db, qH, idH))
	require.NotEmpty(t, recordKeys(t, db, qS, idS))
}

// An expiry reads the declared retention with a snapshot read and adds
// its read conflict key (journal.declare): an expiry that read it before
// a larger retention was declared, together with the first record that
// relies on it, must not commit after them and clear that record. Here B
// (one second) expires in a transaction of its caller's that read the
// declared retention while nothing was declared; A (an hour) then
// records, ten seconds after making its operation's ID, and declares;
// B's commit must conflict (kv.ErrNotCommitted: FoundationDB checks a
// read conflict range against the writes committed after the read
// version, fdbserver/Resolver.actor.cpp), and A's retry finds its record.
func TestJournalExpiryConflictsWithALaterDeclaration(t *testing.T) {
	ctx := context.Background()
	db := newDB(t)
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	sub := mustSubspace(t, "test", "ret-race")
	qA, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Hour))
	require.NoError(t, err)
	qB, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(clock.Now), fdbqueue.WithJournalRetention(time.Second))
	require.NoError(t, err)
	idA := fdbqueue.OpIDAt(clock.Now().Add(-10 * time.Second))
	idA[8] = 0 // shard 0: in the shards B's expiry clears
	// B's first operation stores the queue's configuration (whose first
	// write bumps the metadata version, which every operation reads: A's
	// storing it would make B conflict anyway) and declares one second.
	require.NoError(t, qB.Enqueue(ctx, db, []byte("w")))

	fdbqueue.PrimeExpiry(qB)
	trB, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	require.NoError(t, qB.Enqueue(ctx, trB, []byte("b"), fdbqueue.WithOpID(fdbqueue.OpIDAt(clock.Now()))))
	enqueueAs(t, db, qA, idA, "a")
	require.ErrorIs(t, trB.Commit(), kv.ErrNotCommitted, "B's expiry read the declared retention before A declared")

	enqueueAs(t, db, qA, idA, "a") // A's retry
	require.Equal(t, []string{"w", "a"}, drain(t, db, qA), "a enqueued once")
}

// declSpy counts, in the transactions it runs, the reads of the declared
// retention's key and the atomic Max writes to it.
type declSpy struct {
	kv.Database
	key          []byte
	reads, maxes atomic.Int64
}

func (d *declSpy) Transact(ctx context.Context, fn func(kv.Transaction) error) error {
	return d.Database.Transact(ctx, func(tr kv.Transaction) error { return fn(&declSpyTx{tr, d}) })
}

type declSpyTx struct {
	kv.Transaction
	d *declSpy
}

func (t *declSpyTx) Max(key, param []byte) {
	if bytes.Equal(key, t.d.key) {
		t.d.maxes.Add(1)
	}
	t.Transaction.Max(key, param)
}

func (t *declSpyTx) Snapshot() kv.ReadTransaction {
	return &declSpySnap{t.Transaction.Snapshot(), t.d}
}

func (t *declSpyTx) Get(key []byte) kv.FutureValue {
	if bytes.Equal(key, t.d.key) {
		t.d.reads.Add(1)
	}
	return t.Transaction.Get(key)
}

type declSpySnap struct {
	kv.ReadTransaction
	d *declSpy
}

func (s *declSpySnap) Get(key []byte) kv.FutureValue {
	if bytes.Equal(key, s.d.key) {
		s.d.reads.Add(1)
	}
	return s.ReadTransaction.Get(key)
}

// Declarations are rare and so are reads of the declared retention: a
// handle writes it only while it does not know the queue keeps at least
// its retention, reads it until then, and after that only when it
// expires (one operation in 64). Were it written by every operation, or
// each time it was read, every expiry (which conflicts on it) would
// conflict with concurrent operations.
func TestJournalDeclarationsAreRare(t *testing.T) {
	ctx := context.Background()
	raw := newDB(t)
	sub := mustSubspace(t, "test", "ret-rare")
	var handles []*fdbqueue.Queue
	for _, d := range []time.Duration{time.Minute, time.Hour, 10 * time.Minute} {
		q, err := fdbqueue.NewQueue(sub, fdbqueue.WithJournalRetention(d))
		require.NoError(t, err)
		handles = append(handles, q)
	}
	db := &declSpy{Database: raw, key: fdbqueue.JournalDeclaredKey(handles[0])}
	const ops = 200
	for i := range ops {
		for _, q := range handles {
			require.NoError(t, q.Enqueue(ctx, db, []byte{byte(i)}))
		}
	}
	require.EqualValues(t, 2, db.maxes.Load(), "declared by the first handle and by the one with the larger retention after it, once each")
	// Per handle: its first operation, which finds the key holds its
	// retention (the first two handles' second too, after their
	// declarations), and its expiries.
	require.EqualValues(t, 3*(1+ops/64)+2, db.reads.Load())
}

// A call that settles an operation under its ID measures the operation's
// age once the journal record's read returned, not only before its read
// version is known. FoundationDB's read version is a future
// (fdb_transaction_get_read_version in bindings/c/fdb_c.cpp, which every
// read waits for; a GRV proxy batches the requests), so it can be fixed
// after the commit of an expiry whose clock had passed twice the
// retention, while the age read earlier said "within the retention, so
// no expiry can have cleared the record". Here the settling Dequeue's read
// version request is held (HoldNextReadVersion) after it read the clock,
// while the clock passes twice the retention and another handle's expiry
// clears the record of the first call, which took "first". The settling
// call found no record and took "second", as if the first had taken
// nothing: "first" was lost to the caller. It now fails with
// ErrOperationExpired, taking nothing.
func TestJournalAgeMeasuredAfterReadVersion(t *testing.T) {
	ctx := context.Background()
	const retention = time.Minute
	clock := memdb.NewManualClock(time.Unix(1_700_000_000, 0))
	var mu sync.Mutex
	var clockRead chan struct{} // closed at the first clock reading once set
	now := func() time.Time {
		mu.Lock()
		if clockRead != nil {
			close(clockRead)
			clockRead = nil
		}
		mu.Unlock()
		return clock.Now()
	}
	// Read versions are requested in the background, as FDB's are.
	db := newDB(t, memdb.WithLatency(memdb.Latency{GRV: memdb.Span{Min: time.Microsecond, Max: time.Microsecond}}))
	sub := mustSubspace(t, "test", "ret-grv")
	handle := func() *fdbqueue.Queue {
		q, err := fdbqueue.NewQueue(sub, fdbqueue.WithClock(now), fdbqueue.WithJournalRetention(retention))
		require.NoError(t, err)
		return q
	}
	q, qX := handle(), handle()
	fdbqueue.SetJournalExpiryEvery(qX, 1)
	require.NoError(t, q.EnqueueBatch(ctx, db, [][]byte{[]byte("first"), []byte("second")}))

	// The first call, in a transaction of the caller's: its record stays
	// until it expires.
	id := fdbqueue.OpIDAt(clock.Now())
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		v, err := q.Dequeue(ctx, tr, fdbqueue.WithOpID(id))
		if err == nil && string(v) != "first" {
			return fmt.Errorf("took %q", v)
		}
		return err
	}))
	require.NotEmpty(t, recordKeys(t, db, q, id))

	clock.Advance(retention - time.Second) // within the retention
	read := make(chan struct{})
	mu.Lock()
	clockRead = read
	mu.Unlock()
	grvHeld, releaseGRV := db.HoldNextReadVersion()
	defer releaseGRV()
	type res struct {
		v   []byte
		err error
	}
	done := make(chan res, 1)
	go func() {
		v, err := q.Dequeue(ctx, db, fdbqueue.WithOpID(id))
		done <- res{v, err}
	}()
	recvWithin(t, read, "the settling call read the clock")
	recvWithin(t, grvHeld, "the settling call's read version requested and held")
	// Past twice the retention, by more than a sweep step; then an expiry
	// of every shard, and of the layout before shards.
	clock.Advance(retention + retention/64 + 2*time.Second)
	for i := range 17 {
		require.NoError(t, qX.Enqueue(ctx, db, []byte{byte(i)}))
	}
	require.Empty(t, recordKeys(t, db, q, id), "the first call's record expired")
	releaseGRV()
	r := recvWithin(t, done, "the settling call's return")
	require.ErrorIs(t, r.err, fdbqueue.ErrOperationExpired, "the record may have expired: the call cannot tell what the first one took (got %q)", r.v)
	v, err := q.Dequeue(ctx, db)
	require.NoError(t, err)
	require.Equal(t, "second", string(v), "the settling call took nothing")
}
