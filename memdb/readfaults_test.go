package memdb_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

// The errors Faults.ReadErrors and Faults.ReadVersionErrors inject: what
// FDB's client lets through from a storage server's reply to a read
// (getValue and getRange, fdbclient/NativeAPI.actor.cpp, retry only
// wrong_shard_server and all_alternatives_failed), and what a GRV proxy
// answers an untagged, default-priority read version request with
// (fdbserver/GrvProxyServer.actor.cpp, extractReadVersion).
var (
	readFaultCodes = []kv.Error{kv.ErrTransactionTooOld, kv.ErrFutureVersion, kv.ErrProcessBehind}
	grvFaultCodes  = []kv.Error{kv.ErrGRVProxyMemoryLimit, kv.ErrDatabaseLocked}
)

// requireOneOf requires err to be one of codes and retryable, and returns
// its code.
func requireOneOf(t *testing.T, err error, codes []kv.Error, what string) kv.Error {
	t.Helper()
	var ke kv.Error
	require.True(t, errors.As(err, &ke), "%s: %v is not an FDB error", what, err)
	require.Contains(t, codes, ke, "%s: unexpected error %v", what, err)
	require.True(t, kv.IsRetryable(err), "%s: %v must be retryable", what, err)
	require.False(t, kv.MaybeCommitted(err), "%s: %v must not be maybe-committed", what, err)
	return ke
}

// latencies are the two ways memdb serves reads: at once, and in the
// background after a delay.
var latencies = []struct {
	name string
	opts []memdb.Option
}{
	{"no latency", nil},
	{"latency", []memdb.Option{memdb.WithLatency(memdb.Latency{
		GRV: memdb.Span{Max: 100 * time.Microsecond}, Read: memdb.Span{Max: 100 * time.Microsecond},
	})}},
}

// A failed read fails its future and the transaction's Commit with the
// same error, and the commit applies nothing: FDB's commit waits for every
// read issued (RYWImpl::commit waits on ryw->reading, an AndFuture that
// keeps a failed read's error, fdbclient/ReadYourWrites.actor.cpp),
// snapshot reads included (ReadYourWritesTransaction::get and getRange add
// every read to reading).
func TestReadErrorFailsReadAndCommit(t *testing.T) {
	reads := []struct {
		name string
		read func(tr kv.Transaction) error
	}{
		{"Get", func(tr kv.Transaction) error { _, err := tr.Get([]byte("k")).Get(); return err }},
		{"snapshot Get", func(tr kv.Transaction) error { _, err := tr.Snapshot().Get([]byte("k")).Get(); return err }},
		{"GetSlice", func(tr kv.Transaction) error {
			_, err := tr.GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("z")}, kv.RangeOptions{}).GetSlice()
			return err
		}},
		{"head read", func(tr kv.Transaction) error {
			_, err := tr.GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("z")}, kv.RangeOptions{Limit: 1}).GetSlice()
			return err
		}},
		{"snapshot iterator", func(tr kv.Transaction) error {
			it := tr.Snapshot().GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("z")}, kv.RangeOptions{}).Iterator()
			for it.Next() {
			}
			return it.Err()
		}},
	}
	for _, l := range latencies {
		for _, r := range reads {
			t.Run(l.name+"/"+r.name, func(t *testing.T) {
				db, _ := newDB(t, l.opts...)
				mustSet(t, db, "k", "v")
				db.SetFaults(memdb.Faults{ReadErrors: 1})
				tr := newTx(t, db)
				err := r.read(tr)
				code := requireOneOf(t, err, readFaultCodes, "the read")
				require.Equal(t, int64(1), db.Stats().InjectedReadErrors)
				db.SetFaults(memdb.Faults{})
				tr.Set([]byte("w"), []byte("x"))
				require.ErrorIs(t, tr.Commit(), code, "the commit of a transaction whose read failed fails with the read's error")
				_, ok := mustGet(t, db, "w")
				require.False(t, ok, "the commit must apply nothing")
				require.NoError(t, tr.OnError(code), "OnError retries a failed read's error")
				tr.Set([]byte("w"), []byte("x"))
				require.NoError(t, tr.Commit(), "the retry commits")
			})
		}
	}
}

// Reads the transaction answers from its own writes reach no storage
// server in FDB (its read-your-writes cache answers them), so they cannot
// fail there; nor do they in memdb.
func TestReadsOfOwnWritesDoNotFail(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, l.opts...)
			tr := newTx(t, db)
			_, err := tr.GetReadVersion().Get()
			require.NoError(t, err)
			db.SetFaults(memdb.Faults{ReadErrors: 1})
			tr.Set([]byte("k"), []byte("v"))
			tr.ClearRange(kv.KeyRange{Begin: []byte("c"), End: []byte("f")})
			v, err := tr.Get([]byte("k")).Get()
			require.NoError(t, err, "a key the transaction set")
			require.Equal(t, []byte("v"), v)
			_, err = tr.Get([]byte("d")).Get()
			require.NoError(t, err, "a key the transaction cleared")
			kvs, err := tr.GetRange(kv.KeyRange{Begin: []byte("c"), End: []byte("e")}, kv.RangeOptions{}).GetSlice()
			require.NoError(t, err, "a range the transaction cleared")
			require.Empty(t, kvs)
			// Two clears that touch clear one range (the second one ends
			// where the first begins): a read across the point where they
			// meet reads nothing from a storage server.
			tr.ClearRange(kv.KeyRange{Begin: []byte("a"), End: []byte("c")})
			kvs, err = tr.GetRange(kv.KeyRange{Begin: []byte("b"), End: []byte("d")}, kv.RangeOptions{}).GetSlice()
			require.NoError(t, err, "a range two touching clears of the transaction cover")
			require.Empty(t, kvs)
			_, err = tr.Get([]byte(kv.MetadataVersionKey)).Get()
			require.NoError(t, err, "the metadata version comes with the read version, not from a storage server")
			require.NoError(t, tr.Commit())
			require.Zero(t, db.Stats().InjectedReadErrors)
		})
	}
}

// A failed read version request fails GetReadVersion, every read of the
// transaction and the commit of its writes with the same error until
// OnError resets it: FDB's transaction keeps its failed read version
// future (TransactionState::startTransaction, fdbclient/NativeAPI.actor.cpp).
func TestReadVersionErrorIsKeptUntilReset(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, l.opts...)
			db.SetFaults(memdb.Faults{ReadVersionErrors: 1})
			tr := newTx(t, db)
			_, err := tr.GetReadVersion().Get()
			code := requireOneOf(t, err, grvFaultCodes, "GetReadVersion")
			db.SetFaults(memdb.Faults{})
			_, err = tr.GetReadVersion().Get()
			require.ErrorIs(t, err, code, "GetReadVersion again")
			_, err = tr.Get([]byte(kv.MetadataVersionKey)).Get()
			require.ErrorIs(t, err, code, "the metadata version key")
			_, err = tr.Snapshot().GetRange(kv.KeyRange{Begin: []byte("a"), End: []byte("z")}, kv.RangeOptions{Limit: 1}).GetSlice()
			require.ErrorIs(t, err, code, "a snapshot range read")
			tr.Set([]byte("w"), []byte("x"))
			require.ErrorIs(t, tr.Commit(), code, "the commit")
			require.Equal(t, int64(1), db.Stats().InjectedReadVersionErrors, "one request failed, once")
			_, ok := mustGet(t, db, "w")
			require.False(t, ok, "the commit must apply nothing")

			require.NoError(t, tr.OnError(code))
			_, err = tr.GetReadVersion().Get()
			require.NoError(t, err, "OnError's reset requests a new read version")
		})
	}
}

// A read-only transaction that issued no read commits whatever became of
// its read version request (FDB's commit of a read-only transaction sends
// nothing: Transaction::commitMutations), while a transaction that writes
// without having read requests a read version to commit at (tryCommit
// waits for startTransaction), which may fail.
func TestReadVersionErrorAndCommits(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, l.opts...)
			db.FailNextReadVersion(nil)
			tr := newTx(t, db)
			_, err := tr.GetReadVersion().Get()
			require.ErrorIs(t, err, kv.ErrGRVProxyMemoryLimit, "FailNextReadVersion's default error")
			require.NoError(t, tr.Commit(), "a read-only commit sends nothing")

			db.FailNextReadVersion(kv.ErrDatabaseLocked)
			tr = newTx(t, db)
			tr.Set([]byte("blind"), []byte("x"))
			require.ErrorIs(t, tr.Commit(), kv.ErrDatabaseLocked, "a blind write's commit needs a read version")
			_, ok := mustGet(t, db, "blind")
			require.False(t, ok, "the commit must apply nothing")
			require.Equal(t, int64(2), db.Stats().InjectedReadVersionErrors)
		})
	}
}

// A watch's read that fails fails the watch, not the commit: FDB's
// RYWImpl::watch adds a promise of its own to the reads the commit waits
// for and sets it even when its read fails (fdbclient/
// ReadYourWrites.actor.cpp).
func TestWatchReadErrorFailsOnlyTheWatch(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, l.opts...)
			db.FailNextRead(nil)
			tr := newTx(t, db)
			w := tr.Watch([]byte("k"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.ErrorIs(t, w.Wait(ctx), kv.ErrFutureVersion, "FailNextRead's default error fails the watch")
			tr.Set([]byte("w"), []byte("x"))
			require.NoError(t, tr.Commit())
			_, ok := mustGet(t, db, "w")
			require.True(t, ok)
		})
	}
}

// Each batch of a range read draws: an iterator fails at a later batch.
func TestReadErrorsDrawPerBatch(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	for i := range 100 {
		tr.Set([]byte{'k', byte(i)}, []byte("v"))
	}
	require.NoError(t, tr.Commit())
	// The first batch is read when GetRange is called; the next one fails.
	tr = newTx(t, db)
	it := tr.GetRange(kv.KeyRange{Begin: []byte("k"), End: []byte("l")}, kv.RangeOptions{}).Iterator()
	require.True(t, it.Next())
	db.FailNextRead(kv.ErrProcessBehind)
	n := 1
	for it.Next() {
		n++
	}
	require.ErrorIs(t, it.Err(), kv.ErrProcessBehind)
	require.Less(t, n, 100, "the iterator stops at the failed batch")
	require.ErrorIs(t, tr.Commit(), kv.ErrProcessBehind)
}

// Read faults come from the DB's seeded generator.
func TestReadFaultsAreDeterministicFromTheSeed(t *testing.T) {
	run := func(seed int64) []string {
		db, _ := newDB(t, memdb.WithSeed(seed), memdb.WithFaults(memdb.Faults{ReadErrors: 0.2, ReadVersionErrors: 0.1}))
		var out []string
		for range 100 {
			tr := newTx(t, db)
			_, err := tr.Get([]byte("k")).Get()
			if err == nil {
				out = append(out, "ok")
			} else {
				out = append(out, err.Error())
			}
		}
		return out
	}
	a, b, c := run(42), run(42), run(43)
	require.Equal(t, a, b, "the same seed injects the same faults")
	require.NotEqual(t, a, c, "another seed injects others")
	for _, e := range slices.Concat(readFaultCodes, grvFaultCodes) {
		require.Contains(t, a, e.Error(), "every kind is drawn")
	}
	require.Contains(t, a, "ok")
}

// Transact retries read faults like any retryable error and commits once.
func TestTransactRetriesReadFaults(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, append(l.opts, memdb.WithFaults(memdb.Faults{ReadErrors: 0.3, ReadVersionErrors: 0.2}))...)
			for range 50 {
				require.NoError(t, db.Transact(context.Background(), func(tr kv.Transaction) error {
					v, err := tr.Get([]byte("n")).Get()
					if err != nil {
						return err
					}
					tr.Set([]byte("n"), append(v, 'x'))
					return nil
				}))
			}
			db.SetFaults(memdb.Faults{})
			v, _ := mustGet(t, db, "n")
			require.Len(t, v, 50, "every increment committed exactly once")
			s := db.Stats()
			require.Positive(t, s.InjectedReadErrors)
			require.Positive(t, s.InjectedReadVersionErrors)
		})
	}
}

// FailReadAfter fails the read after the next n the database serves (reads
// answered by the transaction's own writes do not count); a negative n
// disarms it. FailReadVersionAfter likewise for read version requests.
func TestFailReadAfter(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	db.FailReadAfter(2, kv.ErrProcessBehind)
	tr.Set([]byte("own"), []byte("v"))
	get(t, tr, "own") // answered by the transaction: not counted
	get(t, tr, "a")
	get(t, tr, "b")
	_, err := tr.Get([]byte("c")).Get()
	require.ErrorIs(t, err, kv.ErrProcessBehind, "the third read the database serves")
	get(t, tr, "d") // once only

	db.FailReadAfter(0, nil)
	db.FailReadAfter(-1, nil)
	get(t, tr, "e") // disarmed
	require.Equal(t, int64(1), db.Stats().InjectedReadErrors)

	db.FailReadVersionAfter(1, nil)
	for i, want := range []error{nil, kv.ErrGRVProxyMemoryLimit, nil} {
		_, err := newTx(t, db).GetReadVersion().Get()
		if want == nil {
			require.NoError(t, err, "request %d", i)
		} else {
			require.ErrorIs(t, err, want, "request %d", i)
		}
	}
	require.Equal(t, int64(1), db.Stats().InjectedReadVersionErrors)
}

// A read-only transaction's commit fails with the error of a read whose
// read version request failed (RYWImpl::commit waits on reading, whatever
// the transaction wrote), but not with that of a watch's read (RYWImpl::watch
// gives the commit a promise of its own), in both ways memdb serves reads:
// the conformance suite's ReadOnlyCommitFailsWithAFailedRead and
// WatchReadVersionErrorFailsOnlyTheWatch without latency only.
func TestReadVersionErrorOfAReadOrAWatchAndReadOnlyCommits(t *testing.T) {
	for _, l := range latencies {
		t.Run(l.name, func(t *testing.T) {
			db, _ := newDB(t, l.opts...)
			db.FailNextReadVersion(kv.ErrDatabaseLocked)
			tr := newTx(t, db)
			_, err := tr.Get([]byte("k")).Get()
			require.ErrorIs(t, err, kv.ErrDatabaseLocked, "the read")
			require.ErrorIs(t, tr.Commit(), kv.ErrDatabaseLocked, "the read-only commit after the failed read")

			db.FailNextReadVersion(kv.ErrDatabaseLocked)
			tr = newTx(t, db)
			w := tr.Watch([]byte("k"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.ErrorIs(t, w.Wait(ctx), kv.ErrDatabaseLocked, "the watch")
			require.NoError(t, tr.Commit(), "the read-only commit after the watch's failed read")
		})
	}
}
