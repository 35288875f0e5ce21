package memdb

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkResolverConflicts measures the resolver's check of a point read
// conflict range that lands among n recorded point writes (2n boundary
// points, all written after the read version), at positions that change
// from one check to the next: unlike conflict-missing in
// BenchmarkClearsAfterReadVersion, whose read lies outside the cleared
// keys, every check searches the points. wide checks one range over all
// the points, written before the read version.
func BenchmarkResolverConflicts(b *testing.B) {
	for _, n := range []int{10, 1_000, 100_000} {
		res := newResolver()
		for i := range n {
			k := fmt.Appendf(nil, "k/%08d", i)
			res.write(k, append(k, 0), int64(10+i))
		}
		r := rand.New(rand.NewPCG(1, 2))
		var qs [][2][]byte
		for range 1024 {
			// Between k/i+\x00 (version 0) and k/i+1.
			k := fmt.Appendf(nil, "k/%08d\x01", r.IntN(n))
			qs = append(qs, [2][]byte{k, append(k, 0)})
		}
		b.Run(fmt.Sprintf("points=%d", 2*n), func(b *testing.B) {
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; i < b.N; i++ {
				q := qs[i%len(qs)]
				if res.conflicts(q[0], q[1], 5) {
					b.Fatal("conflict")
				}
			}
		})
		b.Run(fmt.Sprintf("wide/points=%d", 2*n), func(b *testing.B) {
			// A range over every point, all written at or before the read
			// version; a later write elsewhere (after the point checks,
			// which it would slow: see keyArr) keeps the check from
			// stopping at maxV.
			res.write([]byte("z"), []byte("z\x00"), int64(20+n))
			rv := int64(10 + n)
			b.ReportAllocs()
			defer reportCPU(b)()
			for i := 0; i < b.N; i++ {
				if res.conflicts([]byte("k/"), []byte("k0"), rv) {
					b.Fatal("conflict")
				}
			}
		})
	}
}

// BenchmarkResolverWrite measures recording a point write (a clear of a
// missing key) among 200,000 boundary points: at the end of the key space,
// as a queue's head moves, and at random positions.
func BenchmarkResolverWrite(b *testing.B) {
	const n = 100_000
	for _, name := range []string{"append", "random"} {
		b.Run(name, func(b *testing.B) {
			res := newResolver()
			for i := range n {
				k := fmt.Appendf(nil, "k/%08d", 2*i)
				res.write(k, append(k, 0), int64(1+i))
			}
			r := rand.New(rand.NewPCG(1, 2))
			keys := make([][]byte, b.N)
			for i := range keys {
				j := 2*n + 2*i
				if name == "random" {
					j = 2*r.IntN(n) + 1
				}
				keys[i] = fmt.Appendf(nil, "k/%08d", j)
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for i, k := range keys {
				res.write(k, append(k, 0), int64(n+1+i))
			}
		})
	}
}
