package memdb_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

var benchOpts []memdb.Option

// reportOps reports operations per second.
func reportOps(b *testing.B) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(b.N)/s, "ops/s")
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
	b.ResetTimer()
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
	b.ResetTimer()
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

// BenchmarkHotKeyConflicts measures read-modify-write transactions on one
// key from parallel goroutines: most attempts conflict and retry.
func BenchmarkHotKeyConflicts(b *testing.B) {
	db := memdb.New(memdb.WithBackoff(time.Microsecond, 100*time.Microsecond))
	defer db.Close()
	ctx := context.Background()
	key := []byte("hot")
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			err := db.Transact(ctx, func(tr kv.Transaction) error {
				v, err := tr.Get(key).Get()
				if err != nil {
					return err
				}
				tr.Set(key, append(v, 'x')[:min(len(v)+1, 8)])
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	reportOps(b)
	st := db.Stats()
	b.ReportMetric(float64(st.Conflicts)/float64(b.N), "conflicts/op")
}
