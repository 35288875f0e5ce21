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
// made meanwhile are not in its result, as on FoundationDB (see
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
		inFlight := tr.GetRange(r, kv.RangeOptions{})
		tr.Set([]byte("q/c"), []byte("3"))
		tr.Clear([]byte("q/a"))
		tr.Add([]byte("q/b"), []byte{1})
		tr.Set([]byte("q/0"), []byte("changed"))
		kvs, err := inFlight.GetSlice()
		if err != nil {
			return err
		}
		require.Equal(t, []string{"q/0=mine", "q/a=1", "q/b=2"}, names(kvs), "the writes as they were at the read's issue")
		after, err := tr.GetRange(r, kv.RangeOptions{}).GetSlice()
		if err != nil {
			return err
		}
		require.Equal(t, []string{"q/0=changed", "q/b=3", "q/c=3"}, names(after), "a read issued after the writes sees them")
		return nil
	})
	require.NoError(t, err)
}
