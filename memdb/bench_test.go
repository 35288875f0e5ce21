package memdb_test

import (
	"context"
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
func BenchmarkTransactReadWrite(b *testing.B) {
	db := memdb.New(benchOpts...)
	defer db.Close()
	ctx := context.Background()
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "key%04d", i)
	}
	value := []byte("value")
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
