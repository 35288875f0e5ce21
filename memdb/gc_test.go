package memdb_test

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestMemoryStaysFlat runs a queue-shaped workload — every transaction
// reads the head, clears it and appends a new tail key, so the key count is
// steady while keys churn — and checks that old versions, tombstones and
// conflict history are collected. It runs 100,000 transactions, or
// 1,000,000 with MEMDB_LONG=1.
func TestMemoryStaysFlat(t *testing.T) {
	total := 100_000
	if os.Getenv("MEMDB_LONG") != "" {
		total = 1_000_000
	}
	const (
		live     = 1000                   // steady number of keys
		step     = 10 * time.Microsecond  // clock time per transaction
		window   = 50 * time.Millisecond  // MVCC window: 5,000 transactions
		interval = 10_000                 // transactions between samples
		inWindow = int(window / step)     // transactions the GC must keep
		value    = "0123456789abcdef0123" // 20 bytes
	)
	db, clk := newDB(t, memdb.WithMVCCWindow(window))
	key := func(i int) []byte { return binary.BigEndian.AppendUint64([]byte("q/"), uint64(i)) }
	ctx := t.Context()
	require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
		for i := range live {
			tr.Set(key(i), []byte(value))
		}
		return nil
	}))
	var base uint64
	for i := 0; i < total; i++ {
		head := i
		require.NoError(t, db.Transact(ctx, func(tr kv.Transaction) error {
			if _, err := tr.Get(key(head)).Get(); err != nil {
				return err
			}
			tr.Clear(key(head))
			tr.Set(key(head+live), []byte(value))
			return nil
		}))
		clk.Advance(step)
		if (i+1)%interval != 0 {
			continue
		}
		st := db.Stats()
		require.Equal(t, int64(live), st.Keys, "the workload keeps the key count steady")
		// Each transaction writes two keys; the GC keeps what readers within
		// the window may need, plus what it has not reached yet.
		require.LessOrEqual(t, st.Versions, int64(live+4*inWindow+2*interval/10), "old versions are collected (at %d)", i+1)
		require.LessOrEqual(t, st.ConflictHistory, int64(2*(8*inWindow)+1024), "conflict history is collected (at %d)", i+1)
		require.LessOrEqual(t, st.GCQueue, int64(live+4*inWindow), "the GC queue is bounded (at %d)", i+1)
		heap := heapInUse()
		t.Logf("after %7d transactions: heap %6.2f MiB, versions %6d, conflict points %6d, gc queue %6d",
			i+1, float64(heap)/(1<<20), st.Versions, st.ConflictHistory, st.GCQueue)
		if i+1 == 2*interval {
			base = heap
		} else if base > 0 {
			require.LessOrEqual(t, heap, base+base/2+4<<20, "the heap must not grow with the number of transactions")
		}
	}
}

// TestGCRemovesClearedKeys checks that a cleared key's tombstone goes away
// once no reader can need it, and that readers inside the window still see
// the old value.
func TestGCRemovesClearedKeys(t *testing.T) {
	db, clk := newDB(t, memdb.WithMVCCWindow(time.Second))
	mustSet(t, db, "k", "v")
	old := newTx(t, db)
	require.Equal(t, "v", string(get(t, old, "k")))
	require.NoError(t, db.Transact(t.Context(), func(tr kv.Transaction) error {
		tr.Clear([]byte("k"))
		return nil
	}))
	mustSet(t, db, "other", "x")
	require.Equal(t, "v", string(get(t, old, "k")), "a reader within the window keeps its snapshot")
	require.Equal(t, int64(3), db.Stats().Versions, "value, tombstone and other's value")
	clk.Advance(2 * time.Second)
	mustSet(t, db, "other", "y") // a commit drives collection
	st := db.Stats()
	// old is out of the window, so no reader needs other's x any more.
	require.Equal(t, int64(1), st.Versions, "k's versions are gone; other keeps only the one just written")
	require.Equal(t, int64(1), st.Keys)
	_, err := old.Get([]byte("k")).Get()
	require.ErrorIs(t, err, kv.ErrTransactionTooOld)
}

// TestGCFollowsOldestReader: the horizon is the oldest read version of a
// transaction that may still read or commit, not the whole MVCC window
// behind: with no such transaction a cleared key is collected at once;
// an open reader keeps its snapshot until it commits or is reset.
func TestGCFollowsOldestReader(t *testing.T) {
	db, _ := newDB(t)
	mustSet(t, db, "k", "v")
	mustSet(t, db, "k", "w")
	require.Equal(t, int64(1), db.Stats().Versions, "no reader needs v")

	reader := newTx(t, db)
	require.Equal(t, "w", string(get(t, reader, "k")))
	require.NoError(t, db.Transact(t.Context(), clearTx("k")))
	mustSet(t, db, "other", "x")
	require.Equal(t, int64(3), db.Stats().Versions, "the reader keeps k's w and tombstone (and other has x)")
	require.Equal(t, "w", string(get(t, reader, "k")), "and its snapshot")

	reader.Set([]byte("unrelated"), []byte("x"))
	require.ErrorIs(t, reader.Commit(), kv.ErrNotCommitted, "k was cleared after the read")
	mustSet(t, db, "other", "y")
	require.Equal(t, int64(4), db.Stats().Versions, "a failed commit's transaction may read again: k and other's x still kept")

	reader.Reset()
	mustSet(t, db, "other", "z")
	st := db.Stats()
	require.Equal(t, int64(1), st.Keys)
	require.Equal(t, int64(1), st.Versions, "k is collected once the reader is reset")

	// A committed transaction releases its read version too.
	rw := newTx(t, db)
	require.Equal(t, "z", string(get(t, rw, "other")))
	rw.Set([]byte("other"), []byte("zz"))
	require.NoError(t, rw.Commit())
	mustSet(t, db, "k2", "x")
	require.Equal(t, int64(2), db.Stats().Versions, "other's z is not kept for the committed reader")
}

// TestEagerGCKeepsConcurrentSnapshots: with the horizon following the
// oldest registered read version, readers that obtain their read version
// while commits collect old versions still see one snapshot throughout.
func TestEagerGCKeepsConcurrentSnapshots(t *testing.T) {
	db := memdb.New()
	t.Cleanup(func() { _ = db.Close() })
	ctx := t.Context()
	mustSet(t, db, "k", "0")
	stop := make(chan struct{})
	var writers sync.WaitGroup
	for w := range 2 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = db.Transact(ctx, func(tr kv.Transaction) error {
					tr.Set([]byte("k"), []byte(fmt.Sprint(w, i)))
					tr.Clear([]byte(fmt.Sprint("tmp", w, i-1)))
					tr.Set([]byte(fmt.Sprint("tmp", w, i)), []byte("x"))
					return nil
				})
			}
		}()
	}
	var readers sync.WaitGroup
	for range 4 {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for range 300 {
				tr := newTx(t, db)
				a, err := tr.Get([]byte("k")).Get()
				if !assert.NoError(t, err) {
					return
				}
				runtime.Gosched()
				b, err := tr.Get([]byte("k")).Get()
				if !assert.NoError(t, err) || !assert.Equal(t, string(a), string(b), "one snapshot") {
					return
				}
				tr.Cancel()
				tr.Reset()
			}
		}()
	}
	readers.Wait()
	close(stop)
	writers.Wait()
}
