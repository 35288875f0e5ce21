package memdb_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/require"
)

func TestReadYourWritesPointReads(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "db-a")
	mustSet(t, db, "b", "db-b")
	mustSet(t, db, "n", string(le64(5)))
	tr := newTx(t, db)
	tr.Set([]byte("a"), []byte("mine"))
	tr.Clear([]byte("b"))
	tr.Add([]byte("n"), le64(2))
	tr.Add([]byte("fresh"), le64(7))
	require.Equal(t, "mine", string(get(t, tr, "a")))
	require.Nil(t, get(t, tr, "b"), "a cleared key reads as missing")
	require.Equal(t, le64(7), get(t, tr, "n"), "an atomic op applies on top of the database value")
	require.Equal(t, le64(7), get(t, tr, "fresh"), "an atomic op on a missing key counts from zero")
	require.Equal(t, "mine", string(get(t, tr.Snapshot(), "a")), "snapshot reads see the transaction's writes")
}

func TestReadYourWritesRangeRead(t *testing.T) {
	db, _ := newDB(t)
	for _, k := range []string{"k1", "k2", "k3", "k4", "k5", "k6"} {
		mustSet(t, db, k, "db")
	}
	mustSet(t, db, "k7", string(le64(1)))
	tr := newTx(t, db)
	tr.Set([]byte("k0"), []byte("new"))           // before every db key
	tr.ClearRange(rng("k2", "k4"))                // drops k2, k3
	tr.Set([]byte("k3"), []byte("again"))         // set inside the cleared range
	tr.Clear([]byte("k5"))                        // point clear
	tr.Add([]byte("k7"), le64(1))                 // atomic on a db key
	tr.Set([]byte("k55"), []byte("between"))      // interleaved with db keys
	tr.CompareAndClear([]byte("k6"), []byte("x")) // no match: k6 stays, unknown until read
	want := []string{"k0", "k1", "k3", "k4", "k55", "k6", "k7"}

	kvs, err := tr.GetRange(rng("k", "l"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, want, keys(kvs))
	require.Equal(t, "again", string(kvs[2].Value))
	require.Equal(t, le64(2), kvs[6].Value)

	rev, err := tr.GetRange(rng("k", "l"), kv.RangeOptions{Reverse: true}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"k7", "k6", "k55", "k4", "k3", "k1", "k0"}, keys(rev))

	lim, err := tr.GetRange(rng("k", "l"), kv.RangeOptions{Limit: 3}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, want[:3], keys(lim))
	lim, err = tr.GetRange(rng("k", "l"), kv.RangeOptions{Limit: 2, Reverse: true}).GetSlice()
	require.NoError(t, err)
	require.Equal(t, []string{"k7", "k6"}, keys(lim))

	var got []string
	it := tr.GetRange(rng("k", "l"), kv.RangeOptions{}).Iterator()
	for it.Next() {
		got = append(got, string(it.KeyValue().Key))
	}
	require.NoError(t, it.Err())
	require.Equal(t, want, got, "the iterator sees the same merged view")
}

func TestIteratorStreamsLargeRanges(t *testing.T) {
	db, _ := newDB(t)
	const n = 5000
	ctx := t.Context()
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range n {
			tr.Set(key4(i), []byte("v"))
		}
		return nil
	}))
	for _, mode := range []kv.StreamingMode{kv.StreamingModeIterator, kv.StreamingModeWantAll, kv.StreamingModeExact} {
		for _, reverse := range []bool{false, true} {
			tr := newTx(t, db)
			before := db.Stats().RangeReads
			it := tr.GetRange(rng("", "\xff"), kv.RangeOptions{Reverse: reverse, Mode: mode, Limit: 4321}).Iterator()
			count, prev := 0, ""
			for it.Next() {
				k := string(it.KeyValue().Key)
				if count > 0 {
					require.Equal(t, !reverse, k > prev, "keys out of order")
				}
				prev = k
				count++
			}
			require.NoError(t, it.Err())
			require.Equal(t, 4321, count, "the limit is honoured across batches")
			if mode == kv.StreamingModeIterator {
				require.Greater(t, db.Stats().RangeReads-before, int64(3), "iterator mode streams in several batches")
			}
		}
	}
}

func key4(i int) []byte { return []byte{'k', byte(i >> 16), byte(i >> 8), byte(i)} }

func TestSnapshotReadsAddNoConflicts(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "0")
	tr := newTx(t, db)
	get(t, tr.Snapshot(), "k")
	_, err := tr.Snapshot().GetRange(rng("a", "z"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	mustSet(t, db, "k", "1")
	mustSet(t, db, "m", "1")
	tr.Set([]byte("out"), []byte("x"))
	require.NoError(t, tr.Commit(), "snapshot reads must not make the transaction conflict")
}

// A versionstamped key's range is unreadable to its own transaction, as in
// FDB (getVersionstampKeyRange in Atomic.h, accessed_unreadable from
// RYWIterator.cpp): reads reaching it fail, reads stopping short succeed.
func TestVersionstampedKeyRangeUnreadableToOwnReads(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "a", "1")
	tr := newTx(t, db)
	tmpl := append([]byte("vs/"), make([]byte, 10)...)
	tmpl = append(tmpl, 3, 0, 0, 0)
	tr.SetVersionstampedKey(tmpl, []byte("v"))
	_, err := tr.GetRange(rng("vs/", "vs0"), kv.RangeOptions{}).GetSlice()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable)
	_, err = tr.Snapshot().GetRange(rng("a", "z"), kv.RangeOptions{Reverse: true, Limit: 1}).GetSlice()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable)
	_, err = tr.Get(append([]byte("vs/"), bytes.Repeat([]byte{0xff}, 10)...)).Get()
	require.ErrorIs(t, err, kv.ErrAccessedUnreadable)
	kvs, err := tr.GetRange(rng("a", "z"), kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err, "a read that stops before the range")
	require.Len(t, kvs, 1)
	v, err := tr.Get([]byte("vs.")).Get()
	require.NoError(t, err, "a key before the range")
	require.Nil(t, v)
	require.ErrorIs(t, tr.Commit(), kv.ErrAccessedUnreadable,
		"a failed read fails the commit (FDB's commit awaits reading, which keeps failed reads)")
	after := newTx(t, db)
	kvs, err = after.GetRange(rng("vs/", "vs0"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Empty(t, kvs, "the failed commit wrote nothing")

	tr = newTx(t, db)
	tr.SetVersionstampedKey(tmpl, []byte("v"))
	kvs, err = tr.GetRange(rng("a", "z"), kv.RangeOptions{Limit: 1}).GetSlice()
	require.NoError(t, err, "a read that stops before the range")
	require.Len(t, kvs, 1)
	require.NoError(t, tr.Commit(), "reads that stopped short leave the commit alone")
	kvs, err = newTx(t, db).GetRange(rng("vs/", "vs0"), kv.RangeOptions{}).GetSlice()
	require.NoError(t, err)
	require.Len(t, kvs, 1)
}

func TestVersionstampedValueUnreadableInOwnTransaction(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	val := append([]byte("p"), make([]byte, 10)...)
	val = append(val, 1, 0, 0, 0)
	tr.SetVersionstampedValue([]byte("k"), val)
	_, err := tr.Get([]byte("k")).Get()
	var e kv.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, 1036, e.Code, "accessed_unreadable, as FDB")
	_, err = tr.GetRange(rng("a", "z"), kv.RangeOptions{}).GetSlice()
	require.ErrorAs(t, err, &e)
	require.Equal(t, 1036, e.Code)
	require.ErrorIs(t, tr.Commit(), kv.ErrAccessedUnreadable, "the failed reads fail the commit")
}

// With a latency model a range read's first batch is in flight after
// GetRange returns; Commit waits for it (as FDB's RYWImpl::commit waits on
// ryw->reading), so its read conflict range is part of the commit even if
// the result is never consumed.
func TestCommitWaitsForRangeReadInFlight(t *testing.T) {
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: 20 * time.Millisecond, Max: 20 * time.Millisecond}}))
	mustSet(t, db, "b", "1")
	tr := newTx(t, db)
	_, err := tr.GetReadVersion().Get()
	require.NoError(t, err)
	tr.GetRange(rng("a", "z"), kv.RangeOptions{}) // in flight, never consumed
	mustSet(t, db, "c", "1")
	tr.Set([]byte("x"), []byte("y"))
	require.ErrorIs(t, tr.Commit(), kv.ErrNotCommitted)
}

// A read issued while the commit is in flight fails with used_during_commit
// and fails the commit with it; the commit may have applied.
func TestReadDuringCommitFailsCommit(t *testing.T) {
	db, _ := newDB(t)
	tr := newTx(t, db)
	tr.Set([]byte("k"), []byte("v"))
	held, release := db.HoldNextCommit()
	defer release()
	done := make(chan error, 1)
	go func() { done <- tr.Commit() }()
	<-held
	it := tr.GetRange(rng("a", "z"), kv.RangeOptions{}).Iterator()
	require.False(t, it.Next())
	require.ErrorIs(t, it.Err(), kv.ErrUsedDuringCommit)
	err := <-done
	require.ErrorIs(t, err, kv.ErrUsedDuringCommit)
	require.True(t, kv.MaybeCommitted(err))
	v, err := tr.GetCommittedVersion()
	require.NoError(t, err)
	require.Equal(t, int64(-1), v, "the commit did not report success: no committed version")
}
