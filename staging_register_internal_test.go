package fdbqueue

import (
	"bytes"
	"context"
	"fmt"
	mrand "math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

// stagedOnMemdb is a staged Queue at the subspace of name's bytes on a
// memdb of its own, closed when the test ends.
func stagedOnMemdb(t *testing.T, name string, cfg StagingConfig) (*memdb.DB, *Queue) {
	t.Helper()
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	q, err := NewQueue(SubspaceFromBytes([]byte(name)), WithStaging(cfg))
	require.NoError(t, err)
	return db, q
}

// TestRegistrationFailsAfterItsCleanup: a registration whose commit lands
// after the cleanup that read and cleared its result key (resolve, abandon)
// conflicts instead of leaving a request no one waits for. On FoundationDB
// a commit interrupted by a cancellation or a timeout goes on and can land
// that late (RYWImpl::commit, fdbclient/ReadYourWrites.actor.cpp); here the
// registration's transaction simply commits after the cleanup.
func TestRegistrationFailsAfterItsCleanup(t *testing.T) {
	ctx := context.Background()
	db, q := stagedOnMemdb(t, "late-reg", StagingConfig{})
	s := q.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	reg, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = reg.GetReadVersion().Get()
	require.NoError(t, err)
	require.NoError(t, w.register(reg, time.Now()))

	// The cleanup reads the result key and clears it, and commits first.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		v, err := tr.Get(w.resKey).Get()
		if err != nil {
			return err
		}
		require.Nil(t, v, "the registration has not landed")
		tr.Clear(w.resKey)
		return nil
	}))
	require.ErrorIs(t, reg.Commit(), kv.ErrNotCommitted, "a registration landing after its cleanup")
	reqs, err := s.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(ctx, db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left behind")
}

func kvGetRange(ctx context.Context, db kv.Database, r kv.KeyRange) ([]kv.KeyValue, error) {
	var kvs []kv.KeyValue
	err := db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		var err error
		kvs, err = tr.GetRange(r, kv.RangeOptions{}).GetSlice()
		return err
	})
	return kvs, err
}

// TestLateRegistrationOfACancelledDequeueWait: end to end, a DequeueWait
// cancelled while its registration's commit is in flight returns, having
// cleaned up; the registration then lands (memdb's HoldNextCommitLate, as
// FoundationDB's commit goes on after a cancellation) and must conflict
// with the cleanup, leaving no request in the line.
func TestLateRegistrationOfACancelledDequeueWait(t *testing.T) {
	db, q := stagedOnMemdb(t, "late-wait", StagingConfig{})
	held, release := db.HoldNextCommitLate()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := q.DequeueWait(ctx, db)
		done <- err
	}()
	select { // a failure bound only, as below
	case <-held: // the registration's commit is in flight
	case <-time.After(10 * time.Second):
		t.Fatal("the registration's commit was not in flight")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled DequeueWait did not return")
	}
	release() // the registration lands now, after the cleanup
	reqs, err := q.stage.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(context.Background(), db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left in the line")
}

// TestRegistrationFailsAfterResolve: the step after a registration whose
// commit had an unknown outcome (resolve) finds no marker at the result
// key; it clears the key, so that it commits a write: a registration that
// lands after it conflicts (its read conflict on the key) instead of
// leaving a request no one waits for, while the waiter files a new one.
func TestRegistrationFailsAfterResolve(t *testing.T) {
	ctx := context.Background()
	db, q := stagedOnMemdb(t, "late-resolve", StagingConfig{})
	s := q.stage
	w := &waiter[[]byte]{s: s, db: db, o: s.journal.begin(db, nil)}
	reg, err := db.CreateTransaction(ctx)
	require.NoError(t, err)
	_, err = reg.GetReadVersion().Get()
	require.NoError(t, err)
	require.NoError(t, w.register(reg, time.Now()))

	out, err := kv.Transact(ctx, db, func(tr kv.Transaction) (outcome[[]byte], error) {
		return w.resolve(tr)
	})
	require.NoError(t, err)
	require.True(t, out.forget, "no marker: the registration did not happen, as far as resolve can tell")
	require.ErrorIs(t, reg.Commit(), kv.ErrNotCommitted, "a registration landing after resolve")
	reqs, err := s.reqs.Range()
	require.NoError(t, err)
	kvs, err := kvGetRange(ctx, db, reqs)
	require.NoError(t, err)
	require.Empty(t, kvs, "no request is left behind")
}

// zeros is an entropy source of 0x00 bytes only.
type zeros struct{}

func (zeros) Read(b []byte) (int, error) { clear(b); return len(b), nil }

// TestStagedKeysFitExactly: the staged constructors' limit on the prefix
// (stageSide.keysFit) is where the engine's is. On the longest prefix
// they accept, a registration at the clock that makes the longest request
// ID (the Unix epoch: every time byte 0x00, escaped to two bytes) commits,
// and so does the longest result, an item of the longest key and value in
// two chunks; on the next prefix the same registration fails with
// key_too_large, while one at a time without 0x00 bytes still commits
// there: the clock decided, before the constructors refused that prefix.
// FoundationDB checks a versionstamped key's argument, its 4-byte offset
// included, against the key limit (key.size() > getMaxWriteKeySize in
// ReadYourWritesTransaction::atomicOp, fdbclient/ReadYourWrites.actor.cpp).
func TestStagedKeysFitExactly(t *testing.T) {
	prefix := func(p int) Subspace { return SubspaceFromBytes(bytes.Repeat([]byte{'p'}, p)) }
	// Entropy of zeros: the random bytes are as near 0x00 as they get.
	// Without a journal, which refuses long prefixes of its own.
	opts := []Option{WithEntropy(zeros{}), WithoutIdempotency()}
	t.Run("queue", func(t *testing.T) {
		stagedKeysFitExactly(t, func(p int) *stageSide[[]byte] {
			q, err := NewQueue(prefix(p), opts...)
			require.NoError(t, err)
			return q.stage
		})
	})
	for _, max := range []bool{false, true} {
		t.Run(fmt.Sprintf("priority queue, max %v", max), func(t *testing.T) {
			stagedKeysFitExactly(t, func(p int) *stageSide[Item] {
				pq, err := NewPriorityQueue(prefix(p), opts...)
				require.NoError(t, err)
				return pq.side(max)
			})
		})
	}
}

// stagedKeysFitExactly is TestStagedKeysFitExactly on the side that
// side(p) makes on a p-byte prefix (a handle without staging, which the
// constructors do not check).
func stagedKeysFitExactly[T any](t *testing.T, side func(p int) *stageSide[T]) {
	ctx := context.Background()
	epoch := time.UnixMicro(0)
	noZeros := time.UnixMicro(0x0101010101010101)
	// From the longest prefix both constructors accept without a journal
	// (a PriorityQueue's item keys: itemKeysFit), above the staged limit.
	p := 9_960
	for side(p).keysFit() != nil {
		p--
	}
	require.ErrorIs(t, side(p+1).keysFit(), ErrInvalidArgument)
	require.ErrorIs(t, side(p+1).keysFit(), kv.ErrKeyTooLarge)

	// register files a request on s at now, in a database of its own, and
	// returns the database.
	register := func(s *stageSide[T], now time.Time) (*memdb.DB, []byte, error) {
		db := memdb.New()
		t.Cleanup(func() { _ = db.Close() })
		w := &waiter[T]{s: s, db: db, o: s.journal.begin(db, nil)}
		err := db.Transact(ctx, func(tr kv.Transaction) error { return w.register(tr, now) })
		return db, w.rid, err
	}
	s := side(p)
	db, rid, err := register(s, epoch)
	require.NoError(t, err, "a registration at the epoch on a %d-byte prefix", p)
	longest, err := tuple.Tuple{longestRID()}.Pack()
	require.NoError(t, err)
	packed, err := tuple.Tuple{rid}.Pack()
	require.NoError(t, err)
	require.Len(t, packed, len(longest), "the request ID at the epoch is the longest")
	req, res := s.longestKeys()
	reqs, err := kvGetRange(ctx, db, s.reqRange)
	require.NoError(t, err)
	require.Len(t, reqs, 1)
	require.Len(t, reqs[0].Key, req-4, "the request key is its argument without the offset")
	require.Equal(t, kv.MaxKeySize, req, "on the longest prefix accepted, the longest request key's argument is at the limit")

	// The longest result: the second chunk's key is res bytes.
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		setChunked(tr, s.resKey(rid), encodeResult(epoch, bytes.Repeat([]byte{'k'}, kv.MaxKeySize), bytes.Repeat([]byte{'v'}, kv.MaxValueSize)))
		return nil
	}))
	results, err := kvGetRange(ctx, db, s.resRange)
	require.NoError(t, err)
	require.Len(t, results, 2, "the result and its second chunk")
	require.Len(t, results[1].Key, res)

	// One byte longer: the clock decides.
	_, _, err = register(side(p+1), epoch)
	require.ErrorIs(t, err, kv.ErrKeyTooLarge, "a registration at the epoch on a %d-byte prefix", p+1)
	_, _, err = register(side(p+1), noZeros)
	require.NoError(t, err, "a registration at a time without 0x00 bytes on a %d-byte prefix", p+1)

	// No time packs longer than the epoch.
	for range 1000 {
		rid, err := s.st.newRID(time.UnixMicro(mrand.Int64()))
		require.NoError(t, err)
		packed, err := tuple.Tuple{rid}.Pack()
		require.NoError(t, err)
		require.LessOrEqual(t, len(packed), len(longest))
	}
}
