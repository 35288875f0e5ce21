package memdb_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// Under a latency model a range read is served after its delay, and it
// must see the transaction's versionstamped keys as they were when it was
// issued, as FoundationDB's does (its read walks the write map at the
// version the map had then: WriteMap::iterator,
// fdbclient/include/fdbclient/WriteMap.h): a versionstamped key written
// while the read is in flight neither fails it with accessed_unreadable
// nor, through it, the commit. Before, the read checked the unreadable
// ranges when served, and a staged waiter's registration, written while a
// read of the request line was in flight, failed its PopMin with 1036 now
// and then in the simulation. (kvtest's
// RangeReadIssuedBeforeVersionstampedKeySucceeds states the rule for every
// backend; only a read still in flight at the write tests it here.)
func TestRangeReadInFlightIgnoresLaterVersionstampedKeys(t *testing.T) {
	ctx := context.Background()
	// The read's delay leaves it in flight while the write is made: the
	// write follows at once, on the same goroutine.
	const delay = 50 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}))
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set([]byte("q/a"), []byte("1"))
		return nil
	}))
	key := append([]byte("q/"), make([]byte, 10)...)
	key = append(key, 2, 0, 0, 0) // the stamp's offset, 2, little-endian
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		inFlight := tr.GetRange(kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}, kv.RangeOptions{})
		tr.SetVersionstampedKey(key, []byte("v"))
		kvs, err := inFlight.GetSlice()
		if err != nil {
			return err
		}
		require.Len(t, kvs, 1, "what was there when the read was issued")
		return nil
	})
	require.NoError(t, err, "neither the read nor the commit fails")
	n := 0
	require.NoError(t, db.ReadTransact(ctx, func(tr kv.ReadTransaction) error {
		kvs, err := tr.GetRange(kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}, kv.RangeOptions{}).GetSlice()
		n = len(kvs)
		return err
	}))
	require.Equal(t, 2, n, "the versionstamped key was written")
}

// A range read in flight under a latency model sees the transaction's
// writes as they were when it was issued: a Set, a Clear and an atomic add
// made meanwhile (one to a key with an atomic add already) are not in its
// result, as on FoundationDB (see
// TestRangeReadInFlightIgnoresLaterVersionstampedKeys); a read issued
// after them sees them. Before, the read merged the writes as they were
// when it was served.
func TestRangeReadInFlightIgnoresLaterWrites(t *testing.T) {
	ctx := context.Background()
	const delay = 50 * time.Millisecond
	db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}))
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set([]byte("q/a"), []byte("1"))
		tr.Set([]byte("q/b"), []byte("2"))
		return nil
	}))
	names := func(kvs []kv.KeyValue) []string {
		var out []string
		for _, p := range kvs {
			out = append(out, string(p.Key)+"="+string(p.Value))
		}
		return out
	}
	err := db.Transact(ctx, func(tr kv.Transaction) error {
		tr.Set([]byte("q/0"), []byte("mine")) // before the read: in its view
		tr.Add([]byte("q/d"), []byte{'1'})    // before the read: in its view
		inFlight := tr.GetRange(r, kv.RangeOptions{})
		tr.Set([]byte("q/c"), []byte("3"))
		tr.Clear([]byte("q/a"))
		tr.Add([]byte("q/b"), []byte{1})
		tr.Set([]byte("q/0"), []byte("changed"))
		tr.Add([]byte("q/d"), []byte{1}) // a second operation of a key with one
		kvs, err := inFlight.GetSlice()
		if err != nil {
			return err
		}
		require.Equal(t, []string{"q/0=mine", "q/a=1", "q/b=2", "q/d=1"}, names(kvs), "the writes as they were at the read's issue")
		after, err := tr.GetRange(r, kv.RangeOptions{}).GetSlice()
		if err != nil {
			return err
		}
		require.Equal(t, []string{"q/0=changed", "q/b=3", "q/c=3", "q/d=2"}, names(after), "a read issued after the writes sees them")
		return nil
	})
	require.NoError(t, err)
}

// A range read in flight under a latency model adds the read conflict range
// its result depended on as the transaction's writes were when it was
// issued, as FoundationDB's does: addConflictRange walks the write map
// with the read's own WriteMap::iterator, made at the read's issue, which
// "represents a snapshot (will be unaffected by future writes)"
// (fdbclient/ReadYourWrites.actor.cpp, readWithConflictRangeRYW;
// fdbclient/include/fdbclient/WriteMap.h). A key the transaction writes or
// clears while the read is in flight was read from the database, so
// another transaction's write of it makes the commit conflict. Before, the
// conflict range left out the keys the transaction had written by the
// time the read was served, and such a commit went through although its
// read was overwritten.
func TestRangeReadInFlightConflictsOnKeysWrittenLater(t *testing.T) {
	const delay = 50 * time.Millisecond
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	for _, c := range []struct {
		name  string
		write func(tr kv.Transaction)
	}{
		{"Set", func(tr kv.Transaction) { tr.Set([]byte("q/b"), []byte("mine")) }},
		{"Clear", func(tr kv.Transaction) { tr.Clear([]byte("q/b")) }},
		{"ClearRange", func(tr kv.Transaction) { tr.ClearRange(r) }},
		{"Add", func(tr kv.Transaction) { tr.Set([]byte("q/b"), []byte{0}); tr.Add([]byte("q/b"), []byte{1}) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, _ := newDB(t, memdb.WithLatency(memdb.Latency{Read: memdb.Span{Min: delay, Max: delay}}))
			mustSet(t, db, "q/a", "1")
			mustSet(t, db, "q/b", "2")
			reader := newTx(t, db)
			_, err := reader.GetReadVersion().Get()
			require.NoError(t, err)
			inFlight := reader.GetRange(r, kv.RangeOptions{})
			c.write(reader)
			kvs, err := inFlight.GetSlice()
			require.NoError(t, err)
			require.Equal(t, []string{"q/a", "q/b"}, keys(kvs), "the database's keys, read as the writes were at the issue")
			reader.Set([]byte("out"), kvs[1].Value) // acts on what it read of q/b
			mustSet(t, db, "q/b", "3")              // after the reader's read version
			require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "q/b, read from the database, changed since")
		})
	}
}
