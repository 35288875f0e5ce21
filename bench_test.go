package fdbqueue_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/kv"
	"github.com/fdbqueue/fdbqueue/memdb"
)

// BenchmarkWorkload measures, in one run, the layer's operations on the
// embedded engine against the engine's floor, a transaction that reads
// one key and writes one (see scripts/benchtable.sh, run by `make bench`,
// which prints each one's ratio to the floor). Each sub-benchmark reports
// cpu-ns/op: process CPU time per layer operation (an Enqueue+Dequeue or
// Push+PopMin pair counts as two), which a busy machine inflates less
// than wall time; run it with -cpu 1 for one core. allocs/op is per
// iteration (per pair).
//
// The queues keep a backlog of 1,000 items, so a Dequeue reads the head
// past the tombstones of the items taken within the MVCC window, as a
// queue in use does.
func BenchmarkWorkload(b *testing.B) {
	b.Run("floor-1r1w", func(b *testing.B) {
		db := memdb.New()
		defer db.Close()
		ctx := context.Background()
		keys := make([][]byte, 1024)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "key%04d", i)
		}
		value := []byte("value")
		runOps(b, 1, func(i int) error {
			k := keys[i%len(keys)]
			return db.Transact(ctx, func(tr kv.Transaction) error {
				if _, err := tr.Get(k).Get(); err != nil {
					return err
				}
				tr.Set(k, value)
				return nil
			})
		})
	})
	layouts := []struct {
		name string
		opts []fdbqueue.Option
	}{
		{"indexed", nil},
		{"versionstamp", []fdbqueue.Option{fdbqueue.WithVersionstampOrder()}},
	}
	journals := []struct {
		name string
		opts []fdbqueue.Option
	}{
		{"journal", nil},
		{"nojournal", []fdbqueue.Option{fdbqueue.WithoutIdempotency()}},
	}
	for _, j := range journals {
		for _, l := range layouts {
			b.Run("queue-"+j.name+"-"+l.name, func(b *testing.B) {
				db := memdb.New()
				defer db.Close()
				ctx := context.Background()
				opts := append(append([]fdbqueue.Option(nil), j.opts...), l.opts...)
				q, err := fdbqueue.NewQueue(mustSubspace(b, "bench", "q"), opts...)
				if err != nil {
					b.Fatal(err)
				}
				value := []byte("a small work item, 32 bytes long")
				for range 1000 {
					if err := q.Enqueue(ctx, db, value); err != nil {
						b.Fatal(err)
					}
				}
				runOps(b, 2, func(int) error {
					if err := q.Enqueue(ctx, db, value); err != nil {
						return err
					}
					_, err := q.Dequeue(ctx, db)
					return err
				})
			})
		}
	}
	for _, j := range journals {
		b.Run("pq-"+j.name, func(b *testing.B) {
			db := memdb.New()
			defer db.Close()
			ctx := context.Background()
			pq, err := fdbqueue.NewPriorityQueue(mustSubspace(b, "bench", "pq"), j.opts...)
			if err != nil {
				b.Fatal(err)
			}
			value := []byte("a small work item, 32 bytes long")
			for i := range 1000 {
				if err := pq.Push(ctx, db, value, int64(i%10)); err != nil {
					b.Fatal(err)
				}
			}
			runOps(b, 2, func(i int) error {
				if err := pq.Push(ctx, db, value, int64(i%10)); err != nil {
					return err
				}
				_, err := pq.PopMin(ctx, db)
				return err
			})
		})
	}
}

// runOps runs f b.N times and reports CPU time per layer operation (f
// does perIter of them) and operations per second of wall time. With
// BENCH_YIELD=n (n > 0) it yields to the scheduler before every n-th
// iteration (see benchYield).
func runOps(b *testing.B, perIter int, f func(i int) error) {
	yield := benchYield(b)
	b.ReportAllocs()
	start, _ := processCPU()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if yield > 0 && i%yield == 0 {
			runtime.Gosched()
		}
		if err := f(i); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ops := float64(b.N * perIter)
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(ops/s, "ops/s")
	}
	if cpu, ok := processCPU(); ok && b.N > 0 {
		b.ReportMetric(float64((cpu-start).Nanoseconds())/ops, "cpu-ns/op")
	}
}

// benchYield returns the BENCH_YIELD environment variable's number, 0 if
// it is unset. On one P (-cpu 1), a loop that never blocks gives the
// runtime's scheduler no turn, so the collector's background mark worker
// never runs: allocation assists do all the marking, paced by the bytes
// allocated, and each mark phase (with its write barriers on) lasts about
// half of the cycle. A program that waits for I/O, as every user of a
// database does, lets the worker finish the marking in one go. Yielding
// every n iterations measures that case; `make bench BENCH_YIELD=8`.
func benchYield(b *testing.B) int {
	s := os.Getenv("BENCH_YIELD")
	if s == "" {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		b.Fatalf("BENCH_YIELD=%q: want a number of iterations, 0 or more", s)
	}
	return n
}
