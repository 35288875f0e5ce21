package memdb_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

var benchOpts []memdb.Option

var cpuAtStart time.Duration

// resetTimer resets b's timer and the CPU time baseline.
func resetTimer(b *testing.B) {
	cpuAtStart, _ = processCPU()
	b.ResetTimer()
}

// reportOps reports operations per second of wall time and, where the
// platform tells, CPU time per operation (which a busy machine inflates
// less than wall time).
func reportOps(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
	}
	if cpu, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64((cpu-cpuAtStart).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkPointRead measures one Get in a long-lived transaction.
func BenchmarkPointRead(b *testing.B) {
	db := memdb.New()
	defer db.Close()
	ctx := context.Background()
	for i := range 1000 {
		_ = db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(fmt.Appendf(nil, "key%04d", i), []byte("value"))
			return nil
		})
	}
	key := []byte("key0500")
	tr, _ := db.CreateTransaction(ctx)
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		if i%100_000 == 0 {
			tr.Reset() // stay within the MVCC window
		}
		if _, err := tr.Snapshot().Get(key).Get(); err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b)
}

// BenchmarkTransactReadWrite measures uncontended transactions that read
// one key and write another through db.Transact.
func BenchmarkTransactReadWrite(b *testing.B) { runFloor(b, []byte("value"), false) }

// runFloor runs b.N transactions that each read one of 1,024 keys and
// write value to it (stored first if preset): the engine's floor.
func runFloor(b *testing.B, value []byte, preset bool) {
	db := memdb.New(benchOpts...)
	defer db.Close()
	ctx := context.Background()
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key%04d", i)
		if preset {
			mustSetB(b, db, keys[i])
		}
	}
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		k := keys[i%len(keys)]
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			if _, err := tr.Get(k).Get(); err != nil {
				return err
			}
			tr.Set(k, value)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b)
}

// hotKeyIncrement is a read-modify-write of one key. The Gosched between
// read and write stands for the network round trip of a real client, so
// that goroutines interleave (and conflict) even with GOMAXPROCS=1.
func hotKeyIncrement(tr kv.Transaction) error {
	key := []byte("hot")
	v, err := tr.Get(key).Get()
	if err != nil {
		return err
	}
	runtime.Gosched()
	tr.Set(key, append(v, 'x')[:min(len(v)+1, 8)])
	return nil
}

// BenchmarkHotKeyConflicts measures read-modify-write transactions on one
// key from 8 goroutines per CPU: many attempts conflict and retry.
func BenchmarkHotKeyConflicts(b *testing.B) {
	db := memdb.New(memdb.WithBackoff(time.Microsecond, 100*time.Microsecond))
	defer db.Close()
	ctx := context.Background()
	b.SetParallelism(8)
	b.ReportAllocs()
	resetTimer(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := db.Transact(ctx, hotKeyIncrement); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b)
	b.ReportMetric(float64(db.Stats().Conflicts)/float64(b.N), "conflicts/op")
}

// BenchmarkHotKeyRealCluster is BenchmarkHotKeyConflicts with RealCluster
// latencies: one key then commits about once per commit latency.
func BenchmarkHotKeyRealCluster(b *testing.B) {
	db := memdb.New(memdb.WithLatency(memdb.RealCluster), memdb.WithBackoff(time.Millisecond, 20*time.Millisecond))
	defer db.Close()
	ctx := context.Background()
	b.SetParallelism(8)
	resetTimer(b)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := db.Transact(ctx, hotKeyIncrement); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportOps(b)
	b.ReportMetric(float64(db.Stats().Conflicts)/float64(b.N), "conflicts/op")
}

// clearedHead returns a DB holding a queue-shaped range q/: its first
// cleared keys were set and then cleared within the MVCC window (an hour
// here, so that the tombstones stay), followed by live live keys.
func clearedHead(b *testing.B, cleared, live int) *memdb.DB {
	db := memdb.New(memdb.WithMVCCWindow(time.Hour))
	ctx := context.Background()
	key := func(i int) []byte { return fmt.Appendf(nil, "q/%08d", i) }
	for lo := 0; lo < cleared+live; lo += 1000 {
		if err := db.Transact(ctx, func(tr kv.Transaction) error {
			for i := lo; i < min(lo+1000, cleared+live); i++ {
				tr.Set(key(i), []byte("value"))
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	for lo := 0; lo < cleared; lo += 1000 {
		if err := db.Transact(ctx, func(tr kv.Transaction) error {
			for i := lo; i < min(lo+1000, cleared); i++ {
				tr.Clear(key(i))
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	return db
}

// BenchmarkRangeReadAfterClears reads the first key of a range whose first
// 10,000 keys were cleared within the MVCC window, as a queue consumer
// reads its head: at a fresh read version (rv=latest), and at one followed
// by 1,000 commits elsewhere that set a key (sets-after-rv) or clear one
// (clears-after-rv).
func BenchmarkRangeReadAfterClears(b *testing.B) {
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	opts := kv.RangeOptions{Limit: 1}
	b.Run("rv=latest", func(b *testing.B) {
		db := clearedHead(b, 10_000, 100)
		defer db.Close()
		tr, _ := db.CreateTransaction(context.Background())
		b.ReportAllocs()
		resetTimer(b)
		for i := 0; i < b.N; i++ {
			tr.Reset()
			kvs, err := tr.Snapshot().GetRange(r, opts).GetSlice()
			if err != nil || len(kvs) != 1 {
				b.Fatal(kvs, err)
			}
		}
		reportOps(b)
	})
	for _, clear := range []bool{false, true} {
		name := "sets-after-rv=1000"
		if clear {
			name = "clears-after-rv=1000"
		}
		b.Run(name, func(b *testing.B) {
			db := clearedHead(b, 10_000, 100)
			defer db.Close()
			ctx := context.Background()
			other := func(i int) []byte { return fmt.Appendf(nil, "other/%04d", i) }
			if clear {
				for i := range 1000 {
					mustSetB(b, db, other(i))
				}
			}
			tr, _ := db.CreateTransaction(ctx)
			if _, err := tr.GetReadVersion().Get(); err != nil {
				b.Fatal(err)
			}
			for i := range 1000 {
				if err := db.Transact(ctx, func(tr kv.Transaction) error {
					if clear {
						tr.Clear(other(i))
					} else {
						tr.Set(other(i), []byte("value"))
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			resetTimer(b)
			for i := 0; i < b.N; i++ {
				kvs, err := tr.Snapshot().GetRange(r, opts).GetSlice()
				if err != nil || len(kvs) != 1 {
					b.Fatal(kvs, err)
				}
			}
			reportOps(b)
		})
	}
}

// BenchmarkRangeConflictAfterClears commits transactions that read the
// first key of a range whose first 10,000 keys were cleared within the
// MVCC window, after another commit (elsewhere) since their read version,
// so that the commit checks the range read for conflicts.
func BenchmarkRangeConflictAfterClears(b *testing.B) {
	db := clearedHead(b, 10_000, 100)
	defer db.Close()
	ctx := context.Background()
	r := kv.KeyRange{Begin: []byte("q/"), End: []byte("q0")}
	other := []byte("other")
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		tr, _ := db.CreateTransaction(ctx)
		kvs, err := tr.GetRange(r, kv.RangeOptions{Limit: 1}).GetSlice()
		if err != nil || len(kvs) != 1 {
			b.Fatal(kvs, err)
		}
		mustSetB(b, db, other)
		tr.Set([]byte("mine"), []byte("x"))
		if err := tr.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b)
}

// mustSetB commits key=value in its own transaction.
func mustSetB(b *testing.B, db *memdb.DB, key []byte) {
	if err := db.Transact(context.Background(), func(tr kv.Transaction) error {
		tr.Set(key, []byte("value"))
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkQueueChurn measures uncontended queue-shaped transactions: each
// clears the head key and appends a new tail key, so keys keep being
// created and cleared while the key count stays at 1,000.
func BenchmarkQueueChurn(b *testing.B) {
	db := memdb.New(benchOpts...)
	defer db.Close()
	ctx := context.Background()
	key := func(i int) []byte { return fmt.Appendf(nil, "q/%012d", i) }
	for i := range 1000 {
		mustSetB(b, db, key(i))
	}
	value := []byte("value")
	b.ReportAllocs()
	resetTimer(b)
	for i := 0; i < b.N; i++ {
		head, tail := key(i), key(i+1000)
		err := db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Clear(head)
			tr.Set(tail, value)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	reportOps(b)
}

// BenchmarkQueueShape measures, without the layer, the engine's part of a
// queue operation against the floor (one Get and one Set of an existing
// key, as BenchmarkWorkload's floor-1r1w in the root package). Each
// iteration runs the transactions of a Queue's Enqueue and Dequeue without
// the journal, as the layer issues them once its configuration record is
// cached (config.go issueReads, ends.go takeEnd): an enqueue-shaped
// transaction (a read of the metadata version key, a snapshot reverse
// range read of the tail with limit 1, a Set of a new key and an atomic
// add to a depth counter) and then a dequeue-shaped one (the metadata
// version read, a range read of the head with limit 1, a Clear of the key
// found and the add). cpu-ns/op is per transaction, as the root
// benchmark's is per layer operation: the ratio of queue-pair to
// floor-1r1w is what the engine alone leaves of the layer's budget.
func BenchmarkQueueShape(b *testing.B) {
	one := []byte{1, 0, 0, 0, 0, 0, 0, 0}
	value := []byte("a small work item, 32 bytes long")
	b.Run("floor-1r1w", func(b *testing.B) { runFloor(b, value, true) })
	b.Run("queue-pair", func(b *testing.B) {
		db := memdb.New(benchOpts...)
		defer db.Close()
		ctx := context.Background()
		// The keys are laid out as the layer lays out a queue's: the items
		// in [prefix+0x00, prefix+0xff), its record and depth counter
		// after them (prefix+0xff...). The order matters: the
		// tail's reverse read then ends before the tree's last key (the
		// counter), not at it, and the head's read starts at the tree's
		// first key.
		conf, depth := []byte("q\xffconf"), []byte("q\xffdepth")
		mv := []byte(kv.MetadataVersionKey)
		items := kv.KeyRange{Begin: []byte("q\x00"), End: []byte("q\xff")}
		// Item keys are "q\x00" and a big-endian counter, new for each
		// item, packed into one reused buffer as the layer packs them (Set
		// keeps neither slice: kv.Transaction).
		buf := make([]byte, 0, 10)
		key := func(n uint64) []byte {
			buf = binary.BigEndian.AppendUint64(append(buf[:0], "q\x00"...), n)
			return buf
		}
		if err := db.Transact(ctx, func(tr kv.Transaction) error {
			tr.Set(conf, []byte("a configuration record of 40 bytes......"))
			for n := range uint64(1000) {
				tr.Set(key(n), value)
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		n := uint64(1000)
		b.ReportAllocs()
		resetTimer(b)
		for i := 0; i < b.N; i++ {
			k := key(n)
			err := db.Transact(ctx, func(tr kv.Transaction) error {
				if _, err := tr.Get(mv).Get(); err != nil {
					return err
				}
				kvs, err := tr.Snapshot().GetRange(items, kv.RangeOptions{Limit: 1, Reverse: true}).GetSlice()
				if err != nil || len(kvs) == 0 {
					return fmt.Errorf("no tail: %v", err)
				}
				tr.Set(k, value)
				tr.Add(depth, one)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			n++
			err = db.Transact(ctx, func(tr kv.Transaction) error {
				if _, err := tr.Get(mv).Get(); err != nil {
					return err
				}
				kvs, err := tr.GetRange(items, kv.RangeOptions{Limit: 1, Mode: kv.StreamingModeWantAll}).GetSlice()
				if err != nil || len(kvs) == 0 {
					return fmt.Errorf("no head: %v", err)
				}
				tr.Clear(kvs[0].Key)
				tr.Add(depth, one)
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.N *= 2 // two transactions an iteration
		reportOps(b)
	})
}
