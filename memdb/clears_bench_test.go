package memdb

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
)

// BenchmarkClearsAfterReadVersion shows that a range read and a range
// conflict check at a read version cost the same however many clears
// were committed elsewhere after it (10, 1,000, 100,000): the queue range
// q/ has 10,000 cleared keys at its head (tombstones within the MVCC
// window) and 100 live ones; after the read version, other keys are
// cleared. read is a snapshot range read of q/ with limit 1 at that read
// version; conflict is the commit's check of the read conflict range of
// the head item against the writes after it (the resolver's and the
// store's, as commitStep runs it). conflict-missing is conflict where the
// keys cleared after the read version were never set, so the resolver
// records the clears instead of the store.
//
// Each runs on two databases. In the first, the other keys are just the
// n cleared after the read version, so the database grows with n. In the
// second (keys=100000) they are 100,000 in every case: the n, and the
// rest cleared before the read version, all kept as tombstones by an
// older reader. There the number of clears after the read version is all
// that changes; the first also measures a larger heap, whose marking by
// the garbage collector every allocation of the process pays for (the
// read allocates its result).
func BenchmarkClearsAfterReadVersion(b *testing.B) {
	const size = 100_000
	for _, fixed := range []bool{false, true} {
		for _, n := range []int{10, 1_000, size} {
			name := fmt.Sprintf("clears=%d", n)
			if fixed {
				name += fmt.Sprintf("/keys=%d", size)
			}
			pad := func(missing bool) int {
				switch {
				case !fixed:
					return 0
				case missing:
					return size
				}
				return size - n
			}
			db, tr, rv := clearsAfterRV(b, n, false, pad(false))
			r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
			head := fmt.Appendf(nil, "q/%08d", 10_000)
			b.Run("read/"+name, func(b *testing.B) {
				b.ReportAllocs()
				defer reportCPU(b)()
				for i := 0; i < b.N; i++ {
					kvs, err := tr.Snapshot().GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
					if err != nil || len(kvs) != 1 || string(kvs[0].Key) != string(head) {
						b.Fatal(kvs, err)
					}
				}
			})
			b.Run("conflict/"+name, func(b *testing.B) { benchConflictCheck(b, db, r.Begin, head, rv) })
			tr.Cancel()
			db.Close()
			db, tr, rv = clearsAfterRV(b, n, true, pad(true))
			b.Run("conflict-missing/"+name, func(b *testing.B) { benchConflictCheck(b, db, r.Begin, head, rv) })
			tr.Cancel()
			db.Close()
		}
	}
}

// benchConflictCheck times the commit's check of the read conflict range
// [begin, head+0x00) at read version rv against the writes after it (the
// resolver's and the store's); it serves both conflict benchmarks.
func benchConflictCheck(b *testing.B, db *DB, begin, head []byte, rv int64) {
	e := append(head[:len(head):len(head)], 0)
	b.ReportAllocs()
	defer reportCPU(b)()
	for i := 0; i < b.N; i++ {
		db.mu.Lock()
		hit := db.res.conflicts(begin, e, rv) || db.st.writtenAfter(begin, e, rv)
		db.mu.Unlock()
		if hit {
			b.Fatal("conflict")
		}
	}
}

// clearsAfterRV returns a DB with the queue-shaped range q/ (see
// BenchmarkClearsAfterReadVersion) and a transaction whose read version
// is followed by n clears of other keys, in commits of up to 1,000: keys
// set before the read version, or if missing, keys never set. Before
// all that, pad more keys are set and cleared, and a transaction opened
// between the two keeps every tombstone from collection (Close ends it).
func clearsAfterRV(b *testing.B, n int, missing bool, pad int) (*DB, kv.Transaction, int64) {
	db := New(WithMVCCWindow(time.Hour))
	ctx := context.Background()
	batch := func(lo, hi int, f func(tr kv.Transaction, i int)) {
		for ; lo < hi; lo += 1000 {
			if err := db.Transact(ctx, func(tr kv.Transaction) error {
				for i := lo; i < min(lo+1000, hi); i++ {
					f(tr, i)
				}
				return nil
			}); err != nil {
				b.Fatal(err)
			}
		}
	}
	readAt := func() (kv.Transaction, int64) {
		t, err := db.CreateTransaction(ctx)
		if err != nil {
			b.Fatal(err)
		}
		rv, err := t.GetReadVersion().Get()
		if err != nil {
			b.Fatal(err)
		}
		return t, rv
	}
	q := func(i int) []byte { return fmt.Appendf(nil, "q/%08d", i) }
	other := func(i int) []byte { return fmt.Appendf(nil, "other/%08d", i) }
	padKey := func(i int) []byte { return fmt.Appendf(nil, "pad/%08d", i) }
	batch(0, pad, func(tr kv.Transaction, i int) { tr.Set(padKey(i), []byte("value")) })
	readAt() // the oldest reader: the horizon stays before every clear below
	batch(0, pad, func(tr kv.Transaction, i int) { tr.Clear(padKey(i)) })
	batch(0, 10_100, func(tr kv.Transaction, i int) { tr.Set(q(i), []byte("value")) })
	batch(0, 10_000, func(tr kv.Transaction, i int) { tr.Clear(q(i)) })
	if !missing {
		batch(0, n, func(tr kv.Transaction, i int) { tr.Set(other(i), []byte("value")) })
	}
	t, rv := readAt()
	batch(0, n, func(tr kv.Transaction, i int) { tr.Clear(other(i)) })
	return db, t, rv
}

// reportCPU starts b's timer and CPU time count; the function it returns
// reports CPU time per operation, which a busy machine inflates less than
// wall time.
func reportCPU(b *testing.B) func() {
	start, _ := cpuTime()
	b.ResetTimer()
	return func() {
		if cpu, ok := cpuTime(); ok && b.N > 0 {
			b.ReportMetric(float64((cpu-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		}
	}
}
